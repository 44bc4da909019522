//! The withholding sweep's table (benches/lib/needs-table.py, docs/
//! withholding.md): from an audit's effects.json and proposals.json, one
//! row a profile counting who kept every tool, lost some or broke, with
//! what a server named kept as data.

mod common;

use serde_json::json;

#[test]
fn each_profile_counts_the_servers_that_kept_lost_or_broke_and_names_stay_data() {
    let dir = tempfile::tempdir().unwrap();
    let effects = json!([
        // kept every tool
        {"server": "memory", "profile": "no-tmp", "outcome": "ok", "effect": "same",
         "lost": [], "kept": 9, "denied": []},
        // lost one, with a hostile tool name
        {"server": "git", "profile": "no-tmp", "outcome": "degraded", "effect": "new_failures",
         "lost": ["commit|<b>x</b>"], "kept": 11, "denied": []},
        // broken outright
        {"server": "fetch", "profile": "no-tmp", "outcome": "crash", "effect": "newly_broken",
         "lost": ["fetch"], "kept": 0, "denied": []},
        // nothing worked at baseline: not judged
        {"server": "slack", "profile": "no-tmp", "outcome": "degraded", "effect": "same",
         "lost": [], "kept": 0, "denied": []},
        // nothing worked at baseline, and the profile stopped it starting
        {"server": "azure", "profile": "no-tmp", "outcome": "broken", "effect": "newly_broken",
         "lost": [], "kept": 0, "denied": []},
        {"server": "memory", "profile": "deny-exec", "outcome": "ok", "effect": "same",
         "lost": [], "kept": 9, "denied": ["execve EPERM ×1"]},
        // a cell that did not run: not judged either
        {"server": "git", "profile": "deny-exec", "outcome": "error", "effect": "unjudged",
         "lost": [], "kept": 0, "denied": []},
    ]);
    let audit = json!({"profile_definitions": {
        "no-tmp": {"description": "/tmp is empty and read-only"},
        "deny-exec": {"description": "Processes the server spawns cannot execve"},
    }});
    let proposals = json!([
        {"server": "memory", "proposer": "baseline", "verdict": "holds", "tools": 9, "denied": []},
        {"server": "git", "proposer": "baseline", "verdict": "breaks", "lost": ["git_log"], "denied": ["pipe2"]},
        {"server": "slack", "proposer": "", "verdict": "not_checked", "why": "no allow-list"},
        {"server": "fetch", "proposer": "baseline", "verdict": "holds", "tools": 0, "denied": []},
    ]);
    let write = |name: &str, v: &serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let (e, a, p) = (
        write("effects.json", &effects),
        write("audit.json", &audit),
        write("proposals.json", &proposals),
    );
    let t = common::bench_script(
        "benches/lib/needs-table.py",
        &[
            "--effects".as_ref(),
            e.as_os_str(),
            "--audit".as_ref(),
            a.as_os_str(),
            "--proposals".as_ref(),
            p.as_os_str(),
        ],
    );
    let row = t.lines().find(|l| l.starts_with("| no-tmp |")).unwrap();
    assert!(
        row.contains("| 3 | 1 | 1 | 1 | 1 |"),
        "3 judged: 1 kept, 1 lost, 1 broke; 1 broken with no tool working: {row}"
    );
    assert!(
        row.contains("azure (broken, no tool working at baseline)"),
        "{row}"
    );
    assert!(row.contains("fetch (crash)"), "{row}");
    assert!(row.contains("git: commit\\|\\<b\\>x\\</b\\>"), "{row}");
    assert!(t
        .lines()
        .any(|l| l.starts_with("| deny-exec |") && l.contains("| 1 | 1 | 0 | 0 | 0 |")));
    assert!(t.contains(
        "checked: 4; hold 2 (1 of them for a server with no tool working at baseline: its start and listing held), break a tool 1, vary without a denial 0, not checked 1"
    ), "{t}");
    assert!(t.contains("- git: lost git\\_log; denied pipe2"), "{t}");
    assert!(t.contains("- slack: not checked: no allow-list"), "{t}");
}

/// A sweep of two sittings: a server's later cell replaces its earlier
/// one, and an earlier sitting's cells of a profile defined differently
/// since are dropped and said to be.
#[test]
fn sittings_combine_and_a_profile_redefined_since_keeps_only_its_new_cells() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let cell = |server: &str, profile: &str, lost: &[&str]| {
        json!({"server": server, "profile": profile, "outcome": "ok",
               "effect": if lost.is_empty() { "same" } else { "new_failures" },
               "lost": lost, "kept": 3, "denied": []})
    };
    let first = write(
        "e1.json",
        json!([
            cell("atlassian", "no-env", &["jira_get"]),
            cell("atlassian", "no-tmp", &[]),
            cell("filesystem", "no-tmp", &["write_file"]),
        ]),
    );
    let first_audit = write(
        "a1.json",
        json!({"profile_definitions": {
            "no-env": {"description": "an empty environment"},
            "no-tmp": {"description": "/tmp is empty and read-only"}}}),
    );
    let second = write(
        "e2.json",
        json!([
            cell("filesystem", "no-tmp", &[]),
            cell("memory", "no-env", &[]),
        ]),
    );
    let second_audit = write(
        "a2.json",
        json!({"profile_definitions": {
            "no-env": {"description": "an empty environment but what the installation needs"},
            "no-tmp": {"description": "/tmp is empty and read-only"}}}),
    );
    let args = [
        "--effects".as_ref(),
        first.as_os_str(),
        "--audit".as_ref(),
        first_audit.as_os_str(),
        "--effects".as_ref(),
        second.as_os_str(),
        "--audit".as_ref(),
        second_audit.as_os_str(),
    ];
    let t = common::bench_script("benches/lib/needs-table.py", &args);
    let row = |p: &str| {
        t.lines()
            .find(|l| l.starts_with(&format!("| {p} |")))
            .unwrap_or_else(|| panic!("no {p} row: {t}"))
            .to_string()
    };
    // filesystem's later no-tmp cell (kept) replaced its earlier loss.
    assert!(row("no-tmp").contains("| 2 | 2 | 0 | 0 |"), "{t}");
    // atlassian's no-env loss was measured under the old definition.
    let no_env = row("no-env");
    assert!(
        no_env.contains("but what the installation needs | 1 | 1 | 0 | 0 |"),
        "{t}"
    );
    assert!(!no_env.contains("atlassian"), "{t}");
    assert!(
        t.contains(
            "no-env: 1 cells of an earlier sitting dropped, measured under an earlier definition"
        ),
        "{t}"
    );
}
