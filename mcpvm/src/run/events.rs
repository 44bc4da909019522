//! The agent's side of CONTROL, as the host reads it: one JSON event per
//! line (`mcpvm_protocol::messages::Event`). Each is logged, written to
//! `--events` with its time, and noted in the run's timings (when each
//! kind first came); [`Event::SnapshotReady`] starts the snapshot.
//!
//! What the guest sends is hostile input: a line is read up to
//! [`MAX_LINE`] bytes and the rest of it dropped; at most [`MAX_EVENTS`]
//! events and [`MAX_FILE_BYTES`] bytes go to the file, and the cut is
//! written there as a last line.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mcpvm_protocol::messages::{AnyEvent, Event, EventLine, HostEvent};

use crate::host::lines::read_line_bounded;

/// The agent's longest event, the control channel's line limit.
pub const MAX_LINE: usize = mcpvm_protocol::ports::MAX_CONTROL_LINE;
/// Events written to `--events` at most.
pub const MAX_EVENTS: u64 = 100_000;
/// Bytes written to `--events` at most.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// When each kind of event first arrived (ms since the run started).
pub type FirstSeen = Arc<Mutex<BTreeMap<String, f64>>>;

/// Where the events go.
pub struct EventSink {
    pub start: Instant,
    pub first_seen: FirstSeen,
    pub file: Option<File>,
    pub vm: Option<vmm::VmControl>,
    written: u64,
    bytes: u64,
    dropped: u64,
}

impl EventSink {
    pub fn new(start: Instant, file: Option<File>, vm: Option<vmm::VmControl>) -> EventSink {
        EventSink {
            start,
            first_seen: FirstSeen::default(),
            file,
            vm,
            written: 0,
            bytes: 0,
            dropped: 0,
        }
    }

    /// Reads events from `control` until it ends.
    pub fn read_from(&mut self, control: impl Read) {
        let mut reader = BufReader::new(control);
        let mut line = Vec::new();
        while read_line_bounded(&mut reader, &mut line, MAX_LINE) {
            let t = self.start.elapsed().as_secs_f64() * 1000.0;
            match serde_json::from_slice::<Event>(&line) {
                Ok(e) => self.take(e, t),
                Err(_) => log::warn!(
                    "agent sent an unreadable event of {} bytes: {}",
                    line.len(),
                    crate::logger::printable(&String::from_utf8_lossy(
                        &line[..line.len().min(200)]
                    ))
                ),
            }
        }
        if self.dropped > 0 {
            if let Some(f) = &mut self.file {
                let cut = HostEvent::EventsDropped {
                    count: self.dropped,
                };
                let _ = writeln!(f, "{}", serde_json::to_value(cut).unwrap_or_default());
            }
            log::warn!(
                "the agent sent {} events more than --events keeps ({MAX_EVENTS} events, {MAX_FILE_BYTES} bytes)",
                self.dropped
            );
        }
    }

    fn take(&mut self, e: Event, t: f64) {
        log::debug!("agent event at {t:.3} ms: {e:?}");
        self.first_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(e.kind().to_string())
            .or_insert(t);
        let snapshot = matches!(e, Event::SnapshotReady);
        match &e {
            Event::Syscalls { denied, .. } => {
                for d in denied {
                    log::info!(
                        "seccomp: {} denied {} times ({})",
                        crate::logger::printable(&d.syscall),
                        d.count,
                        crate::logger::printable(d.errno.as_deref().unwrap_or(""))
                    );
                }
            }
            Event::OomKilled => eprintln!("mcpvm: the guest kernel's OOM killer ended a server process; give the VM more memory (--mem)"),
            _ => {}
        }
        self.write(AnyEvent::Agent(e), t);
        if snapshot {
            if let Some(vm) = &self.vm {
                vm.request_snapshot();
            }
        }
    }

    /// Writes what the host has to say about the run (not the agent's).
    pub fn host(&mut self, e: HostEvent) {
        let t = self.start.elapsed().as_secs_f64() * 1000.0;
        self.write(AnyEvent::Host(e), t);
    }

    fn write(&mut self, event: AnyEvent, at_ms: f64) {
        let Some(f) = &mut self.file else { return };
        let Ok(text) = serde_json::to_string(&EventLine { event, at_ms }) else {
            return;
        };
        let line = text + "\n";
        if self.written >= MAX_EVENTS || self.bytes + line.len() as u64 > MAX_FILE_BYTES {
            self.dropped += 1;
            return;
        }
        if f.write_all(line.as_bytes()).is_ok() {
            self.written += 1;
            self.bytes += line.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_flood_is_cut_and_the_cut_said() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ev.jsonl");
        let mut sink = EventSink::new(Instant::now(), Some(File::create(&path).unwrap()), None);
        let one = "{\"event\":\"first_stdout_byte\"}\n";
        let flood = one.repeat(MAX_EVENTS as usize + 5) + "{\"event\":\"oom_killed\"";
        sink.read_from(flood.as_bytes());
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len() as u64, MAX_EVENTS + 1);
        assert!(
            lines.last().unwrap().contains(r#""count":5"#),
            "{}",
            lines.last().unwrap()
        );
        let seen = sink.first_seen.lock().unwrap();
        assert!(seen.contains_key("first_stdout_byte"));
    }
}
