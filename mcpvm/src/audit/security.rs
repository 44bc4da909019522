//! The `security` column of an audit (`mcpvm audit --security`): each
//! server's tools attacked under observation (`mcpvm probe --security`),
//! shown as a column of the matrix, a findings section with what proves
//! each finding and the call that reproduces it, and one SARIF log for
//! the whole audit (docs/security-audit.md).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use probes::findings::Finding;
use serde_json::Value;

use super::meta::Meta;
use super::record::{Record, Security};
use super::text::{esc, md};
use super::SECURITY;

type Records = BTreeMap<(String, String), Record>;

fn cell<'a>(records: &'a Records, server: &str) -> Option<&'a Record> {
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
    format!(
        "{} in {} on {} ({}), judged against the roots {}",
        count(s.findings.len(), "finding", "findings"),
        count(s.attacks, "attack", "attacks"),
        count(s.tools.len(), "tool", "tools"),
        s.tools.join(", "),
        s.roots.join(", ")
    )
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

/// `## Security findings`: per server, what was attacked and each finding.
pub fn markdown(meta: &Meta, records: &Records) -> String {
    let mut m = String::from("## Security findings\n\n");
    m += "Each tool's string arguments were given attack payloads, one at a time, and what the server then did in its VM was judged (docs/security-audit.md): a finding is proven by the recorded effects it lists, not guessed from a description.\n\n";
    for s in meta.servers.keys() {
        let Some(r) = cell(records, s) else {
            let _ = writeln!(m, "- **{}**: not run yet", md(s));
            continue;
        };
        let _ = writeln!(m, "- **{}**: {}", md(s), md(&summary(r)));
        for f in r.security.iter().flat_map(|x| &x.findings) {
            let _ = write!(
                m,
                "  - **{}** ({}, {}) in {}",
                md(&f.class),
                md(&f.rule),
                md(&f.severity),
                md(tool(f))
            );
            if let (Some(a), Some(p)) = (&f.argument, &f.payload) {
                let _ = write!(m, ", argument {} ← payload \"{}\"", md(a), md(p));
                if f.attempts > 1 {
                    let _ = write!(m, " and {} more", f.attempts - 1);
                }
            }
            let _ = writeln!(m, ": {}", md(&f.why));
            if let Some(e) = f.evidence.first() {
                let _ = writeln!(m, "    - evidence: {}", md(&e.line()));
            }
            if let Some(cmd) = reproduce(s, f) {
                let _ = writeln!(m, "    - reproduce: {}", md(&cmd));
            }
        }
    }
    m
}

/// The same, for report.html.
pub fn html(meta: &Meta, records: &Records) -> String {
    let mut page = String::from("<h2>Security findings</h2><p>Each tool's string arguments were given attack payloads, one at a time; a finding is proven by what the server then did in its VM.</p>");
    for s in meta.servers.keys() {
        let Some(r) = cell(records, s) else { continue };
        let _ = write!(page, "<h3>{}</h3><p>{}</p>", esc(s), esc(&summary(r)));
        let findings: Vec<&Finding> = r.security.iter().flat_map(|x| &x.findings).collect();
        if findings.is_empty() {
            continue;
        }
        page += "<table class=\"grid\"><tr><th>class</th><th>tool</th><th>argument</th><th>payload</th><th>why</th><th>evidence</th><th>reproduce</th></tr>";
        for f in findings {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td><pre>{}</pre></td><td><code>{}</code></td></tr>",
                esc(&f.class),
                esc(tool(f)),
                esc(f.argument.as_deref().unwrap_or("")),
                esc(f.payload.as_deref().unwrap_or("")),
                esc(&f.why),
                esc(&f.evidence.iter().map(|e| e.line()).collect::<Vec<_>>().join("\n")),
                esc(&reproduce(s, f).unwrap_or_default())
            );
        }
        page += "</table>";
    }
    page
}

/// One SARIF 2.1.0 log of every server's findings, a run per server
/// attacked.
pub fn sarif(meta: &Meta, records: &Records) -> Value {
    let runs = meta
        .servers
        .iter()
        .filter_map(|(s, sm)| {
            let sec: &Security = cell(records, s)?.security.as_ref()?;
            Some(probes::sarif::run(
                &sec.findings,
                s,
                Some(&sm.package),
                Some(&sm.version),
            ))
        })
        .collect();
    probes::sarif::log_of(runs)
}
