//! Whether a real client could use a server: a verdict per server, an
//! axis of its own beside the withholding matrix and the security
//! column, in the vocabulary of the microVM study (`fit`, `not_fit`,
//! `inconclusive` with a reason). Each verdict is derived from evidence
//! the audit already has, the cell the server ran with nothing withheld
//! (the first profile's) and its layer build, and quotes that evidence:
//! a verdict nobody can check is not one. Written as `compat.json`.

use serde::{Deserialize, Serialize};

use super::calls::{self, Cause, Shown};
use super::document::{Block, Cell, Line, Row, Table};
use super::meta::ServerMeta;
use super::record::{Outcome, Record};
use mcpvm_images::catalogue::Entry;

/// Evidence lines kept per verdict, and characters per line.
const MAX_EVIDENCE: usize = 4;
const MAX_LINE: usize = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A real client could use it: handshake, listings, its tools answer
    /// (an error a tool reports is an answer), hostile input does not
    /// kill it.
    Fit,
    /// A real client would fail: the server crashes or hangs on valid or
    /// malformed input, breaks the protocol, or dies.
    NotFit,
    /// Nothing can be said about the server itself: what it lacked here
    /// is named by the reason.
    Inconclusive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    NeedsCredentials,
    NeedsNetwork,
    NeedsArguments,
    NeedsEnvironment,
    InstallFailed,
    InstallTimeout,
    /// The package installed and has no executable: a library, not a
    /// server (its own metadata names none to run).
    NotAServer,
    NoHandshake,
    LaunchError,
    /// It answered, and no tool was shown working, with nothing missing
    /// named: every answer static, empty, or a refusal in its own words.
    NoWorkingTool,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Fit => "fit",
            Verdict::NotFit => "not_fit",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::NeedsCredentials => "needs_credentials",
            Reason::NeedsNetwork => "needs_network",
            Reason::NeedsArguments => "needs_arguments",
            Reason::NeedsEnvironment => "needs_environment",
            Reason::InstallFailed => "install_failed",
            Reason::InstallTimeout => "install_timeout",
            Reason::NotAServer => "not_a_server",
            Reason::NoHandshake => "no_handshake",
            Reason::LaunchError => "launch_error",
            Reason::NoWorkingTool => "no_working_tool",
        }
    }
}

/// One server's verdict: one object of `compat.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compat {
    pub server: String,
    pub package: String,
    pub version: String,
    pub verdict: Verdict,
    /// Why it is inconclusive; null for fit and not_fit.
    pub reason: Option<Reason>,
    /// What the verdict rests on, quoted from the run.
    pub evidence: Vec<String>,
    /// The cell it was judged on (`server × profile`).
    pub judged_on: Option<String>,
    /// When it died at start on today's dependencies and was run again
    /// as released (released.rs): `starts`, `fails too` or `not built`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_released: Option<String>,
    /// Tools shown working, of those called (judged from each call's
    /// answer: `calls.rs`); absent for records that kept no calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working: Option<[usize; 2]>,
    /// Each tool shown working, with how it was shown (at most 64).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub working_tools: Vec<String>,
    /// Its entry's network rules against what it tried (`allow.rs`);
    /// absent when it tried nothing but telemetry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<super::allow::Check>,
}

/// The words that say a server wants a key it was not given.
const CREDENTIAL_WORDS: &[&str] = &[
    "api key",
    "api_key",
    "apikey",
    "access token",
    "access_token",
    "token is required",
    "token required",
    "missing token",
    "invalid token",
    "credentials",
    "unauthorized",
    "401",
    "403 forbidden",
    "authenticat",
    "oauth",
    "not logged in",
    "login required",
    "please log in",
    "secret",
    "_token",
    "_key ",
    "_key\n",
    "_key:",
    "_key=",
    "_key.",
    "_key,",
];

/// Words of a command-line usage message.
const USAGE_WORDS: &[&str] = &[
    "usage:",
    "required argument",
    "arguments are required",
    "missing required",
    "unknown command",
    "unknown option",
    "unrecognized arguments",
    "invalid argument",
    "not enough arguments",
    "expected argument",
    "--help",
];

/// Words of something outside the server that was not there.
const ENVIRONMENT_WORDS: &[&str] = &[
    "chrome",
    "chromium",
    "browser",
    "econnrefused",
    "connection refused",
    "database",
    "postgres",
    "mongodb://",
    "adb",
    "emulator",
    "no such device",
    "extension",
    "display",
    "could not find",
    "couldn't find a valid icu",
    "libicu",
    "error while loading shared libraries",
    "cannot open shared object file",
    "dllnotfoundexception",
    "executable doesn't exist",
];

/// Words of a network that was not there.
const NETWORK_WORDS: &[&str] = &[
    "enotfound",
    "eai_again",
    "getaddrinfo",
    "name resolution",
    "network is unreachable",
    "fetch failed",
    "etimedout",
    "connecterror",
    "max retries exceeded",
];

/// The first of `words` the text holds (any case).
fn contains_any(text: &str, words: &[&'static str]) -> Option<&'static str> {
    let lower = text.to_lowercase();
    words.iter().copied().find(|w| lower.contains(w))
}

/// A line of evidence: printable, one line, bounded.
fn quote(s: &str) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one = one.trim();
    match one.char_indices().nth(MAX_LINE) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one.to_string(),
    }
}

/// The last lines of a stderr tail that say something.
fn last_lines(tail: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("stderr: {}", quote(l)))
        .collect()
}

fn exit_line(r: &Record) -> Option<String> {
    let e = &r.evidence.exit;
    match (e["code"].as_i64(), e["signal"].as_i64()) {
        (_, Some(sig)) => Some(format!("the process was killed by signal {sig}")),
        (Some(code), None) if code != 0 => Some(format!("the process exited with code {code}")),
        _ => None,
    }
}

/// Judges one server from its build and its cell.
pub fn judge(server: &str, meta: &ServerMeta, cell: Option<&Record>) -> Compat {
    let verdict = |verdict, reason, evidence: Vec<String>, on: Option<&Record>| Compat {
        server: server.to_string(),
        package: meta.package.clone(),
        version: meta.version.clone(),
        verdict,
        reason,
        evidence: evidence.into_iter().take(MAX_EVIDENCE).collect(),
        judged_on: on.map(|r| format!("{} × {}", r.server, r.profile)),
        as_released: None,
        working: None,
        working_tools: Vec::new(),
        network: None,
    };
    if let Some(why) = &meta.install_error {
        let reason = match contains_any(why, &["timed out", "timeout", "took longer"]) {
            _ if why.contains(mcpvm_images::package::NO_EXECUTABLE) => Reason::NotAServer,
            Some(_) => Reason::InstallTimeout,
            None => Reason::InstallFailed,
        };
        return verdict(
            Verdict::Inconclusive,
            Some(reason),
            vec![format!("install: {}", quote(why))],
            None,
        );
    }
    let Some(r) = cell else {
        return verdict(
            Verdict::Inconclusive,
            Some(Reason::NoHandshake),
            vec!["not run yet".into()],
            None,
        );
    };
    let (v, reason, evidence) = classify(r);
    let (working, working_tools) = shown_working(r);
    Compat {
        working,
        working_tools,
        ..verdict(v, reason, evidence, Some(r))
    }
}

/// `[shown working, called]` of a cell that kept its calls, and each
/// working tool with how it was shown.
fn shown_working(r: &Record) -> (Option<[usize; 2]>, Vec<String>) {
    if r.calls.is_empty() {
        return (None, Vec::new());
    }
    let judged = calls::per_tool(
        &r.calls,
        &r.tools_listed,
        &not_reached(r),
        r.background_lookups,
    );
    let called = judged
        .iter()
        .filter(|(_, s)| *s != Shown::NotCalled)
        .count();
    let tools: Vec<String> = judged
        .iter()
        .filter_map(|(_, s)| match s {
            Shown::Working(how) => Some(quote(how)),
            _ => None,
        })
        .collect();
    let shown = [tools.len(), called];
    (Some(shown), tools.into_iter().take(64).collect())
}

fn not_reached(r: &Record) -> Vec<String> {
    r.reach
        .as_ref()
        .map(|x| x.not_reached.clone())
        .unwrap_or_default()
}

/// A verdict, its reason and its evidence.
type Judged = (Verdict, Option<Reason>, Vec<String>);

/// The verdict of a cell, its reason and evidence.
fn classify(r: &Record) -> Judged {
    let answered = r.lifecycle.is_some() && r.failed_step.as_deref() != Some("tools/list");
    if answered {
        answered_cell(r)
    } else {
        silent_cell(r)
    }
}

/// A server that answered the handshake and its listing: not fit when
/// hostile input or a call ended it, else what its calls say.
fn answered_cell(r: &Record) -> Judged {
    let mut evidence: Vec<String> = Vec::new();
    // Hostile input that killed or hung it, or a call that did.
    if let Some(rb) = &r.robustness {
        for p in rb.valid_breakage.iter().chain(&rb.malformed_breakage) {
            evidence.push(format!(
                "robustness: {} crashed or hung the server",
                quote(p)
            ));
        }
    }
    if matches!(r.outcome, Outcome::Crash | Outcome::Oom) {
        evidence.push(format!(
            "{} ended the server ({})",
            r.failed_step.as_deref().unwrap_or("a call"),
            r.outcome.name()
        ));
    }
    if !evidence.is_empty() {
        evidence.extend(last_lines(&r.evidence.stderr_tail, 1));
        return (Verdict::NotFit, None, evidence);
    }
    // A record that kept its calls is judged by what each answer says;
    // older ones by the rules they were recorded under.
    if !r.calls.is_empty() {
        return by_calls(r);
    }
    if let Some(need) = no_call_answered(r) {
        return need;
    }
    evidence.push(format!(
        "handshake ({}) and tools/list answered: {} tools called, {} answered",
        r.lifecycle.as_deref().unwrap_or("?"),
        r.tools_ok.len() + r.tools_failed.len(),
        r.tools_ok.len()
    ));
    if let Some(reach) = &r.reach {
        evidence.push(format!(
            "calls: {} of {} reached their tool ({} tried again as a refusal asked)",
            reach.reached, reach.called, reach.retried
        ));
    }
    if let Some(rb) = &r.robustness {
        evidence.push(format!(
            "robustness: {} of {} hostile inputs handled",
            rb.handled, rb.sent
        ));
    }
    (Verdict::Fit, None, evidence)
}

/// A server that answered its handshake and listing, judged by its
/// calls: `fit` when at least one tool was shown working (`calls.rs`),
/// `not_fit` when every call failed in its own code, else `inconclusive`
/// with the cause most failing calls share.
fn by_calls(r: &Record) -> Judged {
    let judged = calls::per_tool(
        &r.calls,
        &r.tools_listed,
        &not_reached(r),
        r.background_lookups,
    );
    let called = judged
        .iter()
        .filter(|(_, s)| *s != Shown::NotCalled)
        .count();
    let working: Vec<&str> = judged
        .iter()
        .filter_map(|(_, s)| match s {
            Shown::Working(how) => Some(how.as_str()),
            _ => None,
        })
        .collect();
    let failed = judged
        .iter()
        .filter(|(_, s)| matches!(s, Shown::Failed(..)))
        .count();
    let shared = calls::shared_cause(&judged);
    let nothing = judged.iter().find_map(|(_, s)| match s {
        Shown::Nothing(why) => Some(why.clone()),
        _ => None,
    });
    let head = format!("{} of {called} tools shown working", working.len());
    let mut evidence = Vec::new();
    if !working.is_empty() {
        evidence.push(format!(
            "{head}: {}",
            quote(
                &working
                    .iter()
                    .take(3)
                    .copied()
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        ));
        if let Some((cause, n, line)) = &shared {
            evidence.push(format!(
                "{n} failed, most {}: {}",
                cause_words(cause),
                quote(line)
            ));
        }
        if let Some(rb) = &r.robustness {
            evidence.push(format!(
                "robustness: {} of {} hostile inputs handled",
                rb.handled, rb.sent
            ));
        }
        return (Verdict::Fit, None, evidence);
    }
    evidence.push(format!(
        "{head} (handshake ({}) and tools/list answered)",
        r.lifecycle.as_deref().unwrap_or("?")
    ));
    if let Some((Cause::Code, n, line)) = &shared {
        if *n == failed && failed == called {
            evidence.push(format!(
                "every call failed in the server's code: {}",
                quote(line)
            ));
            return (Verdict::NotFit, None, evidence);
        }
    }
    let reason = match &shared {
        Some((Cause::Network(_), ..)) => Reason::NeedsNetwork,
        Some((Cause::Credentials, ..)) => Reason::NeedsCredentials,
        Some((Cause::Environment, ..)) => Reason::NeedsEnvironment,
        Some((Cause::Arguments, ..)) => Reason::NeedsArguments,
        _ => Reason::NoWorkingTool,
    };
    if let Some((cause, n, line)) = &shared {
        evidence.push(format!(
            "{n} of {called} calls failed {}: {}",
            cause_words(cause),
            quote(line)
        ));
    }
    evidence.extend(nothing.map(|w| format!("answered, showing nothing: {}", quote(&w))));
    (Verdict::Inconclusive, Some(reason), evidence)
}

/// A cause in words, with the hosts a network one names.
fn cause_words(c: &Cause) -> String {
    match c {
        Cause::Network(h) if h.is_empty() => "for the network".into(),
        Cause::Network(h) => format!("for the network ({})", h.join(", ")),
        Cause::Credentials => "for a credential".into(),
        Cause::Environment => "for something outside the server".into(),
        Cause::Arguments => "refused for their arguments".into(),
        Cause::Code => "in the server's code".into(),
        Cause::Timeout => "with no answer in time".into(),
        Cause::Refused => "as the tool refused them".into(),
    }
}

/// No handshake: what the server said and did before it says why.
fn silent_cell(r: &Record) -> Judged {
    let mut evidence: Vec<String> = Vec::new();
    let said = format!(
        "{}\n{}\n{}",
        r.evidence.stderr_head,
        r.evidence.stderr_tail,
        r.evidence.errors.join("\n")
    );
    let quoted = |word: &str| -> Vec<String> {
        let line = said
            .lines()
            .find(|l| l.to_lowercase().contains(word))
            .map(|l| format!("stderr: {}", quote(l)));
        line.into_iter().collect()
    };
    let exit = exit_line(r);
    let with_exit = |mut v: Vec<String>| {
        v.extend(exit.clone());
        v
    };
    if r.outcome == Outcome::Error {
        let mut v = r
            .evidence
            .errors
            .iter()
            .map(|e| quote(e))
            .collect::<Vec<_>>();
        v.extend(last_lines(&r.evidence.stderr_tail, 2));
        return (Verdict::Inconclusive, Some(Reason::LaunchError), v);
    }
    let by_words = |words: &[&'static str], reason| {
        contains_any(&said, words)
            .map(|w| (Verdict::Inconclusive, Some(reason), with_exit(quoted(w))))
    };
    // The layer's own files that no client could start, read before the
    // words: what they print is their code (`apiKey: not found` is a line
    // of JavaScript the shell ran, not a key it asked for).
    if let Some(line) = own_files_unrunnable(&said, &Entry::dir(&r.server)) {
        return (Verdict::NotFit, None, with_exit(vec![line]));
    }
    if let Some(judged) = by_words(CREDENTIAL_WORDS, Reason::NeedsCredentials) {
        return judged;
    }
    // Tries the egress proxy refused or saw fail before the handshake.
    let refused = needed_tries(r.start_network.iter());
    if !refused.is_empty() {
        let mut v = refused;
        v.extend(last_lines(&r.evidence.stderr_tail, 1));
        return (Verdict::Inconclusive, Some(Reason::NeedsNetwork), v);
    }
    for (words, reason) in [
        (NETWORK_WORDS, Reason::NeedsNetwork),
        (USAGE_WORDS, Reason::NeedsArguments),
        (ENVIRONMENT_WORDS, Reason::NeedsEnvironment),
    ] {
        if let Some(judged) = by_words(words, reason) {
            return judged;
        }
    }
    // A cell without a handshake made every try before it: a server that
    // reaches for its upstream while the first request waits has its
    // tries counted to that request, not to its start (qdrant fetching
    // its embedding model). Taken after what its own words name.
    let refused = needed_tries(
        r.network
            .iter()
            .filter(|n| n.contains(" denied") || n.contains(" failed")),
    );
    if !refused.is_empty() {
        let mut v = refused;
        v.extend(exit.clone());
        v.extend(last_lines(&r.evidence.stderr_tail, 1));
        return (Verdict::Inconclusive, Some(Reason::NeedsNetwork), v);
    }
    let code = r.evidence.exit["code"].as_i64();
    if matches!(code, Some(126 | 127))
        || contains_any(&said, &["exec format error", "not found"]).is_some()
    {
        return (
            Verdict::Inconclusive,
            Some(Reason::LaunchError),
            with_exit(last_lines(&r.evidence.stderr_tail, 2)),
        );
    }
    // It died on its own, with nothing that names a need: the process
    // dies, a real client fails.
    if r.outcome == Outcome::Crash || r.evidence.exit["signal"].as_i64().is_some() {
        evidence.extend(exit);
        evidence.extend(last_lines(&r.evidence.stderr_tail, 2));
        return (Verdict::NotFit, None, evidence);
    }
    evidence.push(format!(
        "no handshake: {} {}",
        r.failed_step.as_deref().unwrap_or("initialize"),
        r.outcome.name()
    ));
    evidence.extend(exit);
    evidence.extend(last_lines(&r.evidence.stderr_tail, 2));
    (Verdict::Inconclusive, Some(Reason::NoHandshake), evidence)
}

/// A start that failed in the files the server's layer installed (under
/// `dir`), as it would for any client here: the shell could not parse a
/// file of the layer it ran as a script (`FILE: 8: Syntax error: …`, as
/// for an npm bin of JavaScript with no `#!` line, which `npx` and a
/// client's spawn hand to `sh` the same way; a script's `FILE: 3: exec:
/// uv: not found` names a missing program instead and is left to the
/// words), or Python could not parse code the layer installed (pip
/// installed it, so the package claims this Python). The evidence line.
fn own_files_unrunnable(said: &str, dir: &str) -> Option<String> {
    let under = format!("{dir}/");
    let shell_failed = said.lines().map(str::trim).find(|l| {
        l.split_once(": ").is_some_and(|(file, rest)| {
            file.starts_with(&under)
                && rest.split_once(": ").is_some_and(|(n, what)| {
                    !n.is_empty()
                        && n.bytes().all(|b| b.is_ascii_digit())
                        && what.starts_with("Syntax error")
                })
        })
    });
    if let Some(l) = shell_failed {
        return Some(format!(
            "the shell cannot parse the server's executable, which it ran as a script: {}",
            quote(l)
        ));
    }
    // A traceback's last frame in the layer, then Python's SyntaxError.
    let mut frame_in_layer = false;
    for l in said.lines().map(str::trim) {
        if let Some(file) = l.strip_prefix("File \"") {
            frame_in_layer = file.starts_with(&under);
        } else if frame_in_layer && l.starts_with("SyntaxError: ") {
            return Some(format!(
                "Python cannot parse code the server's layer installed for it: {}",
                quote(l)
            ));
        }
    }
    None
}

/// Network tries as evidence lines, telemetry and update checks left
/// out: a refused error report is never why a server stopped.
fn needed_tries<'a>(tries: impl Iterator<Item = &'a String>) -> Vec<String> {
    tries
        .filter(|n| calls::net_try(n).is_some_and(|(h, _)| !calls::is_telemetry(h)))
        .map(|n| format!("network before the handshake: {}", quote(n)))
        .collect()
}

/// A server whose every call failed says nothing of its tools: the
/// verdict is what the failures name as missing (a network, something
/// outside the server, a credential, in that order; then what the
/// egress proxy refused), or the arguments when no call got past the
/// tool's argument check. None when a call answered, or when the
/// failures name nothing (the tools ran and said no: an answer a client
/// gets).
fn no_call_answered(r: &Record) -> Option<Judged> {
    if !r.tools_ok.is_empty() || r.tools_failed.is_empty() {
        return None;
    }
    let said: Vec<&str> = r
        .evidence
        .errors
        .iter()
        .map(String::as_str)
        .filter(|e| e.starts_with("tools/call:"))
        .collect();
    let found = |words: &[&'static str]| said.iter().find(|l| contains_any(l, words).is_some());
    let named = if let Some(l) = found(NETWORK_WORDS) {
        Some((Reason::NeedsNetwork, quote(l)))
    } else if let Some(l) = found(ENVIRONMENT_WORDS) {
        Some((Reason::NeedsEnvironment, quote(l)))
    } else if let Some(l) = found(CREDENTIAL_WORDS) {
        Some((Reason::NeedsCredentials, quote(l)))
    } else if let Some(n) = r.network.first() {
        // The calls' own words name nothing; what the proxy refused does.
        Some((Reason::NeedsNetwork, format!("network: {}", quote(n))))
    } else {
        r.reach
            .as_ref()
            .filter(|reach| reach.called > 0 && reach.reached == 0)
            .map(|reach| {
                let why = reach.not_reached.first().map_or("", String::as_str);
                (
                    Reason::NeedsArguments,
                    format!("not reached: {}", quote(why)),
                )
            })
    };
    if named.is_none()
        && !said.is_empty()
        && said
            .iter()
            .all(|l| contains_any(l, calls::CODE_WORDS).is_some())
    {
        // Every call failed inside the server's own code: a client that
        // calls as the listing says gets an internal error from each tool.
        return Some((
            Verdict::NotFit,
            None,
            vec![
                format!("every call failed in the server's code: {}", quote(said[0])),
                format!(
                    "none of the {} calls answered (handshake ({}) and tools/list did)",
                    r.tools_failed.len(),
                    r.lifecycle.as_deref().unwrap_or("?"),
                ),
            ],
        ));
    }
    let (reason, line) = named?;
    Some((
        Verdict::Inconclusive,
        Some(reason),
        vec![
            line,
            format!(
                "none of the {} calls answered (handshake ({}) and tools/list did)",
                r.tools_failed.len(),
                r.lifecycle.as_deref().unwrap_or("?"),
            ),
        ],
    ))
}

/// Every server's verdict, in the audit's order.
pub fn all(
    meta: &super::meta::Meta,
    records: &std::collections::BTreeMap<(String, String), Record>,
) -> Vec<Compat> {
    let first = meta
        .profiles
        .iter()
        .find(|p| *p != super::matrix::SECURITY)
        .cloned()
        .unwrap_or_default();
    // A server whose cell is not recorded yet (an audit cut short, or
    // still running) has no verdict: it is left out, not judged on
    // nothing. One that did not install is judged by that.
    meta.servers
        .iter()
        .filter_map(|(s, m)| {
            let cell = records.get(&(s.clone(), first.clone()));
            let again = records.get(&(s.clone(), super::released::PROFILE.to_string()));
            (cell.is_some() || m.install_error.is_some()).then(|| match cell {
                Some(today) => Compat {
                    network: super::allow::check(&m.network, today),
                    ..as_released(judge(s, m, cell), today, again)
                },
                None => judge(s, m, cell),
            })
        })
        .collect()
}

/// A server that died at start on today's dependencies (a cause in its
/// dependency tree on its stderr: `released::dependency_break`) is
/// `not_fit`: broken for anyone installing it today. Its row says whether
/// it starts as released (its dependencies as on its publication date),
/// does not either, or why that was not tried.
fn as_released(mut c: Compat, today: &Record, again: Option<&Record>) -> Compat {
    let broke = (today.lifecycle.is_none())
        .then(|| {
            super::released::dependency_break(&today.evidence.stderr_tail)
                .or_else(|| super::released::dependency_break(&today.evidence.stderr_head))
        })
        .flatten();
    let Some(broke) = broke else {
        return c;
    };
    let (said, line) = match again {
        Some(again) if again.lifecycle.is_some() => (
            "starts",
            format!(
                "as released (its dependencies as on its publication date): it starts, handshake and tools/list answered, {} tools called",
                again.tools_ok.len() + again.tools_failed.len()
            ),
        ),
        Some(again) if again.outcome == Outcome::Error => ("not built", {
            // The record says "as released: …" itself.
            let why = again.evidence.errors.first().map_or("", String::as_str);
            format!(
                "as released: not tried, {}",
                quote(why.strip_prefix("as released: ").unwrap_or(why))
            )
        }),
        Some(again) => (
            "fails too",
            format!(
                "as released: it does not start either{}",
                last_lines(&again.evidence.stderr_tail, 1)
                    .first()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            ),
        ),
        None => (
            "not tried",
            "as released: not tried (its entry is not from a registry, or is already the release's own tree)".to_string(),
        ),
    };
    c.verdict = Verdict::NotFit;
    c.reason = None;
    c.evidence = vec![format!(
        "dies at start on today's dependencies: stderr: {}",
        quote(broke)
    )];
    c.evidence.extend(exit_line(today));
    c.evidence.push(line);
    Compat {
        as_released: Some(said.into()),
        ..c
    }
}

impl Verdict {
    /// Its shade in the HTML report.
    pub fn colour(self) -> &'static str {
        match self {
            Verdict::Fit => "#2e9d5b",
            Verdict::NotFit => "#d2453b",
            Verdict::Inconclusive => "#777777",
        }
    }
}

/// `Compatibility`, first in the reports: the counts, then a row per
/// server with its verdict, reason and the evidence it rests on.
pub fn section(verdicts: &[Compat], servers: usize) -> Vec<Block> {
    section_of(verdicts, servers, verdicts.iter().collect(), None)
}

/// [`section`] for a summary of many servers: the counts over all of
/// them, rows for the worst `rows` only (not fit first; then what
/// failed with nothing named — no handshake, a launch error, an install;
/// then what lacked something here), and `rest` said under the table.
pub fn worst_section(verdicts: &[Compat], servers: usize, rows: usize, rest: &str) -> Vec<Block> {
    let mut worst: Vec<&Compat> = verdicts
        .iter()
        .filter(|c| c.verdict != Verdict::Fit)
        .collect();
    let rank = |c: &Compat| match (c.verdict, c.reason) {
        (Verdict::NotFit, _) => 0,
        (_, Some(Reason::NoHandshake | Reason::LaunchError)) => 1,
        (_, Some(Reason::InstallFailed | Reason::InstallTimeout)) => 2,
        _ => 3,
    };
    worst.sort_by_key(|c| (rank(c), c.reason, c.server.as_str()));
    worst.truncate(rows);
    let note = format!(
        "{} of the servers that are not fit or inconclusive, the not fit first. {rest}",
        worst.len()
    );
    section_of(verdicts, servers, worst, Some(note))
}

fn section_of(
    verdicts: &[Compat],
    servers: usize,
    shown: Vec<&Compat>,
    note: Option<String>,
) -> Vec<Block> {
    let count = |v: Verdict| verdicts.iter().filter(|c| c.verdict == v).count();
    let mut reasons: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in verdicts.iter().filter_map(|c| c.reason) {
        *reasons.entry(r.name()).or_default() += 1;
    }
    let by_reason: Vec<String> = reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let mut summary = format!(
        "{} of {} fit, {} not fit, {} inconclusive",
        count(Verdict::Fit),
        verdicts.len(),
        count(Verdict::NotFit),
        count(Verdict::Inconclusive)
    );
    if !by_reason.is_empty() {
        summary += &format!(" ({})", by_reason.join(", "));
    }
    if servers > verdicts.len() {
        summary += &format!("; {} not run yet, so not judged", servers - verdicts.len());
    }
    let rows = shown
        .into_iter()
        .map(|c| Row {
            head: c.server.clone(),
            cells: vec![
                Cell::text(format!("{} {}", c.package, c.version)),
                Cell {
                    lines: std::iter::once(c.verdict.name().to_string())
                        .chain(
                            c.working
                                .map(|[k, n]| format!("{k} of {n} tools shown working")),
                        )
                        .collect(),
                    shade: Some(c.verdict.colour()),
                    title: c.judged_on.clone(),
                },
                Cell::text(c.reason.map_or("", Reason::name)),
                Cell {
                    lines: c.evidence.clone(),
                    ..Cell::default()
                },
            ],
        })
        .collect();
    vec![
        Block::Heading(2, "Compatibility".into()),
        Block::Para(Line::text(format!(
            "Could a real client use each server? {summary}. Judged on the cell each ran with nothing withheld, from what it did (compat.json; docs/audit.md)."
        ))),
    ]
    .into_iter()
    .chain(note.map(|n| Block::Para(Line::text(n))))
    .chain([Block::Table(Table {
        head: ["server", "package", "verdict", "reason", "evidence"]
            .map(String::from)
            .to_vec(),
        rows,
        grid: false,
    })])
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{CellEvidence, CellTimings, Robustness};

    fn meta() -> ServerMeta {
        ServerMeta {
            package: "pkg".into(),
            version: "1.0.0".into(),
            ..ServerMeta::default()
        }
    }

    fn cell(
        outcome: Outcome,
        lifecycle: Option<&str>,
        stderr: &str,
        exit: serde_json::Value,
    ) -> Record {
        Record {
            schema: 1,
            server: "s".into(),
            profile: "baseline".into(),
            outcome,
            failed_step: lifecycle.is_none().then(|| "initialize".to_string()),
            lifecycle: lifecycle.map(String::from),
            tools_ok: vec!["a".into()],
            tools_failed: Vec::new(),
            tools_listed: Vec::new(),
            timings: CellTimings::default(),
            evidence: CellEvidence {
                stderr_tail: stderr.into(),
                exit,
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
            learnt_calls: Default::default(),
            learnt_from_answers: Default::default(),
            addresses_model: Vec::new(),
            calls: Vec::new(),
            background_lookups: false,
            roles: Vec::new(),
            finished_at: 0,
        }
    }

    fn judged(r: &Record) -> Compat {
        judge("s", &meta(), Some(r))
    }

    fn code(c: i64) -> serde_json::Value {
        serde_json::json!({"code": c, "signal": null})
    }

    /// The reason and the line that gave it, per reason, from stderr tails
    /// real servers printed when started without what they need.
    #[test]
    fn each_reason_is_named_with_the_line_that_shows_it() {
        let cases = [
            // @supabase/mcp-server-supabase without a token.
            ("Error: Please provide a personal access token (PAT) with the --access-token flag or set the SUPABASE_ACCESS_TOKEN environment variable", Reason::NeedsCredentials),
            // @brave/brave-search-mcp-server.
            ("Error: BRAVE_API_KEY environment variable is required", Reason::NeedsCredentials),
            ("Usage: mcp-server-postgres <database-url>", Reason::NeedsArguments),
            ("error: the following arguments are required: --repository", Reason::NeedsArguments),
            ("Error: Could not find Chrome (ver. 131.0.6778.204). This can occur if either", Reason::NeedsEnvironment),
            ("Error: connect ECONNREFUSED 127.0.0.1:5432", Reason::NeedsEnvironment),
            ("TypeError: fetch failed\n  cause: Error: getaddrinfo ENOTFOUND api.example.com", Reason::NeedsNetwork),
        ];
        for (stderr, want) in cases {
            let c = judged(&cell(Outcome::Broken, None, stderr, code(1)));
            assert_eq!(
                (c.verdict, c.reason),
                (Verdict::Inconclusive, Some(want)),
                "{stderr}"
            );
            assert!(
                c.evidence.iter().any(|e| e.starts_with("stderr: ")),
                "{stderr}: {:?}",
                c.evidence
            );
            assert!(c
                .evidence
                .contains(&"the process exited with code 1".to_string()));
        }
    }

    /// Two starts of the registry sample (2026-12-06), as recorded, that
    /// fail in the layer's own files for any client: a bin with no `#!`
    /// line run by the shell (@illuminaresolutions/n8n-mcp-server 1.0.1,
    /// whose `apiKey` the credential words once took for a need), and
    /// code pip installed that this Python cannot parse
    /// (mochow-mcp-server 1.0.1, Requires-Python >=3.10, f-strings of
    /// 3.12). The same lines from outside the layer name nothing, and a
    /// script of the layer that misses a program is not broken itself.
    #[test]
    fn a_layer_whose_own_files_cannot_start_is_not_fit() {
        // Not fit, its first evidence line holding `said`, its exit kept.
        let not_fit = |stderr: &str, exit: i64, said: &str| {
            let c = judged(&cell(Outcome::Broken, None, stderr, code(exit)));
            assert_eq!(
                (c.verdict, c.reason),
                (Verdict::NotFit, None),
                "{:?}",
                c.evidence
            );
            assert!(c.evidence[0].contains(said), "{said}: {:?}", c.evidence);
            assert!(c
                .evidence
                .contains(&format!("the process exited with code {exit}")));
        };
        let other_verdict = |stderr: &str, exit: i64| {
            let c = judged(&cell(Outcome::Broken, None, stderr, code(exit)));
            assert_ne!(c.verdict, Verdict::NotFit, "{:?}", c.evidence);
        };
        let bin = "/opt/mcp/s/node_modules/.bin/n8n-mcp-server";
        let shell = format!(
            "{bin}: 6: baseUrl: not found\n{bin}: 7: apiKey: not found\n{bin}: 8: Syntax error: word unexpected (expecting \")\")"
        );
        not_fit(&shell, 2, "cannot parse the server's executable");
        not_fit(&shell, 2, ": 8: Syntax error: word unexpected");
        let python = "Traceback (most recent call last):\n  File \"/opt/mcp/s/bin/mochow-mcp-server\", line 5, in <module>\n    from mochow_mcp_server.server import main\n  File \"/opt/mcp/s/mochow_mcp_server/server.py\", line 712\n    output += f\"{str(row[\"row\"])}\\n\"\n                          ^^^\nSyntaxError: f-string: unmatched '['";
        not_fit(python, 1, "SyntaxError: f-string: unmatched '['");
        // A script of the layer that runs and misses a program: not a
        // broken file, a need its words name.
        other_verdict(&format!("{bin}: 3: exec: uv: not found"), 127);
        // Another layer's file, or a SyntaxError in code the server was
        // handed: not its own files.
        other_verdict(&shell.replace("/opt/mcp/s/", "/opt/mcp/other/"), 2);
        other_verdict(
            &python.replace("/opt/mcp/s/mochow_mcp_server/server.py", "/workspace/x.py"),
            1,
        );
    }

    #[test]
    fn refused_network_before_the_handshake_is_needs_network() {
        let mut r = cell(Outcome::Timeout, None, "", serde_json::Value::Null);
        r.start_network = vec!["dns api.apify.com denied (not allowed)".into()];
        let c = judged(&r);
        assert_eq!(c.reason, Some(Reason::NeedsNetwork));
        assert_eq!(
            c.evidence[0],
            "network before the handshake: dns api.apify.com denied (not allowed)"
        );
    }

    /// mcp-server-qdrant 0.8.1 under deny-net: it fetches its embedding
    /// model while the first request waits, so its tries count to that
    /// request; with no handshake they were all before it.
    #[test]
    fn a_server_that_died_after_refused_tries_needs_the_network() {
        let mut r = cell(
            Outcome::Broken,
            None,
            "  File \"/opt/mcp/qdrant/fastembed/common/model_management.py\", line 752, in download_model\n    raise ValueError(f\"Could not load model {model.model} from any source.\")\nValueError: Could not load model sentence-transformers/all-MiniLM-L6-v2 from any source.",
            code(1),
        );
        r.network = vec![
            "dns huggingface.co denied (huggingface.co is not allowed)".into(),
            "dns mobile.events.data.microsoft.com denied (mobile.events.data.microsoft.com is not allowed)".into(),
        ];
        let c = judged(&r);
        assert_eq!(
            (c.verdict, c.reason),
            (Verdict::Inconclusive, Some(Reason::NeedsNetwork))
        );
        assert_eq!(
            c.evidence[0],
            "network before the handshake: dns huggingface.co denied (huggingface.co is not allowed)"
        );
        assert!(c
            .evidence
            .iter()
            .any(|e| e.contains("Could not load model")));
        // A try that worked says nothing of a need.
        r.network = vec!["dns huggingface.co allowed".into()];
        assert_eq!(judged(&r).reason, Some(Reason::NoHandshake));
        // Its own words come first: a refused telemetry call is not why
        // a server without its display died.
        r.network = vec!["dns o1.ingest.sentry.io denied (not allowed)".into()];
        r.evidence.stderr_tail = "Error: Missing X server or $DISPLAY".into();
        assert_eq!(judged(&r).reason, Some(Reason::NeedsEnvironment));
    }

    /// A server that answers the handshake but dies on an object-typed
    /// request id is not fit, and says which probe did it.
    #[test]
    fn hostile_input_that_kills_a_server_makes_it_not_fit() {
        let mut r = cell(
            Outcome::Ok,
            Some("initialize"),
            "TypeError: id.toString is not a function",
            code(0),
        );
        r.robustness = Some(Robustness {
            sent: 9,
            handled: 8,
            valid_breakage: vec!["object_id".into()],
            malformed_breakage: Vec::new(),
        });
        let c = judged(&r);
        assert_eq!((c.verdict, c.reason), (Verdict::NotFit, None));
        assert_eq!(
            c.evidence[0],
            "robustness: object_id crashed or hung the server"
        );
        assert!(c.evidence[1].contains("id.toString"), "{:?}", c.evidence);
        r.robustness = Some(Robustness {
            sent: 9,
            handled: 9,
            ..Robustness::default()
        });
        let c = judged(&r);
        assert_eq!((c.verdict, c.reason), (Verdict::Fit, None));
        assert!(c.evidence[1].contains("9 of 9"), "{:?}", c.evidence);
    }

    /// Every call failed: the verdict is what the failures name, from
    /// answers real servers gave in the corpus audit.
    #[test]
    fn a_server_whose_every_call_failed_is_judged_by_what_the_failures_name() {
        let failing = |errors: &[&str]| {
            let mut r = cell(Outcome::Degraded, Some("initialize"), "", code(0));
            r.tools_ok = Vec::new();
            r.tools_failed = vec!["a".into(), "b".into()];
            r.evidence.errors = errors.iter().map(|e| e.to_string()).collect();
            r
        };
        let cases = [
            // @winor30/mcp-server-datadog
            ("tools/call:list_incidents: error: Mcp error: -32603: request to https://api.datadoghq.com/api/v2/incidents failed, reason: getaddrinfo ENOTFOUND api.datadoghq.com", Reason::NeedsNetwork),
            // @modelcontextprotocol/server-puppeteer
            ("tools/call:puppeteer_navigate: error: Mcp error: -32603: Tried to find the browser at the configured path (/usr/bin/chromium), but no executable was found.", Reason::NeedsEnvironment),
            // chrome-devtools-mcp
            ("tools/call:list_pages: tool_error: Chrome failed to start: Browser was not found at the configured executablePath (/usr/bin/chromium)", Reason::NeedsEnvironment),
            // @modelcontextprotocol/server-postgres, no database on the loopback
            ("tools/call:query: error: Mcp error: -32603: connect ECONNREFUSED 127.0.0.1:5432", Reason::NeedsEnvironment),
            ("tools/call:list_projects: tool_error: Error: 401 Unauthorized", Reason::NeedsCredentials),
        ];
        for (error, want) in cases {
            let c = judged(&failing(&[error]));
            assert_eq!(
                (c.verdict, c.reason),
                (Verdict::Inconclusive, Some(want)),
                "{error}"
            );
            assert_eq!(c.evidence[0], quote(error));
            assert!(
                c.evidence[1].starts_with("none of the 2 calls answered"),
                "{:?}",
                c.evidence
            );
        }
        // Words that name nothing, but the egress proxy refused a name.
        let mut r = failing(&["tools/call:a: tool_error: something went wrong"]);
        r.network = vec!["dns api.example.com denied (api.example.com is not allowed)".into()];
        let c = judged(&r);
        assert_eq!(c.reason, Some(Reason::NeedsNetwork));
        assert!(
            c.evidence[0].starts_with("network: dns api.example.com"),
            "{:?}",
            c.evidence
        );
        // No call got past its argument check.
        r.network.clear();
        r.reach = Some(probes::report::result::Reach {
            called: 2,
            reached: 0,
            not_reached: vec![
                "a: the answer complains about the arguments: Expected object".into(),
            ],
            ..Default::default()
        });
        let c = judged(&r);
        assert_eq!(c.reason, Some(Reason::NeedsArguments));
        assert!(
            c.evidence[0].contains("Expected object"),
            "{:?}",
            c.evidence
        );
        // The tools ran and said no: an answer a client gets.
        r.reach.as_mut().unwrap().reached = 2;
        assert_eq!(judged(&r).verdict, Verdict::Fit);
        // One call answered: the tools can be judged.
        let mut r = failing(&[cases[0].0]);
        r.tools_ok = vec!["c".into()];
        assert_eq!(judged(&r).verdict, Verdict::Fit);
        // @modelcontextprotocol/server-gitlab 2025.4.25: every call fails
        // in its own error handler (zod 4's error has no `errors`): not
        // fit, whatever was given.
        let gitlab = "tools/call:search_repositories: error: Mcp error: -32603: Cannot read properties of undefined (reading 'map')";
        let c = judged(&failing(&[gitlab, gitlab]));
        assert_eq!((c.verdict, c.reason), (Verdict::NotFit, None));
        assert!(
            c.evidence[0].starts_with("every call failed in the server's code: ")
                && c.evidence[0].contains("reading 'map'"),
            "{:?}",
            c.evidence
        );
        // One call that names something else is not a fault of the code
        // alone; Node's network error is a TypeError too.
        let c = judged(&failing(&[
            gitlab,
            "tools/call:b: tool_error: 401 Unauthorized",
        ]));
        assert_eq!(c.reason, Some(Reason::NeedsCredentials));
        let c = judged(&failing(&[
            "tools/call:b: tool_error: TypeError: fetch failed",
        ]));
        assert_eq!(c.reason, Some(Reason::NeedsNetwork));
    }

    /// A summary of many servers counts them all and shows the worst
    /// rows only, not fit first, then what failed naming nothing.
    #[test]
    fn the_worst_section_counts_every_server_and_shows_the_worst_first() {
        let v = |server: &str, verdict, reason| Compat {
            server: server.into(),
            package: "p".into(),
            version: "1".into(),
            verdict,
            reason,
            evidence: vec!["e".into()],
            judged_on: None,
            as_released: None,
            working: None,
            working_tools: Vec::new(),
            network: None,
        };
        let mut all: Vec<Compat> = (0..50)
            .map(|i| v(&format!("ok{i:02}"), Verdict::Fit, None))
            .collect();
        all.push(v(
            "a-net",
            Verdict::Inconclusive,
            Some(Reason::NeedsNetwork),
        ));
        all.push(v(
            "b-silent",
            Verdict::Inconclusive,
            Some(Reason::NoHandshake),
        ));
        all.push(v("c-broken", Verdict::NotFit, None));
        all.push(v(
            "d-install",
            Verdict::Inconclusive,
            Some(Reason::InstallFailed),
        ));
        let blocks = worst_section(&all, 60, 3, "The rest is on the pages.");
        let text = super::super::render::markdown(&super::super::document::Document {
            title: "t".into(),
            blocks,
        });
        assert!(
            text.contains("50 of 54 fit, 1 not fit, 3 inconclusive"),
            "{text}"
        );
        assert!(text.contains("6 not run yet"), "{text}");
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| server"))
            .collect();
        let heads: Vec<&str> = rows
            .iter()
            .map(|r| r[2..].split(' ').next().unwrap())
            .collect();
        assert_eq!(heads, ["c-broken", "b-silent", "d-install"], "{text}");
        assert!(text.contains("The rest is on the pages."));
    }

    #[test]
    fn a_crash_without_a_named_need_is_not_fit_and_a_silent_timeout_inconclusive() {
        let c = judged(&cell(
            Outcome::Crash,
            None,
            "Segmentation fault",
            serde_json::json!({"code": null, "signal": 11}),
        ));
        assert_eq!(c.verdict, Verdict::NotFit);
        assert_eq!(c.evidence[0], "the process was killed by signal 11");
        let c = judged(&cell(
            Outcome::Timeout,
            None,
            "Starting server...",
            serde_json::Value::Null,
        ));
        assert_eq!(c.reason, Some(Reason::NoHandshake));
        assert_eq!(c.evidence[0], "no handshake: initialize timeout");
        assert_eq!(c.evidence[1], "stderr: Starting server...");
    }

    #[test]
    fn install_failures_and_timeouts_are_rows_with_their_reason() {
        let mut m = meta();
        m.install_error = Some("npm ci: exited with 1: gyp ERR! find Python".into());
        let c = judge("s", &m, None);
        assert_eq!(c.reason, Some(Reason::InstallFailed));
        assert!(
            c.evidence[0].starts_with("install: npm ci"),
            "{:?}",
            c.evidence
        );
        m.install_error = Some("the install scripts timed out after 600 s".into());
        assert_eq!(judge("s", &m, None).reason, Some(Reason::InstallTimeout));
        // A package whose own metadata names nothing to run is a library.
        m.install_error = Some(format!(
            "@abhaybabbar/retellai-mcp-server 1.0.2 {}",
            mcpvm_images::package::NO_EXECUTABLE
        ));
        let c = judge("s", &m, None);
        assert_eq!(c.reason, Some(Reason::NotAServer));
        assert!(c.evidence[0].contains("no executable"), "{:?}", c.evidence);
    }

    /// mcp-server-fetch 2025.4.7: dead on today's SDK, alive as released.
    #[test]
    fn a_server_that_starts_only_as_released_is_not_fit_with_both_runs() {
        let today = cell(
            Outcome::Broken,
            None,
            "Traceback (most recent call last):\nImportError: cannot import name 'McpError' from 'mcp.shared.exceptions'",
            serde_json::json!({"code": 1}),
        );
        let judged = judge("fetch", &meta(), Some(&today));
        assert_eq!(judged.verdict, Verdict::Inconclusive);
        let mut again = cell(
            Outcome::Ok,
            Some("initialize"),
            "",
            serde_json::json!({"code": 0}),
        );
        again.profile = crate::audit::released::PROFILE.into();
        let c = as_released(judged.clone(), &today, Some(&again));
        assert_eq!((c.verdict, c.reason), (Verdict::NotFit, None));
        assert_eq!(c.as_released.as_deref(), Some("starts"));
        assert!(
            c.evidence[0].contains("ImportError: cannot import name 'McpError'"),
            "{:?}",
            c.evidence
        );
        assert!(
            c.evidence.last().unwrap().contains("it starts"),
            "{:?}",
            c.evidence
        );
        // As released it dies too, or it was not tried: broken today all
        // the same (chroma-mcp 0.2.6 on today's pydantic), and the row
        // says which.
        let dead = cell(
            Outcome::Broken,
            None,
            "SyntaxError: bad",
            serde_json::json!({"code": 1}),
        );
        let c = as_released(judged.clone(), &today, None);
        assert_eq!(
            (c.verdict, c.as_released.as_deref()),
            (Verdict::NotFit, Some("not tried"))
        );
        let c = as_released(judged, &today, Some(&dead));
        assert_eq!(c.verdict, Verdict::NotFit);
        assert_eq!(c.as_released.as_deref(), Some("fails too"));
        assert!(
            c.evidence
                .last()
                .unwrap()
                .contains("it does not start either"),
            "{:?}",
            c.evidence
        );
    }

    #[test]
    fn the_section_counts_verdicts_by_reason() {
        let mut m = meta();
        m.install_error = Some("npm ci failed".into());
        let rows = vec![
            judged(&cell(Outcome::Ok, Some("initialize"), "", code(0))),
            judge("broken", &m, None),
        ];
        let d = crate::audit::document::Document {
            title: "t".into(),
            blocks: section(&rows, 3),
        };
        let md = crate::audit::render::markdown(&d);
        assert!(
            md.contains("1 of 2 fit, 0 not fit, 1 inconclusive (install\\_failed 1); 1 not run yet, so not judged"),
            "{md}"
        );
        assert!(
            md.contains(
                "| broken | pkg 1.0.0 | inconclusive | install\\_failed | install: npm ci failed |"
            ),
            "{md}"
        );
    }

    /// What a server prints is quoted, never trusted: one bounded,
    /// printable line.
    #[test]
    fn evidence_is_bounded_and_printable() {
        let long = format!("API key missing \u{1b}[2J{}", "x".repeat(5000));
        let c = judged(&cell(Outcome::Broken, None, &long, code(1)));
        assert!(c
            .evidence
            .iter()
            .all(|e| e.chars().count() <= MAX_LINE + 10 && !e.contains('\u{1b}')));
        let round: Compat = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(round, c);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["verdict"], "inconclusive");
        assert_eq!(v["reason"], "needs_credentials");
    }
    fn called(tool: &str, args: &str, answer: &str) -> crate::audit::record::Call {
        crate::audit::record::Call {
            tool: tool.into(),
            outcome: "ok".into(),
            arguments: args.into(),
            answer: answer.into(),
            ..Default::default()
        }
    }

    /// slack-legacy 2025.4.25 offline, as the audit recorded it: eight
    /// unflagged `{"error":"fetch failed"}` answers, slack.com refused
    /// during each. Recorded `fit` before; nothing works.
    #[test]
    fn unflagged_failures_with_their_lookups_refused_are_not_fit_evidence() {
        let mut r = cell(
            Outcome::Ok,
            Some("initialize"),
            "",
            serde_json::json!({"code": 0}),
        );
        r.calls = [
            "slack_list_channels",
            "slack_get_users",
            "slack_post_message",
        ]
        .iter()
        .map(|t| crate::audit::record::Call {
            net: vec!["dns slack.com denied (slack.com is not allowed)".into()],
            ..called(t, r#"{"channel_id":"1"}"#, r#"{"error":"fetch failed"}"#)
        })
        .collect();
        let c = judged(&r);
        assert_eq!(
            (c.verdict, c.reason),
            (Verdict::Inconclusive, Some(Reason::NeedsNetwork))
        );
        assert_eq!(c.working, Some([0, 3]));
        assert!(
            c.evidence[0].starts_with("0 of 3 tools shown working"),
            "{:?}",
            c.evidence
        );
        assert!(
            c.evidence[1].contains("slack.com refused"),
            "{:?}",
            c.evidence
        );
    }

    /// hubspot 0.4.0 offline: its one answer is a fixed feedback link, the
    /// rest fail for api.hubspot.com. Recorded `fit` before.
    #[test]
    fn a_static_answer_beside_failing_calls_does_not_make_a_server_fit() {
        let mut r = cell(
            Outcome::Ok,
            Some("initialize"),
            "",
            serde_json::json!({"code": 0}),
        );
        let mut list = called(
            "hubspot-list-objects",
            r#"{"objectType":"contacts"}"#,
            "Error listing HubSpot contacts: fetch failed",
        );
        list.is_error = true;
        list.outcome = "tool_error".into();
        list.net = vec!["dns api.hubspot.com denied (not allowed)".into()];
        r.calls = vec![
            list,
            called(
                "hubspot-generate-feedback-link",
                "{}",
                "Share Feedback link with the user: https://developers.hubspot.com/mcp",
            ),
        ];
        let c = judged(&r);
        assert_eq!(
            (c.verdict, c.reason),
            (Verdict::Inconclusive, Some(Reason::NeedsNetwork))
        );
        assert!(
            c.evidence.iter().any(|e| e.contains("takes no input")),
            "{:?}",
            c.evidence
        );
    }

    /// time: an answer that changes with its input makes it fit, and the
    /// verdict says how many tools were shown working first.
    #[test]
    fn a_tool_shown_working_makes_a_server_fit_k_of_n_first() {
        let mut r = cell(
            Outcome::Ok,
            Some("initialize"),
            "",
            serde_json::json!({"code": 0}),
        );
        let mut now = called(
            "get_current_time",
            r#"{"timezone":"UTC"}"#,
            r#"{"timezone": "UTC", "datetime": "2026-12-05T14:26:38+00:00"}"#,
        );
        now.varied = Some(crate::audit::record::Varied {
            property: "timezone".into(),
            outcome: "tool_error".into(),
            same: false,
            refused_by_schema: false,
            ..Default::default()
        });
        let mut bad = called(
            "convert_time",
            r#"{"time":"x"}"#,
            "Error executing tool convert_time: Invalid time format",
        );
        bad.is_error = true;
        r.calls = vec![now, bad];
        let c = judged(&r);
        assert_eq!(c.verdict, Verdict::Fit);
        assert_eq!(c.working, Some([1, 2]));
        assert!(
            c.evidence[0].starts_with("1 of 2 tools shown working: get_current_time"),
            "{:?}",
            c.evidence
        );
    }

    /// Every call failing inside the server's own code: not fit.
    #[test]
    fn every_call_failing_in_the_servers_code_is_not_fit() {
        let mut r = cell(
            Outcome::Ok,
            Some("initialize"),
            "",
            serde_json::json!({"code": 0}),
        );
        r.calls = ["a", "b"]
            .iter()
            .map(|t| crate::audit::record::Call {
                outcome: "error".into(),
                ..called(
                    t,
                    r#"{"x":"y"}"#,
                    "Cannot read properties of undefined (reading 'map')",
                )
            })
            .collect();
        let c = judged(&r);
        assert_eq!(c.verdict, Verdict::NotFit, "{:?}", c.evidence);
    }

    /// A refused telemetry host at start (onnxruntime's) is not why a
    /// server stopped; the host it needed is.
    #[test]
    fn telemetry_refused_at_start_is_never_the_need() {
        let mut r = cell(
            Outcome::Broken,
            None,
            "ValueError: Could not load model",
            serde_json::json!({"code": 1}),
        );
        r.start_network = vec![
            "dns mobile.events.data.microsoft.com denied (not allowed)".into(),
            "dns huggingface.co denied (not allowed)".into(),
        ];
        let c = judged(&r);
        assert_eq!(c.reason, Some(Reason::NeedsNetwork));
        assert!(c.evidence[0].contains("huggingface.co"), "{:?}", c.evidence);
        assert!(
            !c.evidence.iter().any(|e| e.contains("microsoft")),
            "{:?}",
            c.evidence
        );
    }

    /// The cause printed first is read even when the tail kept only the
    /// stack trace after it (azure's missing ICU library).
    #[test]
    fn the_stderr_head_is_read_for_the_cause() {
        let mut r = cell(Outcome::Broken, None, "   at Azure.Mcp.Server.Program.ConfigureServices()\n   at OpenTelemetry.Sdk.get_SuppressInstrumentation()", serde_json::json!({"code": 134}));
        r.evidence.stderr_head =
            "Process terminated. Couldn't find a valid ICU package installed on the system.".into();
        let c = judged(&r);
        assert_eq!(c.reason, Some(Reason::NeedsEnvironment), "{:?}", c.evidence);
        assert!(c.evidence[0].contains("ICU"), "{:?}", c.evidence);
    }
}
