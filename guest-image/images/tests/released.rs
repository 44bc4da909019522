//! guest-image/runtimes/released against registries of our own (a
//! loopback HTTP server): a release's date is the registry's, rounded up
//! to the second so that a cutoff at it keeps the release; PyPI's is its
//! earliest upload; a version the registry does not have is one clear
//! error; a resolver wheel that differs from its pin in uv.lock is
//! refused and leaves nothing in the cache.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtimes/released")
}

fn released(url: &str, cache: &Path, args: &[&str]) -> Output {
    Command::new("python3")
        .arg(script())
        .args(args)
        .env("MCPVM_PYPI", url)
        .env("MCPVM_NPM_REGISTRY", url)
        .env("MCPVM_CACHE", cache)
        .output()
        .unwrap()
}

#[test]
fn dates_are_the_registries_own_rounded_up() {
    let pypi = serde_json::json!({"releases": {"2025.4.7": [
        {"filename": "a.whl", "upload_time_iso_8601": "2025-04-07T09:12:00Z"},
        {"filename": "a.tar.gz", "upload_time_iso_8601": "2025-04-07T09:11:05.096297Z"}]}});
    let npm = serde_json::json!({"time": {"created": "2024-01-01T00:00:00Z",
        "2025.1.14": "2025-01-14T01:46:31.703Z", "2025.1.15": "2025-01-15T00:00:00.000Z"}});
    let url = common::registry(vec![
        (
            "/pypi/mcp-server-fetch/json".into(),
            pypi.to_string().into_bytes(),
        ),
        (
            "/@modelcontextprotocol%2Fserver-filesystem".into(),
            npm.to_string().into_bytes(),
        ),
    ]);
    let cache = tempfile::tempdir().unwrap();
    let out = released(
        &url,
        cache.path(),
        &["date", "pypi", "mcp-server-fetch", "2025.4.7"],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2025-04-07T09:11:06Z\n"
    );
    let out = released(
        &url,
        cache.path(),
        &[
            "date",
            "npm",
            "@modelcontextprotocol/server-filesystem",
            "2025.1.14",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2025-01-14T01:46:32Z\n"
    );
    let out = released(
        &url,
        cache.path(),
        &["date", "pypi", "mcp-server-fetch", "9.9"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "released: PyPI has no upload of mcp-server-fetch==9.9\n"
    );
    let out = released(&url, cache.path(), &["date", "cargo", "x", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("released: usage:"));
}

#[test]
fn a_resolver_wheel_that_is_not_the_pinned_one_is_refused() {
    let lock = std::fs::read_to_string(script().with_file_name("uv.lock")).unwrap();
    let field = |k: &str| {
        lock.lines()
            .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
            .map(|v| v.trim_end_matches('"').to_string())
            .unwrap()
    };
    let (version, wheel) = (field("version"), field("wheel"));
    // Listed with a URL relative to the JSON answer, as a mirror gives it.
    let listing = serde_json::json!({"releases": {version.clone(): [
        {"filename": wheel, "url": format!("../../files/{wheel}")}]}});
    let url = common::registry(vec![
        ("/pypi/uv/json".into(), listing.to_string().into_bytes()),
        (
            format!("/files/{wheel}"),
            b"PK\x03\x04 not the pinned wheel".to_vec(),
        ),
    ]);
    let cache = tempfile::tempdir().unwrap();
    let out = released(&url, cache.path(), &["uv"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not match uv.lock") && err.contains("refusing it"),
        "{err}"
    );
    let uv = cache.path().join("uv");
    let left: Vec<_> = std::fs::read_dir(&uv)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing kept: {left:?}");
}
