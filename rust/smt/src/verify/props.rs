//! The seven properties: each builds its Z3 query over the bounded run (or
//! decides on structure), turns a model into a concrete trace and confirms
//! it through the monitor.

use super::alphabet::{self, Alphabet, Letter};
use super::concrete::{self, CStep, Replayed};
use super::run::{self, below, build, Run};
use super::taint;
use super::{Options, Outcome, Property, Witness};
use crate::step::{encode_step, SymLabel};
use agenra_core::decision::Rule;
use agenra_core::label::{Label, LabelPattern};
use agenra_core::policy::{FlowEffect, PathKind, Policy, Quota, RuleEffect};
use agenra_core::value::{ArgOp, Cond, Value};
use agenra_core::Verdict;
use z3::ast::{Bool, Int};
use z3::{Model, Params, SatResult, Solver};

type Answer = (Outcome, Vec<String>, Vec<Witness>);
/// The violations at a step of a run: a term and what it means.
type Violations<'v> = &'v dyn Fn(&Run, usize) -> Vec<(Bool, String)>;
/// Confirms a replayed witness: what it shows, or why it does not.
type Confirm<'v> = &'v dyn Fn(&[CStep], &Replayed, &str) -> Result<String, String>;

pub(super) struct Ctx<'a> {
    policy: &'a Policy,
    opts: Options,
    alphabet: Result<Alphabet, String>,
    /// The letters the bounded searches range over: the alphabet's
    /// letters that can be admitted ([`alphabet::may_be_admitted`]), with
    /// distinct signatures ([`alphabet::distinct`]).
    search: Vec<Letter>,
    /// All the alphabet's letters with distinct signatures (obligations:
    /// a denied call may still meet or miss one).
    search_all: Vec<Letter>,
}

enum Solved {
    Sat(Model),
    Unsat,
    Unknown(String),
}

/// How many models that the monitor does not reproduce are blocked before
/// giving up with `unknown`.
const RETRIES: usize = 3;

/// Solves with Z3's finite-domain solver (every variable of the bounded
/// run ranges over a finite set: letters, lineage choices, Booleans), and
/// with the general solver if that one gives up for another reason than
/// the timeout.
fn solve(opts: &Options, facts: &[Bool], goal: &Bool) -> Solved {
    match solve_with(opts, facts, goal, Solver::new_for_logic("QF_FD")) {
        Solved::Unknown(why) if !why.contains("timeout") && !why.contains("canceled") => {
            solve_with(opts, facts, goal, None)
        }
        other => other,
    }
}

fn solve_with(opts: &Options, facts: &[Bool], goal: &Bool, solver: Option<Solver>) -> Solved {
    let s = solver.unwrap_or_default();
    let mut p = Params::new();
    p.set_u32("timeout", opts.timeout_ms);
    s.set_params(&p);
    for f in facts {
        s.assert(f);
    }
    s.assert(goal);
    match s.check() {
        SatResult::Sat => match s.get_model() {
            Some(m) => Solved::Sat(m),
            None => Solved::Unknown("Z3 gave no model".into()),
        },
        SatResult::Unsat => Solved::Unsat,
        SatResult::Unknown => Solved::Unknown(format!(
            "Z3: {} (timeout {} ms)",
            s.get_reason_unknown().unwrap_or_else(|| "unknown".into()),
            opts.timeout_ms
        )),
    }
}

/// An incremental finite-domain solver with the per-query timeout.
fn new_solver(opts: &Options) -> Solver {
    let s = Solver::new_for_logic("QF_FD").unwrap_or_default();
    let mut p = Params::new();
    p.set_u32("timeout", opts.timeout_ms);
    s.set_params(&p);
    s
}

/// Checks `s` assuming `guard`; if the finite-domain solver gives up for
/// another reason than the timeout, the general solver decides the same
/// assertions.
fn check(s: &Solver, guard: &Bool, opts: &Options) -> Solved {
    let t0 = std::time::Instant::now();
    let r = s.check_assumptions(std::slice::from_ref(guard));
    if std::env::var_os("AGENRA_VERIFY_DEBUG").is_some() {
        eprintln!("check: {r:?} in {:?}", t0.elapsed());
    }
    match r {
        SatResult::Sat => match s.get_model() {
            Some(m) => Solved::Sat(m),
            None => Solved::Unknown("Z3 gave no model".into()),
        },
        SatResult::Unsat => Solved::Unsat,
        SatResult::Unknown => {
            let why = s.get_reason_unknown().unwrap_or_else(|| "unknown".into());
            if why.contains("timeout") || why.contains("canceled") {
                return Solved::Unknown(format!("Z3: {why} (timeout {} ms)", opts.timeout_ms));
            }
            solve_with(opts, &s.get_assertions(), guard, None)
        }
    }
}

fn bval(m: &Model, b: &Bool) -> bool {
    m.eval(b, true).and_then(|x| x.as_bool()).unwrap_or(false)
}

fn name_of(policy: &Policy, r: Rule) -> String {
    r.name(policy)
}

/// The same step choices (letters, lineage) as a clause to exclude.
fn block(run: &Run, m: &Model, upto: usize) -> Bool {
    let mut same = Vec::new();
    for s in run.steps.iter().take(upto + 1) {
        for x in std::iter::once(&s.choice).chain(&s.lin) {
            if let Some(v) = m.eval(x, true) {
                same.push(x.eq(&v));
            }
        }
        for b in [&s.approve, &s.succeed] {
            if let Some(v) = m.eval(b, true) {
                same.push(b.iff(&v));
            }
        }
    }
    Bool::and(&same).not()
}

fn steps_of(letters: &[Letter], ms: &[run::ModelStep]) -> Vec<CStep> {
    ms.iter()
        .map(|s| CStep {
            letter: letters[s.letter].clone(),
            lineage: s.lineage.clone(),
            approve: s.approve,
            succeed: s.succeed,
        })
        .collect()
}

/// A trusted-only sink: an unconditional `deny flow ...: untrusted -> S`.
fn trusted_only(policy: &Policy, sink: usize) -> Option<usize> {
    policy.flow_rules.iter().position(|r| {
        r.sink == sink
            && r.when == Cond::TRUE
            && matches!(r.effect, FlowEffect::Deny(p) if p.untrusted
                && p.min_sensitivity.unwrap_or(0) == 0
                && p.any_category.is_empty())
    })
}

fn confidentiality(p: &LabelPattern) -> bool {
    !p.untrusted && (p.min_sensitivity.unwrap_or(0) > 0 || !p.any_category.is_empty())
}

fn holds_named(policy: &Policy, l: &Letter, c: &agenra_core::NamedCond) -> bool {
    let tool = &policy.tools[l.tool];
    c.resolve(&|n| tool.param_index(n))
        .eval(&l.args, l.agent, &[])
}

impl<'a> Ctx<'a> {
    pub(super) fn new(policy: &'a Policy, opts: &Options) -> Ctx<'a> {
        let alphabet = alphabet::alphabet(policy).map_err(|e| format!("call classes: {e}"));
        let search_all = match &alphabet {
            Ok(a) => alphabet::distinct(policy, &a.letters),
            Err(_) => Vec::new(),
        };
        let search = search_all
            .iter()
            .filter(|l| alphabet::may_be_admitted(policy, l))
            .cloned()
            .collect();
        Ctx {
            policy,
            opts: *opts,
            alphabet,
            search,
            search_all,
        }
    }

    /// Constructs the bounded traces do not model.
    fn unsupported(&self) -> Vec<String> {
        // Own contexts are modeled (one context per agent that has one);
        // amount budgets are over-approximated (`notes`); nothing is left
        // out at present.
        Vec::new()
    }

    fn notes(&self) -> Vec<String> {
        let mut out = vec![format!("bound: {} calls", self.opts.bound)];
        for &g in &self.policy.shared_grants {
            out.push(format!(
                "grant `{}` shares its quota with the tenant's sessions: the traces are one session's, in which the pool may be empty at any step (other sessions may drain it); quota soundness is checked for this session, and the units all sessions take are kept within the quota by the pool itself (taken and checked under one lock, property-tested)",
                self.policy.grants[g].name
            ));
        }
        for b in &self.policy.budgets {
            out.push(format!(
                "grant `{}` spends from an amount budget of {}: the traces do not track what is left of it, so at any step it may refuse the call (and first-match go on to a later grant); every such trace is checked, so a property that holds holds whatever the amounts",
                self.policy.grants.get(b.grant).map_or("?", |g| g.name.as_str()),
                b.amount
            ));
        }
        for r in &self.policy.renewals {
            out.push(format!(
                "grant `{}` has a {} of {} that renews every {} seconds: the traces have no clock and do not track what is left in the window, so at any step it may refuse the call (and first-match go on to a later grant); every such trace is checked, so a property that holds holds whatever the times",
                self.policy.grants.get(r.grant).map_or("?", |g| g.name.as_str()),
                if r.limit.is_amount() { "budget" } else { "quota" },
                agenra_core::window::limit_of(r),
                r.secs
            ));
        }
        for w in &self.policy.count_windows {
            out.push(format!(
                "count `{}` looks back over a sliding window of {} seconds: the traces have no clock, so at any step where the count since its reset reaches its limit the rule may or may not stop the call (the calls may have left the window); every such trace is checked, so a property that holds holds whatever the times",
                self.policy.path_rules.get(w.rule).map_or("?", |r| r.name.as_str()),
                w.secs
            ));
        }
        if let Ok(a) = &self.alphabet {
            out.push(format!(
                "{} call classes ({} the bounded encoding tells apart, {} of them can be admitted)",
                a.letters.len(),
                self.search_all.len(),
                self.search.len()
            ));
            if std::env::var_os("AGENRA_VERIFY_DEBUG").is_some() {
                for l in &a.letters {
                    out.push(format!(
                        "letter {} {} {:?}",
                        self.policy.agents[l.agent].name, self.policy.tools[l.tool].name, l.args
                    ));
                }
            }
            if !a.set_letters.is_empty() {
                out.push(format!(
                    "{} call classes need a value in a discovered set and are not in the bounded traces",
                    a.set_letters.len()
                ));
            }
        }
        out
    }

    pub(super) fn check(&self, p: Property) -> Answer {
        let a = match &self.alphabet {
            Ok(a) => a,
            Err(e) => return (Outcome::Unknown, vec![e.clone()], vec![]),
        };
        let bounded = matches!(
            p,
            Property::NonLeakage
                | Property::TrustPreservation
                | Property::DelegationSafety
                | Property::TaintMonotonicity
                | Property::QuotaSoundness
        );
        if bounded {
            let why = self.unsupported();
            if !why.is_empty() {
                return (Outcome::Unknown, why, vec![]);
            }
            if self.search.is_empty() {
                let mut d = self.notes();
                d.insert(0, "no call can be admitted".into());
                return (Outcome::Holds, d, vec![]);
            }
        }
        match p {
            Property::NonLeakage => self.non_leakage(a),
            Property::TrustPreservation => self.trust_preservation(a),
            Property::PrivilegeEscalation => self.privilege_escalation(a),
            Property::DelegationSafety => self.delegation_safety(a),
            Property::TaintMonotonicity => self.taint_monotonicity(a),
            Property::QuotaSoundness => self.quota_soundness(a),
            Property::Consistency => self.consistency(a),
        }
    }

    /// The common loop of single-run properties: `viol(run, j)` lists the
    /// violations at step `j` (term, what it is); `confirm` checks the
    /// replayed trace and says what it shows. The run grows one step at a
    /// time on one incremental solver, and each bound is asked on its own
    /// (under an assumption): the first witness found is a shortest one,
    /// and a violation found at a small bound never pays for the longer
    /// traces.
    fn single_run(&self, viol: Violations, confirm: Confirm) -> Answer {
        let letters = &self.search;
        let k = self.opts.bound.max(1);
        let s = new_solver(&self.opts);
        let mut r = Run::start(self.policy, letters);
        let mut last_err = String::new();
        let mut misses = 0;
        for j in 0..k {
            let from = r.marks.last().copied().unwrap_or(0);
            r.extend(self.policy, letters, "v", None);
            for c in &r.constraints[from..] {
                s.assert(c);
            }
            let vs = viol(&r, j);
            if vs.is_empty() {
                continue;
            }
            let terms: Vec<Bool> = vs.iter().map(|(b, _)| b.clone()).collect();
            let guard = Bool::fresh_const("goal");
            s.assert(guard.implies(Bool::or(&terms)));
            loop {
                match check(&s, &guard, &self.opts) {
                    Solved::Unsat => break,
                    Solved::Unknown(why) => return (Outcome::Unknown, vec![why], vec![]),
                    Solved::Sat(m) => {
                        let Some(what) = vs.iter().find(|(b, _)| bval(&m, b)).map(|(_, w)| w)
                        else {
                            return (
                                Outcome::Unknown,
                                vec!["Z3 model without a violation".into()],
                                vec![],
                            );
                        };
                        let ms = run::read(self.policy, letters, &r, &m, j + 1);
                        let steps = steps_of(letters, &ms);
                        match concrete::replay(self.policy, &steps)
                            .map_err(|e| e.to_string())
                            .and_then(|rep| confirm(&steps, &rep, what).map(|s| (rep, s)))
                        {
                            Ok((rep, shows)) => {
                                return (
                                    Outcome::Violated,
                                    vec![what.clone()],
                                    vec![Witness {
                                        role: String::new(),
                                        events: rep.events,
                                        shows,
                                    }],
                                )
                            }
                            Err(e) => {
                                last_err = e;
                                misses += 1;
                                if misses >= RETRIES {
                                    return (
                                        Outcome::Unknown,
                                        vec![format!(
                                            "models the monitor did not reproduce: {last_err}"
                                        )],
                                        vec![],
                                    );
                                }
                                s.assert(guard.implies(block(&r, &m, j)));
                            }
                        }
                    }
                }
            }
        }
        let mut d = self.notes();
        if misses > 0 {
            d.push(format!("models the monitor did not reproduce: {last_err}"));
            return (Outcome::Unknown, d, vec![]);
        }
        (Outcome::Holds, d, vec![])
    }

    // ---- non-leakage ---------------------------------------------------

    fn non_leakage(&self, _a: &Alphabet) -> Answer {
        let p = self.policy;
        // The monitor judges the sink's label; the property judges every
        // argument without sanitizers. They differ only through a sink
        // bound to some arguments or a sanitizer that lowers
        // confidentiality: without either, every violation is a DENY.
        let bound = p.tools.iter().any(|t| {
            t.sinks.iter().any(|u| {
                u.params
                    .as_ref()
                    .is_some_and(|ps| ps.len() < t.params.len())
            })
        });
        let declassifies = p
            .sanitizers
            .iter()
            .any(|z| !z.removes.is_empty() || z.max_sensitivity.is_some());
        if !bound && !declassifies {
            let mut d = self.notes();
            d.insert(0, "decided on structure: every sink receives every argument and no sanitizer lowers confidentiality, so the monitor denies every such flow".into());
            return (Outcome::Holds, d, vec![]);
        }
        let viol = |r: &Run, j: usize| {
            let s = &r.steps[j];
            let mut out = Vec::new();
            for (g, gs) in r.groups.iter().zip(&s.groups) {
                let tool = &p.tools[g.tool];
                let mut raw = gs.raw_full.clone();
                raw.untrusted = Bool::from_bool(false);
                for (ui, u) in tool.sinks.iter().enumerate() {
                    for (ri, rule) in p.flow_rules.iter().enumerate() {
                        let FlowEffect::Deny(pat) = rule.effect else {
                            continue;
                        };
                        if rule.sink != u.sink || !confidentiality(&pat) {
                            continue;
                        }
                        let exempt: Vec<Bool> = p
                            .flow_rules
                            .iter()
                            .enumerate()
                            .filter(|(_, x)| x.sink == u.sink)
                            .filter_map(|(ai, x)| match x.effect {
                                FlowEffect::Allow(c) => Some(Bool::and(&[
                                    gs.inputs.flow_when[ai].clone(),
                                    gs.inputs.sinks[ui].flows_to(p, &c),
                                ])),
                                _ => None,
                            })
                            .collect();
                        out.push((
                            Bool::and(&[
                                gs.picked.clone(),
                                s.admitted.clone(),
                                gs.inputs.flow_when[ri].clone(),
                                raw.matches(&pat),
                                Bool::or(&exempt).not(),
                            ]),
                            format!(
                                "`{}` (agent `{}`) carries data that `{}` forbids into sink `{}`",
                                tool.name, p.agents[g.agent].name, rule.name, p.sinks[u.sink]
                            ),
                        ));
                    }
                }
            }
            out
        };
        let confirm = |steps: &[CStep], rep: &Replayed, _: &str| {
            let j = steps.len() - 1;
            let (l, seen) = (&steps[j].letter, &rep.steps[j]);
            if !seen.admitted {
                return Err(format!(
                    "the monitor answers {:?} to the last call",
                    seen.verdict
                ));
            }
            let tool = &p.tools[l.tool];
            let raw = Label {
                trusted: true,
                ..seen.raw_full
            };
            for (ui, u) in tool.sinks.iter().enumerate() {
                for rule in p.flow_rules.iter().filter(|r| r.sink == u.sink) {
                    let FlowEffect::Deny(pat) = rule.effect else {
                        continue;
                    };
                    if !confidentiality(&pat)
                        || !holds_named(p, l, &rule.when)
                        || !pat.matches(&raw)
                    {
                        continue;
                    }
                    let exempt = p
                        .flow_rules
                        .iter()
                        .filter(|x| x.sink == u.sink)
                        .any(|x| match x.effect {
                            FlowEffect::Allow(c) => {
                                holds_named(p, l, &x.when) && seen.sinks[ui].flows_to(&c)
                            }
                            _ => false,
                        });
                    if !exempt {
                        return Ok(format!(
                            "the monitor admits call {} ({}), which carries {} into sink `{}`; `{}` forbids that label",
                            concrete::call_id(j),
                            tool.name,
                            p.show_label(&raw),
                            p.sinks[u.sink],
                            rule.name
                        ));
                    }
                }
            }
            Err("the replayed call carries nothing a deny rule forbids".into())
        };
        self.single_run(&viol, &confirm)
    }

    // ---- trust preservation ----------------------------------------------

    fn trust_preservation(&self, _a: &Alphabet) -> Answer {
        let p = self.policy;
        // The monitor denies an untrusted label at a trusted-only sink
        // unless an allow rule with an untrusted ceiling exempts it.
        let open = p.flow_rules.iter().any(|r| {
            trusted_only(p, r.sink).is_some()
                && matches!(r.effect, FlowEffect::Allow(c) if !c.trusted)
        });
        if !open {
            let mut d = self.notes();
            d.insert(0, "decided on structure: no allow rule with an untrusted ceiling on a trusted-only sink, so the monitor denies every such flow".into());
            return (Outcome::Holds, d, vec![]);
        }
        let viol = |r: &Run, j: usize| {
            let s = &r.steps[j];
            let mut out = Vec::new();
            for (g, gs) in r.groups.iter().zip(&s.groups) {
                let tool = &p.tools[g.tool];
                for (u, use_) in tool.sinks.iter().enumerate() {
                    if let Some(ri) = trusted_only(p, use_.sink) {
                        out.push((
                            Bool::and(&[
                                gs.picked.clone(),
                                s.admitted.clone(),
                                gs.inputs.sinks[u].untrusted.clone(),
                            ]),
                            format!(
                                "`{}` (agent `{}`) brings untrusted data into sink `{}`, which `{}` keeps trusted-only",
                                tool.name, p.agents[g.agent].name, p.sinks[use_.sink], p.flow_rules[ri].name
                            ),
                        ));
                    }
                }
            }
            out
        };
        let confirm = |steps: &[CStep], rep: &Replayed, _: &str| {
            let j = steps.len() - 1;
            let (l, seen) = (&steps[j].letter, &rep.steps[j]);
            if !seen.admitted {
                return Err(format!(
                    "the monitor answers {:?} to the last call",
                    seen.verdict
                ));
            }
            let tool = &p.tools[l.tool];
            for (u, use_) in tool.sinks.iter().enumerate() {
                if trusted_only(p, use_.sink).is_some() && !seen.sinks[u].trusted {
                    return Ok(format!(
                        "the monitor admits call {} ({}), which brings {} into trusted-only sink `{}`",
                        concrete::call_id(j),
                        tool.name,
                        p.show_label(&seen.sinks[u]),
                        p.sinks[use_.sink]
                    ));
                }
            }
            Err("the replayed call brings no untrusted data into a trusted-only sink".into())
        };
        self.single_run(&viol, &confirm)
    }

    // ---- quota soundness --------------------------------------------------

    fn quota_soundness(&self, _a: &Alphabet) -> Answer {
        let p = self.policy;
        // The calls a grant answers for: it is the first grant of its agent,
        // in policy order, that matches them (quota aside).
        let covers = |g: usize, l: &Letter| {
            let grant = &p.grants[g];
            let req = l.request();
            let m = |h: &agenra_core::policy::Grant| {
                agenra_core::spec::grant_matches(p, h, h.agent, &req, &l.sets)
            };
            p.chain_iter(l.agent).any(|x| x == grant.agent)
                && m(grant)
                && !p.grants[..g].iter().any(|h| h.agent == grant.agent && m(h))
        };
        // Without a later grant of the same agent that also matches its
        // calls, a grant's calls are served by it or denied: the ledger
        // never overruns a quota (proved in Lean), so only grants that can
        // be fallen through are searched.
        let mut searched: Vec<(usize, u64, Vec<usize>)> = Vec::new();
        for (g, grant) in p.grants.iter().enumerate() {
            let Quota::Limited(n) = grant.quota else {
                continue;
            };
            let mine: Vec<usize> = (0..self.search.len())
                .filter(|&li| covers(g, &self.search[li]))
                .collect();
            let fallthrough = mine.iter().any(|&li| {
                let l = &self.search[li];
                p.grants.iter().skip(g + 1).any(|h| {
                    h.agent == grant.agent
                        && agenra_core::spec::grant_matches(p, h, h.agent, &l.request(), &l.sets)
                })
            });
            if !mine.is_empty() && fallthrough {
                searched.push((g, n, mine));
            }
        }
        if searched.is_empty() {
            let mut d = self.notes();
            d.insert(0, "no limited grant has calls a later grant of its agent also matches: the ledger bounds each".into());
            return (Outcome::Holds, d, vec![]);
        }
        let viol = |r: &Run, j: usize| {
            let mut out = Vec::new();
            for (g, n, mine) in &searched {
                let (g, n) = (*g, *n);
                let grant = &p.grants[g];
                if n as usize > j {
                    continue;
                }
                let matched = |i: usize| {
                    let s = &r.steps[i];
                    let parts: Vec<Bool> = mine
                        .iter()
                        .map(|&li| s.choice.eq(Int::from_u64(li as u64)))
                        .collect();
                    Bool::and(&[Bool::or(&parts), s.allow.clone()])
                };
                let before: Vec<Int> = (0..j)
                    .map(|i| {
                        Bool::and(&[matched(i), r.steps[i].succeed.clone()])
                            .ite(&Int::from_i64(1), &Int::from_i64(0))
                    })
                    .collect();
                let count = if before.is_empty() {
                    Int::from_i64(0)
                } else {
                    Int::add(&before)
                };
                out.push((
                    Bool::and(&[matched(j), count.ge(Int::from_u64(n))]),
                    format!(
                        "more than {n} calls that grant `{}` is the first to cover are ALLOWed without a human approval",
                        grant.name
                    ),
                ));
            }
            out
        };
        let confirm = |steps: &[CStep], rep: &Replayed, what: &str| {
            for (g, grant) in p.grants.iter().enumerate() {
                let Quota::Limited(n) = grant.quota else {
                    continue;
                };
                if !what.contains(&format!("`{}`", grant.name)) {
                    continue;
                }
                let last = steps.len() - 1;
                let count = steps
                    .iter()
                    .zip(&rep.steps)
                    .enumerate()
                    .filter(|(i, (s, seen))| {
                        seen.verdict == Verdict::Allow
                            && covers(g, &s.letter)
                            && (*i == last || s.succeed)
                    })
                    .count();
                if count as u64 > n {
                    return Ok(format!(
                        "the monitor ALLOWs {count} calls that grant `{}` (quota {n}) is the first to cover, none failed and none approved by a human",
                        grant.name
                    ));
                }
            }
            Err("the replay does not exceed the quota".into())
        };
        self.single_run(&viol, &confirm)
    }

    // ---- delegation safety ---------------------------------------------------

    fn delegation_safety(&self, _a: &Alphabet) -> Answer {
        let p = self.policy;
        if p.agents.iter().all(|x| x.parent.is_none()) {
            let mut d = self.notes();
            d.insert(0, "the policy has no delegates".into());
            return (Outcome::Holds, d, vec![]);
        }
        if let Some(why) = self.delegation_by_structure() {
            let mut d = self.notes();
            d.insert(0, why);
            return (Outcome::Holds, d, vec![]);
        }
        let letters = &self.search;
        let viol = |r: &Run, j: usize| {
            let s = &r.steps[j];
            let mut out = Vec::new();
            for (g, gs) in r.groups.iter().zip(&s.groups) {
                let Some(parent) = p.agents[g.agent].parent else {
                    continue;
                };
                let pin = run::group_inputs(
                    p,
                    letters,
                    g,
                    parent,
                    &s.choice,
                    &gs.args,
                    &gs.input,
                    &gs.resource,
                    &gs.inputs.seq,
                );
                let pe = encode_step(p, &s.state, &pin);
                out.push((
                    Bool::and(&[
                        gs.picked.clone(),
                        gs.enc.deny.not(),
                        Bool::or(&[
                            pe.deny.clone(),
                            Bool::and(&[gs.enc.allow.clone(), pe.pause.clone()]),
                        ]),
                    ]),
                    format!(
                        "delegate `{}` is admitted to call `{}` where its delegator `{}` is not",
                        p.agents[g.agent].name, p.tools[g.tool].name, p.agents[parent].name
                    ),
                ));
            }
            out
        };
        let companion = std::cell::RefCell::new(None);
        let confirm = |steps: &[CStep], rep: &Replayed, _: &str| {
            let j = steps.len() - 1;
            let d = &rep.steps[j];
            let agent = steps[j].letter.agent;
            let parent = p.agents[agent].parent.ok_or("not a delegate")?;
            let mut alt = steps.to_vec();
            alt[j].letter = alt[j].letter.as_agent(parent);
            let prep = concrete::replay(p, &alt)?;
            let pv = prep.steps[j].verdict;
            let worse = d.verdict != Verdict::Deny
                && (pv == Verdict::Deny || (d.verdict == Verdict::Allow && pv == Verdict::Pause));
            if !worse {
                return Err(format!("delegate {:?}, delegator {:?}", d.verdict, pv));
            }
            let shows = format!(
                "the same call by `{}` gets {} ({})",
                p.agents[parent].name,
                verdict_name(pv),
                name_of(p, prep.steps[j].rule)
            );
            *companion.borrow_mut() = Some(Witness {
                role: "delegator".into(),
                events: prep.events,
                shows,
            });
            Ok(format!(
                "the monitor gives delegate `{}`'s call {} {} ({}); its delegator `{}` gets {} for the same call (trace `delegator`)",
                p.agents[agent].name,
                concrete::call_id(j),
                verdict_name(d.verdict),
                name_of(p, d.rule),
                p.agents[parent].name,
                verdict_name(pv)
            ))
        };
        let mut ans = self.single_run(&viol, &confirm);
        if ans.0 == Outcome::Violated {
            if let Some(w) = companion.into_inner() {
                ans.2.push(w);
            }
        }
        ans
    }

    /// Delegation safety on structure (docs/verification.md): when no
    /// condition anywhere tests the calling agent, no delegator has a
    /// `deny` or `pause` rule on what it receives, and every delegate's
    /// call is in its delegators' scopes, then a delegate's call and the
    /// same call by its delegator read the same conditions, the same flow
    /// and history rules and the same state; the delegate's ledger takes a
    /// unit along the whole chain (its delegator's selection included), so
    /// its DENY covers the delegator's and its approvals include the
    /// delegator's: it is never admitted where the delegator is denied,
    /// nor ALLOWed where the delegator is PAUSEd. `None` if a premise
    /// fails (then Z3 searches).
    fn delegation_by_structure(&self) -> Option<String> {
        let p = self.policy;
        let named = |c: &agenra_core::NamedCond| c.agents().is_empty();
        let step = |s: &agenra_core::policy::StepPattern| s.when.as_ref().is_none_or(named);
        let agent_free = p.flow_rules.iter().all(|r| named(&r.when))
            && p.receive_rules.iter().all(|r| named(&r.when))
            && p.call_rules.iter().all(|r| r.when.agents().is_empty())
            && p.grants
                .iter()
                .all(|g| g.args.iter().all(|c| c.agents().is_empty()))
            && p.path_rules.iter().all(|r| {
                r.reset.as_ref().is_none_or(step)
                    && match &r.kind {
                        PathKind::Sequence(s) => s.iter().all(step),
                        PathKind::AtMost { step: s, .. } => step(s),
                    }
            });
        if !agent_free {
            return None;
        }
        let delegators: Vec<usize> = p.agents.iter().filter_map(|a| a.parent).collect();
        let guarded = p
            .receive_rules
            .iter()
            .any(|r| delegators.contains(&r.agent) && !matches!(r.effect, FlowEffect::Allow(_)));
        if guarded {
            return None;
        }
        let scoped = self.search.iter().all(|l| {
            p.chain_iter(l.agent)
                .all(|x| agenra_certify::classes::in_scope(p, x, l.tool))
        });
        if !scoped {
            return None;
        }
        Some("decided on structure: no condition tests the calling agent, no delegator has a deny or pause rule on what it receives, and every delegate's call is in its delegators' scopes, so a delegate's call is denied whenever its delegator's is, and paused whenever its delegator's is".into())
    }

    // ---- taint monotonicity ------------------------------------------------

    fn taint_monotonicity(&self, _a: &Alphabet) -> Answer {
        let p = self.policy;
        // Every other part of the step is monotone in the labels (deny and
        // pause patterns and path steps' `reads` are upward closed, allow
        // ceilings downward closed, sanitizers monotone): only a `reset`
        // that reads labels can undo a rule's progress when labels grow,
        // and only on a call whose own output label does not decide the
        // reset either way (`taint::reset_differs`).
        let resets: Vec<&str> = p
            .path_rules
            .iter()
            .filter(|r| r.reset.as_ref().is_some_and(|x| x.reads.is_some()))
            .map(|r| r.name.as_str())
            .collect();
        if !p
            .path_rules
            .iter()
            .any(|r| taint::reset_differs(p, &self.search, r))
        {
            let mut d = self.notes();
            d.insert(
                0,
                if resets.is_empty() {
                    "decided on structure: no `reset on reads(...)`, and every other part of the step is monotone in the labels".into()
                } else {
                    format!(
                        "decided on structure: the `reset on reads(...)` of {} fires on a call whatever its arguments carry, or on none (its own output label decides), and every other part of the step is monotone in the labels",
                        resets.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                    )
                },
            );
            return (Outcome::Holds, d, vec![]);
        }
        // A witness of the usual shape, built from a rule and replayed
        // (`taint.rs`); otherwise (and for `holds`) the two-run search.
        let confirm = |a: &[CStep], b: &[CStep]| confirm_monotone(p, a, b).is_ok();
        let k = self.opts.bound.max(1);
        if let Some((sa, sb)) = taint::construct(p, &self.search, k, &confirm) {
            if let Ok((wa, wb, what)) = confirm_monotone(p, &sa, &sb) {
                let how = format!(
                    "witness built from the rule's shape and replayed ({} calls; a shorter one may exist)",
                    sa.len()
                );
                return (Outcome::Violated, vec![what, how], vec![wa, wb]);
            }
        }
        self.taint_monotonicity_smt()
    }

    /// The two-run Z3 search of taint monotonicity (no construction).
    fn taint_monotonicity_smt(&self) -> Answer {
        let p = self.policy;
        // The two runs grow one step at a time on one incremental solver.
        // Every witness of a bound `j` has the same verdicts in both runs
        // at the steps before `j`; so once bound `j` has no witness, "the
        // verdicts agree at step `j`" is asserted for the longer bounds.
        let letters = &self.search;
        let k = self.opts.bound.max(1);
        let s = new_solver(&self.opts);
        let mut ra = Run::start(p, letters);
        let mut rb = Run::start(p, letters);
        let same = |ra: &Run, rb: &Run, i: usize| {
            let (x, y) = (&ra.steps[i], &rb.steps[i]);
            Bool::and(&[
                x.deny.iff(&y.deny),
                x.pause.iff(&y.pause),
                x.admitted.iff(&y.admitted),
            ])
        };
        let mut last_err = String::new();
        let mut misses = 0;
        for j in 0..k {
            let (fa, fb) = (
                ra.marks.last().copied().unwrap_or(0),
                rb.marks.last().copied().unwrap_or(0),
            );
            ra.extend(p, letters, "a", None);
            rb.extend(p, letters, "b", Some(&ra));
            for c in ra.constraints[fa..].iter().chain(&rb.constraints[fb..]) {
                s.assert(c);
            }
            let (sa, sb) = (&ra.steps[j], &rb.steps[j]);
            for (ga, gb) in sa.groups.iter().zip(&sb.groups) {
                let mut dom: Vec<Bool> = ga
                    .args
                    .iter()
                    .zip(&gb.args)
                    .map(|(x, y)| below(x, y))
                    .collect();
                dom.push(below(&ga.input, &gb.input));
                s.assert(ga.picked.implies(Bool::and(&dom)));
            }
            // Every other part of the step being monotone in the labels,
            // the second run can only escape the first run's DENY through a
            // path rule whose progress labels can lower: one is behind.
            let behind: Vec<Bool> = p
                .path_rules
                .iter()
                .enumerate()
                .filter(|(_, r)| run::label_dependent(r))
                .map(|(x, _)| sb.state.path[x].lt(&sa.state.path[x]))
                .collect();
            let guard = Bool::fresh_const("goal");
            s.assert(guard.implies(Bool::and(&[
                sa.deny.clone(),
                sb.deny.not(),
                Bool::or(&behind),
            ])));
            loop {
                match check(&s, &guard, &self.opts) {
                    Solved::Unsat => break,
                    Solved::Unknown(why) => return (Outcome::Unknown, vec![why], vec![]),
                    Solved::Sat(m) => {
                        let sa = steps_of(letters, &run::read(p, letters, &ra, &m, j + 1));
                        let sb = steps_of(letters, &run::read(p, letters, &rb, &m, j + 1));
                        match confirm_monotone(p, &sa, &sb) {
                            Ok((wa, wb, what)) => {
                                return (Outcome::Violated, vec![what], vec![wa, wb])
                            }
                            Err(e) => {
                                last_err = e;
                                misses += 1;
                                if misses >= RETRIES {
                                    break;
                                }
                                s.assert(
                                    guard
                                        .implies(Bool::or(&[block(&ra, &m, j), block(&rb, &m, j)])),
                                );
                            }
                        }
                    }
                }
            }
            if misses >= RETRIES {
                break;
            }
            s.assert(same(&ra, &rb, j));
        }
        if misses == 0 {
            return (Outcome::Holds, self.notes(), vec![]);
        }
        (
            Outcome::Unknown,
            vec![format!("models the monitor did not reproduce: {last_err}")],
            vec![],
        )
    }

    // ---- privilege escalation --------------------------------------------------

    fn privilege_escalation(&self, a: &Alphabet) -> Answer {
        let p = self.policy;
        // Sets that some grant tests for membership.
        let tested: Vec<usize> = (0..p.sets.len())
            .filter(|&s| {
                p.grants.iter().any(|g| {
                    g.args
                        .iter()
                        .any(|c| c.tests().iter().any(|(_, op)| **op == ArgOp::InSet(s)))
                })
            })
            .collect();
        let mut d = self.notes();
        if tested.is_empty() {
            d.insert(0, "no grant depends on a discovered set".into());
            return (Outcome::Holds, d, vec![]);
        }
        for discoverer in &a.letters {
            // Its serving grant discovers into a tested set?
            for needy in &a.set_letters {
                let first = CStep {
                    letter: discoverer.clone(),
                    lineage: vec![None; p.tools[discoverer.tool].params.len()],
                    approve: true,
                    succeed: true,
                };
                let Ok(r0) = concrete::replay(p, std::slice::from_ref(&first)) else {
                    continue;
                };
                let s0 = &r0.steps[0];
                if !s0.admitted || s0.out.trusted {
                    continue;
                }
                let serving = s0.grants.first().copied();
                let Some(set) = serving.and_then(|g| p.grants[g].discovers) else {
                    continue;
                };
                if !tested.contains(&set) {
                    continue;
                }
                let values = strings(&needy.args);
                if let Some(found) = escalation(p, discoverer, needy, &values) {
                    return (
                        Outcome::Violated,
                        vec![format!(
                            "grant `{}` admits `{}` only because untrusted output of `{}` was added to set `{}`",
                            found.0,
                            p.tools[needy.tool].name,
                            p.tools[discoverer.tool].name,
                            p.sets[set]
                        )],
                        found.1,
                    );
                }
            }
        }
        d.insert(
            0,
            "every set a grant tests is filled only from trusted outputs".into(),
        );
        (Outcome::Holds, d, vec![])
    }

    // ---- consistency --------------------------------------------------

    fn consistency(&self, a: &Alphabet) -> Answer {
        let p = self.policy;
        let mut found: Vec<String> = Vec::new();
        let mut witnesses = Vec::new();
        let classes = &a.classes.classes;
        // Grants: dead (no call can take a unit) or shadowed (always served
        // by an earlier unlimited grant of the same agent).
        for (g, grant) in p.grants.iter().enumerate() {
            let usable: Vec<&agenra_certify::classes::Class> = classes
                .iter()
                .filter(|c| c.old.contains(&g) && p.chain_iter(c.agent).any(|x| x == grant.agent))
                .filter(|c| {
                    p.chain_iter(c.agent)
                        .all(|x| c.old.iter().any(|&h| p.grants[h].agent == x))
                })
                .collect();
            if usable.is_empty() {
                found.push(format!(
                    "grant `{}` is dead: no call it matches can be admitted",
                    grant.name
                ));
                continue;
            }
            let shadow = |c: &&agenra_certify::classes::Class| {
                c.old.iter().copied().find(|&h| {
                    h < g
                        && p.grants[h].agent == grant.agent
                        && p.grants[h].quota == Quota::Unlimited
                        // A grant with an amount budget runs out: it
                        // shadows nothing.
                        && p.budget_of(h).is_none()
                        // Nor does one whose quota or budget renews.
                        && !p.renews(h)
                })
            };
            if usable.iter().all(|c| shadow(c).is_some()) {
                let h = shadow(&usable[0]).unwrap_or(g);
                found.push(format!(
                    "grant `{}` is shadowed: every call it matches is served by the earlier unlimited grant `{}`",
                    grant.name, p.grants[h].name
                ));
                if let Some(c) = usable.iter().find(|c| c.types == 0) {
                    let l = alphabet::letter(
                        p,
                        c.agent,
                        c.tool,
                        c.witness.args.clone(),
                        c.witness.time,
                    );
                    let st = CStep {
                        lineage: vec![None; p.tools[l.tool].params.len()],
                        letter: l,
                        approve: true,
                        succeed: true,
                    };
                    if let Ok(rep) = concrete::replay(p, &[st]) {
                        if !rep.steps[0].grants.contains(&g) {
                            witnesses.push(Witness {
                                role: format!("grant-{}", grant.name),
                                shows: format!(
                                    "a call grant `{}` matches is decided by `{}` ({})",
                                    grant.name,
                                    name_of(p, rep.steps[0].rule),
                                    verdict_name(rep.steps[0].verdict)
                                ),
                                events: rep.events,
                            });
                        }
                    }
                }
            }
        }
        let all_letters: Vec<&Letter> = a.letters.iter().chain(&a.set_letters).collect();
        // Call rules whose condition no call satisfies.
        for (i, r) in p.call_rules.iter().enumerate() {
            let live = all_letters
                .iter()
                .any(|l| l.tool == r.tool && r.when.eval(&l.args, l.agent, &[]));
            let _ = i;
            if !live {
                found.push(format!("call rule `{}` is dead: no call of `{}` that can be made satisfies its condition", r.name, p.tools[r.tool].name));
            }
        }
        // Path rules with a step no call can match.
        for r in &p.path_rules {
            let steps: Vec<&agenra_core::policy::StepPattern> = match &r.kind {
                PathKind::Sequence(s) => s.iter().collect(),
                PathKind::AtMost { step, .. } => vec![step],
            };
            for (k, st) in steps.iter().enumerate() {
                let live = all_letters.iter().any(|l| {
                    st.matches_tool(&p.tools[l.tool])
                        && st.when.as_ref().is_none_or(|w| holds_named(p, l, w))
                });
                if !live {
                    found.push(format!(
                        "path rule `{}` is dead: no call that can be made matches its step {}",
                        r.name,
                        k + 1
                    ));
                    break;
                }
            }
        }
        // Flow rules: never fire, or never decide (Z3 over the labels the
        // policy's sources can produce).
        match self.flow_rules_decide(&all_letters) {
            Ok(mut v) => found.append(&mut v),
            Err(why) => return (Outcome::Unknown, vec![why], vec![]),
        }
        // Obligations: can one be met within the bound?
        match self.obligations_met(a) {
            Ok(mut v) => found.append(&mut v),
            Err(why) => return (Outcome::Unknown, vec![why], vec![]),
        }
        if found.is_empty() {
            (Outcome::Holds, self.notes(), vec![])
        } else {
            (Outcome::Violated, found, witnesses)
        }
    }

    fn flow_rules_decide(&self, letters: &[&Letter]) -> Result<Vec<String>, String> {
        let p = self.policy;
        let mut out = Vec::new();
        // Atoms some source can produce.
        let mut sources: Vec<Label> = p.tools.iter().map(|t| t.output).collect();
        sources.extend(p.resources.iter().map(|r| r.label));
        let producible = sources.iter().fold(Label::BOTTOM, |a, l| a.join(l));
        let producible = SymLabel::constant(p, &producible);
        for (ri, rule) in p.flow_rules.iter().enumerate() {
            let (pat, effect) = match rule.effect {
                FlowEffect::Deny(x) => (x, RuleEffect::Deny),
                FlowEffect::Pause(x) => (x, RuleEffect::Pause),
                FlowEffect::Allow(_) => continue,
            };
            let mut fires_any = Vec::new();
            let mut decides_any = Vec::new();
            // The terms below depend on a letter only through its resource
            // label and which rules of the sink hold on it: one disjunct
            // per such key is the same question.
            let mut seen: Vec<(Label, Vec<bool>)> = Vec::new();
            for (li, l) in letters.iter().enumerate() {
                if !p.tools[l.tool].reaches(rule.sink) || !holds_named(p, l, &rule.when) {
                    continue;
                }
                let key = (
                    l.resource_label,
                    p.flow_rules
                        .iter()
                        .filter(|x| x.sink == rule.sink)
                        .map(|x| holds_named(p, l, &x.when))
                        .collect::<Vec<bool>>(),
                );
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                let lab = SymLabel::fresh(p, &format!("flow{ri}.{li}"));
                let res = SymLabel::constant(p, &l.resource_label);
                let mut realizable = vec![
                    lab.well_formed(),
                    below(&res, &lab),
                    below(&lab, &producible.join(&res)),
                ];
                let holds = |x: &agenra_core::policy::FlowRule| holds_named(p, l, &x.when);
                let exempt: Vec<Bool> = p
                    .flow_rules
                    .iter()
                    .filter(|x| x.sink == rule.sink && holds(x))
                    .filter_map(|x| match x.effect {
                        FlowEffect::Allow(c) => Some(lab.flows_to(p, &c)),
                        _ => None,
                    })
                    .collect();
                let fires = Bool::and(&[lab.matches(&pat), Bool::or(&exempt).not()]);
                // Another rule of the sink that wins: an earlier deny (for a
                // deny), any deny or an earlier pause (for a pause).
                let winners: Vec<Bool> = p
                    .flow_rules
                    .iter()
                    .enumerate()
                    .filter(|(xi, x)| x.sink == rule.sink && *xi != ri && holds(x))
                    .filter_map(|(xi, x)| match (x.effect, effect) {
                        (FlowEffect::Deny(q), RuleEffect::Deny) if xi < ri => Some(lab.matches(&q)),
                        (FlowEffect::Deny(q), RuleEffect::Pause) => Some(lab.matches(&q)),
                        (FlowEffect::Pause(q), RuleEffect::Pause) if xi < ri => {
                            Some(lab.matches(&q))
                        }
                        _ => None,
                    })
                    .collect();
                realizable.push(fires.clone());
                fires_any.push(Bool::and(&realizable));
                realizable.push(Bool::or(&winners).not());
                decides_any.push(Bool::and(&realizable));
            }
            let t = Bool::from_bool(true);
            match solve(&self.opts, std::slice::from_ref(&t), &Bool::or(&fires_any)) {
                Solved::Unsat => {
                    out.push(format!(
                        "flow rule `{}` is dead: no call into sink `{}` can carry a label it matches without an allow rule exempting it",
                        rule.name, p.sinks[rule.sink]
                    ));
                    continue;
                }
                Solved::Unknown(w) => return Err(w),
                Solved::Sat(_) => {}
            }
            match solve(&self.opts, &[t], &Bool::or(&decides_any)) {
                Solved::Unsat => out.push(format!(
                    "flow rule `{}` is shadowed: whenever it matches, another rule of sink `{}` decides first",
                    rule.name, p.sinks[rule.sink]
                )),
                Solved::Unknown(w) => return Err(w),
                Solved::Sat(_) => {}
            }
        }
        Ok(out)
    }

    fn obligations_met(&self, _a: &Alphabet) -> Result<Vec<String>, String> {
        let p = self.policy;
        let mut out = Vec::new();
        if p.obligations.is_empty() || self.search_all.is_empty() {
            return Ok(out);
        }
        let k = self.opts.bound.max(1);
        let r = build(p, &self.search_all, k, "ob", None);
        for (o, ob) in p.obligations.iter().enumerate() {
            let mut met = Vec::new();
            for s in &r.steps {
                for (g, gs) in r.groups.iter().zip(&s.groups) {
                    if !agenra_core::pattern::glob_matches(&ob.before, &p.tools[g.tool].name) {
                        continue;
                    }
                    for f in gs
                        .enc
                        .history
                        .iter()
                        .filter(|f| f.rule == Rule::Obligation(o))
                    {
                        met.push(Bool::and(&[gs.picked.clone(), f.fires.not()]));
                    }
                }
            }
            if met.is_empty() {
                out.push(format!(
                    "obligation `{}` is dead: no call that can be made matches `{}`",
                    ob.name, ob.before
                ));
                continue;
            }
            match solve(&self.opts, &r.constraints, &Bool::or(&met)) {
                Solved::Unsat => out.push(format!(
                    "obligation `{}` can never be met within {k} calls: no trace establishes `{}` before a call to `{}`",
                    ob.name, p.facts[ob.fact], ob.before
                )),
                Solved::Unknown(w) => return Err(w),
                Solved::Sat(_) => {}
            }
        }
        Ok(out)
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "ALLOW",
        Verdict::Deny => "DENY",
        Verdict::Pause => "PAUSE",
    }
}

fn strings(args: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for v in args {
        for s in v.scalars() {
            if let Value::Str(x) = s {
                out.push(x.clone());
            }
        }
    }
    out
}

/// The escalation trace: the discovering call and its result (reporting
/// `values`), then the needy call, admitted; and the same trace with
/// nothing discovered, where the needy call is denied.
fn escalation(
    p: &Policy,
    discoverer: &Letter,
    needy: &Letter,
    values: &[String],
) -> Option<(String, Vec<Witness>)> {
    use agenra_core::event::{Event as E, Outcome as O, Report};
    let run = |discovered: Vec<String>| -> Option<(Vec<E>, agenra_core::Decision)> {
        let mut m = agenra_core::Monitor::new(p.clone()).ok()?;
        let c1 = concrete::call_event(
            p,
            0,
            &CStep {
                letter: discoverer.clone(),
                lineage: vec![None; p.tools[discoverer.tool].params.len()],
                approve: true,
                succeed: true,
            },
        );
        let mut events = vec![c1];
        let d1 = decision(m.step(&events[0]).ok()?)?;
        if d1.verdict == Verdict::Pause {
            let e = E::Approve(agenra_core::event::Resolve {
                session: None,
                call: "c1".into(),
                time: None,
            });
            m.step(&e).ok()?;
            events.push(e);
        }
        let res = E::Result(Report {
            session: None,
            call: "c1".into(),
            time: None,
            status: O::Succeeded,
            output: discoverer.output.clone(),
            discovered,
        });
        m.step(&res).ok()?;
        events.push(res);
        let c2 = concrete::call_event(
            p,
            1,
            &CStep {
                letter: needy.clone(),
                lineage: vec![None; p.tools[needy.tool].params.len()],
                approve: true,
                succeed: true,
            },
        );
        let d2 = decision(m.step(&c2).ok()?)?;
        events.push(c2);
        Some((events, d2))
    };
    let (with, d) = run(values.to_vec())?;
    if d.verdict == Verdict::Deny {
        return None;
    }
    let (without, d0) = run(vec![])?;
    if d0.verdict != Verdict::Deny {
        return None;
    }
    let grant = name_of(p, d.rule);
    Some((
        grant.clone(),
        vec![
            Witness {
                role: String::new(),
                events: with,
                shows: format!(
                    "the untrusted result of call c1 adds {values:?}; call c2 then gets {} by `{grant}`",
                    verdict_name(d.verdict)
                ),
            },
            Witness {
                role: "without-discovery".into(),
                events: without,
                shows: format!("without that discovery call c2 gets DENY ({})", name_of(p, d0.rule)),
            },
        ],
    ))
}

fn decision(o: agenra_core::StepOutput) -> Option<agenra_core::Decision> {
    match o {
        agenra_core::StepOutput::Decision(d) => Some(d),
        agenra_core::StepOutput::Applied(_) => None,
    }
}

/// Replays both runs of a taint-monotonicity model and checks it: the
/// same verdicts up to the last call, which run A denies and run B (whose
/// arguments carry at least A's labels at every call) does not.
fn confirm_monotone(
    p: &Policy,
    sa: &[CStep],
    sb: &[CStep],
) -> Result<(Witness, Witness, String), String> {
    let ra = concrete::replay(p, sa)?;
    let rb = concrete::replay(p, sb)?;
    let j = sa.len() - 1;
    for i in 0..sa.len() {
        let (x, y) = (&ra.steps[i], &rb.steps[i]);
        if x.args.iter().zip(&y.args).any(|(u, v)| !u.flows_to(v)) {
            return Err(format!(
                "call {} carries fewer labels in the second run",
                i + 1
            ));
        }
        if i < j && (x.verdict != y.verdict || x.admitted != y.admitted) {
            return Err(format!("the runs differ at call {}", i + 1));
        }
    }
    let (x, y) = (&ra.steps[j], &rb.steps[j]);
    if x.verdict != Verdict::Deny || y.verdict == Verdict::Deny {
        return Err(format!("last call: {:?} then {:?}", x.verdict, y.verdict));
    }
    let tool = &p.tools[sa[j].letter.tool].name;
    let what = format!(
        "call {} ({tool}) is denied by `{}` but gets {} by `{}` when its inputs carry more labels",
        j + 1,
        name_of(p, x.rule),
        verdict_name(y.verdict),
        name_of(p, y.rule)
    );
    Ok((
        Witness {
            role: String::new(),
            events: ra.events,
            shows: format!("the last call gets DENY ({})", name_of(p, x.rule)),
        },
        Witness {
            role: "more-labels".into(),
            events: rb.events,
            shows: format!(
                "the same calls, each argument carrying at least the labels it carries in the first trace; the last call gets {} ({})",
                verdict_name(y.verdict),
                name_of(p, y.rule)
            ),
        },
        what,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn corpus(name: &str) -> (String, Policy) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/verify-corpus/taint-monotonicity")
            .join(name);
        let src = std::fs::read_to_string(&path).unwrap();
        let p = agenra_policy::compile(&src, name).unwrap().policy;
        (name.to_string(), p)
    }

    fn files() -> Vec<String> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/verify-corpus/taint-monotonicity");
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".agr"))
            .collect();
        v.sort();
        v
    }

    /// On every corpus policy, the construction (when it finds a witness)
    /// and the two-run search agree; the construction finds the seeded
    /// reset defects of the usual shape and never a witness for a
    /// correct policy.
    #[test]
    fn construction_agrees_with_the_two_run_search() {
        let opts = Options::default();
        let mut built = 0;
        for name in files() {
            let (name, p) = corpus(&name);
            let ctx = Ctx::new(&p, &opts);
            let confirm = |a: &[CStep], b: &[CStep]| confirm_monotone(&p, a, b).is_ok();
            let c = taint::construct(&p, &ctx.search, opts.bound, &confirm);
            let a = ctx.alphabet.as_ref().unwrap();
            let full = ctx.taint_monotonicity(a);
            let smt = ctx.taint_monotonicity_smt();
            let bad = name.starts_with("bad-");
            assert_eq!(
                full.0,
                if bad {
                    Outcome::Violated
                } else {
                    Outcome::Holds
                },
                "{name}: {:?}",
                full.1
            );
            if !name.starts_with("good-flows") {
                // (good-flows has no reset: decided on structure)
                assert_eq!(smt.0, full.0, "{name}: {:?}", smt.1);
            }
            if let Some((sa, sb)) = &c {
                assert!(bad, "{name}: a witness for a correct policy");
                confirm_monotone(&p, sa, sb).unwrap();
                built += 1;
            }
            if name.starts_with("good-reset-own-output") {
                assert!(
                    full.1[0].starts_with("decided on structure: the `reset"),
                    "{name}: {:?}",
                    full.1
                );
            }
            if name.starts_with("bad-") {
                assert!(
                    p.path_rules
                        .iter()
                        .any(|r| taint::reset_differs(&p, &ctx.search, r)),
                    "{name}: the structural shortcut must not apply"
                );
            }
            if name.starts_with("bad-reset-two-sources") {
                assert!(c.is_none(), "{name}: the shape needs two sources");
                assert_eq!(full.1.len(), 1, "{name}: found by the search");
            }
        }
        assert!(built >= 4, "the reset defects of the usual shape are built");
    }
}
