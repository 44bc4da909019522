//! Withholding profiles on real KVM (directly, or in the testbed): each
//! knob is seen from inside the guest, and every seccomp denial comes
//! back as evidence in the agent's events.

mod common;

use std::sync::OnceLock;

use common::{run_scenario, Case, Results};

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let files = common::run_payload();
        run_scenario(
            &common::workspace().join("mcpvm/tests/scenarios/withhold.sh"),
            &files,
        )
    })
}

fn case(name: &str) -> &'static Case {
    let c = results().case(name);
    assert_ne!(c.rc, 124, "{name} hit its time limit: {c:?}");
    c
}

/// The agent's events of a case, one JSON object per line.
fn events(name: &str) -> Vec<serde_json::Value> {
    results()
        .file(&format!("{name}.events"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The denied list of the case's `syscalls` event.
fn denied(name: &str) -> Vec<serde_json::Value> {
    let ev = events(name);
    let s = ev
        .iter()
        .find(|e| e["event"] == "syscalls")
        .unwrap_or_else(|| panic!("no syscalls event in {ev:?}"));
    s["denied"].as_array().unwrap().clone()
}

#[test]
fn ro_root_makes_the_root_read_only_and_leaves_tmp() {
    let c = case("ro_root");
    assert!(c.stdout.contains("root=1"), "{c:?}");
    assert!(c.stderr.contains("Read-only file system"), "{c:?}");
    assert!(c.stdout.contains("tmp=0"), "{c:?}");
    assert!(events("ro_root").iter().any(|e| e["event"] == "exited"));
}

#[test]
fn no_tmp_makes_tmp_read_only_and_leaves_the_root() {
    let c = case("no_tmp");
    assert!(c.stdout.contains("tmp=1"), "{c:?}");
    assert!(c.stdout.contains("root=0"), "{c:?}");
}

#[test]
fn deny_exec_lets_the_server_start_and_nothing_else() {
    let c = case("deny_exec");
    assert!(c.stdout.contains("started"), "{c:?}");
    assert!(c.stdout.contains("rc=126"), "{c:?}");
    let d = denied("deny_exec");
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["syscall"], "execve");
    assert_eq!(d[0]["errno"], "EPERM");
    assert_eq!(d[0]["count"], 1);
}

#[test]
fn deny_net_sockets_refuses_inet_sockets_with_eacces() {
    let c = case("deny_net");
    assert!(!c.stdout.contains("rc=0"), "{c:?}");
    assert!(c.stderr.contains("Permission denied"), "{c:?}");
    let d = denied("deny_net");
    assert!(
        d.iter()
            .any(|x| x["syscall"] == "socket" && x["errno"] == "EACCES"),
        "{d:?}"
    );
}

#[test]
fn baseline_records_every_call_with_rng_and_two_cpus() {
    let c = case("baseline");
    assert_eq!(c.rc, 0, "{c:?}");
    let mut lines = c.stdout.lines();
    assert_eq!(lines.next(), Some("2"), "{c:?}");
    assert!(
        lines.next().unwrap_or("").starts_with("virtio_rng"),
        "{c:?}"
    );
    let ev = events("baseline");
    let s = ev.iter().find(|e| e["event"] == "syscalls").unwrap();
    assert!(s["denied"].as_array().unwrap().is_empty());
    let used: Vec<&str> = s["used"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["syscall"].as_str().unwrap())
        .collect();
    for call in ["execve", "openat", "write", "exit_group"] {
        assert!(used.contains(&call), "{call} not in {used:?}");
    }
    // Counted in the guest kernel's histogram, and only the server's:
    // the agent's own calls around the spawn (the listener's socketpair
    // and recvmsg, tracefs' mount) are not in it.
    assert_eq!(s["counted_by"], "kernel_trace", "{s}");
    for agent_only in ["socketpair", "recvmsg", "mount"] {
        assert!(!used.contains(&agent_only), "{agent_only} in {used:?}");
    }
}

/// Counting and denying at once: the denied call, which never reaches the
/// tracepoint, is in the count too, and the allowed ones are counted
/// without a notification each.
#[test]
fn an_observed_profile_that_denies_counts_the_denied_calls_too() {
    let c = case("observed_deny");
    assert!(c.stdout.contains("rc=126"), "{c:?}");
    let ev = events("observed_deny");
    let s = ev.iter().find(|e| e["event"] == "syscalls").unwrap();
    assert_eq!(s["counted_by"], "kernel_trace", "{s}");
    let count = |list: &str, name: &str| {
        s[list]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["syscall"] == name)
            .map(|u| u["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(count("denied", "execve"), 1, "{s}");
    // The shell's own exec (allowed: the first caller's) and the denied one.
    assert_eq!(count("used", "execve"), 2, "{s}");
    assert!(count("used", "write") >= 2, "{s}");
}

#[test]
fn no_rng_leaves_the_guest_without_the_device() {
    let c = case("no_rng");
    assert!(!c.stdout.contains("virtio_rng"), "{c:?}");
    assert!(c.stdout.trim_end().ends_with('2'), "{c:?}");
}

#[test]
fn tiny_mem_and_one_cpu_compose() {
    let c = case("tiny_mem");
    let kib: u64 = c
        .stdout
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{c:?}"));
    assert!(kib < 96 * 1024, "{c:?}");
    assert_eq!(c.stdout.lines().last(), Some("1"), "{c:?}");
}

#[test]
fn low_fds_limits_open_files() {
    assert_eq!(case("low_fds").stdout.trim(), "32");
}

#[test]
fn no_env_leaves_only_what_is_given() {
    let c = case("no_env");
    assert_eq!(c.stdout.trim(), "ONLY=this", "{c:?}");
}

#[test]
fn a_deny_group_profile_denies_the_group() {
    let c = case("deny_group");
    assert!(c.stdout.contains("rc=1"), "{c:?}");
    let d = denied("deny_group");
    assert!(
        d.iter()
            .any(|x| x["syscall"] == "mkdir" || x["syscall"] == "mkdirat"),
        "{d:?}"
    );
}

#[test]
fn an_unknown_profile_is_one_clear_error_and_leaves_nothing() {
    let c = case("unknown");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(c.stderr.contains("No profile named 'ro-rot'"), "{c:?}");
    assert_eq!(c.stderr.lines().count(), 1, "{c:?}");
    assert_eq!(results().file("leftovers.txt").trim(), "");
}

/// A server still running after its stdin closed has its calls so far
/// sent, so a VM stopped from outside (its --timeout here) keeps them.
#[test]
fn a_server_that_keeps_running_has_its_calls_sent_while_it_runs() {
    let c = results().case("keeps_running");
    assert_eq!(c.rc, 124, "stopped by its --timeout: {c:?}");
    assert!(c.stdout.contains("closed"), "{c:?}");
    let ev = events("keeps_running");
    let counts: Vec<&serde_json::Value> = ev.iter().filter(|e| e["event"] == "syscalls").collect();
    assert_eq!(counts.len(), 1, "one count, while running: {ev:?}");
    assert_eq!(counts[0]["while_running"], true, "{ev:?}");
    let used = counts[0]["used"].as_array().unwrap();
    assert!(
        used.iter()
            .any(|u| u["syscall"] == "read" && u["count"].as_u64() > Some(0)),
        "cat's reads: {used:?}"
    );
    assert!(!ev.iter().any(|e| e["event"] == "exited"), "{ev:?}");
}
