//! The finite abstraction of calls: a *call class* is what the ledger can
//! tell about a call in OLD and in NEW — the calling agent, the tool, the
//! time region (between expiry dates), which grants of OLD and which of NEW
//! match it, and the discovered-set memberships its arguments need. Only
//! non-empty classes are listed, each with a concrete witness call.
//!
//! Completeness (every call falls in a listed class) rests on one fact per
//! parameter: every test a grant makes on a parameter depends only on the
//! parameter's value through finitely many atoms (regular languages for
//! strings, intervals for numbers, the two booleans, null, set membership),
//! and the candidates below realize every combination of atoms that any
//! value realizes:
//!
//! * strings: a breadth-first search over the product of the atoms'
//!   automata, on the constants' characters plus one fresh character (any
//!   other character behaves like it), visits every reachable combination;
//! * numbers: the constants, and a value just above and just below each
//!   (integers: the neighbouring integers), plus values beyond the extremes;
//! * lists: every set of element candidates (closure over adding one
//!   element), since a list test is an `all`/`any` over its elements;
//! * set membership: each string may carry any membership *type* the
//!   session can reach (`types`), per side.
//!
//! Anything this module cannot enumerate exactly is an `Unsupported` error
//! and certification answers `unknown`.

use agenra_core::pattern::Pattern;
use agenra_core::policy::{AgentId, Grant, GrantId, Policy, ToolId};
use agenra_core::value::{values_equal, ArgOp, Cond, Quant, SetId, Value};
use agenra_core::Decimal;
use agenra_core::ParamType;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// At most this many discovered sets may be tested by grants (types are
/// pairs of membership masks and must fit a 64-bit set).
pub const MAX_TESTED_SETS: usize = 3;
const MAX_AUTOMATON_STATES: usize = 20_000;
const MAX_LIST_STATES: usize = 4_000;
const MAX_COMBINATIONS: usize = 400_000;
/// Strings kept per combination of string tests.
const ALTERNATIVES: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("more than {MAX_TESTED_SETS} discovered sets are tested by grants")]
    TooManySets,
    #[error("the string tests on parameter `{param}` of `{tool}` are too many to enumerate")]
    Strings { tool: String, param: String },
    #[error("the list tests on parameter `{param}` of `{tool}` are too many to enumerate")]
    Lists { tool: String, param: String },
    #[error("the numeric constant {value} on `{tool}` is too precise to enumerate its neighbours")]
    Number { tool: String, value: String },
    #[error("the calls of `{tool}` have too many argument combinations ({count})")]
    Combinations { tool: String, count: usize },
    #[error("parameter `{param}` of `{tool}` is an object whose fields are tested: field tests are not enumerated (the answer is unknown)")]
    ObjectFields { tool: String, param: String },
    #[error("a condition on `{tool}` has a per-element test (`any x in LIST: ...`), which call classes do not enumerate")]
    Elements { tool: String },
    #[error("a rule tests where tokens come from (`{rule}`: `any KIND in PARAM from SOURCE`), which depends on the texts the session read: call classes do not model it")]
    Tokens { rule: String },
    #[error("tool `{tool}` labels fields of its output (`output PATH: LABEL`), which the letters' outputs do not model: call classes answer unknown")]
    OutputFields { tool: String },
}

/// A call class, with its witness.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Class {
    pub agent: AgentId,
    pub tool: ToolId,
    /// Index into `Classes::regions`.
    pub region: usize,
    /// Grants of OLD that match the call (any owner), ascending.
    pub old: Vec<GrantId>,
    /// Grants of NEW that match the call, ascending.
    pub new: Vec<GrantId>,
    /// Membership types (bit `t` = type `t`) the witness's strings carry;
    /// type 0 (in no set) is left out.
    pub types: u64,
    pub witness: Witness,
}

/// A concrete call of the class: arguments in parameter order, and the
/// membership type of each string (per list element).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witness {
    pub time: u64,
    pub args: Vec<Value>,
    pub types: Vec<Vec<u8>>,
}

/// The abstraction: time regions, tested sets, reachable types, classes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classes {
    /// Lower bounds of the time regions, ascending; `regions[0] == 0`.
    pub regions: Vec<u64>,
    /// Discovered sets tested by some grant of OLD or NEW, ascending.
    pub tested_sets: Vec<SetId>,
    /// Membership types the session may reach (bit `t`), always with 0.
    pub possible_types: u64,
    pub classes: Vec<Class>,
}

/// A membership type: which tested sets hold a value, in OLD (low bits)
/// and in NEW (high bits).
pub fn type_masks(t: u8, n_sets: usize) -> (u8, u8) {
    let low = (1u8 << n_sets) - 1;
    (t & low, (t >> n_sets) & low)
}

pub fn make_type(old_mask: u8, new_mask: u8, n_sets: usize) -> u8 {
    old_mask | (new_mask << n_sets)
}

/// Bit of set `s` in a mask, if `s` is tested.
pub fn set_bit(tested: &[SetId], s: Option<SetId>) -> u8 {
    s.and_then(|s| tested.iter().position(|&x| x == s))
        .map_or(0, |i| 1u8 << i)
}

/// Whether the agent's static scopes (its own and its delegators') let it
/// call the tool; a call they exclude is denied in both policies.
pub fn in_scope(p: &Policy, agent: AgentId, tool: ToolId) -> bool {
    let name = &p.tools[tool].name;
    p.chain_iter(agent).all(|a| {
        p.agents
            .get(a)
            .and_then(|x| x.scope)
            .and_then(|s| p.scopes.get(s))
            .is_none_or(|s| s.allows(name))
    })
}

/// The membership types reachable from "in no set" when results add a
/// value to the set OLD's serving grant discovers into and to the one
/// NEW's does (`pairs`), and tasks seed both sides alike.
pub fn close_types(pairs: &BTreeSet<(u8, u8)>, n: usize) -> u64 {
    let mut types: u64 = 1;
    loop {
        let mut next = types;
        for t in 0..64u8 {
            if types & (1 << t) == 0 {
                continue;
            }
            let (o, w) = type_masks(t, n);
            for &(a, b) in pairs {
                next |= 1 << make_type(o | a, w | b, n);
            }
        }
        if next == types {
            return types;
        }
        types = next;
    }
}

/// The pairs of discovered sets a succeeded call can add to (OLD's serving
/// grant's, NEW's): grants of the calling agent that both match one class.
fn serving_pairs(
    old: &Policy,
    new: &Policy,
    tested: &[SetId],
    classes: &[Class],
) -> BTreeSet<(u8, u8)> {
    let mut pairs = BTreeSet::new();
    for c in classes {
        for &go in c.old.iter().filter(|&&g| old.grants[g].agent == c.agent) {
            for &gn in c.new.iter().filter(|&&g| new.grants[g].agent == c.agent) {
                pairs.insert((
                    set_bit(tested, old.grants[go].discovers),
                    set_bit(tested, new.grants[gn].discovers),
                ));
            }
        }
    }
    for &s in &old.task_seeds {
        let b = set_bit(tested, Some(s));
        pairs.insert((b, b));
    }
    pairs
}

/// One test a grant makes on a parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ParamTest {
    Op(Quant, ArgOp),
    Resource(Pattern),
}

/// A candidate value for one parameter and what each test says of it.
#[derive(Clone, Debug)]
struct Candidate {
    value: Value,
    types: Vec<u8>,
    used: u64,
    old: Vec<bool>,
    new: Vec<bool>,
}

pub fn enumerate(old: &Policy, new: &Policy) -> Result<Classes, Unsupported> {
    enumerate_with(old, new, false)
}

/// Classes split further by the conditions of rules (call rules, flow
/// rules' `when`, path steps' `where`), for probing rule changes with
/// concrete calls: witnesses on both sides of each rule's constants.
pub fn enumerate_witnesses(old: &Policy, new: &Policy) -> Result<Classes, Unsupported> {
    enumerate_with(old, new, true)
}

/// The conditions of rules, for one tool (by parameter index).
/// The name of the first rule with a token test, if any.
fn token_rule(p: &Policy) -> Option<String> {
    if !p.has_token_tests() {
        return None;
    }
    let step =
        |s: &agenra_core::policy::StepPattern| s.when.as_ref().is_some_and(|c| c.has_tokens());
    p.flow_rules
        .iter()
        .find(|r| r.when.has_tokens())
        .map(|r| r.name.clone())
        .or_else(|| {
            p.receive_rules
                .iter()
                .find(|r| r.when.has_tokens())
                .map(|r| r.name.clone())
        })
        .or_else(|| {
            p.call_rules
                .iter()
                .find(|r| r.when.has_tokens())
                .map(|r| r.name.clone())
        })
        .or_else(|| {
            p.path_rules
                .iter()
                .find(|r| {
                    r.reset.as_ref().is_some_and(step)
                        || match &r.kind {
                            agenra_core::policy::PathKind::Sequence(s) => s.iter().any(step),
                            agenra_core::policy::PathKind::AtMost { step: s, .. } => step(s),
                        }
                })
                .map(|r| r.name.clone())
        })
        .or_else(|| Some("a grant".to_string()))
}

fn rule_conditions(p: &Policy, tool: ToolId) -> Vec<Cond<usize>> {
    let t = &p.tools[tool];
    let index = |n: &str| t.param_index(n);
    let mut out: Vec<Cond<usize>> = p
        .call_rules
        .iter()
        .filter(|r| r.tool == tool)
        .map(|r| r.when.clone())
        .collect();
    out.extend(p.flow_rules.iter().map(|r| r.when.resolve(&index)));
    out.extend(p.receive_rules.iter().map(|r| r.when.resolve(&index)));
    for r in &p.path_rules {
        let steps: Vec<&agenra_core::policy::StepPattern> = match &r.kind {
            agenra_core::policy::PathKind::Sequence(s) => s.iter().collect(),
            agenra_core::policy::PathKind::AtMost { step, .. } => vec![step],
        };
        out.extend(
            steps
                .into_iter()
                .filter_map(|s| s.when.as_ref().map(|w| w.resolve(&index))),
        );
    }
    out
}

fn enumerate_with(old: &Policy, new: &Policy, probe: bool) -> Result<Classes, Unsupported> {
    // Token tests judge texts the session read, which no call class
    // carries: answer `unknown` rather than a class that ignores them.
    if let Some(rule) = token_rule(old).or_else(|| token_rule(new)) {
        return Err(Unsupported::Tokens { rule });
    }
    // Per-field output labels change provenance by value and token
    // origins by what outputs hold under each field, which no letter's
    // output models: `unknown` rather than a class that ignores them.
    if let Some(p) = [old, new].into_iter().find(|p| !p.output_fields.is_empty()) {
        let tool = p
            .tools
            .get(p.output_fields[0].tool)
            .map_or_else(String::new, |t| t.name.clone());
        return Err(Unsupported::OutputFields { tool });
    }
    let mut regions: Vec<u64> = old
        .grants
        .iter()
        .chain(&new.grants)
        .filter_map(|g| g.expires_at)
        .chain([0])
        .collect();
    regions.sort_unstable();
    regions.dedup();
    let mut tested: Vec<SetId> = old
        .grants
        .iter()
        .chain(&new.grants)
        .flat_map(|g| {
            g.args
                .iter()
                .flat_map(|c| c.tests().into_iter().filter_map(|(_, op)| op.set()))
        })
        .collect();
    tested.sort_unstable();
    tested.dedup();
    if tested.len() > MAX_TESTED_SETS {
        return Err(Unsupported::TooManySets);
    }
    // The least fixpoint: types reachable through classes that need only
    // types already reachable (more types can only add classes).
    let mut possible_types = 1u64;
    let classes = loop {
        let mut classes = Vec::new();
        for tool in 0..old.tools.len() {
            let has = |p: &Policy| p.grants.iter().any(|g| g.tool == tool);
            if !has(old) && !has(new) {
                continue;
            }
            let space = Space {
                regions: &regions,
                tested: &tested,
                possible_types,
                probe,
            };
            enumerate_tool(old, new, tool, &space, &mut classes)?;
        }
        let next = close_types(&serving_pairs(old, new, &tested, &classes), tested.len());
        if next | possible_types == possible_types {
            break classes;
        }
        possible_types |= next;
    };
    Ok(Classes {
        regions,
        tested_sets: tested,
        possible_types,
        classes,
    })
}

fn grants_of(p: &Policy, tool: ToolId) -> Vec<&Grant> {
    p.grants.iter().filter(|g| g.tool == tool).collect()
}

/// What tells two classes apart: agent, region, OLD's and NEW's matching
/// grants, membership types.
type ClassKey = (AgentId, usize, Vec<GrantId>, Vec<GrantId>, u64, Vec<bool>);

/// What every tool's enumeration shares.
struct Space<'a> {
    regions: &'a [u64],
    tested: &'a [SetId],
    possible_types: u64,
    probe: bool,
}

fn enumerate_tool(
    old: &Policy,
    new: &Policy,
    tool: ToolId,
    space: &Space,
    out: &mut Vec<Class>,
) -> Result<(), Unsupported> {
    let (regions, tested, possible_types) = (space.regions, space.tested, space.possible_types);
    let t = &old.tools[tool];
    // Per-element tests (`any x in LIST: ...`) are not enumerated: answer
    // `unknown` rather than risk a class that misses a combination.
    let has_each = |p: &Policy| {
        p.grants
            .iter()
            .filter(|g| g.tool == tool)
            .any(|g| g.args.iter().any(Cond::has_each))
            || rule_conditions(p, tool).iter().any(Cond::has_each)
    };
    if has_each(old) || has_each(new) {
        return Err(Unsupported::Elements {
            tool: t.name.clone(),
        });
    }
    let extra: Vec<Cond<usize>> = if space.probe {
        rule_conditions(old, tool)
            .into_iter()
            .chain(rule_conditions(new, tool))
            .collect()
    } else {
        Vec::new()
    };
    let grants: Vec<&Grant> = grants_of(old, tool)
        .into_iter()
        .chain(grants_of(new, tool))
        .collect();
    let mut per_param: Vec<(Vec<ParamTest>, Vec<Candidate>)> = Vec::new();
    for (p, param) in t.params.iter().enumerate() {
        let mut tests: Vec<ParamTest> = Vec::new();
        for g in &grants {
            for c in &g.args {
                collect_tests(c, p, &mut tests);
            }
            if t.resource == Some(p) {
                if let Some(pat) = &g.resource {
                    let pt = ParamTest::Resource(pat.clone());
                    if !tests.contains(&pt) {
                        tests.push(pt);
                    }
                }
            }
        }
        for c in &extra {
            collect_tests(c, p, &mut tests);
        }
        let cands = candidates(&t.name, param, &tests, tested, possible_types)?;
        per_param.push((tests, cands));
    }
    let count = per_param.iter().map(|(_, c)| c.len()).product::<usize>();
    if count
        .saturating_mul(old.agents.len())
        .saturating_mul(regions.len())
        > MAX_COMBINATIONS
    {
        return Err(Unsupported::Combinations {
            tool: t.name.clone(),
            count,
        });
    }
    let mut seen: HashSet<ClassKey> = HashSet::new();
    for agent in 0..old.agents.len() {
        if !in_scope(old, agent, tool) {
            continue;
        }
        for (region, &time) in regions.iter().enumerate() {
            let mut index = vec![0usize; per_param.len()];
            loop {
                let chosen: Vec<&Candidate> = index
                    .iter()
                    .enumerate()
                    .map(|(p, &i)| &per_param[p].1[i])
                    .collect();
                let bits = |pol: &Policy, side_new: bool| -> Vec<GrantId> {
                    (0..pol.grants.len())
                        .filter(|&g| {
                            let gr = &pol.grants[g];
                            gr.tool == tool
                                && gr.expires_at.is_none_or(|e| time < e)
                                && matches(gr, t.resource, agent, &per_param, &chosen, side_new)
                        })
                        .collect()
                };
                let o = bits(old, false);
                let n = bits(new, true);
                let used = chosen.iter().fold(0u64, |acc, c| acc | c.used);
                let rules: Vec<bool> = extra
                    .iter()
                    .map(|c| {
                        eval(c, agent, &|p: usize, test: &ParamTest| {
                            lookup(&per_param, &chosen, p, test, false)
                        })
                    })
                    .collect();
                if (!o.is_empty() || !n.is_empty())
                    && seen.insert((agent, region, o.clone(), n.clone(), used, rules))
                {
                    out.push(Class {
                        agent,
                        tool,
                        region,
                        old: o,
                        new: n,
                        types: used,
                        witness: Witness {
                            time,
                            args: chosen.iter().map(|c| c.value.clone()).collect(),
                            types: chosen.iter().map(|c| c.types.clone()).collect(),
                        },
                    });
                }
                // Next combination (odometer).
                let mut k = 0;
                loop {
                    if k == index.len() {
                        break;
                    }
                    index[k] += 1;
                    if index[k] < per_param[k].1.len() {
                        break;
                    }
                    index[k] = 0;
                    k += 1;
                }
                if k == index.len() {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Whether a grant (tool and expiry already checked) matches the chosen
/// candidates: the resource pattern and every condition, as
/// `spec::grant_matches` evaluates them.
fn matches(
    g: &Grant,
    resource: Option<usize>,
    agent: AgentId,
    per_param: &[(Vec<ParamTest>, Vec<Candidate>)],
    chosen: &[&Candidate],
    side_new: bool,
) -> bool {
    let result = |p: usize, test: &ParamTest| lookup(per_param, chosen, p, test, side_new);
    let resource_ok = match (&g.resource, resource) {
        (None, _) => true,
        (Some(pat), Some(p)) => result(p, &ParamTest::Resource(pat.clone())),
        (Some(_), None) => false,
    };
    resource_ok && g.args.iter().all(|c| eval(c, agent, &result))
}

/// What test `test` on parameter `p` says of the chosen candidate.
fn lookup(
    per_param: &[(Vec<ParamTest>, Vec<Candidate>)],
    chosen: &[&Candidate],
    p: usize,
    test: &ParamTest,
    side_new: bool,
) -> bool {
    let Some((tests, _)) = per_param.get(p) else {
        return false;
    };
    let Some(i) = tests.iter().position(|t| t == test) else {
        return false;
    };
    let c = chosen[p];
    if side_new {
        c.new[i]
    } else {
        c.old[i]
    }
}

fn eval(c: &Cond<usize>, agent: AgentId, result: &impl Fn(usize, &ParamTest) -> bool) -> bool {
    match c {
        Cond::Test { param, quant, op } => result(*param, &ParamTest::Op(*quant, op.clone())),
        Cond::Agent(a) => a.contains(&agent),
        Cond::Not(x) => !eval(x, agent, result),
        Cond::And(xs) => xs.iter().all(|x| eval(x, agent, result)),
        Cond::Or(xs) => xs.iter().any(|x| eval(x, agent, result)),
        // Refused before enumeration (`Unsupported::Elements`,
        // `Unsupported::Tokens`); false keeps this total.
        Cond::Each { .. } | Cond::Elem(_) | Cond::Tokens { .. } => false,
    }
}

fn collect_tests(c: &Cond<usize>, p: usize, out: &mut Vec<ParamTest>) {
    match c {
        Cond::Test { param, quant, op } if *param == p => {
            let t = ParamTest::Op(*quant, op.clone());
            if !out.contains(&t) {
                out.push(t);
            }
        }
        Cond::Test { .. } | Cond::Agent(_) | Cond::Elem(_) | Cond::Tokens { .. } => {}
        Cond::Not(x) => collect_tests(x, p, out),
        Cond::Each { body, .. } => collect_tests(body, p, out),
        Cond::And(xs) | Cond::Or(xs) => xs.iter().for_each(|x| collect_tests(x, p, out)),
    }
}

/// Evaluates one test on a scalar (or whole value), with the membership of
/// its strings given by a type: sets are built from the value alone, so
/// each test sees exactly the memberships the type says.
fn eval_test(
    test: &ParamTest,
    value: &Value,
    types: &[u8],
    tested: &[SetId],
    side_new: bool,
) -> bool {
    match test {
        ParamTest::Resource(p) => value.as_str().is_some_and(|r| p.matches(r)),
        ParamTest::Op(quant, op) => {
            let sets = local_sets(value, types, tested, side_new);
            op.eval(*quant, value, &sets)
        }
    }
}

fn local_sets(
    value: &Value,
    types: &[u8],
    tested: &[SetId],
    side_new: bool,
) -> Vec<BTreeSet<String>> {
    let size = tested.iter().max().map_or(0, |m| m + 1);
    let mut sets = vec![BTreeSet::new(); size];
    for (i, v) in value.scalars().iter().enumerate() {
        let (o, n) = type_masks(types.get(i).copied().unwrap_or(0), tested.len());
        let mask = if side_new { n } else { o };
        if let Value::Str(s) = v {
            for (k, &set) in tested.iter().enumerate() {
                if mask & (1 << k) != 0 {
                    sets[set].insert(s.clone());
                }
            }
        }
    }
    sets
}

fn candidates(
    tool: &str,
    param: &agenra_core::policy::Param,
    tests: &[ParamTest],
    tested: &[SetId],
    possible_types: u64,
) -> Result<Vec<Candidate>, Unsupported> {
    let needs_types = tests
        .iter()
        .any(|t| matches!(t, ParamTest::Op(_, op) if op.set().is_some()));
    let types: Vec<u8> = if needs_types {
        (0..64u8)
            .filter(|t| possible_types & (1 << t) != 0)
            .collect()
    } else {
        vec![0]
    };
    if param.ty == ParamType::Object {
        return object_candidates(tool, param, tests, tested);
    }
    let scalars = scalar_values(tool, param, tests)?;
    let mut elements: Vec<(Value, u8)> = Vec::new();
    for alternatives in scalars {
        let Some(v) = alternatives.first() else {
            continue;
        };
        let typed = matches!(v, Value::Str(_));
        for (i, &t) in types.iter().enumerate() {
            if t != 0 && !typed {
                continue;
            }
            // Values of different membership types get different strings
            // where the cell has several, so that a replay can discover one
            // without the other.
            elements.push((alternatives[i % alternatives.len()].clone(), t));
        }
    }
    let mut out: Vec<Candidate> = Vec::new();
    let mut keys: HashSet<(Vec<bool>, Vec<bool>, u64)> = HashSet::new();
    let mut push = |value: Value, types: Vec<u8>, out: &mut Vec<Candidate>| {
        let used = types
            .iter()
            .filter(|&&t| t != 0)
            .fold(0u64, |a, &t| a | (1 << t));
        let old: Vec<bool> = tests
            .iter()
            .map(|t| eval_test(t, &value, &types, tested, false))
            .collect();
        let new: Vec<bool> = tests
            .iter()
            .map(|t| eval_test(t, &value, &types, tested, true))
            .collect();
        if keys.insert((old.clone(), new.clone(), used)) {
            out.push(Candidate {
                value,
                types,
                used,
                old,
                new,
            });
        }
    };
    if param.optional {
        push(Value::Null, vec![], &mut out);
    }
    if !param.list {
        for (v, t) in elements {
            push(v, vec![t], &mut out);
        }
        return Ok(out);
    }
    // Lists: a test is an `all`/`any` over the elements (or, for
    // `contains`, an `any` of equality), so a list's results depend only on
    // the set of element results it contains; close over adding elements.
    let elem: Vec<(Vec<bool>, Vec<bool>)> = elements
        .iter()
        .map(|(v, t)| {
            let one = |side_new: bool| {
                tests
                    .iter()
                    .map(|test| match test {
                        ParamTest::Op(_, ArgOp::Contains(c)) => values_equal(c, v),
                        ParamTest::Op(_, op) if op.is_whole_value() => false,
                        other => eval_test(other, v, &[*t], tested, side_new),
                    })
                    .collect::<Vec<bool>>()
            };
            (one(false), one(true))
        })
        .collect();
    type ListKey = (Vec<bool>, Vec<bool>, Vec<bool>, Vec<bool>, u64);
    let n = tests.len();
    let start: ListKey = (
        vec![true; n],
        vec![false; n],
        vec![true; n],
        vec![false; n],
        0,
    );
    let mut seen: HashMap<ListKey, usize> = HashMap::new();
    let mut lists: Vec<Vec<usize>> = vec![vec![]];
    seen.insert(start.clone(), 0);
    let mut queue = VecDeque::from([(start, 0usize)]);
    while let Some((key, at)) = queue.pop_front() {
        for (e, (eo, en)) in elem.iter().enumerate() {
            let t = elements[e].1;
            let next: ListKey = (
                key.0.iter().zip(eo).map(|(a, b)| *a && *b).collect(),
                key.1.iter().zip(eo).map(|(a, b)| *a || *b).collect(),
                key.2.iter().zip(en).map(|(a, b)| *a && *b).collect(),
                key.3.iter().zip(en).map(|(a, b)| *a || *b).collect(),
                if t == 0 { key.4 } else { key.4 | (1 << t) },
            );
            if !seen.contains_key(&next) {
                if seen.len() >= MAX_LIST_STATES {
                    return Err(Unsupported::Lists {
                        tool: tool.into(),
                        param: param.name.clone(),
                    });
                }
                let mut l = lists[at].clone();
                l.push(e);
                lists.push(l);
                seen.insert(next.clone(), lists.len() - 1);
                queue.push_back((next, lists.len() - 1));
            }
        }
    }
    for l in &lists {
        let value = Value::List(l.iter().map(|&e| elements[e].0.clone()).collect());
        let types: Vec<u8> = l.iter().map(|&e| elements[e].1).collect();
        // The list is evaluated for real (each element's sets come from its
        // own type), not from the closure's bits: the closure only picks
        // the witnesses.
        push_list(&mut out, &mut keys, tests, tested, value, types);
    }
    Ok(out)
}

fn push_list(
    out: &mut Vec<Candidate>,
    keys: &mut HashSet<(Vec<bool>, Vec<bool>, u64)>,
    tests: &[ParamTest],
    tested: &[SetId],
    value: Value,
    types: Vec<u8>,
) {
    let used = types
        .iter()
        .filter(|&&t| t != 0)
        .fold(0u64, |a, &t| a | (1 << t));
    let side = |side_new: bool| -> Vec<bool> {
        tests
            .iter()
            .map(|t| list_test(t, &value, &types, tested, side_new))
            .collect()
    };
    let (old, new) = (side(false), side(true));
    if keys.insert((old.clone(), new.clone(), used)) {
        out.push(Candidate {
            value,
            types,
            used,
            old,
            new,
        });
    }
}

/// A test on a list whose elements each have their own membership type.
fn list_test(
    test: &ParamTest,
    value: &Value,
    types: &[u8],
    tested: &[SetId],
    side_new: bool,
) -> bool {
    let ParamTest::Op(quant, op) = test else {
        return false;
    };
    let Value::List(items) = value else {
        return eval_test(test, value, types, tested, side_new);
    };
    if op.is_whole_value() {
        return op.eval(*quant, value, &[]);
    }
    let one = |i: usize, v: &Value| {
        let sets = local_sets(v, &[types.get(i).copied().unwrap_or(0)], tested, side_new);
        op.eval_scalar(v, &sets)
    };
    match quant {
        Quant::All => items.iter().enumerate().all(|(i, v)| one(i, v)),
        Quant::Any => items.iter().enumerate().any(|(i, v)| one(i, v)),
    }
}

/// An object parameter: only `== null` / `!= null` tests are enumerated
/// (absent, or one value of the declared shape); a test on a field makes
/// the policy unsupported, so `certify` and `verify` answer unknown rather
/// than claim a result that ignores the field.
fn object_candidates(
    tool: &str,
    param: &agenra_core::policy::Param,
    tests: &[ParamTest],
    tested: &[SetId],
) -> Result<Vec<Candidate>, Unsupported> {
    if tests
        .iter()
        .any(|t| !matches!(t, ParamTest::Op(_, op) if op.is_whole_value() && !matches!(op, ArgOp::Field { .. } | ArgOp::Contains(_))))
    {
        return Err(Unsupported::ObjectFields {
            tool: tool.to_string(),
            param: param.name.clone(),
        });
    }
    let mut values = vec![minimal(param)];
    if param.optional {
        values.insert(0, Value::Null);
    }
    Ok(values
        .into_iter()
        .map(|value| {
            let old = tests
                .iter()
                .map(|t| eval_test(t, &value, &[], tested, false))
                .collect();
            let new = tests
                .iter()
                .map(|t| eval_test(t, &value, &[], tested, true))
                .collect();
            Candidate {
                value,
                types: vec![],
                used: 0,
                old,
                new,
            }
        })
        .collect())
}

/// A value of the parameter's declared type (required fields present,
/// optional ones absent, lists empty).
fn minimal(p: &agenra_core::policy::Param) -> Value {
    if p.list {
        return Value::List(vec![]);
    }
    match p.ty {
        ParamType::Str => Value::Str(String::new()),
        ParamType::Int => Value::Int(0),
        ParamType::Bool => Value::Bool(false),
        ParamType::Decimal => Value::Decimal(agenra_core::Decimal::from(0)),
        ParamType::Object => Value::Object(
            p.fields
                .iter()
                .map(|f| {
                    let v = if f.optional { Value::Null } else { minimal(f) };
                    (f.name.clone(), v)
                })
                .collect(),
        ),
    }
}

/// Scalar candidates of the parameter's type that realize every
/// combination of the tests' atoms (with a few alternatives for strings).
fn scalar_values(
    tool: &str,
    param: &agenra_core::policy::Param,
    tests: &[ParamTest],
) -> Result<Vec<Vec<Value>>, Unsupported> {
    let single = |v: Vec<Value>| v.into_iter().map(|x| vec![x]).collect();
    match param.ty {
        ParamType::Bool => Ok(single(vec![Value::Bool(false), Value::Bool(true)])),
        ParamType::Str => strings(tool, &param.name, tests, param.list).map(|v| {
            v.into_iter()
                .map(|alts| alts.into_iter().map(Value::Str).collect())
                .collect()
        }),
        ParamType::Int | ParamType::Decimal => numbers(tool, param.ty, tests).map(single),
        ParamType::Object => Err(Unsupported::ObjectFields {
            tool: tool.to_string(),
            param: param.name.clone(),
        }),
    }
}

// ---- strings -------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Lit(char),
    One,
    Star,
}

fn lit(s: &str) -> Vec<Tok> {
    s.chars().map(Tok::Lit).collect()
}

fn pattern_toks(p: &Pattern) -> Vec<Tok> {
    match p {
        Pattern::Exact(s) => lit(s),
        Pattern::Prefix(s) => {
            let mut t = lit(s);
            t.push(Tok::Star);
            t
        }
        Pattern::Glob(g) => g
            .chars()
            .map(|c| match c {
                '*' => Tok::Star,
                '?' => Tok::One,
                c => Tok::Lit(c),
            })
            .collect(),
    }
}

/// The languages whose membership decides every string test.
fn languages(tests: &[ParamTest], list: bool) -> Vec<Vec<Tok>> {
    let mut out: Vec<Vec<Tok>> = Vec::new();
    let mut add = |t: Vec<Tok>| {
        if !out.contains(&t) {
            out.push(t)
        }
    };
    for t in tests {
        match t {
            ParamTest::Resource(p) | ParamTest::Op(_, ArgOp::Matches(p)) => add(pattern_toks(p)),
            ParamTest::Op(_, op) => match op {
                ArgOp::Eq(Value::Str(s)) | ArgOp::Ne(Value::Str(s)) => add(lit(s)),
                ArgOp::In(vs) | ArgOp::NotIn(vs) => {
                    for v in vs {
                        if let Value::Str(s) = v {
                            add(lit(s));
                        }
                    }
                }
                ArgOp::Prefix(s) => add(pattern_toks(&Pattern::Prefix(s.clone()))),
                ArgOp::Suffix(s) => {
                    let mut t = vec![Tok::Star];
                    t.extend(lit(s));
                    add(t)
                }
                ArgOp::Contains(Value::Str(s)) => {
                    if list {
                        // On a list, `contains` is element equality.
                        add(lit(s))
                    } else {
                        let mut t = vec![Tok::Star];
                        t.extend(lit(s));
                        t.push(Tok::Star);
                        add(t)
                    }
                }
                _ => {}
            },
        }
    }
    out
}

fn closure(toks: &[Tok], set: &mut [bool]) {
    for i in 0..toks.len() {
        if set[i] && toks[i] == Tok::Star {
            set[i + 1] = true;
        }
    }
}

fn advance(toks: &[Tok], set: &[bool], c: char) -> Vec<bool> {
    let mut next = vec![false; toks.len() + 1];
    for i in 0..toks.len() {
        if !set[i] {
            continue;
        }
        match toks[i] {
            Tok::Lit(x) if x == c => next[i + 1] = true,
            Tok::One => next[i + 1] = true,
            Tok::Star => next[i] = true,
            Tok::Lit(_) => {}
        }
    }
    closure(toks, &mut next);
    next
}

/// Per reachable combination of the languages, its shortest strings (up
/// to `ALTERNATIVES`, the shortest first).
fn strings(
    tool: &str,
    param: &str,
    tests: &[ParamTest],
    list: bool,
) -> Result<Vec<Vec<String>>, Unsupported> {
    let langs = languages(tests, list);
    let mut alphabet: Vec<char> = langs
        .iter()
        .flatten()
        .filter_map(|t| match t {
            Tok::Lit(c) => Some(*c),
            _ => None,
        })
        .collect();
    alphabet.sort_unstable();
    alphabet.dedup();
    let fresh = "xyzqkjvwXYZ0123456789_-"
        .chars()
        .chain('\u{100}'..'\u{2000}')
        .find(|c| !alphabet.contains(c))
        .unwrap_or('\u{2603}');
    alphabet.push(fresh);
    let start: Vec<Vec<bool>> = langs
        .iter()
        .map(|t| {
            let mut s = vec![false; t.len() + 1];
            s[0] = true;
            closure(t, &mut s);
            s
        })
        .collect();
    let accepting = |state: &Vec<Vec<bool>>| -> Vec<bool> {
        state.iter().zip(&langs).map(|(s, t)| s[t.len()]).collect()
    };
    let mut seen: HashSet<Vec<Vec<bool>>> = HashSet::new();
    let mut found: HashMap<Vec<bool>, usize> = HashMap::new();
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut note = |valuation: Vec<bool>, text: &str, out: &mut Vec<Vec<String>>| match found
        .get(&valuation)
    {
        Some(&i) => {
            if out[i].len() < ALTERNATIVES && !out[i].iter().any(|x| x == text) {
                out[i].push(text.to_string());
            }
        }
        None => {
            found.insert(valuation, out.len());
            out.push(vec![text.to_string()]);
        }
    };
    note(accepting(&start), "", &mut out);
    let mut queue = VecDeque::from([(start.clone(), String::new())]);
    seen.insert(start);
    while let Some((state, text)) = queue.pop_front() {
        for &c in &alphabet {
            let next: Vec<Vec<bool>> = state
                .iter()
                .zip(&langs)
                .map(|(s, t)| advance(t, s, c))
                .collect();
            let mut longer = text.clone();
            longer.push(c);
            note(accepting(&next), &longer, &mut out);
            if seen.insert(next.clone()) {
                if seen.len() > MAX_AUTOMATON_STATES {
                    return Err(Unsupported::Strings {
                        tool: tool.into(),
                        param: param.into(),
                    });
                }
                let mut t = text.clone();
                t.push(c);
                queue.push_back((next, t));
            }
        }
    }
    Ok(out)
}

// ---- numbers -------------------------------------------------------------

/// An exact decimal as `mantissa / 10^scale`, read from `Decimal`'s text.
fn parse_exact(d: &Decimal) -> Option<(i128, u32)> {
    let text = d.to_string();
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text.as_str()),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = format!("{int}{frac}");
    let m: i128 = digits.parse().ok()?;
    Some((if neg { -m } else { m }, frac.len() as u32))
}

fn render_exact(m: i128, scale: u32) -> String {
    let neg = m < 0;
    let digits = m.unsigned_abs().to_string();
    let s = scale as usize;
    let padded = if digits.len() <= s {
        format!("{}{digits}", "0".repeat(s + 1 - digits.len()))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - s);
    let body = if s == 0 {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    };
    if neg && m != 0 {
        format!("-{body}")
    } else {
        body
    }
}

fn numbers(tool: &str, ty: ParamType, tests: &[ParamTest]) -> Result<Vec<Value>, Unsupported> {
    let mut consts: Vec<Decimal> = Vec::new();
    for t in tests {
        if let ParamTest::Op(_, op) = t {
            match op {
                ArgOp::Eq(v) | ArgOp::Ne(v) | ArgOp::Contains(v) => consts.extend(v.as_decimal()),
                ArgOp::In(vs) | ArgOp::NotIn(vs) => {
                    consts.extend(vs.iter().filter_map(Value::as_decimal))
                }
                ArgOp::Lt(d) | ArgOp::Le(d) | ArgOp::Gt(d) | ArgOp::Ge(d) => consts.push(*d),
                _ => {}
            }
        }
    }
    consts.push(Decimal::from(0));
    let exact: Vec<(i128, u32)> = consts
        .iter()
        .map(|d| {
            parse_exact(d).ok_or_else(|| Unsupported::Number {
                tool: tool.into(),
                value: d.to_string(),
            })
        })
        .collect::<Result<_, _>>()?;
    let mut out: Vec<Value> = Vec::new();
    let mut push = |v: Value| {
        if !out.contains(&v) {
            out.push(v)
        }
    };
    if ty == ParamType::Int {
        for &(m, s) in &exact {
            let p = 10i128.pow(s);
            let floor = m.div_euclid(p);
            for k in [floor, floor - 1, floor + 1, floor + 2] {
                if let Ok(i) = i64::try_from(k) {
                    push(Value::Int(i));
                }
            }
        }
        return Ok(out);
    }
    // Decimals: one digit finer than every constant lies strictly between
    // any two distinct constants; whole numbers beyond the extremes.
    let fine = (exact.iter().map(|&(_, s)| s).max().unwrap_or(0) + 1).min(18);
    for &(m, s) in &exact {
        let scaled = m * 10i128.pow(fine.saturating_sub(s));
        for k in [scaled, scaled - 1, scaled + 1] {
            let text = render_exact(k, fine.max(s));
            let d: Decimal = text.parse().map_err(|_| Unsupported::Number {
                tool: tool.into(),
                value: text.clone(),
            })?;
            push(Value::Decimal(d));
        }
        let p = 10i128.pow(s);
        for k in [m.div_euclid(p) - 1, m.div_euclid(p) + 2] {
            if let Ok(i) = i64::try_from(k) {
                push(Value::Decimal(Decimal::from(i)));
            }
        }
    }
    Ok(out)
}

/// Tools whose calls interact through the ledger: grants of different
/// tools never match one call, so only a discovered set (one tool's
/// grant discovers into it, another's tests it) links two tools. Each
/// component is simulated on its own: its transitions read and write only
/// its grants and its membership types, so a workflow's projection onto a
/// component is a workflow of the component (docs/certify.md).
pub fn components(old: &Policy, new: &Policy, classes: &Classes) -> Vec<Vec<ToolId>> {
    let mut tools: Vec<ToolId> = classes.classes.iter().map(|c| c.tool).collect();
    tools.sort_unstable();
    tools.dedup();
    let grants = || old.grants.iter().chain(&new.grants);
    let tests = |tool: ToolId, set: SetId| {
        grants().any(|g| {
            g.tool == tool
                && g.args
                    .iter()
                    .any(|c| c.tests().iter().any(|(_, op)| op.set() == Some(set)))
        })
    };
    let linked = |a: ToolId, b: ToolId| {
        grants().any(|g| g.tool == a && g.discovers.is_some_and(|s| tests(b, s)))
    };
    let mut out: Vec<Vec<ToolId>> = Vec::new();
    let mut done = vec![false; tools.len()];
    for i in 0..tools.len() {
        if done[i] {
            continue;
        }
        let mut comp = vec![tools[i]];
        done[i] = true;
        let mut at = 0;
        while at < comp.len() {
            for j in 0..tools.len() {
                if !done[j] && (linked(comp[at], tools[j]) || linked(tools[j], comp[at])) {
                    done[j] = true;
                    comp.push(tools[j]);
                }
            }
            at += 1;
        }
        comp.sort_unstable();
        out.push(comp);
    }
    out
}

/// The classes of one component's tools.
pub fn restrict(classes: &Classes, tools: &[ToolId]) -> Classes {
    Classes {
        classes: classes
            .classes
            .iter()
            .filter(|c| tools.contains(&c.tool))
            .cloned()
            .collect(),
        ..classes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_decimals_round_trip() {
        for s in ["0", "98.7", "-3.25", "100", "0.05", "-0.5"] {
            let d: Decimal = s.parse().unwrap();
            let (m, sc) = parse_exact(&d).unwrap();
            assert_eq!(render_exact(m, sc), d.to_string());
        }
        assert_eq!(render_exact(-5, 2), "-0.05");
        assert_eq!(render_exact(12345, 2), "123.45");
    }

    #[test]
    fn strings_cover_prefix_suffix_combinations() {
        let tests = vec![
            ParamTest::Op(Quant::All, ArgOp::Prefix("ab".into())),
            ParamTest::Op(Quant::All, ArgOp::Suffix("yz".into())),
        ];
        let s = strings("t", "p", &tests, false).unwrap();
        let val = |x: &str| (x.starts_with("ab"), x.ends_with("yz"));
        for alts in &s {
            assert!(alts.iter().all(|x| val(x) == val(&alts[0])), "{alts:?}");
        }
        let got: HashSet<(bool, bool)> = s.iter().map(|x| val(&x[0])).collect();
        assert_eq!(got.len(), 4, "{s:?}");
    }
}
