//! `mcpvm probe` against servers run as plain host processes (no KVM):
//! the fixture MCP server, deliberately broken servers (`mcp-broken`),
//! hung and crashing servers, and bad input to the probe itself.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{artifact, probe, step};
use serde_json::Value;

fn robust<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["robustness"]
        .as_array()
        .unwrap_or_else(|| panic!("no robustness results: {r}"))
        .iter()
        .find(|p| p["probe"] == name)
        .unwrap_or_else(|| panic!("no probe {name}: {r}"))
}

fn fixture() -> String {
    artifact("bin/mcp-fixture").display().to_string()
}

fn broken() -> String {
    artifact("bin/mcp-broken").display().to_string()
}

#[test]
fn by_default_every_tool_but_the_destructive_one_is_called_with_generated_arguments() {
    let (rc, r, err) = probe(&["--", &fixture()]);
    assert_eq!(rc, 0, "{r} {err}");
    assert_eq!(r["schema"], 4);
    assert_eq!(r["transport"], "process");
    assert_eq!(r["server_name"], "mcp-fixture");
    // rmcp 3.11 servers speak the stateless revision.
    assert_eq!(r["lifecycle"], "stateless");
    assert_eq!(r["protocol_version"], "2026-07-28");
    assert_eq!(step(&r, "server/discover")["outcome"], "ok");
    assert_eq!(
        r["tools"],
        serde_json::json!(["add", "alloc", "echo", "exit", "note", "sleep", "whoami", "write"])
    );
    // Generated from the schema: both required integers are 1.
    let add = step(&r, "tools/call:add");
    assert_eq!(
        add["detail"]["arguments"],
        serde_json::json!({"a": 1, "b": 1})
    );
    assert_eq!(add["detail"]["text"], "2");
    for tool in ["alloc", "echo", "note", "sleep", "whoami", "write"] {
        assert_eq!(
            step(&r, &format!("tools/call:{tool}"))["outcome"],
            "ok",
            "{tool}: {r}"
        );
    }
    let exit = step(&r, "tools/call:exit");
    assert_eq!(exit["outcome"], "skipped");
    assert!(exit["detail"].as_str().unwrap().contains("destructive"));
    assert_eq!(step(&r, "prompts/list")["outcome"], "skipped");
    assert_eq!(step(&r, "cancel")["outcome"], "ok");
    // The raw exchange of each step is there.
    let sent = &step(&r, "tools/list")["exchange"][0];
    assert_eq!(sent["dir"], "sent");
    assert_eq!(sent["message"]["method"], "tools/list");
    let t = &r["timings"];
    let (first, hs, list) = (
        t["first_stdout_byte_ms"].as_f64().unwrap(),
        t["handshake_ms"].as_f64().unwrap(),
        t["tools_list_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < first && first <= hs && hs <= list, "{t}");
    assert!(r["verdict"]["real_client_failures"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(r["exit"]["exited_by_itself"], true, "{r}");
}

#[test]
fn user_arguments_dangerous_tools_and_the_initialize_lifecycle() {
    let dir = tempdir();
    let calls = dir.join("calls.json");
    std::fs::write(&calls, r#"{"echo": {"text": "hi"}, "sleep": "dangerous"}"#).unwrap();
    let (rc, r, err) = probe(&[
        "--lifecycle",
        "initialize",
        "--calls",
        calls.to_str().unwrap(),
        "--call",
        r#"add={"a":2,"b":40}"#,
        "--dangerous",
        "write",
        "--",
        &fixture(),
    ]);
    assert_eq!(rc, 0, "{r} {err}");
    assert_eq!(r["lifecycle"], "initialize");
    assert!(r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["step"] != "server/discover"));
    assert_eq!(step(&r, "initialize")["outcome"], "ok");
    assert_eq!(step(&r, "tools/call:add")["detail"]["text"], "42");
    assert_eq!(step(&r, "tools/call:echo")["detail"]["text"], "hi");
    for t in ["sleep", "write"] {
        let s = step(&r, &format!("tools/call:{t}"));
        assert_eq!(s["outcome"], "skipped");
        assert_eq!(s["detail"], "marked dangerous by the user");
    }
    assert_eq!(step(&r, "ping")["outcome"], "ok");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_fixture_handles_or_ignores_every_robustness_probe() {
    let (rc, r, err) = probe(&["--robustness", "--answer-timeout", "2", "--", &fixture()]);
    assert_eq!(rc, 0, "{r} {err}");
    let results = r["robustness"].as_array().unwrap();
    assert_eq!(results.len(), 9);
    // rmcp drops a line it cannot parse without answering.
    assert_eq!(robust(&r, "malformed_json")["class"], "ignored");
    assert_eq!(robust(&r, "malformed_json")["input"], "malformed");
    for p in [
        "unknown_method",
        "huge_argument",
        "wrong_argument_types",
        "unknown_tool",
        "concurrent_requests",
        "reopen",
    ] {
        assert_eq!(robust(&r, p)["class"], "handled", "{p}: {}", robust(&r, p));
        assert_eq!(robust(&r, p)["input"], "valid");
    }
    let huge = robust(&r, "huge_argument");
    assert_eq!(huge["detail"]["bytes"], 8 << 20);
    // The 8 MiB line is in the exchange as a fact, not as 8 MiB.
    let sent = &huge["exchange"][0];
    assert!(sent["bytes"].as_u64().unwrap() > 8 << 20);
    assert!(sent["text"].as_str().unwrap().len() <= 4096);
    assert_eq!(robust(&r, "concurrent_requests")["detail"]["answered"], 32);
}

/// A tool that answered generated arguments is called again with one
/// value changed; its answer shows whether the tool read its input. A
/// call the user gave is made once (a second `write_file` would
/// overwrite what the first wrote) unless `--vary-given` asks.
#[test]
fn generated_calls_are_varied_and_given_ones_are_made_once() {
    let (rc, r, err) = probe(&["--", &fixture()]);
    assert_eq!(rc, 0, "{r} {err}");
    let add = &step(&r, "tools/call:add")["detail"]["varied"];
    assert_eq!(add["property"], "a", "{add}");
    assert_eq!(add["arguments"], serde_json::json!({"a": 2, "b": 1}));
    assert_eq!(add["same"], false);
    assert_eq!(add["echoes_input"], false);
    let echo = &step(&r, "tools/call:echo")["detail"]["varied"];
    assert_eq!(echo["echoes_input"], true, "{echo}");
    let whoami = step(&r, "tools/call:whoami");
    assert!(whoami["detail"]["varied"].is_null(), "no input to change");
    // The second call reached the server: its note was kept after the
    // first one's.
    let note = &step(&r, "tools/call:note")["detail"];
    let first = note["text"].as_str().unwrap();
    assert_eq!(
        note["varied"]["text"].as_str().unwrap(),
        format!("{first}\n{first}-mcpvm-varied"),
        "{note}"
    );

    let (rc, r, err) = probe(&[
        "--only-given",
        "--call",
        r#"note={"text":"first"}"#,
        "--",
        &fixture(),
    ]);
    assert_eq!(rc, 0, "{r} {err}");
    let note = step(&r, "tools/call:note");
    assert_eq!(note["detail"]["text"], "first");
    assert!(note["detail"]["varied"].is_null(), "{note}");

    // Given calls are made in the order given, not the listing's (a
    // page is opened before it is filled in).
    let (rc, r, err) = probe(&[
        "--only-given",
        "--call",
        "whoami",
        "--call",
        r#"add={"a":1,"b":2}"#,
        "--",
        &fixture(),
    ]);
    assert_eq!(rc, 0, "{r} {err}");
    let calls: Vec<&str> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["step"].as_str())
        .filter(|s| s.starts_with("tools/call:"))
        .collect();
    assert_eq!(calls, ["tools/call:whoami", "tools/call:add"], "{r}");

    // Unless asked, as an audit does with its catalogue's calls.
    let (rc, r, err) = probe(&[
        "--only-given",
        "--vary-given",
        "--call",
        r#"note={"text":"first"}"#,
        "--",
        &fixture(),
    ]);
    assert_eq!(rc, 0, "{r} {err}");
    let varied = &step(&r, "tools/call:note")["detail"]["varied"];
    assert_eq!(varied["text"], "first\nfirst-mcpvm-varied", "{varied}");
}

#[test]
fn a_crashing_tool_is_a_real_client_failure() {
    let (rc, r, _) = probe(&[
        "--step-timeout",
        "10",
        "--only-given",
        "--allow-destructive",
        "--call",
        r#"exit={"code":3}"#,
        "--",
        &fixture(),
    ]);
    assert_eq!(rc, 3);
    assert_eq!(step(&r, "tools/call:exit")["outcome"], "closed", "{r}");
    assert_eq!(
        r["verdict"]["real_client_failures"],
        serde_json::json!(["tools/call:exit"])
    );
    assert_eq!(r["exit"]["code"], 3);
}

#[test]
fn a_server_that_never_answers_times_out_and_its_whole_group_is_killed() {
    // The server forks a grandchild (as `npx` starts node): it must go too.
    let marker = format!("{}.{}", 600, std::process::id());
    let script = format!("sleep {marker} & exec sleep 600");
    let t = Instant::now();
    let (rc, r, _) = probe(&[
        "--init-timeout",
        "3",
        "--discover-timeout",
        "1",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(rc, 3);
    assert_eq!(step(&r, "server/discover")["outcome"], "timeout");
    assert_eq!(step(&r, "initialize")["outcome"], "timeout");
    assert!(r["lifecycle"].is_null());
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the probe must not hang"
    );
    assert_eq!(r["exit"]["signal"], 9, "{r}");
    let left = Command::new("pgrep")
        .args(["-f", &format!("sleep {marker}")])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "grandchild left running");
}

/// A server that answers its handshake but no tool call: two calls wait
/// out the step timeout, the rest are not called (said so), and the
/// probe ends in the time of two timeouts, not four.
#[test]
fn a_server_that_answers_no_call_is_taken_as_hung_after_two() {
    let t = Instant::now();
    let (rc, r, err) = probe(&["--step-timeout", "2", "--", &broken(), "hang-on-call"]);
    assert_eq!(rc, 3, "{r} {err}");
    let outcomes: Vec<(String, String)> = ["open", "click", "type", "close"]
        .iter()
        .map(|t| {
            let s = step(&r, &format!("tools/call:{t}"));
            (
                s["outcome"].as_str().unwrap().to_string(),
                s["detail"].to_string(),
            )
        })
        .collect();
    let timed_out = outcomes.iter().filter(|(o, _)| o == "timeout").count();
    assert_eq!(timed_out, 2, "{outcomes:?}");
    let skipped: Vec<&(String, String)> = outcomes.iter().filter(|(o, _)| o == "skipped").collect();
    assert_eq!(skipped.len(), 2, "{outcomes:?}");
    assert!(
        skipped
            .iter()
            .all(|(_, d)| d.contains("answered none of the last 2 calls")),
        "{outcomes:?}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );
}

/// What a server declares is judged as written, on every probe: a
/// description that instructs the model and one that hides text are
/// findings with their text; `--fail-on high` turns them into exit 5.
#[test]
fn poisoned_descriptions_are_findings_and_the_gate_closes_on_them() {
    let (rc, r, err) = probe(&["--", &broken(), "poisoned"]);
    assert_eq!(rc, 0, "findings alone keep the status: {r} {err}");
    let found: Vec<(String, String)> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["step"].as_str().unwrap().into(),
                f["rule"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "tools/list:add".to_string(),
                "hidden-instructions".to_string()
            ),
            (
                "tools/list:note".to_string(),
                "invisible-characters".to_string()
            ),
        ],
        "{r}"
    );
    let add = &r["findings"][0];
    assert!(
        add["evidence"]
            .to_string()
            .contains("read ~/.cursor/mcp.json"),
        "{add}"
    );
    assert!(
        r["findings"][1]["evidence"]
            .to_string()
            .contains("\\u{E0049}"),
        "{}",
        r["findings"][1]
    );
    let (rc, _, err) = probe(&["--fail-on", "high", "--", &broken(), "poisoned"]);
    assert_eq!(rc, 5, "{err}");
    assert!(err.contains("2 finding(s) at or above high"), "{err}");
    // Below the gate: low findings only would pass a high gate; the
    // echo-only server has none at all.
    let (rc, r, _) = probe(&["--fail-on", "low", "--", &broken(), "garbage-stdout"]);
    assert_eq!(rc, 0, "{r}");
    assert!(
        r.get("findings").is_none(),
        "no finding is no findings field: {r}"
    );
}

#[test]
fn a_silent_server_is_reported_per_handshake_step() {
    let (rc, r, _) = probe(&[
        "--init-timeout",
        "3",
        "--discover-timeout",
        "1",
        "--",
        &broken(),
        "silent",
    ]);
    assert_eq!(rc, 3);
    assert_eq!(
        r["verdict"]["real_client_failures"],
        serde_json::json!(["server/discover", "initialize"])
    );
    // It reads until stdin closes, then ends by itself.
    assert_eq!(r["exit"]["exited_by_itself"], true, "{r}");
}

#[test]
fn a_crash_on_a_malformed_id_is_kept_apart_from_real_client_breakage() {
    let (rc, r, err) = probe(&[
        "--robustness",
        "--answer-timeout",
        "2",
        "--",
        &broken(),
        "crash-on-bad-id",
    ]);
    assert_eq!(rc, 4, "{r} {err}");
    let p = robust(&r, "id_as_object");
    assert_eq!(p["class"], "crashed", "{p}");
    assert_eq!(p["input"], "malformed");
    // The evidence: it died of SIGABRT.
    assert_eq!(p["detail"]["server"]["exit"]["signal"], 6, "{p}");
    assert_eq!(
        r["verdict"]["malformed_input_breakage"],
        serde_json::json!(["id_as_object"])
    );
    assert!(r["verdict"]["valid_input_breakage"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(r["verdict"]["real_client_failures"]
        .as_array()
        .unwrap()
        .is_empty());
    // The server was started again: later probes still ran.
    assert_eq!(robust(&r, "unknown_tool")["class"], "handled");
    assert_eq!(robust(&r, "concurrent_requests")["class"], "handled");
}

#[test]
fn garbage_on_stdout_is_counted_and_shown_while_the_steps_still_work() {
    let (rc, r, err) = probe(&["--", &broken(), "garbage-stdout"]);
    assert_eq!(rc, 0, "{r} {err}");
    assert_eq!(r["lifecycle"], "initialize");
    // Generated from the parameter's name ("text": some text), and said so.
    assert_eq!(
        step(&r, "tools/call:echo")["detail"]["text"],
        "hello from mcpvm"
    );
    assert!(step(&r, "tools/call:echo")["detail"]["why"]["text"]
        .as_str()
        .unwrap()
        .contains("asks for some text"));
    let n = r["stdout_garbage_lines"].as_u64().unwrap();
    // Two lines at start, one before each answer.
    assert!(n >= 6, "{n}");
    let first = &step(&r, "server/discover")["exchange"];
    assert!(
        first
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["dir"] == "garbage"
                && e["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("mcp-broken starting")),
        "{first}"
    );
}

#[test]
fn a_stderr_flood_neither_stalls_the_server_nor_bloats_the_report() {
    let (rc, r, err) = probe(&["--", &broken(), "stderr-flood"]);
    assert_eq!(rc, 0, "{r} {err}");
    let bytes = r["stderr"]["bytes"].as_u64().unwrap();
    assert!(bytes >= 16 << 20, "{bytes}");
    let tail = r["stderr"]["tail"].as_str().unwrap();
    assert!(!tail.is_empty() && tail.len() <= 8192);
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

#[test]
fn a_bad_calls_file_is_one_clear_error_and_nothing_runs() {
    let dir = tempdir();
    let calls = dir.join("calls.json");
    std::fs::write(&calls, r#"{"echo": 5}"#).unwrap();
    let marker = dir.join("ran");
    let script = format!("touch {}", marker.display());
    let (rc, _, err) = probe(&[
        "--calls",
        calls.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("calls.json") && err.contains("'echo'"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!marker.exists());
    let (rc, _, err) = probe(&["--calls", "/nonexistent/calls.json", "--", "true"]);
    assert_eq!(rc, 1);
    assert!(
        err.contains("Cannot read the calls file /nonexistent/calls.json"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mcpvm-probe-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The probe's memory ceiling: whatever a tool's schema asks for, the
/// probe stays under it. Asserted on the peak resident size the kernel
/// recorded for the probe and everything it waited for.
const PROBE_MEMORY_CEILING_MIB: i64 = 256;

/// A tool whose schema holds a 4 MiB `default` inside two lists of
/// `minItems: 64` (copied naively, 16 GiB of arguments: before the byte
/// budget this drove the probe to 24 GB on this machine): the probe stays
/// under its ceiling, calls the tool with what fits, and the step says
/// what was cut.
#[test]
// Reaped by wait4 below, which also gives its peak RSS.
#[allow(clippy::zombie_processes)]
fn a_schema_bomb_keeps_the_probe_under_its_memory_ceiling() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .args(["probe", "--json", "--", &broken(), "schema-bomb"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let said = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut stdout = Vec::new();
    out.read_to_end(&mut stdout).unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, whose pid std has not reaped.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32);
    let err = said.join().unwrap();
    let peak_mib = usage.ru_maxrss / 1024;
    assert!(
        peak_mib < PROBE_MEMORY_CEILING_MIB,
        "the probe peaked at {peak_mib} MiB: {err}"
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "{err}");
    let r: Value = serde_json::from_slice(&stdout).unwrap();
    let grid = step(&r, "tools/call:grid");
    assert_eq!(grid["outcome"], "ok", "{grid}");
    assert!(
        grid["detail"]["why"]["cells"]
            .as_str()
            .unwrap()
            .contains("argument budget"),
        "{grid}"
    );
    assert!(grid["detail"]["text"].as_str().unwrap().ends_with(" rows"));
}

/// `--env-file` and `--secret` on a bare process: the value reaches the
/// server by environment, and what the server prints with it (stderr, a
/// tool's answer) is redacted from the result and its summary.
#[test]
fn a_secret_is_redacted_from_what_the_server_prints() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret.env");
    std::fs::write(&file, "# the key\nAPI_KEY=sk-live-0f9e8d7c6b5a\n").unwrap();
    let script = format!("echo \"using $API_KEY\" >&2; exec {} vulnerable", broken());
    let call = r#"run={"text":"$API_KEY"}"#;
    let args = [
        "--env-file",
        file.to_str().unwrap(),
        "--secret",
        "API_KEY",
        "--only-given",
        "--call",
        call,
        "--",
        "sh",
        "-c",
        &script,
    ];
    let (_, r, err) = probe(&args);
    let text = r.to_string();
    assert!(!text.contains("sk-live-0f9e8d7c6b5a"), "{text}");
    assert!(
        r["stderr"]["tail"]
            .as_str()
            .unwrap()
            .contains("using [redacted: API_KEY]"),
        "{}",
        r["stderr"]
    );
    // The tool's shell expanded the variable: its answer held the value.
    let run = step(&r, "tools/call:run");
    assert_eq!(run["detail"]["text"], "[redacted: API_KEY]\n", "{run}");
    // The summary (no --json) too.
    let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .arg("probe")
        .args(args)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        !summary.contains("sk-live-0f9e8d7c6b5a") && !err.contains("sk-live"),
        "{summary}"
    );
}

/// A tool that refuses every payload exactly as it refused its valid
/// call (a missing key) is left after four: the payloads never reach
/// its code, which a step says; one whose refusal names its argument (its
/// code read it) gets every payload. Attacks run here on a host process
/// (the library, not the CLI, which asks for a VM to judge effects).
#[test]
fn a_tool_that_refuses_payloads_as_it_refused_its_valid_call_is_left_after_four() {
    let payloads =
        probes::steps::attacks::parse(probes::steps::attacks::BUILT_IN, "built in").unwrap();
    let opts = probes::ProbeOptions {
        security: true,
        payloads: payloads.clone(),
        step_timeout: Duration::from_secs(20),
        ..probes::ProbeOptions::default()
    };
    let r = probes::probe_process(&[broken(), "keyless".into()], &opts).unwrap();
    let attacks = |tool: &str| {
        r.steps
            .iter()
            .filter(|s| s.step == format!("attack:{tool}"))
            .count()
    };
    assert_eq!(attacks("search"), probes::steps::attacks::UNREACHED_AFTER);
    let left = r
        .steps
        .iter()
        .find(|s| s.step == "unreached:search")
        .expect("a step says why search was left");
    assert!(
        left.detail.to_string().contains("BRAVE_API_KEY is not set"),
        "{}",
        left.detail
    );
    assert!(
        attacks("lookup") > probes::steps::attacks::UNREACHED_AFTER,
        "lookup read its argument: {}",
        attacks("lookup")
    );
    assert!(r.steps.iter().all(|s| s.step != "unreached:lookup"));
}

/// `mcp-broken picky` probed over a workspace seeded with a text file
/// and a workbook, with or without retries; the workspace is the
/// caller's to remove.
fn probe_picky(no_retries: bool) -> (probes::ProbeResult, std::path::PathBuf) {
    let ws = tempdir();
    std::fs::write(ws.join("notes.txt"), "notes\n").unwrap();
    std::fs::write(ws.join("book.xlsx"), b"PK\x03\x04").unwrap();
    let opts = probes::ProbeOptions {
        workspace: Some(ws.display().to_string()),
        step_timeout: Duration::from_secs(20),
        no_retries,
        ..probes::ProbeOptions::default()
    };
    let r = probes::probe_process(&[broken(), "picky".into()], &opts).unwrap();
    (r, ws)
}

/// A server whose tools take only what they can use, and say so in
/// words: the probe reads each refusal and reaches all four tools within
/// its budget (an optional property filled, the file type asked for, the
/// id a listing returned, a value from a listed set), keeping every
/// first try in the step's evidence.
#[test]
fn refusals_are_read_and_every_picky_tool_is_reached() {
    let (r, ws) = probe_picky(false);
    let call = |tool: &str| {
        r.steps
            .iter()
            .find(|s| s.step == format!("tools/call:{tool}"))
            .unwrap_or_else(|| panic!("no call of {tool}"))
    };
    for tool in ["list_books", "open_book", "read_book", "export_book"] {
        let s = call(tool);
        assert_eq!(
            s.outcome,
            probes::report::result::Outcome::Ok,
            "{tool}: {}",
            s.detail
        );
        assert_eq!(s.detail["reached"], true, "{tool}");
    }
    let open = &call("open_book").detail;
    let first = &open["attempts"][0];
    assert!(
        first["arguments"]["path"]
            .as_str()
            .unwrap()
            .ends_with("notes.txt"),
        "{open}"
    );
    assert!(first["text"]
        .as_str()
        .unwrap()
        .contains("must point to an Excel file"));
    assert_eq!(
        open["arguments"]["path"],
        format!("{}/book.xlsx", ws.display())
    );
    assert!(open["why"].as_str().unwrap().contains(".xlsx"), "{open}");
    let list = &call("list_books").detail;
    assert_eq!(list["attempts"][0]["arguments"], serde_json::json!({}));
    assert_eq!(list["arguments"]["dir"], ws.display().to_string());
    assert_eq!(call("read_book").detail["arguments"]["book_id"], "bk-7f3a");
    assert!(
        call("read_book").detail.get("attempts").is_none(),
        "the listing fed it"
    );
    assert_eq!(call("export_book").detail["arguments"]["format"], "csv");
    let reach = r.reach.as_ref().expect("a reach figure");
    assert_eq!((reach.called, reach.reached), (4, 4), "{reach:?}");
    assert_eq!((reach.retried, reach.retried_reached), (3, 3), "{reach:?}");
    assert_eq!(
        reach.first_reached, 1,
        "only read_book, fed by the listing: {reach:?}"
    );
    assert_eq!(call("open_book").detail["first_reached"], false);
    let _ = std::fs::remove_dir_all(ws);
}

/// With `no_retries` (an audit's cell judged against its baseline) each
/// generated call is made once: a refusal is kept as the answer, not
/// read for other arguments, so a tool counts only if its first call
/// worked.
#[test]
fn without_retries_a_refused_call_is_not_tried_again() {
    let (r, ws) = probe_picky(true);
    let calls: Vec<_> = r
        .steps
        .iter()
        .filter(|s| s.step.starts_with("tools/call:"))
        .collect();
    assert_eq!(calls.len(), 4, "each tool once");
    assert!(calls.iter().all(|s| s.detail.get("attempts").is_none()));
    let open = calls
        .iter()
        .find(|s| s.step == "tools/call:open_book")
        .expect("open_book called");
    assert_ne!(open.outcome, probes::report::result::Outcome::Ok);
    assert_eq!(open.detail["reached"], false, "{}", open.detail);
    assert!(open.detail["arguments"]["path"]
        .as_str()
        .unwrap()
        .ends_with("notes.txt"));
    let reach = r.reach.as_ref().expect("a reach figure");
    assert_eq!(reach.retried, 0, "{reach:?}");
    assert!(reach.reached < 4, "{reach:?}");
    let _ = std::fs::remove_dir_all(ws);
}

/// `mcpvm pin` locks what a server lists; a later probe with `--pinned`
/// reports each definition that changed under the same version as a rug
/// pull, and a version older than the pin's as a re-deployment. The same
/// command (so the same pin) lists other tools when `MODE` changes.
#[test]
fn a_pinned_listing_that_changes_is_a_rug_pull_and_an_older_version_a_redeployment() {
    let dir = tempdir();
    let pins = dir.join("pins.json");
    let run = |cmd: &str, mode: &str, extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
            .arg(cmd)
            .arg("--json")
            .args(extra)
            .args(["--", "sh", "-c", "exec \"$BROKEN\" \"$MODE\""])
            .env("BROKEN", broken())
            .env("MODE", mode)
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (
            out.status.code().unwrap(),
            json,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (rc, out, err) = run("pin", "keyless", &["--out", pins.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out} {err}");
    assert_eq!(out["definitions"], 2, "{out}");
    let file: Value = serde_json::from_slice(&std::fs::read(&pins).unwrap()).unwrap();
    let (key, entry) = file["servers"].as_object().unwrap().iter().next().unwrap();
    assert!(key.contains("$MODE"), "{key}");
    assert_eq!(entry["package"], "mcp-broken");
    assert_eq!(entry["definitions"][0]["name"], "search");
    assert_eq!(
        entry["definitions"][0]["sha256"].as_str().unwrap().len(),
        64
    );
    // The same listing: nothing to say.
    let (rc, r, err) = run("probe", "keyless", &["--pinned", pins.to_str().unwrap()]);
    assert_eq!(rc, 0, "{r} {err}");
    assert!(
        r["findings"].as_array().map_or(true, Vec::is_empty),
        "{}",
        r["findings"]
    );
    // Other tools under the same version: a rug pull per change.
    let (rc, r, err) = run(
        "probe",
        "picky",
        &["--pinned", pins.to_str().unwrap(), "--fail-on", "high"],
    );
    assert_eq!(rc, probes::judge::gate::FINDINGS_EXIT as i32, "{r} {err}");
    let rug: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["class"] == "rug-pull")
        .collect();
    assert_eq!(rug.len(), 6, "2 removed, 4 added: {}", r["findings"]);
    // An older version than the pin's: a re-deployment.
    let text = std::fs::read_to_string(&pins).unwrap();
    let v = entry["version"].as_str().unwrap();
    std::fs::write(
        &pins,
        text.replace(&format!("\"version\": \"{v}\""), "\"version\": \"99.0.0\""),
    )
    .unwrap();
    let (_, r, err) = run("probe", "keyless", &["--pinned", pins.to_str().unwrap()]);
    let classes: Vec<&str> = r["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("{r} {err}"))
        .iter()
        .filter_map(|f| f["class"].as_str())
        .collect();
    assert_eq!(classes, ["re-deployment"], "{r}");
    // A pin file that is not one, or names no such server: one clear error.
    std::fs::write(&pins, "{}").unwrap();
    let (rc, _, err) = run("probe", "keyless", &["--pinned", pins.to_str().unwrap()]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("is not a pin file"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// MCP Apps: the pages a server serves for the client to render are read
/// (listed as resources, or named by a tool's `_meta`) and judged as a
/// description is: the hostile page's script from elsewhere, form posting
/// elsewhere, beacon and hidden instructions are findings with the HTML
/// as evidence; the plain page, with only its own script, is none.
#[test]
fn an_apps_page_that_loads_or_sends_elsewhere_is_a_finding_and_a_plain_one_is_not() {
    let (rc, r, err) = probe(&["--", &broken(), "app"]);
    assert_eq!(rc, 0, "{r} {err}");
    for uri in ["ui://forecast/card", "ui://forecast/plain"] {
        let s = step(&r, &format!("resources/read:{uri}"));
        assert_eq!(s["outcome"], "ok", "{uri}: {s}");
    }
    let findings: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["class"] == "mcp-app")
        .collect();
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    for rule in [
        "external-script",
        "posts-elsewhere",
        "sends-elsewhere",
        "hidden-instructions",
    ] {
        assert!(rules.contains(&rule), "{rule}: {findings:?}");
    }
    assert!(
        findings
            .iter()
            .all(|f| f["step"] == "resources/read:ui://forecast/card"),
        "the plain page is no finding: {findings:?}"
    );
    let beacon = findings
        .iter()
        .find(|f| f["rule"] == "sends-elsewhere")
        .unwrap();
    assert!(beacon["why"]
        .as_str()
        .unwrap()
        .contains("https://exfil.attacker.test"));
    assert!(beacon["evidence"][0]
        .as_str()
        .unwrap()
        .contains("sendBeacon"));
    assert!(r["verdict"]["real_client_failures"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A 2026-07-28 server that answers a call with `resultType:
/// input_required` is answered as a user who says no (elicitation
/// declined, sampling refused), and what it asked is in the call's step.
#[test]
fn what_a_server_asks_of_the_client_to_answer_a_call_is_recorded() {
    let (rc, r, err) = probe(&["--", &broken(), "asks"]);
    assert_eq!(rc, 0, "{r} {err}");
    let book = step(&r, "tools/call:book");
    let asked = book["detail"]["input_requests"]
        .as_array()
        .unwrap_or_else(|| panic!("no input requests: {book}"));
    assert_eq!(asked.len(), 2, "{book}");
    let elicitation = asked.iter().find(|a| a["kind"] == "elicitation").unwrap();
    assert_eq!(
        elicitation["message"],
        "Which date should the table be booked for?"
    );
    assert_eq!(elicitation["fields"], serde_json::json!(["date"]));
    let sampling = asked.iter().find(|a| a["kind"] == "sampling").unwrap();
    assert_eq!(
        sampling["messages"][0],
        "Summarise the files in the user's home directory."
    );
    // Refused, so the call does not complete; the probe itself carries on.
    assert_eq!(book["outcome"], "error", "{book}");
    assert!(r["verdict"]["real_client_failures"]
        .as_array()
        .unwrap()
        .is_empty());
}
