//! The `security` column of an audit (`mcpvm audit --security`): each
//! server's tools attacked under observation (`mcpvm probe --security`),
//! shown as a column of the matrix, a findings section with what proves
//! each finding and the call that reproduces it, and one SARIF log for
//! the whole audit (docs/security-audit.md).

use std::collections::BTreeMap;

use probes::judge::findings::Finding;
use probes::judge::roles::{Role, ToolRoles};
use serde_json::Value;

use super::document::{Block, Cell, Item, Line};
use super::matrix::SECURITY;
use super::meta::Meta;
use super::record::{Record, Security};

type Records = BTreeMap<(String, String), Record>;

fn record_of<'a>(records: &'a Records, server: &str) -> Option<&'a Record> {
    records.get(&(server.to_string(), SECURITY.to_string()))
}

/// The matrix symbol of a security cell: `⚠N` findings, `○` none found,
/// `?` not judged (no evidence to judge by: never "none"); a cell that
/// never attacked (the server did not start) shows its outcome.
pub fn symbol(r: &Record) -> String {
    match &r.security {
        Some(s) if !s.findings.is_empty() => format!("⚠{}", s.findings.len()),
        Some(s) if s.not_judged.is_some() => "?".into(),
        Some(_) => "○".into(),
        None => r.outcome.symbol().into(),
    }
}

/// One line on what the attacks of `r` did.
pub fn summary(r: &Record) -> String {
    let Some(s) = &r.security else {
        return format!(
            "{}: no attack sent (the server did not get that far)",
            r.outcome.name()
        );
    };
    if let Some(why) = &s.not_judged {
        return format!("not judged ({} attacks sent): {why}", s.attacks);
    }
    let count = |n: usize, one: &str, many: &str| match n {
        0 if one == "finding" => "no finding".to_string(),
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let mut said = format!(
        "{} in {} on {} ({}), judged against the roots {}",
        count(s.findings.len(), "finding", "findings"),
        count(s.attacks, "attack", "attacks"),
        count(s.tools.len(), "tool", "tools"),
        s.tools.join(", "),
        s.roots.join(", ")
    );
    if !s.unreached.is_empty() {
        said += &format!(
            "; not reached: {} (each refused the first payloads exactly as it refused its valid call)",
            s.unreached.join(", ")
        );
    }
    let missed = r.reach.as_ref().map_or(0, |r| r.attacks_not_reached);
    if missed > 0 {
        said += &format!(
            "; {} refused for an argument the payload was not in (not reached, not clean)",
            count(missed, "attack", "attacks")
        );
    }
    if s.attacks > 0 {
        said += &format!(
            "; {} of {} attacks reached their tool's code",
            s.attacks.saturating_sub(missed),
            s.attacks
        );
    }
    said
}

/// `mcpvm probe` that repeats the call of a finding, with its effects
/// shown per step.
pub fn reproduce(server: &str, f: &Finding) -> Option<String> {
    let call = f.call.as_deref()?;
    Some(format!(
        "mcpvm probe --server {server} --profile observe --only-given --call {}",
        shell_quoted(call)
    ))
}

fn shell_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn tool(f: &Finding) -> &str {
    f.step.split_once(':').map_or(f.step.as_str(), |(_, t)| t)
}

/// A security cell of the matrix: its symbol, shaded (red where
/// something was found), with what the attacks did as its tooltip.
pub fn cell(r: &Record) -> Cell {
    let found = r.security.as_ref().map_or(0, |x| x.findings.len());
    Cell {
        lines: vec![symbol(r)],
        shade: Some(match (&r.security, found) {
            (None, _) => r.outcome.colour(),
            (Some(_), 0) => "#6a8",
            _ => "#b03030",
        }),
        title: Some(summary(r)),
    }
}

/// A finding in a line, its evidence and how to reproduce it under it.
fn finding(server: &str, f: &Finding) -> Item {
    let mut line = Line::default().strong(f.class.as_str()).and(format!(
        " ({}, {}) in {}",
        f.rule,
        f.severity,
        tool(f)
    ));
    if let (Some(a), Some(p)) = (&f.argument, &f.payload) {
        line = line.and(format!(", argument {a} ← payload \"{p}\""));
        if f.attempts > 1 {
            line = line.and(format!(" and {} more", f.attempts - 1));
        }
    }
    let mut sub: Vec<Item> = f
        .evidence
        .first()
        .map(|e| Item::of(Line::text(format!("evidence: {}", e.line()))))
        .into_iter()
        .collect();
    sub.extend(
        f.evidence
            .iter()
            .skip(1)
            .map(|e| Item::of(Line::text(format!("and: {}", e.line())))),
    );
    if let Some(cmd) = reproduce(server, f) {
        sub.push(Item::of(Line::text(format!("reproduce: {cmd}"))));
    }
    Item {
        line: line.and(format!(": {}", f.why)),
        sub,
    }
}

/// `Security findings`: per server, what was attacked and each finding.
pub fn section(meta: &Meta, records: &Records) -> Vec<Block> {
    let items = meta
        .servers
        .keys()
        .map(|s| match record_of(records, s) {
            None => Item::of(Line::default().strong(s.as_str()).and(": not run yet")),
            Some(r) => Item {
                line: Line::default()
                    .strong(s.as_str())
                    .and(format!(": {}", summary(r))),
                sub: r
                    .security
                    .iter()
                    .flat_map(|x| &x.findings)
                    .map(|f| finding(s, f))
                    .collect(),
            },
        })
        .collect();
    vec![
        Block::Heading(2, "Security findings".into()),
        Block::Para(Line::text("Each tool's string arguments were given attack payloads, one at a time, and what the server then did in its VM was judged (docs/security-audit.md): a finding is proven by the recorded effects it lists, not guessed from a description.")),
        Block::List {
            ordered: false,
            items,
        },
    ]
}

/// Findings on names across servers (`probes::judge::names`): tools that
/// shadow another audited server's or a well-known tool, packages a typo
/// from a popular one. Judged on every server's listing (its first cell
/// that listed) and its catalogue entry; with them, what each server's
/// install scripts did beyond installing (`probes::judge::install`, from the
/// store's record of its layer's build).
pub fn across(meta: &Meta, records: &Records) -> BTreeMap<String, Vec<Finding>> {
    let listed: BTreeMap<String, (String, Vec<String>)> = meta
        .servers
        .iter()
        .map(|(s, sm)| {
            let tools = meta
                .profiles
                .iter()
                .filter_map(|p| records.get(&(s.clone(), p.clone())))
                .find(|r| !r.tools_listed.is_empty())
                .map(|r| r.tools_listed.clone())
                .unwrap_or_default();
            (s.clone(), (sm.package.clone(), tools))
        })
        .collect();
    let mut out = probes::judge::names::shadowing(&listed);
    let popular = probes::judge::names::popular();
    for (s, sm) in &meta.servers {
        if let Some(f) = probes::judge::names::near_miss(&sm.package, &popular) {
            out.entry(s.clone()).or_default().insert(0, f);
        }
        // What its install scripts did when its layer was built.
        if let Some(rec) = &sm.install {
            let found = crate::install::record::findings(rec);
            if !found.is_empty() {
                out.entry(s.clone()).or_default().extend(found);
            }
        }
    }
    out
}

/// What each server declares, as the definitions checks judged it (the
/// first cell that listed it), and what the name checks across servers
/// found (`across`): nothing when none of them flags anything.
fn declared_of(
    meta: &Meta,
    records: &Records,
    server: &str,
    across: &BTreeMap<String, Vec<Finding>>,
) -> Vec<Finding> {
    let mut found: Vec<Finding> = meta
        .profiles
        .iter()
        .filter_map(|p| records.get(&(server.to_string(), p.clone())))
        .find(|r| !r.declared.is_empty())
        .map_or(Vec::new(), |r| r.declared.clone());
    found.extend(across.get(server).into_iter().flatten().cloned());
    found
}

/// `What the servers declare`: per server, the tool-poisoning and naming
/// findings of its listings; nothing when there are none.
pub fn declared_section(meta: &Meta, records: &Records) -> Vec<Block> {
    let across = across(meta, records);
    let items: Vec<Item> = meta
        .servers
        .keys()
        .filter_map(|s| {
            let found = declared_of(meta, records, s, &across);
            (!found.is_empty()).then(|| Item {
                line: Line::default().strong(s.as_str()).and(format!(
                    ": {} finding(s) in what it lists or did at install",
                    found.len()
                )),
                sub: found.iter().map(|f| finding(s, f)).collect(),
            })
        })
        .collect();
    if items.is_empty() {
        return Vec::new();
    }
    vec![
        Block::Heading(2, "What the servers declare".into()),
        Block::Para(Line::text("Each server's tools, prompts and resources as it listed them, judged as written (probes/src/judge/definitions.rs): instructions aimed at the model in a description, invisible or control characters, names that pass for others; and across the servers (probes/src/judge/names.rs): a tool whose name another audited server or a well-known tool has, a package a typo from a popular one; and what its install scripts did in their microVM when its layer was built, where that went beyond installing (probes/src/judge/install.rs: credential files opened, files written outside the package, the network tried, programs a build does not need). No call was needed; every cell lists, so these are shown whatever the profiles.")),
        Block::List {
            ordered: false,
            items,
        },
    ]
}

/// A server's tools' roles over all its cells: a role any cell observed
/// is observed (its first showing kept), a declared one only where no
/// cell observed it.
pub fn roles_of(meta: &Meta, records: &Records, server: &str) -> Vec<ToolRoles> {
    let mut by_tool: BTreeMap<String, ToolRoles> = BTreeMap::new();
    for r in meta
        .profiles
        .iter()
        .filter_map(|p| records.get(&(server.to_string(), p.clone())))
    {
        for t in &r.roles {
            let entry = by_tool.entry(t.tool.clone()).or_insert_with(|| ToolRoles {
                tool: t.tool.clone(),
                ..ToolRoles::default()
            });
            for (role, seen) in &t.observed {
                entry.observed.entry(*role).or_insert_with(|| seen.clone());
            }
            for role in &t.declared {
                if !entry.declared.contains(role) {
                    entry.declared.push(*role);
                }
            }
        }
    }
    let mut out: Vec<ToolRoles> = by_tool.into_values().collect();
    for t in &mut out {
        let observed: Vec<Role> = t.observed.keys().copied().collect();
        t.declared.retain(|r| !observed.contains(r));
    }
    out
}

/// How a role reads in a report.
fn role_name(r: Role) -> &'static str {
    match r {
        Role::ReadsPrivate => "reads private data",
        Role::UntrustedContent => "brings in untrusted content",
        Role::PublicSink => "a public sink",
        Role::Destructive => "destructive",
    }
}

/// `What the tools were seen to do`: per server, each tool's roles from
/// what its calls made the server do in the VM, and apart, what only its
/// annotations claim; nothing when no cell recorded any.
pub fn roles_section(meta: &Meta, records: &Records) -> Vec<Block> {
    let items: Vec<Item> = meta
        .servers
        .keys()
        .filter_map(|s| {
            let roles = roles_of(meta, records, s);
            let sub: Vec<Item> = roles
                .iter()
                .map(|t| {
                    let mut line = Line::default().code(t.tool.as_str()).and(": ");
                    let mut parts: Vec<String> = t
                        .observed
                        .iter()
                        .map(|(r, seen)| {
                            format!("{} (seen in {}: {})", role_name(*r), seen.step, seen.why)
                        })
                        .collect();
                    parts.extend(
                        t.declared
                            .iter()
                            .map(|r| format!("{} (declared only)", role_name(*r))),
                    );
                    line = line.and(parts.join("; "));
                    Item::of(line)
                })
                .collect();
            (!sub.is_empty()).then(|| Item {
                line: Line::default().strong(s.as_str()),
                sub,
            })
        })
        .collect();
    if items.is_empty() {
        return Vec::new();
    }
    vec![
        Block::Heading(2, "What the tools were seen to do".into()),
        Block::Para(Line::text("The roles each tool played in the VM, from what its calls and attacks made the server do (probes/src/judge/roles.rs): reads private data (a canary, a file outside its roots, a canary's token in its answer), brings in untrusted content (reached for the network), a public sink (sent its arguments off the VM, or wrote outside its roots), destructive (deleted or renamed a file, ran a command its arguments chose). A role only the tool's annotations claim is marked declared only. Seen only under a recording profile (the security column).")),
        Block::List {
            ordered: false,
            items,
        },
    ]
}

/// `Flows across the servers`: the chains an injected instruction can
/// follow when one assistant holds every audited server, from the roles
/// their tools were seen to play (`flows.rs`). Without a chain, an
/// audit with the security column says so and which roles it saw (a
/// user asking whether their setup is safe gets an answer); one without
/// it, which saw no call's effects, says nothing.
pub fn flows_section(meta: &Meta, records: &Records) -> Vec<Block> {
    let servers: BTreeMap<String, Vec<ToolRoles>> = meta
        .servers
        .keys()
        .map(|s| (s.clone(), roles_of(meta, records, s)))
        .filter(|(_, r)| !r.is_empty())
        .collect();
    let found = super::flows::flows(&servers);
    if found.is_empty() {
        return no_flow(meta, &servers);
    }
    let items: Vec<Item> = found
        .iter()
        .map(|f| {
            let chain: Vec<String> = f
                .links
                .iter()
                .map(|(r, _)| role_name(*r).to_string())
                .collect();
            Item {
                line: Line::default().strong(f.kind).and(format!(
                    " ({}): {}",
                    f.severity,
                    chain.join(" → ")
                )),
                sub: f
                    .links
                    .iter()
                    .map(|(role, players)| {
                        let shown: Vec<String> = players
                            .iter()
                            .take(8)
                            .map(|p| match &p.step {
                                Some(step) => format!("{}/{} (seen in {step})", p.server, p.tool),
                                None => format!("{}/{} (declared)", p.server, p.tool),
                            })
                            .collect();
                        let more = players.len().saturating_sub(8);
                        let mut line = format!("{}: {}", role_name(*role), shown.join(", "));
                        if more > 0 {
                            line += &format!(" and {more} more");
                        }
                        Item::of(Line::text(line))
                    })
                    .collect(),
            }
        })
        .collect();
    vec![
        Block::Heading(2, "Flows across the servers".into()),
        Block::Para(Line::text("What an instruction injected into one tool's result (a page, an issue, a file an attacker wrote) can chain when one assistant holds all of these servers, from the roles above: exfiltration (untrusted content → a private read → a public sink) and destruction (untrusted content → a destructive tool). High when every link was seen in the VM, medium when a link is only declared, low when none was seen (audit/flows.rs).")),
        Block::List {
            ordered: false,
            items,
        },
    ]
}

/// The section when no chain was found, for an audit that recorded what
/// the calls did.
fn no_flow(meta: &Meta, servers: &BTreeMap<String, Vec<ToolRoles>>) -> Vec<Block> {
    if !meta.profiles.iter().any(|p| p == super::matrix::SECURITY) {
        return Vec::new();
    }
    let mut played: Vec<Role> = servers
        .values()
        .flatten()
        .flat_map(|t| t.observed.keys().chain(&t.declared).copied())
        .collect();
    played.sort();
    played.dedup();
    let played = match played.is_empty() {
        true => "none".to_string(),
        false => played
            .iter()
            .map(|r| role_name(*r))
            .collect::<Vec<_>>()
            .join(", "),
    };
    vec![
        Block::Heading(2, "Flows across the servers".into()),
        Block::Para(Line::text(format!(
            "No chain found. An exfiltration needs a tool that brings in untrusted content, one that reads private data and a public sink; a destruction, untrusted content and a destructive tool. Of these roles, the tools of these {} servers were seen or declared playing: {played}. Only what the calls were seen to do counts: a role no call showed can still be there.",
            meta.servers.len()
        ))),
    ]
}

/// One SARIF 2.1.0 log of every server's findings, a run per server
/// attacked or with findings in what it declares.
pub fn sarif(meta: &Meta, records: &Records) -> Value {
    probes::report::sarif::log_of(runs(meta, records).collect())
}

/// [`sarif`] written as it is made, one server's run in memory at a
/// time (an audit of 10,000 servers has a log of tens of megabytes).
pub fn write_sarif(
    w: &mut dyn std::io::Write,
    meta: &Meta,
    records: &Records,
) -> std::io::Result<()> {
    let schema = serde_json::to_string(probes::report::sarif::SCHEMA)?;
    write!(
        w,
        "{{\"$schema\": {schema}, \"version\": \"2.1.0\", \"runs\": ["
    )?;
    for (i, run) in runs(meta, records).enumerate() {
        if i > 0 {
            w.write_all(b",\n")?;
        }
        serde_json::to_writer_pretty(&mut *w, &run)?;
    }
    w.write_all(b"]}\n")
}

/// Each server's findings as a SARIF run, in the audit's order.
fn runs<'a>(meta: &'a Meta, records: &'a Records) -> impl Iterator<Item = Value> + 'a {
    let across = across(meta, records);
    meta.servers.iter().filter_map(move |(s, sm)| {
        let declared = declared_of(meta, records, s, &across);
        let attacked = record_of(records, s).and_then(|r| r.security.as_ref());
        if attacked.is_none() && declared.is_empty() {
            return None;
        }
        let mut findings: Vec<Finding> = declared;
        findings.extend(
            attacked
                .iter()
                .flat_map(|sec: &&Security| sec.findings.iter().cloned()),
        );
        // Located at the server's catalogue entry.
        let artifact = match meta.origins.get(s) {
            Some(o) => probes::report::sarif::Artifact {
                path: o.file.clone(),
                line: Some(o.line),
            },
            None => probes::report::sarif::Artifact {
                path: meta.catalogue.clone(),
                line: None,
            },
        };
        let mut run = probes::report::sarif::run(
            &findings,
            s,
            Some(&sm.package),
            Some(&sm.version),
            &artifact,
        );
        probes::report::sarif::with_roles(&mut run, &roles_of(meta, records, s));
        Some(run)
    })
}
