//! Approvals decided by the SMT authorizer (DESIGN §2 step 5): an approval
//! is a just-in-time re-authorization of the paused call. One regression
//! per kind of re-check (a flow, a call rule, a path rule, a count, an
//! obligation), each a trace where the call was PAUSED and other events
//! made a `deny` rule fire by the time of its approval: the SMT engine
//! answers DENY by that rule, with its counterexample, as the native
//! monitor does; `pause` effects count as answered.

use agenra_core::decision::StepOutput;
use agenra_core::policy::Policy;
use agenra_core::{Event, Monitor};
use agenra_smt::{SmtDecision, SmtSession};

/// Tools `t0` (reads a secret, discovers into `found`), `t1` (establishes
/// `ok`, reaches `mail` with its `to`), `t2` (reaches `net`); `t1` and
/// `t2` pause for approval on small `n`.
const POLICY: &str = r#"
    levels public < internal < secret;
    categories a, b;
    sinks net, mail;
    sets found;
    facts ok;
    tool t0(target: string, n: int) { resource target; output <secret, {a}, trusted>; }
    tool t1(target: string, n: int, to: list<string>) { resource target; fact ok; sink mail on to; }
    tool t2(target: string, n: int) { resource target; sink net; }
    grant g0: t0 quota unlimited discovers found;
    grant g1: t1 where n <= 2 quota 3 approval;
    grant g1b: t1 quota unlimited;
    grant g2: t2 where n <= 3 quota 4 approval;
    grant g2b: t2 quota unlimited;
    deny flow secrets_out: sensitivity >= secret -> net;
    pause flow a_to_mail: category a -> mail;
    deny call found_target: t2 when target in found;
    deny path big_read_then_t2: call t0 where n > 3 -> call t2;
    deny count two_t1: at most 2 call t1;
    obligation ok_fresh: require ok since t2 before t2;
"#;

fn policy() -> Policy {
    agenra_policy::compile(POLICY, "recheck")
        .expect("the policy compiles")
        .policy
}

fn ev(j: serde_json::Value) -> Event {
    serde_json::from_value(j).expect("an event")
}

/// A call of `tool`; `lineage` gives every argument observed lineage
/// naming nothing (so it does not read the context).
fn call(id: &str, time: u64, tool: &str, target: &str, n: i64, lineage: bool) -> Event {
    let mut args = serde_json::json!({"target": target, "n": n});
    if tool == "t1" {
        args["to"] = serde_json::json!(["x"]);
    }
    let mut j =
        serde_json::json!({"kind": "call", "id": id, "time": time, "tool": tool, "args": args});
    if lineage {
        j["lineage"] = serde_json::json!({"target": [], "n": [], "to": []});
        if tool != "t1" {
            j["lineage"] = serde_json::json!({"target": [], "n": []});
        }
    }
    ev(j)
}

fn result(id: &str, discovered: &[&str]) -> Event {
    ev(serde_json::json!({
        "kind": "result", "call": id, "status": "succeeded", "output": {}, "discovered": discovered
    }))
}

fn approve(id: &str) -> Event {
    ev(serde_json::json!({"kind": "approve", "call": id}))
}

/// Runs `events` through both engines, the SMT engine deciding calls and
/// approvals; asserts they agree on each decision (verdict, rule, grants)
/// and returns the SMT decisions as `VERDICT rule`, and the last one.
fn run(events: &[Event]) -> (Vec<String>, SmtDecision) {
    let p = policy();
    let mut native = Monitor::new(p.clone()).expect("a valid policy");
    let mut smt = SmtSession::new(&p).expect("supported");
    let mut out = Vec::new();
    let mut last = None;
    for e in events {
        let ours = match e {
            Event::Call(c) => Some(smt.decide(c).expect("decided")),
            Event::Approve(a) => Some(smt.decide_approval(a).expect("decided")),
            _ => None,
        };
        let theirs = native.step(e).expect("the native monitor applies it");
        if let (Some(d), StepOutput::Decision(n)) = (&ours, &theirs) {
            assert_eq!(
                (d.verdict, d.rule_name.clone(), d.grants.clone()),
                (n.verdict, n.rule.name(&p), n.grants.clone()),
                "SMT and native decide {e:?} alike"
            );
            assert_eq!(d.refunded, n.refunded, "units given back by {e:?}");
            assert!(d.solved, "Z3 decided {e:?}");
            out.push(format!("{} {}", d.verdict.as_str(), d.rule_name));
        }
        smt.apply(e).expect("the event applies");
        last = ours.or(last);
    }
    (out, last.expect("a decision"))
}

#[test]
fn approval_denied_by_a_flow_the_context_raised() {
    let (verdicts, d) = run(&[
        call("c1", 1, "t1", "/a", 5, true),
        result("c1", &[]),
        // t2 reads the context (no lineage): nothing secret yet.
        call("c2", 2, "t2", "/x", 1, false),
        call("c3", 3, "t0", "/k", 1, true),
        result("c3", &[]),
        approve("c2"),
    ]);
    assert_eq!(
        verdicts,
        ["ALLOW g1b", "PAUSE g2", "ALLOW g0", "DENY secrets_out"]
    );
    let cx = d.counterexample.expect("a counterexample");
    assert_eq!(cx.node, "c2");
    assert_eq!(cx.sink.as_deref(), Some("sink net"));
    let path: Vec<&str> = cx.paths[0].path.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(
        path.first(),
        Some(&"c3"),
        "the secret comes from c3: {path:?}"
    );
    assert_eq!(path.last(), Some(&"c2"));
}

#[test]
fn approval_denied_by_a_call_rule_on_a_grown_set() {
    let (verdicts, d) = run(&[
        call("c1", 1, "t1", "/a", 5, true),
        result("c1", &[]),
        call("c2", 2, "t2", "/x", 1, true),
        call("c3", 3, "t0", "/k", 1, true),
        // `/x` is discovered: `target in found` holds now.
        result("c3", &["/x"]),
        approve("c2"),
    ]);
    assert_eq!(
        verdicts,
        ["ALLOW g1b", "PAUSE g2", "ALLOW g0", "DENY found_target"]
    );
    assert_eq!(d.counterexample.expect("a counterexample").history, ["c2"]);
}

#[test]
fn approval_denied_by_a_path_rule_another_call_completed() {
    let (verdicts, d) = run(&[
        call("c1", 1, "t1", "/a", 5, true),
        result("c1", &[]),
        call("c2", 2, "t2", "/x", 1, true),
        // A big read admitted while c2 waits: `t0 where n > 3 -> t2`.
        call("c3", 3, "t0", "/k", 7, true),
        approve("c2"),
    ]);
    assert_eq!(
        verdicts,
        ["ALLOW g1b", "PAUSE g2", "ALLOW g0", "DENY big_read_then_t2"]
    );
    assert_eq!(
        d.counterexample.expect("a counterexample").history,
        ["c3", "c2"]
    );
}

#[test]
fn approval_denied_by_a_count_other_calls_used_up() {
    let (verdicts, d) = run(&[
        // Paused by its grant (n <= 2) and by the pause flow? No: nothing
        // of category a was read yet.
        call("c1", 1, "t1", "/a", 1, false),
        call("c2", 2, "t1", "/a", 5, true),
        call("c3", 3, "t1", "/a", 5, true),
        approve("c1"),
    ]);
    assert_eq!(
        verdicts,
        ["PAUSE g1", "ALLOW g1b", "ALLOW g1b", "DENY two_t1"]
    );
    assert_eq!(
        d.counterexample.expect("a counterexample").history,
        ["c2", "c3", "c1"]
    );
}

#[test]
fn approval_denied_by_an_obligation_a_later_call_reopened() {
    let (verdicts, d) = run(&[
        call("c1", 1, "t1", "/a", 5, true),
        result("c1", &[]),
        call("c2", 2, "t2", "/x", 1, true),
        // Admitted without approval (n > 3): `ok` must be seen again
        // after it before any t2.
        call("c3", 3, "t2", "/y", 5, true),
        approve("c2"),
    ]);
    assert_eq!(
        verdicts,
        ["ALLOW g1b", "PAUSE g2", "ALLOW g2b", "DENY ok_fresh"]
    );
    assert_eq!(
        d.counterexample.expect("a counterexample").history,
        ["c3", "c2"]
    );
}

#[test]
fn pauses_are_answered_and_unchanged_history_allows() {
    let (verdicts, d) = run(&[
        call("c0", 1, "t0", "/k", 1, true),
        result("c0", &[]),
        // Its `to` reads the context (category a): the pause flow fires.
        call("c1", 2, "t1", "/a", 5, false),
        approve("c1"),
        result("c1", &[]),
        call("c2", 3, "t2", "/x", 1, true),
        approve("c2"),
    ]);
    assert_eq!(
        verdicts,
        [
            "ALLOW g0",
            "PAUSE a_to_mail",
            "ALLOW g1b",
            "PAUSE g2",
            "ALLOW g2"
        ]
    );
    assert_eq!(d.granted, ["g2"]);
    assert!(d.counterexample.is_none());
}

#[test]
fn an_approval_of_a_call_not_paused_is_invalid() {
    let p = policy();
    let mut smt = SmtSession::new(&p).expect("supported");
    let c = call("c1", 1, "t1", "/a", 5, true);
    smt.apply(&c).expect("applies");
    let Event::Approve(a) = approve("c1") else {
        unreachable!()
    };
    assert!(matches!(
        smt.decide_approval(&a),
        Err(agenra_smt::SmtError::Invalid(_))
    ));
    let Event::Approve(a) = approve("nope") else {
        unreachable!()
    };
    assert!(smt.decide_approval(&a).is_err());
}
