//! Old releases that no longer start. A server whose first-profile cell
//! ends before the handshake with a dependency break (an import the
//! installed SDK no longer has: mcp-server-fetch 2025.4.7 on today's
//! `mcp` dies on `ImportError: cannot import name 'McpError'`) is built
//! again as released (its dependencies as the registry had them on its
//! publication date: `as_released`, docs/catalogue.md) and run once more
//! under the same profile. The record of that run (profile
//! [`PROFILE`]) lets the compatibility verdict say whether the server is
//! broken for anyone installing it today, with both runs' evidence.
//!
//! The derived entries are written to `<out>/as-released.toml` (the
//! catalogue entry with `as_released = true`, under `NAME-as-released`),
//! built into the audit's store by `mcpvm image build` (a layer already
//! there is found by its key, so an audit where the registry cannot be
//! reached still runs one built beforehand), and probed like any cell.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mcpvm_images::catalogue::{Catalogue, Entry, Runtime};

use super::journal::Journal;
use super::matrix::Cell;
use super::record::Record;

/// The records' profile for the run as released.
pub const PROFILE: &str = "as-released";

/// What a start that died on its dependencies prints: an import or an
/// attribute the installed packages no longer have (Python), an export
/// or module that is not there (node). The first such line.
pub fn dependency_break(stderr: &str) -> Option<&str> {
    const SIGNS: &[&str] = &[
        "ImportError: cannot import name",
        "ModuleNotFoundError: No module named",
        "AttributeError: module ",
        "has no attribute",
        "got an unexpected keyword argument",
        "does not provide an export named",
        "ERR_PACKAGE_PATH_NOT_EXPORTED",
        "ERR_REQUIRE_ESM",
        "Cannot find module",
        "is not a constructor",
        "is not a function",
    ];
    stderr
        .lines()
        .map(str::trim)
        .find(|l| SIGNS.iter().any(|s| l.contains(s)))
}

/// The servers to run again as released: their first-profile cell never
/// answered the handshake and its stderr shows a dependency break, their
/// entry is from a registry and not already as released, and no record
/// of that run exists yet.
pub fn candidates(
    records: &BTreeMap<(String, String), Record>,
    catalogue: &Catalogue,
    first: &str,
) -> Vec<String> {
    records
        .iter()
        .filter(|((_, p), r)| p == first && r.lifecycle.is_none())
        .filter(|(_, r)| dependency_break(&r.evidence.stderr_tail).is_some())
        .map(|((s, _), _)| s.clone())
        .filter(|s| !records.contains_key(&(s.clone(), PROFILE.to_string())))
        .filter(|s| {
            catalogue
                .get(s)
                .is_ok_and(|e| !e.as_released && e.source.is_none() && e.runtime != Runtime::Cargo)
        })
        .collect()
}

/// `NAME-as-released`: the derived entry's name.
pub fn derived(server: &str) -> String {
    format!("{server}-as-released")
}

/// The catalogue of the derived entries.
pub fn catalogue_text(catalogue: &Catalogue, servers: &[String]) -> Result<String, String> {
    let mut derived_entries: BTreeMap<String, Entry> = BTreeMap::new();
    for s in servers {
        let mut e = catalogue.get(s).map_err(|e| e.to_string())?.clone();
        e.as_released = true;
        e.notes = Some(format!(
            "{s} as released: written by mcpvm audit after it failed to start with today's dependencies"
        ));
        derived_entries.insert(derived(s), e);
    }
    let file = BTreeMap::from([("servers", derived_entries)]);
    let body = toml::to_string(&file).map_err(|e| e.to_string())?;
    Ok(format!(
        "# Servers of this audit that died at start on today's dependencies,\n# as released: written by mcpvm audit (docs/audit.md).\n\n{body}"
    ))
}

/// Builds the derived entries' layers with `mcpvm image build`; returns
/// why each that failed did (the build's own words).
pub fn build(
    tools: &Path,
    file: &Path,
    servers: &[String],
    images: &Option<PathBuf>,
) -> BTreeMap<String, String> {
    // A layer already in the store is run as it is: no build, so an
    // audit where the registry cannot be reached (a testbed, a cluster
    // node) runs what was built beforehand.
    let arg = mcpvm::server::CatalogueArg {
        path: Some(file.to_path_buf()),
        only: true,
    };
    let names: Vec<String> = servers
        .iter()
        .map(|s| derived(s))
        .filter(|d| mcpvm::server::plan(d, &arg, images).is_err())
        .collect();
    if names.is_empty() {
        return BTreeMap::new();
    }
    let mut cmd = Command::new(tools);
    cmd.args(["--json", "image", "build", "--catalogue"])
        .arg(file)
        .args(["--catalogue-only", "--servers", &names.join(",")])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped());
    if let Some(dir) = images {
        cmd.arg("--images").arg(dir);
    }
    let out = cmd.output();
    let report = out
        .as_ref()
        .ok()
        .and_then(|o| serde_json::from_slice::<mcpvm_images::build::Report>(&o.stdout).ok());
    // Where the build could not run at all (a testbed host or a cluster
    // node has no registry), the store may know why the layer did not
    // build where it was tried (the bench builds it on the host).
    let store = images
        .clone()
        .unwrap_or_else(mcpvm_images::store::default_dir);
    let index = mcpvm_images::store::Index::load(&store).unwrap_or_default();
    let mut failed = BTreeMap::new();
    for s in servers.iter().filter(|s| names.contains(&derived(s))) {
        let why = match &report {
            Some(r) => r
                .failed
                .iter()
                .find(|f| f.name == derived(s))
                .map(|f| f.error.clone()),
            None => Some(match (tried_before(&index, file, &derived(s)), &out) {
                (Some(why), _) => why,
                (None, Ok(o)) => format!("mcpvm image build gave no report ({})", o.status),
                (None, Err(e)) => format!("cannot run {}: {e}", tools.display()),
            }),
        };
        if let Some(why) = why {
            failed.insert(s.clone(), why);
        }
    }
    failed
}

/// Why the store's last build of `name` failed, if it was of the entry
/// `file` has for it now (its key): a failure of another entry is not
/// this one's.
fn tried_before(index: &mcpvm_images::store::Index, file: &Path, name: &str) -> Option<String> {
    let f = index.failed.get(name)?;
    let catalogue = Catalogue::choose(Some(file), true).ok()?;
    let entry = catalogue.get(name).ok()?;
    (index.key_of(name, entry) == f.key).then(|| f.error.clone())
}

/// The cell that runs `server`'s derived entry under `profile`.
pub fn cell(server: &str, profile: &str) -> Cell {
    Cell {
        server: derived(server),
        profile: profile.to_string(),
    }
}

/// A derived run's record, filed under the server it stands for.
pub fn refile(mut r: Record, server: &str) -> Record {
    r.server = server.to_string();
    r.profile = PROFILE.to_string();
    r
}

/// Appends each record; the first error ends it.
pub fn append(journal: &mut Journal, records: Vec<Record>) -> std::io::Result<()> {
    records.into_iter().try_for_each(|r| journal.append(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Outcome;

    #[test]
    fn a_start_that_died_on_its_dependencies_is_told_from_others() {
        let fetch = "Traceback (most recent call last):\n  File \"/opt/mcp/fetch/mcp_server_fetch/server.py\", line 6, in <module>\n    from mcp.shared.exceptions import McpError\nImportError: cannot import name 'McpError' from 'mcp.shared.exceptions'";
        assert_eq!(
            dependency_break(fetch),
            Some("ImportError: cannot import name 'McpError' from 'mcp.shared.exceptions'")
        );
        let node = "file:///opt/mcp/x/index.js:3\nSyntaxError: The requested module '@modelcontextprotocol/sdk/types.js' does not provide an export named 'McpError'";
        assert!(dependency_break(node).is_some());
        for other in [
            "Error: BRAVE_API_KEY environment variable is required",
            "getaddrinfo EAI_AGAIN api.example.com",
            "usage: server [-h] --db-path DB",
        ] {
            assert_eq!(dependency_break(other), None, "{other}");
        }
    }

    #[test]
    fn the_derived_catalogue_is_the_entry_as_released() {
        let c = Catalogue::parse(
            "[servers.fetch]\npackage = \"mcp-server-fetch\"\nversion = \"2025.4.7\"\nruntime = \"python\"\ncommand = \"mcp-server-fetch\"\nargs = [\"--ignore-robots-txt\"]\n",
            "test",
        )
        .unwrap();
        let text = catalogue_text(&c, &["fetch".into()]).unwrap();
        let back = Catalogue::parse(&text, "derived").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let e = back.get("fetch-as-released").unwrap();
        assert!(e.as_released);
        assert_eq!(
            (e.package.as_str(), e.version.as_str()),
            ("mcp-server-fetch", "2025.4.7")
        );
        assert_eq!(e.args, ["--ignore-robots-txt"]);
        // A record of a cell that died on an import, not yet run again.
        let mut r = Record::failed("fetch", "baseline", Outcome::Broken, String::new(), 0.0);
        r.evidence.stderr_tail = "ImportError: cannot import name 'McpError'".into();
        let mut records = BTreeMap::new();
        records.insert(("fetch".to_string(), "baseline".to_string()), r.clone());
        assert_eq!(candidates(&records, &c, "baseline"), ["fetch"]);
        records.insert(
            ("fetch".to_string(), PROFILE.to_string()),
            refile(r, "fetch"),
        );
        assert!(candidates(&records, &c, "baseline").is_empty(), "run once");
    }

    /// Where the build cannot run (a testbed host), the store's own record
    /// of why the layer as released did not build is the reason, if it
    /// was of this entry.
    #[test]
    fn a_build_that_cannot_run_gives_the_stores_reason() {
        let c = Catalogue::parse(
            "[servers.chroma]\npackage = \"chroma-mcp\"\nversion = \"0.2.6\"\nruntime = \"python\"\ncommand = \"chroma-mcp\"\n",
            "test",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("as-released.toml");
        std::fs::write(&file, catalogue_text(&c, &["chroma".into()]).unwrap()).unwrap();
        let store = dir.path().join("images");
        std::fs::create_dir_all(&store).unwrap();
        let derived_entry = Catalogue::choose(Some(&file), true).unwrap();
        let mut index = mcpvm_images::store::Index::default();
        let key = index.key_of(
            "chroma-as-released",
            derived_entry.get("chroma-as-released").unwrap(),
        );
        let why = "pypika==0.48.9 has no usable wheels";
        index.failed.insert(
            "chroma-as-released".into(),
            mcpvm_images::store::FailedBuild {
                key,
                error: why.into(),
            },
        );
        index.save(&store).unwrap();
        let images = Some(store.clone());
        let failed = build(Path::new("/bin/false"), &file, &["chroma".into()], &images);
        assert_eq!(failed["chroma"], why);
        // A failure of another entry (another key) is not this one's.
        index.failed.get_mut("chroma-as-released").unwrap().key = "other".into();
        index.save(&store).unwrap();
        let failed = build(Path::new("/bin/false"), &file, &["chroma".into()], &images);
        assert!(
            failed["chroma"].starts_with("mcpvm image build gave no report"),
            "{failed:?}"
        );
    }
}
