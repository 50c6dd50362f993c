//! Random policies and traces for the property tests.
#![allow(dead_code)]

use agenra_core::event::{Outcome, Report, Resolve};
use agenra_core::label::{CategorySet, Label, LabelPattern};
use agenra_core::policy::{
    Agent, FactRule, FlowEffect, FlowRule, Grant, NamedArgTest, Obligation, Param, PathKind,
    PathRule, Policy, Quota, ResourceLabel, RuleEffect, StepPattern, Tool,
};
use agenra_core::{ArgOp, ArgPredicate, Call, Event, ParamType, Pattern};
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

fn tool(i: usize) -> impl Strategy<Value = Tool> {
    (
        label(),
        proptest::collection::vec(0usize..2, 0..2),
        any::<bool>(),
    )
        .prop_map(move |(output, sinks, fact)| {
            let mut sinks = sinks;
            sinks.sort_unstable();
            sinks.dedup();
            Tool {
                name: format!("t{i}"),
                params: vec![
                    Param {
                        name: "target".into(),
                        ty: ParamType::Str,
                    },
                    Param {
                        name: "n".into(),
                        ty: ParamType::Int,
                    },
                ],
                resource: Some(0),
                sinks,
                output,
                sanitizer: None,
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
        Just(Some(Pattern::Prefix("/a".into()))),
        Just(Some(Pattern::Exact("/a/1".into()))),
        Just(Some(Pattern::Glob("/b*".into()))),
        Just(Some(Pattern::Glob("*".into()))),
    ]
}

fn arg_tests() -> impl Strategy<Value = Vec<ArgPredicate>> {
    prop_oneof![
        Just(vec![]),
        (0i64..5).prop_map(|k| vec![ArgPredicate {
            param: 1,
            op: ArgOp::Le(k)
        }]),
        Just(vec![ArgPredicate {
            param: 0,
            op: ArgOp::InSet(0)
        }]),
    ]
}

fn grant(i: usize, agents: usize) -> impl Strategy<Value = Grant> {
    (
        0..agents,
        0usize..3,
        pattern(),
        arg_tests(),
        prop_oneof![(0u64..3).prop_map(Quota::Limited), Just(Quota::Unlimited)],
        prop::bool::weighted(0.25),
        proptest::option::of(0u64..30),
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
                proptest::collection::vec(0usize..8, 1..8).prop_flat_map(move |v| {
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
            p.tools = vec![t0, t1, t2];
            for a in 1..agents {
                p.agents.push(Agent {
                    name: format!("d{a}"),
                    parent: Some(a - 1),
                    scope: None,
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
    )
        .prop_map(|(tool, sink, reads)| StepPattern { tool, sink, reads })
}

fn effect() -> impl Strategy<Value = RuleEffect> {
    prop_oneof![Just(RuleEffect::Deny), Just(RuleEffect::Pause)]
}

/// A policy with every kind of rule.
pub fn full_policy() -> impl Strategy<Value = Policy> {
    let flow = (
        0usize..2,
        any::<bool>(),
        label_pattern(),
        label(),
        proptest::option::of(0i64..5),
    )
        .prop_map(|(sink, deny, pat, ceiling, when)| FlowRule {
            name: "f".into(),
            sink,
            effect: if deny {
                FlowEffect::Deny(pat)
            } else {
                FlowEffect::Allow(ceiling)
            },
            when: when
                .map(|k| {
                    vec![NamedArgTest {
                        param: "n".into(),
                        op: ArgOp::Le(k),
                    }]
                })
                .unwrap_or_default(),
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
        proptest::collection::vec(obligation, 0..2),
        label(),
    )
        .prop_map(|(mut p, flows, paths, obligations, secret)| {
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
        })
}

/// An abstract event: indexes are resolved against the calls made so far.
#[derive(Clone, Debug)]
pub enum Step {
    Call {
        tool: usize,
        agent: usize,
        target: usize,
        n: i64,
        lineage: Option<Vec<usize>>,
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
}

pub fn steps(agents: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0usize..3, 0..agents.max(1), 0usize..TARGETS.len(), 0i64..6,
              proptest::option::of(proptest::collection::vec(0usize..32, 0..3)), 0u64..4)
            .prop_map(|(tool, agent, target, n, lineage, dt)| Step::Call { tool, agent, target, n, lineage, dt }),
        3 => (0usize..32, 0u8..3, proptest::collection::vec(0usize..TARGETS.len(), 0..2))
            .prop_map(|(call, status, discovered)| Step::Result { call, status, discovered }),
        1 => (0usize..32).prop_map(|call| Step::Approve { call }),
        1 => (0usize..32).prop_map(|call| Step::Reject { call }),
    ];
    proptest::collection::vec(step, 0..40)
}

/// Turns abstract steps into concrete events for `policy`.
pub fn events(policy: &Policy, steps: &[Step]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    let mut time = 0;
    let pick = |calls: &Vec<String>, i: usize| calls.get(i % calls.len().max(1)).cloned();
    for s in steps {
        match s {
            Step::Call {
                tool,
                agent,
                target,
                n,
                lineage,
                dt,
            } => {
                time += dt;
                let id = format!("c{}", calls.len());
                let mut args = serde_json::Map::new();
                args.insert("target".into(), TARGETS[*target].into());
                args.insert("n".into(), (*n).into());
                let mut lin = BTreeMap::new();
                if let Some(l) = lineage {
                    let ids: Vec<String> = l.iter().filter_map(|i| pick(&calls, *i)).collect();
                    lin.insert("target".to_string(), ids.clone());
                    lin.insert("n".to_string(), ids);
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
                if let Some(id) = pick(&calls, *call) {
                    out.push(Event::Result(Report {
                        session: None,
                        call: id,
                        time: None,
                        status: match status {
                            0 => Outcome::Succeeded,
                            1 => Outcome::Failed,
                            _ => Outcome::Unknown,
                        },
                        output: serde_json::Value::Null,
                        discovered: discovered.iter().map(|i| TARGETS[*i].to_string()).collect(),
                    }));
                }
            }
            Step::Approve { call } => {
                if let Some(id) = pick(&calls, *call) {
                    out.push(Event::Approve(Resolve {
                        session: None,
                        call: id,
                        time: None,
                    }));
                }
            }
            Step::Reject { call } => {
                if let Some(id) = pick(&calls, *call) {
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
