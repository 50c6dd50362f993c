//! Wire version 2: the ledger abstraction of `agenra certify` and a
//! relation (`agenra_ffi_check_simulation`, Lean `checkSimulation`),
//! checked without Lean: hand-written encodings, round trips, errors that
//! name the field (never a panic, whatever the bytes), and the loopback
//! (the Rust checker `check::closed` on policies rebuilt from the bytes)
//! against the checker on the original policies.

use agenra_certify::check::closed;
use agenra_certify::emit_lean::{relations, Part};
use agenra_certify::product::{Chain, Ctx, Flags, Held, State as PState};
use agenra_core::policy::{Agent, Quota};
use agenra_core::Policy;
use agenra_lean::wire::{SimClass, SimCtx, SimGrant};
use agenra_lean::{Cbor, Client, Entry, Loopback, Transport, Wire, WireError};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn int(n: i128) -> Cbor {
    Cbor::Int(n)
}

fn arr(items: Vec<Cbor>) -> Cbor {
    Cbor::Array(items)
}

fn compile(src: &str) -> Policy {
    agenra_policy::compile(src, "p").expect("compiles").policy
}

/// A delegate, an approval grant that discovers into a tested set, task
/// seeds: every field of the abstraction is exercised.
const OLD: &str = "sets found;\ntask seeds found;\n\
    tool t(r: string) { resource r; }\nagent d from main;\n\
    grant g0: t on prefix \"a\" quota 1 approval discovers found;\n\
    grant g1: t on prefix \"ab\" where r in found quota 1 approval discovers found agent d;\n";
const NEW: &str = "sets found;\ntask seeds found;\n\
    tool t(r: string) { resource r; }\nagent d from main;\n\
    grant g0: t on prefix \"a\" quota 2 approval discovers found;\n\
    grant g1: t on prefix \"ab\" where r in found quota 1 approval discovers found agent d;\n";

fn parts() -> (Policy, Policy, Vec<Part>) {
    let (old, new) = (compile(OLD), compile(NEW));
    let cert = agenra_certify::certify(&old, &new)
        .certificate
        .expect("a quota increase is certified");
    let parts = relations(&old, &new, &cert).expect("relations");
    (old, new, parts)
}

fn held(op: bool, np: bool, old: &[usize], new: &[usize]) -> Held {
    Held {
        old_paused: op,
        new_paused: np,
        old: Chain::from_slice(old).unwrap(),
        new: Chain::from_slice(new).unwrap(),
    }
}

#[test]
fn the_abstraction_has_the_documented_encoding() {
    let ctx = SimCtx {
        old: vec![SimGrant {
            agent: 1,
            quota: Quota::Limited(2),
            approval: true,
            discovers: Some(0),
        }],
        new: vec![SimGrant {
            agent: 0,
            quota: Quota::Unlimited,
            approval: false,
            discovers: None,
        }],
        tested: vec![0],
        seeds: vec![0, 1],
        flags: Flags {
            rule_pauses: true,
            approval_denials: false,
            history_rules: false,
            rules_read_sets: true,
        },
        classes: vec![SimClass {
            chain: vec![1, 0],
            region: 2,
            old: vec![0],
            new: vec![],
            types: 5,
        }],
    };
    let want = arr(vec![
        arr(vec![arr(vec![
            int(1),
            arr(vec![int(0), int(2)]),
            Cbor::Bool(true),
            int(0),
        ])]),
        arr(vec![arr(vec![
            int(0),
            arr(vec![int(1)]),
            Cbor::Bool(false),
            Cbor::Null,
        ])]),
        arr(vec![int(0)]),
        arr(vec![int(0), int(1)]),
        arr(vec![
            Cbor::Bool(true),
            Cbor::Bool(false),
            Cbor::Bool(false),
            Cbor::Bool(true),
        ]),
        arr(vec![arr(vec![
            arr(vec![int(1), int(0)]),
            int(2),
            arr(vec![int(0)]),
            arr(vec![]),
            int(5),
        ])]),
    ]);
    assert_eq!(ctx.to_wire(), want);
    assert_eq!(SimCtx::from_wire(&want, "x"), Ok(ctx));

    let h = held(true, false, &[1, 0], &[1]);
    let s = PState {
        region: 1,
        old: vec![Quota::Limited(0)],
        new: vec![Quota::Unlimited],
        calls: BTreeMap::from([(h, 3)]),
        types: 3,
    };
    let want = arr(vec![
        int(1),
        arr(vec![arr(vec![int(0), int(0)])]),
        arr(vec![arr(vec![int(1)])]),
        arr(vec![arr(vec![
            arr(vec![
                Cbor::Bool(true),
                Cbor::Bool(false),
                arr(vec![int(1), int(0)]),
                arr(vec![int(1)]),
            ]),
            int(3),
        ])]),
        int(3),
    ]);
    assert_eq!(s.to_wire(), want);
    assert_eq!(PState::from_wire(&want, "x"), Ok(s));
}

#[test]
fn the_abstraction_of_two_policies_is_what_emit_lean_writes() {
    let (old, new, parts) = parts();
    for part in &parts {
        let ctx = SimCtx::of(&old, &new, &part.classes, &part.flags).unwrap();
        assert_eq!(ctx.old.len(), 2);
        assert_eq!(ctx.old[0].quota, Quota::Limited(1));
        assert_eq!(ctx.new[0].quota, Quota::Limited(2));
        assert!(ctx.old[0].approval && ctx.old[0].discovers == Some(0));
        assert_eq!(ctx.old[1].agent, 1);
        assert_eq!(ctx.seeds, vec![0]);
        assert_eq!(ctx.tested, vec![0]);
        // The delegate's chain is [d, main] = [1, 0].
        assert!(ctx.classes.iter().any(|c| c.chain == vec![1, 0]));
        assert!(ctx.classes.iter().all(|c| c.chain.last() == Some(&0)));
        // Round trip of the abstraction and of every pair.
        assert_eq!(SimCtx::from_wire(&ctx.to_wire(), "x").as_ref(), Ok(&ctx));
        let rel = part.relation.to_vec();
        assert_eq!(Vec::<PState>::from_wire(&rel.to_wire(), "x"), Ok(rel));
        // The rebuilt policies have the same abstraction.
        let (o, n, classes) = ctx.policies().unwrap();
        assert_eq!(SimCtx::of(&o, &n, &classes, &ctx.flags).as_ref(), Ok(&ctx));
    }
    // Different delegation chains for one agent have no abstraction.
    let mut other = new.clone();
    other.agents.push(Agent {
        name: "e".into(),
        parent: Some(0),
        scope: None,
        own_context: false,
    });
    other.agents[1].parent = Some(2);
    let classes = agenra_certify::classes::enumerate(&old, &new).unwrap();
    let e = SimCtx::of(&old, &other, &classes, &agenra_certify::flags_of(&old)).unwrap_err();
    assert!(matches!(e, WireError::Abstraction(_)), "{e}");
}

#[test]
fn the_loopback_answers_like_the_checker() {
    let (old, new, parts) = parts();
    let client = Client::new(Loopback);
    let mut rejected = 0;
    for part in &parts {
        let ctx = Ctx {
            old: &old,
            new: &new,
            classes: &part.classes,
            flags: &part.flags,
        };
        assert!(closed(&ctx, &part.relation).is_ok());
        let sim = SimCtx::of(&old, &new, &part.classes, &part.flags).unwrap();
        assert_eq!(client.check_simulation(&sim, &part.relation), Ok(true));
        // Each pair but the initial one removed: the checker and the
        // loopback agree (and BFS order means the last one is needed).
        for k in 1..part.relation.len() {
            let mut smaller = part.relation.clone();
            smaller.remove(k);
            let want = closed(&ctx, &smaller).is_ok();
            assert_eq!(
                client.check_simulation(&sim, &smaller),
                Ok(want),
                "pair {k}"
            );
            if k == part.relation.len() - 1 {
                assert!(!want, "the last pair is needed");
                rejected += 1;
            }
        }
        assert_eq!(client.check_simulation(&sim, &[]), Ok(false));
    }
    assert!(rejected >= 1);
}

/// The input of `agenra_ffi_check_simulation` for the first component.
fn valid_input() -> Cbor {
    static INPUT: std::sync::OnceLock<Cbor> = std::sync::OnceLock::new();
    INPUT
        .get_or_init(|| {
            let (old, new, parts) = parts();
            let sim = SimCtx::of(&old, &new, &parts[0].classes, &parts[0].flags).unwrap();
            arr(vec![sim.to_wire(), parts[0].relation.to_vec().to_wire()])
        })
        .clone()
}

/// The loopback's rejection message for an input, or its verdict.
fn ask(input: &Cbor) -> Result<bool, String> {
    let bytes = Loopback
        .call(Entry::CheckSimulation, &input.encode())
        .unwrap();
    match Cbor::decode(&bytes).unwrap() {
        Cbor::Array(a) if a.len() == 2 && a[0] == int(0) => match a[1] {
            Cbor::Bool(b) => Ok(b),
            _ => panic!("not a bool: {:?}", a[1]),
        },
        Cbor::Array(a) if a.len() == 2 && a[0] == int(1) => match &a[1] {
            Cbor::Text(m) => Err(m.clone()),
            _ => panic!("not a message: {:?}", a[1]),
        },
        other => panic!("not an envelope: {other:?}"),
    }
}

/// `input` with the value at `path` (indexes into nested arrays) replaced.
fn with(input: &Cbor, path: &[usize], v: Cbor) -> Cbor {
    match (input, path.split_first()) {
        (_, None) => v,
        (Cbor::Array(items), Some((&i, rest))) => {
            let mut items = items.clone();
            items[i] = with(&items[i], rest, v);
            Cbor::Array(items)
        }
        _ => panic!("no array at {path:?}"),
    }
}

#[test]
fn decoding_errors_name_the_field() {
    let input = valid_input();
    assert_eq!(ask(&input), Ok(true));
    let pre = "the input of agenra_ffi_check_simulation";
    let cases: Vec<(Vec<usize>, Cbor, &str)> = vec![
        (
            vec![0, 0, 0, 1],
            int(7),
            "[0].old[0].quota: expected a tagged array",
        ),
        (
            vec![0, 2],
            arr(vec![int(0), int(1), int(2), int(3)]),
            "[0].tested: expected at most 3 tested sets",
        ),
        (
            vec![0, 4, 2],
            int(1),
            "[0].flags.history_rules: expected a boolean",
        ),
        (
            vec![0, 5, 0, 0],
            int(0),
            "[0].classes[0].chain: expected an array",
        ),
        (
            vec![0, 5, 0, 4],
            int(-1),
            "[0].classes[0].types: expected an unsigned integer < 2^64",
        ),
        (
            vec![1, 0, 0],
            Cbor::Null,
            "[1][0].region: expected an index",
        ),
        (
            vec![1, 0, 1, 0],
            arr(vec![int(0)]),
            "[1][0].old[0]: expected the constructor's number of fields",
        ),
        (
            vec![1, 0, 3],
            arr(vec![arr(vec![
                held(false, false, &[0], &[0]).to_wire(),
                int(0),
            ])]),
            "[1][0].calls[0][1]: expected a count from 1 to 2^32 - 2",
        ),
        (
            vec![1, 0, 3],
            arr(vec![arr(vec![
                arr(vec![
                    Cbor::Bool(false),
                    Cbor::Bool(false),
                    arr(vec![int(0); 5]),
                    arr(vec![]),
                ]),
                int(1),
            ])]),
            "[1][0].calls[0][0].old: expected a chain of at most 4 grants",
        ),
        (
            vec![1, 0, 3],
            arr(vec![
                arr(vec![held(false, false, &[1], &[1]).to_wire(), int(1)]),
                arr(vec![held(false, false, &[0], &[0]).to_wire(), int(1)]),
            ]),
            "[1][0].calls[1][0]: expected held calls in strictly ascending order",
        ),
        (vec![1], int(3), "[1]: expected an array"),
    ];
    for (path, v, want) in cases {
        let e = ask(&with(&input, &path, v)).unwrap_err();
        assert!(e.starts_with(&format!("{pre}{want}")), "{path:?}: {e}");
    }
    // Abstractions no two policies have: rejected, not judged.
    let cases: Vec<(Vec<usize>, Cbor, &str)> = vec![
        (vec![0, 5, 0, 0], arr(vec![]), "classes[0].chain is empty"),
        (
            vec![0, 5, 0, 0],
            arr(vec![int(0), int(0)]),
            "classes[0].chain repeats an agent",
        ),
        (
            vec![0, 5, 0, 2],
            arr(vec![int(9)]),
            "classes[0].old: grant 9 is out of range",
        ),
    ];
    for (path, v, want) in cases {
        let e = ask(&with(&input, &path, v)).unwrap_err();
        assert_eq!(e, format!("the ledger abstraction: {want}"), "{path:?}");
    }
    // The wrong number of arguments, and garbage.
    assert!(ask(&arr(vec![int(0)])).unwrap_err().starts_with(pre));
    let bytes = Loopback
        .call(Entry::CheckSimulation, &[0x82, 0xff])
        .unwrap();
    assert!(matches!(&Cbor::decode(&bytes).unwrap(), Cbor::Array(a) if a[0] == int(1)));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any byte of a valid input changed, or the input cut short: an
    /// answer or a rejection, never a panic.
    #[test]
    fn no_bytes_make_the_loopback_panic(at in any::<prop::sample::Index>(), b in any::<u8>(), cut in any::<bool>()) {
        let mut bytes = valid_input().encode();
        let i = at.index(bytes.len());
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] = b;
        }
        let out = Loopback.call(Entry::CheckSimulation, &bytes).unwrap();
        prop_assert!(matches!(Cbor::decode(&out), Ok(Cbor::Array(_))));
    }

    /// Pair states round-trip.
    #[test]
    fn pair_states_round_trip(
        region in 0usize..5,
        old in prop::collection::vec(prop::option::of(0u64..4), 0..4),
        calls in prop::collection::btree_map(
            (any::<bool>(), any::<bool>(), prop::collection::vec(0usize..4, 0..5), prop::collection::vec(0usize..4, 0..5)),
            1u32..9,
            0..4,
        ),
        types in any::<u64>(),
    ) {
        let quota = |q: &Option<u64>| q.map_or(Quota::Unlimited, Quota::Limited);
        let calls: BTreeMap<Held, u32> = calls
            .into_iter()
            .map(|((op, np, o, n), c)| (held(op, np, &o[..o.len().min(4)], &n[..n.len().min(4)]), c))
            .collect();
        let s = PState {
            region,
            old: old.iter().map(quota).collect(),
            new: old.iter().rev().map(quota).collect(),
            calls,
            types,
        };
        prop_assert_eq!(PState::from_wire(&s.to_wire(), "x"), Ok(s));
    }
}
