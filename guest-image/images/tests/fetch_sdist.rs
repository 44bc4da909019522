//! guest-image/runtimes/fetch-sdist against a PyPI of our own (a
//! loopback HTTP server with the JSON API's project page and the
//! files): a source distribution whose sha256 matches is written and its
//! build requirements read from its pyproject.toml; a file that differs
//! from PyPI's hash, and a build requirement that names a URL instead of
//! a release, are refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtimes/fetch-sdist")
}

/// NAME-1.0.tar.gz holding NAME-1.0/pyproject.toml with `pyproject`.
fn sdist(dir: &Path, name: &str, pyproject: &str) -> Vec<u8> {
    let top = dir.join(format!("src-{name}")).join(format!("{name}-1.0"));
    std::fs::create_dir_all(&top).unwrap();
    std::fs::write(top.join("pyproject.toml"), pyproject).unwrap();
    let out = dir.join(format!("{name}-1.0.tar.gz"));
    let ok = Command::new("tar")
        .arg("czf")
        .arg(&out)
        .arg("-C")
        .arg(top.parent().unwrap())
        .arg(format!("{name}-1.0"))
        .status()
        .unwrap();
    assert!(ok.success());
    std::fs::read(out).unwrap()
}

fn project(url: &str, name: &str, sha: &str) -> Vec<u8> {
    project_file(url, name, &format!("{name}-1.0.tar.gz"), sha)
}

fn project_file(url: &str, name: &str, filename: &str, sha: &str) -> Vec<u8> {
    serde_json::json!({"releases": {"1.0": [{
        "filename": filename,
        "packagetype": "sdist",
        "url": format!("{url}/files/{name}-1.0.tar.gz"),
        "digests": {"sha256": sha},
        "yanked": false
    }]}})
    .to_string()
    .into_bytes()
}

#[test]
fn an_sdist_is_fetched_checked_and_a_url_requirement_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = sdist(
        dir.path(),
        "good",
        "[build-system]\nrequires = [\"flit_core>=3.2,<4\"]\n",
    );
    let evil = sdist(
        dir.path(),
        "evil",
        "[build-system]\nrequires = [\"setuptools @ https://example.invalid/s.whl\"]\n",
    );
    let hex = |b: &[u8]| format!("{:x}", Sha256::digest(b));
    // The registry's own address is known once it listens: the pages
    // name it, so they are served by a second registry made with it.
    let files = common::registry(vec![
        ("/files/good-1.0.tar.gz".into(), good.clone()),
        ("/files/evil-1.0.tar.gz".into(), evil.clone()),
    ]);
    let api = common::registry(vec![
        ("/good/json".into(), project(&files, "good", &hex(&good))),
        ("/evil/json".into(), project(&files, "evil", &hex(&evil))),
        (
            "/newline/json".into(),
            project_file(
                &files,
                "good",
                "good-1.0.tar.gz\n--index-url http://127.0.0.1:9/x.tar.gz",
                &hex(&good),
            ),
        ),
        (
            "/changed/json".into(),
            project(&files, "good", &"0".repeat(64)),
        ),
    ]);
    let fetch = |name: &str| {
        let out = Command::new("python3")
            .arg(script())
            .args([name, "1.0"])
            .arg(dir.path().join("out"))
            .env("MCPVM_PYPI_JSON", &api)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, said, err) = fetch("good");
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert_eq!(v["file"], "good-1.0.tar.gz");
    assert_eq!(v["sha256"], hex(&good));
    assert_eq!(v["requires"], serde_json::json!(["flit_core>=3.2,<4"]));
    assert_eq!(
        std::fs::read(dir.path().join("out/good-1.0.tar.gz")).unwrap(),
        good
    );

    let (ok, _, err) = fetch("changed");
    assert!(!ok && err.contains("does not match PyPI's sha256"), "{err}");
    // A name that would be a second line of the lock, an option to pip.
    let (ok, _, err) = fetch("newline");
    assert!(!ok && err.contains("refusing the file name"), "{err}");
    let (ok, _, err) = fetch("evil");
    assert!(
        !ok && err.contains("is not a PyPI name and version range"),
        "{err}"
    );
    let (ok, _, err) = fetch("missing");
    assert!(
        !ok && err.contains("PyPI has no project 'missing'"),
        "{err}"
    );
}
