//! Generators: small alphabets and ranges, so that generated texts, globs,
//! numbers, grants and calls collide often (matches, ties, exhausted quotas,
//! expiry at the boundary, re-used call ids).

use agenra_core::ledger::Ledger;
use agenra_core::policy::{Agent, Grant, Quota, Tool};
use agenra_core::spec::{Checks, Event, Request, State};
use agenra_core::{ArgCond, ArgOp, Cond, Decimal, Label, Pattern, Policy, Quant, Value};
use agenra_lean::wire::decimal_from_parts;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Text over `a`, `b`, `/`, `.` and one non-ASCII letter (so that matching
/// on characters and on bytes differ).
pub fn text() -> impl Strategy<Value = String> {
    "[ab/.é]{0,6}"
}

/// Globs over the same alphabet plus `*` and `?`.
pub fn glob() -> impl Strategy<Value = String> {
    "[ab/.é*?]{0,6}"
}

pub fn pattern() -> impl Strategy<Value = Pattern> {
    prop_oneof![
        text().prop_map(Pattern::Exact),
        "[ab/.é]{0,3}".prop_map(Pattern::Prefix),
        glob().prop_map(Pattern::Glob),
    ]
}

/// Decimals with up to 3 digits after the point, small or near the limits.
pub fn decimal() -> impl Strategy<Value = Decimal> {
    prop_oneof![
        // Small mantissas at scales 0–2: numbers near each other at
        // different scales (1.5 vs 2, 0.25 vs 0.3), where comparing
        // mantissas without scaling goes wrong.
        4 => (-30i128..30, 0u32..3),
        2 => (-300i128..300, 0u32..4),
        1 => (prop_oneof![Just(-1i128), Just(1)], 0u32..19),
        1 => (prop_oneof![Just(99_999_999_999_999_999_999i128), Just(-99_999_999_999_999_999_999)], 0u32..3),
    ]
    .prop_map(|(m, s)| decimal_from_parts(m, s).expect("within Rust's decimal limits"))
}

/// A comparison (`<`, `<=`, `>`, `>=`) and a number near its bound: both
/// with mantissas in -30..30 at scales 0–2 (an integer when the scale is 0
/// and the coin says so), so that the two often lie close together at
/// different scales.
pub fn comparison() -> impl Strategy<Value = (ArgOp, Value)> {
    let near =
        || (-30i128..30, 0u32..3).prop_map(|(m, s)| decimal_from_parts(m, s).expect("small"));
    (0..4, near(), near(), any::<bool>()).prop_map(|(which, bound, x, as_int)| {
        let op = match which {
            0 => ArgOp::Lt(bound),
            1 => ArgOp::Le(bound),
            2 => ArgOp::Gt(bound),
            _ => ArgOp::Ge(bound),
        };
        let text = x.to_string();
        let v = match text.parse::<i64>() {
            Ok(i) if as_int => Value::Int(i),
            _ => Value::Decimal(x),
        };
        (op, v)
    })
}

/// A scalar value (never a list).
pub fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => "[ab]{0,3}".prop_map(Value::Str),
        3 => (-3i64..4).prop_map(Value::Int),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => decimal().prop_map(Value::Decimal),
    ]
}

/// An argument: a scalar, `null`, or a list of scalars (with the odd `null`
/// inside, which typing forbids but the functions must still agree on).
pub fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        5 => scalar(),
        1 => Just(Value::Null),
        2 => prop::collection::vec(prop_oneof![6 => scalar(), 1 => Just(Value::Null)], 0..4).prop_map(Value::List),
    ]
}

/// Operators with operands a policy can write (scalars, `null` for the two
/// null tests, sets 0..3 of which some do not exist).
pub fn arg_op() -> impl Strategy<Value = ArgOp> {
    prop_oneof![
        scalar().prop_map(ArgOp::Eq),
        Just(ArgOp::Eq(Value::Null)),
        scalar().prop_map(ArgOp::Ne),
        Just(ArgOp::Ne(Value::Null)),
        prop::collection::vec(scalar(), 0..3).prop_map(ArgOp::In),
        prop::collection::vec(scalar(), 0..3).prop_map(ArgOp::NotIn),
        "[ab]{0,2}".prop_map(ArgOp::Prefix),
        "[ab]{0,2}".prop_map(ArgOp::Suffix),
        pattern().prop_map(ArgOp::Matches),
        scalar().prop_map(ArgOp::Contains),
        decimal().prop_map(ArgOp::Lt),
        decimal().prop_map(ArgOp::Le),
        decimal().prop_map(ArgOp::Gt),
        decimal().prop_map(ArgOp::Ge),
        (0usize..3).prop_map(ArgOp::InSet),
        (0usize..3).prop_map(ArgOp::NotInSet),
    ]
}

/// Any operator, including operands no policy can write (lists, `null` in
/// lists): for comparing implementations, not for the oracle.
pub fn any_arg_op() -> impl Strategy<Value = ArgOp> {
    prop_oneof![
        4 => arg_op(),
        1 => value().prop_map(ArgOp::Eq),
        1 => value().prop_map(ArgOp::Ne),
        1 => value().prop_map(ArgOp::Contains),
        1 => prop::collection::vec(value(), 0..3).prop_map(ArgOp::In),
    ]
}

pub fn quant() -> impl Strategy<Value = Quant> {
    prop_oneof![Just(Quant::All), Just(Quant::Any)]
}

/// Discovered sets: up to two sets of short strings.
pub fn sets() -> impl Strategy<Value = Vec<BTreeSet<String>>> {
    prop::collection::vec(prop::collection::btree_set("[ab]{0,2}", 0..4), 0..3)
}

/// Conditions over parameters 0..3 (a call may have fewer) and agents 0..3.
pub fn arg_cond() -> impl Strategy<Value = ArgCond> {
    let leaf = prop_oneof![
        4 => (0usize..3, quant(), arg_op()).prop_map(|(param, quant, op)| Cond::Test { param, quant, op }),
        1 => prop::collection::vec(0usize..3, 0..3).prop_map(Cond::Agent),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Cond::And),
            prop::collection::vec(inner, 0..3).prop_map(Cond::Or),
        ]
    })
}

/// Per-element tests (`any x in L: BODY`, issue #27): bodies mix element
/// tests, argument tests and agent tests with `!`, `and` and `or`, inside
/// conditions like `arg_cond`'s. Only the Rust spec evaluates them (the
/// Lean model has no per-element test).
pub fn each_cond() -> impl Strategy<Value = ArgCond> {
    let body_leaf = prop_oneof![
        3 => arg_op().prop_map(Cond::Elem),
        1 => (0usize..3, quant(), arg_op()).prop_map(|(param, quant, op)| Cond::Test { param, quant, op }),
        1 => prop::collection::vec(0usize..3, 0..3).prop_map(Cond::Agent),
    ];
    let body = body_leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Cond::And),
            prop::collection::vec(inner, 0..3).prop_map(Cond::Or),
        ]
    });
    let each = (0usize..4, quant(), body).prop_map(|(param, quant, body)| Cond::Each {
        param,
        quant,
        body: Box::new(body),
    });
    let leaf = prop_oneof![
        3 => each,
        1 => arg_op().prop_map(Cond::Elem),
        1 => (0usize..3, quant(), arg_op()).prop_map(|(param, quant, op)| Cond::Test { param, quant, op }),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Cond::And),
            prop::collection::vec(inner, 0..3).prop_map(Cond::Or),
        ]
    })
}

pub fn quota() -> impl Strategy<Value = Quota> {
    prop_oneof![3 => (0u64..3).prop_map(Quota::Limited), 1 => Just(Quota::Unlimited)]
}

/// A well-formed policy shape: 1–3 tools (resource parameter 0, 1 or none),
/// 1–3 agents (agent 0 is `main`, every other one delegated by a lower
/// one), 0–6 grants, 0–2 sets; grants refer to agents and tools in range and
/// to sets in range or one past it.
pub fn policy() -> impl Strategy<Value = Policy> {
    (1usize..4, 1usize..4, 0usize..3).prop_flat_map(|(n_tools, n_agents, n_sets)| {
        let tools = prop::collection::vec(prop::option::of(0usize..2), n_tools);
        let parents = (1..n_agents).map(|i| (0..i).boxed()).collect::<Vec<_>>();
        let grant = (
            0..n_agents,
            0..n_tools,
            prop::option::weighted(0.4, pattern()),
            prop::collection::vec(arg_cond(), 0..2),
            quota(),
            prop::bool::weighted(0.2),
            prop::option::weighted(0.3, 0u64..6),
            prop::option::weighted(0.3, 0..n_sets + 1),
        )
            .prop_map(
                |(agent, tool, resource, args, quota, approval, expires_at, discovers)| Grant {
                    name: String::new(),
                    agent,
                    tool,
                    resource,
                    args,
                    quota,
                    approval,
                    expires_at,
                    discovers,
                },
            );
        (tools, parents, prop::collection::vec(grant, 0..7)).prop_map(
            move |(tools, parents, grants)| {
                let mut p = Policy::empty("generated");
                p.tools = tools
                    .into_iter()
                    .enumerate()
                    .map(|(i, resource)| Tool {
                        name: format!("t{i}"),
                        params: vec![],
                        resource,
                        sinks: vec![],
                        output: Label::BOTTOM,
                        sanitizer: None,
                        facts: vec![],
                    })
                    .collect();
                for (i, parent) in parents.into_iter().enumerate() {
                    p.agents.push(Agent {
                        name: format!("a{}", i + 1),
                        parent: Some(parent),
                        scope: None,
                        own_context: false,
                    });
                }
                p.grants = grants
                    .into_iter()
                    .enumerate()
                    .map(|(i, g)| Grant {
                        name: format!("g{i}"),
                        ..g
                    })
                    .collect();
                p.sets = (0..n_sets).map(|i| format!("s{i}")).collect();
                p
            },
        )
    })
}

/// A call by an agent in range, to a tool in range or one past it (no
/// resource), with 0–3 arguments, at time 0..6.
pub fn request(p: &Policy) -> impl Strategy<Value = Request> {
    (
        0..p.agents.len(),
        0..p.tools.len() + 1,
        prop::collection::vec(value(), 0..4),
        0u64..6,
    )
        .prop_map(|(agent, tool, args, time)| Request {
            agent,
            tool,
            args,
            time,
        })
}

/// A ledger that fits the policy: each limited grant has 0..=quota left.
pub fn ledger(p: &Policy) -> impl Strategy<Value = Ledger> {
    p.grants
        .iter()
        .map(|g| match g.quota {
            Quota::Limited(n) => (0..=n).prop_map(Quota::Limited).boxed(),
            Quota::Unlimited => Just(Quota::Unlimited).boxed(),
        })
        .collect::<Vec<_>>()
        .prop_map(|remaining| Ledger {
            remaining,
            shared: vec![],
        })
}

/// Sets with as many sets as the policy declares.
pub fn sets_of(p: &Policy) -> impl Strategy<Value = Vec<BTreeSet<String>>> {
    prop::collection::vec(prop::collection::btree_set("[ab]{0,2}", 0..4), p.sets.len())
}

/// A policy and a call under it.
pub fn policy_and_request() -> impl Strategy<Value = (Policy, Request, Vec<BTreeSet<String>>)> {
    policy().prop_flat_map(|p| {
        let r = request(&p);
        let s = sets_of(&p);
        (Just(p), r, s)
    })
}

/// A policy, a ledger that fits it, a call.
pub fn policy_ledger_request(
) -> impl Strategy<Value = (Policy, Ledger, Request, Vec<BTreeSet<String>>)> {
    policy().prop_flat_map(|p| {
        let l = ledger(&p);
        let r = request(&p);
        let s = sets_of(&p);
        (Just(p), l, r, s)
    })
}

fn id() -> impl Strategy<Value = String> {
    (0..3).prop_map(|i| format!("c{i}"))
}

/// Events on call ids c0–c2 (so that approvals, results and repeated ids
/// meet calls in every state), with the checks' verdict for each.
pub fn events(p: &Policy) -> impl Strategy<Value = Vec<(Event, Checks)>> {
    events_len(p, 1..12)
}

/// [`events`], `len` of them.
pub fn events_len(
    p: &Policy,
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<(Event, Checks)>> {
    let n_sets = p.sets.len();
    let call = (id(), request(p)).prop_map(|(id, req)| Event::Call { id, req });
    let event = prop_oneof![
        6 => call,
        2 => id().prop_map(|id| Event::Approve { id }),
        1 => id().prop_map(|id| Event::Reject { id }),
        2 => (id(), prop::collection::vec("[ab]{0,2}", 0..3)).prop_map(|(id, discovered)| Event::Succeeded { id, discovered }),
        1 => id().prop_map(|id| Event::Failed { id }),
        1 => id().prop_map(|id| Event::Unknown { id }),
        1 => (0..n_sets + 1, prop::collection::vec("[ab]{0,2}", 0..3)).prop_map(|(set, values)| Event::Seed { set, values }),
    ];
    let checks =
        prop_oneof![6 => Just(Checks::Pass), 2 => Just(Checks::Pause), 2 => Just(Checks::Deny)];
    prop::collection::vec((event, checks), len)
}

/// A policy and a run of events under it.
pub fn policy_and_events() -> impl Strategy<Value = (Policy, Vec<(Event, Checks)>)> {
    policy().prop_flat_map(|p| {
        let e = events(&p);
        (Just(p), e)
    })
}

/// A [`policy`] in which each limited grant is shared by the tenant's
/// sessions (`quota N per tenant`) with probability 1/2: `shared_grants`
/// strictly ascending, limited, named uniquely (`g0`, `g1`, ...), as
/// `validate.rs` requires.
pub fn shared_policy() -> impl Strategy<Value = Policy> {
    policy()
        .prop_flat_map(|p| {
            let n = p.grants.len();
            (Just(p), prop::collection::vec(any::<bool>(), n))
        })
        .prop_map(|(mut p, pick)| {
            p.shared_grants = (0..p.grants.len())
                .filter(|&g| pick[g] && matches!(p.grants[g].quota, Quota::Limited(_)))
                .collect();
            p
        })
}

/// A policy with shared grants and a run of one session under it.
pub fn shared_policy_and_events() -> impl Strategy<Value = (Policy, Vec<(Event, Checks)>)> {
    shared_policy().prop_flat_map(|p| {
        let e = events(&p);
        (Just(p), e)
    })
}

/// A policy with shared grants, 2–3 sessions of one tenant, and an
/// interleaving of their events: `(session, event, checks)`.
#[allow(clippy::type_complexity)]
pub fn tenant_run() -> impl Strategy<Value = (Policy, usize, Vec<(usize, Event, Checks)>)> {
    shared_policy().prop_flat_map(|p| {
        let e = events_len(&p, 1..24);
        (Just(p), 2usize..4, e, prop::collection::vec(0usize..3, 24)).prop_map(
            |(p, n, events, who)| {
                let run = events
                    .into_iter()
                    .zip(who)
                    .map(|((e, c), k)| (k % n, e, c))
                    .collect();
                (p, n, run)
            },
        )
    })
}

/// The empty maps, for building states by hand.
pub fn no_calls() -> BTreeMap<String, Vec<usize>> {
    BTreeMap::new()
}

/// The initial state of a policy.
pub fn initial(p: &Policy) -> State {
    State::initial(p)
}

/// An object argument (`docs/semantics.md`, "Objects"): fields `a` and `b`
/// (scalars, null, lists of scalars, or a nested object with the same
/// names), or a list of such objects, or a non-object where one was
/// expected (the functions must still agree on it).
pub fn object_value() -> impl Strategy<Value = Value> {
    let field = prop_oneof![
        4 => scalar(),
        1 => Just(Value::Null),
        1 => prop::collection::vec(scalar(), 0..3).prop_map(Value::List),
    ];
    let leaf = prop::collection::btree_map(
        prop_oneof![Just("a".to_string()), Just("b".to_string())],
        field,
        0..3,
    )
    .prop_map(Value::Object);
    let one = leaf.prop_recursive(2, 8, 2, |inner| {
        prop::collection::btree_map(
            prop_oneof![Just("a".to_string()), Just("b".to_string())],
            prop_oneof![2 => scalar(), 1 => inner],
            0..3,
        )
        .prop_map(Value::Object)
    });
    prop_oneof![
        3 => one.clone(),
        3 => prop::collection::vec(one, 0..4).prop_map(Value::List),
        1 => value(),
    ]
}

/// A test on a field path of length 1 or 2 over the names `a` and `b`
/// (paths to absent fields included).
pub fn field_op() -> impl Strategy<Value = ArgOp> {
    (
        prop::collection::vec(
            prop_oneof![
                Just("a".to_string()),
                Just("b".to_string()),
                Just("c".to_string())
            ],
            1..3,
        ),
        arg_op(),
    )
        .prop_map(|(path, op)| ArgOp::Field {
            path,
            op: Box::new(op),
        })
}
