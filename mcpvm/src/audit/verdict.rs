//! What a profile did to a server: each cell judged against the same
//! server's `baseline` cell of the same audit, so that a failure the
//! server has anyway (our generated arguments were not what a tool wanted,
//! a tool needs a network) is shown as the baseline's, not blamed on the
//! profile.
//!
//! Rules, in order: the baseline cell is its own outcome; without a
//! baseline cell a cell is unjudged (its raw outcome stands); a cell that
//! ends broken, timed out, crashed or OOM-killed where the baseline did
//! not end the same way was newly broken; a cell with an error the
//! baseline did not have (a step that failed, or the same step failing
//! with other words) has new failures; anything else is the same as the
//! baseline.

use super::record::{Outcome, Record};

/// The profile every other profile is judged against.
pub const BASELINE: &str = "baseline";

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The baseline cell itself.
    Baseline,
    /// No baseline cell to compare with.
    Unjudged,
    /// Nothing failed that did not fail in the baseline.
    Same,
    /// Errors the baseline did not have, one per failing step.
    NewFailures(Vec<String>),
    /// Broken, timed out, crashed or OOM-killed, where the baseline was not.
    NewlyBroken,
}

fn severe(o: Outcome) -> bool {
    matches!(
        o,
        Outcome::Broken | Outcome::Timeout | Outcome::Crash | Outcome::Oom | Outcome::Error
    )
}

/// Judges `cell` against `baseline` (the same server's baseline cell).
pub fn judge(baseline: Option<&Record>, cell: &Record) -> Effect {
    if cell.profile == BASELINE {
        return Effect::Baseline;
    }
    let Some(base) = baseline else {
        return Effect::Unjudged;
    };
    if severe(cell.outcome) && cell.outcome != base.outcome {
        return Effect::NewlyBroken;
    }
    let new: Vec<String> = cell
        .evidence
        .errors
        .iter()
        .filter(|e| !base.evidence.errors.contains(e))
        .cloned()
        .collect();
    if new.is_empty() {
        Effect::Same
    } else {
        Effect::NewFailures(new)
    }
}

impl Effect {
    /// What the profile caused (as opposed to what the server has anyway).
    pub fn profile_caused(&self) -> bool {
        matches!(self, Effect::NewFailures(_) | Effect::NewlyBroken)
    }

    /// The matrix symbol: the outcome's own where there is nothing to
    /// compare with.
    pub fn symbol(&self, outcome: Outcome) -> &'static str {
        match self {
            Effect::Baseline | Effect::Unjudged => outcome.symbol(),
            Effect::Same => "=",
            Effect::NewFailures(_) => "◐",
            Effect::NewlyBroken => "✗",
        }
    }

    pub fn name(&self, outcome: Outcome) -> String {
        match self {
            Effect::Baseline | Effect::Unjudged => outcome.name().to_string(),
            Effect::Same => format!("as baseline ({})", outcome.name()),
            Effect::NewFailures(new) => format!(
                "{}, {} new failure{}",
                outcome.name(),
                new.len(),
                if new.len() == 1 { "" } else { "s" }
            ),
            Effect::NewlyBroken => format!("newly broken ({})", outcome.name()),
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
    use crate::audit::record::Record;

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
        assert_eq!(judge(Some(&base), &cell), Effect::Same);
        assert!(!judge(Some(&base), &cell).profile_caused());
        assert_eq!(judge(Some(&base), &base), Effect::Baseline);
        assert!(baseline_failure(&base)
            .unwrap()
            .starts_with("degraded: tools/call:lint"));
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
            Effect::NewFailures(vec!["tools/call:save: tool_error: EROFS".into()])
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

    #[test]
    fn newly_broken_and_unjudged() {
        let base = rec(BASELINE, Outcome::Ok, &[]);
        let cell = rec("deny-exec", Outcome::Broken, &["initialize: closed: "]);
        assert_eq!(judge(Some(&base), &cell), Effect::NewlyBroken);
        assert_eq!(judge(None, &cell), Effect::Unjudged);
        // A server broken in the baseline too: the profile broke nothing.
        let base = rec(BASELINE, Outcome::Broken, &["initialize: closed: "]);
        assert_eq!(judge(Some(&base), &cell), Effect::Same);
        assert!(baseline_failure(&base).is_some());
    }
}
