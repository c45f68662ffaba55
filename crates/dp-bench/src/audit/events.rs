//! The audit's events: thresholds on the statistics an output is reduced
//! to, fixed before the counted samples are drawn.

/// Tail probabilities of the threshold grid (both tails), while the pilot
/// holds at least [`MIN_PILOT_TAIL`] outputs beyond the threshold.
const TAILS: [f64; 16] = [
    0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 5e-3, 3e-3, 2e-3, 1e-3, 5e-4, 3e-4, 2e-4, 1e-4,
];
const MIN_PILOT_TAIL: f64 = 20.0;

/// Which side of a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// `s ≥ τ`.
    AtLeast,
    /// `s ≤ τ`.
    AtMost,
}

/// A threshold event on one statistic of the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// Index of the statistic (see [`super::Audited::statistics`]).
    pub statistic: usize,
    /// Which side.
    pub tail: Tail,
    /// The threshold τ.
    pub threshold: f64,
}

impl Event {
    /// `s ≥ τ` on statistic `statistic`.
    pub fn at_least(statistic: usize, threshold: f64) -> Self {
        Self {
            statistic,
            tail: Tail::AtLeast,
            threshold,
        }
    }

    /// `s ≤ τ` on statistic `statistic`.
    pub fn at_most(statistic: usize, threshold: f64) -> Self {
        Self {
            statistic,
            tail: Tail::AtMost,
            threshold,
        }
    }

    /// Whether the statistics `s` of an output fall in the event.
    pub fn contains(&self, s: &[f64]) -> bool {
        let v = s[self.statistic];
        match self.tail {
            Tail::AtLeast => v >= self.threshold,
            Tail::AtMost => v <= self.threshold,
        }
    }

    /// E.g. `privacy loss >= 9.990000e-1`.
    pub fn describe(&self, names: &[&str]) -> String {
        let op = match self.tail {
            Tail::AtLeast => ">=",
            Tail::AtMost => "<=",
        };
        let name = names.get(self.statistic).copied().unwrap_or("s");
        format!("{name} {op} {:.6e}", self.threshold)
    }
}

/// `fixed` (events known in advance, e.g. the largest privacy loss),
/// then for each statistic the thresholds at the pooled pilot's
/// quantiles `1 − p` (upper tail) and `p` (lower tail) for the tail
/// probabilities of `TAILS` that the pilot resolves; repeated events
/// (discrete outputs) once. `pilot[k]` holds statistic `k` of every
/// pilot output.
pub fn threshold_events(pilot: Vec<Vec<f64>>, fixed: Vec<Event>) -> Vec<Event> {
    let mut events = Vec::new();
    for event in fixed {
        if !events.contains(&event) {
            events.push(event);
        }
    }
    for (k, mut values) in pilot.into_iter().enumerate() {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        for &p in TAILS.iter().filter(|&&p| p * n as f64 >= MIN_PILOT_TAIL) {
            let i = ((p * n as f64) as usize).min(n - 1);
            for event in [
                Event::at_least(k, values[n - 1 - i]),
                Event::at_most(k, values[i]),
            ] {
                if !events.contains(&event) {
                    events.push(event);
                }
            }
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_pilot_quantiles_without_repeats() {
        let pilot: Vec<f64> = (0..1000).map(f64::from).collect();
        let events = threshold_events(vec![pilot], Vec::new());
        // Tails 0.5 … 0.02 are resolved by 1000 outputs (≥ 20 beyond).
        assert_eq!(events.len(), 2 * 7, "{events:?}");
        assert!(events.contains(&Event::at_least(0, 899.0)));
        assert!(events.contains(&Event::at_most(0, 100.0)));
        assert!(events.contains(&Event::at_least(0, 979.0)));
        // A two-valued pilot gives two events per value at most.
        let two: Vec<f64> = (0..1000).map(|i| f64::from(i % 2)).collect();
        assert!(threshold_events(vec![two], Vec::new()).len() <= 4);
    }

    #[test]
    fn fixed_events_come_first_and_each_statistic_gets_its_own() {
        let a: Vec<f64> = (0..1000).map(f64::from).collect();
        let b: Vec<f64> = (0..1000).map(|i| -f64::from(i)).collect();
        let fixed = vec![Event::at_least(0, 999.0), Event::at_least(0, 999.0)];
        let events = threshold_events(vec![a, b], fixed);
        assert_eq!(events[0], Event::at_least(0, 999.0));
        assert_eq!(events.len(), 1 + 2 * 2 * 7);
        assert!(events.contains(&Event::at_most(1, -899.0)));
        let e = Event::at_most(1, -899.0);
        assert!(e.contains(&[0.0, -900.0]) && !e.contains(&[0.0, -898.0]));
        assert_eq!(e.describe(&["x", "y"]), "y <= -8.990000e2");
    }
}
