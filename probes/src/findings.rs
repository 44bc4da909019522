//! Findings: what a server was made to do that it must not, judged by
//! what happened inside the VM (recorded effects, docs/withholding.md)
//! against the canaries planted there, and attributed to the step whose
//! request caused it. A finding names its class (also its SARIF
//! `ruleId`), the step and its arguments, why, and the events that prove
//! it.
//!
//! Judged so far:
//! - `path-traversal`: a call touched a path beside the workspace that
//!   only shares its name's prefix (`/workspace_secret`), or went out of
//!   the workspace through the link planted in it, or went where a
//!   traversal payload led when that is outside the server's roots;
//! - `secret-exposure`: a call read a canary file, or the canary token
//!   appears in what the server answered;
//! - `command-injection` / `argument-injection`: the payload's marker
//!   file was made, or a program was run on it;
//! - `ssrf`: a connect to the address the payload named.
//!
//! Nothing is judged from a server's own start: only effects attributed
//! to a request count, so a finding always has a call that reproduces it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::effects::strings;
use crate::exchange::Direction;
use crate::result::StepResult;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// `command-injection`, `argument-injection`, `path-traversal`,
    /// `secret-exposure` or `ssrf`.
    pub class: String,
    /// Which judgement showed it: `sibling-prefix`, `symlink-escape`,
    /// `outside-roots`, `canary-read`, `token-in-answer`, `marker-made`,
    /// `connect-to-payload`.
    pub rule: String,
    pub severity: String,
    pub step: String,
    /// The `--call` that reproduces it: `TOOL={arguments}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// For an attack: the argument (a JSON pointer into the arguments)
    /// and the first payload that showed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// How many attempts showed it (payloads on this argument).
    #[serde(default = "one")]
    pub attempts: u32,
    pub why: String,
    /// The recorded effects, or the answer's excerpt, that prove it.
    pub evidence: Vec<Value>,
}

fn one() -> u32 {
    1
}

/// Evidence kept per finding.
const MAX_EVIDENCE: usize = 10;

/// The canaries of a run, from the agent's `canaries` event.
struct Canaries {
    token: String,
    files: Vec<String>,
    sibling: String,
    link: Option<String>,
}

impl Canaries {
    fn from_events(events: &[Value]) -> Option<Self> {
        let e = events.iter().find(|e| e["event"] == "canaries")?;
        Some(Canaries {
            token: e["token"].as_str()?.to_string(),
            files: strings(&e["files"]),
            sibling: e["sibling"].as_str()?.to_string(),
            link: e["link"].as_str().map(String::from),
        })
    }

    fn beside(&self, path: &str) -> bool {
        path == self.sibling || path.starts_with(&format!("{}/", self.sibling))
    }

    fn through_link(&self, path: &str) -> bool {
        self.link
            .as_deref()
            .is_some_and(|l| path == l || path.starts_with(&format!("{l}/")))
    }
}

/// Judges the steps of a run against its guest events.
pub fn judge(steps: &[StepResult], events: &[Value], roots: &[String]) -> Vec<Finding> {
    let Some(canaries) = Canaries::from_events(events) else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    for step in steps {
        let sent = crate::effects::requests(&step.exchange);
        let mine: Vec<&Value> = events
            .iter()
            .filter(|e| e["event"] == "effect" || e["event"] == "net")
            .filter(|e| e["during"]["phase"] == "request")
            .filter(|e| {
                sent.iter()
                    .any(|(id, m)| e["during"]["id"] == *id && e["during"]["method"] == m.as_str())
            })
            .collect();
        let call = call_of(step);
        let attack = step.detail.get("attack").filter(|a| a.is_object());
        let text = |k: &str| attack.and_then(|a| a[k].as_str()).map(String::from);
        let (argument, payload) = (text("argument"), text("payload"));
        // One finding per class, rule, step and argument; another
        // attempt that shows it counts.
        let mut add = |class: &str, rule: &str, why: String, evidence: Vec<Value>| {
            if evidence.is_empty() {
                return;
            }
            // Where a canary's rule showed a traversal, the boundary's
            // would only say it again, less precisely.
            let said = |f: &Finding| {
                f.class == class && f.rule != rule && f.step == step.step && f.argument == argument
            };
            if rule == "outside-roots" && findings.iter().any(said) {
                return;
            }
            let same = |f: &&mut Finding| {
                f.class == class && f.rule == rule && f.step == step.step && f.argument == argument
            };
            if let Some(f) = findings.iter_mut().find(same) {
                if f.payload != payload {
                    f.attempts += 1;
                }
                let room = MAX_EVIDENCE.saturating_sub(f.evidence.len());
                f.evidence.extend(evidence.into_iter().take(room));
                return;
            }
            findings.push(Finding {
                class: class.into(),
                rule: rule.into(),
                severity: "high".into(),
                step: step.step.clone(),
                call: call.clone(),
                argument: argument.clone(),
                payload: payload.clone(),
                attempts: 1,
                why,
                evidence: evidence.into_iter().take(MAX_EVIDENCE).collect(),
            });
        };
        let paths = |e: &Value| -> Vec<String> {
            let mut p = strings(&e["paths"]);
            p.extend(e["resolved"].as_str().map(String::from));
            p
        };
        let touching = |hit: &dyn Fn(&str) -> bool| -> Vec<Value> {
            mine.iter()
                .filter(|e| paths(e).iter().any(|p| hit(p)))
                .map(|e| (*e).clone())
                .collect()
        };
        add(
            "path-traversal",
            "sibling-prefix",
            format!(
                "it reached {}, beside the workspace: a name prefix was taken for a directory",
                canaries.sibling
            ),
            touching(&|p| canaries.beside(p)),
        );
        add(
            "path-traversal",
            "symlink-escape",
            "it followed the link planted in the workspace out of it".into(),
            touching(&|p| canaries.through_link(p)),
        );
        let read: Vec<Value> = mine
            .iter()
            .filter(|e| e["call"].as_str().is_some_and(|c| c.starts_with("open")))
            .filter(|e| paths(e).iter().any(|p| canaries.files.contains(p)))
            .map(|e| (*e).clone())
            .collect();
        add(
            "secret-exposure",
            "canary-read",
            "it opened a canary secret".into(),
            read,
        );
        let leaked: Vec<Value> = step
            .exchange
            .iter()
            .filter(|x| x.dir == Direction::Received)
            .filter_map(|x| {
                let text = x
                    .message
                    .as_ref()
                    .map(Value::to_string)
                    .or(x.text.clone())?;
                // The variable's token, in the answer of a plain call, is a
                // tool that shows its environment by design (server-
                // everything's get-env), not one made to: only a file's
                // token counts there. An attack that brings it back counts.
                let env = format!("{}-env", canaries.token);
                let at = text
                    .match_indices(&canaries.token)
                    .map(|(i, _)| i)
                    .find(|&i| attack.is_some() || !text[i..].starts_with(&env))?;
                let from = text[..at]
                    .char_indices()
                    .rev()
                    .nth(40)
                    .map_or(0, |(i, _)| i);
                let to = (at + canaries.token.len() + 40).min(text.len());
                let to = (to..=text.len())
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(text.len());
                Some(Value::String(text[from..to].to_string()))
            })
            .collect();
        add(
            "secret-exposure",
            "token-in-answer",
            "the canary token is in its answer".into(),
            leaked,
        );
        let Some(attack) = attack else { continue };
        let class = attack["class"].as_str().unwrap_or_default();
        let marker = attack["marker"].as_str().unwrap_or("\u{0}");
        if class == "command-injection" || class == "argument-injection" {
            let ran: Vec<Value> = mine
                .iter()
                .filter(|e| marker_made(e, marker))
                .map(|e| (*e).clone())
                .collect();
            add(
                class,
                "marker-made",
                format!("the payload ran: /tmp/{marker} was created, or a program was run on it"),
                ran,
            );
        }
        // A traversal payload that leads out of the roots, and the server
        // went there. The canaries' own rules say it more precisely when
        // the path is theirs; this judges any payload's, a user's too.
        if class == "path-traversal" {
            let out: Vec<String> = targets(payload.as_deref().unwrap_or_default(), roots)
                .into_iter()
                .filter(|t| !roots.iter().any(|r| within(t, r)))
                .collect();
            let reached =
                touching(&|p| p.starts_with('/') && out.iter().any(|t| within(&normalize(p), t)));
            if let Some(t) = out.first() {
                add(
                    "path-traversal",
                    "outside-roots",
                    format!(
                        "it reached {t}, outside its roots ({}), where the payload led",
                        roots.join(", ")
                    ),
                    reached,
                );
            }
        }
        if let Some(address) = attack["address"].as_str().filter(|_| class == "ssrf") {
            // The guest's own connect, as recorded; or, with a network,
            // the host's egress proxy's `net` event for it (allowed or
            // refused: the server tried either way).
            let proxied = |e: &Value| {
                e["event"] == "net"
                    && e["kind"] == "connect"
                    && e["address"]
                        .as_str()
                        .zip(e["port"].as_u64())
                        .is_some_and(|(a, p)| format!("inet {a}:{p}") == address)
            };
            let reached: Vec<Value> = mine
                .iter()
                .filter(|e| {
                    (matches!(e["call"].as_str(), Some("connect" | "sendto"))
                        && e["address"] == address)
                        || proxied(e)
                })
                .map(|e| (*e).clone())
                .collect();
            add(
                "ssrf",
                "connect-to-payload",
                format!("it tried to reach {address}, the address the payload named"),
                reached,
            );
        }
    }
    findings
}

/// Where a traversal payload leads: the path it names (percent-decoded),
/// made absolute against each root when it is relative, `.` and `..`
/// taken as written.
fn targets(payload: &str, roots: &[String]) -> Vec<String> {
    let text = percent_decoded(payload);
    if text.starts_with('/') {
        return vec![normalize(&text)];
    }
    roots
        .iter()
        .map(|r| normalize(&format!("{r}/{text}")))
        .collect()
}

/// `/a/./b/../c` → `/a/c`; `..` above the root stays at the root.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// `path` is `root` or below it, by whole components.
fn within(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An effect that proves a marker payload ran: a file by the marker's
/// name created or written (`touch /tmp/<marker>`, `--output=`), or a
/// program run with `/tmp/<marker>` as an argument of its own (a shell
/// handed the payload as text does not count, only what it then runs).
fn marker_made(e: &Value, marker: &str) -> bool {
    let path = format!("/tmp/{marker}");
    let call = e["call"].as_str().unwrap_or_default();
    let names = |k: &str| {
        e[k].as_array()
            .is_some_and(|a| a.iter().any(|p| p.as_str() == Some(path.as_str())))
    };
    match call {
        "execve" | "execveat" => names("argv") && !is_shell(&e["argv"][0]),
        "open" | "openat" | "openat2" => {
            let access = e["access"].as_str().unwrap_or("read");
            access != "read" && names("paths")
        }
        "creat" | "mkdir" | "mkdirat" | "rename" | "renameat" | "renameat2" | "link" | "linkat"
        | "symlink" | "symlinkat" | "truncate" => names("paths"),
        _ => false,
    }
}

fn is_shell(argv0: &Value) -> bool {
    let name = argv0.as_str().unwrap_or_default();
    let base = name.rsplit('/').next().unwrap_or(name);
    matches!(base, "sh" | "bash" | "dash" | "ash" | "zsh" | "busybox")
}

/// `TOOL={arguments}` of a tool call step, from what it sent.
fn call_of(step: &StepResult) -> Option<String> {
    let tool = step
        .step
        .strip_prefix("tools/call:")
        .or(step.step.strip_prefix("attack:"))?;
    let args = step
        .exchange
        .iter()
        .filter(|x| x.dir == Direction::Sent)
        .find_map(|x| x.message.as_ref()?.pointer("/params/arguments").cloned())?;
    Some(format!("{tool}={args}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::Entry;
    use crate::result::Outcome;
    use serde_json::json;

    fn step(name: &str, id: u64, args: Value, answer: Value) -> StepResult {
        let tool = name.strip_prefix("tools/call:").unwrap();
        StepResult {
            step: name.into(),
            outcome: Outcome::Ok,
            at_ms: 0.0,
            took_ms: 0.0,
            detail: Value::Null,
            progress_notifications: 0,
            exchange: vec![
                Entry {
                    at_ms: 0.0,
                    dir: Direction::Sent,
                    bytes: 0,
                    message: Some(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": {"name": tool, "arguments": args}})),
                    text: None,
                },
                Entry {
                    at_ms: 1.0,
                    dir: Direction::Received,
                    bytes: 0,
                    message: Some(json!({"jsonrpc": "2.0", "id": id, "result": answer})),
                    text: None,
                },
            ],
            effects: None,
        }
    }

    fn open(id: u64, tool: &str, path: &str, resolved: Option<&str>) -> Value {
        let mut e = json!({"event": "effect", "call": "openat", "paths": [path], "access": "read",
            "during": {"phase": "request", "id": id, "method": "tools/call", "tool": tool}});
        if let Some(r) = resolved {
            e["resolved"] = json!(r);
        }
        e
    }

    const TOKEN: &str = "MCPVM-CANARY-00ff";

    fn canaries() -> Value {
        json!({"event": "canaries", "token": TOKEN, "env": "MCPVM_SECRET_TOKEN",
            "files": ["/root/.ssh/id_ed25519", "/etc/mcpvm/secret", "/workspace_secret/secret.txt"],
            "sibling": "/workspace_secret", "link": "/workspace/.mcpvm-canary-link"})
    }

    fn roots() -> Vec<String> {
        vec!["/workspace".into(), "/opt/mcp/fs".into()]
    }

    #[test]
    fn a_payload_that_leads_out_of_the_roots_is_found_where_the_server_went_there() {
        // A user's payload, not a canary: judged by the boundary alone.
        let steps = vec![
            attack_step(1, "read", "path-traversal", "..%2f..%2fetc%2fpasswd", None),
            attack_step(2, "read", "path-traversal", "/etc/hostname", None),
            attack_step(3, "read", "path-traversal", "sub/../notes.txt", None),
            attack_step(4, "safe", "path-traversal", "/etc/passwd", None),
        ];
        let events = vec![
            canaries(),
            open(
                1,
                "read",
                "/workspace/../../etc/passwd",
                Some("/etc/passwd"),
            ),
            // Relative, as the server handed it to the kernel.
            open(2, "read", "/etc/hostname", None),
            // Inside the workspace: where it should go.
            open(3, "read", "/workspace/notes.txt", None),
            // A sound tool read its own layer, not the payload's path.
            open(4, "safe", "/opt/mcp/fs/index.js", None),
        ];
        let f = judge(&steps, &events, &roots());
        let got: Vec<(&str, &str)> = f
            .iter()
            .map(|f| (f.rule.as_str(), f.payload.as_deref().unwrap()))
            .collect();
        assert_eq!(
            got,
            [("outside-roots", "..%2f..%2fetc%2fpasswd")],
            "one finding for the read tool's argument, two attempts: {f:#?}"
        );
        assert_eq!(f[0].attempts, 2);
        assert!(
            f[0].why
                .contains("outside its roots (/workspace, /opt/mcp/fs)"),
            "{}",
            f[0].why
        );
        assert_eq!(f[0].evidence.len(), 2);
        // Narrower roots: the workspace itself is outside.
        let narrow = ["/workspace/repo".to_string()];
        let f = judge(&steps[2..3], &events, &narrow);
        assert!(
            f.is_empty(),
            "relative to the root, not the workspace: {f:#?}"
        );
        assert_eq!(normalize("/a/./b/../../../c"), "/c");
        assert!(within("/workspace/x", "/workspace") && !within("/workspace_x", "/workspace"));
        assert!(within("/etc", "/"));
    }

    #[test]
    fn a_prefix_escape_that_reads_a_canary_is_two_findings_with_evidence() {
        let steps = vec![
            step(
                "tools/call:read_file",
                3,
                json!({"path": "/workspace_secret/secret.txt"}),
                json!({"content": [{"type": "text", "text": format!("{TOKEN}-sibling")}]}),
            ),
            step(
                "tools/call:list",
                4,
                json!({"path": "/workspace"}),
                json!({"content": []}),
            ),
        ];
        let events = vec![
            canaries(),
            // At start-up the server read a credential: not a call's doing.
            json!({"event": "effect", "call": "openat", "paths": ["/root/.aws/credentials"],
                "during": {"phase": "start_up"}}),
            open(3, "read_file", "/workspace_secret/secret.txt", None),
            open(4, "list", "/workspace", None),
        ];
        let f = judge(&steps, &events, &roots());
        let rules: Vec<(&str, &str, &str)> = f
            .iter()
            .map(|f| (f.class.as_str(), f.rule.as_str(), f.step.as_str()))
            .collect();
        assert_eq!(
            rules,
            [
                ("path-traversal", "sibling-prefix", "tools/call:read_file"),
                ("secret-exposure", "canary-read", "tools/call:read_file"),
                ("secret-exposure", "token-in-answer", "tools/call:read_file"),
            ],
            "one finding per rule, none for the start-up read or the list: {f:#?}"
        );
        assert!(f[0].why.contains("a name prefix was taken for a directory"));
        assert_eq!(
            f[0].call.as_deref(),
            Some(r#"read_file={"path":"/workspace_secret/secret.txt"}"#)
        );
        assert_eq!(f[0].evidence[0]["paths"][0], "/workspace_secret/secret.txt");
    }

    #[test]
    fn a_link_out_of_the_workspace_and_a_leaked_token_are_found() {
        let steps = vec![step(
            "tools/call:read",
            5,
            json!({"path": "/workspace/.mcpvm-canary-link"}),
            json!({"content": [{"type": "text", "text": format!("key: {TOKEN}-etc")}]}),
        )];
        let events = vec![
            canaries(),
            open(
                5,
                "read",
                "/workspace/.mcpvm-canary-link",
                Some("/etc/mcpvm/secret"),
            ),
        ];
        let f = judge(&steps, &events, &roots());
        let rules: Vec<&str> = f.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(
            rules,
            ["symlink-escape", "canary-read", "token-in-answer"],
            "{f:#?}"
        );
        assert!(f[2].evidence[0].as_str().unwrap().contains(TOKEN));
    }

    fn attack_step(
        id: u64,
        tool: &str,
        class: &str,
        payload: &str,
        address: Option<&str>,
    ) -> StepResult {
        let mut s = step(
            &format!("tools/call:{tool}"),
            id,
            json!({"text": payload}),
            json!({"content": []}),
        );
        s.step = format!("attack:{tool}");
        s.detail = json!({"attack": {"tool": tool, "argument": "/text", "class": class,
            "payload": payload, "marker": format!("mcpvm-attack-{id}"), "address": address}});
        s
    }

    fn exec(id: u64, tool: &str, argv: &[&str]) -> Value {
        json!({"event": "effect", "call": "execve", "paths": [argv[0]], "argv": argv,
            "during": {"phase": "request", "id": id, "method": "tools/call", "tool": tool}})
    }

    #[test]
    fn an_injected_command_that_runs_is_found_and_a_quoted_one_is_not() {
        let steps = vec![
            attack_step(
                1,
                "run",
                "command-injection",
                "x; touch /tmp/mcpvm-attack-1",
                None,
            ),
            attack_step(
                2,
                "run",
                "command-injection",
                "x | touch /tmp/mcpvm-attack-2",
                None,
            ),
            attack_step(
                3,
                "log",
                "command-injection",
                "x; touch /tmp/mcpvm-attack-3",
                None,
            ),
            attack_step(
                4,
                "diff",
                "argument-injection",
                "--output=/tmp/mcpvm-attack-4",
                None,
            ),
        ];
        let events = vec![
            canaries(),
            // A shell handed the text, which then runs touch: injection.
            exec(
                1,
                "run",
                &["/bin/sh", "-c", "echo x; touch /tmp/mcpvm-attack-1"],
            ),
            exec(1, "run", &["touch", "/tmp/mcpvm-attack-1"]),
            exec(
                2,
                "run",
                &["/bin/sh", "-c", "echo x | touch /tmp/mcpvm-attack-2"],
            ),
            json!({"event": "effect", "call": "openat", "paths": ["/tmp/mcpvm-attack-2"],
                "access": "write+create", "during": {"phase": "request", "id": 2, "method": "tools/call"}}),
            // The text as one argument of a program: quoted, no finding.
            exec(
                3,
                "log",
                &["/usr/bin/logger", "x; touch /tmp/mcpvm-attack-3"],
            ),
            exec(3, "log", &["/bin/sh", "-c", "touch /tmp/mcpvm-attack-3"]),
            // git writes the file the option named.
            json!({"event": "effect", "call": "openat", "paths": ["/tmp/mcpvm-attack-4"],
                "access": "write+create+truncate", "during": {"phase": "request", "id": 4, "method": "tools/call"}}),
        ];
        let f = judge(&steps, &events, &roots());
        let got: Vec<(&str, &str, u32)> = f
            .iter()
            .map(|f| (f.class.as_str(), f.step.as_str(), f.attempts))
            .collect();
        assert_eq!(
            got,
            [
                ("command-injection", "attack:run", 2),
                ("argument-injection", "attack:diff", 1)
            ],
            "{f:#?}"
        );
        assert_eq!(
            f[0].payload.as_deref(),
            Some("x; touch /tmp/mcpvm-attack-1")
        );
        assert_eq!(f[0].argument.as_deref(), Some("/text"));
        assert_eq!(
            f[0].call.as_deref(),
            Some(r#"run={"text":"x; touch /tmp/mcpvm-attack-1"}"#)
        );
    }

    #[test]
    fn a_connect_to_the_payloads_address_is_ssrf_and_another_is_not() {
        let steps = vec![
            attack_step(
                1,
                "fetch",
                "ssrf",
                "http://169.254.169.254/",
                Some("inet 169.254.169.254:80"),
            ),
            attack_step(
                2,
                "fetch",
                "ssrf",
                "http://127.0.0.1:22/",
                Some("inet 127.0.0.1:22"),
            ),
        ];
        let connect = |id: u64, address: &str| {
            json!({"event": "effect", "call": "connect", "address": address,
                "during": {"phase": "request", "id": id, "method": "tools/call"}})
        };
        let events = vec![
            canaries(),
            connect(1, "inet 169.254.169.254:80"),
            connect(2, "unix /run/nscd/socket"),
        ];
        let f = judge(&steps, &events, &roots());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].class, "ssrf");
        assert_eq!(f[0].evidence[0]["address"], "inet 169.254.169.254:80");
        // With a network, the egress proxy's event is evidence too (here
        // without a recording: the host refused it).
        let refused = json!({"event": "net", "kind": "connect", "address": "127.0.0.1", "port": 22,
            "allowed": false, "reason": "127.0.0.1 is loopback (127.0.0.0/8)",
            "during": {"phase": "request", "id": 2, "method": "tools/call"}});
        let f = judge(&steps, &[canaries(), refused], &roots());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].class.as_str(), f[0].step.as_str()),
            ("ssrf", "attack:fetch")
        );
        assert_eq!(
            f[0].evidence[0]["reason"],
            "127.0.0.1 is loopback (127.0.0.0/8)"
        );
    }

    #[test]
    fn a_tool_that_shows_its_environment_is_no_finding_unless_attacked_into_it() {
        let env = json!({"content": [{"type": "text", "text": format!("MCPVM_SECRET_TOKEN={TOKEN}-env")}]});
        let mut attacked = step("tools/call:debug", 2, json!({"q": "x"}), env.clone());
        attacked.step = "attack:debug".into();
        attacked.detail = json!({"attack": {"tool": "debug", "argument": "/q",
            "class": "command-injection", "payload": "$(env)", "marker": "m"}});
        let steps = vec![step("tools/call:get-env", 1, json!({}), env), attacked];
        let f = judge(&steps, &[canaries()], &roots());
        let got: Vec<(&str, &str)> = f
            .iter()
            .map(|f| (f.rule.as_str(), f.step.as_str()))
            .collect();
        assert_eq!(got, [("token-in-answer", "attack:debug")], "{f:#?}");
    }

    #[test]
    fn a_server_that_stays_inside_has_no_finding() {
        let steps = vec![step(
            "tools/call:read_file",
            3,
            json!({"path": "/workspace/a.txt"}),
            json!({"content": [{"type": "text", "text": "hello"}]}),
        )];
        let events = vec![canaries(), open(3, "read_file", "/workspace/a.txt", None)];
        assert_eq!(judge(&steps, &events, &roots()), vec![]);
        // Without canaries nothing is judged.
        assert_eq!(judge(&steps, &events[1..], &roots()), vec![]);
    }
}
