//! Servers with what they expect of the machine in their VMs (`needs`,
//! docs/catalogue.md), on real KVM (the testbed here). The browser
//! servers people install most (@playwright/mcp, chrome-devtools-mcp),
//! with Debian's Chromium from their layers (`needs = ["browser"]`), open
//! a page the guest serves from the workspace, fill in its form, read it
//! back and return a screenshot as MCP image content; a page outside is
//! refused under deny-net and recorded. server-postgres queries the
//! PostgreSQL its VM started (`needs = ["postgres"]`). One testbed
//! session; the store travels on its second disk.

mod common;

use std::sync::OnceLock;

use common::{artifact, call, run_scenario_with_disk, store_files, workspace, Results};
use serde_json::Value;

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let ws = workspace();
        let mut files = common::run_payload();
        files.push(format!(
            "{}:needs.toml",
            ws.join("mcpvm/tests/fixtures/needs-catalogue.toml")
                .display()
        ));
        files.push(format!(
            "{}:page.html",
            ws.join("mcpvm/tests/fixtures/browser-page.html").display()
        ));
        let disk = store_files(&artifact("images-needs"), &[]);
        let scenario = ws.join("mcpvm/tests/scenarios/needs.sh");
        run_scenario_with_disk(&scenario, &files, &disk, 2400)
    })
}

fn probed(case: &str) -> Value {
    let c = results().case(case);
    assert_eq!(c.rc, 0, "{case}: {c:?}");
    let r = c.json();
    assert_eq!(r["transport"], "vm", "{case}: {r}");
    r
}

fn text(step: &Value) -> &str {
    step["detail"]["text"].as_str().unwrap_or_default()
}

/// The screenshot came back as an image part: a PNG of a real viewport.
fn assert_png(step: &Value) {
    let media = step["detail"]["media"]
        .as_array()
        .unwrap_or_else(|| panic!("no image in the answer: {step}"));
    let png = media
        .iter()
        .find(|m| m["mime_type"] == "image/png")
        .unwrap_or_else(|| panic!("no PNG: {step}"));
    assert!(png["width"].as_u64().unwrap() >= 200, "{png}");
    assert!(png["height"].as_u64().unwrap() >= 200, "{png}");
    assert!(png["bytes"].as_u64().unwrap() > 1000, "{png}");
}

#[test]
fn playwright_fills_in_a_served_page_and_returns_a_screenshot() {
    let r = probed("playwright");
    let calls: Vec<&str> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["step"].as_str()?.strip_prefix("tools/call:"))
        .collect();
    assert_eq!(
        calls,
        [
            "browser_navigate",
            "browser_type",
            "browser_click",
            "browser_snapshot",
            "browser_take_screenshot"
        ],
        "made in the order given"
    );
    for tool in &calls {
        assert_eq!(
            call(&r, tool)["outcome"],
            "ok",
            "{tool}: {}",
            call(&r, tool)
        );
    }
    let nav = text(call(&r, "browser_navigate"));
    assert!(nav.contains("Page Title: mcpvm seeded page"), "{nav}");
    // What the page's script wrote when the form was submitted.
    let snap = text(call(&r, "browser_snapshot"));
    assert!(snap.contains("hello mcpvm"), "{snap}");
    assert!(snap.contains("token-4f2a in the page"), "{snap}");
    assert_png(call(&r, "browser_take_screenshot"));
}

#[test]
fn chrome_devtools_reads_a_served_page_and_returns_a_screenshot() {
    let r = probed("chrome_devtools");
    let nav = call(&r, "navigate_page");
    assert_eq!(nav["outcome"], "ok", "{nav}");
    assert!(text(nav).contains("mcpvm seeded page"), "{nav}");
    let snap = text(call(&r, "take_snapshot"));
    assert!(snap.contains("textbox \"Name\""), "{snap}");
    assert!(snap.contains("button \"Greet\""), "{snap}");
    assert_png(call(&r, "take_screenshot"));
}

#[test]
fn a_page_outside_is_refused_under_deny_net_and_recorded() {
    let r = probed("outside");
    let nav = call(&r, "browser_navigate");
    assert_eq!(nav["outcome"], "tool_error", "{nav}");
    let refused: Vec<&Value> = r["guest_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "net" && e["allowed"] == false)
        .collect();
    assert!(
        refused.iter().any(|e| e["name"]
            .as_str()
            .is_some_and(|n| n.contains("example.com"))),
        "no refused lookup of example.com recorded: {}",
        r["guest_events"]
    );
}

#[test]
fn postgres_answers_a_real_query_on_the_database_its_vm_started() {
    let r = probed("postgres");
    let step = call(&r, "query");
    assert_eq!(step["outcome"], "ok", "{step}");
    // The seeded rows, joined and summed by the database: Grace Hopper's
    // two orders come to 3899.
    let rows = text(step);
    assert!(
        rows.contains("Grace Hopper") && rows.contains("3899"),
        "{rows}"
    );
    assert!(rows.contains("Ada Lovelace"), "{rows}");
}
