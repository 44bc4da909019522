//! `--verbose` logging to stderr: one line per record, with the time since
//! the process started, so a log reads as a timeline of the run.

use std::io::Write;
use std::time::Instant;

struct Logger {
    start: Instant,
    json: bool,
}

impl log::Log for Logger {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let t = self.start.elapsed().as_secs_f64() * 1000.0;
        let line = if self.json {
            serde_json::json!({
                "t_ms": (t * 1000.0).round() / 1000.0,
                "level": record.level().as_str(),
                "target": record.target(),
                "msg": record.args().to_string(),
            })
            .to_string()
        } else {
            format!(
                "[{t:>10.3} ms {:<5} {}] {}",
                record.level(),
                record.target(),
                record.args()
            )
        };
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }

    fn flush(&self) {}
}

/// Installs the logger: warnings always, everything with `verbose`; JSON
/// lines with `json`.
pub fn init(start: Instant, verbose: bool, json: bool) {
    if log::set_boxed_logger(Box::new(Logger { start, json })).is_ok() {
        log::set_max_level(if verbose {
            log::LevelFilter::Debug
        } else {
            log::LevelFilter::Warn
        });
    }
}

/// `text` with control characters (terminal escape sequences among them)
/// shown as `\u{…}` escapes: what a guest or server says must not drive
/// the user's terminal.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn escapes_do_not_reach_the_terminal() {
        assert_eq!(super::printable("plain"), "plain");
        assert_eq!(super::printable("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\u{a}");
    }
}
