//! The host's side of the guest's network: each egress stream is one
//! request (`mcpvm_protocol::egress`), decided by the run's policy. A
//! lookup is resolved here, by the host's resolver, and its addresses are
//! remembered so that a later connection to one of them is judged by the
//! name; a connection is made here and its bytes copied both ways. Every
//! request, allowed or not, is a `net` event.
//!
//! The guest is hostile: requests are one bounded line read under a time
//! limit; streams at once and new requests per second are bounded, and
//! what is past the bounds is refused (and counted, not logged one by
//! one).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpvm_protocol::egress::{Reply, Request, HOST_ADDR, HOST_NAME, MAX_REQUEST};
use mcpvm_protocol::messages::{AnyEvent, During, EventLine, HostEvent, NetEvent};
use withholding::network::{Decision, NetworkPolicy};

/// Streams open at once at most (fewer where the descriptor limit is
/// low: [`streams_within`]).
pub const MAX_STREAMS: usize = 256;
/// Descriptors one stream holds: the guest's stream, the remote socket,
/// and a clone of each for the other direction.
const FDS_PER_STREAM: u64 = 4;
/// Descriptors kept for everything else (listener, events file, stdio).
const FDS_SPARE: u64 = 32;

/// Streams that fit under a descriptor limit of `limit`.
pub fn streams_within(limit: u64) -> usize {
    let fit = limit.saturating_sub(FDS_SPARE) / FDS_PER_STREAM;
    (fit as usize).clamp(1, MAX_STREAMS)
}
/// New requests per second, sustained; bursts up to twice that.
pub const RATE: f64 = 200.0;
/// `net` events written at most; the rest are counted.
pub const MAX_EVENTS: u64 = 10_000;
/// Names remembered with their addresses at most.
const MAX_RESOLVED: usize = 4096;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Denials said on stderr at most; the rest are in `--events`.
const MAX_SAID: u64 = 20;

/// Where `net` events go: the run's `--events` file, and a line on
/// stderr for each of the first denials.
pub struct NetLog {
    file: Mutex<Option<File>>,
    /// The run's start, as this process knows it.
    start: Instant,
    written: AtomicU64,
    dropped: AtomicU64,
    said: AtomicU64,
}

impl NetLog {
    /// `since_start_ms`: how long the run had been going when `start`
    /// was taken, so that `at_ms` agrees with the agent's events.
    pub fn new(file: Option<File>, since_start_ms: f64) -> NetLog {
        NetLog {
            file: Mutex::new(file),
            start: Instant::now() - Duration::from_secs_f64(since_start_ms / 1000.0),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            said: AtomicU64::new(0),
        }
    }

    pub fn add(&self, e: &NetEvent) {
        let what = what(e);
        match (e.allowed, &e.reason) {
            (false, Some(why)) => {
                if self.said.fetch_add(1, Ordering::Relaxed) < MAX_SAID {
                    let why: String = crate::logger::printable(why).chars().take(512).collect();
                    eprintln!("mcpvm: network: denied {what}: {why}");
                }
            }
            _ => log::info!(
                "network: {what} allowed ({} B out, {} B in)",
                e.bytes_out,
                e.bytes_in
            ),
        }
        if self.written.fetch_add(1, Ordering::Relaxed) >= MAX_EVENTS {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let line = EventLine {
            event: AnyEvent::Host(HostEvent::Net(e.clone())),
            at_ms: self.start.elapsed().as_secs_f64() * 1000.0,
        };
        let Ok(text) = serde_json::to_string(&line) else {
            return;
        };
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = f.as_mut() {
            let _ = f.write_all((text + "\n").as_bytes());
        }
    }

    /// Says how many events were past the bound.
    pub fn finish(&self) {
        let dropped = self.dropped.load(Ordering::Relaxed);
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(f), true) = (f.as_mut(), dropped > 0) {
            let _ = writeln!(
                f,
                "{}",
                serde_json::to_value(HostEvent::NetEventsDropped { count: dropped })
                    .unwrap_or_default()
            );
        }
    }
}

/// What a try was, for a terminal: the name is the guest's choice, so it
/// is made printable and bounded.
fn what(e: &NetEvent) -> String {
    let target = e.address.as_deref().or(e.name.as_deref()).unwrap_or("?");
    let port = e.port.map(|p| format!(":{p}")).unwrap_or_default();
    let target: String = crate::logger::printable(target).chars().take(256).collect();
    format!("{} {target}{port}", e.kind)
}

/// Raises this process's soft descriptor limit toward its hard limit (to
/// what [`MAX_STREAMS`] streams need), so that the default 1024 does not
/// cut the proxy short; returns the soft limit it then has, which the
/// proxy sizes itself by ([`Proxy::within_fd_limit`]).
pub fn raise_fd_limit() -> u64 {
    let want = MAX_STREAMS as u64 * FDS_PER_STREAM + FDS_SPARE;
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get and set the limit through a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return 1024;
        }
        if l.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want.min(l.rlim_max),
                rlim_max: l.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    l.rlim_cur
}

/// A token bucket.
struct Rate {
    tokens: f64,
    at: Instant,
}

pub struct Proxy {
    policy: NetworkPolicy,
    /// Address → the allowed name it was handed out for.
    resolved: Mutex<HashMap<Ipv4Addr, String>>,
    pub log: NetLog,
    active: AtomicUsize,
    /// [`MAX_STREAMS`], or fewer under this process's descriptor limit.
    max_streams: usize,
    rate: Mutex<Rate>,
    /// Where host.mcpvm.internal leads.
    this_host: IpAddr,
}

impl Proxy {
    pub fn new(policy: NetworkPolicy, log: NetLog) -> Proxy {
        Proxy {
            policy,
            resolved: Mutex::default(),
            log,
            active: AtomicUsize::new(0),
            max_streams: MAX_STREAMS,
            rate: Mutex::new(Rate {
                tokens: 2.0 * RATE,
                at: Instant::now(),
            }),
            this_host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        }
    }

    /// No more streams at once than a descriptor limit of `fd_limit`
    /// holds (taken before the process confines itself: its filter has
    /// no getrlimit).
    pub fn within_fd_limit(mut self, fd_limit: u64) -> Proxy {
        self.max_streams = streams_within(fd_limit);
        self
    }

    /// Serves every stream `listener` accepts, each on its own thread,
    /// until the listener fails.
    pub fn serve(self: Arc<Self>, listener: UnixListener) {
        self.serve_from(listener.incoming())
    }

    /// [`Proxy::serve`] of any stream of accepted connections: an error
    /// passes (`crate::host::accept`), only a listener that is gone ends it.
    pub fn serve_from(self: Arc<Self>, incoming: impl Iterator<Item = io::Result<UnixStream>>) {
        for stream in crate::host::accept::accepted(incoming) {
            let admitted =
                self.active.load(Ordering::SeqCst) < self.max_streams && self.take_token();
            if !admitted {
                // Refused without reading: the cheapest answer to a flood.
                self.log.dropped.fetch_add(1, Ordering::Relaxed);
                let _ = (&stream).write_all(
                    Reply::Denied {
                        reason: "too many requests".into(),
                    }
                    .line()
                    .as_bytes(),
                );
                continue;
            }
            self.active.fetch_add(1, Ordering::SeqCst);
            let proxy = self.clone();
            let spawned = std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    proxy.handle(stream);
                    proxy.active.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                self.active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn take_token(&self) -> bool {
        let mut r = self.rate.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        r.tokens = (r.tokens + now.duration_since(r.at).as_secs_f64() * RATE).min(2.0 * RATE);
        r.at = now;
        if r.tokens >= 1.0 {
            r.tokens -= 1.0;
            return true;
        }
        false
    }

    /// One stream: its request, the answer, and for a connection its
    /// bytes.
    pub fn handle(&self, stream: UnixStream) {
        let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
        let mut line = Vec::new();
        let mut reader = BufReader::new((&stream).take(MAX_REQUEST as u64));
        if reader.read_until(b'\n', &mut line).is_err() || !line.ends_with(b"\n") {
            return;
        }
        // The agent reads the reply byte by byte and sends nothing before
        // it: nothing of the connection is buffered here.
        drop(reader);
        let Ok(request) = serde_json::from_slice::<Request>(&line) else {
            return;
        };
        let _ = stream.set_read_timeout(None);
        match request {
            Request::Resolve {
                name,
                qtype,
                during,
            } => self.resolve(&stream, name, qtype, during),
            Request::Connect {
                address,
                port,
                during,
            } => self.connect(stream, address, port, during),
        }
    }

    fn resolve(&self, stream: &UnixStream, name: String, qtype: String, during: Option<During>) {
        let t = Instant::now();
        let mut event = NetEvent {
            kind: "dns".into(),
            name: Some(name.clone()),
            qtype: Some(qtype),
            during,
            ..NetEvent::default()
        };
        let reply = match self.answer(&name) {
            Ok(addresses) => {
                event.allowed = true;
                event.addresses = addresses.iter().map(|a| a.to_string()).collect();
                Reply::Resolved { addresses }
            }
            Err(Reply::Denied { reason }) => {
                event.reason = Some(reason.clone());
                Reply::Denied { reason }
            }
            Err(other) => {
                event.allowed = true;
                if let Reply::Failed { reason } = &other {
                    event.reason = Some(reason.clone());
                }
                other
            }
        };
        event.duration_ms = t.elapsed().as_secs_f64() * 1000.0;
        self.log.add(&event);
        let _ = (&*stream).write_all(reply.line().as_bytes());
    }

    /// The IPv4 addresses the guest gets for `name`, or the reply that
    /// says why none.
    fn answer(&self, name: &str) -> Result<Vec<Ipv4Addr>, Reply> {
        if name == HOST_NAME {
            let allowed = self
                .policy
                .rules
                .iter()
                .any(|r| r.host == withholding::network::Host::ThisHost);
            return match allowed {
                true => Ok(vec![HOST_ADDR]),
                false => Err(Reply::Denied {
                    reason: format!("{HOST_NAME} is not allowed"),
                }),
            };
        }
        if let Decision::Deny(reason) = self.policy.resolve(name) {
            return Err(Reply::Denied { reason });
        }
        let found: Vec<IpAddr> = (name, 0)
            .to_socket_addrs()
            .map_err(|e| Reply::Failed {
                reason: format!("the host cannot resolve {name}: {e}"),
            })?
            .map(|a| a.ip())
            .collect();
        let (ok, refused): (Vec<IpAddr>, Vec<IpAddr>) =
            found.into_iter().partition(|a| self.policy.answer_ok(*a));
        let mut v4: Vec<Ipv4Addr> = ok
            .into_iter()
            .filter_map(|a| match a {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(v6) => v6.to_ipv4_mapped(),
            })
            .collect();
        v4.dedup();
        if v4.is_empty() {
            let reason = match refused.first() {
                Some(a) => format!(
                    "{name} resolves only to refused addresses ({a} is {})",
                    self.policy.refusal(*a).unwrap_or("refused")
                ),
                None => format!("{name} has no IPv4 address"),
            };
            return Err(Reply::Denied { reason });
        }
        let mut remembered = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        if remembered.len() + v4.len() > MAX_RESOLVED {
            remembered.clear();
        }
        for a in &v4 {
            remembered.insert(*a, name.to_string());
        }
        Ok(v4)
    }

    fn connect(&self, stream: UnixStream, address: Ipv4Addr, port: u16, during: Option<During>) {
        let t = Instant::now();
        let (name, target, verdict) = if address == HOST_ADDR {
            (
                Some(HOST_NAME.to_string()),
                SocketAddr::new(self.this_host, port),
                self.policy.this_host(port),
            )
        } else {
            let name = self
                .resolved
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&address)
                .cloned();
            let verdict = self
                .policy
                .connect(name.as_deref(), IpAddr::V4(address), port);
            (name, SocketAddr::new(IpAddr::V4(address), port), verdict)
        };
        let mut event = NetEvent {
            kind: "connect".into(),
            name,
            address: Some(address.to_string()),
            port: Some(port),
            during,
            ..NetEvent::default()
        };
        // Each event is written before the guest hears the answer.
        if let Decision::Deny(reason) = verdict {
            event.reason = Some(reason.clone());
            event.duration_ms = t.elapsed().as_secs_f64() * 1000.0;
            self.log.add(&event);
            let _ = (&stream).write_all(Reply::Denied { reason }.line().as_bytes());
            return;
        }
        event.allowed = true;
        let remote = match TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) {
            Ok(r) => r,
            Err(e) => {
                let reason = format!("cannot connect to {target}: {e}");
                event.reason = Some(reason.clone());
                event.duration_ms = t.elapsed().as_secs_f64() * 1000.0;
                self.log.add(&event);
                let _ = (&stream).write_all(Reply::Failed { reason }.line().as_bytes());
                return;
            }
        };
        let _ = remote.set_nodelay(true);
        if (&stream)
            .write_all(Reply::Connected.line().as_bytes())
            .is_ok()
        {
            (event.bytes_out, event.bytes_in) = splice(stream, remote);
        }
        event.duration_ms = t.elapsed().as_secs_f64() * 1000.0;
        self.log.add(&event);
    }
}

/// Copies guest → remote and remote → guest until both end; the bytes
/// each way.
fn splice(guest: UnixStream, remote: TcpStream) -> (u64, u64) {
    let (Ok(guest2), Ok(remote2)) = (guest.try_clone(), remote.try_clone()) else {
        return (0, 0);
    };
    let out = std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(move || {
            let n = copy(&guest2, &remote2);
            let _ = remote2.shutdown(Shutdown::Write);
            n
        });
    let inward = copy(&remote, &guest);
    let _ = guest.shutdown(Shutdown::Write);
    let out = match out {
        Ok(h) => h.join().unwrap_or(0),
        Err(_) => 0,
    };
    (out, inward)
}

fn copy(mut from: impl Read, mut to: impl Write) -> u64 {
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0;
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
        total += n as u64;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn proxy(rules: &[&str], events: &std::path::Path) -> Arc<Proxy> {
        let policy =
            NetworkPolicy::parse(&rules.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        Arc::new(Proxy::new(
            policy,
            NetLog::new(Some(File::create(events).unwrap()), 0.0),
        ))
    }

    #[test]
    fn a_guest_chosen_name_reaches_the_terminal_escaped_and_bounded() {
        let e = NetEvent {
            kind: "dns".into(),
            name: Some(format!("\x1b]0;owned\x07{}", "a".repeat(1000))),
            qtype: None,
            address: None,
            port: Some(53),
            addresses: vec![],
            allowed: false,
            reason: None,
            bytes_out: 0,
            bytes_in: 0,
            duration_ms: 0.0,
            during: None,
        };
        let said = what(&e);
        assert!(!said.chars().any(char::is_control), "{said:?}");
        assert!(said.starts_with("dns \\u{1b}]0;owned\\u{7}aaa"), "{said}");
        assert!(said.len() < 300, "{}", said.len());
    }

    /// As the agent asks: one line out, one line back, then the stream.
    fn ask(p: &Arc<Proxy>, req: Request) -> (Reply, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let p = p.clone();
        std::thread::spawn(move || p.handle(theirs));
        (&ours).write_all(req.line().as_bytes()).unwrap();
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while (&ours).read(&mut b).unwrap() == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        (serde_json::from_slice(&line).unwrap(), ours)
    }

    fn events(path: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn an_allowed_name_resolves_and_its_connection_carries_bytes_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            let mut got = [0u8; 4];
            s.read_exact(&mut got).unwrap();
            s.write_all(b"pong!").unwrap();
        });
        // localhost is loopback: only a rule naming the address lets it be.
        let p = proxy(&["localhost", "127.0.0.1"], &log);
        let (reply, _) = ask(
            &p,
            Request::Resolve {
                name: "localhost".into(),
                qtype: "A".into(),
                during: None,
            },
        );
        assert_eq!(
            reply,
            Reply::Resolved {
                addresses: vec![Ipv4Addr::LOCALHOST]
            }
        );
        let during = During::Request {
            id: 7.into(),
            method: "tools/call".into(),
            tool: Some("fetch".into()),
        };
        let (reply, stream) = ask(
            &p,
            Request::Connect {
                address: Ipv4Addr::LOCALHOST,
                port,
                during: Some(during.clone()),
            },
        );
        assert_eq!(reply, Reply::Connected);
        (&stream).write_all(b"ping").unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        let mut back = String::new();
        (&stream).read_to_string(&mut back).unwrap();
        assert_eq!(back, "pong!");
        drop(stream);
        // The connection's event comes when it ends.
        let deadline = Instant::now() + Duration::from_secs(5);
        while events(&log).len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let ev = events(&log);
        assert_eq!(ev[0]["event"], "net");
        assert_eq!(
            (ev[0]["kind"].as_str(), ev[0]["allowed"].as_bool()),
            (Some("dns"), Some(true))
        );
        assert_eq!(ev[0]["addresses"][0], "127.0.0.1");
        assert_eq!(ev[1]["kind"], "connect");
        assert_eq!(ev[1]["name"], "localhost");
        assert_eq!(
            (ev[1]["bytes_out"].as_u64(), ev[1]["bytes_in"].as_u64()),
            (Some(4), Some(5))
        );
        assert_eq!(ev[1]["during"]["tool"], "fetch");
        assert!(ev[1]["at_ms"].as_f64().is_some());
    }

    #[test]
    fn names_addresses_and_ports_not_allowed_are_refused_and_logged() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        let p = proxy(&["localhost:80"], &log);
        let (r, _) = ask(
            &p,
            Request::Resolve {
                name: "not-allowed.example".into(),
                qtype: "A".into(),
                during: None,
            },
        );
        assert!(
            matches!(r, Reply::Denied { ref reason } if reason.contains("not allowed")),
            "{r:?}"
        );
        // Allowed by name, but it resolves to loopback, which no rule names.
        let (r, _) = ask(
            &p,
            Request::Resolve {
                name: "localhost".into(),
                qtype: "A".into(),
                during: None,
            },
        );
        assert!(
            matches!(r, Reply::Denied { ref reason } if reason.contains("loopback")),
            "{r:?}"
        );
        for (address, port, why) in [
            (Ipv4Addr::new(169, 254, 169, 254), 80, "link-local"),
            (Ipv4Addr::LOCALHOST, 80, "loopback"),
            (Ipv4Addr::new(10, 1, 2, 3), 443, "private"),
            (Ipv4Addr::new(93, 184, 216, 34), 443, "no allowed name"),
            (HOST_ADDR, 8080, "host.mcpvm.internal:8080 is not allowed"),
        ] {
            let (r, _) = ask(
                &p,
                Request::Connect {
                    address,
                    port,
                    during: None,
                },
            );
            assert!(
                matches!(r, Reply::Denied { ref reason } if reason.contains(why)),
                "{address}: {r:?}"
            );
        }
        let ev = events(&log);
        assert_eq!(ev.len(), 7);
        assert!(ev
            .iter()
            .all(|e| e["allowed"] == false && e["reason"].is_string()));
        assert_eq!(ev[2]["address"], "169.254.169.254");
    }

    #[test]
    fn the_host_is_reached_by_its_name_on_an_allowed_port() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            s.write_all(b"host").unwrap();
        });
        let p = proxy(&[&format!("host.mcpvm.internal:{port}")], &log);
        let (r, _) = ask(
            &p,
            Request::Resolve {
                name: HOST_NAME.into(),
                qtype: "A".into(),
                during: None,
            },
        );
        assert_eq!(
            r,
            Reply::Resolved {
                addresses: vec![HOST_ADDR]
            }
        );
        let (r, s) = ask(
            &p,
            Request::Connect {
                address: HOST_ADDR,
                port,
                during: None,
            },
        );
        assert_eq!(r, Reply::Connected);
        let mut got = String::new();
        (&s).read_to_string(&mut got).unwrap();
        assert_eq!(got, "host");
    }

    /// An accept that fails (the descriptor limit reached) does not end
    /// the proxy for the rest of the run: the next stream is served.
    #[test]
    fn an_accept_error_passes_and_the_next_stream_is_served() {
        let dir = tempfile::tempdir().unwrap();
        let p = proxy(&["localhost"], &dir.path().join("events.jsonl"));
        let (ours, theirs) = UnixStream::pair().unwrap();
        let incoming = vec![Err(io::Error::from_raw_os_error(libc::EMFILE)), Ok(theirs)];
        let server = p.clone();
        std::thread::spawn(move || server.serve_from(incoming.into_iter()));
        let req = Request::Resolve {
            name: "localhost".into(),
            qtype: "A".into(),
            during: None,
        };
        (&ours).write_all(req.line().as_bytes()).unwrap();
        let mut line = String::new();
        BufReader::new(&ours).read_line(&mut line).unwrap();
        assert!(
            line.contains("resolved") || line.contains("addresses"),
            "{line}"
        );
    }

    #[test]
    fn the_streams_at_once_fit_the_descriptor_limit() {
        assert_eq!(streams_within(1 << 20), MAX_STREAMS);
        // The default soft limit: 4 descriptors a stream, some spare.
        assert_eq!(streams_within(1024), 248);
        assert_eq!(streams_within(64), 8);
        assert_eq!(streams_within(0), 1);
        assert!(streams_within(1024) as u64 * FDS_PER_STREAM + FDS_SPARE <= 1024);
    }

    #[test]
    fn a_flood_of_streams_is_refused_past_the_rate_and_the_proxy_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        let p = proxy(&["localhost"], &log);
        let sock = dir.path().join("egress.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let server = p.clone();
        std::thread::spawn(move || server.serve(listener));
        // Held open and silent: each takes a thread until its time limit.
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..(3.0 * RATE) as usize {
            let s = UnixStream::connect(&sock).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            held.push(s);
        }
        for s in &held {
            let mut line = String::new();
            if BufReader::new(s).read_line(&mut line).is_ok() && line.contains("too many") {
                refused += 1;
            }
        }
        assert!(
            refused >= (3.0 * RATE) as usize - MAX_STREAMS,
            "{refused} refused"
        );
        assert!(p.active.load(Ordering::SeqCst) <= MAX_STREAMS);
        drop(held);
        // The bucket refills: a later request is answered.
        std::thread::sleep(Duration::from_millis(300));
        let s = UnixStream::connect(&sock).unwrap();
        (&s).write_all(
            Request::Resolve {
                name: "x.example".into(),
                qtype: "A".into(),
                during: None,
            }
            .line()
            .as_bytes(),
        )
        .unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        assert!(
            line.contains("denied") && line.contains("not allowed"),
            "{line}"
        );
    }
}
