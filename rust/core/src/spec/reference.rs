//! The reference semantics of the whole step (DESIGN §2, `docs/semantics.md`):
//! well-formedness, per-argument labels, flows, call rules, path rules,
//! counts, obligations, and the ledger (`spec::step`), with approval as a
//! just-in-time re-authorization.
//!
//! Written for reading, not speed: nothing is incremental. Every check
//! recomputes from the list of admitted calls, each recorded with what it
//! was when it was admitted. The monitor is tested against it
//! (`rust/core/tests/properties.rs`). Names follow the monitor's modules.

use super::{Checks, Event as LedgerEvent, Outcome, Request, State};
use crate::decision::{Rule, Verdict};
use crate::event::{self, Call, Event};
use crate::fields::{FieldLabel, OutputLabels};
use crate::label::{Label, LabelPattern};
use crate::pattern::glob_matches;
use crate::policy::{FlowEffect, GrantId, PathKind, Policy, RuleEffect, StepPattern, Tool};
use crate::pool::SharedCounts;
use crate::tokens::{Token, TokenJudge, TokenOrigin};
use crate::value::{NamedCond, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Per parameter: the calls its data came from (`None`: the context).
pub type Lineage = Vec<Option<Vec<String>>>;

/// A call the session has seen.
#[derive(Clone, Debug)]
pub struct CallRecord {
    /// `None`: the call was not well-formed.
    pub req: Option<Request>,
    /// Per parameter, the ids of the calls (or tasks) its observed lineage
    /// names; empty for a call that was not well-formed and for a task.
    pub lineage: Lineage,
    /// What the call returns.
    pub output: Label,
    /// `output` without the tool's `output` label (sanitized inputs and
    /// resource labels): what declared output fields join.
    pub field_base: Label,
    /// Sequence number of its admission, once admitted.
    pub admitted_at: Option<u64>,
}

/// An admitted call as it was when it was admitted.
#[derive(Clone, Debug)]
pub struct Admission {
    /// The call's id.
    pub id: String,
    /// The sequence number of the event that admitted it (the call, or
    /// its approval); obligations compare facts by it.
    pub seq: u64,
    /// The call as admitted.
    pub req: Request,
    /// Its output label, which path steps' `reads(P)` test.
    pub output: Label,
    /// The discovered sets at admission (step conditions read them).
    pub sets: Vec<BTreeSet<String>>,
    /// How many task texts and outputs the session had at admission: the
    /// sources its step conditions' token tests judged by (they only grow).
    pub sources: (usize, usize),
    /// The time of the event that admitted it (the call, or its approval);
    /// counts `within` a window compare it with the judged call's time.
    pub time: u64,
}

/// A session of the reference semantics: everything the step recomputes
/// its answers from.
#[derive(Clone, Debug)]
pub struct Session {
    /// The authority state of the ledger semantics ([`super::step`]).
    pub ledger: State,
    /// Every output the agents have read, with the agent whose call it was.
    pub read: Vec<(usize, Label)>,
    /// Every call (and task) by id, well-formed or not, admitted or not.
    pub calls: BTreeMap<String, CallRecord>,
    /// The admitted calls, in order of admission: the history that call
    /// rules, path rules, counts and obligations judge.
    pub admitted: Vec<Admission>,
    /// Per fact: admission numbers of the calls whose result established it.
    pub facts: Vec<Vec<u64>>,
    /// Task texts, in order.
    pub tasks: Vec<String>,
    /// Outputs of succeeded and unknown results, with their call's label.
    pub outputs: Vec<(Label, serde_json::Value)>,
    /// Per output (same index), its declared fields with their labels
    /// (`docs/semantics.md`, "Per-field output labels"); a missing or empty
    /// entry: the output is labelled as a whole.
    pub output_fields: Vec<Vec<FieldLabel>>,
    /// The policy's declared token shapes (token tests cut texts with them).
    pub token_shapes: Vec<crate::tokens::TokenShape>,
    /// The scope the latest task opened.
    pub task_scope: Option<crate::event::TaskScope>,
    /// The number of events applied so far (the current event's sequence
    /// number while it is being applied).
    pub seq: u64,
    /// The time of the latest event; an event with an earlier time is
    /// [`Invalid`].
    pub time: u64,
    /// The tenant's pool (`quota N per tenant`): the units of each shared
    /// grant taken by all the tenant's sessions, which step 5 reads and
    /// takes from ([`super::step_in`]). `None`: the session has a private
    /// pool ([`super::private_pool`]), so its shared grants behave per
    /// session. A caller sharing a pool with other sessions puts its
    /// current counts here before an event and reads them back after.
    pub pool: Option<SharedCounts>,
    /// The amount bookkeeping of budgets (`budget AMOUNT on PARAM`), which
    /// step 5 spends from and gives back to ([`super::step_books`]).
    pub books: super::Books,
}

/// Where an argument's value occurs, for provenance by value
/// ([`Session::value_provenance`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueSource {
    /// The text of the `i`-th task of the session (`Session::tasks[i]`).
    Task(usize),
    /// The `i`-th output indexed (`Session::outputs[i]`), in a leaf no
    /// declared field covers.
    Output(usize),
    /// Declared field `f` (`Session::output_fields[i][f]`) of the `i`-th
    /// output: the value occurs under it, and takes its label.
    Field(usize, usize),
}

/// What the reference answers for an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// ALLOW/DENY/PAUSE for calls and approvals; `None` for other events.
    pub verdict: Option<Verdict>,
    /// The rule or grant that decided: for an ALLOW, and for results and
    /// rejections, the caller's own grant; `None` when nothing names one.
    pub rule: Option<Rule>,
    /// Units taken (or held, for an approval that ALLOWs).
    pub grants: Vec<GrantId>,
    /// Units returned.
    pub refunded: Vec<GrantId>,
}

/// An event that cannot be applied (the monitor's `StepError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid;

impl Session {
    /// A new session of `policy`: full quotas, no calls, no tasks.
    pub fn new(policy: &Policy) -> Session {
        Session {
            ledger: State::initial(policy),
            read: Vec::new(),
            calls: BTreeMap::new(),
            admitted: Vec::new(),
            facts: vec![Vec::new(); policy.facts.len()],
            tasks: Vec::new(),
            outputs: Vec::new(),
            output_fields: Vec::new(),
            token_shapes: policy.token_shapes.clone(),
            task_scope: None,
            seq: 0,
            time: 0,
            pool: None,
            books: super::Books::default(),
        }
    }

    fn advance(&mut self, time: Option<u64>) -> Result<(), Invalid> {
        let time = time.unwrap_or(self.time);
        if time < self.time {
            return Err(Invalid);
        }
        self.time = time;
        self.seq += 1;
        Ok(())
    }

    /// Applies one event and answers it, as the monitor's step should.
    /// `Err(Invalid)` for an event about an unknown call or a call in the
    /// wrong state, a reused id, a time before the previous event's, or a
    /// task seeding a set the policy does not let tasks seed.
    pub fn step(&mut self, policy: &Policy, e: &Event) -> Result<Answer, Invalid> {
        match e {
            Event::Call(c) => self.call(policy, c),
            Event::Approve(a) => self.approve(policy, &a.call, a.time),
            Event::Reject(r) => {
                self.paused(&r.call)?;
                self.advance(r.time)?;
                let used = self.ledger.paused.get(&r.call).cloned().unwrap_or_default();
                self.ledger_event(
                    policy,
                    LedgerEvent::Reject { id: r.call.clone() },
                    Checks::Pass,
                );
                Ok(applied(&used, used.clone()))
            }
            Event::Result(r) => self.result(policy, r),
            Event::Task(t) => self.task(policy, t),
        }
    }

    /// A task: its text is recorded, the sets it names are seeded (each must
    /// be one the policy lets tasks seed), its scope replaces the last one.
    fn task(&mut self, policy: &Policy, t: &event::Task) -> Result<Answer, Invalid> {
        if self.calls.contains_key(&t.id) {
            return Err(Invalid);
        }
        let mut seeds = Vec::new();
        for (name, values) in &t.sets {
            let set = policy.sets.iter().position(|s| s == name).ok_or(Invalid)?;
            if !policy.task_seeds.contains(&set) {
                return Err(Invalid);
            }
            seeds.push((set, values.clone()));
        }
        self.advance(t.time)?;
        self.calls.insert(
            t.id.clone(),
            CallRecord {
                req: None,
                lineage: vec![],
                output: Label::BOTTOM,
                field_base: Label::BOTTOM,
                admitted_at: None,
            },
        );
        self.tasks.push(t.text.clone());
        for (set, values) in seeds {
            self.ledger_event(policy, LedgerEvent::Seed { set, values }, Checks::Pass);
        }
        if let Some(scope) = &t.scope {
            self.task_scope = Some(scope.clone());
        }
        Ok(applied(&[], vec![]))
    }

    fn paused(&self, id: &str) -> Result<(), Invalid> {
        match self.ledger.paused.contains_key(id) {
            true => Ok(()),
            false => Err(Invalid),
        }
    }

    fn ledger_event(&mut self, policy: &Policy, e: LedgerEvent, checks: Checks) -> Outcome {
        let pool = match &self.pool {
            Some(pool) => pool.clone(),
            None => super::private_pool_of(policy, &self.ledger.ledger, &self.books),
        };
        let (outcome, next, books, next_pool) =
            super::step_books(policy, &self.ledger, &self.books, &pool, &e, checks);
        self.ledger = next;
        self.books = books;
        if self.pool.is_some() {
            self.pool = Some(next_pool);
        }
        outcome
    }

    // ---- 1. well-formedness -------------------------------------------

    /// The resolved call, or the rule that denies it: `well-formed`, or
    /// the first scope on the delegation chain that excludes the tool.
    pub fn well_formed(&self, policy: &Policy, c: &Call) -> Result<(Request, Lineage), Rule> {
        let malformed = Rule::WellFormed;
        let tool = policy
            .tools
            .iter()
            .position(|t| t.name == c.tool)
            .ok_or(malformed)?;
        let agent = match &c.agent {
            None => 0,
            Some(a) => policy
                .agents
                .iter()
                .position(|x| &x.name == a)
                .ok_or(malformed)?,
        };
        for a in policy.agent_chain(agent) {
            if let Some(s) = policy.agents[a].scope {
                if !policy.scopes[s].allows(&c.tool) {
                    return Err(Rule::Scope(s));
                }
            }
        }
        let spec = &policy.tools[tool];
        if c.args.keys().any(|k| spec.param_index(k).is_none()) {
            return Err(malformed);
        }
        let mut args = Vec::new();
        for p in &spec.params {
            let v = match c.args.get(&p.name) {
                None | Some(serde_json::Value::Null) if p.optional => Value::Null,
                None => return Err(malformed),
                Some(raw) if p.ty == crate::value::ParamType::Object => {
                    crate::object::from_json(p, raw).map_err(|_| malformed)?
                }
                Some(raw) => Value::from_json_typed(raw, p.ty, p.list).map_err(|_| malformed)?,
            };
            args.push(v);
        }
        if let Some(scope) = &self.task_scope {
            let resource = super::resource_of(policy, tool, &args);
            if scope.excludes(&spec.name, resource).is_some() {
                return Err(Rule::TaskScope);
            }
        }
        // Lineage and inferred lineage must name parameters and known calls;
        // only observed lineage narrows anything.
        for (param, ids) in c.lineage.iter().chain(&c.inferred) {
            if spec.param_index(param).is_none()
                || ids.iter().any(|id| !self.calls.contains_key(id))
            {
                return Err(malformed);
            }
        }
        let lineage = spec
            .params
            .iter()
            .map(|p| c.lineage.get(&p.name).cloned())
            .collect();
        let req = Request {
            agent,
            tool,
            args,
            time: c.time,
        };
        Ok((req, lineage))
    }

    /// The session's sources now, for token tests.
    pub fn sources(&self) -> Sources<'_> {
        Sources {
            tasks: &self.tasks,
            outputs: &self.outputs,
            fields: &self.output_fields,
            shapes: &self.token_shapes,
        }
    }

    // ---- 2. labels ----------------------------------------------------

    /// What `agent`'s arguments read: everything read in the session, or,
    /// when an agent on its chain has its own context, what that agent and
    /// its delegates have read.
    fn context(&self, policy: &Policy, agent: usize) -> Label {
        let owner = policy
            .agent_chain(agent)
            .into_iter()
            .find(|&a| policy.agents[a].own_context);
        self.read
            .iter()
            .filter(|(reader, _)| owner.is_none_or(|o| policy.agent_chain(*reader).contains(&o)))
            .fold(Label::BOTTOM, |acc, (_, l)| acc.join(l))
    }

    /// Per argument: the join of its sources' outputs; without lineage, an
    /// absent argument carries nothing (bottom); any other takes its label
    /// by value (if the policy asks for provenance by value and the value
    /// has one), else the context now.
    fn arg_labels(
        &self,
        policy: &Policy,
        req: &Request,
        lineage: &[Option<Vec<String>>],
    ) -> Vec<Label> {
        lineage
            .iter()
            .enumerate()
            .map(|(i, l)| match l {
                Some(ids) => ids
                    .iter()
                    .filter_map(|id| self.calls.get(id))
                    .fold(Label::BOTTOM, |acc, c| acc.join(&c.output)),
                None if req.args[i] == Value::Null => Label::BOTTOM,
                None => policy
                    .provenance_by_value
                    .then(|| {
                        let mode = policy.provenance_mode(req.tool, i);
                        crate::provenance::admits(mode, &req.args[i])
                            .then(|| self.by_value(&req.args[i]))
                            .flatten()
                    })
                    .flatten()
                    .unwrap_or_else(|| self.context(policy, req.agent)),
            })
            .collect()
    }

    /// Provenance by value, naively: every scalar must occur in a task text
    /// (the task's label, bottom), or in some trusted output and in no
    /// untrusted one (the join of those outputs' labels).
    fn by_value(&self, v: &Value) -> Option<Label> {
        self.value_provenance(v).map(|(label, _)| label)
    }

    /// Provenance by value (`docs/semantics.md`), recomputed from the task
    /// texts and outputs, with where the value occurs: `None` unless every
    /// scalar of `v` (each element of a list) has a provenance. A scalar
    /// that occurs in a task text takes the task's label (bottom) from the
    /// first such task; otherwise one that occurs in some trusted output
    /// and in no untrusted one takes the join of the labels of **every**
    /// trusted output holding it (so the sources' labels join to the
    /// answer). As the monitor's index: only the first
    /// [`MAX_OUTPUT_WORDS`](crate::provenance::MAX_OUTPUT_WORDS) words of
    /// an output count, and an untrusted output with more turns the
    /// output rule off. The SMT authorizer draws its value edges from the
    /// sources.
    pub fn value_provenance(&self, v: &Value) -> Option<(Label, Vec<ValueSource>)> {
        use crate::provenance::{
            labelled_output_keys, phrase, text_has_phrase, text_keys, value_key, MAX_OUTPUT_WORDS,
        };
        // Each output's keys, each with the label of its field.
        let mut keys: Vec<Vec<(crate::provenance::Key, Option<usize>)>> =
            Vec::with_capacity(self.outputs.len());
        let labels: Vec<OutputLabels> = (0..self.outputs.len())
            .map(|i| output_labels(self, i))
            .collect();
        let mut overflow = false;
        for ((_, o), l) in self.outputs.iter().zip(&labels) {
            let mut k = Vec::new();
            labelled_output_keys(o, l, &mut k);
            if k.len() > MAX_OUTPUT_WORDS {
                overflow |= k.iter().any(|(_, f)| !l.label(*f).trusted);
                k.truncate(MAX_OUTPUT_WORDS);
            }
            keys.push(k);
        }
        let mut label = Label::BOTTOM;
        let mut sources = Vec::new();
        for s in v.scalars() {
            let (found, from) = match value_key(s) {
                Some(k) => match self.tasks.iter().position(|t| text_keys(t).contains(&k)) {
                    Some(t) => (Label::BOTTOM, vec![ValueSource::Task(t)]),
                    None if overflow => return None,
                    None => {
                        // Every occurrence, with its field's label.
                        let found: Vec<(usize, Option<usize>)> = (0..keys.len())
                            .flat_map(|i| {
                                keys[i]
                                    .iter()
                                    .filter(|(key, _)| *key == k)
                                    .map(move |(_, f)| (i, *f))
                            })
                            .collect();
                        let label_of = |&(i, f): &(usize, Option<usize>)| labels[i].label(f);
                        if found.is_empty() || found.iter().any(|o| !label_of(o).trusted) {
                            return None;
                        }
                        let joined = found
                            .iter()
                            .fold(Label::BOTTOM, |a, o| a.join(&label_of(o)));
                        let mut holding: Vec<ValueSource> = found
                            .iter()
                            .map(|&(i, f)| match f {
                                None => ValueSource::Output(i),
                                Some(f) => ValueSource::Field(i, f),
                            })
                            .collect();
                        holding.dedup();
                        (joined, holding)
                    }
                },
                None => {
                    let words = phrase(s)?;
                    let t = self.tasks.iter().position(|t| text_has_phrase(t, &words))?;
                    (Label::BOTTOM, vec![ValueSource::Task(t)])
                }
            };
            label = label.join(&found);
            for f in from {
                if !sources.contains(&f) {
                    sources.push(f);
                }
            }
        }
        Some((label, sources))
    }

    /// The join over the arguments; a call that passes no data at all (no
    /// parameters, or every argument absent without lineage) reads the
    /// context: that it is made at all depends on what was read.
    fn input(
        &self,
        policy: &Policy,
        req: &Request,
        lineage: &[Option<Vec<String>>],
        args: &[Label],
    ) -> Label {
        let carries = (0..args.len()).any(|i| lineage[i].is_some() || req.args[i] != Value::Null);
        if carries {
            args.iter().fold(Label::BOTTOM, |a, l| a.join(l))
        } else {
            self.context(policy, req.agent)
        }
    }

    // ---- 3. flows -----------------------------------------------------

    /// The first rule that denies the call's flows and the first that
    /// pauses them: every sink the tool reaches, in order, then what the
    /// calling agent receives.
    fn flows(
        &self,
        policy: &Policy,
        req: &Request,
        lineage: &[Option<Vec<String>>],
        args: &[Label],
    ) -> (Option<Rule>, Option<Rule>) {
        let tool = &policy.tools[req.tool];
        let own = resource_label(policy, req);
        let input = self.input(policy, req, lineage, args);
        let mut flows: Vec<(Label, Vec<RuleOn>)> = Vec::new();
        for use_ in &tool.sinks {
            let bound = match &use_.params {
                None => input,
                Some(ps) => ps.iter().fold(Label::BOTTOM, |a, &p| a.join(&args[p])),
            };
            let rules = (0..policy.flow_rules.len())
                .filter(|&r| policy.flow_rules[r].sink == use_.sink)
                .map(|r| {
                    (
                        Rule::Flow(r),
                        policy.flow_rules[r].effect,
                        &policy.flow_rules[r].when,
                    )
                })
                .collect();
            flows.push((bound.join(&own), rules));
        }
        let received = (0..policy.receive_rules.len())
            .filter(|&r| policy.receive_rules[r].agent == req.agent)
            .map(|r| {
                (
                    Rule::Receive(r),
                    policy.receive_rules[r].effect,
                    &policy.receive_rules[r].when,
                )
            })
            .collect();
        flows.push((input.join(&own), received));
        let mut pause = None;
        for (label, rules) in flows {
            let holds =
                |c: &NamedCond| cond_holds(c, tool, req, &self.ledger.sets, &self.sources());
            let exempt = rules.iter().any(|(_, e, when)| match e {
                FlowEffect::Allow(c) => label.flows_to(c) && holds(when),
                _ => false,
            });
            if exempt {
                continue;
            }
            let hit = |want: fn(&FlowEffect) -> Option<LabelPattern>| {
                rules
                    .iter()
                    .find(|(_, e, when)| want(e).is_some_and(|p| p.matches(&label)) && holds(when))
                    .map(|(r, _, _)| *r)
            };
            if let Some(r) = hit(|e| match e {
                FlowEffect::Deny(p) => Some(*p),
                _ => None,
            }) {
                return (Some(r), None);
            }
            if pause.is_none() {
                pause = hit(|e| match e {
                    FlowEffect::Pause(p) => Some(*p),
                    _ => None,
                });
            }
        }
        (None, pause)
    }

    // ---- 4. history ---------------------------------------------------

    /// Every call rule, path rule, count and obligation the call breaks,
    /// with its effect, in that order.
    fn history(&self, policy: &Policy, req: &Request, output: &Label) -> Vec<(Rule, RuleEffect)> {
        let mut out = Vec::new();
        let tool = &policy.tools[req.tool];
        for (i, r) in policy.call_rules.iter().enumerate() {
            if r.tool == req.tool
                && r.when
                    .eval_with(&req.args, req.agent, &self.ledger.sets, &self.sources())
            {
                out.push((Rule::Call(i), r.effect));
            }
        }
        let now =
            |s: &StepPattern| step_holds(s, tool, req, output, &self.ledger.sets, &self.sources());
        let then = |s: &StepPattern, a: &Admission| {
            let (tasks, outputs) = a.sources;
            let then = Sources {
                tasks: &self.tasks[..tasks],
                outputs: &self.outputs[..outputs],
                fields: &self.output_fields[..outputs.min(self.output_fields.len())],
                shapes: &self.token_shapes,
            };
            step_holds(
                s,
                &policy.tools[a.req.tool],
                &a.req,
                &a.output,
                &a.sets,
                &then,
            )
        };
        for (i, r) in policy.path_rules.iter().enumerate() {
            // The history since the last admitted call matching `reset`.
            let start = r
                .reset
                .as_ref()
                .and_then(|reset| self.admitted.iter().rposition(|a| then(reset, a)))
                .unwrap_or(0);
            let history = &self.admitted[start..];
            let broken = match &r.kind {
                PathKind::Sequence(steps) => {
                    let last = steps.len() - 1;
                    let mut k = 0;
                    for a in history {
                        if k < last && then(&steps[k], a) {
                            k += 1;
                        }
                    }
                    k == last && now(&steps[last])
                }
                PathKind::AtMost { max, step } => {
                    // `within W`: only calls admitted less than W seconds
                    // before now (times never decrease).
                    let window = policy.count_window(i);
                    let recent =
                        |a: &Admission| window.is_none_or(|w| self.time.saturating_sub(a.time) < w);
                    history
                        .iter()
                        .filter(|a| recent(a) && then(step, a))
                        .count() as u64
                        >= *max
                        && now(step)
                }
            };
            if broken {
                out.push((Rule::Path(i), r.effect));
            }
        }
        for (i, o) in policy.obligations.iter().enumerate() {
            if !glob_matches(&o.before, &tool.name) {
                continue;
            }
            let since = o.since.as_deref().and_then(|g| {
                self.admitted
                    .iter()
                    .rev()
                    .find(|a| glob_matches(g, &policy.tools[a.req.tool].name))
                    .map(|a| a.seq)
            });
            let seen = self.facts[o.fact].iter().max();
            let met = match (seen, since) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(f), Some(s)) => *f > s,
            };
            if !met {
                out.push((Rule::Obligation(i), o.effect));
            }
        }
        out
    }

    // ---- the step -----------------------------------------------------

    fn call(&mut self, policy: &Policy, c: &Call) -> Result<Answer, Invalid> {
        if self.calls.contains_key(&c.id) || c.time < self.time {
            return Err(Invalid);
        }
        self.advance(Some(c.time))?;
        let deny = |rule| Answer {
            verdict: Some(Verdict::Deny),
            rule: Some(rule),
            grants: vec![],
            refunded: vec![],
        };
        let (req, lineage) = match self.well_formed(policy, c) {
            Ok(resolved) => resolved,
            Err(rule) => {
                self.calls.insert(
                    c.id.clone(),
                    CallRecord {
                        req: None,
                        lineage: vec![],
                        output: Label::BOTTOM,
                        field_base: Label::BOTTOM,
                        admitted_at: None,
                    },
                );
                return Ok(deny(rule));
            }
        };
        let args = self.arg_labels(policy, &req, &lineage);
        let tool = &policy.tools[req.tool];
        let input = self.input(policy, &req, &lineage, &args);
        let through = match tool.sanitizer.and_then(|s| policy.sanitizers.get(s)) {
            Some(s) => s.apply(&input),
            None => input,
        };
        let field_base = through.join(&resource_label(policy, &req));
        let output = field_base.join(&tool.output);
        let (flow_deny, flow_pause) = self.flows(policy, &req, &lineage, &args);
        self.calls.insert(
            c.id.clone(),
            CallRecord {
                req: Some(req.clone()),
                lineage,
                output,
                field_base,
                admitted_at: None,
            },
        );
        if let Some(r) = flow_deny {
            return Ok(deny(r));
        }
        let broken = self.history(policy, &req, &output);
        if let Some((rule, _)) = broken.iter().find(|(_, e)| *e == RuleEffect::Deny) {
            return Ok(deny(*rule));
        }
        let pause_rule = flow_pause.or_else(|| broken.first().map(|(r, _)| *r));
        let checks = match pause_rule {
            Some(_) => Checks::Pause,
            None => Checks::Pass,
        };
        let outcome = self.ledger_event(
            policy,
            LedgerEvent::Call {
                id: c.id.clone(),
                req: req.clone(),
            },
            checks,
        );
        Ok(match outcome {
            Outcome::Allow(used) => {
                self.admit(&c.id, &req, output);
                Answer {
                    verdict: Some(Verdict::Allow),
                    rule: used.first().map(|&g| Rule::Grant(g)),
                    grants: used,
                    refunded: vec![],
                }
            }
            Outcome::Pause(used) => {
                let approval = used.iter().copied().find(|&g| policy.grants[g].approval);
                Answer {
                    verdict: Some(Verdict::Pause),
                    rule: pause_rule.or(approval.map(Rule::Grant)),
                    grants: used,
                    refunded: vec![],
                }
            }
            _ => deny(Rule::NoGrant),
        })
    }

    fn admit(&mut self, id: &str, req: &Request, output: Label) {
        if let Some(c) = self.calls.get_mut(id) {
            c.admitted_at = Some(self.seq);
        }
        self.admitted.push(Admission {
            id: id.to_string(),
            seq: self.seq,
            req: req.clone(),
            output,
            sets: self.ledger.sets.clone(),
            sources: (self.tasks.len(), self.outputs.len()),
            time: self.time,
        });
    }

    /// Approval re-checks flows and history now; a deny returns the units.
    fn approve(&mut self, policy: &Policy, id: &str, time: Option<u64>) -> Result<Answer, Invalid> {
        self.paused(id)?;
        self.advance(time)?;
        let record = self.calls.get(id).cloned().ok_or(Invalid)?;
        let req = record.req.clone().ok_or(Invalid)?;
        let args = self.arg_labels(policy, &req, &record.lineage);
        let (flow_deny, _) = self.flows(policy, &req, &record.lineage, &args);
        let history_deny = self
            .history(policy, &req, &record.output)
            .into_iter()
            .find(|(_, e)| *e == RuleEffect::Deny)
            .map(|(r, _)| r);
        let denial = flow_deny.or(history_deny);
        let used = self.ledger.paused.get(id).cloned().unwrap_or_default();
        let checks = match denial {
            Some(_) => Checks::Deny,
            None => Checks::Pass,
        };
        let outcome = self.ledger_event(policy, LedgerEvent::Approve { id: id.into() }, checks);
        Ok(match outcome {
            Outcome::Allow(used) => {
                self.admit(id, &req, record.output);
                Answer {
                    verdict: Some(Verdict::Allow),
                    rule: used.first().map(|&g| Rule::Grant(g)),
                    grants: used,
                    refunded: vec![],
                }
            }
            _ => Answer {
                verdict: Some(Verdict::Deny),
                rule: denial,
                grants: vec![],
                refunded: used,
            },
        })
    }

    fn result(&mut self, policy: &Policy, r: &event::Report) -> Result<Answer, Invalid> {
        if !self.ledger.running.contains_key(&r.call) {
            return Err(Invalid);
        }
        self.advance(r.time)?;
        let used = self
            .ledger
            .running
            .get(&r.call)
            .cloned()
            .unwrap_or_default();
        let record = self.calls.get(&r.call).cloned().ok_or(Invalid)?;
        let e = match r.status {
            event::Outcome::Succeeded => LedgerEvent::Succeeded {
                id: r.call.clone(),
                discovered: r.discovered.clone(),
            },
            event::Outcome::Failed => LedgerEvent::Failed { id: r.call.clone() },
            event::Outcome::Unknown => LedgerEvent::Unknown { id: r.call.clone() },
        };
        self.ledger_event(policy, e, Checks::Pass);
        if r.status != event::Outcome::Failed {
            let agent = record.req.as_ref().map_or(0, |q| q.agent);
            self.read.push((agent, record.output));
            self.outputs.push((record.output, r.output.clone()));
            let fields = record.req.as_ref().map_or_else(Vec::new, |q| {
                policy
                    .output_labels(q.tool, record.output, record.field_base)
                    .fields
            });
            self.output_fields.push(fields);
        }
        if r.status == event::Outcome::Succeeded {
            if let (Some(req), Some(at)) = (&record.req, record.admitted_at) {
                for f in &policy.tools[req.tool].facts {
                    let holds = f
                        .when
                        .as_ref()
                        .is_none_or(|t| t.holds(&r.output, &self.ledger.sets));
                    if holds {
                        self.facts[f.fact].push(at);
                    }
                }
            }
        }
        let refunded = match r.status {
            event::Outcome::Failed => used.clone(),
            _ => vec![],
        };
        Ok(applied(&used, refunded))
    }
}

/// A flow rule (into a sink or an agent): its name in decisions, its
/// effect and its condition.
type RuleOn<'a> = (Rule, FlowEffect, &'a NamedCond);

/// A result, rejection: the rule is the caller's own grant.
fn applied(used: &[GrantId], refunded: Vec<GrantId>) -> Answer {
    Answer {
        verdict: None,
        rule: used.first().map(|&g| Rule::Grant(g)),
        grants: vec![],
        refunded,
    }
}

/// The join of the labels of the resources the call's resource argument
/// matches (bottom if none).
pub fn resource_label(policy: &Policy, req: &Request) -> Label {
    match super::resource_of(policy, req.tool, &req.args) {
        None => Label::BOTTOM,
        Some(r) => policy
            .resources
            .iter()
            .filter(|rl| rl.pattern.matches(r))
            .fold(Label::BOTTOM, |a, rl| a.join(&rl.label)),
    }
}

/// A named condition on a call of `tool`.
fn cond_holds(
    c: &NamedCond,
    tool: &Tool,
    req: &Request,
    sets: &[BTreeSet<String>],
    judge: &dyn TokenJudge,
) -> bool {
    c.resolve(&|name| tool.param_index(name))
        .eval_with(&req.args, req.agent, sets, judge)
}

fn step_holds(
    s: &StepPattern,
    tool: &Tool,
    req: &Request,
    output: &Label,
    sets: &[BTreeSet<String>],
    judge: &dyn TokenJudge,
) -> bool {
    s.matches_tool(tool)
        && s.reads.is_none_or(|p| p.matches(output))
        && s.when
            .as_ref()
            .is_none_or(|c| cond_holds(c, tool, req, sets, judge))
}

/// The labels of the session's `i`-th output: its call's label, and its
/// declared fields' labels.
fn output_labels(s: &Session, i: usize) -> OutputLabels {
    OutputLabels {
        whole: s.outputs[i].0,
        fields: s.output_fields.get(i).cloned().unwrap_or_default(),
    }
}

/// The sources token tests judge by: task texts and outputs (a prefix of
/// the session's, for a call admitted earlier).
pub struct Sources<'a> {
    /// Task texts, in order.
    pub tasks: &'a [String],
    /// Outputs of succeeded and unknown results, with their call's label.
    pub outputs: &'a [(Label, serde_json::Value)],
    /// Per output, its declared fields with their labels (missing or
    /// empty: labelled as a whole).
    pub fields: &'a [Vec<FieldLabel>],
    /// The policy's declared token shapes.
    pub shapes: &'a [crate::tokens::TokenShape],
}

impl TokenJudge for Sources<'_> {
    /// Naively (`docs/semantics.md`, "Token provenance inside text"): in a
    /// task text; else in some trusted output and no untrusted one, unless
    /// an untrusted output has more than
    /// [`MAX_OUTPUT_TOKENS`](crate::tokens::MAX_OUTPUT_TOKENS) tokens (only
    /// the first that many of an output count); else elsewhere.
    fn origin(&self, token: &Token) -> TokenOrigin {
        use crate::tokens::{labelled_output_tokens, text_tokens_with, MAX_OUTPUT_TOKENS};
        let in_task = self.tasks.iter().any(|t| {
            let mut ts = Vec::new();
            text_tokens_with(t, self.shapes, &mut ts);
            ts.contains(token)
        });
        if in_task {
            return TokenOrigin::Task;
        }
        let mut trusted = false;
        for (i, (label, o)) in self.outputs.iter().enumerate() {
            let labels = OutputLabels {
                whole: *label,
                fields: self.fields.get(i).cloned().unwrap_or_default(),
            };
            let mut ts = Vec::new();
            labelled_output_tokens(o, &labels, self.shapes, &mut ts);
            if ts.len() > MAX_OUTPUT_TOKENS && ts.iter().any(|(_, t)| !t) {
                return TokenOrigin::Elsewhere;
            }
            ts.truncate(MAX_OUTPUT_TOKENS);
            for (t, field_trusted) in ts {
                if t == *token {
                    if !field_trusted {
                        return TokenOrigin::Elsewhere;
                    }
                    trusted = true;
                }
            }
        }
        if trusted {
            TokenOrigin::TrustedOutput
        } else {
            TokenOrigin::Elsewhere
        }
    }

    fn shapes(&self) -> &[crate::tokens::TokenShape] {
        self.shapes
    }
}

#[cfg(test)]
mod tests {
    //! Directed scenarios for the reference: each answer is pinned, and the
    //! monitor must give the same one (the random differential test rarely
    //! builds these sequences).
    use super::*;
    use crate::decision::StepOutput;
    use crate::policy::{Agent, FactRule, Grant, Obligation, Param, Quota, SinkUse, Tool};
    use crate::value::ParamType;
    use serde_json::json;

    /// A session with these task texts and (label, output) pairs.
    fn with_sources(tasks: &[&str], outputs: Vec<(Label, serde_json::Value)>) -> Session {
        let mut s = Session::new(&Policy::empty("p"));
        s.tasks = tasks.iter().map(|t| t.to_string()).collect();
        s.outputs = outputs;
        s
    }

    #[test]
    fn value_provenance_names_every_trusted_holder_once_and_joins_their_labels() {
        use crate::label::CategorySet;
        let low = Label::new(1, CategorySet::EMPTY, true);
        let high = Label::new(2, CategorySet::EMPTY, true);
        let s = with_sources(
            &["mail bob"],
            vec![
                (low, json!("alice carol")),
                (high, json!("alice")),
                (Label::BOTTOM, json!("dave")),
            ],
        );
        let v = |x: &str| Value::Str(x.into());
        // In the task text: the task's label (bottom), the task as source.
        assert_eq!(
            s.value_provenance(&v("bob")),
            Some((Label::BOTTOM, vec![ValueSource::Task(0)]))
        );
        // In two trusted outputs: both named, labels joined.
        assert_eq!(
            s.value_provenance(&v("alice")),
            Some((
                low.join(&high),
                vec![ValueSource::Output(0), ValueSource::Output(1)]
            ))
        );
        // A list: each scalar's sources, each named once.
        let list = Value::List(vec![v("alice"), v("carol"), v("alice")]);
        assert_eq!(
            s.value_provenance(&list),
            Some((
                low.join(&high),
                vec![ValueSource::Output(0), ValueSource::Output(1)]
            ))
        );
        // Nowhere: no provenance.
        assert_eq!(s.value_provenance(&v("eve")), None);
        // One untrusted holder is enough to refuse it.
        let untrusted = Label::new(0, CategorySet::EMPTY, false);
        let s = with_sources(
            &[],
            vec![(low, json!("alice")), (untrusted, json!("alice"))],
        );
        assert_eq!(s.value_provenance(&v("alice")), None);
    }

    #[test]
    fn an_untrusted_output_past_the_word_limit_turns_the_output_rule_off() {
        use crate::label::CategorySet;
        use crate::provenance::MAX_OUTPUT_WORDS;
        let trusted = Label::new(1, CategorySet::EMPTY, true);
        let untrusted = Label::new(0, CategorySet::EMPTY, false);
        let words = |n: usize| json!(vec!["w"; n].join(" "));
        let v = |x: &str| Value::Str(x.into());
        // Exactly at the limit: every word counted, the rule stays on.
        let s = with_sources(
            &["bob"],
            vec![
                (trusted, json!("alice")),
                (untrusted, words(MAX_OUTPUT_WORDS)),
            ],
        );
        assert_eq!(
            s.value_provenance(&v("alice")),
            Some((trusted, vec![ValueSource::Output(0)]))
        );
        // One word more: what it hides past the limit could be the value,
        // so outputs no longer vouch for any value; the task still does.
        let s = with_sources(
            &["bob"],
            vec![
                (trusted, json!("alice")),
                (untrusted, words(MAX_OUTPUT_WORDS + 1)),
            ],
        );
        assert_eq!(s.value_provenance(&v("alice")), None);
        assert_eq!(
            s.value_provenance(&v("bob")),
            Some((Label::BOTTOM, vec![ValueSource::Task(0)]))
        );
        // A trusted output past the limit is cut there, and turns nothing off.
        let mut long = vec!["w"; MAX_OUTPUT_WORDS];
        long.push("zed");
        let s = with_sources(
            &[],
            vec![(trusted, json!(long.join(" "))), (trusted, json!("alice"))],
        );
        assert_eq!(s.value_provenance(&v("zed")), None);
        assert_eq!(
            s.value_provenance(&v("alice")),
            Some((trusted, vec![ValueSource::Output(1)]))
        );
    }

    pub(super) fn tool(name: &str, params: &[(&str, bool)]) -> Tool {
        Tool {
            name: name.into(),
            params: params
                .iter()
                .map(|&(p, optional)| Param {
                    name: p.into(),
                    ty: ParamType::Str,
                    list: false,
                    optional,
                    fields: Vec::new(),
                })
                .collect(),
            resource: None,
            sinks: vec![],
            output: Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        }
    }

    pub(super) fn grant(name: &str, agent: usize, tool: usize, quota: Quota) -> Grant {
        Grant {
            name: name.into(),
            agent,
            tool,
            resource: None,
            args: vec![],
            quota,
            approval: false,
            expires_at: None,
            discovers: None,
        }
    }

    /// Every tool granted to `main`, unlimited, as `g<tool>`.
    pub(super) fn grant_all(p: &mut Policy) {
        for t in 0..p.tools.len() {
            p.grants
                .push(grant(&format!("g{t}"), 0, t, Quota::Unlimited));
        }
    }

    fn short(policy: &Policy, a: &Result<Answer, Invalid>) -> String {
        match a {
            Err(Invalid) => "invalid".into(),
            Ok(a) => match a.verdict {
                Some(v) => format!(
                    "{} {}",
                    v.as_str(),
                    a.rule.map_or("-".into(), |r| r.name(policy))
                ),
                None => "applied".into(),
            },
        }
    }

    /// The reference's answers, short (`ALLOW g0`, `DENY o0`, `applied`,
    /// `invalid`); the monitor must agree on every one, and on the ledger.
    pub(super) fn run(policy: &Policy, events: &[serde_json::Value]) -> Vec<String> {
        let mut reference = Session::new(policy);
        let mut monitor = crate::Monitor::new(policy.clone()).expect("a valid policy");
        let mut out = Vec::new();
        for e in events {
            let e: Event = serde_json::from_value(e.clone()).expect("an event");
            let want = reference.step(policy, &e);
            let got = match monitor.step(&e) {
                Err(_) => "invalid".to_string(),
                Ok(StepOutput::Decision(d)) => {
                    format!("{} {}", d.verdict.as_str(), d.rule.name(policy))
                }
                Ok(StepOutput::Applied(_)) => "applied".into(),
            };
            let want = short(policy, &want);
            assert_eq!(want, got, "reference and monitor on {e:?}");
            assert_eq!(monitor.state().ledger.to_ledger(), reference.ledger.ledger);
            out.push(want);
        }
        out
    }

    pub(super) fn call(
        id: &str,
        time: u64,
        tool: &str,
        args: serde_json::Value,
    ) -> serde_json::Value {
        json!({"kind": "call", "id": id, "time": time, "tool": tool, "args": args})
    }

    pub(super) fn result(id: &str, status: &str) -> serde_json::Value {
        json!({"kind": "result", "call": id, "status": status})
    }

    /// `edit`, `test` (its success establishes `tested`) and `deploy`;
    /// `require tested since edit before deploy`.
    fn release_policy(since: &str) -> Policy {
        let mut p = Policy::empty("release");
        p.facts = vec!["tested".into()];
        p.tools = vec![tool("edit", &[]), tool("test", &[]), tool("deploy", &[])];
        p.tools[1].facts = vec![FactRule {
            fact: 0,
            when: None,
        }];
        grant_all(&mut p);
        p.obligations = vec![Obligation {
            name: "o0".into(),
            effect: RuleEffect::Deny,
            fact: 0,
            before: "deploy".into(),
            since: Some(since.into()),
        }];
        p
    }

    #[test]
    fn a_fact_counts_only_after_the_last_since_call() {
        let p = release_policy("edit");
        let answers = run(
            &p,
            &[
                call("d0", 1, "deploy", json!({})),
                call("e1", 2, "edit", json!({})),
                call("t1", 3, "test", json!({})),
                result("t1", "succeeded"),
                call("d1", 4, "deploy", json!({})),
                call("e2", 5, "edit", json!({})),
                call("d2", 6, "deploy", json!({})),
                call("t2", 7, "test", json!({})),
                result("t2", "failed"),
                call("d3", 8, "deploy", json!({})),
                call("t3", 9, "test", json!({})),
                result("t3", "unknown"),
                call("d4", 10, "deploy", json!({})),
            ],
        );
        assert_eq!(
            answers,
            [
                "DENY o0", "ALLOW g0", "ALLOW g1", "applied", "ALLOW g2", "ALLOW g0", "DENY o0",
                "ALLOW g1", "applied", "DENY o0", "ALLOW g1", "applied", "DENY o0"
            ]
        );
    }

    #[test]
    fn a_fact_from_the_since_call_itself_is_not_after_it() {
        // `since test`: the test's own result does not come after the test.
        let p = release_policy("test");
        let answers = run(
            &p,
            &[
                call("t1", 1, "test", json!({})),
                result("t1", "succeeded"),
                call("d1", 2, "deploy", json!({})),
            ],
        );
        assert_eq!(answers, ["ALLOW g1", "applied", "DENY o0"]);
    }

    #[test]
    fn time_never_goes_back() {
        let mut p = release_policy("edit");
        p.grants[0].approval = true;
        let answers = run(
            &p,
            &[
                call("t1", 5, "test", json!({})),
                json!({"kind": "result", "call": "t1", "status": "succeeded", "time": 4}),
                call("e1", 4, "edit", json!({})),
                call("e1", 6, "edit", json!({})),
                json!({"kind": "approve", "call": "e1", "time": 5}),
                json!({"kind": "reject", "call": "e1", "time": 5}),
                json!({"kind": "task", "id": "task", "text": "hi", "time": 5}),
                json!({"kind": "approve", "call": "e1", "time": 7}),
                call("t2", 6, "test", json!({})),
                json!({"kind": "result", "call": "t1", "status": "succeeded", "time": 7}),
                call("t2", 7, "test", json!({})),
            ],
        );
        assert_eq!(
            answers,
            [
                "ALLOW g1", "invalid", "invalid", "PAUSE g0", "invalid", "invalid", "invalid",
                "ALLOW g0", "invalid", "applied", "ALLOW g1"
            ]
        );
    }

    #[test]
    fn sinks_and_agents_are_known_by_name() {
        let mut p = Policy::empty("p");
        p.sinks = vec!["net".into()];
        p.tools = vec![tool("send", &[("to", false), ("cc", true)])];
        p.tools[0].sinks = vec![SinkUse {
            sink: 0,
            params: None,
        }];
        p.agents.push(Agent {
            name: "helper".into(),
            parent: Some(0),
            scope: None,
            own_context: false,
        });
        grant_all(&mut p);
        p.grants.push(grant("h", 1, 0, Quota::Limited(1)));
        let answers = run(
            &p,
            &[
                call("a", 1, "send", json!({"to": "x"})),
                call("b", 1, "sned", json!({"to": "x"})),
                call("c", 1, "send", json!({})),
                call("d", 1, "send", json!({"to": "x", "bcc": "y"})),
                call("e", 1, "send", json!({"to": 3})),
                call("f", 1, "send", json!({"to": "x", "cc": null})),
                json!({"kind": "call", "id": "g", "time": 1, "tool": "send", "agent": "helper", "args": {"to": "x"}}),
                json!({"kind": "call", "id": "h", "time": 1, "tool": "send", "agent": "nobody", "args": {"to": "x"}}),
                json!({"kind": "call", "id": "i", "time": 1, "tool": "send", "agent": "helper", "args": {"to": "x"}}),
                json!({"kind": "call", "id": "j", "time": 1, "tool": "send", "args": {"to": "x"}, "lineage": {"to": ["a"]}}),
                json!({"kind": "call", "id": "k", "time": 1, "tool": "send", "args": {"to": "x"}, "lineage": {"to": ["zz"]}}),
                json!({"kind": "call", "id": "l", "time": 1, "tool": "send", "args": {"to": "x"}, "lineage": {"bcc": ["a"]}}),
                json!({"kind": "call", "id": "m", "time": 1, "tool": "send", "args": {"to": "x"}, "inferred": {"to": ["zz"]}}),
                call("a", 2, "send", json!({"to": "x"})),
            ],
        );
        assert_eq!(
            answers,
            [
                "ALLOW g0",
                "DENY well-formed",
                "DENY well-formed",
                "DENY well-formed",
                "DENY well-formed",
                "ALLOW g0",
                "ALLOW h",
                "DENY well-formed",
                "DENY no-grant",
                "ALLOW g0",
                "DENY well-formed",
                "DENY well-formed",
                "DENY well-formed",
                "invalid",
            ]
        );
    }

    #[test]
    fn scopes_confine_an_agent_and_its_delegates() {
        let mut p = Policy::empty("p");
        p.tools = vec![tool("read_file", &[]), tool("send", &[])];
        p.scopes = vec![crate::policy::Scope {
            name: "readonly".into(),
            tools: vec!["read*".into()],
        }];
        for (name, parent, scope) in [("helper", 0, Some(0)), ("sub", 1, None)] {
            p.agents.push(Agent {
                name: name.into(),
                parent: Some(parent),
                scope,
                own_context: false,
            });
        }
        for a in 0..3 {
            for t in 0..2 {
                p.grants
                    .push(grant(&format!("a{a}t{t}"), a, t, Quota::Unlimited));
            }
        }
        let by = |id: &str, agent: &str, tool: &str| json!({"kind": "call", "id": id, "time": 1, "tool": tool, "agent": agent, "args": {}});
        let answers = run(
            &p,
            &[
                by("1", "helper", "send"),
                by("2", "helper", "read_file"),
                by("3", "sub", "send"),
                by("4", "sub", "read_file"),
                by("5", "main", "send"),
            ],
        );
        assert_eq!(
            answers,
            [
                "DENY readonly",
                "ALLOW a1t0",
                "DENY readonly",
                "ALLOW a2t0",
                "ALLOW a0t1"
            ]
        );
    }

    #[test]
    fn an_approved_edit_counts_from_its_approval() {
        // A paused edit, a test, the approval, the test's result: the test
        // ran before the edit was admitted, so deploy is denied.
        let mut p = release_policy("edit");
        p.grants[0].approval = true;
        let answers = run(
            &p,
            &[
                call("e1", 1, "edit", json!({})),
                call("t1", 2, "test", json!({})),
                json!({"kind": "approve", "call": "e1"}),
                result("t1", "succeeded"),
                call("d1", 3, "deploy", json!({})),
                call("t2", 4, "test", json!({})),
                result("t2", "succeeded"),
                call("d2", 5, "deploy", json!({})),
            ],
        );
        assert_eq!(
            answers,
            [
                "PAUSE g0", "ALLOW g1", "ALLOW g0", "applied", "DENY o0", "ALLOW g1", "applied",
                "ALLOW g2"
            ]
        );
    }

    #[test]
    fn a_call_without_arguments_sends_the_whole_context() {
        let mut p = Policy::empty("p");
        p.levels = vec!["public".into(), "secret".into()];
        p.sinks = vec!["net".into()];
        p.tools = vec![
            tool("read", &[]),
            tool("ping", &[]),
            tool("send", &[("body", false)]),
            tool("notify", &[("cc", true)]),
            tool("mail", &[("body", false), ("cc", true)]),
        ];
        p.tools[0].output = Label::new(1, crate::label::CategorySet::EMPTY, true);
        for t in [1, 2, 3, 4] {
            p.tools[t].sinks = vec![SinkUse {
                sink: 0,
                params: None,
            }];
        }
        grant_all(&mut p);
        p.flow_rules = vec![crate::policy::FlowRule {
            name: "no-secrets-out".into(),
            sink: 0,
            effect: crate::policy::FlowEffect::Deny(LabelPattern {
                min_sensitivity: Some(1),
                ..LabelPattern::ANY
            }),
            when: NamedCond::TRUE,
        }];
        let answers = run(
            &p,
            &[
                call("p0", 1, "ping", json!({})),
                call("r", 2, "read", json!({})),
                result("r", "succeeded"),
                call("p1", 3, "ping", json!({})),
                call("s1", 4, "send", json!({"body": "x"})),
                json!({"kind": "call", "id": "s2", "time": 5, "tool": "send", "args": {"body": "x"}, "lineage": {"body": ["p0"]}}),
                // Only an absent optional argument: no data, so the context.
                call("n1", 6, "notify", json!({})),
                // A null argument with lineage carries its sources' label.
                json!({"kind": "call", "id": "n2", "time": 6, "tool": "notify", "args": {"cc": null}, "lineage": {"cc": ["p0"]}}),
                call("n3", 6, "notify", json!({"cc": "x"})),
                // An absent optional argument next to one with data adds nothing.
                json!({"kind": "call", "id": "m1", "time": 6, "tool": "mail", "args": {"body": "x"}, "lineage": {"body": ["p0"]}}),
                json!({"kind": "call", "id": "m2", "time": 6, "tool": "mail", "args": {"body": "x", "cc": null}, "lineage": {"body": ["p0"]}}),
            ],
        );
        assert_eq!(
            answers,
            [
                "ALLOW g1",
                "ALLOW g0",
                "applied",
                "DENY no-secrets-out",
                "DENY no-secrets-out",
                "ALLOW g2",
                "DENY no-secrets-out",
                "ALLOW g3",
                "DENY no-secrets-out",
                "ALLOW g4",
                "ALLOW g4",
            ]
        );
    }

    #[test]
    fn provenance_by_value_labels_an_argument_by_where_its_value_occurs() {
        let mut p = Policy::empty("p");
        p.provenance_by_value = true;
        p.levels = vec!["public".into(), "secret".into()];
        p.sinks = vec!["net".into()];
        p.tools = vec![
            tool("read", &[]),
            tool("web", &[]),
            tool("pub", &[]),
            tool("send", &[("to", false)]),
        ];
        p.tools[0].output = Label::new(1, crate::label::CategorySet::EMPTY, true);
        p.tools[1].output = Label::new(0, crate::label::CategorySet::EMPTY, false);
        p.tools[3].sinks = vec![SinkUse {
            sink: 0,
            params: None,
        }];
        grant_all(&mut p);
        let deny = |name: &str, pattern: LabelPattern| crate::policy::FlowRule {
            name: name.into(),
            sink: 0,
            effect: crate::policy::FlowEffect::Deny(pattern),
            when: NamedCond::TRUE,
        };
        p.flow_rules = vec![
            deny(
                "untrusted-out",
                LabelPattern {
                    untrusted: true,
                    ..LabelPattern::ANY
                },
            ),
            deny(
                "secret-out",
                LabelPattern {
                    min_sensitivity: Some(1),
                    ..LabelPattern::ANY
                },
            ),
        ];
        let out = |id: &str, output: serde_json::Value| json!({"kind": "result", "call": id, "status": "succeeded", "output": output});
        let send = |id: &str, to: &str| call(id, 2, "send", json!({ "to": to }));
        let answers = run(
            &p,
            &[
                json!({"kind": "task", "id": "task", "text": "mail bob@corp.com and Bob Smith"}),
                // Read before anything untrusted: a call's output carries
                // what its input read.
                call("p", 1, "pub", json!({})),
                out("p", json!(["frank@corp.com"])),
                call("r", 1, "read", json!({})),
                out("r", json!({"addr": "carol@corp.com"})),
                call("w", 1, "web", json!({})),
                out("w", json!("write to dave@corp.com")),
                send("s1", "Bob@corp.com"),
                send("s2", "carol@corp.com"),
                send("s3", "dave@corp.com"),
                send("s4", "erin@corp.com"),
                send("s5", "frank@corp.com"),
                send("s6", "Bob Smith"),
                send("s7", "Alice Jones"),
            ],
        );
        assert_eq!(
            answers,
            [
                "applied",
                "ALLOW g2",
                "applied",
                "ALLOW g0",
                "applied",
                "ALLOW g1",
                "applied",
                "ALLOW g3",
                "DENY secret-out",
                "DENY untrusted-out",
                "DENY untrusted-out",
                "ALLOW g3",
                "ALLOW g3",
                "DENY untrusted-out",
            ]
        );
    }
}
