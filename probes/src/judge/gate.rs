//! `--fail-on SEVERITY`: the gate a CI pipeline puts on findings. A probe
//! or an audit whose findings reach the severity exits with
//! [`FINDINGS_EXIT`], whatever else it found, so that one number answers
//! the pipeline's question.

use crate::judge::findings::Finding;

/// The exit status of a run with findings at or above `--fail-on`.
pub const FINDINGS_EXIT: u8 = 5;

/// How serious a finding is, in the order a gate compares them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub const NAMES: [&'static str; 4] = ["low", "medium", "high", "critical"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// A finding's severity as written. A word this version does not know
    /// counts as `high`: a gate that lets an unknown severity through
    /// would be no gate.
    pub fn of(finding: &Finding) -> Severity {
        finding.severity.parse().unwrap_or(Severity::High)
    }
}

impl std::str::FromStr for Severity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "low" => Ok(Severity::Low),
            "medium" => Ok(Severity::Medium),
            "high" => Ok(Severity::High),
            "critical" => Ok(Severity::Critical),
            _ => Err(format!(
                "'{s}' is not a severity; give one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How many of `findings` reach `at`.
pub fn reaching<'a>(findings: impl IntoIterator<Item = &'a Finding>, at: Severity) -> usize {
    findings
        .into_iter()
        .filter(|f| Severity::of(f) >= at)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: &str) -> Finding {
        Finding {
            class: "ssrf".into(),
            rule: "connect-to-payload".into(),
            severity: severity.into(),
            step: "attack:fetch".into(),
            call: None,
            argument: None,
            payload: None,
            attempts: 1,
            why: String::new(),
            evidence: Vec::new(),
        }
    }

    #[test]
    fn a_gate_counts_the_findings_at_or_above_its_severity() {
        let found = [finding("low"), finding("high"), finding("critical")];
        assert_eq!(reaching(&found, Severity::Low), 3);
        assert_eq!(reaching(&found, Severity::Medium), 2);
        assert_eq!(reaching(&found, Severity::High), 2);
        assert_eq!(reaching(&found, Severity::Critical), 1);
        assert_eq!(reaching(&[], Severity::Low), 0);
        // An unknown word is not let through.
        assert_eq!(reaching(&[finding("severe")], Severity::High), 1);
        assert_eq!("medium".parse::<Severity>(), Ok(Severity::Medium));
        let e = "urgent".parse::<Severity>().unwrap_err();
        assert!(e.contains("low, medium, high, critical"), "{e}");
        for n in Severity::NAMES {
            assert_eq!(n.parse::<Severity>().unwrap().to_string(), n);
        }
    }
}
