//! Debian packages a server needs beside the runtime's (`apt =
//! ["ripgrep"]`), made part of its layer.
//!
//! The host's apt resolves them against what the runtime image already
//! has (the image's own dpkg status and sources), in a directory of its
//! own (the host's apt state is neither read nor written), checks the
//! archive's signatures with the image's Debian keyring, and downloads
//! them; `dpkg-deb -x` unpacks each into the layer, over the runtime in
//! the guest's overlay. Nothing from the packages runs, here or in the
//! guest: maintainer scripts are not run, so a package that needs its
//! `postinst` (users, alternatives, generated files) is not one for this.
//! `apt.lock` in the server's directory lists what was unpacked, by
//! version and SHA-256.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::process::BuildError;

/// What apt needs from the runtime image: its dpkg status, sources and
/// keyring, taken out once per image (`fsck.erofs --extract`).
fn base(runtime: &Path, cache: &Path) -> Result<PathBuf, BuildError> {
    let key = runtime
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let dir = cache.join(key);
    if dir.join("status").is_file() {
        return Ok(dir);
    }
    let tmp = cache.join(format!(".extract-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(cache).map_err(io(cache))?;
    let r = run(
        "fsck.erofs --extract (the runtime's dpkg status)",
        crate::host_env::command("fsck.erofs")
            .arg(format!("--extract={}", tmp.display()))
            .arg(runtime),
    )
    .and_then(|()| {
        let part = cache.join(format!(".base-{}", std::process::id()));
        std::fs::create_dir_all(&part).map_err(io(&part))?;
        for (from, to) in [
            ("var/lib/dpkg/status", "status"),
            ("etc/apt/sources.list", "sources.list"),
            (
                "usr/share/keyrings/debian-archive-keyring.gpg",
                "keyring.gpg",
            ),
        ] {
            std::fs::copy(tmp.join(from), part.join(to)).map_err(io(&tmp.join(from)))?;
        }
        std::fs::rename(&part, &dir).map_err(io(&dir))
    });
    let _ = std::fs::remove_dir_all(&tmp);
    r.map(|()| dir)
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn run(what: &str, cmd: &mut Command) -> Result<(), BuildError> {
    let out = cmd.output().map_err(|source| BuildError::Spawn {
        what: what.to_string(),
        source,
    })?;
    if out.status.success() {
        return Ok(());
    }
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    Err(BuildError::Failed {
        what: what.to_string(),
        tail: crate::process::cause(&text),
    })
}

/// The runtime's sources with the image's keyring as their only signer.
fn signed_sources(sources: &str, keyring: &Path) -> String {
    sources
        .lines()
        .filter(|l| l.trim_start().starts_with("deb "))
        .map(|l| {
            let rest = l.trim_start().trim_start_matches("deb ").trim_start();
            let rest = match rest.starts_with('[') {
                true => rest.split_once(']').map_or(rest, |(_, r)| r.trim_start()),
                false => rest,
            };
            format!("deb [signed-by={}] {rest}\n", keyring.display())
        })
        .collect()
}

/// Fetches `packages` and what they need that the runtime lacks, unpacks
/// them into `stage` (the layer's root) and writes `apt.lock` into
/// `server_dir`. `cache`: where the runtime's apt base is kept.
pub fn unpack(
    packages: &[String],
    runtime: &Path,
    cache: &Path,
    stage: &Path,
    server_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(), BuildError> {
    progress(&format!(
        "apt: {} and what they need, from Debian 12",
        packages.join(", ")
    ));
    let base = base(runtime, cache)?;
    let root = cache.join(format!(".apt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let r = fetch_and_unpack(packages, &base, &root, stage, server_dir);
    let _ = std::fs::remove_dir_all(&root);
    r
}

fn fetch_and_unpack(
    packages: &[String],
    base: &Path,
    root: &Path,
    stage: &Path,
    server_dir: &Path,
) -> Result<(), BuildError> {
    for d in [
        "etc/apt/apt.conf.d",
        "etc/apt/preferences.d",
        "etc/apt/sources.list.d",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
        "var/lib/dpkg",
    ] {
        std::fs::create_dir_all(root.join(d)).map_err(io(root))?;
    }
    let sources = std::fs::read_to_string(base.join("sources.list")).map_err(io(base))?;
    let list = root.join("etc/apt/sources.list");
    std::fs::write(&list, signed_sources(&sources, &base.join("keyring.gpg")))
        .map_err(io(&list))?;
    std::fs::copy(base.join("status"), root.join("var/lib/dpkg/status")).map_err(io(root))?;
    let apt = |args: &[&str]| {
        let mut c = crate::host_env::command("apt-get");
        c.arg("-q")
            .arg(format!("-oDir={}", root.display()))
            .arg(format!(
                "-oDir::State::status={}",
                root.join("var/lib/dpkg/status").display()
            ))
            .args(["-oDebug::NoLocking=1", "-oAPT::Sandbox::User=root"])
            .args(["-oAPT::Install-Recommends=0", "-oAPT::Get::Assume-Yes=1"])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    run(
        "apt-get update (Debian 12's package lists)",
        &mut apt(&["update"]),
    )?;
    let mut install = apt(&["install", "--download-only"]);
    install.args(packages);
    run(
        &format!("apt-get install --download-only {}", packages.join(" ")),
        &mut install,
    )?;

    let archives = root.join("var/cache/apt/archives");
    let mut debs: Vec<PathBuf> = std::fs::read_dir(&archives)
        .map_err(io(&archives))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    debs.sort();
    let mut lock = String::new();
    for deb in &debs {
        run(
            &format!("dpkg-deb -x {}", deb.display()),
            crate::host_env::command("dpkg-deb")
                .arg("-x")
                .arg(deb)
                .arg(stage),
        )?;
        let fields = crate::host_env::command("dpkg-deb")
            .args(["-f"])
            .arg(deb)
            .args(["Package", "Version"])
            .output()
            .map_err(|source| BuildError::Spawn {
                what: "dpkg-deb -f".into(),
                source,
            })?;
        let text = String::from_utf8_lossy(&fields.stdout);
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}: ")))
                .unwrap_or("?")
                .to_string()
        };
        let sha: String = Sha256::digest(std::fs::read(deb).map_err(io(deb))?)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        lock.push_str(&format!(
            "{} {} sha256:{sha}\n",
            field("Package"),
            field("Version")
        ));
    }
    merge_usr(stage)?;
    let path = server_dir.join("apt.lock");
    std::fs::write(&path, lock).map_err(io(&path))
}

/// Debian 12's root is merged: /bin, /sbin and /lib* are links into
/// /usr. A package's own /lib/… (or an empty /lib a package lists) would
/// be a directory in the layer, and overlayfs would put it over the link,
/// hiding every library the root has there (the dynamic loader among
/// them: nothing would start). Their contents go under /usr instead.
fn merge_usr(stage: &Path) -> Result<(), BuildError> {
    fn merge(from: &Path, to: &Path) -> Result<(), BuildError> {
        std::fs::create_dir_all(to).map_err(io(to))?;
        for e in std::fs::read_dir(from).map_err(io(from))?.flatten() {
            let (src, dst) = (e.path(), to.join(e.file_name()));
            let both_dirs = e.file_type().is_ok_and(|t| t.is_dir()) && dst.is_dir();
            match both_dirs {
                true => merge(&src, &dst)?,
                false => std::fs::rename(&src, &dst).map_err(io(&src))?,
            }
        }
        std::fs::remove_dir_all(from).map_err(io(from))
    }
    for d in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let top = stage.join(d);
        let is_dir = std::fs::symlink_metadata(&top).is_ok_and(|m| m.is_dir());
        if is_dir {
            merge(&top, &stage.join("usr").join(d))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_directories_go_under_usr_as_the_merged_root_has_them() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path();
        for f in [
            "lib/x86_64-linux-gnu/libx.so.1",
            "usr/lib/x86_64-linux-gnu/liby.so",
            "bin/tool",
        ] {
            std::fs::create_dir_all(s.join(f).parent().unwrap()).unwrap();
            std::fs::write(s.join(f), f).unwrap();
        }
        std::fs::create_dir(s.join("lib64")).unwrap();
        merge_usr(s).unwrap();
        for gone in ["lib", "lib64", "bin"] {
            assert!(std::fs::symlink_metadata(s.join(gone)).is_err(), "{gone}");
        }
        for kept in [
            "usr/lib/x86_64-linux-gnu/libx.so.1",
            "usr/lib/x86_64-linux-gnu/liby.so",
            "usr/bin/tool",
        ] {
            assert!(s.join(kept).is_file(), "{kept}");
        }
        assert!(s.join("usr/lib64").is_dir());
    }

    #[test]
    fn the_runtimes_sources_are_signed_by_its_keyring_alone() {
        let k = Path::new("/c/keyring.gpg");
        assert_eq!(
            signed_sources("deb http://deb.debian.org/debian bookworm main\n", k),
            "deb [signed-by=/c/keyring.gpg] http://deb.debian.org/debian bookworm main\n"
        );
        // Options of its own are replaced; other lines are dropped.
        assert_eq!(
            signed_sources(
                "# c\ndeb-src http://x y main\n  deb [trusted=yes] http://m bookworm main\n",
                k
            ),
            "deb [signed-by=/c/keyring.gpg] http://m bookworm main\n"
        );
    }
}
