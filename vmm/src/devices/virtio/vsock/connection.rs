//! One vsock stream between a guest port and a host Unix socket, with the
//! credit accounting of virtio 1.2 section 5.10.6.3 in both directions.
//!
//! Guest → host: we advertise `buf_alloc` bytes of buffer; `fwd_cnt`
//! counts bytes written to the host socket. Bytes the host socket cannot
//! take yet wait in `to_host`, which the guest's credit bounds: a guest that
//! sends beyond its credit breaks the protocol and gets a reset.
//!
//! Host → guest: we may have at most `peer_buf_alloc` bytes in flight
//! beyond what the guest has consumed (`peer_fwd_cnt`). Without credit we
//! stop reading the host socket, so a fast host writer stalls on its own
//! socket buffer instead of growing our memory.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::num::Wrapping;
use std::os::unix::net::UnixStream;

/// Buffer we advertise to the guest per connection.
pub const CONN_BUF: u32 = 256 * 1024;
/// Largest payload we put in one packet to the guest.
pub const MAX_PAYLOAD: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// We sent REQUEST for a host-initiated connection; awaiting RESPONSE.
    Connecting,
    Established,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConnError {
    #[error("Guest sent {len} bytes with only {credit} bytes of credit")]
    CreditExceeded { len: usize, credit: u32 },
    #[error("Host socket closed")]
    HostClosed,
}

pub struct Connection {
    pub stream: UnixStream,
    pub state: State,
    /// Port on the host side, as the guest addresses it.
    pub local_port: u32,
    /// Port on the guest side.
    pub peer_port: u32,
    // Guest -> host.
    rx_cnt: Wrapping<u32>,
    fwd_cnt: Wrapping<u32>,
    last_fwd_cnt_sent: Wrapping<u32>,
    to_host: VecDeque<u8>,
    shutdown_write_pending: bool,
    // Host -> guest.
    peer_buf_alloc: u32,
    peer_fwd_cnt: Wrapping<u32>,
    tx_cnt: Wrapping<u32>,
    /// Bytes read from the host, not yet given to the guest:
    /// `stash[stash_at..stash_end]` (at most MAX_PAYLOAD). One read fills
    /// it and the guest's small RX buffers take it in pieces, so a piece
    /// is taken by moving `stash_at`, not by shifting what is left.
    stash: Vec<u8>,
    stash_at: usize,
    stash_end: usize,
    /// Edge-triggered readiness: the host socket may have data.
    pub host_readable: bool,
    /// The host closed its write side; SHUTDOWN(SEND) went to the guest.
    pub host_eof: bool,
    /// The guest said it will send no more (SHUTDOWN with SEND).
    pub guest_send_done: bool,
    /// Both directions are done; the connection ends once `to_host` is
    /// written (the muxer's `close`).
    pub closing: bool,
}

impl Connection {
    pub fn new(stream: UnixStream, state: State, local_port: u32, peer_port: u32) -> Self {
        Self {
            stream,
            state,
            local_port,
            peer_port,
            rx_cnt: Wrapping(0),
            fwd_cnt: Wrapping(0),
            last_fwd_cnt_sent: Wrapping(0),
            to_host: VecDeque::new(),
            shutdown_write_pending: false,
            peer_buf_alloc: 0,
            peer_fwd_cnt: Wrapping(0),
            tx_cnt: Wrapping(0),
            stash: Vec::new(),
            stash_at: 0,
            stash_end: 0,
            host_readable: true,
            host_eof: false,
            guest_send_done: false,
            closing: false,
        }
    }

    /// Records the credit fields of a packet from the guest.
    pub fn update_peer_credit(&mut self, buf_alloc: u32, fwd_cnt: u32) {
        self.peer_buf_alloc = buf_alloc;
        self.peer_fwd_cnt = Wrapping(fwd_cnt);
    }

    /// Bytes the guest can still take from us.
    pub fn peer_free(&self) -> u32 {
        let in_flight = (self.tx_cnt - self.peer_fwd_cnt).0;
        self.peer_buf_alloc.saturating_sub(in_flight)
    }

    /// Our credit fields for a packet to the guest; notes them as sent.
    pub fn credit(&mut self) -> (u32, u32) {
        self.last_fwd_cnt_sent = self.fwd_cnt;
        (CONN_BUF, self.fwd_cnt.0)
    }

    /// True when the guest should hear of freed buffer space: a quarter
    /// of the buffer drained since we last told it.
    pub fn needs_credit_update(&self) -> bool {
        (self.fwd_cnt - self.last_fwd_cnt_sent).0 >= CONN_BUF / 4
    }

    /// Data from the guest for the host socket.
    pub fn send_to_host(&mut self, data: &[u8]) -> Result<(), ConnError> {
        let buffered = (self.rx_cnt - self.fwd_cnt).0;
        let credit = CONN_BUF - buffered.min(CONN_BUF);
        if data.len() > credit as usize {
            return Err(ConnError::CreditExceeded {
                len: data.len(),
                credit,
            });
        }
        self.rx_cnt += data.len() as u32;
        if !self.to_host.is_empty() {
            self.to_host.extend(data);
            return self.flush();
        }
        // Nothing queued before it: write straight from the packet and
        // keep only what the socket does not take now.
        let mut done = 0;
        while done < data.len() {
            match self.stream.write(&data[done..]) {
                Ok(0) => return Err(ConnError::HostClosed),
                Ok(n) => {
                    done += n;
                    self.fwd_cnt += n as u32;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(ConnError::HostClosed),
            }
        }
        self.to_host.extend(&data[done..]);
        Ok(())
    }

    /// Writes what the host socket takes now; the rest waits for EPOLLOUT.
    pub fn flush(&mut self) -> Result<(), ConnError> {
        while !self.to_host.is_empty() {
            let (front, _) = self.to_host.as_slices();
            match self.stream.write(front) {
                Ok(0) => return Err(ConnError::HostClosed),
                Ok(n) => {
                    self.to_host.drain(..n);
                    self.fwd_cnt += n as u32;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(ConnError::HostClosed),
            }
        }
        if self.shutdown_write_pending {
            self.shutdown_write_pending = false;
            let _ = self.stream.shutdown(std::net::Shutdown::Write);
        }
        Ok(())
    }

    /// The guest will send no more: close the host socket's write side
    /// once everything buffered is written.
    pub fn guest_done_sending(&mut self) {
        self.guest_send_done = true;
        self.shutdown_write_pending = true;
        let _ = self.flush();
    }

    pub fn pending_to_host(&self) -> usize {
        self.to_host.len()
    }

    /// Whether host data could go to the guest now.
    pub fn can_send_to_guest(&self) -> bool {
        self.state == State::Established
            && !self.closing
            && (self.stashed() > 0 || (self.host_readable && !self.host_eof))
            && self.peer_free() > 0
    }

    fn stashed(&self) -> usize {
        self.stash_end - self.stash_at
    }

    /// Takes up to `max` bytes of host data for the guest, within the
    /// guest's credit. Ok(None): nothing now. Err(HostClosed): EOF.
    pub fn take_for_guest(&mut self, max: usize) -> Result<Option<&[u8]>, ConnError> {
        let limit = max.min(self.peer_free() as usize).min(MAX_PAYLOAD);
        if limit == 0 || self.state != State::Established {
            return Ok(None);
        }
        if self.stashed() == 0 && self.host_readable && !self.host_eof {
            // The buffer stays while data flows and goes when the socket
            // runs dry, so an idle connection holds none.
            self.stash.resize(MAX_PAYLOAD, 0);
            let want = MAX_PAYLOAD.min(self.peer_free() as usize);
            (self.stash_at, self.stash_end) = (0, 0);
            loop {
                match self.stream.read(&mut self.stash[..want]) {
                    Ok(0) => {
                        self.stash = Vec::new();
                        self.host_eof = true;
                        return Err(ConnError::HostClosed);
                    }
                    Ok(n) => {
                        self.stash_end = n;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.stash = Vec::new();
                        self.host_readable = false;
                        return Ok(None);
                    }
                    Err(_) => {
                        self.stash = Vec::new();
                        self.host_eof = true;
                        return Err(ConnError::HostClosed);
                    }
                }
            }
        }
        if self.stashed() == 0 {
            return Ok(None);
        }
        let n = limit.min(self.stashed());
        let at = self.stash_at;
        self.stash_at += n;
        self.tx_cnt += n as u32;
        Ok(Some(&self.stash[at..at + n]))
    }

    /// The last `n` bytes [`Self::take_for_guest`] gave out, again.
    pub fn taken(&self, n: usize) -> &[u8] {
        &self.stash[self.stash_at - n..self.stash_at]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Connection, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (Connection::new(a, State::Established, 1000, 5000), b)
    }

    #[test]
    fn guest_data_reaches_the_host_and_counts_forwarded() {
        let (mut c, mut host) = pair();
        c.send_to_host(b"hello").unwrap();
        let mut buf = [0u8; 5];
        host.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        assert_eq!(c.credit(), (CONN_BUF, 5));
    }

    #[test]
    fn guest_beyond_credit_is_refused() {
        let (mut c, _host) = pair();
        // The host never reads: the socket buffer fills, then our buffer.
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0usize;
        loop {
            match c.send_to_host(&chunk) {
                Ok(()) => sent += chunk.len(),
                Err(ConnError::CreditExceeded { .. }) => break,
                Err(e) => panic!("{e}"),
            }
            assert!(sent < 64 << 20, "credit never ran out");
        }
        assert!(c.pending_to_host() <= CONN_BUF as usize);
    }

    #[test]
    fn host_data_respects_guest_credit() {
        let (mut c, mut host) = pair();
        host.write_all(&[1u8; 1000]).unwrap();
        assert!(!c.can_send_to_guest(), "no credit yet");
        assert_eq!(c.take_for_guest(4096).unwrap(), None);
        c.update_peer_credit(300, 0);
        assert_eq!(c.take_for_guest(4096).unwrap().unwrap().len(), 300);
        assert_eq!(c.peer_free(), 0);
        assert_eq!(c.take_for_guest(4096).unwrap(), None);
        c.update_peer_credit(300, 300); // guest consumed it all
        let more = c.take_for_guest(100).unwrap().unwrap();
        assert_eq!(more.len(), 100);
        assert_eq!(c.take_for_guest(4096).unwrap().unwrap().len(), 200);
    }

    #[test]
    fn host_eof_is_reported_once_data_is_drained() {
        let (mut c, mut host) = pair();
        c.update_peer_credit(CONN_BUF, 0);
        host.write_all(b"bye").unwrap();
        drop(host);
        assert_eq!(c.take_for_guest(4096).unwrap().unwrap(), b"bye");
        assert_eq!(c.take_for_guest(4096), Err(ConnError::HostClosed));
        assert!(c.host_eof);
    }

    #[test]
    fn empty_host_clears_readiness() {
        let (mut c, _host) = pair();
        c.update_peer_credit(CONN_BUF, 0);
        assert_eq!(c.take_for_guest(4096).unwrap(), None);
        assert!(!c.host_readable);
        assert!(!c.can_send_to_guest());
    }

    #[test]
    fn credit_update_after_a_quarter_drained() {
        let (mut c, mut host) = pair();
        c.send_to_host(&vec![0u8; (CONN_BUF / 4) as usize]).unwrap();
        let mut sink = vec![0u8; CONN_BUF as usize];
        let mut got = 0;
        while got < (CONN_BUF / 4) as usize {
            got += host.read(&mut sink).unwrap();
        }
        c.flush().unwrap();
        assert!(c.needs_credit_update());
        c.credit();
        assert!(!c.needs_credit_update());
    }
}
