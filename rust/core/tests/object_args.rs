//! Random JSON arguments against a declared object type
//! (`docs/semantics.md`, "Objects"): the monitor never panics, and admits a
//! call only when the argument has exactly the declared shape (an
//! independent matcher written here from the documentation says which);
//! every other argument is denied as ill-formed, the reason naming a path
//! inside the argument.

use agenra_core::decision::{Reason, Rule, StepOutput, Verdict};
use agenra_core::label::Label;
use agenra_core::policy::{Grant, Param, Policy, Quota, Tool};
use agenra_core::{Event, Monitor, ParamType};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn scalar(name: &str, ty: ParamType, optional: bool) -> Param {
    Param {
        name: name.into(),
        ty,
        list: false,
        optional,
        fields: vec![],
    }
}

/// `edits: list<{oldText: string, newText: string, n?: int, inner?: {flag: bool, tags: list<string>}}>`.
fn edits() -> Param {
    Param {
        name: "edits".into(),
        ty: ParamType::Object,
        list: true,
        optional: false,
        fields: vec![
            scalar("oldText", ParamType::Str, false),
            scalar("newText", ParamType::Str, false),
            scalar("n", ParamType::Int, true),
            Param {
                name: "inner".into(),
                ty: ParamType::Object,
                list: false,
                optional: true,
                fields: vec![
                    scalar("flag", ParamType::Bool, false),
                    Param {
                        list: true,
                        ..scalar("tags", ParamType::Str, false)
                    },
                ],
            },
        ],
    }
}

fn policy() -> Policy {
    let mut p = Policy {
        name: "objects".into(),
        levels: vec!["public".into()],
        categories: vec![],
        sinks: vec![],
        sets: vec![],
        facts: vec![],
        tools: vec![Tool {
            name: "edit".into(),
            params: vec![edits()],
            resource: None,
            sinks: vec![],
            output: Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        }],
        resources: vec![],
        sanitizers: vec![],
        agents: vec![agenra_core::policy::Agent {
            name: "main".into(),
            parent: None,
            scope: None,
            own_context: false,
        }],
        scopes: vec![],
        grants: vec![],
        flow_rules: vec![],
        path_rules: vec![],
        obligations: vec![],
        call_rules: vec![],
        receive_rules: vec![],
        provenance_by_value: false,
        task_seeds: vec![],
        shared_grants: vec![],
        budgets: vec![],
        param_provenance: vec![],
        renewals: vec![],
        count_windows: vec![],
        output_fields: vec![],
        token_shapes: vec![],
    };
    p.grants.push(Grant {
        name: "g".into(),
        agent: 0,
        tool: 0,
        resource: None,
        args: vec![],
        quota: Quota::Unlimited,
        approval: false,
        expires_at: None,
        discovers: None,
    });
    p
}

// ---- the independent matcher ----------------------------------------------

fn is_string(v: &Value) -> bool {
    v.is_string()
}

fn is_int(v: &Value) -> bool {
    v.as_i64().is_some()
}

/// `{flag: bool, tags: list<string>}`; `None` and `null` are absent.
fn inner_ok(v: &Value) -> bool {
    let Value::Object(m) = v else { return false };
    m.keys().all(|k| k == "flag" || k == "tags")
        && m.get("flag").is_some_and(Value::is_boolean)
        && m.get("tags")
            .and_then(Value::as_array)
            .is_some_and(|t| t.iter().all(is_string))
}

fn element_ok(v: &Value) -> bool {
    let Value::Object(m) = v else { return false };
    let known = ["oldText", "newText", "n", "inner"];
    m.keys().all(|k| known.contains(&k.as_str()))
        && m.get("oldText").is_some_and(is_string)
        && m.get("newText").is_some_and(is_string)
        && m.get("n").is_none_or(|n| n.is_null() || is_int(n))
        && m.get("inner").is_none_or(|i| i.is_null() || inner_ok(i))
}

fn matches(v: &Value) -> bool {
    v.as_array()
        .is_some_and(|items| items.iter().all(element_ok))
}

// ---- generators -------------------------------------------------------------

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just("oldText".to_string()),
        3 => Just("newText".to_string()),
        1 => Just("n".to_string()),
        1 => Just("inner".to_string()),
        1 => Just("flag".to_string()),
        1 => Just("tags".to_string()),
        1 => "[a-zA-Z-]{0,4}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(json!(18446744073709551615u64)),
        Just(json!(1.5)),
        "[a-z \\n]{0,5}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A matching argument, then perhaps one change that may break it.
fn near_miss() -> impl Strategy<Value = Value> {
    let element = (
        "[a-z]{0,3}",
        "[a-z]{0,3}",
        prop::option::of(any::<i64>()),
        prop::option::of((any::<bool>(), prop::collection::vec("[a-z]{0,2}", 0..3))),
    )
        .prop_map(|(o, n, k, inner)| {
            let mut m = Map::new();
            m.insert("oldText".into(), o.into());
            m.insert("newText".into(), n.into());
            if let Some(k) = k {
                m.insert("n".into(), k.into());
            }
            if let Some((flag, tags)) = inner {
                m.insert("inner".into(), json!({"flag": flag, "tags": tags}));
            }
            Value::Object(m)
        });
    (
        prop::collection::vec(element, 0..4),
        0u8..8,
        key(),
        json_value(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(mut items, change, k, v, at)| {
            if !items.is_empty() {
                let i = at.index(items.len());
                if let Value::Object(m) = &mut items[i] {
                    match change {
                        0 => {
                            m.insert(k, v);
                        }
                        1 => {
                            m.remove(&k);
                        }
                        2 => {
                            if let Some(Value::Object(inner)) = m.get_mut("inner") {
                                inner.insert(k, v);
                            }
                        }
                        _ => {}
                    }
                }
            }
            Value::Array(items)
        })
}

fn decide(m: &mut Monitor, id: usize, edits: &Value) -> (Verdict, Rule, Reason) {
    let mut args = Map::new();
    args.insert("edits".into(), edits.clone());
    let e: Event = match serde_json::from_value(
        json!({"kind": "call", "id": format!("c{id}"), "time": 0, "tool": "edit", "args": args}),
    ) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    match m.step(&e) {
        Ok(StepOutput::Decision(d)) => (d.verdict, d.rule, d.reason),
        other => panic!("{other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_json_is_admitted_only_when_it_has_the_declared_shape(
        args in prop::collection::vec(prop_oneof![json_value(), near_miss()], 1..8)
    ) {
        let mut m = Monitor::new(policy()).expect("a valid policy");
        for (i, v) in args.iter().enumerate() {
            let (verdict, rule, reason) = decide(&mut m, i, v);
            if matches(v) {
                prop_assert_eq!(verdict, Verdict::Allow, "{} ({:?})", v, reason);
            } else {
                prop_assert_eq!(verdict, Verdict::Deny, "{}", v);
                prop_assert_eq!(rule, Rule::WellFormed, "{}", v);
                match reason {
                    Reason::IllTyped { param, .. } => prop_assert!(param.starts_with("edits"), "{}", param),
                    other => prop_assert!(false, "{:?} for {}", other, v),
                }
            }
        }
    }
}

#[test]
fn an_argument_nested_far_deeper_than_its_type_is_refused_at_the_first_level_it_does_not_declare() {
    let mut deep = json!("x");
    for _ in 0..1_000 {
        deep = json!([deep]);
    }
    // The check follows the declared type, so it stops at the first level
    // the type does not declare, however deep the rest goes.
    let v = json!([{"oldText": "a", "newText": "b", "inner": {"flag": true, "tags": [deep]}}]);
    let mut m = Monitor::new(policy()).expect("a valid policy");
    let (verdict, _, reason) = decide(&mut m, 0, &v);
    assert_eq!(verdict, Verdict::Deny);
    assert_eq!(
        reason,
        Reason::IllTyped {
            param: "edits[0].inner.tags".into(),
            expected: "list<string>".into(),
            got: "element 0 is array".into()
        }
    );
}
