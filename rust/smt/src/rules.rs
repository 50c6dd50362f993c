//! The rule side of `agenra certify` (issue #11): a revision that changes
//! flow rules (into sinks or agents), call rules, path rules, counts or
//! obligations is certified when NEW's rule stage (steps 3–4 of the step,
//! [`crate::step::encode_step`] — the one encoding, shared with the
//! authorizer and `agenra verify`) decides every call and every approval
//! re-check of OLD's workflows exactly as OLD's does. Then the grant side
//! (`agenra_certify`'s construction or checked simulation, which treats the
//! rule outcome as an input shared by both sides) still holds;
//! docs/certify.md ("Rule changes") gives the argument.
//!
//! Per call class of `agenra_certify::classes::enumerate_witnesses` (agent,
//! tool, time region, matching grants, and every rule condition's value:
//! the classes are complete for rule conditions as they are for grant
//! conditions) that OLD's grants can admit, with every label symbolic
//! (each sink's, the one into the agent, the output) and both history
//! states symbolic, two queries must be `unsat`:
//!
//! 1. **call**: OLD's rules do not deny, and NEW's deny, or exactly one side
//!    pauses (unless every matching grant of both sides needs approval:
//!    then both pause anyway);
//! 2. **re-check** (only for a class OLD may pause: a matching grant of OLD
//!    needs approval, or a rule of OLD may pause it): exactly one side's
//!    rules deny (an approval's re-check reads deny effects only, with the
//!    history and context of the approval time).
//!
//! The two history states are related by one invariant: identical automata
//! have equal states. A path rule's state (a sequence's progress, a
//! count) is a function of the admitted calls determined by its steps and
//! its `reset` (not its bound or effect), an obligation's `since` state by
//! its `since` glob, a fact's by the (identical) tools; so rules of OLD and
//! NEW with the same automaton share one Z3 constant. The invariant holds
//! initially (all start at 0 / −1) and is kept by every event, because
//! both sides admit the same calls at the same events (which is what the
//! queries and the grant side establish, by induction over the workflow).
//! Any other state is unconstrained within its bounds
//! ([`crate::step::HistoryState::bounds`]), an over-approximation: an `unsat` over it
//! is a proof, a `sat` only means "not certified".

use crate::step::{encode_step, CallInputs, Firing, HistoryState, SymLabel};
use agenra_certify::classes::{self, Class};
use agenra_certify::{structure, RuleCheck, RuleOracle, RuleSide};
use agenra_core::decision::Rule;
use agenra_core::policy::{PathKind, Policy, RuleEffect};
use agenra_core::spec::Request;
use std::collections::{BTreeSet, HashMap};
use z3::ast::{Bool, Int};
use z3::{SatResult, Solver};

/// The rule-side checker `agenra certify` and `agenra check-cert` pass to
/// `agenra_certify::certify_with`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuleChecker;

impl RuleOracle for RuleChecker {
    fn check_rules(&self, old: &Policy, new: &Policy) -> RuleCheck {
        check(old, new)
    }
}

/// How the rule side is decided (recorded in certificates).
pub const METHOD: &str =
    "SMT (Z3) over the shared step encoding: NEW's flows and history rules decide OLD's calls and re-checks as OLD's";

/// Reasons listed at most (one per rule and kind of failure).
const MAX_REASONS: usize = 8;

/// Decides the rule side of OLD → NEW (see the module documentation).
pub fn check(old: &Policy, new: &Policy) -> RuleCheck {
    let (parts, others) = structure::split_differences(old, new);
    if !others.is_empty() {
        return RuleCheck::NotCertified(others);
    }
    if structure::rules_read_sets(old) || structure::rules_read_sets(new) {
        return RuleCheck::NotCertified(
            parts
                .iter()
                .map(|p| format!("{p}: not certified, since some rule tests discovered-set membership (the rule-side check evaluates rule conditions per call class, without sets)"))
                .collect(),
        );
    }
    let classes = match classes::enumerate_witnesses(old, new) {
        Ok(c) => c,
        Err(e) => {
            return RuleCheck::NotCertified(
                parts
                    .iter()
                    .map(|p| {
                        format!("{p}: not certified, the call classes cannot be enumerated ({e})")
                    })
                    .collect(),
            )
        }
    };
    let mut checker = Checker::new(old, new);
    let mut reasons = BTreeSet::new();
    let mut checked = 0;
    for c in &classes.classes {
        if !old_can_admit(old, c) {
            continue;
        }
        checked += 1;
        checker.class(c, &mut reasons);
        if reasons.len() >= MAX_REASONS {
            break;
        }
    }
    if reasons.is_empty() {
        RuleCheck::Certified(RuleSide {
            method: METHOD.into(),
            parts,
            classes: checked,
            queries: checker.queries,
        })
    } else {
        RuleCheck::NotCertified(reasons.into_iter().collect())
    }
}

/// Whether OLD's grants can admit a call of the class: every agent of the
/// delegation chain owns a matching grant (quota aside). A call no chain
/// grant of OLD matches is denied by OLD and is in none of its workflows.
fn old_can_admit(old: &Policy, c: &Class) -> bool {
    old.chain_iter(c.agent)
        .all(|a| c.old.iter().any(|&g| old.grants[g].agent == a))
}

/// One solver, the shared history states and the per-tool labels.
struct Checker<'a> {
    old: &'a Policy,
    new: &'a Policy,
    solver: Solver,
    h_old: HistoryState,
    h_new: HistoryState,
    /// Per tool: its sinks' labels, the label into the agent, the output.
    labels: HashMap<usize, (Vec<SymLabel>, SymLabel, SymLabel)>,
    queries: usize,
}

impl<'a> Checker<'a> {
    fn new(old: &'a Policy, new: &'a Policy) -> Checker<'a> {
        let mut automata: HashMap<String, Int> = HashMap::new();
        let mut since: HashMap<String, Int> = HashMap::new();
        let facts: Vec<Int> = (0..old.facts.len())
            .map(|f| Int::fresh_const(&format!("fact{f}")))
            .collect();
        let mut state = |p: &Policy, side: &str| {
            let mut h = HistoryState::fresh(p, side);
            for (i, r) in p.path_rules.iter().enumerate() {
                let key = automaton_key(r);
                h.path[i] = automata
                    .entry(key)
                    .or_insert_with(|| Int::fresh_const(&format!("path.{}", r.name)))
                    .clone();
            }
            for (o, ob) in p.obligations.iter().enumerate() {
                h.since[o] = match &ob.since {
                    None => Int::from_i64(-1),
                    Some(g) => since
                        .entry(g.clone())
                        .or_insert_with(|| Int::fresh_const(&format!("since.{g}")))
                        .clone(),
                };
            }
            // Facts are equal on both sides only while both admit the
            // same calls at the same events; the grant side guarantees it
            // only when OLD has history rules (`Flags::history_rules`).
            if side == "old" || structure::has_history_rules(old) {
                h.facts = facts.clone();
            }
            h
        };
        let h_old = state(old, "old");
        let h_new = state(new, "new");
        let solver = Solver::new();
        solver.assert(h_old.bounds(old));
        solver.assert(h_new.bounds(new));
        Checker {
            old,
            new,
            solver,
            h_old,
            h_new,
            labels: HashMap::new(),
            queries: 0,
        }
    }

    fn labels(&mut self, tool: usize) -> (Vec<SymLabel>, SymLabel, SymLabel) {
        if let Some(l) = self.labels.get(&tool) {
            return l.clone();
        }
        let p = self.old;
        let sinks: Vec<SymLabel> = (0..p.tools[tool].sinks.len())
            .map(|u| SymLabel::fresh(p, &format!("t{tool}.sink{u}")))
            .collect();
        let received = SymLabel::fresh(p, &format!("t{tool}.received"));
        let output = SymLabel::fresh(p, &format!("t{tool}.output"));
        for l in sinks.iter().chain([&received, &output]) {
            self.solver.assert(l.well_formed());
        }
        let got = (sinks, received, output);
        self.labels.insert(tool, got.clone());
        got
    }

    /// `None` when `formula` is unsatisfiable; otherwise a model if the
    /// solver gave one (`Some(None)`: `unknown`, which is no proof either).
    fn sat(&mut self, formula: &Bool) -> Option<Option<z3::Model>> {
        self.queries += 1;
        self.solver.push();
        self.solver.assert(formula);
        let answer = match self.solver.check() {
            SatResult::Unsat => None,
            SatResult::Sat => Some(self.solver.get_model()),
            SatResult::Unknown => Some(None),
        };
        self.solver.pop(1);
        answer
    }

    fn class(&mut self, c: &Class, reasons: &mut BTreeSet<String>) {
        let (sinks, received, output) = self.labels(c.tool);
        let req = Request {
            agent: c.agent,
            tool: c.tool,
            args: c.witness.args.clone(),
            time: c.witness.time,
        };
        let inputs = |p: &Policy| {
            // No rule tests set membership (checked), so no sets are needed.
            let sets = vec![BTreeSet::new(); p.sets.len()];
            CallInputs::concrete(
                p,
                &req,
                &sets,
                sinks.clone(),
                received.clone(),
                output.clone(),
                0,
            )
        };
        let (in_old, in_new) = (inputs(self.old), inputs(self.new));
        let eo = encode_step(self.old, &self.h_old, &in_old);
        let en = encode_step(self.new, &self.h_new, &in_new);
        let deny = |e: &crate::step::StepEncoding| Bool::or(&[&e.flow_deny, &e.history_deny]);
        let pause = |e: &crate::step::StepEncoding| Bool::or(&[&e.flow_pause, &e.history_pause]);
        let (d_old, d_new) = (deny(&eo), deny(&en));
        // A class every one of whose grants needs approval, in OLD and in
        // NEW, is paused by its grant on both sides whatever the rules say:
        // a rule pause changes nothing there (and the grant side, which
        // shares the rule's pause between the sides, computes the same
        // pauses). Only when both sides hold: otherwise the rule pauses
        // themselves must agree.
        let all_approval =
            |p: &Policy, gs: &[usize]| !gs.is_empty() && gs.iter().all(|&g| p.grants[g].approval);
        let both = all_approval(self.old, &c.old) && all_approval(self.new, &c.new);
        let p_old = Bool::or(&[pause(&eo), Bool::from_bool(both)]);
        let p_new = Bool::or(&[pause(&en), Bool::from_bool(both)]);
        let what = format!(
            "a call of `{}` by `{}`",
            self.old.tools[c.tool].name,
            self.old
                .agents
                .get(c.agent)
                .map_or("?", |a| a.name.as_str())
        );
        // 1. At call time: where OLD's rules do not deny, NEW's give the
        //    same answer (no deny, the same pause).
        let call = Bool::and(&[d_old.not(), Bool::or(&[d_new.clone(), p_new.xor(&p_old)])]);
        if let Some(m) = self.sat(&call) {
            let v = |b: &Bool| {
                m.as_ref()
                    .and_then(|m| m.eval(b, true))
                    .and_then(|x| x.as_bool())
                    == Some(true)
            };
            let mut named = Vec::new();
            if v(&d_new) {
                for r in fired(
                    &eo.flows,
                    &en.flows,
                    &eo.history,
                    &en.history,
                    &v,
                    RuleEffect::Deny,
                    true,
                ) {
                    named.push(format!(
                        "{}: denies {what} that OLD admits",
                        rule_name(self.new, r)
                    ));
                }
            } else if v(&p_new) {
                for r in fired(
                    &eo.flows,
                    &en.flows,
                    &eo.history,
                    &en.history,
                    &v,
                    RuleEffect::Pause,
                    true,
                ) {
                    named.push(format!(
                        "{}: pauses {what} that OLD's rules let through",
                        rule_name(self.new, r)
                    ));
                }
            } else {
                for r in fired(
                    &eo.flows,
                    &en.flows,
                    &eo.history,
                    &en.history,
                    &v,
                    RuleEffect::Pause,
                    false,
                ) {
                    named.push(format!("{}: OLD pauses {what} that NEW's rules let through at once (an OLD rejection would refund what NEW spent): not certified", rule_name(self.old, r)));
                }
            }
            if named.is_empty() {
                named.push(format!("NEW's rules may decide {what} differently from OLD's (no single rule named: the solver gave no model, or grants' approvals differ)"));
            }
            reasons.extend(named);
            return;
        }
        // 2. At an approval's re-check (deny effects only), for a class OLD
        //    may pause: both sides deny, or neither does.
        let approval = c.old.iter().any(|&g| self.old.grants[g].approval);
        let pausable = approval
            || self
                .sat(&Bool::and(&[d_old.not(), p_old.clone()]))
                .is_some();
        if !pausable {
            return;
        }
        if let Some(m) = self.sat(&d_old.xor(&d_new)) {
            // Only OLD denies: harmless when OLD's denial is permanent for
            // the tool and NEW's history cannot see the call NEW runs.
            let new_stricter = self.sat(&Bool::and(&[d_new.clone(), d_old.not()]));
            if new_stricter.is_none() && self.sticky(c, &eo.history, &d_old, &d_new) {
                return;
            }
            let v = |b: &Bool| {
                m.as_ref()
                    .and_then(|m| m.eval(b, true))
                    .and_then(|x| x.as_bool())
                    == Some(true)
            };
            let (policy, side_new, verb) = if v(&d_new) {
                (
                    self.new,
                    true,
                    "NEW denies the approval of a paused call OLD approves",
                )
            } else {
                (self.old, false, "OLD denies the approval of a paused call NEW approves (OLD refunds, NEW spends the units): not certified")
            };
            let mut named = Vec::new();
            for r in fired(
                &eo.flows,
                &en.flows,
                &eo.history,
                &en.history,
                &v,
                RuleEffect::Deny,
                side_new,
            ) {
                named.push(format!("{}: {verb} ({what})", rule_name(policy, r)));
            }
            if named.is_empty() {
                named.push(format!("{verb} ({what})"));
            }
            reasons.extend(named);
        }
    }
}

impl Checker<'_> {
    /// Whether a re-check that OLD denies and NEW does not (class `c`)
    /// leaves OLD's workflows preserved: (a) OLD's denial then comes from a
    /// *sticky* rule — a deny path rule or count without `reset` whose
    /// last step (a count's step) matches every call of the tool (no
    /// `where`, no `reads`): its state never decreases, so from then on OLD
    /// denies every call and every re-check of the tool, whose grants (a
    /// grant serves one tool) are never used again by OLD's workflow; and
    /// (b) no path rule, count (step or reset) or obligation `since` of
    /// NEW matches the tool, so the call NEW runs (and OLD refunded, and
    /// whose result is in no OLD workflow) changes no state NEW's rules
    /// read. Then the pair of sessions differs only in the units of that
    /// tool's grants, which no later event of OLD's workflow reads.
    fn sticky(&mut self, c: &Class, history: &[Firing], d_old: &Bool, d_new: &Bool) -> bool {
        let tool = &self.old.tools[c.tool];
        let sticky: Vec<Bool> = history
            .iter()
            .filter_map(|f| {
                let Rule::Path(i) = f.rule else { return None };
                let r = self.old.path_rules.get(i)?;
                let step = match &r.kind {
                    PathKind::Sequence(steps) => steps.last()?,
                    PathKind::AtMost { step, .. } => step,
                };
                let every_call =
                    step.when.is_none() && step.reads.is_none() && step.matches_tool(tool);
                (r.effect == RuleEffect::Deny && r.reset.is_none() && every_call)
                    .then(|| f.fires.clone())
            })
            .collect();
        if sticky.is_empty() {
            return false;
        }
        let unexplained = Bool::and(&[d_old.clone(), d_new.not(), Bool::or(&sticky).not()]);
        if self.sat(&unexplained).is_some() {
            return false;
        }
        let sees = |s: &agenra_core::policy::StepPattern| s.matches_tool(tool);
        let new_sees = self.new.path_rules.iter().any(|r| {
            let steps: Vec<&agenra_core::policy::StepPattern> = match &r.kind {
                PathKind::Sequence(steps) => steps.iter().collect(),
                PathKind::AtMost { step, .. } => vec![step],
            };
            steps.into_iter().chain(r.reset.iter()).any(sees)
        }) || self.new.obligations.iter().any(|o| {
            o.since
                .as_deref()
                .is_some_and(|g| agenra_core::pattern::glob_matches(g, &tool.name))
        });
        !new_sees
    }
}

/// The rules with `effect` that fire in the model on one side (NEW's if
/// `new`, else OLD's).
#[allow(clippy::too_many_arguments)]
fn fired(
    old_flows: &[Firing],
    new_flows: &[Firing],
    old_history: &[Firing],
    new_history: &[Firing],
    v: &dyn Fn(&Bool) -> bool,
    effect: RuleEffect,
    new: bool,
) -> Vec<Rule> {
    let mine: Vec<&Firing> = if new {
        new_flows.iter().chain(new_history).collect()
    } else {
        old_flows.iter().chain(old_history).collect()
    };
    mine.into_iter()
        .filter(|f| f.effect == effect && v(&f.fires))
        .map(|f| f.rule)
        .collect()
}

/// "flow rule `x`", "count `y`", … of `p`.
fn rule_name(p: &Policy, r: Rule) -> String {
    let get = |n: Option<&String>| n.map_or("?".to_string(), |s| format!("`{s}`"));
    match r {
        Rule::Flow(i) => format!("flow rule {}", get(p.flow_rules.get(i).map(|x| &x.name))),
        Rule::Receive(i) => format!(
            "flow rule into an agent {}",
            get(p.receive_rules.get(i).map(|x| &x.name))
        ),
        Rule::Call(i) => format!("call rule {}", get(p.call_rules.get(i).map(|x| &x.name))),
        Rule::Path(i) => match p.path_rules.get(i) {
            Some(x) if matches!(x.kind, PathKind::AtMost { .. }) => {
                format!("count `{}`", x.name)
            }
            x => format!("path rule {}", get(x.map(|x| &x.name))),
        },
        Rule::Obligation(i) => format!("obligation {}", get(p.obligations.get(i).map(|x| &x.name))),
        other => format!("{other:?}"),
    }
}

/// What determines a path rule's state: its steps (a count's step, not
/// its bound) and its reset.
fn automaton_key(r: &agenra_core::policy::PathRule) -> String {
    let kind = match &r.kind {
        PathKind::Sequence(steps) => PathKind::Sequence(steps.clone()),
        PathKind::AtMost { step, .. } => PathKind::AtMost {
            max: 0,
            step: step.clone(),
        },
    };
    serde_json::to_string(&(&kind, &r.reset)).unwrap_or_else(|_| format!("{:p}", r))
}
