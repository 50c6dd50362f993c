//! Concrete traces: the events of a witness, replayed through the real
//! monitor ([`agenra_core::Monitor`]), with the labels each call carries
//! recomputed from the trace (`docs/semantics.md`: the context, observed
//! lineage, sanitizers, bound sinks), and without sanitizers for
//! non-leakage. Every violation `verify` reports is confirmed here.

use super::alphabet::Letter;
use agenra_core::decision::{Rule, StepOutput};
use agenra_core::event::{Call, Event, Outcome, Report, Resolve};
use agenra_core::label::Label;
use agenra_core::policy::Policy;
use agenra_core::value::Value;
use agenra_core::{Monitor, Verdict};
use std::collections::BTreeMap;

/// One step of a concrete trace: a call, and how a pause and the result go.
#[derive(Clone, Debug)]
pub struct CStep {
    /// The call.
    pub letter: Letter,
    /// Per argument: `None` no observed lineage; `Some(steps)`: the calls
    /// (by step index) it came from.
    pub lineage: Vec<Option<Vec<usize>>>,
    /// A pause is approved (else rejected).
    pub approve: bool,
    /// An admitted call succeeds (else fails).
    pub succeed: bool,
}

/// What the monitor and the label recomputation say of one step.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The call's verdict.
    pub verdict: Verdict,
    /// The rule that decided the call.
    pub rule: Rule,
    /// The approval's verdict, if the call paused and was approved.
    pub approval: Option<Verdict>,
    /// Admitted: ALLOW, or PAUSE then an approval that ALLOWs.
    pub admitted: bool,
    /// Units the call took (caller first).
    pub grants: Vec<usize>,
    /// Per argument, its label.
    pub args: Vec<Label>,
    /// Per entry of the tool's sinks, the label reaching it.
    pub sinks: Vec<Label>,
    /// The output label.
    pub out: Label,
    /// Without sanitizers: every argument (or the context) and the resource.
    pub raw_full: Label,
    /// Without sanitizers: the output label.
    pub raw_out: Label,
}

/// A replayed trace.
#[derive(Clone, Debug)]
pub struct Replayed {
    /// The events, as a trace file holds them.
    pub events: Vec<Event>,
    /// Per step.
    pub steps: Vec<Seen>,
}

/// The call id of step `i`.
pub fn call_id(i: usize) -> String {
    format!("c{}", i + 1)
}

/// The `call` event of step `i`.
pub fn call_event(policy: &Policy, i: usize, s: &CStep) -> Event {
    let tool = &policy.tools[s.letter.tool];
    let mut lineage = BTreeMap::new();
    for (p, l) in tool.params.iter().zip(&s.lineage) {
        if let Some(ids) = l {
            lineage.insert(p.name.clone(), ids.iter().map(|&j| call_id(j)).collect());
        }
    }
    Event::Call(Call {
        session: None,
        id: call_id(i),
        time: s.letter.time,
        agent: (s.letter.agent != 0).then(|| policy.agents[s.letter.agent].name.clone()),
        tool: tool.name.clone(),
        args: s.letter.args_json(policy),
        lineage,
        inferred: BTreeMap::new(),
    })
}

/// Replays `steps` through the monitor: each call, then (unless it is the
/// last step) the approval or rejection of a pause and the result of an
/// admitted call. Errors are the monitor's (a malformed trace).
pub fn replay(policy: &Policy, steps: &[CStep]) -> Result<Replayed, String> {
    let mut m = Monitor::new(policy.clone()).map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    let mut seen: Vec<Seen> = Vec::new();
    let mut shared = Label::BOTTOM;
    let mut raw_shared = Label::BOTTOM;
    // Agents with `own context`: their context, and without sanitizers.
    let mut own: BTreeMap<usize, (Label, Label)> = BTreeMap::new();
    let decision = |o: StepOutput| match o {
        StepOutput::Decision(d) => Some(d),
        StepOutput::Applied(_) => None,
    };
    for (i, s) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        let tool = &policy.tools[s.letter.tool];
        let owner = policy
            .chain_iter(s.letter.agent)
            .find(|&x| policy.agents[x].own_context);
        let (ctx, raw_ctx) = match owner {
            Some(o) => own
                .get(&o)
                .copied()
                .unwrap_or((Label::BOTTOM, Label::BOTTOM)),
            None => (shared, raw_shared),
        };
        // Labels, as docs/semantics.md defines them.
        let lab = |a: usize, c: &Label, outs: &dyn Fn(&Seen) -> Label| match s
            .lineage
            .get(a)
            .cloned()
            .flatten()
        {
            Some(ids) => ids
                .iter()
                .filter_map(|&j| seen.get(j))
                .fold(Label::BOTTOM, |acc, x| acc.join(&outs(x))),
            None if s.letter.args.get(a) == Some(&Value::Null) => Label::BOTTOM,
            None => *c,
        };
        let args: Vec<Label> = (0..tool.params.len())
            .map(|a| lab(a, &ctx, &|x: &Seen| x.out))
            .collect();
        let raw_args: Vec<Label> = (0..tool.params.len())
            .map(|a| lab(a, &raw_ctx, &|x: &Seen| x.raw_out))
            .collect();
        let carries = (0..tool.params.len()).any(|a| {
            s.lineage.get(a).is_some_and(|l| l.is_some())
                || s.letter.args.get(a) != Some(&Value::Null)
        });
        let join = |ls: &[Label]| ls.iter().fold(Label::BOTTOM, |a, l| a.join(l));
        let input = if carries { join(&args) } else { ctx };
        let raw_input = if carries { join(&raw_args) } else { raw_ctx };
        let res = s.letter.resource_label;
        let sinks = tool
            .sinks
            .iter()
            .map(|u| match &u.params {
                None => input.join(&res),
                Some(ps) => ps
                    .iter()
                    .filter_map(|&p| args.get(p))
                    .fold(Label::BOTTOM, |a, l| a.join(l))
                    .join(&res),
            })
            .collect();
        let sanitized = match tool.sanitizer.and_then(|x| policy.sanitizers.get(x)) {
            Some(z) => z.apply(&input),
            None => input,
        };
        let out = sanitized.join(&tool.output).join(&res);
        let raw_full = raw_input.join(&res);
        let raw_out = raw_full.join(&tool.output);

        let ev = call_event(policy, i, s);
        let d = m
            .step(&ev)
            .map_err(|e| format!("event {}: {e}", events.len() + 1))?;
        events.push(ev);
        let d = decision(d).ok_or("a call got no decision")?;
        let mut approval = None;
        let mut admitted = d.verdict == Verdict::Allow;
        if d.verdict == Verdict::Pause && (!last || s.approve) {
            let r = Resolve {
                session: None,
                call: call_id(i),
                time: None,
            };
            let ev = if s.approve {
                Event::Approve(r)
            } else {
                Event::Reject(r)
            };
            let o = m
                .step(&ev)
                .map_err(|e| format!("event {}: {e}", events.len() + 1))?;
            events.push(ev);
            if s.approve {
                approval = decision(o).map(|a| a.verdict);
                admitted = approval == Some(Verdict::Allow);
            }
        }
        if admitted && !last {
            let ev = Event::Result(Report {
                session: None,
                call: call_id(i),
                time: None,
                status: if s.succeed {
                    Outcome::Succeeded
                } else {
                    Outcome::Failed
                },
                output: if s.succeed {
                    s.letter.output.clone()
                } else {
                    serde_json::Value::Null
                },
                discovered: if s.succeed {
                    discovered(policy, steps, i, &d.grants)
                } else {
                    vec![]
                },
            });
            m.step(&ev)
                .map_err(|e| format!("event {}: {e}", events.len() + 1))?;
            events.push(ev);
            if s.succeed {
                shared = shared.join(&out);
                raw_shared = raw_shared.join(&raw_out);
                for x in policy.chain_iter(s.letter.agent) {
                    if policy.agents[x].own_context {
                        let e = own.entry(x).or_insert((Label::BOTTOM, Label::BOTTOM));
                        *e = (e.0.join(&out), e.1.join(&raw_out));
                    }
                }
            }
        }
        seen.push(Seen {
            verdict: d.verdict,
            rule: d.rule,
            approval,
            admitted,
            grants: d.grants.clone(),
            args,
            sinks,
            out,
            raw_full,
            raw_out,
        });
    }
    Ok(Replayed {
        events,
        steps: seen,
    })
}

/// The events as JSON Lines (a trace `agenra replay` reads).
pub fn to_jsonl(events: &[Event]) -> String {
    let mut s = String::new();
    for e in events {
        s.push_str(&serde_json::to_string(e).unwrap_or_default());
        s.push('\n');
    }
    s
}

/// What the result of step `i` reports as discovered: the strings later
/// calls of the trace need in the set its caller's own grant discovers into.
fn discovered(policy: &Policy, steps: &[CStep], i: usize, grants: &[usize]) -> Vec<String> {
    let Some(set) = grants
        .first()
        .and_then(|&g| policy.grants.get(g))
        .and_then(|g| g.discovers)
    else {
        return vec![];
    };
    let mut out: Vec<String> = Vec::new();
    for s in &steps[i + 1..] {
        for v in s.letter.sets.get(set).into_iter().flatten() {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
    }
    out
}
