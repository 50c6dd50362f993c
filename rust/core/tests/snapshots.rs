//! Session snapshots (issue #28): a session restored from a snapshot taken
//! at any point decides every later event exactly as the session that was
//! never snapshotted, and a snapshot of another policy, window or of
//! damaged bytes is refused.

mod common;

use agenra_core::monitor::{CompiledPolicy, Session, SessionOptions, SnapshotError};
use agenra_core::Event;
use common::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn options(window: Option<usize>) -> SessionOptions {
    window.map_or_else(SessionOptions::default, SessionOptions::compact)
}

/// Steps `session` through `events`, each output and ledger hash as text.
fn run(session: &mut Session, events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let out = session.step(e);
            format!("{out:?} ledger {}", session.state().ledger_hash())
        })
        .collect()
}

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
        let compiled = CompiledPolicy::new(policy).expect("valid policy");
        let mut original = compiled.session_with(options(window));
        let cut = cut.index(events.len() + 1);
        run(&mut original, &events[..cut]);
        let bytes = original.snapshot().expect("encodes");
        let mut restored = Session::from_snapshot(&compiled, options(window), &bytes)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(restored.state().seq, original.state().seq);
        prop_assert_eq!(restored.state().ledger_hash(), original.state().ledger_hash());
        let again = restored.snapshot().expect("encodes");
        let mut twice = Session::from_snapshot(&compiled, options(window), &again)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let expected = run(&mut original, &events[cut..]);
        prop_assert_eq!(&run(&mut restored, &events[cut..]), &expected);
        prop_assert_eq!(&run(&mut twice, &events[cut..]), &expected);
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
        let half = events.len() / 2;
        let mut original = compiled.session();
        run(&mut original, &events[..half]);
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
