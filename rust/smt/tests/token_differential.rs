//! Differential test of token tests (`any url in body from untrusted`,
//! issue #27): random policies whose flow rules, call rules and path steps
//! test token origins, and random sessions whose tasks, outputs and
//! arguments carry the same tokens in several spellings; the native
//! monitor (token index), the reference semantics (naive search) and the
//! SMT authorizer must decide every call alike. The policies declare two
//! token shapes (`order_id`, `ticket`), so declared kinds are covered too.

use agenra_core::decision::StepOutput;
use agenra_core::spec::reference::Session as Reference;
use agenra_core::{Event, Monitor, Policy};
use agenra_smt::SmtSession;
use proptest::prelude::*;

/// Pieces of text: tokens of every kind in several spellings of the same
/// canonical form, near misses, and plain words; ids of the declared
/// shapes alone, inside a URL, glued to a word and too long.
const PIECES: [&str; 22] = [
    "https://a.example/x",
    "HTTPS://A.example:443/x/",
    "http://b.example",
    "bob@corp.com",
    "mailto:Bob@Corp.com",
    "DE89 3704 0044 0532 0130 00",
    "DE89370400440532013000",
    "+49 30 1234567",
    "+49 (30) 123-4567",
    "030 1234 5678",
    "€1,000.50",
    "1000.5 EUR",
    "10 kg",
    "plain words.",
    "https://evil.example/login?u=1",
    "x@evil.example",
    "ORD-123456",
    "(ORD-654321).",
    "https://shop.example/ORD-123456",
    "ORD-1234567 xORD-123456",
    "AB-x1 ABC-zz99",
    "ab-x1 AB-x12345",
];

fn text(pieces: &[usize]) -> String {
    let mut t = String::from("note:");
    for &p in pieces {
        t.push(' ');
        t.push_str(PIECES[p % PIECES.len()]);
    }
    t
}

const KINDS: [&str; 8] = [
    "url", "email", "iban", "phone", "quantity", "token", "order_id", "ticket",
];
const SOURCES: [&str; 3] = ["user", "trusted", "untrusted"];

/// A condition: token tests (on `body`, or on the list `to` only `send`
/// has, when `to` may be named), combined with `!`, `and`, `or`.
fn cond_on(to: bool) -> impl Strategy<Value = String> {
    let leaf = (
        any::<bool>(),
        0usize..KINDS.len(),
        prop_oneof![3 => Just("body"), u32::from(to) => Just("to")],
        any::<bool>(),
        0usize..SOURCES.len(),
    )
        .prop_map(|(all, k, param, not, s)| {
            format!(
                "{} {} in {param} {}from {}",
                if all { "all" } else { "any" },
                KINDS[k],
                if not { "not " } else { "" },
                SOURCES[s]
            )
        });
    leaf.prop_recursive(2, 4, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| format!("!({c})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} and {b})")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("({a} or {b})")),
        ]
    })
}

fn cond() -> impl Strategy<Value = String> {
    cond_on(true)
}

fn rule() -> impl Strategy<Value = String> {
    prop_oneof![
        cond().prop_map(|c| format!("deny flow FNAME: any -> mail when {c};")),
        cond().prop_map(|c| format!("pause flow FNAME: any -> mail when {c};")),
        cond().prop_map(|c| format!("deny flow FNAME: untrusted -> mail when {c};")),
        cond().prop_map(|c| format!(
            "allow flow FNAME: up to <public, {{}}, untrusted> -> mail when {c};"
        )),
        cond().prop_map(|c| format!("deny call FNAME: send when {c};")),
        cond_on(false).prop_map(|c| format!("pause call FNAME: post when {c};")),
        cond().prop_map(|c| format!("deny path FNAME: call web -> call \"*\" where {c};")),
        (0u64..3, cond())
            .prop_map(|(k, c)| format!("deny count FNAME: at most {k} to mail where {c};")),
        (cond(), cond()).prop_map(|(c, r)| format!(
            "pause count FNAME: at most 1 to mail where {c} reset on call db where {r};"
        )),
    ]
}

fn policy_text(rules: &[String]) -> String {
    let mut src = String::from(
        r#"
        sinks mail;
        token order_id = "ORD-" digit{6};
        token ticket = upper{2,3} "-" alnum{1,4};
        tool web(q: string) { output <public, {}, untrusted>; }
        tool db(q: string) { output <public, {}, trusted>; }
        tool send(body: string, to: list<string>) { sink mail; }
        tool post(body: string) { sink mail; }
        grant w: web quota unlimited;
        grant d: db quota unlimited;
        grant s: send quota unlimited;
        grant p: post quota 3;
        "#,
    );
    for (i, r) in rules.iter().enumerate() {
        src.push_str(&r.replace("FNAME", &format!("r{i}")));
        src.push('\n');
    }
    src
}

#[derive(Clone, Debug)]
enum Step {
    Task(Vec<usize>),
    Call(u8, Vec<usize>, Vec<Vec<usize>>),
    Result(usize, u8, Vec<usize>),
    Approve(usize),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let pieces = || proptest::collection::vec(0usize..PIECES.len(), 0..3);
    let step = prop_oneof![
        1 => pieces().prop_map(Step::Task),
        4 => (0u8..4, pieces(), proptest::collection::vec(pieces(), 0..3))
            .prop_map(|(t, b, to)| Step::Call(t, b, to)),
        3 => (0usize..16, 0u8..4, pieces()).prop_map(|(c, s, o)| Step::Result(c, s, o)),
        1 => (0usize..16).prop_map(Step::Approve),
    ];
    proptest::collection::vec(step, 0..24)
}

fn events(steps: &[Step]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    let recent = |calls: &Vec<String>, i: usize| {
        calls
            .len()
            .checked_sub(1 + i % calls.len().max(1))
            .and_then(|j| calls.get(j).cloned())
    };
    for (n, s) in steps.iter().enumerate() {
        let j = match s {
            Step::Task(p) => {
                serde_json::json!({"kind": "task", "id": format!("k{n}"), "text": text(p)})
            }
            Step::Call(t, body, to) => {
                let id = format!("c{n}");
                calls.push(id.clone());
                let (tool, args) = match t {
                    0 => ("web", serde_json::json!({"q": text(body)})),
                    1 => ("db", serde_json::json!({"q": text(body)})),
                    2 => (
                        "send",
                        serde_json::json!({"body": text(body), "to": to.iter().map(|p| text(p)).collect::<Vec<_>>()}),
                    ),
                    _ => ("post", serde_json::json!({"body": text(body)})),
                };
                serde_json::json!({"kind": "call", "id": id, "time": n, "tool": tool, "args": args})
            }
            Step::Result(c, status, o) => {
                let Some(id) = recent(&calls, *c) else {
                    continue;
                };
                let status = ["succeeded", "failed", "unknown", "succeeded"][*status as usize];
                serde_json::json!({"kind": "result", "call": id, "status": status,
                    "output": {"text": text(o), "more": [text(&o[o.len().min(1)..])]}})
            }
            Step::Approve(c) => {
                let Some(id) = recent(&calls, *c) else {
                    continue;
                };
                serde_json::json!({"kind": "approve", "call": id})
            }
        };
        out.push(serde_json::from_value(j).expect("an event"));
    }
    out
}

/// Monitor against reference on every event (verdict, rule, units);
/// with `smt`, the SMT authorizer too on every call.
fn agree(p: &Policy, events: &[Event], smt: bool) -> Result<(), TestCaseError> {
    let mut native = Monitor::new(p.clone()).expect("a valid policy");
    let mut reference = Reference::new(p);
    let mut solver = smt.then(|| SmtSession::new(p).expect("supported"));
    for e in events {
        let ours = match (e, solver.as_mut()) {
            (Event::Call(c), Some(s)) => Some(s.decide(c).expect("decided")),
            _ => None,
        };
        if let Some(s) = solver.as_mut() {
            // An event the monitor refuses (an approval of a call that is
            // not paused) is refused by all; the check below compares.
            let _ = s.apply(e);
        }
        let want = reference.step(p, e);
        let got = native.step(e);
        match (&want, &got) {
            (Ok(w), Ok(StepOutput::Decision(d))) => {
                prop_assert_eq!(w.verdict, Some(d.verdict), "verdict on {:?}", e);
                prop_assert_eq!(w.rule, Some(d.rule), "rule on {:?}", e);
                prop_assert_eq!(&w.grants, &d.grants, "grants on {:?}", e);
                if let Some(o) = &ours {
                    prop_assert_eq!(o.verdict, d.verdict, "smt verdict on {:?}", e);
                    prop_assert_eq!(&o.rule_name, &d.rule.name(p), "smt rule on {:?}", e);
                }
            }
            (Ok(w), Ok(StepOutput::Applied(a))) => {
                prop_assert_eq!(w.verdict, None);
                prop_assert_eq!(w.rule, a.rule, "rule on {:?}", e);
            }
            (Err(_), Err(_)) => {}
            (w, g) => prop_assert!(false, "reference {:?} but monitor {:?} on {:?}", w, g, e),
        }
    }
    Ok(())
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(400),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn monitor_and_reference_agree_on_token_tests(
        rules in proptest::collection::vec(rule(), 1..4),
        steps in steps(),
    ) {
        let p = agenra_policy::compile(&policy_text(&rules), "p").expect("compiles").policy;
        agree(&p, &events(&steps), false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(48),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn smt_agrees_on_token_tests(
        rules in proptest::collection::vec(rule(), 1..3),
        steps in steps(),
    ) {
        let p = agenra_policy::compile(&policy_text(&rules), "p").expect("compiles").policy;
        agree(&p, &events(&steps), true)?;
    }
}
