//! Routes packets between the guest and host Unix sockets, following
//! Firecracker's hybrid vsock convention:
//!
//! - host-initiated: a host program connects to `uds_path`, writes
//!   `CONNECT <port>\n`; we send REQUEST to the guest's port and, on its
//!   RESPONSE, answer `OK <local_port>\n`; then the stream is the guest's.
//! - guest-initiated: the guest connects to CID 2 port P; we connect to
//!   `<uds_path>_<P>`, answer RESPONSE, or RST if nobody listens.
//!
//! The muxer owns no queues: the device feeds it packets from the TX queue
//! ([`Muxer::handle_guest_packet`]) and asks it for packets to put in RX
//! buffers ([`Muxer::next_for_guest`]). Host sockets are nonblocking and
//! watched by the device's epoll, edge-triggered, under the tokens the
//! muxer hands out.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;

use super::connection::{ConnError, Connection, State};
use super::connector::Connector;
use super::packet::*;
use super::HOST_CID;

/// Most connections one VM may hold open at once; more are reset.
pub const MAX_CONNECTIONS: usize = 1024;
/// Most host connections that have not finished their CONNECT line.
const MAX_HANDSHAKES: usize = 64;
const MAX_CONNECT_LINE: usize = 32;
/// Most control packets (resets, responses, credit updates) waiting for
/// RX buffers. A guest that sends on TX but posts no RX buffers would
/// otherwise grow this queue without bound (every packet to an unknown
/// port earns a reset); past it the device stops taking TX packets until
/// the guest takes some of these (the guest's TX queue fills: its own
/// back-pressure). Four per connection is more than a live one needs.
pub const MAX_PENDING_CONTROL: usize = 4 * MAX_CONNECTIONS;
/// Host-initiated connections get local ports from here up.
const FIRST_LOCAL_PORT: u32 = 1 << 30;

type Key = (u32, u32); // (local_port, peer_port)

/// What the device's epoll must do after a muxer call.
#[derive(Debug)]
pub enum Watch {
    Add(RawFd, u64),
    /// The socket is closed only after the device removed it from epoll,
    /// so its fd number cannot be reused in between.
    Remove(UnixStream),
    /// Stop watching an fd that lives on elsewhere.
    Forget(RawFd),
}

struct Handshake {
    stream: UnixStream,
    line: Vec<u8>,
}

pub struct Muxer {
    guest_cid: u64,
    /// Connects guest streams to `<uds_path>_<port>` (see `connector`).
    connector: Arc<Connector>,
    conns: HashMap<Key, Connection>,
    token_of: HashMap<Key, u64>,
    key_of: HashMap<u64, Key>,
    handshakes: HashMap<u64, Handshake>,
    /// Control packets (no payload) waiting for RX buffers.
    control: VecDeque<Header>,
    next_token: u64,
    next_local_port: u32,
    watch: Vec<Watch>,
    /// Round-robin start for fairness between connections.
    rr: usize,
}

impl Muxer {
    pub fn new(guest_cid: u64, connector: Arc<Connector>) -> Self {
        Self {
            guest_cid,
            connector,
            conns: HashMap::new(),
            token_of: HashMap::new(),
            key_of: HashMap::new(),
            handshakes: HashMap::new(),
            control: VecDeque::new(),
            next_token: super::FIRST_CONN_TOKEN,
            next_local_port: FIRST_LOCAL_PORT,
            watch: Vec::new(),
            rr: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Epoll changes the device must apply.
    pub fn take_watch(&mut self) -> Vec<Watch> {
        std::mem::take(&mut self.watch)
    }

    fn header(&self, local_port: u32, peer_port: u32, op: u16) -> Header {
        Header {
            src_cid: HOST_CID,
            dst_cid: self.guest_cid,
            src_port: local_port,
            dst_port: peer_port,
            type_: TYPE_STREAM,
            op,
            ..Default::default()
        }
    }

    fn rst(&mut self, local_port: u32, peer_port: u32) {
        let h = self.header(local_port, peer_port, OP_RST);
        self.control.push_back(h);
    }

    fn add_conn(&mut self, conn: Connection) {
        let key = (conn.local_port, conn.peer_port);
        let token = self.next_token;
        self.next_token += 1;
        self.watch.push(Watch::Add(conn.stream.as_raw_fd(), token));
        self.token_of.insert(key, token);
        self.key_of.insert(token, key);
        self.conns.insert(key, conn);
    }

    fn remove_conn(&mut self, key: Key) {
        if let Some(conn) = self.conns.remove(&key) {
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            self.watch.push(Watch::Remove(conn.stream));
        }
        if let Some(t) = self.token_of.remove(&key) {
            self.key_of.remove(&t);
        }
    }

    /// Both directions are done: the connection ends with our RST
    /// (section 5.10.6.6) once the host socket has taken every byte the
    /// guest sent. Until then it stays, written to as the socket takes
    /// more: ending it at once would drop what a slow host reader had
    /// not taken yet, the tail of a stream. Returns true if it ended now.
    fn close(&mut self, key: Key) -> bool {
        let Some(conn) = self.conns.get_mut(&key) else {
            return false;
        };
        conn.closing = true;
        if conn.flush().is_ok() && conn.pending_to_host() > 0 {
            return false;
        }
        self.remove_conn(key);
        self.rst(key.0, key.1);
        true
    }

    /// Handles one packet the guest put on the TX queue.
    pub fn handle_guest_packet(&mut self, h: &Header, payload: &[u8]) {
        // Only stream packets from our guest to the host are meaningful;
        // anything else is dropped (a reset would need a valid address).
        if h.src_cid != self.guest_cid || h.dst_cid != HOST_CID || h.type_ != TYPE_STREAM {
            log::debug!("vsock: dropping packet {h:?}");
            return;
        }
        let key = (h.dst_port, h.src_port);
        if let Some(conn) = self.conns.get_mut(&key) {
            conn.update_peer_credit(h.buf_alloc, h.fwd_cnt);
        }
        match h.op {
            OP_REQUEST => self.guest_connect(key, h),
            OP_RESPONSE => match self.conns.get_mut(&key) {
                Some(conn) if conn.state == State::Connecting => {
                    conn.state = State::Established;
                    let ok = format!("OK {}\n", key.0);
                    if conn.stream.write_all(ok.as_bytes()).is_err() {
                        self.remove_conn(key);
                        self.rst(key.0, key.1);
                    }
                }
                _ => self.rst(key.0, key.1),
            },
            OP_RW => {
                let result = match self.conns.get_mut(&key) {
                    Some(conn) if conn.state == State::Established => conn.send_to_host(payload),
                    _ => {
                        self.rst(key.0, key.1);
                        return;
                    }
                };
                if let Err(e) = result {
                    log::debug!("vsock: {key:?}: {e}; resetting");
                    self.remove_conn(key);
                    self.rst(key.0, key.1);
                } else {
                    self.maybe_credit_update(key);
                }
            }
            OP_CREDIT_UPDATE => {} // credit recorded above; the device retries RX
            OP_CREDIT_REQUEST => {
                if self.conns.contains_key(&key) {
                    self.credit_update(key);
                } else {
                    self.rst(key.0, key.1);
                }
            }
            OP_SHUTDOWN => {
                let Some(conn) = self.conns.get_mut(&key) else {
                    return;
                };
                if h.flags & SHUTDOWN_SEND != 0 {
                    conn.guest_done_sending();
                }
                let both =
                    h.flags & (SHUTDOWN_SEND | SHUTDOWN_RCV) == (SHUTDOWN_SEND | SHUTDOWN_RCV);
                if both || (conn.guest_send_done && conn.host_eof) {
                    self.close(key);
                }
            }
            OP_RST => self.remove_conn(key),
            _ => {
                self.remove_conn(key);
                self.rst(key.0, key.1);
            }
        }
    }

    fn guest_connect(&mut self, key: Key, h: &Header) {
        if self.conns.contains_key(&key) || self.conns.len() >= MAX_CONNECTIONS {
            self.rst(key.0, key.1);
            return;
        }
        // Nonblocking: a host listener whose backlog is full (a program
        // that does not accept) gives EAGAIN at once instead of blocking
        // the device thread, and every guest stream with it.
        match self.connector.connect(key.0) {
            Ok(stream) => {
                let mut conn = Connection::new(stream, State::Established, key.0, key.1);
                conn.update_peer_credit(h.buf_alloc, h.fwd_cnt);
                let (buf_alloc, fwd_cnt) = conn.credit();
                self.add_conn(conn);
                let mut resp = self.header(key.0, key.1, OP_RESPONSE);
                resp.buf_alloc = buf_alloc;
                resp.fwd_cnt = fwd_cnt;
                self.control.push_back(resp);
            }
            Err(e) => {
                log::debug!(
                    "vsock: guest port {} -> host port {}: {e}; resetting",
                    key.1,
                    key.0
                );
                self.rst(key.0, key.1);
            }
        }
    }

    fn credit_update(&mut self, key: Key) {
        if let Some(conn) = self.conns.get_mut(&key) {
            let (buf_alloc, fwd_cnt) = conn.credit();
            let mut h = self.header(key.0, key.1, OP_CREDIT_UPDATE);
            h.buf_alloc = buf_alloc;
            h.fwd_cnt = fwd_cnt;
            self.control.push_back(h);
        }
    }

    fn maybe_credit_update(&mut self, key: Key) {
        if self
            .conns
            .get(&key)
            .is_some_and(|c| c.needs_credit_update())
        {
            self.credit_update(key);
        }
    }

    /// Accepts host connections on the listener (nonblocking).
    pub fn accept(&mut self, listener: &UnixListener) {
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    if self.handshakes.len() >= MAX_HANDSHAKES
                        || stream.set_nonblocking(true).is_err()
                    {
                        continue; // dropped: the host sees EOF
                    }
                    let token = self.next_token;
                    self.next_token += 1;
                    self.watch.push(Watch::Add(stream.as_raw_fd(), token));
                    self.handshakes.insert(
                        token,
                        Handshake {
                            stream,
                            line: Vec::new(),
                        },
                    );
                    self.read_handshake(token);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }

    /// Reads a host connection's `CONNECT <port>\n`, byte-wise so that no
    /// stream data after the line is consumed.
    fn read_handshake(&mut self, token: u64) {
        let Some(hs) = self.handshakes.get_mut(&token) else {
            return;
        };
        let mut byte = [0u8; 1];
        let port = loop {
            match hs.stream.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => break parse_connect(&hs.line),
                Ok(1) if hs.line.len() < MAX_CONNECT_LINE => hs.line.push(byte[0]),
                Ok(_) => break None, // EOF or line too long
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break None,
            }
        };
        let hs = self.handshakes.remove(&token).expect("present");
        let (Some(port), true) = (port, self.conns.len() < MAX_CONNECTIONS) else {
            let _ = hs.stream.shutdown(std::net::Shutdown::Both);
            self.watch.push(Watch::Remove(hs.stream));
            return;
        };
        // Re-registered below under the connection's own token.
        self.watch.push(Watch::Forget(hs.stream.as_raw_fd()));
        let local = self.next_local_port;
        self.next_local_port = self
            .next_local_port
            .checked_add(1)
            .unwrap_or(FIRST_LOCAL_PORT);
        let mut conn = Connection::new(hs.stream, State::Connecting, local, port);
        let (buf_alloc, fwd_cnt) = conn.credit();
        self.add_conn(conn);
        let mut h = self.header(local, port, OP_REQUEST);
        h.buf_alloc = buf_alloc;
        h.fwd_cnt = fwd_cnt;
        self.control.push_back(h);
    }

    /// Something happened on a host socket registered under `token`.
    pub fn host_event(&mut self, token: u64, readable: bool, writable: bool, hangup: bool) {
        if self.handshakes.contains_key(&token) {
            self.read_handshake(token);
            return;
        }
        let Some(&key) = self.key_of.get(&token) else {
            return;
        };
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        if readable || hangup {
            conn.host_readable = true;
        }
        if writable {
            if conn.flush().is_err() {
                self.remove_conn(key);
                self.rst(key.0, key.1);
                return;
            }
            if conn.closing && conn.pending_to_host() == 0 {
                self.close(key);
                return;
            }
        }
        self.maybe_credit_update(key);
    }

    /// True when a packet is waiting for the guest.
    /// Too many control packets wait for the guest: take no TX packets
    /// until it has taken some ([`MAX_PENDING_CONTROL`]).
    pub fn backlogged(&self) -> bool {
        self.control.len() >= MAX_PENDING_CONTROL
    }

    /// Control packets waiting for RX buffers.
    pub fn pending_control(&self) -> usize {
        self.control.len()
    }

    pub fn has_work_for_guest(&self) -> bool {
        !self.control.is_empty() || self.conns.values().any(|c| c.can_send_to_guest())
    }

    /// The next packet for the guest, with at most `max_payload` bytes of
    /// data (borrowed from the connection's buffer: copied once, into the
    /// guest's). Control packets go first, then data round-robin.
    pub fn next_for_guest(&mut self, max_payload: usize) -> Option<(Header, &[u8])> {
        if let Some(h) = self.control.pop_front() {
            return Some((h, &[]));
        }
        let mut keys: Vec<Key> = self
            .conns
            .iter()
            .filter(|(_, c)| c.can_send_to_guest())
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        let n = keys.len();
        for i in 0..n {
            let key = keys[(self.rr + i) % n];
            let conn = self.conns.get_mut(&key).expect("listed");
            match conn.take_for_guest(max_payload) {
                Ok(Some(data)) => {
                    let len = data.len();
                    self.rr = (self.rr + i + 1) % n.max(1);
                    let (buf_alloc, fwd_cnt) = conn.credit();
                    let mut h = self.header(key.0, key.1, OP_RW);
                    h.len = len as u32;
                    h.buf_alloc = buf_alloc;
                    h.fwd_cnt = fwd_cnt;
                    return Some((h, self.conns[&key].taken(len)));
                }
                Ok(None) => {}
                Err(ConnError::HostClosed) | Err(ConnError::CreditExceeded { .. }) => {
                    // The host will send no more, but may still read: a
                    // half-close, like stdin EOF with stdout still flowing.
                    // Once both directions are done the connection ends.
                    if conn.guest_send_done {
                        if self.close(key) {
                            // Its RST, the one control packet queued.
                            return self.control.pop_front().map(|h| (h, &[][..]));
                        }
                        continue;
                    }
                    let (buf_alloc, fwd_cnt) = conn.credit();
                    let mut h = self.header(key.0, key.1, OP_SHUTDOWN);
                    h.flags = SHUTDOWN_SEND;
                    h.buf_alloc = buf_alloc;
                    h.fwd_cnt = fwd_cnt;
                    return Some((h, &[]));
                }
            }
        }
        None
    }
}

/// Parses `CONNECT <port>` (the trailing newline already stripped).
pub fn parse_connect(line: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    s.strip_prefix("CONNECT ")?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::virtio::vsock::connection::CONN_BUF;
    use std::path::PathBuf;

    const CID: u64 = 3;

    fn guest(op: u16, src_port: u32, dst_port: u32) -> Header {
        Header {
            src_cid: CID,
            dst_cid: HOST_CID,
            src_port,
            dst_port,
            type_: TYPE_STREAM,
            op,
            buf_alloc: CONN_BUF,
            ..Default::default()
        }
    }

    fn setup() -> (tempfile::TempDir, PathBuf, Muxer) {
        let dir = tempfile::tempdir().unwrap();
        let uds = dir.path().join("v.sock");
        let m = Muxer::new(CID, Arc::new(Connector::Direct(uds.clone())));
        (dir, uds, m)
    }

    #[test]
    fn parses_connect_lines() {
        assert_eq!(parse_connect(b"CONNECT 1234"), Some(1234));
        assert_eq!(parse_connect(b"CONNECT 52\r"), Some(52));
        assert_eq!(parse_connect(b"CONNECT x"), None);
        assert_eq!(parse_connect(b"connect 5"), None);
        assert_eq!(parse_connect(b"CONNECT 99999999999"), None);
    }

    #[test]
    fn guest_connect_without_listener_is_reset() {
        let (_d, _uds, mut m) = setup();
        m.handle_guest_packet(&guest(OP_REQUEST, 5000, 1000), &[]);
        let (h, _) = m.next_for_guest(4096).unwrap();
        assert_eq!(
            (h.op, h.src_port, h.dst_port, h.dst_cid),
            (OP_RST, 1000, 5000, CID)
        );
    }

    #[test]
    fn guest_connect_data_both_ways_and_shutdown() {
        let (_d, uds, mut m) = setup();
        let listener = UnixListener::bind(format!("{}_1000", uds.display())).unwrap();
        m.handle_guest_packet(&guest(OP_REQUEST, 5000, 1000), &[]);
        let (h, _) = m.next_for_guest(4096).unwrap();
        assert_eq!(h.op, OP_RESPONSE);
        assert_eq!(h.buf_alloc, CONN_BUF);
        let (mut host, _) = listener.accept().unwrap();
        assert_eq!(m.connection_count(), 1);

        m.handle_guest_packet(&guest(OP_RW, 5000, 1000), b"ping");
        let mut buf = [0u8; 4];
        host.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");

        host.write_all(b"pong").unwrap();
        let (h, data) = m.next_for_guest(4096).unwrap();
        assert_eq!((h.op, h.len, data), (OP_RW, 4, &b"pong"[..]));

        let mut sd = guest(OP_SHUTDOWN, 5000, 1000);
        sd.flags = SHUTDOWN_SEND | SHUTDOWN_RCV;
        m.handle_guest_packet(&sd, &[]);
        assert_eq!(m.next_for_guest(4096).unwrap().0.op, OP_RST);
        assert_eq!(m.connection_count(), 0);
        assert_eq!(host.read(&mut buf).unwrap(), 0, "host sees EOF");
    }

    #[test]
    fn host_half_close_keeps_the_guest_to_host_direction_open() {
        let (_d, uds, mut m) = setup();
        let listener = UnixListener::bind(format!("{}_1000", uds.display())).unwrap();
        m.handle_guest_packet(&guest(OP_REQUEST, 5000, 1000), &[]);
        m.next_for_guest(4096).unwrap();
        let (mut host, _) = listener.accept().unwrap();
        host.shutdown(std::net::Shutdown::Write).unwrap(); // like stdin EOF
        let (h, _) = m.next_for_guest(4096).unwrap();
        assert_eq!(
            (h.op, h.flags),
            (OP_SHUTDOWN, SHUTDOWN_SEND),
            "host sends no more, still receives"
        );
        m.handle_guest_packet(&guest(OP_RW, 5000, 1000), b"still flowing");
        let mut buf = [0u8; 13];
        host.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"still flowing");
        // The guest finishes too: the connection ends with RST, host sees EOF.
        let mut sd = guest(OP_SHUTDOWN, 5000, 1000);
        sd.flags = SHUTDOWN_SEND;
        m.handle_guest_packet(&sd, &[]);
        assert_eq!(m.next_for_guest(4096).unwrap().0.op, OP_RST);
        assert_eq!(m.connection_count(), 0);
        assert_eq!(host.read(&mut buf).unwrap(), 0);
    }

    /// The host stopped sending (stdin's EOF) and reads slowly; the guest
    /// sends more than the host socket holds, then ends: the connection
    /// stays until the host has every byte, and only then ends with RST.
    #[test]
    fn a_slow_host_gets_the_whole_tail_after_both_sides_end() {
        let (_d, uds, mut m) = setup();
        let listener = UnixListener::bind(format!("{}_1000", uds.display())).unwrap();
        m.handle_guest_packet(&guest(OP_REQUEST, 5000, 1000), &[]);
        m.next_for_guest(4096).unwrap();
        let (mut host, _) = listener.accept().unwrap();
        host.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(m.next_for_guest(4096).unwrap().0.op, OP_SHUTDOWN);
        let key = (1000, 5000);
        let piece = 16 * 1024;
        let mut sent = Vec::new();
        // Until the host socket is full and a few pieces wait in the VMM.
        while m.conns[&key].pending_to_host() < 3 * piece {
            let data: Vec<u8> = (0..piece).map(|i| (sent.len() + i) as u8 ^ 0x5a).collect();
            m.handle_guest_packet(&guest(OP_RW, 5000, 1000), &data);
            sent.extend(data);
            assert_eq!(m.connection_count(), 1, "within credit");
        }
        let mut sd = guest(OP_SHUTDOWN, 5000, 1000);
        sd.flags = SHUTDOWN_SEND;
        m.handle_guest_packet(&sd, &[]);
        assert_eq!(m.connection_count(), 1, "kept until the host has it all");
        while let Some((h, _)) = m.next_for_guest(4096) {
            assert_ne!(h.op, OP_RST, "no RST yet");
        }
        let token = m.token_of[&key];
        let mut got = Vec::new();
        let mut buf = vec![0u8; piece];
        while got.len() < sent.len() {
            let n = host.read(&mut buf).unwrap();
            assert!(n > 0, "EOF after {} of {} bytes", got.len(), sent.len());
            got.extend_from_slice(&buf[..n]);
            m.host_event(token, false, true, false);
        }
        assert!(got == sent, "the bytes arrive in order, unchanged");
        let mut ops = Vec::new();
        while let Some((h, _)) = m.next_for_guest(4096) {
            ops.push(h.op);
        }
        assert_eq!(ops.last(), Some(&OP_RST), "{ops:?}");
        assert_eq!(m.connection_count(), 0);
        assert_eq!(host.read(&mut buf).unwrap(), 0, "then EOF");
    }

    #[test]
    fn host_connect_handshake() {
        let (_d, uds, mut m) = setup();
        let listener = UnixListener::bind(&uds).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut host = UnixStream::connect(&uds).unwrap();
        host.write_all(b"CONNECT 52\nearly").unwrap();
        m.accept(&listener);
        let (req, _) = m.next_for_guest(4096).unwrap();
        assert_eq!((req.op, req.dst_port), (OP_REQUEST, 52));
        assert!(req.src_port >= FIRST_LOCAL_PORT);
        let mut resp = guest(OP_RESPONSE, 52, req.src_port);
        resp.buf_alloc = 1024;
        m.handle_guest_packet(&resp, &[]);
        let mut line = [0u8; 14];
        host.read_exact(&mut line).unwrap();
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            format!("OK {}\n", req.src_port)
        );
        // Bytes sent after the CONNECT line were kept for the guest.
        let (h, data) = m.next_for_guest(4096).unwrap();
        assert_eq!((h.op, data), (OP_RW, &b"early"[..]));
    }

    #[test]
    fn malformed_connect_line_closes_the_host_socket() {
        let (_d, uds, mut m) = setup();
        let listener = UnixListener::bind(&uds).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut host = UnixStream::connect(&uds).unwrap();
        host.write_all(b"HELLO\n").unwrap();
        m.accept(&listener);
        assert!(m.next_for_guest(4096).is_none());
        let mut b = [0u8; 1];
        assert_eq!(host.read(&mut b).unwrap(), 0);
    }

    #[test]
    fn packets_for_unknown_connections_are_reset() {
        let (_d, _uds, mut m) = setup();
        m.handle_guest_packet(&guest(OP_RW, 1, 2), b"x");
        assert_eq!(m.next_for_guest(4096).unwrap().0.op, OP_RST);
        m.handle_guest_packet(&guest(OP_RESPONSE, 1, 2), &[]);
        assert_eq!(m.next_for_guest(4096).unwrap().0.op, OP_RST);
    }

    #[test]
    fn packets_with_wrong_addresses_or_type_are_dropped() {
        let (_d, _uds, mut m) = setup();
        let mut h = guest(OP_REQUEST, 1, 2);
        h.src_cid = 99;
        m.handle_guest_packet(&h, &[]);
        let mut h = guest(OP_REQUEST, 1, 2);
        h.type_ = 2;
        m.handle_guest_packet(&h, &[]);
        let mut h = guest(OP_REQUEST, 1, 2);
        h.dst_cid = 7;
        m.handle_guest_packet(&h, &[]);
        assert!(m.next_for_guest(4096).is_none());
    }

    #[test]
    fn unknown_op_resets_the_connection() {
        let (_d, uds, mut m) = setup();
        let _l = UnixListener::bind(format!("{}_7", uds.display())).unwrap();
        m.handle_guest_packet(&guest(OP_REQUEST, 9, 7), &[]);
        m.next_for_guest(4096).unwrap();
        m.handle_guest_packet(&guest(99, 9, 7), &[]);
        assert_eq!(m.next_for_guest(4096).unwrap().0.op, OP_RST);
        assert_eq!(m.connection_count(), 0);
    }

    /// A Unix listener with a backlog of one that never accepts, as a
    /// slow or stuck host program may have.
    fn stuck_listener(path: &str) -> std::os::fd::OwnedFd {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket calls on a fresh fd with a zeroed,
        // filled-in sockaddr_un.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            assert!(fd >= 0);
            let mut a: libc::sockaddr_un = std::mem::zeroed();
            a.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (d, s) in a.sun_path.iter_mut().zip(path.as_bytes()) {
                *d = *s as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            assert_eq!(
                libc::bind(fd, (&a as *const libc::sockaddr_un).cast(), len),
                0
            );
            assert_eq!(libc::listen(fd, 1), 0);
            std::os::fd::OwnedFd::from_raw_fd(fd)
        }
    }

    #[test]
    fn a_host_listener_that_never_accepts_cannot_stall_the_device() {
        let (_d, uds, mut m) = setup();
        let _l = stuck_listener(&format!("{}_7", uds.display()));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for port in 0..20 {
                m.handle_guest_packet(&guest(OP_REQUEST, port, 7), &[]);
            }
            let _ = tx.send(m.connection_count());
        });
        let n = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("guest connects blocked the device on a full backlog");
        assert!(n < 20, "{n} connections: those past the backlog are reset");
    }

    #[test]
    fn connection_limit_holds() {
        let (_d, uds, mut m) = setup();
        let _l = UnixListener::bind(format!("{}_7", uds.display())).unwrap();
        for port in 0..(MAX_CONNECTIONS as u32 + 10) {
            m.handle_guest_packet(&guest(OP_REQUEST, port, 7), &[]);
        }
        assert_eq!(m.connection_count(), MAX_CONNECTIONS);
        let rsts = std::iter::from_fn(|| m.next_for_guest(0).map(|(h, _)| h))
            .filter(|h| h.op == OP_RST)
            .count();
        assert_eq!(rsts, 10);
    }
}
