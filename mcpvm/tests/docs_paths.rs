//! Every file the docs name exists: a path quoted in `docs/` or the
//! README that starts at one of the repository's top-level folders and
//! names a file (`tools/src/audit/calls.rs`, `benches/ecosystem.sh`) or a
//! folder (`vmm/src/signals/`), and every Rust file named on its own or
//! under its crate's `src` (`audit/compat.rs`, `signals.rs`) must be in
//! the tree. A doc that cites a file since moved or split fails here,
//! not in a reader's hands.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The tracked files, and every folder that holds one.
fn tree() -> (BTreeSet<String>, BTreeSet<String>) {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["ls-files"])
        .output()
        .unwrap();
    assert!(out.status.success(), "git ls-files");
    let files: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let mut dirs = BTreeSet::new();
    for f in &files {
        let mut p = Path::new(f);
        while let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
            dirs.insert(parent.to_string_lossy().into_owned());
            p = parent;
        }
    }
    (files, dirs)
}

/// The backquoted words of a Markdown text that look like paths.
fn quoted_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|w| w.split("::").next().unwrap_or(w).to_string())
        .filter(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        })
        .collect()
}

fn has_extension(p: &str) -> bool {
    let name = p.rsplit('/').next().unwrap_or(p);
    matches!(
        name.rsplit_once('.').map(|(_, e)| e),
        Some("rs" | "py" | "sh" | "toml" | "md" | "json" | "jsonl" | "c" | "config")
    ) && !name.starts_with('.')
}

#[test]
fn every_file_the_docs_name_exists() {
    let (files, dirs) = tree();
    let tops: BTreeSet<&str> = dirs
        .iter()
        .filter(|d| !d.contains('/'))
        .map(String::as_str)
        .collect();
    let docs: Vec<String> = files
        .iter()
        .filter(|f| (f.starts_with("docs/") && f.ends_with(".md")) || *f == "README.md")
        .cloned()
        .collect();
    assert!(docs.len() > 10, "the docs are found: {docs:?}");
    let found = |p: &str| {
        let p = p.trim_end_matches('/');
        files.contains(p)
            || dirs.contains(p)
            || files.iter().any(|f| f.ends_with(&format!("/{p}")))
            || dirs.iter().any(|d| d.ends_with(&format!("/{p}")))
    };
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        for p in quoted_paths(&text) {
            let top = p.split('/').next().unwrap_or("");
            let from_top =
                p.contains('/') && tops.contains(top) && (has_extension(&p) || p.ends_with('/'));
            let rust = p.ends_with(".rs");
            if (from_top || rust) && !found(&p) {
                missing.push(format!("{doc}: `{p}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files the docs name that are not in the tree:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_missing_file_is_caught() {
    let (files, _) = tree();
    assert!(files.contains("tools/src/audit/calls.rs"));
    assert_eq!(
        quoted_paths("see `tools/src/audit/calls.rs` and `tools/list` and `a b`"),
        ["tools/src/audit/calls.rs", "tools/list"]
    );
    assert!(has_extension("benches/ecosystem.sh"));
    assert!(!has_extension("tools/list"));
}
