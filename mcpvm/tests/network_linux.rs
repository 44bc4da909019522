//! The guest's network on real KVM (directly, or in the testbed): DNS and
//! TCP leave the guest only through the host's egress proxy, which
//! allows by name and port, refuses the private, loopback, link-local
//! and metadata ranges whatever name leads there, and logs every attempt
//! as a `net` event (docs/network.md). The testbed host stands in for the
//! internet (scenarios/network.sh): nothing leaves it.

mod common;

use std::sync::OnceLock;

use common::{run_scenario_within, Case, Results};
use serde_json::Value;

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let ws = common::workspace();
        let mut files = common::run_payload();
        files.extend(common::image_store_files(&["fetch", "everything"]));
        files.push(format!(
            "{}:net-catalogue.toml",
            ws.join("mcpvm/tests/fixtures/net-catalogue.toml").display()
        ));
        // The fetch server starts in tens of seconds under nested
        // emulation, four times (docs/testbed.md).
        run_scenario_within(&ws.join("mcpvm/tests/scenarios/network.sh"), &files, 2400)
    })
}

fn case(name: &str) -> &'static Case {
    let c = results().case(name);
    assert_ne!(c.rc, 124, "{name} hit its time limit: {c:?}");
    c
}

/// The `net` events of a case.
fn net(name: &str) -> Vec<Value> {
    results()
        .file(&format!("{name}.events"))
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "net")
        .collect()
}

/// The one event of `kind` for `target` (a name or an address).
fn event<'a>(events: &'a [Value], kind: &str, target: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["kind"] == kind && (e["name"] == target || e["address"] == target))
        .unwrap_or_else(|| panic!("no {kind} event for {target} in {events:#?}"))
}

fn denied_because(e: &Value, why: &str) {
    assert_eq!(e["allowed"], false, "{e}");
    let reason = e["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(why), "{why:?} not in {e}");
}

const PAGE: &str = "hello from the testbed host";

/// An allowed name that leads to an address the host itself holds is
/// refused like loopback: where the host's own services listen.
#[test]
fn an_address_of_the_host_itself_is_refused_even_under_an_allowed_name() {
    let c = case("host_own");
    assert!(
        !c.stdout.contains(PAGE) && !c.stdout.contains("rc=0"),
        "{c:?}"
    );
    denied_because(
        event(&net("host_own"), "dns", "allowed.test"),
        "one of the host's own addresses",
    );
}

#[test]
fn an_allowed_name_is_resolved_by_the_host_and_its_page_fetched() {
    let c = case("allowed");
    assert!(
        c.stdout.contains(PAGE) && c.stdout.contains("rc=0"),
        "{c:?}"
    );
    let ev = net("allowed");
    let dns = event(&ev, "dns", "allowed.test");
    assert_eq!(dns["allowed"], true);
    assert_eq!(dns["addresses"], serde_json::json!(["198.51.100.7"]));
    let conn = event(&ev, "connect", "allowed.test");
    assert_eq!(
        (conn["allowed"].as_bool(), conn["port"].as_u64()),
        (Some(true), Some(8080))
    );
    assert_eq!(conn["address"], "198.51.100.7");
    assert!(conn["bytes_out"].as_u64().unwrap() > 0, "{conn}");
    assert!(
        conn["bytes_in"].as_u64().unwrap() > PAGE.len() as u64,
        "{conn}"
    );
    assert!(conn["duration_ms"].as_f64().is_some() && conn["at_ms"].as_f64().is_some());
}

#[test]
fn another_name_gets_nxdomain_and_a_denied_event() {
    let c = case("other_name");
    assert!(
        !c.stdout.contains(PAGE) && c.stdout.contains("rc=1"),
        "{c:?}"
    );
    assert!(c.stderr.contains("bad address"), "{c:?}");
    let ev = net("other_name");
    denied_because(event(&ev, "dns", "other.test"), "other.test is not allowed");
    assert!(
        ev.iter().all(|e| e["kind"] == "dns"),
        "nothing to connect to: {ev:?}"
    );
    // The second run with the same --events file appended its own.
    assert_eq!(case("other_name_again").rc, 0);
    denied_because(event(&ev, "dns", "again.test"), "again.test is not allowed");
}

#[test]
fn an_allowed_name_on_another_port_is_refused() {
    let c = case("other_port");
    assert!(!c.stdout.contains(PAGE), "{c:?}");
    assert!(c.stderr.contains("refused"), "{c:?}");
    let ev = net("other_port");
    assert_eq!(event(&ev, "dns", "allowed.test")["allowed"], true);
    denied_because(event(&ev, "connect", "allowed.test"), "not on port 8080");
}

#[test]
fn an_address_no_allowed_name_led_to_is_refused() {
    let c = case("direct_ip");
    assert!(
        !c.stdout.contains(PAGE) && c.stderr.contains("refused"),
        "{c:?}"
    );
    denied_because(
        event(&net("direct_ip"), "connect", "198.51.100.7"),
        "no allowed name",
    );
}

#[test]
fn metadata_loopback_private_and_unique_local_targets_are_refused_by_name_and_address() {
    let c = case("ssrf");
    assert!(!c.stdout.contains(PAGE), "nothing was fetched: {c:?}");
    let ev = net("ssrf");
    for (name, range) in [
        ("meta.test", "link-local"),
        ("rebind.test", "loopback"),
        ("private.test", "private"),
        ("v6.test", "unique local"),
        ("mapped.test", "loopback"),
    ] {
        denied_because(event(&ev, "dns", name), range);
    }
    denied_because(event(&ev, "connect", "169.254.169.254"), "link-local");
    denied_because(event(&ev, "connect", "10.1.2.3"), "private");
    // The guest's own loopback stays in the guest: the host's page on its
    // 127.0.0.1:8081 is out of reach, and the proxy never saw a try.
    assert!(!ev.iter().any(|e| e["address"] == "127.0.0.1"), "{ev:#?}");
}

#[test]
fn the_host_is_reached_by_its_name_on_the_allowed_port_only() {
    let c = case("host_allowed");
    assert_eq!(c.stdout.matches(PAGE).count(), 1, "{c:?}");
    let ev = net("host_allowed");
    assert_eq!(
        event(&ev, "dns", "host.mcpvm.internal")["addresses"],
        serde_json::json!(["10.0.2.254"])
    );
    let tries: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "connect").collect();
    assert!(
        tries
            .iter()
            .any(|e| e["port"] == 8081 && e["allowed"] == true),
        "{tries:#?}"
    );
    let refused = tries.iter().find(|e| e["port"] == 8080).unwrap();
    denied_because(refused, "host.mcpvm.internal:8080 is not allowed");
    let c = case("host_unnamed");
    assert!(!c.stdout.contains(PAGE), "{c:?}");
    denied_because(
        event(&net("host_unnamed"), "dns", "host.mcpvm.internal"),
        "not allowed",
    );
}

#[test]
fn deny_net_refuses_and_logs_what_the_rules_would_have_allowed() {
    let c = case("deny_net");
    assert!(
        !c.stdout.contains(PAGE) && c.stdout.contains("rc=1"),
        "{c:?}"
    );
    denied_because(
        event(&net("deny_net"), "dns", "allowed.test"),
        "not allowed",
    );
}

#[test]
fn without_rules_the_guest_has_no_network_device_and_no_proxy() {
    let c = case("no_network");
    assert!(!c.stdout.contains(PAGE), "{c:?}");
    let devices: Vec<&str> = c.stdout.lines().filter(|l| !l.starts_with("rc=")).collect();
    assert_eq!(devices, ["lo"], "{c:?}");
    assert!(net("no_network").is_empty());
}

#[test]
fn a_flood_of_connections_and_lookups_is_bounded_and_the_proxy_stays_up() {
    let c = case("flood");
    // The run ends by itself, not at its time limit: nothing hung.
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(
        c.stdout.contains("after"),
        "the script got past the flood: {c:?}"
    );
    let ev = net("flood");
    assert!(
        ev.len() > 300,
        "the flood reached the proxy: {} events",
        ev.len()
    );
    // The host's proxy stays up: after the flood's last lookup it still
    // decides the guest's requests.
    let at = |e: &Value| e["at_ms"].as_f64().unwrap_or(0.0);
    let flood_end = ev
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with('n') && n.ends_with(".test"))
        })
        .map(at)
        .fold(0.0, f64::max);
    assert!(
        ev.iter().any(|e| e["kind"] == "dns"
            && e["name"] == "allowed.test"
            && e["allowed"] == true
            && at(e) > flood_end),
        "no decision after the flood: {c:?}"
    );
    // And the guest's network comes back: the connections its flood
    // gave up on before the host decided are closed, on both sides, so
    // the request after it is answered (stop 59's CI saw the proxy's 256
    // streams held by them until the VM ended).
    assert!(
        c.stdout.contains(PAGE) && c.stdout.contains("rc=0"),
        "the request after the flood was not answered: {c:?}"
    );
}

/// The probe's step for `tool`.
fn call(r: &Value, tool: &str) -> Value {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == format!("tools/call:{tool}"))
        .cloned()
        .unwrap_or_else(|| panic!("no call of {tool}: {r}"))
}

#[test]
fn the_catalogued_fetch_server_fetches_when_allowed_and_is_refused_otherwise() {
    let c = case("fetch_allowed");
    let r = c.json();
    let fetch = call(&r, "fetch");
    assert_eq!(fetch["outcome"], "ok", "{fetch}");
    assert!(fetch["detail"].to_string().contains(PAGE), "{fetch}");
    let seen = fetch["effects"]["network"].to_string();
    assert!(
        seen.contains("connect allowed.test@198.51.100.7:80 allowed"),
        "attributed to the call: {seen}"
    );

    let c = case("fetch_denied");
    let fetch = call(&c.json(), "fetch");
    assert_ne!(fetch["outcome"], "ok", "{fetch}");
    assert!(!fetch["detail"].to_string().contains(PAGE), "{fetch}");
    let seen = fetch["effects"]["network"].to_string();
    assert!(seen.contains("dns allowed.test denied"), "{seen}");
}

/// A call whose server retries a refused upstream and never answers is
/// cut soon after the first refused lookup, and says why, instead of
/// waiting out the step timeout (200 s here).
#[test]
fn a_call_waiting_on_a_refused_upstream_is_cut_and_says_why() {
    let c = case("retry_upstream");
    let search = call(&c.json(), "search");
    assert_eq!(search["outcome"], "timeout", "{search}");
    let said = search["detail"]["error"].as_str().unwrap_or_default();
    assert!(
        said.contains("api.upstream.test") && said.contains("cut there"),
        "{search}"
    );
    let took = search["took_ms"].as_f64().unwrap();
    assert!(took < 150_000.0, "cut before the step timeout: {took} ms");
    let seen = search["effects"]["network"].to_string();
    assert!(seen.contains("dns api.upstream.test denied"), "{seen}");
}

#[test]
fn the_audit_shows_what_fetch_tried_under_each_profile() {
    let c = case("audit_fetch");
    let records: Vec<Value> = results()
        .file("results.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cell = |p: &str| {
        records
            .iter()
            .find(|r| r["profile"] == p)
            .unwrap_or_else(|| panic!("no {p} cell: {c:?}"))["network"]
            .to_string()
    };
    assert!(
        cell("observe").contains("connect allowed.test@198.51.100.7:80 allowed"),
        "{}",
        cell("observe")
    );
    assert!(
        cell("deny-net").contains("dns allowed.test denied"),
        "{}",
        cell("deny-net")
    );
    let report = results().file("report.md");
    assert!(report.contains("## Network"), "{report}");
}

#[test]
fn a_streamable_http_server_in_a_vm_answers_from_the_host_through_listen() {
    let c = case("http_listen");
    assert!(c.stdout.contains("answered after"), "{c:?}");
    let answer = results().file("http_init.txt");
    assert!(
        answer.contains("\"serverInfo\"") && answer.contains("\"id\":1"),
        "{answer}"
    );
    // SIGTERM ends the run (128 + 15) and the VM with it.
    assert!(c.stdout.contains("run rc=143"), "{c:?}");
    // Without the run's token, or from another origin: refused.
    assert!(!c.stdout.contains(": answered"), "{c:?}");
    let no_token = results().file("http_no_token.txt");
    assert!(no_token.contains("401"), "{no_token}");
    let foreign = results().file("http_foreign_origin.txt");
    assert!(foreign.contains("403"), "{foreign}");
}

#[test]
fn mcpvm_probe_speaks_streamable_http_to_such_a_server() {
    let c = case("http_probe");
    let r = c.json();
    assert_eq!(r["transport"], "vm", "{c:?}");
    assert_eq!(r["lifecycle"], "initialize", "{r}");
    assert!(r["tools"].as_array().is_some_and(|t| t.len() > 5), "{r}");
    for step in ["initialize", "tools/list", "ping"] {
        let s = r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == step)
            .unwrap();
        assert_eq!(s["outcome"], "ok", "{s}");
    }
}

/// A server under deny-net answers every POST with a redirect to an
/// address of the host's (here a listener of the testbed host's own):
/// the probe never connects there, and the failed step says where the
/// redirect pointed.
#[test]
fn the_probe_follows_no_redirect_out_of_its_endpoint() {
    let c = case("http_redirect");
    assert_eq!(
        results().file("redirect_target.txt"),
        "seen:",
        "the host connected where the server pointed: {c:?}"
    );
    let r = c.json();
    let said = r.to_string();
    assert!(
        said.contains("a redirect to 'http://127.0.0.1:9999/stolen?k=1', not followed"),
        "{said}"
    );
    let steps = r["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{r}");
    assert!(steps.iter().all(|s| s["outcome"] != "ok"), "{r}");
    assert!(r["lifecycle"].is_null(), "{r}");
}

#[test]
fn no_proxy_process_or_run_directory_is_left_behind() {
    let ps = results().file("ps.txt");
    assert!(!ps.contains("mcpvm egress"), "{ps}");
    assert_eq!(
        results().file("leftovers.txt").trim(),
        "",
        "run directories left"
    );
}
