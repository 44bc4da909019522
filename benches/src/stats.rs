//! Summary statistics over repeated runs.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub runs: usize,
    pub min: f64,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
}

/// Nearest-rank percentile (p in 0..=100) of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// None for no samples.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let median = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    Some(Summary {
        runs: s.len(),
        min: s[0],
        median,
        p90: percentile(&s, 90.0),
        max: s[s.len() - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_ten() {
        let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let s = summarize(&v).unwrap();
        assert_eq!((s.runs, s.min, s.max), (10, 1.0, 10.0));
        assert_eq!(s.median, 5.5);
        assert_eq!(s.p90, 9.0);
    }

    #[test]
    fn summary_of_one_and_none() {
        let s = summarize(&[3.0]).unwrap();
        assert_eq!((s.min, s.median, s.p90, s.max), (3.0, 3.0, 3.0, 3.0));
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn odd_median() {
        assert_eq!(summarize(&[5.0, 1.0, 3.0]).unwrap().median, 3.0);
    }
}
