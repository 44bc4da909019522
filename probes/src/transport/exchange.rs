//! The raw JSON-RPC exchange of a probe run: every line written to the
//! server and read from it, in order, with its time. Steps keep the slice
//! that happened while they ran, so a report shows exactly what was said.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Lines longer than this are kept as a prefix and their length: a 8 MiB
/// argument belongs in the exchange as a fact, not as 8 MiB of report.
pub const KEEP_BYTES: usize = 64 << 10;
/// The prefix kept of a line too long or not JSON.
pub const PREFIX_BYTES: usize = 4096;
/// Entries one run keeps at most; a server that prints forever is counted
/// past it ([`Exchange::dropped`]), not recorded.
pub const MAX_ENTRIES: usize = 20_000;
/// Line bytes one run keeps at most, over all its entries.
pub const MAX_KEPT_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Written by the probe to the server's stdin.
    Sent,
    /// A JSON line read from the server's stdout.
    Received,
    /// A line on the server's stdout that is not JSON: a protocol
    /// violation (a stray log line, garbage).
    Garbage,
    /// What the transport said in place of a message: an HTTP answer
    /// that carried none (a redirect not followed, an error status).
    Transport,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// ms since the server was spawned.
    pub at_ms: f64,
    pub dir: Direction,
    /// Length of the line in bytes, without the newline.
    pub bytes: usize,
    /// The message, when the line is JSON and short enough.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<serde_json::Value>,
    /// The line's start, when it is not JSON or too long to keep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Entry {
    pub fn method(&self) -> Option<&str> {
        self.message.as_ref()?.get("method")?.as_str()
    }
}

/// Shared by the reader and writer tasks of one server process.
#[derive(Clone)]
pub struct Exchange {
    start: Instant,
    recorded: Arc<Mutex<Recorded>>,
}

#[derive(Default)]
struct Recorded {
    entries: Vec<Entry>,
    kept_bytes: usize,
    /// Entries not kept: over [`MAX_ENTRIES`] or [`MAX_KEPT_BYTES`].
    dropped: u64,
    /// Lines on stdout that were not JSON, kept or not.
    garbage: usize,
}

pub fn ms_since(start: Instant) -> f64 {
    (start.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

impl Exchange {
    pub fn new(start: Instant) -> Self {
        Exchange {
            start,
            recorded: Arc::default(),
        }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// Records one line; `parsed` is its JSON value when it is JSON.
    pub fn record(&self, dir: Direction, line: &[u8], parsed: Option<&serde_json::Value>) {
        let keep_whole = line.len() <= KEEP_BYTES;
        let (message, text) = match parsed {
            Some(v) if keep_whole => (Some(v.clone()), None),
            _ => {
                let end = line.len().min(PREFIX_BYTES);
                (
                    None,
                    Some(String::from_utf8_lossy(&line[..end]).into_owned()),
                )
            }
        };
        let dir = match (dir, parsed) {
            (Direction::Received, None) => Direction::Garbage,
            (d, _) => d,
        };
        let kept = if message.is_some() {
            line.len()
        } else {
            line.len().min(PREFIX_BYTES)
        };
        let mut r = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        if dir == Direction::Garbage {
            r.garbage += 1;
        }
        if r.entries.len() >= MAX_ENTRIES || r.kept_bytes + kept > MAX_KEPT_BYTES {
            r.dropped += 1;
            return;
        }
        r.kept_bytes += kept;
        r.entries.push(Entry {
            at_ms: ms_since(self.start),
            dir,
            bytes: line.len(),
            message,
            text,
        });
    }

    /// Entries not kept (the run said more than an exchange keeps).
    pub fn dropped(&self) -> u64 {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped
    }

    /// Number of entries so far: a mark to slice from later.
    pub fn mark(&self) -> usize {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }

    pub fn since(&self, mark: usize) -> Vec<Entry> {
        let r = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        r.entries
            .get(mark..)
            .map(<[Entry]>::to_vec)
            .unwrap_or_default()
    }

    pub fn garbage_lines(&self) -> usize {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .garbage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_and_non_json_lines_are_kept_as_text_prefixes() {
        let x = Exchange::new(Instant::now());
        let v = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        x.record(Direction::Sent, v.to_string().as_bytes(), Some(&v));
        x.record(Direction::Received, b"Server starting...", None);
        let long = vec![b'a'; KEEP_BYTES + 1];
        let lv = serde_json::Value::String("a".repeat(KEEP_BYTES + 1));
        x.record(Direction::Received, &long, Some(&lv));
        let e = x.since(0);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].method(), Some("ping"));
        assert_eq!(e[1].dir, Direction::Garbage);
        assert_eq!(e[1].text.as_deref(), Some("Server starting..."));
        assert_eq!(e[2].dir, Direction::Received);
        assert!(e[2].message.is_none());
        assert_eq!(e[2].text.as_ref().unwrap().len(), PREFIX_BYTES);
        assert_eq!(e[2].bytes, KEEP_BYTES + 1);
        assert_eq!(x.garbage_lines(), 1);
        assert_eq!(x.since(2).len(), 1);
        assert!(x.since(9).is_empty());
    }

    #[test]
    fn a_server_that_prints_forever_is_counted_not_kept() {
        let x = Exchange::new(Instant::now());
        for i in 0..(MAX_ENTRIES + 500) {
            x.record(
                Direction::Received,
                format!("log line {i}").as_bytes(),
                None,
            );
        }
        assert_eq!(x.mark(), MAX_ENTRIES);
        assert_eq!(x.dropped(), 500);
        assert_eq!(x.garbage_lines(), MAX_ENTRIES + 500, "every one counted");
        // Bytes too: big JSON lines stop being kept at the byte cap.
        let y = Exchange::new(Instant::now());
        let big = serde_json::json!({"x": "y".repeat(KEEP_BYTES - 16)});
        let line = big.to_string();
        for _ in 0..(MAX_KEPT_BYTES / line.len() + 10) {
            y.record(Direction::Received, line.as_bytes(), Some(&big));
        }
        assert!(y.dropped() >= 10);
    }
}
