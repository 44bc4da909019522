//! Who the guest may reach (docs/network.md): rules `HOST[:PORT]` from
//! the catalogue, the profile and `--allow-net`, decided on the host.
//!
//! A rule names a host (`api.github.com`), every name under a domain
//! (`*.googleapis.com`), every name (`*`, public addresses only), an address (`198.51.100.7`, `[2001:db8::1]`), or
//! the host itself (`host.mcpvm.internal`); without a port it allows
//! every port. Addresses in private, loopback, link-local, shared,
//! multicast and reserved ranges — where cloud metadata services and a
//! host's own services live — are refused whatever name led there,
//! unless a rule names that very address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use mcpvm_protocol::egress::HOST_NAME;
use serde::{Deserialize, Serialize};

/// One allow rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub host: Host,
    /// None: any port.
    pub port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Host {
    /// This name exactly (lowercase).
    Name(String),
    /// Every name ending in `.<domain>` (not the domain itself).
    Under(String),
    /// Every name (its addresses still pass the range check).
    AnyName,
    Address(IpAddr),
    /// The host running mcpvm, as `host.mcpvm.internal`.
    ThisHost,
}

impl Rule {
    /// Reads `HOST[:PORT]`: a name, `*.domain`, an IPv4 address, an IPv6
    /// address in brackets, or `host.mcpvm.internal`.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let bad = |why: &str| {
            Err(format!(
                "network rule {text:?}: {why}; write HOST[:PORT], e.g. api.github.com:443, *.googleapis.com:443, 198.51.100.7:8080, [2001:db8::1]:443 or host.mcpvm.internal:8080"
            ))
        };
        let (host, port) = match text.strip_prefix('[') {
            Some(rest) => match rest.split_once(']') {
                Some((h, "")) => (h, None),
                Some((h, p)) if p.starts_with(':') => (h, Some(&p[1..])),
                _ => return bad("an IPv6 address needs its closing bracket"),
            },
            None => match text.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h, Some(p)),
                Some(_) => return bad("an IPv6 address goes in brackets"),
                None => (text, None),
            },
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return bad("the port is a number from 1 to 65535"),
                Ok(n) => Some(n),
            },
        };
        let host = host.to_ascii_lowercase();
        let host = if let Ok(ip) = host.parse::<IpAddr>() {
            Host::Address(ip)
        } else if text.starts_with('[') {
            return bad("not an IPv6 address");
        } else if host == "*" {
            Host::AnyName
        } else if host == HOST_NAME {
            Host::ThisHost
        } else if let Some(domain) = host.strip_prefix("*.") {
            match valid_name(domain) {
                true => Host::Under(domain.to_string()),
                false => return bad("not a domain name after *."),
            }
        } else if valid_name(&host) {
            Host::Name(host)
        } else {
            return bad("not a host name");
        };
        Ok(Rule { host, port })
    }

    fn port_ok(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }

    fn names(&self, name: &str) -> bool {
        match &self.host {
            Host::Name(n) => n == name,
            Host::Under(d) => {
                name.len() > d.len() + 1
                    && name.ends_with(d.as_str())
                    && name[..name.len() - d.len()].ends_with('.')
            }
            Host::ThisHost => name == HOST_NAME,
            Host::AnyName => name != HOST_NAME,
            Host::Address(_) => false,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(n) => write!(f, "{n}")?,
            Host::Under(d) => write!(f, "*.{d}")?,
            Host::AnyName => write!(f, "*")?,
            Host::Address(IpAddr::V6(a)) => write!(f, "[{a}]")?,
            Host::Address(a) => write!(f, "{a}")?,
            Host::ThisHost => write!(f, "{HOST_NAME}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// The rules of a run. Empty: no network at all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPolicy {
    pub rules: Vec<Rule>,
    /// The host's own interface addresses (its public or LAN address, where
    /// its local services listen), refused like the ranges below; filled
    /// by the egress process where it runs ([`NetworkPolicy::on_host`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_addresses: Vec<IpAddr>,
}

/// A decision and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
}

impl NetworkPolicy {
    pub fn parse(rules: &[String]) -> Result<NetworkPolicy, String> {
        let rules = rules
            .iter()
            .map(|r| Rule::parse(r))
            .collect::<Result<_, _>>()?;
        Ok(NetworkPolicy::of(rules))
    }

    /// The policy of rules already parsed.
    pub fn of(rules: Vec<Rule>) -> NetworkPolicy {
        NetworkPolicy {
            rules,
            host_addresses: Vec::new(),
        }
    }

    /// This policy on a host whose interfaces hold `addresses`.
    pub fn on_host(self, addresses: Vec<IpAddr>) -> NetworkPolicy {
        NetworkPolicy {
            host_addresses: addresses.into_iter().map(canonical).collect(),
            ..self
        }
    }

    /// Why `address` is refused unless a rule names it: a refused range,
    /// or one of the host's own addresses.
    pub fn refusal(&self, address: IpAddr) -> Option<&'static str> {
        refused_range(address).or_else(|| {
            self.host_addresses
                .contains(&canonical(address))
                .then_some("one of the host's own addresses")
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// May the guest look `name` up? (Any port of it allowed.)
    pub fn resolve(&self, name: &str) -> Decision {
        match self.rules.iter().any(|r| r.names(name)) {
            true => Decision::Allow,
            false => Decision::Deny(format!("{name} is not allowed")),
        }
    }

    /// Is `address` one the host may hand the guest for `name`? An
    /// address in a refused range only when a rule names it.
    pub fn answer_ok(&self, address: IpAddr) -> bool {
        self.refusal(address).is_none() || self.names_address(address, None)
    }

    /// May the guest connect to `address:port`, which it got by looking
    /// up `name` (None: it never looked an allowed name up)?
    pub fn connect(&self, name: Option<&str>, address: IpAddr, port: u16) -> Decision {
        if self.names_address(address, Some(port)) {
            return Decision::Allow;
        }
        if let Some(range) = self.refusal(address) {
            return Decision::Deny(format!(
                "{address} is {range}; only a rule naming the address allows it"
            ));
        }
        let Some(name) = name else {
            return Decision::Deny(format!(
                "{address}:{port} is not allowed (no allowed name resolved to it)"
            ));
        };
        let named: Vec<&Rule> = self.rules.iter().filter(|r| r.names(name)).collect();
        if named.iter().any(|r| r.port_ok(port)) {
            return Decision::Allow;
        }
        match named.is_empty() {
            true => Decision::Deny(format!("{name} is not allowed")),
            false => Decision::Deny(format!("{name} is allowed, but not on port {port}")),
        }
    }

    /// May the guest reach the host's own `port` (as host.mcpvm.internal)?
    pub fn this_host(&self, port: u16) -> Decision {
        match self
            .rules
            .iter()
            .any(|r| r.host == Host::ThisHost && r.port_ok(port))
        {
            true => Decision::Allow,
            false => Decision::Deny(format!("{HOST_NAME}:{port} is not allowed")),
        }
    }

    fn names_address(&self, address: IpAddr, port: Option<u16>) -> bool {
        let address = canonical(address);
        self.rules.iter().any(|r| {
            matches!(r.host, Host::Address(a) if canonical(a) == address)
                && port.is_none_or(|p| r.port_ok(p))
        })
    }
}

/// An IPv6 form of an IPv4 address (mapped, compatible, NAT64, 6to4) as
/// that IPv4 address; anything else as itself.
pub fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    let o = a.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] => Some(tail), // ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0, _, _] if a != Ipv6Addr::UNSPECIFIED && a != Ipv6Addr::LOCALHOST => {
            Some(tail)
        } // ::a.b.c.d
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(tail), // NAT64
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])), // 6to4
        _ => None,
    }
}

/// The refused range `a` is in, by name; None for a public address.
pub fn refused_range(a: IpAddr) -> Option<&'static str> {
    match canonical(a) {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            Some(match (a, b, c) {
                (0, ..) => "in 0.0.0.0/8 (this network)",
                (10, ..) => "private (10.0.0.0/8)",
                (100, 64..=127, _) => "shared address space (100.64.0.0/10)",
                (127, ..) => "loopback (127.0.0.0/8)",
                (169, 254, _) => "link-local (169.254.0.0/16, cloud metadata)",
                // Azure's WireServer: a public address every Azure VM
                // reaches for its agent, certificates and metadata.
                (168, 63, 129) if v4.octets()[3] == 16 => "Azure WireServer (168.63.129.16)",
                (172, 16..=31, _) => "private (172.16.0.0/12)",
                (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
                (192, 168, _) => "private (192.168.0.0/16)",
                (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
                (224..=239, ..) => "multicast (224.0.0.0/4)",
                (240..=255, ..) => "reserved (240.0.0.0/4)",
                _ => return None,
            })
        }
        IpAddr::V6(v6) => {
            let s0 = v6.segments()[0];
            Some(match () {
                _ if v6.is_unspecified() => "unspecified (::)",
                _ if v6.is_loopback() => "loopback (::1)",
                _ if s0 & 0xfe00 == 0xfc00 => "unique local (fc00::/7, cloud metadata)",
                _ if s0 & 0xffc0 == 0xfe80 => "link-local (fe80::/10)",
                _ if s0 & 0xffc0 == 0xfec0 => "site-local (fec0::/10)",
                _ if s0 & 0xff00 == 0xff00 => "multicast (ff00::/8)",
                _ if v6.segments()[..6] == [0; 6] => "IPv4-compatible (::/96)",
                _ => return None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rules: &[&str]) -> NetworkPolicy {
        NetworkPolicy::parse(&rules.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn the_wireserver_and_the_hosts_own_addresses_are_refused_unless_named() {
        assert!(refused_range("168.63.129.16".parse().unwrap()).is_some());
        assert!(refused_range("::ffff:168.63.129.16".parse().unwrap()).is_some());
        assert_eq!(refused_range("168.63.129.17".parse().unwrap()), None);
        let any = policy(&["*"]).on_host(vec!["198.51.100.7".parse().unwrap()]);
        for a in ["198.51.100.7", "::ffff:198.51.100.7", "168.63.129.16"] {
            let ip: IpAddr = a.parse().unwrap();
            assert!(!any.answer_ok(ip), "{a}");
            assert!(
                matches!(any.connect(Some("a.example"), ip, 443), Decision::Deny(_)),
                "{a}"
            );
        }
        assert!(any.answer_ok("198.51.100.8".parse().unwrap()));
        let named = policy(&["198.51.100.7:443"]).on_host(vec!["198.51.100.7".parse().unwrap()]);
        assert_eq!(
            named.connect(None, "198.51.100.7".parse().unwrap(), 443),
            Decision::Allow
        );
    }

    #[test]
    fn rules_read_names_domains_addresses_and_ports() {
        for (text, host, port) in [
            (
                "api.github.com:443",
                Host::Name("api.github.com".into()),
                Some(443),
            ),
            ("API.GitHub.com", Host::Name("api.github.com".into()), None),
            (
                "*.googleapis.com:443",
                Host::Under("googleapis.com".into()),
                Some(443),
            ),
            (
                "198.51.100.7:8080",
                Host::Address("198.51.100.7".parse().unwrap()),
                Some(8080),
            ),
            (
                "[2001:db8::1]:443",
                Host::Address("2001:db8::1".parse().unwrap()),
                Some(443),
            ),
            ("[fd00::1]", Host::Address("fd00::1".parse().unwrap()), None),
            ("host.mcpvm.internal:8080", Host::ThisHost, Some(8080)),
            ("*:443", Host::AnyName, Some(443)),
        ] {
            let r = Rule::parse(text).unwrap();
            assert_eq!((r.host.clone(), r.port), (host, port), "{text}");
            assert_eq!(
                Rule::parse(&r.to_string()).unwrap(),
                r,
                "{text} prints as it reads"
            );
        }
        for bad in [
            "",
            "a:0",
            "a:99999",
            "a:x",
            "2001:db8::1",
            "[::1",
            "[nope]:1",
            "*.",
            "a b",
            "ex ample.com:80",
            "*.*.x",
        ] {
            let e = Rule::parse(bad).unwrap_err();
            assert!(e.contains("HOST[:PORT]"), "{bad}: {e}");
        }
    }

    #[test]
    fn names_are_allowed_by_rule_and_ports_checked_on_connect() {
        let p = policy(&["api.github.com:443", "*.googleapis.com:443", "example.org"]);
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert_eq!(p.resolve("api.github.com"), Decision::Allow);
        assert_eq!(p.resolve("storage.googleapis.com"), Decision::Allow);
        assert!(
            matches!(p.resolve("googleapis.com"), Decision::Deny(_)),
            "*.d is not d"
        );
        assert!(matches!(p.resolve("evilgoogleapis.com"), Decision::Deny(_)));
        assert!(matches!(p.resolve("github.com"), Decision::Deny(_)));
        let any = policy(&["*:443"]);
        assert_eq!(any.resolve("anything.example"), Decision::Allow);
        assert!(
            matches!(any.resolve(HOST_NAME), Decision::Deny(_)),
            "* is not the host"
        );
        assert!(matches!(
            any.connect(Some("a.example"), "169.254.169.254".parse().unwrap(), 443),
            Decision::Deny(_)
        ));
        assert!(matches!(
            any.connect(Some("a.example"), public, 80),
            Decision::Deny(_)
        ));
        assert_eq!(
            p.connect(Some("api.github.com"), public, 443),
            Decision::Allow
        );
        assert_eq!(
            p.connect(Some("example.org"), public, 8443),
            Decision::Allow
        );
        let Decision::Deny(why) = p.connect(Some("api.github.com"), public, 22) else {
            panic!()
        };
        assert!(why.contains("not on port 22"), "{why}");
        let Decision::Deny(why) = p.connect(None, public, 443) else {
            panic!()
        };
        assert!(why.contains("no allowed name"), "{why}");
    }

    #[test]
    fn private_loopback_link_local_and_metadata_forms_are_refused_unless_named() {
        let p = policy(&[
            "example.org",
            "198.51.100.7:80",
            "10.1.2.3:5432",
            "[fd00:ec2::254]:80",
        ]);
        for a in [
            "169.254.169.254",
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.100.100.200",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fd00:ec2::254",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
        ] {
            let ip: IpAddr = a.parse().unwrap();
            assert!(refused_range(ip).is_some(), "{a} is refused");
            assert!(!p.answer_ok(ip) || a == "fd00:ec2::254", "{a}");
            let v = p.connect(Some("example.org"), ip, 80);
            match a {
                "fd00:ec2::254" => assert_eq!(v, Decision::Allow, "named by address"),
                _ => assert!(
                    matches!(v, Decision::Deny(ref w) if w.contains("only a rule naming")),
                    "{a}: {v:?}"
                ),
            }
        }
        for a in [
            "93.184.216.34",
            "198.51.100.7",
            "172.32.0.1",
            "2001:db8::1",
            "2606:4700::1111",
        ] {
            assert_eq!(refused_range(a.parse().unwrap()), None, "{a} is public");
        }
        // Named by address: allowed on its port, even when private.
        assert_eq!(
            p.connect(None, "10.1.2.3".parse().unwrap(), 5432),
            Decision::Allow
        );
        assert!(matches!(
            p.connect(None, "10.1.2.3".parse().unwrap(), 22),
            Decision::Deny(_)
        ));
        assert_eq!(
            p.connect(None, "::ffff:198.51.100.7".parse().unwrap(), 80),
            Decision::Allow,
            "a mapped form is its address"
        );
        assert_eq!(
            p.connect(None, "198.51.100.7".parse().unwrap(), 80),
            Decision::Allow
        );
    }

    #[test]
    fn a_rule_in_an_ipv6_form_names_the_ipv4_address_it_carries() {
        // Found by the network_rules fuzz target: [::8] and 0.0.0.8.
        let compat = policy(&["[::8]:80"]);
        assert_eq!(
            compat.connect(None, "0.0.0.8".parse().unwrap(), 80),
            Decision::Allow
        );
        assert_eq!(
            canonical("::8".parse().unwrap()),
            "0.0.0.8".parse::<IpAddr>().unwrap()
        );
        assert!(matches!(
            compat.connect(None, "0.0.0.9".parse().unwrap(), 80),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn the_host_is_reachable_only_by_its_name_and_port_when_allowed() {
        let none = policy(&["example.org"]);
        assert!(matches!(none.resolve(HOST_NAME), Decision::Deny(_)));
        assert!(matches!(none.this_host(8080), Decision::Deny(_)));
        let p = policy(&["host.mcpvm.internal:8080"]);
        assert_eq!(p.resolve(HOST_NAME), Decision::Allow);
        assert_eq!(p.this_host(8080), Decision::Allow);
        assert!(matches!(p.this_host(22), Decision::Deny(_)));
        assert!(
            matches!(
                p.connect(Some(HOST_NAME), "127.0.0.1".parse().unwrap(), 8080),
                Decision::Deny(_)
            ),
            "not as loopback"
        );
    }
}
