//! A crate's binaries as a server's layer (`runtime = "cargo"`, `mcpvm
//! run --package cargo:NAME@VERSION`).
//!
//! Building a crate runs its code (build scripts, procedural macros), so
//! the host only fetches and resolves: the published `.crate` checked
//! against the SHA-256 in crates.io's index (guest-image/runtimes/
//! fetch-crate), its `Cargo.lock` (the published one, or resolved when it
//! has none), and every dependency's source vendored by `cargo vendor`,
//! which checks each against the lock. The build itself runs in a microVM
//! ([`ScriptSandbox`]) with no network: the runtime image plus a tools
//! layer holding this host's Rust toolchain and Debian's gcc and C
//! library headers ([`tools_layer`]), the vendored tree as its workspace.
//! Binaries are linked statically (`+crt-static`): they need nothing of
//! the image. What comes back is the binaries cargo metadata named, made
//! executable here; the lock kept is the host's.

use std::path::{Path, PathBuf};

use crate::catalogue::Entry;
use crate::install::{Installed, Installer, Job};
use crate::key::toolchain_version;
use crate::process::{io_err, run, BuildError};
use crate::sandbox::ScriptJob;

/// Debian packages the build needs beside the runtime: a linker driver,
/// the linker, and the C library to link statically against.
const TOOLS_APT: &[&str] = &["gcc", "libc6-dev"];

/// Bump when the way the tools layer is made changes.
const TOOLS_RECIPE: &str = "tools-recipe-4";

/// Where the toolchain sits in the tools layer.
const RUST_DIR: &str = "opt/rust";

/// The target every binary is built for.
const TARGET: &str = "x86_64-unknown-linux-gnu";

fn failed(what: impl Into<String>, tail: impl Into<String>) -> BuildError {
    BuildError::Failed {
        what: what.into(),
        tail: tail.into(),
    }
}

/// The host's toolchain: its sysroot, which must hold rustc, cargo and
/// the compiler's libraries side by side (a rustup toolchain does).
fn sysroot() -> Result<PathBuf, BuildError> {
    let root = PathBuf::from(run(
        "rustc --print sysroot",
        crate::host_env::command("rustc").args(["--print", "sysroot"]),
    )?);
    for need in ["bin/rustc", "bin/cargo"] {
        if !root.join(need).is_file() {
            return Err(failed(
                "finding the Rust toolchain",
                format!(
                    "{} has no {need}: a crate is built with a rustup toolchain (rustup default stable)",
                    root.display()
                ),
            ));
        }
    }
    Ok(root)
}

/// The tools layer for `runtime` in `store` (made once per runtime and
/// toolchain): Debian's gcc and libc6-dev unpacked as `image build`
/// unpacks a server's `apt` packages, and the toolchain under /opt/rust.
pub fn tools_layer(
    store: &Path,
    runtime: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, BuildError> {
    let root = sysroot()?;
    let tools = crate::tools::Tools {
        family: "rust",
        what: "Rust toolchain, gcc, libc6-dev".into(),
        apt: TOOLS_APT.iter().map(|p| p.to_string()).collect(),
        inputs: vec![TOOLS_RECIPE.into(), toolchain_version()],
        dir: RUST_DIR,
        one_per_store: true,
    };
    crate::tools::layer(
        store,
        runtime,
        &tools,
        &|rust| copy_toolchain(&root, rust),
        progress,
    )
}

/// What rustc and cargo need to build for TARGET, from the host's
/// sysroot into `rust`: themselves, the compiler's shared libraries, the
/// target's std and the linker helpers; not docs, sources or other tools.
fn copy_toolchain(root: &Path, rust: &Path) -> Result<(), BuildError> {
    let host = format!("lib/rustlib/{TARGET}");
    std::fs::create_dir_all(rust.join(&host)).map_err(io_err(rust))?;
    std::fs::create_dir_all(rust.join("bin")).map_err(io_err(rust))?;
    let mut copy = crate::host_env::command("cp");
    copy.arg("-a")
        .arg(root.join("bin/rustc"))
        .arg(root.join("bin/cargo"))
        .arg(rust.join("bin"));
    run("copying rustc and cargo", &mut copy)?;
    for entry in std::fs::read_dir(root.join("lib")).map_err(io_err(root))? {
        let entry = entry.map_err(io_err(root))?;
        // librustc_driver-….so, libLLVM.so.<version>-rust-… and the like.
        let is_file = entry.file_type().is_ok_and(|t| !t.is_dir());
        if is_file && entry.file_name().to_string_lossy().contains(".so") {
            run(
                "copying the compiler's libraries",
                crate::host_env::command("cp")
                    .arg("-a")
                    .arg(entry.path())
                    .arg(rust.join("lib")),
            )?;
        }
    }
    for part in ["lib", "bin"] {
        let from = root.join(&host).join(part);
        if from.is_dir() {
            run(
                "copying the target's libraries",
                crate::host_env::command("cp")
                    .arg("-a")
                    .arg(&from)
                    .arg(rust.join(&host)),
            )?;
        }
    }
    Ok(())
}

/// Unpacks a `.crate` (a gzipped tar of `NAME-VERSION/…`) into `dir`:
/// regular files and directories only, none outside it; returns the
/// crate's directory.
fn unpack(krate: &Path, dir: &Path, e: &Entry) -> Result<PathBuf, BuildError> {
    let what = format!("unpacking {}", krate.display());
    let gunzip = crate::host_env::command("gzip")
        .arg("-dc")
        .arg(krate)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| BuildError::Spawn {
            what: "gzip".into(),
            source,
        })?;
    if !gunzip.status.success() {
        return Err(failed(&what, "it is not a gzipped .crate"));
    }
    let top = format!("{}-{}", e.package, e.version);
    let mut archive = tar::Archive::new(gunzip.stdout.as_slice());
    let entries = archive.entries().map_err(io_err(krate))?;
    for entry in entries {
        let mut entry = entry.map_err(io_err(krate))?;
        let kind = entry.header().entry_type();
        let path = entry.path().map_err(io_err(krate))?.into_owned();
        let inside = path.components().next().map(|c| c.as_os_str()) == Some(top.as_ref());
        if !inside || !(kind.is_file() || kind.is_dir()) {
            return Err(failed(
                &what,
                format!(
                    "'{}' is not a file or directory under {top}/: not a crate cargo packaged",
                    path.display()
                ),
            ));
        }
        if !entry.unpack_in(dir).map_err(io_err(dir))? {
            return Err(failed(
                &what,
                format!("'{}' leaves the crate", path.display()),
            ));
        }
    }
    let src = dir.join(&top);
    match src.join("Cargo.toml").is_file() {
        true => Ok(src),
        false => Err(failed(&what, format!("it has no {top}/Cargo.toml"))),
    }
}

/// The crate's binary targets, from its manifest (`cargo metadata
/// --no-deps` reads it and runs nothing).
fn binaries(cargo: &Path, src: &Path, env: &[(&str, &Path)]) -> Result<Vec<String>, BuildError> {
    let text = run(
        "cargo metadata",
        crate::host_env::command(cargo)
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .arg("--manifest-path")
            .arg(src.join("Cargo.toml"))
            .envs(env.iter().copied()),
    )?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| failed("cargo metadata", format!("unreadable output: {e}")))?;
    let mut bins: Vec<String> = v["packages"][0]["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"))
        })
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .filter(|n| {
            !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        })
        .collect();
    bins.sort();
    Ok(bins)
}

/// The guest's command: build every binary, offline and locked, from the
/// vendored sources; keep only the binaries.
fn build_line(bins: &[String]) -> String {
    let copies: String = bins
        .iter()
        .map(|b| format!(" && cp /tmp/target/{TARGET}/release/{b} /workspace/out/"))
        .collect();
    format!(
        "cd /workspace/src && export PATH=/{RUST_DIR}/bin:$PATH CARGO_HOME=/workspace/cargo-home HOME=/tmp \
         CC=gcc CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=gcc \
         CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS='-C target-feature=+crt-static' \
         && cargo build --release --frozen --bins --target {TARGET} --target-dir /tmp/target \
         && mkdir -p /workspace/out{copies} \
         && rm -rf /workspace/src /workspace/vendor /workspace/cargo-home"
    )
}

/// Rust servers: a crate's binaries.
pub struct Cargo;

impl Installer for Cargo {
    /// Builds the crate's binaries into `target/bin` and its lock into
    /// `target`.
    fn install(&self, job: &Job, progress: &mut dyn FnMut(&str)) -> Result<Installed, BuildError> {
        Ok(Installed {
            what: install(job, progress)?,
            bin_dir: job.target.join("bin"),
            record: None,
        })
    }
}

fn install(job: &Job, progress: &mut dyn FnMut(&str)) -> Result<String, BuildError> {
    let Job {
        name,
        entry: e,
        stage,
        target,
        scripts,
        ..
    } = *job;
    let (runtime, sandbox) = scripts;
    let store = stage.parent().unwrap_or(stage);
    let spec = format!("{} {}", e.package, e.version);
    // In the system's temporary directory, not the store: cargo takes a
    // crate under some workspace's directory (a store inside a project)
    // for a member of that workspace.
    let work = std::env::temp_dir().join(format!("mcpvm-crate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(io_err(&work))?;
    let r = (|| {
        let root = sysroot()?;
        let cargo = root.join("bin/cargo");
        // The host's cargo keeps its downloads in the store, away from
        // the user's own ~/.cargo (and its configuration).
        let home = store.join(".cargo");
        let env = [("CARGO_HOME", home.as_path())];
        let src = source_with_lock(job, &cargo, &env, &work, progress)?;
        let lock = src.join("Cargo.lock");
        let bins = binaries(&cargo, &src, &env)?;
        if bins.is_empty() {
            return Err(failed(
                format!("building {spec}"),
                "it has no binary target to run as a server (a library crate?)",
            ));
        }
        progress(&format!("{name}: vendoring the dependencies of {spec}"));
        vendor(&cargo, &env, &src, &work, &spec)?;
        let kept_lock = std::fs::read(&lock).map_err(io_err(&lock))?;
        let tools = tools_layer(store, runtime, progress)?;
        progress(&format!(
            "{name}: building {} of {spec} in a microVM (no network)",
            bins.join(", ")
        ));
        let job = ScriptJob {
            server: name,
            stage: &work,
            runtime,
            layers: vec![tools],
            mem_mib: Some(3072),
            env: &e.install_env,
            shell: build_line(&bins),
            record: false,
        };
        sandbox
            .run(&job, progress)
            .map_err(|tail| failed(format!("building {spec} (in a microVM)"), tail))?;
        take_binaries(&work, target, &bins, &spec)?;
        // The host's resolution, not whatever the guest left.
        let lock_to = target.join("Cargo.lock");
        std::fs::write(&lock_to, kept_lock).map_err(io_err(&lock_to))?;
        Ok(format!("{} {} (crates.io)", e.package, e.version))
    })();
    let _ = std::fs::remove_dir_all(&work);
    r
}

/// The crate's source unpacked in `work/src` (from the catalogue's
/// `source`, or fetched from crates.io), with the Cargo.lock it is built
/// from: the kept one, the one it was published with, or one resolved now.
fn source_with_lock(
    job: &Job,
    cargo: &Path,
    env: &[(&str, &Path); 1],
    work: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, BuildError> {
    let (name, e, locked) = (job.name, job.entry, job.locked);
    let spec = format!("{} {}", e.package, e.version);
    let krate = match &e.source {
        Some(src) => src.clone(),
        None => {
            let file = work.join(format!("{}-{}.crate", e.package, e.version));
            run(
                &format!("fetching {spec} from crates.io"),
                crate::host_env::command("python3")
                    .arg(job.fetchers.join("runtimes/fetch-crate"))
                    .args([&e.package, &e.version])
                    .arg(&file),
            )?;
            file
        }
    };
    let unpacked = unpack(&krate, work, e)?;
    let src = work.join("src");
    std::fs::rename(&unpacked, &src).map_err(io_err(&src))?;
    let lock = src.join("Cargo.lock");
    match locked {
        Some(kept) => {
            std::fs::copy(kept.join("Cargo.lock"), &lock).map_err(io_err(&lock))?;
        }
        None if lock.is_file() => progress(&format!(
            "{name}: using the Cargo.lock {spec} was published with"
        )),
        None => {
            progress(&format!("{name}: {spec} has no Cargo.lock: resolving one"));
            run(
                &format!("cargo generate-lockfile ({spec})"),
                crate::host_env::command(cargo)
                    .arg("generate-lockfile")
                    .arg("--manifest-path")
                    .arg(src.join("Cargo.toml"))
                    .envs(env.iter().copied()),
            )?;
        }
    }
    Ok(src)
}

/// Every dependency's source in `work/vendor`, checked against the lock
/// (`vendor` downloads and unpacks, it builds nothing), and the guest's
/// cargo home that builds from it offline.
fn vendor(
    cargo: &Path,
    env: &[(&str, &Path); 1],
    src: &Path,
    work: &Path,
    spec: &str,
) -> Result<(), BuildError> {
    run(
        &format!("cargo vendor ({spec})"),
        crate::host_env::command(cargo)
            .args(["vendor", "--locked", "--versioned-dirs", "--quiet"])
            .arg("--manifest-path")
            .arg(src.join("Cargo.toml"))
            .arg(work.join("vendor"))
            .envs(env.iter().copied()),
    )?;
    // A crate with no dependencies has nothing vendored.
    std::fs::create_dir_all(work.join("vendor")).map_err(io_err(work))?;
    let guest_home = work.join("cargo-home");
    std::fs::create_dir_all(&guest_home).map_err(io_err(&guest_home))?;
    std::fs::write(
        guest_home.join("config.toml"),
        "[source.crates-io]\nreplace-with = \"vendored\"\n\n\
         [source.vendored]\ndirectory = \"/workspace/vendor\"\n\n\
         [net]\noffline = true\n",
    )
    .map_err(io_err(&guest_home))
}

/// The binaries the microVM built, into the layer's `bin`.
fn take_binaries(
    work: &Path,
    target: &Path,
    bins: &[String],
    spec: &str,
) -> Result<(), BuildError> {
    let bin = target.join("bin");
    std::fs::create_dir_all(&bin).map_err(io_err(&bin))?;
    for b in bins {
        let built = work.join("out").join(b);
        if !built.is_file() {
            return Err(failed(
                format!("building {spec} (in a microVM)"),
                format!("the build left no binary '{b}'"),
            ));
        }
        let to = bin.join(b);
        std::fs::copy(&built, &to).map_err(io_err(&to))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))
            .map_err(io_err(&to))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_builds_offline_from_the_lock_and_keeps_only_binaries() {
        let line = build_line(&["a".into(), "b-c".into()]);
        assert!(
            line.contains("cargo build --release --frozen --bins"),
            "{line}"
        );
        assert!(line.contains("+crt-static"), "{line}");
        assert!(line.contains(&format!(
            "cp /tmp/target/{TARGET}/release/b-c /workspace/out/"
        )));
        assert!(line.ends_with("rm -rf /workspace/src /workspace/vendor /workspace/cargo-home"));
    }

    fn entry() -> Entry {
        crate::package::entry("cargo:demo@1.0.0").unwrap().1
    }

    fn krate(dir: &Path, members: &[(&str, tar::EntryType, &[u8])]) -> PathBuf {
        let tar_path = dir.join("demo.tar");
        let mut b = tar::Builder::new(std::fs::File::create(&tar_path).unwrap());
        for (path, kind, data) in members {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                h.set_link_name("/etc").unwrap();
            }
            // Raw names, as a hostile archive would write them.
            h.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.finish().unwrap();
        drop(b);
        let out = dir.join("demo-1.0.0.crate");
        let gz = crate::host_env::command("gzip")
            .arg("-c")
            .arg(&tar_path)
            .output()
            .unwrap();
        std::fs::write(&out, gz.stdout).unwrap();
        out
    }

    #[test]
    fn a_crate_unpacks_inside_its_directory_or_not_at_all() {
        let d = tempfile::tempdir().unwrap();
        let ok = krate(
            d.path(),
            &[
                (
                    "demo-1.0.0/Cargo.toml",
                    tar::EntryType::Regular,
                    b"[package]\n",
                ),
                (
                    "demo-1.0.0/src/main.rs",
                    tar::EntryType::Regular,
                    b"fn main() {}\n",
                ),
            ],
        );
        let out = d.path().join("ok");
        std::fs::create_dir(&out).unwrap();
        let src = unpack(&ok, &out, &entry()).unwrap();
        assert!(src.join("src/main.rs").is_file());

        for (bad, why) in [
            ("demo-1.0.0/../../escape", "leaves the crate"),
            (
                "other-1.0.0/Cargo.toml",
                "not a file or directory under demo-1.0.0/",
            ),
        ] {
            let k = krate(d.path(), &[(bad, tar::EntryType::Regular, b"x")]);
            let out = tempfile::tempdir().unwrap();
            let e = unpack(&k, out.path(), &entry()).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!d.path().join("escape").exists());
        }
        let link = krate(
            d.path(),
            &[("demo-1.0.0/etc", tar::EntryType::Symlink, b"")],
        );
        let out = tempfile::tempdir().unwrap();
        let e = unpack(&link, out.path(), &entry()).unwrap_err().to_string();
        assert!(e.contains("not a file or directory"), "{e}");
        let none = krate(
            d.path(),
            &[("demo-1.0.0/README", tar::EntryType::Regular, b"")],
        );
        let out = tempfile::tempdir().unwrap();
        let e = unpack(&none, out.path(), &entry()).unwrap_err().to_string();
        assert!(e.contains("no demo-1.0.0/Cargo.toml"), "{e}");
    }
}
