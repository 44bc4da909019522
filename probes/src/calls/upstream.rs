//! A call that waits on an upstream the network refused. Under a profile
//! that withholds the network, many servers answer such a call at once
//! ("fetch failed"); some retry with their client's backoff and answer
//! nothing until it gives up, and every such call would wait out the
//! whole step timeout (one corpus server cost 20 minutes of an audit that
//! way). The microVM's events file, written as things happen, says when
//! the egress proxy refused a lookup or connection, or saw one it allowed
//! fail: a call still unanswered [`GRACE`] after the first such try made
//! during it is cut there, and says why.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpvm_protocol::messages::EventLine;

/// How long a call may go on after its server's first refused try: a
/// server that answers with the failure does so well within it, even in
/// nested emulation.
pub const GRACE: Duration = Duration::from_secs(20);
/// How often the events file is read.
const POLL: Duration = Duration::from_millis(250);
/// Bytes read from the events file at one time at most (the file is the
/// host's, bounded by `mcpvm run`; a line longer than this is skipped).
const MAX_READ: usize = 1 << 20;
/// What is kept of the name tried (the guest chose it).
const MAX_NAME: usize = 128;

/// The events file from where it ended when a call was sent.
pub struct Watch {
    path: PathBuf,
    offset: u64,
}

impl Watch {
    /// From the file's current end: what was refused before the call is
    /// not the call's.
    pub fn from_end(path: &Path) -> Watch {
        Watch {
            path: path.to_path_buf(),
            offset: std::fs::metadata(path).map_or(0, |m| m.len()),
        }
    }

    /// Resolves [`GRACE`] after the first refused or failed try written
    /// since; what was tried. Never resolves when none is.
    pub async fn refused(mut self) -> String {
        loop {
            if let Some(tried) = self.next_refusal() {
                tokio::time::sleep(GRACE).await;
                return tried;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The first refused or failed try in the lines written since the
    /// last read; the offset moves past every whole line read.
    fn next_refusal(&mut self) -> Option<String> {
        let mut f = std::fs::File::open(&self.path).ok()?;
        f.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut buf = Vec::new();
        f.take(MAX_READ as u64).read_to_end(&mut buf).ok()?;
        let whole = match buf.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            // A line past the bound is not an event of the proxy's.
            None if buf.len() >= MAX_READ => buf.len(),
            None => 0,
        };
        self.offset += whole as u64;
        buf[..whole]
            .split(|&b| b == b'\n')
            .filter_map(|l| serde_json::from_slice::<EventLine>(l).ok())
            .find_map(|e| {
                let n = e.event.net()?;
                // A refused update check or error report is not what the
                // call waits on (chrome-devtools-mcp asks the npm registry
                // for its newest release while it opens its first page).
                let telemetry = n
                    .name
                    .as_deref()
                    .is_some_and(crate::calls::telemetry::is_telemetry);
                (!telemetry && (!n.allowed || n.reason.is_some())).then(|| {
                    let target = n.name.as_deref().or(n.address.as_deref()).unwrap_or("?");
                    target
                        .chars()
                        .filter(|c| !c.is_control())
                        .take(MAX_NAME)
                        .collect()
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A line as `mcpvm run` writes it for a lookup the proxy judged.
    fn net(name: &str, allowed: bool, reason: Option<&str>) -> String {
        use mcpvm_protocol::messages::{AnyEvent, HostEvent, NetEvent};
        let line = EventLine {
            event: AnyEvent::Host(HostEvent::Net(NetEvent {
                kind: "dns".into(),
                name: Some(name.into()),
                allowed,
                reason: reason.map(str::to_string),
                ..NetEvent::default()
            })),
            at_ms: 1.0,
        };
        serde_json::to_string(&line).unwrap()
    }

    #[test]
    fn a_refusal_written_after_the_call_was_sent_is_seen_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        writeln!(f, "{}", net("before.example", false, Some("not allowed"))).unwrap();
        let mut w = Watch::from_end(&path);
        assert_eq!(w.next_refusal(), None, "what came before the call");
        writeln!(f, "{}", net("ok.example", true, None)).unwrap();
        assert_eq!(w.next_refusal(), None, "an allowed try that worked");
        // An update check or error report the call does not wait on.
        writeln!(
            f,
            "{}",
            net("registry.npmjs.org", true, Some("cannot resolve"))
        )
        .unwrap();
        writeln!(
            f,
            "{}",
            net("o1.ingest.sentry.io", false, Some("not allowed"))
        )
        .unwrap();
        assert_eq!(w.next_refusal(), None, "telemetry");
        // Half a line is left for the next read.
        let line = net("api.example", false, Some("not allowed"));
        let (a, b) = line.split_at(20);
        write!(f, "{a}").unwrap();
        assert_eq!(w.next_refusal(), None);
        writeln!(f, "{b}").unwrap();
        assert_eq!(w.next_refusal().as_deref(), Some("api.example"));
        assert_eq!(w.next_refusal(), None, "read once");
        writeln!(f, "{}", net("up.example", true, Some("cannot resolve"))).unwrap();
        assert_eq!(
            w.next_refusal().as_deref(),
            Some("up.example"),
            "allowed, failed"
        );
    }

    #[test]
    fn hostile_lines_are_skipped_and_names_kept_printable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut w = Watch::from_end(&path);
        assert_eq!(w.next_refusal(), None, "no file yet");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![b'x'; MAX_READ + 10]).unwrap();
        writeln!(f).unwrap();
        writeln!(f, "not json").unwrap();
        let long = format!("a\u{1b}[31m{}", "b".repeat(500));
        writeln!(f, "{}", net(&long, false, Some("not allowed"))).unwrap();
        // The first read skips the bound's worth of the long line.
        assert_eq!(w.next_refusal(), None);
        let tried = w.next_refusal().unwrap();
        assert!(tried.starts_with("a[31m") && tried.chars().count() == MAX_NAME);
    }
}
