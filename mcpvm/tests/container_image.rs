//! The container image (deploy/image/build: buildah from scratch, an OCI
//! archive, no registry) runs under podman: mcpvm answers, reads the
//! image store it carries, and reaches /dev/kvm through `--device`.
//!
//! Booting the fixture in it needs a /dev/kvm that runs Linux: where the
//! host's is kvm_pvm (these machines), the testbed would have to host
//! podman, and its nested host has none; there the test checks instead
//! that the device reaches the container and that mcpvm in it reads it
//! (its kvm_pvm refusal), and says so.
//!
//! Podman's flags are this machine's: `--runtime runc` (crun refuses a
//! hybrid cgroup hierarchy), `--ulimit` no higher than the host's hard
//! limits (without CAP_SYS_RESOURCE they cannot be raised), and storage
//! of its own in a temporary directory, gone with the test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn need(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "{tool} is not installed: run scripts/setup --tests");
}

/// A store with the runtime image and the `time` server's layer alone,
/// linked from scripts/build's.
fn small_store(dir: &Path) {
    let built = repo().join("target/mcpvm/images");
    let index: serde_json::Value = serde_json::from_slice(
        &std::fs::read(built.join("index.json")).expect("scripts/build's store"),
    )
    .unwrap();
    let time = index["servers"]["time"].clone();
    assert!(time.is_object(), "no time server in {index}");
    let mut small = index.clone();
    small["servers"] = serde_json::json!({ "time": time });
    std::fs::create_dir_all(dir).unwrap();
    for name in [
        index["runtime"].as_str().unwrap(),
        time["layer"].as_str().unwrap(),
    ] {
        let (from, to) = (built.join(name), dir.join(name));
        std::fs::hard_link(&from, &to)
            .or_else(|_| std::fs::copy(&from, &to).map(|_| ()))
            .unwrap();
    }
    std::fs::write(dir.join("index.json"), small.to_string()).unwrap();
}

#[test]
fn the_container_image_runs_under_podman_with_its_store_and_kvm() {
    need("buildah");
    need("podman");
    need("runc");
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    small_store(&store);
    let archive = work.path().join("mcpvm.tar");
    let built = Command::new(repo().join("deploy/image/build"))
        .arg("--store")
        .arg(&store)
        .arg(&archive)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{said}");
    for inside in [
        "/opt/mcpvm/bin/mcpvm ",
        "/opt/mcpvm/bin/mcpvm-tools ",
        "/opt/mcpvm/kernel/vmlinux ",
        "/opt/mcpvm/images/index.json ",
    ] {
        assert!(said.contains(inside), "{inside} in the image: {said}");
    }

    let root = work.path().join("podman");
    let podman = |args: &[&str]| {
        let out = Command::new("podman")
            .arg("--root")
            .arg(root.join("root"))
            .arg("--runroot")
            .arg(root.join("run"))
            .args([
                "--storage-driver",
                "vfs",
                "--runtime",
                "runc",
                "run",
                "--rm",
            ])
            .args([
                "--ulimit",
                "nofile=4096:4096",
                "--ulimit",
                "nproc=4096:4096",
            ])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let image = format!("oci-archive:{}", archive.display());
    let (rc, out, err) = podman(&[&image, "--version"]);
    assert_eq!(rc, Some(0), "{err}");
    assert_eq!(out.trim(), format!("mcpvm {}", env!("CARGO_PKG_VERSION")));

    // The store it carries is mcpvm's default one in the container.
    let (rc, out, err) = podman(&[&image, "image", "list"]);
    assert_eq!(rc, Some(0), "{err}");
    let time = out
        .lines()
        .find(|l| l.starts_with("time "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(time.contains("built"), "{out}");

    let pvm = Path::new("/sys/module/kvm_pvm").exists();
    let (rc, out, err) = podman(&[
        "--device",
        "/dev/kvm",
        &image,
        "run",
        "--timeout",
        "120",
        "--server",
        "time",
    ]);
    if pvm {
        assert_eq!(rc, Some(1), "{out}{err}");
        assert!(
            err.contains("/dev/kvm on this host is backed by kvm_pvm"),
            "{err}"
        );
        eprintln!(
            "container_image: this host's /dev/kvm is kvm_pvm and the testbed's nested host has no podman, \
             so no VM booted in the container; checked instead: /dev/kvm reached it and mcpvm in it read it"
        );
    } else {
        // Real KVM: the server answers in its VM, in the container (stdin
        // closed at once: the run ends when the server exits).
        assert_eq!(rc, Some(0), "{out}{err}");
    }
}
