//! A session's call ids and held units, seen through the public API, over
//! thousands of calls: every id finds its node and back, held units go
//! with results, a speculative check leaves nothing behind, and a compact
//! session forgets old ids (the tables behind them are compact; see
//! `session_tables.rs`).

mod fixtures;

use agenra_core::graph::{NodeId, Status};
use agenra_core::policy::{Grant, Policy};
use agenra_core::{Event, Label, Monitor, SessionOptions, StepError, StepOutput, Verdict};
use serde_json::{json, Value};

fn policy() -> Policy {
    let mut p = Policy::empty("calls");
    p.tools = vec![fixtures::tool("ping", vec![], Label::BOTTOM)];
    p.grants = vec![Grant {
        name: "pings".into(),
        ..fixtures::grant(0)
    }];
    p
}

fn ev(v: Value) -> Event {
    serde_json::from_value(v).expect("an event")
}

fn call(m: &mut Monitor, id: &str) -> NodeId {
    match m.step(&ev(
        json!({"kind": "call", "id": id, "time": 1, "tool": "ping"}),
    )) {
        Ok(StepOutput::Decision(d)) => {
            assert_eq!(d.verdict, Verdict::Allow, "{id}");
            d.node
        }
        other => panic!("{other:?}"),
    }
}

fn result(m: &mut Monitor, id: &str) {
    let e = ev(json!({"kind": "result", "call": id, "status": "succeeded"}));
    assert!(matches!(m.step(&e), Ok(StepOutput::Applied(_))));
}

#[test]
fn thousands_of_running_calls_find_their_nodes_ids_and_units() {
    let mut m = Monitor::new(policy()).unwrap();
    let nodes: Vec<NodeId> = (0..3000).map(|i| call(&mut m, &format!("c{i}"))).collect();
    for (i, &node) in nodes.iter().enumerate() {
        let id = format!("c{i}");
        let s = m.state();
        assert_eq!(s.call_node(&id), Some(node));
        assert_eq!(s.call_id_of(node), Some(id.as_str()));
        assert_eq!(s.held_grants(&id), Some(&[0][..]));
        assert_eq!(s.call_status(&id), Some(Status::Running));
    }
    assert_eq!(m.state().call_id_of(NodeId(0)), None, "the context");
    assert!(m.state().call_node("c3000").is_none());
    // A reused id is refused and changes nothing.
    let e = ev(json!({"kind": "call", "id": "c5", "time": 1, "tool": "ping"}));
    assert!(matches!(m.step(&e), Err(StepError::DuplicateCall(id)) if id == "c5"));
    assert_eq!(m.state().call_id_of(nodes[5]), Some("c5"));

    // A check appends and rolls back: its id is gone, its node reused.
    let Event::Call(probe) = ev(json!({"kind": "call", "id": "probe", "time": 1, "tool": "ping"}))
    else {
        unreachable!()
    };
    let d = m.check(&probe).unwrap();
    assert_eq!(d.verdict, Verdict::Allow);
    assert!(m.state().call_node("probe").is_none());
    assert!(m.state().held_grants("probe").is_none());
    let next = call(&mut m, "next");
    assert_eq!(next, d.node);
    assert_eq!(m.state().call_id_of(next), Some("next"));

    // Results in call order release the units of every other call.
    for i in (0..3000).step_by(2) {
        result(&mut m, &format!("c{i}"));
    }
    for (i, &node) in nodes.iter().enumerate() {
        let id = format!("c{i}");
        let s = m.state();
        let (units, status) = if i % 2 == 0 {
            (None, Status::Succeeded)
        } else {
            (Some(&[0][..]), Status::Running)
        };
        assert_eq!(s.held_grants(&id), units, "{id}");
        assert_eq!(s.call_status(&id), Some(status), "{id}");
        assert_eq!(s.call_id_of(node), Some(id.as_str()));
    }
    // A task's id lives with the call ids.
    let task = ev(json!({"kind": "task", "id": "t1", "text": "ping them"}));
    let StepOutput::Applied(a) = m.step(&task).unwrap() else {
        panic!("a task is applied")
    };
    assert_eq!(m.state().call_id_of(a.node), Some("t1"));
    let e = ev(json!({"kind": "call", "id": "t1", "time": 1, "tool": "ping"}));
    assert!(matches!(m.step(&e), Err(StepError::DuplicateCall(_))));
}

#[test]
fn a_compact_session_forgets_old_ids_but_keeps_running_ones() {
    let mut m = Monitor::new(policy())
        .unwrap()
        .compiled()
        .session_with(SessionOptions::compact(50));
    // c0 stays running; the others finish.
    let first = call(&mut m, "c0");
    let mut nodes = vec![first];
    for i in 1..1000 {
        let id = format!("c{i}");
        nodes.push(call(&mut m, &id));
        result(&mut m, &id);
    }
    let s = m.state();
    assert_eq!(s.call_node("c0"), Some(first), "running: kept");
    assert_eq!(s.call_id_of(first), Some("c0"));
    assert_eq!(s.held_grants("c0"), Some(&[0][..]));
    assert!(s.call_node("c1").is_none(), "finished long ago: forgotten");
    assert_eq!(s.call_id_of(nodes[1]), None);
    assert_eq!(s.call_node("c999"), Some(nodes[999]));
    assert_eq!(s.call_id_of(nodes[999]), Some("c999"));
    // A forgotten id can be used again (documented for compact sessions).
    let again = call(&mut m, "c1");
    assert_eq!(m.state().call_id_of(again), Some("c1"));
    result(&mut m, "c0");
    assert!(m.state().held_grants("c0").is_none());
}
