//! What each profile did to each server against its `baseline` cell, as
//! data (`effects.json`): what a server needs is read from what it lost
//! when a profile took something away (benches/lib/needs-table.py renders
//! the corpus's table from it, docs/withholding.md).
//!
//! Beside the report's judgement (`verdict::judge`, on the errors' words)
//! each cell says which tools that worked at baseline did not work under
//! the profile, and what the profile denied: a tool lost is the plainer
//! evidence, since a message with a time or an id in it reads as a new
//! failure in every run.

use serde::Serialize;

use super::calls::working_tools;
use super::matrix::SECURITY;
use super::meta::Meta;
use super::record::Record;
use super::verdict::{self, ProfileEffect, BASELINE};

type Records = std::collections::BTreeMap<(String, String), Record>;

/// One server under one profile, against its baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellEffect {
    pub server: String,
    pub profile: String,
    pub outcome: &'static str,
    /// `same`, `new_failures`, `newly_broken`, `slower_start`, or
    /// `unjudged` (this cell or the baseline did not run).
    pub effect: &'static str,
    /// Tools that worked at baseline and not here (none for a cell that
    /// did not run: `unjudged`).
    pub lost: Vec<String>,
    /// Of the tools that worked at baseline, how many worked here.
    pub kept: usize,
    /// System calls the profile denied (name, errno, count).
    pub denied: Vec<String>,
    /// The errors the baseline did not have.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub new_errors: Vec<String>,
}

fn name(e: &ProfileEffect) -> &'static str {
    match e {
        ProfileEffect::Baseline => "baseline",
        ProfileEffect::Unjudged => "unjudged",
        ProfileEffect::Same => "same",
        ProfileEffect::NewFailures(_) => "new_failures",
        ProfileEffect::NewlyBroken => "newly_broken",
        ProfileEffect::SlowerStart(_) => "slower_start",
    }
}

/// The tools shown working in `base` and not in `r`
/// (`calls::working_tools`).
pub fn lost(base: &Record, r: &Record) -> Vec<String> {
    let now = working_tools(r);
    working_tools(base)
        .into_iter()
        .filter(|t| !now.contains(t))
        .collect()
}

fn effect(base: &Record, r: &Record) -> CellEffect {
    let e = verdict::judge(Some(base), r);
    // A cell that did not run lost nothing: it showed nothing.
    let lost = match e {
        ProfileEffect::Unjudged => Vec::new(),
        _ => lost(base, r),
    };
    CellEffect {
        server: r.server.clone(),
        profile: r.profile.clone(),
        outcome: r.outcome.name(),
        effect: name(&e),
        kept: {
            let now = working_tools(r);
            working_tools(base)
                .iter()
                .filter(|t| now.contains(t))
                .count()
        },
        lost,
        denied: r
            .evidence
            .denied
            .iter()
            .map(|d| match &d.errno {
                Some(errno) => format!("{} {errno} ×{}", d.syscall, d.count),
                None => format!("{} ×{}", d.syscall, d.count),
            })
            .collect(),
        new_errors: match e {
            ProfileEffect::NewFailures(new) => new,
            _ => Vec::new(),
        },
    }
}

/// Every cell with a baseline cell of its server to be judged against
/// (the security column attacks rather than withholds: not one), in
/// the order of the audit's servers and profiles. Empty without a
/// `baseline` column.
pub fn all(meta: &Meta, records: &Records) -> Vec<CellEffect> {
    let mut out = Vec::new();
    for s in meta.servers.keys() {
        let Some(base) = records.get(&(s.clone(), BASELINE.to_string())) else {
            continue;
        };
        for p in meta
            .profiles
            .iter()
            .filter(|p| ![BASELINE, SECURITY].contains(&p.as_str()))
        {
            // The proposed column is one more profile here; its own
            // judgement, against the cell that proposed, is proposals.rs's.
            if let Some(r) = records.get(&(s.clone(), p.clone())) {
                out.push(effect(base, r));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Outcome;
    use mcpvm_protocol::messages::SyscallCount;

    #[test]
    fn each_cell_says_the_tools_it_lost_and_what_was_denied() {
        let mut meta = crate::audit::report::tests::meta();
        meta.profiles = vec![BASELINE.into(), "deny-exec".into(), SECURITY.into()];
        let s = meta.servers.keys().next().unwrap().clone();
        let rec = |p: &str, ok: &[&str], errors: &[&str]| {
            let mut r = Record::failed(&s, p, Outcome::Degraded, String::new(), 1.0);
            r.tools_ok = ok.iter().map(|t| t.to_string()).collect();
            r.evidence.errors = errors.iter().map(|e| e.to_string()).collect();
            r
        };
        let mut records = Records::new();
        records.insert(
            (s.clone(), BASELINE.into()),
            rec(BASELINE, &["a", "b"], &["tools/call:c: tool_error: no"]),
        );
        let mut exec = rec(
            "deny-exec",
            &["a"],
            &[
                "tools/call:c: tool_error: no",
                "tools/call:b: tool_error: EPERM",
            ],
        );
        exec.evidence.denied = vec![SyscallCount {
            syscall: "execve".into(),
            errno: Some("EPERM".into()),
            count: 3,
        }];
        records.insert((s.clone(), "deny-exec".into()), exec);
        records.insert((s.clone(), SECURITY.into()), rec(SECURITY, &[], &[]));
        let all = all(&meta, &records);
        assert_eq!(all.len(), 1, "neither the baseline nor the security column");
        let e = &all[0];
        assert_eq!((e.effect, e.kept), ("new_failures", 1));
        assert_eq!(e.lost, ["b"]);
        assert_eq!(e.denied, ["execve EPERM ×3"]);
        assert_eq!(e.new_errors, ["tools/call:b: tool_error: EPERM"]);
        // A cell the audit could not run lost nothing and kept nothing:
        // it showed nothing (the proposed column with no list to check).
        let unrun = Record::failed(&s, "deny-exec", Outcome::Error, "no list".into(), 0.0);
        records.insert((s.clone(), "deny-exec".into()), unrun);
        let e = &super::all(&meta, &records)[0];
        assert_eq!((e.effect, e.kept, e.lost.len()), ("unjudged", 0, 0));
        // No baseline cell: nothing to judge against.
        records.remove(&(s.clone(), BASELINE.into()));
        assert!(super::all(&meta, &records).is_empty());
    }
}
