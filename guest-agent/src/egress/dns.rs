//! The guest's DNS server, as far as the agent needs one: it reads a
//! query's one question and writes the answer the host gave. Queries come
//! from the guest's resolver; anything it cannot read gets FORMERR or is
//! dropped.

use std::net::Ipv4Addr;

/// A query's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    /// Recursion desired, echoed back.
    rd: bool,
    /// Lowercase, without the trailing dot.
    pub name: String,
    pub qtype: u16,
    /// The question's bytes, echoed back.
    question: Vec<u8>,
}

pub const A: u16 = 1;
pub const AAAA: u16 = 28;
const NOERROR: u8 = 0;
const FORMERR: u8 = 1;
pub const SERVFAIL: u8 = 2;
pub const NXDOMAIN: u8 = 3;
/// Answers per response at most (keeps it under 512 bytes).
const MAX_ANSWERS: usize = 16;

/// The name of a query type, for the host's log.
pub fn type_name(qtype: u16) -> String {
    match qtype {
        A => "A".into(),
        AAAA => "AAAA".into(),
        5 => "CNAME".into(),
        15 => "MX".into(),
        16 => "TXT".into(),
        33 => "SRV".into(),
        65 => "HTTPS".into(),
        n => format!("TYPE{n}"),
    }
}

/// The query in `msg`, or the FORMERR answer for it (None if not even a
/// header is there: dropped).
pub fn parse(msg: &[u8]) -> Result<Query, Option<Vec<u8>>> {
    if msg.len() < 12 {
        return Err(None);
    }
    let id = u16::from_be_bytes([msg[0], msg[1]]);
    let rd = msg[2] & 1 == 1;
    let formerr = || Some(header(id, rd, FORMERR, 0, 0));
    let is_query = msg[2] & 0xf8 == 0; // QR = 0, OPCODE = 0
    let qdcount = u16::from_be_bytes([msg[4], msg[5]]);
    if !is_query || qdcount != 1 {
        return Err(formerr());
    }
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let Some(&len) = msg.get(at) else {
            return Err(formerr());
        };
        at += 1;
        if len == 0 {
            break;
        }
        // Compression pointers have no place in a question.
        let Some(label) = msg.get(at..at + usize::from(len)).filter(|_| len < 64) else {
            return Err(formerr());
        };
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += usize::from(len);
    }
    let Some(tail) = msg.get(at..at + 4) else {
        return Err(formerr());
    };
    let name = labels.join(".");
    if name.is_empty() || name.len() > 253 {
        return Err(formerr());
    }
    Ok(Query {
        id,
        rd,
        name,
        qtype: u16::from_be_bytes([tail[0], tail[1]]),
        question: msg[12..at + 4].to_vec(),
    })
}

/// The answer: the addresses (A queries only; other types get an empty
/// NOERROR), or `rcode`.
pub fn answer(q: &Query, rcode: u8, addresses: &[Ipv4Addr]) -> Vec<u8> {
    let answers: &[Ipv4Addr] = match (rcode, q.qtype) {
        (NOERROR, A) => &addresses[..addresses.len().min(MAX_ANSWERS)],
        _ => &[],
    };
    let mut out = header(q.id, q.rd, rcode, 1, answers.len() as u16);
    out.extend_from_slice(&q.question);
    for a in answers {
        out.extend_from_slice(&[0xc0, 12]); // the question's name
        out.extend_from_slice(&A.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes()); // IN
        out.extend_from_slice(&60u32.to_be_bytes()); // TTL
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&a.octets());
    }
    out
}

fn header(id: u16, rd: bool, rcode: u8, qd: u16, an: u16) -> Vec<u8> {
    let mut h = Vec::with_capacity(512);
    h.extend_from_slice(&id.to_be_bytes());
    h.push(0x80 | u8::from(rd)); // QR, RD echoed
    h.push(0x80 | rcode); // RA
    h.extend_from_slice(&qd.to_be_bytes());
    h.extend_from_slice(&an.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 0]);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `name` as glibc's resolver sends it.
    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&1u16.to_be_bytes());
        q
    }

    #[test]
    fn a_query_is_read_and_answered_with_its_addresses() {
        let q = parse(&query("Example.COM", A)).unwrap();
        assert_eq!((q.id, q.name.as_str(), q.qtype), (0xabcd, "example.com", A));
        let a = answer(
            &q,
            NOERROR,
            &[
                Ipv4Addr::new(198, 51, 100, 7),
                Ipv4Addr::new(198, 51, 100, 8),
            ],
        );
        assert_eq!(&a[0..4], &[0xab, 0xcd, 0x81, 0x80]);
        assert_eq!(u16::from_be_bytes([a[6], a[7]]), 2, "two answers");
        let question_end = 12 + q.question.len();
        assert_eq!(&a[12..question_end], &query("Example.COM", A)[12..]);
        assert_eq!(&a[question_end..question_end + 2], &[0xc0, 12]);
        assert_eq!(&a[question_end + 12..question_end + 16], &[198, 51, 100, 7]);
        assert_eq!(a.len(), question_end + 32);
    }

    #[test]
    fn denied_names_get_nxdomain_and_other_types_no_addresses() {
        let q = parse(&query("evil.test", A)).unwrap();
        let a = answer(&q, NXDOMAIN, &[Ipv4Addr::LOCALHOST]);
        assert_eq!(a[3] & 0x0f, NXDOMAIN);
        assert_eq!(u16::from_be_bytes([a[6], a[7]]), 0);
        let q6 = parse(&query("example.com", AAAA)).unwrap();
        let a6 = answer(&q6, NOERROR, &[Ipv4Addr::LOCALHOST]);
        assert_eq!(
            (a6[3] & 0x0f, u16::from_be_bytes([a6[6], a6[7]])),
            (NOERROR, 0)
        );
        assert_eq!(type_name(AAAA), "AAAA");
        assert_eq!(type_name(99), "TYPE99");
    }

    #[test]
    fn malformed_queries_get_formerr_or_nothing() {
        assert_eq!(parse(&[1, 2, 3]), Err(None));
        let mut pointer = query("a.b", A);
        pointer[12] = 0xc0;
        let Err(Some(e)) = parse(&pointer) else {
            panic!("a compression pointer is a format error")
        };
        assert_eq!(e[3] & 0x0f, FORMERR);
        let truncated = &query("example.com", A)[..20];
        assert!(matches!(parse(truncated), Err(Some(_))));
        let mut response = query("a.b", A);
        response[2] |= 0x80;
        assert!(matches!(parse(&response), Err(Some(_))));
        let mut two = query("a.b", A);
        two[5] = 2;
        assert!(matches!(parse(&two), Err(Some(_))));
    }
}
