//! The egress channel (docs/network.md): the guest's TCP and DNS leave
//! only as requests on [`crate::ports::EGRESS_PORT`], one vsock stream
//! each. The agent terminates the guest's connections and lookups; the
//! host decides, resolves, connects, and logs every attempt.
//!
//! On each stream the agent sends one [`Request`] line and the host one
//! [`Reply`] line. After an allowed `connect` the stream carries the
//! connection's bytes, both ways, until either side closes.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::messages::During;

/// The guest's side of its point-to-point link to the agent.
pub const GUEST_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
/// The peer the agent makes the guest's connections come from (its NAT).
pub const NAT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
/// What `host.mcpvm.internal` resolves to in the guest.
pub const HOST_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 254);
/// The link's prefix length.
pub const PREFIX: u8 = 24;
/// The host, as the guest names it.
pub const HOST_NAME: &str = "host.mcpvm.internal";
/// The longest request line the host reads.
pub const MAX_REQUEST: usize = 4096;

/// Agent to host: the first line of an egress stream.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// A DNS lookup of `name` (`qtype` "A", "AAAA", ...).
    Resolve {
        name: String,
        qtype: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        during: Option<During>,
    },
    /// A TCP connection to `address:port`.
    Connect {
        address: Ipv4Addr,
        port: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        during: Option<During>,
    },
}

/// Host to agent: the answer to a [`Request`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Reply {
    /// A lookup's IPv4 addresses.
    Resolved { addresses: Vec<Ipv4Addr> },
    /// A connection is open: the stream is now its bytes.
    Connected,
    /// The policy said no (NXDOMAIN, connection refused).
    Denied { reason: String },
    /// Allowed, but the host could not do it (no such name, refused,
    /// unreachable, timed out).
    Failed { reason: String },
}

impl Request {
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("egress requests serialize") + "\n"
    }
}

impl Reply {
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("egress replies serialize") + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip_as_lines() {
        let r = Request::Connect {
            address: Ipv4Addr::new(93, 184, 216, 34),
            port: 443,
            during: Some(During::Request {
                id: 3.into(),
                method: "tools/call".into(),
                tool: Some("fetch".into()),
            }),
        };
        assert_eq!(serde_json::from_str::<Request>(&r.line()).unwrap(), r);
        let q = Request::Resolve {
            name: "example.com".into(),
            qtype: "A".into(),
            during: None,
        };
        assert!(q.line().contains(r#""op":"resolve""#));
        for a in [
            Reply::Resolved {
                addresses: vec![Ipv4Addr::LOCALHOST],
            },
            Reply::Connected,
            Reply::Denied { reason: "x".into() },
        ] {
            assert_eq!(serde_json::from_str::<Reply>(&a.line()).unwrap(), a);
        }
    }
}
