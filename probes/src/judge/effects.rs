//! What each step made the server do, under a recording profile: the
//! guest agent's `effect` events (files, programs, addresses, each
//! attributed to the JSON-RPC request in flight) grouped by the step that
//! sent the request, and the rest by phase (start-up, between calls,
//! after exit).

use std::collections::BTreeMap;

use mcpvm_protocol::messages::{During, Effect, EventLine, NetEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transport::exchange::{Direction, Entry};

/// Distinct items kept per list; the rest are counted in `omitted`.
const MAX_ITEMS: usize = 50;

/// Reads under these belong to the runtime (the image, the server's own
/// layer, the kernel's pseudo files), not to what a call did.
pub(crate) const RUNTIME: &[&str] = &[
    "/usr/",
    "/lib/",
    "/lib64/",
    "/bin/",
    "/sbin/",
    "/opt/mcp/",
    "/proc/",
    "/sys/",
    "/dev/",
    "/etc/ld.so.",
    "/etc/localtime",
    "/etc/ssl/",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    // The resolver's own files, read by every name lookup (glibc's and
    // c-ares', which node uses): the system's, nobody's private data.
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/netsvc.conf",
    "/etc/svc.conf",
    "/etc/services",
    "/etc/protocols",
    // The browser's own configuration, from its package (Debian's
    // wrapper script reads /etc/chromium.d/ at every start).
    "/etc/chromium",
];

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Effects {
    /// Files opened for reading, outside the runtime.
    pub read: Vec<String>,
    /// Files opened for writing or created, removed, renamed, linked,
    /// made, their modes changed: every path the call names.
    pub written: Vec<String>,
    /// Programs run: their argv.
    pub executed: Vec<Vec<String>>,
    /// Addresses connected or sent to, bound, listened on.
    pub connected: Vec<String>,
    /// What the host's egress proxy saw (docs/network.md): each DNS
    /// lookup and connection, "dns NAME allowed" or "connect
    /// NAME@ADDR:PORT denied (why)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
    /// Recorded calls the policy denied.
    pub denied: u64,
    /// Every recorded call of this step (runtime reads included).
    pub calls: u64,
    /// Distinct items past what each list keeps.
    pub omitted: u64,
}

/// The recording as a whole: what happened outside any request, and how
/// much the agent could not send.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Recording {
    /// `start_up`, `between_calls`, `after_exit`.
    pub outside_calls: BTreeMap<String, Effects>,
    /// Recorded calls, all counted by the agent.
    pub recorded: u64,
    /// Of those, not sent as events (past the agent's bound).
    pub dropped: u64,
}

impl Effects {
    fn add(&mut self, e: &Effect) {
        self.calls += 1;
        if e.denied.is_some() {
            self.denied += 1;
        }
        let call = e.call.as_str();
        let paths = &e.paths;
        // Where a symlink led is what was touched.
        let first = e.resolved.as_deref().or(paths.first().map(String::as_str));
        let mut omitted = 0;
        let mut push = |list: &mut Vec<String>, item: &str| {
            if list.iter().any(|i| i == item) {
                return;
            }
            match list.len() < MAX_ITEMS {
                true => list.push(item.to_string()),
                false => omitted += 1,
            }
        };
        match call {
            "execve" | "execveat" => {
                if !self.executed.contains(&e.argv) {
                    match self.executed.len() < MAX_ITEMS {
                        true => self.executed.push(e.argv.clone()),
                        false => omitted += 1,
                    }
                }
            }
            "open" | "openat" | "openat2" => {
                let access = e.access.as_deref().unwrap_or("read");
                let Some(path) = first else { return };
                if access.starts_with("read")
                    && !access.contains("create")
                    && access != "read-write"
                {
                    if !RUNTIME.iter().any(|r| path.starts_with(r)) {
                        push(&mut self.read, path);
                    }
                } else {
                    push(&mut self.written, path);
                }
            }
            "connect" | "sendto" | "bind" | "listen" => {
                let address = e.address.as_deref().unwrap_or(call);
                push(&mut self.connected, address);
            }
            // A symlink's second "path" is its target's text, not a file.
            "symlink" | "symlinkat" => {
                if let Some(link) = paths.first() {
                    push(&mut self.written, link);
                }
            }
            _ => {
                if let Some(p) = first {
                    push(&mut self.written, p);
                }
                for p in paths.iter().skip(1) {
                    push(&mut self.written, p);
                }
            }
        }
        self.omitted += omitted;
    }

    /// A `net` event of the host's egress proxy.
    fn add_net(&mut self, e: &NetEvent) {
        let Some(item) = net_item(e) else { return };
        if self.network.contains(&item) {
            return;
        }
        match self.network.len() < MAX_ITEMS {
            true => self.network.push(item),
            false => self.omitted += 1,
        }
    }

    /// One line for a person.
    pub fn line(&self) -> String {
        let list = |items: &[String]| {
            let shown: Vec<&str> = items.iter().take(3).map(String::as_str).collect();
            let more = items.len().saturating_sub(3);
            match more {
                0 => shown.join(", "),
                n => format!("{} and {n} more", shown.join(", ")),
            }
        };
        let mut parts = Vec::new();
        if !self.read.is_empty() {
            parts.push(format!("read {}", list(&self.read)));
        }
        if !self.written.is_empty() {
            parts.push(format!("wrote {}", list(&self.written)));
        }
        if !self.executed.is_empty() {
            let argvs: Vec<String> = self.executed.iter().map(|a| a.join(" ")).collect();
            parts.push(format!("ran {}", list(&argvs)));
        }
        if !self.connected.is_empty() {
            parts.push(format!("connected to {}", list(&self.connected)));
        }
        if !self.network.is_empty() {
            parts.push(format!("network: {}", list(&self.network)));
        }
        if self.denied > 0 {
            parts.push(format!("{} denied", self.denied));
        }
        match parts.is_empty() {
            true => "nothing outside the runtime".into(),
            false => parts.join("; "),
        }
    }
}

/// A `net` event of the host's egress proxy in a line: "dns NAME
/// allowed", "connect NAME@ADDR:PORT denied (why)".
pub fn net_item(e: &NetEvent) -> Option<String> {
    let target = match (
        e.kind.as_str(),
        e.name.as_deref(),
        e.address.as_deref(),
        e.port,
    ) {
        ("dns", Some(n), ..) => format!("dns {n}"),
        (_, Some(n), Some(a), Some(p)) => format!("connect {n}@{a}:{p}"),
        (_, None, Some(a), Some(p)) => format!("connect {a}:{p}"),
        _ => return None,
    };
    let verdict = match (e.allowed, e.reason.as_deref()) {
        (true, None) => "allowed".to_string(),
        (true, Some(why)) => format!("allowed, failed ({why})"),
        (false, Some(why)) => format!("denied ({why})"),
        (false, None) => "denied".to_string(),
    };
    Some(format!("{target} {verdict}"))
}

/// The requests a step sent: (id, method) of each request line.
pub fn requests(exchange: &[Entry]) -> Vec<(Value, String)> {
    exchange
        .iter()
        .filter(|e| e.dir == Direction::Sent)
        .filter_map(|e| {
            let m = e.message.as_ref()?;
            let method = m.get("method")?.as_str()?;
            Some((m.get("id")?.clone(), method.to_string()))
        })
        .collect()
}

/// Groups the guest's events (the agent's `effect`s and the egress
/// proxy's `net` events): for each step (by the requests it sent), its
/// effects; and the recording as a whole. None when nothing was recorded
/// (no recording profile, no network).
pub fn group(
    events: &[EventLine],
    steps: &[Vec<(Value, String)>],
) -> Option<(Vec<Option<Effects>>, Recording)> {
    use mcpvm_protocol::messages::{AnyEvent, Event};
    let mut per_step: Vec<Option<Effects>> = vec![None; steps.len()];
    let mut recording = Recording::default();
    let mut any = false;
    for line in events {
        if let AnyEvent::Agent(Event::Effects { counts, dropped }) = &line.event {
            any = true;
            recording.recorded = counts.iter().map(|c| c.count).sum();
            recording.dropped = *dropped;
            continue;
        }
        let Some(during) = line.event.during() else {
            continue;
        };
        any = true;
        let into = match step_of(during, steps) {
            Some(i) => per_step[i].get_or_insert_with(Effects::default),
            None => recording
                .outside_calls
                .entry(phase(during).to_string())
                .or_default(),
        };
        match (line.event.effect(), line.event.net()) {
            (Some(e), _) => into.add(e),
            (_, Some(n)) => into.add_net(n),
            _ => {}
        }
    }
    any.then_some((per_step, recording))
}

/// The step whose requests include the one in flight.
pub fn step_of(during: &During, steps: &[Vec<(Value, String)>]) -> Option<usize> {
    let During::Request { id, method, .. } = during else {
        return None;
    };
    steps
        .iter()
        .position(|sent| sent.iter().any(|(i, m)| i == id && m == method))
}

/// The phase's name as the recording keys it.
pub fn phase(during: &During) -> &'static str {
    match during {
        During::StartUp => "start_up",
        During::Request { .. } => "request",
        During::BetweenCalls => "between_calls",
        During::AfterExit => "after_exit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The events as the probe reads them; each must read as its kind.
    fn typed(events: &[Value]) -> Vec<EventLine> {
        events
            .iter()
            .map(|e| {
                let line: EventLine = serde_json::from_value(e.clone()).unwrap();
                assert!(
                    !matches!(line.event, mcpvm_protocol::messages::AnyEvent::Unknown(_)),
                    "{e}"
                );
                line
            })
            .collect()
    }

    fn effect(call: &str, during: Value, extra: Value) -> Value {
        let mut e = json!({"event": "effect", "uptime_ms": 1, "pid": 9, "exe": "/usr/bin/node",
            "call": call, "during": during});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e
    }

    #[test]
    fn effects_go_to_the_step_that_sent_their_request() {
        let call =
            json!({"phase": "request", "id": 4, "method": "tools/call", "tool": "read_file"});
        let events = vec![
            effect(
                "openat",
                json!({"phase": "start_up"}),
                json!({"paths": ["/opt/mcp/fs/index.js"], "access": "read"}),
            ),
            effect(
                "openat",
                call.clone(),
                json!({"paths": ["/workspace/a.txt"], "access": "read"}),
            ),
            effect(
                "openat",
                call.clone(),
                json!({"paths": ["/workspace/link"], "resolved": "/etc/shadow", "access": "read"}),
            ),
            effect(
                "openat",
                call.clone(),
                json!({"paths": ["/usr/lib/x.so"], "access": "read"}),
            ),
            effect(
                "openat",
                call.clone(),
                json!({"paths": ["/tmp/out"], "access": "write+create+truncate"}),
            ),
            effect(
                "execve",
                call.clone(),
                json!({"paths": ["/bin/sh"], "argv": ["sh", "-c", "id"]}),
            ),
            effect(
                "connect",
                call.clone(),
                json!({"address": "inet 169.254.169.254:80", "denied": "EACCES"}),
            ),
            effect(
                "unlinkat",
                json!({"phase": "between_calls"}),
                json!({"paths": ["/workspace/b"]}),
            ),
            json!({"event": "effects", "counts": [{"syscall": "openat", "count": 7}], "dropped": 2}),
        ];
        let steps = vec![
            vec![(json!(0), "initialize".to_string())],
            vec![(json!(4), "tools/call".to_string())],
        ];
        let (per_step, recording) = group(&typed(&events), &steps).unwrap();
        assert_eq!(per_step[0], None);
        let e = per_step[1].as_ref().unwrap();
        assert_eq!(
            e.read,
            vec!["/workspace/a.txt", "/etc/shadow"],
            "runtime reads left out, symlinks followed"
        );
        assert_eq!(e.written, vec!["/tmp/out"]);
        assert_eq!(e.executed, vec![vec!["sh", "-c", "id"]]);
        assert_eq!(e.connected, vec!["inet 169.254.169.254:80"]);
        assert_eq!((e.denied, e.calls), (1, 6));
        assert!(e.line().contains("ran sh -c id"), "{}", e.line());
        assert_eq!(recording.outside_calls["start_up"].calls, 1);
        assert_eq!(
            recording.outside_calls["between_calls"].written,
            vec!["/workspace/b"]
        );
        assert_eq!((recording.recorded, recording.dropped), (7, 2));
        assert_eq!(
            group(&typed(&[json!({"event": "spawned", "pid": 1})]), &steps),
            None
        );
    }

    #[test]
    fn lists_are_bounded_and_the_rest_counted() {
        let call = json!({"phase": "request", "id": 1, "method": "tools/call"});
        let events: Vec<Value> = (0..MAX_ITEMS + 7)
            .map(|i| {
                effect(
                    "openat",
                    call.clone(),
                    json!({"paths": [format!("/w/{i}")], "access": "read"}),
                )
            })
            .collect();
        let (per_step, _) =
            group(&typed(&events), &[vec![(json!(1), "tools/call".into())]]).unwrap();
        let e = per_step[0].as_ref().unwrap();
        assert_eq!((e.read.len(), e.omitted), (MAX_ITEMS, 7));
    }

    #[test]
    fn the_proxys_net_events_go_to_the_step_whose_call_caused_them() {
        let call = json!({"phase": "request", "id": 2, "method": "tools/call", "tool": "fetch"});
        let events = vec![
            json!({"event": "net", "kind": "dns", "name": "allowed.test", "qtype": "A",
                "allowed": true, "addresses": ["198.51.100.7"], "during": call}),
            json!({"event": "net", "kind": "connect", "name": "allowed.test", "address": "198.51.100.7",
                "port": 8080, "allowed": true, "bytes_out": 90, "bytes_in": 300, "during": call}),
            json!({"event": "net", "kind": "connect", "address": "169.254.169.254", "port": 80,
                "allowed": false, "reason": "link-local", "during": call}),
            json!({"event": "net", "kind": "dns", "name": "telemetry.example", "allowed": false,
                "reason": "telemetry.example is not allowed", "during": {"phase": "start_up"}}),
        ];
        let steps = vec![vec![(json!(2), "tools/call".to_string())]];
        let (per_step, recording) = group(&typed(&events), &steps).unwrap();
        let e = per_step[0].as_ref().unwrap();
        assert_eq!(
            e.network,
            [
                "dns allowed.test allowed",
                "connect allowed.test@198.51.100.7:8080 allowed",
                "connect 169.254.169.254:80 denied (link-local)"
            ]
        );
        assert!(
            e.line().contains("network: dns allowed.test allowed"),
            "{}",
            e.line()
        );
        assert_eq!(
            recording.outside_calls["start_up"].network,
            ["dns telemetry.example denied (telemetry.example is not allowed)"]
        );
    }
}
