//! Findings as SARIF 2.1.0 (OASIS), the format code-scanning dashboards
//! and security tools read: one run, mcpvm as the tool with one rule per
//! finding class, one result per finding. A finding has no source file;
//! it is located logically, at the server's tool (`server/tool`), and its
//! evidence and reproducing call go in the result's properties.

use serde_json::{json, Value};

use crate::findings::Finding;
use crate::result::ProbeResult;

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The classes, each a rule: (id, short description, help).
const RULES: &[(&str, &str, &str)] = &[
    (
        "command-injection",
        "A tool argument ran as a shell command",
        "Pass arguments to programs as a list (no shell), or quote them for the shell that reads them.",
    ),
    (
        "argument-injection",
        "A tool argument became an option of a program it runs",
        "End the program's options with `--` before user input, or refuse input that starts with `-`.",
    ),
    (
        "path-traversal",
        "A tool reached a path outside the directories it serves",
        "Resolve the path (symlinks included) and compare whole path components with each allowed root.",
    ),
    (
        "secret-exposure",
        "A tool read a secret or returned it",
        "Serve only the declared roots; never echo credentials or environment secrets in results.",
    ),
    (
        "ssrf",
        "A tool connected to an address its caller chose",
        "Allow-list the hosts a tool may reach, and refuse link-local, loopback and private addresses.",
    ),
];

/// The SARIF log of `result`'s findings; `server` names what was probed.
pub fn log(result: &ProbeResult, server: &str) -> Value {
    log_of(vec![run(
        &result.findings,
        server,
        result.server_name.as_deref(),
        result.server_version.as_deref(),
    )])
}

/// A log of runs (one per server probed).
pub fn log_of(runs: Vec<Value>) -> Value {
    json!({"$schema": SCHEMA, "version": "2.1.0", "runs": runs})
}

/// One server's findings as a SARIF run.
pub fn run(
    findings: &[Finding],
    server: &str,
    server_name: Option<&str>,
    server_version: Option<&str>,
) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|(id, short, help)| {
            json!({"id": id, "name": id, "shortDescription": {"text": short},
                "help": {"text": help}, "defaultConfiguration": {"level": "error"}})
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let tool = f.step.split_once(':').map_or(f.step.as_str(), |(_, t)| t);
            let rule_index = RULES.iter().position(|(id, _, _)| *id == f.class);
            let mut text = format!("{} in {tool}: {}", f.class, f.why);
            if let Some(p) = &f.payload {
                text += &format!(" (payload {p:?}");
                if let Some(a) = &f.argument {
                    text += &format!(" in {a}");
                }
                text += ")";
            }
            json!({
                "ruleId": f.class,
                "ruleIndex": rule_index,
                "level": "error",
                "message": {"text": text},
                "locations": [{"logicalLocations": [{
                    "name": tool,
                    "fullyQualifiedName": format!("{server}/{tool}"),
                    "kind": "function",
                }]}],
                "properties": {
                    "severity": f.severity,
                    "rule": f.rule,
                    "step": f.step,
                    "call": f.call,
                    "argument": f.argument,
                    "payload": f.payload,
                    "attempts": f.attempts,
                    "evidence": f.evidence,
                },
            })
        })
        .collect();
    json!({
        "tool": {"driver": {
            "name": "mcpvm",
            "version": env!("CARGO_PKG_VERSION"),
            "rules": rules,
        }},
        "properties": {
            "server": server,
            "serverName": server_name,
            "serverVersion": server_version,
        },
        "results": results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_finding_is_a_result_of_its_rule_located_at_its_tool() {
        let mut r = ProbeResult::new(&["mcpvm".into()], "vm");
        r.server_name = Some("fs".into());
        r.findings.push(Finding {
            class: "ssrf".into(),
            rule: "connect-to-payload".into(),
            severity: "high".into(),
            step: "attack:fetch".into(),
            call: Some(r#"fetch={"url":"http://169.254.169.254/"}"#.into()),
            argument: Some("/url".into()),
            payload: Some("http://169.254.169.254/".into()),
            attempts: 3,
            why: "it tried to reach inet 169.254.169.254:80".into(),
            evidence: vec![crate::result::Evidence::Excerpt("connect".into())],
        });
        let log = log(&r, "filesystem");
        assert_eq!(log["version"], "2.1.0");
        let run = &log["runs"][0];
        let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 5);
        let result = &run["results"][0];
        assert_eq!(result["ruleId"], "ssrf");
        assert_eq!(
            rules[result["ruleIndex"].as_u64().unwrap() as usize]["id"],
            "ssrf"
        );
        assert_eq!(
            result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"],
            "filesystem/fetch"
        );
        assert!(result["message"]["text"]
            .as_str()
            .unwrap()
            .contains("in /url"));
        assert_eq!(result["properties"]["attempts"], 3);
        // No findings is a valid log with no results.
        let clean = super::log(&ProbeResult::new(&[], "vm"), "x");
        assert_eq!(clean["runs"][0]["results"], json!([]));
    }
}
