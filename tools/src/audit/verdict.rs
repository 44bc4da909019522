//! What a profile did to a server: each cell judged against the same
//! server's `baseline` cell of the same audit, so that a failure the
//! server has anyway (our generated arguments were not what a tool wanted,
//! a tool needs a network) is shown as the baseline's, not blamed on the
//! profile.
//!
//! Rules, in order: the baseline cell is its own outcome; without a
//! baseline cell, or where either cell did not run (outcome `error`: the
//! probe or the audit could not run it, which shows nothing the server
//! did), a cell is unjudged (its raw outcome stands); a cell that
//! ends broken, timed out, crashed or OOM-killed where the baseline did
//! not end the same way was newly broken; a cell with an error the
//! baseline did not have (a step that failed, or the same step failing
//! with other words) has new failures; a cell that otherwise behaved as
//! the baseline but whose repeated runs all started later than every
//! baseline run (`--repeat`, [`start_change`]) has a slower start;
//! anything else is the same as the baseline.

use super::record::{Outcome, Record};

/// The profile every other profile is judged against.
pub const BASELINE: &str = "baseline";

#[derive(Debug, Clone, PartialEq)]
pub enum ProfileEffect {
    /// The baseline cell itself.
    Baseline,
    /// No baseline cell to compare with, or one of the two did not run.
    Unjudged,
    /// Nothing failed that did not fail in the baseline.
    Same,
    /// Errors the baseline did not have, one per failing step.
    NewFailures(Vec<String>),
    /// Broken, timed out, crashed or OOM-killed, where the baseline was not.
    NewlyBroken,
    /// Nothing new failed, but the server answered later than in every
    /// baseline run, beyond noise.
    SlowerStart(StartChange),
}

/// The first responses (ms) of a cell's runs: min, median, max.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub runs: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n % 2 {
            1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Spread {
            runs: n,
            min: v[0],
            median,
            max: v[n - 1],
        })
    }

    /// `9105 ms (8320–11709, 5 runs)`, or the one value.
    pub fn describe(&self) -> String {
        match self.runs {
            1 => format!("{:.0} ms", self.median),
            n => format!(
                "{:.0} ms ({:.0}–{:.0}, {n} runs)",
                self.median, self.min, self.max
            ),
        }
    }
}

/// Every first response a cell's runs measured: each repeated run's, or
/// the one run's.
pub fn first_responses(r: &Record) -> Vec<f64> {
    match r.samples.is_empty() {
        true => r.timings.handshake_ms.into_iter().collect(),
        false => r.samples.iter().filter_map(|s| s.handshake_ms).collect(),
    }
}

/// A change in first response beyond noise: the profile's runs and the
/// baseline's do not overlap at all, by at least [`MIN_CHANGE`] of the
/// baseline's median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartChange {
    /// Cell median / baseline median.
    pub ratio: f64,
    pub baseline: Spread,
    pub cell: Spread,
    /// How often ranges this far apart would come from runs that differ
    /// only by chance: 1 / C(n + m, n).
    pub chance: f64,
}

/// Smaller changes are not reported, however cleanly the runs separate.
pub const MIN_CHANGE: f64 = 0.10;
/// The most [`StartChange::chance`] may be: with five runs on each side
/// (1/252), a ten-profile audit of eight servers expects fewer than one
/// cell judged slower by chance; with three (1/20) it would expect four.
pub const MAX_CHANCE: f64 = 0.01;

/// How the profile changed the server's first response, when repeated
/// runs show it: `None` when they do not (too few runs, overlapping
/// ranges, or a change under 10 %). Ranks, not means: one stalled run in
/// the testbed must not make a profile look slow.
pub fn start_change(baseline: &Record, cell: &Record) -> Option<StartChange> {
    let (b, c) = (first_responses(baseline), first_responses(cell));
    let (bs, cs) = (Spread::of(&b)?, Spread::of(&c)?);
    let chance = 1.0 / binomial(bs.runs + cs.runs, cs.runs);
    let apart = cs.min > bs.max || cs.max < bs.min;
    let ratio = cs.median / bs.median;
    (apart && chance <= MAX_CHANCE && (ratio - 1.0).abs() >= MIN_CHANGE).then_some(StartChange {
        ratio,
        baseline: bs,
        cell: cs,
        chance,
    })
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// An outcome that is itself a break: against the baseline's, the cell
/// is newly broken.
pub(super) fn severe(o: Outcome) -> bool {
    matches!(
        o,
        Outcome::Broken | Outcome::Timeout | Outcome::Crash | Outcome::Oom
    )
}

/// Judges `cell` against `baseline` (the same server's baseline cell).
pub fn judge(baseline: Option<&Record>, cell: &Record) -> ProfileEffect {
    if cell.profile == BASELINE {
        return ProfileEffect::Baseline;
    }
    let Some(base) = baseline else {
        return ProfileEffect::Unjudged;
    };
    if cell.outcome == Outcome::Error || base.outcome == Outcome::Error {
        return ProfileEffect::Unjudged;
    }
    // A server that never answered its handshake at baseline (broken,
    // hung or killed before it) is not broken anew by a profile, however
    // else its cell then fails: pandacss broken at server/discover, its
    // tiny-mem cell a timeout, was counted as broken by tiny-mem.
    if severe(base.outcome) && base.lifecycle.is_none() {
        return ProfileEffect::Same;
    }
    if severe(cell.outcome) && cell.outcome != base.outcome {
        return ProfileEffect::NewlyBroken;
    }
    let new: Vec<String> = cell
        .evidence
        .errors
        .iter()
        .filter(|e| !base.evidence.errors.contains(e))
        .cloned()
        .collect();
    if !new.is_empty() {
        return ProfileEffect::NewFailures(new);
    }
    match start_change(base, cell) {
        Some(change) if change.ratio > 1.0 => ProfileEffect::SlowerStart(change),
        _ => ProfileEffect::Same,
    }
}

impl ProfileEffect {
    /// What the profile broke (as opposed to what the server has anyway;
    /// a slower start is the profile's too, but breaks nothing).
    pub fn profile_caused(&self) -> bool {
        matches!(
            self,
            ProfileEffect::NewFailures(_) | ProfileEffect::NewlyBroken
        )
    }

    /// The matrix symbol: the outcome's own where there is nothing to
    /// compare with.
    pub fn symbol(&self, outcome: Outcome) -> &'static str {
        match self {
            ProfileEffect::Baseline | ProfileEffect::Unjudged => outcome.symbol(),
            ProfileEffect::Same => "=",
            ProfileEffect::NewFailures(_) => "◐",
            ProfileEffect::NewlyBroken => "✗",
            ProfileEffect::SlowerStart(_) => "◷",
        }
    }

    pub fn name(&self, outcome: Outcome) -> String {
        match self {
            ProfileEffect::Baseline | ProfileEffect::Unjudged => outcome.name().to_string(),
            ProfileEffect::Same => format!("as baseline ({})", outcome.name()),
            ProfileEffect::NewFailures(new) => format!(
                "{}, {} new failure{}",
                outcome.name(),
                new.len(),
                if new.len() == 1 { "" } else { "s" }
            ),
            ProfileEffect::NewlyBroken => format!("newly broken ({})", outcome.name()),
            ProfileEffect::SlowerStart(c) => format!(
                "as baseline ({}), slower start: {:.2}× the baseline's first response",
                outcome.name(),
                c.ratio
            ),
        }
    }
}

/// Why a server's baseline itself fails (None when it does not).
pub fn baseline_failure(baseline: &Record) -> Option<String> {
    if baseline.outcome == Outcome::Ok {
        return None;
    }
    let why = baseline
        .evidence
        .errors
        .first()
        .cloned()
        .or(baseline.failed_step.clone())
        .unwrap_or_default();
    Some(format!("{}: {why}", baseline.outcome.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{Record, Sample};

    fn rec(profile: &str, outcome: Outcome, errors: &[&str]) -> Record {
        let mut r = Record::failed("s", profile, outcome, String::new(), 1.0);
        r.evidence.errors = errors.iter().map(|e| e.to_string()).collect();
        r
    }

    #[test]
    fn a_failure_the_baseline_also_had_is_not_the_profiles() {
        let base = rec(
            BASELINE,
            Outcome::Degraded,
            &["tools/call:lint: tool_error: No files matching 'mcpvm-probe'"],
        );
        let cell = rec(
            "deny-exec",
            Outcome::Degraded,
            &["tools/call:lint: tool_error: No files matching 'mcpvm-probe'"],
        );
        assert_eq!(judge(Some(&base), &cell), ProfileEffect::Same);
        assert!(!judge(Some(&base), &cell).profile_caused());
        assert_eq!(judge(Some(&base), &base), ProfileEffect::Baseline);
        assert!(baseline_failure(&base)
            .unwrap()
            .starts_with("degraded: tools/call:lint"));
    }

    #[test]
    fn a_server_that_never_started_at_baseline_is_not_broken_anew() {
        let base = rec(BASELINE, Outcome::Broken, &["server/discover: closed"]);
        let cell = rec("tiny-mem", Outcome::Timeout, &["server/discover: timeout"]);
        assert_eq!(judge(Some(&base), &cell), ProfileEffect::Same);
        // One that started and then broke still can be.
        let mut started = base.clone();
        started.lifecycle = Some("initialize".into());
        assert_eq!(judge(Some(&started), &cell), ProfileEffect::NewlyBroken);
    }

    #[test]
    fn a_new_failure_or_new_words_are_the_profiles() {
        let base = rec(BASELINE, Outcome::Ok, &[]);
        let cell = rec(
            "no-tmp",
            Outcome::Degraded,
            &["tools/call:save: tool_error: EROFS"],
        );
        assert_eq!(
            judge(Some(&base), &cell),
            ProfileEffect::NewFailures(vec!["tools/call:save: tool_error: EROFS".into()])
        );
        let base = rec(
            BASELINE,
            Outcome::Degraded,
            &["tools/call:x: tool_error: not found"],
        );
        let cell = rec(
            "deny-exec",
            Outcome::Degraded,
            &["tools/call:x: tool_error: Operation not permitted"],
        );
        assert!(judge(Some(&base), &cell).profile_caused());
    }

    fn timed(profile: &str, firsts: &[f64]) -> Record {
        let mut r = rec(profile, Outcome::Ok, &[]);
        r.timings.handshake_ms = firsts.first().copied();
        r.samples = firsts
            .iter()
            .map(|&t| Sample {
                outcome: Outcome::Ok,
                boot_ms: None,
                handshake_ms: Some(t),
            })
            .collect();
        r
    }

    #[test]
    fn a_slower_start_needs_runs_that_do_not_overlap() {
        let base = timed(BASELINE, &[9100.0, 8300.0, 11700.0, 9000.0, 9500.0]);
        // Every run later than every baseline run, 1.4x at the medians.
        let slow = timed("tiny-mem", &[12800.0, 13100.0, 12900.0, 14000.0, 13000.0]);
        let ProfileEffect::SlowerStart(c) = judge(Some(&base), &slow) else {
            panic!("{:?}", judge(Some(&base), &slow));
        };
        assert!((c.ratio - 13000.0 / 9100.0).abs() < 1e-9);
        assert_eq!(
            (c.baseline.runs, c.cell.min, c.cell.max),
            (5, 12800.0, 14000.0)
        );
        assert!((c.chance - 1.0 / 252.0).abs() < 1e-12);
        assert!(!judge(Some(&base), &slow).profile_caused());
        // One run inside the baseline's range: noise.
        let mixed = timed("tiny-mem", &[12800.0, 11000.0, 12900.0, 14000.0, 13000.0]);
        assert_eq!(judge(Some(&base), &mixed), ProfileEffect::Same);
        // Three runs each separate by chance one time in 20: not judged.
        let base3 = timed(BASELINE, &[9100.0, 8300.0, 9500.0]);
        let slow3 = timed("tiny-mem", &[12800.0, 13100.0, 12900.0]);
        assert_eq!(judge(Some(&base3), &slow3), ProfileEffect::Same);
        // Apart, but by under 10%: not reported.
        let close = timed("tiny-mem", &[11800.0, 11900.0, 12000.0, 11750.0, 11850.0]);
        let tight = timed(BASELINE, &[11000.0, 11100.0, 11200.0, 11050.0, 11150.0]);
        assert_eq!(judge(Some(&tight), &close), ProfileEffect::Same);
        // Faster is not a harm the profile did.
        assert_eq!(
            judge(
                Some(&slow),
                &timed("x", &[9100.0, 8300.0, 8700.0, 9000.0, 9500.0])
            ),
            ProfileEffect::Same
        );
        assert!(start_change(&slow, &base).is_some_and(|c| c.ratio < 1.0));
        // A new failure outranks a slower start.
        let mut failing = slow.clone();
        failing.evidence.errors = vec!["tools/call:x: tool_error: EPERM".into()];
        assert!(matches!(
            judge(Some(&base), &failing),
            ProfileEffect::NewFailures(_)
        ));
    }

    #[test]
    fn spreads_of_odd_and_even_runs_and_one_run() {
        let s = Spread::of(&[4.0, 1.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.runs, s.min, s.median, s.max), (4, 1.0, 3.0, 4.0));
        assert_eq!(s.describe(), "3 ms (1–4, 4 runs)");
        assert_eq!(Spread::of(&[7.0]).unwrap().describe(), "7 ms");
        assert_eq!(Spread::of(&[]), None);
        // A single run: never judged, however far apart.
        let base = timed(BASELINE, &[1000.0]);
        assert_eq!(start_change(&base, &timed("x", &[5000.0])), None);
    }

    #[test]
    fn newly_broken_and_unjudged() {
        let base = rec(BASELINE, Outcome::Ok, &[]);
        let cell = rec("deny-exec", Outcome::Broken, &["initialize: closed: "]);
        assert_eq!(judge(Some(&base), &cell), ProfileEffect::NewlyBroken);
        assert_eq!(judge(None, &cell), ProfileEffect::Unjudged);
        // A cell the audit could not run (the check of a proposal with
        // no list to check) broke nothing; nor is a cell judged against a
        // baseline that did not run.
        let unrun = Record::failed("s", "proposed", Outcome::Error, "no allow-list".into(), 0.0);
        assert_eq!(judge(Some(&base), &unrun), ProfileEffect::Unjudged);
        let lost = Record::failed("s", BASELINE, Outcome::Error, "x".into(), 0.0);
        assert_eq!(judge(Some(&lost), &cell), ProfileEffect::Unjudged);
        // A server broken in the baseline too: the profile broke nothing.
        let base = rec(BASELINE, Outcome::Broken, &["initialize: closed: "]);
        assert_eq!(judge(Some(&base), &cell), ProfileEffect::Same);
        assert!(baseline_failure(&base).is_some());
    }
}
