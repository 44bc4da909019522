//! The guest's network (docs/network.md): a TUN device whose TCP the
//! agent terminates through its NAT (`nat.rs`) and whose DNS it answers
//! (`dns.rs`); each connection and lookup becomes one request to the host
//! on the egress port, where the policy decides. Nothing leaves the guest
//! any other way: the VM has no network device.

mod dns;
mod nat;
mod packet;
mod tun;
mod unclaimed;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use mcpvm_protocol::egress::{self, Reply, Request, GUEST_ADDR, PREFIX};
use mcpvm_protocol::ports::{EGRESS_PORT, HOST_CID};

use crate::vsock;
use guest_agent::calls::Calls;
use nat::{Action, Nat};
use unclaimed::Unclaimed;

/// DNS queries waiting for the host at most; more are dropped (the
/// resolver retries).
const MAX_LOOKUPS: usize = 64;
/// How long a lookup's answer serves the same name's other query types.
const LOOKUP_CACHE: Duration = Duration::from_secs(10);
const THREAD_STACK: usize = 128 << 10;
/// How long the agent waits for the host's answer to a request.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Brings the network up and starts its threads. `calls` attributes each
/// request to what the server was doing.
pub fn start(calls: Option<Arc<Calls>>) -> io::Result<()> {
    let tun = tun::open(GUEST_ADDR, PREFIX)?;
    let listener = listen(GUEST_ADDR, nat::LISTEN_PORT, nat::MAX_FLOWS as i32)?;
    let dns = UdpSocket::bind((GUEST_ADDR, 53))?;
    point_resolver_here()?;
    let (events, inbox) = mpsc::channel();
    let wake = Wake::new()?;
    let streams: Streams = Arc::default();
    {
        let (events, wake, streams) = (events.clone(), wake.clone(), streams.clone());
        spawn(move || accept(listener, streams, events, wake));
    }
    {
        let calls = calls.clone();
        spawn(move || serve_dns(dns, calls));
    }
    spawn(move || route(tun, inbox, events, wake, streams, calls));
    Ok(())
}

/// Brings the guest's loopback up (a server listening on 127.0.0.1
/// needs it; the kernel leaves it down).
pub fn loopback_up() -> io::Result<()> {
    tun::loopback_up()
}

/// The NAT's listener, with room for every flow the NAT admits: a burst
/// of connections must not overflow the accept queue, where the kernel
/// would drop their handshakes silently (and a client that had already
/// sent its FIN would wait forever). An overflow resets the client instead.
fn listen(addr: Ipv4Addr, port: u16, backlog: i32) -> io::Result<TcpListener> {
    let _ = std::fs::write("/proc/sys/net/ipv4/tcp_abort_on_overflow", "1");
    let _ = std::fs::write("/proc/sys/net/core/somaxconn", backlog.to_string());
    let _ = std::fs::write(
        "/proc/sys/net/ipv4/tcp_max_syn_backlog",
        backlog.to_string(),
    );
    // SAFETY: plain socket calls on a fresh fd we own; the sockaddr is
    // fully initialised before bind reads it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let listener = <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd);
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(addr).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&sin as *const libc::sockaddr_in).cast(), len) != 0
            || libc::listen(fd, backlog) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(listener)
    }
}

/// Names the agent as the guest's DNS server in /etc/resolv.conf; on a
/// read-only root, by a file in /run bound over it.
fn point_resolver_here() -> io::Result<()> {
    let text = format!("nameserver {GUEST_ADDR}\noptions ndots:1\n");
    let target = "/etc/resolv.conf";
    match std::fs::write(target, &text) {
        Err(e) if e.raw_os_error() == Some(libc::EROFS) => {
            let ours = "/run/mcpvm-resolv.conf";
            std::fs::write(ours, &text)?;
            let (src, dst) = (
                std::ffi::CString::new(ours).expect("no NUL"),
                std::ffi::CString::new(target).expect("no NUL"),
            );
            // SAFETY: a bind mount of two paths we own the strings of.
            let rc = unsafe {
                libc::mount(
                    src.as_ptr(),
                    dst.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            match rc {
                0 => Ok(()),
                _ => Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot name the agent in {target} on a read-only root: {}",
                        io::Error::last_os_error()
                    ),
                )),
            }
        }
        other => other,
    }
}

type Streams = Arc<Mutex<Unclaimed>>;

enum Note {
    Decided(u16, bool),
    Closed(u16),
}

fn spawn(f: impl FnOnce() + Send + 'static) {
    let _ = std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(f);
}

/// One request to the host: the reply, and the stream (which carries an
/// allowed connection's bytes).
fn ask(req: &Request) -> io::Result<(Reply, File)> {
    let mut s = vsock::connect(HOST_CID, EGRESS_PORT)?;
    // The host answers within its own connect timeout; a host that does
    // not answer must not hold a flow (and a thread) for ever.
    set_read_timeout(&s, REPLY_TIMEOUT)?;
    s.write_all(req.line().as_bytes())?;
    // Byte by byte: what follows the line is the connection's.
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < egress::MAX_REQUEST {
        match s.read(&mut b)? {
            0 => break,
            _ if b[0] == b'\n' => break,
            _ => line.push(b[0]),
        }
    }
    let reply = serde_json::from_slice(&line).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("bad egress reply: {e}"))
    })?;
    set_read_timeout(&s, Duration::ZERO)?;
    Ok((reply, s))
}

/// SO_RCVTIMEO on a socket held as a File (zero: none).
fn set_read_timeout(s: &File, t: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: setsockopt reads a timeval we own, on an fd we own.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The TUN loop: every packet through the NAT; the host's answers and the
/// relays' ends arrive as notes.
fn route(
    mut tun: File,
    inbox: mpsc::Receiver<Note>,
    notes: mpsc::Sender<Note>,
    wake: Wake,
    streams: Streams,
    calls: Option<Arc<Calls>>,
) {
    let mut nat = Nat::default();
    let mut buf = vec![0u8; 65536];
    let mut last_purge = Instant::now();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: tun.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.read_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll over two pollfds we own.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
        if fds[1].revents != 0 {
            wake.clear();
        }
        for note in inbox.try_iter() {
            let action = match note {
                Note::Decided(port, allowed) => nat.decided(port, allowed),
                Note::Closed(port) => {
                    nat.closed(port, Instant::now());
                    Action::Drop
                }
            };
            if let Action::Inject(p) = action {
                let _ = tun.write(&p);
            }
        }
        if fds[0].revents & libc::POLLIN != 0 {
            let Ok(n) = tun.read(&mut buf) else { continue };
            match nat.outbound(buf[..n].to_vec()) {
                Action::Inject(p) => {
                    let _ = tun.write(&p);
                }
                Action::Ask(port, flow) => {
                    let (notes, wake, streams) = (notes.clone(), wake.clone(), streams.clone());
                    let during = calls.as_ref().map(|c| c.during());
                    spawn(move || {
                        let req = Request::Connect {
                            address: flow.dst,
                            port: flow.dport,
                            during,
                        };
                        let allowed = match ask(&req) {
                            Ok((Reply::Connected, s)) => {
                                streams.lock().unwrap_or_else(|p| p.into_inner()).put(
                                    port,
                                    s,
                                    Instant::now(),
                                );
                                true
                            }
                            _ => false,
                        };
                        let _ = notes.send(Note::Decided(port, allowed));
                        wake.ring();
                    });
                }
                Action::Drop => {}
            }
        }
        if last_purge.elapsed() > Duration::from_secs(1) {
            let now = Instant::now();
            let gave_up = streams
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .expire(now);
            for port in gave_up {
                nat.closed(port, now);
            }
            nat.purge(now);
            last_purge = now;
        }
    }
}

/// Accepts the guest's connections as the NAT hands them over and relays
/// each to its host stream.
fn accept(listener: TcpListener, streams: Streams, notes: mpsc::Sender<Note>, wake: Wake) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let Ok(SocketAddr::V4(peer)) = conn.peer_addr() else {
            continue;
        };
        let port = peer.port();
        let Some(host) = streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .claim(port)
        else {
            let _ = conn.shutdown(Shutdown::Both);
            continue;
        };
        let (notes, wake) = (notes.clone(), wake.clone());
        spawn(move || {
            relay(conn, host);
            let _ = notes.send(Note::Closed(port));
            wake.ring();
        });
    }
}

/// Copies both ways until both directions end.
fn relay(guest: TcpStream, host: File) {
    let _ = guest.set_nodelay(true);
    let (Ok(guest2), Ok(host2)) = (guest.try_clone(), host.try_clone()) else {
        return;
    };
    let (done_tx, done) = mpsc::channel();
    spawn(move || {
        copy(&guest2, &host2);
        vsock::shutdown_write(&host2);
        let _ = done_tx.send(());
    });
    copy(&host, &guest);
    let _ = guest.shutdown(Shutdown::Write);
    let _ = done.recv();
}

pub fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

/// A name's latest answer: when, its rcode, its addresses.
type Answers = Arc<Mutex<HashMap<String, (Instant, u8, Vec<Ipv4Addr>)>>>;

/// Answers the guest's DNS queries, each asked of the host on its own
/// thread; the latest answer for a name serves its other query types for
/// a while (an AAAA asked after its A is not asked again; the two sent at
/// once, as glibc does, are two requests).
fn serve_dns(sock: UdpSocket, calls: Option<Arc<Calls>>) {
    let sock = Arc::new(sock);
    let waiting = Arc::new(AtomicUsize::new(0));
    let cache: Answers = Arc::default();
    let mut buf = [0u8; 1500];
    loop {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let q = match dns::parse(&buf[..n]) {
            Ok(q) => q,
            Err(Some(formerr)) => {
                let _ = sock.send_to(&formerr, from);
                continue;
            }
            Err(None) => continue,
        };
        if let Some((at, rcode, addrs)) =
            cache.lock().unwrap_or_else(|p| p.into_inner()).get(&q.name)
        {
            if at.elapsed() < LOOKUP_CACHE && q.qtype != dns::A {
                let _ = sock.send_to(&dns::answer(&q, *rcode, addrs), from);
                continue;
            }
        }
        if waiting.fetch_add(1, Ordering::SeqCst) >= MAX_LOOKUPS {
            waiting.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let (sock, waiting, cache) = (sock.clone(), waiting.clone(), cache.clone());
        let during = calls.as_ref().map(|c| c.during());
        spawn(move || {
            let req = Request::Resolve {
                name: q.name.clone(),
                qtype: dns::type_name(q.qtype),
                during,
            };
            let (rcode, addrs) = match ask(&req) {
                Ok((Reply::Resolved { addresses }, _)) => (0, addresses),
                Ok((Reply::Denied { .. }, _)) => (dns::NXDOMAIN, vec![]),
                Ok((Reply::Failed { .. }, _)) => (dns::NXDOMAIN, vec![]),
                _ => (dns::SERVFAIL, vec![]),
            };
            let _ = sock.send_to(&dns::answer(&q, rcode, &addrs), from);
            let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
            if c.len() > 1024 {
                c.clear();
            }
            c.insert(q.name, (Instant::now(), rcode, addrs));
            drop(c);
            waiting.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// A self-pipe that wakes the TUN loop.
#[derive(Clone)]
struct Wake(Arc<(File, File)>);

impl Wake {
    fn new() -> io::Result<Wake> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two fds we then own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds are fresh and ours.
        let (r, w) = unsafe {
            (
                std::os::fd::FromRawFd::from_raw_fd(fds[0]),
                std::os::fd::FromRawFd::from_raw_fd(fds[1]),
            )
        };
        Ok(Wake(Arc::new((r, w))))
    }

    fn read_fd(&self) -> i32 {
        self.0 .0.as_raw_fd()
    }

    fn ring(&self) {
        let _ = (&self.0 .1).write(&[1]);
    }

    fn clear(&self) {
        let mut b = [0u8; 64];
        while matches!((&self.0 .0).read(&mut b), Ok(n) if n > 0) {}
    }
}
