//! `mcpvm probe` against servers run as plain host processes (no KVM):
//! the fixture MCP server, a server that never answers, one that crashes.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::artifact;

fn probe(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .arg("probe")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap(), json, stderr)
}

fn step<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {r}"))
}

#[test]
fn fixture_answers_every_step() {
    let fixture = artifact("bin/mcp-fixture");
    let (rc, r, err) = probe(&[
        "--call",
        r#"add={"a":2,"b":40}"#,
        "--call",
        r#"echo={"text":"hi"}"#,
        "--call",
        r#"write={"bytes":5000}"#,
        "--",
        fixture.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{r} {err}");
    assert_eq!(r["schema"], 1);
    assert_eq!(r["server_name"], "mcp-fixture");
    assert_eq!(
        r["tools"],
        serde_json::json!(["add", "alloc", "echo", "exit", "sleep", "write"])
    );
    assert!(
        r["protocol_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("20")),
        "{r}"
    );
    assert_eq!(step(&r, "tools/call:add")["detail"], "42");
    assert_eq!(step(&r, "tools/call:echo")["detail"], "hi");
    assert_eq!(
        step(&r, "tools/call:write")["detail"]
            .as_str()
            .unwrap()
            .len(),
        5000
    );
    let init = step(&r, "initialize")["at_ms"].as_f64().unwrap();
    let list = step(&r, "tools/list")["at_ms"].as_f64().unwrap();
    assert!(0.0 < init && init <= list, "{r}");
}

#[test]
fn a_crashing_tool_is_not_reported_ok() {
    let fixture = artifact("bin/mcp-fixture");
    let (rc, r, _) = probe(&[
        "--step-timeout",
        "10",
        "--call",
        r#"exit={"code":3}"#,
        "--",
        fixture.to_str().unwrap(),
    ]);
    assert_eq!(rc, 3);
    let outcome = step(&r, "tools/call:exit")["outcome"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(outcome == "closed" || outcome == "error", "{r}");
}

#[test]
fn a_server_that_never_answers_times_out() {
    let t = Instant::now();
    let (rc, r, _) = probe(&["--init-timeout", "2", "--", "sleep", "600"]);
    assert_eq!(rc, 3);
    assert_eq!(step(&r, "initialize")["outcome"], "timeout");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the probe must not hang"
    );
}

#[test]
fn a_missing_command_is_one_clear_error() {
    let (rc, _, err) = probe(&["--", "/nonexistent/server"]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("/nonexistent/server"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bad_call_syntax_is_a_usage_error() {
    let (rc, _, err) = probe(&["--call", "add=[1,2]", "--", "true"]);
    assert_eq!(rc, 2);
    assert!(err.contains("must be a JSON object"), "{err}");
}
