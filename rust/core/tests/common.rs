//! Random policies and traces for the property tests.
#![allow(dead_code)]

use agenra_core::event::{Outcome, Report, Resolve, Task, TaskScope};
use agenra_core::label::{CategorySet, Label, LabelPattern};
use agenra_core::policy::{
    Agent, CallRule, FactRule, FlowEffect, FlowRule, Grant, Obligation, Param, PathKind, PathRule,
    Policy, Quota, ReceiveRule, ResourceLabel, RuleEffect, SinkUse, StepPattern, Tool,
};
use agenra_core::{
    ArgCond, ArgOp, Call, Cond, Decimal, Event, NamedCond, ParamType, Pattern, Quant, Value,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Property-test cases: `default`, or `AGENRA_PROPTEST_CASES` for a soak run.
pub fn cases(default: u32) -> u32 {
    std::env::var("AGENRA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub const TARGETS: [&str; 5] = ["/a/1", "/a/2", "/b1", "/c", "/secret/k"];

fn label() -> impl Strategy<Value = Label> {
    (0u8..3, 0u64..8, any::<bool>()).prop_map(|(s, c, t)| Label::new(s, CategorySet(c), t))
}

fn label_pattern() -> impl Strategy<Value = LabelPattern> {
    (proptest::option::of(0u8..3), 0u64..8, any::<bool>()).prop_map(|(m, c, u)| LabelPattern {
        min_sensitivity: m,
        any_category: CategorySet(c),
        untrusted: u,
    })
}

/// The parameters of every generated tool.
pub const PARAMS: [&str; 4] = ["target", "n", "to", "amount"];

fn param(name: &str, ty: ParamType, list: bool, optional: bool) -> Param {
    Param {
        name: name.into(),
        ty,
        list,
        optional,
        fields: Vec::new(),
    }
}

/// Which arguments a sink takes: all, or some.
fn sink_params() -> impl Strategy<Value = Option<Vec<usize>>> {
    prop_oneof![
        2 => Just(None),
        1 => Just(Some(vec![2])),
        1 => Just(Some(vec![1, 3])),
    ]
}

fn tool(i: usize) -> impl Strategy<Value = Tool> {
    (
        label(),
        proptest::collection::vec((0usize..2, sink_params()), 0..2),
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(move |(output, sinks, fact, sanitized)| {
            let mut sinks = sinks;
            sinks.sort_by_key(|s| s.0);
            sinks.dedup_by_key(|s| s.0);
            Tool {
                name: format!("t{i}"),
                params: vec![
                    param("target", ParamType::Str, false, false),
                    param("n", ParamType::Int, false, false),
                    param("to", ParamType::Str, true, false),
                    param("amount", ParamType::Decimal, false, true),
                ],
                resource: Some(0),
                sinks: sinks
                    .into_iter()
                    .map(|(sink, params)| SinkUse { sink, params })
                    .collect(),
                output,
                sanitizer: sanitized.then_some(0),
                facts: if fact {
                    vec![FactRule {
                        fact: 0,
                        when: None,
                    }]
                } else {
                    vec![]
                },
            }
        })
}

fn pattern() -> impl Strategy<Value = Option<Pattern>> {
    prop_oneof![
        Just(None),
        Just(None),
        Just(Some(Pattern::Prefix("/a".into()))),
        Just(Some(Pattern::Exact("/a/1".into()))),
        Just(Some(Pattern::Glob("/b*".into()))),
        Just(Some(Pattern::Glob("*".into()))),
    ]
}

fn test<P>(param: P, quant: Quant, op: ArgOp) -> Cond<P> {
    Cond::Test { param, quant, op }
}

fn dec(s: &str) -> Decimal {
    s.parse().expect("a decimal")
}

/// A condition on the generated parameters; `name` turns a parameter index
/// into the rule's parameter reference.
fn cond<P: Clone + std::fmt::Debug + 'static>(
    name: fn(usize) -> P,
) -> impl Strategy<Value = Cond<P>> {
    let leaf = prop_oneof![
        (0i64..5).prop_map(move |k| test(name(1), Quant::All, ArgOp::Le(Decimal::from(k)))),
        Just(test(name(0), Quant::All, ArgOp::InSet(0))),
        Just(test(name(2), Quant::Any, ArgOp::InSet(0))),
        Just(test(name(2), Quant::All, ArgOp::Prefix("/a".into()))),
        Just(test(
            name(2),
            Quant::All,
            ArgOp::Contains(Value::Str("/c".into()))
        )),
        Just(test(name(3), Quant::All, ArgOp::Gt(dec("2.5")))),
        Just(test(name(3), Quant::All, ArgOp::Eq(Value::Null))),
        Just(test(
            name(0),
            Quant::All,
            ArgOp::NotIn(vec![Value::Str("/c".into())])
        )),
        Just(Cond::Agent(vec![0])),
        // Per-element tests (`any x in to: ...`), also on a scalar (never
        // holds), and the forms `not OP` lowers to (docs/policy-language.md,
        // "General negation").
        Just(Cond::Each {
            param: name(2),
            quant: Quant::Any,
            body: Box::new(Cond::Or(vec![
                Cond::Elem(ArgOp::Prefix("/a".into())),
                Cond::Elem(ArgOp::InSet(0)),
            ])),
        }),
        Just(Cond::Each {
            param: name(2),
            quant: Quant::All,
            body: Box::new(Cond::And(vec![
                Cond::Not(Box::new(Cond::Elem(ArgOp::Eq(Value::Str("/c".into()))))),
                Cond::Or(vec![
                    Cond::Elem(ArgOp::Suffix("1".into())),
                    Cond::Agent(vec![0]),
                ]),
            ])),
        }),
        Just(Cond::Each {
            param: name(0),
            quant: Quant::Any,
            body: Box::new(Cond::Elem(ArgOp::Prefix("/".into()))),
        }),
        Just(Cond::Not(Box::new(test(
            name(2),
            Quant::Any,
            ArgOp::Suffix("1".into())
        )))),
        Just(Cond::And(vec![
            test(name(3), Quant::All, ArgOp::Ne(Value::Null)),
            Cond::Not(Box::new(test(name(3), Quant::All, ArgOp::Gt(dec("2.5"))))),
        ])),
    ];
    leaf.prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Cond::Or),
            proptest::collection::vec(inner, 0..3).prop_map(Cond::And),
        ]
    })
}

pub fn arg_cond() -> impl Strategy<Value = ArgCond> {
    cond(|i| i)
}

pub fn named_cond() -> impl Strategy<Value = NamedCond> {
    cond(|i| PARAMS[i].to_string())
}

fn arg_tests() -> impl Strategy<Value = Vec<ArgCond>> {
    prop_oneof![
        3 => Just(vec![]),
        2 => proptest::collection::vec(arg_cond(), 1..3),
    ]
}

fn grant(i: usize, agents: usize) -> impl Strategy<Value = Grant> {
    (
        prop_oneof![2 => Just(0), 1 => 0..agents],
        0usize..3,
        pattern(),
        arg_tests(),
        prop_oneof![(0u64..4).prop_map(Quota::Limited), Just(Quota::Unlimited)],
        prop::bool::weighted(0.25),
        prop::option::weighted(0.2, 0u64..30),
        any::<bool>(),
    )
        .prop_map(
            move |(agent, tool, resource, args, quota, approval, expires_at, disc)| Grant {
                name: format!("g{i}"),
                agent,
                tool,
                resource,
                args,
                quota,
                approval,
                expires_at,
                discovers: disc.then_some(0),
            },
        )
}

/// A policy with only tools, agents and grants (what the ledger spec covers).
pub fn ledger_policy() -> impl Strategy<Value = Policy> {
    (1usize..4)
        .prop_flat_map(|agents| {
            (
                Just(agents),
                (tool(0), tool(1), tool(2)),
                proptest::collection::vec(0usize..8, 2..10).prop_flat_map(move |v| {
                    v.into_iter()
                        .enumerate()
                        .map(|(i, _)| grant(i, agents))
                        .collect::<Vec<_>>()
                }),
            )
        })
        .prop_map(|(agents, (t0, t1, t2), grants)| {
            let mut p = Policy::empty("random");
            p.levels = vec!["public".into(), "internal".into(), "secret".into()];
            p.categories = vec!["a".into(), "b".into(), "c".into()];
            p.sinks = vec!["net".into(), "mail".into()];
            p.sets = vec!["found".into()];
            p.facts = vec!["ok".into()];
            // A trusted sanitizer some tools apply: removes category `b`,
            // caps at `internal`, vouches for trust.
            p.sanitizers = vec![agenra_core::Sanitizer {
                name: "clean".into(),
                removes: CategorySet::single(1),
                max_sensitivity: Some(1),
                trusts: true,
            }];
            p.tools = vec![t0, t1, t2];
            for a in 1..agents {
                p.agents.push(Agent {
                    name: format!("d{a}"),
                    parent: Some(a - 1),
                    scope: None,
                    own_context: false,
                });
            }
            p.grants = grants;
            p
        })
}

fn step_pattern() -> impl Strategy<Value = StepPattern> {
    (
        proptest::option::of(prop_oneof![
            Just("t0".to_string()),
            Just("t*".to_string()),
            Just("t2".to_string())
        ]),
        proptest::option::of(0usize..2),
        proptest::option::of(label_pattern()),
        prop::option::weighted(0.3, named_cond()),
    )
        .prop_map(|(tool, sink, reads, when)| StepPattern {
            tool,
            sink,
            reads,
            when,
        })
}

fn effect() -> impl Strategy<Value = RuleEffect> {
    prop_oneof![Just(RuleEffect::Deny), Just(RuleEffect::Pause)]
}

/// A policy with every kind of rule.
pub fn full_policy() -> impl Strategy<Value = Policy> {
    let flow = (
        0usize..2,
        0u8..3,
        label_pattern(),
        label(),
        prop::option::weighted(0.5, named_cond()),
    )
        .prop_map(|(sink, effect, pat, ceiling, when)| FlowRule {
            name: "f".into(),
            sink,
            effect: match effect {
                0 => FlowEffect::Deny(pat),
                1 => FlowEffect::Pause(pat),
                _ => FlowEffect::Allow(ceiling),
            },
            when: when.unwrap_or(Cond::TRUE),
        });
    let call_rule = (effect(), 0usize..3, arg_cond()).prop_map(|(effect, tool, when)| CallRule {
        name: "c".into(),
        effect,
        tool,
        when,
    });
    let path = (
        effect(),
        prop_oneof![
            proptest::collection::vec(step_pattern(), 1..4).prop_map(PathKind::Sequence),
            (0u64..3, step_pattern()).prop_map(|(max, step)| PathKind::AtMost { max, step }),
        ],
        proptest::option::of(step_pattern()),
    )
        .prop_map(|(effect, kind, reset)| PathRule {
            name: "p".into(),
            effect,
            kind,
            reset,
        });
    let obligation = (
        effect(),
        prop_oneof![Just("t1"), Just("t*")],
        proptest::option::of(Just("t0".to_string())),
    )
        .prop_map(|(effect, before, since)| Obligation {
            name: "o".into(),
            effect,
            fact: 0,
            before: before.into(),
            since,
        });
    (
        ledger_policy(),
        proptest::collection::vec(flow, 0..4),
        proptest::collection::vec(path, 0..3),
        prop_oneof![
            2 => Just(vec![]),
            1 => proptest::collection::vec(obligation, 1..2),
        ],
        label(),
        proptest::collection::vec(call_rule, 0..2),
        (any::<bool>(), any::<bool>(), 0u8..4),
        proptest::collection::vec((0usize..3, 0u8..3, label_pattern(), label()), 0..2),
        proptest::collection::vec((0usize..3, 0usize..4, 0u8..4), 0..5),
    )
        .prop_map(
            |(
                mut p,
                flows,
                paths,
                obligations,
                secret,
                calls,
                (by_value, seeds, own),
                receive,
                modes,
            )| {
                p.provenance_by_value = by_value;
                // Per-parameter provenance (`provenance MODE on PARAM`).
                let mut modes: Vec<_> = modes
                    .into_iter()
                    .filter(|(t, _, _)| *t < p.tools.len())
                    .map(|(tool, param, m)| agenra_core::policy::ParamProvenance {
                        tool,
                        param,
                        mode: [
                            agenra_core::policy::ProvenanceMode::Off,
                            agenra_core::policy::ProvenanceMode::Exact,
                            agenra_core::policy::ProvenanceMode::Words,
                            agenra_core::policy::ProvenanceMode::Tokens,
                        ][m as usize],
                    })
                    .collect();
                modes.sort_by_key(|m| (m.tool, m.param));
                modes.dedup_by_key(|m| (m.tool, m.param));
                p.param_provenance = modes;
                // Some delegates keep their own context.
                for (i, a) in p.agents.iter_mut().enumerate().skip(1) {
                    a.own_context = own & (1 << (i % 2)) != 0;
                }
                let agents = p.agents.len();
                p.receive_rules = receive
                    .into_iter()
                    .enumerate()
                    .map(|(i, (agent, effect, pat, ceiling))| ReceiveRule {
                        name: format!("r{i}"),
                        agent: agent % agents,
                        effect: match effect {
                            0 => FlowEffect::Deny(pat),
                            1 => FlowEffect::Pause(pat),
                            _ => FlowEffect::Allow(ceiling),
                        },
                        when: Cond::TRUE,
                    })
                    .collect();
                p.task_seeds = if seeds { vec![0] } else { vec![] };
                p.call_rules = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut c)| {
                        c.name = format!("c{i}");
                        c
                    })
                    .collect();
                p.flow_rules = flows
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut f)| {
                        f.name = format!("f{i}");
                        f
                    })
                    .collect();
                p.path_rules = paths
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut r)| {
                        r.name = format!("p{i}");
                        r
                    })
                    .collect();
                p.obligations = obligations
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut o)| {
                        o.name = format!("o{i}");
                        o
                    })
                    .collect();
                p.resources = vec![ResourceLabel {
                    pattern: Pattern::Prefix("/secret".into()),
                    label: secret,
                }];
                p
            },
        )
}

/// An abstract event: indexes are resolved against the calls made so far.
#[derive(Clone, Debug)]
pub enum Step {
    Call {
        tool: usize,
        agent: usize,
        target: usize,
        n: i64,
        /// Recipients (indexes into `TARGETS`).
        to: Vec<usize>,
        /// 0: absent, 1: null, 2: "3.50" as a string, 3: 1.5 as a number, 4: 7.
        amount: u8,
        /// Per parameter (index into `PARAMS`; `PARAMS.len()`: every
        /// parameter): the calls it came from.
        lineage: Vec<(usize, Vec<usize>)>,
        dt: u64,
    },
    Result {
        call: usize,
        status: u8,
        discovered: Vec<usize>,
    },
    Approve {
        call: usize,
    },
    Reject {
        call: usize,
    },
    /// A task whose text names some targets and an amount; it may seed the
    /// set and open a scope.
    Task {
        words: Vec<usize>,
        seed: Vec<usize>,
        scope: u8,
    },
}

pub fn steps(agents: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0usize..3, prop_oneof![3 => Just(0), 1 => 0..agents.max(1)], 0usize..TARGETS.len(), 0i64..6,
              proptest::collection::vec(0usize..TARGETS.len(), 0..3), 0u8..5,
              proptest::collection::vec((0usize..=PARAMS.len(), proptest::collection::vec(0usize..32, 0..3)), 0..3),
              0u64..4)
            .prop_map(|(tool, agent, target, n, to, amount, lineage, dt)| Step::Call { tool, agent, target, n, to, amount, lineage, dt }),
        3 => (0usize..32, 0u8..3, proptest::collection::vec(0usize..TARGETS.len(), 0..2))
            .prop_map(|(call, status, discovered)| Step::Result { call, status, discovered }),
        2 => (0usize..32).prop_map(|call| Step::Approve { call }),
        1 => (0usize..32).prop_map(|call| Step::Reject { call }),
        1 => (proptest::collection::vec(0usize..TARGETS.len(), 0..3),
              proptest::collection::vec(0usize..TARGETS.len(), 0..2), 0u8..6)
            .prop_map(|(words, seed, scope)| Step::Task { words, seed, scope }),
    ];
    proptest::collection::vec(step, 0..40)
}

/// Turns abstract steps into concrete events for `policy`.
pub fn events(policy: &Policy, steps: &[Step]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    let mut time = 0;
    let pick = |calls: &Vec<String>, i: usize| calls.get(i % calls.len().max(1)).cloned();
    // Approvals and rejections mostly name one of the last few calls, which
    // are the ones likely to be paused.
    let recent = |calls: &Vec<String>, i: usize| {
        let back = if i.is_multiple_of(4) { i } else { i % 3 };
        calls
            .len()
            .checked_sub(1 + back % calls.len().max(1))
            .and_then(|j| calls.get(j).cloned())
    };
    for s in steps {
        match s {
            Step::Call {
                tool,
                agent,
                target,
                n,
                to,
                amount,
                lineage,
                dt,
            } => {
                time += dt;
                let id = format!("c{}", calls.len());
                let mut args = serde_json::Map::new();
                args.insert("target".into(), TARGETS[*target].into());
                args.insert("n".into(), (*n).into());
                args.insert(
                    "to".into(),
                    to.iter()
                        .map(|i| serde_json::Value::from(TARGETS[*i]))
                        .collect(),
                );
                match amount {
                    0 => None,
                    1 => args.insert("amount".into(), serde_json::Value::Null),
                    2 => args.insert("amount".into(), "3.50".into()),
                    3 => args.insert("amount".into(), 1.5.into()),
                    _ => args.insert("amount".into(), 7.into()),
                };
                let mut lin = BTreeMap::new();
                for (param, sources) in lineage {
                    let ids: Vec<String> =
                        sources.iter().filter_map(|i| pick(&calls, *i)).collect();
                    // Lineage on every parameter: only absent ones read nothing.
                    let params = match PARAMS.get(*param) {
                        Some(p) => std::slice::from_ref(p),
                        None => &PARAMS[..3],
                    };
                    for p in params {
                        lin.insert(p.to_string(), ids.clone());
                    }
                }
                let agent = policy
                    .agents
                    .get(*agent % policy.agents.len())
                    .map(|a| a.name.clone());
                out.push(Event::Call(Call {
                    session: None,
                    id: id.clone(),
                    time,
                    agent,
                    tool: format!("t{tool}"),
                    args,
                    lineage: lin,
                    inferred: BTreeMap::new(),
                }));
                calls.push(id);
            }
            Step::Result {
                call,
                status,
                discovered,
            } => {
                if let Some(id) = recent(&calls, *call) {
                    out.push(Event::Result(Report {
                        session: None,
                        call: id,
                        time: None,
                        status: match status {
                            0 => Outcome::Succeeded,
                            1 => Outcome::Failed,
                            _ => Outcome::Unknown,
                        },
                        output: serde_json::json!({
                            "found": discovered.iter().map(|i| TARGETS[*i]).collect::<Vec<_>>(),
                            "amount": 7,
                        }),
                        discovered: discovered.iter().map(|i| TARGETS[*i].to_string()).collect(),
                    }));
                }
            }
            Step::Approve { call } => {
                if let Some(id) = recent(&calls, *call) {
                    out.push(Event::Approve(Resolve {
                        session: None,
                        call: id,
                        time: None,
                    }));
                }
            }
            Step::Task { words, seed, scope } => {
                let id = format!("k{}", calls.len());
                let mut text = String::from("please handle");
                for w in words {
                    text.push(' ');
                    text.push_str(TARGETS[*w]);
                }
                text.push_str(" for 3.5 now.");
                let mut sets = BTreeMap::new();
                if !seed.is_empty() {
                    sets.insert(
                        "found".to_string(),
                        seed.iter().map(|i| TARGETS[*i].to_string()).collect(),
                    );
                }
                let scope = match scope {
                    0 => Some(TaskScope {
                        forbid: vec!["t2".into()],
                        ..TaskScope::default()
                    }),
                    1 => Some(TaskScope {
                        tools: Some(vec!["t0".into(), "t1".into()]),
                        ..TaskScope::default()
                    }),
                    2 => Some(TaskScope {
                        resources: Some(vec!["/a*".into()]),
                        forbid_resources: vec!["/a/2".into()],
                        ..TaskScope::default()
                    }),
                    _ => None,
                };
                out.push(Event::Task(Task {
                    session: None,
                    id: id.clone(),
                    time: None,
                    text,
                    sets,
                    scope,
                }));
                calls.push(id);
            }
            Step::Reject { call } => {
                if let Some(id) = recent(&calls, *call) {
                    out.push(Event::Reject(Resolve {
                        session: None,
                        call: id,
                        time: None,
                    }));
                }
            }
        }
    }
    out
}

/// The object parameter [`object_policy`] adds to every tool: an optional
/// list of `{old: string, new: string, n?: int}` (`docs/semantics.md`,
/// "Objects").
pub fn edits_param() -> Param {
    Param {
        name: "edits".into(),
        ty: ParamType::Object,
        list: true,
        optional: true,
        fields: vec![
            param("old", ParamType::Str, false, false),
            param("new", ParamType::Str, false, false),
            param("n", ParamType::Int, false, true),
        ],
    }
}

fn field<P>(param: P, quant: Quant, name: &str, op: ArgOp) -> Cond<P> {
    test(
        param,
        quant,
        ArgOp::Field {
            path: vec![name.into()],
            op: Box::new(op),
        },
    )
}

/// A test on the `edits` parameter (index 4, or its name).
fn edits_cond<P: Clone + std::fmt::Debug + 'static>(p: P) -> impl Strategy<Value = Cond<P>> {
    let (a, b, c, d, e, f) = (p.clone(), p.clone(), p.clone(), p.clone(), p.clone(), p);
    prop_oneof![
        Just(field(a, Quant::Any, "new", ArgOp::Prefix("/a".into()))),
        Just(field(b, Quant::All, "old", ArgOp::InSet(0))),
        (0i64..3).prop_map(move |k| field(c.clone(), Quant::All, "n", ArgOp::Le(Decimal::from(k)))),
        Just(field(d, Quant::Any, "n", ArgOp::Eq(Value::Null))),
        Just(test(e, Quant::All, ArgOp::Eq(Value::Null))),
        Just(field(
            f,
            Quant::All,
            "new",
            ArgOp::Contains(Value::Str("/c".into()))
        )),
    ]
}

/// [`full_policy`] with the object parameter [`edits_param`] on every tool
/// and tests on its fields joined to some grants (`and`), call rules and
/// flow rules (`or`, so that they sometimes fire).
pub fn object_policy() -> impl Strategy<Value = Policy> {
    (
        full_policy(),
        proptest::collection::vec(proptest::option::of(edits_cond(4usize)), 8),
        proptest::collection::vec(proptest::option::of(edits_cond("edits".to_string())), 8),
    )
        .prop_map(|(mut p, indexed, named)| {
            for t in &mut p.tools {
                t.params.push(edits_param());
            }
            for (i, g) in p.grants.iter_mut().enumerate() {
                if let Some(c) = &indexed[i % indexed.len()] {
                    g.args.push(c.clone());
                }
            }
            for (i, r) in p.call_rules.iter_mut().enumerate() {
                if let Some(c) = &indexed[(i + 3) % indexed.len()] {
                    r.when = Cond::Or(vec![r.when.clone(), c.clone()]);
                }
            }
            for (i, r) in p.flow_rules.iter_mut().enumerate() {
                if let Some(c) = &named[i % named.len()] {
                    r.when = Cond::Or(vec![r.when.clone(), c.clone()]);
                }
            }
            p
        })
}

/// [`events`] with an `edits` argument on the calls, chosen by `shapes`
/// (cycled): absent, null, well-formed lists (from the call's `to`), and
/// ill-typed ones (an extra field, a wrong field type, a missing field, an
/// object for the list).
pub fn object_events(policy: &Policy, steps: &[Step], shapes: &[u8]) -> Vec<Event> {
    let mut out = events(policy, steps);
    let mut i = 0;
    for e in &mut out {
        let Event::Call(c) = e else { continue };
        let shape = shapes.get(i % shapes.len().max(1)).copied().unwrap_or(0);
        i += 1;
        let to: Vec<serde_json::Value> = match c.args.get("to") {
            Some(serde_json::Value::Array(v)) => v.clone(),
            _ => vec![],
        };
        let one = |k: usize, t: &serde_json::Value| {
            let mut m = serde_json::Map::new();
            m.insert("old".into(), t.clone());
            m.insert("new".into(), TARGETS[k % TARGETS.len()].into());
            if k.is_multiple_of(2) {
                m.insert("n".into(), (k as i64 % 3).into());
            }
            m
        };
        let list =
            |f: &dyn Fn(usize, serde_json::Map<String, serde_json::Value>) -> serde_json::Value| {
                serde_json::Value::Array(
                    to.iter()
                        .enumerate()
                        .map(|(k, t)| f(k, one(k + shape as usize, t)))
                        .collect(),
                )
            };
        let value = match shape % 8 {
            0 => continue,
            1 => serde_json::Value::Null,
            2 | 3 => list(&|_, m| serde_json::Value::Object(m)),
            4 => list(&|k, mut m| {
                if k == 0 {
                    m.insert("extra".into(), true.into());
                }
                serde_json::Value::Object(m)
            }),
            5 => list(&|k, mut m| {
                if k == 0 {
                    m.insert("new".into(), 5.into());
                }
                serde_json::Value::Object(m)
            }),
            6 => list(&|k, mut m| {
                if k == 0 {
                    m.remove("old");
                }
                serde_json::Value::Object(m)
            }),
            _ => serde_json::Value::Object(one(0, &"x".into())),
        };
        c.args.insert("edits".into(), value);
    }
    out
}

/// A decimal written in a test.
pub fn d(s: &str) -> Decimal {
    s.parse().expect("a decimal")
}

/// The reference's request for a generated call.
pub fn spec_request(policy: &Policy, call: &Call) -> agenra_core::spec::Request {
    let tool = policy.tool_id(&call.tool).expect("generated tools exist");
    agenra_core::spec::Request {
        agent: call
            .agent
            .as_deref()
            .and_then(|a| policy.agent_id(a))
            .unwrap_or(0),
        tool,
        args: policy.tools[tool]
            .params
            .iter()
            .map(|p| match call.args.get(&p.name) {
                None | Some(serde_json::Value::Null) => Value::Null,
                Some(v) => Value::from_json_typed(v, p.ty, p.list).expect("well-typed"),
            })
            .collect(),
        time: call.time,
    }
}

/// The reference's event for a generated event (a task seeds set 0 with
/// its `found` values).
pub fn spec_event(policy: &Policy, e: &Event) -> agenra_core::spec::Event {
    use agenra_core::spec::Event as S;
    match e {
        Event::Call(c) => S::Call {
            id: c.id.clone(),
            req: spec_request(policy, c),
        },
        Event::Approve(a) => S::Approve { id: a.call.clone() },
        Event::Reject(r) => S::Reject { id: r.call.clone() },
        Event::Result(r) => match r.status {
            Outcome::Succeeded => S::Succeeded {
                id: r.call.clone(),
                discovered: r.discovered.clone(),
            },
            Outcome::Failed => S::Failed { id: r.call.clone() },
            Outcome::Unknown => S::Unknown { id: r.call.clone() },
        },
        Event::Task(t) => S::Seed {
            set: 0,
            values: t.sets.get("found").cloned().unwrap_or_default(),
        },
    }
}

/// Runs `events` on a session with compact `window` (`None`: whole graph),
/// snapshots it after the first `cut` of them, restores the snapshot, and
/// checks that the restored session answers every later event (output and
/// ledger hash) exactly as the original does (`Session::snapshot`).
pub fn snapshot_agrees(
    policy: &Policy,
    events: &[Event],
    cut: usize,
    window: Option<usize>,
) -> Result<(), TestCaseError> {
    use agenra_core::monitor::{CompiledPolicy, Session, SessionOptions};
    let options = || window.map_or_else(SessionOptions::default, SessionOptions::compact);
    let run = |session: &mut Session, events: &[Event]| -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let out = session.step(e);
                format!("{out:?} ledger {}", session.state().ledger_hash())
            })
            .collect()
    };
    let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
    let mut original = compiled.session_with(options());
    let cut = cut.min(events.len());
    run(&mut original, &events[..cut]);
    let bytes = original.snapshot().expect("encodes");
    let mut restored = Session::from_snapshot(&compiled, options(), &bytes)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(restored.state().seq, original.state().seq);
    prop_assert_eq!(
        restored.state().ledger_hash(),
        original.state().ledger_hash()
    );
    let again = restored.snapshot().expect("encodes");
    let mut twice = Session::from_snapshot(&compiled, options(), &again)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let expected = run(&mut original, &events[cut..]);
    prop_assert_eq!(&run(&mut restored, &events[cut..]), &expected);
    prop_assert_eq!(&run(&mut twice, &events[cut..]), &expected);
    Ok(())
}
