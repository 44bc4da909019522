//! `mcpvm run` end to end on real KVM (directly, or in the testbed):
//! a real MCP client through the vsock relay, bulk data both ways with a
//! slow reader, a crashing server, a disconnecting host.

mod common;

use std::sync::OnceLock;

use common::{run_scenario, Case, Results};

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let files = common::run_payload();
        run_scenario(
            &common::workspace().join("mcpvm/tests/scenarios/run.sh"),
            &files,
        )
    })
}

fn case(name: &str) -> &'static Case {
    results().case(name)
}

/// A writable workspace's copy is all on the host when the run ends: the
/// guest hashed what it wrote, the host hashes what came back, five times.
#[test]
fn a_writable_workspace_comes_back_whole() {
    let c = case("workspace_back");
    assert_eq!(c.rc, 0, "{c:?}");
    let lines: Vec<_> = c.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{c:?}");
    for l in lines {
        let f: Vec<_> = l.split_whitespace().collect();
        assert!(
            f.len() == 3 && f[1].len() == 64 && f[1] == f[2],
            "run {}: the guest wrote {:?}, the host has {:?}\n{c:?}",
            f[0],
            f.get(1),
            f.get(2)
        );
    }
}

#[test]
fn rmcp_client_talks_to_the_fixture_inside_a_vm() {
    let c = case("probe_fixture");
    assert_eq!(c.rc, 0, "{c:?}");
    let r = c.json();
    assert_eq!(r["transport"], "vm");
    assert_eq!(
        r["tools"],
        serde_json::json!(["add", "alloc", "echo", "exit", "note", "sleep", "whoami", "write"]),
        "{r}"
    );
    let steps = r["steps"].as_array().unwrap();
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no step {name}: {r}"))
    };
    assert_eq!(step("server/discover")["outcome"], "ok");
    assert_eq!(step("tools/list")["outcome"], "ok");
    assert_eq!(step("tools/call:add")["detail"]["text"], "42");
    assert_eq!(step("tools/call:echo")["detail"]["text"], "through vsock");
    assert_eq!(
        step("tools/call:write")["detail"]["text"]
            .as_str()
            .unwrap()
            .len(),
        100_000
    );
    assert_eq!(step("tools/call:sleep")["outcome"], "ok");
    assert_eq!(step("tools/call:exit")["outcome"], "skipped");
    // The VM's own phases came with the result, in order, and before the
    // probe's handshake answer.
    let vm = &r["timings"]["vm"];
    let at = |k: &str| vm[k].as_f64().unwrap_or_else(|| panic!("no {k}: {vm}"));
    assert!(
        at("kernel_entry") < at("agent_start") && at("agent_start") < at("spawned"),
        "{vm}"
    );
    // Through the VM, as bare: every robustness probe handled or ignored.
    let rb = r["robustness"].as_array().unwrap();
    assert_eq!(rb.len(), 9);
    for p in rb {
        let class = p["class"].as_str().unwrap();
        assert!(class == "handled" || class == "ignored", "{p}");
    }
    let reopen = rb.iter().find(|p| p["probe"] == "reopen").unwrap();
    assert_eq!(reopen["class"], "handled", "{reopen}");
    assert_eq!(
        reopen["detail"]["close"]["code"], 0,
        "the VM powered off cleanly: {reopen}"
    );
}

#[test]
fn sixteen_mib_to_the_guest_arrives_intact() {
    let c = case("to_guest");
    assert_eq!(c.rc, 0, "{c:?}");
    let want = results().file("big.sha").trim();
    assert_eq!(c.stdout.split_whitespace().next(), Some(want), "{c:?}");
}

#[test]
fn sixteen_mib_from_the_guest_arrives_intact() {
    let c = case("from_guest");
    assert_eq!(c.rc, 0, "{c:?}");
    // The guest hashed what it sent (on stderr); the host hashed what came.
    let sent = c
        .stderr
        .split_whitespace()
        .next()
        .expect("guest hash on stderr");
    let got = c.stdout.split_whitespace().next().expect("host hash");
    assert_eq!(sent.len(), 64);
    assert_eq!(sent, got, "{c:?}");
}

/// The server exits while the client pauses before its last 500 kB:
/// the run ends only once the client has them, however long it pauses.
#[test]
fn the_last_output_arrives_when_the_client_pauses_before_it() {
    let c = case("slow_tail");
    assert_eq!(c.rc, 0, "{c:?}");
    let sent = c.stderr.split_whitespace().next().expect("guest hash");
    let got: Vec<_> = c.stdout.split_whitespace().collect();
    assert_eq!(got.get(2), Some(&"4400000"), "bytes that came: {c:?}");
    assert_eq!(Some(&sent), got.first(), "{c:?}");
}

/// A run without a network has its loopback up.
#[test]
fn the_loopback_is_up_without_a_network() {
    let c = case("loopback");
    assert_eq!(c.rc, 0, "{c:?}");
    let said = format!("{}{}", c.stdout, c.stderr);
    assert!(said.contains("refused"), "{c:?}");
    assert!(!said.contains("unreachable"), "{c:?}");
}

#[test]
fn server_crash_mid_request_ends_with_its_status() {
    let c = case("crash");
    assert_eq!(c.rc, 7, "{c:?}");
    assert!(
        c.stdout.contains("\"id\":1"),
        "initialize was answered: {}",
        c.stdout
    );
    assert!(
        !c.stdout.contains("\"id\":2"),
        "the crashing call has no answer: {}",
        c.stdout
    );
}

/// A kernel panic ends the run with 125, and what the kernel said is
/// on stderr though no --console was asked for.
#[test]
fn a_kernel_panic_is_said_with_the_consoles_last_lines() {
    let c = case("panic_console");
    assert_eq!(c.rc, 125, "{c:?}");
    assert!(
        c.stderr.contains("mcpvm: guest kernel panicked"),
        "{}",
        c.stderr
    );
    let console: Vec<&str> = c
        .stderr
        .lines()
        .filter(|l| l.starts_with("mcpvm: console: "))
        .collect();
    assert!(
        !console.is_empty() && console.len() <= 40,
        "at most 40 lines: {}",
        c.stderr
    );
    assert!(
        console
            .iter()
            .any(|l| l.contains("Kernel panic - not syncing")),
        "the panic's own line: {}",
        c.stderr
    );
}

#[test]
fn host_disconnect_mid_stream_does_not_hang() {
    let c = case("host_disconnect");
    assert_eq!(c.rc, 0, "{c:?}");
    assert_eq!(c.stdout.trim(), "1000");
}

#[test]
fn ctrl_c_stops_the_vm_with_130() {
    let c = case("sigint");
    assert_eq!(c.rc, 130, "{c:?}");
}

/// A running `mcpvm run`: every thread (main, vCPU, devices, relays) runs
/// under a seccomp filter, and the fd it inherited is closed.
#[test]
fn every_thread_of_a_running_vm_is_confined_and_inherited_fds_are_closed() {
    let files = &results().files;
    let threads = files.get("sigint_threads.txt").expect("thread list");
    let names: Vec<&str> = threads
        .lines()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    for kind in ["vcpu0", "vsock", "virtio-rng"] {
        assert!(names.contains(&kind), "no {kind} thread in:\n{threads}");
    }
    assert!(
        threads.lines().count() >= 6,
        "main, relays, vCPU, devices:\n{threads}"
    );
    for line in threads.lines() {
        assert!(
            line.ends_with(" 2"),
            "a thread without a filter: {line}\n{threads}"
        );
    }
    // "NUMBER TARGET" per open fd. The VMM's own fds reuse low numbers,
    // so what must be gone is the inherited file, whatever its number.
    let fds = files.get("sigint_fds.txt").expect("fd list");
    assert!(
        fds.lines().any(|l| l.contains("kvm")),
        "the listing shows targets:\n{fds}"
    );
    assert!(
        !fds.lines().any(|l| l.ends_with("/inherited")),
        "the inherited fd is still open:\n{fds}"
    );
}

#[test]
fn a_killed_run_is_cleaned_up_by_the_next() {
    let files = &results().files;
    let jailed = files.get("after_kill9_jailed.txt").map(String::as_str);
    assert_eq!(
        jailed.unwrap_or("").trim(),
        "",
        "a jailed run keeps its sockets in the jail: kill -9 leaves nothing"
    );
    let after = files
        .get("after_kill9.txt")
        .map(String::as_str)
        .unwrap_or("");
    assert!(
        !after.trim().is_empty(),
        "unjailed, kill -9 should leave its run directory for the next run to clean"
    );
}

#[test]
fn a_running_vm_is_jailed() {
    let files = &results().files;
    let ns = files.get("jail_ns.txt").expect("namespace list");
    for own in ["user own", "mnt own", "net own", "ipc own", "uts own"] {
        assert!(ns.lines().any(|l| l == own), "want {own}:\n{ns}");
    }
    let caps = files.get("jail_caps.txt").expect("capabilities");
    for line in caps.lines() {
        assert!(
            line.ends_with("0000000000000000"),
            "no capability may be left: {line}\n{caps}"
        );
    }
    let root = files.get("jail_root.txt").expect("the jail's root");
    let entries: Vec<&str> = root.lines().collect();
    for held in ["./dev/kvm", "./tmp/mcpvm-0"] {
        assert!(
            entries.contains(&held),
            "the jail must hold {held}:\n{root}"
        );
    }
    assert!(
        entries.iter().any(|e| e.ends_with("/vmlinux")),
        "the kernel is in the jail:\n{root}"
    );
    for absent in [
        "./etc", "./root", "./home", "./proc", "./usr", "./bin", "./run",
    ] {
        assert!(
            !entries.contains(&absent),
            "{absent} is in the jail:\n{root}"
        );
    }
}

#[test]
fn no_sockets_are_left_behind() {
    let left = results()
        .files
        .get("leftovers.txt")
        .map(String::as_str)
        .unwrap_or("");
    assert_eq!(left.trim(), "", "left in the run directory base: {left}");
}

#[test]
fn timings_file_holds_the_phases_in_order() {
    let c = case("timings");
    assert_eq!(c.rc, 0, "{c:?}");
    assert_eq!(c.stdout, "hi\n");
    let t: serde_json::Value = serde_json::from_str(results().file("timings.json")).unwrap();
    let order = [
        "kvm_ready",
        "kernel_entry",
        "boot_timer",
        "agent_start",
        "spawned",
        "first_stdout_byte",
        "exited",
        "exit",
    ];
    let values: Vec<f64> = order
        .iter()
        .map(|k| t[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {t}")))
        .collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{t}");
}

#[test]
fn an_observed_call_is_shown_with_what_it_did() {
    let c = case("observed");
    assert_eq!(c.rc, 0, "{c:?}");
    let r = c.json();
    let whoami = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "tools/call:whoami")
        .unwrap_or_else(|| panic!("no whoami step: {r}"));
    // It reads the hostname under /proc: a runtime read, counted, not
    // listed.
    let effects = &whoami["effects"];
    assert!(effects["calls"].as_u64().unwrap() >= 1, "{effects}");
    assert_eq!(effects["executed"], serde_json::json!([]), "{effects}");
    let opened_hostname = r["guest_events"].as_array().unwrap().iter().any(|e| {
        e["event"] == "effect"
            && e["during"]["tool"] == "whoami"
            && e["paths"][0] == "/proc/sys/kernel/hostname"
    });
    assert!(opened_hostname, "{}", r["guest_events"]);
    // The host says in the same file whether the VMM ran jailed.
    let jail = r["guest_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "jail");
    assert_eq!(
        jail.map(|e| &e["jailed"]),
        Some(&serde_json::json!(true)),
        "{}",
        r["guest_events"]
    );
    let start = &r["recording"]["outside_calls"]["start_up"];
    assert!(
        start["executed"].to_string().contains("/bin/mcp-fixture"),
        "the server's own exec is start-up: {start}"
    );
}

#[test]
fn a_vulnerable_server_is_found_out_by_what_it_does_and_a_sound_tool_is_not() {
    let c = case("vulnerable");
    // --fail-on high: the gate's own exit status, and why.
    assert_eq!(c.rc, 5, "{c:?}");
    assert!(c.stderr.contains("(--fail-on high): exit 5"), "{c:?}");
    // Its SARIF: valid 2.1.0, each result located at the program probed.
    let sarif = results().file("vulnerable.sarif");
    assert_eq!(common::sarif_errors(sarif), None);
    let log: serde_json::Value = serde_json::from_str(sarif).unwrap();
    let located = &log["runs"][0]["results"][0]["locations"][0]["physicalLocation"];
    assert_eq!(
        located["artifactLocation"]["uri"], "file:///bin/mcp-broken",
        "{log}"
    );
    let r = c.json();
    let findings = r["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {r}"));
    let mut classes: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f["class"].as_str().unwrap(), f["step"].as_str().unwrap()))
        .collect();
    classes.sort();
    classes.dedup();
    assert_eq!(
        classes,
        [
            ("command-injection", "attack:run"),
            ("path-traversal", "attack:read_file"),
            ("path-traversal", "tools/call:read_file"),
            ("secret-exposure", "attack:read_file"),
            ("secret-exposure", "tools/call:read_file"),
            ("ssrf", "attack:fetch"),
        ],
        "nothing on echo, every class where it is: {findings:#?}"
    );
    // The given call: the sibling read, and the token in the answer.
    let given = findings
        .iter()
        .find(|f| f["rule"] == "token-in-answer" && f["step"] == "tools/call:read_file")
        .unwrap_or_else(|| panic!("the token came back: {findings:#?}"));
    assert_eq!(
        given["call"],
        r#"read_file={"path":"/workspace_secret/secret.txt"}"#
    );
    // An attack's finding says what to send again.
    let injection = findings
        .iter()
        .find(|f| f["class"] == "command-injection")
        .unwrap();
    assert_eq!(injection["argument"], "/text", "{injection}");
    let payload = injection["payload"].as_str().unwrap();
    assert!(
        injection["call"].as_str().unwrap().starts_with("run=") && payload.contains("touch /tmp/"),
        "{injection}"
    );
    let ssrf = findings.iter().find(|f| f["class"] == "ssrf").unwrap();
    assert!(ssrf["attempts"].as_u64().unwrap() >= 3, "{ssrf}");
    let canaries = r["guest_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "canaries")
        .unwrap_or_else(|| panic!("no canaries event: {r}"));
    assert_eq!(canaries["link"], "/workspace/.credentials");
    // Each file its own token, none in another, none in the variable.
    let tokens = canaries["tokens"].as_object().unwrap();
    assert!(tokens.len() >= 4, "{canaries}");
    let env_token = canaries["env_token"].as_str().unwrap();
    for (path, t) in tokens {
        let t = t.as_str().unwrap();
        assert!(
            t.len() >= 32 && !t.contains("MCPVM") && !env_token.contains(t),
            "{path}: {t}"
        );
    }
    // The roles each tool was seen to play in the VM, each with the
    // events that show it (issue 50): read_file read outside its roots,
    // run started a shell, fetch connected out; echo did none of these.
    let roles = r["roles"]
        .as_array()
        .unwrap_or_else(|| panic!("no roles: {r}"));
    let observed = |tool: &str| -> serde_json::Map<String, serde_json::Value> {
        roles
            .iter()
            .find(|t| t["tool"] == tool)
            .and_then(|t| t["observed"].as_object().cloned())
            .unwrap_or_default()
    };
    for (tool, role, shown_by) in [
        ("read_file", "reads_private", "open"),
        ("run", "destructive", "exec"),
        ("fetch", "untrusted_content", "connect"),
    ] {
        let seen = observed(tool);
        let evidence = seen
            .get(role)
            .unwrap_or_else(|| panic!("{tool} not seen as {role}: {roles:#?}"))["evidence"]
            .to_string();
        assert!(evidence.contains(shown_by), "{tool} {role}: {evidence}");
    }
    assert!(observed("echo").is_empty(), "echo did nothing: {roles:#?}");
    // Attacks the server refused are no client failure.
    assert_eq!(
        r["verdict"]["real_client_failures"],
        serde_json::json!([]),
        "{}",
        r["verdict"]
    );
}

#[test]
fn an_oom_killed_server_is_reported() {
    let c = case("oom");
    assert_eq!(c.rc, 3, "the alloc call fails: {c:?}");
    // `mcpvm run` says so on its stderr, which the probe keeps.
    let r = c.json();
    let tail = r["stderr"]["tail"].as_str().unwrap();
    assert!(tail.contains("OOM killer"), "{tail}");
    assert_eq!(
        r["verdict"]["real_client_failures"],
        serde_json::json!(["tools/call:alloc"])
    );
}

/// A secret given by `--env-file` reaches the server (it prints it on
/// stderr) by environment only: no argv on the host showed it while the
/// probe ran, and the probe's result holds no value of it.
#[test]
fn a_secret_reaches_the_server_and_no_argv_or_result_shows_it() {
    let c = case("secret");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(!c.stdout.contains("tok-5f2c9a7e"), "{}", c.stdout);
    let r = c.json();
    let tail = r["stderr"]["tail"].as_str().unwrap();
    assert!(
        tail.contains("token=[redacted: MCPVM_TEST_TOKEN]"),
        "{tail}"
    );
    // `mcpvm run` was handed its request as a file (which names the
    // variable and holds no value), not as arguments.
    let command: Vec<&str> = r["command"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(command[1..3], ["run", "--request"], "{command:?}");
    assert!(!r.to_string().contains("tok-5f2c9a7e"), "{r}");
    let hits = results().file("secret_argv_hits.txt");
    let samples: Vec<&str> = hits.lines().collect();
    assert!(samples.len() >= 5, "the sampler ran: {hits:?}");
    assert!(
        samples.iter().all(|n| *n == "0"),
        "an argv showed the secret: {hits:?}"
    );
}
