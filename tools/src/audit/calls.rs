//! What each recorded tool call shows: a tool working, a tool that
//! answered but showed nothing, or a failure with its cause. Judged from
//! what the answer says and what the VM saw during the call, never from
//! the result's `isError` flag alone: a server that catches every failure
//! and returns `{"error":"fetch failed"}` as a plain result has not
//! answered (issue: slack-legacy offline, 8 "answers", no tool working).
//!
//! A tool is shown working when its answer is not a failure in any shape,
//! holds data, and depends on its input: the same tool called again with
//! one value changed answered differently (`probes::calls::arguments::vary`).
//! A tool that takes no input, answers the same whatever it is given,
//! returns its input unchanged or lists the server's own tools shows
//! nothing of the server working.

use serde_json::Value;

use super::record::{Call, Record};

/// Why a call failed, from typed evidence first (the names the egress
/// proxy refused during it), then from its answer's words.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// Lookups or connections refused or failed during the call: the
    /// hosts (telemetry left out).
    Network(Vec<String>),
    Credentials,
    /// Something outside the server that is not there (a browser, a
    /// device, a database server, a library).
    Environment,
    /// Refused for its arguments: the call never reached the tool.
    Arguments,
    /// It failed inside the server's own code (a TypeError, a traceback).
    Code,
    /// No answer in time.
    Timeout,
    /// The tool said no, and names nothing missing.
    Refused,
}

impl Cause {
    /// Its order when the calls' causes are counted: what the server
    /// lacked here before what it said.
    fn rank(&self) -> u8 {
        match self {
            Cause::Network(_) => 0,
            Cause::Credentials => 1,
            Cause::Environment => 2,
            Cause::Arguments => 3,
            Cause::Code => 4,
            Cause::Timeout => 5,
            Cause::Refused => 6,
        }
    }

    pub fn same_kind(&self, other: &Cause) -> bool {
        self.rank() == other.rank()
    }
}

/// What one call shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// The tool works here: how that was seen.
    Working(String),
    /// It answered, and the answer shows nothing of the server working:
    /// why not.
    Nothing(String),
    /// It failed: the cause, and the words or evidence it rests on.
    Failed(Cause, String),
    /// Not called (marked dangerous, destructive, or skipped).
    NotCalled,
}

pub use probes::calls::telemetry::{is_telemetry, TELEMETRY};

/// The host of a network item (`dns api.x.com denied (…)`,
/// `connect 10.0.0.1:443 allowed, failed (…)`), and whether the try was
/// refused or failed.
pub fn net_try(item: &str) -> Option<(&str, bool)> {
    let mut words = item.split_whitespace();
    let _kind = words.next()?;
    let target = words.next()?;
    let host = match target.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => target,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let failed = item.contains(" denied") || item.contains(" failed");
    Some((host, failed))
}

/// The hosts refused or failed in `net`, telemetry left out.
pub fn needed_hosts<'a>(net: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for item in net {
        if let Some((host, true)) = net_try(item) {
            if !is_telemetry(host) && !hosts.iter().any(|h| h == host) {
                hosts.push(host.to_string());
            }
        }
    }
    hosts
}

/// Words of a network that was not there.
const NETWORK_WORDS: &[&str] = &[
    "enotfound",
    "eai_again",
    "getaddrinfo",
    "name resolution",
    "name or service not known",
    "network is unreachable",
    "fetch failed",
    "etimedout",
    "connecterror",
    "connection error",
    "max retries exceeded",
    "failed to resolve",
    "hostname not found",
    "could not connect",
    "unable to connect",
    "network error",
    "network or api error",
    // Chromium's own (a browser server's navigation).
    "err_name_not_resolved",
];

/// Words that say a key or a login is missing or refused.
const CREDENTIAL_WORDS: &[&str] = &[
    "api key",
    "api_key",
    "apikey",
    "access token",
    "token is required",
    "invalid token",
    "credentials",
    "unauthorized",
    "authenticat",
    "not logged in",
    "login first",
    "please log in",
    "login required",
    "jwt",
];

/// Words of something outside the server that is not there.
const ENVIRONMENT_WORDS: &[&str] = &[
    "econnrefused",
    "connection refused",
    "browser",
    "chrome",
    "chromium",
    "extension is connected",
    "device",
    "emulator",
    "adb",
    "database",
    "no active connections",
    "display",
    "shared object",
    "shared librar",
];

/// Words of a fault in a server's own code (a JavaScript TypeError or
/// ReferenceError, a Python traceback), not of what it was given or
/// lacks.
pub const CODE_WORDS: &[&str] = &[
    "cannot read properties of undefined",
    "cannot read properties of null",
    "is not a function",
    "is not defined",
    "referenceerror",
    "traceback (most recent call last)",
    "attributeerror",
    "unboundlocalerror",
];

/// How a failure's first line starts.
const ERROR_STARTS: &[&str] = &[
    "error",
    "failed",
    "failure",
    "unable to",
    "could not",
    "couldn't",
    "cannot",
    "can't",
    "exception",
    "fatal",
    "mcp error",
    "invalid",
    "no such",
    "not found",
    "access denied",
    "permission denied",
    "unauthorized",
    "forbidden",
    "configuration error",
    "request failed",
];

/// Words in a short answer that say the thing asked for is not there.
const MISSING_WORDS: &[&str] = &[
    "not found",
    "does not exist",
    "doesn't exist",
    "no such",
    "unknown ",
    "please fix the issue",
];

fn has(text: &str, words: &[&str]) -> bool {
    let t = text.to_lowercase();
    words.iter().any(|w| t.contains(w))
}

/// The first line that says something, without markdown's emphasis.
fn first_line(text: &str) -> String {
    text.lines()
        .map(|l| {
            l.trim()
                .trim_matches(|c| matches!(c, '*' | '#' | '_' | '`' | '>' | '"' | '\''))
                .trim()
        })
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_lowercase()
}

/// An answer parsed as JSON, when it is (a cut answer is not).
fn json(text: &str) -> Option<Value> {
    serde_json::from_str(text.trim()).ok()
}

/// Whether a JSON answer is shaped as an error: an `error`/`errors` that
/// says something, `success`/`ok` false, a failed `status`.
fn error_shaped(v: &Value) -> bool {
    let Some(o) = v.as_object() else {
        return false;
    };
    let said = |v: &Value| match v {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
        _ => true,
    };
    o.get("error").is_some_and(said)
        || o.get("errors").is_some_and(said)
        || o.get("success") == Some(&Value::Bool(false))
        || o.get("ok") == Some(&Value::Bool(false))
        || o.get("status")
            .and_then(Value::as_str)
            .is_some_and(|s| matches!(s.to_lowercase().as_str(), "error" | "failed" | "failure"))
}

/// The same test on an answer cut before its end: its opening, spaces
/// removed.
fn error_shaped_cut(text: &str) -> bool {
    let squeezed: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .take(200)
        .collect::<String>()
        .to_lowercase();
    [
        "{\"error\":\"",
        "{\"error\":{",
        "{\"errors\":[\"",
        "{\"errors\":[{",
    ]
    .iter()
    .any(|p| squeezed.starts_with(p))
        || squeezed.contains("\"success\":false")
        || squeezed.contains("\"status\":\"error\"")
        || squeezed.contains("\"status\":\"failed\"")
}

/// Whether a JSON value holds no data: no non-empty string, no number
/// but zero, no `true`, anywhere in it.
fn holds_no_data(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Bool(true) => false,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.iter().all(holds_no_data),
        Value::Object(m) => m.values().all(holds_no_data),
    }
}

/// Whether every argument of a call is empty: null, a blank string, an
/// empty list or object, or a string holding one as JSON (`"[]"`): the
/// tool was asked to act on nothing. mcp-atlassian's
/// jira_batch_create_issues given `"[]"` answers "Issues created
/// successfully" with no issue and no try to reach Jira; its answer to
/// invalid JSON differs, which shows its parser, not the tool. Numbers
/// and booleans are input (an id 0, a flag off).
fn asks_for_nothing(arguments: &str) -> bool {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    };
    let Some(Value::Object(args)) = json(arguments) else {
        return false;
    };
    !args.is_empty()
        && args.values().all(|v| match v {
            Value::String(s) => s.trim().is_empty() || json(s).as_ref().is_some_and(empty),
            v => empty(v),
        })
}

/// Whether an answer's words say it failed.
pub fn says_failure(answer: &str) -> bool {
    let first = first_line(answer);
    ERROR_STARTS.iter().any(|s| first.starts_with(s))
        || match json(answer) {
            Some(v) => error_shaped(&v),
            None => error_shaped_cut(answer),
        }
        || has(answer, NETWORK_WORDS) && answer.len() < 600
        || answer.len() < 400 && has(answer, MISSING_WORDS)
}

/// The cause a failed call's words give (the refused names, typed, are
/// read before: [`judge`]).
fn cause_of(text: &str, not_reached: bool) -> Cause {
    if not_reached {
        return Cause::Arguments;
    }
    let t = text.to_lowercase();
    if has(&t, NETWORK_WORDS) {
        // The host the words name, when they name one after ENOTFOUND.
        let host = ["enotfound ", "eai_again "]
            .iter()
            .find_map(|w| t.split(w).nth(1))
            .and_then(|r| {
                r.split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                    .next()
            })
            .filter(|h| h.contains('.'))
            .map(|h| h.trim_end_matches(['.', ',', ')']).to_string());
        return Cause::Network(host.into_iter().collect());
    }
    if has(&t, CODE_WORDS) {
        return Cause::Code;
    }
    if has(&t, CREDENTIAL_WORDS) {
        return Cause::Credentials;
    }
    if has(&t, ENVIRONMENT_WORDS) {
        return Cause::Environment;
    }
    Cause::Refused
}

/// A line of an answer for evidence: its first line that says something,
/// one line, at most 160 characters.
pub fn excerpt(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !matches!(*l, "{" | "[" | "```"))
        .unwrap_or("");
    let one: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

/// Whether an answer only lists the server's own tools (a catalogue
/// search, a list of the enabled tools): three of its listed names, or
/// all of them when it lists fewer.
fn lists_own_tools(answer: &str, listed: &[String]) -> bool {
    let named = listed
        .iter()
        .filter(|t| t.len() >= 4 && answer.contains(t.as_str()))
        .count();
    named >= 3.min(listed.len().max(1)) && listed.len() >= 2
}

/// What an undefined-name fault (`X is not defined`, JavaScript's
/// ReferenceError and Python's NameError) says of a call's input.
#[derive(Debug, PartialEq)]
enum Undefined {
    /// It names one name of a string argument that holds several (the
    /// name and the argument): the tool parsed that argument as code and
    /// ran it, which is what it is for (`mcpvm-probe` evaluated as
    /// `mcpvm - probe`).
    Part(String, String),
    /// It names a whole argument: an answer about what it was given.
    Whole,
}

/// The undefined name an answer reports, when it is from the call's
/// string arguments.
fn undefined_input_name(answer: &str, arguments: &str) -> Option<Undefined> {
    let Some(Value::Object(args)) = json(arguments) else {
        return None;
    };
    let undefined = |name: &str| {
        answer.contains(&format!("{name} is not defined"))
            || answer.contains(&format!("name '{name}' is not defined"))
    };
    let strings = args.values().filter_map(Value::as_str);
    for value in strings {
        let names: Vec<&str> = value
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .filter(|n| n.len() >= 2 && !n.starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        if names.len() == 1 && names[0] == value && undefined(value) {
            return Some(Undefined::Whole);
        }
        if names.len() >= 2 {
            if let Some(name) = names.iter().find(|n| undefined(n)) {
                return Some(Undefined::Part(name.to_string(), value.to_string()));
            }
        }
    }
    None
}

/// Whether an answer is one of its arguments' values, unchanged.
fn echoes(answer: &str, arguments: &str) -> bool {
    let a = answer.trim().trim_matches('"');
    if a.len() < 2 {
        return false;
    }
    let Some(Value::Object(args)) = json(arguments) else {
        return false;
    };
    args.values().any(|v| v.as_str() == Some(a))
}

/// What one call shows. `listed`: the server's tools; `not_reached`: the
/// call was refused for its arguments (the probe's reach); `background`:
/// the server brings a program that looks hosts up on its own (a
/// browser), so a lookup refused during the call is not by itself the
/// call's failure.
pub fn judge(c: &Call, listed: &[String], not_reached: bool, background: bool) -> Shown {
    let answer = c.answer.as_str();
    let quote = || format!("{}: {}", c.tool, excerpt(answer));
    match c.outcome.as_str() {
        "skipped" => return Shown::NotCalled,
        "timeout" => {
            let hosts = needed_hosts(&c.net);
            return match hosts.is_empty() {
                true => Shown::Failed(Cause::Timeout, format!("{}: no answer in time", c.tool)),
                false => Shown::Failed(Cause::Network(hosts.clone()), refused_line(c, &hosts)),
            };
        }
        "closed" => return Shown::Failed(Cause::Code, format!("{}: the server went away", c.tool)),
        _ => {}
    }
    // What the VM saw comes first: a lookup or connection refused during
    // the call, whatever the answer made of it. Not where a browser looks
    // hosts up on its own (Chromium starts on the first call and asks for
    // www.google.com whatever page it opens): there the answer decides,
    // and the refused hosts are the need only of a call that failed for
    // the network.
    let hosts = needed_hosts(&c.net);
    if !hosts.is_empty() && !background {
        return Shown::Failed(Cause::Network(hosts.clone()), refused_line(c, &hosts));
    }
    let flagged = c.is_error || c.outcome != "ok";
    if flagged || says_failure(answer) {
        let how = match flagged {
            true => "",
            false => " (returned as an ordinary result)",
        };
        let cause = match cause_of(answer, not_reached) {
            Cause::Network(named) if named.is_empty() => Cause::Network(hosts),
            Cause::Code => match undefined_input_name(answer, &c.arguments) {
                // The fault named is in what it was given, not in its code.
                Some(Undefined::Part(name, value)) => {
                    return Shown::Working(format!(
                        "{}: ran its input as code: '{}' answered that '{name}', a name in it, is not defined",
                        c.tool,
                        excerpt(&value)
                    ))
                }
                Some(Undefined::Whole) => Cause::Refused,
                None => Cause::Code,
            },
            other => other,
        };
        return Shown::Failed(cause, format!("{}{how}", quote()));
    }
    let parsed = json(answer);
    if answer.trim().is_empty() || parsed.as_ref().is_some_and(holds_no_data) {
        return Shown::Nothing(format!("{}: no data ({})", c.tool, excerpt(answer)));
    }
    if lists_own_tools(answer, listed) {
        return Shown::Nothing(format!("{}: lists the server's own tools", c.tool));
    }
    let no_input = json(&c.arguments)
        .as_ref()
        .and_then(Value::as_object)
        .is_none_or(|m| m.is_empty());
    if no_input {
        return Shown::Nothing(format!(
            "{}: takes no input, so its answer cannot show it depends on one ({})",
            c.tool,
            excerpt(answer)
        ));
    }
    if asks_for_nothing(&c.arguments) {
        return Shown::Nothing(format!(
            "{}: asked to act on nothing ({}), so its answer cannot show it working",
            c.tool,
            excerpt(&c.arguments)
        ));
    }
    if echoes(answer, &c.arguments) {
        return Shown::Nothing(format!("{}: returns its input unchanged", c.tool));
    }
    match &c.varied {
        Some(v) if v.echoes_input || echoes_as_recorded(c, v) => Shown::Nothing(format!(
            "{}: answers with '{}' repeated back, nothing else changes",
            c.tool, v.property
        )),
        None => Shown::Nothing(format!(
            "{}: answered, but no value of its input could be varied to show the answer depends on it",
            c.tool
        )),
        Some(v) if v.refused_by_schema => Shown::Nothing(format!(
            "{}: answered; the call with '{}' changed was refused by validation, so dependence on the input is not shown",
            c.tool, v.property
        )),
        Some(v) if v.same => Shown::Nothing(format!(
            "{}: answers the same when '{}' changes ({})",
            c.tool,
            v.property,
            excerpt(answer)
        )),
        Some(v) => Shown::Working(format!(
            "{}: answers differently when '{}' changes",
            c.tool, v.property
        )),
    }
}

/// The echo test (`probes::calls::arguments::only_echoes`) again on the
/// recorded answers, for a string the probe changed by appending its
/// suffix: the rule as it is now, on records made before it was.
fn echoes_as_recorded(c: &Call, v: &super::record::Varied) -> bool {
    let Some(args) = json(&c.arguments) else {
        return false;
    };
    let pointer = format!("/{}", v.property);
    let Some(was) = args.pointer(&pointer).and_then(Value::as_str) else {
        return false;
    };
    let now = Value::String(format!("{was}{}", probes::calls::arguments::VARIED));
    probes::calls::arguments::only_echoes(&c.answer, &v.answer, &Value::String(was.into()), &now)
}

fn refused_line(c: &Call, hosts: &[String]) -> String {
    let answer = match c.answer.trim().is_empty() {
        true => String::new(),
        false => format!(", answered \"{}\"", excerpt(&c.answer)),
    };
    format!(
        "{}: {} refused during the call{answer}",
        c.tool,
        hosts.join(", ")
    )
}

/// The calls of a cell judged, one per tool (the best a tool showed: a
/// working call over one that showed nothing over a failure), in the
/// order they were made.
pub fn per_tool(
    calls: &[Call],
    listed: &[String],
    not_reached: &[String],
    background: bool,
) -> Vec<(String, Shown)> {
    let mut out: Vec<(String, Shown)> = Vec::new();
    for c in calls {
        let refused = not_reached
            .iter()
            .any(|n| n.split_once(": ").is_some_and(|(t, _)| t == c.tool));
        let shown = judge(c, listed, refused, background);
        let score = |s: &Shown| match s {
            Shown::Working(_) => 3,
            Shown::Nothing(_) => 2,
            Shown::Failed(..) => 1,
            Shown::NotCalled => 0,
        };
        match out.iter_mut().find(|(t, _)| *t == c.tool) {
            Some((_, old)) if score(&shown) > score(old) => *old = shown,
            Some(_) => {}
            None => out.push((c.tool.clone(), shown)),
        }
    }
    out
}

/// The tools a cell showed working ([`judge`]: an answer that is no
/// failure in any shape, holds data and depends on its input), in the
/// order they were called: what a profile can take away. A tool whose
/// call the probe counted `ok` may have answered `{"success": false}`
/// as a plain result (mcp-atlassian under deny-net): it worked at
/// nothing. A record written before calls were kept: the tools the
/// probe counted `ok`.
pub fn working_tools(r: &Record) -> Vec<String> {
    if r.calls.is_empty() {
        return r.tools_ok.clone();
    }
    let not_reached = r
        .reach
        .as_ref()
        .map(|x| x.not_reached.clone())
        .unwrap_or_default();
    per_tool(
        &r.calls,
        &r.tools_listed,
        &not_reached,
        r.background_lookups,
    )
    .into_iter()
    .filter(|(_, s)| matches!(s, Shown::Working(_)))
    .map(|(t, _)| t)
    .collect()
}

/// The cause most failed calls share, with how many calls it covers and
/// one call's words. A cause that names what was missing (the network, a
/// credential, something outside the server) or a fault in the server's
/// code outranks arguments refused, which outrank a refusal that names
/// nothing (a tool that said no, a call that timed out): a refusal of a
/// URL the probe chose says less than a lookup the proxy refused. Ties:
/// what the server lacked here first.
pub fn shared_cause(judged: &[(String, Shown)]) -> Option<(Cause, usize, String)> {
    let all: Vec<(&Cause, &String)> = judged
        .iter()
        .filter_map(|(_, s)| match s {
            Shown::Failed(c, line) => Some((c, line)),
            _ => None,
        })
        .collect();
    let tier = |c: &Cause| match c {
        Cause::Network(_) | Cause::Credentials | Cause::Environment | Cause::Code => 0,
        Cause::Arguments => 1,
        Cause::Timeout | Cause::Refused => 2,
    };
    let best = all.iter().map(|(c, _)| tier(c)).min()?;
    let failed: Vec<(&Cause, &String)> = all.into_iter().filter(|(c, _)| tier(c) == best).collect();
    let mut best: Option<(Cause, usize, String)> = None;
    for (cause, line) in &failed {
        let n = failed.iter().filter(|(c, _)| c.same_kind(cause)).count();
        let better = match &best {
            None => true,
            Some((b, bn, _)) => n > *bn || (n == *bn && cause.rank() < b.rank()),
        };
        if better {
            // Every host the calls of this kind were refused.
            let merged = match cause {
                Cause::Network(_) => {
                    let mut hosts: Vec<String> = Vec::new();
                    for (c, _) in &failed {
                        if let Cause::Network(h) = c {
                            for h in h {
                                if !hosts.contains(h) {
                                    hosts.push(h.clone());
                                }
                            }
                        }
                    }
                    Cause::Network(hosts)
                }
                c => (*c).clone(),
            };
            best = Some((merged, n, (*line).clone()));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Varied;

    fn call(tool: &str, args: &str, answer: &str) -> Call {
        Call {
            tool: tool.into(),
            outcome: "ok".into(),
            arguments: args.into(),
            answer: answer.into(),
            ..Call::default()
        }
    }

    fn varied(property: &str, same: bool) -> Option<Varied> {
        Some(Varied {
            property: property.into(),
            outcome: "ok".into(),
            same,
            refused_by_schema: false,
            ..Default::default()
        })
    }

    /// slack-legacy 2025.4.25 offline, as recorded (dist/index.js:376
    /// catches every failure into a plain result).
    #[test]
    fn an_unflagged_error_object_with_its_lookup_refused_is_a_network_failure() {
        let mut c = call("slack_list_channels", "{}", r#"{"error":"fetch failed"}"#);
        c.net = vec!["dns slack.com denied (slack.com is not allowed)".into()];
        match judge(&c, &[], false, false) {
            Shown::Failed(Cause::Network(h), line) => {
                assert_eq!(h, ["slack.com"]);
                assert!(line.contains("slack.com refused"), "{line}");
            }
            other => panic!("{other:?}"),
        }
        // The same answer without the VM's evidence is still a failure,
        // from its shape and words.
        c.net.clear();
        assert!(matches!(
            judge(&c, &[], false, false),
            Shown::Failed(Cause::Network(_), _)
        ));
    }

    /// @modelcontextprotocol/server-puppeteer 2025.5.12 under deny-net,
    /// as recorded: Chromium looked up www.google.com while the first
    /// navigation (to the guest's own site) went through.
    #[test]
    fn a_browsers_own_lookups_do_not_fail_a_call_that_answered() {
        let mut c = call(
            "puppeteer_navigate",
            r#"{"url":"http://127.0.0.1:8080/page.html"}"#,
            "Navigated to http://127.0.0.1:8080/page.html",
        );
        c.net = vec!["dns www.google.com denied (www.google.com is not allowed)".into()];
        c.varied = varied("url", false);
        // Without the need known, the refusal decides, as for any server.
        assert!(matches!(
            judge(&c, &[], false, false),
            Shown::Failed(Cause::Network(_), _)
        ));
        assert!(matches!(judge(&c, &[], false, true), Shown::Working(_)));
        // A navigation outside that failed: the refused host is its need.
        let mut out = call(
            "puppeteer_navigate",
            r#"{"url":"https://example.com/"}"#,
            "Failed to navigate: net::ERR_NAME_NOT_RESOLVED at https://example.com/",
        );
        out.is_error = true;
        out.net = vec!["dns example.com denied (example.com is not allowed)".into()];
        match judge(&out, &[], false, true) {
            Shown::Failed(Cause::Network(h), _) => assert_eq!(h, ["example.com"]),
            other => panic!("{other:?}"),
        }
    }

    /// The failure shapes the labelled corpus servers return as ordinary
    /// results, written from their code (docs/ecosystem/labels).
    #[test]
    fn failures_returned_as_ordinary_results_are_failures() {
        let shapes = [
            // atlassian: {"success": false, "error": …}
            (r#"{"success": false, "error": "Network or API Error", "user_identifier": "x"}"#, "network"),
            // shortcut documents-*: text
            ("Failed to list documents: getaddrinfo ENOTFOUND api.app.shortcut.com", "network"),
            // mobile: ActionableError as plain text
            ("Device \"mcpvm-probe\" not found. Use the mobile_list_available_devices tool to see available devices.. Please fix the issue and try again.", "environment"),
            // ms-365 login
            (r#"{"error":"Authentication failed: no accounts"}"#, "credentials"),
            // gitlab-zereight fork_repository
            (r#"{"error":"Failed to fork repository: fetch failed"}"#, "network"),
            // netlify change-extension-installation
            ("\"Failed to install the extension. Ensure the extension slug is correct\"", "refused"),
            // sentry's configuration error, markdown first line
            ("**Configuration Error**\n\nUnable to connect to https://sentry.io/api/0/ - Hostname not found.", "network"),
            // arxiv
            (r#"{"status": "error", "message": "Could not connect to arXiv after 3 attempts."}"#, "network"),
        ];
        for (answer, want) in shapes {
            let c = call("t", r#"{"x":"y"}"#, answer);
            let got = match judge(&c, &[], false, false) {
                Shown::Failed(Cause::Network(_), _) => "network",
                Shown::Failed(Cause::Credentials, _) => "credentials",
                Shown::Failed(Cause::Environment, _) => "environment",
                Shown::Failed(Cause::Refused, _) => "refused",
                other => panic!("{answer}: {other:?}"),
            };
            assert_eq!(got, want, "{answer}");
        }
    }

    /// js-sandbox-mcp-server 0.2.0, as recorded in the registry sample:
    /// its execute_js ran the probe's `mcpvm-probe` as JavaScript
    /// (`mcpvm - probe`) and reported the ReferenceError, flagged as an
    /// internal error. The fault is in the input it ran, and running it
    /// is the tool working. A fault naming no input, or a whole one,
    /// shows no tool working.
    #[test]
    fn an_undefined_name_from_the_input_is_the_tool_running_it() {
        let mut c = call(
            "execute_js",
            r#"{"code":"mcpvm-probe"}"#,
            "MCP error -32603: Execution error: mcpvm is not defined",
        );
        c.outcome = "error".into();
        match judge(&c, &[], false, false) {
            Shown::Working(how) => assert!(how.contains("'mcpvm', a name in it"), "{how}"),
            other => panic!("{other:?}"),
        }
        // Python's NameError the same way.
        c.answer = "NameError: name 'mcpvm' is not defined".into();
        assert!(matches!(judge(&c, &[], false, false), Shown::Working(_)));
        // A name the input does not hold: the server's own fault.
        c.answer = "MCP error -32603: ReferenceError: fetch is not defined".into();
        assert!(matches!(
            judge(&c, &[], false, false),
            Shown::Failed(Cause::Code, _)
        ));
        // The whole input named: a refusal of what it was given.
        let mut whole = call(
            "render",
            r#"{"template":"greeting"}"#,
            "Error: greeting is not defined",
        );
        whole.is_error = true;
        assert!(matches!(
            judge(&whole, &[], false, false),
            Shown::Failed(Cause::Refused, _)
        ));
    }

    /// What a profile can take is what was shown working: a call the
    /// probe counted `ok` that answered a failure as a plain result is
    /// not; records from before calls were kept fall back to `ok`.
    #[test]
    fn only_tools_shown_working_are_what_a_profile_can_take() {
        use crate::audit::record::Outcome;
        let mut r = Record::failed("s", "baseline", Outcome::Degraded, String::new(), 1.0);
        r.tools_ok = vec!["get_user".into(), "read".into()];
        let mut read = call("read", r#"{"path":"/workspace/a"}"#, "hello, notes");
        read.varied = varied("path", false);
        let mut user = call(
            "get_user",
            r#"{"id":"x"}"#,
            r#"{"success": false, "error": "fetch failed"}"#,
        );
        user.varied = varied("id", false);
        r.calls = vec![user, read];
        assert_eq!(working_tools(&r), ["read"]);
        r.calls.clear();
        assert_eq!(working_tools(&r), ["get_user", "read"]);
    }

    /// Empty lists, objects, blanks and JSON strings of them ask for
    /// nothing; a number, a flag or any text is input.
    #[test]
    fn only_empty_arguments_ask_for_nothing() {
        for nothing in [
            r#"{"issues":"[]"}"#,
            r#"{"a":[],"b":{},"c":" ","d":null,"e":"{}"}"#,
        ] {
            assert!(asks_for_nothing(nothing), "{nothing}");
        }
        for something in [
            "{}",
            r#"{"id":0}"#,
            r#"{"verbose":false}"#,
            r#"{"issues":"[{}]"}"#,
            r#"{"issues":"[]","project":"AA"}"#,
            "not json",
        ] {
            assert!(!asks_for_nothing(something), "{something}");
        }
    }

    /// A tool whose answer ignores its input shows nothing: hubspot's
    /// feedback link (takes no input), one that answers the same when its
    /// input changes, one that lists the server's own tools (postman's
    /// getEnabledTools, sentry's search_sentry_tools), empty data
    /// (mobile's device list), an echo.
    #[test]
    fn static_answers_show_nothing() {
        let listed: Vec<String> = [
            "search_sentry_tools",
            "find_issues",
            "get_issue_details",
            "find_projects",
        ]
        .map(String::from)
        .to_vec();
        let feedback = call(
            "hubspot-generate-feedback-link",
            "{}",
            "Share Feedback link with the user: https://developers.hubspot.com/mcp",
        );
        let mut fixed = call("status", r#"{"query":"mcpvm"}"#, "All systems nominal.");
        fixed.varied = varied("query", true);
        let own = call(
            "search_sentry_tools",
            r#"{"query":"mcpvm"}"#,
            "- find_issues: …\n- get_issue_details: …\n- find_projects: …",
        );
        let empty = call(
            "mobile_list_available_devices",
            r#"{"noParams":{}}"#,
            r#"{"devices":[]}"#,
        );
        let echo = call(
            "parse-teams-url",
            r#"{"url":"https://example.com/x"}"#,
            "https://example.com/x",
        );
        let mut nothing_asked = call(
            "jira_batch_create_issues",
            r#"{"issues":"[]"}"#,
            "{\n  \"message\": \"Issues created successfully\",\n  \"issues\": []\n}",
        );
        nothing_asked.varied = varied("issues", false);
        for c in [feedback, fixed, own, empty, echo, nothing_asked] {
            assert!(
                matches!(judge(&c, &listed, false, false), Shown::Nothing(_)),
                "{}: {:?}",
                c.tool,
                judge(&c, &listed, false, false)
            );
        }
    }

    /// time's get_current_time: data, and a different answer for another
    /// timezone. Without the second call, nothing is shown.
    #[test]
    fn an_answer_that_changes_with_its_input_shows_the_tool_working() {
        let mut c = call(
            "get_current_time",
            r#"{"timezone":"UTC"}"#,
            "{\n  \"timezone\": \"UTC\",\n  \"datetime\": \"2026-12-05T14:26:38+00:00\"\n}",
        );
        assert!(matches!(judge(&c, &[], false, false), Shown::Nothing(_)));
        c.varied = varied("timezone", false);
        assert_eq!(
            judge(&c, &[], false, false),
            Shown::Working("get_current_time: answers differently when 'timezone' changes".into())
        );
        // A second call refused by validation shows nothing either, nor
        // one whose answer only repeats the changed value back.
        c.varied.as_mut().unwrap().refused_by_schema = true;
        assert!(matches!(judge(&c, &[], false, false), Shown::Nothing(_)));
        let mut watch = call(
            "watch_topic",
            r#"{"topic":"mcpvm"}"#,
            "Watching topic: mcpvm",
        );
        watch.varied = varied("topic", false);
        assert!(matches!(
            judge(&watch, &[], false, false),
            Shown::Working(_)
        ));
        watch.varied.as_mut().unwrap().echoes_input = true;
        assert!(matches!(
            judge(&watch, &[], false, false),
            Shown::Nothing(_)
        ));
    }

    #[test]
    fn telemetry_hosts_are_never_the_need() {
        assert!(is_telemetry("o272833.ingest.us.sentry.io"));
        assert!(is_telemetry("mobile.events.data.microsoft.com"));
        assert!(is_telemetry("us.i.posthog.com"));
        assert!(is_telemetry("pypi.org"));
        assert!(!is_telemetry("sentry.io"));
        assert!(!is_telemetry("api.hubspot.com"));
        assert!(!is_telemetry("notposthog.com"));
        // markitdown's data, read with onnxruntime's telemetry refused:
        // the tool works.
        let mut c = call(
            "convert_to_markdown",
            r#"{"uri":"file:///workspace/page.html"}"#,
            "# A local page\n\nHello from mcpvm.",
        );
        c.net = vec!["dns mobile.events.data.microsoft.com denied (not allowed)".into()];
        c.varied = varied("uri", false);
        assert!(matches!(judge(&c, &[], false, false), Shown::Working(_)));
        assert_eq!(needed_hosts(&c.net), Vec::<String>::new());
        assert_eq!(
            net_try("connect 10.0.2.3:443 denied (x)"),
            Some(("10.0.2.3", true))
        );
        assert_eq!(net_try("dns a.b allowed"), Some(("a.b", false)));
    }

    #[test]
    fn the_cause_most_calls_share_wins_with_every_host_named() {
        let judged = vec![
            (
                "a".to_string(),
                Shown::Failed(Cause::Network(vec!["api.x.com".into()]), "a: …".into()),
            ),
            (
                "b".to_string(),
                Shown::Failed(Cause::Network(vec!["auth.x.com".into()]), "b: …".into()),
            ),
            (
                "c".to_string(),
                Shown::Failed(Cause::Arguments, "c: …".into()),
            ),
            ("d".to_string(), Shown::Nothing("d: …".into())),
        ];
        let (cause, n, _) = shared_cause(&judged).unwrap();
        assert_eq!(
            cause,
            Cause::Network(vec!["api.x.com".into(), "auth.x.com".into()])
        );
        assert_eq!(n, 2);
        assert!(shared_cause(&judged[3..]).is_none());
        // duckduckgo offline: its search's lookup refused, two refusals of
        // what the probe gave; the refused lookup names the need.
        let judged = vec![
            (
                "search".to_string(),
                Shown::Failed(
                    Cause::Network(vec!["html.duckduckgo.com".into()]),
                    "search: …".into(),
                ),
            ),
            (
                "fetch_content".to_string(),
                Shown::Failed(
                    Cause::Refused,
                    "fetch_content: Error: Refusing to fetch file://…".into(),
                ),
            ),
            (
                "expand_link".to_string(),
                Shown::Failed(
                    Cause::Refused,
                    "expand_link: Error: Unknown link reference".into(),
                ),
            ),
        ];
        let (cause, n, _) = shared_cause(&judged).unwrap();
        assert_eq!(
            (cause, n),
            (Cause::Network(vec!["html.duckduckgo.com".into()]), 1)
        );
    }
}
