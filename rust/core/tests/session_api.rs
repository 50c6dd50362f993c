//! What a session tells its embedder besides verdicts: units left on a
//! limited grant, the state named in a wrong-state error, the reason text,
//! a speculative `check` that leaves the session as it was, and what an
//! event says of itself. (Found by mutation testing of monitor/mod.rs and
//! event.rs: the differential test compares verdicts and the ledger.)

mod fixtures;

use agenra_core::decision::Reason;
use agenra_core::event::TaskScope;
use agenra_core::policy::{Policy, Quota};
use agenra_core::{Event, Label, Monitor, StepError, StepOutput};
use fixtures::{grant, params, step, tool};
use serde_json::json;

/// `ping` (limited to 3 calls) and `note` (unlimited).
fn monitor() -> Monitor {
    let mut p = Policy::empty("api");
    p.tools = vec![
        tool("ping", params(&["x"]), Label::BOTTOM),
        tool("note", vec![], Label::BOTTOM),
    ];
    p.grants = vec![grant(0), grant(1)];
    p.grants[0].quota = Quota::Limited(3);
    Monitor::new(p).expect("valid policy")
}

fn call(m: &mut Monitor, id: &str, tool: &str) -> agenra_core::Decision {
    let args = if tool == "ping" {
        json!({"x": "v"})
    } else {
        json!({})
    };
    match step(
        m,
        json!({"kind": "call", "id": id, "time": 1, "tool": tool, "args": args}),
    ) {
        StepOutput::Decision(d) => d,
        other => panic!("not a decision: {other:?}"),
    }
}

#[test]
fn a_limited_grant_reports_the_units_left_after_each_call() {
    let mut m = monitor();
    let left: Vec<Option<u64>> = (0..3)
        .map(|i| match call(&mut m, &format!("p{i}"), "ping").reason {
            Reason::Granted { left, .. } => left,
            other => panic!("not granted: {other:?}"),
        })
        .collect();
    assert_eq!(left, vec![Some(2), Some(1), Some(0)]);
    match call(&mut m, "n0", "note").reason {
        Reason::Granted { left, .. } => assert_eq!(left, None, "unlimited"),
        other => panic!("not granted: {other:?}"),
    }
}

#[test]
fn the_reason_text_is_the_decisions_reason_against_the_policy() {
    let mut m = monitor();
    let d = call(&mut m, "p0", "ping");
    let text = m.reason_text(&d);
    assert_eq!(text, d.reason_text(m.policy()));
    assert!(text.contains("(2 left)"), "{text}");
}

#[test]
fn a_wrong_state_error_names_the_calls_state() {
    let mut m = monitor();
    call(&mut m, "p0", "ping");
    let e: Event = serde_json::from_value(json!({"kind": "approve", "call": "p0"})).expect("event");
    let err = m.step(&e).expect_err("a running call cannot be approved");
    assert!(
        matches!(
            err,
            StepError::WrongState {
                status: "running",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "call `p0` is running, so it cannot take an approval"
    );
}

/// `check` of a call whose id is taken fails and forgets nothing: the
/// running call keeps its id and still takes its result.
#[test]
fn a_failed_check_keeps_the_call_that_holds_the_id() {
    let mut m = monitor();
    call(&mut m, "p0", "ping");
    let again: Event = serde_json::from_value(
        json!({"kind": "call", "id": "p0", "time": 2, "tool": "note", "args": {}}),
    )
    .expect("event");
    let Event::Call(c) = again else {
        unreachable!()
    };
    assert!(m.check(&c).is_err(), "the id is taken");
    assert!(m.state().call_node("p0").is_some());
    step(
        &mut m,
        json!({"kind": "result", "call": "p0", "status": "succeeded"}),
    );
}

#[test]
fn an_event_names_its_session_and_kind() {
    let cases = [
        (
            json!({"kind": "call", "session": "s1", "id": "c", "time": 1, "tool": "t"}),
            "call",
        ),
        (
            json!({"kind": "result", "session": "s1", "call": "c", "status": "succeeded"}),
            "result",
        ),
        (
            json!({"kind": "approve", "session": "s1", "call": "c"}),
            "approve",
        ),
        (
            json!({"kind": "reject", "session": "s1", "call": "c"}),
            "reject",
        ),
        (
            json!({"kind": "task", "session": "s1", "id": "t", "text": "hi"}),
            "task",
        ),
    ];
    for (v, kind) in cases {
        let mut bare = v.clone();
        bare.as_object_mut().expect("object").remove("session");
        let e: Event = serde_json::from_value(v).expect("event");
        let b: Event = serde_json::from_value(bare).expect("event");
        assert_eq!((e.kind(), e.session()), (kind, Some("s1")));
        assert_eq!((b.kind(), b.session()), (kind, None));
    }
}

#[test]
fn a_task_scope_excludes_by_tool_and_resource() {
    let scope = TaskScope {
        tools: Some(vec!["mail.*".into()]),
        forbid: vec!["mail.delete".into()],
        resources: Some(vec!["/home/*".into()]),
        forbid_resources: vec!["/home/secret*".into()],
    };
    assert_eq!(scope.excludes("mail.send", Some("/home/a")), None);
    assert_eq!(scope.excludes("mail.send", None), None);
    assert_eq!(scope.excludes("mail.delete", None), Some(true));
    assert_eq!(
        scope.excludes("mail.send", Some("/home/secret.txt")),
        Some(true)
    );
    assert_eq!(
        scope.excludes("mail.send", Some("/etc/passwd")),
        Some(false)
    );
    assert_eq!(scope.excludes("web.get", Some("/home/a")), Some(false));
}

/// `check_all` lists every rule that stops the call, not only the first:
/// two deny call rules on `note` give two stops.
#[test]
fn check_all_lists_every_deny_rule() {
    use agenra_core::decision::Rule;
    use agenra_core::policy::{CallRule, RuleEffect};
    use agenra_core::Cond;
    let mut p = monitor().policy().clone();
    p.call_rules = ["first", "second"]
        .iter()
        .map(|name| CallRule {
            name: name.to_string(),
            effect: RuleEffect::Deny,
            tool: 1,
            when: Cond::TRUE,
        })
        .collect();
    let mut m = Monitor::new(p).expect("valid policy");
    let e: Event =
        serde_json::from_value(json!({"kind": "call", "id": "n0", "time": 1, "tool": "note"}))
            .expect("event");
    let Event::Call(c) = e else { unreachable!() };
    let stops = m.check_all(&c).expect("checked");
    let rules: Vec<Rule> = stops.iter().map(|s| s.rule).collect();
    assert_eq!(rules, vec![Rule::Call(0), Rule::Call(1)]);
    assert_eq!(m.state().call_node("n0"), None, "a check records nothing");
}

#[test]
fn session_options_print_what_they_hold() {
    let o = agenra_core::SessionOptions::compact(4);
    assert_eq!(
        format!("{o:?}"),
        "SessionOptions { compact: Some(4), audit: false, pool: false }"
    );
}

/// A compact session with window 3 forgets nothing until its graph holds
/// 2 × 3 nodes (the context and five calls), and then forgets at once.
#[test]
fn a_compact_session_compacts_when_the_graph_holds_twice_its_window() {
    use agenra_core::SessionOptions;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let forgotten = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&forgotten);
    let mut m = monitor()
        .compiled()
        .session_with(SessionOptions::compact(3).audit(move |_| {
            seen.fetch_add(1, Ordering::Relaxed);
        }));
    let mut first = None;
    for i in 0..8 {
        let id = format!("n{i}");
        call(&mut m, &id, "note");
        step(
            &mut m,
            json!({"kind": "result", "call": id, "status": "succeeded"}),
        );
        if first.is_none() && forgotten.load(Ordering::Relaxed) > 0 {
            first = Some(i + 1);
        }
    }
    assert_eq!(
        first,
        Some(5),
        "the first compaction comes with the fifth call"
    );
}

/// `pause path`'s witness holds one call per step before the last: a call
/// admitted as the last step (paused, then approved) does not join it, so
/// the next PAUSE's path is the first step and the new call.
#[test]
fn a_path_witness_stops_before_the_last_step() {
    use agenra_core::policy::{PathKind, PathRule, RuleEffect, StepPattern};
    use agenra_core::Verdict;
    let mut p = monitor().policy().clone();
    let on = |t: &str| StepPattern {
        tool: Some(t.into()),
        ..StepPattern::default()
    };
    p.path_rules = vec![PathRule {
        name: "note_then_ping".into(),
        effect: RuleEffect::Pause,
        kind: PathKind::Sequence(vec![on("note"), on("ping")]),
        reset: None,
    }];
    let mut m = Monitor::new(p).expect("valid policy");
    let n0 = call(&mut m, "n0", "note").node;
    let d = call(&mut m, "p0", "ping");
    assert_eq!(d.verdict, Verdict::Pause);
    assert_eq!(m.path(&d).expect("path"), vec![n0, d.node]);
    let approved = m.approve("p0").expect("approved");
    assert_eq!(approved.verdict, Verdict::Allow);
    let d = call(&mut m, "p1", "ping");
    assert_eq!(d.verdict, Verdict::Pause);
    assert_eq!(m.path(&d).expect("path"), vec![n0, d.node]);
}
