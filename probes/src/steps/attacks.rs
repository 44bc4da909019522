//! Attacks (`--security`): for every tool the probe would call, for every
//! string in its valid arguments (nested ones too), each payload of
//! `payloads.toml` (beside this file) in that string's place while the
//! rest stay valid. Each attempt is a step `attack:<tool>` whose detail
//! names the argument, the payload, its class and its marker; what the
//! server did for it is judged in `crate::judge::findings`.
//!
//! Bounded: at most `per_tool` attempts per tool, and a tool whose time
//! runs out is left; a server that goes away ends the attacks.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::report::result::{Outcome, ProbeResult};
use crate::transport::client::{answered, begin, error_outcome, Client};
use crate::transport::wire::Wire;

pub const BUILT_IN: &str = include_str!("payloads.toml");

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Payload {
    /// `command-injection`, `argument-injection`, `path-traversal`,
    /// `ssrf`, `secret-exposure`.
    pub class: String,
    pub text: String,
    /// For SSRF: where a connect attempt proves it.
    #[serde(default)]
    pub address: Option<String>,
}

#[derive(Deserialize)]
struct File {
    payload: Vec<Payload>,
}

const CLASSES: &[&str] = &[
    "command-injection",
    "argument-injection",
    "path-traversal",
    "ssrf",
    "secret-exposure",
];

/// Payloads from a file of [`BUILT_IN`]'s shape; one clear error for a
/// bad one.
pub fn parse(text: &str, source: &str) -> Result<Vec<Payload>, String> {
    let f: File =
        toml::from_str(text).map_err(|e| format!("{source}: not a payloads file: {e}"))?;
    for p in &f.payload {
        if !CLASSES.contains(&p.class.as_str()) {
            return Err(format!(
                "{source}: payload {:?} has class '{}'; use one of {}",
                p.text,
                p.class,
                CLASSES.join(", ")
            ));
        }
    }
    Ok(f.payload)
}

/// How much attacking a tool may take.
#[derive(Debug, Clone)]
pub struct Limits {
    pub per_tool: usize,
    pub tool_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            per_tool: 80,
            tool_time: Duration::from_secs(300),
        }
    }
}

/// JSON pointers to every string in `v`.
pub fn strings(v: &Value) -> Vec<String> {
    fn walk(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::String(_) => out.push(at),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(x, format!("{at}/{i}"), out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| {
                let k = k.replace('~', "~0").replace('/', "~1");
                walk(x, format!("{at}/{k}"), out)
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, String::new(), &mut out);
    out
}

/// `{marker}` made unique: `mcpvm-<n>`.
pub fn marker(n: usize) -> String {
    format!("mcpvm-attack-{n}")
}

/// A tool to attack: its name, the arguments of its valid call (the
/// ones that got furthest: see `crate::calls::feedback`), what that call was
/// refused with when it did not succeed (its error text), and its input
/// schema (to read a refusal against).
pub struct Target {
    pub tool: String,
    pub valid: Map<String, Value>,
    pub refused: Option<String>,
    pub schema: Map<String, Value>,
}

/// Why an attack did not reach the code it aims at: the server refused
/// it for an argument the payload was not in (the payload at `at`, a
/// JSON pointer), so the refusal says nothing of how the tool treats the
/// payload. None when the refusal is about the payload's own argument,
/// or names none.
pub fn not_reached(
    said: &str,
    schema: &Map<String, Value>,
    args: &Map<String, Value>,
    at: &str,
) -> Option<String> {
    let attacked = at
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("")
        .replace("~1", "/")
        .replace("~0", "~");
    let about: Vec<String> = crate::calls::feedback::read(said, schema, args)
        .into_iter()
        .filter_map(|c| c.property)
        .collect();
    if about.is_empty() || about.contains(&attacked) {
        return None;
    }
    Some(format!(
        "refused for '{}', which the payload (in '{attacked}') did not touch",
        about.join("', '")
    ))
}

/// Payloads after which a tool that answers each of them exactly as it
/// refused its valid call is left: they do not get past whatever stops
/// it (a missing key, an unreachable upstream), and a finding there would
/// not be a verdict on the tool's code.
pub const UNREACHED_AFTER: usize = 4;

/// Attacks each of `targets` with every payload; pushes a step per
/// attempt. False when the server went away.
pub async fn run(
    client: &Client,
    wire: &Wire,
    t: Duration,
    targets: &[Target],
    payloads: &[Payload],
    limits: &Limits,
    result: &mut ProbeResult,
) -> bool {
    let mut n = 0;
    for Target {
        tool,
        valid,
        refused,
        schema,
    } in targets
    {
        let started = Instant::now();
        let mut sent = 0;
        // Attacks answered exactly as the valid call was refused.
        let mut as_refused = 0;
        'tool: for at in strings(&Value::Object(valid.clone())) {
            for p in payloads {
                if sent >= limits.per_tool || started.elapsed() > limits.tool_time {
                    break 'tool;
                }
                if refused.is_some() && sent >= UNREACHED_AFTER && as_refused == sent {
                    let s = begin(wire, &format!("unreached:{tool}"));
                    let why = format!(
                        "not attacked further: its valid call was refused, and each of the first {sent} payloads was refused the same way; they do not reach its code"
                    );
                    result.steps.push(s.end(
                        wire,
                        Outcome::Skipped,
                        json!({"why": why, "refused": refused}),
                    ));
                    break 'tool;
                }
                n += 1;
                sent += 1;
                let mark = marker(n);
                let text = p.text.replace("{marker}", &mark);
                let mut args = Value::Object(valid.clone());
                if let Some(slot) = args.pointer_mut(&at) {
                    *slot = Value::String(text.clone());
                }
                let Value::Object(args) = args else { continue };
                let attack = json!({"tool": tool, "argument": at, "class": p.class,
                    "payload": text, "marker": mark, "address": p.address});
                let s = begin(wire, &format!("attack:{tool}"));
                let params = CallToolRequestParams::new(tool.clone()).with_arguments(args.clone());
                let miss = |said: &str| not_reached(said, schema, &args, &at);
                let step = match tokio::time::timeout(t, client.call_tool(params)).await {
                    Ok(Ok(r)) => {
                        let (outcome, text) = answered(&r);
                        if outcome != Outcome::Ok && refused.as_deref() == Some(text.as_str()) {
                            as_refused += 1;
                        }
                        let mut detail = json!({"attack": attack, "text": text});
                        if let Some(why) = miss(&text).filter(|_| outcome != Outcome::Ok) {
                            detail["not_reached"] = json!(why);
                        }
                        s.end(wire, outcome, detail)
                    }
                    Ok(Err(e)) if client.is_closed() => s.end(
                        wire,
                        Outcome::Closed,
                        json!({"attack": attack, "error": e.to_string()}),
                    ),
                    Ok(Err(e)) => {
                        let error = e.to_string();
                        if refused.as_deref() == Some(error.as_str()) {
                            as_refused += 1;
                        }
                        let mut detail = json!({"attack": attack, "error": error});
                        if let Some(why) = miss(&error) {
                            detail["not_reached"] = json!(why);
                        }
                        s.end(wire, error_outcome(&e), detail)
                    }
                    Err(_) => s.end(wire, Outcome::Timeout, json!({"attack": attack})),
                };
                let closed = step.outcome == Outcome::Closed;
                result.steps.push(step);
                if closed {
                    return false;
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_payloads_parse_and_cover_every_class_that_needs_one() {
        let p = parse(BUILT_IN, "built in").unwrap();
        for class in [
            "command-injection",
            "argument-injection",
            "path-traversal",
            "ssrf",
        ] {
            assert!(p.iter().any(|p| p.class == class), "no {class} payload");
        }
        assert!(p
            .iter()
            .filter(|p| p.class == "ssrf" && p.text.starts_with("http"))
            .all(|p| p.address.is_some()));
        let e = parse(
            "[[payload]]\nclass = \"xss\"\ntext = \"<b>\"\n",
            "mine.toml",
        )
        .unwrap_err();
        assert!(e.contains("mine.toml") && e.contains("'xss'"), "{e}");
        assert!(parse("nonsense", "x")
            .unwrap_err()
            .contains("not a payloads file"));
    }

    /// The git server release that checks `repo_path` first: a payload in
    /// another argument, refused for `repo_path`, never reached its code.
    #[test]
    fn an_attack_refused_for_an_argument_it_did_not_touch_is_not_reached() {
        let schema = json!({"type": "object", "properties": {
            "repo_path": {"type": "string"}, "target": {"type": "string"}},
            "required": ["repo_path", "target"]});
        let schema = schema.as_object().unwrap();
        let args = json!({"repo_path": "repo", "target": "../../etc/passwd"});
        let args = args.as_object().unwrap();
        let said = "Repository path 'repo' is outside the allowed repository '/workspace/repo'";
        let why = not_reached(said, schema, args, "/target").expect("not reached");
        assert!(
            why.contains("'repo_path'") && why.contains("'target'"),
            "{why}"
        );
        // The same refusal of a payload in `repo_path` itself is the
        // check working on the payload: reached.
        let args = json!({"repo_path": "../../etc", "target": "HEAD"});
        let said =
            "Repository path '../../etc' is outside the allowed repository '/workspace/repo'";
        assert_eq!(
            not_reached(said, schema, args.as_object().unwrap(), "/repo_path"),
            None
        );
        // A refusal that is not about the arguments says nothing either way.
        assert_eq!(
            not_reached(
                "BRAVE_API_KEY is not set",
                schema,
                args.as_object().unwrap(),
                "/target"
            ),
            None
        );
    }

    #[test]
    fn every_string_is_found_nested_ones_too() {
        let v =
            json!({"path": "/w/a", "n": 3, "opts": {"mode": "r", "a/b": "x"}, "list": ["p", 1]});
        let mut got = strings(&v);
        got.sort();
        assert_eq!(got, ["/list/0", "/opts/a~1b", "/opts/mode", "/path"]);
    }
}
