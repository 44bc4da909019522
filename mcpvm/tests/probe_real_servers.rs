//! `mcpvm probe` against real MCP servers from npm and PyPI, run as bare
//! host processes (no KVM): @modelcontextprotocol/server-everything and
//! server-memory (TypeScript SDK, initialize lifecycle) and mcp-server-time
//! (Python SDK, stateless 2026-07-28). `probes/servers/install` (run by
//! scripts/build) installs them at locked versions.

mod common;

use common::{artifact, probe, step};
use serde_json::json;

fn server(name: &str) -> String {
    artifact(&format!("host-servers/bin/{name}"))
        .display()
        .to_string()
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mcpvm-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn server_everything_tools_prompts_resources_and_progress() {
    let dir = tempdir("everything");
    let calls = dir.join("calls.json");
    // A short long-running operation (its default is 10 s); the gzip tool
    // fetches a URL, and this machine has no network.
    std::fs::write(
        &calls,
        r#"{"trigger-long-running-operation": {"duration": 1, "steps": 4},
            "gzip-file-as-resource": "dangerous"}"#,
    )
    .unwrap();
    let (rc, r, err) = probe(&[
        "--exit-grace",
        "2",
        "--calls",
        calls.to_str().unwrap(),
        "--",
        &server("mcp-server-everything"),
        "stdio",
    ]);
    assert_eq!(
        rc,
        0,
        "{err} {}",
        serde_json::to_string_pretty(&r["verdict"]).unwrap()
    );
    // A TypeScript SDK server answers server/discover with "method not
    // found": the probe falls back to initialize on the same connection.
    assert_eq!(step(&r, "server/discover")["outcome"], "error");
    assert_eq!(r["lifecycle"], "initialize");
    assert_eq!(r["protocol_version"], "2025-11-25");
    assert_eq!(r["server_name"], "mcp-servers/everything");
    let names = |k: &str| r[k].as_array().unwrap().len();
    assert!(names("tools") >= 10, "{}", r["tools"]);
    assert!(names("prompts") >= 3, "{}", r["prompts"]);
    assert!(names("resources") >= 3, "{}", r["resources"]);
    assert!(
        names("resource_templates") >= 1,
        "{}",
        r["resource_templates"]
    );
    let long = step(&r, "tools/call:trigger-long-running-operation");
    assert_eq!(long["outcome"], "ok", "{long}");
    assert_eq!(long["progress_notifications"], 4, "{long}");
    // Generated from the schema: the first enum member.
    let annotated = step(&r, "tools/call:get-annotated-message");
    assert_eq!(
        annotated["detail"]["arguments"],
        json!({"messageType": "error"})
    );
    // Generated from the parameter's name ("message": some text).
    assert_eq!(
        step(&r, "tools/call:echo")["detail"]["text"],
        "Echo: hello from mcpvm"
    );
    assert_eq!(step(&r, "ping")["outcome"], "ok");
    let cancel = step(&r, "cancel");
    assert_eq!(cancel["outcome"], "ok", "{cancel}");
    // The slowest call was the one cancelled.
    assert_eq!(
        cancel["detail"]["cancelled"],
        "tools/call:trigger-long-running-operation"
    );
    // A finding: the two toggles start timers, and the server no longer
    // exits when its stdin closes; the probe kills it after the grace.
    assert_eq!(
        step(&r, "tools/call:toggle-simulated-logging")["outcome"],
        "ok"
    );
    assert_eq!(r["exit"]["exited_by_itself"], false, "{}", r["exit"]);
    assert_eq!(r["exit"]["signal"], 9);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn server_memory_writes_its_graph_and_destructive_tools_are_left_alone() {
    let dir = tempdir("memory");
    let file = dir.join("memory.jsonl");
    let env = format!("MEMORY_FILE_PATH={}", file.display());
    let (rc, r, err) = probe(&["--", "env", &env, &server("mcp-server-memory")]);
    assert_eq!(rc, 0, "{err} {}", r["verdict"]);
    assert_eq!(r["lifecycle"], "initialize");
    assert_eq!(step(&r, "tools/call:create_entities")["outcome"], "ok");
    for t in ["delete_entities", "delete_observations", "delete_relations"] {
        let s = step(&r, &format!("tools/call:{t}"));
        assert_eq!(s["outcome"], "skipped", "{s}");
    }
    // The entity made from generated arguments is in the graph and on disk.
    let graph = step(&r, "tools/call:read_graph")["detail"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(graph.contains("mcpvm-probe"), "{graph}");
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(stored.contains("mcpvm-probe"), "{stored}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn mcp_server_time_is_stateless_and_survives_the_robustness_probes() {
    let (rc, r, err) = probe(&[
        "--robustness",
        "--answer-timeout",
        "2",
        "--call",
        r#"get_current_time={"timezone":"UTC"}"#,
        "--",
        &server("mcp-server-time"),
    ]);
    assert_eq!(rc, 0, "{err} {}", r["verdict"]);
    assert_eq!(r["lifecycle"], "stateless");
    assert_eq!(r["protocol_version"], "2026-07-28");
    assert_eq!(r["server_name"], "mcp-time");
    // No initialize, and no ping in this revision.
    assert!(r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["step"] != "initialize" && s["step"] != "ping"));
    let now = step(&r, "tools/call:get_current_time");
    assert_eq!(now["outcome"], "ok", "{now}");
    assert!(
        now["detail"]["text"].as_str().unwrap().contains("UTC"),
        "{now}"
    );
    // Every request carried the stateless envelope.
    let sent = &now["exchange"][0]["message"];
    assert_eq!(
        sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    let class = |p: &str| {
        r["robustness"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["probe"] == p)
            .map(|x| x["class"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(class("unknown_method"), "handled");
    assert_eq!(class("huge_argument"), "handled");
    assert_eq!(class("unknown_tool"), "handled");
    assert_eq!(class("concurrent_requests"), "handled");
    assert_eq!(class("reopen"), "handled");
    // The Python SDK drops what it cannot parse as JSON-RPC.
    assert_eq!(class("malformed_json"), "ignored");
    assert!(r["verdict"]["malformed_input_breakage"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// The Streamable HTTP transport against the reference server on this
/// machine's loopback: the session it gives, the protocol version
/// `initialize` settles, its own stream (GET) once initialized, and the
/// session ended (DELETE) when the probe is done.
#[test]
fn server_everything_over_streamable_http() {
    // A free port, chosen by the kernel, handed to the server as PORT.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let opts = probes::ProbeOptions {
        http: Some(probes::transport::http::Endpoint {
            authority: format!("127.0.0.1:{port}"),
            path: "/mcp".into(),
            token: None,
        }),
        env: vec![("PORT".into(), port.to_string())],
        calls: [(
            "echo".to_string(),
            probes::ToolArgs::Given(json!({"message": "over http"}).as_object().unwrap().clone()),
        )]
        .into(),
        only_given: true,
        exit_grace: std::time::Duration::from_secs(2),
        ..probes::ProbeOptions::default()
    };
    let command = [server("mcp-server-everything"), "streamableHttp".into()];
    let r = probes::probe_process(&command, &opts).unwrap();
    let r = serde_json::to_value(&r).unwrap();
    assert_eq!(r["lifecycle"], "initialize", "{r}");
    assert_eq!(r["protocol_version"], "2025-11-25", "{r}");
    for s in ["initialize", "tools/list", "tools/call:echo"] {
        assert_eq!(step(&r, s)["outcome"], "ok", "{s}: {}", step(&r, s));
    }
    assert!(
        step(&r, "tools/call:echo")
            .to_string()
            .contains("over http"),
        "{}",
        step(&r, "tools/call:echo")
    );
    // Its stdout is a log of the requests it got.
    let log = r["stderr"]["tail"].as_str().unwrap();
    for seen in [
        "Received MCP GET request",
        "Received session termination request",
    ] {
        assert!(log.contains(seen), "not seen: {seen}: {log}");
    }
}
