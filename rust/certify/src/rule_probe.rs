//! Probes for lost workflows that need a rule to pause a call or to deny
//! an approval at one moment, and not at others (`agenra certify` of a
//! revision that drops a pause rule, narrows it, or turns a deny rule into
//! a pause: corpus pay07, pay15, rd21). The ledger abstraction cannot
//! build them (it shares the rules' outcome between OLD and NEW), so they
//! are built concretely and judged by the replay alone
//! ([`replay::first_loss`]): nothing here is trusted, a probe that finds
//! no loss only leaves the verdict `unknown`.
//!
//! A workflow is: what makes the trigger call admissible (sets seeded or
//! discovered, found in the abstraction), a *taint* (a call of a tool
//! whose output carries a label, and its success, read into the context)
//! before or after the *trigger* (a call without lineage, so it reads the
//! context), a rejection or approval of the trigger, then *drain* calls:
//! the trigger's call again, each with explicit empty lineage (so the
//! taint does not reach them), approved where its grants need approval,
//! and succeeding, until NEW loses one.
//!
//! * taint, trigger, reject: OLD pauses the trigger by a rule and NEW
//!   admits it at once; OLD's rejection returns its units, NEW's call ran
//!   (pay07, pay15);
//! * trigger, taint, approve: both pause the trigger (its grant needs
//!   approval); OLD's re-check denies it (the context is tainted now) and
//!   NEW's admits it (rd21).
//!
//! The other two orders are tried too.

use crate::product::{self, admit_call, events, initial, step, Admission, Ctx, Event as AEvent};
use crate::replay;
use agenra_core::event::{Call, Event, Outcome, Report, Resolve};
use agenra_core::Label;
use std::collections::{BTreeMap, HashSet};

/// Taint sources tried (one class per tool).
const MAX_SOURCES: usize = 4;
/// Trigger classes tried.
const MAX_TRIGGERS: usize = 40;
/// Abstract states searched for a trigger's set-up.
const MAX_SETUP_STATES: usize = 2_000;

/// The trigger approved or rejected, the drain calls approved or not.
const SHAPES: [(bool, bool); 4] = [(false, false), (false, true), (true, false), (true, true)];

/// How one workflow is built.
#[derive(Clone, Copy)]
struct Shape {
    /// The taint before the trigger (else between it and its approval or
    /// rejection).
    taint_first: bool,
    /// The trigger approved (else rejected).
    approve: bool,
    /// Each drain call approved before its result (for tools whose every
    /// grant needs approval).
    approve_drain: bool,
}

/// A lost workflow of the shapes above, confirmed by replay, or `None`.
/// `drain` bounds the calls after the trigger.
pub fn probe(ctx: &Ctx, drain: usize) -> Option<Vec<Event>> {
    let (a, b) = (ctx.old, ctx.new);
    let sources = sources(ctx);
    if sources.is_empty() {
        return None;
    }
    for i in (0..ctx.classes.classes.len()).take(MAX_TRIGGERS) {
        let Some((setup, trigger)) = trigger(ctx, i) else {
            continue;
        };
        for source in &sources {
            for taint_first in [true, false] {
                for (approve, approve_drain) in SHAPES {
                    let shape = Shape {
                        taint_first,
                        approve,
                        approve_drain,
                    };
                    let w = workflow(&setup, &trigger, source, shape, drain);
                    if let Ok(k) = replay::first_loss(a, b, &w) {
                        let lost = w[..=k].to_vec();
                        if replay::confirm(a, b, &lost).is_ok() {
                            return Some(lost);
                        }
                    }
                }
            }
        }
    }
    None
}

/// Calls of tools whose output carries a label (one per tool), each
/// admissible by itself.
fn sources(ctx: &Ctx) -> Vec<Call> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, c) in ctx.classes.classes.iter().enumerate() {
        if out.len() == MAX_SOURCES {
            break;
        }
        if ctx.old.tools[c.tool].output == Label::BOTTOM || seen.contains(&c.tool) {
            continue;
        }
        if let Some(Event::Call(call)) = single(ctx, i) {
            seen.insert(c.tool);
            out.push(call);
        }
    }
    out
}

/// The one concrete call of class `i` alone, if it needs no set-up.
fn single(ctx: &Ctx, i: usize) -> Option<Event> {
    let w = replay::concretize(
        ctx,
        &[AEvent::Call {
            class: i,
            rule_pause: false,
        }],
    )
    .ok()?;
    (w.len() == 1).then(|| w.into_iter().next()).flatten()
}

/// The events that make class `i` admissible on both sides (a shortest
/// abstract prefix of seeds, calls and successes), concrete, and the
/// class's call after them.
fn trigger(ctx: &Ctx, i: usize) -> Option<(Vec<Event>, Call)> {
    let prefix = setup(ctx, i)?;
    let mut abstract_workflow = prefix;
    abstract_workflow.push(AEvent::Call {
        class: i,
        rule_pause: false,
    });
    let mut w = replay::concretize(ctx, &abstract_workflow).ok()?;
    match w.pop()? {
        Event::Call(c) => Some((w, c)),
        _ => None,
    }
}

/// A shortest abstract prefix (breadth first, bounded) after which both
/// sides admit a call of class `i`.
fn setup(ctx: &Ctx, i: usize) -> Option<Vec<AEvent>> {
    let admitted =
        |s: &product::State| matches!(admit_call(ctx, s, i, false), Admission::Both { .. });
    let start = initial(ctx.old, ctx.new);
    if admitted(&start) {
        return Some(Vec::new());
    }
    let mut queue = std::collections::VecDeque::from([(start.clone(), Vec::new())]);
    let mut seen = HashSet::from([start]);
    while let Some((s, path)) = queue.pop_front() {
        for e in events(ctx, &s) {
            // Set-up only: seeds, calls and their successes.
            let wanted = matches!(
                e,
                AEvent::Seed { .. }
                    | AEvent::Call {
                        rule_pause: false,
                        ..
                    }
                    | AEvent::Succeeded { .. }
            );
            if !wanted {
                continue;
            }
            let product::Step::Next(t) = step(ctx, &s, &e) else {
                continue;
            };
            let mut p: Vec<AEvent> = path.clone();
            p.push(e);
            if admitted(&t) {
                return Some(p);
            }
            if seen.len() < MAX_SETUP_STATES && seen.insert(t.clone()) {
                queue.push_back((t, p));
            }
        }
    }
    None
}

/// The concrete workflow of one shape (see the module documentation).
fn workflow(
    setup: &[Event],
    trigger: &Call,
    source: &Call,
    shape: Shape,
    drain: usize,
) -> Vec<Event> {
    let time = trigger.time.max(source.time);
    let mut w = setup.to_vec();
    let mut taint = source.clone();
    taint.id = "taint".into();
    taint.time = time;
    let mut t = trigger.clone();
    t.id = "trigger".into();
    t.time = time;
    let taint_events = [Event::Call(taint), succeeded("taint", time)];
    if shape.taint_first {
        w.extend(taint_events.iter().cloned());
        w.push(Event::Call(t.clone()));
    } else {
        w.push(Event::Call(t.clone()));
        w.extend(taint_events.iter().cloned());
    }
    let resolve = Resolve {
        session: None,
        call: t.id.clone(),
        time: Some(time),
    };
    w.push(if shape.approve {
        Event::Approve(resolve)
    } else {
        Event::Reject(resolve)
    });
    // Explicit empty lineage: the drain calls read nothing of the context.
    let clean: BTreeMap<String, Vec<String>> =
        t.args.keys().map(|k| (k.clone(), Vec::new())).collect();
    for k in 1..=drain {
        let mut d = t.clone();
        d.id = format!("d{k}");
        d.lineage = clean.clone();
        w.push(Event::Call(d));
        if shape.approve_drain {
            w.push(Event::Approve(Resolve {
                session: None,
                call: format!("d{k}"),
                time: Some(time),
            }));
        }
        w.push(succeeded(&format!("d{k}"), time));
    }
    w
}

fn succeeded(call: &str, time: u64) -> Event {
    Event::Result(Report {
        session: None,
        call: call.into(),
        time: Some(time),
        status: Outcome::Succeeded,
        output: serde_json::Value::Null,
        discovered: vec![],
    })
}
