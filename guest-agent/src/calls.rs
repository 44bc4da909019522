//! Which MCP request the server is working on, as its stdio shows: a
//! JSON-RPC request written to its stdin is in flight until a response
//! with the same id comes out of its stdout. A recorded system call
//! ([`crate::server_seccomp::effects`]) is attributed to what
//! [`Calls::during`] says at the moment the server made it.
//!
//! The relays feed every chunk they copy through a [`Lines`] splitter;
//! a request is marked in flight before its bytes reach the server, so
//! nothing the server does for it can come first.

use std::sync::Mutex;

use mcpvm_protocol::messages::During;
use serde_json::Value;

/// A line longer than this is not looked at (its request goes unmarked).
const MAX_LINE: usize = 1 << 20;

#[derive(Default)]
struct State {
    /// (id, method, tool) of requests not yet answered, oldest first.
    in_flight: Vec<(Value, String, Option<String>)>,
    any_request: bool,
    exited: bool,
}

#[derive(Default)]
pub struct Calls {
    state: Mutex<State>,
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the server is doing now.
    pub fn during(&self) -> During {
        let s = self.lock();
        if s.exited {
            return During::AfterExit;
        }
        match s.in_flight.last() {
            Some((id, method, tool)) => During::Request {
                id: id.clone(),
                method: method.clone(),
                tool: tool.clone(),
            },
            None if s.any_request => During::BetweenCalls,
            None => During::StartUp,
        }
    }

    /// A line from the client to the server.
    pub fn sent(&self, line: &[u8]) {
        for m in messages(line) {
            let (Some(id), Some(method)) = (m.get("id"), m.get("method").and_then(Value::as_str))
            else {
                continue;
            };
            if id.is_null() {
                continue;
            }
            let tool = (method == "tools/call")
                .then(|| m.pointer("/params/name").and_then(Value::as_str))
                .flatten()
                .map(str::to_string);
            let mut s = self.lock();
            s.any_request = true;
            s.in_flight.push((id.clone(), method.to_string(), tool));
        }
    }

    /// A line from the server to the client.
    pub fn answered(&self, line: &[u8]) {
        for m in messages(line) {
            let is_response = m.get("method").is_none()
                && (m.get("result").is_some() || m.get("error").is_some());
            let Some(id) = m.get("id").filter(|_| is_response) else {
                continue;
            };
            let mut s = self.lock();
            if let Some(i) = s.in_flight.iter().position(|(sent, _, _)| sent == id) {
                s.in_flight.remove(i);
            }
        }
    }

    /// The server's own process has exited.
    pub fn exited(&self) {
        self.lock().exited = true;
    }
}

/// The JSON-RPC messages of one line (a batch is an array of them).
fn messages(line: &[u8]) -> Vec<Value> {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Array(batch)) => batch,
        Ok(m @ Value::Object(_)) => vec![m],
        _ => Vec::new(),
    }
}

/// Splits a byte stream into lines, bounded: a line past [`MAX_LINE`] is
/// skipped to its end.
#[derive(Default)]
pub struct Lines {
    buf: Vec<u8>,
    skipping: bool,
}

impl Lines {
    /// Feeds one chunk; `each` gets every line it completes.
    pub fn feed(&mut self, chunk: &[u8], mut each: impl FnMut(&[u8])) {
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            if !self.skipping {
                self.buf.extend_from_slice(&rest[..nl]);
                each(&self.buf);
            }
            self.buf.clear();
            self.skipping = false;
            rest = &rest[nl + 1..];
        }
        if self.skipping {
            return;
        }
        if self.buf.len() + rest.len() > MAX_LINE {
            self.buf.clear();
            self.skipping = true;
        } else {
            self.buf.extend_from_slice(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: u32, tool: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        )
    }

    #[test]
    fn a_call_is_attributed_from_its_request_to_its_response() {
        let calls = Calls::default();
        assert_eq!(calls.during(), During::StartUp);
        calls.sent(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(
            calls.during(),
            During::StartUp,
            "a notification is no request"
        );
        calls.sent(request(7, "write_file").as_bytes());
        assert_eq!(
            calls.during(),
            During::Request {
                id: 7.into(),
                method: "tools/call".into(),
                tool: Some("write_file".into())
            }
        );
        // A request from the server to the client does not end it.
        calls.answered(br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage"}"#);
        assert!(matches!(calls.during(), During::Request { .. }));
        calls.answered(br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#);
        assert_eq!(calls.during(), During::BetweenCalls);
        calls.sent(br#"[{"jsonrpc":"2.0","id":"a","method":"ping"}]"#);
        assert!(matches!(calls.during(), During::Request { ref method, .. } if method == "ping"));
        calls.answered(br#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"x"}}"#);
        calls.exited();
        assert_eq!(calls.during(), During::AfterExit);
    }

    #[test]
    fn lines_are_split_across_chunks_and_bounded() {
        let mut lines = Lines::default();
        let mut got = Vec::new();
        lines.feed(b"{\"a\":1}\n{\"b\"", |l| got.push(l.to_vec()));
        lines.feed(b":2}\n", |l| got.push(l.to_vec()));
        assert_eq!(got, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        got.clear();
        lines.feed(&vec![b'x'; MAX_LINE + 1], |l| got.push(l.to_vec()));
        lines.feed(b"xx\nok\n", |l| got.push(l.to_vec()));
        assert_eq!(got, vec![b"ok".to_vec()], "the long line is skipped whole");
    }
}
