//! `mcpvm audit` on real KVM (the testbed here): real catalogued servers
//! under withholding profiles, the outcomes and evidence in the reports,
//! an interrupted audit that resumes without repeating a cell, and the
//! allow-list profile it proposes working for its server.

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::{run_scenario_within, Results};
use serde_json::Value;

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let mut files = common::run_payload();
        files.extend(common::image_store_files(&[
            "memory",
            "git",
            "sequential-thinking",
        ]));
        let scenario = common::workspace().join("mcpvm/tests/scenarios/audit.sh");
        // Twelve runs of node and python servers under nested emulation.
        run_scenario_within(&scenario, &files, 2400)
    })
}

/// results.jsonl by (server, profile).
fn records() -> BTreeMap<(String, String), Value> {
    results()
        .file("results.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            let key = (
                r["server"].as_str().unwrap().to_string(),
                r["profile"].as_str().unwrap().to_string(),
            );
            (key, r)
        })
        .collect()
}

fn record(server: &str, profile: &str) -> Value {
    records()
        .remove(&(server.to_string(), profile.to_string()))
        .unwrap_or_else(|| panic!("no record for {server} × {profile}"))
}

#[test]
fn every_server_passes_its_baseline_and_logs_its_calls() {
    for s in ["memory", "git", "sequential-thinking"] {
        let r = record(s, "baseline");
        assert_eq!(r["outcome"], "ok", "{r}");
        assert!(r["timings"]["handshake_ms"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["timings"]["boot_ms"].as_f64().unwrap() > 0.0, "{r}");
        let used = r["syscalls_used"].as_array().unwrap();
        assert!(used.iter().any(|u| u["syscall"] == "execve"), "{r}");
        assert!(results()
            .file(&format!("proposal_{s}-minimal.toml"))
            .contains("allow = ["));
    }
}

#[test]
fn deny_exec_breaks_mcp_server_git_with_execve_as_evidence() {
    let r = record("git", "deny-exec");
    assert!(
        matches!(r["outcome"].as_str(), Some("degraded" | "broken")),
        "{r}"
    );
    let denied = r["evidence"]["denied"].as_array().unwrap();
    assert!(
        denied
            .iter()
            .any(|d| d["syscall"] == "execve" && d["errno"] == "EPERM"),
        "{r}"
    );
    // A server that runs no programs does not notice.
    assert_eq!(record("memory", "deny-exec")["outcome"], "ok");
}

#[test]
fn a_server_that_writes_its_file_fails_without_a_writable_tmp_with_erofs() {
    // server-memory keeps its graph in /tmp/memory.jsonl (the catalogue's
    // MEMORY_FILE_PATH): without /tmp its write fails, with the root
    // read-only it does not care.
    let r = record("memory", "no-tmp");
    assert_eq!(r["outcome"], "degraded", "{r}");
    assert!(r.to_string().contains("EROFS"), "{r}");
    assert_eq!(record("memory", "ro-root")["outcome"], "ok");
}

#[test]
fn the_interrupted_audit_resumed_without_repeating_a_cell() {
    assert_ne!(results().file("first.rc").trim(), "0");
    assert_eq!(results().file("after_kill.txt").trim(), "", "left running");
    let first: Value = serde_json::from_str(results().file("first_record.json")).unwrap();
    let resume = results().case("resume");
    assert_eq!(resume.rc, 0, "{resume:?}");
    assert!(
        resume
            .stderr
            .contains("12 runs, 1 already recorded, 11 to go"),
        "{}",
        resume.stderr
    );
    let lines = results().file("results.jsonl").lines().count();
    assert_eq!(lines, 12);
    assert_eq!(records().len(), 12, "one line per cell");
    let again = record(
        first["server"].as_str().unwrap(),
        first["profile"].as_str().unwrap(),
    );
    assert_eq!(again, first, "the recorded cell was not run again");
}

#[test]
fn the_reports_show_the_matrix_and_the_evidence() {
    let md = results().file("report.md");
    assert!(
        md.contains("| server | baseline | no-tmp | deny-exec | ro-root |"),
        "{md}"
    );
    assert!(md.contains("12 of 12 runs recorded"), "{md}");
    assert!(md.contains("denied execve"), "{md}");
    let html = results().file("report.html");
    assert!(html.contains("<svg") && html.contains("class=\"grid\""));
    let meta: Value = serde_json::from_str(results().file("audit.json")).unwrap();
    assert_eq!(meta["servers"]["git"]["package"], "mcp-server-git");
    assert!(meta["profile_definitions"]["deny-exec"]["policy"]["seccomp"].is_object());
    assert_eq!(meta["kernel_sha256"].as_str().unwrap().len(), 16);
}

#[test]
fn the_proposed_allow_list_runs_the_server_it_came_from() {
    let c = results().case("proposal");
    assert_eq!(c.rc, 0, "{c:?}");
    let r = c.json();
    let calls: Vec<&Value> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["step"].as_str().unwrap().starts_with("tools/call:"))
        .collect();
    assert!(
        !calls.is_empty() && calls.iter().all(|s| s["outcome"] == "ok"),
        "{r}"
    );
}
