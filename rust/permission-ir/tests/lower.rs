//! Lowering, through the real monitor: a session under the lowered IR
//! allows what the task covers and denies what it does not, and never
//! admits anything the policy alone would deny.

mod common;

use agenra_core::{Session, Verdict};
use agenra_permission_ir::{self as pir, CheckKind, LowerError};
use common::{call, ir, policy, span, step};
use serde_json::{json, Value};

fn lowered(doc: &Value) -> pir::Lowered {
    let valid = pir::validate(pir::parse(&doc.to_string()).unwrap(), &policy()).unwrap();
    pir::lower(&valid, &policy()).unwrap()
}

fn session(doc: &Value) -> Session {
    lowered(doc).session().unwrap()
}

fn plain() -> Session {
    Session::new(policy()).unwrap()
}

fn send(to: &str) -> Value {
    json!({"to": to, "subject": "Weekly report", "body": "see attached"})
}

/// Reads the report, then sends to `to`: the verdict and rule of the send.
fn read_then_send(s: &mut Session, to: &str) -> (Verdict, String) {
    assert_eq!(
        call(s, "r", "reports.read", json!({"id": "weekly-48"})).0,
        Verdict::Allow
    );
    step(
        s,
        json!({"kind": "result", "call": "r", "status": "succeeded"}),
    );
    call(s, "s", "email.send", send(to))
}

#[test]
fn a_session_under_the_task_allows_what_it_covers_and_denies_the_rest() {
    let mut s = session(&ir());
    // Covered: the lookup of Alice, the report, the e-mail to Alice.
    assert_eq!(
        call(&mut s, "c1", "contacts.lookup", json!({"name": "Alice"})).0,
        Verdict::Allow
    );
    assert_eq!(
        read_then_send(&mut s, "alice@example.com").0,
        Verdict::Allow
    );
    // Not covered: another lookup, another report, another recipient, the web.
    assert_eq!(
        call(&mut s, "c2", "contacts.lookup", json!({"name": "Bob"})),
        (Verdict::Deny, "task:cover:contacts.lookup".into())
    );
    assert_eq!(
        call(&mut s, "c3", "reports.read", json!({"id": "weekly-49"})),
        (Verdict::Deny, "task:cover:reports.read".into())
    );
    // After the report was read, its flow to Bob is no longer declassified
    // (flows are checked before call rules); before, the call rule stops it.
    assert_eq!(
        call(&mut s, "c4", "email.send", send("bob@example.com")),
        (Verdict::Deny, "confidential_stays_in".into())
    );
    assert_eq!(
        call(
            &mut session(&ir()),
            "c4",
            "email.send",
            send("bob@example.com")
        ),
        (Verdict::Deny, "task:cover:email.send".into())
    );
    assert_eq!(
        call(
            &mut s,
            "c5",
            "web.fetch",
            json!({"url": "https://example.com"})
        ),
        (Verdict::Deny, "task-scope".into())
    );
    // The policy alone admits every one of them.
    let mut p = plain();
    assert_eq!(
        call(&mut p, "c2", "contacts.lookup", json!({"name": "Bob"})).0,
        Verdict::Allow
    );
    assert_eq!(
        call(&mut p, "c3", "reports.read", json!({"id": "weekly-49"})).0,
        Verdict::Allow
    );
    assert_eq!(read_then_send(&mut p, "bob@example.com").0, Verdict::Allow);
    assert_eq!(
        call(
            &mut p,
            "c5",
            "web.fetch",
            json!({"url": "https://example.com"})
        )
        .0,
        Verdict::Allow
    );
}

#[test]
fn the_task_never_widens_the_policy() {
    // The task covers a report the policy does not grant: still denied, by the policy.
    let mut doc = ir();
    doc["assets"][0]["resource"] = json!({"exact": "monthly-11"});
    let mut s = session(&doc);
    assert_eq!(
        call(&mut s, "c1", "reports.read", json!({"id": "monthly-11"})),
        (Verdict::Deny, "no-grant".into())
    );
    // An allowance for an outside recipient does not declassify what the
    // policy keeps in.
    let mut doc = ir();
    doc["actions"][2]["args"]["to"] = json!(["eve@evil.test"]);
    doc["allowances"][0]["args"]["to"] = json!(["eve@evil.test"]);
    let mut s = session(&doc);
    assert_eq!(
        read_then_send(&mut s, "eve@evil.test"),
        (Verdict::Deny, "confidential_stays_in".into())
    );
}

#[test]
fn allowances_bound_the_policys_declassification() {
    // Without an allowance for the sink, the policy's `allow flow` does not fire.
    let mut doc = ir();
    doc.as_object_mut().unwrap().remove("allowances");
    let mut s = session(&doc);
    assert_eq!(
        read_then_send(&mut s, "alice@example.com"),
        (Verdict::Deny, "confidential_stays_in".into())
    );
    let low = lowered(&doc);
    assert!(low.checks.iter().any(|c| c.kind == CheckKind::Allowance
        && c.rule == "reports_to_colleagues"
        && c.description.contains("declassifies nothing")));
    // A ceiling below the report's label does not cover it.
    let mut doc = ir();
    doc["allowances"][0]["up_to"] =
        json!({"level": "internal", "categories": ["pii", "report"], "trusted": true});
    let mut s = session(&doc);
    assert_eq!(
        read_then_send(&mut s, "alice@example.com"),
        (Verdict::Deny, "confidential_stays_in".into())
    );
    // Missing the report's category: neither.
    let mut doc = ir();
    doc["allowances"][0]["up_to"]["categories"] = json!(["pii"]);
    let mut s = session(&doc);
    assert_eq!(read_then_send(&mut s, "alice@example.com").0, Verdict::Deny);
    // Scoped by arguments: the allowance names Alice only, the action covers
    // Carol too; the report may go to Alice only.
    let mut doc = ir();
    doc["actions"][2]["args"]["to"] = json!(["alice@example.com", "carol@example.com"]);
    let mut s = session(&doc);
    assert_eq!(
        read_then_send(&mut s, "carol@example.com"),
        (Verdict::Deny, "confidential_stays_in".into())
    );
    let mut s = session(&doc);
    assert_eq!(
        read_then_send(&mut s, "alice@example.com").0,
        Verdict::Allow
    );
    // Data below every deny rule needs no declassification.
    let mut s = session(&doc);
    assert_eq!(
        call(&mut s, "c1", "email.send", send("carol@example.com")).0,
        Verdict::Allow
    );
}

#[test]
fn task_obligations_hold_before_their_action() {
    let mut doc = ir();
    doc["actions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "review", "tool": "review.run", "evidence": [span(20, 46)]}));
    doc["obligations"] = json!([{"id": "reviewed-first", "require": "reviewed", "before": "send",
                                 "evidence": [span(20, 46)]}]);
    let mut s = session(&doc);
    assert_eq!(
        call(&mut s, "c1", "email.send", send("alice@example.com")),
        (Verdict::Deny, "task:reviewed-first".into())
    );
    assert_eq!(
        call(&mut s, "c2", "review.run", json!({"id": "weekly-48"})).0,
        Verdict::Allow
    );
    step(
        &mut s,
        json!({"kind": "result", "call": "c2", "status": "succeeded"}),
    );
    assert_eq!(
        call(&mut s, "c3", "email.send", send("alice@example.com")).0,
        Verdict::Allow
    );
}

#[test]
fn forbidden_actions_with_arguments_and_resources() {
    let mut doc = ir();
    doc["actions"][2]["args"] = json!({"to": ["alice@example.com"]});
    doc["forbidden"] = json!([
        {"id": "not-urgent", "tool": "email.*", "args": {"urgent": [true]}, "evidence": [span(68, 89)]},
        {"id": "not-49", "resource": {"prefix": "weekly-49"}, "evidence": [span(68, 89)]}
    ]);
    doc["actions"][1]["assets"] = json!([]);
    let low = lowered(&doc);
    assert_eq!(
        low.task.scope.as_ref().unwrap().forbid_resources,
        vec!["weekly-49*".to_string()]
    );
    let mut s = low.session().unwrap();
    let mut urgent = send("alice@example.com");
    urgent["urgent"] = json!(true);
    assert_eq!(
        call(&mut s, "c1", "email.send", urgent),
        (Verdict::Deny, "task:not-urgent:email.send".into())
    );
    assert_eq!(
        call(&mut s, "c2", "email.send", send("alice@example.com")).0,
        Verdict::Allow
    );
    assert_eq!(
        call(
            &mut s,
            "c3",
            "reports.read",
            json!({"id": "weekly-49-draft"})
        ),
        (Verdict::Deny, "task-scope".into())
    );
    assert_eq!(
        call(&mut s, "c4", "reports.read", json!({"id": "weekly-50"})).0,
        Verdict::Allow
    );
}

#[test]
fn a_later_task_cannot_lift_the_lowered_constraints() {
    let mut s = session(&ir());
    // A task event with a wide scope replaces the scope of the lowered one.
    step(
        &mut s,
        json!({"kind": "task", "id": "t2", "text": "anything", "scope": {"tools": ["*"]}}),
    );
    assert_eq!(
        call(
            &mut s,
            "c1",
            "web.fetch",
            json!({"url": "https://example.com"})
        ),
        (Verdict::Deny, "task:outside:web.fetch".into())
    );
    assert_eq!(
        call(&mut s, "c2", "reports.read", json!({"id": "weekly-49"})),
        (Verdict::Deny, "task:cover:reports.read".into())
    );
}

#[test]
fn labeled_assets_raise_resource_labels() {
    let mut doc = ir();
    // The user says weekly-48 carries personal data: it joins the resource's label.
    doc["assets"][0]["label"]["categories"] = json!(["report", "pii"]);
    doc["assets"][0]["label"]["level"] = json!("internal");
    let low = lowered(&doc);
    let added = low.policy.resources.last().unwrap();
    assert_eq!(
        added.pattern,
        agenra_core::Pattern::Exact("weekly-48".into())
    );
    assert_eq!(
        low.policy.show_label(&added.label),
        "<internal, {pii, report}, trusted>"
    );
    assert!(low
        .checks
        .iter()
        .any(|c| c.kind == CheckKind::Label && c.id == "report"));
}

#[test]
fn the_lowered_task_event_and_checks() {
    let low = lowered(&ir());
    assert_eq!(low.task.id, "task");
    assert_eq!(low.task.text, common::TEXT);
    let scope = low.task.scope.clone().unwrap();
    assert_eq!(
        scope.tools,
        Some(vec![
            "contacts.lookup".into(),
            "email.send".into(),
            "reports.read".into()
        ])
    );
    assert_eq!(scope.forbid, vec!["web.*".to_string()]);
    let kinds: Vec<CheckKind> = low.checks.iter().map(|c| c.kind).collect();
    for k in [
        CheckKind::Scope,
        CheckKind::Outside,
        CheckKind::Cover,
        CheckKind::Forbidden,
        CheckKind::Allowance,
        CheckKind::Label,
    ] {
        assert!(kinds.contains(&k), "{k:?} missing from {kinds:?}");
    }
    // Every added rule is named `task:...` and the result is a valid policy.
    let base = policy();
    assert!(low.policy.call_rules[base.call_rules.len()..]
        .iter()
        .all(|r| r.name.starts_with(pir::RULE_PREFIX)));
    agenra_core::validate::validate(&low.policy).unwrap();
    // `load` does the same in one call.
    assert_eq!(pir::load(&ir().to_string(), &base).unwrap(), low);
}

#[test]
fn lowering_refuses_another_policy() {
    let valid = pir::validate(pir::parse(&ir().to_string()).unwrap(), &policy()).unwrap();
    let mut other = policy();
    other.name = "other".into();
    assert!(matches!(
        pir::lower(&valid, &other),
        Err(LowerError::PolicyMismatch { .. })
    ));
}

#[test]
fn an_empty_task_allows_nothing() {
    let doc = json!({"version": 1, "source": {"text": "nothing"}});
    let mut s = session(&doc);
    assert_eq!(
        call(&mut s, "c1", "contacts.lookup", json!({"name": "Alice"})),
        (Verdict::Deny, "task-scope".into())
    );
}

/// Labels come down only through the policy's own sanitizer specifications:
/// web content extracted by the vetted `text.extract` may go out under the
/// task, the raw page may not, and nothing in an IR can say otherwise.
#[test]
fn only_the_policys_sanitizers_lower_labels() {
    let policy = agenra_policy::compile(
        include_str!("../../../examples/email-assistant/policy.agr"),
        "email-assistant",
    )
    .unwrap()
    .policy;
    let text = "Summarize https://docs.example/page for Alice by e-mail.";
    let ev = json!([{"text": {"start": 0, "end": 9}}]);
    let doc = json!({
        "version": 1,
        "source": {"text": text},
        "actions": [
            {"id": "lookup", "tool": "contacts.lookup", "evidence": ev},
            {"id": "fetch", "tool": "web.fetch", "evidence": ev},
            {"id": "extract", "tool": "text.extract", "evidence": ev},
            {"id": "send", "tool": "email.send", "args": {"to": ["alice@example.com"]}, "evidence": ev}
        ],
        "sinks": [{"id": "mail", "pattern": "email", "evidence": ev}],
        "allowances": [{"id": "a", "sink": "mail", "args": {"to": ["alice@example.com"]},
                        "up_to": {"level": "internal", "categories": ["pii"], "trusted": true},
                        "evidence": ev}]
    });
    let valid = pir::validate(pir::parse(&doc.to_string()).unwrap(), &policy).unwrap();
    let run = |body_from: &str| {
        let mut s = pir::lower(&valid, &policy).unwrap().session().unwrap();
        let ev = |s: &mut Session, v: Value| step(s, v);
        ev(
            &mut s,
            json!({"kind": "call", "id": "c1", "time": 1, "tool": "contacts.lookup", "args": {"name": "Alice"}}),
        );
        ev(
            &mut s,
            json!({"kind": "result", "call": "c1", "status": "succeeded", "discovered": ["alice@example.com"]}),
        );
        ev(
            &mut s,
            json!({"kind": "call", "id": "c2", "time": 2, "tool": "web.fetch", "args": {"url": "https://docs.example/page"}}),
        );
        ev(
            &mut s,
            json!({"kind": "result", "call": "c2", "status": "succeeded"}),
        );
        ev(
            &mut s,
            json!({"kind": "call", "id": "c3", "time": 3, "tool": "text.extract", "args": {"text": "page"}}),
        );
        ev(
            &mut s,
            json!({"kind": "result", "call": "c3", "status": "succeeded"}),
        );
        let event: agenra_core::Event = serde_json::from_value(json!({
            "kind": "call", "id": "c4", "time": 4, "tool": "email.send",
            "args": {"to": "alice@example.com", "subject": "Summary", "body": "..."},
            "lineage": {"to": ["c1"], "subject": [], "body": [body_from]}
        }))
        .unwrap();
        match s.step(&event).unwrap() {
            agenra_core::StepOutput::Decision(d) => (d.verdict, d.rule.name(s.policy())),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(run("c3"), (Verdict::Allow, "send_colleagues".into()));
    assert_eq!(run("c2"), (Verdict::Deny, "web_needs_review".into()));
}
