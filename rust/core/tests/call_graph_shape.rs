//! What a call leaves in the session graph: its node's kind, its observed
//! lineage edges (in parameter order, each parameter's sources in the order
//! given) and calls of tools with more parameters than fit on the stack.
//! (Found by mutation testing of `monitor/lineage.rs` and
//! `monitor/wellformed.rs`: verdicts alone did not tell these apart.)

mod fixtures;

use agenra_core::graph::{EdgeKind, NodeId, NodeKind, Trust};
use agenra_core::policy::{Policy, ResourceLabel, Tool};
use agenra_core::{CategorySet, Event, Label, Monitor, Pattern, StepOutput, Verdict};
use fixtures::{grant, params};
use serde_json::{json, Map, Value};

fn tool(name: &str, names: &[&str], output: Label) -> Tool {
    fixtures::tool(name, params(names), output)
}

fn policy(resource_labels: bool) -> Policy {
    let mut p = Policy::empty("shape");
    p.levels = vec!["public".into(), "secret".into()];
    let secret = Label::new(1, CategorySet::EMPTY, true);
    let big: Vec<String> = (0..33).map(|i| format!("p{i}")).collect();
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    p.tools = vec![
        tool("src", &[], Label::BOTTOM),
        tool("secret", &[], secret),
        tool("read", &["path"], Label::BOTTOM),
        tool("use", &["z", "a"], Label::BOTTOM),
        tool("big", &big, Label::BOTTOM),
    ];
    p.tools[2].resource = Some(0);
    p.grants = (0..p.tools.len()).map(grant).collect();
    if resource_labels {
        p.resources = vec![ResourceLabel {
            pattern: Pattern::Prefix("/secret/".into()),
            label: secret,
        }];
    }
    p
}

fn call(m: &mut Monitor, id: &str, tool: &str, args: Value, lineage: Value) -> NodeId {
    let e: Event = serde_json::from_value(json!({
        "kind": "call", "id": id, "time": 1, "tool": tool, "args": args, "lineage": lineage
    }))
    .expect("an event");
    match m.step(&e) {
        Ok(StepOutput::Decision(d)) => {
            assert_eq!(d.verdict, Verdict::Allow, "{id}: {d:?}");
            d.node
        }
        other => panic!("{id}: {other:?}"),
    }
}

fn kind(m: &Monitor, node: NodeId) -> NodeKind {
    m.state().graph.node(node).expect("a node").kind
}

#[test]
fn a_call_node_is_a_source_when_its_output_or_resource_carries_a_label() {
    for labels in [false, true] {
        let mut m = Monitor::new(policy(labels)).expect("a valid policy");
        let src = call(&mut m, "s", "src", json!({}), json!({}));
        let secret = call(&mut m, "x", "secret", json!({}), json!({}));
        let read = call(&mut m, "r", "read", json!({"path": "/a"}), json!({}));
        // A declared output label makes a source, with or without resource labels.
        assert_eq!(
            kind(&m, secret),
            NodeKind::Source,
            "resource labels: {labels}"
        );
        // A tool without parameters never reads a labeled resource.
        assert_eq!(kind(&m, src), NodeKind::Tool, "resource labels: {labels}");
        // A resource parameter makes a source only if some resource is labeled.
        let expected = if labels {
            NodeKind::Source
        } else {
            NodeKind::Tool
        };
        assert_eq!(kind(&m, read), expected, "resource labels: {labels}");
    }
}

#[test]
fn lineage_edges_follow_parameter_order_then_the_order_given() {
    let mut m = Monitor::new(policy(false)).expect("a valid policy");
    let s1 = call(&mut m, "s1", "src", json!({}), json!({}));
    let s2 = call(&mut m, "s2", "src", json!({}), json!({}));
    let s3 = call(&mut m, "s3", "src", json!({}), json!({}));
    let s4 = call(&mut m, "s4", "src", json!({}), json!({}));
    // Lineage is read by name (`a` before `z`), but `z` is parameter 0.
    let node = call(
        &mut m,
        "u",
        "use",
        json!({"z": "1", "a": "2"}),
        json!({"a": ["s3", "s1"], "z": ["s4", "s2", "s1"]}),
    );
    let graph = &m.state().graph;
    let observed: Vec<(u16, NodeId)> = (0..graph.edge_count())
        .filter_map(|i| graph.edge(i))
        .filter(|e| e.to == node && e.kind == EdgeKind::Data && e.trust == Trust::Observed)
        .map(|e| (e.param, e.from))
        .collect();
    assert_eq!(
        observed,
        vec![(0, s4), (0, s2), (0, s1), (1, s3), (1, s1)],
        "{:?}",
        graph
    );
    // Every argument has observed lineage: no edge from the context.
    assert!((0..graph.edge_count())
        .filter_map(|i| graph.edge(i))
        .all(|e| e.to != node || e.kind != EdgeKind::Data || e.trust == Trust::Observed));
}

#[test]
fn a_tool_with_more_parameters_than_the_stack_holds_is_called_normally() {
    let mut m = Monitor::new(policy(false)).expect("a valid policy");
    let args: Map<String, Value> = (0..33)
        .map(|i| (format!("p{i}"), Value::String(format!("v{i}"))))
        .collect();
    let node = call(&mut m, "b", "big", Value::Object(args.clone()), json!({}));
    assert_eq!(m.state().graph.node(node).map(|n| n.tool), Some(4));
    // A missing argument still counts as missing.
    let mut fewer = args;
    fewer.remove("p32");
    let e: Event = serde_json::from_value(json!({
        "kind": "call", "id": "b2", "time": 1, "tool": "big", "args": fewer
    }))
    .expect("an event");
    match m.step(&e) {
        Ok(StepOutput::Decision(d)) => {
            assert_eq!(d.verdict, Verdict::Deny);
            assert_eq!(
                d.reason,
                agenra_core::decision::Reason::MissingArg {
                    param: "p32".into()
                }
            );
        }
        other => panic!("{other:?}"),
    }
}
