//! Catalogued MCP servers (npm and PyPI packages on the runtime image plus
//! their layers, built by `mcpvm image build` in scripts/build) answering
//! a real MCP client inside microVMs, on real KVM (the testbed here).

mod common;

use std::sync::OnceLock;

use common::{run_scenario_within, Case, Results};

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let mut files = common::run_payload();
        // The store as built: the index and every image it names.
        files.extend(common::image_store_files(&[]));
        let scenario = common::workspace().join("mcpvm/tests/scenarios/servers.sh");
        // Node and python start-ups under nested emulation take tens of
        // seconds each (docs/testbed.md).
        run_scenario_within(&scenario, &files, 1500)
    })
}

fn case(name: &str) -> &'static Case {
    results().case(name)
}

fn answered(name: &str) -> serde_json::Value {
    let c = case(&format!("server_{name}"));
    assert_eq!(c.rc, 0, "{name}: {c:?}");
    let r = c.json();
    assert_eq!(r["transport"], "vm");
    assert!(r["lifecycle"].is_string(), "{name}: no handshake: {r}");
    assert!(
        !r["tools"].as_array().unwrap().is_empty(),
        "{name}: no tools: {r}"
    );
    r
}

#[test]
fn node_servers_answer_in_a_vm() {
    // server-memory and server-sequential-thinking: audit_linux.rs, in
    // the baseline runs of its audit.
    let r = answered("everything");
    assert_eq!(r["lifecycle"], "initialize");
    assert!(!r["prompts"].as_array().unwrap().is_empty());
}

#[test]
fn python_servers_answer_in_a_vm() {
    // Report every server that failed, not only the first.
    // mcp-server-git: audit_linux.rs (baseline and deny-exec runs).
    let failed: Vec<&str> = ["time", "sqlite", "markitdown"]
        .into_iter()
        .filter(|s| std::panic::catch_unwind(|| answered(s)).is_err())
        .collect();
    assert!(failed.is_empty(), "no answer in a VM from: {failed:?}");
    assert_eq!(answered("time")["lifecycle"], "stateless");
}

fn call<'a>(r: &'a serde_json::Value, tool: &str) -> &'a serde_json::Value {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == format!("tools/call:{tool}"))
        .unwrap_or_else(|| panic!("no call of {tool}: {r}"))
}

#[test]
fn the_filesystem_server_works_on_a_host_workspace_written_back_only_when_writable() {
    for (case, listing) in [
        ("filesystem", "ws_ro_after.txt"),
        ("filesystem_rw", "ws_rw_after.txt"),
    ] {
        let r = answered(case);
        let read = call(&r, "read_text_file");
        assert_eq!(read["outcome"], "ok", "{read}");
        assert!(
            read["detail"]["text"]
                .as_str()
                .unwrap()
                .contains("hello from the host workspace"),
            "{read}"
        );
        // Inside the guest the write succeeds either way.
        assert_eq!(call(&r, "write_file")["outcome"], "ok");
        let files: Vec<&str> = results().file(listing).split_whitespace().collect();
        if case == "filesystem" {
            assert_eq!(files, ["hello.txt"], "read-only: nothing came back");
        } else {
            assert_eq!(files, ["hello.txt", "new.txt"]);
        }
    }
    assert_eq!(results().file("ws_rw_new.txt"), "written-in-the-guest");
}

#[test]
fn missing_credentials_and_unknown_servers_are_clear_errors() {
    let c = case("server_needs_key");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(
        c.stderr.contains("needs the credential GITHUB_TOKEN"),
        "{}",
        c.stderr
    );
    let c = case("server_unknown");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(
        c.stderr.contains("No server 'no-such-server'"),
        "{}",
        c.stderr
    );
}
