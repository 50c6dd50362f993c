//! `K` symbolic steps chained through the shared one-step encoding
//! ([`crate::step::encode_step`]): at each step one letter of the alphabet
//! is called, each argument takes its label from the context, from no call
//! (observed lineage `[]`) or from one earlier call's output, a paused call
//! is approved or rejected, and an admitted call succeeds or fails.

use super::alphabet::{letter_inputs, Letter};
use crate::step::{admit, encode_step, CallInputs, HistoryState, StepEncoding, SymLabel};
use agenra_core::label::Label;
use agenra_core::policy::{AgentId, Policy, ToolId};
use agenra_core::value::Value;
use z3::ast::{Bool, Int};
use z3::Model;

/// Lineage choice: no observed lineage (the context, or bottom for an
/// absent argument).
pub const CTX: i64 = -2;
/// Lineage choice: observed lineage `[]` (from no call).
pub const NONE: i64 = -1;

/// Letters of one (agent, tool): one step encoding serves them all.
#[derive(Clone, Debug)]
pub struct Group {
    /// The calling agent.
    pub agent: AgentId,
    /// The tool.
    pub tool: ToolId,
    /// The letters (indexes into the alphabet).
    pub letters: Vec<usize>,
}

/// The groups of an alphabet, in first-appearance order.
pub fn groups(letters: &[Letter]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for (i, l) in letters.iter().enumerate() {
        match out
            .iter_mut()
            .find(|g| g.agent == l.agent && g.tool == l.tool)
        {
            Some(g) => g.letters.push(i),
            None => out.push(Group {
                agent: l.agent,
                tool: l.tool,
                letters: vec![i],
            }),
        }
    }
    out
}

/// A label chosen among constants by which letter is picked.
pub fn pick_label(policy: &Policy, picks: &[(Bool, Label)]) -> SymLabel {
    let mut l = SymLabel::bottom(policy);
    let atoms = SymLabel::atom_list(policy);
    for a in atoms {
        let parts: Vec<Bool> = picks
            .iter()
            .filter(|(_, c)| SymLabel::constant(policy, c).atom(a).as_bool() == Some(true))
            .map(|(b, _)| b.clone())
            .collect();
        set_atom(&mut l, a, Bool::or(&parts));
    }
    l
}

fn set_atom(l: &mut SymLabel, a: crate::step::Atom, b: Bool) {
    use crate::step::Atom;
    match a {
        Atom::Sensitivity(s) => l.sens_ge[s as usize - 1] = b,
        Atom::Category(c) => l.cats[c] = b,
        Atom::Untrusted => l.untrusted = b,
    }
}

/// `if c then a else b`, atom by atom.
pub fn ite(c: &Bool, a: &SymLabel, b: &SymLabel) -> SymLabel {
    let f = |x: &[Bool], y: &[Bool]| x.iter().zip(y).map(|(p, q)| c.ite(p, q)).collect();
    SymLabel {
        sens_ge: f(&a.sens_ge, &b.sens_ge),
        cats: f(&a.cats, &b.cats),
        untrusted: c.ite(&a.untrusted, &b.untrusted),
    }
}

/// The label with every atom false where `keep` does not hold.
pub fn gate(keep: &Bool, a: &SymLabel) -> SymLabel {
    let f = |x: &[Bool]| {
        x.iter()
            .map(|p| Bool::and(&[keep.clone(), p.clone()]))
            .collect()
    };
    SymLabel {
        sens_ge: f(&a.sens_ge),
        cats: f(&a.cats),
        untrusted: Bool::and(&[keep.clone(), a.untrusted.clone()]),
    }
}

/// `a ⊑ b` as a term: every atom of `a` is in `b`.
pub fn below(a: &SymLabel, b: &SymLabel) -> Bool {
    let parts: Vec<Bool> = a
        .atoms()
        .into_iter()
        .zip(b.atoms())
        .map(|((_, x), (_, y))| x.implies(&y))
        .collect();
    Bool::and(&parts)
}

/// One group's part of a step.
#[derive(Clone, Debug)]
pub struct GroupStep {
    /// This group's letter is the one called.
    pub picked: Bool,
    /// The step encoding's inputs (labels and conditions of the picked letter).
    pub inputs: CallInputs,
    /// The shared step encoding.
    pub enc: StepEncoding,
    /// Per argument: its label (sanitizers and lineage as the monitor
    /// applies them).
    pub args: Vec<SymLabel>,
    /// The input label.
    pub input: SymLabel,
    /// The label of the call's own resource.
    pub resource: SymLabel,
    /// Without sanitizers: the join of every argument (or the context for a
    /// call that passes no data) and the resource (non-leakage).
    pub raw_full: SymLabel,
    /// Without sanitizers: the output label.
    pub raw_out: SymLabel,
}

/// One symbolic step.
#[derive(Clone, Debug)]
pub struct Step {
    /// Which letter is called (its index).
    pub choice: Int,
    /// Per argument position: the lineage choice ([`CTX`], [`NONE`] or an
    /// earlier step).
    pub lin: Vec<Int>,
    /// A paused call is approved (else rejected).
    pub approve: Bool,
    /// An admitted call succeeds (else fails).
    pub succeed: Bool,
    /// The call's time.
    pub time: Int,
    /// The context before the step.
    pub ctx: SymLabel,
    /// The context without sanitizers, before the step.
    pub raw_ctx: SymLabel,
    /// The state before the step.
    pub state: HistoryState,
    /// Per group.
    pub groups: Vec<GroupStep>,
    /// The call is denied.
    pub deny: Bool,
    /// The call is paused.
    pub pause: Bool,
    /// The call is allowed at once.
    pub allow: Bool,
    /// The call is admitted (allowed, or paused and approved).
    pub admitted: Bool,
    /// The call's output label.
    pub out: SymLabel,
    /// The call's output label without sanitizers.
    pub raw_out: SymLabel,
    /// Per discovered set: the call ran, succeeded, and its own grant
    /// discovers into the set (its result may add values to it).
    pub disc: Vec<Bool>,
}

/// `K` chained steps and the constraints that make them a trace.
#[derive(Clone, Debug)]
pub struct Run {
    /// The steps.
    pub steps: Vec<Step>,
    /// The groups of the alphabet.
    pub groups: Vec<Group>,
    /// Well-formedness of the choices (to assert).
    pub constraints: Vec<Bool>,
    /// Per step: the end of its constraints in `constraints` (those of
    /// steps `0..=j` are `constraints[..marks[j]]`; they never mention a
    /// later step).
    pub marks: Vec<usize>,
    /// The state after the last step.
    pub last_state: HistoryState,
    /// The context after the last step.
    ctx: SymLabel,
    /// The context without sanitizers after the last step.
    raw_ctx: SymLabel,
    /// Per agent with `own context`: its context, and without sanitizers,
    /// after the last step.
    own: Vec<(AgentId, SymLabel, SymLabel)>,
    /// Per group, per letter: its constant conditions.
    consts: Vec<Vec<CallInputs>>,
}

fn or_picks(picks: &[(Bool, &CallInputs)], f: impl Fn(&CallInputs) -> &Bool) -> Bool {
    let parts: Vec<Bool> = picks
        .iter()
        .filter(|(_, c)| f(c).as_bool() != Some(false))
        .map(|(p, c)| Bool::and(&[p.clone(), f(c).clone()]))
        .collect();
    Bool::or(&parts)
}

/// The inputs of a group's call at a step: conditions by picked letter,
/// labels from the argument labels. `agent` overrides the calling agent
/// (delegation safety asks the delegator the same call).
#[allow(clippy::too_many_arguments)]
pub fn group_inputs(
    policy: &Policy,
    letters: &[Letter],
    group: &Group,
    agent: AgentId,
    choice: &Int,
    args: &[SymLabel],
    input: &SymLabel,
    resource: &SymLabel,
    seq: &Int,
) -> CallInputs {
    let consts: Vec<CallInputs> = group
        .letters
        .iter()
        .map(|&i| letter_inputs(policy, &letters[i].as_agent(agent)))
        .collect();
    inputs_from(
        policy, group, &consts, agent, choice, args, input, resource, seq,
    )
}

/// [`group_inputs`] with the letters' constant conditions computed once.
#[allow(clippy::too_many_arguments)]
pub fn inputs_from(
    policy: &Policy,
    group: &Group,
    consts: &[CallInputs],
    agent: AgentId,
    choice: &Int,
    args: &[SymLabel],
    input: &SymLabel,
    resource: &SymLabel,
    seq: &Int,
) -> CallInputs {
    let tool = &policy.tools[group.tool];
    let picks: Vec<(Bool, &CallInputs)> = group
        .letters
        .iter()
        .zip(consts)
        .map(|(&i, c)| (choice.eq(Int::from_u64(i as u64)), c))
        .collect();
    let sinks = tool
        .sinks
        .iter()
        .map(|u| {
            let bound = match &u.params {
                None => input.clone(),
                Some(ps) => SymLabel::join_all(policy, ps.iter().filter_map(|&p| args.get(p))),
            };
            bound.join(resource)
        })
        .collect();
    let output = match tool.sanitizer.and_then(|s| policy.sanitizers.get(s)) {
        Some(s) => input.sanitize(s),
        None => input.clone(),
    }
    .join(&SymLabel::constant(policy, &tool.output))
    .join(resource);
    let n = |v: &dyn Fn(&CallInputs) -> usize| consts.first().map_or(0, v);
    CallInputs {
        tool: group.tool,
        agent,
        sinks,
        received: input.join(resource),
        output,
        flow_when: (0..n(&|c| c.flow_when.len()))
            .map(|r| or_picks(&picks, |c| &c.flow_when[r]))
            .collect(),
        receive_when: (0..n(&|c| c.receive_when.len()))
            .map(|r| or_picks(&picks, |c| &c.receive_when[r]))
            .collect(),
        call_when: (0..n(&|c| c.call_when.len()))
            .map(|r| or_picks(&picks, |c| &c.call_when[r]))
            .collect(),
        step_when: policy
            .path_rules
            .iter()
            .enumerate()
            .map(|(r, _)| {
                (0..consts.first().map_or(0, |c| c.step_when[r].len()))
                    .map(|k| or_picks(&picks, |c| &c.step_when[r][k]))
                    .collect()
            })
            .collect(),
        reset_when: (0..policy.path_rules.len())
            .map(|r| or_picks(&picks, |c| &c.reset_when[r]))
            .collect(),
        grant_match: (0..policy.grants.len())
            .map(|g| or_picks(&picks, |c| &c.grant_match[g]))
            .collect(),
        seq: seq.clone(),
        pool_known: false,
    }
}

/// Whether a path rule's progress depends on labels: one of its steps,
/// or its reset, reads labels.
pub fn label_dependent(rule: &agenra_core::policy::PathRule) -> bool {
    use agenra_core::policy::PathKind;
    let steps: Vec<&agenra_core::policy::StepPattern> = match &rule.kind {
        PathKind::Sequence(s) => s.iter().collect(),
        PathKind::AtMost { step, .. } => vec![step],
    };
    steps
        .iter()
        .chain(&rule.reset.as_ref())
        .any(|s| s.reads.is_some())
}

/// The state where `c` holds, else `b`, field by field.
pub fn ite_state(c: &Bool, a: &HistoryState, b: &HistoryState) -> HistoryState {
    let f = |x: &[Int], y: &[Int]| x.iter().zip(y).map(|(p, q)| c.ite(p, q)).collect();
    HistoryState {
        path: f(&a.path, &b.path),
        since: f(&a.since, &b.since),
        facts: f(&a.facts, &b.facts),
        remaining: f(&a.remaining, &b.remaining),
    }
}

/// Builds `k` steps over `letters`; `tag` names the constants (two runs
/// of taint monotonicity share the letter choices: pass `shared`).
pub fn build(
    policy: &Policy,
    letters: &[Letter],
    k: usize,
    tag: &str,
    shared: Option<&Run>,
) -> Run {
    let mut r = Run::start(policy, letters);
    for _ in 0..k {
        r.extend(policy, letters, tag, shared);
    }
    r
}

impl Run {
    /// A run of no steps over `letters` (the empty trace); [`Run::extend`]
    /// adds one step at a time, so that a search can stop at the first
    /// bound with a witness.
    pub fn start(policy: &Policy, letters: &[Letter]) -> Run {
        let groups = groups(letters);
        let consts: Vec<Vec<CallInputs>> = groups
            .iter()
            .map(|g| {
                g.letters
                    .iter()
                    .map(|&i| letter_inputs(policy, &letters[i]))
                    .collect()
            })
            .collect();
        let bottom = SymLabel::bottom(policy);
        Run {
            steps: Vec::new(),
            groups,
            constraints: Vec::new(),
            marks: Vec::new(),
            last_state: HistoryState::initial(policy),
            ctx: bottom.clone(),
            raw_ctx: bottom.clone(),
            own: (0..policy.agents.len())
                .filter(|&a| policy.agents[a].own_context)
                .map(|a| (a, bottom.clone(), bottom.clone()))
                .collect(),
            consts,
        }
    }

    /// Adds the next step. With `shared` (the first run of taint
    /// monotonicity, already extended to this step) the step takes its
    /// letter, approval and result from `shared`'s step, and the state
    /// after it takes from `shared` every part labels cannot change (see
    /// the comment below).
    pub fn extend(&mut self, policy: &Policy, letters: &[Letter], tag: &str, shared: Option<&Run>) {
        let i = self.steps.len();
        let bottom = SymLabel::bottom(policy);
        let max_params = letters
            .iter()
            .map(|l| policy.tools[l.tool].params.len())
            .max()
            .unwrap_or(0);
        let groups = &self.groups;
        let consts = &self.consts;
        let steps = &self.steps;
        let constraints = &mut self.constraints;
        let state = self.last_state.clone();
        let ctx = self.ctx.clone();
        let raw_ctx = self.raw_ctx.clone();
        let own = self.own.clone();
        let (choice, approve, succeed) = match shared {
            Some(r) => (
                r.steps[i].choice.clone(),
                r.steps[i].approve.clone(),
                r.steps[i].succeed.clone(),
            ),
            None => {
                let c = Int::new_const(format!("{tag}.choice{i}"));
                constraints.push(c.ge(Int::from_i64(0)));
                constraints.push(c.lt(Int::from_u64(letters.len() as u64)));
                (
                    c,
                    Bool::new_const(format!("{tag}.approve{i}")),
                    Bool::new_const(format!("{tag}.succeed{i}")),
                )
            }
        };
        let lin: Vec<Int> = (0..max_params)
            .map(|a| Int::new_const(format!("{tag}.lin{i}.{a}")))
            .collect();
        for l in &lin {
            constraints.push(l.ge(Int::from_i64(CTX)));
            constraints.push(l.lt(Int::from_u64(i as u64)));
            for (j, s) in steps.iter().enumerate() {
                // Lineage names only calls that ran and succeeded.
                constraints.push(
                    l.eq(Int::from_u64(j as u64))
                        .implies(Bool::and(&[s.admitted.clone(), s.succeed.clone()])),
                );
            }
        }
        let time = {
            // One `ite` per distinct time (most letters share one).
            let mut by_time: std::collections::BTreeMap<u64, Vec<Bool>> = Default::default();
            for (li, l) in letters.iter().enumerate() {
                by_time
                    .entry(l.time)
                    .or_default()
                    .push(choice.eq(Int::from_u64(li as u64)));
            }
            let mut times = by_time.into_iter();
            let mut t = Int::from_u64(times.next().map_or(0, |(t, _)| t));
            for (x, picks) in times {
                t = Bool::or(&picks).ite(&Int::from_u64(x), &t);
            }
            t
        };
        if let Some(prev) = steps.last() {
            constraints.push(prev.time.le(&time));
        }
        // A call that needs a value in a set comes after a result that
        // can discover it.
        for (li, l) in letters.iter().enumerate() {
            let needs = l.needs();
            if needs.is_empty() {
                continue;
            }
            let ok: Vec<Bool> = needs
                .iter()
                .map(|&set| {
                    Bool::or(
                        &steps
                            .iter()
                            .map(|s| s.disc[set].clone())
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            constraints.push(choice.eq(Int::from_u64(li as u64)).implies(Bool::and(&ok)));
        }
        let seq = Int::from_u64(i as u64);
        let from_lineage = |a: usize, outs: &dyn Fn(&Step) -> SymLabel| -> SymLabel {
            let mut l = bottom.clone();
            for (j, s) in steps.iter().enumerate() {
                l = ite(&lin[a].eq(Int::from_u64(j as u64)), &outs(s), &l);
            }
            l
        };
        let mut gsteps = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            let tool = &policy.tools[g.tool];
            // The context the call's arguments read: the shared one, or
            // that of the first agent on its chain with its own.
            let (ctx, raw_ctx) = match policy
                .chain_iter(g.agent)
                .find(|&x| policy.agents[x].own_context)
                .and_then(|o| own.iter().find(|x| x.0 == o))
            {
                Some((_, c, r)) => (c.clone(), r.clone()),
                None => (ctx.clone(), raw_ctx.clone()),
            };
            let picked_letter = |li: usize| choice.eq(Int::from_u64(li as u64));
            let picked = Bool::or(
                &g.letters
                    .iter()
                    .map(|&li| picked_letter(li))
                    .collect::<Vec<_>>(),
            );
            let null = |a: usize| {
                let parts: Vec<Bool> = g
                    .letters
                    .iter()
                    .filter(|&&li| letters[li].args.get(a) == Some(&Value::Null))
                    .map(|&li| picked_letter(li))
                    .collect();
                Bool::or(&parts)
            };
            let mut args = Vec::new();
            let mut raw_args = Vec::new();
            let mut carries = Vec::new();
            #[allow(clippy::needless_range_loop)]
            for a in 0..tool.params.len() {
                let is_ctx = lin[a].eq(Int::from_i64(CTX));
                let is_none = lin[a].eq(Int::from_i64(NONE));
                let nul = null(a);
                let lab = |c: &SymLabel, o: &dyn Fn(&Step) -> SymLabel| {
                    ite(
                        &is_ctx,
                        &ite(&nul, &bottom, c),
                        &ite(&is_none, &bottom, &from_lineage(a, o)),
                    )
                };
                args.push(lab(&ctx, &|s: &Step| s.out.clone()));
                raw_args.push(lab(&raw_ctx, &|s: &Step| s.raw_out.clone()));
                carries.push(Bool::or(&[is_ctx.not(), nul.not()]));
            }
            for l in lin.iter().take(max_params).skip(tool.params.len()) {
                constraints.push(Bool::implies(&picked, l.eq(Int::from_i64(CTX))));
            }
            let carries = Bool::or(&carries);
            let input = ite(&carries, &SymLabel::join_all(policy, &args), &ctx);
            let raw_input = ite(&carries, &SymLabel::join_all(policy, &raw_args), &raw_ctx);
            let resource = pick_label(
                policy,
                &g.letters
                    .iter()
                    .map(|&li| (picked_letter(li), letters[li].resource_label))
                    .collect::<Vec<_>>(),
            );
            let inputs = inputs_from(
                policy,
                g,
                &consts[gi],
                g.agent,
                &choice,
                &args,
                &input,
                &resource,
                &seq,
            );
            let enc = encode_step(policy, &state, &inputs);
            let raw_full = raw_input.join(&resource);
            let raw_out = raw_full.join(&SymLabel::constant(policy, &tool.output));
            gsteps.push(GroupStep {
                picked,
                inputs,
                enc,
                args,
                input,
                resource,
                raw_full,
                raw_out,
            });
        }
        let any = |f: &dyn Fn(&GroupStep) -> Bool| {
            Bool::or(
                &gsteps
                    .iter()
                    .map(|g| Bool::and(&[g.picked.clone(), f(g)]))
                    .collect::<Vec<_>>(),
            )
        };
        let deny = any(&|g| g.enc.deny.clone());
        let pause = any(&|g| g.enc.pause.clone());
        let allow = any(&|g| g.enc.allow.clone());
        let admitted = Bool::or(&[allow.clone(), Bool::and(&[pause.clone(), approve.clone()])]);
        let mut out = bottom.clone();
        let mut raw_out = bottom.clone();
        let mut next = state.clone();
        for (g, gs) in groups.iter().zip(&gsteps) {
            out = ite(&gs.picked, &gs.inputs.output, &out);
            raw_out = ite(&gs.picked, &gs.raw_out, &raw_out);
            let approved = Bool::and(&[gs.enc.pause.clone(), approve.clone()]);
            let rejected = Bool::and(&[gs.enc.pause.clone(), approve.not()]);
            let s = admit(policy, &gs.enc.next, &gs.inputs, &approved);
            let back: Vec<(usize, Bool)> = (0..policy.grants.len())
                .map(|x| {
                    (
                        x,
                        Bool::and(&[rejected.clone(), gs.enc.selected[x].clone()]),
                    )
                })
                .collect();
            let s = s.refund(policy, &back);
            let ran = Bool::or(&[gs.enc.allow.clone(), approved.clone()]);
            let failed = Bool::and(&[ran.clone(), succeed.not()]);
            let back: Vec<(usize, Bool)> = (0..policy.grants.len())
                .map(|x| (x, Bool::and(&[failed.clone(), gs.enc.selected[x].clone()])))
                .collect();
            let mut s = s.refund(policy, &back);
            for f in 0..policy.facts.len() {
                let by: Vec<Bool> = g
                    .letters
                    .iter()
                    .filter(|&&li| letters[li].facts.contains(&f))
                    .map(|&li| choice.eq(Int::from_u64(li as u64)))
                    .collect();
                let est = Bool::and(&[ran.clone(), succeed.clone(), Bool::or(&by)]);
                let cur = s.facts[f].clone();
                s.facts[f] = Bool::and(&[est, seq.gt(&cur)]).ite(&seq, &cur);
            }
            next = ite_state(&gs.picked, &s, &next);
        }
        if let Some(r) = shared {
            // The second run of taint monotonicity: where both runs agree
            // on every verdict so far (the only traces its goal asks
            // about), the state parts that labels cannot change are the
            // first run's: units, facts, `since`, and the progress of path
            // rules none of whose steps reads labels.
            let first = &r.last_state;
            next.remaining = first.remaining.clone();
            next.facts = first.facts.clone();
            next.since = first.since.clone();
            for (x, rule) in policy.path_rules.iter().enumerate() {
                if !label_dependent(rule) {
                    next.path[x] = first.path[x].clone();
                }
            }
        }
        let merged = Bool::and(&[admitted.clone(), succeed.clone()]);
        let disc = (0..policy.sets.len())
            .map(|set| {
                let by: Vec<Bool> = groups
                    .iter()
                    .zip(&gsteps)
                    .flat_map(|(g, gs)| {
                        policy
                            .grants
                            .iter()
                            .enumerate()
                            .filter(move |(_, x)| x.agent == g.agent && x.discovers == Some(set))
                            .map(move |(x, _)| {
                                Bool::and(&[gs.picked.clone(), gs.enc.selected[x].clone()])
                            })
                    })
                    .collect();
                Bool::and(&[merged.clone(), Bool::or(&by)])
            })
            .collect();
        let merged_all = merged.clone();
        let new_ctx = ctx.join(&gate(&merged, &out));
        let new_raw = raw_ctx.join(&gate(&merged, &raw_out));
        let step = Step {
            choice,
            lin,
            approve,
            succeed,
            time,
            ctx: ctx.clone(),
            raw_ctx: raw_ctx.clone(),
            state: state.clone(),
            groups: gsteps,
            deny,
            pause,
            allow,
            admitted,
            out,
            raw_out,
            disc,
        };
        self.steps.push(step);
        self.marks.push(self.constraints.len());
        self.ctx = new_ctx;
        self.raw_ctx = new_raw;
        // What a call returns also merges into the own context of every
        // agent on its chain that has one.
        for (o, c, r) in &mut self.own {
            let by: Vec<Bool> = self
                .groups
                .iter()
                .zip(&self.steps[i].groups)
                .filter(|(g, _)| policy.chain_iter(g.agent).any(|x| x == *o))
                .map(|(_, gs)| gs.picked.clone())
                .collect();
            let m = Bool::and(&[merged_all.clone(), Bool::or(&by)]);
            *c = c.join(&gate(&m, &self.steps[i].out));
            *r = r.join(&gate(&m, &self.steps[i].raw_out));
        }
        self.last_state = next;
    }
}

/// What a model says one step does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelStep {
    /// The letter called.
    pub letter: usize,
    /// Per argument: `None` no observed lineage, `Some([])`, `Some([j])`.
    pub lineage: Vec<Option<Vec<usize>>>,
    /// The verdict: 0 ALLOW, 1 PAUSE, 2 DENY.
    pub verdict: agenra_core::Verdict,
    /// A pause is approved.
    pub approve: bool,
    /// An admitted call succeeds.
    pub succeed: bool,
}

fn bval(m: &Model, b: &Bool) -> bool {
    m.eval(b, true).and_then(|x| x.as_bool()).unwrap_or(false)
}

/// The first `n` steps as the model has them.
pub fn read(policy: &Policy, letters: &[Letter], run: &Run, m: &Model, n: usize) -> Vec<ModelStep> {
    run.steps
        .iter()
        .take(n)
        .map(|s| {
            let letter = m
                .eval(&s.choice, true)
                .and_then(|x| x.as_i64())
                .unwrap_or(0)
                .clamp(0, letters.len().saturating_sub(1) as i64) as usize;
            let params = policy.tools[letters[letter].tool].params.len();
            let lineage = s
                .lin
                .iter()
                .take(params)
                .map(
                    |l| match m.eval(l, true).and_then(|x| x.as_i64()).unwrap_or(CTX) {
                        CTX => None,
                        NONE => Some(vec![]),
                        j => Some(vec![j.max(0) as usize]),
                    },
                )
                .collect();
            let verdict = if bval(m, &s.deny) {
                agenra_core::Verdict::Deny
            } else if bval(m, &s.pause) {
                agenra_core::Verdict::Pause
            } else {
                agenra_core::Verdict::Allow
            };
            ModelStep {
                letter,
                lineage,
                verdict,
                approve: bval(m, &s.approve),
                succeed: bval(m, &s.succeed),
            }
        })
        .collect()
}
