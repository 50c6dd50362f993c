//! The Lean checker, transcribed to Rust function by function
//! (`lean/Agenra/Certify.lean`: `pstep`, `closedAt`, `stepCmp`,
//! `RelTree.ofSorted`, `checkSimulationTree`), run on the certify corpus.
//!
//! No Lean toolchain exists here, so the Lean file cannot be run; this test
//! checks its logic instead: every relation that `--emit-lean` writes must
//! pass this transcription (or the Lean check of the emitted file would
//! fail), and a relation with one pair removed must not (the check is not
//! vacuous). A difference between this file and the Lean one is a bug in
//! one of them; keep them in step.

use agenra_certify::certify;
use agenra_certify::emit_lean::{lean_order, relations, Part};
use agenra_certify::product::{Flags, State};
use agenra_core::policy::Quota;
use agenra_core::Policy;
use std::cmp::Ordering;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
struct LGrant {
    agent: usize,
    quota: Quota,
    approval: bool,
    discovers: Option<usize>,
}

#[derive(Clone, Debug)]
struct Class {
    chain: Vec<usize>,
    region: usize,
    old: Vec<usize>,
    new: Vec<usize>,
    types: u64,
}

struct Ctx {
    old: Vec<LGrant>,
    new: Vec<LGrant>,
    tested: Vec<usize>,
    seeds: Vec<usize>,
    flags: Flags,
    classes: Vec<Class>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    old_paused: bool,
    new_paused: bool,
    old: Vec<usize>,
    new: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct PState {
    region: usize,
    old: Vec<Quota>,
    new: Vec<Quota>,
    calls: Vec<(Held, u64)>,
    types: u64,
}

enum PStep {
    NotAdmitted,
    Next(PState),
    Lost,
    Unknown,
}

enum HeldEvent {
    Approve,
    ApprovalDenied,
    Reject,
    Succeeded(Option<u64>),
    Failed,
    Unknown,
}

fn product_initial(ctx: &Ctx) -> PState {
    PState {
        region: 0,
        old: ctx.old.iter().map(|g| g.quota).collect(),
        new: ctx.new.iter().map(|g| g.quota).collect(),
        calls: vec![],
        types: 1,
    }
}

fn bool_cmp(a: bool, b: bool) -> Ordering {
    match (a, b) {
        (false, true) => Ordering::Less,
        (true, false) => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

fn nat_cmp(a: u64, b: u64) -> Ordering {
    if a < b {
        Ordering::Less
    } else if b < a {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn nat_list_cmp(a: &[usize], b: &[usize]) -> Ordering {
    match (a, b) {
        ([], []) => Ordering::Equal,
        ([], _) => Ordering::Less,
        (_, []) => Ordering::Greater,
        ([x, xs @ ..], [y, ys @ ..]) => {
            if x < y {
                Ordering::Less
            } else if y < x {
                Ordering::Greater
            } else {
                nat_list_cmp(xs, ys)
            }
        }
    }
}

fn chain_cmp(a: &[usize], b: &[usize]) -> Ordering {
    if a.len() < b.len() {
        Ordering::Less
    } else if b.len() < a.len() {
        Ordering::Greater
    } else {
        nat_list_cmp(a, b)
    }
}

fn held_cmp(a: &Held, b: &Held) -> Ordering {
    match bool_cmp(a.old_paused, b.old_paused) {
        Ordering::Equal => match bool_cmp(a.new_paused, b.new_paused) {
            Ordering::Equal => match chain_cmp(&a.old, &b.old) {
                Ordering::Equal => chain_cmp(&a.new, &b.new),
                o => o,
            },
            o => o,
        },
        o => o,
    }
}

fn upsert(f: &dyn Fn(u64) -> u64, h: &Held, m: &[(Held, u64)]) -> Vec<(Held, u64)> {
    match m {
        [] => vec![(h.clone(), f(0))],
        [(k, n), rest @ ..] => match held_cmp(h, k) {
            Ordering::Less => {
                let mut v = vec![(h.clone(), f(0)), (k.clone(), *n)];
                v.extend_from_slice(rest);
                v
            }
            Ordering::Equal => {
                let mut v = vec![(k.clone(), f(*n))];
                v.extend_from_slice(rest);
                v
            }
            Ordering::Greater => {
                let mut v = vec![(k.clone(), *n)];
                v.extend(upsert(f, h, rest));
                v
            }
        },
    }
}

fn dec_count(h: &Held, m: &[(Held, u64)]) -> Vec<(Held, u64)> {
    match m {
        [] => vec![],
        [(k, n), rest @ ..] => {
            if k == h {
                if n.saturating_sub(1) == 0 {
                    rest.to_vec()
                } else {
                    let mut v = vec![(k.clone(), n - 1)];
                    v.extend_from_slice(rest);
                    v
                }
            } else {
                let mut v = vec![(k.clone(), *n)];
                v.extend(dec_count(h, rest));
                v
            }
        }
    }
}

fn cap_l(gs: &[LGrant], g: usize) -> Option<Quota> {
    gs.get(g).map(|gr| gr.quota)
}

fn is_available(q: Quota) -> bool {
    !matches!(q, Quota::Limited(0))
}

fn has_quota(l: &[Quota], g: usize) -> bool {
    l.get(g).is_some_and(|q| is_available(*q))
}

fn consume_at(l: &[Quota], g: usize) -> Vec<Quota> {
    let mut v = l.to_vec();
    if let Some(Quota::Limited(n)) = v.get_mut(g) {
        if *n > 0 {
            *n -= 1;
        }
    }
    v
}

fn refund_capped(cap: Option<Quota>, q: Quota) -> Quota {
    match (cap, q) {
        (Some(Quota::Limited(c)), Quota::Limited(n)) => {
            if n < c {
                Quota::Limited(n + 1)
            } else {
                Quota::Limited(n)
            }
        }
        (_, q) => q,
    }
}

fn first_serving(gs: &[LGrant], l: &[Quota], owner: usize, matching: &[usize]) -> Option<usize> {
    matching
        .iter()
        .copied()
        .find(|&g| gs.get(g).is_some_and(|gr| gr.agent == owner) && has_quota(l, g))
}

fn admit_grants(
    gs: &[LGrant],
    matching: &[usize],
    l: &[Quota],
    chain: &[usize],
) -> Option<(Vec<usize>, Vec<Quota>)> {
    match chain {
        [] => Some((vec![], l.to_vec())),
        [owner, rest @ ..] => {
            let g = first_serving(gs, l, *owner, matching)?;
            let (mut used, l2) = admit_grants(gs, matching, &consume_at(l, g), rest)?;
            used.insert(0, g);
            Some((used, l2))
        }
    }
}

fn refund_grants(gs: &[LGrant], l: &[Quota], used: &[usize]) -> Vec<Quota> {
    let mut v = l.to_vec();
    for &g in used {
        if let Some(q) = v.get_mut(g) {
            *q = refund_capped(cap_l(gs, g), *q);
        }
    }
    v
}

fn is_unlimited(q: Option<Quota>) -> bool {
    matches!(q, Some(Quota::Unlimited))
}

fn unlimited_only(ctx: &Ctx, h: &Held) -> bool {
    h.old.iter().all(|&g| is_unlimited(cap_l(&ctx.old, g)))
        && h.new.iter().all(|&g| is_unlimited(cap_l(&ctx.new, g)))
}

fn add_held(ctx: &Ctx, s: &PState, h: &Held) -> PState {
    let sat = unlimited_only(ctx, h);
    let f = move |n: u64| if sat { 1 } else { n + 1 };
    PState {
        calls: upsert(&f, h, &s.calls),
        ..s.clone()
    }
}

fn remove_held(ctx: &Ctx, s: &PState, h: &Held) -> PState {
    if unlimited_only(ctx, h) {
        s.clone()
    } else {
        PState {
            calls: dec_count(h, &s.calls),
            ..s.clone()
        }
    }
}

fn bit_of(t: u64) -> u64 {
    1u64 << t
}

fn has_bit(x: u64, t: u64) -> bool {
    x & bit_of(t) != 0
}

fn type_masks(t: u64, n: usize) -> (u64, u64) {
    let low = bit_of(n as u64) - 1;
    (t & low, (t >> n) & low)
}

fn make_type(o: u64, n: u64, n_sets: usize) -> u64 {
    o | (n << n_sets)
}

fn set_bit(tested: &[usize], s: Option<usize>) -> u64 {
    s.and_then(|x| tested.iter().position(|&y| y == x))
        .map_or(0, |i| bit_of(i as u64))
}

fn discovers_first(gs: &[LGrant], used: &[usize]) -> Option<usize> {
    used.first()
        .and_then(|&g| gs.get(g).and_then(|gr| gr.discovers))
}

fn discovered(ctx: &Ctx, h: &Held, t: u64) -> u64 {
    let n = ctx.tested.len();
    let (o, nw) = type_masks(t, n);
    make_type(
        o | set_bit(&ctx.tested, discovers_first(&ctx.old, &h.old)),
        nw | set_bit(&ctx.tested, discovers_first(&ctx.new, &h.new)),
        n,
    )
}

fn diverges(ctx: &Ctx, h: &Held) -> bool {
    ctx.flags.rules_read_sets
        && discovers_first(&ctx.old, &h.old) != discovers_first(&ctx.new, &h.new)
}

fn approval_any(gs: &[LGrant], used: &[usize]) -> bool {
    used.iter()
        .any(|&g| gs.get(g).is_some_and(|gr| gr.approval))
}

fn call_at(ctx: &Ctx, s: &PState, rule_pause: bool, c: Option<&Class>) -> PStep {
    let Some(c) = c else {
        return PStep::NotAdmitted;
    };
    if rule_pause && !ctx.flags.rule_pauses {
        return PStep::NotAdmitted;
    }
    // admitCallP
    if c.region < s.region || (c.types & s.types) != c.types {
        return PStep::NotAdmitted;
    }
    let Some(ro) = admit_grants(&ctx.old, &c.old, &s.old, &c.chain) else {
        return PStep::NotAdmitted;
    };
    let Some(rn) = admit_grants(&ctx.new, &c.new, &s.new, &c.chain) else {
        return PStep::Lost;
    };
    let op = rule_pause || approval_any(&ctx.old, &ro.0);
    let np = rule_pause || approval_any(&ctx.new, &rn.0);
    if np && !op {
        return PStep::Lost;
    }
    if op && !np && ctx.flags.history_rules {
        return PStep::Unknown;
    }
    if ro.0.len() > 4 || rn.0.len() > 4 {
        return PStep::Unknown;
    }
    let h = Held {
        old_paused: op,
        new_paused: np,
        old: ro.0,
        new: rn.0,
    };
    let s2 = PState {
        region: c.region,
        old: ro.1,
        new: rn.1,
        ..s.clone()
    };
    PStep::Next(add_held(ctx, &s2, &h))
}

fn refund_both(ctx: &Ctx, s: &PState, h: &Held) -> PState {
    let r = remove_held(ctx, s, h);
    PState {
        old: refund_grants(&ctx.old, &s.old, &h.old),
        new: if h.new_paused {
            refund_grants(&ctx.new, &s.new, &h.new)
        } else {
            s.new.clone()
        },
        ..r
    }
}

fn succeeded_some(ctx: &Ctx, s: &PState, h: &Held, t: u64) -> PStep {
    if has_bit(s.types, t) {
        if diverges(ctx, h) {
            PStep::Unknown
        } else {
            let r = remove_held(ctx, s, h);
            PStep::Next(PState {
                types: s.types | bit_of(discovered(ctx, h, t)),
                ..r
            })
        }
    } else {
        PStep::NotAdmitted
    }
}

fn held_step(ctx: &Ctx, s: &PState, h: &Held, w: &HeldEvent) -> PStep {
    match w {
        HeldEvent::Approve => {
            if h.old_paused {
                let h2 = Held {
                    old_paused: false,
                    new_paused: false,
                    ..h.clone()
                };
                PStep::Next(add_held(ctx, &remove_held(ctx, s, h), &h2))
            } else {
                PStep::NotAdmitted
            }
        }
        HeldEvent::ApprovalDenied => {
            if h.old_paused && ctx.flags.approval_denials {
                PStep::Next(refund_both(ctx, s, h))
            } else {
                PStep::NotAdmitted
            }
        }
        HeldEvent::Reject => {
            if h.old_paused {
                PStep::Next(refund_both(ctx, s, h))
            } else {
                PStep::NotAdmitted
            }
        }
        HeldEvent::Succeeded(None) | HeldEvent::Unknown => {
            if h.old_paused {
                PStep::NotAdmitted
            } else {
                PStep::Next(remove_held(ctx, s, h))
            }
        }
        HeldEvent::Succeeded(Some(t)) => {
            if *t < 64 {
                if h.old_paused {
                    PStep::NotAdmitted
                } else {
                    succeeded_some(ctx, s, h, *t)
                }
            } else {
                PStep::NotAdmitted
            }
        }
        HeldEvent::Failed => {
            if h.old_paused {
                PStep::NotAdmitted
            } else {
                let r = remove_held(ctx, s, h);
                PStep::Next(PState {
                    old: refund_grants(&ctx.old, &s.old, &h.old),
                    new: refund_grants(&ctx.new, &s.new, &h.new),
                    ..r
                })
            }
        }
    }
}

fn seed_add(ctx: &Ctx, s: &PState, k: usize, t: u64) -> PStep {
    if has_bit(s.types, t) {
        let n = ctx.tested.len();
        let b = set_bit(&ctx.tested, Some(k));
        let (o, nw) = type_masks(t, n);
        PStep::Next(PState {
            types: s.types | bit_of(make_type(o | b, nw | b, n)),
            ..s.clone()
        })
    } else {
        PStep::NotAdmitted
    }
}

fn step_ok(mem: &dyn Fn(&PState) -> bool, r: PStep) -> bool {
    match r {
        PStep::NotAdmitted => true,
        PStep::Next(t) => mem(&t),
        PStep::Lost | PStep::Unknown => false,
    }
}

fn held_ok(ctx: &Ctx, mem: &dyn Fn(&PState) -> bool, s: &PState, h: &Held) -> bool {
    step_ok(mem, held_step(ctx, s, h, &HeldEvent::Approve))
        && step_ok(mem, held_step(ctx, s, h, &HeldEvent::ApprovalDenied))
        && step_ok(mem, held_step(ctx, s, h, &HeldEvent::Reject))
        && step_ok(mem, held_step(ctx, s, h, &HeldEvent::Succeeded(None)))
        && (0..64).all(|t| step_ok(mem, held_step(ctx, s, h, &HeldEvent::Succeeded(Some(t)))))
        && step_ok(mem, held_step(ctx, s, h, &HeldEvent::Failed))
        && step_ok(mem, held_step(ctx, s, h, &HeldEvent::Unknown))
}

fn closed_at(ctx: &Ctx, mem: &dyn Fn(&PState) -> bool, s: &PState) -> bool {
    (0..ctx.classes.len()).all(|i| {
        step_ok(mem, call_at(ctx, s, false, ctx.classes.get(i)))
            && step_ok(mem, call_at(ctx, s, true, ctx.classes.get(i)))
    }) && s.calls.iter().all(|(h, _)| held_ok(ctx, mem, s, h))
        && ctx
            .seeds
            .iter()
            .all(|&k| (0..64).all(|t| step_ok(mem, seed_add(ctx, s, k, t))))
}

fn fits(ctx: &Ctx, s: &PState) -> bool {
    s.old.len() == ctx.old.len() && s.new.len() == ctx.new.len()
}

fn quota_cmp(a: &Quota, b: &Quota) -> Ordering {
    match (a, b) {
        (Quota::Limited(x), Quota::Limited(y)) => nat_cmp(*x, *y),
        (Quota::Limited(_), Quota::Unlimited) => Ordering::Less,
        (Quota::Unlimited, Quota::Limited(_)) => Ordering::Greater,
        (Quota::Unlimited, Quota::Unlimited) => Ordering::Equal,
    }
}

fn list_cmp<A>(cmp: &dyn Fn(&A, &A) -> Ordering, a: &[A], b: &[A]) -> Ordering {
    match (a, b) {
        ([], []) => Ordering::Equal,
        ([], _) => Ordering::Less,
        (_, []) => Ordering::Greater,
        ([x, xs @ ..], [y, ys @ ..]) => match cmp(x, y) {
            Ordering::Equal => list_cmp(cmp, xs, ys),
            o => o,
        },
    }
}

fn pair_cmp(a: &(Held, u64), b: &(Held, u64)) -> Ordering {
    match held_cmp(&a.0, &b.0) {
        Ordering::Equal => nat_cmp(a.1, b.1),
        o => o,
    }
}

fn state_cmp(a: &PState, b: &PState) -> Ordering {
    match nat_cmp(a.region as u64, b.region as u64) {
        Ordering::Equal => match nat_cmp(a.types, b.types) {
            Ordering::Equal => match list_cmp(&quota_cmp, &a.old, &b.old) {
                Ordering::Equal => match list_cmp(&quota_cmp, &a.new, &b.new) {
                    Ordering::Equal => list_cmp(&pair_cmp, &a.calls, &b.calls),
                    o => o,
                },
                o => o,
            },
            o => o,
        },
        o => o,
    }
}

enum RelTree {
    Leaf,
    Node(Box<RelTree>, PState, Box<RelTree>),
}

/// `buildTree`, literally (fuel, `take`/`drop` at half the length).
fn build_tree(fuel: usize, xs: &[PState]) -> RelTree {
    if fuel == 0 || xs.is_empty() {
        return RelTree::Leaf;
    }
    let half = xs.len() / 2;
    match xs.get(half) {
        None => RelTree::Leaf,
        Some(v) => RelTree::Node(
            Box::new(build_tree(fuel - 1, &xs[..half])),
            v.clone(),
            Box::new(build_tree(fuel - 1, &xs[half + 1..])),
        ),
    }
}

fn tree_mem(s: &PState, t: &RelTree) -> bool {
    match t {
        RelTree::Leaf => false,
        RelTree::Node(l, v, r) => match state_cmp(s, v) {
            Ordering::Less => tree_mem(s, l),
            Ordering::Greater => tree_mem(s, r),
            Ordering::Equal => v == s,
        },
    }
}

fn tree_all(f: &dyn Fn(&PState) -> bool, t: &RelTree) -> bool {
    match t {
        RelTree::Leaf => true,
        RelTree::Node(l, v, r) => f(v) && tree_all(f, l) && tree_all(f, r),
    }
}

fn check_simulation_tree(ctx: &Ctx, t: &RelTree) -> bool {
    let mem = |s: &PState| tree_mem(s, t);
    tree_mem(&product_initial(ctx), t)
        && tree_all(&|s| fits(ctx, s), t)
        && tree_all(&|s| closed_at(ctx, &mem, s), t)
}

fn lgrants(p: &Policy) -> Vec<LGrant> {
    p.grants
        .iter()
        .map(|g| LGrant {
            agent: g.agent,
            quota: g.quota,
            approval: g.approval,
            discovers: g.discovers,
        })
        .collect()
}

fn ctx_of(old: &Policy, new: &Policy, part: &Part) -> Ctx {
    Ctx {
        old: lgrants(old),
        new: lgrants(new),
        tested: part.classes.tested_sets.clone(),
        seeds: old.task_seeds.clone(),
        flags: part.flags.clone(),
        classes: part
            .classes
            .classes
            .iter()
            .map(|c| Class {
                chain: old.chain_iter(c.agent).collect(),
                region: c.region,
                old: c.old.clone(),
                new: c.new.clone(),
                types: c.types,
            })
            .collect(),
    }
}

fn lstate(s: &State) -> PState {
    PState {
        region: s.region,
        old: s.old.clone(),
        new: s.new.clone(),
        calls: s
            .calls
            .iter()
            .map(|(h, n)| {
                (
                    Held {
                        old_paused: h.old_paused,
                        new_paused: h.new_paused,
                        old: h.old.to_vec(),
                        new: h.new.to_vec(),
                    },
                    u64::from(*n),
                )
            })
            .collect(),
        types: s.types,
    }
}

/// The emitted tree of a relation: sorted by `lean_order`, `ofSorted`.
fn tree_of(relation: &[State]) -> RelTree {
    let mut sorted: Vec<&State> = relation.iter().collect();
    sorted.sort_by(|a, b| lean_order(a, b));
    let states: Vec<PState> = sorted.into_iter().map(lstate).collect();
    build_tree(states.len() + 1, &states)
}

fn load(rel: &str) -> Policy {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/certify-corpus");
    let text = std::fs::read_to_string(dir.join(rel)).unwrap();
    agenra_policy::compile(&text, "p").unwrap().policy
}

#[test]
fn the_lean_checker_accepts_the_emitted_relations_and_rejects_a_smaller_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/certify-corpus");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground-truth.json")).unwrap())
            .unwrap();
    let mut checked = 0;
    let mut rejected = 0;
    for e in truth.as_array().unwrap() {
        let id = e["id"].as_str().unwrap();
        let (o, n) = (
            load(e["old"].as_str().unwrap()),
            load(e["new"].as_str().unwrap()),
        );
        let Some(cert) = certify(&o, &n).certificate else {
            continue;
        };
        let Ok(parts) = relations(&o, &n, &cert) else {
            continue;
        };
        for (i, part) in parts.iter().enumerate() {
            // The largest relations take long in a debug build: skip them.
            if part.relation.len() > 6000 {
                continue;
            }
            let ctx = ctx_of(&o, &n, part);
            assert!(
                check_simulation_tree(&ctx, &tree_of(&part.relation)),
                "{id}: component {i}"
            );
            checked += 1;
            // Drop the last pair BFS reached (not the initial one): some
            // pair leads to it, so the check must now fail.
            if part.relation.len() > 1 {
                let smaller = &part.relation[..part.relation.len() - 1];
                assert!(
                    !check_simulation_tree(&ctx, &tree_of(smaller)),
                    "{id}: component {i} without its last pair"
                );
                rejected += 1;
            }
        }
    }
    println!("{checked} components accepted, {rejected} smaller relations rejected");
    assert!(checked >= 20, "{checked}");
    assert!(rejected >= 10, "{rejected}");
}

/// A certified pair with no call class (issue 26: `--emit-lean` used to
/// fail on it): one part with no tools and no classes, whose relation the
/// Lean checker (transcribed) accepts.
#[test]
fn a_pair_without_a_call_class_gets_one_checked_part() {
    let src = "policy \"p\";\ntool a.x(path: string) { resource path; }\n";
    let p = agenra_policy::compile(src, "p").unwrap().policy;
    let cert = certify(&p, &p)
        .certificate
        .expect("identical policies are certified");
    let parts = relations(&p, &p, &cert).expect("a relation for the empty abstraction");
    assert_eq!(parts.len(), 1);
    assert!(parts[0].tools.is_empty() && parts[0].classes.classes.is_empty());
    let ctx = ctx_of(&p, &p, &parts[0]);
    assert!(check_simulation_tree(&ctx, &tree_of(&parts[0].relation)));
}
