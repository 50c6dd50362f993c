//! `GET /metrics`: Prometheus text exposition, written by hand (a few
//! counters and one histogram need no client library).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency histogram's buckets, in seconds.
pub const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Counters of decisions and errors, and the decision latency histogram.
#[derive(Default)]
pub struct Metrics {
    /// ALLOW, DENY, PAUSE.
    verdicts: [AtomicU64; 3],
    /// Results, rejections and tasks applied.
    applied: AtomicU64,
    /// Retried calls answered from the record.
    replayed: AtomicU64,
    /// Error answers by status.
    errors: Mutex<BTreeMap<u16, u64>>,
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Metrics {
    /// Counts one answered event: its verdict (`None` for results,
    /// rejections and tasks) and the time from request to durable answer.
    pub fn observe(&self, verdict: Option<&str>, replayed: bool, elapsed: Duration) {
        if replayed {
            self.replayed.fetch_add(1, Ordering::Relaxed);
        }
        match verdict {
            Some("ALLOW") => self.verdicts[0].fetch_add(1, Ordering::Relaxed),
            Some("DENY") => self.verdicts[1].fetch_add(1, Ordering::Relaxed),
            Some(_) => self.verdicts[2].fetch_add(1, Ordering::Relaxed),
            None => self.applied.fetch_add(1, Ordering::Relaxed),
        };
        let secs = elapsed.as_secs_f64();
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                self.buckets[i].fetch_add(1, Ordering::Relaxed);
                break;
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Counts one error answer.
    pub fn error(&self, status: u16) {
        if let Ok(mut e) = self.errors.lock() {
            *e.entry(status).or_default() += 1;
        }
    }

    /// Decisions so far, by verdict (ALLOW, DENY, PAUSE).
    pub fn verdicts(&self) -> [u64; 3] {
        [0, 1, 2].map(|i| self.verdicts[i].load(Ordering::Relaxed))
    }

    /// The exposition text; `gauges` are added as they are.
    pub fn render(&self, gauges: &[(&str, &str, f64)]) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP agenra_decisions_total Calls and approvals decided, by verdict.\n# TYPE agenra_decisions_total counter"
        );
        for (i, v) in ["ALLOW", "DENY", "PAUSE"].iter().enumerate() {
            let _ = writeln!(
                out,
                "agenra_decisions_total{{verdict=\"{v}\"}} {}",
                self.verdicts[i].load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP agenra_events_applied_total Results, rejections and tasks applied.\n# TYPE agenra_events_applied_total counter\nagenra_events_applied_total {}",
            self.applied.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agenra_replayed_total Retried calls answered with their recorded answer.\n# TYPE agenra_replayed_total counter\nagenra_replayed_total {}",
            self.replayed.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agenra_errors_total Error answers, by HTTP status.\n# TYPE agenra_errors_total counter"
        );
        if let Ok(e) = self.errors.lock() {
            for (status, n) in e.iter() {
                let _ = writeln!(out, "agenra_errors_total{{status=\"{status}\"}} {n}");
            }
        }
        let _ = writeln!(
            out,
            "# HELP agenra_decision_seconds Time from request to durable answer, per event.\n# TYPE agenra_decision_seconds histogram"
        );
        let mut cumulative = 0;
        for (i, le) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "agenra_decision_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "agenra_decision_seconds_bucket{{le=\"+Inf\"}} {count}\nagenra_decision_seconds_sum {}\nagenra_decision_seconds_count {count}",
            self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9
        );
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.observe(Some("ALLOW"), false, Duration::from_micros(50));
        m.observe(Some("DENY"), false, Duration::from_millis(3));
        m.observe(None, false, Duration::from_secs(10));
        let text = m.render(&[("agenra_sessions", "Open sessions.", 2.0)]);
        assert!(text.contains("agenra_decisions_total{verdict=\"ALLOW\"} 1"));
        assert!(text.contains("agenra_decision_seconds_bucket{le=\"0.0001\"} 1"));
        assert!(text.contains("agenra_decision_seconds_bucket{le=\"0.005\"} 2"));
        assert!(text.contains("agenra_decision_seconds_bucket{le=\"+Inf\"} 3"));
        assert!(text.contains("agenra_sessions 2"));
    }
}
