//! An absent optional argument (or `null`) without lineage passes no data:
//! a sink bound to it receives nothing, not what the session has read.
//! (Found by mutation testing of `monitor/lineage.rs`: the per-argument
//! labels of a sink bound to some arguments treated an absent argument
//! like one that reads the context.)

mod fixtures;

use agenra_core::label::LabelPattern;
use agenra_core::policy::{FlowEffect, FlowRule, Policy, SinkUse};
use agenra_core::{CategorySet, Cond, Event, Label, Monitor, StepOutput, Verdict};
use fixtures::{grant, optional, param, tool};
use serde_json::{json, Value};

fn policy(by_value: bool) -> Policy {
    let mut p = Policy::empty("absent");
    p.levels = vec!["public".into(), "secret".into()];
    p.sinks = vec!["mail".into()];
    let secret = Label::new(1, CategorySet::EMPTY, true);
    p.tools = vec![
        tool("read", vec![], secret),
        tool("send", vec![param("to"), optional("body")], Label::BOTTOM),
    ];
    p.tools[1].sinks = vec![SinkUse {
        sink: 0,
        params: Some(vec![1]),
    }];
    p.grants = vec![grant(0), grant(1)];
    p.flow_rules = vec![FlowRule {
        name: "no_secret_mail".into(),
        sink: 0,
        effect: FlowEffect::Deny(LabelPattern {
            min_sensitivity: Some(1),
            any_category: CategorySet::EMPTY,
            untrusted: false,
        }),
        when: Cond::TRUE,
    }];
    p.provenance_by_value = by_value;
    p
}

fn verdict(m: &mut Monitor, e: Value) -> Verdict {
    let e: Event = serde_json::from_value(e).expect("an event");
    match m.step(&e) {
        Ok(StepOutput::Decision(d)) => d.verdict,
        other => panic!("{other:?}"),
    }
}

fn send(m: &mut Monitor, id: &str, args: Value) -> Verdict {
    verdict(
        m,
        json!({"kind": "call", "id": id, "time": 1, "tool": "send", "args": args}),
    )
}

#[test]
fn a_sink_bound_to_an_absent_argument_receives_nothing_from_the_context() {
    for by_value in [false, true] {
        let mut m = Monitor::new(policy(by_value)).expect("a valid policy");
        assert_eq!(
            verdict(
                &mut m,
                json!({"kind": "call", "id": "r", "time": 1, "tool": "read", "args": {}})
            ),
            Verdict::Allow
        );
        let e: Event =
            serde_json::from_value(json!({"kind": "result", "call": "r", "status": "succeeded"}))
                .expect("an event");
        m.step(&e).expect("a result");
        // The session has read secret data: a body without lineage carries it.
        assert_eq!(
            send(&mut m, "s1", json!({"to": "a", "body": "b"})),
            Verdict::Deny,
            "by value: {by_value}"
        );
        // `to` reads the context too, but it is not bound to the sink; an
        // absent or null `body` carries nothing into it.
        assert_eq!(
            send(&mut m, "s2", json!({"to": "a"})),
            Verdict::Allow,
            "by value: {by_value}"
        );
        assert_eq!(
            send(&mut m, "s3", json!({"to": "a", "body": null})),
            Verdict::Allow,
            "by value: {by_value}"
        );
    }
}
