//! A server that speaks Streamable HTTP (MCP 2025-03-26 and later), as
//! the probe reaches it: each JSON-RPC line the probe sends is POSTed to
//! the server's endpoint, and what comes back (a JSON body, or an event
//! stream whose events are messages) is delivered, message by message as
//! it arrives, as if the server had printed it. The session id the server
//! gives goes on every later request, and so does the protocol version
//! `initialize` settled (`MCP-Protocol-Version`); once the session is
//! initialized, a GET opens the server's own stream (its requests and
//! notifications), and the session is ended with a DELETE.
//!
//! HTTP is reqwest's (the client rmcp's own HTTP transport is built on).
//! rmcp's transport itself is not used: it carries typed messages, and
//! the probe sends its lines byte for byte (malformed ones included, to
//! see what a server does with them) and records what it received as it
//! came. The event stream's `data:` lines are read here, as bytes, for
//! the same reason.
//!
//! The probe talks to one endpoint and nowhere else: no redirect is
//! followed (reqwest's default follows ten, across hosts, sending the
//! body again: a server under `deny-net` could make the host itself
//! connect to any address, its own loopback services and the cloud
//! metadata address included), and no proxy is used. A redirect is an
//! answer that carried no message; the probe says where it pointed.
//!
//! The server may still be starting (in a microVM, `mcpvm run --listen`
//! accepts before the guest does): a POST that gets no HTTP answer is
//! sent again until it does.

use std::io;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};

/// Largest response read (one POST's answer, or the GET stream's).
const MAX_RESPONSE: usize = 64 << 20;
/// How long a POST is retried while nothing answers.
const START_WAIT: Duration = Duration::from_secs(600);
/// How long the session's DELETE may take at the end.
const END_WAIT: Duration = Duration::from_secs(2);

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";

/// `http://HOST:PORT/PATH`, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub authority: String,
    pub path: String,
    /// Sent as `Authorization: Bearer <token>` (`mcpvm run --listen`
    /// asks every connection for its run's token).
    pub token: Option<String>,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url}: only http:// endpoints are spoken"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(format!("{url}: no host"));
        }
        Ok(Endpoint {
            authority: authority.to_string(),
            path: path.to_string(),
            token: None,
        })
    }

    fn url(&self) -> String {
        format!("http://{}{}", self.authority, self.path)
    }
}

/// One session with the server: its id and protocol version once known.
pub struct Session {
    client: reqwest::Client,
    to: Endpoint,
    id: Option<String>,
    version: Option<String>,
}

/// Longest redirect target kept to say where a redirect pointed.
const MAX_LOCATION: usize = 512;

/// One HTTP answer, read message by message.
pub struct Answer {
    pub status: u16,
    /// Where a redirect (3xx) pointed: bounded, as the server said it
    /// (not followed).
    pub location: Option<String>,
    body: Body,
    read: usize,
}

enum Body {
    /// A JSON body (or none): one message at most.
    Json(reqwest::Response),
    /// An event stream: a message per event with data.
    Events(reqwest::Response, Events),
    Done,
}

impl Session {
    pub fn new(to: Endpoint) -> io::Result<Session> {
        let client = reqwest::Client::builder()
            // The endpoint is on this machine: never through a proxy.
            .no_proxy()
            // Nothing the server answers opens a connection elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(io::Error::other)?;
        Ok(Session {
            client,
            to,
            id: None,
            version: None,
        })
    }

    /// The session has an id (the server keeps one): a GET stream and a
    /// DELETE have something to name.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The headers every request after the first carries.
    fn headers(&self, accept: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_static(accept));
        let mut add = |name: &'static str, value: &str| {
            // A value the server chose that is no header value is not sent.
            if let Ok(v) = HeaderValue::from_str(value) {
                h.insert(name, v);
            }
        };
        if let Some(id) = &self.id {
            add(SESSION, id);
        }
        if let Some(v) = &self.version {
            add(VERSION, v);
        }
        if let Some(t) = &self.to.token {
            add(AUTHORIZATION.as_str(), &format!("Bearer {t}"));
        }
        h
    }

    /// `initialize` has settled the protocol version.
    pub fn has_version(&self) -> bool {
        self.version.is_some()
    }

    /// Notes what a delivered message settles: the protocol version of
    /// `initialize`'s answer.
    pub fn note(&mut self, message: &serde_json::Value) {
        if let Some(v) = message
            .pointer("/result/protocolVersion")
            .and_then(|v| v.as_str())
        {
            self.version = Some(v.to_string());
        }
    }

    /// POSTs `body`, retrying while nothing answers.
    pub async fn post(&mut self, body: &[u8]) -> io::Result<Answer> {
        let deadline = tokio::time::Instant::now() + START_WAIT;
        loop {
            let sent = self
                .client
                .post(self.to.url())
                .headers(self.headers("application/json, text/event-stream"))
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_vec())
                .send()
                .await;
            match sent {
                Ok(r) => return Ok(self.answer(r)),
                Err(e) if tokio::time::Instant::now() < deadline => {
                    log::debug!("http: {e}; trying again");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(io::Error::other(e)),
            }
        }
    }

    /// Opens the server's own stream (GET); None where the server offers
    /// none (405) or does not answer with one.
    pub async fn listen(&self) -> Option<Answer> {
        let r = self
            .client
            .get(self.to.url())
            .headers(self.headers("text/event-stream"))
            .send()
            .await
            .map_err(|e| log::info!("http: no server stream: {e}"))
            .ok()?;
        let status = r.status().as_u16();
        let answer = Answer::of(r);
        match (&answer.body, status) {
            (Body::Events(..), 200) => Some(answer),
            _ => {
                log::info!("http: the server offers no stream of its own ({status})");
                None
            }
        }
    }

    /// Ends the session (DELETE), as a client that is done should; a
    /// server may refuse (405), and that is its right.
    pub async fn end(&self) {
        if self.id.is_none() {
            return;
        }
        let sent = self
            .client
            .delete(self.to.url())
            .headers(self.headers("application/json, text/event-stream"))
            .timeout(END_WAIT)
            .send()
            .await;
        match sent {
            Ok(r) => log::debug!("http: session ended ({})", r.status()),
            Err(e) => log::debug!("http: the session's DELETE failed: {e}"),
        }
    }

    fn answer(&mut self, r: reqwest::Response) -> Answer {
        if let Some(id) = r.headers().get(SESSION).and_then(|v| v.to_str().ok()) {
            self.id = Some(id.to_string());
        }
        Answer::of(r)
    }
}

impl Answer {
    fn of(r: reqwest::Response) -> Answer {
        let status = r.status().as_u16();
        let location = r.status().is_redirection().then(|| {
            let raw = r
                .headers()
                .get(reqwest::header::LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            raw.chars().take(MAX_LOCATION).collect()
        });
        let stream = r
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let body = match stream {
            true => Body::Events(r, Events::default()),
            false => Body::Json(r),
        };
        Answer {
            status,
            location,
            body,
            read: 0,
        }
    }

    /// What an answer that carried no message said at the HTTP level:
    /// its status, and for a redirect where it pointed.
    pub fn without_message(&self) -> String {
        match &self.location {
            Some(to) => format!(
                "HTTP {}: a redirect to '{}', not followed (the probe talks to the server's endpoint only)",
                self.status,
                mcpvm_protocol::text::printable(to)
            ),
            None => format!("HTTP {} with no message", self.status),
        }
    }

    /// The next message it carries, as it arrives; None at its end.
    pub async fn next(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            match std::mem::replace(&mut self.body, Body::Done) {
                Body::Done => return Ok(None),
                Body::Json(mut r) => {
                    let mut body = Vec::new();
                    while let Some(chunk) = r.chunk().await.map_err(io::Error::other)? {
                        self.count(chunk.len())?;
                        body.extend_from_slice(&chunk);
                    }
                    return Ok((!body.iter().all(u8::is_ascii_whitespace)).then_some(body));
                }
                Body::Events(mut r, mut events) => {
                    if let Some(m) = events.next_message() {
                        self.body = Body::Events(r, events);
                        return Ok(Some(m));
                    }
                    match r.chunk().await.map_err(io::Error::other)? {
                        Some(chunk) => {
                            self.count(chunk.len())?;
                            events.push(&chunk);
                            self.body = Body::Events(r, events);
                        }
                        None => return Ok(events.finish()),
                    }
                }
            }
        }
    }

    fn count(&mut self, n: usize) -> io::Result<()> {
        self.read += n;
        match self.read > MAX_RESPONSE {
            true => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("an answer of over {MAX_RESPONSE} bytes"),
            )),
            false => Ok(()),
        }
    }
}

/// The messages of an event stream that arrives in `pieces`.
pub fn read_events<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
    let mut e = Events::default();
    let mut out = Vec::new();
    for p in pieces {
        e.push(p);
        out.extend(std::iter::from_fn(|| e.next_message()));
    }
    out.extend(e.finish());
    out.extend(std::iter::from_fn(|| e.next_message()));
    out
}

/// An event stream read as it comes: the `data:` lines of each event,
/// joined, as bytes (a message that is not UTF-8 is the server's to
/// answer for, not ours to rewrite).
#[derive(Default)]
struct Events {
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    /// The data of the event being read.
    data: Vec<Vec<u8>>,
    /// Events read whole, not yet taken.
    ready: std::collections::VecDeque<Vec<u8>>,
}

impl Events {
    fn push(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        while let Some(i) = self.partial.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.partial.drain(..=i).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&line);
        }
    }

    fn line(&mut self, line: &[u8]) {
        if line.is_empty() {
            self.flush();
        } else if let Some(d) = line.strip_prefix(b"data:") {
            self.data.push(d.strip_prefix(b" ").unwrap_or(d).to_vec());
        }
    }

    fn flush(&mut self) {
        if !self.data.is_empty() {
            let joined = self.data.join(&b'\n');
            self.data.clear();
            self.ready.push_back(joined);
        }
    }

    fn next_message(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }

    /// The stream ended: what was left, as a last event.
    fn finish(&mut self) -> Option<Vec<u8>> {
        let rest = std::mem::take(&mut self.partial);
        if !rest.is_empty() {
            self.line(rest.strip_suffix(b"\r").unwrap_or(&rest));
        }
        self.flush();
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stream_in_pieces_gives_its_messages_whole() {
        let sse = "event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{}}\r\n\r\n: a comment\n\ndata:{\"b\":2}\n";
        let mut e = Events::default();
        for piece in sse.as_bytes().chunks(7) {
            e.push(piece);
        }
        let first = b"{\"jsonrpc\":\"2.0\",\"id\":1,\n\"result\":{}}".to_vec();
        assert_eq!(e.next_message(), Some(first.clone()));
        assert_eq!(e.next_message(), None, "the last event is not ended yet");
        assert_eq!(e.finish(), Some(b"{\"b\":2}".to_vec()));
        assert_eq!(
            read_events(sse.as_bytes().chunks(3)),
            vec![first, b"{\"b\":2}".to_vec()]
        );
    }

    /// A server that answers each request in turn from a script and
    /// keeps each request's head.
    fn scripted(answers: Vec<String>) -> (Endpoint, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = Endpoint {
            authority: l.local_addr().unwrap().to_string(),
            path: "/mcp".into(),
            token: Some("tok".into()),
        };
        let server = std::thread::spawn(move || {
            let mut heads = Vec::new();
            for answer in answers {
                let (mut c, _) = l.accept().unwrap();
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                    head += &line.to_ascii_lowercase();
                }
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |n| n.trim().parse().unwrap());
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                heads.push(head + &String::from_utf8(body).unwrap());
                c.write_all(answer.as_bytes()).unwrap();
            }
            heads
        });
        (to, server)
    }

    fn http(status: &str, kind: &str, extra: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    /// The session as the specification has it: the id and the version
    /// `initialize` settled on every later request, the bearer token on
    /// all, the server's stream opened once initialized, ended with a
    /// DELETE.
    #[tokio::test(flavor = "current_thread")]
    async fn a_session_carries_its_id_and_version_and_opens_the_servers_stream() {
        let init = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#;
        let (to, server) = scripted(vec![
            http(
                "200 OK",
                "text/event-stream",
                "mcp-session-id: s-1\r\n",
                &format!("event: message\ndata: {init}\n\n"),
            ),
            http("202 Accepted", "application/json", "", ""),
            http(
                "200 OK",
                "text/event-stream",
                "",
                "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n",
            ),
            http(
                "200 OK",
                "application/json",
                "",
                r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
            ),
            http("200 OK", "application/json", "", ""),
        ]);
        let mut s = Session::new(to).unwrap();
        let mut a = s
            .post(br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#)
            .await
            .unwrap();
        let m = a.next().await.unwrap().unwrap();
        s.note(&serde_json::from_slice(&m).unwrap());
        assert_eq!(a.next().await.unwrap(), None);
        assert_eq!((s.id(), s.has_version()), (Some("s-1"), true));
        let mut a = s
            .post(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await
            .unwrap();
        assert_eq!((a.status, a.next().await.unwrap()), (202, None));
        let mut stream = s.listen().await.expect("the server's stream");
        let n = stream.next().await.unwrap().unwrap();
        assert!(String::from_utf8(n)
            .unwrap()
            .contains("notifications/message"));
        let mut a = s
            .post(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
            .await
            .unwrap();
        assert_eq!(
            a.next().await.unwrap().unwrap(),
            br#"{"jsonrpc":"2.0","id":2,"result":{}}"#
        );
        s.end().await;
        let heads = server.join().unwrap();
        let [first, _, get, ping, delete] = &heads[..] else {
            panic!("{heads:?}")
        };
        assert!(
            first.starts_with("post /mcp ") && !first.contains("mcp-session-id"),
            "{first}"
        );
        assert!(
            first.contains("accept: application/json, text/event-stream"),
            "{first}"
        );
        for h in [first, get, ping, delete] {
            assert!(h.contains("authorization: bearer tok"), "{h}");
        }
        for h in [get, ping, delete] {
            assert!(h.contains("mcp-session-id: s-1"), "{h}");
            assert!(h.contains("mcp-protocol-version: 2025-06-18"), "{h}");
        }
        assert!(
            get.starts_with("get /mcp ") && get.contains("accept: text/event-stream"),
            "{get}"
        );
        assert!(delete.starts_with("delete /mcp "), "{delete}");
        assert!(
            ping.ends_with(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#),
            "{ping}"
        );
    }

    /// A server that answers the POST with a redirect to another
    /// listener (any address: here one of the test's own): the host
    /// never connects there, and the answer says where it pointed.
    #[tokio::test(flavor = "current_thread")]
    async fn a_redirect_is_not_followed_and_says_where_it_pointed() {
        let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        elsewhere.set_nonblocking(true).unwrap();
        let target = format!("http://{}/steal?k=secret", elsewhere.local_addr().unwrap());
        let mut answers = Vec::new();
        for status in [
            "307 Temporary Redirect",
            "308 Permanent Redirect",
            "302 Found",
        ] {
            answers.push(http(
                status,
                "text/plain",
                &format!("location: {target}\r\n"),
                "",
            ));
        }
        let (to, server) = scripted(answers);
        let mut s = Session::new(to).unwrap();
        for status in [307, 308, 302] {
            let mut a = s
                .post(br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#)
                .await
                .unwrap();
            assert_eq!(a.status, status);
            assert_eq!(a.next().await.unwrap(), None);
            let said = a.without_message();
            assert!(
                said.starts_with(&format!("HTTP {status}: a redirect to 'http://127.0.0.1:")),
                "{said}"
            );
            assert!(said.contains("/steal?k=secret', not followed"), "{said}");
        }
        assert_eq!(server.join().unwrap().len(), 3);
        // Nothing reached the redirect's target.
        match elsewhere.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the host connected where the server pointed: {other:?}"),
        }
    }

    #[test]
    fn endpoints_are_http_host_port_and_path() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:8931/mcp").unwrap(),
            Endpoint {
                token: None,
                authority: "127.0.0.1:8931".into(),
                path: "/mcp".into()
            }
        );
        assert!(Endpoint::parse("https://x/mcp").is_err());
    }
}
