//! Findings: what a server was made to do that it must not, judged by
//! what happened inside the VM (recorded effects, docs/withholding.md)
//! against the canaries planted there, and attributed to the step whose
//! request caused it. A finding names its class (also its SARIF
//! `ruleId`), the step and its arguments, why, and the events that prove
//! it.
//!
//! Judged so far, one small function per rule ([`RULES`]):
//! - `path-traversal`: a call touched a path beside the workspace that
//!   only shares its name's prefix (`/workspace_secret`), or went out of
//!   the workspace through the link planted in it, or went where a
//!   traversal payload led when that is outside the server's roots;
//! - `secret-exposure`: a canary file was opened, in any phase (a read
//!   outside every request, at start-up or after an answer, is reported
//!   as unattributed, with no call to reproduce it), or a file's own
//!   token appears in what the server answered (it cannot be made up:
//!   each file holds a random token of its own);
//! - `command-injection` / `argument-injection`: the payload's marker
//!   file was made by a program run during that request, or such a
//!   program was run on it: the payload's own effect, not the server
//!   writing a path it read in its arguments;
//! - `ssrf`: a connect to the address the payload named.
//!
//! Without the canaries event nothing can be judged, and [`judge`] says
//! so instead of returning "no finding".

use mcpvm_protocol::messages::{AnyEvent, During, Effect, Event, EventLine};
use serde_json::Value;

use crate::report::result::StepResult;
pub use crate::report::result::{Evidence, Finding};
use crate::transport::exchange::Direction;

/// Evidence kept per finding.
const MAX_EVIDENCE: usize = 10;

/// The canaries of a run, from the agent's `canaries` event.
pub(crate) struct Canaries {
    /// Each planted file and its own token.
    pub(crate) tokens: Vec<(String, String)>,
    pub(crate) files: Vec<String>,
    /// The variable's token (a tool may show its environment by design).
    pub(crate) env_token: Option<String>,
    pub(crate) sibling: String,
    pub(crate) link: Option<String>,
}

impl Canaries {
    pub(crate) fn from_events(events: &[EventLine]) -> Option<Self> {
        let (files, tokens, env_token, sibling, link) =
            events.iter().find_map(|e| match &e.event {
                AnyEvent::Agent(Event::Canaries {
                    files,
                    tokens,
                    env_token,
                    sibling,
                    link,
                    ..
                }) => Some((files, tokens, env_token, sibling, link)),
                _ => None,
            })?;
        // A token too short to be unguessable proves nothing.
        let unguessable = |t: &&String| t.len() >= 16;
        Some(Canaries {
            tokens: tokens
                .iter()
                .filter(|(_, t)| unguessable(t))
                .map(|(path, t)| (path.clone(), t.clone()))
                .collect(),
            files: files.clone(),
            env_token: Some(env_token).filter(unguessable).cloned(),
            sibling: sibling.clone(),
            link: link.clone(),
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

/// What one rule looks at: a step, the effects its requests caused, the
/// canaries, the attack (if the step was one) and the server's roots.
struct Context<'a> {
    step: &'a StepResult,
    mine: &'a [&'a EventLine],
    canaries: &'a Canaries,
    attack: Option<&'a Value>,
    payload: Option<&'a str>,
    roots: &'a [String],
}

/// What a rule found: class, rule, why, and the evidence (nothing found
/// when empty).
type Found = (String, &'static str, String, Vec<Evidence>);

/// The rules, each judging one step.
const RULES: &[fn(&Context) -> Option<Found>] = &[
    sibling_prefix,
    symlink_escape,
    canary_read,
    token_in_answer,
    marker_made,
    outside_roots,
    connect_to_payload,
];

/// Judges the steps of a run against its guest events; Err says why
/// nothing could be judged (no canaries were planted or reported).
pub fn judge(
    steps: &[StepResult],
    events: &[EventLine],
    roots: &[String],
) -> Result<Vec<Finding>, String> {
    let canaries = Canaries::from_events(events).ok_or_else(|| {
        "the VM reported no canaries, so what the server did could not be judged".to_string()
    })?;
    // The effects and the egress proxy's net events, with what the server
    // was doing.
    let effects: Vec<(&EventLine, &During)> = events
        .iter()
        .filter_map(|e| Some((e, e.event.during()?)))
        .collect();
    let mut attributed = vec![false; effects.len()];
    let mut findings: Vec<Finding> = Vec::new();
    for step in steps {
        let sent = crate::judge::effects::requests(&step.exchange);
        let mut mine = Vec::new();
        for (i, (e, during)) in effects.iter().enumerate() {
            if crate::judge::effects::step_of(during, std::slice::from_ref(&sent)).is_some() {
                attributed[i] = true;
                mine.push(*e);
            }
        }
        let attack = step.detail.get("attack").filter(|a| a.is_object());
        let cx = Context {
            step,
            mine: &mine,
            canaries: &canaries,
            attack,
            payload: attack.and_then(|a| a["payload"].as_str()),
            roots,
        };
        for rule in RULES {
            if let Some((class, rule, why, evidence)) = rule(&cx) {
                add(&mut findings, &cx, &class, rule, why, evidence);
            }
        }
    }
    // Canary reads no step's request explains: at start-up, between
    // calls, after the server exited, or during a request no step made.
    let unattributed = effects
        .iter()
        .zip(&attributed)
        .filter(|((e, _), done)| !**done && reads_canary(e, &canaries));
    for ((e, during), _) in unattributed {
        let phase = match during {
            During::StartUp => "start-up",
            During::BetweenCalls => "between-calls",
            During::AfterExit => "after-exit",
            During::Request { .. } => "unmatched-request",
        };
        let e = Evidence::Event(Box::new((*e).clone()));
        match findings
            .iter_mut()
            .find(|f| f.rule == "canary-read" && f.step == phase)
        {
            Some(f) if f.evidence.len() < MAX_EVIDENCE => f.evidence.push(e),
            Some(_) => {}
            None => findings.push(Finding {
                class: "secret-exposure".into(),
                rule: "canary-read".into(),
                severity: "high".into(),
                step: phase.into(),
                call: None,
                argument: None,
                payload: None,
                attempts: 1,
                why: format!(
                    "it opened a canary secret outside any call ({phase}): unattributed, no \
                     call reproduces it"
                ),
                evidence: vec![e],
            }),
        }
    }
    Ok(findings)
}

/// Adds a finding: one per class, rule, step and argument; another
/// attempt that shows it counts.
fn add(
    findings: &mut Vec<Finding>,
    cx: &Context,
    class: &str,
    rule: &str,
    why: String,
    evidence: Vec<Evidence>,
) {
    if evidence.is_empty() {
        return;
    }
    let argument = cx
        .attack
        .and_then(|a| a["argument"].as_str())
        .map(String::from);
    let payload = cx.payload.map(String::from);
    let step = &cx.step.step;
    // Where a canary's rule showed a traversal, the boundary's would only
    // say it again, less precisely.
    let said = |f: &Finding| {
        f.class == class && f.rule != rule && f.step == *step && f.argument == argument
    };
    if rule == "outside-roots" && findings.iter().any(said) {
        return;
    }
    let same = |f: &&mut Finding| {
        f.class == class && f.rule == rule && f.step == *step && f.argument == argument
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
        step: step.clone(),
        call: call_of(cx.step),
        argument,
        payload,
        attempts: 1,
        why,
        evidence: evidence.into_iter().take(MAX_EVIDENCE).collect(),
    });
}

/// The paths a recorded call named, and where the first led.
pub(crate) fn paths(e: &EventLine) -> impl Iterator<Item = &str> {
    e.event
        .effect()
        .into_iter()
        .flat_map(|e| e.paths.iter().chain(&e.resolved))
        .map(String::as_str)
}

/// The step's events that `keep`, as evidence.
fn evidence_of(cx: &Context, keep: &dyn Fn(&EventLine) -> bool) -> Vec<Evidence> {
    cx.mine
        .iter()
        .filter(|e| keep(e))
        .map(|e| Evidence::Event(Box::new((*e).clone())))
        .collect()
}

fn touching(cx: &Context, hit: &dyn Fn(&str) -> bool) -> Vec<Evidence> {
    evidence_of(cx, &|e| paths(e).any(hit))
}

fn found(class: &str, rule: &'static str, why: String, evidence: Vec<Evidence>) -> Option<Found> {
    (!evidence.is_empty()).then(|| (class.to_string(), rule, why, evidence))
}

fn sibling_prefix(cx: &Context) -> Option<Found> {
    found(
        "path-traversal",
        "sibling-prefix",
        format!(
            "it reached {}, beside the workspace: a name prefix was taken for a directory",
            cx.canaries.sibling
        ),
        touching(cx, &|p| cx.canaries.beside(p)),
    )
}

fn symlink_escape(cx: &Context) -> Option<Found> {
    found(
        "path-traversal",
        "symlink-escape",
        "it followed the link planted in the workspace out of it".into(),
        touching(cx, &|p| cx.canaries.through_link(p)),
    )
}

/// An open of a canary file.
fn reads_canary(e: &EventLine, canaries: &Canaries) -> bool {
    e.event.effect().is_some_and(|c| c.call.starts_with("open"))
        && paths(e).any(|p| canaries.files.iter().any(|f| f == p))
}

fn canary_read(cx: &Context) -> Option<Found> {
    let read = evidence_of(cx, &|e| reads_canary(e, cx.canaries));
    found(
        "secret-exposure",
        "canary-read",
        "it opened a canary secret".into(),
        read,
    )
}

/// A file's token in an answer: that file was read and leaked (its
/// token is random and in nothing else the server can read). The
/// variable's token counts only when an attack brought it back: a plain
/// call's answer may show the environment by design (server-everything's
/// get-env).
fn token_in_answer(cx: &Context) -> Option<Found> {
    let mut tokens: Vec<(&str, &str)> = cx
        .canaries
        .tokens
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    if let (Some(t), Some(_)) = (&cx.canaries.env_token, cx.attack) {
        tokens.push(("the environment variable", t));
    }
    let mut whose = Vec::new();
    let leaked: Vec<Evidence> = cx
        .step
        .exchange
        .iter()
        .filter(|x| x.dir == Direction::Received)
        .filter_map(|x| x.message.as_ref().map(Value::to_string).or(x.text.clone()))
        .filter_map(|text| {
            let (what, at, len) = tokens
                .iter()
                .find_map(|(what, t)| text.find(t).map(|at| (*what, at, t.len())))?;
            whose.push(what);
            Some(Evidence::Excerpt(excerpt(&text, at, len)))
        })
        .collect();
    whose.dedup();
    found(
        "secret-exposure",
        "token-in-answer",
        format!("the token of {} is in its answer", whose.join(", ")),
        leaked,
    )
}

/// `text` around the `len` bytes at `at`, 40 characters either side.
fn excerpt(text: &str, at: usize, len: usize) -> String {
    let from = text[..at]
        .char_indices()
        .rev()
        .nth(40)
        .map_or(0, |(i, _)| i);
    let to = (at + len + 40).min(text.len());
    let to = (to..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[from..to].to_string()
}

/// The payload's marker made by the payload's own effect: a program run
/// during this request with the marker as an argument of its own, or the
/// marker file made by a process that was started during this request
/// (the shell or program the payload reached). The server writing a path
/// it read in its arguments is not injection.
fn marker_made(cx: &Context) -> Option<Found> {
    let attack = cx.attack?;
    let class = attack["class"].as_str().unwrap_or_default();
    if class != "command-injection" && class != "argument-injection" {
        return None;
    }
    let marker = attack["marker"].as_str().unwrap_or("\u{0}");
    let calls = || cx.mine.iter().filter_map(|e| e.event.effect());
    let started: Vec<u32> = calls()
        .filter(|e| matches!(e.call.as_str(), "execve" | "execveat"))
        .map(|e| e.pid)
        .collect();
    let ran = evidence_of(cx, &|e| {
        let Some(e) = e.event.effect() else {
            return false;
        };
        match marker_effect(e, marker) {
            Some(MarkerEffect::RunOn) => true,
            Some(MarkerEffect::Made) => started.contains(&e.pid),
            None => false,
        }
    });
    found(
        class,
        "marker-made",
        format!("the payload ran: /tmp/{marker} was created, or a program was run on it"),
        ran,
    )
}

fn outside_roots(cx: &Context) -> Option<Found> {
    // A traversal payload that leads out of the roots, and the server
    // went there. The canaries' own rules say it more precisely when the
    // path is theirs; this judges any payload's, a user's too.
    if cx.attack?["class"] != "path-traversal" {
        return None;
    }
    let roots = cx.roots;
    let out: Vec<String> = targets(cx.payload.unwrap_or_default(), roots)
        .into_iter()
        .filter(|t| !roots.iter().any(|r| within(t, r)))
        .collect();
    let t = out.first()?;
    let reached = touching(cx, &|p| {
        p.starts_with('/') && out.iter().any(|t| within(&normalize(p), t))
    });
    found(
        "path-traversal",
        "outside-roots",
        format!(
            "it reached {t}, outside its roots ({}), where the payload led",
            roots.join(", ")
        ),
        reached,
    )
}

fn connect_to_payload(cx: &Context) -> Option<Found> {
    let attack = cx.attack?;
    let address = attack["address"]
        .as_str()
        .filter(|_| attack["class"] == "ssrf")?;
    // The guest's own connect, as recorded; or, with a network, the host's
    // egress proxy's `net` event for it (allowed or refused: the server
    // tried either way).
    let proxied = |e: &EventLine| {
        e.event.net().is_some_and(|n| {
            n.kind == "connect"
                && n.address
                    .as_deref()
                    .zip(n.port)
                    .is_some_and(|(a, p)| format!("inet {a}:{p}") == address)
        })
    };
    let connected = |e: &EventLine| {
        e.event.effect().is_some_and(|c| {
            matches!(c.call.as_str(), "connect" | "sendto") && c.address.as_deref() == Some(address)
        })
    };
    let reached = evidence_of(cx, &|e| connected(e) || proxied(e));
    found(
        "ssrf",
        "connect-to-payload",
        format!("it tried to reach {address}, the address the payload named"),
        reached,
    )
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
pub(crate) fn within(path: &str, root: &str) -> bool {
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

/// How an effect touched the payload's marker.
enum MarkerEffect {
    /// A program was run with `/tmp/<marker>` as an argument of its own
    /// (a shell handed the payload as text does not count, only what it
    /// then runs).
    RunOn,
    /// A file by the marker's name was created or written (`touch`,
    /// `--output=`): the payload's effect only if its process was started
    /// by the request.
    Made,
}

fn marker_effect(e: &Effect, marker: &str) -> Option<MarkerEffect> {
    let path = format!("/tmp/{marker}");
    let names = |list: &[String]| list.contains(&path);
    let made = match e.call.as_str() {
        "execve" | "execveat" if names(&e.argv) && !is_shell(e.argv.first()) => {
            return Some(MarkerEffect::RunOn)
        }
        "open" | "openat" | "openat2" => {
            let access = e.access.as_deref().unwrap_or("read");
            access != "read" && names(&e.paths)
        }
        "creat" | "mkdir" | "mkdirat" | "rename" | "renameat" | "renameat2" | "link" | "linkat"
        | "symlink" | "symlinkat" | "truncate" => names(&e.paths),
        _ => false,
    };
    made.then_some(MarkerEffect::Made)
}

fn is_shell(argv0: Option<&String>) -> bool {
    let name = argv0.map_or("", String::as_str);
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
    use crate::judge::testing::step;

    use serde_json::json;

    fn open(id: u64, tool: &str, path: &str, resolved: Option<&str>) -> Value {
        let mut e = json!({"event": "effect", "call": "openat", "paths": [path], "access": "read",
            "during": {"phase": "request", "id": id, "method": "tools/call", "tool": tool}});
        if let Some(r) = resolved {
            e["resolved"] = json!(r);
        }
        e
    }

    /// Each file's own token, and the variable's.
    const SSH: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ";
    const SYSTEM: &str = "9f2c6a1e0b7d4c3a8e5f1b2d6c9a0e7f";
    const SIBLING: &str = "4e1d8c2b7a6f5e3d9c0b1a2f8e7d6c5b";
    const ENV: &str = "Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4";

    fn canaries() -> Value {
        json!({"event": "canaries", "env": "SERVICE_API_TOKEN", "env_token": ENV,
            "files": ["/root/.ssh/id_ed25519", "/etc/secrets/service.key", "/workspace_secret/secret.txt"],
            "tokens": {"/root/.ssh/id_ed25519": SSH, "/etc/secrets/service.key": SYSTEM,
                "/workspace_secret/secret.txt": SIBLING},
            "sibling": "/workspace_secret", "link": "/workspace/.credentials"})
    }

    /// The events as the probe reads them; an effect gets the fields the
    /// agent always sends and the test does not care about. Each must read
    /// as its kind (a typo must not become an unknown line).
    fn typed(events: &[Value]) -> Vec<EventLine> {
        events
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if e["event"] == "effect" {
                    let o = e.as_object_mut().unwrap();
                    o.entry("uptime_ms").or_insert(json!(1));
                    o.entry("pid").or_insert(json!(1));
                    o.entry("exe").or_insert(json!("/usr/bin/node"));
                }
                let line: EventLine = serde_json::from_value(e.clone()).unwrap();
                assert!(!matches!(line.event, AnyEvent::Unknown(_)), "{e}");
                line
            })
            .collect()
    }

    /// A finding's evidence as it is written.
    fn evidence(f: &Finding, i: usize) -> Value {
        serde_json::to_value(&f.evidence[i]).unwrap()
    }

    fn judged(steps: &[StepResult], events: &[Value]) -> Vec<Finding> {
        judge(steps, &typed(events), &roots()).unwrap()
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
        let f = judged(&steps, &events);
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
        let f = judge(&steps[2..3], &typed(&events), &narrow).unwrap();
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
                json!({"content": [{"type": "text", "text": format!("{SIBLING}\n")}]}),
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
            // At start-up the server read a file that is no canary here.
            json!({"event": "effect", "call": "openat", "paths": ["/root/.aws/credentials"],
                "during": {"phase": "start_up"}}),
            open(3, "read_file", "/workspace_secret/secret.txt", None),
            open(4, "list", "/workspace", None),
        ];
        let f = judged(&steps, &events);
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
        assert_eq!(
            evidence(&f[0], 0)["paths"][0],
            "/workspace_secret/secret.txt"
        );
    }

    #[test]
    fn a_link_out_of_the_workspace_and_a_leaked_token_are_found() {
        let steps = vec![step(
            "tools/call:read",
            5,
            json!({"path": "/workspace/.credentials"}),
            json!({"content": [{"type": "text", "text": format!("key: {SYSTEM}")}]}),
        )];
        let events = vec![
            canaries(),
            open(
                5,
                "read",
                "/workspace/.credentials",
                Some("/etc/secrets/service.key"),
            ),
        ];
        let f = judged(&steps, &events);
        let rules: Vec<&str> = f.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(
            rules,
            ["symlink-escape", "canary-read", "token-in-answer"],
            "{f:#?}"
        );
        assert!(evidence(&f[2], 0).as_str().unwrap().contains(SYSTEM));
        assert!(
            f[2].why.contains("/etc/secrets/service.key"),
            "{}",
            f[2].why
        );
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

    /// A program `pid` started during request `id` (its exec).
    fn exec(id: u64, tool: &str, pid: u32, argv: &[&str]) -> Value {
        json!({"event": "effect", "call": "execve", "pid": pid, "paths": [argv[0]], "argv": argv,
            "during": {"phase": "request", "id": id, "method": "tools/call", "tool": tool}})
    }

    /// `pid` creating `path` during request `id`.
    fn create(id: u64, pid: u32, path: &str) -> Value {
        json!({"event": "effect", "call": "openat", "pid": pid, "paths": [path],
            "access": "write+create", "during": {"phase": "request", "id": id, "method": "tools/call"}})
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
            attack_step(
                5,
                "write",
                "command-injection",
                "x; touch /tmp/mcpvm-attack-5",
                None,
            ),
        ];
        let events = vec![
            canaries(),
            // A shell handed the text, which then runs touch: injection.
            exec(
                1,
                "run",
                10,
                &["/bin/sh", "-c", "echo x; touch /tmp/mcpvm-attack-1"],
            ),
            exec(1, "run", 11, &["touch", "/tmp/mcpvm-attack-1"]),
            // A shell the request started writes the marker itself.
            exec(
                2,
                "run",
                20,
                &["/bin/sh", "-c", "echo x > /tmp/mcpvm-attack-2"],
            ),
            create(2, 20, "/tmp/mcpvm-attack-2"),
            // The text as one argument of a program: quoted, no finding.
            exec(
                3,
                "log",
                30,
                &["/usr/bin/logger", "x; touch /tmp/mcpvm-attack-3"],
            ),
            exec(
                3,
                "log",
                31,
                &["/bin/sh", "-c", "touch /tmp/mcpvm-attack-3"],
            ),
            // git writes the file the option named.
            exec(
                4,
                "diff",
                40,
                &["git", "diff", "--output=/tmp/mcpvm-attack-4"],
            ),
            create(4, 40, "/tmp/mcpvm-attack-4"),
            // The server itself (started long before) writes the path it
            // read in its arguments: forged, not the payload's effect.
            create(5, 7, "/tmp/mcpvm-attack-5"),
        ];
        let f = judged(&steps, &events);
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
        let f = judged(&steps, &events);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].class, "ssrf");
        assert_eq!(evidence(&f[0], 0)["address"], "inet 169.254.169.254:80");
        // With a network, the egress proxy's event is evidence too (here
        // without a recording: the host refused it).
        let refused = json!({"event": "net", "kind": "connect", "address": "127.0.0.1", "port": 22,
            "allowed": false, "reason": "127.0.0.1 is loopback (127.0.0.0/8)",
            "during": {"phase": "request", "id": 2, "method": "tools/call"}});
        let f = judged(&steps, &[canaries(), refused]);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].class.as_str(), f[0].step.as_str()),
            ("ssrf", "attack:fetch")
        );
        assert_eq!(
            evidence(&f[0], 0)["reason"],
            "127.0.0.1 is loopback (127.0.0.0/8)"
        );
    }

    #[test]
    fn a_tool_that_shows_its_environment_is_no_finding_unless_attacked_into_it() {
        let env =
            json!({"content": [{"type": "text", "text": format!("SERVICE_API_TOKEN={ENV}")}]});
        let mut attacked = step("tools/call:debug", 2, json!({"q": "x"}), env.clone());
        attacked.step = "attack:debug".into();
        attacked.detail = json!({"attack": {"tool": "debug", "argument": "/q",
            "class": "command-injection", "payload": "$(env)", "marker": "m"}});
        let steps = vec![step("tools/call:get-env", 1, json!({}), env), attacked];
        let f = judged(&steps, &[canaries()]);
        let got: Vec<(&str, &str)> = f
            .iter()
            .map(|f| (f.rule.as_str(), f.step.as_str()))
            .collect();
        assert_eq!(got, [("token-in-answer", "attack:debug")], "{f:#?}");
    }

    /// A server that reads a canary at start-up, or 100 ms after its
    /// answer (between calls), is reported: unattributed, with the phase
    /// and the read, and no call to reproduce it.
    #[test]
    fn a_canary_read_outside_every_call_is_reported_as_unattributed() {
        let steps = vec![step(
            "tools/call:echo",
            2,
            json!({"text": "hi"}),
            json!({"content": [{"type": "text", "text": "hi"}]}),
        )];
        let read = |phase: Value| {
            json!({"event": "effect", "call": "openat", "pid": 7, "paths": ["/root/.ssh/id_ed25519"],
                "access": "read", "during": phase})
        };
        let events = vec![
            canaries(),
            read(json!({"phase": "start_up"})),
            read(json!({"phase": "between_calls"})),
            read(json!({"phase": "between_calls"})),
            // A request no step made (say, a robustness line): not a
            // step's, still a read.
            read(json!({"phase": "request", "id": 99, "method": "tools/call"})),
        ];
        let f = judged(&steps, &events);
        let got: Vec<(&str, &str, Option<&str>, usize)> = f
            .iter()
            .map(|f| {
                (
                    f.rule.as_str(),
                    f.step.as_str(),
                    f.call.as_deref(),
                    f.evidence.len(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("canary-read", "start-up", None, 1),
                ("canary-read", "between-calls", None, 2),
                ("canary-read", "unmatched-request", None, 1),
            ],
            "{f:#?}"
        );
        assert!(f[0].why.contains("unattributed"), "{}", f[0].why);
    }

    /// Tokens are per file and random: a server that prints something
    /// canary-like (the old fixed prefix, the variable's token with a
    /// file's suffix, a token of the right shape) has read nothing and
    /// gets no finding; only a file's own token, which it can only have
    /// from that file, counts.
    #[test]
    fn a_server_printing_a_guessed_token_gets_no_finding() {
        let guesses = [
            "MCPVM-CANARY-00ff-ssh".to_string(),
            format!("{ENV}-ssh"),
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZZ".to_string(),
            SSH[..20].to_string(),
        ];
        let steps: Vec<StepResult> = guesses
            .iter()
            .enumerate()
            .map(|(i, g)| {
                step(
                    "tools/call:whoami",
                    i as u64 + 1,
                    json!({}),
                    json!({"content": [{"type": "text", "text": g}]}),
                )
            })
            .collect();
        assert_eq!(judged(&steps, &[canaries()]), vec![]);
        let real = step(
            "tools/call:whoami",
            9,
            json!({}),
            json!({"content": [{"type": "text", "text": format!("key {SSH}")}]}),
        );
        let f = judged(&[real], &[canaries()]);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].why.contains("/root/.ssh/id_ed25519"), "{}", f[0].why);
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
        assert_eq!(judged(&steps, &events), vec![]);
        // Without canaries nothing is judged, and that is said.
        let e = judge(&steps, &typed(&events[1..]), &roots()).unwrap_err();
        assert!(e.contains("could not be judged"), "{e}");
    }
}
