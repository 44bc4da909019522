//! The template client of a snapshot run (`run --snapshot-to`): mcpvm
//! itself initializes the server, and once the server has answered a
//! `ping` (it is idle in its read loop) asks the agent to get ready for
//! the snapshot. A caller's own `initialize` after a restore is answered
//! by the server's running session, as every MCP SDK does.

use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use mcpvm_protocol::messages::HostMessage;

use crate::host::lines::read_line_bounded;

/// The ids of the `initialize` and `ping` mcpvm sends before a snapshot.
const TEMPLATE_ID: &str = "mcpvm-snapshot";
const TEMPLATE_PING_ID: &str = "mcpvm-snapshot-ping";
/// The longest line the template client reads from the server (an
/// `initialize` answer is a few KiB); the rest of a longer one is dropped.
const MAX_LINE: usize = 1 << 20;

/// Beside a snapshot `run --snapshot-to` wrote: the server's answer to
/// the template `initialize`.
pub const INITIALIZE_FILE: &str = "initialize.json";

/// The server's answer to the template `initialize`, once it came.
pub type Answer = Arc<Mutex<Option<String>>>;

/// The `initialize` request of the template client.
pub fn initialize() -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": TEMPLATE_ID,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "mcpvm-snapshot", "version": env!("CARGO_PKG_VERSION")},
        },
    })
    .to_string()
        + "\n"
}

/// Sends `initialize` on the server's stdio, reads until it is answered
/// (the answer is kept in `answer`), completes the handshake
/// (`initialized`, `ping`), and when the ping is answered sends
/// [`HostMessage::Snapshot`] on `control`. Anything else the server prints
/// is logged. An error answer (or none) leaves the VM without a snapshot:
/// the server's stdin is closed, and the run says no snapshot was written.
pub fn drive(stdio: &UnixStream, control: &UnixStream, answer: &Answer) {
    if (&*stdio).write_all(initialize().as_bytes()).is_err() {
        return;
    }
    let mut reader = BufReader::new(stdio);
    let mut line = Vec::new();
    while read_line_bounded(&mut reader, &mut line, MAX_LINE) {
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        match answer_to(&text) {
            None => log::info!("server said before the snapshot: {text}"),
            Some(Reply::Error) => {
                eprintln!("mcpvm: the server did not answer the template client, so there is no snapshot: {text}");
                let _ = stdio.shutdown(std::net::Shutdown::Write);
            }
            Some(Reply::Initialized) => {
                log::info!("server initialized: {text}");
                *answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
                let next = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
                    .to_string()
                    + "\n"
                    + &serde_json::json!({"jsonrpc": "2.0", "id": TEMPLATE_PING_ID, "method": "ping"})
                        .to_string()
                    + "\n";
                let _ = (&*stdio).write_all(next.as_bytes());
            }
            Some(Reply::Pong) => {
                let _ = (&*control).write_all(HostMessage::Snapshot.line().as_bytes());
            }
        }
    }
}

/// What a line from the server says to the template client.
#[derive(Debug, PartialEq)]
enum Reply {
    Initialized,
    Pong,
    Error,
}

fn answer_to(line: &str) -> Option<Reply> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let id = v.get("id")?;
    if id != TEMPLATE_ID && id != TEMPLATE_PING_ID {
        return None;
    }
    Some(match (v.get("result").is_some(), id == TEMPLATE_ID) {
        (false, _) => Reply::Error,
        (true, true) => Reply::Initialized,
        (true, false) => Reply::Pong,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    #[test]
    fn lines_are_told_apart() {
        assert_eq!(
            answer_to(r#"{"jsonrpc":"2.0","id":"mcpvm-snapshot","result":{}}"#),
            Some(Reply::Initialized)
        );
        assert_eq!(
            answer_to(r#"{"jsonrpc":"2.0","id":"mcpvm-snapshot-ping","result":{}}"#),
            Some(Reply::Pong)
        );
        assert_eq!(
            answer_to(r#"{"jsonrpc":"2.0","id":"mcpvm-snapshot","error":{"code":1}}"#),
            Some(Reply::Error)
        );
        assert_eq!(answer_to(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), None);
        assert_eq!(answer_to("not json"), None);
    }

    #[test]
    fn the_client_initializes_pings_then_asks_for_the_snapshot() {
        let (host, server) = UnixStream::pair().unwrap();
        let (control, agent) = UnixStream::pair().unwrap();
        let answer = Answer::default();
        let a = answer.clone();
        let client = std::thread::spawn(move || drive(&host, &control, &a));
        let mut from_host = BufReader::new(&server);
        let mut line = String::new();
        from_host.read_line(&mut line).unwrap();
        assert!(line.contains(r#""method":"initialize""#), "{line}");
        let init = r#"{"jsonrpc":"2.0","id":"mcpvm-snapshot","result":{"serverInfo":{}}}"#;
        (&server)
            .write_all(format!("{{\"log\":1}}\n{init}\n").as_bytes())
            .unwrap();
        for want in ["notifications/initialized", r#""method":"ping""#] {
            line.clear();
            from_host.read_line(&mut line).unwrap();
            assert!(line.contains(want), "{line}");
        }
        (&server)
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"mcpvm-snapshot-ping\",\"result\":{}}\n")
            .unwrap();
        let mut msg = String::new();
        BufReader::new(&agent).read_line(&mut msg).unwrap();
        assert_eq!(msg, HostMessage::Snapshot.line());
        server.shutdown(std::net::Shutdown::Both).unwrap();
        client.join().unwrap();
        assert_eq!(answer.lock().unwrap().as_deref(), Some(init));
    }
}
