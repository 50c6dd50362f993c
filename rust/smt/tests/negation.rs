//! Issue #27, points 2, 4, 5 and 6: general negation (`not ends_with`, ...),
//! per-element tests (`any x in LIST: COND`), per-parameter provenance
//! (`provenance MODE on PARAM`) and the trusted-output lint. Each scenario
//! runs the policy text through the native monitor, the reference
//! (`spec::reference`) and the SMT authorizer, which must agree event by
//! event; the expected verdicts are written out.

#[path = "support/engines.rs"]
mod engines;
use engines::assert_checkers_answer_unknown;

use agenra_core::decision::StepOutput;
use agenra_core::policy::Policy;
use agenra_core::spec::reference;
use agenra_core::{Event, Monitor};
use agenra_smt::SmtSession;

fn event(j: serde_json::Value) -> Event {
    serde_json::from_value(j).expect("an event")
}

fn call(id: &str, tool: &str, args: serde_json::Value) -> Event {
    event(serde_json::json!({"kind": "call", "id": id, "time": 1, "tool": tool, "args": args}))
}

fn result(id: &str, output: serde_json::Value) -> Event {
    event(
        serde_json::json!({"kind": "result", "call": id, "status": "succeeded", "output": output}),
    )
}

fn task(text: &str) -> Event {
    event(serde_json::json!({"kind": "task", "id": "task", "text": text}))
}

fn compile(src: &str) -> Policy {
    match agenra_policy::compile(src, "p") {
        Ok(c) => c.policy,
        Err(e) => panic!("{e:?}"),
    }
}

/// The verdict and rule of every call, as the three engines decide them
/// (they must agree).
fn run(p: &Policy, events: &[Event]) -> Vec<String> {
    let mut native = Monitor::new(p.clone()).expect("a valid policy");
    let mut smt = SmtSession::new(p).expect("an SMT session");
    let mut spec = reference::Session::new(p);
    let mut got = Vec::new();
    for e in events {
        let d = match e {
            Event::Call(c) => Some(smt.decide(c).expect("decided")),
            _ => None,
        };
        let want = match native.step(e).expect("applies") {
            StepOutput::Decision(n) => Some(format!("{} {}", n.verdict.as_str(), n.rule.name(p))),
            StepOutput::Applied(_) => None,
        };
        let r = spec.step(p, e).expect("the reference applies it");
        if let (Some(v), Some(w)) = (r.verdict, &want) {
            assert_eq!(v.as_str(), w.split(' ').next().unwrap_or(""), "{e:?}");
        }
        smt.apply(e).expect("applies");
        let ours = d
            .as_ref()
            .map(|d| format!("{} {}", d.verdict.as_str(), d.rule_name));
        assert_eq!(ours, want, "SMT vs native on {e:?}");
        if let Some(w) = want {
            got.push(w);
        }
    }
    got
}

#[test]
fn negated_tests_hold_on_values_and_decide_against_the_call_on_missing_ones() {
    let p = compile(
        r#"
        sinks mail;
        tool send(to: list<string>, cc?: string, subject: string) { sink mail; }
        // A grant: `not` holds only on a present value.
        grant internal_cc: send where cc not ends_with "@evil.com" and subject not starts_with "URGENT" quota unlimited;
        grant no_cc: send where cc == null and all to not matches glob "*+*" quota unlimited;
        // A deny rule: `not` on a missing value holds, so it refuses.
        deny call outside: send when any to not ends_with "@corp.com";
        "#,
    );
    let send = |id: &str, args: serde_json::Value| call(id, "send", args);
    let got = run(
        &p,
        &[
            send(
                "1",
                serde_json::json!({"to": ["a@corp.com"], "cc": "b@corp.com", "subject": "hi"}),
            ),
            send(
                "2",
                serde_json::json!({"to": ["a@corp.com"], "cc": "x@evil.com", "subject": "hi"}),
            ),
            send(
                "3",
                serde_json::json!({"to": ["a@corp.com"], "cc": "b@corp.com", "subject": "URGENT pay"}),
            ),
            // `cc` absent: `cc not ends_with` does not admit; the second grant does.
            send(
                "4",
                serde_json::json!({"to": ["a@corp.com"], "subject": "hi"}),
            ),
            // Absent cc and a `+` in every recipient: nothing admits it.
            send(
                "5",
                serde_json::json!({"to": ["a+x@corp.com"], "subject": "hi"}),
            ),
            // A recipient outside corp.com: the deny rule.
            send(
                "6",
                serde_json::json!({"to": ["a@corp.com", "e@evil.com"], "cc": "b@corp.com", "subject": "hi"}),
            ),
        ],
    );
    assert_eq!(
        got,
        [
            "ALLOW internal_cc",
            "DENY no-grant",
            "DENY no-grant",
            "ALLOW no_cc",
            "DENY no-grant",
            "DENY outside",
        ]
    );
}

#[test]
fn a_negated_test_on_a_parameter_a_tool_lacks_refuses_in_a_deny_rule_and_admits_nothing() {
    let p = compile(
        r#"
        sinks net;
        tool post(url: string) { sink net; }
        tool ping() { sink net; }
        grant p: post quota unlimited;
        grant g: ping quota unlimited;
        // `ping` has no `url`: the negated test decides against it.
        deny flow only_docs: any -> net when url not starts_with "https://docs.";
        allow flow docs_ok: up to <public, {}, untrusted> -> net when url not matches glob "*evil*";
        "#,
    );
    let got = run(
        &p,
        &[
            call("1", "post", serde_json::json!({"url": "https://docs.rs/x"})),
            call(
                "2",
                "post",
                serde_json::json!({"url": "https://evil.example"}),
            ),
            call("3", "ping", serde_json::json!({})),
        ],
    );
    // The allow rule exempts only a present url that does not match (so
    // not the evil one); `ping` has no url: the allow rule's negated test
    // does not hold (it would admit), the deny rule's does (it refuses).
    assert_eq!(got, ["ALLOW p", "DENY only_docs", "DENY only_docs"]);
}

#[test]
fn per_element_tests_combine_conditions_on_each_element() {
    let p = compile(
        r#"
        sinks mail;
        sets contacts;
        task seeds contacts;
        tool send(to: list<string>) { sink mail; }
        grant s: send where all x in to: (x in contacts or x ends_with "@corp.com") quota unlimited;
        // Some recipient is neither a contact nor a colleague.
        pause call stranger: send when any x in to: !(x in contacts or x ends_with "@corp.com");
        deny call no_lists: send when any x in to: x starts_with "list-";
        "#,
    );
    let seed = event(serde_json::json!({
        "kind": "task", "id": "task", "text": "mail them",
        "sets": {"contacts": ["ann@home.org"]}
    }));
    let send = |id: &str, to: serde_json::Value| call(id, "send", serde_json::json!({ "to": to }));
    let got = run(
        &p,
        &[
            seed,
            send("1", serde_json::json!(["ann@home.org", "bob@corp.com"])),
            send("2", serde_json::json!(["ann@home.org", "eve@evil.com"])),
            send("3", serde_json::json!(["list-all@corp.com"])),
            // An empty list: `all` holds, `any` does not.
            send("4", serde_json::json!([])),
        ],
    );
    assert_eq!(
        got,
        [
            "ALLOW s",
            // Not every recipient passes the grant's test.
            "DENY no-grant",
            "DENY no_lists",
            "ALLOW s",
        ]
    );
}

#[test]
fn per_parameter_provenance_keeps_short_values_from_borrowing_trust() {
    let src = |decl: &str| {
        format!(
            r#"
        sinks net;
        provenance by value;
        tool web() {{ output <public, {{}}, untrusted>; }}
        tool get(file_id: string, n: int, to: string, note: string) {{
          sink net;
          {decl}
        }}
        grant w: web quota unlimited;
        grant g: get quota unlimited;
        deny flow untrusted_out: untrusted -> net;
        "#
        )
    };
    let events = |p: &Policy| {
        run(
            p,
            &[
                task("Meet on June 13 about report 4711, write to bob@corp.com re budget"),
                call("w", "web", serde_json::json!({})),
                result("w", serde_json::json!("spam")),
                // `13` occurs in the task only as part of a date.
                call(
                    "a",
                    "get",
                    serde_json::json!({"file_id": "13", "n": 4711, "to": "bob@corp.com", "note": "budget"}),
                ),
                call(
                    "b",
                    "get",
                    serde_json::json!({"file_id": "4711", "n": 4711, "to": "bob@corp.com", "note": "budget"}),
                ),
            ],
        )
    };
    // The default (`words`): a short value confers no trust.
    assert_eq!(
        events(&compile(&src(""))),
        ["ALLOW w", "DENY untrusted_out", "ALLOW g"]
    );
    // `exact` asks for the whole value, short ones included.
    assert_eq!(
        events(&compile(&src("provenance exact on file_id;"))),
        ["ALLOW w", "ALLOW g", "ALLOW g"]
    );
    // `off`: never by value.
    assert_eq!(
        events(&compile(&src("provenance off on note;"))),
        ["ALLOW w", "DENY untrusted_out", "DENY untrusted_out"]
    );
    // `tokens`: only e-mail addresses, URLs and IBANs; `to` passes, `n` does not.
    assert_eq!(
        events(&compile(&src(
            "provenance exact on file_id; provenance tokens on to, n;"
        ))),
        ["ALLOW w", "DENY untrusted_out", "DENY untrusted_out"]
    );
    assert_eq!(
        events(&compile(&src(
            "provenance exact on file_id; provenance tokens on to;"
        ))),
        ["ALLOW w", "ALLOW g", "ALLOW g"]
    );
}

#[test]
fn without_declarations_the_policy_hash_is_unchanged() {
    let p = compile("tool t(a: string); grant g: t quota 1;");
    let text = serde_json::to_string(&p).expect("serializes");
    assert!(!text.contains("param_provenance"), "{text}");
}

#[test]
fn verify_and_certify_answer_unknown_for_per_element_tests() {
    let p = compile(
        r#"
        sets contacts;
        tool send(to: list<string>);
        grant s: send where all x in to: x in contacts quota 3;
        "#,
    );
    let e = agenra_certify::classes::enumerate_witnesses(&p, &p).expect_err("unsupported");
    assert!(e.to_string().contains("per-element"), "{e}");
}

#[test]
fn certify_and_verify_do_not_claim_what_they_cannot_enumerate() {
    let p = compile(
        r#"
        sets contacts;
        sinks mail;
        tool web() { output <public, {}, untrusted>; }
        tool send(to: list<string>) { sink mail; }
        grant w: web quota unlimited;
        grant s: send where all x in to: x in contacts quota 3;
        deny flow d: untrusted -> mail;
        "#,
    );
    // A revision that adds a grant needs the call classes.
    for f in assert_checkers_answer_unknown(&p) {
        assert!(
            f.detail.iter().any(|d| d.contains("per-element test")),
            "{:?}",
            f.detail
        );
    }
}
