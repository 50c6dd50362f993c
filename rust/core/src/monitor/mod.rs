//! The monitor: `step(state, event) -> (decision, state')` of DESIGN §2.
//!
//! The step is deterministic and does no I/O; time comes with the event.
//! `Session::step` updates the session in place (the hot path); `step_pure`
//! is the same function on values. Each stage of a call's step has its own
//! module, named as in `docs/semantics.md`, in the order that makes a
//! denied call consume nothing:
//!
//! 1. `wellformed`: tool, agent, scope, arguments and their types;
//! 2. `lineage`: append the call, label each argument;
//! 3. `flows`: what reaches each sink;
//! 4. `history`: call rules, path rules, counts, obligations;
//! 5. `grants`: the ledger.
//!
//! `approvals` re-authorizes paused calls; `results` applies outcomes.

mod approvals;
mod contexts;
mod fast_map;
mod flows;
mod grants;
mod history;
mod index;
mod key_filter;
mod lineage;
mod results;
mod snapshot;
mod tasks;
mod token_index;
mod typed;
mod values;
mod wellformed;

use crate::decision::{
    Applied, Decision, DecisionPath, Note, PathError, Reason, Rule, StepError, StepOutput, Stop,
    Verdict,
};
use crate::event::{Event, Resolve};
use crate::graph::{Evidence, Graph, Node, NodeId, NodeKind, Status, NO_TOOL};
use crate::hash::{content_hash, EncodeError, Hash};
use crate::label::Label;
use crate::ledger::{Ledger, LedgerTree, SessionLedger};
use crate::policy::{GrantId, Policy, Quota, RuleEffect, ToolId};
use crate::pool::{SharedCounts, TenantPool};
use crate::session_tables::{CallIds, GrantList, NodeTable};
use crate::validate::{validate, ModelError};
use history::Violation;
use index::Index;
pub use snapshot::{SnapshotError, SNAPSHOT_FORMAT};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
pub use typed::{AgentHandle, CallArg, LookupError, ParamHandle, ToolHandle, TypedCall};
use wellformed::Resolved;

/// A call evaluated but not yet committed.
struct Evaluation {
    verdict: Verdict,
    rule: Rule,
    reason: Reason,
    node: NodeId,
    tool: Option<ToolId>,
    path: DecisionPath,
    /// The serving grants (empty for a DENY).
    grants: Vec<GrantId>,
    /// The resolved call (`None` for a DENY).
    resolved: Option<Resolved>,
    /// Every rule that stops the call (collected on request).
    stops: Vec<Stop>,
    /// The call's label without the tool's `output` label (its sanitized
    /// inputs and resource labels), which declared output fields join.
    field_base: Label,
    /// The token that made a token test stop the call, if one did.
    token: Option<Box<crate::token_evidence::TokenEvidence>>,
}

impl Evaluation {
    fn deny(
        rule: Rule,
        reason: Reason,
        node: NodeId,
        tool: Option<ToolId>,
        path: DecisionPath,
        stops: Vec<Stop>,
    ) -> Evaluation {
        Evaluation {
            verdict: Verdict::Deny,
            rule,
            reason,
            node,
            tool,
            path,
            grants: vec![],
            resolved: None,
            stops,
            field_base: Label::BOTTOM,
            token: None,
        }
    }
}

/// The session as it was before a speculative call.
struct Mark {
    id: String,
    nodes: usize,
    edges: usize,
    seq: u64,
    time: u64,
    last_call: Option<NodeId>,
    last_by_agent: Slots<Option<NodeId>>,
}

/// Units a paused or running call holds, and when it was admitted.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Held {
    grants: GrantList,
    /// What the call holds of amount budgets (empty for most calls).
    charges: crate::spec::Charges,
    /// What the call holds of renewing limits, and the windows that lent it.
    lent: crate::window::Lent,
    /// Sequence number of the admission (the call, or its approval).
    admitted_at: u64,
    /// A paused call, kept for the re-check at approval time.
    pending: Option<Box<Resolved>>,
    /// The call's label without the tool's `output` label: what its
    /// declared output fields join (`docs/semantics.md`, "Per-field output
    /// labels").
    field_base: Label,
}

/// Everything the monitor knows about one session.
#[derive(Clone, Debug)]
pub struct SessionState {
    /// Calls, tasks and contexts, and where their data came from.
    pub graph: Graph,
    /// Units left per grant: the policy's initial ledger and hash tree,
    /// shared by every session, plus only the counts (and tree hashes) this
    /// session changed. A unit taken or returned rehashes one block and its
    /// ancestors; a new session hashes and copies nothing.
    pub ledger: SessionLedger,
    /// Discovered-resource sets, indexed like `Policy::sets`.
    pub sets: Vec<BTreeSet<String>>,
    /// Call and task ids. They come from the agent's runtime, so the map
    /// uses std's keyed SipHash: crafted ids cannot collide on purpose and
    /// make one session (and the process serving it) quadratic.
    calls: CallIds,
    held: NodeTable<Held>,
    /// Per path rule: steps matched so far (sequence) or calls counted.
    path_progress: Slots<u64>,
    /// Per count `within` a window: the admission times of the latest
    /// counted calls still inside the window, oldest first, at most the
    /// rule's `max` of them (the one question asked is whether `max` fall
    /// inside the window), so memory is bounded by the window and `max`.
    count_times: Slots<std::collections::VecDeque<u64>>,
    /// Per sequence rule: the admitted calls that matched its steps so far
    /// (the violating path, should the rule fire).
    path_witness: Slots<Vec<NodeId>>,
    /// Per fact: admission sequence number of the latest call whose result
    /// established it.
    fact_seen: Slots<Option<u64>>,
    /// Per obligation: admission sequence number of the last `since` call.
    since_seen: Slots<Option<(u64, NodeId)>>,
    last_call: Option<NodeId>,
    /// Per agent: its latest call (parent edges point from it).
    last_by_agent: Slots<Option<NodeId>>,
    /// Per agent with its own context: its context node, once it exists.
    agent_contexts: Slots<Option<NodeId>>,
    /// Task texts and output words, for provenance by value.
    values: values::ValueIndex,
    /// Task texts' and outputs' typed tokens, for token tests.
    tokens: token_index::TokenIndex,
    /// The scope the latest task opened (narrows the static scopes).
    task_scope: Option<crate::event::TaskScope>,
    /// Values tasks seeded into discovered sets: (set, value, task node).
    pub seeded: Vec<(usize, String, NodeId)>,
    /// Events applied so far; the next event gets `seq + 1`.
    pub seq: u64,
    /// The latest event's time (seconds).
    pub time: u64,
}

/// Per-rule or per-agent state that costs nothing until it is first
/// written (a new session allocates only what every session needs).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Slots<T>(Vec<T>);

impl<T: Clone + Default> Slots<T> {
    /// Slot `i`, or the default when it was never written.
    pub fn value(&self, i: usize) -> T
    where
        T: Copy,
    {
        self.0.get(i).copied().unwrap_or_default()
    }

    /// Slot `i`, if it was ever written.
    pub fn at(&self, i: usize) -> Option<&T> {
        self.0.get(i)
    }

    /// Slot `i` for writing; the table grows to `len` slots on first use.
    pub fn slot(&mut self, i: usize, len: usize) -> &mut T {
        if self.0.len() <= i {
            self.0.resize(len.max(i + 1), T::default());
        }
        &mut self.0[i]
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.0.iter_mut()
    }
}

/// The session's context node: everything the agents have read.
pub const CONTEXT: NodeId = NodeId(0);

impl SessionState {
    /// An empty session under `policy`.
    pub fn new(policy: &Policy) -> SessionState {
        let ledger = Ledger::initial(policy);
        let tree = Arc::new(LedgerTree::new(&ledger));
        SessionState::with_ledger(policy, SessionLedger::new(Arc::new(ledger), tree))
    }

    fn with_ledger(policy: &Policy, ledger: SessionLedger) -> SessionState {
        let mut graph = Graph::default();
        graph.push_node(Node {
            kind: NodeKind::Context,
            status: Status::Context,
            evidence: Evidence::Results,
            agent: 0,
            tool: NO_TOOL,
            label: Label::BOTTOM,
            time: 0,
            first_edge: 0,
        });
        SessionState {
            graph,
            ledger,
            sets: vec![BTreeSet::new(); policy.sets.len()],
            calls: CallIds::default(),
            held: NodeTable::default(),
            path_progress: Slots::default(),
            count_times: Slots::default(),
            path_witness: Slots::default(),
            fact_seen: Slots::default(),
            since_seen: Slots::default(),
            last_call: None,
            last_by_agent: Slots::default(),
            agent_contexts: Slots::default(),
            values: values::ValueIndex::default(),
            tokens: token_index::TokenIndex::new(&policy.token_shapes),
            task_scope: None,
            seeded: Vec::new(),
            seq: 0,
            time: 0,
        }
    }

    /// The ledger's hash, as audit records name it (kept up to date as
    /// units are taken and returned, never recomputed from scratch).
    pub fn ledger_hash(&self) -> Hash {
        self.ledger.hash()
    }

    /// The node of call `id`, if the session has seen it.
    pub fn call_node(&self, id: &str) -> Option<NodeId> {
        self.calls.get(id).copied()
    }

    /// Where call `id` stands (paused, running, succeeded, ...), if the
    /// session knows it.
    pub fn call_status(&self, id: &str) -> Option<Status> {
        self.graph.node(*self.calls.get(id)?).map(|n| n.status)
    }

    /// Grants whose units call `id` holds (paused or running).
    pub fn held_grants(&self, id: &str) -> Option<&[GrantId]> {
        let node = self.calls.get(id)?;
        self.held.get(node).map(|h| &h.grants[..])
    }

    /// The id of the call (or task) at `node`.
    pub fn call_id_of(&self, node: NodeId) -> Option<&str> {
        self.calls.id_of(node)
    }
}

/// A validated policy with its lookup tables, ready to decide: immutable,
/// `Send + Sync`, and cheap to clone (reference-counted inside). Every
/// [`Session`] created from it shares it.
#[derive(Clone, Debug)]
pub struct CompiledPolicy(Arc<Compiled>);

/// A [`CompiledPolicy`] that may have been freed (see
/// [`CompiledPolicy::downgrade`]).
#[derive(Clone, Debug)]
pub struct WeakPolicy(std::sync::Weak<Compiled>);

impl WeakPolicy {
    /// The policy, while a session (or anyone) still holds it.
    pub fn upgrade(&self) -> Option<CompiledPolicy> {
        self.0.upgrade().map(CompiledPolicy)
    }
}

/// What a [`CompiledPolicy`] shares, behind one reference count: a new
/// session clones one `Arc`, not one per table.
#[derive(Debug)]
struct Compiled {
    policy: Arc<Policy>,
    index: Arc<Index>,
    hash: Hash,
    /// The hash tree of the initial ledger, shared by new sessions until
    /// they take their first unit.
    initial_tree: Arc<LedgerTree>,
    /// The initial ledger, shared likewise.
    initial_ledger: Arc<Ledger>,
}

impl CompiledPolicy {
    /// Checks the policy's internal references (a policy read from JSON may
    /// be corrupt) and builds its lookup tables.
    pub fn new(policy: Policy) -> Result<CompiledPolicy, MonitorError> {
        validate(&policy)?;
        let hash = content_hash(&policy)?;
        let index = Index::new(&policy);
        let initial_ledger = Arc::new(Ledger::initial(&policy));
        let initial_tree = Arc::new(LedgerTree::new(&initial_ledger));
        Ok(CompiledPolicy(Arc::new(Compiled {
            policy: Arc::new(policy),
            index: Arc::new(index),
            hash,
            initial_tree,
            initial_ledger,
        })))
    }

    /// A reference that does not keep the policy alive: a server keeps its
    /// past revisions this way, so that one no session uses is freed.
    pub fn downgrade(&self) -> WeakPolicy {
        WeakPolicy(Arc::downgrade(&self.0))
    }

    /// A new, empty session under this policy.
    pub fn session(&self) -> Session {
        self.session_with(SessionOptions::default())
    }

    /// A new, empty session with `options` (e.g. a compact one).
    pub fn session_with(&self, options: SessionOptions) -> Session {
        Session {
            options,
            state: SessionState::with_ledger(
                &self.0.policy,
                SessionLedger::new(
                    Arc::clone(&self.0.initial_ledger),
                    Arc::clone(&self.0.initial_tree),
                ),
            ),
            shared: self.clone(),
            pool_view: SharedCounts::default(),
        }
    }

    /// The policy's model.
    pub fn policy(&self) -> &Policy {
        &self.0.policy
    }

    /// The policy's content hash (what audit records and certificates name).
    pub fn hash(&self) -> Hash {
        self.0.hash
    }
}

/// One session under one policy: its graph, its ledger, its pending
/// approvals. Create it with [`CompiledPolicy::session`].
#[derive(Clone, Debug)]
pub struct Session {
    /// The policy, its lookup tables and initial ledger, shared.
    shared: CompiledPolicy,
    options: SessionOptions,
    state: SessionState,
    /// The tenant pool's counts while a decision holds its lock (see
    /// `grants::with_pool`); unused without a tenant pool.
    pool_view: SharedCounts,
}

/// How a session keeps its history.
#[derive(Clone, Default)]
pub struct SessionOptions {
    compact: Option<usize>,
    audit: Option<AuditSink>,
    pool: Option<TenantPool>,
}

/// Receives what a compact session forgets (see [`SessionOptions::audit`]).
pub type AuditSink = Arc<dyn Fn(&Forgotten<'_>) + Send + Sync>;

/// A node a compact session no longer keeps in memory.
#[derive(Debug)]
pub struct Forgotten<'a> {
    /// The call's id (`None` for a node that is not a call).
    pub call: Option<&'a str>,
    /// The node's id (ids never change).
    pub node: NodeId,
    /// The node as it is now (status, label, time).
    pub data: &'a Node,
    /// The edges stored after it: its incoming edges, then later ones up
    /// to the next node (such as its result's merge into a context). Empty
    /// when it is reported a second time.
    pub edges: &'a [crate::graph::Edge],
    /// Still needed (a paused or running call, a context, a task): kept
    /// without its edges, and reported again when it is released.
    pub kept: bool,
}

impl SessionOptions {
    /// A compact session: it keeps the graph of the last `window` nodes,
    /// plus contexts, tasks and paused or running calls, and what future
    /// decisions read (context labels, rule automata, fact stamps, the
    /// ledger, discovered sets, the value index), so memory stays flat over
    /// any number of calls. Decisions are those of a full session, except
    /// that lineage naming a call older than the window is denied as
    /// unknown (fail closed) and a reused id older than the window is not
    /// detected. DENY paths stop where the graph was forgotten.
    pub fn compact(window: usize) -> SessionOptions {
        SessionOptions {
            compact: Some(window.max(1)),
            ..SessionOptions::default()
        }
    }

    /// Where forgotten nodes go, with their edges and call ids: the full
    /// graph, for the audit trail.
    pub fn audit(mut self, sink: impl Fn(&Forgotten<'_>) + Send + Sync + 'static) -> Self {
        self.audit = Some(Arc::new(sink));
        self
    }

    /// The tenant's pool: the session takes the units of its shared grants
    /// (`quota N per tenant`) from it, and gives them back to it, together
    /// with every other session given a clone of the same pool
    /// (`docs/semantics.md`, "Quota scope"). Without one, a session has a
    /// private pool and its shared grants behave per session. Sessions made
    /// by [`Session::new_session`], and clones of a session, share the pool
    /// (so [`Session::step_pure`] on a session with a tenant pool takes
    /// from it too).
    pub fn pool(mut self, pool: TenantPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// The tenant pool given with [`SessionOptions::pool`], if any.
    pub fn tenant_pool(&self) -> Option<&TenantPool> {
        self.pool.as_ref()
    }
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("compact", &self.compact)
            .field("audit", &self.audit.is_some())
            .field("pool", &self.pool.is_some())
            .finish()
    }
}

/// The name of [`Session`] before sessions and policies were separate
/// types; kept so that existing code compiles.
pub type Monitor = Session;

/// Why a policy cannot be compiled for the monitor.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// The policy refers to something it does not declare.
    #[error("invalid policy: {0}")]
    Invalid(#[from] ModelError),
    /// The policy could not be encoded for its content hash.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

impl Session {
    /// Compiles `policy` for a single session. With several sessions, build
    /// one [`CompiledPolicy`] and call [`CompiledPolicy::session`] instead.
    pub fn new(policy: Policy) -> Result<Session, MonitorError> {
        Ok(CompiledPolicy::new(policy)?.session())
    }

    /// A fresh session under the same policy (no re-validation, shared
    /// lookup tables).
    pub fn new_session(&self) -> Session {
        self.compiled().session_with(self.options.clone())
    }

    /// Forgets what a compact session no longer needs, once the graph holds
    /// twice its window (so the cost is amortized over the window).
    fn compact_if_due(&mut self) {
        let Some(window) = self.options.compact else {
            return;
        };
        let state = &mut self.state;
        if state.graph.nodes.len() < 2 * window {
            return;
        }
        let keep_from = (state.graph.len() - window) as u32;
        // A paused call's sources are read again when it is approved.
        let sources: BTreeSet<u32> = state
            .held
            .values()
            .filter_map(|h| h.pending.as_ref())
            .flat_map(|r| r.lineage.nodes().map(|n| n.0))
            .collect();
        let needed = |id: NodeId, n: &Node| {
            matches!(n.kind, NodeKind::Context | NodeKind::Task)
                || matches!(n.status, Status::Running | Status::Paused)
                || sources.contains(&id.0)
        };
        let audit = self.options.audit.as_deref();
        let SessionState { calls, graph, .. } = state;
        let mut ids: HashMap<u32, String> = HashMap::new();
        calls.retain(|id, node| {
            let keep = node.0 >= keep_from || graph.node(*node).is_some_and(|n| needed(*node, n));
            if audit.is_some() && (!keep || node.0 < keep_from) {
                ids.insert(node.0, id.to_string());
            }
            keep
        });
        let report = |id: NodeId, data: &Node, edges: &[crate::graph::Edge], kept: bool| {
            if let Some(sink) = audit {
                sink(&Forgotten {
                    call: ids.get(&id.0).map(String::as_str),
                    node: id,
                    data,
                    edges,
                    kept,
                });
            }
        };
        // Nodes kept earlier that are done now go for good.
        for (&id, n) in &graph.pinned {
            if !needed(NodeId(id), n) {
                report(NodeId(id), n, &[], false);
            }
        }
        graph.unpin(|id, n| needed(id, n));
        graph.forget_before(keep_from, needed, |id, n, edges| {
            report(id, n, edges, needed(id, n))
        });
    }

    /// The shared policy this session runs under.
    pub fn compiled(&self) -> CompiledPolicy {
        self.shared.clone()
    }

    /// The options this session was created with.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// The policy's model.
    pub fn policy(&self) -> &Policy {
        &self.shared.0.policy
    }
    /// The policy's content hash.
    pub fn policy_hash(&self) -> Hash {
        self.shared.0.hash
    }
    /// Everything the session holds (graph, ledger, discovered sets).
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// Applies one event. On error the session is unchanged.
    pub fn step(&mut self, event: &Event) -> Result<StepOutput, StepError> {
        match event {
            Event::Call(c) => self.authorize(c).map(StepOutput::Decision),
            Event::Result(r) => self.report(r).map(StepOutput::Applied),
            Event::Approve(a) => self.approve_at(a).map(StepOutput::Decision),
            Event::Reject(r) => self.reject_at(r).map(StepOutput::Applied),
            Event::Task(t) => {
                let out = self.task(t).map(StepOutput::Applied);
                self.compact_if_due();
                out
            }
        }
    }

    /// `step` as a pure function: the input monitor is left as it was.
    pub fn step_pure(&self, event: &Event) -> (Result<StepOutput, StepError>, Session) {
        let mut next = self.clone();
        let out = next.step(event);
        (out, next)
    }

    fn advance_time(&mut self, time: Option<u64>) -> Result<u64, StepError> {
        let time = time.unwrap_or(self.state.time);
        if time < self.state.time {
            return Err(StepError::TimeWentBackwards {
                time,
                last: self.state.time,
            });
        }
        Ok(time)
    }

    /// Decides a call: ALLOW, DENY or PAUSE, and records it (an ALLOW or a
    /// PAUSE takes its units). Takes a JSON [`Call`](crate::event::Call) or a [`TypedCall`].
    pub fn authorize<'a>(&mut self, call: impl Into<CallArg<'a>>) -> Result<Decision, StepError> {
        let call = call.into();
        if self.options.pool.is_some() {
            return self.authorize_pooled(call);
        }
        self.authorize_now(call)
    }

    /// `authorize` for a session with a tenant pool: the pool is locked
    /// for the decision when it may take from it.
    #[cold]
    #[inline(never)]
    fn authorize_pooled(&mut self, call: CallArg<'_>) -> Result<Decision, StepError> {
        let needed = self.call_uses_pool(&call);
        self.with_pool(needed, |s| s.authorize_now(call))
    }

    /// `authorize`, with the tenant pool (if the decision may use it)
    /// already locked.
    fn authorize_now(&mut self, call: CallArg<'_>) -> Result<Decision, StepError> {
        let mut e = self.evaluate(call, false)?;
        if e.verdict == Verdict::Deny {
            let decision = self.finish(e, None);
            self.compact_if_due();
            return Ok(decision);
        }
        let Some(resolved) = e.resolved.take() else {
            return Ok(self.finish(e, None));
        };
        let (charges, lent) = self.consume(&e.grants, &resolved.req);
        let seq = self.state.seq;
        let held = Held {
            grants: GrantList::from(e.grants.as_slice()),
            charges,
            lent,
            admitted_at: seq,
            pending: None,
            field_base: e.field_base,
        };
        if e.verdict == Verdict::Allow {
            self.admit(e.node, &resolved, seq);
            self.state.held.insert(e.node, held);
        } else {
            self.set_status(e.node, Status::Paused);
            self.state.held.insert(
                e.node,
                Held {
                    pending: Some(Box::new(resolved)),
                    ..held
                },
            );
        }
        let left = self.left_after(&e, 0);
        let decision = self.finish(e, left);
        self.compact_if_due();
        Ok(decision)
    }

    /// The decision `call` would get now, recording nothing and consuming
    /// nothing: the session is left exactly as it was. The decision names
    /// the node the call would get; its ledger hash is the current one.
    pub fn check<'a>(&mut self, call: impl Into<CallArg<'a>>) -> Result<Decision, StepError> {
        let call = call.into();
        let mark = self.mark(call.id());
        let needed = self.call_uses_pool(&call);
        let (out, left) = self.with_pool(needed, |s| {
            let out = s.evaluate(call, false);
            let left = out.as_ref().ok().and_then(|e| {
                let taken = e.grants.first().map_or(0, |own| {
                    e.grants.iter().filter(|g| *g == own).count() as u64
                });
                s.left_after(e, taken)
            });
            (out, left)
        });
        // The call's node goes with the rollback: a flow's path is built now.
        let out = out.map(|mut e| {
            if let Some(t) = e.path.trace() {
                e.path = DecisionPath::from_nodes(self.trace_path(t));
            }
            e
        });
        self.rollback(mark);
        let e = out?;
        Ok(self.finish(e, left))
    }

    /// Every rule that would stop `call` now (DENY and PAUSE alike, in the
    /// order the step checks them), recording nothing: empty when the call
    /// would be allowed. The first DENY (else the first PAUSE) is the one
    /// [`Session::check`] names.
    pub fn check_all<'a>(&mut self, call: impl Into<CallArg<'a>>) -> Result<Vec<Stop>, StepError> {
        let call = call.into();
        let mark = self.mark(call.id());
        let needed = self.call_uses_pool(&call);
        let out = self.with_pool(needed, |s| s.evaluate(call, true));
        self.rollback(mark);
        Ok(out?.stops)
    }

    /// Units of the serving grant left once `e`'s units are taken (`taken`:
    /// how many are still to be taken). `None` for unlimited grants.
    fn left_after(&self, e: &Evaluation, taken: u64) -> Option<u64> {
        match e.reason {
            Reason::Granted { .. } => {}
            _ => return None,
        }
        let own = *e.grants.first()?;
        if let Some(n) = self.shared_left(own) {
            return Some(n.saturating_sub(taken));
        }
        match self.state.ledger.remaining(own) {
            Some(Quota::Limited(n)) => Some(n.saturating_sub(taken)),
            _ => None,
        }
    }

    fn finish(&self, e: Evaluation, left: Option<u64>) -> Decision {
        let reason = match e.reason {
            Reason::Granted { agent, .. } => Reason::Granted { agent, left },
            other => other,
        };
        let mut d = self.decide(e.verdict, e.rule, reason, e.node, e.tool, e.path, e.grants);
        d.token = e.token;
        d
    }

    /// What is needed to undo a speculative call (`check`).
    fn mark(&self, id: &str) -> Mark {
        Mark {
            id: id.to_string(),
            nodes: self.state.graph.len(),
            edges: self.state.graph.edge_count(),
            seq: self.state.seq,
            time: self.state.time,
            last_call: self.state.last_call,
            last_by_agent: self.state.last_by_agent.clone(),
        }
    }

    /// Undoes everything `evaluate` did: a call only appends to the graph
    /// (its node, the edges into it, maybe an agent's new context node) and
    /// moves the counters; nothing is consumed before `authorize` commits.
    fn rollback(&mut self, mark: Mark) {
        let state = &mut self.state;
        if state.graph.len() > mark.nodes {
            state.calls.remove(&mark.id);
        }
        state.graph.truncate(mark.nodes, mark.edges);
        for slot in state.agent_contexts.iter_mut() {
            if slot.is_some_and(|n| n.0 as usize >= mark.nodes) {
                *slot = None;
            }
        }
        state.seq = mark.seq;
        state.time = mark.time;
        state.last_call = mark.last_call;
        state.last_by_agent = mark.last_by_agent;
    }

    /// Steps 1 to 5 for one call: appends its node and decides, without
    /// taking units or admitting it (`authorize` commits, `check` rolls
    /// back). With `collect`, every rule that stops the call is gathered.
    fn evaluate(&mut self, call: CallArg<'_>, collect: bool) -> Result<Evaluation, StepError> {
        let time = self.advance_time(Some(call.time()))?;
        if let Some(e) = call.foreign(self) {
            return Err(e);
        }
        // Hashed once: checked here, stored when the call is appended.
        let id_hash = self.state.calls.hash_id(call.id());
        if self.state.calls.contains_hashed(call.id(), id_hash) {
            return Err(StepError::DuplicateCall(call.id().to_string()));
        }
        if self.state.graph.len() >= u32::MAX as usize {
            return Err(StepError::GraphFull);
        }
        // The id table stores 32-bit lengths (session_tables.rs).
        if call.id().len() >= u32::MAX as usize {
            return Err(StepError::IdTooLong(call.id().len()));
        }
        self.state.time = time;
        self.state.seq += 1;
        let mut stops = Vec::new();

        // 1. Well-formedness (fail closed, naming the field).
        let (id, resolved) = call.into_parts(self);
        let resolved = match resolved {
            Ok(r) => r,
            Err(((rule, reason), tool, agent)) => {
                let node = self.append_denied(&id, id_hash, tool, agent, time);
                if collect {
                    stops.push(Stop::deny(rule, reason.clone(), vec![]));
                }
                return Ok(Evaluation::deny(
                    rule,
                    reason,
                    node,
                    tool,
                    DecisionPath::default(),
                    stops,
                ));
            }
        };
        let tool = Some(resolved.req.tool);

        // 2. Append the call and label each argument.
        let labels = self.call_labels(&resolved);
        let (node, field_base) = self.append_call(&id, id_hash, &resolved, &labels);

        // 3. Flows into every sink the call reaches.
        let flows = self.check_flows(&resolved, &labels, collect);
        for (hit, effect) in flows.all.iter().flatten() {
            let (rule, reason) = hit.rule_and_reason();
            let path = self.flow_path(node, hit, &labels, &resolved);
            stops.push(Stop::new(*effect, rule, reason, path));
        }
        let mut denied: Option<Violation> = flows.deny.map(|hit| {
            let (rule, reason) = hit.rule_and_reason();
            Violation {
                rule,
                path: self.flow_trace(node, &hit, &labels, &resolved),
                reason,
                effect: RuleEffect::Deny,
            }
        });
        let mut pause: Option<Violation> = flows.pause.map(|hit| {
            let (rule, reason) = hit.rule_and_reason();
            Violation {
                rule,
                path: self.flow_trace(node, &hit, &labels, &resolved),
                reason,
                effect: RuleEffect::Pause,
            }
        });

        // 4. Call rules, path rules, counts and obligations.
        if denied.is_none() || collect {
            for v in self.history_violations(node, &resolved) {
                if collect {
                    stops.push(Stop::new(
                        v.effect,
                        v.rule,
                        v.reason.clone(),
                        v.path.nodes().map(<[_]>::to_vec).unwrap_or_default(),
                    ));
                }
                match v.effect {
                    RuleEffect::Deny => {
                        denied.get_or_insert(v);
                        if !collect {
                            break;
                        }
                    }
                    RuleEffect::Pause => {
                        pause.get_or_insert(v);
                    }
                }
            }
        }

        // 5. The ledger: one unit of the first matching grant with quota,
        //    along the delegation chain.
        let chain = if denied.is_none() || collect {
            Some(self.select_chain(&resolved))
        } else {
            None
        };
        let grants = match chain {
            Some(Ok(g)) => g,
            Some(Err(reason)) => {
                if collect {
                    stops.push(Stop::deny(Rule::NoGrant, reason.clone(), vec![]));
                }
                denied.get_or_insert(Violation {
                    rule: Rule::NoGrant,
                    reason,
                    path: DecisionPath::default(),
                    effect: RuleEffect::Deny,
                });
                vec![]
            }
            None => vec![],
        };
        // The chain always holds the caller itself, so `grants` is not empty.
        let approval = grants
            .iter()
            .find(|&&g| self.shared.0.policy.grants[g].approval);
        if collect {
            if let Some(&g) = approval {
                stops.push(Stop::new(
                    RuleEffect::Pause,
                    Rule::Grant(g),
                    Reason::NeedsApproval { grant: g },
                    vec![],
                ));
            }
        }
        if let Some(v) = denied {
            self.set_status(node, Status::Denied);
            let token = self.token_evidence(v.rule, &resolved);
            let mut e = Evaluation::deny(v.rule, v.reason, node, tool, v.path, stops);
            e.token = token;
            return Ok(e);
        }
        let own = grants.first().copied().unwrap_or_default();
        let (verdict, rule, reason, path) = match (pause, approval) {
            (Some(v), _) => (Verdict::Pause, v.rule, v.reason, v.path),
            (None, Some(&g)) => (
                Verdict::Pause,
                Rule::Grant(g),
                Reason::NeedsApproval { grant: g },
                DecisionPath::default(),
            ),
            (None, None) => (
                Verdict::Allow,
                Rule::Grant(own),
                Reason::Granted {
                    agent: resolved.req.agent,
                    left: None,
                },
                DecisionPath::default(),
            ),
        };
        let token = match verdict {
            Verdict::Pause => self.token_evidence(rule, &resolved),
            _ => None,
        };
        Ok(Evaluation {
            verdict,
            rule,
            reason,
            node,
            tool,
            path,
            grants,
            resolved: Some(resolved),
            stops,
            field_base,
            token,
        })
    }

    /// The token that made `rule` stop the call (only for policies with
    /// token tests; off the hot path: the call is already stopped).
    fn token_evidence(
        &self,
        rule: Rule,
        r: &Resolved,
    ) -> Option<Box<crate::token_evidence::TokenEvidence>> {
        if !self.shared.0.index.has_token_tests {
            return None;
        }
        crate::token_evidence::evidence(
            &self.shared.0.policy,
            rule,
            r.req.tool,
            &r.req.args,
            &self.state.tokens,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        verdict: Verdict,
        rule: Rule,
        reason: Reason,
        node: NodeId,
        tool: Option<ToolId>,
        path: DecisionPath,
        grants: Vec<GrantId>,
    ) -> Decision {
        Decision {
            verdict,
            rule,
            reason,
            node,
            tool,
            path,
            grants,
            refunded: vec![],
            ledger_hash: self.state.ledger_hash(),
            token: None,
        }
    }

    fn set_status(&mut self, node: NodeId, status: Status) {
        if let Some(n) = self.state.graph.node_mut(node) {
            n.status = status;
        }
    }

    fn applied(
        &self,
        node: NodeId,
        rule: Option<Rule>,
        notes: Vec<Note>,
        refunded: Vec<GrantId>,
    ) -> Applied {
        Applied {
            node,
            rule,
            notes,
            refunded,
            ledger_hash: self.state.ledger_hash(),
        }
    }

    fn status_name(status: Status) -> &'static str {
        match status {
            Status::Denied => "denied",
            Status::Paused => "paused",
            Status::Running => "running",
            Status::Rejected => "rejected",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Unknown => "finished (unknown outcome)",
            Status::Context => "the context",
            Status::Task => "a task",
        }
    }

    /// The node of `call` if it is in `want`; otherwise the error.
    fn node_in(&self, call: &str, want: Status, event: &'static str) -> Result<NodeId, StepError> {
        let node = self
            .state
            .calls
            .get(call)
            .copied()
            .ok_or_else(|| StepError::UnknownCall(call.to_string()))?;
        let status = self
            .state
            .graph
            .node(node)
            .map_or(Status::Denied, |n| n.status);
        if status != want {
            return Err(StepError::WrongState {
                call: call.to_string(),
                status: Self::status_name(status),
                event,
            });
        }
        Ok(node)
    }

    /// A human approves a paused call: it is re-authorized now, and admitted
    /// (ALLOW) unless the re-check denies it (DENY, units returned).
    pub fn approve(&mut self, call: &str) -> Result<Decision, StepError> {
        self.approve_at(&Resolve {
            session: None,
            call: call.to_string(),
            time: None,
        })
    }

    /// A human rejects a paused call: its reserved units are returned.
    pub fn reject(&mut self, call: &str) -> Result<Applied, StepError> {
        self.reject_at(&Resolve {
            session: None,
            call: call.to_string(),
            time: None,
        })
    }

    /// Renders a decision's reason against this monitor's policy.
    pub fn reason_text(&self, d: &Decision) -> String {
        d.reason_text(&self.shared.0.policy)
    }

    /// The node ids of a decision's path ([`Decision::path`]), read against
    /// this session, which made the decision: a flow rule's path is built
    /// now, from the call's node back to the labeled source, as the graph
    /// was when the decision was made (the same path at any later time).
    /// Other paths are returned as they are. A compact session may have
    /// forgotten part of the graph since: the path then stops where the
    /// graph was forgotten, and if the call's node itself is gone the
    /// answer is [`PathError::Forgotten`]. The node is always there right
    /// after the decision (the window keeps the newest nodes).
    pub fn path(&self, d: &Decision) -> Result<Vec<NodeId>, PathError> {
        self.resolve_path(&d.path)
    }

    /// [`Session::path`] for a path alone.
    pub fn resolve_path(&self, path: &DecisionPath) -> Result<Vec<NodeId>, PathError> {
        match path.trace() {
            None => Ok(path.nodes().map(<[_]>::to_vec).unwrap_or_default()),
            Some(t) if self.state.graph.node(t.node).is_none() => {
                Err(PathError::Forgotten { node: t.node })
            }
            Some(t) => Ok(self.trace_path(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    /// A slot past the asked length still exists once written, and reads
    /// back what was written; unwritten slots read as the default.
    #[test]
    fn slots_grow_to_hold_the_slot_written() {
        let mut s: Slots<u8> = Slots::default();
        assert_eq!(s.at(3), None);
        *s.slot(3, 0) = 7;
        assert_eq!(s.at(3), Some(&7));
        assert_eq!(s.value(3), 7);
        assert_eq!(s.at(1), Some(&0));
        assert_eq!(s.value(9), 0);
        *s.slot(1, 10) = 2;
        assert_eq!((s.value(1), s.at(9)), (2, None), "already long enough");
    }
}
