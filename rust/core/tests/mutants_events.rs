//! What results, tasks, approvals and rejections do to a session, as its
//! user sees it: the notes of each applied event, the status of the call's
//! node, the ledger and its hash, discovered sets and the event counter.
//! (Found by mutation testing: the differential test compares verdicts and
//! the ledger, not these.)

mod fixtures;

use agenra_core::decision::{Applied, Note, Rule};
use agenra_core::graph::{NodeId, Status};
use agenra_core::policy::{FactRule, Grant, Policy, Quota, Tool};
use agenra_core::{Event, Label, Monitor, StepOutput, Verdict};
use fixtures::params;
use serde_json::{json, Value};

fn tool(name: &str, names: &[&str]) -> Tool {
    fixtures::tool(name, params(names), Label::BOTTOM)
}

fn grant(name: &str, tool: usize, quota: Quota) -> Grant {
    Grant {
        name: name.into(),
        quota,
        ..fixtures::grant(tool)
    }
}

/// `lookup` (limited to 3, discovers into `contacts`, its success
/// establishes `looked-up`), `send` (needs approval, twice), `ping`
/// (unlimited); tasks may seed `contacts`.
fn policy() -> Policy {
    let mut p = Policy::empty("events");
    p.sets = vec!["contacts".into()];
    p.facts = vec!["looked-up".into()];
    p.task_seeds = vec![0];
    p.tools = vec![
        tool("lookup", &[]),
        tool("send", &["to"]),
        tool("ping", &[]),
    ];
    p.tools[0].facts = vec![FactRule {
        fact: 0,
        when: None,
    }];
    p.grants = vec![
        Grant {
            discovers: Some(0),
            ..grant("g-lookup", 0, Quota::Limited(3))
        },
        Grant {
            approval: true,
            ..grant("g-send", 1, Quota::Limited(2))
        },
        grant("g-ping", 2, Quota::Unlimited),
    ];
    p
}

fn ev(v: Value) -> Event {
    serde_json::from_value(v).expect("an event")
}

fn call(m: &mut Monitor, id: &str, tool: &str, args: Value) -> Verdict {
    let e = ev(json!({"kind": "call", "id": id, "time": 1, "tool": tool, "args": args}));
    match m.step(&e) {
        Ok(StepOutput::Decision(d)) => d.verdict,
        other => panic!("{other:?}"),
    }
}

fn applied(m: &mut Monitor, e: Value) -> Applied {
    match m.step(&ev(e)) {
        Ok(StepOutput::Applied(a)) => a,
        other => panic!("{other:?}"),
    }
}

fn result(m: &mut Monitor, id: &str, status: &str, discovered: &[&str]) -> Applied {
    applied(
        m,
        json!({"kind": "result", "call": id, "status": status, "discovered": discovered}),
    )
}

fn status(m: &Monitor, node: NodeId) -> Status {
    m.state().graph.node(node).expect("a node").status
}

/// The session's ledger hash is the hash of its ledger, after every unit
/// taken or returned.
fn hash_is_current(m: &Monitor) {
    assert_eq!(m.state().ledger_hash(), m.state().ledger.to_ledger().hash());
}

#[test]
fn results_report_what_they_changed() {
    let mut m = Monitor::new(policy()).unwrap();
    assert_eq!(call(&mut m, "l1", "lookup", json!({})), Verdict::Allow);
    hash_is_current(&m);
    let a = result(&mut m, "l1", "succeeded", &["a@x"]);
    assert_eq!(
        a.notes,
        vec![
            Note::Succeeded,
            Note::Discovered { set: 0, new: 1 },
            Note::FactSeen(0)
        ]
    );
    assert_eq!(a.rule, Some(Rule::Grant(0)));
    assert_eq!(status(&m, a.node), Status::Succeeded);
    // The set already holds one of these: two are new.
    assert_eq!(call(&mut m, "l2", "lookup", json!({})), Verdict::Allow);
    let a = result(&mut m, "l2", "succeeded", &["a@x", "b@x", "c@x"]);
    assert_eq!(
        a.notes,
        vec![
            Note::Succeeded,
            Note::Discovered { set: 0, new: 2 },
            Note::FactSeen(0)
        ]
    );
    assert_eq!(m.state().sets[0].len(), 3);
    // A failed call gets its unit back; an unknown one does not.
    assert_eq!(call(&mut m, "l3", "lookup", json!({})), Verdict::Allow);
    assert_eq!(m.state().ledger.remaining(0), Some(Quota::Limited(0)));
    let a = result(&mut m, "l3", "failed", &[]);
    assert_eq!(a.notes, vec![Note::Failed]);
    assert_eq!(a.refunded, vec![0]);
    assert_eq!(status(&m, a.node), Status::Failed);
    assert_eq!(m.state().ledger.remaining(0), Some(Quota::Limited(1)));
    hash_is_current(&m);
    assert_eq!(call(&mut m, "l4", "lookup", json!({})), Verdict::Allow);
    let a = result(&mut m, "l4", "unknown", &["d@x"]);
    assert_eq!(a.notes, vec![Note::Unknown]);
    assert!(a.refunded.is_empty());
    assert_eq!(status(&m, a.node), Status::Unknown);
    assert_eq!(m.state().ledger.remaining(0), Some(Quota::Limited(0)));
    assert!(!m.state().sets[0].contains("d@x"));
    hash_is_current(&m);
}

#[test]
fn tasks_report_what_they_seeded() {
    let mut m = Monitor::new(policy()).unwrap();
    let a = applied(
        &mut m,
        json!({"kind": "task", "id": "t1", "text": "mail a@x", "sets": {"contacts": ["a@x"]}}),
    );
    assert_eq!(
        a.notes,
        vec![
            Note::TaskRecorded("t1".into()),
            Note::Seeded { set: 0, new: 1 }
        ]
    );
    assert_eq!(a.rule, None);
    assert_eq!(status(&m, a.node), Status::Task);
    let first = a.node;
    let a = applied(
        &mut m,
        json!({"kind": "task", "id": "t2", "text": "and c@x", "sets": {"contacts": ["a@x", "b@x", "c@x"]},
               "scope": {"tools": ["ping"]}}),
    );
    assert_eq!(
        a.notes,
        vec![
            Note::TaskRecorded("t2".into()),
            Note::Seeded { set: 0, new: 2 },
            Note::ScopeOpened
        ]
    );
    // Only new values are recorded as seeded, by the task that added them.
    assert_eq!(
        m.state().seeded,
        vec![
            (0, "a@x".to_string(), first),
            (0, "b@x".to_string(), a.node),
            (0, "c@x".to_string(), a.node)
        ]
    );
    // The scope the task opened applies to later calls.
    assert_eq!(call(&mut m, "l1", "lookup", json!({})), Verdict::Deny);
    assert_eq!(call(&mut m, "p1", "ping", json!({})), Verdict::Allow);
}

#[test]
fn rejections_and_approvals_hold_and_return_units() {
    let mut m = Monitor::new(policy()).unwrap();
    assert_eq!(
        call(&mut m, "s1", "send", json!({"to": "a"})),
        Verdict::Pause
    );
    assert_eq!(m.state().ledger.remaining(1), Some(Quota::Limited(1)));
    hash_is_current(&m);
    let node = m.state().call_node("s1").unwrap();
    assert_eq!(status(&m, node), Status::Paused);
    let a = m.reject("s1").unwrap();
    assert_eq!(a.notes, vec![Note::Rejected]);
    assert_eq!(a.refunded, vec![1]);
    assert_eq!(a.rule, Some(Rule::Grant(1)));
    assert_eq!(status(&m, node), Status::Rejected);
    assert_eq!(m.state().ledger.remaining(1), Some(Quota::Limited(2)));
    hash_is_current(&m);
    assert_eq!(
        call(&mut m, "s2", "send", json!({"to": "b"})),
        Verdict::Pause
    );
    let d = m.approve("s2").unwrap();
    assert_eq!(d.verdict, Verdict::Allow);
    assert_eq!(d.grants, vec![1]);
    assert_eq!(d.rule, Rule::Grant(1));
    assert_eq!(m.state().held_grants("s2"), Some(&[1][..]));
    let node = m.state().call_node("s2").unwrap();
    assert_eq!(status(&m, node), Status::Running);
    assert_eq!(m.state().ledger.remaining(1), Some(Quota::Limited(1)));
    hash_is_current(&m);
}

#[test]
fn every_applied_event_counts_and_errors_do_not() {
    let mut m = Monitor::new(policy()).unwrap();
    let seq = |m: &Monitor| m.state().seq;
    applied(&mut m, json!({"kind": "task", "id": "t", "text": "hi"}));
    assert_eq!(seq(&m), 1);
    call(&mut m, "l1", "lookup", json!({}));
    assert_eq!(seq(&m), 2);
    result(&mut m, "l1", "succeeded", &[]);
    assert_eq!(seq(&m), 3);
    call(&mut m, "s1", "send", json!({"to": "a"}));
    call(&mut m, "s2", "send", json!({"to": "b"}));
    assert_eq!(seq(&m), 5);
    m.reject("s1").unwrap();
    assert_eq!(seq(&m), 6);
    m.approve("s2").unwrap();
    assert_eq!(seq(&m), 7);
    assert!(m.reject("s1").is_err());
    assert!(m.approve("nope").is_err());
    assert!(m
        .step(&ev(
            json!({"kind": "result", "call": "l1", "status": "failed"})
        ))
        .is_err());
    assert!(m
        .step(&ev(json!({"kind": "task", "id": "t", "text": "again"})))
        .is_err());
    assert_eq!(seq(&m), 7);
}
