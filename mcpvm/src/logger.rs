//! `--verbose` logging to stderr: one line per record, with the time since
//! the process started, so a log reads as a timeline of the run.
//!
//! A guest can make the VMM log (a bad queue, a malformed packet, an
//! unreadable event), so no target may write more than [`BURST`] lines a
//! second (the rest are counted and said once the second is over), and
//! every line is made printable: a guest's text does not drive the
//! terminal.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

/// Lines one target may log in one second.
const BURST: u32 = 50;

struct Logger {
    start: Instant,
    json: bool,
    /// Per target: the second being counted, lines in it, lines dropped.
    rate: Mutex<HashMap<String, (u64, u32, u64)>>,
}

impl Logger {
    /// Whether this line may be written; a note of what was dropped in
    /// the target's last full second, if anything was.
    fn admit(&self, target: &str) -> (bool, Option<u64>) {
        let second = self.start.elapsed().as_secs();
        let mut rate = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        let entry = rate.entry(target.to_string()).or_insert((second, 0, 0));
        let mut dropped_note = None;
        if entry.0 != second {
            if entry.2 > 0 {
                dropped_note = Some(entry.2);
            }
            *entry = (second, 0, 0);
        }
        entry.1 += 1;
        if entry.1 > BURST {
            entry.2 += 1;
            return (false, None);
        }
        (true, dropped_note)
    }
}

impl log::Log for Logger {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let (admitted, dropped) = self.admit(record.target());
        if let Some(n) = dropped {
            self.write(
                log::Level::Warn,
                record.target(),
                &format!("{n} more lines of this target were not logged (over {BURST} a second)"),
            );
        }
        if admitted {
            self.write(record.level(), record.target(), &record.args().to_string());
        }
    }

    fn flush(&self) {}
}

impl Logger {
    fn write(&self, level: log::Level, target: &str, msg: &str) {
        let msg = printable(msg);
        let t = self.start.elapsed().as_secs_f64() * 1000.0;
        let line = if self.json {
            serde_json::json!({
                "t_ms": (t * 1000.0).round() / 1000.0,
                "level": level.as_str(),
                "target": target,
                "msg": msg,
            })
            .to_string()
        } else {
            format!("[{t:>10.3} ms {level:<5} {target}] {msg}")
        };
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

/// Installs the logger: warnings always, everything with `verbose`; JSON
/// lines with `json`.
pub fn init(start: Instant, verbose: bool, json: bool) {
    let logger = Logger {
        start,
        json,
        rate: Mutex::new(HashMap::new()),
    };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(if verbose {
            log::LevelFilter::Debug
        } else {
            log::LevelFilter::Warn
        });
    }
}

/// `text` with control characters (terminal escape sequences among them)
/// and bidirectional overrides shown as `\u{…}` escapes: what a guest or
/// server says must not drive the user's terminal (`protocol::text`, the
/// one rule for every place such text meets a person).
pub use mcpvm_protocol::text::{printable, printable_lines};

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn a_flooding_target_is_cut_and_the_cut_counted() {
        let l = Logger {
            start: Instant::now(),
            json: false,
            rate: Mutex::new(HashMap::new()),
        };
        let admitted = (0..1000).filter(|_| l.admit("virtio_queue").0).count();
        assert_eq!(admitted, BURST as usize);
        // Another target is not held back by the first.
        assert!(l.admit("mcpvm::run").0);
        // A second later the count is said once, then lines flow again.
        let later = Logger {
            start: Instant::now() - std::time::Duration::from_secs(1),
            ..l
        };
        let (ok, dropped) = later.admit("virtio_queue");
        assert!(ok);
        assert_eq!(dropped, Some(1000 - u64::from(BURST)));
    }
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn escapes_do_not_reach_the_terminal() {
        assert_eq!(super::printable("plain"), "plain");
        assert_eq!(super::printable("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\u{a}");
    }
}
