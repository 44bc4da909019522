//! Host streams of allowed flows, by NAT port, waiting for the listener
//! to accept their guest side. A client that gave up while the host
//! decided (`nc -w 5` in a flood) resets the handshake the NAT injects
//! for it, so its connection is never accepted: its stream is dropped
//! after a while, closing it on the host, and its flow is closed with it.
//! Kept for ever, each would hold one of the proxy's streams and one of
//! the NAT's flows until the VM ends (docs/network.md, "Bounds").

use std::collections::HashMap;
use std::fs::File;
use std::time::{Duration, Instant};

/// How long an allowed flow's guest side has to be accepted. It takes
/// milliseconds (one handshake inside the guest); a guest busy with a
/// flood may take seconds.
pub const ACCEPT_WITHIN: Duration = Duration::from_secs(20);

#[derive(Default)]
pub struct Unclaimed(HashMap<u16, (Instant, File)>);

impl Unclaimed {
    /// The host's stream for the flow on `port`, allowed at `now`.
    pub fn put(&mut self, port: u16, stream: File, now: Instant) {
        self.0.insert(port, (now, stream));
    }

    /// The stream for `port`, now that its guest side is accepted.
    pub fn claim(&mut self, port: u16) -> Option<File> {
        self.0.remove(&port).map(|(_, s)| s)
    }

    /// Drops (and so closes) the streams waiting longer than
    /// [`ACCEPT_WITHIN`] at `now`; their ports.
    pub fn expire(&mut self, now: Instant) -> Vec<u16> {
        let old: Vec<u16> = self
            .0
            .iter()
            .filter(|(_, (at, _))| now.duration_since(*at) > ACCEPT_WITHIN)
            .map(|(p, _)| *p)
            .collect();
        for p in &old {
            self.0.remove(p);
        }
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    fn stream() -> (File, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        (File::from(std::os::fd::OwnedFd::from(ours)), theirs)
    }

    #[test]
    fn a_stream_never_claimed_is_closed_and_its_port_named() {
        let t0 = Instant::now();
        let mut u = Unclaimed::default();
        let (a, mut host_a) = stream();
        let (b, _host_b) = stream();
        u.put(1024, a, t0);
        u.put(1025, b, t0 + Duration::from_secs(15));
        assert!(u.expire(t0 + Duration::from_secs(10)).is_empty());
        assert_eq!(
            u.expire(t0 + ACCEPT_WITHIN + Duration::from_secs(1)),
            [1024]
        );
        // The host's end sees the close: its stream is free again.
        let mut buf = [0u8; 1];
        assert_eq!(host_a.read(&mut buf).unwrap(), 0);
        // One claimed in time is the relay's, and expires no more.
        assert!(u.claim(1025).is_some());
        assert!(u.claim(1025).is_none());
        assert!(u.expire(t0 + Duration::from_secs(3600)).is_empty());
    }
}
