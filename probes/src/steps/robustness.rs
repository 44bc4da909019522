//! Robustness probes: what a hostile or careless client sends, written raw
//! on the wire (rmcp's client cannot send malformed JSON, and should not).
//!
//! Each probe is classified by what the server did: answered (handled),
//! stayed silent but still answers the next request (ignored), stayed
//! silent for good (hung), or went away (crashed). A server that crashed
//! or hung is started again, with a fresh handshake, for the next probe,
//! so one finding does not hide the others. Probes with input no correct
//! client sends are marked `malformed`, so a report keeps a crash on
//! garbage apart from breakage that a real client could trigger.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::calls::arguments;
use crate::report::result::{Class, Input, Lifecycle, RobustnessResult};
use crate::transport::client::CLIENT_NAME;
use crate::transport::exchange::ms_since;
use crate::transport::wire::{Recv, Wire, WireError};

/// The oversized argument: 8 MiB. Big enough to find a server whose own
/// code chokes on it, and below the smallest message limit an SDK sets
/// (the TypeScript SDK's stdio transport stops reading past 10 MiB, a limit
/// every server built on it shares: docs/ecosystem.md reports it once, so
/// that it does not decide every TypeScript server's verdict).
pub const HUGE_ARGUMENT: usize = 8 << 20;
/// Requests written at once by the concurrency probe.
pub const CONCURRENT: usize = 32;

/// How requests must look for this server's lifecycle.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub lifecycle: Lifecycle,
    pub protocol_version: String,
}

impl Envelope {
    /// Request params; in the stateless lifecycle every request carries
    /// the protocol version and client capabilities in `_meta`.
    fn params(&self, mut params: Value) -> Value {
        if self.lifecycle == Lifecycle::Stateless {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": self.protocol_version,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
            });
        }
        params
    }

    fn request(&self, id: &Value, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": self.params(params)})
    }
}

/// A tool to aim the argument probes at, with arguments it accepted.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub schema: Map<String, Value>,
    pub arguments: Map<String, Value>,
}

/// Everything the probes need to (re)start the server.
pub struct Context<'a> {
    pub command: &'a [String],
    pub envelope: Envelope,
    pub target: Option<Target>,
    pub answer_timeout: Duration,
    /// For the oversized argument and the concurrent requests.
    pub slow_timeout: Duration,
    /// For the handshake after a restart (includes a microVM's boot).
    pub start_timeout: Duration,
    pub exit_grace: Duration,
    /// `ProbeOptions::starts_fresh`: `reopen` is not run.
    pub starts_fresh: bool,
}

/// Why `reopen` is not run where every start is the first again.
pub const FRESH: &str = "not run: every start of this server begins from the same state (a microVM whose workspace and disks are read-only keeps nothing of a run), so a second start would only repeat the first";

enum Answer {
    Reply(Value),
    Closed,
    Silent,
}

/// Waits for the answer to `id`; `null_id_too` also takes an error with a
/// null id (what JSON-RPC prescribes when the request's id is unreadable).
async fn answer(wire: &Wire, id: &Value, null_id_too: bool, within: Duration) -> Answer {
    let deadline = Instant::now() + within;
    loop {
        match wire.recv(deadline).await {
            Recv::Message(m) => {
                let is_reply = m.get("method").is_none();
                let matches = m["id"] == *id
                    || (null_id_too && m["id"].is_null() && m.get("error").is_some());
                if is_reply && matches {
                    return Answer::Reply(m);
                }
            }
            Recv::Closed => return Answer::Closed,
            Recv::Timeout => return Answer::Silent,
        }
    }
}

/// What an answer says, briefly: the error, or that there was a result.
fn gist(reply: &Value) -> Value {
    match reply.get("error") {
        Some(e) => json!({"error": e}),
        None if reply["result"]["isError"] == true => json!({"tool_error": true}),
        None => json!({"result": true}),
    }
}

/// Classifies silence: does the server still answer anything?
async fn after_silence(wire: &mut Wire, cx: &Context<'_>, n: usize) -> (Class, Value) {
    if wire.exited() {
        return (Class::Crashed, json!("the server exited"));
    }
    let id = json!(format!("mcpvm-live-{n}"));
    if wire
        .send_json(&cx.envelope.request(&id, "ping", json!({})))
        .is_err()
    {
        return (Class::Crashed, json!("the server closed its stdin"));
    }
    // "Method not found" is an answer too: ping is gone in 2026-07-28.
    match answer(wire, &id, false, cx.answer_timeout).await {
        Answer::Reply(_) => (
            Class::Ignored,
            json!("no answer; the server still answers ping"),
        ),
        Answer::Closed => (
            Class::Crashed,
            json!("no answer, then the server closed stdout"),
        ),
        Answer::Silent => (Class::Hung, json!("no answer, not even to ping")),
    }
}

async fn classify(wire: &mut Wire, cx: &Context<'_>, n: usize, a: Answer) -> (Class, Value) {
    match a {
        Answer::Reply(r) => (Class::Handled, gist(&r)),
        Answer::Closed => (Class::Crashed, json!("the server closed stdout")),
        Answer::Silent => after_silence(wire, cx, n).await,
    }
}

/// How the old server ended and what it said on stderr last: the evidence
/// of a crash, kept before the server is replaced.
async fn retire(wire: &mut Wire, cx: &Context<'_>) -> Value {
    let exit = wire.shutdown(cx.exit_grace).await;
    json!({"exit": exit, "stderr_tail": wire.stderr().tail})
}

/// Starts the server again and performs the handshake raw.
async fn restart(wire: &mut Wire, cx: &Context<'_>) -> Result<(), String> {
    let fresh = wire
        .respawn(cx.command)
        .map_err(|e: WireError| e.to_string())?;
    drop(std::mem::replace(wire, fresh));
    handshake(wire, cx).await
}

/// The handshake of the server's lifecycle, waiting as long as a first
/// start may take (a microVM boots first). A stateless server has none,
/// so it is asked `server/discover` to know it is up.
async fn handshake(wire: &Wire, cx: &Context<'_>) -> Result<(), String> {
    if cx.envelope.lifecycle == Lifecycle::Stateless {
        let id = json!("mcpvm-discover");
        let discover = cx.envelope.request(&id, "server/discover", json!({}));
        wire.send_json(&discover).map_err(|e| e.to_string())?;
        return match answer(wire, &id, false, cx.start_timeout).await {
            Answer::Reply(r) if r.get("result").is_some() => Ok(()),
            Answer::Reply(r) => Err(format!("server/discover failed: {}", r["error"])),
            Answer::Closed => Err("the server closed stdout during server/discover".into()),
            Answer::Silent => Err("no answer to server/discover".into()),
        };
    }
    let id = json!("mcpvm-init");
    let init = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": cx.envelope.protocol_version,
        "capabilities": {},
        "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
    }});
    wire.send_json(&init).map_err(|e| e.to_string())?;
    match answer(wire, &id, false, cx.start_timeout).await {
        Answer::Reply(r) if r.get("result").is_some() => {
            let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            wire.send_json(&done).map_err(|e| e.to_string())
        }
        Answer::Reply(r) => Err(format!("initialize failed: {}", r["error"])),
        Answer::Closed => Err("the server closed stdout during initialize".into()),
        Answer::Silent => Err("no answer to initialize".into()),
    }
}

/// Runs every probe in order on `wire`, restarting the server after each
/// crash or hang.
pub async fn run(wire: &mut Wire, cx: &Context<'_>) -> Vec<RobustnessResult> {
    let mut results = Vec::new();
    let mut usable = true;
    for (n, (probe, input)) in PROBES.iter().enumerate() {
        let t0 = Instant::now();
        let mark = wire.exchange.mark();
        log::info!("robustness probe {probe}");
        let (class, detail) = if !usable {
            (
                Class::NotRun,
                json!("the server could not be started again"),
            )
        } else if *probe == "reopen" && cx.starts_fresh {
            (Class::NotRun, json!(FRESH))
        } else {
            one(wire, cx, n, probe).await
        };
        results.push(RobustnessResult {
            probe: probe.to_string(),
            input: *input,
            class,
            took_ms: ms_since(t0),
            detail,
            exchange: wire.exchange.since(mark),
        });
        if matches!(class, Class::Crashed | Class::Hung) && n + 1 < PROBES.len() {
            log::info!("robustness probe {probe}: {class:?}; restarting the server");
            let server = retire(wire, cx).await;
            let restarted = restart(wire, cx).await;
            usable = restarted.is_ok();
            if let Some(last) = results.last_mut() {
                last.detail = json!({
                    "finding": last.detail,
                    "server": server,
                    "restart_failed": restarted.err(),
                });
            }
        }
    }
    results
}

const PROBES: [(&str, Input); 9] = [
    ("unknown_method", Input::Valid),
    ("id_as_object", Input::Malformed),
    ("missing_jsonrpc", Input::Malformed),
    ("malformed_json", Input::Malformed),
    ("huge_argument", Input::Valid),
    ("wrong_argument_types", Input::Valid),
    ("unknown_tool", Input::Valid),
    ("concurrent_requests", Input::Valid),
    ("reopen", Input::Valid),
];

async fn one(wire: &mut Wire, cx: &Context<'_>, n: usize, probe: &str) -> (Class, Value) {
    let env = &cx.envelope;
    let id = json!(format!("mcpvm-robust-{n}"));
    let call = |name: &str, args: Value| {
        env.request(&id, "tools/call", json!({"name": name, "arguments": args}))
    };
    // (line to send, accept a null-id error, how long to wait)
    let (line, null_id_too, within): (Vec<u8>, bool, Duration) = match probe {
        "unknown_method" => (
            env.request(&id, "mcpvm/no-such-method", json!({}))
                .to_string()
                .into_bytes(),
            false,
            cx.answer_timeout,
        ),
        "id_as_object" => {
            let obj = json!({"mcpvm": n});
            let req = env.request(&obj, "tools/list", json!({}));
            return send_and_classify(
                wire,
                cx,
                n,
                req.to_string().into_bytes(),
                &obj,
                true,
                cx.answer_timeout,
            )
            .await;
        }
        "missing_jsonrpc" => {
            let mut req = env.request(&id, "tools/list", json!({}));
            req.as_object_mut().map(|m| m.remove("jsonrpc"));
            (req.to_string().into_bytes(), true, cx.answer_timeout)
        }
        "malformed_json" => {
            let req = env.request(&id, "tools/list", json!({})).to_string();
            // Cut inside the params object: unterminated JSON on one line.
            (
                req.as_bytes()[..req.len() - 2].to_vec(),
                true,
                cx.answer_timeout,
            )
        }
        "huge_argument" | "wrong_argument_types" => {
            let Some(t) = &cx.target else {
                return (Class::NotRun, json!("no tool answered a call to aim at"));
            };
            let (args, within, mut detail) = if probe == "huge_argument" {
                let mut args = t.arguments.clone();
                let key = arguments::first_string_property(&t.schema)
                    .unwrap_or_else(|| "mcpvm_padding".into());
                args.insert(key.clone(), Value::String("x".repeat(HUGE_ARGUMENT)));
                let detail = json!({"tool": t.name, "property": key, "bytes": HUGE_ARGUMENT});
                (args, cx.slow_timeout, detail)
            } else {
                let args = arguments::wrong_types(&t.schema);
                let detail = json!({"tool": t.name, "arguments": args});
                (args, cx.answer_timeout, detail)
            };
            let req = call(&t.name, Value::Object(args)).to_string().into_bytes();
            let (class, outcome) = send_and_classify(wire, cx, n, req, &id, false, within).await;
            detail["outcome"] = outcome;
            return (class, detail);
        }
        "unknown_tool" => (
            call("mcpvm-no-such-tool", json!({}))
                .to_string()
                .into_bytes(),
            false,
            cx.answer_timeout,
        ),
        "concurrent_requests" => return concurrent(wire, cx, n).await,
        "reopen" => return reopen(wire, cx, n).await,
        _ => return (Class::NotRun, Value::Null),
    };
    send_and_classify(wire, cx, n, line, &id, null_id_too, within).await
}

async fn send_and_classify(
    wire: &mut Wire,
    cx: &Context<'_>,
    n: usize,
    line: Vec<u8>,
    id: &Value,
    null_id_too: bool,
    within: Duration,
) -> (Class, Value) {
    if wire.send_line(line).is_err() {
        return (Class::Crashed, json!("the server closed its stdin"));
    }
    let a = answer(wire, id, null_id_too, within).await;
    classify(wire, cx, n, a).await
}

/// 32 requests in one write; every one must be answered, each once.
async fn concurrent(wire: &mut Wire, cx: &Context<'_>, n: usize) -> (Class, Value) {
    let ids: Vec<Value> = (0..CONCURRENT)
        .map(|i| json!(format!("mcpvm-concurrent-{n}-{i}")))
        .collect();
    let mut batch = Vec::new();
    for id in &ids {
        batch.extend_from_slice(
            cx.envelope
                .request(id, "tools/list", json!({}))
                .to_string()
                .as_bytes(),
        );
        batch.push(b'\n');
    }
    batch.pop();
    if wire.send_line(batch).is_err() {
        return (Class::Crashed, json!("the server closed its stdin"));
    }
    let deadline = Instant::now() + cx.slow_timeout;
    let mut answered = std::collections::HashSet::new();
    let mut closed = false;
    while answered.len() < CONCURRENT {
        match wire.recv(deadline).await {
            Recv::Message(m) if m.get("method").is_none() && ids.contains(&m["id"]) => {
                answered.insert(m["id"].to_string());
            }
            Recv::Message(_) => {}
            Recv::Closed => {
                closed = true;
                break;
            }
            Recv::Timeout => break,
        }
    }
    let detail = json!({"sent": CONCURRENT, "answered": answered.len()});
    match (answered.len(), closed) {
        (CONCURRENT, _) => (Class::Handled, detail),
        (_, true) => (Class::Crashed, detail),
        (0, false) => {
            let (class, why) = after_silence(wire, cx, n).await;
            (
                class,
                json!({"sent": CONCURRENT, "answered": 0, "then": why}),
            )
        }
        _ => (Class::Ignored, detail),
    }
}

/// The client goes away (stdin closes) and a new one connects to a fresh
/// server: the server must end by itself and serve the next client.
async fn reopen(wire: &mut Wire, cx: &Context<'_>, n: usize) -> (Class, Value) {
    let ended = wire.shutdown(cx.exit_grace).await;
    let fresh = match wire.respawn(cx.command) {
        Ok(w) => w,
        Err(e) => {
            return (
                Class::Crashed,
                json!({"close": ended, "reopen": e.to_string()}),
            )
        }
    };
    drop(std::mem::replace(wire, fresh));
    if let Err(e) = handshake(wire, cx).await {
        let class = if wire.exited() {
            Class::Crashed
        } else {
            Class::Hung
        };
        return (class, json!({"close": ended, "reopen": e}));
    }
    let id = json!(format!("mcpvm-robust-{n}"));
    let req = cx.envelope.request(&id, "tools/list", json!({}));
    let (class, detail) = send_and_classify(
        wire,
        cx,
        n,
        req.to_string().into_bytes(),
        &id,
        false,
        cx.answer_timeout,
    )
    .await;
    (class, json!({"close": ended, "reopen": detail}))
}
