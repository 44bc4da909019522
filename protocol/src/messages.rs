//! What host and agent say to each other on CONTROL: the run spec, the
//! host's later messages, and the agent's events. One JSON object per line.

use serde::{Deserialize, Serialize};

use crate::withholding::Policy;

/// What to run, and how.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunSpec {
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub workspace: Option<Workspace>,
    /// A shell line run before the server (with its environment, output
    /// to its stderr), outside the policy: scaffolding such as creating a
    /// repository, not part of what is audited.
    #[serde(default)]
    pub setup: Option<String>,
    /// What is withheld from the server (the guest half of a profile).
    #[serde(default)]
    pub policy: Policy,
    /// The host may snapshot this run: listen for [`HostMessage`]s.
    #[serde(default)]
    pub snapshot: bool,
    /// The guest gets a network: the agent terminates its TCP and DNS
    /// and sends them to the host as egress requests (`crate::egress`),
    /// where the policy decides.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// The server speaks HTTP on this guest port: the agent forwards the
    /// host's connections on [`crate::ports::INBOUND_PORT`] to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound: Option<u16>,
}

/// Host to agent on CONTROL, one JSON object per line, after the run
/// spec (or, in a restored VM, instead of it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum HostMessage {
    /// The VM is about to be paused and written to a snapshot.
    Snapshot,
    /// The first line to a restored VM: what must differ from the
    /// snapshot and from every other VM restored from it.
    Resume {
        /// Host wall-clock time (ns since the epoch): the guest's clock
        /// stood still while the snapshot waited.
        unix_ns: u64,
        /// 64 bytes from the host's CSPRNG, hex: mixed into the guest's
        /// pool and credited, then the guest's CRNG reseeds.
        entropy: String,
        /// The guest's new hostname.
        hostname: String,
    },
}

/// A host directory handed to the server at [`crate::ports::WORKSPACE_DIR`].
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Workspace {
    /// Send it back after the server exits.
    pub writable: bool,
}

/// Agent to host, one JSON object per line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The agent is up and connected (guest uptime, ms).
    AgentStart {
        uptime_ms: u64,
    },
    Spawned {
        pid: u32,
    },
    FirstStdoutByte,
    /// The server could not be started.
    SpawnFailed {
        error: String,
    },
    /// The guest kernel's OOM killer ended a process while the server ran.
    OomKilled,
    /// With a seccomp policy, when the server has exited: the calls it
    /// was denied (with the errno it saw) and, in log mode, every call it
    /// made, with counts.
    Syscalls {
        denied: Vec<SyscallCount>,
        used: Vec<SyscallCount>,
        /// How `used` was counted (older agents: by notification).
        #[serde(default)]
        counted_by: Counter,
        /// Counted while the server still ran: it had not exited a few
        /// seconds after its stdin closed, and a server that keeps
        /// running is stopped with the VM, which would lose its counts.
        /// The event sent when it exits, if it does, replaces this one.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        while_running: bool,
    },
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
        status: u8,
    },
    /// Answer to [`HostMessage::Snapshot`]: the agent will reconnect.
    SnapshotReady,
    /// A restored VM's agent is connected again (guest uptime, ms).
    Resumed {
        uptime_ms: u64,
    },
    /// The canaries planted before the server started: any touch of one
    /// is evidence, and `token` in anything the server says is a leak.
    Canaries {
        /// Files whose reading is exposure.
        files: Vec<String>,
        /// Each file's own token (in its content, nowhere else): in
        /// anything the server says, that file was read and leaked.
        #[serde(default)]
        tokens: std::collections::BTreeMap<String, String>,
        /// The environment variable that holds [`Event::Canaries::env_token`].
        env: String,
        #[serde(default)]
        env_token: String,
        /// A directory beside the workspace, sharing its name's prefix.
        sibling: String,
        /// A link in the workspace to a canary outside it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        link: Option<String>,
    },
    /// One security-relevant call, as it happened (a recording policy).
    Effect(Box<Effect>),
    /// When the server has exited, under a recording policy: every
    /// recorded call counted, and how many were not sent as an
    /// [`Event::Effect`] (past the agent's bound).
    Effects {
        counts: Vec<SyscallCount>,
        dropped: u64,
    },
}

impl Event {
    /// The `event` tag it is written with, without writing it.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::AgentStart { .. } => "agent_start",
            Event::Spawned { .. } => "spawned",
            Event::FirstStdoutByte => "first_stdout_byte",
            Event::SpawnFailed { .. } => "spawn_failed",
            Event::OomKilled => "oom_killed",
            Event::Syscalls { .. } => "syscalls",
            Event::Exited { .. } => "exited",
            Event::SnapshotReady => "snapshot_ready",
            Event::Resumed { .. } => "resumed",
            Event::Canaries { .. } => "canaries",
            Event::Effect(_) => "effect",
            Event::Effects { .. } => "effects",
        }
    }
}

/// What the host adds to a run's events beside the agent's (one JSON
/// object per line in `--events`, the same `event` tag).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum HostEvent {
    /// Whether the VMM runs jailed (docs/security.md, "The jail"), and
    /// why not when it does not.
    Jail {
        jailed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A lookup or connection the egress proxy judged.
    Net(NetEvent),
    /// `net` events past the proxy's bound, counted, not written.
    NetEventsDropped { count: u64 },
    /// Agent events past `--events`' bound, counted, not written.
    EventsDropped { count: u64 },
}

/// One line of a run's `--events` file (JSON lines): an agent's event or
/// the host's, under one `event` tag, and when the host got it. This is
/// how mcpvm writes the file and how the probe and the audit read it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventLine {
    #[serde(flatten)]
    pub event: AnyEvent,
    /// When the host got it, ms since the run started.
    #[serde(default)]
    pub at_ms: f64,
}

/// An agent's event, the host's, or a line neither knows (a newer agent's
/// kind, or one that does not read as its kind): kept as it was, judged
/// by nothing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum AnyEvent {
    Agent(Event),
    Host(HostEvent),
    Unknown(serde_json::Value),
}

impl AnyEvent {
    /// A recorded call (a recording policy's `effect`).
    pub fn effect(&self) -> Option<&Effect> {
        match self {
            AnyEvent::Agent(Event::Effect(e)) => Some(e),
            _ => None,
        }
    }

    /// A lookup or connection the egress proxy judged.
    pub fn net(&self) -> Option<&NetEvent> {
        match self {
            AnyEvent::Host(HostEvent::Net(n)) => Some(n),
            _ => None,
        }
    }

    /// What the server was doing, for an effect or a net event (a net
    /// event without it came before the first request).
    pub fn during(&self) -> Option<&During> {
        static START_UP: During = During::StartUp;
        match (self.effect(), self.net()) {
            (Some(e), _) => Some(&e.during),
            (_, Some(n)) => Some(n.during.as_ref().unwrap_or(&START_UP)),
            _ => None,
        }
    }
}

impl EventLine {
    /// The lines of an `--events` file; a line that is not JSON is
    /// skipped (the host writes whole lines; only a cut file ends in half
    /// of one).
    pub fn parse_all(text: &str) -> Vec<EventLine> {
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// One DNS lookup or connection attempt the host's egress proxy judged
/// for the guest (`--events` shows it as a `net` event).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct NetEvent {
    /// "dns" or "connect".
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qtype: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// A lookup's answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    pub allowed: bool,
    /// Why it was denied, or why an allowed one failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub bytes_out: u64,
    pub bytes_in: u64,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub during: Option<During>,
}

/// A security-relevant system call of the server or of a process it
/// spawned, its arguments read from the caller's memory while it waited
/// (observation, not enforcement: a racing thread could change them).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Effect {
    /// Guest uptime, ms.
    pub uptime_ms: u64,
    pub pid: u32,
    /// The calling process's executable.
    pub exe: String,
    /// The system call's name.
    pub call: String,
    /// The paths it names, absolute as the caller meant them (relative
    /// ones joined to its directory): one, or two for rename and link.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Where the first path leads after symlinks, when that differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// An open's access: "read", "write" or "read-write", with "+create"
    /// and "+truncate".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// An exec's arguments (at most 64, 4 KiB).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// A socket address: "inet 10.0.0.1:80", "inet6 [::1]:22",
    /// "unix /run/x.sock", "unix @abstract".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The errno the policy answered instead of running the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// The call's path did not exist when the call was made, seen from
    /// the caller's root: an open for reading read nothing, a removal or
    /// a rename (which fails with ENOENT) changed nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    pub during: During,
}

/// What the server was doing when a call was made, as the agent saw its
/// stdio: JSON-RPC requests written to its stdin and not yet answered on
/// its stdout.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum During {
    /// Before the first request reached it.
    #[default]
    StartUp,
    /// A request in flight (the latest, if several are).
    Request {
        id: serde_json::Value,
        method: String,
        /// For `tools/call`: the tool's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
    },
    /// Every request so far answered.
    BetweenCalls,
    /// The server's own process had exited (a process it left running).
    AfterExit,
}

/// What counted the calls of a log-mode run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// The guest kernel, in a histogram on the `sys_enter` tracepoint:
    /// no round trip per call.
    KernelTrace,
    /// The agent, answering one seccomp user notification per call (a
    /// kernel without the histogram trigger).
    #[default]
    Notification,
}

/// One system call and how often it was seen.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SyscallCount {
    pub syscall: String,
    /// For a denied call: the errno returned (name), or "SIGSYS".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    pub count: u64,
}

impl HostMessage {
    /// The message as one line on CONTROL.
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("host messages serialize") + "\n"
    }
}

impl RunSpec {
    /// The spec as the first line on CONTROL.
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("run specs serialize") + "\n"
    }
}

#[cfg(test)]
mod tests {

    /// `Event::kind` names each event as serde writes its tag.
    #[test]
    fn an_events_kind_is_its_written_tag() {
        let effect = Effect {
            uptime_ms: 1,
            pid: 2,
            exe: "/bin/sh".into(),
            call: "openat".into(),
            paths: vec![],
            resolved: None,
            access: None,
            argv: vec![],
            address: None,
            denied: None,
            missing: false,
            during: During::StartUp,
        };
        let events = [
            Event::AgentStart { uptime_ms: 1 },
            Event::Spawned { pid: 1 },
            Event::FirstStdoutByte,
            Event::SpawnFailed { error: "e".into() },
            Event::OomKilled,
            Event::Syscalls {
                denied: vec![],
                used: vec![],
                counted_by: Counter::default(),
                while_running: false,
            },
            Event::Exited {
                code: Some(0),
                signal: None,
                status: 0,
            },
            Event::SnapshotReady,
            Event::Resumed { uptime_ms: 1 },
            Event::Canaries {
                files: vec![],
                tokens: Default::default(),
                env: "E".into(),
                env_token: String::new(),
                sibling: "/s".into(),
                link: None,
            },
            Event::Effect(Box::new(effect)),
            Event::Effects {
                counts: vec![],
                dropped: 0,
            },
        ];
        for e in events {
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["event"], e.kind(), "{v}");
        }
    }

    /// The host's events keep the `event` tag the agent's have, their
    /// fields beside it, and read back as written.
    #[test]
    fn host_events_are_tagged_like_the_agents_and_read_back() {
        let net = HostEvent::Net(NetEvent {
            kind: "connect".into(),
            name: Some("api.github.com".into()),
            address: Some("140.82.112.6".into()),
            port: Some(443),
            allowed: true,
            ..NetEvent::default()
        });
        let v = serde_json::to_value(&net).unwrap();
        assert_eq!(v["event"], "net");
        assert_eq!(v["kind"], "connect");
        assert_eq!(v["port"], 443);
        assert_eq!(serde_json::from_value::<HostEvent>(v).unwrap(), net);
        for (e, tag) in [
            (
                HostEvent::NetEventsDropped { count: 3 },
                "net_events_dropped",
            ),
            (HostEvent::EventsDropped { count: 2 }, "events_dropped"),
            (
                HostEvent::Jail {
                    jailed: false,
                    reason: Some("--jail off".into()),
                },
                "jail",
            ),
        ] {
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["event"], tag);
            assert_eq!(serde_json::from_value::<HostEvent>(v).unwrap(), e);
        }
    }

    use super::*;
    use crate::withholding::{Action, Rule, Seccomp, When};

    #[test]
    fn a_run_spec_round_trips_as_one_line() {
        let spec = RunSpec {
            argv: vec!["/bin/server".into(), "--flag".into()],
            env: vec![("KEY".into(), "a b".into())],
            cwd: Some("/srv".into()),
            workspace: Some(Workspace { writable: true }),
            setup: Some("git init".into()),
            policy: Policy {
                no_tmp: true,
                seccomp: Some(Seccomp {
                    rules: vec![Rule {
                        syscall: "execve".into(),
                        action: Action::Errno(1),
                        when: When::InChildren,
                    }],
                    log: true,
                    allow: None,
                    record: true,
                }),
                ..Policy::default()
            },
            snapshot: true,
            network: true,
            inbound: Some(3001),
        };
        let line = spec.line();
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        assert_eq!(serde_json::from_str::<RunSpec>(&line).unwrap(), spec);
    }

    #[test]
    fn event_lines_read_back_typed_with_their_time() {
        let effect = Event::Effect(Box::new(Effect {
            uptime_ms: 5,
            pid: 9,
            exe: "/usr/bin/node".into(),
            call: "openat".into(),
            paths: vec!["/etc/secrets/service.key".into()],
            access: Some("read".into()),
            during: During::Request {
                id: serde_json::json!(3),
                method: "tools/call".into(),
                tool: Some("read_file".into()),
            },
            ..Effect::default()
        }));
        let net = HostEvent::Net(NetEvent {
            kind: "dns".into(),
            name: Some("example.com".into()),
            ..NetEvent::default()
        });
        for event in [AnyEvent::Agent(effect), AnyEvent::Host(net)] {
            let line = EventLine { event, at_ms: 12.5 };
            let text = serde_json::to_string(&line).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["at_ms"], 12.5, "{text}");
            assert!(v["event"].is_string(), "{text}");
            assert_eq!(EventLine::parse_all(&text), vec![line]);
        }
        let lines = EventLine::parse_all(
            "{\"event\":\"net\",\"kind\":\"connect\",\"allowed\":true,\"at_ms\":1}\n\
             {\"event\":\"from_a_newer_agent\",\"x\":1,\"at_ms\":2}\n{\"event\":\"effect\",\"call\"",
        );
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].event.net().map(|n| n.allowed), Some(true));
        assert_eq!(lines[0].event.during(), Some(&During::StartUp));
        assert!(matches!(&lines[1].event, AnyEvent::Unknown(v) if v["x"] == 1));
        assert_eq!(lines[1].at_ms, 2.0);
    }

    #[test]
    fn messages_and_events_round_trip() {
        for m in [
            HostMessage::Snapshot,
            HostMessage::Resume {
                unix_ns: 7,
                entropy: "00ff".into(),
                hostname: "mcpvm-1".into(),
            },
        ] {
            assert_eq!(serde_json::from_str::<HostMessage>(&m.line()).unwrap(), m);
        }
        let e = Event::Syscalls {
            denied: vec![SyscallCount {
                syscall: "execve".into(),
                errno: Some("EPERM".into()),
                count: 5,
            }],
            used: vec![],
            counted_by: Counter::KernelTrace,
            while_running: false,
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains(r#""event":"syscalls""#), "{text}");
        assert!(
            !text.contains("while_running"),
            "said only when true: {text}"
        );
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), e);
        let running = Event::Syscalls {
            denied: vec![],
            used: vec![],
            counted_by: Counter::KernelTrace,
            while_running: true,
        };
        let text = serde_json::to_string(&running).unwrap();
        assert!(text.contains(r#""while_running":true"#), "{text}");
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), running);
        // An agent that predates the field counted by notification.
        let old = r#"{"event":"syscalls","denied":[],"used":[]}"#;
        assert!(matches!(
            serde_json::from_str::<Event>(old).unwrap(),
            Event::Syscalls {
                counted_by: Counter::Notification,
                ..
            }
        ));
    }
}
