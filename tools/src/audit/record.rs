//! One line of `results.jsonl`: what one server did under one profile,
//! classified, with the evidence. docs/audit.md documents the schema.

use mcpvm_protocol::messages::{AnyEvent, Event, EventLine, HostEvent, SyscallCount};
use probes::judge::findings::Finding;
use probes::report::result::{Outcome as StepOutcome, ProbeResult, StepResult};
use probes::transport::exchange::Entry;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub const SCHEMA: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Handshake, listings and every call worked.
    Ok,
    /// The server answered, but some tool calls failed.
    Degraded,
    /// The handshake or `tools/list` failed.
    Broken,
    /// A step, or the whole run, ran out of time.
    Timeout,
    /// The server went away during a step.
    Crash,
    /// The guest kernel's OOM killer ended a server process.
    Oom,
    /// The audit could not run this cell (the probe itself failed).
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 7] = [
        Outcome::Ok,
        Outcome::Degraded,
        Outcome::Broken,
        Outcome::Timeout,
        Outcome::Crash,
        Outcome::Oom,
        Outcome::Error,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Degraded => "degraded",
            Outcome::Broken => "broken",
            Outcome::Timeout => "timeout",
            Outcome::Crash => "crash",
            Outcome::Oom => "oom",
            Outcome::Error => "error",
        }
    }

    /// Its shade in the HTML report.
    pub fn colour(self) -> &'static str {
        match self {
            Outcome::Ok => "#2e9d5b",
            Outcome::Degraded => "#e0b43a",
            Outcome::Broken => "#d2453b",
            Outcome::Timeout => "#8e5cc2",
            Outcome::Crash => "#7a1f1a",
            Outcome::Oom => "#3a6fd2",
            Outcome::Error => "#777777",
        }
    }

    /// One character for the Markdown matrix.
    pub fn symbol(self) -> &'static str {
        match self {
            Outcome::Ok => "✓",
            Outcome::Degraded => "◐",
            Outcome::Broken => "✗",
            Outcome::Timeout => "⌛",
            Outcome::Crash => "✝",
            Outcome::Oom => "M",
            Outcome::Error => "?",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellTimings {
    /// The whole cell, as the audit saw it.
    pub wall_ms: f64,
    /// `mcpvm run` start to the guest agent's first event.
    pub boot_ms: Option<f64>,
    /// Spawn to the handshake's answer: the first response.
    pub handshake_ms: Option<f64>,
    pub tools_list_ms: Option<f64>,
}

/// One run of a cell that `--repeat` ran more than once: how it ended and
/// how soon the server answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub outcome: Outcome,
    pub boot_ms: Option<f64>,
    pub handshake_ms: Option<f64>,
}

impl Sample {
    pub fn of(r: &Record) -> Self {
        Sample {
            outcome: r.outcome,
            boot_ms: r.timings.boot_ms,
            handshake_ms: r.timings.handshake_ms,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellEvidence {
    /// System calls the profile denied, with the errno the server saw.
    pub denied: Vec<SyscallCount>,
    /// Failed steps: `step: outcome: what the server said`.
    pub errors: Vec<String>,
    /// The server's first stderr lines, when it wrote more than the tail
    /// holds: a cause printed first (a library that failed to load) is
    /// then not lost under what followed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_head: String,
    /// The server's last stderr lines.
    pub stderr_tail: String,
    /// How the server process ended (the probe's `exit`).
    pub exit: Value,
    pub oom: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub schema: u32,
    pub server: String,
    pub profile: String,
    pub outcome: Outcome,
    /// The first step that failed.
    pub failed_step: Option<String>,
    pub lifecycle: Option<String>,
    pub tools_ok: Vec<String>,
    pub tools_failed: Vec<String>,
    /// Every tool the server listed (at most [`MAX_LISTED`] names, each
    /// cut at 128 characters): what the cross-server name checks read
    /// (`probes::judge::names`). Empty in records written before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_listed: Vec<String>,
    pub timings: CellTimings,
    pub evidence: CellEvidence,
    /// Every call the server made, in a profile that logs them (baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls_used: Option<Vec<SyscallCount>>,
    /// With `--repeat N` (N > 1): every run of the cell, the first (whose
    /// outcome, evidence and timings the fields above are) included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
    /// The `security` column's cell (`mcpvm audit --security`): what the
    /// attacks found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Security>,
    /// What the server tried to reach (the egress proxy's `net` events,
    /// docs/network.md): each distinct lookup and connection with its
    /// verdict, at most [`MAX_NETWORK`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
    /// Of those, the tries made before the first request reached the
    /// server (at start-up): a server that wants its upstream before it
    /// answers the handshake.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub start_network: Vec<String>,
    /// What the server declares that the definitions checks flag (tool
    /// poisoning, hidden characters, confusable names:
    /// `probes::judge::definitions`), judged on this cell's listings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<Finding>,
    /// With `mcpvm audit --robustness`, in the first profile's cell: how
    /// the server took hostile input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robustness: Option<Robustness>,
    /// Whether its VMM ran jailed (None: no word from the run, as from
    /// runs before the jail event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jailed: Option<bool>,
    /// How many of the calls reached their tool (an answer that is not a
    /// complaint about the arguments: `probes::calls::feedback`), the audit's
    /// coverage figure. None in records written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<probes::report::result::Reach>,
    /// The arguments of each generated call that reached its tool, by
    /// tool (the last try's, when a refusal was read): what the audit
    /// learnt, offered as the server's `audit_calls` (coverage.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub learnt_calls: BTreeMap<String, Value>,
    /// Of those, the tools whose arguments hold a value the server
    /// returned earlier in the cell (an id a listing gave): a later cell
    /// generates them again from its own answers rather than send a value
    /// its server may never have returned (`carry::Carried::replay`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learnt_from_answers: Vec<String>,
    /// Tool results that give the model orders (`tool: excerpt`), read by
    /// the detector the definitions checks use: shown, not judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses_model: Vec<String>,
    /// Each tool call the cell made (retries included, attacks not), as
    /// it went: enough to judge it again with later rules (`audit
    /// merge` re-derives verdicts from records) and for a reader to check
    /// a verdict. At most [`MAX_CALLS`]; empty in records written before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// The server brings a program that looks hosts up on its own (a
    /// browser): a lookup refused during one of its calls is not by
    /// itself that call's failure (`calls::judge`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background_lookups: bool,
    /// The roles each tool was seen to play in the VM, and those only its
    /// annotations claim (`probes::judge::roles`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<probes::judge::roles::ToolRoles>,
    /// Seconds since the epoch when the cell finished.
    pub finished_at: u64,
}

/// Calls a record keeps.
pub const MAX_CALLS: usize = 256;
/// Characters of a call's arguments and of its answer kept.
const CALL_ARGUMENTS: usize = 300;
const CALL_ANSWER: usize = 600;
/// Network tries kept per call.
const CALL_NET: usize = 8;

/// One tool call of a cell: what was sent, what came back, what the VM
/// saw during it. Bounded and printable; redacted as the probe's result
/// is (its secrets never reach a record).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub tool: String,
    /// The probe's outcome of this try (`ok`, `tool_error`, `error`,
    /// `timeout`, …): what the result's flag and the transport said; a
    /// step's last try has the step's.
    pub outcome: String,
    /// The arguments sent, as JSON, cut.
    pub arguments: String,
    /// The answer: the result's text content (its parts joined), or the
    /// JSON-RPC error's message; cut. Empty when nothing came back.
    pub answer: String,
    /// The result said `isError: true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// The lookups and connections the server tried while this call was
    /// in flight, each with its verdict (`dns api.x.com denied (…)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<String>,
    pub took_ms: f64,
    /// The same tool called again with one value changed, when the first
    /// answer was not an error: whether its answer depends on its input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub varied: Option<Varied>,
}

/// A call's second try with one value changed (`probes::calls::arguments::vary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Varied {
    /// The property changed.
    pub property: String,
    /// The second answer's outcome.
    pub outcome: String,
    /// It answered exactly as the first call did.
    pub same: bool,
    /// It was refused by the arguments' validation (the tool's code never
    /// saw it): says nothing of the tool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused_by_schema: bool,
    /// The two answers differ only where the changed value is repeated
    /// back ("Watching x" / "Watching x-mcpvm-varied").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub echoes_input: bool,
    /// The second answer, cut as a call's answer is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub answer: String,
}

impl Call {
    /// The calls of a probe's steps, each with the network tries the
    /// guest's events attribute to its request.
    /// Every call of `probe`, as a record made from it keeps them.
    pub fn of_probe(probe: &ProbeResult) -> Vec<Call> {
        Call::all(
            probe,
            &GuestEvents(probe.guest_events.as_deref().unwrap_or_default()),
        )
    }

    fn all(probe: &ProbeResult, events: &GuestEvents) -> Vec<Call> {
        let printable = |t: &str, max: usize| clip(&mcpvm::logger::printable(t), max);
        // An answer keeps its lines (JSON a rule may parse again spans
        // them); every other control is escaped.
        let lines = |t: &str, max: usize| clip(&mcpvm::logger::printable_lines(t), max);
        let mut all = Vec::new();
        for (tool, s) in probe
            .steps
            .iter()
            .filter_map(|s| Some((s.step.strip_prefix("tools/call:")?, s)))
        {
            // Each try of the step, in order: the retries a refusal asked
            // for, then the last, whose outcome is the step's. A record
            // that showed only the first try's answer beside the last's
            // outcome (`ok` over "must point to an Excel file") had its
            // tools judged on an answer they did not end with.
            let tries: Vec<(&Value, Option<&Entry>, Option<&Entry>)> = s
                .exchange
                .iter()
                .filter(|e| e.method() == Some("tools/call"))
                .filter_map(|sent| {
                    let m = sent.message.as_ref()?;
                    let id = m.get("id");
                    let answer = s.exchange.iter().find(|e| {
                        e.message
                            .as_ref()
                            .is_some_and(|a| a.get("id") == id && a.get("method").is_none())
                    });
                    Some((m, Some(sent), answer))
                })
                .collect();
            let last = tries.len().saturating_sub(1);
            let tries = match tries.is_empty() {
                // No request on the wire (a call not sent): the step alone.
                true => vec![(&Value::Null, None, None)],
                false => tries,
            };
            for (i, (sent, sent_at, answer)) in tries.into_iter().enumerate() {
                if all.len() >= MAX_CALLS {
                    return all;
                }
                let id = sent.get("id");
                let answer_msg = answer.and_then(|e| e.message.as_ref());
                let text = answer_msg.map(answer_text).unwrap_or_default();
                let net = events
                    .0
                    .iter()
                    .filter(|e| match e.event.during() {
                        Some(mcpvm_protocol::messages::During::Request {
                            id: i, method, ..
                        }) => Some(i) == id && method == "tools/call",
                        _ => false,
                    })
                    .filter_map(|e| e.event.net())
                    .filter_map(probes::judge::effects::net_item)
                    .fold(Vec::new(), |mut v, item| {
                        if !v.contains(&item) && v.len() < CALL_NET {
                            v.push(item);
                        }
                        v
                    });
                let is_last = i == last;
                let outcome = match is_last {
                    true => outcome_name(s.outcome).to_string(),
                    false => printable(
                        s.detail["attempts"][i]["outcome"]
                            .as_str()
                            .unwrap_or("error"),
                        32,
                    ),
                };
                let took_ms = match (is_last && last == 0, sent_at, answer) {
                    (false, Some(a), Some(b)) => b.at_ms - a.at_ms,
                    _ => s.took_ms,
                };
                all.push(Call {
                    tool: printable(tool, 128),
                    outcome,
                    arguments: sent
                        .pointer("/params/arguments")
                        .map(|a| printable(&a.to_string(), CALL_ARGUMENTS))
                        .unwrap_or_default(),
                    answer: lines(&text, CALL_ANSWER),
                    is_error: answer_msg
                        .and_then(|m| m.pointer("/result/isError"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    net,
                    took_ms,
                    varied: s.detail.get("varied").filter(|_| is_last).map(|v| Varied {
                        property: printable(v["property"].as_str().unwrap_or_default(), 128),
                        outcome: printable(v["outcome"].as_str().unwrap_or_default(), 32),
                        same: v["same"] == true,
                        refused_by_schema: v["refused_by_schema"] == true,
                        echoes_input: v["echoes_input"] == true,
                        answer: lines(v["text"].as_str().unwrap_or_default(), CALL_ANSWER / 2),
                    }),
                });
            }
        }
        all
    }
}

/// What an answer says: the text of its content parts (others named by
/// their type), or its error's message.
fn answer_text(m: &Value) -> String {
    if let Some(e) = m.get("error") {
        return e["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string());
    }
    let parts = m.pointer("/result/content").and_then(Value::as_array);
    match parts {
        Some(parts) => parts
            .iter()
            .map(|p| match p["text"].as_str() {
                Some(t) => t.to_string(),
                None => format!("[{}]", p["type"].as_str().unwrap_or("?")),
            })
            .collect::<Vec<_>>()
            .join(" "),
        None => m
            .pointer("/result/structuredContent")
            .map(Value::to_string)
            .unwrap_or_default(),
    }
}

/// Tool names a record keeps.
pub const MAX_LISTED: usize = 1024;

/// Bytes of one learnt call's arguments kept (as JSON): past it the call
/// is not offered (a user reviews what is offered).
const MAX_LEARNT_BYTES: usize = 4096;

/// The calls of `probe` that reached their tool with generated arguments.
fn learnt_calls(probe: &ProbeResult) -> BTreeMap<String, Value> {
    probe
        .steps
        .iter()
        .filter(|s| s.detail["reached"] == true && s.detail["why"] != "given")
        .filter_map(|s| {
            let tool = s.step.strip_prefix("tools/call:")?;
            let args = s.detail.get("arguments")?;
            (args.to_string().len() <= MAX_LEARNT_BYTES).then(|| (tool.to_string(), args.clone()))
        })
        .collect()
}

/// The tools of [`learnt_calls`] whose arguments came, in part, from
/// the server's own earlier answers.
fn learnt_from_answers(probe: &ProbeResult) -> Vec<String> {
    probe
        .steps
        .iter()
        .filter(|s| {
            s.detail["reached"] == true && probes::calls::arguments::uses_answers(&s.detail["why"])
        })
        .filter_map(|s| Some(s.step.strip_prefix("tools/call:")?.to_string()))
        .collect()
}

/// How a server took the probe's hostile input (`mcpvm probe
/// --robustness`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Robustness {
    /// Probes sent (not counting those not run).
    pub sent: usize,
    /// Of those, the ones it answered or ignored and lived through.
    pub handled: usize,
    /// Valid input that crashed or hung it: a real client can send that.
    pub valid_breakage: Vec<String>,
    /// Malformed input that crashed or hung it.
    pub malformed_breakage: Vec<String>,
}

impl Robustness {
    fn of(probe: &ProbeResult) -> Option<Self> {
        use probes::report::result::Class;
        let rs = probe.robustness.as_ref()?;
        let sent = rs.iter().filter(|r| r.class != Class::NotRun).count();
        Some(Robustness {
            sent,
            handled: rs
                .iter()
                .filter(|r| matches!(r.class, Class::Handled | Class::Ignored))
                .count(),
            valid_breakage: probe.verdict.valid_input_breakage.clone(),
            malformed_breakage: probe.verdict.malformed_input_breakage.clone(),
        })
    }
}

/// Network tries a record keeps.
pub const MAX_NETWORK: usize = 50;

/// What attacking every tool found (`mcpvm probe --security`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Security {
    /// Attacks sent, over all tools.
    pub attacks: usize,
    /// Tools attacked.
    pub tools: Vec<String>,
    /// The boundary the findings were judged against.
    pub roots: Vec<String>,
    pub findings: Vec<Finding>,
    /// Tools left after a few payloads: each refused them exactly as it
    /// refused its valid call (a missing key), so they never reached its
    /// code and no finding there would be a verdict on it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreached: Vec<String>,
    /// Why nothing could be judged (no canaries reported, no events):
    /// then "no finding" is not a result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_judged: Option<String>,
}

impl Security {
    fn of(probe: &ProbeResult) -> Option<Self> {
        let attacks: Vec<&str> = probe
            .steps
            .iter()
            .filter_map(|s| s.step.strip_prefix("attack:"))
            .collect();
        let findings: Vec<Finding> = probe
            .findings
            .iter()
            .filter(|f| !probes::judge::definitions::is_declared(f))
            .cloned()
            .collect();
        if attacks.is_empty() && findings.is_empty() && probe.not_judged.is_none() {
            return None;
        }
        let mut tools: Vec<String> = attacks.iter().map(|t| t.to_string()).collect();
        tools.dedup();
        Some(Security {
            attacks: attacks.len(),
            tools,
            roots: probe.roots.clone(),
            findings,
            unreached: probe
                .steps
                .iter()
                .filter_map(|s| s.step.strip_prefix("unreached:"))
                .map(str::to_string)
                .collect(),
            not_judged: probe.not_judged.clone(),
        })
    }
}

const STDERR_TAIL: usize = 2048;
const DETAIL: usize = 300;

impl Record {
    /// A cell the audit could not run, or that outlived its wall limit.
    pub fn failed(
        server: &str,
        profile: &str,
        outcome: Outcome,
        why: String,
        wall_ms: f64,
    ) -> Self {
        Record {
            schema: SCHEMA,
            server: server.into(),
            profile: profile.into(),
            outcome,
            failed_step: None,
            lifecycle: None,
            tools_ok: Vec::new(),
            tools_failed: Vec::new(),
            tools_listed: Vec::new(),
            timings: CellTimings {
                wall_ms,
                ..CellTimings::default()
            },
            evidence: CellEvidence {
                errors: vec![why],
                ..CellEvidence::default()
            },
            syscalls_used: None,
            samples: Vec::new(),
            security: None,
            network: Vec::new(),
            start_network: Vec::new(),
            declared: Vec::new(),
            robustness: None,
            jailed: None,
            reach: None,
            learnt_calls: BTreeMap::new(),
            learnt_from_answers: Vec::new(),
            addresses_model: Vec::new(),
            calls: Vec::new(),
            background_lookups: false,
            roles: Vec::new(),
            finished_at: now(),
        }
    }

    /// Classifies a probe result (`mcpvm probe --json`, schema 3).
    pub fn from_probe(server: &str, profile: &str, probe: &ProbeResult, wall_ms: f64) -> Self {
        let events = GuestEvents(probe.guest_events.as_deref().unwrap_or_default());
        let oom = events.agent().any(|e| matches!(e, Event::OomKilled));
        let (denied, used) = events.syscalls();
        let failures = &probe.verdict.real_client_failures;
        let is_call = |s: &StepResult| s.step.starts_with("tools/call:");
        let passed = |s: &StepResult| matches!(s.outcome, StepOutcome::Ok | StepOutcome::Skipped);
        let (mut tools_ok, mut tools_failed) = (Vec::new(), Vec::new());
        let mut errors = Vec::new();
        for s in &probe.steps {
            if let Some(tool) = s.step.strip_prefix("tools/call:") {
                match s.outcome {
                    StepOutcome::Ok => tools_ok.push(tool.to_string()),
                    StepOutcome::Skipped => {}
                    _ => tools_failed.push(tool.to_string()),
                }
            }
            if !passed(s) && (is_call(s) || failures.contains(&s.step)) {
                let said = s.detail["error"]
                    .as_str()
                    .or(s.detail["text"].as_str())
                    .map(str::to_string)
                    .unwrap_or_else(|| s.detail.to_string());
                errors.push(format!(
                    "{}: {}: {}",
                    s.step,
                    outcome_name(s.outcome),
                    clip(&said, DETAIL)
                ));
            }
        }
        let (outcome, failed_step) = classify(probe, oom);
        let vm = probe.timings.vm.as_ref();
        Record {
            schema: SCHEMA,
            server: server.into(),
            profile: profile.into(),
            outcome,
            failed_step,
            lifecycle: probe.lifecycle.map(|l| outcome_name(l).to_string()),
            tools_ok,
            tools_failed,
            tools_listed: probe
                .tools
                .iter()
                .take(MAX_LISTED)
                .map(|t| t.chars().take(128).collect())
                .collect(),
            timings: CellTimings {
                wall_ms,
                // The events file is written as events come; the
                // timings file only when `mcpvm run` ends by itself.
                boot_ms: events
                    .0
                    .iter()
                    .find(|e| matches!(e.event, AnyEvent::Agent(Event::AgentStart { .. })))
                    .map(|e| e.at_ms)
                    .or(vm.and_then(|v| v.get("agent_start"))),
                handshake_ms: probe.timings.handshake_ms,
                tools_list_ms: probe.timings.tools_list_ms,
            },
            evidence: CellEvidence {
                denied,
                errors,
                stderr_head: head(&probe.stderr, STDERR_TAIL),
                stderr_tail: tail(&probe.stderr.tail, STDERR_TAIL),
                exit: serde_json::to_value(&probe.exit).unwrap_or_default(),
                oom,
            },
            syscalls_used: (!used.is_empty()).then_some(used),
            samples: Vec::new(),
            security: Security::of(probe),
            network: events.network(),
            start_network: events.start_network(),
            declared: probe
                .findings
                .iter()
                .filter(|f| probes::judge::definitions::is_declared(f))
                .cloned()
                .collect(),
            robustness: Robustness::of(probe),
            jailed: events.0.iter().find_map(|e| match e.event {
                AnyEvent::Host(HostEvent::Jail { jailed, .. }) => Some(jailed),
                _ => None,
            }),
            reach: probe.reach.clone(),
            learnt_calls: learnt_calls(probe),
            learnt_from_answers: learnt_from_answers(probe),
            addresses_model: probe
                .steps
                .iter()
                .filter_map(|s| {
                    let tool = s.step.strip_prefix("tools/call:")?;
                    Some(format!("{tool}: {}", s.detail["addresses_model"].as_str()?))
                })
                .take(16)
                .collect(),
            calls: Call::all(probe, &events),
            background_lookups: probe.background_lookups,
            roles: probe.roles.iter().take(MAX_LISTED).cloned().collect(),
            finished_at: now(),
        }
    }
}

/// The run's outcome and the step that decided it.
fn classify(probe: &ProbeResult, oom: bool) -> (Outcome, Option<String>) {
    let failures = &probe.verdict.real_client_failures;
    let handshake_failed = probe.lifecycle.is_none();
    let listing_failed = failures.iter().any(|f| f == "tools/list");
    let first_tool_failure = probe.steps.iter().find(|s| {
        s.step.starts_with("tools/call:")
            && !matches!(s.outcome, StepOutcome::Ok | StepOutcome::Skipped)
    });
    if handshake_failed || listing_failed {
        let step = match handshake_failed {
            true => failures.first().cloned().unwrap_or("initialize".into()),
            false => "tools/list".to_string(),
        };
        // A server that exits with a status before it ever answered did
        // not start (an import failed, a file was missing): broken. A
        // signal is a crash.
        let signalled = probe.exit.as_ref().is_some_and(|e| e.signal.is_some());
        let last = probe.steps.iter().rev().find(|s| s.step == step);
        let o = match last.map(|s| s.outcome) {
            _ if oom => Outcome::Oom,
            Some(StepOutcome::Timeout) => Outcome::Timeout,
            Some(StepOutcome::Closed) if signalled => Outcome::Crash,
            _ => Outcome::Broken,
        };
        (o, Some(step))
    } else if let Some(s) = first_tool_failure {
        let o = match s.outcome {
            _ if oom => Outcome::Oom,
            StepOutcome::Closed => Outcome::Crash,
            _ => Outcome::Degraded,
        };
        (o, Some(s.step.clone()))
    } else if let Some(f) = failures.first() {
        // ping, a listing: a real client would notice.
        (Outcome::Degraded, Some(f.clone()))
    } else {
        (Outcome::Ok, None)
    }
}

/// A value's name as serde writes it (`tool_error`, `initialize`).
fn outcome_name(v: impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The guest agent's events as the probe kept them (JSON, each with
/// `at_ms`).
struct GuestEvents<'a>(&'a [EventLine]);

impl GuestEvents<'_> {
    fn agent(&self) -> impl Iterator<Item = &Event> {
        self.0.iter().filter_map(|e| match &e.event {
            AnyEvent::Agent(a) => Some(a),
            _ => None,
        })
    }

    /// Each distinct network try, in the order first made.
    fn start_network(&self) -> Vec<String> {
        use mcpvm_protocol::messages::During;
        let mut tries: Vec<String> = Vec::new();
        let at_start = self
            .0
            .iter()
            .filter_map(|e| e.event.net())
            .filter(|n| matches!(n.during, None | Some(During::StartUp)));
        for item in at_start.filter_map(probes::judge::effects::net_item) {
            if !tries.contains(&item) && tries.len() < MAX_NETWORK {
                tries.push(item);
            }
        }
        tries
    }

    fn network(&self) -> Vec<String> {
        let mut tries: Vec<String> = Vec::new();
        let nets = self.0.iter().filter_map(|e| e.event.net());
        for item in nets.filter_map(probes::judge::effects::net_item) {
            if !tries.contains(&item) && tries.len() < MAX_NETWORK {
                tries.push(item);
            }
        }
        tries
    }

    /// The denied and used system calls of the server's first life (a
    /// server the probe restarts appends its later lives' events, each
    /// life opened by the host's `jail` event): the last count it sent,
    /// its final one when it exited, else the one counted while it still
    /// ran after its stdin closed (a server that never exits is stopped
    /// with its VM). Events without lives marked: the first count.
    fn syscalls(&self) -> (Vec<SyscallCount>, Vec<SyscallCount>) {
        let is_life = |e: &EventLine| matches!(e.event, AnyEvent::Host(HostEvent::Jail { .. }));
        let counts = |events: &'_ [EventLine]| {
            events
                .iter()
                .filter_map(|e| match &e.event {
                    AnyEvent::Agent(Event::Syscalls { denied, used, .. }) => {
                        Some((denied.clone(), used.clone()))
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        match self.0.iter().position(is_life) {
            Some(start) => {
                let rest = &self.0[start + 1..];
                let end = rest.iter().position(is_life).unwrap_or(rest.len());
                counts(&rest[..end]).pop()
            }
            None => counts(self.0).into_iter().next(),
        }
        .unwrap_or_default()
    }
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The first `max` bytes of stderr when the tail kept does not hold it
/// all; else empty.
fn head(s: &probes::transport::wire::Stderr, max: usize) -> String {
    if s.bytes <= max as u64 {
        return String::new();
    }
    let from = if s.head.is_empty() { &s.tail } else { &s.head };
    let mut to = max.min(from.len());
    while !from.is_char_boundary(to) {
        to -= 1;
    }
    from[..to].to_string()
}

fn tail(s: &str, max: usize) -> String {
    let start = s.len().saturating_sub(max);
    let start = (start..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s[start..].to_string()
}

#[cfg(test)]
pub(in crate::audit) mod tests {
    use super::*;
    use serde_json::json;

    fn step(name: &str, outcome: &str, detail: Value) -> StepResult {
        StepResult {
            step: name.into(),
            outcome: serde_json::from_value(json!(outcome)).unwrap(),
            at_ms: 0.0,
            took_ms: 0.0,
            detail,
            progress_notifications: 0,
            exchange: Vec::new(),
            effects: None,
        }
    }

    fn probe(
        steps: Vec<StepResult>,
        failures: &[&str],
        lifecycle: Option<&str>,
        events: Value,
    ) -> ProbeResult {
        let mut p = ProbeResult::new(&["server".into()], "stdio");
        p.lifecycle = lifecycle.map(|l| serde_json::from_value(json!(l)).unwrap());
        p.steps = steps;
        p.verdict.real_client_failures = failures.iter().map(|f| f.to_string()).collect();
        p.timings.handshake_ms = Some(812.5);
        p.timings.tools_list_ms = Some(900.0);
        p.timings.vm = Some(mcpvm_protocol::timings::RunTimings {
            first_event: [("agent_start".to_string(), 410.0)].into(),
            ..Default::default()
        });
        p.stderr.tail = "line1\nline2\n".into();
        p.exit =
            serde_json::from_value(json!({"code": 0, "signal": null, "exited_by_itself": true}))
                .unwrap();
        p.guest_events = serde_json::from_value(events).unwrap();
        p
    }

    fn ok_start() -> Vec<StepResult> {
        vec![
            step("initialize", "ok", json!({})),
            step("tools/list", "ok", json!(["a", "b"])),
        ]
    }

    /// An exchange line of a step.
    fn line(dir: &str, message: Value) -> probes::transport::exchange::Entry {
        serde_json::from_value(json!({"at_ms": 1.0, "dir": dir, "bytes": 1, "message": message}))
            .unwrap()
    }

    /// Each call keeps what was sent, what came back (an error put in an
    /// ordinary result included) and the network tries made while it was
    /// in flight: a later rule can judge it from the record alone.
    #[test]
    fn each_call_keeps_its_arguments_answer_flag_and_network_tries() {
        let mut steps = ok_start();
        let call = |id: u64, tool: &str, args: Value, result: Value| {
            let mut s = step(&format!("tools/call:{tool}"), "ok", json!({}));
            s.took_ms = 12.5;
            s.exchange = vec![
                line(
                    "sent",
                    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}}),
                ),
                line(
                    "received",
                    json!({"jsonrpc": "2.0", "id": id, "result": result}),
                ),
            ];
            s
        };
        steps.push(call(
            3,
            "slack_list_channels",
            json!({"limit": 10}),
            json!({"content": [{"type": "text", "text": "{\n  \"error\": \"fetch failed\"\n}"}]}),
        ));
        let mut flagged = call(
            4,
            "read",
            json!({"path": "/workspace/hello.txt"}),
            json!({"content": [{"type": "text", "text": format!("no\u{1b}]0;x{}", "y".repeat(2000))},
                {"type": "image", "data": "AA=="}], "isError": true}),
        );
        flagged.outcome = serde_json::from_value(json!("tool_error")).unwrap();
        steps.push(flagged);
        let during = json!({"phase": "request", "id": 3, "method": "tools/call", "tool": "slack_list_channels"});
        let events = json!([
            {"event": "net", "kind": "dns", "name": "slack.com", "allowed": false,
             "reason": "deny-net", "during": during},
            {"event": "net", "kind": "dns", "name": "slack.com", "allowed": false,
             "reason": "deny-net", "during": during},
            {"event": "net", "kind": "dns", "name": "telemetry.example", "allowed": false,
             "reason": "deny-net", "during": {"phase": "start_up"}}
        ]);
        let r = Record::from_probe(
            "s",
            "deny-net",
            &probe(steps, &[], Some("initialize"), events),
            1500.0,
        );
        let [slack, read] = &r.calls[..] else {
            panic!("{:?}", r.calls)
        };
        assert_eq!(slack.tool, "slack_list_channels");
        assert_eq!(slack.outcome, "ok");
        assert_eq!(slack.arguments, r#"{"limit":10}"#);
        assert_eq!(slack.answer, "{\n  \"error\": \"fetch failed\"\n}");
        let parsed: Value = serde_json::from_str(&slack.answer).unwrap();
        assert_eq!(parsed["error"], "fetch failed");
        assert!(!slack.is_error);
        assert_eq!(slack.net, ["dns slack.com denied (deny-net)"]);
        assert_eq!(slack.took_ms, 12.5);
        assert_eq!(read.outcome, "tool_error");
        assert!(read.is_error && read.net.is_empty());
        assert!(
            read.answer.ends_with("y…") && read.answer.chars().count() == 601,
            "{}",
            read.answer
        );
        assert!(read.answer.starts_with("no\\u{1b}]0;x"), "{}", read.answer);
        // The record reads back as written, and an old one without calls
        // still reads.
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let mut old = serde_json::to_value(&r).unwrap();
        old.as_object_mut().unwrap().remove("calls");
        assert!(serde_json::from_value::<Record>(old)
            .unwrap()
            .calls
            .is_empty());
    }

    /// A probe whose one call (describe_sheet) was refused for its
    /// arguments, then worked on the retry the refusal asked for.
    pub(in crate::audit) fn retried_call() -> ProbeResult {
        let mut steps = ok_start();
        let mut s = step(
            "tools/call:describe_sheet",
            "ok",
            json!({"attempts": [{"arguments": {"path": "/workspace/notes.txt"},
                "outcome": "tool_error", "text": "must point to an Excel file"}],
                "varied": {"property": "sheet", "outcome": "tool_error", "same": false}}),
        );
        s.took_ms = 40.0;
        let at = |ms: f64, dir: &str, m: Value| {
            let mut e = line(dir, m);
            e.at_ms = ms;
            e
        };
        s.exchange = vec![
            at(
                100.0,
                "sent",
                json!({"id": 5, "method": "tools/call",
                "params": {"name": "describe_sheet", "arguments": {"path": "/workspace/notes.txt"}}}),
            ),
            at(
                110.0,
                "received",
                json!({"id": 5, "result": {"isError": true,
                "content": [{"type": "text", "text": "must point to an Excel file"}]}}),
            ),
            at(
                112.0,
                "sent",
                json!({"id": 6, "method": "tools/call",
                "params": {"name": "describe_sheet", "arguments": {"path": "/workspace/book.xlsx"}}}),
            ),
            at(
                130.0,
                "received",
                json!({"id": 6, "result":
                {"content": [{"type": "text", "text": "Sheet1: A1:C3"}]}}),
            ),
        ];
        steps.push(s);
        probe(steps, &[], Some("initialize"), json!([]))
    }

    /// A call tried again as a refusal asked is kept as each try, in
    /// order, each with its own arguments and answer: the earlier tries
    /// with their own outcome, the last with the step's (the tool worked
    /// on it, and only it is varied). Judged on the first try's answer,
    /// a tool that worked looked refused.
    #[test]
    fn each_try_of_a_call_is_kept_with_its_own_answer() {
        let r = Record::from_probe("s", "baseline", &retried_call(), 1.0);
        let [first, last] = &r.calls[..] else {
            panic!("{:?}", r.calls)
        };
        assert_eq!(first.outcome, "tool_error");
        assert!(first.is_error && first.answer.contains("Excel file"));
        assert!(first.arguments.contains("notes.txt") && first.varied.is_none());
        assert_eq!(first.took_ms, 10.0);
        assert_eq!(last.outcome, "ok");
        assert!(!last.is_error && last.answer == "Sheet1: A1:C3");
        assert!(last.arguments.contains("book.xlsx") && last.varied.is_some());
        assert_eq!(last.took_ms, 18.0);
    }

    #[test]
    fn a_clean_run_is_ok_with_its_timings_and_used_calls() {
        let mut steps = ok_start();
        steps.push(step("tools/call:a", "ok", json!({"text": "fine"})));
        let events = json!([
            {"event": "agent_start", "uptime_ms": 300, "at_ms": 395.5},
            {"event": "syscalls", "denied": [], "used": [{"syscall": "read", "count": 4}]}
        ]);
        let r = Record::from_probe(
            "s",
            "baseline",
            &probe(steps, &[], Some("initialize"), events),
            1500.0,
        );
        assert_eq!(r.outcome, Outcome::Ok);
        assert_eq!(r.failed_step, None);
        assert_eq!(r.tools_ok, ["a"]);
        assert_eq!(r.timings.boot_ms, Some(395.5), "from the events, first");
        assert_eq!(r.timings.handshake_ms, Some(812.5));
        assert_eq!(r.syscalls_used.unwrap()[0].syscall, "read");
    }

    /// What reached each tool is kept, and which of those arguments hold
    /// a value the server returned earlier (a later cell cannot count on
    /// it); a call the user gave is theirs, not learnt.
    #[test]
    fn learnt_calls_say_which_came_from_the_servers_answers() {
        let mut steps = ok_start();
        steps.push(step(
            "tools/call:list",
            "ok",
            json!({"text": "f-1", "reached": true, "arguments": {}, "why": {}}),
        ));
        steps.push(step(
            "tools/call:read",
            "ok",
            json!({"text": "x", "reached": true, "arguments": {"id": "f-1"},
                "why": {"id": "returned by the server earlier as 'id'"}}),
        ));
        steps.push(step(
            "tools/call:given",
            "ok",
            json!({"text": "x", "reached": true, "arguments": {"a": 1}, "why": "given"}),
        ));
        let r = Record::from_probe(
            "s",
            "baseline",
            &probe(steps, &[], Some("initialize"), json!([])),
            1.0,
        );
        let learnt: Vec<&str> = r.learnt_calls.keys().map(String::as_str).collect();
        assert_eq!(learnt, ["list", "read"]);
        assert_eq!(r.learnt_from_answers, ["read"]);
    }

    /// A server that kept running after its stdin closed sent its calls
    /// while running; one that then exited sent them again, whole. The
    /// record takes its first life's last count, never a restart's.
    #[test]
    fn the_calls_are_the_first_lifes_last_count() {
        let count = |n: u64, running: bool| {
            json!({"event": "syscalls", "denied": [], "while_running": running,
                   "used": [{"syscall": "read", "count": n}]})
        };
        let jail = json!({"event": "jail", "jailed": true});
        let read = |events: serde_json::Value| {
            let r = Record::from_probe(
                "s",
                "baseline",
                &probe(ok_start(), &[], Some("initialize"), events),
                1.0,
            );
            r.syscalls_used.unwrap()[0].count
        };
        // Killed with its VM: the count sent while it ran; the restart's
        // own count is not the server's first life's.
        assert_eq!(
            read(json!([jail, count(5, true), jail, count(2, false)])),
            5
        );
        // Exited after all: its final count replaces the one while running.
        assert_eq!(
            read(json!([
                jail,
                count(5, true),
                count(6, false),
                jail,
                count(2, false)
            ])),
            6
        );
        // Events from before lives were marked: the first count.
        assert_eq!(read(json!([count(3, false), count(2, false)])), 3);
    }

    #[test]
    fn a_failing_tool_degrades_with_its_error_and_denials_as_evidence() {
        let mut steps = ok_start();
        steps.push(step("tools/call:a", "ok", json!({"text": "fine"})));
        steps.push(step(
            "tools/call:b",
            "tool_error",
            json!({"text": "git: Operation not permitted"}),
        ));
        let events = json!([{"event": "syscalls", "denied": [{"syscall": "execve", "errno": "EPERM", "count": 2}], "used": []}]);
        let r = Record::from_probe(
            "git",
            "deny-exec",
            &probe(steps, &[], Some("initialize"), events),
            1.0,
        );
        assert_eq!(r.outcome, Outcome::Degraded);
        assert_eq!(r.failed_step.as_deref(), Some("tools/call:b"));
        assert_eq!(r.tools_failed, ["b"]);
        assert_eq!(r.evidence.denied[0].syscall, "execve");
        assert_eq!(
            r.evidence.errors,
            ["tools/call:b: tool_error: git: Operation not permitted"]
        );
        assert!(r.syscalls_used.is_none());
    }

    #[test]
    fn handshake_failures_are_broken_timeout_crash_or_oom() {
        let cases = [
            ("error", json!([]), None, Outcome::Broken),
            ("timeout", json!([]), None, Outcome::Timeout),
            ("closed", json!([]), None, Outcome::Broken),
            ("closed", json!([]), Some(11), Outcome::Crash),
            (
                "closed",
                json!([{"event": "oom_killed"}]),
                Some(9),
                Outcome::Oom,
            ),
        ];
        for (outcome, events, signal, want) in cases {
            let steps = vec![step("initialize", outcome, json!({"error": "boom"}))];
            let mut p = probe(steps, &["initialize"], None, events);
            p.exit.as_mut().unwrap().signal = signal;
            let r = Record::from_probe("s", "p", &p, 1.0);
            assert_eq!(r.outcome, want, "{outcome}");
            assert_eq!(r.failed_step.as_deref(), Some("initialize"));
            assert_eq!(r.evidence.errors.len(), 1);
        }
    }

    #[test]
    fn a_failed_listing_is_broken_and_a_server_dying_in_a_call_is_a_crash() {
        let steps = vec![
            step("initialize", "ok", json!({})),
            step("tools/list", "error", json!({"error": "nope"})),
        ];
        let r = Record::from_probe(
            "s",
            "p",
            &probe(steps, &["tools/list"], Some("initialize"), json!([])),
            1.0,
        );
        assert_eq!(
            (r.outcome, r.failed_step.as_deref()),
            (Outcome::Broken, Some("tools/list"))
        );
        let mut steps = ok_start();
        steps.push(step("tools/call:a", "closed", Value::Null));
        let r = Record::from_probe(
            "s",
            "p",
            &probe(steps, &["tools/call:a"], Some("initialize"), json!([])),
            1.0,
        );
        assert_eq!(r.outcome, Outcome::Crash);
    }

    #[test]
    fn records_round_trip_through_json() {
        let r = Record::failed(
            "s",
            "p",
            Outcome::Timeout,
            "killed after 600 s".into(),
            600_000.0,
        );
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), r);
        assert_eq!(tail("ééé", 3), "é");
        assert_eq!(clip("abcdef", 3), "abc…");
    }
}
