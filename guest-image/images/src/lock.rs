//! Locks: the dependency tree a layer was built from, resolved once and
//! then reused, so that rebuilding a layer (a new runtime image, a lost
//! store file) installs the same tree instead of whatever the registry
//! offers that day. `mcpvm image build --update NAME` resolves again on
//! purpose.
//!
//! A lock is kept in the store (`locks/<server>/`) with the request it
//! answers (package, version, pins, extras, source, runtime): an entry
//! that changes any of them is resolved afresh. The same files are in the
//! layer (`/opt/mcp/<server>/`), and their digest is in the store's index
//! and in an audit's `audit.json`.
//!
//! - node: npm's `package.json` and `package-lock.json` (installed again
//!   with `npm ci`, which checks every tarball's integrity);
//! - python: `requirements.lock`, one `name==version --hash=sha256:…`
//!   per wheel pip installed (from its `--report`), installed again with
//!   `--no-deps --require-hashes`;
//! - cargo: the crate's `Cargo.lock` (its own, as published, or resolved
//!   when it has none), whose checksums cargo checks when it vendors.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::catalogue::{Entry, Runtime};

/// The files of a lock, in the server's directory.
pub fn files(runtime: Runtime) -> &'static [&'static str] {
    match runtime {
        Runtime::Python => &["requirements.lock"],
        Runtime::Cargo => &["Cargo.lock"],
        _ => &["package.json", "package-lock.json"],
    }
}

/// What a lock answers: the entry's fields that choose the tree.
pub fn request(e: &Entry) -> String {
    let mut h = Sha256::new();
    for part in [&e.package, &e.version, &format!("{:?}", e.runtime)] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for p in e.pins.iter().chain(&e.extras) {
        h.update(p.as_bytes());
        h.update([1]);
    }
    if e.as_released {
        h.update(b"as-released");
    }
    if let Some(src) = &e.source {
        h.update(std::fs::read(src).map(Sha256::digest).unwrap_or_default());
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest of a lock: its files, in order (first 16 hex digits).
pub fn digest(dir: &Path, runtime: Runtime) -> Option<String> {
    let mut h = Sha256::new();
    for f in files(runtime) {
        h.update(std::fs::read(dir.join(f)).ok()?);
        h.update([0]);
    }
    Some(hex(&h.finalize())[..16].to_string())
}

/// The day a tree locked as released was frozen at (YYYY-MM-DD): the
/// registry's publication of its version, which the python lock's first
/// line and the npm lock's `package.json` (`"mcpvm": {"asReleased"}`)
/// record (`pip::resolve_as_released`, `npm::record_release_date`).
/// None for a tree resolved on the day it was built, or a lock that
/// does not say a date in that form.
pub fn released_on(dir: &Path, runtime: Runtime) -> Option<String> {
    let said = match runtime {
        Runtime::Python => {
            let text = std::fs::read_to_string(dir.join("requirements.lock")).ok()?;
            let first = text.lines().next()?;
            first.strip_prefix("# as released: ")?.to_string()
        }
        Runtime::Cargo => return None,
        _ => {
            let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            v["mcpvm"]["asReleased"].as_str()?.to_string()
        }
    };
    let day = said.get(..10)?;
    let b = day.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    (digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10))
        .then(|| day.to_string())
}

/// The store's locks.
pub struct Locks(PathBuf);

impl Locks {
    pub fn in_store(store: &Path) -> Locks {
        Locks(store.join("locks"))
    }

    fn dir(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The lock of `name` when it answers `e`'s request.
    pub fn get(&self, name: &str, e: &Entry) -> Option<PathBuf> {
        let dir = self.dir(name);
        let asked = std::fs::read_to_string(dir.join("request")).ok()?;
        let whole = files(e.runtime).iter().all(|f| dir.join(f).is_file());
        (asked.trim() == request(e) && whole).then_some(dir)
    }

    /// Keeps the lock files found in `from` (a server's directory) as
    /// `name`'s, written beside and renamed into place.
    pub fn put(&self, name: &str, e: &Entry, from: &Path) -> std::io::Result<()> {
        let dir = self.dir(name);
        let tmp = self.0.join(format!(".{name}.tmp"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        for f in files(e.runtime) {
            std::fs::copy(from.join(f), tmp.join(f))?;
        }
        std::fs::write(tmp.join("request"), request(e))?;
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir)
    }
}

/// `requirements.lock` from pip's installation report: every wheel it
/// installed, pinned by version and hash. None when the report is not
/// one (a pip without `--report`, a wheel with no hash).
pub fn requirements_from_report(report: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(report).ok()?;
    let mut lines = Vec::new();
    for item in v["install"].as_array()? {
        let name = item["metadata"]["name"].as_str()?;
        let version = item["metadata"]["version"].as_str()?;
        let info = &item["download_info"];
        let sha = info["archive_info"]["hashes"]["sha256"]
            .as_str()
            .or_else(|| {
                info["archive_info"]["hash"]
                    .as_str()?
                    .strip_prefix("sha256=")
            })?;
        let url = info["url"].as_str().unwrap_or_default();
        // A local wheel is named by its file; the hash still binds it.
        let req = match url.strip_prefix("file://") {
            Some(path) => format!("{name} @ file://{path}"),
            None => format!("{name}=={version}"),
        };
        lines.push(format!("{req} --hash=sha256:{sha}"));
    }
    lines.sort();
    Some(lines.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Catalogue;

    #[test]
    fn a_lock_answers_only_the_request_it_was_made_for() {
        let store = tempfile::tempdir().unwrap();
        let locks = Locks::in_store(store.path());
        let e = Catalogue::built_in().get("memory").unwrap().clone();
        let server = store.path().join("server");
        std::fs::create_dir_all(&server).unwrap();
        assert!(
            locks.put("memory", &e, &server).is_err(),
            "no files to lock"
        );
        std::fs::write(server.join("package.json"), "{}").unwrap();
        std::fs::write(server.join("package-lock.json"), "{\"v\":1}").unwrap();
        locks.put("memory", &e, &server).unwrap();
        let dir = locks.get("memory", &e).unwrap();
        assert_eq!(digest(&dir, e.runtime), digest(&server, e.runtime));
        assert!(digest(&dir, e.runtime).unwrap().len() == 16);
        assert!(locks.get("other", &e).is_none());
        let mut newer = e.clone();
        newer.version = "2027.1.1".into();
        assert!(locks.get("memory", &newer).is_none());
        let mut pinned = e.clone();
        pinned.pins.push("zod@3.25.0".into());
        assert!(locks.get("memory", &pinned).is_none());
        // Run-time fields do not touch the tree.
        let mut notes = e.clone();
        notes.notes = Some("x".into());
        notes.install_env.insert("K".into(), "v".into());
        assert!(locks.get("memory", &notes).is_some());
        // A lock with a file gone is no lock.
        std::fs::remove_file(dir.join("package-lock.json")).unwrap();
        assert!(locks.get("memory", &e).is_none());
    }

    #[test]
    fn a_tree_locked_as_released_says_its_day_and_no_other_does() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("requirements.lock"),
            "# as released: 2025-10-09T22:14:45Z (PyPI's upload of a==1); resolved with uv --exclude-newer\na==1 --hash=sha256:aa\n",
        )
        .unwrap();
        assert_eq!(
            released_on(d, Runtime::Python).as_deref(),
            Some("2025-10-09")
        );
        std::fs::write(d.join("requirements.lock"), "a==1 --hash=sha256:aa\n").unwrap();
        assert_eq!(released_on(d, Runtime::Python), None);
        // A comment that does not start with a day is no day.
        std::fs::write(d.join("requirements.lock"), "# as released: soon\n").unwrap();
        assert_eq!(released_on(d, Runtime::Python), None);
        std::fs::write(
            d.join("package.json"),
            r#"{"name":"x","mcpvm":{"asReleased":"2025-03-01T10:00:00.000Z","why":"w"}}"#,
        )
        .unwrap();
        assert_eq!(released_on(d, Runtime::Node).as_deref(), Some("2025-03-01"));
        std::fs::write(d.join("package.json"), r#"{"name":"x"}"#).unwrap();
        assert_eq!(released_on(d, Runtime::Node), None);
        std::fs::write(
            d.join("package.json"),
            r#"{"mcpvm":{"asReleased":"2025-0x-01"}}"#,
        )
        .unwrap();
        assert_eq!(released_on(d, Runtime::Node), None);
        assert_eq!(released_on(&d.join("gone"), Runtime::Python), None);
    }

    #[test]
    fn pips_report_becomes_hashed_requirements() {
        let report = r#"{"version":"1","install":[
          {"metadata":{"name":"mcp","version":"1.30.0"},
           "download_info":{"url":"https://files.pythonhosted.org/x/mcp-1.30.0-py3-none-any.whl",
             "archive_info":{"hash":"sha256=aa11","hashes":{"sha256":"aa11"}}}},
          {"metadata":{"name":"anyio","version":"4.9.0"},
           "download_info":{"url":"https://files.pythonhosted.org/y/anyio-4.9.0-py3-none-any.whl",
             "archive_info":{"hash":"sha256=bb22"}}},
          {"metadata":{"name":"mine","version":"0.1"},
           "download_info":{"url":"file:///src/mine-0.1-py3-none-any.whl",
             "archive_info":{"hashes":{"sha256":"cc33"}}}}]}"#;
        assert_eq!(
            requirements_from_report(report).unwrap(),
            "anyio==4.9.0 --hash=sha256:bb22\n\
             mcp==1.30.0 --hash=sha256:aa11\n\
             mine @ file:///src/mine-0.1-py3-none-any.whl --hash=sha256:cc33\n"
        );
        let unhashed = r#"{"install":[{"metadata":{"name":"a","version":"1"},"download_info":{"url":"u","archive_info":{}}}]}"#;
        assert!(requirements_from_report(unhashed).is_none());
        assert!(requirements_from_report("not json").is_none());
    }
}
