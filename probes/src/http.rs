//! A server that speaks Streamable HTTP, as the probe reaches it: each
//! JSON-RPC line the probe sends is POSTed to the server's endpoint, and
//! what comes back (a JSON body, or an event stream whose `data:` events
//! are messages) is delivered as if the server had printed it. Only what
//! a probe needs: one request at a time, the session id kept, no
//! server-initiated stream (GET).
//!
//! The server may still be starting (in a microVM, `mcpvm run --listen`
//! accepts before the guest does): a POST that gets no HTTP answer is
//! sent again until it does.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response read.
const MAX_RESPONSE: usize = 64 << 20;
/// How long a POST is retried while nothing answers.
const START_WAIT: Duration = Duration::from_secs(600);

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
}

/// One HTTP answer, as far as the probe reads it.
#[derive(Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    /// The JSON-RPC messages it carried.
    pub messages: Vec<Vec<u8>>,
}

/// POSTs `body`, retrying while nothing answers.
pub async fn post(to: &Endpoint, session: Option<&str>, body: &[u8]) -> io::Result<Answer> {
    let deadline = tokio::time::Instant::now() + START_WAIT;
    loop {
        match post_once(to, session, body).await {
            Ok(a) => return Ok(a),
            Err(e) if tokio::time::Instant::now() < deadline => {
                log::debug!("http: {e}; trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn post_once(to: &Endpoint, session: Option<&str>, body: &[u8]) -> io::Result<Answer> {
    let mut s = TcpStream::connect(&to.authority).await?;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        to.path,
        to.authority,
        body.len()
    );
    if let Some(id) = session {
        head += &format!("Mcp-Session-Id: {id}\r\n");
    }
    if let Some(token) = &to.token {
        head += &format!("Authorization: Bearer {token}\r\n");
    }
    head += "\r\n";
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    let mut raw = Vec::new();
    (&mut s)
        .take(MAX_RESPONSE as u64)
        .read_to_end(&mut raw)
        .await?;
    parse(&raw)
}

/// Reads a whole response: status, session id, and the messages of its
/// body (JSON, or the `data:` of each event of an event stream).
pub fn parse(raw: &[u8]) -> io::Result<Answer> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no HTTP answer (the server may not be up yet)"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("not an HTTP status line"))?;
    let mut session = None;
    let (mut chunked, mut stream) = (false, false);
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "mcp-session-id" => session = Some(v.to_string()),
            "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
            "content-type" => stream = v.starts_with("text/event-stream"),
            _ => {}
        }
    }
    let mut body = raw[split + 4..].to_vec();
    if chunked {
        body = dechunk(&body).ok_or_else(|| bad("a chunked body that does not add up"))?;
    }
    let messages = match stream {
        true => events(&body),
        false if body.iter().all(u8::is_ascii_whitespace) => Vec::new(),
        false => vec![body],
    };
    Ok(Answer {
        status,
        session,
        messages,
    })
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// The data of each event of an event stream, as bytes (a message that
/// is not UTF-8 is the server's to answer for, not ours to rewrite).
fn events(body: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut data: Vec<&[u8]> = Vec::new();
    let flush = |data: &mut Vec<&[u8]>, out: &mut Vec<Vec<u8>>| {
        if !data.is_empty() {
            out.push(data.join(&b'\n'));
            data.clear();
        }
    };
    for line in body.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            flush(&mut data, &mut out);
        } else if let Some(d) = line.strip_prefix(b"data:") {
            data.push(d.strip_prefix(b" ").unwrap_or(d));
        }
    }
    flush(&mut data, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stream_in_chunks_gives_its_messages_and_the_session() {
        let sse =
            "event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n";
        let body = format!("{:x}\r\n{sse}\r\n0\r\n\r\n", sse.len());
        let raw = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: abc\r\nTransfer-Encoding: chunked\r\n\r\n{body}"
        );
        let a = parse(raw.as_bytes()).unwrap();
        assert_eq!((a.status, a.session.as_deref()), (200, Some("abc")));
        assert_eq!(
            a.messages,
            vec![br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec()]
        );
    }

    #[test]
    fn json_bodies_and_accepted_notifications() {
        let a = parse(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        )
        .unwrap();
        assert_eq!(a.messages, vec![b"{}".to_vec()]);
        let a = parse(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!((a.status, a.messages.len()), (202, 0));
        assert!(parse(b"").is_err(), "no answer: tried again");
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
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
