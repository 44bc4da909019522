//! What a server's earlier cells showed that its later cells need not
//! find out again. A server's cells run in order on one worker
//! (`matrix::cells` deals whole servers to shards), so each cell starts
//! from what the ones before it learnt, from this run or from the
//! journal of a resumed one.
//!
//! The lifecycle: a server that answered `initialize` in one cell is not
//! asked `server/discover` first in the next. A server that stays silent
//! on an unknown method makes the probe wait out the whole discover
//! timeout and start it again (sqlite: 300 s a cell, docs/ecosystem.md);
//! the lifecycle a server speaks does not depend on what a profile
//! withholds, and a server that no longer answers it under a profile
//! fails there as it would have after the discover.
//!
//! The system calls a logging cell saw: the allow-list the proposed
//! column (`audit --check-proposals`) holds the server to.

use std::collections::BTreeMap;

use probes::options::LifecycleChoice;

use super::matrix::{PROPOSED, SECURITY};
use super::record::{Outcome, Record};
use super::verdict::BASELINE;

/// The protocol version that brought the stateless lifecycle
/// (`server/discover`), named after the day it was published.
const STATELESS_SINCE: &str = "2026-07-28";

/// What a server's recorded cells showed, for its next cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Carried {
    /// The lifecycle it answered, and in which cell.
    pub lifecycle: Option<(LifecycleChoice, String)>,
    /// By profile, the system calls a cell that logged them saw (as the
    /// proposal names them: `report::allow_list`).
    pub syscalls: BTreeMap<String, Vec<String>>,
    /// The tools shown working in its baseline cell
    /// (`calls::working_tools`). The cells judged
    /// against it call only these (`matrix::cells` runs it first): a
    /// profile can take away only what worked without it, and a tool
    /// that failed there (most often on the network every audit cell
    /// denies) would wait out its timeout again in every cell.
    pub worked: Option<Vec<String>>,
    /// Why the server did not start in its baseline cell (it broke or
    /// crashed before answering a handshake), when it did not: the
    /// cells judged against that baseline are not run. Nothing worked
    /// there for a profile to take away, and each would show the same
    /// failure again at the cost of a whole cell (pandacss and qdrant
    /// took 45–640 s a cell in the sweep, every one `broken`).
    pub unstarted: Option<String>,
    /// The arguments that reached each tool that worked in the baseline
    /// cell, in the order it was called there: the cells judged against
    /// it make these same calls, once each (`probe --no-retries`), so a
    /// profile takes a tool away when the call that worked without it
    /// fails, never because a search for other arguments ended
    /// elsewhere (filesystem's `create_directory` under ro-root failed at
    /// baseline's path, and a retry's path gave another error). A tool
    /// whose arguments held a value the server returned (an id another
    /// run may not have) or were not kept is generated again instead.
    pub replay: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
}

/// Bytes of replayed arguments a cell's request carries (its file is
/// bounded at 1 MiB): past them a tool's call is generated again.
const REPLAY_BYTES: usize = 256 << 10;

impl Carried {
    /// From the server's cells already in the journal (a resumed audit).
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a Record>) -> Carried {
        let mut c = Carried::default();
        for r in records {
            c.learn(r);
        }
        c
    }

    /// What a cell's record adds: the first handshake that was answered
    /// decides.
    pub fn learn(&mut self, r: &Record) {
        // A baseline the probe could not run showed nothing either way.
        if r.profile == BASELINE && r.outcome != Outcome::Error {
            self.worked = Some(super::calls::working_tools(r));
            self.replay = replay(r);
            // A timeout or an OOM may be the machine's (emulation, a
            // slow start): only a failure the server gave counts.
            let gave_up = matches!(r.outcome, Outcome::Broken | Outcome::Crash);
            self.unstarted = (gave_up && r.lifecycle.is_none()).then(|| {
                let step = r.failed_step.as_deref().unwrap_or("the start");
                match r.evidence.errors.first() {
                    Some(e) => format!("{} at {step}: {e}", r.outcome.name()),
                    None => format!("{} at {step}", r.outcome.name()),
                }
            });
        }
        if r.profile != PROPOSED {
            if let Some(calls) = super::report::allow_list(r) {
                self.syscalls.insert(r.profile.clone(), calls);
            }
        }
        if self.lifecycle.is_some() {
            return;
        }
        let choice = match r.lifecycle.as_deref() {
            Some("initialize") => LifecycleChoice::Initialize,
            Some("stateless") => LifecycleChoice::Stateless,
            _ => return,
        };
        self.lifecycle = Some((choice, r.profile.clone()));
    }

    /// What a server's run as released starts from: a tree frozen before
    /// the protocol that brought `server/discover` was published cannot
    /// speak it, so its probe says `initialize` at once. An old SDK that
    /// stays silent on a method it does not know would otherwise make it
    /// wait out the whole discover timeout (300 s under an audit: eight
    /// of the registry sample's runs as released paid it).
    pub fn released_on(day: Option<&str>) -> Carried {
        let lifecycle = day.filter(|d| *d < STATELESS_SINCE).map(|d| {
            (
                LifecycleChoice::Initialize,
                format!("as released on {d}, before {STATELESS_SINCE}"),
            )
        });
        Carried {
            lifecycle,
            ..Carried::default()
        }
    }

    /// Why a cell of `profile` is not run, when it is not: the server
    /// did not start at baseline. Its baseline and security cells still
    /// run (the attacks start it afresh, and what it does at start is
    /// evidence there).
    pub fn skips(&self, profile: &str) -> Option<String> {
        let why = self.unstarted.as_ref()?;
        (profile != BASELINE && profile != SECURITY).then(|| {
            format!(
                "not run: the server did not start in its baseline cell ({why}), so no tool worked there for {profile} to take away"
            )
        })
    }

    /// The lifecycle the next cell's probe speaks: `auto` (discover,
    /// then initialize) until a cell has shown which.
    pub fn lifecycle(&self) -> LifecycleChoice {
        self.lifecycle
            .as_ref()
            .map_or(LifecycleChoice::Auto, |(l, _)| *l)
    }
}

/// The baseline `r`'s calls to repeat: [`Carried::replay`].
fn replay(r: &Record) -> Vec<(String, serde_json::Map<String, serde_json::Value>)> {
    let mut bytes = 0;
    super::calls::working_tools(r)
        .iter()
        .filter(|t| !r.learnt_from_answers.contains(t))
        .filter_map(|t| Some((t.clone(), r.learnt_calls.get(t)?.as_object()?.clone())))
        .take_while(|(_, args)| {
            bytes += serde_json::Value::Object(args.clone()).to_string().len();
            bytes <= REPLAY_BYTES
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Outcome;

    fn record(profile: &str, lifecycle: Option<&str>) -> Record {
        let mut r = Record::failed("s", profile, Outcome::Broken, "x".into(), 1.0);
        r.lifecycle = lifecycle.map(String::from);
        r
    }

    #[test]
    fn the_first_answered_handshake_is_what_later_cells_speak() {
        let mut c = Carried::default();
        assert_eq!(c.lifecycle(), LifecycleChoice::Auto);
        // A cell that never got its handshake answered teaches nothing.
        c.learn(&record("tiny-mem", None));
        assert_eq!(c.lifecycle(), LifecycleChoice::Auto);
        c.learn(&record("deny-net", Some("initialize")));
        assert_eq!(c.lifecycle(), LifecycleChoice::Initialize);
        c.learn(&record("no-tmp", Some("stateless")));
        assert_eq!(
            c.lifecycle,
            Some((LifecycleChoice::Initialize, "deny-net".into()))
        );
        let resumed = Carried::from_records([&record("x", Some("stateless"))]);
        assert_eq!(resumed.lifecycle(), LifecycleChoice::Stateless);
    }

    #[test]
    fn the_tools_that_worked_at_baseline_are_what_later_cells_call() {
        let mut c = Carried::default();
        c.learn(&record("no-tmp", Some("initialize")));
        assert_eq!(c.worked, None, "only the baseline decides");
        let mut base = record("baseline", Some("initialize"));
        base.outcome = Outcome::Degraded;
        base.tools_ok = vec!["read_graph".into()];
        base.tools_failed = vec!["fetch".into()];
        c.learn(&base);
        assert_eq!(c.worked, Some(vec!["read_graph".to_string()]));
        // A baseline the probe itself could not run teaches nothing.
        let mut lost = Carried::default();
        lost.learn(&Record::failed(
            "s",
            "baseline",
            Outcome::Error,
            "x".into(),
            1.0,
        ));
        assert_eq!(lost.worked, None);
        // One that ran and got nothing to work: nothing to call.
        let mut none = Carried::default();
        none.learn(&record("baseline", None));
        assert_eq!(none.worked, Some(vec![]));
    }

    /// The judged cells repeat the baseline's own calls, in its order,
    /// except those whose arguments came from the server's answers or
    /// were not kept.
    #[test]
    fn the_baselines_working_calls_are_what_later_cells_repeat() {
        let args = |v: serde_json::Value| v.as_object().unwrap().clone();
        let mut base = record("baseline", Some("initialize"));
        base.tools_ok = vec!["write".into(), "list".into(), "read".into(), "big".into()];
        base.tools_failed = vec!["fetch".into()];
        for (tool, a) in [
            ("list", serde_json::json!({})),
            ("write", serde_json::json!({"path": "/workspace/new"})),
            ("read", serde_json::json!({"id": "f-81c2"})),
            ("fetch", serde_json::json!({"url": "https://example.com"})),
        ] {
            base.learnt_calls.insert(tool.into(), a);
        }
        base.learnt_from_answers = vec!["read".into()];
        let c = Carried::from_records([&base]);
        assert_eq!(
            c.replay,
            [
                (
                    "write".to_string(),
                    args(serde_json::json!({"path": "/workspace/new"}))
                ),
                ("list".to_string(), args(serde_json::json!({}))),
            ]
        );
        // Only the baseline decides.
        let mut later = base.clone();
        later.profile = "no-tmp".into();
        assert!(Carried::from_records([&later]).replay.is_empty());
    }

    #[test]
    fn a_server_that_did_not_start_at_baseline_has_only_its_attacks_run_after() {
        // Broken before any handshake: nothing later is run but the attacks.
        let mut c = Carried::default();
        let mut base = record("baseline", None);
        base.failed_step = Some("server/discover".into());
        c.learn(&base);
        let why = c.skips("no-tmp").expect("skipped");
        assert!(why.contains("broken at server/discover: x"), "{why}");
        assert!(c.skips(PROPOSED).is_some());
        assert_eq!(c.skips(SECURITY), None);
        assert_eq!(c.skips(BASELINE), None);
        // The same from a resumed journal.
        assert!(Carried::from_records([&base]).skips("tiny-mem").is_some());
        // A baseline that answered its handshake, or timed out or ran out
        // of memory (perhaps the machine's doing), skips nothing.
        for (outcome, lifecycle) in [
            (Outcome::Broken, Some("initialize")),
            (Outcome::Timeout, None),
            (Outcome::Oom, None),
            (Outcome::Error, None),
        ] {
            let mut r = record("baseline", lifecycle);
            r.outcome = outcome;
            assert_eq!(
                Carried::from_records([&r]).skips("no-tmp"),
                None,
                "{outcome:?}"
            );
        }
        // A later cell's failure is its own.
        assert_eq!(
            Carried::from_records([&record("no-tmp", None)]).skips("deny-exec"),
            None
        );
    }

    #[test]
    fn a_tree_frozen_before_the_stateless_protocol_is_asked_to_initialize() {
        let old = Carried::released_on(Some("2025-10-09"));
        assert_eq!(old.lifecycle(), LifecycleChoice::Initialize);
        assert!(old.lifecycle.unwrap().1.contains("2025-10-09"));
        // On the day or after, or with no day known, it may speak either.
        assert_eq!(
            Carried::released_on(Some("2026-07-28")).lifecycle(),
            LifecycleChoice::Auto
        );
        assert_eq!(
            Carried::released_on(Some("2026-11-30")).lifecycle(),
            LifecycleChoice::Auto
        );
        assert_eq!(
            Carried::released_on(None).lifecycle(),
            LifecycleChoice::Auto
        );
    }

    #[test]
    fn a_logging_cell_leaves_its_calls_for_the_proposed_one() {
        use mcpvm_protocol::messages::SyscallCount;
        let calls = |names: &[&str]| {
            names
                .iter()
                .map(|n| SyscallCount {
                    syscall: n.to_string(),
                    errno: None,
                    count: 1,
                })
                .collect()
        };
        let mut logged = record("baseline", Some("initialize"));
        // A name that is no system call never reaches an allow-list.
        logged.syscalls_used = Some(calls(&["read", "openat", "made_up"]));
        let mut proposed = record(PROPOSED, Some("initialize"));
        proposed.syscalls_used = Some(calls(&["read"]));
        let c = Carried::from_records([&proposed, &logged, &record("no-tmp", None)]);
        assert_eq!(c.syscalls.len(), 1);
        assert_eq!(c.syscalls["baseline"], ["read", "openat"]);
    }
}
