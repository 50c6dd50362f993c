//! The gateway on a log partitioned by session (`serve --partitioned-log`,
//! PostgreSQL; `docs/store.md`, "A log partitioned by session").
//!
//! Where each record goes:
//!
//! * policy revisions and refusals: `log`;
//! * a session's `session` record: its own partition `s/TENANT/SESSION`;
//! * its events and its `closed` record: its own partition, unless its
//!   policy has shared pools (`quota N per tenant`, tenant budgets): then
//!   the tenant's pool partition `p/TENANT`, in the order they used the
//!   pool (replaying them in that order rebuilds the same pool).
//!
//! A decision locks only the partition it appends to (a session this
//! replica has not seen yet: both of its possible homes), so decisions of
//! different sessions never wait on one lock; those that draw on a tenant's
//! pools wait on that pool's lock only.

use super::Shared;
use agenra_core::Policy;
use agenra_store::checkpoint::LOG_PARTITION;
use agenra_store::{
    pool_partition, session_partition, CommitStats, Committer, Decide, Done, Kind, PartCommitter,
    Record, StoreError,
};
use std::sync::Arc;

/// The store's writer: group commit on the single chain, or on a log
/// partitioned by session.
pub(super) enum Writer {
    /// [`Committer`]: the embedded store, or the single chain on PostgreSQL.
    Chain(Committer),
    /// [`PartCommitter`]: the log partitioned by session.
    Parts(PartCommitter),
}

/// Whether sessions under `policy` draw on their tenant's shared pools:
/// `Shared::run` takes the tenant's order lock for them, and on a
/// partitioned log their events go to the pool partition. Anything a
/// tenant's sessions share (a pool, a tenant-wide window or count) must
/// make this true, or replicas would replay them in different orders.
pub(super) fn pooled_policy(policy: &Policy) -> bool {
    !policy.shared_grants.is_empty() || policy.has_tenant_budgets() || policy.has_tenant_renewals()
}

impl Shared {
    /// Whether `tenant`'s session `session` draws on the tenant's pools
    /// (`None`: this replica does not hold the session).
    pub(super) fn pooled(&self, tenant: &str, session: &str) -> Option<bool> {
        let sessions = self.sessions.read().ok()?;
        let entry = sessions.get(&(tenant.to_string(), session.to_string()))?;
        let e = entry.lock().ok()?;
        Some(pooled_policy(e.session.policy()))
    }
}

/// The partitions an operation on `target` (none: the log's own records)
/// must lock, and whether it must first read what `log` gained (it may
/// open a session, which gets the current policy).
fn lock_parts(shared: &Shared, target: &Option<(String, String)>) -> (Vec<String>, bool) {
    match target {
        None => (vec![LOG_PARTITION.to_string()], true),
        Some((t, s)) => match shared.pooled(t, s) {
            Some(false) => (vec![session_partition(t, s)], false),
            Some(true) => (vec![pool_partition(t)], false),
            None => (vec![session_partition(t, s), pool_partition(t)], true),
        },
    }
}

/// The partition `record` belongs in (`pooled`: its session draws on the
/// tenant's pools, as known before the operation ran).
fn home(record: &Record, pooled: bool) -> String {
    match (&record.kind, &record.tenant, &record.session) {
        (Kind::Session, Some(t), Some(s)) => session_partition(t, s),
        (Kind::Event | Kind::Closed, Some(t), Some(_)) if pooled => pool_partition(t),
        (Kind::Event | Kind::Closed, Some(t), Some(s)) => session_partition(t, s),
        _ => LOG_PARTITION.to_string(),
    }
}

impl Writer {
    /// Queues `decide` for the next transaction: on a partitioned log, one
    /// that locks the partitions of `target` only.
    pub(super) fn decide_on(
        &self,
        shared: &Arc<Shared>,
        target: Option<(String, String)>,
        decide: Decide,
        refused: Done,
    ) {
        match self {
            Writer::Chain(c) => c.decide(decide, refused),
            Writer::Parts(p) => {
                let (parts, read_log) = lock_parts(shared, &target);
                let shared = Arc::clone(shared);
                p.decide(
                    parts,
                    read_log,
                    Box::new(move || {
                        // Known after catching up, before the operation
                        // (closing a session forgets it).
                        let pooled = target
                            .as_ref()
                            .and_then(|(t, s)| shared.pooled(t, s))
                            .unwrap_or(false);
                        let (record, done) = decide();
                        (record.map(|r| (home(&r, pooled), r)), done)
                    }),
                    refused,
                );
            }
        }
    }

    pub(super) fn submit(&self, record: Record, done: Done) {
        match self {
            Writer::Chain(c) => c.submit(record, done),
            Writer::Parts(_) => done(Err(not_here())),
        }
    }

    pub(super) fn barrier(&self, done: Done) {
        match self {
            Writer::Chain(c) => c.barrier(done),
            Writer::Parts(_) => done(Err(not_here())),
        }
    }

    pub(super) fn submit_wait(&self, record: Record) -> Result<agenra_store::Head, StoreError> {
        match self {
            Writer::Chain(c) => c.submit_wait(record),
            Writer::Parts(_) => Err(not_here()),
        }
    }

    pub(super) fn stats(&self) -> CommitStats {
        match self {
            Writer::Chain(c) => c.stats(),
            Writer::Parts(p) => p.stats(),
        }
    }
}

/// A record submitted outside a transaction: on a partitioned log every
/// operation is decided inside one (never reached: the gateway is then
/// replicated).
fn not_here() -> StoreError {
    StoreError::Stopped("a partitioned log takes records only inside a transaction".into())
}

impl super::Gateway {
    /// [`Gateway::open`](super::Gateway::open) on a log partitioned by
    /// session: recovers every session from `log` (the `log` partition
    /// first, then every session, then every tenant pool), then decides
    /// every operation inside a transaction that locks only the partitions
    /// it touches. With checkpoints on `log`
    /// ([`agenra_store::PartLog::with_checkpoints`]) signed checkpoints over
    /// every partition's head are appended as they say, and a checkpoint
    /// kept elsewhere (`--checkpoint-out`) must be reached by `log`.
    pub fn open_parts(
        mut log: agenra_store::PartLog,
        policy: agenra_core::CompiledPolicy,
        source: &str,
        certification: impl Into<super::Certification>,
    ) -> Result<super::Gateway, super::OpenError> {
        let certification = certification.into();
        let shared = Arc::new(Shared::new(&policy));
        let diverged = |part: &str, seq: u64, reason: String| StoreError::Diverged {
            seq,
            reason: format!("partition {part}: {reason}"),
        };
        log.read(&mut |part, seq, line| {
            shared
                .replay(line, true)
                .map(|_| ())
                .map_err(|reason| diverged(part, seq, reason))
        })
        .map_err(|e| match e {
            StoreError::Diverged { seq, reason } => super::OpenError::Recover { seq, reason },
            other => super::OpenError::Store(other),
        })?;
        log.check_kept_checkpoint()
            .map_err(super::OpenError::Store)?;
        if let Ok(mut p) = shared.policies.write() {
            p.pinned.clear();
        }
        let s = Arc::clone(&shared);
        let committer = Writer::Parts(PartCommitter::start(
            log,
            1024,
            Box::new(move |part, seq, line| {
                s.replay(line, false)
                    .map(|_| ())
                    .map_err(|reason| diverged(part, seq, reason))
            }),
        ));
        super::Gateway::started(shared, committer, true, policy, source, certification)
    }
}
