//! Findings as SARIF 2.1.0 (OASIS), the format code-scanning dashboards
//! and security tools read: one run, mcpvm as the tool with one rule per
//! finding class (help text, severity), one result per finding. A finding
//! has no source line of its own: it is located at what names the server
//! (its catalogue entry's line, or the program probed) and logically at
//! its tool (`server/tool`), carries a fingerprint that stays the same
//! from run to run (so a dashboard sees the same finding, not a new one),
//! and its evidence and reproducing call go in its properties.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::judge::findings::Finding;
use crate::report::result::ProbeResult;

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The classes, each a rule: (id, short description, help, severity).
const RULES: &[(&str, &str, &str, &str)] = &[
    (
        "command-injection",
        "A tool argument ran as a shell command",
        "Pass arguments to programs as a list (no shell), or quote them for the shell that reads them.",
        "high",
    ),
    (
        "argument-injection",
        "A tool argument became an option of a program it runs",
        "End the program's options with `--` before user input, or refuse input that starts with `-`.",
        "high",
    ),
    (
        "path-traversal",
        "A tool reached a path outside the directories it serves",
        "Resolve the path (symlinks included) and compare whole path components with each allowed root.",
        "high",
    ),
    (
        "secret-exposure",
        "A tool read a secret or returned it",
        "Serve only the declared roots; never echo credentials or environment secrets in results.",
        "high",
    ),
    (
        "ssrf",
        "A tool connected to an address its caller chose",
        "Allow-list the hosts a tool may reach, and refuse link-local, loopback and private addresses.",
        "high",
    ),
    (
        "tool-poisoning",
        "A description speaks to the model, or hides what a reader does not see",
        "Describe what the tool does for the user, nothing else: no instructions to the assistant, no references to other tools' secrets, no invisible or control characters.",
        "high",
    ),
    (
        "mcp-app",
        "An app's page loads or sends elsewhere, or speaks to the model",
        "Serve the app's code and assets from the server itself, post and fetch only to the server, and keep instructions to the model out of the page.",
        "high",
    ),
    (
        "name-confusion",
        "A name can pass for another",
        "Name tools, prompts and resources in plain ASCII, so that a user and a client see what they get.",
        "medium",
    ),
    (
        "name-collision",
        "A tool has the name of another server's tool, or of a well-known one",
        "Prefix tools with the server's own name (github_create_issue), so that a client with several servers connected calls the one the user meant.",
        "medium",
    ),
    (
        "installer-spoofing",
        "A package's name is a typo away from a popular package's",
        "Check that the package is the one meant (its publisher, its repository) before installing it; a name one edit from a popular one is how typosquatting reaches users.",
        "high",
    ),
    (
        "backdoor",
        "A package's install scripts did more than install it",
        "Install scripts should build the package in its own directory and nothing else: no credential reads, no files planted elsewhere, no programs or downloads the lock does not name. Install it with its scripts off (the catalogue's ignore_scripts), or choose another package.",
        "high",
    ),
    (
        "rug-pull",
        "A definition changed while the version stayed the same",
        "A server must not change what its tools say or take without a new release; review the change, and pin again only if it is meant (mcpvm pin).",
        "high",
    ),
    (
        "drift",
        "A definition changed with a new release",
        "Review what the new release's tools say and take before approving it, then pin it (mcpvm pin).",
        "medium",
    ),
    (
        "re-deployment",
        "A release older than the pinned one is running",
        "Run the pinned release or a newer one: an older one may carry what the pin moved past.",
        "high",
    ),
];

/// The file that names a server: a catalogue and its entry's line, or
/// the program probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// A path, relative (to where mcpvm ran) or absolute.
    pub path: String,
    pub line: Option<usize>,
}

impl Artifact {
    fn location(&self) -> Value {
        // An absolute path as a file URI; a relative one as a relative
        // reference, which dashboards resolve against the checkout.
        let uri = match self.path.strip_prefix('/') {
            Some(rest) => format!("file:///{}", percent(rest)),
            None => percent(&self.path),
        };
        let mut loc = json!({"artifactLocation": {"uri": uri}});
        if let Some(line) = self.line {
            loc["region"] = json!({"startLine": line});
        }
        loc
    }
}

/// A path as a URI reference: unreserved characters and `/` kept, every
/// other byte escaped.
fn percent(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The SARIF log of `result`'s findings; `server` names what was probed,
/// `artifact` where it is named.
pub fn log(result: &ProbeResult, server: &str, artifact: &Artifact) -> Value {
    let mut run = run(
        &result.findings,
        server,
        result.server_name.as_deref(),
        result.server_version.as_deref(),
        artifact,
    );
    with_roles(&mut run, &result.roles);
    log_of(vec![run])
}

/// The run's tools' roles (`judge::roles`), as the run's property
/// `toolRoles`: what each tool was seen to do is no finding, but it is
/// what a dashboard composing servers needs beside them.
pub fn with_roles(run: &mut Value, roles: &[crate::judge::roles::ToolRoles]) {
    if !roles.is_empty() {
        run["properties"]["toolRoles"] = serde_json::to_value(roles).unwrap_or_default();
    }
}

/// The finding's identity across runs: its server, tool, class, rule
/// and argument (not its payload or wording, which may change).
fn fingerprint(server: &str, tool: &str, f: &Finding) -> String {
    let mut h = Sha256::new();
    for part in [
        server,
        tool,
        &f.class,
        &f.rule,
        f.argument.as_deref().unwrap_or(""),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// SARIF's level and the 0–10 score code-scanning services rank by.
fn level_and_score(severity: &str) -> (&'static str, &'static str) {
    match severity {
        "critical" => ("error", "9.5"),
        "high" => ("error", "8.0"),
        "medium" => ("warning", "5.5"),
        "low" => ("note", "2.0"),
        _ => ("error", "8.0"),
    }
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
    artifact: &Artifact,
) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|(id, short, help, severity)| {
            let (level, score) = level_and_score(severity);
            json!({"id": id, "name": id, "shortDescription": {"text": short},
                "fullDescription": {"text": format!("{short}: judged by what the server did in its microVM, not by its code or description.")},
                "help": {"text": help, "markdown": help},
                "defaultConfiguration": {"level": level},
                "properties": {"tags": ["security", id], "precision": "high", "security-severity": score}})
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let tool = f.step.split_once(':').map_or(f.step.as_str(), |(_, t)| t);
            let rule_index = RULES.iter().position(|(id, ..)| *id == f.class);
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
                // -1: "not given", where an unknown class has no rule.
                "ruleIndex": rule_index.map_or(-1, |i| i as i64),
                "level": level_and_score(&f.severity).0,
                "message": {"text": text},
                "locations": [{
                    "physicalLocation": artifact.location(),
                    "logicalLocations": [{
                        "name": tool,
                        "fullyQualifiedName": format!("{server}/{tool}"),
                        "kind": "function",
                    }],
                }],
                "partialFingerprints": {"mcpvmFinding/v1": fingerprint(server, tool, f)},
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
    fn the_tools_roles_ride_along_as_the_runs_property() {
        use crate::judge::roles::{Role, ToolRoles};
        let mut r = ProbeResult::new(&["mcpvm".into()], "vm");
        let program = Artifact {
            path: "srv".into(),
            line: None,
        };
        let clean = log(&r, "x", &program);
        assert!(clean["runs"][0]["properties"].get("toolRoles").is_none());
        r.roles.push(ToolRoles {
            tool: "rm".into(),
            declared: vec![Role::Destructive],
            ..ToolRoles::default()
        });
        let with = log(&r, "x", &program);
        assert_eq!(
            with["runs"][0]["properties"]["toolRoles"][0]["declared"][0],
            "destructive"
        );
    }

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
            evidence: vec![crate::report::result::Evidence::Excerpt("connect".into())],
        });
        let at = Artifact {
            path: "guest-image/catalogue.toml".into(),
            line: Some(12),
        };
        let log = log(&r, "filesystem", &at);
        assert_eq!(log["version"], "2.1.0");
        let run = &log["runs"][0];
        let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), RULES.len());
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
        let physical = &result["locations"][0]["physicalLocation"];
        assert_eq!(
            physical["artifactLocation"]["uri"],
            "guest-image/catalogue.toml"
        );
        assert_eq!(physical["region"]["startLine"], 12);
        assert_eq!(rules[4]["properties"]["security-severity"], "8.0");
        // The same finding in another run (another payload, other
        // wording) has the same fingerprint; another argument has not.
        let print = |r: &ProbeResult| {
            super::log(r, "filesystem", &at)["runs"][0]["results"][0]["partialFingerprints"]
                ["mcpvmFinding/v1"]
                .clone()
        };
        let first = print(&r);
        assert_eq!(first.as_str().unwrap().len(), 32);
        r.findings[0].payload = Some("http://[::1]/".into());
        r.findings[0].why = "other words".into();
        assert_eq!(print(&r), first);
        r.findings[0].argument = Some("/proxy".into());
        assert_ne!(print(&r), first);
        // A program's path is a file URI, escaped.
        let program = Artifact {
            path: "/opt/my server/run".into(),
            line: None,
        };
        assert_eq!(
            program.location(),
            json!({"artifactLocation": {"uri": "file:///opt/my%20server/run"}})
        );
        // No findings is a valid log with no results.
        let clean = super::log(&ProbeResult::new(&[], "vm"), "x", &program);
        assert_eq!(clean["runs"][0]["results"], json!([]));
    }
}
