//! DENY paths of flows into sinks bound to some arguments (`sink net(b)`):
//! the path follows only the edges into the bound arguments, and the edge
//! from the context only when a bound argument reads it. (Found by mutation
//! testing: `bound_params` and `trace_path`'s guard could change and no
//! core test saw the path.)

mod fixtures;

use agenra_core::graph::NodeId;
use agenra_core::label::{CategorySet, Label, LabelPattern};
use agenra_core::policy::{FlowEffect, FlowRule, Policy, SinkUse, Tool};
use agenra_core::{Cond, Monitor, StepOutput, Verdict};
use fixtures::{grant, params, step};
use serde_json::{json, Value};

/// A tool whose parameter `bound` (if any) alone reaches the sink `net`.
fn tool(name: &str, names: &[&str], bound: Option<usize>, output: Label) -> Tool {
    Tool {
        sinks: bound
            .map(|p| SinkUse {
                sink: 0,
                params: Some(vec![p]),
            })
            .into_iter()
            .collect(),
        ..fixtures::tool(name, params(names), output)
    }
}

/// `read` returns secret data; `send_a` and `send_b` take `a` and `b`,
/// and only `a` (resp. `b`) reaches the sink `net`, which no secret may.
fn policy() -> Policy {
    let mut p = Policy::empty("bound");
    p.levels = vec!["public".into(), "secret".into()];
    p.sinks = vec!["net".into()];
    p.tools = vec![
        tool("read", &[], None, Label::new(1, CategorySet(0), true)),
        tool("send_a", &["a", "b"], Some(0), Label::BOTTOM),
        tool("send_b", &["a", "b"], Some(1), Label::BOTTOM),
    ];
    p.grants = (0..3).map(grant).collect();
    p.flow_rules = vec![FlowRule {
        name: "no_secret_out".into(),
        sink: 0,
        effect: FlowEffect::Deny(LabelPattern {
            min_sensitivity: Some(1),
            any_category: CategorySet(0),
            untrusted: false,
        }),
        when: Cond::TRUE,
    }];
    p
}

/// A `send_*` call with lineage; its verdict and DENY path.
fn send(m: &mut Monitor, id: &str, tool: &str, lineage: Value) -> (Verdict, Vec<NodeId>, NodeId) {
    let out = step(
        m,
        json!({"kind": "call", "id": id, "time": 1, "tool": tool,
               "args": {"a": "x", "b": "y"}, "lineage": lineage}),
    );
    let StepOutput::Decision(d) = out else {
        panic!("a call is decided")
    };
    (d.verdict, m.path(&d).unwrap(), d.node)
}

#[test]
fn a_flow_path_follows_only_the_arguments_bound_to_the_sink() {
    let mut m = Monitor::new(policy()).unwrap();
    // A public read, then a secret one whose result the agent reads.
    let StepOutput::Decision(r) = step(
        &mut m,
        json!({"kind": "call", "id": "r1", "time": 1, "tool": "read"}),
    ) else {
        panic!()
    };
    step(
        &mut m,
        json!({"kind": "result", "call": "r1", "status": "succeeded"}),
    );
    let ctx = NodeId(0);
    let r1 = r.node;

    // b (bound) comes from r1: the path is r1 -> call, not via the context
    // (which a, unbound, reads).
    let (v, path, node) = send(&mut m, "s1", "send_b", json!({"b": ["r1"]}));
    assert_eq!(v, Verdict::Deny);
    assert_eq!(path, vec![r1, node]);

    // The same with a bound instead.
    let (v, path, node) = send(&mut m, "s2", "send_a", json!({"a": ["r1"]}));
    assert_eq!(v, Verdict::Deny);
    assert_eq!(path, vec![r1, node]);

    // b (bound) reads the context, a comes from r1: the path goes through
    // the context, to the read that brought the secret in.
    let (v, path, node) = send(&mut m, "s3", "send_b", json!({"a": ["r1"]}));
    assert_eq!(v, Verdict::Deny);
    assert_eq!(path, vec![r1, ctx, node]);

    // a (bound) reads the context, b comes from r1.
    let (v, path, node) = send(&mut m, "s4", "send_a", json!({"b": ["r1"]}));
    assert_eq!(v, Verdict::Deny);
    assert_eq!(path, vec![r1, ctx, node]);
}

/// A compact session forgets a denied call's node once the window has
/// moved past it; its DENY path is then the typed error `Forgotten`,
/// naming the node, never a path rebuilt from whatever is left.
#[test]
fn a_forgotten_deny_path_is_a_typed_error() {
    use agenra_core::{CompiledPolicy, PathError, SessionOptions};
    let compiled = CompiledPolicy::new(policy()).unwrap();
    let mut m = compiled.session_with(SessionOptions::compact(2));
    step(
        &mut m,
        json!({"kind": "call", "id": "r1", "time": 1, "tool": "read"}),
    );
    step(
        &mut m,
        json!({"kind": "result", "call": "r1", "status": "succeeded"}),
    );
    let StepOutput::Decision(d) = step(
        &mut m,
        json!({"kind": "call", "id": "s1", "time": 1, "tool": "send_a",
               "args": {"a": "x", "b": "y"}, "lineage": {"a": ["r1"]}}),
    ) else {
        panic!("a call is decided")
    };
    assert_eq!(d.verdict, Verdict::Deny);
    assert!(m.path(&d).is_ok(), "read right after the decision");
    for i in 0..6 {
        let StepOutput::Decision(r) = step(
            &mut m,
            json!({"kind": "call", "id": format!("p{i}"), "time": 1, "tool": "read"}),
        ) else {
            panic!("a call is decided")
        };
        assert_eq!(r.verdict, Verdict::Allow);
        step(
            &mut m,
            json!({"kind": "result", "call": format!("p{i}"), "status": "succeeded"}),
        );
    }
    assert!(m.state().graph.node(d.node).is_none(), "forgotten");
    assert_eq!(m.path(&d), Err(PathError::Forgotten { node: d.node }));
}
