//! Taint monotonicity by construction: before the two-run Z3 search, a
//! witness of the one shape a `reset on reads(P)` defect usually has is
//! built from the rule itself and replayed through the monitor
//! (`docs/verification.md`, "taint-monotonicity"). A construction that the
//! replay does not confirm is dropped and the Z3 search decides: this only
//! finds violations faster, it never concludes that the property holds.
//!
//! The shape, for a `deny` path rule `r` whose steps do not read labels
//! and whose reset reads `P`, in both runs:
//!
//! 1. a *source*: a call whose own output matches `P` (its result brings
//!    `P` into the context);
//! 2. the calls that take `r` to its last step (a sequence's steps but the
//!    last, or a count's `max` calls), arguments with lineage `[]`;
//! 3. the *reset*: a call matching `r`'s reset whose own output does not
//!    match `P`; in the first run its arguments have lineage `[]`, in the
//!    second they read the context (which carries `P`), so its output
//!    matches `P` and resets `r` in the second run only;
//! 4. the call of `r`'s last step, arguments with lineage `[]`: the first
//!    run is denied by `r`, the second is behind on `r`.
//!
//! Every argument of the first run has the bottom label, so the second
//! carries at least its labels; the monitor's replay checks the rest (the
//! same verdicts before the last call, DENY then not DENY).

use super::alphabet::Letter;
use super::concrete::{replay, CStep, Replayed};
use agenra_core::decision::Rule;
use agenra_core::label::{Label, LabelPattern};
use agenra_core::policy::{PathKind, Policy, RuleEffect, StepPattern};
use agenra_core::Verdict;

/// At most this many traces are replayed per construction (each a few
/// calls), so that a policy where the shape does not fit falls through to
/// the Z3 search quickly.
const BUDGET: usize = 400;

/// The two runs of a constructed candidate (first run, more labels).
pub(super) type Candidate = (Vec<CStep>, Vec<CStep>);

/// A call of `l` whose arguments all have observed lineage `[]` (`ctx ==
/// false`) or none, reading the context (`ctx == true`).
fn call(policy: &Policy, l: &Letter, ctx: bool) -> CStep {
    let lin = if ctx { None } else { Some(vec![]) };
    CStep {
        lineage: vec![lin; policy.tools[l.tool].params.len()],
        letter: l.clone(),
        approve: true,
        succeed: true,
    }
}

fn step_holds(policy: &Policy, st: &StepPattern, l: &Letter) -> bool {
    let tool = &policy.tools[l.tool];
    st.matches_tool(tool)
        && st.when.as_ref().is_none_or(|w| {
            w.resolve(&|n| tool.param_index(n))
                .eval(&l.args, l.agent, &[])
        })
}

/// The letter's own output label (its tool's output and its resource)
/// matches `p`: every call of it matches, whatever its arguments carry.
fn own_matches(policy: &Policy, l: &Letter, p: &LabelPattern) -> bool {
    p.matches(&own(policy, l))
}

/// The letter's own output label: its tool's output and its resource.
fn own(policy: &Policy, l: &Letter) -> Label {
    policy.tools[l.tool].output.join(&l.resource_label)
}

/// Whether `rule`'s reset can fire in one of two runs of the same calls
/// and not in the other: it reads a pattern `P`, and some letter matching
/// its tool, sink and `where` may or may not match `P` depending on what
/// its arguments carry. A call's output is its sanitized input joined with
/// its own output label (tool output and resource); the input is a join
/// of outputs of earlier calls, so at most the join of every label a tool
/// or a resource can produce. A letter whose own label matches `P` resets
/// in both runs; one whose own label joined with everything producible
/// does not match `P` resets in neither.
pub(super) fn reset_differs(
    policy: &Policy,
    letters: &[Letter],
    rule: &agenra_core::policy::PathRule,
) -> bool {
    let Some(reset) = &rule.reset else {
        return false;
    };
    let Some(pat) = &reset.reads else {
        return false;
    };
    let producible = policy
        .tools
        .iter()
        .map(|t| t.output)
        .chain(policy.resources.iter().map(|r| r.label))
        .chain(letters.iter().map(|l| l.resource_label))
        .fold(Label::BOTTOM, |a, l| a.join(&l));
    letters.iter().any(|l| {
        step_holds(policy, reset, l)
            && !own_matches(policy, l, pat)
            && pat.matches(&own(policy, l).join(&producible))
    })
}

/// Replays `steps` (budget permitting): the replay, if the trace is well
/// formed.
fn run(policy: &Policy, steps: &[CStep], budget: &mut usize) -> Option<Replayed> {
    if *budget == 0 {
        return None;
    }
    *budget -= 1;
    replay(policy, steps).ok()
}

/// A candidate witness for `policy`'s taint monotonicity within `bound`
/// calls, over `letters`, for the first rule where the shape fits; `None`
/// when none does (within the budget). The caller confirms it
/// (`confirm_monotone`) before reporting it.
pub(super) fn construct(
    policy: &Policy,
    letters: &[Letter],
    bound: usize,
    confirm: &dyn Fn(&[CStep], &[CStep]) -> bool,
) -> Option<Candidate> {
    let usable: Vec<&Letter> = letters.iter().filter(|l| l.needs().is_empty()).collect();
    let mut budget = BUDGET;
    for (x, rule) in policy.path_rules.iter().enumerate() {
        if rule.effect != RuleEffect::Deny {
            continue;
        }
        let Some(reset) = &rule.reset else { continue };
        let Some(pat) = &reset.reads else { continue };
        // The steps that take the rule to its last one, and the last.
        let (advance, last): (Vec<&StepPattern>, &StepPattern) = match &rule.kind {
            PathKind::Sequence(s) if s.len() >= 2 => {
                (s[..s.len() - 1].iter().collect(), &s[s.len() - 1])
            }
            PathKind::AtMost { max, step } if *max >= 1 && *max < bound as u64 => {
                (vec![step; *max as usize], step)
            }
            _ => continue,
        };
        let mut steps = advance.iter().copied().chain([last]);
        if steps.any(|s| s.reads.is_some()) || advance.len() + 3 > bound {
            continue;
        }
        let shape = Shape {
            rule: x,
            pat,
            reset,
            advance: &advance,
            last,
        };
        if let Some(c) = shape.construct(policy, &usable, &mut budget, confirm) {
            return Some(c);
        }
    }
    None
}

/// One rule's shape: its index, what its reset reads, its reset step,
/// the steps that take it to its last one, and the last.
struct Shape<'s> {
    rule: usize,
    pat: &'s LabelPattern,
    reset: &'s StepPattern,
    advance: &'s [&'s StepPattern],
    last: &'s StepPattern,
}

impl Shape<'_> {
    fn construct(
        &self,
        policy: &Policy,
        letters: &[&Letter],
        budget: &mut usize,
        confirm: &dyn Fn(&[CStep], &[CStep]) -> bool,
    ) -> Option<Candidate> {
        let (x, pat, reset, advance, last) =
            (self.rule, self.pat, self.reset, self.advance, self.last);
        let admitted = |r: &Replayed| r.steps.last().is_some_and(|s| s.admitted);
        let sources = letters.iter().filter(|l| own_matches(policy, l, pat));
        let resets: Vec<&&Letter> = letters
            .iter()
            .filter(|l| step_holds(policy, reset, l) && !own_matches(policy, l, pat))
            .collect();
        let lasts: Vec<&&Letter> = letters
            .iter()
            .filter(|l| step_holds(policy, last, l))
            .collect();
        for src in sources.take(4) {
            let mut prefix = vec![call(policy, src, false)];
            if !run(policy, &prefix, budget)
                .is_some_and(|r| admitted(&r) && pat.matches(&r.steps[0].out))
            {
                continue;
            }
            // The advancing calls: the first letter of each step that is
            // admitted after the prefix (and does not itself reset the rule).
            let mut ok = true;
            for st in advance {
                let next = letters.iter().find(|l| {
                    step_holds(policy, st, l)
                        && !(step_holds(policy, reset, l) && own_matches(policy, l, pat))
                        && {
                            let mut t = prefix.clone();
                            t.push(call(policy, l, false));
                            run(policy, &t, budget).is_some_and(|r| admitted(&r))
                        }
                });
                match next {
                    Some(l) => prefix.push(call(policy, l, false)),
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if !ok {
                continue;
            }
            // The last calls the first run denies by this rule.
            let denied: Vec<&&Letter> = lasts
                .iter()
                .copied()
                .filter(|l| {
                    let mut t = prefix.clone();
                    t.push(call(policy, l, false));
                    run(policy, &t, budget).is_some_and(|r| {
                        r.steps
                            .last()
                            .is_some_and(|s| s.verdict == Verdict::Deny && s.rule == Rule::Path(x))
                    })
                })
                .take(4)
                .collect();
            if denied.is_empty() {
                continue;
            }
            for rl in &resets {
                let mut a = prefix.clone();
                let mut b = prefix.clone();
                a.push(call(policy, rl, false));
                b.push(call(policy, rl, true));
                let (Some(ra), Some(rb)) = (run(policy, &a, budget), run(policy, &b, budget))
                else {
                    if *budget == 0 {
                        return None;
                    }
                    continue;
                };
                let (sa, sb) = (&ra.steps[a.len() - 1], &rb.steps[b.len() - 1]);
                if !sa.admitted || !sb.admitted || sa.verdict != sb.verdict || !pat.matches(&sb.out)
                {
                    continue;
                }
                for fl in &denied {
                    let mut a = a.clone();
                    let mut b = b.clone();
                    a.push(call(policy, fl, false));
                    b.push(call(policy, fl, false));
                    if *budget < 2 {
                        return None;
                    }
                    *budget -= 2;
                    if confirm(&a, &b) {
                        return Some((a, b));
                    }
                }
            }
        }
        None
    }
}
