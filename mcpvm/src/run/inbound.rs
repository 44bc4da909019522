//! `mcpvm run --listen ADDR`: the host's side of connections to a server
//! that speaks Streamable HTTP in the guest (docs/network.md, "Inbound").
//! The listener is bound before the run jails itself (the jail has its
//! own network namespace); each connection it accepts becomes a vsock
//! stream to the agent's inbound port (`CONNECT <port>` on the VMM's
//! socket), which the agent forwards to the server's port. One thread
//! accepts, confined to the `inbound` filter; one per direction copies.
//!
//! The server holds its credentials, so who may drive it is checked
//! before a byte reaches the guest ([`Gate`]): the first request of every
//! connection must name a loopback host (or the address listened on) in
//! `Host`, come from no page or a loopback one (`Origin`: a web page
//! reaching 127.0.0.1 by DNS rebinding names its own), and carry the
//! run's bearer token. A connection is one client: the rest of its
//! requests are its own. Refused connections get a 401 or 403 and are
//! closed; nothing of theirs is forwarded.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use crate::host::seccomp::{confine, HostThread};
use mcpvm_protocol::ports::INBOUND_PORT;
use vmm::SeccompMode;

/// Connections at once at most; more wait in the listener's backlog.
const MAX_CONNECTIONS: usize = 256;

/// The environment variable a caller sets to choose the run's token (the
/// probe does); otherwise the run makes one and says it on stderr.
pub const TOKEN_ENV: &str = "MCPVM_LISTEN_TOKEN";
/// Header bytes the first request may have before it is refused.
const MAX_HEAD: usize = 16 << 10;

/// A new random token: 48 hex digits.
pub fn fresh_token() -> io::Result<String> {
    let mut raw = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// Who may drive the server through --listen.
#[derive(Clone, Debug)]
pub struct Gate {
    /// The address listened on: its host is an acceptable `Host`.
    pub addr: std::net::SocketAddr,
    /// `Authorization: Bearer <token>` every connection must show.
    pub token: String,
}

impl Gate {
    /// The token from [`TOKEN_ENV`], or a fresh random one (and true: it
    /// must be told to the user).
    pub fn new(addr: std::net::SocketAddr) -> io::Result<(Gate, bool)> {
        if let Ok(t) = std::env::var(TOKEN_ENV) {
            if t.len() < 16 || !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{TOKEN_ENV} must be at least 16 printable characters"),
                ));
            }
            return Ok((Gate { addr, token: t }, false));
        }
        Ok((
            Gate {
                addr,
                token: fresh_token()?,
            },
            true,
        ))
    }

    /// Judges a request head (up to its blank line): None to let it
    /// through, else the status and reason to answer.
    fn judge(&self, head: &[u8]) -> Option<(u16, &'static str)> {
        let text = String::from_utf8_lossy(head);
        let header = |name: &str| {
            text.split("\r\n").skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
        };
        match header("host") {
            Some(h) if self.local_host(&h, false) => {}
            _ => return Some((403, "the Host header does not name this machine's loopback")),
        }
        if let Some(origin) = header("origin") {
            let host = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            // A page of this machine's own (the MCP Inspector's, on its
            // own port) may; any other origin may not.
            let host = host.map(|h| h.split('/').next().unwrap_or(h));
            if !host.is_some_and(|h| self.local_host(h, true)) {
                return Some((
                    403,
                    "requests from a web page of another origin are refused",
                ));
            }
        }
        let given = header("authorization");
        let token = given.as_deref().and_then(|a| {
            let (scheme, t) = a.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| t.trim())
        });
        match token {
            Some(t) if same(t.as_bytes(), self.token.as_bytes()) => None,
            _ => Some((401, "send the run's token: Authorization: Bearer <token>")),
        }
    }

    /// Whether `host[:port]` is this machine's loopback or the address
    /// listened on, at its port if one is given (any port: an origin).
    fn local_host(&self, authority: &str, any_port: bool) -> bool {
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && p.bytes().all(|b| b.is_ascii_digit()) => {
                (h, Some(p))
            }
            _ => (authority, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port_ok =
            any_port || port.is_none_or(|p| p.parse::<u16>().ok() == Some(self.addr.port()));
        let host_ok = host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback() || ip == self.addr.ip());
        host_ok && port_ok
    }
}

/// Compares in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Reads the first request's head from `client`: Ok(bytes read so far,
/// head included), or Err when it does not come whole within the limit.
fn read_head(client: &mut TcpStream) -> io::Result<(Vec<u8>, usize)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((got, i + 4));
        }
        if got.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        match client.read(&mut buf)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn refuse(mut client: &TcpStream, status: u16, why: &str) {
    let reason = if status == 401 {
        "Unauthorized"
    } else {
        "Forbidden"
    };
    let auth = if status == 401 {
        "WWW-Authenticate: Bearer\r\n"
    } else {
        ""
    };
    let _ = write!(
        client,
        "HTTP/1.1 {status} {reason}\r\n{auth}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}\n",
        why.len() + 1
    );
    let _ = client.shutdown(Shutdown::Both);
}

/// The descriptor `--listen-fd` names, if any, checked to be an open
/// socket; it is owned from here on.
pub fn adopt(fd: Option<i32>) -> Result<Option<std::os::fd::OwnedFd>, super::RunError> {
    use std::os::fd::FromRawFd;
    let Some(fd) = fd else { return Ok(None) };
    // SAFETY: fstat only reads the descriptor's metadata into `st`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let is_socket = fd > 2
        && unsafe { libc::fstat(fd, &mut st) } == 0
        && st.st_mode & libc::S_IFMT == libc::S_IFSOCK;
    if !is_socket {
        return Err(super::RunError::ListenFd(fd));
    }
    // SAFETY: an open socket nobody else in this process owns (the
    // caller handed it over; nothing has run yet that could take it).
    Ok(Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }))
}

/// The listener for --listen `addr` (bound here, or the one the caller
/// handed over, which must be bound to `addr`) and its gate; a token
/// this run made is said on stderr.
pub fn bind(
    addr: std::net::SocketAddr,
    inherited: Option<std::os::fd::OwnedFd>,
) -> Result<(TcpListener, Gate), super::RunError> {
    let listen_err = |source| super::RunError::Listen {
        path: addr.to_string().into(),
        source,
    };
    let listener = match inherited {
        Some(fd) => {
            let l = TcpListener::from(fd);
            match l.local_addr().map_err(listen_err)? {
                bound if bound == addr => l,
                bound => {
                    return Err(listen_err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("the socket handed over is bound to {bound}"),
                    )))
                }
            }
        }
        None => TcpListener::bind(addr).map_err(listen_err)?,
    };
    let (gate, made) = Gate::new(addr).map_err(listen_err)?;
    if made {
        eprintln!(
            "mcpvm: listening on {addr}: every connection must send `Authorization: Bearer {}` \
             (set {TOKEN_ENV} to choose the token)",
            gate.token
        );
    }
    Ok((listener, gate))
}

/// Starts accepting on `listener`; each connection that `gate` lets
/// through goes to the guest through the VMM's vsock socket at `uds`.
pub fn forward_all(listener: TcpListener, uds: PathBuf, gate: Gate, mode: SeccompMode) {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let spawned = std::thread::Builder::new()
        .name("inbound".into())
        .spawn(move || {
            if let Err(e) = confine(HostThread::Inbound, mode) {
                log::error!("inbound: cannot confine the listener thread: {e}");
                return;
            }
            let active = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            // An accept error passes after a pause, never spins
            // (crate::host::accept).
            for conn in crate::host::accept::accepted(listener.incoming()) {
                if active.load(std::sync::atomic::Ordering::SeqCst) >= MAX_CONNECTIONS {
                    let _ = conn.shutdown(Shutdown::Both);
                    continue;
                }
                active.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (uds, active, gate) = (uds.clone(), active.clone(), gate.clone());
                let _ = std::thread::Builder::new()
                    .stack_size(256 << 10)
                    .spawn(move || {
                        if let Err(e) = admit(conn, &gate, &uds) {
                            log::info!("inbound: a connection ended: {e}");
                        }
                        active.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    });
            }
        });
    match spawned {
        Ok(_) => log::info!("inbound: listening on {addr}, forwarding to the guest's server"),
        Err(e) => log::error!("inbound: cannot start the listener thread: {e}"),
    }
}

/// Judges the connection's first request and forwards it, and the rest,
/// when the gate lets it through.
fn admit(mut client: TcpStream, gate: &Gate, uds: &PathBuf) -> io::Result<()> {
    // A client that never finishes its head does not hold a thread long.
    client.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let (got, head) = match read_head(&mut client) {
        Ok(h) => h,
        Err(e) => {
            refuse(&client, 403, "no complete HTTP request head");
            return Err(e);
        }
    };
    if let Some((status, why)) = gate.judge(&got[..head]) {
        refuse(&client, status, why);
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    }
    client.set_read_timeout(None)?;
    forward(client, &got, uds)
}

fn forward(client: TcpStream, first: &[u8], uds: &PathBuf) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let mut guest = UnixStream::connect(uds)?;
    guest.write_all(format!("CONNECT {INBOUND_PORT}\n").as_bytes())?;
    // `OK <port>\n`, byte by byte: what follows is the server's.
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < 32 {
        match guest.read(&mut b)? {
            0 => break,
            _ if b[0] == b'\n' => break,
            _ => line.push(b[0]),
        }
    }
    if !line.starts_with(b"OK ") {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "the guest is not listening (is its server an http one?)",
        ));
    }
    guest.write_all(first)?;
    let (client2, guest2) = (client.try_clone()?, guest.try_clone()?);
    let up = std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(move || {
            copy(&client2, &guest2);
            let _ = guest2.shutdown(Shutdown::Write);
        })?;
    copy(&guest, &client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::os::unix::net::UnixListener;

    /// The VMM's side as the muxer speaks it: `CONNECT <port>\n`, then
    /// `OK <port>\n` (or a close), then the guest's bytes.
    fn fake_vmm(path: &std::path::Path, accept: bool) {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut line = String::new();
            let mut r = io::BufReader::new(&s);
            r.read_line(&mut line).unwrap();
            assert_eq!(line, format!("CONNECT {INBOUND_PORT}\n"));
            if !accept {
                return;
            }
            (&s).write_all(b"OK 1234\n").unwrap();
            let mut req = [0u8; 4];
            r.read_exact(&mut req).unwrap();
            (&s).write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
            (&s).write_all(&req).unwrap();
        });
    }

    const TOKEN: &str = "0123456789abcdef0123";

    fn gate(addr: std::net::SocketAddr) -> Gate {
        Gate {
            addr,
            token: TOKEN.into(),
        }
    }

    fn request(host: &str, extra: &str) -> String {
        format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Length: 4\r\n\r\nping")
    }

    #[test]
    fn a_host_connection_with_the_token_reaches_the_guest_and_back() {
        let dir = tempfile::tempdir().unwrap();
        let uds = dir.path().join("vsock.sock");
        fake_vmm(&uds, true);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        forward_all(listener, uds, gate(addr), SeccompMode::Off);
        let mut c = TcpStream::connect(addr).unwrap();
        let req = request(
            &addr.to_string(),
            &format!("Authorization: Bearer {TOKEN}\r\n"),
        );
        c.write_all(req.as_bytes()).unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        // The guest got the request whole; its first 4 bytes come back.
        assert_eq!(got, "HTTP/1.1 200 OK\r\n\r\nPOST");
    }

    /// Without the token, with a foreign Host (DNS rebinding), or from a
    /// foreign page: refused with a status, and nothing reaches the guest
    /// (the fake VMM would fail the test on a CONNECT it did not expect:
    /// it is never started here).
    #[test]
    fn requests_without_the_token_or_from_elsewhere_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let uds = dir.path().join("no-vmm.sock");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        forward_all(listener, uds, gate(addr), SeccompMode::Off);
        let auth = format!("Authorization: Bearer {TOKEN}\r\n");
        let here = addr.to_string();
        for (req, want) in [
            (request(&here, ""), "401"),
            (
                request(&here, "Authorization: Bearer wrong-token-of-length\r\n"),
                "401",
            ),
            (
                request(&format!("evil.example:{}", addr.port()), &auth),
                "403",
            ),
            (request("127.0.0.1:1", &auth), "403"),
            (
                request(&here, &format!("Origin: http://evil.example\r\n{auth}")),
                "403",
            ),
            ("garbage without a head".to_string(), "403"),
        ] {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(req.as_bytes()).unwrap();
            let _ = c.shutdown(Shutdown::Write);
            let mut got = String::new();
            c.read_to_string(&mut got).unwrap();
            assert!(
                got.starts_with(&format!("HTTP/1.1 {want} ")),
                "{req:?}: {got}"
            );
        }
    }

    #[test]
    fn loopback_names_and_origins_pass() {
        let addr: std::net::SocketAddr = "127.0.0.1:8931".parse().unwrap();
        let g = gate(addr);
        let auth = format!("Authorization: bearer {TOKEN}\r\n");
        for host in [
            "127.0.0.1:8931",
            "localhost:8931",
            "localhost",
            "[::1]:8931",
            "127.0.0.2:8931",
        ] {
            assert_eq!(g.judge(request(host, &auth).as_bytes()), None, "{host}");
        }
        let from_inspector = format!("Origin: http://localhost:6274\r\n{auth}");
        assert_eq!(
            g.judge(request("localhost:8931", &from_inspector).as_bytes()),
            None
        );
        for host in [
            "localhost:8932",
            "127.0.0.1.evil.example:8931",
            "0.0.0.0:8931",
            "[::1]:1",
        ] {
            assert!(g.judge(request(host, &auth).as_bytes()).is_some(), "{host}");
        }
        // Listening on another address: that address is a Host too.
        let lan = gate("198.51.100.7:8931".parse().unwrap());
        assert_eq!(
            lan.judge(request("198.51.100.7:8931", &auth).as_bytes()),
            None
        );
    }

    #[test]
    fn a_guest_that_does_not_listen_closes_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let uds = dir.path().join("vsock.sock");
        fake_vmm(&uds, false);
        let (client, server) = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            (c, l.accept().unwrap().0)
        };
        let e = forward(server, b"", &uds).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        drop(client);
    }
}
