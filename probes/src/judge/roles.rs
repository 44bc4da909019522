//! The roles each tool was seen to play, from what its calls made the
//! server do inside the VM (the recorded effects and the egress proxy's
//! events, attributed to the call's request), not from its description:
//!
//! - `reads_private`: it opened a canary or a file outside the roots it
//!   was given (the runtime and `/tmp` apart; a path that was not there
//!   read nothing), or a canary's token came back in its answer;
//! - `untrusted_content`: it reached for the network (a lookup or a
//!   connection, allowed or refused): what it returns can come from
//!   whoever answers. A browser looks hosts up on its own (updates,
//!   safe browsing) whatever call is in flight, so for a server with
//!   background lookups only a lookup naming a value of the call's
//!   arguments (the page it was asked to open) counts;
//! - `public_sink`: it tried to send something of its arguments off the
//!   VM (a lookup or connection naming a value it was given), or wrote
//!   outside its roots;
//! - `destructive`: it deleted or renamed a file, or ran a command the
//!   call chose (a value of its arguments in the program run, or in the
//!   code handed to a shell or interpreter).
//!
//! A role its annotations claim (`destructiveHint`, `openWorldHint`) and
//! no call showed is `declared`, apart from what was `observed`. Issue
//! 50's flows across servers compose these.

use mcpvm_protocol::messages::{During, EventLine};
use serde_json::Value;

use crate::judge::effects::{requests, step_of, RUNTIME};
use crate::judge::findings::{paths, within, Canaries, Evidence};
use crate::report::result::StepResult;
use crate::transport::exchange::Direction;

pub use crate::report::result::{Role, Seen, ToolRoles};

/// The system's own configuration and caches: world-readable settings
/// (fonts, the OS release, the resolver) and what programs cache for
/// themselves. No user's data is there (a secret planted under /etc is
/// a canary, judged as one first), so reading or writing them plays no
/// role; the per-call effects still list them.
const SYSTEM: &[&str] = &["/etc/", "/var/cache/", "/var/tmp/"];

/// Evidence kept per role.
const MAX_EVIDENCE: usize = 3;
/// An argument value shorter than this proves nothing by appearing in a
/// host name.
const MIN_VALUE: usize = 4;

/// The roles each tool's annotations claim.
pub fn declared(tools: &[rmcp::model::Tool]) -> Vec<ToolRoles> {
    tools
        .iter()
        .filter_map(|t| {
            let a = t.annotations.as_ref()?;
            let mut roles = Vec::new();
            if a.destructive_hint == Some(true) {
                roles.push(Role::Destructive);
            }
            if a.open_world_hint == Some(true) {
                roles.push(Role::UntrustedContent);
            }
            (!roles.is_empty()).then(|| ToolRoles {
                tool: t.name.to_string(),
                declared: roles,
                ..ToolRoles::default()
            })
        })
        .collect()
}

/// Adds to `roles` what each tool's calls (`tools/call:` and `attack:`
/// steps) were seen to do; a declared role seen is observed only.
/// `background_lookups`: the server runs a browser, whose own lookups
/// are no call's.
pub fn observe(
    roles: &mut Vec<ToolRoles>,
    steps: &[StepResult],
    events: &[EventLine],
    roots: &[String],
    background_lookups: bool,
) {
    let canaries = Canaries::from_events(events);
    let made = Made::of(events);
    let effects: Vec<(&EventLine, &During)> = events
        .iter()
        .filter_map(|e| Some((e, e.event.during()?)))
        .collect();
    for step in steps {
        let Some(tool) = step
            .step
            .strip_prefix("tools/call:")
            .or(step.step.strip_prefix("attack:"))
        else {
            continue;
        };
        let sent = requests(&step.exchange);
        let mine: Vec<&EventLine> = effects
            .iter()
            .filter(|(_, d)| step_of(d, std::slice::from_ref(&sent)).is_some())
            .map(|(e, _)| *e)
            .collect();
        let cx = Call {
            step,
            mine: &mine,
            canaries: canaries.as_ref(),
            roots,
            values: argument_values(step),
            background_lookups,
            made: &made,
        };
        for (role, seen) in cx.roles() {
            let entry = match roles.iter_mut().position(|r| r.tool == tool) {
                Some(i) => &mut roles[i],
                None => {
                    roles.push(ToolRoles {
                        tool: tool.to_string(),
                        ..ToolRoles::default()
                    });
                    roles.last_mut().expect("pushed")
                }
            };
            entry.declared.retain(|r| *r != role);
            entry.observed.entry(role).or_insert(seen);
        }
    }
    roles.sort_by(|a, b| a.tool.cmp(&b.tool));
}

struct Call<'a> {
    step: &'a StepResult,
    mine: &'a [&'a EventLine],
    canaries: Option<&'a Canaries>,
    roots: &'a [String],
    /// The string values of the call's arguments, long enough to mean
    /// something where they appear.
    values: Vec<String>,
    background_lookups: bool,
    made: &'a Made<'a>,
}

/// The paths the server's own processes made during the run, and when
/// (`EventLine::at_ms`): a file it opened with O_CREAT, a directory it
/// made, the new name of a rename or link. Deleting or renaming one of
/// these destroys nothing that was there before the server: a cache or
/// telemetry exporter writes to a temporary name and renames it into
/// place (azure's `/var/tmp/Microsoft/AzureMonitor/….blob.tmp` on every
/// call), git takes `index.lock` and renames it over the index. What it
/// did not make (the user's files, the image's) still counts. An O_CREAT
/// open of a file that was there already reads as made: a server that
/// opens the user's file so and then deletes it is missed, a trade for
/// not calling every atomic write a destruction.
struct Made<'a>(std::collections::HashMap<&'a str, f64>);

impl<'a> Made<'a> {
    fn of(events: &'a [EventLine]) -> Made<'a> {
        let mut made = std::collections::HashMap::new();
        for e in events {
            let Some(c) = e.event.effect() else { continue };
            // Denied, or a rename of a path that was not there: nothing made.
            if c.denied.is_some() || c.missing {
                continue;
            }
            let path = match c.call.as_str() {
                "open" | "openat" | "openat2" | "creat"
                    if c.access.as_deref().is_some_and(|a| a.contains("create")) =>
                {
                    c.paths.first()
                }
                "mkdir" | "mkdirat" => c.paths.first(),
                "rename" | "renameat" | "renameat2" | "link" | "linkat" => c.paths.get(1),
                "symlink" | "symlinkat" => c.paths.first(),
                _ => None,
            };
            if let Some(p) = path {
                // The first time it was made is what counts.
                made.entry(p.as_str()).or_insert(e.at_ms);
            }
        }
        Made(made)
    }

    /// Made by the server at or before `at_ms`.
    fn before(&self, path: &str, at_ms: f64) -> bool {
        self.0.get(path).is_some_and(|at| *at <= at_ms)
    }
}

impl Call<'_> {
    fn roles(&self) -> Vec<(Role, Seen)> {
        let mut out = Vec::new();
        let mut add = |role, why: &str, evidence: Vec<Evidence>| {
            if !evidence.is_empty() {
                out.push((
                    role,
                    Seen {
                        step: self.step.step.clone(),
                        why: why.to_string(),
                        evidence: evidence.into_iter().take(MAX_EVIDENCE).collect(),
                    },
                ));
            }
        };
        let private = self.events(|e| self.reads_private(e));
        let private = match private.is_empty() {
            true => self.token_in_answer(),
            false => private,
        };
        add(
            Role::ReadsPrivate,
            "it read a secret or a file outside its roots",
            private,
        );
        add(
            Role::UntrustedContent,
            "it reached for the network",
            self.events(|e| self.reaches_out(e)),
        );
        let sink = self.events(|e| self.sends_arguments(e) || self.writes_outside(e));
        add(
            Role::PublicSink,
            "it sent its arguments off the VM or wrote outside its roots",
            sink,
        );
        add(
            Role::Destructive,
            "it deleted or renamed a file, or ran a command its arguments chose",
            self.events(|e| self.destroys(e)),
        );
        out
    }

    fn events(&self, keep: impl Fn(&EventLine) -> bool) -> Vec<Evidence> {
        self.mine
            .iter()
            .filter(|e| keep(e))
            .map(|e| Evidence::Event(Box::new((*e).clone())))
            .collect()
    }

    fn outside_roots(&self, path: &str) -> bool {
        // The root directory's own entries ("/", "/.", a runtime's
        // lookup of "/.npmrc" from a server started in "/") hold nothing
        // of the user's; what is planted there is a canary, judged apart.
        let top_level = path.rfind('/') == Some(0);
        path.starts_with('/')
            && !top_level
            && !RUNTIME.iter().chain(SYSTEM).any(|r| path.starts_with(r))
            && !within(path, "/tmp")
            && !self.roots.iter().any(|r| within(path, r))
    }

    /// The paths an effect writes: a symlink's link, not its target,
    /// which is only text (`symlink(target, link)`).
    fn written<'e>(&self, e: &'e EventLine) -> Vec<&'e str> {
        match e.event.effect() {
            Some(c) if c.call.starts_with("symlink") => {
                c.paths.first().map(String::as_str).into_iter().collect()
            }
            _ => paths(e).collect(),
        }
    }

    fn reads_private(&self, e: &EventLine) -> bool {
        let Some(c) = e.event.effect() else {
            return false;
        };
        // A path that was not there read nothing (Chromium opens
        // "queue/rotational" from "/" when it finds no disk in sysfs).
        let read = c.call.starts_with("open")
            && !c.missing
            && c.access
                .as_deref()
                .is_none_or(|a| a.starts_with("read") && !a.contains("create"));
        let canary = |p: &str| {
            self.canaries
                .is_some_and(|k| k.files.iter().any(|f| f == p))
        };
        read && paths(e).any(|p| canary(p) || self.outside_roots(p))
    }

    fn token_in_answer(&self) -> Vec<Evidence> {
        let Some(k) = self.canaries else {
            return Vec::new();
        };
        let tokens: Vec<&String> = k
            .tokens
            .iter()
            .map(|(_, t)| t)
            .chain(&k.env_token)
            .collect();
        self.step
            .exchange
            .iter()
            .filter(|x| x.dir == Direction::Received)
            .filter_map(|x| x.message.as_ref().map(Value::to_string))
            .filter(|text| tokens.iter().any(|t| text.contains(t.as_str())))
            .map(|_| Evidence::Excerpt("a canary's token is in its answer".into()))
            .take(1)
            .collect()
    }

    /// A lookup or connection the call made: with background lookups,
    /// only one naming what the call was given (a connection's address
    /// alone names nothing, and the browser makes its own).
    fn reaches_out(&self, e: &EventLine) -> bool {
        match self.background_lookups {
            true => self.sends_arguments(e),
            false => e.event.net().is_some() || self.connects_out(e),
        }
    }

    /// A connection the guest made to an internet address (its own
    /// loopback and Unix sockets apart).
    fn connects_out(&self, e: &EventLine) -> bool {
        e.event.effect().is_some_and(|c| {
            matches!(c.call.as_str(), "connect" | "sendto")
                && c.address.as_deref().is_some_and(|a| {
                    (a.starts_with("inet ") || a.starts_with("inet6 "))
                        && !a.contains(" 127.")
                        && !a.contains("[::1]")
                })
        })
    }

    fn sends_arguments(&self, e: &EventLine) -> bool {
        let Some(n) = e.event.net() else { return false };
        let target = format!(
            "{} {}",
            n.name.as_deref().unwrap_or_default(),
            n.address.as_deref().unwrap_or_default()
        )
        .to_lowercase();
        self.values.iter().any(|v| target.contains(v.as_str()))
    }

    fn writes_outside(&self, e: &EventLine) -> bool {
        let Some(c) = e.event.effect() else {
            return false;
        };
        // A call on a path that was not there (not made by it) fails.
        let writes = !c.missing
            && match c.call.as_str() {
                "open" | "openat" | "openat2" => c.access.as_deref().is_some_and(|a| {
                    !a.starts_with("read") || a.contains("create") || a == "read-write"
                }),
                "execve" | "execveat" | "connect" | "sendto" | "bind" | "listen" => false,
                _ => true,
            };
        writes && self.written(e).into_iter().any(|p| self.outside_roots(p))
    }

    /// A path whose loss destroys nothing of the user's: under /tmp, or
    /// made by the server itself earlier in the run.
    fn own(&self, path: &str, at_ms: f64) -> bool {
        within(path, "/tmp") || self.made.before(path, at_ms)
    }

    fn destroys(&self, e: &EventLine) -> bool {
        let Some(c) = e.event.effect() else {
            return false;
        };
        match c.call.as_str() {
            // A command the call chose: a value of its arguments in the
            // program run, or in the code handed to a shell or
            // interpreter (`sh -c`, `python -c`, `node -e`). A value that
            // is only an operand of a program the server chose (`git diff
            // HEAD`, a file to convert) is how the tool works, as is a
            // helper it starts on its own (a browser on its first page).
            "execve" | "execveat" => {
                let chosen = |s: &str| {
                    let s = s.to_lowercase();
                    self.values.iter().any(|v| s.contains(v.as_str()))
                };
                let code = c.argv.windows(2).any(|w| {
                    matches!(
                        w[0].as_str(),
                        "-c" | "-lc" | "-e" | "--eval" | "-p" | "--print"
                    ) && chosen(&w[1])
                });
                c.argv.first().is_some_and(|p| chosen(p)) || code
            }
            // What it removes, or moves away from its name: a rename's
            // new name is a write, judged as one (`writes_outside`). A
            // path that was not there is not removed (git unlinks
            // MERGE_HEAD and SQUASH_MSG on every checkout).
            "unlink" | "unlinkat" | "rmdir" | "rename" | "renameat" | "renameat2" => {
                !c.missing && c.paths.first().is_some_and(|p| !self.own(p, e.at_ms))
            }
            _ => false,
        }
    }
}

/// The string values of a step's call arguments (nested ones too),
/// lowercased: what would show in a host name the server then looked up.
fn argument_values(step: &StepResult) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.len() >= MIN_VALUE => {
                // A URL's host is what a lookup names.
                let s = s.to_lowercase();
                let host = s
                    .split("://")
                    .nth(1)
                    .and_then(|r| r.split(['/', ':', '?', '#']).next())
                    .unwrap_or(&s)
                    .to_string();
                if host.len() >= MIN_VALUE {
                    out.push(host);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for x in &step.exchange {
        if x.dir != Direction::Sent {
            continue;
        }
        if let Some(args) = x
            .message
            .as_ref()
            .and_then(|m| m.get("params")?.get("arguments"))
        {
            walk(args, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::testing::step;

    use mcpvm_protocol::messages::AnyEvent;
    use serde_json::json;

    fn during(id: u64, tool: &str) -> Value {
        json!({"phase": "request", "id": id, "method": "tools/call", "tool": tool})
    }

    fn effect(id: u64, tool: &str, call: &str, fields: Value) -> Value {
        let mut e = json!({"event": "effect", "call": call, "uptime_ms": 1, "pid": 7,
            "exe": "/usr/bin/node", "during": during(id, tool)});
        for (k, v) in fields.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    }

    fn typed(events: &[Value]) -> Vec<EventLine> {
        events
            .iter()
            .map(|e| {
                let line: EventLine = serde_json::from_value(e.clone()).unwrap();
                assert!(!matches!(line.event, AnyEvent::Unknown(_)), "{e}");
                line
            })
            .collect()
    }

    const TOKEN: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ";

    fn canaries() -> Value {
        json!({"event": "canaries", "env": "SERVICE_API_TOKEN", "env_token": "Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4",
            "files": ["/root/.ssh/id_ed25519"], "tokens": {"/root/.ssh/id_ed25519": TOKEN},
            "sibling": "/workspace_secret", "link": "/workspace/.credentials"})
    }

    fn roles_of(
        steps: &[StepResult],
        events: &[Value],
        annotated: Vec<ToolRoles>,
    ) -> Vec<ToolRoles> {
        roles_seen(steps, events, annotated, false)
    }

    fn roles_seen(
        steps: &[StepResult],
        events: &[Value],
        annotated: Vec<ToolRoles>,
        background_lookups: bool,
    ) -> Vec<ToolRoles> {
        let mut roles = annotated;
        observe(
            &mut roles,
            steps,
            &typed(events),
            &["/workspace".to_string()],
            background_lookups,
        );
        roles
    }

    fn lookup(id: u64, tool: &str, name: &str) -> Value {
        json!({"event": "net", "kind": "dns", "name": name, "allowed": false,
            "reason": "not allowed", "bytes_out": 0, "bytes_in": 0, "duration_ms": 0.1,
            "during": during(id, tool)})
    }

    fn observed(r: &[ToolRoles], tool: &str) -> Vec<Role> {
        r.iter()
            .find(|t| t.tool == tool)
            .map(|t| t.observed.keys().copied().collect())
            .unwrap_or_default()
    }

    #[test]
    fn each_role_is_seen_from_what_the_call_did() {
        let steps = [
            step(
                "tools/call:read_secret",
                1,
                json!({"path": "/workspace/a"}),
                json!({}),
            ),
            step(
                "tools/call:fetch",
                2,
                json!({"url": "https://attacker.example/x"}),
                json!({}),
            ),
            step(
                "tools/call:clean",
                3,
                json!({"path": "/workspace/old"}),
                json!({}),
            ),
            step("tools/call:echo", 4, json!({"text": "hello"}), json!({})),
            step(
                "tools/call:leak",
                5,
                json!({}),
                json!({"content": [{"type": "text", "text": TOKEN}]}),
            ),
        ];
        let events = [
            canaries(),
            effect(
                1,
                "read_secret",
                "openat",
                json!({"paths": ["/root/.ssh/id_ed25519"], "access": "read"}),
            ),
            // The workspace and the runtime are its own.
            effect(
                4,
                "echo",
                "openat",
                json!({"paths": ["/workspace/notes.txt"], "access": "read"}),
            ),
            effect(
                4,
                "echo",
                "openat",
                json!({"paths": ["/usr/lib/node/x.js"], "access": "read"}),
            ),
            json!({"event": "net", "kind": "dns", "name": "attacker.example", "allowed": false,
                "reason": "not allowed", "bytes_out": 0, "bytes_in": 0, "duration_ms": 0.1,
                "during": during(2, "fetch")}),
            effect(3, "clean", "unlinkat", json!({"paths": ["/workspace/old"]})),
        ];
        let r = roles_of(&steps, &events, Vec::new());
        assert_eq!(observed(&r, "read_secret"), [Role::ReadsPrivate]);
        assert_eq!(
            observed(&r, "fetch"),
            [Role::UntrustedContent, Role::PublicSink]
        );
        assert_eq!(observed(&r, "clean"), [Role::Destructive]);
        assert_eq!(observed(&r, "echo"), []);
        assert_eq!(observed(&r, "leak"), [Role::ReadsPrivate]);
        let fetch = &r.iter().find(|t| t.tool == "fetch").unwrap().observed[&Role::PublicSink];
        assert_eq!(fetch.step, "tools/call:fetch");
        assert_eq!(fetch.evidence.len(), 1);
    }

    /// git unlinks MERGE_HEAD, SQUASH_MSG and AUTO_MERGE on every
    /// checkout, whether a merge left them or not: a removal of a path
    /// that was not there (the agent's `missing`) removed nothing.
    #[test]
    fn removing_a_path_that_was_not_there_destroys_nothing() {
        let steps = [
            step("tools/call:checkout", 1, json!({"branch": "b"}), json!({})),
            step(
                "tools/call:rm",
                2,
                json!({"path": "/workspace/x"}),
                json!({}),
            ),
        ];
        let events = [
            effect(
                1,
                "checkout",
                "unlink",
                json!({"paths": ["/workspace/repo/.git/MERGE_HEAD"], "missing": true}),
            ),
            effect(
                1,
                "checkout",
                "rename",
                json!({"paths": ["/workspace/repo/.git/gone", "/workspace/repo/.git/x"], "missing": true}),
            ),
            effect(2, "rm", "unlinkat", json!({"paths": ["/workspace/x"]})),
        ];
        let r = roles_of(&steps, &events, Vec::new());
        assert_eq!(observed(&r, "checkout"), []);
        assert_eq!(observed(&r, "rm"), [Role::Destructive]);
        // Outside the roots, the same: no write, so no sink either.
        let outside = [effect(
            1,
            "checkout",
            "unlink",
            json!({"paths": ["/home/mcp/.gitconfig.lock"], "missing": true}),
        )];
        assert_eq!(
            observed(&roles_of(&steps, &outside, Vec::new()), "checkout"),
            []
        );
    }

    /// Azure's telemetry exporter writes each call's record to a
    /// temporary name under /var/tmp and renames it into place, and git
    /// renames its own index.lock over the index: the server's own files,
    /// no call's destruction. What the server did not make (a file of the
    /// image, the user's) still is.
    #[test]
    fn a_file_the_server_made_itself_is_its_own_to_rename_or_delete() {
        let at = |mut e: Value, ms: f64| {
            e["at_ms"] = json!(ms);
            e
        };
        let tmp = "/var/tmp/Monitor/1.blob.tmp";
        let lock = "/workspace/repo/.git/index.lock";
        let steps = [
            step("tools/call:docs", 1, json!({"q": "storage"}), json!({})),
            step("tools/call:tidy", 2, json!({"q": "x"}), json!({})),
            step(
                "tools/call:status",
                3,
                json!({"repo": "/workspace/repo"}),
                json!({}),
            ),
            step("tools/call:drop", 4, json!({"name": "n"}), json!({})),
        ];
        let effect_at = |id, tool, call, fields, ms| at(effect(id, tool, call, fields), ms);
        let events = [
            effect_at(
                1,
                "docs",
                "mkdirat",
                json!({"paths": ["/var/tmp/Monitor"]}),
                1.0,
            ),
            effect_at(
                1,
                "docs",
                "openat",
                json!({"paths": [tmp], "access": "write+create"}),
                2.0,
            ),
            effect_at(
                1,
                "docs",
                "rename",
                json!({"paths": [tmp, "/var/tmp/Monitor/1.blob"]}),
                3.0,
            ),
            effect_at(
                1,
                "docs",
                "unlinkat",
                json!({"paths": ["/var/tmp/Monitor/1.blob"]}),
                4.0,
            ),
            // Not made by it: the image's own file.
            effect_at(2, "tidy", "unlinkat", json!({"paths": ["/etc/motd"]}), 5.0),
            effect_at(
                3,
                "status",
                "openat",
                json!({"paths": [lock], "access": "write+create"}),
                6.0,
            ),
            effect_at(
                3,
                "status",
                "rename",
                json!({"paths": [lock, "/workspace/repo/.git/index"]}),
                7.0,
            ),
            // The user's file, which it did not make.
            effect_at(
                4,
                "drop",
                "unlinkat",
                json!({"paths": ["/workspace/data.json"]}),
                8.0,
            ),
        ];
        let r = roles_of(&steps, &events, Vec::new());
        assert_eq!(observed(&r, "docs"), []);
        assert_eq!(observed(&r, "tidy"), [Role::Destructive]);
        assert_eq!(observed(&r, "status"), []);
        assert_eq!(observed(&r, "drop"), [Role::Destructive]);
        // Made later than it is removed is not made before.
        let late = [
            effect_at(2, "tidy", "unlinkat", json!({"paths": ["/var/lib/x"]}), 1.0),
            effect_at(
                2,
                "tidy",
                "openat",
                json!({"paths": ["/var/lib/x"], "access": "write+create"}),
                2.0,
            ),
        ];
        assert!(observed(&roles_of(&steps, &late, Vec::new()), "tidy").contains(&Role::Destructive));
    }

    /// The git server runs `git diff --unified=3 HEAD` for
    /// `git_diff(target="HEAD")`: the call chose an operand, not the
    /// command. A shell handed the call's text, or a program the call
    /// names, is a command it chose.
    #[test]
    fn a_command_is_the_call_s_when_it_chose_the_program_or_its_code() {
        let steps = [
            step("tools/call:diff", 1, json!({"target": "HEAD"}), json!({})),
            step(
                "tools/call:run",
                2,
                json!({"text": "hi; touch /x"}),
                json!({}),
            ),
            step(
                "tools/call:tool",
                3,
                json!({"name": "/usr/bin/shred"}),
                json!({}),
            ),
            step(
                "tools/call:eval",
                4,
                json!({"code": "process.exit(3)"}),
                json!({}),
            ),
        ];
        let exec = |id, tool, argv: Value| {
            effect(
                id,
                tool,
                "execve",
                json!({"paths": [argv[0].clone()], "argv": argv}),
            )
        };
        let events = [
            exec(1, "diff", json!(["git", "diff", "--unified=3", "HEAD"])),
            exec(2, "run", json!(["/bin/sh", "-c", "echo hi; touch /x"])),
            exec(3, "tool", json!(["/usr/bin/shred", "-u", "/workspace/a"])),
            exec(4, "eval", json!(["node", "-e", "process.exit(3)"])),
        ];
        let r = roles_of(&steps, &events, Vec::new());
        assert_eq!(observed(&r, "diff"), []);
        for t in ["run", "tool", "eval"] {
            assert_eq!(observed(&r, t), [Role::Destructive], "{t}");
        }
    }

    #[test]
    fn a_browser_started_by_a_call_gives_that_call_no_role_of_its_own() {
        // What chrome-devtools' and playwright's first browser call did in
        // the corpus: node runs Chromium (a helper, not a command the call
        // chose), Debian's wrapper reads its config and the root
        // directory, Chromium links its profile lock to a text target.
        let steps = [
            step(
                "tools/call:console",
                1,
                json!({"level": "error"}),
                json!({}),
            ),
            step(
                "tools/call:shell",
                2,
                json!({"command": "rm -rf /data"}),
                json!({}),
            ),
        ];
        let events = [
            canaries(),
            effect(
                1,
                "console",
                "execve",
                json!({"paths": ["/usr/bin/chromium"],
                "argv": ["/usr/bin/chromium", "--headless", "--user-data-dir=/tmp/p"]}),
            ),
            effect(
                1,
                "console",
                "openat",
                json!({"paths": ["/etc/chromium.d/apikeys"], "access": "read"}),
            ),
            effect(
                1,
                "console",
                "openat",
                json!({"paths": ["/.npmrc"], "access": "read"}),
            ),
            effect(
                1,
                "console",
                "openat",
                json!({"paths": ["/queue/rotational"], "access": "read", "missing": true}),
            ),
            effect(
                1,
                "console",
                "symlink",
                json!({"paths": ["/tmp/p/SingletonLock", "(none)-82"]}),
            ),
            effect(
                1,
                "console",
                "openat",
                json!({"paths": ["/etc/fonts/fonts.conf"], "access": "read"}),
            ),
            effect(
                1,
                "console",
                "openat",
                json!({"paths": ["/var/cache/fontconfig/x.cache-8"], "access": "read-write+create"}),
            ),
            effect(
                2,
                "shell",
                "execve",
                json!({"paths": ["/bin/sh"],
                "argv": ["/bin/sh", "-c", "rm -rf /data"]}),
            ),
        ];
        let r = roles_of(&steps, &events, Vec::new());
        assert_eq!(observed(&r, "console"), []);
        assert_eq!(observed(&r, "shell"), [Role::Destructive]);
    }

    #[test]
    fn a_browser_s_own_lookups_during_a_call_are_not_the_call_s() {
        // chrome-devtools in the corpus: Chromium looked up its update and
        // safe-browsing hosts while `fill` and `take_screenshot` were in
        // flight; `navigate_page` looked up the page it was given.
        let steps = [
            step(
                "tools/call:fill",
                1,
                json!({"uid": "1_2", "value": "mcpvm"}),
                json!({}),
            ),
            step(
                "tools/call:navigate_page",
                2,
                json!({"url": "https://attacker.example/page"}),
                json!({}),
            ),
        ];
        let events = [
            canaries(),
            lookup(1, "fill", "update.googleapis.com"),
            effect(
                1,
                "fill",
                "connect",
                json!({"address": "inet 10.0.2.15:443"}),
            ),
            lookup(2, "navigate_page", "safebrowsing.googleapis.com"),
            lookup(2, "navigate_page", "attacker.example"),
        ];
        let r = roles_seen(&steps, &events, Vec::new(), true);
        assert_eq!(observed(&r, "fill"), []);
        assert_eq!(
            observed(&r, "navigate_page"),
            [Role::UntrustedContent, Role::PublicSink]
        );
        let nav = &r
            .iter()
            .find(|t| t.tool == "navigate_page")
            .unwrap()
            .observed;
        let Evidence::Event(e) = &nav[&Role::UntrustedContent].evidence[0] else {
            panic!("{nav:?}");
        };
        assert_eq!(
            e.event.net().unwrap().name.as_deref(),
            Some("attacker.example")
        );
        // The same events from a server without a browser: every lookup
        // in flight is the call's.
        let r = roles_seen(&steps, &events, Vec::new(), false);
        assert_eq!(observed(&r, "fill"), [Role::UntrustedContent]);
    }

    #[test]
    fn a_name_lookup_reads_the_resolver_s_files_and_no_private_data() {
        // A call that looks its upstream up (shortcut's, tavily's in the
        // corpus): node's resolver opens /etc/hosts and the rest first.
        let steps = [step(
            "tools/call:search",
            1,
            json!({"query": "mcpvm"}),
            json!({}),
        )];
        let mut events = vec![canaries()];
        for path in [
            "/etc/hosts",
            "/etc/resolv.conf",
            "/etc/svc.conf",
            "/etc/netsvc.conf",
        ] {
            events.push(effect(
                1,
                "search",
                "openat",
                json!({"paths": [path], "access": "read"}),
            ));
        }
        events.push(effect(
            1,
            "search",
            "connect",
            json!({"address": "inet 10.0.2.15:53"}),
        ));
        let r = roles_of(&steps, &events, Vec::new());
        assert_eq!(observed(&r, "search"), [Role::UntrustedContent]);
    }

    #[test]
    fn a_declared_role_a_call_showed_is_observed_only() {
        let steps = [step(
            "tools/call:rm",
            1,
            json!({"path": "/workspace/x"}),
            json!({}),
        )];
        let events = [
            canaries(),
            effect(1, "rm", "unlinkat", json!({"paths": ["/workspace/x"]})),
        ];
        let annotated = vec![ToolRoles {
            tool: "rm".into(),
            declared: vec![Role::Destructive, Role::UntrustedContent],
            ..ToolRoles::default()
        }];
        let r = roles_of(&steps, &events, annotated);
        assert_eq!(observed(&r, "rm"), [Role::Destructive]);
        assert_eq!(r[0].declared, [Role::UntrustedContent]);
        // As written in the probe's JSON.
        let v = serde_json::to_value(&r[0]).unwrap();
        assert_eq!(v["declared"], json!(["untrusted_content"]));
        assert_eq!(v["observed"]["destructive"]["step"], "tools/call:rm");
    }

    #[test]
    fn what_a_server_does_outside_any_call_is_no_tools_role() {
        let steps = [step(
            "tools/call:echo",
            1,
            json!({"text": "hello"}),
            json!({}),
        )];
        let events = [
            canaries(),
            json!({"event": "effect", "call": "execve", "uptime_ms": 1, "pid": 7, "exe": "/bin/sh",
                "argv": ["sh", "-c", "x"], "during": {"phase": "start_up"}}),
        ];
        assert_eq!(roles_of(&steps, &events, Vec::new()), []);
    }
}
