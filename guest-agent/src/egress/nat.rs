//! The agent's NAT: it turns each guest TCP connection into one the agent
//! itself accepts, so the guest's kernel does all of TCP on both ends and
//! the agent only rewrites headers.
//!
//! The guest connects to `D:dport` from `GUEST:sport`; the packet leaves
//! through the TUN device. Its SYN waits here while the host decides.
//! Allowed, the flow gets a port `fport` and its packets go back into the
//! TUN as `NAT:fport → GUEST:LISTEN_PORT`, where the agent's listener
//! accepts them; the listener's answers (`GUEST:LISTEN_PORT → NAT:fport`)
//! go back as `D:dport → GUEST:sport`. Denied, the guest gets a RST:
//! `connect` fails with ECONNREFUSED.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use mcpvm_protocol::egress::{GUEST_ADDR, NAT_ADDR};

use super::packet::{self, Tcp};

/// Where the agent accepts the guest's connections: outside Linux's
/// ephemeral range, so no guest socket can have it.
pub const LISTEN_PORT: u16 = 65300;
/// Flows (pending, open or closing) at most; more SYNs are refused.
pub const MAX_FLOWS: usize = 1024;
/// How long a closed flow still passes its last packets (FIN, ACK, and
/// their retransmissions, which back off to many seconds on a slow
/// guest). A closed flow also gives way earlier when the table is full.
const LINGER: Duration = Duration::from_secs(120);
/// The NAT's ports.
const PORTS: std::ops::Range<u16> = 1024..60000;

/// A guest connection: its source port and its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    pub sport: u16,
    pub dst: Ipv4Addr,
    pub dport: u16,
}

enum State {
    /// The SYN waits for the host's answer.
    Pending(Vec<u8>),
    Open,
    Closed(Instant),
}

struct Entry {
    flow: Flow,
    state: State,
    /// The sequence number of the SYN that opened it: a SYN with another
    /// is a new connection from a reused source port.
    isn: u32,
}

/// What to do with a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Write this packet into the TUN.
    Inject(Vec<u8>),
    /// A new connection: ask the host for it, then call [`Nat::decided`].
    Ask(u16, Flow),
    Drop,
}

#[derive(Default)]
pub struct Nat {
    flows: HashMap<Flow, u16>,
    ports: HashMap<u16, Entry>,
    next: u16,
}

impl Nat {
    /// A packet the guest's kernel sent into the TUN.
    pub fn outbound(&mut self, mut p: Vec<u8>) -> Action {
        let Some(t) = Tcp::parse(&p) else {
            return Action::Drop;
        };
        if t.src != GUEST_ADDR {
            return Action::Drop;
        }
        // The listener answering a flow.
        if t.sport == LISTEN_PORT && t.dst == NAT_ADDR {
            let Some(e) = self.ports.get(&t.dport) else {
                return Action::Drop;
            };
            let f = e.flow;
            packet::rewrite(&mut p, &t, (f.dst, f.dport), (GUEST_ADDR, f.sport));
            return Action::Inject(p);
        }
        let flow = Flow {
            sport: t.sport,
            dst: t.dst,
            dport: t.dport,
        };
        if let Some(&port) = self.flows.get(&flow) {
            let e = self.ports.get_mut(&port).expect("flows and ports agree");
            match e.state {
                // Retransmitted SYNs wait with the first.
                State::Pending(_) => return Action::Drop,
                // A SYN that did not open this flow is a new connection
                // from a reused source port (the guest may reuse one as
                // soon as its side is closed, before our relay has ended):
                // it gets its own port and its own decision; the old flow
                // lingers under its port for its last packets.
                State::Open | State::Closed(_) if t.is_syn() && t.seq != e.isn => {
                    self.flows.remove(&flow);
                }
                State::Closed(_) if t.is_syn() => {
                    self.flows.remove(&flow);
                }
                State::Open | State::Closed(_) => {
                    packet::rewrite(&mut p, &t, (NAT_ADDR, port), (GUEST_ADDR, LISTEN_PORT));
                    return Action::Inject(p);
                }
            }
        }
        if !t.is_syn() {
            return Action::Drop;
        }
        let Some(port) = self.free_port() else {
            return Action::Inject(packet::refusal(&t));
        };
        self.flows.insert(flow, port);
        self.ports.insert(
            port,
            Entry {
                flow,
                state: State::Pending(p),
                isn: t.seq,
            },
        );
        Action::Ask(port, flow)
    }

    /// The host's answer for the flow on `port`: its SYN goes on to the
    /// listener, or the guest gets a RST.
    pub fn decided(&mut self, port: u16, allowed: bool) -> Action {
        let Some(e) = self.ports.get_mut(&port) else {
            return Action::Drop;
        };
        let State::Pending(mut syn) = std::mem::replace(&mut e.state, State::Open) else {
            return Action::Drop;
        };
        let Some(t) = Tcp::parse(&syn) else {
            return Action::Drop;
        };
        if allowed {
            packet::rewrite(&mut syn, &t, (NAT_ADDR, port), (GUEST_ADDR, LISTEN_PORT));
            return Action::Inject(syn);
        }
        self.forget(port);
        Action::Inject(packet::refusal(&t))
    }

    /// Drops the flow on `port` (and its key, if a newer flow has not
    /// taken it over).
    fn forget(&mut self, port: u16) {
        if let Some(e) = self.ports.remove(&port) {
            if self.flows.get(&e.flow) == Some(&port) {
                self.flows.remove(&e.flow);
            }
        }
    }

    /// The flow's relay ended; its last packets still pass for a while.
    pub fn closed(&mut self, port: u16, now: Instant) {
        if let Some(e) = self.ports.get_mut(&port) {
            e.state = State::Closed(now);
        }
    }

    /// Forgets flows closed for longer than their linger.
    pub fn purge(&mut self, now: Instant) {
        let old: Vec<u16> = self
            .ports
            .iter()
            .filter(
                |(_, e)| matches!(e.state, State::Closed(at) if now.duration_since(at) > LINGER),
            )
            .map(|(p, _)| *p)
            .collect();
        for port in old {
            self.forget(port);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.ports.len()
    }

    fn free_port(&mut self) -> Option<u16> {
        if self.ports.len() >= MAX_FLOWS {
            // The flow closed longest ago makes room, if there is one.
            let (_, oldest) = self
                .ports
                .iter()
                .filter_map(|(p, e)| match e.state {
                    State::Closed(at) => Some((at, *p)),
                    _ => None,
                })
                .min_by_key(|(at, _)| *at)?;
            self.forget(oldest);
        }
        // Round robin: a port comes back only after every other one,
        // long after the listener's TIME_WAIT for it ended.
        loop {
            self.next = match self.next.checked_add(1) {
                Some(n) if PORTS.contains(&n) => n,
                _ => PORTS.start,
            };
            if !self.ports.contains_key(&self.next) {
                return Some(self.next);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::packet::tests::syn;
    use crate::egress::packet::{ACK, RST};

    fn inject(a: Action) -> Tcp {
        match a {
            Action::Inject(p) => Tcp::parse(&p).unwrap(),
            other => panic!("expected a packet, got {other:?}"),
        }
    }

    #[test]
    fn an_allowed_connection_goes_to_the_listener_and_its_answers_come_back_from_the_destination() {
        let mut nat = Nat::default();
        let Action::Ask(port, flow) = nat.outbound(syn()) else {
            panic!("a SYN asks the host")
        };
        assert_eq!(
            (flow.sport, flow.dst, flow.dport),
            (40000, Ipv4Addr::new(93, 184, 216, 34), 443)
        );
        assert_eq!(
            nat.outbound(syn()),
            Action::Drop,
            "a retransmitted SYN waits"
        );
        let t = inject(nat.decided(port, true));
        assert_eq!(
            (t.src, t.sport, t.dst, t.dport),
            (NAT_ADDR, port, GUEST_ADDR, LISTEN_PORT)
        );
        // The listener's SYN-ACK.
        let mut answer = syn();
        let a = Tcp::parse(&answer).unwrap();
        packet::rewrite(&mut answer, &a, (GUEST_ADDR, LISTEN_PORT), (NAT_ADDR, port));
        let back = inject(nat.outbound(answer));
        assert_eq!(
            (back.src, back.sport, back.dst, back.dport),
            (flow.dst, 443, GUEST_ADDR, 40000)
        );
        // Later packets of the flow pass without asking.
        assert!(matches!(nat.outbound(syn()), Action::Inject(_)));
    }

    #[test]
    fn a_new_connection_from_a_reused_port_gets_its_own_decision() {
        let mut nat = Nat::default();
        let Action::Ask(first, _) = nat.outbound(syn()) else {
            panic!()
        };
        nat.decided(first, true);
        assert!(
            matches!(nat.outbound(syn()), Action::Inject(_)),
            "a retransmitted SYN passes"
        );
        nat.closed(first, Instant::now());
        let Action::Ask(second, _) = nat.outbound(syn()) else {
            panic!("a SYN on a closed flow is a new connection")
        };
        assert_ne!(first, second);
        nat.decided(second, true);
        // The old flow's last packets still find their way back.
        let mut last = syn();
        let a = Tcp::parse(&last).unwrap();
        packet::rewrite(&mut last, &a, (GUEST_ADDR, LISTEN_PORT), (NAT_ADDR, first));
        assert!(matches!(nat.outbound(last), Action::Inject(_)));
        // Purging the old one leaves the new one in place.
        nat.purge(Instant::now() + Duration::from_secs(121));
        let mut ack = syn();
        ack[33] = ACK;
        let t = inject(nat.outbound(ack));
        assert_eq!(t.sport, second);
    }

    #[test]
    fn a_new_syn_on_a_flow_still_open_is_a_new_connection() {
        let mut nat = Nat::default();
        let Action::Ask(first, _) = nat.outbound(syn()) else {
            panic!()
        };
        nat.decided(first, true);
        // The same SYN again: a retransmission, to the same port.
        assert_eq!(inject(nat.outbound(syn())).sport, first);
        // Another ISN from the same source port: the guest closed its
        // side and reused the port before our relay ended.
        let mut again = syn();
        again[24..28].copy_from_slice(&77_000u32.to_be_bytes());
        let Action::Ask(second, _) = nat.outbound(again) else {
            panic!("a new connection asks the host")
        };
        assert_ne!(first, second);
    }

    #[test]
    fn a_denied_connection_is_reset_and_forgotten() {
        let mut nat = Nat::default();
        let Action::Ask(port, _) = nat.outbound(syn()) else {
            panic!()
        };
        let rst = inject(nat.decided(port, false));
        assert_eq!(rst.flags, RST | ACK);
        assert_eq!(nat.len(), 0);
        assert!(
            matches!(nat.outbound(syn()), Action::Ask(..)),
            "asked again"
        );
    }

    #[test]
    fn strays_are_dropped_closed_flows_linger_then_go_and_the_table_is_bounded() {
        let mut nat = Nat::default();
        let mut ack = syn();
        ack[33] = ACK;
        assert_eq!(nat.outbound(ack), Action::Drop, "no flow, not a SYN");
        let Action::Ask(port, _) = nat.outbound(syn()) else {
            panic!()
        };
        nat.decided(port, true);
        let t0 = Instant::now();
        nat.closed(port, t0);
        nat.purge(t0 + Duration::from_secs(60));
        assert_eq!(nat.len(), 1, "a closed flow lingers for its last packets");
        nat.purge(t0 + Duration::from_secs(121));
        assert_eq!(nat.len(), 0);
        for sport in 0..MAX_FLOWS as u16 {
            let mut p = syn();
            p[20..22].copy_from_slice(&(1 + sport).to_be_bytes());
            let t = Tcp::parse(&p).unwrap();
            packet::rewrite(&mut p, &t, (GUEST_ADDR, 1 + sport), (t.dst, t.dport));
            assert!(matches!(nat.outbound(p), Action::Ask(..)));
        }
        let refused = inject(nat.outbound(syn()));
        assert_eq!(refused.flags, RST | ACK, "past the bound: refused");
        // A closed flow gives way to a new one when the table is full.
        let some = *nat.ports.keys().next().unwrap();
        nat.decided(some, true);
        nat.closed(some, Instant::now());
        assert!(matches!(nat.outbound(syn()), Action::Ask(..)));
        assert_eq!(nat.len(), MAX_FLOWS);
    }
}
