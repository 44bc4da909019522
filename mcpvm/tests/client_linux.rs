//! `mcpvm audit --config` on real KVM (directly, or in the testbed): a
//! client's configuration of real published packages, an `npx` and a
//! `uvx` entry, audited side by side in microVMs beside entries it cannot
//! run (scenarios/client.sh; docs/security-audit.md, "Auditing the setup
//! a user has").

mod common;

use std::sync::OnceLock;

use common::{run_scenario_within, Results};
use serde_json::Value;

/// The two packages' layers, as scripts/build stores them.
const MEMORY: &str = "npm-modelcontextprotocol-server-memory-2026-8-31";
const TIME: &str = "pypi-mcp-server-time-2026-10-19";

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let mut files = common::run_payload();
        files.extend(common::image_store_files(&[MEMORY, TIME]));
        let scenario = common::workspace().join("mcpvm/tests/scenarios/client.sh");
        // Four cells, each a server started under nested emulation.
        run_scenario_within(&scenario, &files, 1800)
    })
}

fn json(file: &str) -> Value {
    let text = results().file(file);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}: {text}"))
}

fn records() -> Vec<Value> {
    results()
        .file("client_results.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn the_configured_packages_are_audited_side_by_side_and_the_rest_say_why() {
    let c = results().case("client");
    assert_eq!(c.rc, 0, "{c:?}");
    for (name, why) in [("script", "a local command"), ("remote", "remote server")] {
        assert!(
            c.stderr
                .lines()
                .any(|l| l.starts_with(&format!("audit: {name}: not run: ")) && l.contains(why)),
            "{name}: {c:?}"
        );
    }
    // Found in the store: nothing was built, so nothing was fetched.
    assert!(c.stderr.contains("image: every layer is in"), "{c:?}");
    let setup = json("client_setup.json");
    let kinds: Vec<(&str, &str)> = setup["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["kind"].as_str().unwrap()))
        .collect();
    for row in [
        ("memory", "package"),
        ("time", "package"),
        ("script", "not_run"),
        ("remote", "not_run"),
    ] {
        assert!(kinds.contains(&row), "{row:?} in {kinds:?}");
    }
    // Each package ran in its microVM, its baseline and its security
    // cell, and listed its tools.
    let records = records();
    for server in [MEMORY, TIME] {
        for profile in ["baseline", "security"] {
            let r = records
                .iter()
                .find(|r| r["server"] == server && r["profile"] == profile)
                .unwrap_or_else(|| panic!("no {server} × {profile} in {records:?}"));
            assert!(
                r["tools_listed"].as_array().is_some_and(|t| !t.is_empty()),
                "{server} × {profile}: {r}"
            );
        }
    }
    // Neither reaches out, reads a secret or writes outside its roots:
    // the report says there is no chain, rather than nothing.
    let report = results().file("client_report.md");
    assert!(
        report.contains("## Flows across the servers") && report.contains("No chain found."),
        "{report}"
    );
}

#[test]
fn nothing_the_configuration_names_runs_on_the_host_and_the_file_is_only_read() {
    let host = results().file("host.txt");
    assert!(host.contains("the configuration is unchanged"), "{host}");
    assert!(!host.contains("a configured command ran"), "{host}");
}

#[test]
fn fix_wraps_each_audited_package_and_leaves_the_rest_as_they_were() {
    let fixed = json("client_fixed-config.json");
    let servers = &fixed["mcpServers"];
    for (name, spec) in [
        (
            "memory",
            "npm:@modelcontextprotocol/server-memory@2026.8.31",
        ),
        ("time", "pypi:mcp-server-time==2026.10.19"),
    ] {
        let args: Vec<&str> = servers[name]["args"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {fixed}"))
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            args.first() == Some(&"run") && args.windows(2).any(|w| w == ["--package", spec]),
            "{name}: {args:?}"
        );
    }
    assert_eq!(
        servers["script"]["args"],
        serde_json::json!(["-c", "touch /tmp/a-configured-command-ran"])
    );
    assert_eq!(servers["remote"]["url"], "https://mcp.example.com/mcp");
}
