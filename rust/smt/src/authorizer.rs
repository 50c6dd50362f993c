//! The SMT authorizer (DESIGN §3): one Z3 solver per session, the session
//! graph's label definitions asserted once, and each call decided in a
//! `push`/`pop` scope by the shared step encoding ([`crate::step`]).
//!
//! * **Pass 1** asks Z3 for a model in which the call is not denied (the
//!   required capabilities — one grant per agent of the delegation chain —
//!   hard). SAT: the verdict (ALLOW or PAUSE) and the granted capabilities
//!   `A[v,g]` are read off the model.
//! * **Pass 2** (pass 1 UNSAT): a model of the denial, from which the
//!   deciding rule and the counterexample are read: for a flow rule, the
//!   sink, the label atoms the rule needs and, per atom, the tainted path
//!   from the node that adds it to the call; for a history rule, the
//!   admitted calls that make it up.
//!
//! What is not encoded is shared with the native engine's semantics and
//! computed concretely: stage 1 (well-formedness, scopes, task scope),
//! condition values on concrete arguments, where an argument's value
//! occurs (provenance by value: the reference's
//! [`Session::value_provenance`] gives the sources, which become edges of
//! the graph), and the bookkeeping of the session (which calls were
//! admitted, results, the ledger's remaining units, the tenant pool's
//! counts), kept by the reference semantics (`agenra_core::spec::reference`).

use crate::graph::{EdgeTrust, GraphEdge, GraphNode, NodeKind, SessionGraph};
use crate::step::{self, Atom, CallInputs, HistoryState, StepEncoding, SymLabel};
use agenra_core::decision::Rule;
use agenra_core::event::{self, Call, Event, Resolve};
use agenra_core::label::Label;
use agenra_core::policy::{AgentId, FlowEffect, GrantId, PathKind, Policy, Quota};
use agenra_core::pool::TenantPool;
use agenra_core::spec::reference::{Lineage, Session, ValueSource};
use agenra_core::spec::Request;
use agenra_core::value::Value;
use agenra_core::Verdict;
use serde::Serialize;
use std::collections::BTreeMap;
use z3::ast::{Ast, Bool, Int};
use z3::{Model, SatResult, Solver};

/// Why the SMT engine gives no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmtError {
    /// The policy is not internally consistent (an index out of range, a
    /// name declared twice, ...): `agenra_core::validate`'s finding, as
    /// the native monitor refuses it.
    #[error("invalid policy: {0}")]
    Policy(String),
    /// The event cannot be applied (unknown call, wrong state, reused id,
    /// time going back): the native monitor's `StepError`.
    #[error("invalid event: {0}")]
    Invalid(String),
    /// Z3 answered `unknown` or gave no model.
    #[error("z3: {0}")]
    Solver(String),
}

/// One step of a tainted path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathStep {
    /// The node's name (call or task id, or a context version).
    pub node: String,
    /// What the node is.
    pub kind: NodeKind,
    /// Why the node carries the label: what adds it (first step) or the
    /// edge it came through.
    pub evidence: String,
}

/// A label atom and the path that carries it to the sink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaintedPath {
    /// The atom (`untrusted`, `category pii`, `sensitivity>=secret`).
    pub label: String,
    /// Source first, the decided call last.
    pub path: Vec<PathStep>,
}

/// Why a call is denied, mapped back to the graph and its evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counterexample {
    /// The call's node.
    pub node: String,
    /// The sink (`sink NAME`) or agent (`agent NAME`) the flow reaches, for
    /// flow rules.
    pub sink: Option<String>,
    /// The label that reaches the sink, as the model gives it.
    pub label: Option<String>,
    /// Per atom the rule's pattern needs: its path.
    pub paths: Vec<TaintedPath>,
    /// For history rules: the admitted calls that make up the violation
    /// (the matched steps of a path rule, the counted calls of a count,
    /// the last `since` call of an obligation), then the call.
    pub history: Vec<String>,
}

/// What the SMT engine decides for a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SmtDecision {
    /// ALLOW, DENY or PAUSE.
    pub verdict: Verdict,
    /// The rule or grant that decided.
    #[serde(skip)]
    pub rule: Rule,
    /// Its name in the policy.
    pub rule_name: String,
    /// The granted capabilities `A[v,g]`: the grants whose units are taken
    /// (the caller's first), by index.
    pub grants: Vec<GrantId>,
    /// Their names.
    pub granted: Vec<String>,
    /// For a DENY by a flow or history rule: the counterexample.
    pub counterexample: Option<Counterexample>,
    /// Inferred lineage into the call: recorded for audit, never used
    /// (`source -> param`).
    pub inferred: Vec<String>,
    /// Whether Z3 was asked (false for a stage-1 denial).
    pub solved: bool,
    /// For an approval denied at the re-check: the reserved units it
    /// returns (by index; the native monitor's `refunded`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refunded: Vec<GrantId>,
}

/// An admitted call, with the history state right after its admission.
#[derive(Clone, Debug)]
struct Admitted {
    node: usize,
    /// Per path rule: the call matched its `reset` step.
    resets: Vec<Bool>,
    after: HistoryState,
    /// Per path rule that counts `within` a window: the call matched its
    /// step (false for the other rules).
    counted: Vec<Bool>,
    /// The time of the event that admitted it.
    time: u64,
}

/// A session of the SMT authorizer.
///
/// Feed it the session's events in order with [`SmtSession::apply`];
/// [`SmtSession::decide`] decides a call and
/// [`SmtSession::decide_approval`] an approval without recording them.
pub struct SmtSession {
    policy: std::sync::Arc<Policy>,
    reference: Session,
    graph: SessionGraph,
    by_id: BTreeMap<String, usize>,
    /// Per context owner (`None`: the shared context): its current
    /// version's node and how many reads it covers.
    contexts: BTreeMap<Option<AgentId>, (usize, usize)>,
    /// Outputs read so far: (node, reading agent). The `i`-th is the
    /// reference's `outputs[i]` (both grow on `succeeded` and `unknown`).
    reads: Vec<(usize, AgentId)>,
    /// Per call node of a tool with declared output fields, the node of
    /// each field (`Policy::output_fields_of` order).
    field_nodes: BTreeMap<usize, Vec<usize>>,
    /// Task nodes, in order: the `i`-th is the reference's `tasks[i]`.
    tasks: Vec<usize>,
    /// The tenant's pool (`None`: a private one).
    pool: Option<TenantPool>,
    history: HistoryState,
    admitted: Vec<Admitted>,
    solver: Solver,
    fresh: u64,
    /// The time of the event being decided (counts `within` a window look
    /// back from it).
    now: u64,
}

impl SmtSession {
    /// A new session of `policy` with a private pool: its shared grants
    /// (`quota N per tenant`) behave per session, as a native session
    /// given no pool. `Policy` if the policy is not internally consistent
    /// (as the native monitor refuses it).
    pub fn new(policy: &Policy) -> Result<SmtSession, SmtError> {
        SmtSession::new_in(policy, None)
    }

    /// A new session of `policy` drawing its shared grants (`quota N per
    /// tenant`) on the tenant's `pool`, as a native session given
    /// `SessionOptions::pool`: decisions read what the pool has left when
    /// they are made (other sessions of the tenant may have taken units),
    /// and applying an event takes and gives back units of the pool, the
    /// check and the change one atomic step under the pool's lock. Give
    /// the SMT sessions of a tenant one pool (a native session and an SMT
    /// session deciding the same events need pools of their own, with the
    /// same counts).
    ///
    /// [`SmtSession::decide`] reads the pool without taking from it; the
    /// units are taken when the call is [applied](SmtSession::apply). A
    /// caller whose sessions run on several threads at once must apply
    /// a decided call before another session of the tenant takes units,
    /// or the applied answer may differ from the one decided.
    pub fn with_pool(policy: &Policy, pool: TenantPool) -> Result<SmtSession, SmtError> {
        SmtSession::new_in(policy, Some(pool))
    }

    fn new_in(policy: &Policy, pool: Option<TenantPool>) -> Result<SmtSession, SmtError> {
        agenra_core::validate::validate(policy).map_err(|e| SmtError::Policy(e.to_string()))?;
        let mut reference = Session::new(policy);
        if pool.is_some() {
            reference.pool = Some(Default::default());
        }
        Ok(SmtSession {
            policy: std::sync::Arc::new(policy.clone()),
            reference,
            graph: SessionGraph::default(),
            by_id: BTreeMap::new(),
            contexts: BTreeMap::new(),
            reads: Vec::new(),
            field_nodes: BTreeMap::new(),
            tasks: Vec::new(),
            pool,
            history: HistoryState::initial(policy),
            admitted: Vec::new(),
            // Booleans and linear integer arithmetic: the QF_LIA solver
            // starts faster than the default one on these small queries.
            solver: Solver::new_for_logic("QF_LIA").unwrap_or_default(),
            fresh: 0,
            now: 0,
        })
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The tenant pool given with [`SmtSession::with_pool`], if any.
    pub fn tenant_pool(&self) -> Option<&TenantPool> {
        self.pool.as_ref()
    }

    /// The graph built so far.
    pub fn graph(&self) -> &SessionGraph {
        &self.graph
    }

    /// The label of every node of the graph, as Z3 computes it.
    pub fn labels(&self) -> Result<Vec<Option<Label>>, SmtError> {
        match self.solver.check() {
            SatResult::Sat => Ok(self.graph.eval_labels(&self.model()?)),
            SatResult::Unsat => Err(SmtError::Solver(
                "the graph's definitions are inconsistent".into(),
            )),
            SatResult::Unknown => Err(self.unknown()),
        }
    }

    /// Applies an event of the session (the native answer is the
    /// reference's; the graph and the history state grow with it).
    pub fn apply(&mut self, e: &Event) -> Result<(), SmtError> {
        let facts_before: Vec<usize> = self.reference.facts.iter().map(Vec::len).collect();
        let reads_before = self.reference.read.len();
        let answer = self
            .reference_step(e)
            .map_err(|_| SmtError::Invalid(describe(e)))?;
        match e {
            Event::Task(t) => {
                let n = self.push_node(NodeKind::Task, t.id.clone(), None, 0, Label::BOTTOM, None);
                self.by_id.insert(t.id.clone(), n);
                self.tasks.push(n);
                self.define(n);
            }
            Event::Call(c) => {
                let record = self.reference.calls.get(&c.id).cloned();
                let req = record.as_ref().and_then(|r| r.req.clone());
                let n = match (&req, &record) {
                    (Some(req), Some(record)) => {
                        self.call_node(&c.id, &c.inferred, req, &record.lineage)
                    }
                    _ => {
                        let n = self.push_node(
                            NodeKind::Call,
                            c.id.clone(),
                            None,
                            0,
                            Label::BOTTOM,
                            None,
                        );
                        self.define(n);
                        n
                    }
                };
                self.graph.nodes[n].status = match answer.verdict {
                    Some(Verdict::Allow) => "admitted",
                    Some(Verdict::Pause) => "paused",
                    _ => "denied",
                }
                .into();
                if answer.verdict == Some(Verdict::Allow) {
                    if let Some(req) = req {
                        self.admit(n, &req);
                    }
                }
            }
            Event::Approve(a) => {
                let n = self.by_id.get(&a.call).copied();
                let req = self
                    .reference
                    .calls
                    .get(&a.call)
                    .and_then(|r| r.req.clone());
                if let (Some(n), Some(req)) = (n, req) {
                    // The re-check read the context as it is now: keep that
                    // version in the graph, so that a counterexample of the
                    // approval names a node the graph has (and draws).
                    let lineage = self
                        .reference
                        .calls
                        .get(&a.call)
                        .map(|r| r.lineage.clone())
                        .unwrap_or_default();
                    if answer.verdict.is_some() && self.arg_sources(&req, &lineage).1 {
                        self.context_node(req.agent);
                    }
                    match answer.verdict {
                        Some(Verdict::Allow) => {
                            self.graph.nodes[n].status = "admitted".into();
                            self.admit(n, &req);
                        }
                        _ => self.graph.nodes[n].status = "denied".into(),
                    }
                }
            }
            Event::Reject(r) => {
                if let Some(&n) = self.by_id.get(&r.call) {
                    self.graph.nodes[n].status = "rejected".into();
                }
            }
            Event::Result(r) => {
                if let Some(&n) = self.by_id.get(&r.call) {
                    self.graph.nodes[n].status = match r.status {
                        event::Outcome::Succeeded => "succeeded",
                        event::Outcome::Failed => "failed",
                        event::Outcome::Unknown => "unknown",
                    }
                    .into();
                    if self.reference.read.len() > reads_before {
                        let agent = self.reference.read[reads_before].0;
                        self.reads.push((n, agent));
                    }
                }
                for (f, seqs) in self.reference.facts.iter().enumerate() {
                    for &at in &seqs[facts_before[f]..] {
                        self.history = self.history.establish(f, &Int::from_u64(at));
                    }
                }
                self.history = self.pin(&self.history.clone());
            }
        }
        Ok(())
    }

    /// Applies `e` to the reference bookkeeping; with a tenant pool, under
    /// the pool's lock, reading its counts before and writing them back
    /// after (the native monitor's `with_pool`).
    fn reference_step(
        &mut self,
        e: &Event,
    ) -> Result<agenra_core::spec::reference::Answer, agenra_core::spec::reference::Invalid> {
        let policy = std::sync::Arc::clone(&self.policy);
        // Policies without shared grants or tenant budgets never lock the pool.
        let Some(pool) = self.pool.clone().filter(|_| {
            !policy.shared_grants.is_empty()
                || policy.has_tenant_budgets()
                || policy.has_tenant_renewals()
        }) else {
            return self.reference.step(&policy, e);
        };
        pool.with_counts(|counts| {
            self.reference.pool = Some(counts.clone());
            let out = self.reference.step(&policy, e);
            if let Some(after) = &self.reference.pool {
                if *after != *counts {
                    counts.clone_from(after);
                }
            }
            out
        })
    }

    /// Decides `call` as the next event of the session, without recording
    /// it: stage 1 concretely, then the two Z3 passes in a `push`/`pop`
    /// scope. Shared grants are judged on what the tenant pool has left
    /// now.
    pub fn decide(&mut self, call: &Call) -> Result<SmtDecision, SmtError> {
        if self.reference.calls.contains_key(&call.id) || call.time < self.reference.time {
            return Err(SmtError::Invalid(format!("call {}", call.id)));
        }
        let (req, lineage) = match self.reference.well_formed(&self.policy, call) {
            Ok(x) => x,
            Err(rule) => {
                return Ok(SmtDecision {
                    verdict: Verdict::Deny,
                    rule_name: rule.name(&self.policy),
                    rule,
                    grants: vec![],
                    granted: vec![],
                    counterexample: None,
                    inferred: vec![],
                    solved: false,
                    refunded: vec![],
                })
            }
        };
        self.now = call.time;
        let (nodes, edges) = (self.graph.nodes.len(), self.graph.edges.len());
        let contexts = self.contexts.clone();
        self.solver.push();
        let out = self.decide_in_scope(call, &req, &lineage);
        self.solver.pop(1);
        self.graph.nodes.truncate(nodes);
        self.graph.edges.truncate(edges);
        self.contexts = contexts;
        self.by_id.remove(&call.id);
        out
    }

    /// Decides the approval `a` of a paused call as the next event of the
    /// session, without recording it (DESIGN §2 step 5: a just-in-time
    /// re-authorization). The paused call is re-checked against the
    /// session *now*: its flows (step 3) on a fresh node of the call whose
    /// arguments read the context as it is now, and its call rules, path
    /// rules, counts and obligations (step 4) on the history now, with the
    /// shared step encoding; `pause` effects count as answered and the
    /// ledger is not asked again (the units were reserved at the pause,
    /// [`StepEncoding::recheck_deny`]). UNSAT of "no `deny` fires": DENY by
    /// the first firing rule with its counterexample (the reserved units
    /// return when the event is applied); SAT: ALLOW with the reserved
    /// units. `Invalid` if the call is not paused or time goes back.
    pub fn decide_approval(&mut self, a: &Resolve) -> Result<SmtDecision, SmtError> {
        let invalid = || SmtError::Invalid(format!("approve {}", a.call));
        if a.time.is_some_and(|t| t < self.reference.time) {
            return Err(invalid());
        }
        let used = self
            .reference
            .ledger
            .paused
            .get(&a.call)
            .cloned()
            .ok_or_else(invalid)?;
        let record = self.reference.calls.get(&a.call).ok_or_else(invalid)?;
        let req = record.req.clone().ok_or_else(invalid)?;
        let lineage = record.lineage.clone();
        let paused = self.by_id.get(&a.call).copied().ok_or_else(invalid)?;
        self.now = a.time.unwrap_or(self.reference.time);
        let (nodes, edges) = (self.graph.nodes.len(), self.graph.edges.len());
        let contexts = self.contexts.clone();
        self.solver.push();
        let out = self.approval_in_scope(&a.call, &req, &lineage, paused, used);
        self.solver.pop(1);
        self.graph.nodes.truncate(nodes);
        self.graph.edges.truncate(edges);
        self.contexts = contexts;
        self.by_id.insert(a.call.clone(), paused);
        out
    }

    fn approval_in_scope(
        &mut self,
        id: &str,
        req: &Request,
        lineage: &Lineage,
        paused: usize,
        used: Vec<GrantId>,
    ) -> Result<SmtDecision, SmtError> {
        let policy = std::sync::Arc::clone(&self.policy);
        // The call again, its arguments read now; its output label (which
        // path steps' `reads(P)` test) stays the one it got at the pause.
        let n = self.call_node(id, &BTreeMap::new(), req, lineage);
        let output = self.graph.nodes[paused].label.clone();
        let (inputs, state) = self.step_inputs(n, req, output, self.now);
        let enc = step::encode_step(&policy, &state, &inputs);
        let deny = enc.recheck_deny();
        // Pass 1: does no `deny` rule fire now?
        match self.solver.check_assumptions(&[deny.not()]) {
            SatResult::Sat => {
                let rule = Rule::Grant(used.first().copied().unwrap_or_default());
                return Ok(SmtDecision {
                    verdict: Verdict::Allow,
                    rule_name: rule.name(&policy),
                    rule,
                    granted: used
                        .iter()
                        .map(|&g| policy.grants[g].name.clone())
                        .collect(),
                    grants: used,
                    counterexample: None,
                    inferred: vec![],
                    solved: true,
                    refunded: vec![],
                });
            }
            SatResult::Unsat => {}
            SatResult::Unknown => return Err(self.unknown()),
        }
        // Pass 2: the denial's model and its first firing `deny` rule.
        let model = match self.solver.check_assumptions(std::slice::from_ref(&deny)) {
            SatResult::Sat => self.model()?,
            SatResult::Unsat => {
                return Err(SmtError::Solver(
                    "neither approved nor denied: the encoding is inconsistent".into(),
                ))
            }
            SatResult::Unknown => return Err(self.unknown()),
        };
        let rule = match step::read_decision(&policy, &enc, &model) {
            Some((Verdict::Deny, rule, _)) if rule != Rule::NoGrant => rule,
            _ => {
                return Err(SmtError::Solver(
                    "the model of the re-check names no deny rule".into(),
                ))
            }
        };
        let counterexample = self.counterexample(&policy, &enc, &inputs, &model, n, req, rule);
        Ok(SmtDecision {
            verdict: Verdict::Deny,
            rule_name: rule.name(&policy),
            rule,
            grants: vec![],
            granted: vec![],
            counterexample,
            inferred: vec![],
            solved: true,
            refunded: used,
        })
    }

    fn decide_in_scope(
        &mut self,
        call: &Call,
        req: &Request,
        lineage: &Lineage,
    ) -> Result<SmtDecision, SmtError> {
        let policy = std::sync::Arc::clone(&self.policy);
        let n = self.call_node(&call.id, &call.inferred, req, lineage);
        let output = self.graph.nodes[n].label.clone();
        let (inputs, state) = self.step_inputs(n, req, output, call.time);
        let enc = step::encode_step(&policy, &state, &inputs);
        let inferred = call
            .inferred
            .iter()
            .flat_map(|(p, ids)| ids.iter().map(move |id| format!("{id} -> {p}")))
            .collect();
        // Pass 1: can the call be admitted (required capabilities hard)?
        let model = match self.solver.check_assumptions(&[enc.deny.not()]) {
            SatResult::Sat => Some(self.model()?),
            SatResult::Unsat => None,
            SatResult::Unknown => return Err(self.unknown()),
        };
        let (model, admitted) = match model {
            Some(m) => (m, true),
            None => match self
                .solver
                .check_assumptions(std::slice::from_ref(&enc.deny))
            {
                // Pass 2: the denial's model.
                SatResult::Sat => (self.model()?, false),
                SatResult::Unsat => {
                    return Err(SmtError::Solver(
                        "neither admitted nor denied: the encoding is inconsistent".into(),
                    ))
                }
                SatResult::Unknown => return Err(self.unknown()),
            },
        };
        let (verdict, rule, grants) = step::read_decision(&policy, &enc, &model)
            .ok_or_else(|| SmtError::Solver("the model leaves the decision open".into()))?;
        debug_assert_eq!(admitted, verdict != Verdict::Deny);
        let counterexample = match verdict {
            Verdict::Deny => self.counterexample(&policy, &enc, &inputs, &model, n, req, rule),
            _ => None,
        };
        Ok(SmtDecision {
            verdict,
            rule_name: rule.name(&policy),
            rule,
            granted: grants
                .iter()
                .map(|&g| policy.grants[g].name.clone())
                .collect(),
            grants,
            counterexample,
            inferred,
            solved: true,
            refunded: vec![],
        })
    }

    /// The step's inputs for the call at node `n` (its sinks' and the
    /// calling agent's labels read off the graph, its conditions evaluated
    /// on the discovered sets now), with output label `output`, and the
    /// history state now (the ledger's remaining units as constants; a
    /// count `within` a window counts the calls admitted less than its
    /// length before `now`).
    fn step_inputs(
        &self,
        n: usize,
        req: &Request,
        output: SymLabel,
        now: u64,
    ) -> (CallInputs, HistoryState) {
        let policy = &*self.policy;
        let tool = &policy.tools[req.tool];
        let own = SymLabel::constant(policy, &resource_label(policy, req));
        let input = self.graph.input(policy, n);
        let sinks = tool
            .sinks
            .iter()
            .map(|u| {
                let bound = match &u.params {
                    None => input.clone(),
                    Some(ps) => {
                        let args: Vec<SymLabel> = ps
                            .iter()
                            .map(|&p| self.graph.arg_label(policy, n, p))
                            .collect();
                        SymLabel::join_all(policy, &args)
                    }
                };
                bound.join(&own)
            })
            .collect();
        let inputs = CallInputs::concrete_with(
            policy,
            req,
            &self.reference.ledger.sets,
            &self.reference.sources(),
            sinks,
            input.join(&own),
            output,
            self.reference.seq + 1,
        );
        let mut inputs = inputs;
        let mut state = self.history.clone();
        let ledger = &self.reference.ledger.ledger;
        // A shared grant (`quota N per tenant`) has what the tenant's pool
        // has left now (`quota − taken`); a private pool's taken units are
        // the session's own holdings.
        let pool = (!policy.shared_grants.is_empty()).then(|| match &self.pool {
            Some(p) => p.snapshot(),
            None => agenra_core::spec::private_pool(policy, ledger),
        });
        for (g, q) in ledger.remaining.iter().enumerate() {
            let left = match (&pool, policy.grants.get(g), q) {
                (Some(pool), Some(grant), _) if policy.is_shared(g) => match grant.quota {
                    Quota::Limited(quota) => Some(pool.remaining(&grant.name, quota)),
                    Quota::Unlimited => None,
                },
                (_, _, Quota::Limited(left)) => Some(*left),
                _ => None,
            };
            if let (Some(left), Some(slot)) = (left, state.remaining.get_mut(g)) {
                *slot = Int::from_u64(left);
            }
        }
        inputs.pool_known = true;
        // An amount budget (`budget AMOUNT on PARAM`) is judged concretely:
        // the amount is the call's argument and what is left is known (the
        // tenant's pool now, for a tenant budget), so a grant whose budget
        // cannot pay for the call does not match it, and the encoding's
        // first-match goes on to the next grant, as the monitor's does.
        if !policy.budgets.is_empty() {
            let budget_pool = match &self.pool {
                Some(p) if policy.has_tenant_budgets() => p.snapshot(),
                _ => agenra_core::spec::private_pool_of(
                    policy,
                    &self.reference.ledger.ledger,
                    &self.reference.books,
                ),
            };
            for b in &policy.budgets {
                let pays = agenra_core::spec::budget_check(
                    policy,
                    &self.reference.books.spent,
                    &budget_pool,
                    b.grant,
                    req,
                )
                .is_ok();
                if let Some(m) = inputs.grant_match.get_mut(b.grant) {
                    *m = Bool::and(&[m.clone(), Bool::from_bool(pays)]);
                }
            }
        }
        // A renewing quota or budget (`quota N per 10m`, `budget B on
        // PARAM per day`) is judged concretely too: the call's window and
        // what it holds are known (the tenant's pool now, for a tenant
        // limit), so a grant whose window cannot serve the call does not
        // match it.
        if !policy.renewals.is_empty() {
            let window_pool = match &self.pool {
                Some(p) if policy.has_tenant_renewals() => p.snapshot(),
                _ => agenra_core::spec::private_pool_of(
                    policy,
                    &self.reference.ledger.ledger,
                    &self.reference.books,
                ),
            };
            let windows = &self.reference.books.windows;
            for g in 0..policy.grants.len() {
                if !policy.renews(g) {
                    continue;
                }
                let serves = agenra_core::spec::window_check(policy, g, req, |i| {
                    agenra_core::spec::window_slot(policy, windows, &window_pool, i)
                })
                .is_ok();
                if let Some(m) = inputs.grant_match.get_mut(g) {
                    *m = Bool::and(&[m.clone(), Bool::from_bool(serves)]);
                }
            }
        }
        // A count `within` a window (`deny count c: at most 2 STEP within
        // 1h`): only the calls admitted less than the window before `now`
        // count, since the last reset among them (a reset before the window
        // zeroes calls that no longer count anyway).
        for w in &policy.count_windows {
            let zero = Int::from_i64(0);
            let mut count = zero.clone();
            for a in self
                .admitted
                .iter()
                .filter(|a| now.saturating_sub(a.time) < w.secs)
            {
                if let Some(r) = a.resets.get(w.rule) {
                    count = r.ite(&zero, &count);
                }
                if let Some(m) = a.counted.get(w.rule) {
                    count = m.ite(&(&count + 1i64), &count);
                }
            }
            if let Some(slot) = state.path.get_mut(w.rule) {
                *slot = count;
            }
        }
        (inputs, state)
    }

    fn model(&self) -> Result<Model, SmtError> {
        self.solver
            .get_model()
            .ok_or_else(|| SmtError::Solver("no model".into()))
    }

    fn unknown(&self) -> SmtError {
        SmtError::Solver(
            self.solver
                .get_reason_unknown()
                .unwrap_or_else(|| "unknown".into()),
        )
    }

    /// The counterexample of a DENY by rule `rule`.
    #[allow(clippy::too_many_arguments)]
    fn counterexample(
        &self,
        policy: &Policy,
        enc: &StepEncoding,
        inputs: &CallInputs,
        model: &Model,
        n: usize,
        req: &Request,
        rule: Rule,
    ) -> Option<Counterexample> {
        let node = self.graph.nodes[n].name.clone();
        match rule {
            Rule::Flow(_) | Rule::Receive(_) => {
                let firing = enc.flows.iter().find(|f| f.rule == rule)?;
                let tool = &policy.tools[req.tool];
                let (sink, params, pattern) = match (rule, firing.sink_use) {
                    (Rule::Flow(i), Some(u)) => (
                        format!("sink {}", policy.sinks.get(tool.sinks[u].sink)?),
                        tool.sinks[u].params.clone(),
                        policy.flow_rules[i].effect,
                    ),
                    (Rule::Receive(i), _) => (
                        format!("agent {}", policy.agents.get(req.agent)?.name),
                        None,
                        policy.receive_rules[i].effect,
                    ),
                    _ => return None,
                };
                let flow = match firing.sink_use {
                    Some(u) => inputs.sinks.get(u)?,
                    None => &inputs.received,
                };
                let has = |a: Atom| {
                    model
                        .eval(&flow.atom(a), true)
                        .and_then(|b| b.as_bool())
                        .unwrap_or(false)
                };
                let label = flow.eval(model).map(|l| render_label(policy, &l));
                let FlowEffect::Deny(p) = pattern else {
                    return None;
                };
                let own = resource_label(policy, req);
                let mut atoms = Vec::new();
                if let Some(m) = p.min_sensitivity.filter(|&m| m > 0) {
                    atoms.push(Atom::Sensitivity(m));
                }
                if let Some(c) = p.any_category.indexes().find(|&c| has(Atom::Category(c))) {
                    atoms.push(Atom::Category(c));
                }
                if p.untrusted {
                    atoms.push(Atom::Untrusted);
                }
                let mut paths = Vec::new();
                for atom in atoms {
                    let from_resource =
                        SymLabel::constant(policy, &own).atom(atom).as_bool() == Some(true);
                    let path = if from_resource {
                        vec![PathStep {
                            node: node.clone(),
                            kind: NodeKind::Call,
                            evidence: format!(
                                "its resource {:?} is labeled {}",
                                agenra_core::spec::resource_of(policy, req.tool, &req.args)
                                    .unwrap_or(""),
                                atom.name(policy)
                            ),
                        }]
                    } else {
                        let nodes =
                            self.graph
                                .taint_path(policy, model, n, params.as_deref(), atom)?;
                        self.explain(policy, &nodes, atom)
                    };
                    paths.push(TaintedPath {
                        label: atom.name(policy),
                        path,
                    });
                }
                Some(Counterexample {
                    node,
                    sink: Some(sink),
                    label,
                    paths,
                    history: vec![],
                })
            }
            Rule::Path(i) => {
                let mut calls: Vec<String> = Vec::new();
                let eval = |x: &Int| model.eval(x, true).and_then(|v| v.as_i64());
                let mut prev = eval(&HistoryState::initial(policy).path[i])?;
                let window = policy.count_window(i);
                for a in &self.admitted {
                    if let Some(w) = window {
                        // A count within a window: the calls inside it.
                        let counted = self.now.saturating_sub(a.time) < w
                            && model
                                .eval(&a.counted[i], true)
                                .and_then(|b| b.as_bool())
                                .unwrap_or(false);
                        let reset = model
                            .eval(&a.resets[i], true)
                            .and_then(|b| b.as_bool())
                            .unwrap_or(false);
                        if reset {
                            calls.clear();
                        }
                        if counted {
                            calls.push(self.graph.nodes[a.node].name.clone());
                        }
                        continue;
                    }
                    let now = eval(&a.after.path[i])?;
                    let reset = model
                        .eval(&a.resets[i], true)
                        .and_then(|b| b.as_bool())
                        .unwrap_or(false);
                    if reset {
                        // The history starts again at this call.
                        calls.clear();
                        prev = 0;
                    }
                    if now > prev {
                        calls.push(self.graph.nodes[a.node].name.clone());
                    }
                    prev = now;
                }
                calls.push(node.clone());
                Some(Counterexample {
                    node,
                    sink: None,
                    label: None,
                    paths: vec![],
                    history: calls,
                })
            }
            Rule::Obligation(o) => {
                let eval = |x: &Int| model.eval(x, true).and_then(|v| v.as_i64());
                let mut last = None;
                let mut prev = -1;
                for a in &self.admitted {
                    let now = eval(&a.after.since[o])?;
                    if now != prev {
                        last = Some(self.graph.nodes[a.node].name.clone());
                    }
                    prev = now;
                }
                Some(Counterexample {
                    node: node.clone(),
                    sink: None,
                    label: None,
                    paths: vec![],
                    history: last.into_iter().chain([node]).collect(),
                })
            }
            Rule::Call(_) => Some(Counterexample {
                node: node.clone(),
                sink: None,
                label: None,
                paths: vec![],
                history: vec![node],
            }),
            _ => None,
        }
    }

    /// A path of node indexes (source first) as steps with their evidence.
    fn explain(&self, policy: &Policy, nodes: &[usize], atom: Atom) -> Vec<PathStep> {
        let mut out = Vec::new();
        for (k, &n) in nodes.iter().enumerate() {
            let node = &self.graph.nodes[n];
            let evidence = if k == 0 {
                match node.tool {
                    Some(t) => {
                        let tool = &policy.tools[t];
                        if SymLabel::constant(policy, &tool.output)
                            .atom(atom)
                            .as_bool()
                            == Some(true)
                        {
                            format!(
                                "source rule of tool {} adds {}",
                                tool.name,
                                atom.name(policy)
                            )
                        } else {
                            format!("its resource is labeled {}", atom.name(policy))
                        }
                    }
                    None => format!("adds {}", atom.name(policy)),
                }
            } else {
                let from = nodes[k - 1];
                let edge = self.graph.preds(n).find(|e| e.from == from).cloned();
                describe_edge(policy, &self.graph, edge.as_ref())
            };
            out.push(PathStep {
                node: node.name.clone(),
                kind: node.kind,
                evidence,
            });
        }
        out
    }

    // ---- building the graph ---------------------------------------------

    fn push_node(
        &mut self,
        kind: NodeKind,
        name: String,
        tool: Option<usize>,
        agent: AgentId,
        own: Label,
        sanitizer: Option<usize>,
    ) -> usize {
        self.fresh += 1;
        let label = SymLabel::fresh(&self.policy, &format!("H{}", self.fresh));
        self.graph.nodes.push(GraphNode {
            kind,
            name,
            tool,
            agent,
            own,
            sanitizer,
            label,
            status: String::new(),
        });
        self.graph.nodes.len() - 1
    }

    fn define(&mut self, n: usize) {
        let def = self.graph.definition(&self.policy, n);
        self.solver.assert(&def);
    }

    /// The context version `agent`'s arguments read now.
    fn context_node(&mut self, agent: AgentId) -> usize {
        let policy = &self.policy;
        let owner = policy
            .agent_chain(agent)
            .into_iter()
            .find(|&a| policy.agents[a].own_context);
        let now = self.reads.len();
        let prev = self.contexts.get(&owner).copied();
        if let Some((node, covered)) = prev {
            if covered == now {
                return node;
            }
        }
        let from = prev.map_or(0, |(_, c)| c);
        let name = match owner {
            None => format!("context@{now}"),
            Some(o) => format!("context:{}@{now}", policy.agents[o].name),
        };
        let merged: Vec<(usize, AgentId)> = self.reads[from..]
            .iter()
            .filter(|(_, reader)| owner.is_none_or(|o| policy.agent_chain(*reader).contains(&o)))
            .copied()
            .collect();
        let c = self.push_node(
            NodeKind::Context,
            name,
            None,
            owner.unwrap_or(0),
            Label::BOTTOM,
            None,
        );
        self.graph.nodes[c].status = "context".into();
        if let Some((p, _)) = prev {
            self.graph.edges.push(GraphEdge {
                from: p,
                to: c,
                param: None,
                trust: EdgeTrust::Observed,
            });
        }
        for (r, _) in merged {
            let trust = match self.graph.nodes[r].status.as_str() {
                "unknown" => EdgeTrust::Policy,
                _ => EdgeTrust::Observed,
            };
            self.graph.edges.push(GraphEdge {
                from: r,
                to: c,
                param: None,
                trust,
            });
        }
        self.define(c);
        self.contexts.insert(owner, (c, now));
        c
    }

    /// Appends the node of a well-formed call and its edges, and asserts
    /// its definition.
    fn call_node(
        &mut self,
        id: &str,
        inferred: &BTreeMap<String, Vec<String>>,
        req: &Request,
        lineage: &Lineage,
    ) -> usize {
        let policy = std::sync::Arc::clone(&self.policy);
        let tool = &policy.tools[req.tool];
        let own = tool.output.join(&resource_label(&policy, req));
        let sanitizer = tool.sanitizer.filter(|&s| s < policy.sanitizers.len());
        let (by_value, needs_context) = self.arg_sources(req, lineage);
        let carries = carries_data(req, lineage);
        // Every source is created before the node, so edges point back.
        let ctx = needs_context.then(|| self.context_node(req.agent));
        let n = self.push_node(
            NodeKind::Call,
            id.to_string(),
            Some(req.tool),
            req.agent,
            own,
            sanitizer,
        );
        let mut edges = Vec::new();
        if carries {
            for (i, l) in lineage.iter().enumerate() {
                match l {
                    Some(ids) => {
                        for id in ids {
                            if let Some(&from) = self.by_id.get(id) {
                                edges.push((from, Some(i), EdgeTrust::Observed));
                            }
                        }
                    }
                    None if req.args[i] == Value::Null => {}
                    None => match &by_value[i] {
                        Some(sources) => {
                            for &from in sources {
                                edges.push((from, Some(i), EdgeTrust::Value));
                            }
                        }
                        None => edges.push((ctx.unwrap_or(0), Some(i), EdgeTrust::Policy)),
                    },
                }
            }
        } else if let Some(c) = ctx {
            edges.push((c, None, EdgeTrust::Policy));
        }
        for (p, ids) in inferred {
            for from_id in ids {
                if let Some(&from) = self.by_id.get(from_id) {
                    edges.push((from, tool.param_index(p), EdgeTrust::Inferred));
                }
            }
        }
        for &(from, param, trust) in &edges {
            self.graph.edges.push(GraphEdge {
                from,
                to: n,
                param,
                trust,
            });
        }
        self.by_id.insert(id.to_string(), n);
        self.define(n);
        // Per-field output labels: one node per declared field, defined
        // as the call's node with the field's label in place of the
        // tool's (same inputs); values found under the field flow from it.
        let fields = policy.output_fields_of(req.tool);
        if !fields.is_empty() {
            let resource = resource_label(&policy, req);
            let mut nodes = Vec::with_capacity(fields.len());
            for f in fields {
                let m = self.push_node(
                    NodeKind::Call,
                    format!("{id}#{}", f.path.join(".")),
                    Some(req.tool),
                    req.agent,
                    f.label.join(&resource),
                    sanitizer,
                );
                self.graph.nodes[m].status = "field".into();
                for &(from, param, trust) in &edges {
                    self.graph.edges.push(GraphEdge {
                        from,
                        to: m,
                        param,
                        trust,
                    });
                }
                self.define(m);
                nodes.push(m);
            }
            self.field_nodes.insert(n, nodes);
        }
        n
    }

    /// Per argument, the nodes its value occurs in (provenance by value:
    /// an argument without lineage that has a value, when every scalar of
    /// it has a provenance; the reference's own function finds them), and
    /// whether the call reads the context (some argument without lineage
    /// has a value but no provenance, or the call passes no data at all).
    fn arg_sources(&self, req: &Request, lineage: &Lineage) -> (Vec<Option<Vec<usize>>>, bool) {
        let by_value: Vec<Option<Vec<usize>>> = (0..lineage.len())
            .map(|i| {
                let judged = self.policy.provenance_by_value
                    && lineage[i].is_none()
                    && req.args[i] != Value::Null
                    && agenra_core::provenance::admits(
                        self.policy.provenance_mode(req.tool, i),
                        &req.args[i],
                    );
                judged
                    .then(|| self.reference.value_provenance(&req.args[i]))
                    .flatten()
                    .and_then(|(_, sources)| {
                        // Fail closed: a source without a node reads the
                        // context instead.
                        sources
                            .into_iter()
                            .map(|s| self.source_node(s))
                            .collect::<Option<Vec<usize>>>()
                    })
            })
            .collect();
        let needs_context = !carries_data(req, lineage)
            || (0..lineage.len()).any(|i| {
                lineage[i].is_none() && req.args[i] != Value::Null && by_value[i].is_none()
            });
        (by_value, needs_context)
    }

    /// The node of a task or output where a value occurs.
    fn source_node(&self, s: ValueSource) -> Option<usize> {
        match s {
            ValueSource::Task(t) => self.tasks.get(t).copied(),
            ValueSource::Output(o) => self.reads.get(o).map(|&(n, _)| n),
            ValueSource::Field(o, f) => self
                .reads
                .get(o)
                .and_then(|(n, _)| self.field_nodes.get(n))
                .and_then(|nodes| nodes.get(f).copied()),
        }
    }

    /// Moves the history on by admitting the call at node `n`.
    fn admit(&mut self, n: usize, req: &Request) {
        let policy = std::sync::Arc::clone(&self.policy);
        let out = self.graph.nodes[n].label.clone();
        let tool = &policy.tools[req.tool];
        let inputs = CallInputs::concrete_with(
            &policy,
            req,
            &self.reference.ledger.sets,
            &self.reference.sources(),
            vec![out.clone(); tool.sinks.len()],
            out.clone(),
            out,
            self.reference.seq,
        );
        let next = step::admit(&policy, &self.history, &inputs, &Bool::from_bool(true));
        let resets = policy
            .path_rules
            .iter()
            .enumerate()
            .map(|(i, r)| match &r.reset {
                Some(reset) => step::step_matches(
                    &policy,
                    reset,
                    req.tool,
                    &inputs.output,
                    &inputs.reset_when[i],
                ),
                None => Bool::from_bool(false),
            })
            .collect();
        let counted = policy
            .path_rules
            .iter()
            .enumerate()
            .map(|(i, r)| match (&r.kind, policy.count_window(i)) {
                (PathKind::AtMost { step, .. }, Some(_)) => step::step_matches(
                    &policy,
                    step,
                    req.tool,
                    &inputs.output,
                    &inputs.step_when[i][0],
                ),
                _ => Bool::from_bool(false),
            })
            .collect();
        self.history = self.pin(&next);
        self.admitted.push(Admitted {
            node: n,
            resets,
            after: self.history.clone(),
            counted,
            time: self.reference.time,
        });
    }

    /// Replaces each history term by a fresh constant asserted equal to it,
    /// so terms stay small however long the history.
    fn pin(&mut self, s: &HistoryState) -> HistoryState {
        self.fresh += 1;
        let k = self.fresh;
        let pin_all = |v: &[Int], kind: &str| -> Vec<Int> {
            v.iter()
                .enumerate()
                .map(|(i, t)| {
                    if t.is_const() {
                        return t.clone();
                    }
                    let c = Int::fresh_const(&format!("{kind}{i}.{k}"));
                    self.solver.assert(c.eq(t));
                    c
                })
                .collect()
        };
        HistoryState {
            path: pin_all(&s.path, "path"),
            since: pin_all(&s.since, "since"),
            facts: pin_all(&s.facts, "fact"),
            remaining: s.remaining.clone(),
        }
    }
}

/// `l` as the policy names it: `⟨secret, {pii}, untrusted⟩`.
pub fn render_label(policy: &Policy, l: &Label) -> String {
    let cats: Vec<&str> = l
        .categories
        .indexes()
        .map(|c| policy.categories.get(c).map_or("?", String::as_str))
        .collect();
    format!(
        "<{}, {{{}}}, {}>",
        policy.level_name(l.sensitivity),
        cats.join(", "),
        if l.trusted { "trusted" } else { "untrusted" }
    )
}

fn describe_edge(policy: &Policy, graph: &SessionGraph, e: Option<&GraphEdge>) -> String {
    let Some(e) = e else {
        return "data edge".into();
    };
    let to = &graph.nodes[e.to];
    let param = e
        .param
        .zip(to.tool)
        .and_then(|(p, t)| policy.tools[t].params.get(p))
        .map(|p| p.name.clone());
    match (to.kind, e.trust, param) {
        (NodeKind::Context, EdgeTrust::Policy, _) => {
            "merged into the context (outcome unknown)".into()
        }
        (NodeKind::Context, _, _) if graph.nodes[e.from].kind == NodeKind::Context => {
            "the context as it was".into()
        }
        (NodeKind::Context, _, _) => "its result was read into the context".into(),
        (_, EdgeTrust::Observed, Some(p)) => format!("observed lineage of argument {p}"),
        (_, EdgeTrust::Value, Some(p)) => match graph.nodes[e.from].kind {
            NodeKind::Task => format!("the value of argument {p} occurs in the task's text"),
            _ => format!("the value of argument {p} occurs in its trusted output"),
        },
        (_, EdgeTrust::Policy, Some(p)) => {
            format!("argument {p} has no lineage: it reads the context")
        }
        (_, _, None) => "the call passes no data: it reads the context".into(),
        (_, _, Some(p)) => format!("argument {p}"),
    }
}

/// Whether some argument passes data: it has observed lineage or a value.
fn carries_data(req: &Request, lineage: &Lineage) -> bool {
    (0..lineage.len()).any(|i| lineage[i].is_some() || req.args[i] != Value::Null)
}

fn describe(e: &Event) -> String {
    match e {
        Event::Call(c) => format!("call {}", c.id),
        Event::Approve(a) => format!("approve {}", a.call),
        Event::Reject(r) => format!("reject {}", r.call),
        Event::Result(r) => format!("result {}", r.call),
        Event::Task(t) => format!("task {}", t.id),
    }
}

/// The join of the labels of the resources the call's resource argument
/// matches (bottom if none): the reference semantics' own function.
pub use agenra_core::spec::reference::resource_label;
