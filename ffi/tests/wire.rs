//! The wire format of `docs/lean-ffi.md`, checked without Lean: the
//! document's example bytes, hand-written encodings of each type, round
//! trips, and the loopback transport (the Rust spec behind the bytes).
//! Generated inputs go through the loopback in the root suite
//! (`tests/reference_differential.rs`).

use agenra_core::ledger::Ledger;
use agenra_core::policy::{Agent, Grant, Quota, Tool};
use agenra_core::pool::SharedCounts;
use agenra_core::spec::{self, Checks, Event, Outcome, Request, State};
use agenra_core::{ArgCond, ArgOp, Cond, Decimal, Label, Pattern, Policy, Quant, Value};
use agenra_lean::wire::{decimal_from_parts, decimal_parts};
use agenra_lean::{Cbor, Client, Entry, Loopback, Transport, Wire, WireError, VERSION};
use std::collections::{BTreeMap, BTreeSet};

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn int(n: i128) -> Cbor {
    Cbor::Int(n)
}

fn arr(items: Vec<Cbor>) -> Cbor {
    Cbor::Array(items)
}

fn text(s: &str) -> Cbor {
    Cbor::text(s)
}

#[test]
fn the_documented_example() {
    let input = arr(vec![
        Pattern::Glob("*.rs".into()).to_wire(),
        text("main.rs"),
    ])
    .encode();
    assert_eq!(
        input,
        hex("82 82 02 64 2a 2e 72 73 67 6d 61 69 6e 2e 72 73")
    );
    assert_eq!(
        Loopback.call(Entry::PatternMatches, &input).unwrap(),
        hex("82 00 f5")
    );
}

#[test]
fn each_type_has_the_documented_encoding() {
    let cases: Vec<(Cbor, Cbor)> = vec![
        (
            Pattern::Exact("a".into()).to_wire(),
            arr(vec![int(0), text("a")]),
        ),
        (
            Pattern::Prefix("a".into()).to_wire(),
            arr(vec![int(1), text("a")]),
        ),
        (dec("98.70").to_wire(), arr(vec![int(987), int(1)])),
        (dec("-0.05").to_wire(), arr(vec![int(-5), int(2)])),
        (dec("0").to_wire(), arr(vec![int(0), int(0)])),
        (
            dec("12345678901234567890").to_wire(),
            arr(vec![int(12_345_678_901_234_567_890), int(0)]),
        ),
        (
            Value::Str("x".into()).to_wire(),
            arr(vec![int(0), text("x")]),
        ),
        (Value::Int(-3).to_wire(), arr(vec![int(1), int(-3)])),
        (
            Value::Bool(true).to_wire(),
            arr(vec![int(2), Cbor::Bool(true)]),
        ),
        (
            Value::Decimal(dec("1.5")).to_wire(),
            arr(vec![int(3), arr(vec![int(15), int(1)])]),
        ),
        (
            Value::List(vec![Value::Null]).to_wire(),
            arr(vec![int(4), arr(vec![arr(vec![int(5)])])]),
        ),
        (Value::Null.to_wire(), arr(vec![int(5)])),
        (Quant::All.to_wire(), int(0)),
        (Quant::Any.to_wire(), int(1)),
        (ArgOp::In(vec![]).to_wire(), arr(vec![int(2), arr(vec![])])),
        (
            ArgOp::Suffix("z".into()).to_wire(),
            arr(vec![int(5), text("z")]),
        ),
        (
            ArgOp::Ge(dec("2")).to_wire(),
            arr(vec![int(11), arr(vec![int(2), int(0)])]),
        ),
        (ArgOp::NotInSet(3).to_wire(), arr(vec![int(13), int(3)])),
        (
            Cond::Test {
                param: 1,
                quant: Quant::Any,
                op: ArgOp::InSet(0),
            }
            .to_wire(),
            arr(vec![int(0), int(1), int(1), arr(vec![int(12), int(0)])]),
        ),
        (
            ArgCond::Agent(vec![2]).to_wire(),
            arr(vec![int(1), arr(vec![int(2)])]),
        ),
        (
            ArgCond::Not(Box::new(ArgCond::And(vec![]))).to_wire(),
            arr(vec![int(2), arr(vec![int(3), arr(vec![])])]),
        ),
        (
            ArgCond::Or(vec![]).to_wire(),
            arr(vec![int(4), arr(vec![])]),
        ),
        (Quota::Limited(7).to_wire(), arr(vec![int(0), int(7)])),
        (Quota::Unlimited.to_wire(), arr(vec![int(1)])),
        (Checks::Deny.to_wire(), int(2)),
        (
            Outcome::Pause(vec![1, 0]).to_wire(),
            arr(vec![int(1), arr(vec![int(1), int(0)])]),
        ),
        (Outcome::Invalid.to_wire(), arr(vec![int(4)])),
        (
            Event::Seed {
                set: 1,
                values: vec!["v".into()],
            }
            .to_wire(),
            arr(vec![int(6), int(1), arr(vec![text("v")])]),
        ),
        (
            Event::Unknown { id: "c".into() }.to_wire(),
            arr(vec![int(5), text("c")]),
        ),
        (
            Request {
                agent: 1,
                tool: 2,
                args: vec![],
                time: 9,
            }
            .to_wire(),
            arr(vec![int(1), int(2), arr(vec![]), int(9)]),
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

fn sample_policy() -> Policy {
    let mut p = Policy::empty("sample");
    p.sets = vec!["found".into()];
    p.tools = vec![Tool {
        name: "read".into(),
        params: vec![],
        resource: Some(0),
        sinks: vec![],
        output: Label::BOTTOM,
        sanitizer: None,
        facts: vec![],
    }];
    p.agents.push(Agent {
        name: "helper".into(),
        parent: Some(0),
        scope: None,
        own_context: false,
    });
    p.grants = vec![Grant {
        name: "g".into(),
        agent: 1,
        tool: 0,
        resource: Some(Pattern::Glob("/a/*".into())),
        args: vec![Cond::Test {
            param: 0,
            quant: Quant::All,
            op: ArgOp::Matches(Pattern::Prefix("/a".into())),
        }],
        quota: Quota::Limited(2),
        approval: true,
        expires_at: Some(100),
        discovers: Some(0),
    }];
    p
}

#[test]
fn a_policy_travels_as_its_projection() {
    let p = sample_policy();
    let w = p.to_wire();
    assert_eq!(
        w,
        arr(vec![
            arr(vec![arr(vec![int(0)])]),
            arr(vec![arr(vec![Cbor::Null]), arr(vec![int(0)])]),
            arr(vec![arr(vec![
                int(1),
                int(0),
                arr(vec![int(2), text("/a/*")]),
                arr(vec![arr(vec![
                    int(0),
                    int(0),
                    int(0),
                    arr(vec![int(6), arr(vec![int(1), text("/a")])])
                ])]),
                arr(vec![int(0), int(2)]),
                Cbor::Bool(true),
                int(100),
                int(0),
                text("g"),
            ])]),
            arr(vec![text("found")]),
            arr(vec![]),
        ])
    );
    let back = Policy::from_wire(&Cbor::decode(&w.encode()).unwrap(), "p").unwrap();
    assert_eq!(back.to_wire(), w);
    assert_eq!(back.grants[0].args, p.grants[0].args);
    assert_eq!(back.grants[0].name, "g");
    assert_eq!(back.agents[1].parent, Some(0));
}

/// Wire version 3: the policy's shared grants (`shared_grants`, strictly
/// ascending indexes in range, as `validate.rs` requires) and the tenant's
/// pool (`[[name, taken]]`).
#[test]
fn shared_grants_and_the_pool_travel() {
    let mut p = sample_policy();
    p.shared_grants = vec![0];
    let w = p.to_wire();
    let Cbor::Array(fields) = &w else {
        panic!("a policy is an array")
    };
    assert_eq!(fields[4], arr(vec![int(0)]));
    assert_eq!(Policy::from_wire(&w, "p").unwrap().shared_grants, vec![0]);
    let with_shared = |shared: Cbor| {
        let mut f = fields.clone();
        f[4] = shared;
        Policy::from_wire(&arr(f), "input[0]")
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        with_shared(arr(vec![int(1)])),
        "input[0].shared: expected grant indexes in range of the policy's grants, found [1]"
    );
    assert_eq!(
        with_shared(arr(vec![int(0), int(0)])),
        "input[0].shared: expected strictly ascending grant indexes, found [0, 0]"
    );
    assert_eq!(
        with_shared(text("x")),
        "input[0].shared: expected an array, found \"x\""
    );
    let mut pool = SharedCounts::default();
    pool.set_taken("pay", 2);
    pool.set_taken("fetch", 1);
    let pw = pool.to_wire();
    assert_eq!(
        pw,
        arr(vec![
            arr(vec![text("fetch"), int(1)]),
            arr(vec![text("pay"), int(2)])
        ])
    );
    assert_eq!(SharedCounts::from_wire(&pw, "pool").unwrap(), pool);
    // Any order; a zero count is no entry; a name twice is an error.
    let lean_order = arr(vec![
        arr(vec![text("pay"), int(2)]),
        arr(vec![text("zero"), int(0)]),
        arr(vec![text("fetch"), int(1)]),
    ]);
    assert_eq!(SharedCounts::from_wire(&lean_order, "pool").unwrap(), pool);
    let twice = arr(vec![
        arr(vec![text("pay"), int(2)]),
        arr(vec![text("pay"), int(1)]),
    ]);
    assert_eq!(
        SharedCounts::from_wire(&twice, "answer[2]")
            .unwrap_err()
            .to_string(),
        "answer[2][1]: expected a grant name not already in the pool, found \"pay\""
    );
    assert!(SharedCounts::from_wire(&arr(vec![arr(vec![text("pay")])]), "pool").is_err());
}

/// Two sessions of a tenant on one pool through the loopback
/// (`agenra_ffi_step_in`), and one session with a shared grant through
/// `agenra_ffi_step` (its private pool): the answers are the spec's, and
/// a ledger decoded from the wire gets the policy's shared grants back.
#[test]
fn the_loopback_steps_sessions_on_one_pool() {
    let client = Client::new(Loopback);
    let mut p = sample_policy();
    p.grants[0].approval = false;
    p.grants[0].quota = Quota::Limited(1);
    p.grants.push(Grant {
        name: "root".into(),
        agent: 0,
        tool: 0,
        resource: None,
        args: vec![],
        quota: Quota::Unlimited,
        approval: false,
        expires_at: None,
        discovers: None,
    });
    p.shared_grants = vec![0];
    let req = Request {
        agent: 1,
        tool: 0,
        args: vec![Value::Str("/a/x".into())],
        time: 1,
    };
    let call = |id: &str| Event::Call {
        id: id.into(),
        req: req.clone(),
    };
    let a0 = State::initial(&p);
    let b0 = State::initial(&p);
    let pool0 = SharedCounts::default();
    // Session a takes the tenant's only unit of "g" ...
    let answer = client
        .step_in(&p, &a0, &pool0, &call("c"), Checks::Pass)
        .unwrap();
    assert_eq!(
        answer,
        spec::step_in(&p, &a0, &pool0, &call("c"), Checks::Pass)
    );
    let (o, a1, pool1) = answer;
    assert_eq!(o, Outcome::Allow(vec![0, 1]));
    assert_eq!(pool1.taken("g"), 1);
    assert_eq!(a1.ledger.held(0), 1);
    assert_eq!(a1.ledger.shared, vec![0]);
    // ... so session b is denied; a's failure gives it back to the pool.
    let (o, b1, pool2) = client
        .step_in(&p, &b0, &pool1, &call("c"), Checks::Pass)
        .unwrap();
    assert_eq!((o, &b1, &pool2), (Outcome::Deny, &b0, &pool1));
    let failed = Event::Failed { id: "c".into() };
    let (o, a2, pool3) = client
        .step_in(&p, &a1, &pool2, &failed, Checks::Pass)
        .unwrap();
    assert_eq!(o, Outcome::Applied);
    assert_eq!(pool3, SharedCounts::default());
    assert_eq!(a2.ledger.held(0), 0);
    assert_eq!(
        client
            .step_in(&p, &b1, &pool3, &call("c"), Checks::Pass)
            .unwrap(),
        spec::step_in(&p, &b1, &pool3, &call("c"), Checks::Pass)
    );
    // One session alone: its private pool.
    assert_eq!(
        client.step(&p, &a0, &call("c"), Checks::Pass).unwrap(),
        spec::step(&p, &a0, &call("c"), Checks::Pass)
    );
    assert_eq!(
        client.step(&p, &a1, &call("d"), Checks::Pass).unwrap(),
        spec::step(&p, &a1, &call("d"), Checks::Pass)
    );
    assert_eq!(client.select(&p, &a1.ledger, 1, &req, &[]).unwrap(), None);
    assert_eq!(
        client.select(&p, &a0.ledger, 1, &req, &[]).unwrap(),
        Some(0)
    );
}

#[test]
fn states_round_trip_and_maps_reject_duplicates() {
    let mut paused = BTreeMap::new();
    paused.insert("b".to_string(), vec![0]);
    paused.insert("a".to_string(), vec![]);
    let s = State {
        ledger: Ledger {
            remaining: vec![Quota::Limited(1), Quota::Unlimited],
            shared: vec![],
        },
        paused,
        running: BTreeMap::new(),
        sets: vec![BTreeSet::from(["y".to_string(), "x".to_string()])],
    };
    let w = s.to_wire();
    // Keys in order, set elements sorted.
    assert_eq!(
        w,
        arr(vec![
            arr(vec![arr(vec![int(0), int(1)]), arr(vec![int(1)])]),
            arr(vec![
                arr(vec![text("a"), arr(vec![])]),
                arr(vec![text("b"), arr(vec![int(0)])])
            ]),
            arr(vec![]),
            arr(vec![arr(vec![text("x"), text("y")])]),
        ])
    );
    assert_eq!(State::from_wire(&w, "s").unwrap(), s);
    // Lean may answer sets unsorted, with repeats; maps in any order.
    let lean_order = arr(vec![
        arr(vec![arr(vec![int(0), int(1)]), arr(vec![int(1)])]),
        arr(vec![
            arr(vec![text("b"), arr(vec![int(0)])]),
            arr(vec![text("a"), arr(vec![])]),
        ]),
        arr(vec![]),
        arr(vec![arr(vec![text("y"), text("x"), text("y")])]),
    ]);
    assert_eq!(State::from_wire(&lean_order, "s").unwrap(), s);
    let dup = arr(vec![
        arr(vec![]),
        arr(vec![
            arr(vec![text("a"), arr(vec![])]),
            arr(vec![text("a"), arr(vec![])]),
        ]),
        arr(vec![]),
        arr(vec![]),
    ]);
    let err = State::from_wire(&dup, "answer").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("answer.paused[1]: expected a call id not already in the map"),
        "{err}"
    );
}

#[test]
fn decimals_keep_their_value() {
    for s in [
        "0",
        "1",
        "-1",
        "98.7",
        "-0.000000000000000001",
        "12345678901234567890",
        "-99999999999999999999",
        "0.5",
        "100",
    ] {
        let d = dec(s);
        let (m, k) = decimal_parts(&d);
        assert_eq!(decimal_from_parts(m, k), Some(d), "{s}");
        assert_eq!(Decimal::from_wire(&d.to_wire(), "d").unwrap(), d, "{s}");
    }
    assert_eq!(decimal_parts(&dec("98.70")), (987, 1));
    // Lean may send a decimal that is not normalized: same value.
    assert_eq!(decimal_from_parts(9870, 2), Some(dec("98.7")));
    assert_eq!(decimal_from_parts(-5, 3), Some(dec("-0.005")));
    // Beyond Rust's limits: an error, not a different number.
    assert_eq!(decimal_from_parts(1, 19), None);
    assert!(Decimal::from_wire(&arr(vec![int(1), int(19)]), "x.d").is_err());
}

#[test]
fn shape_errors_name_the_place() {
    let e = |c: Cbor| Grant::from_wire(&c, "input[1]").unwrap_err().to_string();
    let mut g = sample_policy().grants[0].to_wire();
    assert_eq!(
        e(arr(vec![])),
        "input[1]: expected an array of 9 elements, found []"
    );
    if let Cbor::Array(items) = &mut g {
        items[4] = arr(vec![int(7)]);
    }
    assert_eq!(
        e(g.clone()),
        "input[1].quota: expected a known constructor tag, found [7]"
    );
    if let Cbor::Array(items) = &mut g {
        items[4] = arr(vec![int(0), int(-1)]);
    }
    assert_eq!(
        e(g),
        "input[1].quota[1]: expected an unsigned integer < 2^64, found -1"
    );
    assert!(Value::from_wire(&arr(vec![int(5), int(0)]), "v")
        .unwrap_err()
        .to_string()
        .contains("number of fields"));
}

#[test]
fn the_loopback_answers_like_the_spec() {
    let client = Client::new(Loopback);
    assert_eq!(client.version().unwrap(), VERSION);
    let p = sample_policy();
    let req = Request {
        agent: 1,
        tool: 0,
        args: vec![Value::Str("/a/x".into())],
        time: 5,
    };
    assert!(client
        .grant_matches(&p, &p.grants[0], 1, &req, &[])
        .unwrap());
    assert!(spec::grant_matches(&p, &p.grants[0], 1, &req, &[]));
    let s0 = State::initial(&p);
    // The helper's call needs main's grant too: there is none, so deny.
    let call = Event::Call {
        id: "c".into(),
        req: req.clone(),
    };
    assert_eq!(
        client.step(&p, &s0, &call, Checks::Pass).unwrap(),
        spec::step(&p, &s0, &call, Checks::Pass)
    );
    assert_eq!(
        client.select(&p, &s0.ledger, 1, &req, &[]).unwrap(),
        Some(0)
    );
    assert_eq!(client.select(&p, &s0.ledger, 0, &req, &[]).unwrap(), None);
    assert!(client.glob_matches("a*", "abc").unwrap());
    assert!(!client
        .arg_op_eval(&ArgOp::Lt(dec("1")), Quant::All, &Value::Int(1), &[])
        .unwrap());
    assert!(client
        .arg_cond_eval(&ArgCond::And(vec![]), &[], 0, &[])
        .unwrap());
}

#[test]
fn bad_inputs_come_back_as_rejections_not_verdicts() {
    let client = Client::new(Loopback);
    let bytes = Loopback.call(Entry::GlobMatches, &hex("82 01 02")).unwrap();
    let answer = Cbor::decode(&bytes).unwrap();
    assert_eq!(
        answer,
        arr(vec![
            int(1),
            text("the input of agenra_ffi_glob_matches[0]: expected a text string, found 1")
        ])
    );
    // A state whose ledger does not fit the policy is rejected, not stepped.
    let p = sample_policy();
    let s = State::initial(&Policy::empty("other"));
    let err = client
        .step(&p, &s, &Event::Failed { id: "x".into() }, Checks::Pass)
        .unwrap_err();
    assert!(
        matches!(
            err,
            WireError::Rejected {
                entry: "agenra_ffi_step",
                ..
            }
        ),
        "{err}"
    );
    // Garbage bytes: a CBOR error naming the message.
    let bytes = Loopback.call(Entry::Step, &[0xff]).unwrap();
    assert!(matches!(&Cbor::decode(&bytes).unwrap(), Cbor::Array(a) if a[0] == int(1)));
}

/// A transport whose answers are wrong in each way the decoder must catch.
struct Broken(Vec<u8>);

impl Transport for Broken {
    fn call(&self, _: Entry, _: &[u8]) -> Result<Vec<u8>, WireError> {
        Ok(self.0.clone())
    }
}

#[test]
fn malformed_answers_are_errors() {
    let ask = |bytes: &str| Client::new(Broken(hex(bytes))).glob_matches("a", "a");
    assert!(matches!(ask("82 00"), Err(WireError::Cbor { .. })));
    assert!(matches!(ask("82 00 01"), Err(WireError::Shape { .. })));
    assert!(matches!(ask("82 02 f5"), Err(WireError::Shape { .. })));
    assert!(matches!(ask("f5"), Err(WireError::Shape { .. })));
    assert_eq!(ask("82 00 f4"), Ok(false));
    let e = ask("82 01 61 78").unwrap_err();
    assert_eq!(
        e.to_string(),
        "agenra_ffi_glob_matches: the callee rejected the input: x"
    );
}

#[test]
fn every_entry_point_has_a_distinct_symbol() {
    let symbols: BTreeSet<_> = Entry::ALL.iter().map(|e| e.symbol()).collect();
    assert_eq!(symbols.len(), Entry::ALL.len());
    assert!(symbols.iter().all(|s| s.starts_with("agenra_ffi_")));
}

#[test]
fn token_kinds_round_trip_built_in_and_declared() {
    use agenra_core::tokens::{TokenKind, TokenOrigin};
    let kinds = [
        None,
        Some(TokenKind::Url),
        Some(TokenKind::Quantity),
        Some(TokenKind::Declared(0)),
        Some(TokenKind::Declared(7)),
    ];
    for (kind, code) in kinds
        .into_iter()
        .zip([None, Some(0), Some(4), Some(5), Some(12)])
    {
        let c: ArgCond = Cond::Tokens {
            param: 1,
            quant: Quant::Any,
            kind,
            from: vec![TokenOrigin::Elsewhere],
        };
        let wire = c.to_wire();
        let Cbor::Array(fields) = &wire else {
            panic!("{wire:?}")
        };
        assert_eq!(fields[3], code.map(int).to_wire(), "{kind:?}");
        assert_eq!(ArgCond::from_wire(&wire, "c").unwrap(), c);
    }
}
