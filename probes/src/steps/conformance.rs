//! The real-client steps, spoken by rmcp's client: the handshake in the
//! server's lifecycle, discovery (tools, prompts, resources, templates,
//! every page), tool calls, ping and cancellation.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, PingRequest, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, PeerRequestOptions, ServiceError};
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::calls::arguments;
use crate::calls::feedback;
use crate::calls::upstream;
use crate::options::{LifecycleChoice, ProbeOptions, ToolArgs};
use crate::report::result::{Lifecycle, Outcome, ProbeResult, StepResult};
use crate::transport::client::{answered, begin, error_outcome, Client, ProbeClient};
use crate::transport::exchange::Direction;
use crate::transport::wire::Wire;

pub enum Handshake {
    Done(Box<Client>, Lifecycle),
    /// The server closed the wire on `server/discover`, or did not answer
    /// it in time: start it again and use `initialize`.
    RetryWithInitialize,
    Failed,
}

/// Runs the handshake the options ask for, recording each attempt.
pub async fn handshake(
    wire: &mut Wire,
    opts: &ProbeOptions,
    choice: LifecycleChoice,
    steps: &mut Vec<StepResult>,
) -> Handshake {
    if choice != LifecycleChoice::Initialize {
        let wait = match choice {
            LifecycleChoice::Auto => opts.discover_timeout.min(opts.init_timeout),
            _ => opts.init_timeout,
        };
        let s = begin(wire, "server/discover");
        let mode = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let attempt = ProbeClient::default().serve_with_lifecycle(wire.transport(), mode);
        match tokio::time::timeout(wait, attempt).await {
            Ok(Ok(client)) => {
                let info = peer_info(&client);
                steps.push(s.end(wire, Outcome::Ok, info));
                return Handshake::Done(Box::new(client), Lifecycle::Stateless);
            }
            Ok(Err(e)) => {
                let closed = wire.exited();
                let outcome = if closed {
                    Outcome::Closed
                } else {
                    Outcome::Error
                };
                steps.push(s.end(wire, outcome, json!(e.to_string())));
                if choice == LifecycleChoice::Stateless {
                    return Handshake::Failed;
                }
                if closed {
                    return Handshake::RetryWithInitialize;
                }
            }
            Err(_) => {
                steps.push(s.end(wire, Outcome::Timeout, Value::Null));
                if choice == LifecycleChoice::Stateless {
                    return Handshake::Failed;
                }
                // A late answer to server/discover would arrive in the
                // middle of initialize: start afresh instead.
                return Handshake::RetryWithInitialize;
            }
        }
    }
    let s = begin(wire, "initialize");
    let remaining = opts.init_timeout.saturating_sub(wire.spawned().elapsed());
    match tokio::time::timeout(remaining, ProbeClient::default().serve(wire.transport())).await {
        Ok(Ok(client)) => {
            let info = peer_info(&client);
            steps.push(s.end(wire, Outcome::Ok, info));
            Handshake::Done(Box::new(client), Lifecycle::Initialize)
        }
        Ok(Err(e)) => {
            let outcome = if wire.exited() {
                Outcome::Closed
            } else {
                Outcome::Error
            };
            steps.push(s.end(wire, outcome, json!(e.to_string())));
            Handshake::Failed
        }
        Err(_) => {
            steps.push(s.end(wire, Outcome::Timeout, Value::Null));
            Handshake::Failed
        }
    }
}

fn peer_info(client: &Client) -> Value {
    client
        .peer_info()
        .and_then(|i| serde_json::to_value(&*i).ok())
        .unwrap_or_default()
}

/// Everything after the handshake, in order: discovery, calls, ping,
/// cancellation.
pub async fn exercise(
    client: &Client,
    wire: &Wire,
    opts: &ProbeOptions,
    result: &mut ProbeResult,
) -> Vec<rmcp::model::Tool> {
    let info = peer_info(client);
    result.protocol_version = info["protocolVersion"].as_str().map(str::to_string);
    result.server_name = info["serverInfo"]["name"].as_str().map(str::to_string);
    result.server_version = info["serverInfo"]["version"].as_str().map(str::to_string);
    result.capabilities = info["capabilities"].clone();
    let t = opts.step_timeout;

    let tools = list_tools(client, wire, t, result).await;
    let (prompts, resources) = list_the_rest(client, wire, t, result).await;
    // What it declares, judged as it is written (no call needed).
    result
        .findings
        .extend(crate::judge::definitions::of_listings(
            &tools, &prompts, &resources,
        ));
    // Its apps' pages, read and judged like descriptions.
    read_apps(client, wire, t, &tools, &resources, result).await;
    // A pin to keep, or to hold the listing to (rug pulls, drift).
    if opts.keep_definitions || opts.pinned.is_some() {
        let defs = crate::judge::pin::definitions(&tools, &prompts, &resources);
        if let Some((pinned, version)) = &opts.pinned {
            let version = version.as_deref().or(result.server_version.as_deref());
            result
                .findings
                .extend(crate::judge::pin::compare(pinned, &defs, version));
        }
        if opts.keep_definitions {
            result.definitions = defs;
        }
    }
    let Some(slowest) = call_tools(client, wire, opts, &tools, result).await else {
        // The server went away during a call.
        return tools;
    };
    if opts.security {
        // Each tool called, attacked from the arguments its calls got
        // furthest with (the feedback loop's last); not one that left a
        // valid call unanswered (every payload
        // would wait out the step timeout to learn nothing).
        let targets: Vec<crate::steps::attacks::Target> = result
            .steps
            .iter()
            .filter(|s| !matches!(s.outcome, Outcome::Skipped | Outcome::Timeout))
            .filter_map(|s| {
                let tool = s.step.strip_prefix("tools/call:")?;
                let args = s.detail.get("arguments")?.as_object()?;
                let refused = match s.outcome {
                    Outcome::Ok => None,
                    _ => s.detail["text"]
                        .as_str()
                        .or(s.detail["error"].as_str())
                        .map(str::to_string),
                };
                let schema = tools
                    .iter()
                    .find(|t| t.name == tool)
                    .map(|t| (*t.input_schema).clone())
                    .unwrap_or_default();
                Some(crate::steps::attacks::Target {
                    tool: tool.to_string(),
                    valid: args.clone(),
                    refused,
                    schema,
                })
            })
            .collect();
        let limits = crate::steps::attacks::Limits::default();
        let attacks =
            crate::steps::attacks::run(client, wire, t, &targets, &opts.payloads, &limits, result);
        if !attacks.await {
            return tools;
        }
    }
    if result.lifecycle == Some(Lifecycle::Initialize) {
        let s = begin(wire, "ping");
        let step = match tokio::time::timeout(t, client.send_request(ping())).await {
            Ok(Ok(_)) => s.end(wire, Outcome::Ok, Value::Null),
            Ok(Err(e)) => s.end(wire, error_outcome(&e), json!(e.to_string())),
            Err(_) => s.end(wire, Outcome::Timeout, Value::Null),
        };
        result.steps.push(step);
    }
    result.steps.push(cancel(client, wire, t, slowest).await);
    tools
}

async fn list_tools(
    client: &Client,
    wire: &Wire,
    t: Duration,
    result: &mut ProbeResult,
) -> Vec<rmcp::model::Tool> {
    let s = begin(wire, "tools/list");
    match tokio::time::timeout(t, client.list_all_tools()).await {
        Ok(Ok(tools)) => {
            result.tools = tools.iter().map(|t| t.name.to_string()).collect();
            result
                .steps
                .push(s.end(wire, Outcome::Ok, json!(result.tools)));
            tools
        }
        Ok(Err(e)) => {
            result
                .steps
                .push(s.end(wire, error_outcome(&e), json!(e.to_string())));
            Vec::new()
        }
        Err(_) => {
            result
                .steps
                .push(s.end(wire, Outcome::Timeout, Value::Null));
            Vec::new()
        }
    }
}

/// Prompts, resources and resource templates, each where the server
/// declares the capability; the prompts and resources listed.
async fn list_the_rest(
    client: &Client,
    wire: &Wire,
    t: Duration,
    result: &mut ProbeResult,
) -> (Vec<rmcp::model::Prompt>, Vec<rmcp::model::Resource>) {
    let mut listed = (Vec::new(), Vec::new());
    let caps = result.capabilities.clone();
    let declared = |cap: &str| !caps[cap].is_null();
    let s = begin(wire, "prompts/list");
    let step = if declared("prompts") {
        match tokio::time::timeout(t, client.list_all_prompts()).await {
            Ok(Ok(p)) => {
                result.prompts = p.iter().map(|p| p.name.clone()).collect();
                listed.0 = p;
                s.end(wire, Outcome::Ok, json!(result.prompts))
            }
            Ok(Err(e)) => s.end(wire, error_outcome(&e), json!(e.to_string())),
            Err(_) => s.end(wire, Outcome::Timeout, Value::Null),
        }
    } else {
        s.end(
            wire,
            Outcome::Skipped,
            json!("the server declares no prompts capability"),
        )
    };
    result.steps.push(step);

    for (name, templates) in [
        ("resources/list", false),
        ("resources/templates/list", true),
    ] {
        let s = begin(wire, name);
        let step = if !declared("resources") {
            s.end(
                wire,
                Outcome::Skipped,
                json!("the server declares no resources capability"),
            )
        } else if templates {
            match tokio::time::timeout(t, client.list_all_resource_templates()).await {
                Ok(Ok(r)) => {
                    result.resource_templates = r.iter().map(|r| r.uri_template.clone()).collect();
                    s.end(wire, Outcome::Ok, json!(result.resource_templates))
                }
                Ok(Err(e)) => s.end(wire, error_outcome(&e), json!(e.to_string())),
                Err(_) => s.end(wire, Outcome::Timeout, Value::Null),
            }
        } else {
            match tokio::time::timeout(t, client.list_all_resources()).await {
                Ok(Ok(r)) => {
                    result.resources = r.iter().map(|r| r.uri.clone()).collect();
                    listed.1 = r;
                    s.end(wire, Outcome::Ok, json!(result.resources))
                }
                Ok(Err(e)) => s.end(wire, error_outcome(&e), json!(e.to_string())),
                Err(_) => s.end(wire, Outcome::Timeout, Value::Null),
            }
        };
        result.steps.push(step);
    }
    listed
}

/// Apps read per server: a page each, at most.
const MAX_APPS: usize = 8;

/// The `ui://` pages of its MCP Apps (listed as resources, or named by a
/// tool's `_meta`), each read as a step `resources/read:URI` and judged
/// by `judge::apps`.
async fn read_apps(
    client: &Client,
    wire: &Wire,
    t: Duration,
    tools: &[rmcp::model::Tool],
    resources: &[rmcp::model::Resource],
    result: &mut ProbeResult,
) {
    use crate::judge::apps;
    let mut uris: Vec<String> = resources
        .iter()
        .map(|r| r.uri.clone())
        .filter(|u| u.starts_with(apps::SCHEME))
        .collect();
    for t in tools {
        let meta = t.meta.as_ref().and_then(|m| serde_json::to_value(m).ok());
        let named = meta.as_ref().and_then(|m| {
            m["ui"]["resourceUri"]
                .as_str()
                .or(m["ui/resourceUri"].as_str())
                .map(str::to_string)
        });
        if let Some(u) = named.filter(|u| u.starts_with(apps::SCHEME)) {
            uris.push(u);
        }
    }
    // A URI is named in a step and a finding: one past this is not read.
    uris.retain(|u| u.len() <= 512);
    uris.sort();
    uris.dedup();
    for uri in uris.into_iter().take(MAX_APPS) {
        let s = begin(wire, &apps::step(&uri));
        let params = rmcp::model::ReadResourceRequestParams::new(uri.clone());
        let step = match tokio::time::timeout(t, client.read_resource(params)).await {
            Ok(Ok(r)) => {
                let mut bytes = 0;
                for c in &r.contents {
                    if let rmcp::model::ResourceContents::TextResourceContents { text, .. } = c {
                        bytes += text.len();
                        result.findings.extend(apps::check(&uri, text));
                    }
                }
                s.end(wire, Outcome::Ok, json!({ "bytes": bytes }))
            }
            Ok(Err(e)) => s.end(wire, error_outcome(&e), json!(e.to_string())),
            Err(_) => s.end(wire, Outcome::Timeout, Value::Null),
        };
        result.steps.push(step);
    }
}

/// The slowest successful call: the one the cancellation probe cancels.
type Slowest = Option<(f64, String, serde_json::Map<String, Value>)>;

/// One call's answer: its outcome, and what it said (the tool's text,
/// or the JSON-RPC error) under the key it goes by in a step's detail.
struct Answer {
    outcome: Outcome,
    key: &'static str,
    said: String,
    /// Its image and audio parts, described (`client::media`).
    media: Vec<Value>,
}

async fn call_once(
    client: &Client,
    t: Duration,
    name: &str,
    args: &serde_json::Map<String, Value>,
) -> Answer {
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(args.clone());
    match tokio::time::timeout(t, client.call_tool(params)).await {
        Ok(Ok(r)) => {
            let (outcome, said) = answered(&r);
            Answer {
                outcome,
                key: "text",
                said,
                media: crate::transport::client::media(&r),
            }
        }
        Ok(Err(e)) => Answer {
            outcome: if wire_closed(client) {
                Outcome::Closed
            } else {
                error_outcome(&e)
            },
            key: "error",
            said: e.to_string(),
            media: Vec::new(),
        },
        Err(_) => Answer {
            outcome: Outcome::Timeout,
            key: "error",
            said: String::new(),
            media: Vec::new(),
        },
    }
}

/// [`call_once`], cut [`upstream::GRACE`] after the server's first
/// refused or failed network try during it (the microVM's events say
/// when), instead of at the step timeout.
async fn call_watched(
    client: &Client,
    t: Duration,
    name: &str,
    args: &serde_json::Map<String, Value>,
    events: Option<&std::path::Path>,
) -> Answer {
    let Some(path) = events else {
        return call_once(client, t, name, args).await;
    };
    let watch = upstream::Watch::from_end(path);
    tokio::select! {
        answer = call_once(client, t, name, args) => answer,
        tried = watch.refused() => Answer {
            outcome: Outcome::Timeout,
            key: "error",
            said: format!(
                "no answer {} s after the server's network try was refused or failed ({tried}): cut there, not at the step timeout",
                upstream::GRACE.as_secs()
            ),
            media: Vec::new(),
        },
    }
}

/// Whether an answer reached the tool's code, and if not, why not: an
/// answer that complains about the arguments did not, nor did silence.
fn reached(
    a: &Answer,
    schema: &serde_json::Map<String, Value>,
    args: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    match a.outcome {
        Outcome::Ok | Outcome::Closed | Outcome::Skipped => Ok(()),
        Outcome::Timeout => Err("no answer within the step timeout".into()),
        Outcome::ToolError | Outcome::Error => match feedback::complains(&a.said, schema, args) {
            true => Err("the answer complains about the arguments".into()),
            false => Ok(()),
        },
    }
}

/// Calls each planned tool; a generated call refused for its arguments is
/// tried again as the refusal asks ([`feedback`]), every attempt kept in
/// the step. None when the server went away in a call.
async fn call_tools(
    client: &Client,
    wire: &Wire,
    opts: &ProbeOptions,
    tools: &[rmcp::model::Tool],
    result: &mut ProbeResult,
) -> Option<Slowest> {
    let mut slowest: Slowest = None;
    let mut hints = arguments::Hints {
        workspace: opts.workspace.clone(),
        roots: opts.roots.clone(),
        site: opts.site.clone(),
        ..arguments::Hints::default()
    };
    // Calls in a row that got no answer within the step timeout.
    let mut unanswered = 0;
    for call in plan_calls(tools, opts) {
        let s = begin(wire, &format!("tools/call:{}", call.name));
        if unanswered >= HUNG_AFTER {
            // A server that answers no call waits on something that will
            // not come: each further call would cost the whole step
            // timeout to learn the same (an audit of many servers pays it
            // per tool). Recorded as not called, with why.
            let why = format!(
                "not called: the server answered none of the last {HUNG_AFTER} calls within the step timeout"
            );
            let detail = json!({"skipped": why, "reached": false, "reach": why});
            result.steps.push(s.end(wire, Outcome::Skipped, detail));
            continue;
        }
        let listed = tools.iter().find(|t| t.name == call.name.as_str());
        hints.tool = call.name.clone();
        hints.description = listed
            .and_then(|t| t.description.as_deref())
            .unwrap_or_default()
            .to_string();
        let (args, why, schema) = match call.args {
            Planned::Skip(why) => {
                result.steps.push(s.end(wire, Outcome::Skipped, json!(why)));
                continue;
            }
            Planned::Call(args) => (args, json!("given"), None),
            Planned::Generate(schema) => {
                let (args, why) = arguments::generate_with(&schema, &hints);
                (args, Value::Object(why), Some(schema))
            }
        };
        let empty = serde_json::Map::new();
        let schema_of = listed.map_or(&empty, |t| &*t.input_schema);
        // Only what the server asks during this call is this call's.
        let _ = client.service().take_asked();
        let tries = call_with_retries(
            client,
            opts,
            &call.name,
            args,
            why,
            schema.as_deref(),
            &hints,
            schema_of,
        )
        .await;
        let Tries {
            answer,
            args,
            why,
            attempts,
            first_reached,
        } = tries;
        if answer.outcome == Outcome::Ok {
            arguments::remember(&answer.said, &mut hints.seen);
        }
        let mut detail = call_detail(&answer, &args, why, attempts, first_reached, schema_of);
        // What the server asked of the client to answer it (declined).
        let asked = client.service().take_asked();
        if !asked.is_empty() {
            detail["input_requests"] = Value::Array(asked);
        }
        let step = s.end(wire, answer.outcome, detail);
        if step.outcome == Outcome::Ok && slowest.as_ref().is_none_or(|x| step.took_ms > x.0) {
            slowest = Some((step.took_ms, call.name.clone(), args.clone()));
        }
        let closed = step.outcome == Outcome::Closed;
        match step.outcome {
            Outcome::Timeout => unanswered += 1,
            _ => unanswered = 0,
        }
        result.steps.push(step);
        if closed {
            return None;
        }
        // An answer shows the server working only if it depends on what
        // was asked: the same tool again with one value changed. A call
        // the user gave is made once unless they asked (an audit's
        // calls): a second write_file would change what the first wrote.
        if answer.outcome == Outcome::Ok && (schema.is_some() || opts.vary_given) {
            match call_varied(client, wire, opts, &call.name, &args, schema_of, &answer).await {
                Some(Ok(varied)) => {
                    if let Some(last) = result.steps.last_mut() {
                        last.detail["varied"] = varied;
                    }
                }
                Some(Err(closed)) => {
                    result.steps.push(closed);
                    return None;
                }
                None => {}
            }
        }
    }
    Some(slowest)
}

/// A tool's call and the retries its refusals asked for: the last
/// answer with the arguments that got it, the earlier attempts, and
/// whether the first try alone reached the tool.
struct Tries {
    answer: Answer,
    args: serde_json::Map<String, Value>,
    why: Value,
    attempts: Vec<Value>,
    first_reached: bool,
}

/// Calls `name` with `args`; a generated call (`schema` given) that the
/// server refuses is tried again as the refusal asks ([`feedback`]), up
/// to [`feedback::RETRIES`] times, never with arguments already tried,
/// unless `no_retries`. Only generated arguments are changed: the user's
/// are theirs.
#[allow(clippy::too_many_arguments)]
async fn call_with_retries(
    client: &Client,
    opts: &ProbeOptions,
    name: &str,
    mut args: serde_json::Map<String, Value>,
    mut why: Value,
    schema: Option<&serde_json::Map<String, Value>>,
    hints: &arguments::Hints,
    schema_of: &serde_json::Map<String, Value>,
) -> Tries {
    let (t, events) = (opts.step_timeout, opts.refusal_watch());
    let mut answer = call_watched(client, t, name, &args, events).await;
    // The first try, judged alone: the figure without the retries.
    let first_reached = reached(&answer, schema_of, &args).is_ok();
    let mut attempts = Vec::new();
    let mut tried = vec![args.clone()];
    while let Some(schema) = schema.filter(|_| !opts.no_retries) {
        if !matches!(answer.outcome, Outcome::ToolError | Outcome::Error)
            || attempts.len() >= feedback::RETRIES
        {
            break;
        }
        let Some((next, reason)) = feedback::retry(&answer.said, schema, &args, hints, &tried)
        else {
            break;
        };
        attempts.push(
            json!({"arguments": args, "why": why, "outcome": answer.outcome,
            answer.key: answer.said}),
        );
        (args, why) = (next, json!(reason));
        tried.push(args.clone());
        answer = call_watched(client, t, name, &args, events).await;
    }
    Tries {
        answer,
        args,
        why,
        attempts,
        first_reached,
    }
}

/// A call step's detail: the last call's arguments and why they were
/// chosen, its answer, the earlier attempts, whether it reached the tool.
fn call_detail(
    answer: &Answer,
    args: &serde_json::Map<String, Value>,
    why: Value,
    attempts: Vec<Value>,
    first_reached: bool,
    schema: &serde_json::Map<String, Value>,
) -> Value {
    let mut detail = json!({"arguments": args, "why": why});
    if answer.outcome != Outcome::Timeout || !answer.said.is_empty() {
        detail[answer.key] = json!(answer.said);
    }
    if !answer.media.is_empty() {
        detail["media"] = json!(answer.media);
    }
    // A result that gives the model orders is shown as one (whether
    // it is a finding is the definitions checks' to say).
    if let Some(excerpt) = crate::judge::definitions::speaks_to_model(&answer.said) {
        detail["addresses_model"] = json!(excerpt);
    }
    if !attempts.is_empty() {
        detail["attempts"] = Value::Array(attempts);
        detail["first_reached"] = json!(first_reached);
    }
    // Whether the call got past the argument check, for the audit's
    // coverage; the user's own arguments are judged the same way.
    match reached(answer, schema, args) {
        Ok(()) => detail["reached"] = json!(true),
        Err(why) => {
            detail["reached"] = json!(false);
            detail["reach"] = json!(why);
        }
    }
    detail
}

/// [`call_tools`]' second call of a tool that answered: one value of its
/// arguments changed (`arguments::vary`), made after the step so that
/// the step's timing is the first call's alone. What it showed, for the
/// step's `detail.varied`; a step of its own when the server went away
/// in it (the crash is what a client would meet); None when nothing
/// could be changed.
async fn call_varied(
    client: &Client,
    wire: &Wire,
    opts: &ProbeOptions,
    name: &str,
    args: &serde_json::Map<String, Value>,
    schema: &serde_json::Map<String, Value>,
    first: &Answer,
) -> Option<Result<Value, StepResult>> {
    let v = arguments::vary(args, schema)?;
    let s = begin(wire, &format!("tools/call:{name}"));
    let events = opts.refusal_watch();
    let again = call_watched(client, opts.step_timeout, name, &v.arguments, events).await;
    if again.outcome == Outcome::Closed {
        let detail = json!({"arguments": v.arguments, "why": format!("{} varied", v.property), "error": again.said});
        return Some(Err(s.end(wire, Outcome::Closed, detail)));
    }
    Some(Ok(json!({
        "property": v.property,
        "arguments": v.arguments,
        "outcome": again.outcome,
        "same": again.outcome == first.outcome && again.said == first.said,
        "echoes_input": again.outcome == first.outcome
            && arguments::only_echoes(&first.said, &again.said, &v.was, &v.now),
        "text": again.said.chars().take(4096).collect::<String>(),
        "refused_by_schema": feedback::refused_by_schema(&again.said, schema),
    })))
}

/// Calls in a row left unanswered after which a server is taken as hung
/// and its remaining tools are not called.
pub const HUNG_AFTER: usize = 2;

fn ping() -> ClientRequest {
    ClientRequest::PingRequest(PingRequest::default())
}

fn wire_closed(client: &Client) -> bool {
    client.is_closed()
}

/// Cancels a request right after sending it (the slowest successful tool
/// call, so it is most likely still running; else `tools/list`), then
/// checks that the server still answers. Whether the server suppressed
/// its answer to the cancelled request is in the detail.
async fn cancel(
    client: &Client,
    wire: &Wire,
    t: Duration,
    slowest: Option<(f64, String, serde_json::Map<String, Value>)>,
) -> StepResult {
    let s = begin(wire, "cancel");
    let (what, request) = match slowest {
        Some((_, name, args)) => (
            format!("tools/call:{name}"),
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                CallToolRequestParams::new(name).with_arguments(args),
            )),
        ),
        None => (
            "tools/list".to_string(),
            ClientRequest::ListToolsRequest(Default::default()),
        ),
    };
    let handle = match client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
    {
        Ok(h) => h,
        Err(e) => return s.end(wire, error_outcome(&e), json!(e.to_string())),
    };
    let id = serde_json::to_value(&handle.id).unwrap_or_default();
    let _ = handle
        .cancel(Some("mcpvm probe: cancellation check".into()))
        .await;
    // Any answer proves the server still listens; in the 2026-07-28
    // lifecycle `ping` is gone, and a "method not found" is an answer too.
    let alive = tokio::time::timeout(t, client.send_request(ping())).await;
    let answered_cancelled = wire.exchange.since(s.mark).iter().any(|e| {
        e.dir == Direction::Received
            && e.message
                .as_ref()
                .is_some_and(|m| m["id"] == id && m.get("method").is_none())
    });
    let detail = json!({"cancelled": what, "answered_anyway": answered_cancelled});
    match alive {
        Ok(Ok(_)) | Ok(Err(ServiceError::McpError(_))) => s.end(wire, Outcome::Ok, detail),
        Ok(Err(e)) => s.end(
            wire,
            error_outcome(&e),
            json!({"cancelled": what, "error": e.to_string()}),
        ),
        Err(_) => s.end(wire, Outcome::Timeout, detail),
    }
}

enum Planned {
    Call(serde_json::Map<String, Value>),
    /// Arguments made from this schema when the call comes, so that
    /// values earlier calls returned can be used.
    Generate(Arc<serde_json::Map<String, Value>>),
    Skip(String),
}

struct PlannedCall {
    name: String,
    args: Planned,
}

/// Which tools to call and with what: the user's arguments, else ones
/// generated from the schema; tools the user marked dangerous or that
/// declare themselves destructive are not called.
fn plan_calls(tools: &[rmcp::model::Tool], opts: &ProbeOptions) -> Vec<PlannedCall> {
    let mut plan = Vec::new();
    let allowed = |name: &str| opts.only_tools.as_ref().is_none_or(|o| o.contains(name));
    for tool in tools {
        let name = tool.name.to_string();
        if !allowed(&name) {
            continue;
        }
        let args = match opts.calls.get(&name) {
            Some(ToolArgs::Dangerous) => Planned::Skip("marked dangerous by the user".into()),
            Some(ToolArgs::Given(a)) => Planned::Call(a.clone()),
            None if opts.only_given => continue,
            None if !opts.allow_destructive
                && tool.annotations.as_ref().and_then(|a| a.destructive_hint) == Some(true) =>
            {
                Planned::Skip(
                    "annotated destructive (destructiveHint); --allow-destructive calls it".into(),
                )
            }
            None => Planned::Generate(tool.input_schema.clone()),
        };
        plan.push(PlannedCall { name, args });
    }
    // The tools the user named first, in their order; then listings:
    // what they return (ids, names) feeds the generated calls after them.
    let named_at = |name: &str| opts.call_order.iter().position(|n| n == name);
    plan.sort_by_key(|c| match named_at(&c.name) {
        Some(i) => (0, i),
        None => (
            1 + !(c.name.starts_with("list") || c.name.starts_with("search")) as usize,
            0,
        ),
    });
    // A tool the user named that the server does not list is still called:
    // the user asked, and the server's answer is the finding.
    for (name, args) in &opts.calls {
        if let ToolArgs::Given(a) = args {
            if allowed(name) && !tools.iter().any(|t| t.name == name.as_str()) {
                plan.push(PlannedCall {
                    name: name.clone(),
                    args: Planned::Call(a.clone()),
                });
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> rmcp::model::Tool {
        serde_json::from_value(json!({"name": name, "inputSchema": {"type": "object"}})).unwrap()
    }

    fn planned(tools: &[rmcp::model::Tool], opts: &ProbeOptions) -> Vec<String> {
        plan_calls(tools, opts)
            .into_iter()
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn only_the_tools_named_are_called_given_or_not() {
        let tools = [tool("list_items"), tool("get_item"), tool("fetch")];
        let mut opts = ProbeOptions::default();
        let mut given = serde_json::Map::new();
        given.insert("id".into(), json!(1));
        opts.calls
            .insert("fetch".into(), ToolArgs::Given(given.clone()));
        // A tool the user named that the server does not list is called.
        opts.calls.insert("hidden".into(), ToolArgs::Given(given));
        let mut all = planned(&tools, &opts);
        all.sort();
        assert_eq!(all, ["fetch", "get_item", "hidden", "list_items"]);
        opts.only_tools = Some(["get_item".to_string()].into());
        assert_eq!(planned(&tools, &opts), ["get_item"]);
        // None worked: nothing is called, the listing still is.
        opts.only_tools = Some(Default::default());
        assert!(planned(&tools, &opts).is_empty());
    }

    /// Tools named in the order (an audit's judged cell: its baseline's)
    /// are called in it, generated or given, before the listings the
    /// probe otherwise calls first.
    #[test]
    fn named_tools_keep_their_order_generated_or_given() {
        let tools = [
            tool("list_items"),
            tool("get_item"),
            tool("fetch"),
            tool("zap"),
        ];
        let mut opts = ProbeOptions::default();
        assert_eq!(
            planned(&tools, &opts),
            ["list_items", "get_item", "fetch", "zap"]
        );
        opts.calls
            .insert("fetch".into(), ToolArgs::Given(serde_json::Map::new()));
        opts.call_order = vec!["get_item".into(), "fetch".into(), "list_items".into()];
        assert_eq!(
            planned(&tools, &opts),
            ["get_item", "fetch", "list_items", "zap"]
        );
    }
}
