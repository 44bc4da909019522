//! `audit --check-proposals`: each server's proposed allow-list
//! (profiles/<server>-minimal.toml) held to what the server then did
//! under it, in the `proposed` column.
//!
//! A proposal comes from one run that logged every system call. A path
//! that run did not take (a timer, a retry, a slower start) makes calls
//! it never saw, and a tool that worked there can fail under the list:
//! a gap in the proposal, shown by the calls the list denied. Those calls
//! are added to the proposal written (it says so, and wants checking
//! again); calls denied while every tool still worked are left out, as
//! least privilege wants. A tool lost with no call denied is not the
//! list's doing: the server differs from run to run.

use serde::Serialize;

use super::document::{Block, Item, Line};
use super::matrix::{PROPOSED, SECURITY};
use super::meta::Meta;
use super::record::{Outcome, Record};

type Records = std::collections::BTreeMap<(String, String), Record>;

/// What a server's proposed cell showed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Check {
    /// The cell did not run the server under a list (why).
    NotChecked { why: String },
    /// Every tool that worked in the proposing cell worked; `denied`:
    /// calls the list refused without costing a tool.
    Holds { tools: usize, denied: Vec<String> },
    /// Tools that worked there failed here (or the server broke), with
    /// calls the list denied: the proposal's gap.
    Breaks {
        lost: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        broke: Option<&'static str>,
        denied: Vec<String>,
    },
    /// Tools lost with no call denied: the server varies between runs.
    Varies { lost: Vec<String> },
}

/// One server's check, for `proposals.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checked {
    pub server: String,
    /// The profile whose cell proposed the list.
    pub proposer: String,
    #[serde(flatten)]
    pub check: Check,
}

/// The cell whose logged calls are `server`'s proposal: the first
/// profile's that logged them (as `report::proposal` picks it).
pub fn proposer<'a>(
    meta: &'a Meta,
    records: &'a Records,
    server: &str,
) -> Option<(&'a str, &'a Record)> {
    meta.profiles
        .iter()
        .filter(|p| *p != PROPOSED && *p != SECURITY)
        .find_map(|p| {
            let r = records.get(&(server.to_string(), p.clone()))?;
            r.syscalls_used.is_some().then_some((p.as_str(), r))
        })
}

/// Judges a proposed cell against the cell that proposed its list.
pub fn judge(base: &Record, proposed: &Record) -> Check {
    if proposed.outcome == Outcome::Error && proposed.lifecycle.is_none() {
        return Check::NotChecked {
            why: proposed
                .evidence
                .errors
                .first()
                .cloned()
                .unwrap_or_else(|| "the cell did not run".into()),
        };
    }
    let lost = super::effects::lost(base, proposed);
    let broke = (super::verdict::severe(proposed.outcome) && proposed.outcome != base.outcome)
        .then(|| proposed.outcome.name());
    let denied: Vec<String> = proposed
        .evidence
        .denied
        .iter()
        .map(|d| d.syscall.clone())
        .collect();
    match (lost.is_empty() && broke.is_none(), denied.is_empty()) {
        (true, _) => Check::Holds {
            tools: super::calls::working_tools(base).len(),
            denied,
        },
        (false, false) => Check::Breaks {
            lost,
            broke,
            denied,
        },
        (false, true) => Check::Varies { lost },
    }
}

/// Every server's check, in name order.
pub fn all(meta: &Meta, records: &Records) -> Vec<Checked> {
    meta.servers
        .keys()
        .filter_map(|s| {
            let proposed = records.get(&(s.clone(), PROPOSED.to_string()))?;
            let (proposer, check) = match proposer(meta, records, s) {
                Some((p, base)) => (p.to_string(), judge(base, proposed)),
                None => (
                    String::new(),
                    Check::NotChecked {
                        why: proposed
                            .evidence
                            .errors
                            .first()
                            .cloned()
                            .unwrap_or_else(|| "no cell logged its system calls".into()),
                    },
                ),
            };
            Some(Checked {
                server: s.clone(),
                proposer,
                check,
            })
        })
        .collect()
}

/// The calls to add to `server`'s proposal: those its check was denied
/// where they cost a tool.
pub fn widen(meta: &Meta, records: &Records, server: &str) -> Vec<String> {
    let Some(proposed) = records.get(&(server.to_string(), PROPOSED.to_string())) else {
        return Vec::new();
    };
    match proposer(meta, records, server).map(|(_, base)| judge(base, proposed)) {
        Some(Check::Breaks { denied, .. }) => denied,
        _ => Vec::new(),
    }
}

/// The report's section, when the audit has the proposed column.
pub fn section(meta: &Meta, records: &Records) -> Vec<Block> {
    if !meta.profiles.iter().any(|p| p == PROPOSED) {
        return Vec::new();
    }
    let checks = all(meta, records);
    let count = |f: fn(&Check) -> bool| checks.iter().filter(|c| f(&c.check)).count();
    let mut blocks = vec![
        Block::Heading(2, "Proposed allow-lists, checked".into()),
        Block::Para(
            Line::text(format!(
                "Each server run again held to the allow-list its logging cell proposed ({} of {} servers): {} hold (every tool that worked there worked), {} break a tool with calls the list denied (a gap in the proposal: those calls are added to the ",
                checks.len(),
                meta.servers.len(),
                count(|c| matches!(c, Check::Holds { .. })),
                count(|c| matches!(c, Check::Breaks { .. })),
            ))
            .code("profiles/<server>-minimal.toml")
            .and(format!(
                " written, to be checked again), {} lost a tool with no call denied (the server varies between runs), {} could not be checked.",
                count(|c| matches!(c, Check::Varies { .. })),
                count(|c| matches!(c, Check::NotChecked { .. })),
            )),
        ),
    ];
    let items =
        checks
            .iter()
            .map(|c| {
                let line = Line::default().strong(c.server.as_str()).and(": ");
                Item::of(match &c.check {
                    Check::NotChecked { why } => line.and(format!("not checked: {why}")),
                    Check::Holds { tools, denied } => line.and(format!(
                        "holds: the {tools} tools that worked under {} worked{}",
                        c.proposer,
                        match denied.is_empty() {
                            true => String::new(),
                            false => format!("; denied without a tool lost: {}", denied.join(", ")),
                        }
                    )),
                    Check::Breaks {
                        lost,
                        broke,
                        denied,
                    } => line.and(format!(
                    "breaks{}: {} worked under {} and not here; denied {} (added to the proposal)",
                    broke.map(|o| format!(" the server ({o})")).unwrap_or_default(),
                    match lost.is_empty() {
                        true => "nothing".to_string(),
                        false => lost.join(", "),
                    },
                    c.proposer,
                    denied.join(", ")
                )),
                    Check::Varies { lost } => line.and(format!(
                        "varies: {} worked under {} and not here, with no call denied",
                        lost.join(", "),
                        c.proposer
                    )),
                })
            })
            .collect();
    blocks.push(Block::List {
        ordered: false,
        items,
    });
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpvm_protocol::messages::SyscallCount;

    fn record(profile: &str, ok: &[&str], denied: &[&str]) -> Record {
        let mut r = Record::failed("git", profile, Outcome::Ok, "x".into(), 1.0);
        r.evidence.errors.clear();
        r.lifecycle = Some("initialize".into());
        r.tools_ok = ok.iter().map(|s| s.to_string()).collect();
        r.evidence.denied = denied
            .iter()
            .map(|d| SyscallCount {
                syscall: d.to_string(),
                errno: Some("EPERM".into()),
                count: 2,
            })
            .collect();
        r
    }

    #[test]
    fn a_proposal_breaks_only_where_its_list_denied_a_call_a_lost_tool_needed() {
        let base = record("baseline", &["log", "diff"], &[]);
        assert_eq!(
            judge(&base, &record(PROPOSED, &["log", "diff"], &[])),
            Check::Holds {
                tools: 2,
                denied: vec![]
            }
        );
        // A call refused while every tool still worked: least privilege
        // keeps it out.
        assert_eq!(
            judge(&base, &record(PROPOSED, &["log", "diff"], &["statx"])),
            Check::Holds {
                tools: 2,
                denied: vec!["statx".into()]
            }
        );
        assert_eq!(
            judge(&base, &record(PROPOSED, &["log"], &["pipe2"])),
            Check::Breaks {
                lost: vec!["diff".into()],
                broke: None,
                denied: vec!["pipe2".into()]
            }
        );
        // Lost with nothing denied: not the list's doing.
        assert_eq!(
            judge(&base, &record(PROPOSED, &["log"], &[])),
            Check::Varies {
                lost: vec!["diff".into()]
            }
        );
        let mut died = record(PROPOSED, &[], &["clone3"]);
        died.outcome = Outcome::Crash;
        assert!(matches!(
            judge(&base, &died),
            Check::Breaks {
                broke: Some("crash"),
                ..
            }
        ));
        let unrun = Record::failed(
            "git",
            PROPOSED,
            Outcome::Error,
            "no allow-list to check: the baseline cell recorded no system calls".into(),
            0.0,
        );
        assert!(
            matches!(judge(&base, &unrun), Check::NotChecked { why } if why.contains("no allow-list"))
        );
    }

    #[test]
    fn the_section_counts_each_kind_and_only_a_break_widens_the_proposal() {
        let mut meta = crate::audit::report::tests::meta();
        meta.profiles = vec!["baseline".into(), PROPOSED.into()];
        let server = meta.servers.keys().next().unwrap().clone();
        let mut records = Records::new();
        let mut base = record("baseline", &["a", "b"], &[]);
        base.server = server.clone();
        base.syscalls_used = Some(vec![]);
        let mut proposed = record(PROPOSED, &["a"], &["pipe2"]);
        proposed.server = server.clone();
        records.insert((server.clone(), "baseline".into()), base);
        records.insert((server.clone(), PROPOSED.into()), proposed);
        let md = super::super::render::markdown(&super::super::document::Document {
            title: "t".into(),
            blocks: section(&meta, &records),
        });
        assert!(md.contains("0 hold"), "{md}");
        assert!(md.contains("1 break a tool"), "{md}");
        assert!(
            md.contains("breaks: b worked under baseline and not here; denied pipe2"),
            "{md}"
        );
        assert_eq!(widen(&meta, &records, &server), ["pipe2"]);
        let json = serde_json::to_value(all(&meta, &records)).unwrap();
        assert_eq!(json[0]["verdict"], "breaks");
        assert_eq!(json[0]["proposer"], "baseline");
        // No proposed column: no section.
        meta.profiles.pop();
        assert!(section(&meta, &records).is_empty());
    }
}
