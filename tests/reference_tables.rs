//! Hand-computed expectations for every pattern form and every argument
//! operator (with `null`, wrong types, lists and both quantifiers), for
//! conditions, grant matching, selection and the step: each row was worked
//! out from `docs/semantics.md` and `docs/policy-language.md`, not by
//! running the code. Every implementation of [`Reference`] must reproduce
//! every row (with feature `lean`, the Lean model too).

mod reference;

use agenra_core::ledger::Ledger;
use agenra_core::policy::{Agent, Grant, Quota, Tool};
use agenra_core::spec::{Checks, Event, Outcome, Request, State};
use agenra_core::{ArgCond, ArgOp, Cond, Decimal, Label, Pattern, Policy, Quant, Value};
use reference::{implementations, ok};
use std::collections::{BTreeMap, BTreeSet};

fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

fn i(n: i64) -> Value {
    Value::Int(n)
}

fn dv(x: &str) -> Value {
    Value::Decimal(d(x))
}

fn list(vs: Vec<Value>) -> Value {
    Value::List(vs)
}

#[test]
fn patterns() {
    use Pattern::*;
    let rows: Vec<(Pattern, &str, bool)> = vec![
        (Exact("a.txt".into()), "a.txt", true),
        (Exact("a.txt".into()), "a.txt ", false),
        (Exact("a.txt".into()), "A.txt", false),
        (Exact("".into()), "", true),
        (Exact("".into()), "x", false),
        (Prefix("src/".into()), "src/", true),
        (Prefix("src/".into()), "src/a/b.rs", true),
        (Prefix("src/".into()), "src", false),
        (Prefix("src/".into()), "xsrc/", false),
        (Prefix("".into()), "", true),
        (Prefix("".into()), "anything", true),
        (Prefix("é".into()), "éa", true),
        (Glob("*".into()), "", true),
        (Glob("*".into()), "a/b/c", true),
        (Glob("*.rs".into()), "main.rs", true),
        (Glob("*.rs".into()), ".rs", true),
        (Glob("*.rs".into()), "main.rsx", false),
        (Glob("*.rs".into()), "main.r", false),
        (Glob("src/*".into()), "src/a/b.rs", true),
        (Glob("src/*".into()), "src", false),
        (Glob("a?c".into()), "abc", true),
        (Glob("a?c".into()), "ac", false),
        (Glob("a?c".into()), "abbc", false),
        (Glob("a?c".into()), "aéc", true),
        (Glob("?".into()), "é", true),
        (Glob("?".into()), "", false),
        (Glob("??".into()), "é", false),
        (Glob("*/.ssh/*".into()), "/home/u/.ssh/id", true),
        (Glob("*/.ssh/*".into()), ".ssh/id", false),
        (Glob("a*b*c".into()), "abc", true),
        (Glob("a*b*c".into()), "aXbYbZc", true),
        (Glob("a*b*c".into()), "acb", false),
        (Glob("*a*".into()), "bbb", false),
        (Glob("**".into()), "", true),
        (Glob("*?".into()), "", false),
        (Glob("*?".into()), "x", true),
        (Glob("".into()), "", true),
        (Glob("".into()), "a", false),
        (Glob("ab".into()), "ab", true),
        (Glob("ab".into()), "abc", false),
        (Glob("*ab".into()), "aab", true),
        (Glob("*ab".into()), "aba", false),
    ];
    for r in implementations() {
        for (p, t, want) in &rows {
            assert_eq!(
                ok(&*r, r.pattern_matches(p, t)),
                *want,
                "{}: {p:?} on {t:?}",
                r.name()
            );
            if let Glob(g) = p {
                assert_eq!(
                    ok(&*r, r.glob_matches(g, t)),
                    *want,
                    "{}: glob {g:?} on {t:?}",
                    r.name()
                );
            }
        }
    }
}

#[test]
fn operators() {
    use ArgOp::*;
    let sets = vec![
        BTreeSet::from(["x".to_string(), "y".to_string()]),
        BTreeSet::new(),
    ];
    let all = Quant::All;
    let any = Quant::Any;
    let rows: Vec<(ArgOp, Quant, Value, bool)> = vec![
        // == : by value across int and decimal; by content otherwise.
        (Eq(s("bob")), all, s("bob"), true),
        (Eq(s("bob")), all, s("Bob"), false),
        (Eq(i(98)), all, dv("98.00"), true),
        (Eq(dv("98.7")), all, dv("98.70"), true),
        (Eq(dv("98.7")), all, i(98), false),
        (Eq(i(1)), all, s("1"), false),
        (Eq(Value::Bool(true)), all, Value::Bool(true), true),
        (Eq(Value::Bool(true)), all, i(1), false),
        (Eq(s("a")), all, Value::Null, false),
        // == null / != null: the whole value.
        (Eq(Value::Null), all, Value::Null, true),
        (Eq(Value::Null), all, s(""), false),
        (Eq(Value::Null), all, list(vec![]), false),
        (Eq(Value::Null), all, list(vec![Value::Null]), false),
        (Ne(Value::Null), all, Value::Null, false),
        (Ne(Value::Null), all, s(""), true),
        (Ne(Value::Null), all, list(vec![]), true),
        // != : a value of the operand's type that differs.
        (Ne(s("bob")), all, s("eve"), true),
        (Ne(s("bob")), all, s("bob"), false),
        (Ne(s("bob")), all, i(3), false),
        (Ne(s("bob")), all, Value::Null, false),
        (Ne(i(3)), all, dv("3.0"), false),
        (Ne(i(3)), all, dv("3.5"), true),
        (Ne(dv("0.5")), all, i(1), true),
        (Ne(Value::Bool(false)), all, Value::Bool(true), true),
        // in / not in.
        (In(vec![s("a"), s("b")]), all, s("b"), true),
        (In(vec![s("a"), s("b")]), all, s("c"), false),
        (In(vec![]), all, s("a"), false),
        (In(vec![i(1), i(2)]), all, dv("2.000"), true),
        (In(vec![s("a")]), all, Value::Null, false),
        (NotIn(vec![s("a"), s("b")]), all, s("c"), true),
        (NotIn(vec![s("a"), s("b")]), all, s("a"), false),
        (NotIn(vec![]), all, s("a"), true),
        (NotIn(vec![]), all, Value::Null, false),
        (NotIn(vec![i(5)]), all, dv("5.0"), false),
        // starts_with / ends_with / matches: strings only.
        (Prefix("ab".into()), all, s("abc"), true),
        (Prefix("ab".into()), all, s("a"), false),
        (Prefix("".into()), all, s(""), true),
        (Prefix("1".into()), all, i(12), false),
        (Suffix("@corp.com".into()), all, s("bob@corp.com"), true),
        (
            Suffix("@corp.com".into()),
            all,
            s("bob@corp.com.evil"),
            false,
        ),
        (Suffix("é".into()), all, s("café"), true),
        (Suffix("x".into()), all, Value::Null, false),
        (
            Matches(Pattern::Glob("*.pdf".into())),
            all,
            s("a.pdf"),
            true,
        ),
        (
            Matches(Pattern::Glob("*.pdf".into())),
            all,
            s("a.pdf.exe"),
            false,
        ),
        (
            Matches(Pattern::Prefix("/tmp/".into())),
            all,
            s("/tmp/x"),
            true,
        ),
        (Matches(Pattern::Exact("x".into())), all, s("x"), true),
        (
            Matches(Pattern::Exact("x".into())),
            all,
            Value::Bool(true),
            false,
        ),
        // contains: a substring of a string, an element of a list.
        (Contains(s("corp")), all, s("bob@corp.com"), true),
        (Contains(s("")), all, s(""), true),
        (Contains(s("x")), all, s(""), false),
        (Contains(s("b")), all, list(vec![s("a"), s("b")]), true),
        (Contains(s("b")), all, list(vec![s("ab")]), false),
        (Contains(i(2)), all, list(vec![dv("2.0")]), true),
        (Contains(i(2)), all, list(vec![]), false),
        (Contains(i(2)), all, i(2), false),
        (Contains(s("a")), all, Value::Null, false),
        // < <= > >= : numbers by value, anything else false.
        (Lt(d("100")), all, i(99), true),
        (Lt(d("100")), all, i(100), false),
        (Lt(d("100")), all, dv("99.999999999999999999"), true),
        (Le(d("98.70")), all, dv("98.7"), true),
        (Le(d("-1.25")), all, dv("-1.5"), true),
        (Gt(d("-1.5")), all, dv("-1.25"), true),
        (Gt(d("0")), all, i(0), false),
        (Ge(d("0")), all, i(0), true),
        (Ge(d("0")), all, s("5"), false),
        (Lt(d("5")), all, Value::Null, false),
        (Lt(d("5")), all, Value::Bool(false), false),
        // in SET / not in SET: strings, by the set's current content.
        (InSet(0), all, s("x"), true),
        (InSet(0), all, s("z"), false),
        (InSet(1), all, s("x"), false),
        (InSet(7), all, s("x"), false),
        (InSet(0), all, i(1), false),
        (NotInSet(0), all, s("z"), true),
        (NotInSet(0), all, s("x"), false),
        (NotInSet(1), all, s("x"), true),
        (NotInSet(7), all, s("x"), true),
        (NotInSet(7), all, i(1), false),
        (NotInSet(7), all, Value::Null, false),
        // Lists: every element (all, true when empty) or some (any, false when empty).
        (Lt(d("10")), all, list(vec![i(3), i(12)]), false),
        (Lt(d("10")), any, list(vec![i(3), i(12)]), true),
        (Lt(d("10")), all, list(vec![]), true),
        (Lt(d("10")), any, list(vec![]), false),
        (
            Suffix("@corp.com".into()),
            all,
            list(vec![s("evil@x.com,bob@corp.com")]),
            true,
        ),
        (
            Suffix("@corp.com".into()),
            all,
            list(vec![s("evil@x.com"), s("bob@corp.com")]),
            false,
        ),
        (
            Suffix("@corp.com".into()),
            any,
            list(vec![s("evil@x.com"), s("bob@corp.com")]),
            true,
        ),
        (Eq(s("a")), all, list(vec![s("a"), s("a")]), true),
        (Eq(s("a")), all, list(vec![s("a"), Value::Null]), false),
        (Ne(s("a")), any, list(vec![s("a"), s("b")]), true),
        (InSet(0), all, list(vec![s("x"), s("y")]), true),
        (InSet(0), all, list(vec![s("x"), s("q")]), false),
        // The quantifier does not matter on a scalar.
        (Lt(d("10")), any, i(3), true),
    ];
    for r in implementations() {
        for (op, q, v, want) in &rows {
            assert_eq!(
                ok(&*r, r.arg_op_eval(op, *q, v, &sets)),
                *want,
                "{}: {op:?} ({q:?}) on {v:?}",
                r.name()
            );
        }
    }
}

#[test]
fn conditions() {
    let t = |param, op| Cond::Test {
        param,
        quant: Quant::All,
        op,
    };
    let bob = t(0, ArgOp::Eq(s("bob")));
    let big = t(1, ArgOp::Gt(d("100")));
    let args = vec![s("bob"), i(150)];
    let rows: Vec<(ArgCond, usize, bool)> = vec![
        (bob.clone(), 0, true),
        (Cond::Not(Box::new(bob.clone())), 0, false),
        (Cond::And(vec![bob.clone(), big.clone()]), 0, true),
        (
            Cond::And(vec![bob.clone(), Cond::Not(Box::new(big.clone()))]),
            0,
            false,
        ),
        (
            Cond::Or(vec![Cond::Not(Box::new(bob.clone())), big.clone()]),
            0,
            true,
        ),
        (Cond::And(vec![]), 0, true),
        (Cond::Or(vec![]), 0, false),
        // A parameter the call does not have: false, and its negation true.
        (t(5, ArgOp::Eq(Value::Null)), 0, false),
        (Cond::Not(Box::new(t(5, ArgOp::Eq(Value::Null)))), 0, true),
        // The calling agent.
        (Cond::Agent(vec![1, 2]), 2, true),
        (Cond::Agent(vec![1, 2]), 0, false),
        (Cond::Agent(vec![]), 0, false),
        (Cond::Not(Box::new(Cond::Agent(vec![0]))), 1, true),
    ];
    for r in implementations() {
        for (c, agent, want) in &rows {
            assert_eq!(
                ok(&*r, r.arg_cond_eval(c, &args, *agent, &[])),
                *want,
                "{}: {c:?} by agent {agent}",
                r.name()
            );
        }
    }
}

fn tool(resource: Option<usize>) -> Tool {
    Tool {
        name: "t".into(),
        params: vec![],
        resource,
        sinks: vec![],
        output: Label::BOTTOM,
        sanitizer: None,
        facts: vec![],
    }
}

fn grant(agent: usize, tool: usize, quota: Quota) -> Grant {
    Grant {
        name: String::new(),
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

/// `read(path)` (resource: path) and `send(to)`; `main` (0) delegates to
/// `helper` (1), which delegates to `sub` (2); one discovered set.
/// 0: main read on prefix "/a/", quota 1, expires 100;
/// 1: main read, quota 2;
/// 2: helper read, unlimited;
/// 3: main send where to == "bob", quota 5, approval;
/// 4: main send where !(to == "bob"), unlimited, discovers into set 0;
/// 5: helper send where to in set 0, quota 1;
/// 6: sub read where agent == helper (never true for sub's own calls), quota 1.
fn policy() -> Policy {
    let mut p = Policy::empty("tables");
    p.sets = vec!["found".into()];
    p.tools = vec![tool(Some(0)), tool(None)];
    p.agents.push(Agent {
        name: "helper".into(),
        parent: Some(0),
        scope: None,
        own_context: false,
    });
    p.agents.push(Agent {
        name: "sub".into(),
        parent: Some(1),
        scope: None,
        own_context: false,
    });
    let bob = Cond::Test {
        param: 0,
        quant: Quant::All,
        op: ArgOp::Eq(s("bob")),
    };
    p.grants = vec![
        Grant {
            resource: Some(Pattern::Prefix("/a/".into())),
            expires_at: Some(100),
            ..grant(0, 0, Quota::Limited(1))
        },
        grant(0, 0, Quota::Limited(2)),
        grant(1, 0, Quota::Unlimited),
        Grant {
            args: vec![bob.clone()],
            approval: true,
            ..grant(0, 1, Quota::Limited(5))
        },
        Grant {
            args: vec![Cond::Not(Box::new(bob))],
            discovers: Some(0),
            ..grant(0, 1, Quota::Unlimited)
        },
        Grant {
            args: vec![Cond::Test {
                param: 0,
                quant: Quant::All,
                op: ArgOp::InSet(0),
            }],
            ..grant(1, 1, Quota::Limited(1))
        },
        Grant {
            args: vec![Cond::Agent(vec![1])],
            ..grant(2, 0, Quota::Limited(1))
        },
    ];
    p
}

fn req(agent: usize, tool: usize, arg: Value, time: u64) -> Request {
    Request {
        agent,
        tool,
        args: vec![arg],
        time,
    }
}

#[test]
fn grant_matching() {
    let p = policy();
    let found = vec![BTreeSet::from(["carol".to_string()])];
    // (grant, owner, request, sets, expected)
    let rows: Vec<(usize, usize, Request, bool)> = vec![
        (0, 0, req(0, 0, s("/a/x"), 99), true),
        (0, 0, req(0, 0, s("/a/x"), 100), false), // expires at 100: no call at time >= 100
        (0, 0, req(0, 0, s("/b/x"), 1), false),   // resource
        (0, 0, req(0, 0, i(3), 1), false),        // the resource is not a string
        (0, 0, req(0, 0, Value::Null, 1), false),
        (0, 1, req(1, 0, s("/a/x"), 1), false), // owner
        (0, 0, req(1, 0, s("/a/x"), 1), true),  // main's grant serves its delegate's call
        (1, 0, req(0, 1, s("/a/x"), 1), false), // tool
        (2, 1, req(1, 0, s("/b"), 1), true),
        (3, 0, req(0, 1, s("bob"), 1), true),
        (3, 0, req(0, 1, s("eve"), 1), false), // condition
        (4, 0, req(0, 1, s("eve"), 1), true),
        (5, 1, req(1, 1, s("carol"), 1), true), // in the discovered set
        (5, 1, req(1, 1, s("dave"), 1), false),
        (6, 2, req(2, 0, s("/x"), 1), false), // the condition sees the calling agent (sub)
        (6, 2, req(1, 0, s("/x"), 1), true), // helper calls: sub's grant is not on its chain, but matches as a grant
    ];
    for r in implementations() {
        for (g, owner, rq, want) in &rows {
            assert_eq!(
                ok(&*r, r.grant_matches(&p, &p.grants[*g], *owner, rq, &found)),
                *want,
                "{}: grant {g}, owner {owner}, {rq:?}",
                r.name()
            );
        }
    }
}

#[test]
fn selection() {
    let p = policy();
    let full = Ledger::initial(&p);
    let mut used0 = full.clone();
    used0.remaining[0] = Quota::Limited(0);
    let mut empty01 = used0.clone();
    empty01.remaining[1] = Quota::Limited(0);
    let rows: Vec<(&Ledger, usize, Request, Option<usize>)> = vec![
        (&full, 0, req(0, 0, s("/a/x"), 1), Some(0)),
        (&full, 0, req(0, 0, s("/b/x"), 1), Some(1)),
        (&full, 0, req(0, 0, s("/a/x"), 100), Some(1)), // grant 0 expired
        (&used0, 0, req(0, 0, s("/a/x"), 1), Some(1)),
        (&empty01, 0, req(0, 0, s("/a/x"), 1), None),
        (&full, 0, req(0, 1, s("eve"), 1), Some(4)),
        (&full, 0, req(0, 1, s("bob"), 1), Some(3)),
        (&full, 1, req(1, 1, s("eve"), 1), None),
        (&full, 1, req(1, 0, s("/a/x"), 1), Some(2)),
        (&full, 2, req(2, 0, s("/a/x"), 1), None),
    ];
    for r in implementations() {
        for (l, agent, rq, want) in &rows {
            assert_eq!(
                ok(&*r, r.select(&p, l, *agent, rq, &[BTreeSet::new()])),
                *want,
                "{}: agent {agent}, {rq:?}, ledger {:?}",
                r.name(),
                l.remaining
            );
        }
    }
}

/// The life of calls, each step's outcome and state worked out by hand.
#[test]
fn steps() {
    let p = policy();
    let s0 = State::initial(&p);
    let call = |id: &str, rq: Request| Event::Call {
        id: id.into(),
        req: rq,
    };
    let id = |x: &str| x.to_string();
    let with = |st: &State, f: &dyn Fn(&mut State)| {
        let mut n = st.clone();
        f(&mut n);
        n
    };
    let held = |entries: &[(&str, Vec<usize>)]| -> BTreeMap<String, Vec<usize>> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    };

    // 1. helper reads /a/x: helper's grant 2, then main's grant 0 (first match, quota 1).
    let s1 = with(&s0, &|n| {
        n.ledger.remaining[0] = Quota::Limited(0);
        n.running = held(&[("c1", vec![2, 0])]);
    });
    // 2. the same again: main's grant 0 is spent, grant 1 serves.
    let s2 = with(&s1, &|n| {
        n.ledger.remaining[1] = Quota::Limited(1);
        n.running = held(&[("c1", vec![2, 0]), ("c2", vec![2, 1])]);
    });
    // 3. main sends to bob: grant 3 needs approval, so the call pauses with its unit reserved.
    let s3 = with(&s2, &|n| {
        n.ledger.remaining[3] = Quota::Limited(4);
        n.paused = held(&[("c3", vec![3])]);
    });
    // 4. approval re-checked and denied: the unit returns.
    let s4 = with(&s3, &|n| {
        n.ledger.remaining[3] = Quota::Limited(5);
        n.paused = BTreeMap::new();
    });
    // 5. c2 fails: its units return (grant 1 back to 2; grant 2 unlimited).
    let s5 = with(&s4, &|n| {
        n.ledger.remaining[1] = Quota::Limited(2);
        n.running = held(&[("c1", vec![2, 0])]);
    });
    // 6. c1's outcome is unknown: its units stay spent.
    let s6 = with(&s5, &|n| n.running = BTreeMap::new());
    // 7. main sends to eve (grant 4, discovers into set 0), then it succeeds with "carol".
    let s7 = with(&s6, &|n| n.running = held(&[("c4", vec![4])]));
    let s8 = with(&s7, &|n| {
        n.running = BTreeMap::new();
        n.sets[0].insert("carol".into());
    });
    // 9. helper sends to carol: grant 5 (carol is in the set) and main's grant 4.
    let s9 = with(&s8, &|n| {
        n.ledger.remaining[5] = Quota::Limited(0);
        n.running = held(&[("c5", vec![5, 4])]);
    });
    let script: Vec<(&State, Event, Checks, Outcome, State)> = vec![
        (
            &s0,
            call("c1", req(1, 0, s("/a/x"), 1)),
            Checks::Pass,
            Outcome::Allow(vec![2, 0]),
            s1.clone(),
        ),
        (
            &s1,
            call("c2", req(1, 0, s("/a/x"), 1)),
            Checks::Pass,
            Outcome::Allow(vec![2, 1]),
            s2.clone(),
        ),
        (
            &s2,
            call("c3", req(0, 1, s("bob"), 1)),
            Checks::Pass,
            Outcome::Pause(vec![3]),
            s3.clone(),
        ),
        (
            &s3,
            Event::Approve { id: id("c3") },
            Checks::Deny,
            Outcome::Deny,
            s4.clone(),
        ),
        (
            &s4,
            Event::Approve { id: id("c3") },
            Checks::Pass,
            Outcome::Invalid,
            s4.clone(),
        ),
        (
            &s4,
            Event::Failed { id: id("c2") },
            Checks::Pass,
            Outcome::Applied,
            s5.clone(),
        ),
        (
            &s5,
            Event::Unknown { id: id("c1") },
            Checks::Pass,
            Outcome::Applied,
            s6.clone(),
        ),
        (
            &s6,
            Event::Unknown { id: id("c1") },
            Checks::Pass,
            Outcome::Invalid,
            s6.clone(),
        ),
        (
            &s6,
            call("c4", req(0, 1, s("eve"), 1)),
            Checks::Pass,
            Outcome::Allow(vec![4]),
            s7.clone(),
        ),
        (
            &s7,
            Event::Succeeded {
                id: id("c4"),
                discovered: vec!["carol".into()],
            },
            Checks::Pass,
            Outcome::Applied,
            s8.clone(),
        ),
        (
            &s8,
            call("c5", req(1, 1, s("carol"), 1)),
            Checks::Pass,
            Outcome::Allow(vec![5, 4]),
            s9.clone(),
        ),
        // No grant for the helper to dave: denied, nothing taken.
        (
            &s9,
            call("c6", req(1, 1, s("dave"), 1)),
            Checks::Pass,
            Outcome::Deny,
            s9.clone(),
        ),
        // grant 5 is spent now: the same call to carol is denied too.
        (
            &s9,
            call("c6", req(1, 1, s("carol"), 1)),
            Checks::Pass,
            Outcome::Deny,
            s9.clone(),
        ),
        // A call reusing a held id (c5 running, c3 paused) is invalid and
        // changes nothing, whatever the checks said.
        (
            &s9,
            call("c5", req(1, 1, s("carol"), 1)),
            Checks::Pass,
            Outcome::Invalid,
            s9.clone(),
        ),
        (
            &s3,
            call("c3", req(1, 0, s("/a/x"), 1)),
            Checks::Deny,
            Outcome::Invalid,
            s3.clone(),
        ),
        // Checks deny before the ledger: nothing taken.
        (
            &s0,
            call("c1", req(0, 0, s("/a/x"), 1)),
            Checks::Deny,
            Outcome::Deny,
            s0.clone(),
        ),
        // Checks pause an ordinary call: reserved and paused.
        (
            &s0,
            call("c1", req(0, 0, s("/b"), 1)),
            Checks::Pause,
            Outcome::Pause(vec![1]),
            with(&s0, &|n| {
                n.ledger.remaining[1] = Quota::Limited(1);
                n.paused = held(&[("c1", vec![1])]);
            }),
        ),
        // Reject a paused call: the unit returns.
        (
            &s3,
            Event::Reject { id: id("c3") },
            Checks::Pass,
            Outcome::Applied,
            s4.clone(),
        ),
        (
            &s0,
            Event::Reject { id: id("c3") },
            Checks::Pass,
            Outcome::Invalid,
            s0.clone(),
        ),
        // Approve (pass): from paused to running, units kept.
        (
            &s3,
            Event::Approve { id: id("c3") },
            Checks::Pass,
            Outcome::Allow(vec![3]),
            with(&s3, &|n| {
                n.paused = BTreeMap::new();
                n.running.insert("c3".into(), vec![3]);
            }),
        ),
        // Seeding: in range adds, out of range is invalid and changes nothing.
        (
            &s0,
            Event::Seed {
                set: 0,
                values: vec!["q".into(), "q".into()],
            },
            Checks::Pass,
            Outcome::Applied,
            with(&s0, &|n| {
                n.sets[0].insert("q".into());
            }),
        ),
        (
            &s0,
            Event::Seed {
                set: 1,
                values: vec!["q".into()],
            },
            Checks::Pass,
            Outcome::Invalid,
            s0.clone(),
        ),
        // A read's grant discovers nothing.
        (
            &s1,
            Event::Succeeded {
                id: id("c1"),
                discovered: vec!["z".into()],
            },
            Checks::Pass,
            Outcome::Applied,
            with(&s1, &|n| n.running = BTreeMap::new()),
        ),
        (
            &s0,
            Event::Succeeded {
                id: id("c1"),
                discovered: vec![],
            },
            Checks::Pass,
            Outcome::Invalid,
            s0.clone(),
        ),
    ];
    for r in implementations() {
        for (k, (before, e, checks, o, after)) in script.iter().enumerate() {
            let (got_o, got_s) = ok(&*r, r.step(&p, before, e, *checks));
            assert_eq!(&got_o, o, "{}: row {k}: {e:?} ({checks:?})", r.name());
            assert_eq!(&got_s, after, "{}: row {k}: {e:?} ({checks:?})", r.name());
        }
    }
}

/// Quota scope, worked out by hand: `main` has grant 0 `pay` (quota 2 per
/// tenant: shared) and grant 1 `spare` (quota 1 per session), both on
/// tool 0; sessions A and B share one pool. A row is the session, the
/// event, the checks, and then the outcome, that session's ledger, its
/// paused and running calls, and the units the pool counts as taken of
/// `pay`. A shared grant's entry counts the units the session holds.
#[test]
fn shared_pool_steps() {
    let mut p = Policy::empty("pool");
    p.tools = vec![tool(None)];
    p.grants = vec![
        Grant {
            name: "pay".into(),
            ..grant(0, 0, Quota::Limited(2))
        },
        Grant {
            name: "spare".into(),
            ..grant(0, 0, Quota::Limited(1))
        },
    ];
    p.shared_grants = vec![0];
    let call = |id: &str| Event::Call {
        id: id.into(),
        req: Request {
            agent: 0,
            tool: 0,
            args: vec![],
            time: 0,
        },
    };
    let id = |x: &str| x.to_string();
    let l = Quota::Limited;
    // (session, event, checks, outcome, ledger, paused, running, pay taken)
    #[allow(clippy::type_complexity)]
    let script: Vec<(
        usize,
        Event,
        Checks,
        Outcome,
        Vec<Quota>,
        Vec<&str>,
        Vec<&str>,
        u64,
    )> = vec![
        // A takes a unit of pay from the pool.
        (
            0,
            call("a1"),
            Checks::Pass,
            Outcome::Allow(vec![0]),
            vec![l(1), l(1)],
            vec![],
            vec!["a1"],
            1,
        ),
        // B reserves the second (a rule pauses the call).
        (
            1,
            call("b1"),
            Checks::Pause,
            Outcome::Pause(vec![0]),
            vec![l(1), l(1)],
            vec!["b1"],
            vec![],
            2,
        ),
        // The pool is empty: A's next call falls to its own spare.
        (
            0,
            call("a2"),
            Checks::Pass,
            Outcome::Allow(vec![1]),
            vec![l(1), l(0)],
            vec![],
            vec!["a1", "a2"],
            2,
        ),
        // Nothing left for A.
        (
            0,
            call("a3"),
            Checks::Pass,
            Outcome::Deny,
            vec![l(1), l(0)],
            vec![],
            vec!["a1", "a2"],
            2,
        ),
        // B's reservation is rejected: back to the pool, for anyone.
        (
            1,
            Event::Reject { id: id("b1") },
            Checks::Pass,
            Outcome::Applied,
            vec![l(0), l(1)],
            vec![],
            vec![],
            1,
        ),
        (
            0,
            call("a3"),
            Checks::Pass,
            Outcome::Allow(vec![0]),
            vec![l(2), l(0)],
            vec![],
            vec!["a1", "a2", "a3"],
            2,
        ),
        // A's failure gives one unit back.
        (
            0,
            Event::Failed { id: id("a1") },
            Checks::Pass,
            Outcome::Applied,
            vec![l(1), l(0)],
            vec![],
            vec!["a2", "a3"],
            1,
        ),
        (
            1,
            call("b2"),
            Checks::Pass,
            Outcome::Allow(vec![0]),
            vec![l(1), l(1)],
            vec![],
            vec!["b2"],
            2,
        ),
        // An unknown outcome keeps its unit taken.
        (
            0,
            Event::Unknown { id: id("a3") },
            Checks::Pass,
            Outcome::Applied,
            vec![l(1), l(0)],
            vec![],
            vec!["a2"],
            2,
        ),
        // Call ids are per session: B may use the id A holds; the pool is
        // empty, so B's own spare serves it.
        (
            1,
            call("a2"),
            Checks::Pass,
            Outcome::Allow(vec![1]),
            vec![l(1), l(0)],
            vec![],
            vec!["a2", "b2"],
            2,
        ),
        // B's failure: one back; a call id B no longer holds: invalid.
        (
            1,
            Event::Failed { id: id("b2") },
            Checks::Pass,
            Outcome::Applied,
            vec![l(0), l(0)],
            vec![],
            vec!["a2"],
            1,
        ),
        (
            1,
            Event::Failed { id: id("b2") },
            Checks::Pass,
            Outcome::Invalid,
            vec![l(0), l(0)],
            vec![],
            vec!["a2"],
            1,
        ),
    ];
    for r in implementations() {
        let mut states = [State::initial(&p), State::initial(&p)];
        let mut pool = agenra_core::pool::SharedCounts::default();
        for (k, (who, e, checks, o, ledger, paused, running, taken)) in script.iter().enumerate() {
            let (got_o, got_s, got_pool) = ok(&*r, r.step_in(&p, &states[*who], &pool, e, *checks));
            let what = format!("{}: row {k}: session {who} {e:?} ({checks:?})", r.name());
            assert_eq!(&got_o, o, "{what}");
            assert_eq!(&got_s.ledger.remaining, ledger, "{what}");
            assert_eq!(
                got_s.paused.keys().collect::<Vec<_>>(),
                paused.iter().collect::<Vec<_>>(),
                "{what}"
            );
            assert_eq!(
                got_s.running.keys().collect::<Vec<_>>(),
                running.iter().collect::<Vec<_>>(),
                "{what}"
            );
            assert_eq!(got_pool.taken("pay"), *taken, "{what}");
            assert_eq!(
                got_pool.iter().count(),
                usize::from(*taken > 0),
                "{what}: only pay is counted"
            );
            states[*who] = got_s;
            pool = got_pool;
        }
    }
}

/// The simulation check (`check_simulation`, Lean `checkSimulation`), on
/// a revision that only adds quota (`r` on prefix "/a/": 1 unit in OLD, 2
/// in NEW). Computed by hand: from the initial pair (OLD 1 left, NEW 2
/// left) the only call OLD admits takes one unit on each side and is
/// held; it fails (both units return: the initial pair) or succeeds, or
/// its outcome is unknown (OLD 0 left, NEW 1 left, nothing held), where
/// OLD admits nothing more. So R has exactly these three pairs; it closes;
/// without either later pair, without the initial pair first, or empty it
/// does not; and over the classes of OLD and a NEW that only serves
/// "/a/b/" it does not either (NEW denies a call on "/a/x" OLD admits).
#[test]
fn simulation_certificates() {
    use agenra_certify::classes::{enumerate, restrict};
    use agenra_certify::emit_lean::{relations, Part};
    use agenra_certify::product::{Chain, Held, State as PState};
    use agenra_core::policy::Quota;
    use std::collections::BTreeMap;
    let old = agenra::compile_policy(
        "tool fs.read(path: string) { resource path; }\n\
         grant r: fs.read on prefix \"/a/\" quota 1;\n",
        "old",
    )
    .expect("old compiles");
    let new = agenra::compile_policy(
        "tool fs.read(path: string) { resource path; }\n\
         grant r: fs.read on prefix \"/a/\" quota 2;\n",
        "new",
    )
    .expect("new compiles");
    let fewer = agenra::compile_policy(
        "tool fs.read(path: string) { resource path; }\n\
         grant r: fs.read on prefix \"/a/b/\" quota 2;\n",
        "fewer",
    )
    .expect("fewer compiles");
    let cert = agenra_certify::certify(&old, &new)
        .certificate
        .expect("adding quota is certified");
    let parts = relations(&old, &new, &cert).expect("the certificate has relations");
    assert_eq!(parts.len(), 1, "one tool, one component");
    let part = &parts[0];
    let pair = |o: u64, n: u64, held: bool| {
        let mut calls = BTreeMap::new();
        if held {
            let g = Chain::from_slice(&[0]).expect("a chain of one grant");
            let h = Held {
                old_paused: false,
                new_paused: false,
                old: g,
                new: g,
            };
            calls.insert(h, 1);
        }
        PState {
            region: 0,
            old: vec![Quota::Limited(o)],
            new: vec![Quota::Limited(n)],
            calls,
            types: 1,
        }
    };
    let (initial, held, spent) = (pair(1, 2, false), pair(0, 1, true), pair(0, 1, false));
    let with = |relation: Vec<PState>| Part {
        tools: part.tools.clone(),
        classes: part.classes.clone(),
        flags: part.flags.clone(),
        relation,
    };
    let mut by_hand = vec![initial.clone(), held.clone(), spent.clone()];
    let mut found = part.relation.clone();
    found[1..].sort_by(agenra_certify::emit_lean::lean_order);
    by_hand[1..].sort_by(agenra_certify::emit_lean::lean_order);
    assert_eq!(
        found, by_hand,
        "the relation certify found is the one computed by hand"
    );
    let rows: Vec<(&str, Part, bool)> = vec![
        (
            "the relation of the certificate",
            with(part.relation.clone()),
            true,
        ),
        (
            "the three pairs by hand",
            with(vec![initial.clone(), held.clone(), spent.clone()]),
            true,
        ),
        (
            "without the spent pair",
            with(vec![initial.clone(), held.clone()]),
            false,
        ),
        (
            "without the held pair",
            with(vec![initial.clone(), spent.clone()]),
            false,
        ),
        (
            "the initial pair not first",
            with(vec![held.clone(), initial.clone(), spent.clone()]),
            false,
        ),
        ("empty", with(vec![]), false),
    ];
    let fewer_classes = enumerate(&old, &fewer).expect("classes of OLD and fewer");
    let fewer_part = Part {
        tools: part.tools.clone(),
        classes: restrict(&fewer_classes, &part.tools),
        flags: agenra_certify::flags_of(&old),
        relation: vec![initial, held, spent],
    };
    for r in implementations() {
        for (what, p, want) in &rows {
            assert_eq!(
                ok(&*r, r.check_simulation(&old, &new, p)),
                *want,
                "{}: {what}",
                r.name()
            );
        }
        assert!(
            !ok(&*r, r.check_simulation(&old, &fewer, &fewer_part)),
            "{}: NEW serves only /a/b/",
            r.name()
        );
    }
}
