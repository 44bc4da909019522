//! The few IPv4/TCP header fields the NAT reads and rewrites, and the
//! checksums it must then recompute. Packets come from the guest's own
//! kernel; anything malformed is dropped, never trusted.

use std::net::Ipv4Addr;

pub const TCP: u8 = 6;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// A TCP segment in an IPv4 packet, by its header offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    pub flags: u8,
    pub seq: u32,
    /// Where the TCP header starts.
    ihl: usize,
}

impl Tcp {
    /// The segment's fields, or None for anything but whole, unfragmented
    /// IPv4 TCP with sound lengths.
    pub fn parse(p: &[u8]) -> Option<Tcp> {
        if p.len() < 20 || p[0] >> 4 != 4 || p[9] != TCP {
            return None;
        }
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        let fragment = u16::from_be_bytes([p[6], p[7]]) & 0x3fff;
        if ihl < 20 || total != p.len() || total < ihl + 20 || fragment != 0 {
            return None;
        }
        let t = &p[ihl..];
        Some(Tcp {
            src: Ipv4Addr::new(p[12], p[13], p[14], p[15]),
            dst: Ipv4Addr::new(p[16], p[17], p[18], p[19]),
            sport: u16::from_be_bytes([t[0], t[1]]),
            dport: u16::from_be_bytes([t[2], t[3]]),
            seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            flags: t[13],
            ihl,
        })
    }

    /// An opening SYN (not a SYN-ACK).
    pub fn is_syn(&self) -> bool {
        self.flags & (SYN | ACK) == SYN
    }
}

/// Rewrites the packet's addresses and ports and fixes both checksums.
pub fn rewrite(p: &mut [u8], tcp: &Tcp, src: (Ipv4Addr, u16), dst: (Ipv4Addr, u16)) {
    p[12..16].copy_from_slice(&src.0.octets());
    p[16..20].copy_from_slice(&dst.0.octets());
    let t = tcp.ihl;
    p[t..t + 2].copy_from_slice(&src.1.to_be_bytes());
    p[t + 2..t + 4].copy_from_slice(&dst.1.to_be_bytes());
    fix_checksums(p, t);
}

/// A RST+ACK answering `syn`, as if its destination refused it.
pub fn refusal(syn: &Tcp) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&40u16.to_be_bytes());
    p[6] = 0x40; // don't fragment
    p[8] = 64;
    p[9] = TCP;
    p[12..16].copy_from_slice(&syn.dst.octets());
    p[16..20].copy_from_slice(&syn.src.octets());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&syn.dport.to_be_bytes());
    t[2..4].copy_from_slice(&syn.sport.to_be_bytes());
    t[8..12].copy_from_slice(&syn.seq.wrapping_add(1).to_be_bytes());
    t[12] = 5 << 4;
    t[13] = RST | ACK;
    fix_checksums(&mut p, 20);
    p
}

fn fix_checksums(p: &mut [u8], ihl: usize) {
    p[10..12].fill(0);
    let ip = checksum(0, &p[..ihl]);
    p[10..12].copy_from_slice(&ip.to_be_bytes());
    p[ihl + 16..ihl + 18].fill(0);
    let len = (p.len() - ihl) as u32;
    let mut pseudo = [0u8; 12];
    pseudo[0..8].copy_from_slice(&p[12..20]);
    pseudo[9] = TCP;
    pseudo[10..12].copy_from_slice(&(len as u16).to_be_bytes());
    let sum = checksum(sum_words(0, &pseudo), &p[ihl..]);
    p[ihl + 16..ihl + 18].copy_from_slice(&sum.to_be_bytes());
}

fn sum_words(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// The Internet checksum of `data`, starting from a partial sum.
fn checksum(acc: u32, data: &[u8]) -> u16 {
    let mut sum = sum_words(acc, data);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A SYN from 10.0.2.15:40000 to 93.184.216.34:443, with an MSS
    /// option, as Linux sends it (checksums computed by hand tools).
    pub fn syn() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 44, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 2, 15, 93, 184, 216, 34,
        ];
        p.extend_from_slice(&40000u16.to_be_bytes());
        p.extend_from_slice(&443u16.to_be_bytes());
        p.extend_from_slice(&1000u32.to_be_bytes());
        p.extend_from_slice(&0u32.to_be_bytes());
        p.extend_from_slice(&[6 << 4, SYN, 0xff, 0xff, 0, 0, 0, 0, 2, 4, 0x05, 0xb4]);
        fix_checksums(&mut p, 20);
        p
    }

    /// A packet's checksums verify when summing over them gives zero.
    fn verifies(p: &[u8]) -> bool {
        let t = Tcp::parse(p).unwrap();
        let mut pseudo = [0u8; 12];
        pseudo[0..8].copy_from_slice(&p[12..20]);
        pseudo[9] = TCP;
        pseudo[10..12].copy_from_slice(&((p.len() - t.ihl) as u16).to_be_bytes());
        checksum(0, &p[..t.ihl]) == 0 && checksum(sum_words(0, &pseudo), &p[t.ihl..]) == 0
    }

    #[test]
    fn the_checksum_is_the_rfc_1071_example() {
        // RFC 1071 section 3: 0001 f203 f4f5 f6f7 sums to ddf2.
        assert_eq!(
            checksum(0, &[0, 1, 0xf2, 3, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
    }

    #[test]
    fn a_syn_is_read_and_rewritten_with_valid_checksums() {
        let mut p = syn();
        let t = Tcp::parse(&p).unwrap();
        assert!(t.is_syn() && verifies(&p));
        assert_eq!(
            (t.sport, t.dst, t.dport),
            (40000, Ipv4Addr::new(93, 184, 216, 34), 443)
        );
        rewrite(
            &mut p,
            &t,
            (Ipv4Addr::new(10, 0, 2, 2), 1234),
            (Ipv4Addr::new(10, 0, 2, 15), 65300),
        );
        let r = Tcp::parse(&p).unwrap();
        assert_eq!(
            (r.src, r.sport, r.dst, r.dport),
            (
                Ipv4Addr::new(10, 0, 2, 2),
                1234,
                Ipv4Addr::new(10, 0, 2, 15),
                65300
            )
        );
        assert_eq!((r.seq, r.flags), (1000, SYN));
        assert!(verifies(&p));
    }

    #[test]
    fn a_refusal_resets_the_syn_it_answers() {
        let t = Tcp::parse(&syn()).unwrap();
        let rst = refusal(&t);
        let r = Tcp::parse(&rst).unwrap();
        assert!(verifies(&rst));
        assert_eq!((r.src, r.sport, r.dst, r.dport), (t.dst, 443, t.src, 40000));
        assert_eq!(r.flags, RST | ACK);
        assert_eq!(u32::from_be_bytes(rst[28..32].try_into().unwrap()), 1001);
    }

    #[test]
    fn malformed_and_foreign_packets_are_not_read() {
        let p = syn();
        assert!(Tcp::parse(&p[..30]).is_none(), "truncated");
        let mut udp = p.clone();
        udp[9] = 17;
        assert!(Tcp::parse(&udp).is_none());
        let mut frag = p.clone();
        frag[7] = 1;
        assert!(Tcp::parse(&frag).is_none());
        let mut v6 = p;
        v6[0] = 0x60;
        assert!(Tcp::parse(&v6).is_none());
        assert!(Tcp::parse(&[]).is_none());
    }
}
