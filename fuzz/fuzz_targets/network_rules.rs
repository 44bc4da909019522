//! Network rules as users write them (`--allow-net`, a catalogue's
//! `network`, a profile's `allow_net`), and the decisions made with them:
//! any text is read or refused with an error; a rule read prints as text
//! that reads back to it; deciding a name, an address or the host with a
//! policy of such rules never panics, and an address in a refused range
//! is allowed only by a rule naming it (in any of its forms).
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use withholding::network::{canonical, refused_range, NetworkPolicy, Rule, Decision};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.lines();
    let rules: Vec<String> = lines.by_ref().take(4).map(String::from).collect();
    for r in &rules {
        if let Ok(rule) = Rule::parse(r) {
            assert_eq!(Rule::parse(&rule.to_string()).as_ref(), Ok(&rule), "{r:?}");
        }
    }
    let Ok(policy) = NetworkPolicy::parse(&rules) else {
        return;
    };
    // The rest: names and addresses to decide.
    let bytes: Vec<u8> = text.bytes().collect();
    for name in lines {
        let _ = policy.resolve(name);
    }
    for chunk in bytes.chunks(18) {
        let mut v6 = [0u8; 16];
        v6[..chunk.len().min(16)].copy_from_slice(&chunk[..chunk.len().min(16)]);
        let port = u16::from_le_bytes([chunk[chunk.len() - 1], chunk[0]]);
        for a in [
            IpAddr::V4(Ipv4Addr::new(v6[0], v6[1], v6[2], v6[3])),
            IpAddr::V6(Ipv6Addr::from(v6)),
        ] {
            // A rule names an address in any of its forms (an IPv6 form
            // of an IPv4 address is that address).
            let named = policy.rules.iter().any(|r| {
                matches!(r.host, withholding::network::Host::Address(x) if canonical(x) == canonical(a))
            });
            let verdict = policy.connect(Some("example.org"), a, port);
            if refused_range(a).is_some() && verdict == Decision::Allow {
                assert!(named, "{a} allowed by {policy:?}");
            }
            let _ = policy.answer_ok(a);
        }
        let _ = policy.this_host(port);
    }
});
