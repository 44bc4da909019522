//! Network rules checked by the audit: what a server's catalogue entry
//! allows (`network = ["host:port", …]`) against every name the server
//! tried in the cell it ran with its egress dropped (deny-net: each
//! lookup and connection refused and logged). A name it tried that no
//! rule covers is one a user running it with the entry's rules would see
//! refused: the entry is flagged, and rules covering what it tried are
//! proposed. Telemetry and update checks are left out (`calls.rs`).

use serde::{Deserialize, Serialize};

use super::calls;
use super::document::{Block, Cell, Line, Row, Table};
use super::record::Record;

/// One server's rules, checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The entry's rules.
    pub declared: Vec<String>,
    /// Hosts it tried (telemetry left out), in order.
    pub tried: Vec<String>,
    /// Those no declared rule covers.
    pub uncovered: Vec<String>,
    /// Rules that cover every host it tried: the declared ones that
    /// were used, then one per uncovered host.
    pub proposed: Vec<String>,
}

/// Whether `rule` (`host:port`, `*.domain:port`, `*:port`) covers `host`.
pub fn covers(rule: &str, host: &str) -> bool {
    let pattern = rule.rsplit_once(':').map_or(rule, |(h, _)| h);
    let host = host.to_ascii_lowercase();
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        _ if pattern == "*" => true,
        Some(domain) => host.ends_with(&format!(".{domain}")),
        None => host == pattern,
    }
}

/// The check of one server from its deny-net cell; None when it tried
/// nothing but telemetry.
pub fn check(declared: &[String], r: &Record) -> Option<Check> {
    let mut tried: Vec<String> = Vec::new();
    for item in r.network.iter().chain(&r.start_network) {
        if let Some((host, _)) = calls::net_try(item) {
            if !calls::is_telemetry(host) && !tried.iter().any(|h| h == host) {
                tried.push(host.to_string());
            }
        }
    }
    if tried.is_empty() {
        return None;
    }
    let uncovered: Vec<String> = tried
        .iter()
        .filter(|h| !declared.iter().any(|rule| covers(rule, h)))
        .cloned()
        .collect();
    let mut proposed: Vec<String> = declared
        .iter()
        .filter(|rule| tried.iter().any(|h| covers(rule, h)))
        .cloned()
        .collect();
    proposed.extend(uncovered.iter().map(|h| format!("{h}:443")));
    Some(Check {
        declared: declared.to_vec(),
        tried,
        uncovered,
        proposed,
    })
}

/// The section: servers whose entry's rules miss a host their tools
/// tried, with the rules proposed. Nothing when every entry covers what
/// its server tried.
pub fn section(checks: &[(String, Check)]) -> Vec<Block> {
    let flagged: Vec<&(String, Check)> = checks
        .iter()
        .filter(|(_, c)| !c.uncovered.is_empty())
        .collect();
    if flagged.is_empty() {
        return Vec::new();
    }
    let rows = flagged
        .iter()
        .map(|(s, c)| Row {
            head: s.clone(),
            cells: vec![
                Cell::text(match c.declared.is_empty() {
                    true => "none".to_string(),
                    false => c.declared.join(", "),
                }),
                Cell::text(c.uncovered.join(", ")),
                Cell::text(c.proposed.join(", ")),
            ],
        })
        .collect();
    vec![
        Block::Heading(2, "Network rules".into()),
        Block::Para(Line::text(format!(
            "{} of {} servers that reached for the network tried a host their catalogue entry's rules do not cover: run with those rules, these lookups are refused. Proposed: rules covering every host the server tried with its egress dropped (telemetry and update checks left out; ports assumed 443, the lookups were refused before any connection).",
            flagged.len(),
            checks.len()
        ))),
        Block::Table(Table {
            head: ["server", "entry allows", "tried, not covered", "proposed"]
                .map(String::from)
                .to_vec(),
            rows,
            grid: false,
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_cover_hosts_exactly_or_by_domain() {
        assert!(covers("api.hubapi.com:443", "api.hubapi.com"));
        assert!(!covers("api.hubapi.com:443", "api.hubspot.com"));
        assert!(covers("*.atlassian.net:443", "mcpvm-dummy.atlassian.net"));
        assert!(!covers("*.atlassian.net:443", "atlassian.net.evil.com"));
        assert!(covers("*:443", "anything.example"));
    }

    /// hubspot 0.4.0: its entry allowed api.hubapi.com, its tools looked
    /// up api.hubspot.com (seen in the deny-net run's records).
    #[test]
    fn a_host_the_tools_tried_that_no_rule_covers_is_flagged_with_a_proposal() {
        let r = Record {
            network: vec![
                "dns api.hubspot.com denied (api.hubspot.com is not allowed)".into(),
                "dns o1.ingest.sentry.io denied (not allowed)".into(),
            ],
            ..Record::failed(
                "hubspot",
                "deny-net",
                super::super::record::Outcome::Ok,
                "x".into(),
                1.0,
            )
        };
        let c = check(&["api.hubapi.com:443".into()], &r).unwrap();
        assert_eq!(c.tried, ["api.hubspot.com"]);
        assert_eq!(c.uncovered, ["api.hubspot.com"]);
        assert_eq!(c.proposed, ["api.hubspot.com:443"]);
        let ok = check(&["api.hubspot.com:443".into(), "x.com:443".into()], &r).unwrap();
        assert!(ok.uncovered.is_empty());
        assert_eq!(ok.proposed, ["api.hubspot.com:443"]);
        assert!(section(&[("hubspot".into(), ok)]).is_empty());
        assert!(!section(&[("hubspot".into(), c)]).is_empty());
    }
}
