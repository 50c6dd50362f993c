//! Make an abstract lost workflow concrete (session events) and replay it
//! through both real monitors: it is confirmed when OLD admits every event
//! and NEW accepts every event but the last, which it loses.

use crate::product::{admit_call, initial, step, Admission, Ctx, Event as AEvent, Held, Step};
use agenra_core::event::{Call, Event, Outcome, Report, Resolve, Task};
use agenra_core::{Monitor, Policy, StepOutput, Value, Verdict};
use std::collections::BTreeMap;

/// Why an abstract workflow has no concrete counterpart here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotConcrete(pub String);

/// The concrete events of an abstract workflow (OLD's side). The workflow
/// is re-stepped to know how each call is held; a value whose membership
/// type the class needs is added to the results (or tasks) that created
/// that type, along its chain back to "in no set".
pub fn concretize(ctx: &Ctx, workflow: &[AEvent]) -> Result<Vec<Event>, NotConcrete> {
    let old = ctx.old;
    let classes = ctx.classes;
    let mut out: Vec<Event> = Vec::new();
    // Live calls: (id, how they are held now), in admission order.
    let mut live: Vec<(String, Held)> = Vec::new();
    // For each type: the event (index into `out`) that created it, and the
    // type it grew from.
    let mut creator: BTreeMap<u8, (usize, u8)> = BTreeMap::new();
    let mut needs: Vec<(String, u8)> = Vec::new();
    let mut state = initial(ctx.old, ctx.new);
    let mut time = 0u64;
    let mut next_id = 1;
    let take = |live: &mut Vec<(String, Held)>, h: &Held| -> Result<String, NotConcrete> {
        let i = live.iter().position(|(_, x)| x == h).ok_or_else(|| {
            NotConcrete("an event names a call held only in the abstraction".into())
        })?;
        Ok(live.remove(i).0)
    };
    for (k, e) in workflow.iter().enumerate() {
        let last = k + 1 == workflow.len();
        match e {
            AEvent::Call { class, rule_pause } => {
                if *rule_pause {
                    return Err(NotConcrete(
                        "the workflow needs a rule to pause a call".into(),
                    ));
                }
                let c = classes
                    .classes
                    .get(*class)
                    .ok_or_else(|| NotConcrete("unknown class".into()))?;
                time = time.max(c.witness.time);
                let tool = &old.tools[c.tool];
                let mut args = serde_json::Map::new();
                for (p, v) in c.witness.args.iter().enumerate() {
                    if *v != Value::Null {
                        args.insert(tool.params[p].name.clone(), to_json(v));
                    }
                    for (el, &t) in c.witness.types.get(p).into_iter().flatten().enumerate() {
                        if t != 0 {
                            if let Some(Value::Str(s)) = v.scalars().get(el) {
                                needs.push((s.clone(), t));
                            }
                        }
                    }
                }
                let id = format!("c{next_id}");
                next_id += 1;
                let agent = (c.agent != 0).then(|| old.agents[c.agent].name.clone());
                out.push(Event::Call(Call {
                    session: None,
                    id: id.clone(),
                    time,
                    agent,
                    tool: tool.name.clone(),
                    args,
                    lineage: BTreeMap::new(),
                    inferred: BTreeMap::new(),
                }));
                if let Admission::Both { held, .. } = admit_call(ctx, &state, *class, false) {
                    live.push((id, held));
                }
            }
            AEvent::Approve { held } | AEvent::Reject { held } => {
                let id = take(&mut live, held)?;
                let resolve = Resolve {
                    session: None,
                    call: id.clone(),
                    time: Some(time),
                };
                if matches!(e, AEvent::Approve { .. }) {
                    live.push((
                        id,
                        Held {
                            old_paused: false,
                            new_paused: false,
                            ..*held
                        },
                    ));
                    out.push(Event::Approve(resolve));
                } else {
                    out.push(Event::Reject(resolve));
                }
            }
            AEvent::ApprovalDenied { .. } => {
                return Err(NotConcrete(
                    "the workflow needs a rule to deny an approval".into(),
                ));
            }
            AEvent::Succeeded { held, .. } | AEvent::Failed { held } | AEvent::Unknown { held } => {
                let id = take(&mut live, held)?;
                let status = match e {
                    AEvent::Succeeded { .. } => Outcome::Succeeded,
                    AEvent::Failed { .. } => Outcome::Failed,
                    _ => Outcome::Unknown,
                };
                out.push(Event::Result(Report {
                    session: None,
                    call: id,
                    time: Some(time),
                    status,
                    output: serde_json::Value::Null,
                    discovered: vec![],
                }));
            }
            AEvent::Seed { set, .. } => {
                let mut sets = BTreeMap::new();
                sets.insert(old.sets[*set].clone(), vec![]);
                out.push(Event::Task(Task {
                    session: None,
                    id: format!("t{next_id}"),
                    time: Some(time),
                    text: "certify witness".into(),
                    sets,
                    scope: None,
                }));
                next_id += 1;
            }
        }
        if last {
            break;
        }
        let before = state.types;
        state = match step(ctx, &state, e) {
            Step::Next(t) => t,
            _ => {
                return Err(NotConcrete(
                    "the workflow does not step in the abstraction".into(),
                ))
            }
        };
        let from = match e {
            AEvent::Succeeded { from: Some(f), .. } | AEvent::Seed { from: f, .. } => Some(*f),
            _ => None,
        };
        if let Some(f) = from {
            for t in 0..64u8 {
                if state.types & !before & (1 << t) != 0 {
                    creator.entry(t).or_insert((out.len() - 1, f));
                }
            }
        }
    }
    // Give each needed value its type: add it to every event of the chain.
    for (value, t) in needs {
        let mut at = t;
        while at != 0 {
            let &(i, from) = creator
                .get(&at)
                .ok_or_else(|| NotConcrete(format!("no event creates membership type {at}")))?;
            match &mut out[i] {
                Event::Result(r) => r.discovered.push(value.clone()),
                Event::Task(task) => task.sets.values_mut().for_each(|v| v.push(value.clone())),
                _ => {}
            }
            at = from;
        }
    }
    Ok(out)
}

pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Str(s) => serde_json::Value::String(s.clone()),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Decimal(d) => serde_json::Value::String(d.to_string()),
        Value::List(items) => serde_json::Value::Array(items.iter().map(to_json).collect()),
        Value::Null => serde_json::Value::Null,
        Value::Object(fields) => serde_json::Value::Object(
            fields
                .iter()
                .filter(|(_, v)| **v != Value::Null)
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
    }
}

/// Replays a concrete workflow through both monitors. `Ok(())` when OLD
/// admits every event, NEW accepts every event but the last, and NEW loses
/// the last (DENY, or PAUSE where OLD ALLOWs); otherwise the reason.
pub fn confirm(old: &Policy, new: &Policy, events: &[Event]) -> Result<(), String> {
    match first_loss(old, new, events)? {
        i if i + 1 == events.len() => Ok(()),
        i => Err(format!("NEW already loses event {}", i + 1)),
    }
}

/// Replays `events` through both monitors and gives the index of the
/// first event NEW loses, all earlier ones being part of a workflow OLD
/// admits and accepted by NEW; the reason otherwise.
///
/// OLD admits a workflow whose calls it never denies. An approval whose
/// re-check OLD denies is part of it (the client sees the DENY, the call
/// never runs, its units return): NEW may deny it too, or admit it (its
/// re-check reads other rules), and then NEW's call runs with no result
/// in OLD's workflow. A call OLD pauses and NEW admits at once runs in
/// NEW only: OLD's approval or rejection of it is a no-op for NEW.
pub fn first_loss(old: &Policy, new: &Policy, events: &[Event]) -> Result<usize, String> {
    let mut mo = Monitor::new(old.clone()).map_err(|e| format!("OLD: {e}"))?;
    let mut mn = Monitor::new(new.clone()).map_err(|e| format!("NEW: {e}"))?;
    let mut running_in_new_only: Vec<String> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let o = mo
            .step(e)
            .map_err(|err| format!("event {}: OLD: {err}", i + 1))?;
        let old_verdict = verdict(&o);
        let approval = matches!(e, Event::Approve(_));
        if old_verdict == Some(Verdict::Deny) && !approval {
            return Err(format!("event {}: OLD denies it", i + 1));
        }
        let skip = match e {
            Event::Approve(r) | Event::Reject(r) => running_in_new_only.contains(&r.call),
            _ => false,
        };
        if skip {
            continue;
        }
        let n = mn
            .step(e)
            .map_err(|err| format!("event {}: NEW: {err}", i + 1))?;
        let new_verdict = verdict(&n);
        let lost = match old_verdict {
            // A denied approval: whatever NEW answers, nothing is lost.
            Some(Verdict::Deny) => false,
            _ => {
                new_verdict == Some(Verdict::Deny)
                    || (old_verdict == Some(Verdict::Allow) && new_verdict == Some(Verdict::Pause))
            }
        };
        if lost {
            return Ok(i);
        }
        if let Event::Call(c) = e {
            if old_verdict == Some(Verdict::Pause) && new_verdict == Some(Verdict::Allow) {
                running_in_new_only.push(c.id.clone());
            }
        }
    }
    Err(if events.is_empty() {
        "empty workflow".into()
    } else {
        "NEW admits every event".into()
    })
}

fn verdict(o: &StepOutput) -> Option<Verdict> {
    match o {
        StepOutput::Decision(d) => Some(d.verdict),
        StepOutput::Applied(_) => None,
    }
}
