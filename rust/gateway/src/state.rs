//! The gateway's sessions, their durable log and their recovery.
//!
//! Every applied event is appended to the log while its session is locked,
//! so the log holds each session's events in the order they were applied;
//! the answer is sent only once its record is durable. A restart replays
//! the log through the monitor (a pure step), which rebuilds every session
//! exactly, and checks that each replayed decision and ledger hash equal
//! the recorded ones.

use crate::api::{check_name, ApiError, Outcome};
use crate::metrics::Metrics;
use agenra_core::decision::{Rule, StepError, StepOutput, Verdict};
use agenra_core::event::{Call, Event, Report, Resolve, Task};
use agenra_core::graph::NodeId;
use agenra_core::policy::Quota;
use agenra_core::{CompiledPolicy, Hash, Policy, Session, SessionOptions, TenantPool, WeakPolicy};
use agenra_store::{Committer, Done, Head, Kind, Log, Record, StoreError};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::oneshot;

mod answers;
mod close;
mod evict;
mod parts;
mod recover;
mod snapshot;

pub use close::ClosedView;
pub use evict::{parse_idle, EvictionStats, IdleError, DEFAULT_EVICT_IDLE_SECS};
use parts::{pooled_policy, Writer};
pub use snapshot::{SnapshotRecovery, DEFAULT_SNAPSHOT_EVERY};

/// The tenant used when a request names none.
pub const DEFAULT_TENANT: &str = "default";

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The store failed, or its chain is broken.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A record cannot be replayed (the log was written by another
    /// version, or the monitor is no longer deterministic on it).
    #[error("audit record {seq}: cannot recover: {reason}")]
    Recover {
        /// The record's position.
        seq: u64,
        /// What went wrong.
        reason: String,
    },
    /// `--require-certified`: the policy to start with does not preserve
    /// the workflows of the one the store last ran.
    #[error("{0}")]
    NotCertified(String),
    /// The policy is invalid.
    #[error("invalid policy: {0}")]
    Policy(String),
}

/// A durable answer being committed: await it, then reply.
pub struct Pending<T> {
    inner: Waiting<T>,
}

enum Waiting<T> {
    /// Decided already; the record is being committed.
    Known {
        value: T,
        rx: oneshot::Receiver<Result<Head, StoreError>>,
        fresh: bool,
    },
    /// Decided inside the store's next transaction (a shared store).
    Later(oneshot::Receiver<Result<(T, Option<u64>), ApiError>>),
}

fn not_recorded(e: StoreError) -> ApiError {
    ApiError::new(503, format!("not recorded: {e}"))
}

fn writer_gone() -> ApiError {
    ApiError::new(503, "not recorded: the store's writer is gone")
}

impl<T> Pending<T> {
    fn finish(
        value: T,
        fresh: bool,
        r: Result<Result<Head, StoreError>, oneshot::error::RecvError>,
    ) -> Result<(T, Option<u64>), ApiError> {
        match r {
            Ok(Ok(head)) => Ok((value, fresh.then_some(head.seq))),
            Ok(Err(e)) => Err(not_recorded(e)),
            Err(_) => Err(writer_gone()),
        }
    }

    /// Waits until the record is durable. `Err`: it could not be written
    /// (after a failed write the server refuses everything until
    /// restarted), or the request was refused.
    pub async fn durable(self) -> Result<(T, Option<u64>), ApiError> {
        match self.inner {
            Waiting::Known { value, rx, fresh } => Self::finish(value, fresh, rx.await),
            Waiting::Later(rx) => rx.await.unwrap_or_else(|_| Err(writer_gone())),
        }
    }

    /// Blocks until the record is durable (outside an async runtime).
    pub fn wait(self) -> Result<(T, Option<u64>), ApiError> {
        match self.inner {
            Waiting::Known { value, rx, fresh } => Self::finish(value, fresh, rx.blocking_recv()),
            Waiting::Later(rx) => rx.blocking_recv().unwrap_or_else(|_| Err(writer_gone())),
        }
    }
}

pub use crate::api::{PendingCall, RecentCall};

/// The digest an approval names: SHA-256 over the canonical JSON (keys
/// sorted, no spaces) of `{"args", "call", "policy_hash", "session",
/// "tenant", "tool"}`, as `sha256:` and 64 hex digits.
pub fn call_digest(
    tenant: &str,
    session: &str,
    call: &str,
    tool: &str,
    args: &serde_json::Value,
    policy_hash: &str,
) -> String {
    let shown = serde_json::json!({
        "args": args,
        "call": call,
        "policy_hash": policy_hash,
        "session": session,
        "tenant": tenant,
        "tool": tool,
    });
    let mut text = String::new();
    canonical_json(&shown, &mut text);
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// JSON with object keys sorted at every level and no insignificant
/// space (whatever order the map type keeps).
fn canonical_json(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&m[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A session as `GET /v1/sessions/{id}` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionView {
    /// The tenant.
    pub tenant: String,
    /// The session.
    pub session: String,
    /// The agent it was opened for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its policy.
    pub policy_hash: String,
    /// Its ledger hash.
    pub ledger_hash: String,
    /// Events applied.
    pub events: u64,
    /// Each grant's remaining units (`null`: unlimited).
    pub ledger: BTreeMap<String, Option<u64>>,
    /// What is left of each amount budget (`budget B on PARAM`), by grant
    /// name, as an exact decimal string (a tenant budget: what the tenant's
    /// pool has left). Omitted when the policy has no budgets.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub budgets: BTreeMap<String, String>,
    /// What is left in the current window (the server's clock) of each
    /// renewing quota or budget (`quota N per 10m`, `budget B on PARAM
    /// per day`), one entry per limit. Omitted when the policy has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowView>,
    /// Calls paused for approval.
    pub pending: Vec<String>,
    /// False when the request found it already open (`POST /v1/sessions`).
    pub created: bool,
}

/// What is left of one renewing limit in the current window.
#[derive(Clone, Debug, Serialize)]
pub struct WindowView {
    /// The grant.
    pub grant: String,
    /// `quota` (units) or `budget` (an amount).
    pub kind: &'static str,
    /// The window's length in seconds.
    pub secs: u64,
    /// When the current window started (seconds, the server's clock).
    pub start: u64,
    /// What is left in it (an exact decimal string; a tenant limit: what
    /// the tenant's pool has left).
    pub left: String,
    /// Whether the tenant's sessions share it.
    pub per_tenant: bool,
}

/// What a policy reload did.
#[derive(Clone, Debug, Serialize)]
pub struct Reloaded {
    /// Whether the policy changed (false: the same hash was already running).
    pub changed: bool,
    /// The policy now running for new sessions.
    pub policy_hash: String,
    /// The policy it replaced.
    pub previous: String,
    /// The certify report, when certification was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<serde_json::Value>,
    /// Under `--require-certified`: whether the revision may allow what
    /// the running policy did not (then it ran only with
    /// `allow_widening`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub widens: Option<bool>,
    /// The audit record of the revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_seq: Option<u64>,
}

use answers::Answer;

struct Entry {
    tenant: String,
    id: String,
    agent: Option<String>,
    session: Session,
    /// The tenant's pool and order lock (shared with its other sessions).
    lane: TenantLane,
    /// The answer given to each recent or still open call, for retries
    /// (see [`Entry::trim_answers`]), kept compactly (`state/answers.rs`).
    /// Boxed: the table keeps 2 to 4 times as many slots as answers.
    answers: HashMap<Box<str>, Box<Answer>>,
    /// A keyed 64-bit hash of every call id the session has used: a call
    /// id whose answer is no longer kept is still refused (409), never
    /// decided twice.
    used: std::collections::HashSet<u64>,
    /// The number of answers at which they are trimmed next (half again
    /// what the last trim kept: calls left open for ever do not make each
    /// call scan them all).
    trim_at: usize,
    /// When it last applied an event (ms, the server's clock): idle
    /// eviction reads it.
    last_ms: u64,
    /// Evicted while a request waited for its lock: that request looks the
    /// session up again (see `state/evict.rs`).
    evicted: bool,
}

/// Answers of finished calls kept per session, for retries (the newest
/// ones; a retry of an older call is a 409 naming the audit log).
pub const RECENT_ANSWERS: usize = 8;

/// Graph nodes a new session keeps in memory by default
/// (`--compact-window`; 0 keeps the whole graph): 32, so between 32 and 64
/// nodes. Lineage naming a call older than that is denied as unknown (fail
/// closed); 64 cost about 100 bytes more per call at 100 calls a session,
/// over the 200 the issue allows (`docs/store.md`, "Memory").
pub const DEFAULT_COMPACT_WINDOW: usize = 32;

/// The hasher of call ids in [`Entry::used`]: keyed once per process (the
/// set is rebuilt by recovery, never stored).
fn id_hasher() -> &'static std::collections::hash_map::RandomState {
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEY.get_or_init(std::collections::hash_map::RandomState::new)
}

fn id_hash(id: &str) -> u64 {
    use std::hash::BuildHasher;
    id_hasher().hash_one(id)
}

/// The options of a session that keeps `window` graph nodes (`None`: the
/// whole graph) and draws on `pool`.
fn session_options(window: Option<u64>, pool: &TenantPool) -> SessionOptions {
    match window {
        Some(w) => SessionOptions::compact(usize::try_from(w).unwrap_or(usize::MAX)),
        None => SessionOptions::default(),
    }
    .pool(pool.clone())
}

struct Policies {
    current: CompiledPolicy,
    /// Every revision the log holds, held weakly: one that is not current
    /// and that no session uses is freed (only its hash stays known).
    by_hash: HashMap<Hash, WeakPolicy>,
    /// Strong references while the log is being recovered (a session
    /// record may name a revision that a later one replaced); dropped once
    /// open.
    pinned: Vec<CompiledPolicy>,
}

impl Policies {
    /// Records `policy` as a known revision, forgetting freed ones.
    fn remember(&mut self, policy: &CompiledPolicy, pin: bool) {
        self.by_hash.retain(|_, w| w.upgrade().is_some());
        self.by_hash.insert(policy.hash(), policy.downgrade());
        if pin {
            self.pinned.push(policy.clone());
        }
    }

    /// The revision with `hash`, while something still uses it.
    fn find(&self, hash: &str) -> Option<CompiledPolicy> {
        if self.current.hash().to_string() == hash {
            return Some(self.current.clone());
        }
        self.by_hash
            .iter()
            .find(|(h, _)| h.to_string() == hash)
            .and_then(|(_, w)| w.upgrade())
    }
}

type Key = (String, String);

/// What a request does to its session.
enum Step {
    /// Apply the event; `Meta` goes into its audit record.
    Apply(Event, Box<Meta>),
    /// Answer a retried call with its recorded answer.
    Replay(String),
}

/// What an event's audit record says besides the event: who sent it, the
/// time the client claimed, and for an approval what was approved and why.
#[derive(Clone, Debug, Default)]
struct Meta {
    actor: Option<String>,
    client_time: Option<u64>,
    digest: Option<String>,
    note: Option<String>,
}

/// What the gateway knows, shared with the store's writer thread (which
/// applies other replicas' records to it, on a shared store).
struct Shared {
    policies: RwLock<Policies>,
    sessions: RwLock<HashMap<Key, Arc<Mutex<Entry>>>>,
    /// Sessions closed (`DELETE /v1/sessions/{id}`): their ids are never
    /// reopened (their units stay spent).
    closed: RwLock<std::collections::HashSet<Key>>,
    pending: Mutex<BTreeMap<(String, String, String), PendingCall>>,
    /// Each tenant's pool of shared quotas (`quota N per tenant`), given to
    /// every session of the tenant. Always the replay of the log: it
    /// changes only when a session applies an event, and every applied
    /// event is logged in the order the pool saw it.
    pools: Mutex<HashMap<String, TenantLane>>,
    /// Seconds a paused call waits before it expires.
    pause_timeout: AtomicU64,
    /// Webhook notifications of pauses and settlements (`--notify-url`).
    notify: std::sync::OnceLock<Arc<crate::notify::Notifier>>,
    /// Graph nodes a new session keeps in memory (0: the whole graph). A
    /// session keeps the window it was opened with: its record says which.
    compact_window: AtomicU64,
    /// Idle-session eviction (`--evict-idle`) and its index.
    evict: evict::Evictor,
    /// Events between two snapshots of a session (0: never; see
    /// `snapshot`), and the sessions whose snapshot is due.
    snapshot_every: AtomicU64,
    snapshots_due: Mutex<Vec<Key>>,
    snapshot_stats: snapshot::Counters,
}

/// A tenant's pool, and the lock that keeps its sessions' events in the
/// log in the order they used the pool.
#[derive(Clone, Default)]
struct TenantLane {
    pool: TenantPool,
    order: Arc<Mutex<()>>,
}

/// Where an operation's record goes: submitted at once (the embedded
/// store: the operation ran on the request's thread), or handed back to the
/// writer that is running the operation inside its transaction (a shared
/// store).
struct Sink<'a> {
    local: Option<&'a Gateway>,
}

/// An operation's result (see [`Sink`]).
enum Emit<T> {
    Local(Pending<T>),
    Shared(Option<Box<Record>>, T),
}

impl Sink<'_> {
    fn emit<T>(&self, record: Option<Record>, value: T) -> Emit<T> {
        match (self.local, record) {
            (Some(g), Some(r)) => Emit::Local(g.submit(r, value)),
            (Some(g), None) => Emit::Local(g.barrier(value)),
            (None, r) => Emit::Shared(r.map(Box::new), value),
        }
    }
}

/// The gateway: sessions by tenant, the pending approvals, the log.
pub struct Gateway {
    shared: Arc<Shared>,
    /// The store is shared with other replicas: every operation is decided
    /// inside the store's transaction, after catching up.
    replicated: bool,
    committer: Writer,
    certification: Certification,
    failed: Arc<AtomicBool>,
    counter: AtomicU64,
    /// A random number of this process, in generated session ids.
    nonce: u32,
    /// Counters for `GET /metrics`.
    pub metrics: Metrics,
    /// The largest distance (seconds) between a client's claimed time and
    /// the server's clock; farther is a 422.
    max_skew: AtomicU64,
    /// Refusal records written in the current second, and refusals not
    /// recorded since the last record (a flood of bad credentials must not
    /// fill the disk).
    refusals: Mutex<RefusalBudget>,
}

/// At most [`REFUSALS_PER_SECOND`] refusal records a second; the others
/// are counted, and the next record says how many were left out.
#[derive(Default)]
struct RefusalBudget {
    second: u64,
    written: u32,
    left_out: u64,
}

/// Refusal records written per second at most.
pub const REFUSALS_PER_SECOND: u32 = 20;

/// How long a paused call waits by default (`--pause-timeout`): one hour.
pub const DEFAULT_PAUSE_TIMEOUT: u64 = 3600;

/// How far a client's claimed time may be from the server's clock by
/// default (`--max-clock-skew`): five minutes.
pub const DEFAULT_MAX_SKEW: u64 = 300;

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn fingerprint(call: &Call) -> [u8; 16] {
    let mut c = call.clone();
    c.time = 0;
    c.session = None;
    let bytes = serde_json::to_vec(&c).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    let mut out = [0; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// The API error for an event the session cannot apply (404, 409, 422,
/// 507), naming the field at fault.
pub fn step_error(e: StepError) -> ApiError {
    match &e {
        StepError::DuplicateCall(_) => ApiError::field(409, "call.id", e.to_string()),
        StepError::UnknownCall(_) => ApiError::field(404, "call", e.to_string()),
        StepError::WrongState { .. } => ApiError::field(409, "call", e.to_string()),
        StepError::TimeWentBackwards { .. } => ApiError::field(422, "time", e.to_string()),
        StepError::GraphFull => ApiError::new(507, e.to_string()),
        StepError::UnknownSet { .. } | StepError::NotSeedable { .. } => {
            ApiError::field(422, "sets", e.to_string())
        }
        _ => ApiError::new(422, e.to_string()),
    }
}

fn policy_record(
    compiled: &CompiledPolicy,
    source: &str,
    certificate: Option<serde_json::Value>,
) -> Result<Record, StoreError> {
    Ok(Record {
        time_ms: now_ms(),
        kind: Kind::Policy,
        policy_hash: compiled.hash().to_string(),
        policy: Some(serde_json::to_value(compiled.policy())?),
        source: Some(source.to_string()),
        certificate,
        ..Record::default()
    })
}

/// Whether a policy revision must be certified against the running policy
/// before it runs (`--require-certified`), and the rule-side checker
/// `agenra certify` uses for revisions that change rules (the CLI passes
/// the Z3 one; without one such revisions are `unknown`, so refused).
#[derive(Clone, Copy, Default)]
pub struct Certification {
    /// Refuse a revision that is not certified.
    pub required: bool,
    /// The rule side of `agenra certify` (`agenra_smt::rules::RuleChecker`).
    pub rules: Option<&'static (dyn agenra_certify::RuleOracle + Send + Sync)>,
    /// The policy the server starts with (or reloads on SIGHUP) may widen
    /// what the last one allowed (`agenra serve --allow-widening`).
    pub allow_widening: bool,
}

impl From<bool> for Certification {
    /// `required`, without a rule-side checker.
    fn from(required: bool) -> Certification {
        Certification {
            required,
            rules: None,
            allow_widening: false,
        }
    }
}

impl std::fmt::Debug for Certification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certification")
            .field("required", &self.required)
            .field("rules", &self.rules.map(|_| "rule oracle"))
            .field("allow_widening", &self.allow_widening)
            .finish()
    }
}

impl Certification {
    /// Certifies `new` against `old`; the report as JSON, and whether it
    /// certifies.
    pub fn certify(&self, old: &Policy, new: &Policy) -> (serde_json::Value, bool) {
        let rules = self.rules.map(|r| r as &dyn agenra_certify::RuleOracle);
        let report = agenra_certify::certify_with(old, new, rules);
        let ok = report.verdict == agenra_certify::Verdict::Certified;
        (
            serde_json::to_value(&report).unwrap_or(serde_json::Value::Null),
            ok,
        )
    }

    /// `--require-certified`'s test of a revision: `new` must preserve every
    /// workflow of `old` (`certify old new`), and must not allow what `old`
    /// did not (`certify new old`: every workflow of `new` is one of `old`)
    /// unless `allow_widening`. The forward report and whether it may
    /// widen; `Err` says why it is refused (`widens…` for a widening).
    pub fn check_revision(
        &self,
        old: &Policy,
        new: &Policy,
        allow_widening: bool,
    ) -> Result<(serde_json::Value, bool), String> {
        let (report, ok) = self.certify(old, new);
        if !ok {
            return Err(format!("not certified: {report}"));
        }
        let rules = self.rules.map(|r| r as &dyn agenra_certify::RuleOracle);
        let reverse = agenra_certify::certify_with(new, old, rules);
        let widens = reverse.verdict != agenra_certify::Verdict::Certified;
        if widens && !allow_widening {
            let witness = match (&reverse.lost_workflow, reverse.verdict) {
                (Some(events), _) => format!(
                    "it allows a workflow the running policy does not: {}",
                    serde_json::to_string(events).unwrap_or_default()
                ),
                (None, v) => format!(
                    "no proof that it allows nothing new ({}: {})",
                    v.as_str(),
                    reverse.reasons.join("; ")
                ),
            };
            return Err(format!(
                "widens what is allowed ({witness}); an admin runs it only with allow_widening"
            ));
        }
        Ok((report, widens))
    }
}

/// The call (or task) ids of a decision's path in `session`: `context`
/// for what the session had read, `#N` for another node.
fn path_ids(session: &Session, path: &[NodeId]) -> Vec<String> {
    path.iter()
        .map(|n| {
            if *n == agenra_core::monitor::CONTEXT {
                return "context".to_string();
            }
            session
                .state()
                .call_id_of(*n)
                .map_or_else(|| format!("#{}", n.0), str::to_string)
        })
        .collect()
}

/// The API's answer ([`Outcome`]) to `event`, which `session` (session
/// `id` of `tenant`) has just applied with the output `out`; `ledger_hash`
/// is the one after the event, `audit_seq` is left empty. Also used by
/// `agenra mcp-proxy`, which serves the approval endpoints for its own
/// session.
pub fn describe(
    session: &Session,
    tenant: &str,
    id: &str,
    event: &Event,
    out: &StepOutput,
) -> Outcome {
    let policy = session.policy();
    let names = |ids: &[usize]| -> Vec<String> {
        ids.iter()
            .filter_map(|&g| policy.grants.get(g).map(|g| g.name.clone()))
            .collect()
    };
    let (call, kind) = call_and_kind(event);
    let mut outcome = Outcome {
        tenant: tenant.to_string(),
        session: id.to_string(),
        kind,
        call,
        decision: None,
        rule: None,
        reason: String::new(),
        path: vec![],
        grants: vec![],
        refunded: vec![],
        left: None,
        policy_hash: session.policy_hash().to_string(),
        ledger_hash: String::new(),
        audit_seq: None,
        replayed: false,
    };
    match out {
        StepOutput::Decision(d) => {
            outcome.decision = Some(d.verdict.as_str());
            outcome.rule = Some(d.rule.name(policy));
            outcome.reason = d.reason_text(policy);
            // A flow's path is resolved right after the decision, when
            // the call's node is always there.
            let nodes = session.path(d).unwrap_or_default();
            outcome.path = path_ids(session, &nodes);
            outcome.grants = names(&d.grants);
            outcome.refunded = names(&d.refunded);
            if let agenra_core::decision::Reason::Granted { left, .. } = d.reason {
                outcome.left = left;
            }
            outcome.ledger_hash = d.ledger_hash.to_string();
        }
        StepOutput::Applied(a) => {
            outcome.rule = a.rule.map(|r: Rule| r.name(policy));
            outcome.reason = a.reason_text(policy);
            outcome.refunded = names(&a.refunded);
            outcome.ledger_hash = a.ledger_hash.to_string();
        }
    }
    outcome
}

/// The call (or task) an event is about, and its kind as answers name it.
fn call_and_kind(event: &Event) -> (String, &'static str) {
    match event {
        Event::Call(c) => (c.id.clone(), "call"),
        Event::Result(r) => (r.call.clone(), "result"),
        Event::Approve(a) => (a.call.clone(), "approve"),
        Event::Reject(a) => (a.call.clone(), "reject"),
        Event::Task(t) => (t.id.clone(), "task"),
    }
}

impl Entry {
    /// A session just opened (or replayed from its `session` record) under
    /// `compiled`, keeping `window` graph nodes, drawing on `lane`.
    fn opened(
        tenant: String,
        id: String,
        agent: Option<String>,
        compiled: &CompiledPolicy,
        window: Option<u64>,
        lane: TenantLane,
    ) -> Entry {
        Entry {
            tenant,
            id,
            agent,
            session: compiled.session_with(session_options(window, &lane.pool)),
            lane,
            answers: HashMap::new(),
            used: Default::default(),
            trim_at: 0,
            last_ms: now_ms(),
            evicted: false,
        }
    }

    /// Replays a recorded event: it must give the recorded decision
    /// (`verdict`) and ledger hash, as when it was decided.
    fn replay_event(
        &mut self,
        recorded: serde_json::Value,
        verdict: Option<&str>,
        ledger_hash: Option<&str>,
        meta: Meta,
    ) -> Result<(Event, Outcome), String> {
        // As recorded: a log from before ids were checked replays.
        let event = Event::from_recorded(recorded).map_err(|e| format!("unreadable event: {e}"))?;
        let (outcome, _) = self
            .apply(&event, meta)
            .map_err(|e| format!("the event no longer applies: {e}"))?;
        if outcome.decision != verdict || Some(outcome.ledger_hash.as_str()) != ledger_hash {
            return Err(format!(
                "replaying gives {} with ledger {}, the record says {} with ledger {}",
                outcome.decision.unwrap_or("no decision"),
                outcome.ledger_hash,
                verdict.unwrap_or("no decision"),
                ledger_hash.unwrap_or("none")
            ));
        }
        Ok((event, outcome))
    }

    /// Applies `event` and describes it (the answer, and the audit record
    /// without its position).
    fn apply(&mut self, event: &Event, meta: Meta) -> Result<(Outcome, Record), StepError> {
        let out = self.session.step(event)?;
        self.last_ms = now_ms();
        let outcome = describe(&self.session, &self.tenant, &self.id, event, &out);
        let mut stored = event.clone();
        match &mut stored {
            Event::Call(c) => c.session = None,
            Event::Result(r) => r.session = None,
            Event::Approve(a) | Event::Reject(a) => a.session = None,
            Event::Task(t) => t.session = None,
        }
        let record = Record {
            time_ms: now_ms(),
            kind: Kind::Event,
            tenant: Some(self.tenant.clone()),
            session: Some(self.id.clone()),
            agent: None,
            policy_hash: outcome.policy_hash.clone(),
            event: serde_json::to_value(&stored).ok(),
            verdict: outcome.decision.map(str::to_string),
            rule: outcome.rule.clone(),
            reason: Some(outcome.reason.clone()),
            path: outcome.path.clone(),
            grants: if outcome.grants.is_empty() {
                outcome.refunded.clone()
            } else {
                outcome.grants.clone()
            },
            ledger_hash: Some(outcome.ledger_hash.clone()),
            actor: meta.actor,
            client_time: meta.client_time,
            digest: meta.digest,
            note: meta.note,
            ..Record::default()
        };
        if let Event::Call(c) = event {
            self.used.insert(id_hash(&c.id));
            self.answers.insert(
                c.id.as_str().into(),
                Box::new(Answer::new(fingerprint(c), &outcome)),
            );
            self.trim_answers();
        }
        Ok((outcome, record))
    }

    /// Keeps the answers of open (running or paused) calls and of the
    /// [`RECENT_ANSWERS`] newest others, once half as many again are held
    /// (so the cost is amortized: a trim of `n` answers comes `n / 2` calls
    /// after the last). What the answers serve besides retries (the
    /// pending list, `calls`, the recent calls of the approvals page) reads
    /// open or recent calls only.
    fn trim_answers(&mut self) {
        if self.answers.len() < self.trim_at.max(RECENT_ANSWERS + RECENT_ANSWERS / 2) {
            return;
        }
        use agenra_core::graph::Status;
        let state = self.session.state();
        let open = |id: &str| {
            matches!(
                state.call_status(id),
                Some(Status::Running | Status::Paused)
            )
        };
        let mut done: Vec<(Option<NodeId>, &Box<str>)> = self
            .answers
            .keys()
            .filter(|id| !open(id))
            .map(|id| (state.call_node(id), id))
            .collect();
        done.sort();
        let gone: Vec<Box<str>> = done[..done.len().saturating_sub(RECENT_ANSWERS)]
            .iter()
            .map(|(_, id)| (*id).clone())
            .collect();
        for id in gone {
            self.answers.remove(&id);
        }
        let kept = self.answers.len();
        self.trim_at = kept + kept / 2;
    }

    /// The recorded answer to call `id`, as it was given.
    fn replayed(&self, id: &str) -> Option<Outcome> {
        let a = self.answers.get(id)?;
        a.outcome(
            &self.tenant,
            &self.id,
            id,
            self.session.policy_hash().to_string(),
        )
    }

    fn view(&self, created: bool) -> SessionView {
        let policy = self.session.policy();
        let state = self.session.state();
        let ledger = policy
            .grants
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let left = match (state.ledger.remaining(i), &g.quota) {
                    // A shared grant: what is left in the tenant's pool.
                    (_, Quota::Limited(quota)) if policy.is_shared(i) => {
                        Some(self.lane.pool.snapshot().remaining(&g.name, *quota))
                    }
                    (Some(Quota::Limited(n)), _) => Some(n),
                    _ => None,
                };
                (g.name.clone(), left)
            })
            .collect();
        let budgets = policy
            .budgets
            .iter()
            .filter_map(|b| {
                let name = &policy.grants.get(b.grant)?.name;
                Some((name.clone(), self.session.budget_left(b.grant)?.to_string()))
            })
            .collect();
        let now = monotone(now_secs(), state.time);
        let windows = (0..policy.grants.len())
            .filter(|&g| policy.renews(g))
            .flat_map(|g| self.session.window_left(g, now))
            .filter_map(|(i, left)| {
                let r = policy.renewals.get(i)?;
                Some(WindowView {
                    grant: policy.grants.get(r.grant)?.name.clone(),
                    kind: if r.limit.is_amount() {
                        "budget"
                    } else {
                        "quota"
                    },
                    secs: r.secs,
                    start: agenra_core::window::window_of(r, now).saturating_mul(r.secs),
                    left: left.to_string(),
                    per_tenant: r.per_tenant,
                })
            })
            .collect();
        let mut pending: Vec<String> = self
            .answers
            .keys()
            .filter(|id| state.call_status(id) == Some(agenra_core::graph::Status::Paused))
            .map(|id| id.to_string())
            .collect();
        pending.sort();
        SessionView {
            tenant: self.tenant.clone(),
            session: self.id.clone(),
            agent: self.agent.clone(),
            policy_hash: self.session.policy_hash().to_string(),
            ledger_hash: state.ledger_hash().to_string(),
            events: state.seq,
            ledger,
            budgets,
            windows,
            pending,
            created,
        }
    }
}

impl Shared {
    /// The pool (and order lock) of `tenant`, made on first use.
    fn lane(&self, tenant: &str) -> TenantLane {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        pools.entry(tenant.to_string()).or_default().clone()
    }

    fn entry(&self, tenant: &str, session: &str) -> Result<Arc<Mutex<Entry>>, ApiError> {
        self.check_not_closed(tenant, session)?;
        let key: Key = (tenant.to_string(), session.to_string());
        // Reloaded from the log if it was evicted.
        self.reload(&key)?.ok_or_else(|| {
                ApiError::field(
                    404,
                    "session",
                    format!("unknown session `{session}` of tenant `{tenant}` (open it with POST /v1/sessions)"),
                )
            })
    }

    fn current_policy(&self) -> CompiledPolicy {
        self.policies
            .read()
            .map(|p| p.current.clone())
            .unwrap_or_else(|p| p.into_inner().current.clone())
    }

    fn create_session(
        &self,
        sink: &Sink<'_>,
        tenant: String,
        id: String,
        agent: Option<String>,
    ) -> Result<Emit<SessionView>, ApiError> {
        let key = (tenant.clone(), id.clone());
        // An evicted session is open: found, never opened a second time.
        self.reload(&key)?;
        let mut sessions = self
            .sessions
            .write()
            .map_err(|_| ApiError::new(500, "session table poisoned"))?;
        self.check_not_closed(&tenant, &id)?;
        evict::check_not_evicted(&self.evict, &key)?;
        if let Some(existing) = sessions.get(&key) {
            let e = existing
                .lock()
                .map_err(|_| ApiError::new(500, "session poisoned"))?;
            if e.agent != agent {
                return Err(ApiError::field(
                    409,
                    "session",
                    format!(
                        "session `{id}` of tenant `{tenant}` is already open for agent {:?}",
                        e.agent
                    ),
                ));
            }
            return Ok(sink.emit(None, e.view(false)));
        }
        // The policy table stays read-locked until the record is emitted: a
        // revision cannot be recorded in between, so a session record
        // always names the policy current at its place in the log.
        let policies = self
            .policies
            .read()
            .map_err(|_| ApiError::new(500, "policy table poisoned"))?;
        let compiled = policies.current.clone();
        let lane = self.lane(&tenant);
        let window = Some(self.compact_window.load(Ordering::Relaxed)).filter(|&w| w > 0);
        let entry = Entry::opened(
            tenant.clone(),
            id.clone(),
            agent.clone(),
            &compiled,
            window,
            lane,
        );
        let view = entry.view(true);
        sessions.insert(key, Arc::new(Mutex::new(entry)));
        let record = Record {
            time_ms: now_ms(),
            kind: Kind::Session,
            tenant: Some(tenant),
            session: Some(id),
            agent,
            policy_hash: compiled.hash().to_string(),
            window,
            ..Record::default()
        };
        // Emitted under the table's lock: the session's record precedes
        // every event of it in the log.
        let emitted = sink.emit(Some(record), view);
        drop(policies);
        Ok(emitted)
    }

    fn run(
        &self,
        sink: &Sink<'_>,
        tenant: &str,
        session: &str,
        make: impl FnOnce(&Entry) -> Result<Step, ApiError>,
    ) -> Result<Emit<Outcome>, ApiError> {
        let entry = self.unevicted_entry(tenant, session)?;
        let mut e = entry
            .lock()
            .map_err(|_| ApiError::new(500, "session poisoned"))?;
        // Closed or evicted while this request waited for the session's lock.
        self.check_not_closed(tenant, session)?;
        evict::check_live(&e)?;
        let (event, meta) = match make(&e)? {
            Step::Apply(event, meta) => {
                crate::api::check_identifiers(&event)?;
                (event, *meta)
            }
            Step::Replay(id) => {
                // A retried call: its recorded answer, once durable (the
                // first attempt may still be committing).
                let mut out = e
                    .replayed(&id)
                    .ok_or_else(|| ApiError::new(500, "no recorded answer to replay"))?;
                out.replayed = true;
                return Ok(sink.emit(None, out));
            }
        };
        // A policy with shared quotas or tenant budgets: the tenant's sessions apply and log
        // their events one at a time, so that the log holds them in the
        // order they used the pool (replaying it rebuilds the same pool and
        // the same decisions).
        let order = Arc::clone(&e.lane.order);
        // (The same test decides, on a log partitioned by session, that the
        // session's events go to its tenant's pool partition.)
        let _in_order = if !parts::pooled_policy(e.session.policy()) {
            None
        } else {
            Some(order.lock().unwrap_or_else(|p| p.into_inner()))
        };
        let (outcome, record) = e.apply(&event, meta).map_err(step_error)?;
        self.note_snapshot_due(&e);
        if let Ok(mut p) = self.pending.lock() {
            let timeout = self.pause_timeout.load(Ordering::Relaxed);
            track_pending(&mut p, &event, &outcome, timeout);
            // Queued under the session's lock: in the log's order.
            if let Some(n) = self.notify.get() {
                let key = (
                    outcome.tenant.clone(),
                    outcome.session.clone(),
                    outcome.call.clone(),
                );
                let paused = matches!(event, Event::Call(_))
                    .then(|| p.get(&key))
                    .flatten();
                n.event(
                    &outcome,
                    paused,
                    record.actor.as_deref(),
                    record.note.as_deref(),
                );
            }
        }
        // Emitted under the session's lock: the log holds the session's
        // events in the order they were applied.
        Ok(sink.emit(Some(record), outcome))
    }
}

impl Shared {
    /// Nothing recovered yet; `policy` for new sessions.
    fn new(policy: &CompiledPolicy) -> Shared {
        Shared {
            policies: RwLock::new(Policies {
                current: policy.clone(),
                by_hash: HashMap::new(),
                pinned: Vec::new(),
            }),
            sessions: RwLock::new(HashMap::new()),
            closed: RwLock::new(std::collections::HashSet::new()),
            pending: Mutex::new(BTreeMap::new()),
            pools: Mutex::new(HashMap::new()),
            pause_timeout: AtomicU64::new(DEFAULT_PAUSE_TIMEOUT),
            notify: std::sync::OnceLock::new(),
            compact_window: AtomicU64::new(DEFAULT_COMPACT_WINDOW as u64),
            evict: evict::Evictor::default(),
            snapshot_every: AtomicU64::new(0),
            snapshots_due: Mutex::new(Vec::new()),
            snapshot_stats: Default::default(),
        }
    }
}

impl Shared {
    /// Applies one stored record exactly as recovery does: a policy record
    /// becomes the policy new sessions get, a session record opens the
    /// session, an event is replayed through the monitor and must give the
    /// recorded decision and ledger hash. Returns a policy record's policy.
    fn replay(&self, line: &[u8], recovering: bool) -> Result<Option<CompiledPolicy>, String> {
        let r: Record =
            serde_json::from_slice(line).map_err(|e| format!("not an audit record: {e}"))?;
        match r.kind {
            Kind::Policy => {
                let value = r.policy.ok_or("policy record without its policy")?;
                let p: Policy =
                    serde_json::from_value(value).map_err(|e| format!("unreadable policy: {e}"))?;
                let c = CompiledPolicy::new(p).map_err(|e| e.to_string())?;
                if c.hash().to_string() != r.policy_hash {
                    return Err(format!(
                        "the stored policy hashes to {}, the record says {}",
                        c.hash(),
                        r.policy_hash
                    ));
                }
                let mut policies = self.policies.write().map_err(|_| "poisoned")?;
                let pin = recovering;
                policies.remember(&c, pin);
                policies.current = c.clone();
                Ok(Some(c))
            }
            Kind::Session => {
                let (Some(tenant), Some(id)) = (r.tenant, r.session) else {
                    return Err("session record without tenant or session".into());
                };
                let compiled = {
                    let policies = self.policies.read().map_err(|_| "poisoned")?;
                    policies
                        .find(&r.policy_hash)
                        .ok_or_else(|| format!("unknown policy {}", r.policy_hash))?
                };
                let lane = self.lane(&tenant);
                // With the window it was opened with: its decisions replay.
                let entry = Entry::opened(
                    tenant.clone(),
                    id.clone(),
                    r.agent,
                    &compiled,
                    r.window,
                    lane,
                );
                self.sessions
                    .write()
                    .map_err(|_| "poisoned")?
                    .insert((tenant, id), Arc::new(Mutex::new(entry)));
                Ok(None)
            }
            Kind::Event => {
                let (Some(tenant), Some(id), Some(ev)) = (r.tenant, r.session, r.event) else {
                    return Err("event record without tenant, session or event".into());
                };
                let entry = self
                    .sessions
                    .read()
                    .map_err(|_| "poisoned")?
                    .get(&(tenant.clone(), id.clone()))
                    .cloned()
                    .ok_or_else(|| format!("event of unknown session {tenant}/{id}"))?;
                let mut entry = entry.lock().map_err(|_| "poisoned")?;
                let (event, outcome) = entry.replay_event(
                    ev,
                    r.verdict.as_deref(),
                    r.ledger_hash.as_deref(),
                    Meta::default(),
                )?;
                let mut pending = self.pending.lock().map_err(|_| "poisoned")?;
                let timeout = self.pause_timeout.load(Ordering::Relaxed);
                track_pending(&mut pending, &event, &outcome, timeout);
                Ok(None)
            }
            // Nothing was decided.
            // Nothing was decided; a snapshot is read by recovery only
            // (`snapshot`): this process already holds the session.
            Kind::Refused | Kind::Checkpoint | Kind::Snapshot => Ok(None),
            Kind::Closed => {
                let (Some(tenant), Some(id)) = (r.tenant, r.session) else {
                    return Err("closed record without tenant or session".into());
                };
                self.forget(&tenant, &id).map_err(|e| e.error)?;
                Ok(None)
            }
        }
    }

    /// Makes `policy` the one new sessions get. Returns its revision record
    /// when the log last ran another policy (or none), certified against
    /// that one with `require_certified`.
    fn adopt(
        &self,
        policy: &CompiledPolicy,
        source: &str,
        certification: Certification,
    ) -> Result<Option<Record>, OpenError> {
        let mut policies = self
            .policies
            .write()
            .map_err(|_| OpenError::Policy("policy table poisoned".into()))?;
        let recorded = !policies.by_hash.is_empty();
        if recorded && policies.current.hash() == policy.hash() {
            return Ok(None);
        }
        let certificate = if recorded && certification.required {
            let old = &policies.current;
            let (report, _) = certification
                .check_revision(old.policy(), policy.policy(), certification.allow_widening)
                .map_err(|why| {
                    OpenError::NotCertified(format!(
                        "--require-certified: {} against the policy the store last ran ({}): {why}",
                        policy.hash(),
                        old.hash(),
                    ))
                })?;
            Some(report)
        } else {
            None
        };
        let previous = recorded.then(|| policies.current.hash().to_string());
        let mut record = policy_record(policy, source, certificate)?;
        record.actor = Some("operator:start".into());
        record.previous = previous;
        policies.remember(policy, false);
        policies.current = policy.clone();
        Ok(Some(record))
    }
}

impl Gateway {
    /// Recovers every session from `log`, then runs `policy` for new
    /// sessions (recording it as a revision when it differs from the one the
    /// log last ran; with `require_certified`, only if `agenra certify`
    /// certifies it against that one).
    ///
    /// On a shared log (PostgreSQL, several replicas), every later
    /// operation is decided inside the store's transaction after applying
    /// what the other replicas appended meanwhile (`docs/store.md`).
    pub fn open(
        log: Log,
        policy: CompiledPolicy,
        source: &str,
        certification: impl Into<Certification>,
    ) -> Result<Gateway, OpenError> {
        let certification = certification.into();
        let shared = Arc::new(Shared::new(&policy));
        // Up to the checked head: on a shared log, what other replicas
        // append meanwhile is caught up with by the first transaction.
        shared.recover(&log).map_err(|e| match e {
            StoreError::Diverged { seq, reason } => OpenError::Recover { seq, reason },
            other => OpenError::Store(other),
        })?;
        // Recovered: revisions that no session uses are freed from now on.
        if let Ok(mut p) = shared.policies.write() {
            p.pinned.clear();
        }
        let replicated = log.is_shared();
        let committer = if replicated {
            let s = Arc::clone(&shared);
            Writer::Chain(Committer::start_shared(
                log,
                1024,
                Box::new(move |seq, line| {
                    s.replay(line, false)
                        .map(|_| ())
                        .map_err(|reason| StoreError::Diverged { seq, reason })
                }),
            ))
        } else {
            Writer::Chain(Committer::start(log, 1024))
        };
        Gateway::started(shared, committer, replicated, policy, source, certification)
    }

    /// Records `policy` as the one new sessions get (inside a transaction
    /// on a shared log), and makes the gateway.
    fn started(
        shared: Arc<Shared>,
        committer: Writer,
        replicated: bool,
        policy: CompiledPolicy,
        source: &str,
        certification: Certification,
    ) -> Result<Gateway, OpenError> {
        let failed = Arc::new(AtomicBool::new(false));
        if replicated {
            // Decided after catching up: another replica may have recorded
            // a policy since the scan above.
            let (tx, rx) = std::sync::mpsc::channel::<Result<(), OpenError>>();
            let refused = tx.clone();
            let s = Arc::clone(&shared);
            let (policy, source) = (policy.clone(), source.to_string());
            committer.decide_on(
                &shared,
                None,
                Box::new(move || match s.adopt(&policy, &source, certification) {
                    Ok(record) => {
                        let done: Done = Box::new(move |r| {
                            let _ = tx.send(r.map(|_| ()).map_err(OpenError::Store));
                        });
                        (record, done)
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        (None, Box::new(|_| {}) as Done)
                    }
                }),
                Box::new(move |r| {
                    let _ = refused.send(r.map(|_| ()).map_err(OpenError::Store));
                }),
            );
            rx.recv().unwrap_or_else(|_| {
                Err(OpenError::Store(StoreError::Stopped(
                    "the writer thread is gone".into(),
                )))
            })?;
        } else if let Some(r) = shared.adopt(&policy, source, certification)? {
            committer.submit_wait(r)?;
        }
        if let (false, Writer::Chain(c)) = (replicated, &committer) {
            shared.evict.attach(c.reader());
        }
        Ok(Gateway {
            shared,
            replicated,
            committer,
            certification,
            failed,
            counter: AtomicU64::new(0),
            nonce: {
                use std::hash::{BuildHasher, Hasher};
                // std seeds each `RandomState` from the OS's randomness.
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u64(now_ms());
                h.finish() as u32
            },
            metrics: Metrics::default(),
            max_skew: AtomicU64::new(DEFAULT_MAX_SKEW),
            refusals: Mutex::new(RefusalBudget::default()),
        })
    }

    /// Whether the policy file may widen what the last one allowed
    /// (`--allow-widening`, for SIGHUP reloads).
    pub fn allow_widening(&self) -> bool {
        self.certification.allow_widening
    }

    /// Whether the store is shared with other replicas (PostgreSQL).
    pub fn is_replicated(&self) -> bool {
        self.replicated
    }

    fn check_ok(&self) -> Result<(), ApiError> {
        if self.failed.load(Ordering::Relaxed) {
            return Err(failed_error());
        }
        Ok(())
    }

    fn submit<T>(&self, record: Record, value: T) -> Pending<T> {
        let (tx, rx) = oneshot::channel();
        let failed = Arc::clone(&self.failed);
        let noted = self.shared.index_note(&record);
        self.committer.submit(
            record,
            Box::new(move |r| {
                mark_failed(&failed, &r);
                if let (Some(note), Ok(head)) = (noted, &r) {
                    note(head.seq);
                }
                let _ = tx.send(r);
            }),
        );
        Pending {
            inner: Waiting::Known {
                value,
                rx,
                fresh: true,
            },
        }
    }

    fn barrier<T>(&self, value: T) -> Pending<T> {
        let (tx, rx) = oneshot::channel();
        self.committer.barrier(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        Pending {
            inner: Waiting::Known {
                value,
                rx,
                fresh: false,
            },
        }
    }

    /// Runs `op`: here, submitting its record at once (the embedded store),
    /// or inside the store's next transaction, after catching up on what
    /// other replicas appended (a shared store). Either way the answer is
    /// sent only once the record is durable.
    fn exec<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Shared, &Sink<'_>) -> Result<Emit<T>, ApiError> + Send + 'static,
    ) -> Result<Pending<T>, ApiError> {
        self.exec_on(None, op)
    }

    /// [`Gateway::exec`] for an operation on `target` (tenant, session): on
    /// a log partitioned by session its transaction locks only that
    /// session's partitions.
    fn exec_on<T: Send + 'static>(
        &self,
        target: Option<(String, String)>,
        op: impl FnOnce(&Shared, &Sink<'_>) -> Result<Emit<T>, ApiError> + Send + 'static,
    ) -> Result<Pending<T>, ApiError> {
        self.check_ok()?;
        if !self.replicated {
            return match op(&self.shared, &Sink { local: Some(self) })? {
                Emit::Local(p) => Ok(p),
                Emit::Shared(..) => Err(ApiError::new(500, "an operation escaped its store")),
            };
        }
        type Reply<T> = oneshot::Sender<Result<(T, Option<u64>), ApiError>>;
        let (tx, rx) = oneshot::channel();
        let slot: Arc<Mutex<Option<Reply<T>>>> = Arc::new(Mutex::new(Some(tx)));
        let send = |slot: &Arc<Mutex<Option<Reply<T>>>>, r: Result<(T, Option<u64>), ApiError>| {
            if let Some(tx) = slot.lock().ok().and_then(|mut s| s.take()) {
                let _ = tx.send(r);
            }
        };
        let refused_slot = Arc::clone(&slot);
        let refused_failed = Arc::clone(&self.failed);
        let shared = Arc::clone(&self.shared);
        let failed = Arc::clone(&self.failed);
        self.committer.decide_on(
            &self.shared,
            target,
            Box::new(move || {
                if failed.load(Ordering::Relaxed) {
                    send(&slot, Err(failed_error()));
                    return (None, Box::new(|_| {}) as Done);
                }
                match op(&shared, &Sink { local: None }) {
                    Ok(Emit::Shared(record, value)) => {
                        let fresh = record.is_some();
                        let done: Done = Box::new(move |r| {
                            mark_failed(&failed, &r);
                            send(
                                &slot,
                                r.map(|h| (value, fresh.then_some(h.seq)))
                                    .map_err(not_recorded),
                            );
                        });
                        (record.map(|r| *r), done)
                    }
                    Ok(Emit::Local(_)) => {
                        send(
                            &slot,
                            Err(ApiError::new(500, "an operation escaped its store")),
                        );
                        (None, Box::new(|_| {}) as Done)
                    }
                    Err(e) => {
                        send(&slot, Err(e));
                        (None, Box::new(|_| {}) as Done)
                    }
                }
            }),
            Box::new(move |r| {
                mark_failed(&refused_failed, &r);
                let e = match r {
                    Err(e) => not_recorded(e),
                    Ok(_) => ApiError::new(500, "refused without a reason"),
                };
                send(&refused_slot, Err(e));
            }),
        );
        Ok(Pending {
            inner: Waiting::Later(rx),
        })
    }

    /// Whether a write failed.
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// The policy new sessions get.
    pub fn current_policy(&self) -> CompiledPolicy {
        self.shared.current_policy()
    }

    /// Open sessions.
    pub fn session_count(&self) -> usize {
        self.shared.sessions.read().map(|s| s.len()).unwrap_or(0)
    }

    /// Calls waiting for approval.
    pub fn pending_count(&self) -> usize {
        self.shared.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Transactions and records the store has written since start.
    pub fn store_stats(&self) -> agenra_store::CommitStats {
        self.committer.stats()
    }

    /// Opens a session (or finds it open, for a retried request).
    pub fn create_session(
        &self,
        tenant: Option<String>,
        session: Option<String>,
        agent: Option<String>,
    ) -> Result<Pending<SessionView>, ApiError> {
        self.check_ok()?;
        let tenant = tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        check_name("tenant", &tenant)?;
        if let Some(a) = &agent {
            check_name("agent", a)?;
        }
        let id = match session {
            Some(s) => {
                check_name("session", &s)?;
                s
            }
            // Unique across replicas too: the time, a random number drawn
            // per process, and a counter.
            None => format!(
                "s-{:x}-{:x}-{}",
                now_ms(),
                self.nonce,
                self.counter.fetch_add(1, Ordering::Relaxed)
            ),
        };
        let target = Some((tenant.clone(), id.clone()));
        self.exec_on(target, move |shared, sink| {
            shared.create_session(sink, tenant, id, agent)
        })
    }

    /// Applies one event to a session under its lock, logs it, and returns
    /// the answer to send once it is durable.
    fn run(
        &self,
        tenant: &str,
        session: &str,
        make: impl FnOnce(&Entry) -> Result<Step, ApiError> + Send + 'static,
    ) -> Result<Pending<Outcome>, ApiError> {
        let (tenant, session) = (tenant.to_string(), session.to_string());
        let target = Some((tenant.clone(), session.clone()));
        let pending = self.exec_on(target, move |shared, sink| {
            shared.run(sink, &tenant, &session, make)
        });
        self.write_due_snapshots();
        pending
    }

    fn tenant(tenant: Option<String>) -> Result<String, ApiError> {
        let t = tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        check_name("tenant", &t)?;
        Ok(t)
    }

    /// Sends each new pause and its settlement to `n` from now on (once:
    /// a second notifier is refused, `false`).
    pub fn set_notifier(&self, n: Arc<crate::notify::Notifier>) -> bool {
        self.shared.notify.set(n).is_ok()
    }

    /// The notifier, when there is one.
    pub fn notifier(&self) -> Option<&Arc<crate::notify::Notifier>> {
        self.shared.notify.get()
    }

    /// Graph nodes each new session keeps in memory (`--compact-window`;
    /// 0: the whole graph). Sessions already open keep theirs.
    pub fn set_compact_window(&self, nodes: u64) {
        self.shared.compact_window.store(nodes, Ordering::Relaxed);
    }

    /// Sets how long a paused call waits (seconds, at least 1) before it
    /// expires; applies to pauses tracked from now on.
    pub fn set_pause_timeout(&self, secs: u64) {
        self.shared
            .pause_timeout
            .store(secs.max(1), Ordering::Relaxed);
    }

    /// Sets how far (seconds) a client's claimed time may be from the
    /// server's clock.
    pub fn set_max_clock_skew(&self, secs: u64) {
        self.max_skew.store(secs, Ordering::Relaxed);
    }

    /// The time an event of `e` gets: the server's clock, never before the
    /// session's last event (a clock that steps back does not stop the
    /// session; the monitor's times stay monotone).
    fn server_time(e: &Entry) -> u64 {
        monotone(now_secs(), e.session.state().time)
    }

    /// A client's claimed time: recorded, never used to decide; one far
    /// from the server's clock is refused (a client whose clock is that
    /// wrong, or one that tries to move the session's time).
    fn claimed(&self, field: &str, given: Option<u64>) -> Result<Option<u64>, ApiError> {
        if let Some(t) = given {
            let now = now_secs();
            let skew = self.max_skew.load(Ordering::Relaxed);
            if t.abs_diff(now) > skew {
                return Err(ApiError::field(
                    422,
                    field,
                    format!(
                        "{field} is {t}, but the server's clock says {now}: more than {skew} s apart \
                         (the server's clock decides; leave {field} out)"
                    ),
                ));
            }
        }
        Ok(given)
    }

    /// `POST /v1/authorize`.
    pub fn authorize(&self, req: crate::api::Authorize) -> Result<Pending<Outcome>, ApiError> {
        let tenant = Self::tenant(req.tenant)?;
        check_name("session", &req.session)?;
        let c = req.call;
        if c.id.is_empty() || c.id.len() > 1024 {
            return Err(ApiError::field(
                422,
                "call.id",
                "call.id must be 1 to 1024 bytes",
            ));
        }
        let client_time = self.claimed("call.time", c.time)?;
        self.run(&tenant, &req.session, move |e| {
            let call = Call {
                session: None,
                id: c.id,
                time: Self::server_time(e),
                agent: c.agent,
                tool: c.tool,
                args: c.args,
                lineage: c.lineage,
                inferred: c.inferred,
            };
            if let Some(a) = e.answers.get(call.id.as_str()) {
                if a.fingerprint == fingerprint(&call) {
                    return Ok(Step::Replay(call.id));
                }
                return Err(ApiError::field(
                    409,
                    "call.id",
                    format!(
                        "call id `{}` is already used in this session by a different call",
                        call.id
                    ),
                ));
            }
            if e.used.contains(&id_hash(&call.id)) {
                return Err(ApiError::field(
                    409,
                    "call.id",
                    format!(
                        "call id `{}` is already used in this session, by a call older than \
                         the answers the gateway keeps (its answer is in the audit log)",
                        call.id
                    ),
                ));
            }
            let meta = Meta {
                client_time,
                ..Meta::default()
            };
            Ok(Step::Apply(Event::Call(call), Box::new(meta)))
        })
    }

    /// `POST /v1/report`.
    pub fn report(&self, req: crate::api::ReportIn) -> Result<Pending<Outcome>, ApiError> {
        let tenant = Self::tenant(req.tenant)?;
        check_name("session", &req.session)?;
        let client_time = self.claimed("time", req.time)?;
        self.run(&tenant, &req.session, move |e| {
            let event = Event::Result(Report {
                session: None,
                call: req.call,
                time: Some(Self::server_time(e)),
                status: req.status,
                output: req.output,
                discovered: req.discovered,
            });
            let meta = Meta {
                client_time,
                ..Meta::default()
            };
            Ok(Step::Apply(event, Box::new(meta)))
        })
    }

    /// `POST /v1/tasks`.
    pub fn task(&self, req: crate::api::TaskIn) -> Result<Pending<Outcome>, ApiError> {
        let tenant = Self::tenant(req.tenant)?;
        check_name("session", &req.session)?;
        let client_time = self.claimed("time", req.time)?;
        self.run(&tenant, &req.session, move |e| {
            let event = Event::Task(Task {
                session: None,
                id: req.id,
                time: Some(Self::server_time(e)),
                text: req.text,
                sets: req.sets,
                scope: req.scope,
            });
            let meta = Meta {
                client_time,
                ..Meta::default()
            };
            Ok(Step::Apply(event, Box::new(meta)))
        })
    }

    /// The paused call `call` of `tenant` (in `session`, or in the one
    /// session where it waits).
    fn paused(
        &self,
        tenant: &str,
        session: Option<&str>,
        call: &str,
    ) -> Result<Option<PendingCall>, ApiError> {
        let p = self
            .shared
            .pending
            .lock()
            .map_err(|_| ApiError::new(500, "approvals poisoned"))?;
        if let Some(s) = session {
            let key = (tenant.to_string(), s.to_string(), call.to_string());
            return Ok(p.get(&key).cloned());
        }
        let found: Vec<&PendingCall> = p
            .values()
            .filter(|pc| pc.tenant == tenant && pc.call == call)
            .collect();
        match found.as_slice() {
            [one] => Ok(Some((*one).clone())),
            [] => Err(ApiError::field(
                404,
                "call",
                format!("no call `{call}` of tenant `{tenant}` waits for approval"),
            )),
            many => {
                let names: Vec<&str> = many.iter().map(|p| p.session.as_str()).collect();
                Err(ApiError::field(
                    409,
                    "session",
                    format!(
                        "call `{call}` waits in several sessions ({}): name the session",
                        names.join(", ")
                    ),
                ))
            }
        }
    }

    /// `POST /v1/approvals/{call}/approve` (or `/reject` with `approve`
    /// false), by `actor` (`role:name` of the approver's credential).
    ///
    /// An approval must name the digest of the paused call it was shown
    /// and a reason; it is taken once, and only before the pause expires:
    /// past that, the call is rejected (its units return) and the answer
    /// is the rejection. A rejection may name the digest (then it must
    /// match) and a reason.
    pub fn resolve(
        &self,
        call: String,
        req: crate::api::ResolveIn,
        approve: bool,
        actor: &str,
    ) -> Result<Pending<Outcome>, ApiError> {
        let tenant = Self::tenant(req.tenant)?;
        if let Some(s) = &req.session {
            check_name("session", s)?;
        }
        let client_time = self.claimed("time", req.time)?;
        let waiting = self.paused(&tenant, req.session.as_deref(), &call)?;
        let note = req
            .reason
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty());
        if approve && note.is_none() && waiting.is_some() {
            return Err(ApiError::field(
                422,
                "reason",
                "an approval carries a reason: say why this call may run",
            ));
        }
        if let Some(n) = &note {
            if n.chars().count() > 1000 || n.chars().any(char::is_control) {
                return Err(ApiError::field(
                    422,
                    "reason",
                    "reason must be at most 1000 characters, without control characters",
                ));
            }
        }
        let session = match (&req.session, &waiting) {
            (Some(s), _) => s.clone(),
            (None, Some(w)) => w.session.clone(),
            (None, None) => {
                return Err(ApiError::field(
                    404,
                    "call",
                    format!("no call `{call}` of tenant `{tenant}` waits for approval"),
                ))
            }
        };
        let digest = match (&waiting, req.digest) {
            (Some(w), Some(d)) if d != w.digest => {
                return Err(ApiError::field(
                    409,
                    "digest",
                    format!(
                        "the call waiting is not the one you were shown: its digest is {}, you approved {d} \
                         (list the approvals again)",
                        w.digest
                    ),
                ))
            }
            (Some(_), None) if approve => {
                return Err(ApiError::field(
                    422,
                    "digest",
                    "an approval names the digest of the call it approves, as GET /v1/approvals shows it",
                ))
            }
            (_, d) => d,
        };
        let expired = waiting.as_ref().is_some_and(|w| now_secs() >= w.expires);
        let (approve, actor, note) = if expired {
            let w = waiting.as_ref().map_or(0, |w| w.expires);
            (
                false,
                "server:pause-timeout".to_string(),
                Some(format!(
                    "the pause expired at {w}; {} by {actor} came too late",
                    if approve {
                        "an approval"
                    } else {
                        "a rejection"
                    }
                )),
            )
        } else {
            (approve, actor.to_string(), note)
        };
        self.run(&tenant, &session, move |e| {
            let r = Resolve {
                session: None,
                call,
                time: Some(Self::server_time(e)),
            };
            if e.session.state().call_node(&r.call).is_none() {
                return Err(ApiError::field(
                    404,
                    "call",
                    format!(
                        "unknown approval: session `{}` has no call `{}`",
                        e.id, r.call
                    ),
                ));
            }
            if approve && digest.is_none() {
                // Nothing waits under this id (or its pause is not tracked
                // yet): never an approval without the digest checked.
                return Err(ApiError::field(
                    409,
                    "call",
                    format!(
                        "call `{}` of session `{}` does not wait for approval",
                        r.call, e.id
                    ),
                ));
            }
            let meta = Meta {
                actor: Some(actor),
                client_time,
                digest,
                note,
            };
            Ok(Step::Apply(
                if approve {
                    Event::Approve(r)
                } else {
                    Event::Reject(r)
                },
                Box::new(meta),
            ))
        })
    }

    /// Rejects every paused call whose pause has expired (their units
    /// return); the number rejected. `agenra serve` runs it every second.
    pub fn expire_pauses(&self) -> usize {
        let now = now_secs();
        let due: Vec<PendingCall> = match self.shared.pending.lock() {
            Ok(p) => p.values().filter(|w| now >= w.expires).cloned().collect(),
            Err(_) => return 0,
        };
        let mut done = 0;
        for w in due {
            let note = format!("the pause expired at {}", w.expires);
            let pending = self.run(&w.tenant, &w.session, move |e| {
                let r = Resolve {
                    session: None,
                    call: w.call,
                    time: Some(Self::server_time(e)),
                };
                let meta = Meta {
                    actor: Some("server:pause-timeout".into()),
                    note: Some(note),
                    ..Meta::default()
                };
                Ok(Step::Apply(Event::Reject(r), Box::new(meta)))
            });
            // Another request may have settled it meanwhile (a 409).
            if pending.is_ok() {
                done += 1;
            }
        }
        done
    }

    /// `GET /v1/approvals`: the calls of `tenant` waiting for a human.
    pub fn approvals(&self, tenant: Option<String>) -> Result<Vec<PendingCall>, ApiError> {
        let tenant = Self::tenant(tenant)?;
        self.approvals_where(|t| t == tenant)
    }

    /// The calls waiting for a human in the tenants `keep` accepts, newest
    /// first.
    pub fn approvals_where(
        &self,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<PendingCall>, ApiError> {
        let p = self
            .shared
            .pending
            .lock()
            .map_err(|_| ApiError::new(500, "approvals poisoned"))?;
        let mut out: Vec<PendingCall> = p.values().filter(|pc| keep(&pc.tenant)).cloned().collect();
        out.sort_by_key(|c| std::cmp::Reverse(c.time));
        Ok(out)
    }

    /// Records a request the perimeter refused (at most
    /// [`REFUSALS_PER_SECOND`] records a second; the next record counts
    /// the ones left out). Best effort: a refusal is answered whether or
    /// not its record could be written.
    pub fn record_refusal(&self, r: crate::perimeter::Refusal) {
        let left_out = {
            let Ok(mut b) = self.refusals.lock() else {
                return;
            };
            let now = now_secs();
            if b.second != now {
                b.second = now;
                b.written = 0;
            }
            if b.written >= REFUSALS_PER_SECOND {
                b.left_out += 1;
                return;
            }
            b.written += 1;
            std::mem::take(&mut b.left_out)
        };
        let mut reason = format!("{} {}: {}", r.status, r.request, r.why);
        if left_out > 0 {
            reason.push_str(&format!(
                " ({left_out} earlier refusal(s) not recorded: more than {REFUSALS_PER_SECOND} a second)"
            ));
        }
        let record = Record {
            time_ms: now_ms(),
            kind: Kind::Refused,
            tenant: r.tenant,
            actor: r.actor,
            reason: Some(reason),
            ..Record::default()
        };
        let _ = self.exec(move |_, sink| Ok(sink.emit(Some(record), ())));
    }

    /// The calls of a session (recovered ones included) and the status of
    /// each, in no particular order. `agenra mcp-proxy` uses it to number
    /// its calls past the ones a store already holds, and to settle, when
    /// it resumes a session, the calls its previous run left open.
    pub fn calls(
        &self,
        tenant: Option<String>,
        session: &str,
    ) -> Result<Vec<(String, agenra_core::graph::Status)>, ApiError> {
        let tenant = Self::tenant(tenant)?;
        check_name("session", session)?;
        let entry = self.shared.entry(&tenant, session)?;
        let e = entry
            .lock()
            .map_err(|_| ApiError::new(500, "session poisoned"))?;
        let state = e.session.state();
        Ok(e.answers
            .keys()
            .filter_map(|id| state.call_status(id).map(|s| (id.to_string(), s)))
            .collect())
    }

    /// The `n` latest calls of a session, newest first (the approvals
    /// page).
    pub fn recent_calls(
        &self,
        tenant: &str,
        session: &str,
        n: usize,
    ) -> Result<Vec<RecentCall>, ApiError> {
        check_name("session", session)?;
        let entry = self.shared.entry(tenant, session)?;
        let e = entry
            .lock()
            .map_err(|_| ApiError::new(500, "session poisoned"))?;
        let state = e.session.state();
        let policy = e.session.policy();
        let mut calls: Vec<(Option<NodeId>, RecentCall)> = e
            .answers
            .iter()
            .map(|(id, a)| {
                let node = state.call_node(id);
                let n = node.and_then(|i| state.graph.node(i));
                let tool = n
                    .and_then(|n| policy.tools.get(n.tool as usize))
                    .map(|t| t.name.clone());
                let call = RecentCall {
                    call: id.to_string(),
                    tool,
                    decision: a.decision(),
                    status: state.call_status(id),
                    time: n.map_or(0, |n| n.time),
                };
                (node, call)
            })
            .collect();
        calls.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.call.cmp(&b.1.call)));
        calls.truncate(n);
        Ok(calls.into_iter().map(|(_, c)| c).collect())
    }

    /// `GET /v1/sessions/{id}`: the view once every record before it is
    /// durable and, on a shared store, after catching up with what the
    /// other replicas appended (a replica's memory alone may lag behind
    /// them: a view read from it could show units another replica spent as
    /// still left).
    pub fn session_view_current(
        &self,
        tenant: Option<String>,
        session: &str,
    ) -> Result<Pending<SessionView>, ApiError> {
        let tenant = Self::tenant(tenant)?;
        check_name("session", session)?;
        let session = session.to_string();
        let target = Some((tenant.clone(), session.clone()));
        self.exec_on(target, move |shared, sink| {
            let entry = shared.entry(&tenant, &session)?;
            let e = entry
                .lock()
                .map_err(|_| ApiError::new(500, "session poisoned"))?;
            Ok(sink.emit(None, e.view(false)))
        })
    }

    /// The view of a session as this replica's memory holds it (see
    /// [`Gateway::session_view_current`] for the HTTP API's).
    pub fn session_view(
        &self,
        tenant: Option<String>,
        session: &str,
    ) -> Result<SessionView, ApiError> {
        let tenant = Self::tenant(tenant)?;
        check_name("session", session)?;
        let entry = self.shared.entry(&tenant, session)?;
        let e = entry
            .lock()
            .map_err(|_| ApiError::new(500, "session poisoned"))?;
        Ok(e.view(false))
    }

    /// Runs `policy` for new sessions from now on (sessions already open
    /// keep the policy they were opened with), as an act of `actor` (the
    /// admin's `role:name`). With `--require-certified`, only a revision
    /// that `agenra certify` certifies against the running policy is
    /// accepted, and one that may widen what is allowed (the reverse
    /// certification does not certify) only with `allow_widening`. The
    /// revision is durable before it runs.
    pub fn reload(
        &self,
        policy: Policy,
        source: &str,
        actor: &str,
        allow_widening: bool,
    ) -> Result<Pending<Reloaded>, ApiError> {
        self.check_ok()?;
        let compiled = CompiledPolicy::new(policy)
            .map_err(|e| ApiError::field(422, "source", format!("invalid policy: {e}")))?;
        let running = self.shared.current_policy();
        let (certificate, widens) =
            if self.certification.required && compiled.hash() != running.hash() {
                let checked = self
                    .certification
                    .check_revision(running.policy(), compiled.policy(), allow_widening)
                    .map_err(|why| ApiError {
                        status: 409,
                        error: format!(
                        "--require-certified: the revision {} against the running policy {}: {why}",
                        compiled.hash(),
                        running.hash()
                    ),
                        field: Some(if why.starts_with("widens") {
                            "allow_widening".into()
                        } else {
                            "source".into()
                        }),
                    })?;
                (Some(checked.0), Some(checked.1))
            } else {
                (None, None)
            };
        let certified_against = running.hash();
        let source = source.to_string();
        let actor = actor.to_string();
        self.exec(move |shared, sink| {
            let mut policies = shared
                .policies
                .write()
                .map_err(|_| ApiError::new(500, "policy table poisoned"))?;
            let previous = policies.current.hash().to_string();
            if compiled.hash() == policies.current.hash() {
                return Ok(sink.emit(
                    None,
                    Reloaded {
                        changed: false,
                        policy_hash: previous.clone(),
                        previous,
                        certificate: None,
                        widens: None,
                        audit_seq: None,
                    },
                ));
            }
            if certificate.is_some() && policies.current.hash() != certified_against {
                return Err(ApiError::field(
                    409,
                    "source",
                    format!(
                        "the running policy changed to {previous} while the revision was certified against {certified_against} (another reload, or another replica's): retry"
                    ),
                ));
            }
            let mut record = policy_record(&compiled, &source, certificate.clone())
                .map_err(|e| ApiError::new(500, e.to_string()))?;
            record.actor = Some(actor);
            record.previous = Some(previous.clone());
            policies.remember(&compiled, false);
            policies.current = compiled.clone();
            Ok(sink.emit(
                Some(record),
                Reloaded {
                    changed: true,
                    policy_hash: compiled.hash().to_string(),
                    previous,
                    certificate,
                    widens,
                    audit_seq: None,
                },
            ))
        })
    }

    /// Revisions the server still holds (the running one, and past ones a
    /// session still uses).
    pub fn policies_held(&self) -> usize {
        self.shared
            .policies
            .read()
            .map(|p| p.by_hash.values().filter(|w| w.upgrade().is_some()).count())
            .unwrap_or(0)
    }
}

/// The time an event gets from the server's clock `now` in a session whose
/// last event had time `last`: never earlier.
fn monotone(now: u64, last: u64) -> u64 {
    now.max(last)
}

fn failed_error() -> ApiError {
    ApiError::new(
        503,
        "the store failed to record an event; restart the server to recover from the log",
    )
}

/// After a write that failed once its batch was decided, memory is ahead
/// of the log: refuse everything until a restart recovers from the log.
/// (A shared store that could not be reached decided nothing: that is not
/// a failure of this kind.)
fn mark_failed(failed: &AtomicBool, r: &Result<Head, StoreError>) {
    if let Err(StoreError::Stopped(_)) = r {
        failed.store(true, Ordering::Relaxed);
    }
}

fn track_pending(
    pending: &mut BTreeMap<(String, String, String), PendingCall>,
    event: &Event,
    outcome: &Outcome,
    timeout: u64,
) {
    let key = (
        outcome.tenant.clone(),
        outcome.session.clone(),
        outcome.call.clone(),
    );
    match event {
        Event::Call(c) if outcome.decision == Some(Verdict::Pause.as_str()) => {
            let args = serde_json::Value::Object(c.args.clone());
            let digest = call_digest(
                &outcome.tenant,
                &outcome.session,
                &outcome.call,
                &c.tool,
                &args,
                &outcome.policy_hash,
            );
            pending.insert(
                key,
                PendingCall {
                    tenant: outcome.tenant.clone(),
                    session: outcome.session.clone(),
                    call: outcome.call.clone(),
                    tool: Some(c.tool.clone()),
                    rule: outcome.rule.clone(),
                    reason: outcome.reason.clone(),
                    time: c.time,
                    args,
                    policy_hash: outcome.policy_hash.clone(),
                    digest,
                    expires: c.time.saturating_add(timeout),
                    path: outcome.path.clone(),
                },
            );
        }
        Event::Approve(_) | Event::Reject(_) => {
            pending.remove(&key);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_that_steps_back_keeps_times_monotone() {
        assert_eq!(monotone(100, 90), 100);
        assert_eq!(monotone(80, 90), 90, "a clock stepped back: the last time");
        assert_eq!(monotone(90, 90), 90);
    }

    #[test]
    fn the_digest_is_canonical_and_covers_what_is_shown() {
        let args = serde_json::json!({"b": [1, {"y": 2, "x": 1}], "a": "s"});
        let d = call_digest("t", "s", "c1", "pay", &args, "sha256:p");
        assert!(d.starts_with("sha256:") && d.len() == 71, "{d}");
        // Key order does not matter; every shown part does.
        let reordered: serde_json::Value =
            serde_json::from_str(r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#).unwrap();
        assert_eq!(
            d,
            call_digest("t", "s", "c1", "pay", &reordered, "sha256:p")
        );
        let changed = serde_json::json!({"b": [1, {"y": 3, "x": 1}], "a": "s"});
        for other in [
            call_digest("u", "s", "c1", "pay", &args, "sha256:p"),
            call_digest("t", "x", "c1", "pay", &args, "sha256:p"),
            call_digest("t", "s", "c2", "pay", &args, "sha256:p"),
            call_digest("t", "s", "c1", "pax", &args, "sha256:p"),
            call_digest("t", "s", "c1", "pay", &changed, "sha256:p"),
            call_digest("t", "s", "c1", "pay", &args, "sha256:q"),
        ] {
            assert_ne!(d, other);
        }
        let mut text = String::new();
        canonical_json(&reordered, &mut text);
        assert_eq!(text, r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#);
    }
}
