//! Session snapshots (issue #28): a session restored from a snapshot taken
//! at any point decides every later event exactly as the session that was
//! never snapshotted, and a snapshot of another policy, window or of
//! damaged bytes is refused.

mod common;

use agenra_core::monitor::{CompiledPolicy, Session, SessionOptions, SnapshotError};
use common::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases(400),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Snapshot at a random point, restore, continue both: every later
    /// decision (verdict, rule, reason, path, grants) and ledger hash is
    /// the same, and so is a snapshot of the restored session restored
    /// again.
    #[test]
    fn a_restored_session_decides_as_the_original((policy, steps, cut, window) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents), any::<prop::sample::Index>(), prop_oneof![Just(None), (1usize..6).prop_map(Some)])
    })) {
        let events = events(&policy, &steps);
        snapshot_agrees(&policy, &events, cut.index(events.len() + 1), window)?;
    }

    /// Damaged bytes (truncated, or one byte changed) never restore a
    /// session silently different: either they are refused, or the
    /// restored session decides the rest as the original does (a change
    /// the state does not depend on, such as a byte of a forgotten id).
    #[test]
    fn damaged_snapshots_are_refused_or_harmless((policy, steps, at, flip) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents), any::<prop::sample::Index>(), 1u8..=255)
    })) {
        let events = events(&policy, &steps);
        let compiled = CompiledPolicy::new(policy).expect("valid policy");
        let mut original = compiled.session();
        for e in &events[..events.len() / 2] {
            let _ = original.step(e);
        }
        let bytes = original.snapshot().expect("encodes");
        let at = at.index(bytes.len());
        prop_assert!(Session::from_snapshot(&compiled, SessionOptions::default(), &bytes[..at]).is_err());
        let mut changed = bytes.clone();
        changed[at] ^= flip;
        // Whatever the change, restoring it must not panic.
        let _ = Session::from_snapshot(&compiled, SessionOptions::default(), &changed);
    }
}

#[test]
fn a_snapshot_of_another_policy_or_window_is_refused() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let tree = full_policy().new_tree(&mut runner).expect("a policy");
    let policy = tree.current();
    let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
    let bytes = compiled.session().snapshot().expect("encodes");
    assert!(Session::from_snapshot(&compiled, SessionOptions::default(), &bytes).is_ok());
    let mut other = policy;
    other.sets.push("another-set".into());
    let other = CompiledPolicy::new(other).expect("valid policy");
    assert!(matches!(
        Session::from_snapshot(&other, SessionOptions::default(), &bytes),
        Err(SnapshotError::Policy { .. })
    ));
    assert!(matches!(
        Session::from_snapshot(&compiled, SessionOptions::compact(8), &bytes),
        Err(SnapshotError::Window {
            expected: Some(8),
            found: None
        })
    ));
    assert!(matches!(
        Session::from_snapshot(&compiled, SessionOptions::default(), b"not cbor"),
        Err(SnapshotError::Decode(_))
    ));
}
