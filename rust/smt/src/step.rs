//! The decision of one call (DESIGN §2, steps 3–5) as Z3 constraints.
//!
//! This module is the one place where the step is encoded. Its inputs are
//! Z3 terms, so the same constraints serve two callers:
//!
//! * the authorizer ([`crate::authorizer`]) instantiates them from a
//!   concrete session graph: the labels reaching each sink are label
//!   presence Booleans `H[v,ℓ]` defined by propagation over the graph, the
//!   history counters and quotas are constants;
//! * `agenra verify` instantiates them with symbolic state (fresh labels,
//!   counters and quotas) and chains `K` steps through [`StepEncoding::next`].
//!
//! What the step does **not** encode, and the caller decides before it
//! (concretely, or by enumerating): well-formedness, scopes and task scopes
//! (stage 1), and which tool and agent make the call (both are plain
//! indexes here). Conditions on arguments (`when`, grant `where`, step
//! `where`) enter as Booleans: [`CallInputs::concrete`] evaluates them on a
//! concrete call; a symbolic caller passes fresh Booleans or its own
//! encoding of the arguments.
//!
//! The encoding follows `rust/core/src/spec/reference.rs` line by line; the
//! differential tests (`tests/smt_differential.rs`) check that it decides
//! every generated call as the native monitor does.

use agenra_core::decision::Rule;
use agenra_core::label::{Label, LabelPattern, Level, Sanitizer};
use agenra_core::pattern::glob_matches;
use agenra_core::policy::{
    AgentId, FlowEffect, GrantId, PathKind, Policy, Quota, RuleEffect, StepPattern, ToolId,
};
use agenra_core::spec::Request;
use agenra_core::value::NamedCond;
use std::collections::BTreeSet;
use z3::ast::{Bool, Int};
use z3::Model;

/// One atom of a label: labels are sets of atoms, and a join is their union
/// (DESIGN §3's `ℓ` in `H[v,ℓ]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    /// The sensitivity is at least this level (`1 ..= levels - 1`; the
    /// lowest level is no atom: every label has it).
    Sensitivity(Level),
    /// The label carries this category (an index into `Policy::categories`).
    Category(usize),
    /// The label is untrusted.
    Untrusted,
}

impl Atom {
    /// The atom's name in `policy` (`sensitivity>=secret`, `category pii`,
    /// `untrusted`).
    pub fn name(&self, policy: &Policy) -> String {
        match self {
            Atom::Sensitivity(l) => format!("sensitivity>={}", policy.level_name(*l)),
            Atom::Category(c) => format!(
                "category {}",
                policy.categories.get(*c).map_or("?", String::as_str)
            ),
            Atom::Untrusted => "untrusted".into(),
        }
    }
}

/// A label as Z3 Booleans, one per [`Atom`] of the policy.
///
/// A well-formed symbolic label has `sens_ge` downward closed
/// ([`SymLabel::well_formed`]); every operation here preserves it.
#[derive(Clone, Debug)]
pub struct SymLabel {
    /// `sens_ge[i]`: the sensitivity is at least level `i + 1`
    /// (`levels - 1` entries).
    pub sens_ge: Vec<Bool>,
    /// `cats[c]`: the label carries category `c` (one per declared category).
    pub cats: Vec<Bool>,
    /// The label is untrusted.
    pub untrusted: Bool,
}

impl SymLabel {
    /// The atoms of `policy`, in the order [`SymLabel::atoms`] lists them.
    pub fn atom_list(policy: &Policy) -> Vec<Atom> {
        let levels = policy.levels.len().max(1);
        (1..levels)
            .map(|l| Atom::Sensitivity(l as Level))
            .chain((0..policy.categories.len()).map(Atom::Category))
            .chain([Atom::Untrusted])
            .collect()
    }

    /// The constant label `l`.
    pub fn constant(policy: &Policy, l: &Label) -> SymLabel {
        let levels = policy.levels.len().max(1);
        SymLabel {
            sens_ge: (1..levels)
                .map(|s| Bool::from_bool(l.sensitivity as usize >= s))
                .collect(),
            cats: (0..policy.categories.len())
                .map(|c| Bool::from_bool(l.categories.contains(c)))
                .collect(),
            untrusted: Bool::from_bool(!l.trusted),
        }
    }

    /// The bottom label ⟨lowest, ∅, trusted⟩.
    pub fn bottom(policy: &Policy) -> SymLabel {
        SymLabel::constant(policy, &Label::BOTTOM)
    }

    /// A label of fresh constants named after `prefix`; assert
    /// [`SymLabel::well_formed`] on it.
    pub fn fresh(policy: &Policy, prefix: &str) -> SymLabel {
        let atoms = SymLabel::atom_list(policy);
        let mut l = SymLabel::bottom(policy);
        for a in atoms {
            let b = Bool::fresh_const(&format!("{prefix}.{a:?}"));
            *l.atom_mut(a) = b;
        }
        l
    }

    /// Sensitivity atoms are downward closed: `≥ s+1 ⇒ ≥ s`.
    pub fn well_formed(&self) -> Bool {
        let parts: Vec<Bool> = self
            .sens_ge
            .windows(2)
            .map(|w| w[1].implies(&w[0]))
            .collect();
        Bool::and(&parts)
    }

    /// The Boolean of `atom` (false for an atom out of range).
    pub fn atom(&self, atom: Atom) -> Bool {
        let got = match atom {
            Atom::Sensitivity(l) => (l as usize)
                .checked_sub(1)
                .and_then(|i| self.sens_ge.get(i)),
            Atom::Category(c) => self.cats.get(c),
            Atom::Untrusted => Some(&self.untrusted),
        };
        got.cloned().unwrap_or_else(|| Bool::from_bool(false))
    }

    fn atom_mut(&mut self, atom: Atom) -> &mut Bool {
        match atom {
            Atom::Sensitivity(l) => &mut self.sens_ge[l as usize - 1],
            Atom::Category(c) => &mut self.cats[c],
            Atom::Untrusted => &mut self.untrusted,
        }
    }

    /// Every atom with its Boolean, in [`SymLabel::atom_list`] order.
    pub fn atoms(&self) -> Vec<(Atom, Bool)> {
        let mut out = Vec::new();
        for (i, b) in self.sens_ge.iter().enumerate() {
            out.push((Atom::Sensitivity((i + 1) as Level), b.clone()));
        }
        for (c, b) in self.cats.iter().enumerate() {
            out.push((Atom::Category(c), b.clone()));
        }
        out.push((Atom::Untrusted, self.untrusted.clone()));
        out
    }

    /// Least upper bound: the union of the atoms.
    pub fn join(&self, other: &SymLabel) -> SymLabel {
        let or = |a: &Bool, b: &Bool| Bool::or(&[a, b]);
        SymLabel {
            sens_ge: zip(&self.sens_ge, &other.sens_ge, or),
            cats: zip(&self.cats, &other.cats, or),
            untrusted: or(&self.untrusted, &other.untrusted),
        }
    }

    /// The join of `labels` (bottom if there are none), one `or` per atom.
    pub fn join_all<'a>(
        policy: &Policy,
        labels: impl IntoIterator<Item = &'a SymLabel>,
    ) -> SymLabel {
        let labels: Vec<&SymLabel> = labels.into_iter().collect();
        match labels.len() {
            0 => SymLabel::bottom(policy),
            1 => labels[0].clone(),
            _ => {
                let any = |f: &dyn Fn(&SymLabel) -> Bool| {
                    let parts: Vec<Bool> = labels.iter().map(|l| f(l)).collect();
                    Bool::or(&parts)
                };
                SymLabel {
                    sens_ge: (0..labels[0].sens_ge.len())
                        .map(|i| any(&|l| l.sens_ge[i].clone()))
                        .collect(),
                    cats: (0..labels[0].cats.len())
                        .map(|i| any(&|l| l.cats[i].clone()))
                        .collect(),
                    untrusted: any(&|l| l.untrusted.clone()),
                }
            }
        }
    }

    /// What a trusted sanitizer specification lets through: removed
    /// categories dropped, sensitivity capped, trust vouched for.
    pub fn sanitize(&self, s: &Sanitizer) -> SymLabel {
        let f = Bool::from_bool(false);
        SymLabel {
            sens_ge: self
                .sens_ge
                .iter()
                .enumerate()
                .map(|(i, b)| match s.max_sensitivity {
                    Some(m) if i + 1 > m as usize => f.clone(),
                    _ => b.clone(),
                })
                .collect(),
            cats: self
                .cats
                .iter()
                .enumerate()
                .map(|(c, b)| match s.removes.contains(c) {
                    true => f.clone(),
                    false => b.clone(),
                })
                .collect(),
            untrusted: match s.trusts {
                true => f,
                false => self.untrusted.clone(),
            },
        }
    }

    /// The label pattern holds (upward closed: a conjunction of atoms and
    /// one disjunction over the pattern's categories).
    pub fn matches(&self, p: &LabelPattern) -> Bool {
        let mut parts = Vec::new();
        if let Some(m) = p.min_sensitivity {
            if m > 0 {
                parts.push(self.atom(Atom::Sensitivity(m)));
            }
        }
        if !p.any_category.is_empty() {
            let any: Vec<Bool> = p
                .any_category
                .indexes()
                .map(|c| self.atom(Atom::Category(c)))
                .collect();
            parts.push(Bool::or(&any));
        }
        if p.untrusted {
            parts.push(self.untrusted.clone());
        }
        Bool::and(&parts)
    }

    /// `self ⊑ ceiling`: no atom the ceiling lacks.
    pub fn flows_to(&self, policy: &Policy, ceiling: &Label) -> Bool {
        let top = SymLabel::constant(policy, ceiling);
        let parts: Vec<Bool> = self
            .atoms()
            .into_iter()
            .zip(top.atoms())
            .filter(|(_, (_, c))| c.as_bool() == Some(false))
            .map(|((_, b), _)| b.not())
            .collect();
        Bool::and(&parts)
    }

    /// Atom-wise equivalence (to define a node's label).
    pub fn iff(&self, other: &SymLabel) -> Bool {
        let parts: Vec<Bool> = self
            .atoms()
            .into_iter()
            .zip(other.atoms())
            .map(|((_, a), (_, b))| a.iff(&b))
            .collect();
        Bool::and(&parts)
    }

    /// The label a model gives this one (`None` if an atom has no value).
    pub fn eval(&self, model: &Model) -> Option<Label> {
        let v = |b: &Bool| model.eval(b, true).and_then(|x| x.as_bool());
        let mut sensitivity = 0;
        for (i, b) in self.sens_ge.iter().enumerate() {
            if v(b)? {
                sensitivity = (i + 1) as Level;
            }
        }
        let mut categories = agenra_core::CategorySet::EMPTY;
        for (c, b) in self.cats.iter().enumerate() {
            if v(b)? {
                categories = categories.union(agenra_core::CategorySet::single(c));
            }
        }
        Some(Label::new(sensitivity, categories, !v(&self.untrusted)?))
    }
}

fn zip(a: &[Bool], b: &[Bool], f: impl Fn(&Bool, &Bool) -> Bool) -> Vec<Bool> {
    a.iter().zip(b).map(|(x, y)| f(x, y)).collect()
}

/// The state one step reads and the next one gets: everything of the
/// session besides the graph that a decision depends on.
#[derive(Clone, Debug)]
pub struct HistoryState {
    /// Per path rule: a sequence's progress (steps matched so far since
    /// the last reset, `0 ..= steps-1`), or a count's number of matching
    /// admitted calls since the last reset.
    pub path: Vec<Int>,
    /// Per obligation: the admission number (`seq`) of the last admitted
    /// call matching its `since` glob; `-1` if none (and always `-1`
    /// without `since`).
    pub since: Vec<Int>,
    /// Per fact: the largest admission number of a call whose result
    /// established it; `-1` if none.
    pub facts: Vec<Int>,
    /// Per grant: the units left. Unlimited grants keep whatever value is
    /// here (never read, never decremented).
    pub remaining: Vec<Int>,
}

impl HistoryState {
    /// The state of a new session: no progress, no facts, full quotas.
    pub fn initial(policy: &Policy) -> HistoryState {
        HistoryState {
            path: vec![Int::from_i64(0); policy.path_rules.len()],
            since: vec![Int::from_i64(-1); policy.obligations.len()],
            facts: vec![Int::from_i64(-1); policy.facts.len()],
            remaining: policy
                .grants
                .iter()
                .map(|g| match g.quota {
                    Quota::Limited(n) => Int::from_u64(n),
                    Quota::Unlimited => Int::from_i64(-1),
                })
                .collect(),
        }
    }

    /// A state of fresh constants named after `prefix`; assert
    /// [`HistoryState::bounds`] on it.
    pub fn fresh(policy: &Policy, prefix: &str) -> HistoryState {
        let n = |kind: &str, i: usize| Int::fresh_const(&format!("{prefix}.{kind}{i}"));
        HistoryState {
            path: (0..policy.path_rules.len()).map(|i| n("path", i)).collect(),
            since: (0..policy.obligations.len())
                .map(|i| n("since", i))
                .collect(),
            facts: (0..policy.facts.len()).map(|i| n("fact", i)).collect(),
            remaining: (0..policy.grants.len()).map(|i| n("left", i)).collect(),
        }
    }

    /// The values a reachable state can take: progress within
    /// `0 ..= steps-1` (counts `≥ 0`), admission numbers `≥ -1`, a limited
    /// grant's units within `0 ..= quota`.
    pub fn bounds(&self, policy: &Policy) -> Bool {
        let zero = Int::from_i64(0);
        let minus = Int::from_i64(-1);
        let mut parts = Vec::new();
        for (r, p) in policy.path_rules.iter().zip(&self.path) {
            parts.push(p.ge(&zero));
            if let PathKind::Sequence(steps) = &r.kind {
                parts.push(p.le(Int::from_u64(steps.len().saturating_sub(1) as u64)));
            }
        }
        for s in self.since.iter().chain(&self.facts) {
            parts.push(s.ge(&minus));
        }
        for (g, left) in policy.grants.iter().zip(&self.remaining) {
            if let Quota::Limited(q) = g.quota {
                parts.push(left.ge(&zero));
                parts.push(left.le(Int::from_u64(q)));
            }
        }
        Bool::and(&parts)
    }

    /// This state with fact `f` established by a call admitted at `seq`
    /// (a `succeeded` result whose output passes the fact's test).
    pub fn establish(&self, f: usize, seq: &Int) -> HistoryState {
        let mut next = self.clone();
        if let Some(cur) = next.facts.get_mut(f) {
            *cur = seq.gt(&*cur).ite(seq, cur);
        }
        next
    }

    /// This state with one unit of each limited grant in `grants` returned
    /// where `when` holds (a failed result, a rejection), never above the
    /// grant's quota.
    pub fn refund(&self, policy: &Policy, grants: &[(GrantId, Bool)]) -> HistoryState {
        let mut next = self.clone();
        for (g, when) in grants {
            if let (Some(Quota::Limited(q)), Some(left)) = (
                policy.grants.get(*g).map(|x| x.quota),
                next.remaining.get_mut(*g),
            ) {
                let up = Bool::and(&[when.clone(), left.lt(Int::from_u64(q))]);
                *left = up.ite(&(&*left + 1i64), left);
            }
        }
        next
    }
}

/// What the step needs about the call being decided, besides the state.
///
/// The tool and the agent are indexes (stage 1 has resolved them); every
/// vector is indexed like the policy's list it names, and entries of rules
/// that do not apply to this tool or agent are never read.
#[derive(Clone, Debug)]
pub struct CallInputs {
    /// The tool called.
    pub tool: ToolId,
    /// The calling agent.
    pub agent: AgentId,
    /// Per entry of the tool's `sinks`: the label reaching the sink (the
    /// join of the bound arguments' labels, or the input label when the
    /// sink is not bound, joined with the label of the call's own
    /// resource).
    pub sinks: Vec<SymLabel>,
    /// What the call carries into the calling agent: the input label
    /// joined with the call's own resource label (for `-> agent` rules).
    pub received: SymLabel,
    /// The call's output label (path steps' `reads(P)` test it).
    pub output: SymLabel,
    /// Per flow rule: its `when` holds on this call.
    pub flow_when: Vec<Bool>,
    /// Per receive rule (`-> agent`): its `when` holds on this call.
    pub receive_when: Vec<Bool>,
    /// Per call rule: its `when` holds on this call.
    pub call_when: Vec<Bool>,
    /// Per path rule, per step (one step for a count): the step's `where`
    /// holds on this call (true for a step without `where`). The tool
    /// glob, sink and `reads(P)` parts are encoded here from the tool and
    /// `output`.
    pub step_when: Vec<Vec<Bool>>,
    /// Per path rule: its `reset` step's `where` holds (true without one).
    pub reset_when: Vec<Bool>,
    /// Per grant: it matches the call for its owner (tool, resource
    /// pattern, argument conditions, not expired); grants of agents off the
    /// calling agent's delegation chain are never read.
    pub grant_match: Vec<Bool>,
    /// The admission number the call gets if it is admitted now (the
    /// event's sequence number; obligations compare facts with it).
    pub seq: Int,
    /// Whether the state's `remaining` of a shared grant (`quota N per
    /// tenant`) is what the tenant's pool has left now (the authorizer
    /// reads it from the pool): the step then takes it as it is. Otherwise
    /// (`verify`, `certify`) the tenant's other sessions may have drained
    /// the pool at any step, and a shared grant is available only where a
    /// fresh Boolean says the pool still has a unit.
    pub pool_known: bool,
}

impl CallInputs {
    /// The inputs of a concrete, well-formed call: every condition is
    /// evaluated on its arguments (discovered sets `sets`), the labels are
    /// the caller's terms.
    #[allow(clippy::too_many_arguments)]
    pub fn concrete(
        policy: &Policy,
        req: &Request,
        sets: &[BTreeSet<String>],
        sinks: Vec<SymLabel>,
        received: SymLabel,
        output: SymLabel,
        seq: u64,
    ) -> CallInputs {
        let none = agenra_core::tokens::NoSources;
        Self::concrete_with(policy, req, sets, &none, sinks, received, output, seq)
    }

    /// [`CallInputs::concrete`], with token tests judged by `judge` (the
    /// authorizer passes the reference's sources, so a token test is
    /// decided on the concrete history; `verify` and `certify` refuse
    /// token tests before they get here).
    #[allow(clippy::too_many_arguments)]
    pub fn concrete_with(
        policy: &Policy,
        req: &Request,
        sets: &[BTreeSet<String>],
        judge: &dyn agenra_core::tokens::TokenJudge,
        sinks: Vec<SymLabel>,
        received: SymLabel,
        output: SymLabel,
        seq: u64,
    ) -> CallInputs {
        let b = Bool::from_bool;
        let tool = &policy.tools[req.tool];
        let named = |c: &NamedCond| {
            c.resolve(&|name| tool.param_index(name))
                .eval_with(&req.args, req.agent, sets, judge)
        };
        let step = |s: &StepPattern| b(s.when.as_ref().is_none_or(named));
        CallInputs {
            tool: req.tool,
            agent: req.agent,
            sinks,
            received,
            output,
            flow_when: policy
                .flow_rules
                .iter()
                .map(|r| b(named(&r.when)))
                .collect(),
            receive_when: policy
                .receive_rules
                .iter()
                .map(|r| b(named(&r.when)))
                .collect(),
            call_when: policy
                .call_rules
                .iter()
                .map(|r| {
                    b(r.tool == req.tool && r.when.eval_with(&req.args, req.agent, sets, judge))
                })
                .collect(),
            step_when: policy
                .path_rules
                .iter()
                .map(|r| match &r.kind {
                    PathKind::Sequence(steps) => steps.iter().map(step).collect(),
                    PathKind::AtMost { step: s, .. } => vec![step(s)],
                })
                .collect(),
            reset_when: policy
                .path_rules
                .iter()
                .map(|r| r.reset.as_ref().map_or(b(true), step))
                .collect(),
            grant_match: policy
                .grants
                .iter()
                .map(|g| {
                    b(agenra_core::spec::grant_matches(
                        policy, g, g.agent, req, sets,
                    ))
                })
                .collect(),
            seq: Int::from_u64(seq),
            pool_known: false,
        }
    }
}

/// A rule of the step with the Boolean that says it fires.
#[derive(Clone, Debug)]
pub struct Firing {
    /// The rule.
    pub rule: Rule,
    /// Its effect if it fires (flow `deny`/`pause`, history rules' effect).
    pub effect: RuleEffect,
    /// It fires (for a flow rule: it matches and its sink's flow is not
    /// exempted by an `allow flow` rule).
    pub fires: Bool,
    /// For a flow rule: which entry of the tool's `sinks` it judges
    /// (`None`: the flow into the calling agent). `None` for other rules.
    pub sink_use: Option<usize>,
}

/// The step's constraints: which rules fire, which grants are selected,
/// the verdict and the next state. All terms; nothing is asserted.
#[derive(Clone, Debug)]
pub struct StepEncoding {
    /// Flow rules (sinks in the tool's order, each sink's rules in policy
    /// order, then the rules into the agent), `deny` and `pause` ones only.
    pub flows: Vec<Firing>,
    /// Call rules, then path rules and counts, then obligations (policy
    /// order within each), as the reference lists them.
    pub history: Vec<Firing>,
    /// `A[v,g]` per grant: the grant is the one the ledger takes a unit of
    /// (the first of its owner's grants, in policy order, that matches and
    /// has quota; only owners on the calling agent's chain). False for
    /// grants off the chain. Taken only if the call is not denied.
    pub selected: Vec<Bool>,
    /// Per agent of the delegation chain (the caller first): it has a
    /// selected grant (a required capability).
    pub required: Vec<(AgentId, Bool)>,
    /// Some flow rule denies.
    pub flow_deny: Bool,
    /// Some flow rule pauses.
    pub flow_pause: Bool,
    /// Some history rule with a `deny` effect fires.
    pub history_deny: Bool,
    /// Some history rule with a `pause` effect fires.
    pub history_pause: Bool,
    /// Every agent on the chain has a grant.
    pub granted: Bool,
    /// A selected grant requires approval.
    pub approval: Bool,
    /// The verdict is DENY.
    pub deny: Bool,
    /// The verdict is PAUSE (units reserved).
    pub pause: Bool,
    /// The verdict is ALLOW (the call is admitted now).
    pub allow: Bool,
    /// The state after the step: units taken unless DENY (reserved on
    /// PAUSE), history advanced on ALLOW only (a PAUSE advances it at
    /// approval: [`admit`]).
    pub next: HistoryState,
}

impl StepEncoding {
    /// The re-check of an approval denies (DESIGN §2 step 5): some `deny`
    /// flow or history rule fires. `pause` effects are what the human just
    /// answered, and the ledger is not asked again (the units were
    /// reserved at the pause), so neither `flow_pause`, `history_pause`
    /// nor `granted` enters.
    pub fn recheck_deny(&self) -> Bool {
        Bool::or(&[self.flow_deny.clone(), self.history_deny.clone()])
    }
}

/// Whether a call of `tool` matches `step` (tool glob, sink, `reads(P)` on
/// `output`) given that its `where` holds (`when`).
pub fn step_matches(
    policy: &Policy,
    step: &StepPattern,
    tool: ToolId,
    output: &SymLabel,
    when: &Bool,
) -> Bool {
    if !step.matches_tool(&policy.tools[tool]) {
        return Bool::from_bool(false);
    }
    let mut parts = vec![when.clone()];
    if let Some(p) = &step.reads {
        parts.push(output.matches(p));
    }
    Bool::and(&parts)
}

/// The history advanced by admitting the call where `admitted` holds
/// (DESIGN §2 step 4's automata): a matching `reset` zeroes a rule's
/// progress, then the call moves a sequence on (if it matches the step
/// waiting) or a count up; a call matching an obligation's `since` glob
/// marks `since` with the call's admission number.
pub fn admit(
    policy: &Policy,
    state: &HistoryState,
    call: &CallInputs,
    admitted: &Bool,
) -> HistoryState {
    let mut next = state.clone();
    let zero = Int::from_i64(0);
    for (i, rule) in policy.path_rules.iter().enumerate() {
        let mut p = state.path[i].clone();
        if let Some(reset) = &rule.reset {
            let r = step_matches(policy, reset, call.tool, &call.output, &call.reset_when[i]);
            p = r.ite(&zero, &p);
        }
        p = match &rule.kind {
            PathKind::Sequence(steps) => {
                let last = steps.len().saturating_sub(1);
                // Progress k advances when k < last and the call matches step k.
                let mut advance = Vec::new();
                for (k, s) in steps.iter().enumerate().take(last) {
                    let m = step_matches(policy, s, call.tool, &call.output, &call.step_when[i][k]);
                    advance.push(Bool::and(&[p.eq(Int::from_u64(k as u64)), m]));
                }
                Bool::or(&advance).ite(&(&p + 1i64), &p)
            }
            PathKind::AtMost { step, .. } => {
                let m = step_matches(policy, step, call.tool, &call.output, &call.step_when[i][0]);
                m.ite(&(&p + 1i64), &p)
            }
        };
        next.path[i] = admitted.ite(&p, &state.path[i]);
    }
    let tool = &policy.tools[call.tool].name;
    for (o, ob) in policy.obligations.iter().enumerate() {
        if ob.since.as_deref().is_some_and(|g| glob_matches(g, tool)) {
            next.since[o] = admitted.ite(&call.seq, &state.since[o]);
        }
    }
    next
}

/// The decision of one call: flows (step 3), history (step 4), ledger
/// (step 5), and the next state.
pub fn encode_step(policy: &Policy, state: &HistoryState, call: &CallInputs) -> StepEncoding {
    let tool = &policy.tools[call.tool];
    let f = Bool::from_bool(false);

    // ---- 3. flows: per sink (then the agent), allow rules exempt. ----
    let mut flows = Vec::new();
    type Judged<'a> = (
        Option<usize>,
        &'a SymLabel,
        Vec<(Rule, &'a FlowEffect, &'a Bool)>,
    );
    let mut judged: Vec<Judged> = Vec::new();
    for (u, use_) in tool.sinks.iter().enumerate() {
        let rules = policy
            .flow_rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.sink == use_.sink)
            .map(|(i, r)| (Rule::Flow(i), &r.effect, &call.flow_when[i]))
            .collect();
        judged.push((Some(u), &call.sinks[u], rules));
    }
    let received = policy
        .receive_rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.agent == call.agent)
        .map(|(i, r)| (Rule::Receive(i), &r.effect, &call.receive_when[i]))
        .collect();
    judged.push((None, &call.received, received));
    for (sink_use, label, rules) in judged {
        let exempt: Vec<Bool> = rules
            .iter()
            .filter_map(|(_, e, when)| match e {
                FlowEffect::Allow(c) => {
                    Some(Bool::and(&[label.flows_to(policy, c), (*when).clone()]))
                }
                _ => None,
            })
            .collect();
        let open = Bool::or(&exempt).not();
        for (rule, e, when) in rules {
            let (pattern, effect) = match e {
                FlowEffect::Deny(p) => (p, RuleEffect::Deny),
                FlowEffect::Pause(p) => (p, RuleEffect::Pause),
                FlowEffect::Allow(_) => continue,
            };
            flows.push(Firing {
                rule,
                effect,
                fires: Bool::and(&[open.clone(), label.matches(pattern), when.clone()]),
                sink_use,
            });
        }
    }
    let any = |fs: &[Firing], e: RuleEffect| {
        let parts: Vec<Bool> = fs
            .iter()
            .filter(|x| x.effect == e)
            .map(|x| x.fires.clone())
            .collect();
        Bool::or(&parts)
    };
    let flow_deny = any(&flows, RuleEffect::Deny);
    let flow_pause = any(&flows, RuleEffect::Pause);

    // ---- 4. history: call rules, path rules and counts, obligations. ----
    let mut history = Vec::new();
    for (i, r) in policy.call_rules.iter().enumerate() {
        if r.tool == call.tool {
            history.push(Firing {
                rule: Rule::Call(i),
                effect: r.effect,
                fires: call.call_when[i].clone(),
                sink_use: None,
            });
        }
    }
    for (i, r) in policy.path_rules.iter().enumerate() {
        let p = &state.path[i];
        let fires = match &r.kind {
            PathKind::Sequence(steps) => {
                let last = steps.len().saturating_sub(1);
                let now = step_matches(
                    policy,
                    &steps[last],
                    call.tool,
                    &call.output,
                    &call.step_when[i][last],
                );
                Bool::and(&[p.ge(Int::from_u64(last as u64)), now])
            }
            PathKind::AtMost { max, step } => {
                let now =
                    step_matches(policy, step, call.tool, &call.output, &call.step_when[i][0]);
                // A count `within` a window: the authorizer puts the count
                // inside the window in the state (`pool_known`). Otherwise
                // (`verify`) the traces have no clock: the count since the
                // reset bounds the count inside the window from above, and
                // a fresh Boolean says whether enough of those calls are
                // still inside it (an over-approximation: the rule may stay
                // silent at any step where it could fire).
                if policy.count_window(i).is_some() && !call.pool_known {
                    Bool::and(&[p.ge(Int::from_u64(*max)), now, Bool::fresh_const("window")])
                } else {
                    Bool::and(&[p.ge(Int::from_u64(*max)), now])
                }
            }
        };
        if fires.as_bool() != Some(false) {
            history.push(Firing {
                rule: Rule::Path(i),
                effect: r.effect,
                fires,
                sink_use: None,
            });
        }
    }
    for (o, ob) in policy.obligations.iter().enumerate() {
        if !glob_matches(&ob.before, &tool.name) {
            continue;
        }
        // Met: some fact was established, after the last `since` call.
        let met = state.facts[ob.fact].gt(&state.since[o]);
        let met = Bool::and(&[state.facts[ob.fact].ge(Int::from_i64(0)), met]);
        history.push(Firing {
            rule: Rule::Obligation(o),
            effect: ob.effect,
            fires: met.not(),
            sink_use: None,
        });
    }
    let history_deny = any(&history, RuleEffect::Deny);
    let history_pause = any(&history, RuleEffect::Pause);

    // ---- 5. ledger: per agent of the chain, its first available grant. ----
    let mut selected = vec![f.clone(); policy.grants.len()];
    let mut required = Vec::new();
    for agent in policy.agent_chain(call.agent) {
        let mut before: Vec<Bool> = Vec::new();
        let mut has = Vec::new();
        for (g, grant) in policy.grants.iter().enumerate() {
            if grant.agent != agent || grant.tool != call.tool {
                continue;
            }
            let available = match grant.quota {
                Quota::Unlimited => Bool::from_bool(true),
                // A quota shared by the tenant's sessions: the others may
                // have taken (or given back) units at any time, so the pool
                // may be empty at any step; this session still never takes
                // more than the quota itself.
                Quota::Limited(_) if policy.is_shared(g) && !call.pool_known => Bool::and(&[
                    state.remaining[g].gt(Int::from_i64(0)),
                    Bool::fresh_const("pool"),
                ]),
                Quota::Limited(_) => state.remaining[g].gt(Int::from_i64(0)),
            };
            // An amount budget (`budget B on PARAM`): the authorizer judges
            // it concretely in `grant_match` (`pool_known`). Otherwise
            // (`verify`) what is left of it is not tracked, and the budget
            // may refuse any call at any step: a fresh Boolean says whether
            // it pays, so the traces include every way budgets can pass a
            // grant over (an over-approximation; violations are confirmed
            // by replay before they are reported).
            // A renewing quota or budget (`quota N per 10m`, `budget B on
            // PARAM per day`) likewise: its grant's own quota is unlimited,
            // and the window may refuse any call at any step.
            let available =
                if (policy.budget_of(g).is_some() || policy.renews(g)) && !call.pool_known {
                    Bool::and(&[available, Bool::fresh_const("budget")])
                } else {
                    available
                };
            let ok = Bool::and(&[call.grant_match[g].clone(), available]);
            let first = Bool::and(&[ok.clone(), Bool::or(&before).not()]);
            selected[g] = first.clone();
            has.push(first);
            before.push(ok);
        }
        required.push((agent, Bool::or(&has)));
    }
    let granted_parts: Vec<Bool> = required.iter().map(|(_, b)| b.clone()).collect();
    let granted = Bool::and(&granted_parts);
    let approval_parts: Vec<Bool> = policy
        .grants
        .iter()
        .zip(&selected)
        .filter(|(g, _)| g.approval)
        .map(|(_, s)| s.clone())
        .collect();
    let approval = Bool::or(&approval_parts);

    let deny = Bool::or(&[flow_deny.clone(), history_deny.clone(), granted.not()]);
    let pause = Bool::and(&[
        deny.not(),
        Bool::or(&[flow_pause.clone(), history_pause.clone(), approval.clone()]),
    ]);
    let allow = Bool::and(&[deny.not(), pause.not()]);

    let mut next = admit(policy, state, call, &allow);
    for (g, grant) in policy.grants.iter().enumerate() {
        if let Quota::Limited(_) = grant.quota {
            let take = Bool::and(&[deny.not(), selected[g].clone()]);
            next.remaining[g] = take.ite(&(&state.remaining[g] - 1i64), &state.remaining[g]);
        }
    }
    StepEncoding {
        flows,
        history,
        selected,
        required,
        flow_deny,
        flow_pause,
        history_deny,
        history_pause,
        granted,
        approval,
        deny,
        pause,
        allow,
        next,
    }
}

/// The verdict and deciding rule a model gives a step, the way the
/// reference names them: the first firing `deny` rule (flows, then
/// history), else `no-grant`; for PAUSE the first firing flow pause, else
/// the first firing history rule, else the first selected grant needing
/// approval; for ALLOW the caller's own grant.
pub fn read_decision(
    policy: &Policy,
    enc: &StepEncoding,
    model: &Model,
) -> Option<(agenra_core::Verdict, Rule, Vec<GrantId>)> {
    use agenra_core::Verdict;
    let v = |b: &Bool| model.eval(b, true).and_then(|x| x.as_bool());
    let mut used = Vec::new();
    // The chain order (caller first), as the ledger lists the units.
    for (agent, _) in &enc.required {
        for (g, grant) in policy.grants.iter().enumerate() {
            if grant.agent == *agent && v(&enc.selected[g])? {
                used.push(g);
            }
        }
    }
    if v(&enc.deny)? {
        let first = |fs: &[Firing]| -> Option<Option<Rule>> {
            for x in fs {
                if x.effect == RuleEffect::Deny && v(&x.fires)? {
                    return Some(Some(x.rule));
                }
            }
            Some(None)
        };
        let rule = match first(&enc.flows)? {
            Some(r) => r,
            None => first(&enc.history)?.unwrap_or(Rule::NoGrant),
        };
        return Some((Verdict::Deny, rule, vec![]));
    }
    if v(&enc.pause)? {
        let mut rule = None;
        for x in &enc.flows {
            if x.effect == RuleEffect::Pause && v(&x.fires)? {
                rule = Some(x.rule);
                break;
            }
        }
        if rule.is_none() {
            for x in &enc.history {
                if v(&x.fires)? {
                    rule = Some(x.rule);
                    break;
                }
            }
        }
        let rule = match rule {
            Some(r) => r,
            None => Rule::Grant(*used.iter().find(|&&g| policy.grants[g].approval)?),
        };
        return Some((Verdict::Pause, rule, used));
    }
    let rule = Rule::Grant(*used.first()?);
    Some((Verdict::Allow, rule, used))
}
