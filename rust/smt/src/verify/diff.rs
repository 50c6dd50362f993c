//! `agenra diff OLD NEW`: how two policies compare, with a witness trace
//! for each direction that differs. Reuses `agenra certify` (issue #11):
//! preservation in each direction (does one policy admit every workflow
//! the other admits?) and its safety delta (a workflow one admits whose
//! last event the other does not), each witness confirmed by replay
//! through both monitors.

use agenra_certify::{certify, Report, Verdict};
use agenra_core::event::Event;
use agenra_core::Policy;
use serde::Serialize;

/// How NEW compares with OLD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Relation {
    /// Each admits every workflow the other admits.
    Equivalent,
    /// NEW admits every workflow OLD admits, and one more.
    MorePermissive,
    /// OLD admits every workflow NEW admits, and one more.
    LessPermissive,
    /// Each admits a workflow the other does not.
    Incomparable,
    /// Not established (the reasons say what could not be checked).
    Unknown,
}

impl Relation {
    /// The relation's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Equivalent => "equivalent",
            Relation::MorePermissive => "more-permissive",
            Relation::LessPermissive => "less-permissive",
            Relation::Incomparable => "incomparable",
            Relation::Unknown => "unknown",
        }
    }
}

/// The answer of `diff`.
#[derive(Clone, Debug, Serialize)]
pub struct DiffReport {
    /// The relation.
    pub relation: Relation,
    /// Events NEW admits and OLD does not admit the last of.
    pub new_only: Option<Vec<Event>>,
    /// Events OLD admits and NEW does not admit the last of.
    pub old_only: Option<Vec<Event>>,
    /// What could not be checked, and notes.
    pub reasons: Vec<String>,
}

fn calls(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::Call(_)))
        .count()
}

/// Compares OLD and NEW. Witnesses with more than `bound` calls are
/// dropped (and said so in the reasons).
pub fn diff(old: &Policy, new: &Policy, bound: usize) -> DiffReport {
    let fwd = certify(old, new);
    let bwd = certify(new, old);
    let mut reasons = Vec::new();
    let mut pick = |a: &Report, b: &Report, from_lost: bool, dir: &str| -> Option<Vec<Event>> {
        // `a.lost_workflow`: what a's OLD admits and its NEW loses; `b.safety_delta`: what b's NEW admits that its OLD does not.
        let found = if from_lost {
            a.lost_workflow.clone().or_else(|| b.safety_delta.clone())
        } else {
            a.safety_delta.clone().or_else(|| b.lost_workflow.clone())
        };
        match found {
            Some(w) if calls(&w) > bound => {
                reasons.push(format!(
                    "a witness that {dir} has {} calls, more than the bound {bound}",
                    calls(&w)
                ));
                None
            }
            other => other,
        }
    };
    // NEW admits, OLD does not: fwd's safety delta, or bwd's lost workflow.
    let new_only = pick(&fwd, &bwd, false, "NEW admits and OLD does not");
    // OLD admits, NEW does not: fwd's lost workflow, or bwd's safety delta.
    let old_only = pick(&fwd, &bwd, true, "OLD admits and NEW does not");
    let preserved = fwd.verdict == Verdict::Certified;
    let reverse = bwd.verdict == Verdict::Certified;
    let relation = match (&new_only, &old_only) {
        (Some(_), Some(_)) => Relation::Incomparable,
        (Some(_), None) if preserved => Relation::MorePermissive,
        (None, Some(_)) if reverse => Relation::LessPermissive,
        (None, None) if preserved && reverse => Relation::Equivalent,
        _ => Relation::Unknown,
    };
    if relation == Relation::Unknown {
        for (dir, r) in [("OLD -> NEW", &fwd), ("NEW -> OLD", &bwd)] {
            if r.verdict != Verdict::Certified {
                for why in &r.reasons {
                    reasons.push(format!("{dir}: {why}"));
                }
                if r.reasons.is_empty() {
                    reasons.push(format!("{dir}: {}", r.verdict.as_str()));
                }
            }
        }
    }
    DiffReport {
        relation,
        new_only,
        old_only,
        reasons,
    }
}
