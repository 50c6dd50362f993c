//! Provenance by value stops trusting outputs once an untrusted output
//! had more words than are indexed (`MAX_OUTPUT_WORDS`): a value might be
//! in the part that was cut off (fail closed). Exactly the limit is still
//! indexed in full. (Found by mutation testing of `monitor/values.rs`.)

mod fixtures;

use agenra_core::label::LabelPattern;
use agenra_core::policy::{FlowEffect, FlowRule, Policy, SinkUse};
use agenra_core::provenance::MAX_OUTPUT_WORDS;
use agenra_core::{CategorySet, Cond, Label, Monitor, StepOutput, Verdict};
use fixtures::{grant, params, step, tool};
use serde_json::{json, Value};

/// `lookup` (trusted output), `fetch` (untrusted output), `send(to)` into
/// sink `mail`, which no untrusted data may reach.
fn policy() -> Policy {
    let mut p = Policy::empty("overflow");
    p.sinks = vec!["mail".into()];
    p.tools = vec![
        tool("lookup", vec![], Label::BOTTOM),
        tool("fetch", vec![], Label::new(0, CategorySet::EMPTY, false)),
        tool("send", params(&["to"]), Label::BOTTOM),
    ];
    p.tools[2].sinks = vec![SinkUse {
        sink: 0,
        params: None,
    }];
    p.grants = vec![grant(0), grant(1), grant(2)];
    p.flow_rules = vec![FlowRule {
        name: "no_untrusted_mail".into(),
        sink: 0,
        effect: FlowEffect::Deny(LabelPattern {
            min_sensitivity: None,
            any_category: CategorySet::EMPTY,
            untrusted: true,
        }),
        when: Cond::TRUE,
    }];
    p.provenance_by_value = true;
    p
}

fn run(m: &mut Monitor, id: &str, tool: &str, output: Value) {
    step(
        m,
        json!({"kind": "call", "id": id, "time": 1, "tool": tool}),
    );
    step(
        m,
        json!({"kind": "result", "call": id, "status": "succeeded", "output": output}),
    );
}

/// The verdict on mailing the looked-up address after `fetch` returned
/// `words` numbers.
fn send_after_fetching(words: usize) -> Verdict {
    let mut m = Monitor::new(policy()).expect("valid policy");
    run(&mut m, "l", "lookup", json!("alice@example.com"));
    run(&mut m, "f", "fetch", json!((0..words).collect::<Vec<_>>()));
    match step(
        &mut m,
        json!({"kind": "call", "id": "s", "time": 1, "tool": "send",
               "args": {"to": "alice@example.com"}}),
    ) {
        StepOutput::Decision(d) => d.verdict,
        other => panic!("not a decision: {other:?}"),
    }
}

#[test]
fn an_untrusted_output_past_the_limit_ends_trust_in_outputs() {
    assert_eq!(send_after_fetching(3), Verdict::Allow, "by value");
    assert_eq!(send_after_fetching(MAX_OUTPUT_WORDS), Verdict::Allow);
    assert_eq!(send_after_fetching(MAX_OUTPUT_WORDS + 1), Verdict::Deny);
}

/// A trusted output past the limit loses its tail but ends nothing.
#[test]
fn a_trusted_output_past_the_limit_ends_nothing() {
    let mut m = Monitor::new(policy()).expect("valid policy");
    run(&mut m, "l", "lookup", json!("alice@example.com"));
    run(
        &mut m,
        "l2",
        "lookup",
        json!((0..MAX_OUTPUT_WORDS + 1).collect::<Vec<_>>()),
    );
    run(&mut m, "f", "fetch", json!(["x"]));
    match step(
        &mut m,
        json!({"kind": "call", "id": "s", "time": 1, "tool": "send",
               "args": {"to": "alice@example.com"}}),
    ) {
        StepOutput::Decision(d) => assert_eq!(d.verdict, Verdict::Allow),
        other => panic!("not a decision: {other:?}"),
    }
}

/// The output a value was found in is recorded as a `value` edge into the
/// argument, once.
#[test]
fn a_value_found_in_an_output_is_an_edge_from_it() {
    use agenra_core::graph::{EdgeKind, Trust};
    let mut m = Monitor::new(policy()).expect("valid policy");
    run(
        &mut m,
        "l",
        "lookup",
        json!("alice@example.com alice@example.com"),
    );
    run(&mut m, "f", "fetch", json!(["x"]));
    let lookup = m.state().call_node("l").expect("node");
    let StepOutput::Decision(d) = step(
        &mut m,
        json!({"kind": "call", "id": "s", "time": 1, "tool": "send",
               "args": {"to": "alice@example.com"}}),
    ) else {
        panic!("a call is decided")
    };
    assert_eq!(d.verdict, Verdict::Allow);
    let graph = &m.state().graph;
    let by_value: Vec<_> = (0..graph.edge_count())
        .filter_map(|i| graph.edge(i))
        .filter(|e| e.to == d.node && e.kind == EdgeKind::Data && e.trust == Trust::Value)
        .map(|e| (e.param, e.from))
        .collect();
    assert_eq!(by_value, vec![(0, lookup)]);
}
