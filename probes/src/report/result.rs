//! The probe's output, stable and serialisable (docs/probe-result.md).

use std::collections::BTreeMap;

use mcpvm_protocol::messages::{AnyEvent, EventLine};
use mcpvm_protocol::text::printable;
use serde::{Deserialize, Serialize};

use crate::judge::effects::{Effects, Recording};
use crate::transport::exchange::Entry;
use crate::transport::wire::{ExitSummary, Stderr};

pub const SCHEMA_VERSION: u32 = 4;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The tool answered with `isError: true`: a proper answer.
    ToolError,
    /// The server answered with a JSON-RPC error.
    Error,
    Timeout,
    /// The transport closed (the server exited or crashed).
    Closed,
    /// Not attempted: see the step's detail.
    Skipped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepResult {
    /// `server/discover`, `initialize`, `tools/list`, `prompts/list`,
    /// `resources/list`, `resources/templates/list`, `tools/call:<name>`,
    /// `ping`, `cancel`.
    pub step: String,
    pub outcome: Outcome,
    /// Time since the server process was spawned, at the answer.
    pub at_ms: f64,
    /// Duration of this step alone.
    pub took_ms: f64,
    /// Step details: server info, names, call results, errors.
    pub detail: serde_json::Value,
    /// `notifications/progress` received during the step.
    pub progress_notifications: usize,
    /// The raw JSON-RPC lines of this step.
    pub exchange: Vec<Entry>,
    /// Under a recording profile, in a microVM: what the server did for
    /// this step's requests (files, programs, addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Effects>,
}

impl StepResult {
    /// A real client would call this a failure: no answer, or an error on
    /// a step every server must answer (`initialize`, `tools/list`,
    /// `ping`). An error is an answer elsewhere: tool calls (generated
    /// arguments are often not what a tool wants), `server/discover` (how
    /// older servers say so), and the optional listings (servers of the
    /// 1.x SDKs declare resources but answer `resources/templates/list`
    /// with "method not found").
    pub fn failed(&self) -> bool {
        match self.outcome {
            Outcome::Timeout | Outcome::Closed => true,
            Outcome::Error => matches!(self.step.as_str(), "initialize" | "tools/list" | "ping"),
            Outcome::Ok | Outcome::ToolError | Outcome::Skipped => false,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// `initialize` / `notifications/initialized` (up to 2025-11-25).
    Initialize,
    /// No handshake; `server/discover` and per-request `_meta` (2026-07-28).
    Stateless,
}

/// The class of a robustness probe's result.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The server answered (a JSON-RPC error, or a proper result).
    Handled,
    /// No answer, but the server still answers the next request.
    Ignored,
    /// No answer, and no answer to the next request either.
    Hung,
    /// The server exited or closed its stdout.
    Crashed,
    /// Not attempted (no tool to aim at, or the server could not restart).
    NotRun,
}

/// What a robustness probe sends: input no correct client produces, or
/// input a real (if careless) client may send. Crashes on the first kind
/// are reported apart from breakage with real clients.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    Malformed,
    Valid,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RobustnessResult {
    pub probe: String,
    pub input: Input,
    pub class: Class,
    pub took_ms: f64,
    pub detail: serde_json::Value,
    pub exchange: Vec<Entry>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timings {
    /// Spawn to the first byte on the server's stdout.
    pub first_stdout_byte_ms: Option<f64>,
    /// Spawn to the handshake's answer (`initialize` or `server/discover`).
    pub handshake_ms: Option<f64>,
    pub tools_list_ms: Option<f64>,
    /// The spawn on the host's monotonic clock
    /// (`mcpvm_protocol::timings::monotonic_ms`), to set beside a VM's
    /// `started_monotonic_ms`: spawn → VMM start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_monotonic_ms: Option<f64>,
    /// The microVM's own phase times (ms since `mcpvm run` started), when
    /// the server ran in one.
    pub vm: Option<mcpvm_protocol::timings::RunTimings>,
}

/// What broke, kept apart by what caused it: the probe's own reading,
/// which the audit's verdict (`fit`, `not_fit`, `inconclusive`) weighs
/// with the rest of the evidence. (The result's field keeps its name,
/// `verdict`, as the result's format has it: docs/probe-result.md.)
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Breakage {
    /// Steps a real client would fail on.
    pub real_client_failures: Vec<String>,
    /// Robustness probes with valid input that crashed or hung the server.
    pub valid_input_breakage: Vec<String>,
    /// Robustness probes with malformed input that crashed or hung it.
    pub malformed_input_breakage: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeResult {
    /// Result format version.
    pub schema: u32,
    pub command: Vec<String>,
    /// `process` (a bare host process) or `vm` (through `mcpvm run`).
    pub transport: String,
    pub lifecycle: Option<Lifecycle>,
    pub protocol_version: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub capabilities: serde_json::Value,
    pub tools: Vec<String>,
    pub prompts: Vec<String>,
    pub resources: Vec<String>,
    pub resource_templates: Vec<String>,
    pub timings: Timings,
    pub steps: Vec<StepResult>,
    /// Absent unless robustness probes were asked for.
    pub robustness: Option<Vec<RobustnessResult>>,
    /// Lines on the server's stdout that were not JSON.
    pub stdout_garbage_lines: usize,
    /// Lines of the exchange not kept in `steps` (over what a run keeps).
    #[serde(default)]
    pub exchange_lines_dropped: u64,
    pub stderr: Stderr,
    /// How the (last) server process ended.
    pub exit: Option<ExitSummary>,
    /// In a microVM: the guest agent's events of the last VM (spawn,
    /// first output, OOM, denied and used system calls, exit), each with
    /// `at_ms` since `mcpvm run` started.
    pub guest_events: Option<Vec<EventLine>>,
    /// Under a recording profile: what the server did outside any
    /// request, and how much was recorded (each step has its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<Recording>,
    /// What a call made the server do that it must not (with canaries
    /// planted: `--profile observe`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The roles each tool was seen to play in the VM (and those only
    /// its annotations claim): `judge::roles`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<ToolRoles>,
    /// With `--security`: why nothing could be judged (no canaries
    /// reported, no events read). "No finding" is said only where it was
    /// judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_judged: Option<String>,
    /// The boundary the findings were judged against (guest paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
    /// The server brings a program that looks hosts up on its own (a
    /// browser: `ProbeOptions::background_lookups`): a lookup refused
    /// during a call is not by itself that call's failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background_lookups: bool,
    /// What the server's processes held once its calls had answered
    /// (`ProbeOptions::measure_memory`): PSS, KiB, of the command and
    /// its descendants (`crate::memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_pss_kib: Option<u64>,
    pub verdict: Breakage,
    /// How far the calls got: the audit's coverage figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<Reach>,
    /// Every listed definition, canonical and hashed (`mcpvm pin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub definitions: Vec<Definition>,
}

/// One declared item, as `mcpvm pin` keeps it (`crate::judge::pin`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    /// `tool`, `prompt` or `resource`.
    pub kind: String,
    pub name: String,
    /// SHA-256 of the canonical JSON, hex.
    pub sha256: String,
    /// The canonical JSON itself, when within `pin::MAX_DEFINITION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<serde_json::Value>,
}

/// How many tool calls reached the tool's code: answered with something
/// other than a complaint about their arguments (`crate::calls::feedback`).
/// Tools not called (destructive, dangerous) are not counted; tools left
/// after a server was taken as hung are, as not reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reach {
    pub called: usize,
    pub reached: usize,
    /// Calls tried again as a refusal asked (each counted once).
    pub retried: usize,
    /// Of those, the ones whose last try reached the tool.
    pub retried_reached: usize,
    /// Calls whose first try reached the tool: the figure without the
    /// retries (the generator alone).
    #[serde(default)]
    pub first_reached: usize,
    /// Per tool not reached: `tool: why` with what it last said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_reached: Vec<String>,
    /// Attacks refused for an argument their payload was not in.
    #[serde(default)]
    pub attacks_not_reached: usize,
}

impl Reach {
    /// Reached calls in percent of those made; None when none were.
    pub fn percent(&self) -> Option<f64> {
        (self.called > 0).then(|| 100.0 * self.reached as f64 / self.called as f64)
    }

    fn of(steps: &[StepResult]) -> Option<Reach> {
        let mut r = Reach::default();
        for s in steps {
            if s.step.starts_with("attack:") && s.detail.get("not_reached").is_some() {
                r.attacks_not_reached += 1;
            }
            let Some(tool) = s.step.strip_prefix("tools/call:") else {
                continue;
            };
            let Some(reached) = s.detail["reached"].as_bool() else {
                continue;
            };
            let retried = s.detail.get("attempts").is_some();
            r.called += 1;
            r.retried += usize::from(retried);
            let first = s.detail["first_reached"].as_bool().unwrap_or(reached);
            r.first_reached += usize::from(first);
            if reached {
                r.reached += 1;
                r.retried_reached += usize::from(retried);
            } else {
                let said = s.detail["text"]
                    .as_str()
                    .or(s.detail["error"].as_str())
                    .unwrap_or("");
                let said: String = said.chars().take(160).collect();
                let why = s.detail["reach"].as_str().unwrap_or("not reached");
                r.not_reached.push(format!("{tool}: {why}: {said}"));
            }
        }
        (r.called > 0).then_some(r)
    }
}

impl ProbeResult {
    pub fn new(command: &[String], transport: &str) -> Self {
        ProbeResult {
            schema: SCHEMA_VERSION,
            command: command.to_vec(),
            transport: transport.to_string(),
            lifecycle: None,
            protocol_version: None,
            server_name: None,
            server_version: None,
            capabilities: serde_json::Value::Null,
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            resource_templates: Vec::new(),
            timings: Timings::default(),
            steps: Vec::new(),
            robustness: None,
            stdout_garbage_lines: 0,
            exchange_lines_dropped: 0,
            stderr: Stderr::default(),
            exit: None,
            guest_events: None,
            recording: None,
            findings: Vec::new(),
            roles: Vec::new(),
            not_judged: None,
            roots: Vec::new(),
            background_lookups: false,
            memory_pss_kib: None,
            verdict: Breakage::default(),
            reach: None,
            definitions: Vec::new(),
        }
    }

    pub fn step(&self, name: &str) -> Option<&StepResult> {
        self.steps.iter().find(|s| s.step == name)
    }

    /// Fills the verdict and the derived timings from the steps.
    pub fn conclude(&mut self) {
        let answered = |s: &&StepResult| matches!(s.outcome, Outcome::Ok);
        self.timings.handshake_ms = self
            .steps
            .iter()
            .filter(|s| s.step == "initialize" || s.step == "server/discover")
            .filter(answered)
            .map(|s| s.at_ms)
            .next_back();
        self.timings.tools_list_ms = self.step("tools/list").filter(answered).map(|s| s.at_ms);
        // An unanswered server/discover followed by a working initialize is
        // how a slow or older server looks, not a failure.
        let handshake_done = self.lifecycle.is_some();
        self.verdict.real_client_failures = self
            .steps
            .iter()
            .filter(|s| s.failed() && !(handshake_done && s.step == "server/discover"))
            // An attack a server refuses or chokes on is judged apart.
            .filter(|s| !s.step.starts_with("attack:"))
            .map(|s| s.step.clone())
            .collect();
        let broken = |input| {
            self.robustness
                .iter()
                .flatten()
                .filter(|r| r.input == input && matches!(r.class, Class::Crashed | Class::Hung))
                .map(|r| r.probe.clone())
                .collect()
        };
        self.reach = Reach::of(&self.steps);
        self.verdict.valid_input_breakage = broken(Input::Valid);
        self.verdict.malformed_input_breakage = broken(Input::Malformed);
    }

    /// True when a real client would have no complaint.
    pub fn ok(&self) -> bool {
        self.verdict.real_client_failures.is_empty()
    }

    /// True when some robustness probe crashed or hung the server.
    pub fn broken_by_hostile_input(&self) -> bool {
        !self.verdict.valid_input_breakage.is_empty()
            || !self.verdict.malformed_input_breakage.is_empty()
    }

    /// A short human summary.
    pub fn summary(&self) -> String {
        let lifecycle = match self.lifecycle {
            Some(Lifecycle::Initialize) => "initialize handshake",
            Some(Lifecycle::Stateless) => "stateless",
            None => "no handshake completed",
        };
        let mut s = format!(
            "server {} {} (protocol {}, {lifecycle}): {} tools, {} prompts, {} resources, {} templates\n",
            printable(self.server_name.as_deref().unwrap_or("?")),
            printable(self.server_version.as_deref().unwrap_or("")),
            printable(self.protocol_version.as_deref().unwrap_or("?")),
            self.tools.len(),
            self.prompts.len(),
            self.resources.len(),
            self.resource_templates.len(),
        );
        s += &self.steps_lines();
        s += &self.findings_lines();
        s += &self.ending_lines();
        s
    }

    /// The summary's steps (attacks counted, not listed) and what the
    /// recording saw outside them.
    fn steps_lines(&self) -> String {
        let mut s = String::new();
        for st in self.steps.iter().filter(|s| !s.step.starts_with("attack:")) {
            s += &format!(
                "  {:<34} {:<10} at {:>9.1} ms (took {:.1} ms){}\n",
                printable(&st.step),
                label(&st.outcome),
                st.at_ms,
                st.took_ms,
                if st.progress_notifications > 0 {
                    format!(", {} progress", st.progress_notifications)
                } else {
                    String::new()
                }
            );
            if let Some(e) = &st.effects {
                s += &format!("  {:<34} did: {}\n", "", printable(&e.line()));
            }
        }
        if let Some(r) = &self.recording {
            for (phase, e) in &r.outside_calls {
                s += &format!(
                    "  {:<34} did: {}\n",
                    printable(&phase.replace('_', "-")),
                    printable(&e.line())
                );
            }
            if r.dropped > 0 {
                s += &format!(
                    "  recorded {} calls; {} past the agent's bound were counted, not shown\n",
                    r.recorded, r.dropped
                );
            }
        }
        s
    }

    /// The summary's attacks and findings.
    fn findings_lines(&self) -> String {
        let mut s = String::new();
        let attacks = self
            .steps
            .iter()
            .filter(|s| s.step.starts_with("attack:"))
            .count();
        match (&self.not_judged, attacks) {
            (Some(why), _) => s += &format!("  {attacks} attacks sent, not judged: {why}\n"),
            (None, 0) => {}
            (None, _) => {
                s += &format!(
                    "  {attacks} attacks sent ({} findings), judged against the roots {}\n",
                    self.findings.len(),
                    printable(&self.roots.join(", "))
                )
            }
        }
        if !self.findings.is_empty() {
            s += "findings:\n";
            for f in &self.findings {
                s += &format!(
                    "  {} ({}) in {}: {}\n",
                    f.class,
                    f.severity,
                    printable(&f.step),
                    printable(&f.why)
                );
                if let Some(call) = &f.call {
                    s += &format!("    reproduce with --call '{}'\n", printable(call));
                }
            }
        }
        s
    }

    /// The summary's end: roles, robustness, output, exit and verdict.
    fn ending_lines(&self) -> String {
        let mut s = String::new();
        if !self.roles.is_empty() {
            s += "roles (observed in the VM; declared by annotations only):\n";
            for r in &self.roles {
                let mut parts: Vec<String> = r
                    .observed
                    .iter()
                    .map(|(role, seen)| format!("{} in {}", label(role), printable(&seen.step)))
                    .collect();
                parts.extend(
                    r.declared
                        .iter()
                        .map(|role| format!("{} (declared)", label(role))),
                );
                s += &format!("  {}: {}\n", printable(&r.tool), parts.join(", "));
            }
        }
        if let Some(rs) = &self.robustness {
            s += "robustness:\n";
            for r in rs {
                s += &format!(
                    "  {:<34} {:<10} {} input\n",
                    r.probe,
                    label(&r.class),
                    label(&r.input)
                );
            }
        }
        if self.stdout_garbage_lines > 0 {
            s += &format!("stdout: {} non-JSON lines\n", self.stdout_garbage_lines);
        }
        s += &format!("stderr: {} bytes\n", self.stderr.bytes);
        // Without a handshake, what the server (or mcpvm run) said is
        // usually the one line that explains it.
        if self.timings.handshake_ms.is_none() && !self.stderr.tail.trim().is_empty() {
            for line in self
                .stderr
                .tail
                .trim()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                s += &format!("  | {}\n", printable(line));
            }
        }
        if let Some(e) = &self.exit {
            s += &match (e.exited_by_itself, e.code, e.signal) {
                (true, Some(c), _) => format!("exit: status {c} after stdin closed\n"),
                (true, _, Some(sig)) => format!("exit: signal {sig}\n"),
                _ => "exit: killed (it did not exit within the grace after stdin closed)\n".into(),
            };
        }
        let v = &self.verdict;
        s += &format!(
            "verdict: {} real-client failures{}; {} broken by valid input{}; {} broken by malformed input{}\n",
            v.real_client_failures.len(),
            list(&v.real_client_failures),
            v.valid_input_breakage.len(),
            list(&v.valid_input_breakage),
            v.malformed_input_breakage.len(),
            list(&v.malformed_input_breakage),
        );
        s
    }
}

fn label(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", names.join(", "))
    }
}

/// What a call made the server do that it must not (judged in
/// `crate::judge::findings`).
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
    /// The step whose request caused it; for an unattributed canary
    /// read, the phase it happened in (`start-up`, `between-calls`,
    /// `after-exit`, `unmatched-request`).
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
    pub evidence: Vec<Evidence>,
}

impl Finding {
    /// A finding on what a server declares or who it is (judged on its
    /// listing, its name or its version, not on what a call did): its
    /// step names the listing (`tools/list:NAME`), its evidence is text.
    pub fn declared(
        class: &str,
        rule: &str,
        severity: &str,
        step: String,
        why: String,
        evidence: String,
    ) -> Finding {
        Finding {
            class: class.into(),
            rule: rule.into(),
            severity: severity.into(),
            step,
            call: None,
            argument: None,
            payload: None,
            attempts: 1,
            why,
            evidence: vec![Evidence::Excerpt(evidence)],
        }
    }
}

/// A role a tool was seen to play (`judge::roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    ReadsPrivate,
    UntrustedContent,
    PublicSink,
    Destructive,
}

/// Where a tool's role was first seen: the step, why, and the events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub step: String,
    pub why: String,
    pub evidence: Vec<Evidence>,
}

/// One tool's roles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolRoles {
    pub tool: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub observed: BTreeMap<Role, Seen>,
    /// What its annotations claim and no call showed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<Role>,
}

/// What proves a finding: the guest's (or the egress proxy's) event of
/// it, or the excerpt of an answer that carried a token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Evidence {
    Event(Box<EventLine>),
    Excerpt(String),
}

impl Evidence {
    /// In a line: `openat /etc/x (read) by /usr/bin/node`, `connect
    /// 10.0.0.1:80 denied (why), by the host's egress proxy`, or the
    /// excerpt.
    pub fn line(&self) -> String {
        let event = match self {
            Evidence::Excerpt(text) => return text.clone(),
            Evidence::Event(line) => &line.event,
        };
        if let Some(n) = event.net() {
            let seen = crate::judge::effects::net_item(n).unwrap_or_else(|| n.kind.clone());
            return format!("{seen}, by the host's egress proxy");
        }
        let Some(e) = event.effect() else {
            return match event {
                AnyEvent::Unknown(v) => v.to_string(),
                other => serde_json::to_string(other).unwrap_or_default(),
            };
        };
        let mut line = e.call.clone();
        let words = match e.argv.is_empty() {
            true => &e.paths,
            false => &e.argv,
        };
        for w in words {
            line += &format!(" {w}");
        }
        if let Some(r) = &e.resolved {
            line += &format!(" → {r}");
        }
        if let Some(a) = &e.address {
            line += &format!(" {a}");
        }
        if let Some(a) = &e.access {
            line += &format!(" ({a})");
        }
        if !e.exe.is_empty() {
            line += &format!(" by {}", e.exe);
        }
        line
    }
}

fn one() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_shows_what_the_server_chose_escaped_on_one_line() {
        let mut r = ProbeResult::new(&["server".into()], "stdio");
        // OSC 52 would write the clipboard, OSC 0 retitle the window,
        // U+202E reorder the line; a newline would forge a line of ours.
        r.server_name = Some("evil\u{1b}]52;c;cm0gLXJm\u{7}".into());
        r.server_version = Some("1\u{1b}]0;pwned\u{7}\nverdict: 0 real-client failures".into());
        r.steps.push(StepResult {
            step: "tools/call:na\u{202e}me".into(),
            outcome: Outcome::Ok,
            at_ms: 1.0,
            took_ms: 1.0,
            detail: serde_json::Value::Null,
            progress_notifications: 0,
            exchange: Vec::new(),
            effects: None,
        });
        r.stderr.tail = "boom \u{1b}[2J\u{9b}31m".into();
        let s = r.summary();
        assert!(
            !s.chars()
                .any(|c| c == '\u{1b}' || c == '\u{9b}' || c == '\u{202e}' || c == '\u{7}'),
            "{s}"
        );
        assert!(s.contains("evil\\u{1b}]52;c;cm0gLXJm\\u{7}"), "{s}");
        assert!(s.contains("tools/call:na\\u{202e}me"), "{s}");
        assert!(s.contains("boom \\u{1b}[2J\\u{9b}31m"), "{s}");
        // The version's newline is escaped: no forged verdict line.
        assert_eq!(s.matches("\nverdict:").count(), 1, "{s}");
    }

    #[test]
    fn a_result_reads_back_as_written() {
        let mut r = ProbeResult::new(&["node".into(), "server.js".into()], "stdio");
        r.lifecycle = Some(Lifecycle::Stateless);
        r.steps.push(StepResult {
            step: "tools/call:echo".into(),
            outcome: Outcome::ToolError,
            at_ms: 12.5,
            took_ms: 3.0,
            detail: serde_json::json!({"text": "no"}),
            progress_notifications: 1,
            exchange: Vec::new(),
            effects: None,
        });
        r.exit = Some(ExitSummary {
            code: None,
            signal: Some(9),
            exited_by_itself: false,
        });
        r.guest_events = Some(EventLine::parse_all(
            r#"{"event": "oom_killed", "at_ms": 5.0}"#,
        ));
        r.conclude();
        let text = serde_json::to_string(&r).unwrap();
        let back: ProbeResult = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(back.steps[0].outcome, Outcome::ToolError);
    }
}
