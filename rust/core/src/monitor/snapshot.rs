//! Session snapshots (issue #28, fast restarts): a session's whole state as
//! CBOR bytes, so that a server restarts from it and replays only the
//! events after it (`docs/store.md`, "Snapshots").
//!
//! A snapshot names its format, the policy it was taken under, the compact
//! window and the ledger hash. [`Session::from_snapshot`] refuses one of
//! another format or policy, or whose restored ledger does not hash to the
//! one it names: the caller then replays the session's whole history.
//! The tenant pool (shared quotas) is not part of a session's state: it is
//! the pool's own, so a snapshot of a session with shared grants restores
//! the session's side only (what it holds), never the pool.

use super::{
    token_index::TokenIndex, values::ValueIndex, CompiledPolicy, Held, Session, SessionOptions,
    SessionState, Slots,
};
use crate::event::TaskScope;
use crate::graph::{Graph, NodeId};
use crate::hash::{from_cbor, to_cbor, EncodeError, Hash};
use crate::ledger::{LedgerParts, SessionLedger};
use crate::pool::SharedCounts;
use crate::session_tables::{CallIds, NodeTable};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

/// The snapshot format this build writes and reads.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// Why a snapshot cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes are not a snapshot (of this shape).
    #[error("the snapshot does not decode: {0}")]
    Decode(String),
    /// Written by another format.
    #[error("snapshot format {found}, this build reads format {SNAPSHOT_FORMAT}")]
    Format {
        /// The format the snapshot names.
        found: u32,
    },
    /// Taken under another policy.
    #[error("the snapshot was taken under policy {found}, the session runs {expected}")]
    Policy {
        /// The session's policy hash.
        expected: Hash,
        /// The policy hash the snapshot names.
        found: Hash,
    },
    /// Taken of a session with another compact window.
    #[error("the snapshot keeps a window of {found:?} nodes, the session {expected:?}")]
    Window {
        /// The session's window.
        expected: Option<usize>,
        /// The snapshot's window.
        found: Option<usize>,
    },
    /// The state does not fit the policy (e.g. a count of a grant it does
    /// not have).
    #[error("the snapshot's state does not fit the policy: {0}")]
    Shape(String),
    /// The restored ledger does not hash to the hash the snapshot names.
    #[error("the snapshot's ledger hashes to {restored}, it names {named}")]
    Ledger {
        /// The hash the snapshot names.
        named: Hash,
        /// The restored ledger's hash.
        restored: Hash,
    },
}

/// The encoded snapshot: header, then the session's state.
#[derive(Serialize, Deserialize)]
struct Wire {
    format: u32,
    policy: [u8; 32],
    compact: Option<usize>,
    ledger_hash: [u8; 32],
    state: StateWire,
}

/// [`SessionState`] with its ledger as [`LedgerParts`] (the shared initial
/// ledger and tree come from the policy when restored).
#[derive(Serialize, Deserialize)]
struct StateWire {
    graph: Graph,
    ledger: LedgerParts,
    sets: Vec<BTreeSet<String>>,
    calls: CallIds,
    held: NodeTable<Held>,
    path_progress: Slots<u64>,
    count_times: Slots<VecDeque<u64>>,
    path_witness: Slots<Vec<NodeId>>,
    fact_seen: Slots<Option<u64>>,
    since_seen: Slots<Option<(u64, NodeId)>>,
    last_call: Option<NodeId>,
    last_by_agent: Slots<Option<NodeId>>,
    agent_contexts: Slots<Option<NodeId>>,
    values: ValueIndex,
    tokens: TokenIndex,
    task_scope: Option<TaskScope>,
    seeded: Vec<(usize, String, NodeId)>,
    seq: u64,
    time: u64,
}

impl Session {
    /// The session's state as snapshot bytes (see the module
    /// documentation); [`Session::from_snapshot`] reads them back.
    pub fn snapshot(&self) -> Result<Vec<u8>, EncodeError> {
        let s = self.state.clone();
        let wire = Wire {
            format: SNAPSHOT_FORMAT,
            policy: self.policy_hash().0,
            compact: self.options.compact,
            ledger_hash: s.ledger.hash().0,
            state: StateWire {
                ledger: s.ledger.parts(),
                graph: s.graph,
                sets: s.sets,
                calls: s.calls,
                held: s.held,
                path_progress: s.path_progress,
                count_times: s.count_times,
                path_witness: s.path_witness,
                fact_seen: s.fact_seen,
                since_seen: s.since_seen,
                last_call: s.last_call,
                last_by_agent: s.last_by_agent,
                agent_contexts: s.agent_contexts,
                values: s.values,
                tokens: s.tokens,
                task_scope: s.task_scope,
                seeded: s.seeded,
                seq: s.seq,
                time: s.time,
            },
        };
        to_cbor(&wire)
    }

    /// The session `bytes` (from [`Session::snapshot`]) captured, under
    /// `policy` with `options` (its compact window must be the snapshot's;
    /// the audit sink and tenant pool are the caller's). Refused, with the
    /// reason, when the bytes do not decode, name another format or
    /// policy, do not fit the policy, or their ledger does not hash to the
    /// hash they name.
    pub fn from_snapshot(
        policy: &CompiledPolicy,
        options: SessionOptions,
        bytes: &[u8],
    ) -> Result<Session, SnapshotError> {
        let wire: Wire = from_cbor(bytes).map_err(|e| SnapshotError::Decode(e.to_string()))?;
        if wire.format != SNAPSHOT_FORMAT {
            return Err(SnapshotError::Format { found: wire.format });
        }
        if wire.policy != policy.hash().0 {
            return Err(SnapshotError::Policy {
                expected: policy.hash(),
                found: Hash(wire.policy),
            });
        }
        if wire.compact != options.compact {
            return Err(SnapshotError::Window {
                expected: options.compact,
                found: wire.compact,
            });
        }
        let w = wire.state;
        check_shape(policy, &w)?;
        let ledger = SessionLedger::restore(
            Arc::clone(&policy.0.initial_ledger),
            Arc::clone(&policy.0.initial_tree),
            w.ledger,
        )
        .map_err(|e| SnapshotError::Shape(e.to_string()))?;
        if ledger.hash().0 != wire.ledger_hash {
            return Err(SnapshotError::Ledger {
                named: Hash(wire.ledger_hash),
                restored: ledger.hash(),
            });
        }
        let state = SessionState {
            graph: w.graph,
            ledger,
            sets: w.sets,
            calls: w.calls,
            held: w.held,
            path_progress: w.path_progress,
            count_times: w.count_times,
            path_witness: w.path_witness,
            fact_seen: w.fact_seen,
            since_seen: w.since_seen,
            last_call: w.last_call,
            last_by_agent: w.last_by_agent,
            agent_contexts: w.agent_contexts,
            values: w.values,
            tokens: w.tokens,
            task_scope: w.task_scope,
            seeded: w.seeded,
            seq: w.seq,
            time: w.time,
        };
        Ok(Session {
            shared: policy.clone(),
            options,
            state,
            pool_view: SharedCounts::default(),
        })
    }
}

/// What the monitor indexes without a bounds check must fit the policy and
/// the graph: discovered sets, held grants, the graph's bases, node ids.
fn check_shape(policy: &CompiledPolicy, w: &StateWire) -> Result<(), SnapshotError> {
    let p = policy.policy();
    let shape = |what: String| Err(SnapshotError::Shape(what));
    if w.sets.len() != p.sets.len() {
        return shape(format!(
            "{} discovered sets, the policy has {}",
            w.sets.len(),
            p.sets.len()
        ));
    }
    let g = &w.graph;
    if g.nodes.is_empty() && g.base == 0 {
        return shape("the graph has no context node".into());
    }
    let nodes = g.len();
    let known = |n: &NodeId| (n.0 as usize) < nodes;
    if let Some((id, _)) = w.calls.iter().find(|(_, n)| !known(n)) {
        return shape(format!("call `{id}` names a node past the graph"));
    }
    for h in w.held.values() {
        if let Some(grant) = h.grants.iter().find(|&&g| g >= p.grants.len()) {
            return shape(format!("a held call names grant {grant}"));
        }
    }
    if let Some((set, _, _)) = w.seeded.iter().find(|(s, _, _)| *s >= p.sets.len()) {
        return shape(format!("a seeded value names set {set}"));
    }
    let ids = [w.last_call]
        .into_iter()
        .chain(w.last_by_agent.0.iter().copied())
        .chain(w.agent_contexts.0.iter().copied())
        .flatten();
    if let Some(n) = ids.into_iter().find(|n| !known(n)) {
        return shape(format!("node {} is past the graph", n.0));
    }
    if w.seq < w.calls.iter().count() as u64 {
        return shape("fewer events than calls".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    /// A snapshot of a new session, changed by `edit` and re-encoded.
    fn edited(edit: impl FnOnce(&mut Wire)) -> (CompiledPolicy, Vec<u8>) {
        let mut p = Policy::empty("snap");
        p.sets = vec!["found".into()];
        let policy = CompiledPolicy::new(p).expect("valid policy");
        let bytes = policy.session().snapshot().expect("encodes");
        let mut wire: Wire = from_cbor(&bytes).expect("decodes");
        edit(&mut wire);
        (policy, to_cbor(&wire).expect("encodes"))
    }

    fn restore(edit: impl FnOnce(&mut Wire)) -> Result<Session, SnapshotError> {
        let (policy, bytes) = edited(edit);
        Session::from_snapshot(&policy, SessionOptions::default(), &bytes)
    }

    #[test]
    fn an_unchanged_snapshot_restores() {
        assert!(restore(|_| {}).is_ok());
    }

    #[test]
    fn another_format_is_refused() {
        let e = restore(|w| w.format = SNAPSHOT_FORMAT + 1).err();
        assert!(
            matches!(e, Some(SnapshotError::Format { found: 2 })),
            "{e:?}"
        );
    }

    #[test]
    fn a_ledger_that_does_not_hash_as_named_is_refused() {
        let e = restore(|w| w.ledger_hash = [7; 32]).err();
        assert!(matches!(e, Some(SnapshotError::Ledger { .. })), "{e:?}");
    }

    #[test]
    fn a_state_that_does_not_fit_the_policy_is_refused() {
        let e = restore(|w| w.state.sets.push(Default::default())).err();
        assert!(matches!(e, Some(SnapshotError::Shape(_))), "{e:?}");
        let e = restore(|w| w.state.last_call = Some(NodeId(5))).err();
        assert!(matches!(e, Some(SnapshotError::Shape(_))), "{e:?}");
        let e = restore(|w| w.state.graph.nodes.clear()).err();
        assert!(matches!(e, Some(SnapshotError::Shape(_))), "{e:?}");
    }
}
