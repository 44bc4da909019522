//! Flows across servers: what an instruction injected into one tool's
//! result can chain when one assistant holds all of the audited servers
//! (or a client's configured ones). From each tool's roles
//! (`probes::judge::roles`), two chains:
//!
//! - exfiltration: untrusted content → a private read → a public sink;
//! - destruction: untrusted content → a destructive tool.
//!
//! A chain is named by the tools that can play each link, observed ones
//! first, and graded by how its links were shown: every link observed
//! is high, any link only declared is medium, none observed is low. Per
//! server, the links it holds alone (a server that both fetches and
//! sends is an exfiltration path by itself once something private
//! reaches it).

use std::collections::BTreeMap;

use probes::judge::roles::{Role, ToolRoles};

/// One tool able to play a link: its server, its name, and whether a
/// call showed it (else only its annotations claim it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Player {
    pub observed: bool,
    pub server: String,
    pub tool: String,
    /// The step that showed it, when observed.
    pub step: Option<String>,
}

/// A chain an injected instruction can follow.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    /// `exfiltration` or `destruction`.
    pub kind: &'static str,
    /// Each link's role and who can play it.
    pub links: Vec<(Role, Vec<Player>)>,
    pub severity: &'static str,
}

/// The players of each role across `servers`, observed first.
fn players(servers: &BTreeMap<String, Vec<ToolRoles>>) -> BTreeMap<Role, Vec<Player>> {
    let mut out: BTreeMap<Role, Vec<Player>> = BTreeMap::new();
    for (server, tools) in servers {
        for t in tools {
            for (role, seen) in &t.observed {
                out.entry(*role).or_default().push(Player {
                    observed: true,
                    server: server.clone(),
                    tool: t.tool.clone(),
                    step: Some(seen.step.clone()),
                });
            }
            for role in &t.declared {
                out.entry(*role).or_default().push(Player {
                    observed: false,
                    server: server.clone(),
                    tool: t.tool.clone(),
                    step: None,
                });
            }
        }
    }
    for list in out.values_mut() {
        // Observed first, then by server and tool.
        list.sort_by(|a, b| {
            (!a.observed, &a.server, &a.tool).cmp(&(!b.observed, &b.server, &b.tool))
        });
        list.dedup_by(|a, b| a.server == b.server && a.tool == b.tool);
    }
    out
}

/// The chains `servers`' tools make possible, worst first.
pub fn flows(servers: &BTreeMap<String, Vec<ToolRoles>>) -> Vec<Flow> {
    let by_role = players(servers);
    let chain = |kind: &'static str, roles: &[Role]| -> Option<Flow> {
        let links: Vec<(Role, Vec<Player>)> = roles
            .iter()
            .map(|r| (*r, by_role.get(r).cloned().unwrap_or_default()))
            .collect();
        if links.iter().any(|(_, p)| p.is_empty()) {
            return None;
        }
        let shown = |(_, p): &(Role, Vec<Player>)| p.iter().any(|x| x.observed);
        let severity = match links.iter().filter(|l| shown(l)).count() {
            n if n == links.len() => "high",
            0 => "low",
            _ => "medium",
        };
        Some(Flow {
            kind,
            links,
            severity,
        })
    };
    let mut out: Vec<Flow> = [
        chain(
            "exfiltration",
            &[Role::UntrustedContent, Role::ReadsPrivate, Role::PublicSink],
        ),
        chain("destruction", &[Role::UntrustedContent, Role::Destructive]),
    ]
    .into_iter()
    .flatten()
    .collect();
    let rank = |s: &str| match s {
        "high" => 0,
        "medium" => 1,
        _ => 2,
    };
    out.sort_by_key(|f| rank(f.severity));
    out
}

/// The roles one server holds alone (observed or declared), for the
/// per-server view a scanner gives.
pub fn held(tools: &[ToolRoles]) -> Vec<(Role, bool)> {
    let mut out: BTreeMap<Role, bool> = BTreeMap::new();
    for t in tools {
        for role in t.observed.keys() {
            out.insert(*role, true);
        }
        for role in &t.declared {
            out.entry(*role).or_insert(false);
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use probes::judge::roles::Seen;

    fn tool(name: &str, observed: &[Role], declared: &[Role]) -> ToolRoles {
        ToolRoles {
            tool: name.into(),
            observed: observed
                .iter()
                .map(|r| {
                    (
                        *r,
                        Seen {
                            step: format!("tools/call:{name}"),
                            why: String::new(),
                            evidence: Vec::new(),
                        },
                    )
                })
                .collect(),
            declared: declared.to_vec(),
        }
    }

    #[test]
    fn an_exfiltration_chain_needs_a_source_a_reader_and_a_sink_across_servers() {
        let mut servers = BTreeMap::new();
        servers.insert(
            "fetch".to_string(),
            vec![tool(
                "fetch",
                &[Role::UntrustedContent, Role::PublicSink],
                &[],
            )],
        );
        // Alone, a fetcher is no exfiltration chain: nothing private.
        assert!(flows(&servers).iter().all(|f| f.kind != "exfiltration"));
        servers.insert(
            "filesystem".to_string(),
            vec![tool("read_file", &[Role::ReadsPrivate], &[])],
        );
        let found = flows(&servers);
        let ex = found.iter().find(|f| f.kind == "exfiltration").unwrap();
        assert_eq!(ex.severity, "high", "every link observed");
        assert_eq!(ex.links[1].1[0].tool, "read_file");
        assert_eq!(ex.links[2].1[0].server, "fetch");
        // No destructive tool: no destruction chain.
        assert!(found.iter().all(|f| f.kind != "destruction"));
    }

    #[test]
    fn a_chain_resting_on_a_declared_link_is_graded_below_one_shown() {
        let mut servers = BTreeMap::new();
        servers.insert(
            "web".to_string(),
            vec![tool("search", &[Role::UntrustedContent], &[])],
        );
        servers.insert(
            "shell".to_string(),
            vec![tool("run", &[], &[Role::Destructive])],
        );
        let found = flows(&servers);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, "destruction");
        assert_eq!(found[0].severity, "medium");
        assert!(!found[0].links[1].1[0].observed);
        let mut declared_only = BTreeMap::new();
        declared_only.insert(
            "x".to_string(),
            vec![tool("t", &[], &[Role::UntrustedContent, Role::Destructive])],
        );
        assert_eq!(flows(&declared_only)[0].severity, "low");
        assert_eq!(held(&servers["web"]), [(Role::UntrustedContent, true)]);
    }
}
