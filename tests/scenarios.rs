//! The monitor's semantics, scenario by scenario, through the library
//! facade and the policy language (DESIGN §1–2, docs/semantics.md).

use agenra::core::policy::Quota;
use agenra::{compile_policy, Monitor, StepError, Verdict};

mod support;

use support::Session;

use support::v;
use Verdict::{Allow, Deny, Pause};

#[test]
fn first_matching_grant_with_quota_is_consumed_so_early_calls_can_starve_later_ones() {
    let mut s = Session::new(
        r#"
        tool fs.read(path: string) { resource path; }
        grant any_file: fs.read on glob "*" quota 1;
        grant docs: fs.read on prefix "/docs/" quota 1;
        "#,
    );
    // The docs read is served by the first grant that matches: `any_file`.
    assert_eq!(
        s.call("c1", "fs.read", r#"{"path":"/docs/a"}"#),
        v(Allow, "any_file")
    );
    assert_eq!(
        s.call("c2", "fs.read", r#"{"path":"/docs/b"}"#),
        v(Allow, "docs")
    );
    // Now a non-docs read finds nothing left.
    assert_eq!(
        s.call("c3", "fs.read", r#"{"path":"/etc/x"}"#),
        v(Deny, "no-grant")
    );
}

#[test]
fn failed_calls_refund_unknown_outcomes_do_not() {
    let mut s = Session::new(
        r#"
        tool pay(amount: int);
        grant small: pay where amount <= 100 quota 2;
        "#,
    );
    assert_eq!(s.call("c1", "pay", r#"{"amount":50}"#), v(Allow, "small"));
    assert_eq!(s.remaining("small"), Quota::Limited(1));
    s.result("c1", "failed", "");
    assert_eq!(s.remaining("small"), Quota::Limited(2));
    assert_eq!(s.call("c2", "pay", r#"{"amount":50}"#).0, Allow);
    s.result("c2", "unknown", "");
    assert_eq!(s.remaining("small"), Quota::Limited(1));
    assert_eq!(
        s.call("c3", "pay", r#"{"amount":500}"#),
        v(Deny, "no-grant")
    );
    // A second result for the same call is an error and changes nothing.
    let err = s
        .event(r#"{"kind":"result","call":"c2","status":"failed"}"#)
        .unwrap_err();
    assert!(matches!(err, StepError::WrongState { .. }), "{err}");
    assert_eq!(s.remaining("small"), Quota::Limited(1));
}

#[test]
fn approval_reserves_a_unit_that_rejection_returns() {
    let mut s = Session::new(
        r#"
        tool email.send(to: string) { resource to; }
        grant send: email.send quota 1 approval;
        "#,
    );
    assert_eq!(
        s.call("c1", "email.send", r#"{"to":"a@x"}"#),
        v(Pause, "send")
    );
    assert_eq!(s.remaining("send"), Quota::Limited(0));
    // While reserved, nothing is left for another call.
    assert_eq!(s.call("c2", "email.send", r#"{"to":"b@x"}"#).0, Deny);
    // A result before approval is an error.
    assert!(s
        .event(r#"{"kind":"result","call":"c1","status":"succeeded"}"#)
        .is_err());
    s.event(r#"{"kind":"reject","call":"c1"}"#).expect("reject");
    assert_eq!(s.remaining("send"), Quota::Limited(1));
    assert_eq!(s.call("c3", "email.send", r#"{"to":"b@x"}"#).0, Pause);
    s.event(r#"{"kind":"approve","call":"c3"}"#)
        .expect("approve");
    assert!(
        s.event(r#"{"kind":"approve","call":"c3"}"#).is_err(),
        "approving twice"
    );
    s.result("c3", "succeeded", "");
    assert_eq!(s.remaining("send"), Quota::Limited(0));
}

#[test]
fn discovered_resources_widen_what_a_grant_matches() {
    let mut s = Session::new(
        r#"
        sets contacts;
        tool contacts.lookup(name: string);
        tool email.send(to: string) { resource to; }
        grant lookup: contacts.lookup quota unlimited discovers contacts;
        grant send: email.send where to in contacts quota unlimited;
        "#,
    );
    assert_eq!(
        s.call("c1", "email.send", r#"{"to":"ann@x.org"}"#),
        v(Deny, "no-grant")
    );
    s.call("c2", "contacts.lookup", r#"{"name":"Ann"}"#);
    s.result("c2", "succeeded", r#","discovered":["ann@x.org"]"#);
    assert_eq!(
        s.call("c3", "email.send", r#"{"to":"ann@x.org"}"#),
        v(Allow, "send")
    );
    // A failed lookup discovers nothing.
    s.call("c4", "contacts.lookup", r#"{"name":"Bob"}"#);
    s.result("c4", "failed", r#","discovered":["bob@x.org"]"#);
    assert_eq!(s.call("c5", "email.send", r#"{"to":"bob@x.org"}"#).0, Deny);
}

#[test]
fn expired_grants_match_nothing() {
    let mut s = Session::new(
        r#"
        tool deploy(env: string);
        grant temporary: deploy quota unlimited expires 3;
        "#,
    );
    assert_eq!(s.call("c1", "deploy", r#"{"env":"prod"}"#).0, Allow); // time 1
    assert_eq!(s.call("c2", "deploy", r#"{"env":"prod"}"#).0, Allow); // time 2
    assert_eq!(
        s.call("c3", "deploy", r#"{"env":"prod"}"#),
        v(Deny, "no-grant")
    ); // time 3
}

#[test]
fn obligations_need_the_fact_since_the_last_reset_call() {
    let mut s = Session::new(
        r#"
        facts tests_passed;
        tool fs.write(path: string);
        tool tests.run() { fact tests_passed when output.exit_code == 0; }
        tool git.commit();
        grant w: fs.write quota unlimited;
        grant t: tests.run quota unlimited;
        grant c: git.commit quota unlimited;
        obligation tested: require tests_passed since fs.write before git.commit;
        "#,
    );
    assert_eq!(s.call("c1", "git.commit", "{}"), v(Deny, "tested"));
    s.call("c2", "tests.run", "{}");
    s.result("c2", "succeeded", r#","output":{"exit_code":1}"#);
    assert_eq!(
        s.call("c3", "git.commit", "{}"),
        v(Deny, "tested"),
        "failing tests do not count"
    );
    s.call("c4", "tests.run", "{}");
    // A write admitted while the tests run: the run does not cover it.
    s.call("c5", "fs.write", r#"{"path":"a"}"#);
    s.result("c4", "succeeded", r#","output":{"exit_code":0}"#);
    assert_eq!(s.call("c6", "git.commit", "{}"), v(Deny, "tested"));
    s.call("c7", "tests.run", "{}");
    s.result("c7", "succeeded", r#","output":{"exit_code":0}"#);
    assert_eq!(s.call("c8", "git.commit", "{}"), v(Allow, "c"));
    s.call("c9", "fs.write", r#"{"path":"b"}"#);
    assert_eq!(s.call("c10", "git.commit", "{}"), v(Deny, "tested"));
}

#[test]
fn path_rules_see_admitted_history_and_reset() {
    let mut s = Session::new(
        r#"
        categories credential;
        sinks network;
        tool vault.read(key: string) { output <public, {credential}, trusted>; }
        tool http.get(url: string) { sink network; }
        tool session.clear();
        grant v: vault.read quota unlimited;
        grant h: http.get quota unlimited;
        grant s: session.clear quota unlimited;
        deny path exfil: reads(category credential) -> to network reset on call session.clear;
        "#,
    );
    assert_eq!(s.call("c1", "http.get", r#"{"url":"a"}"#).0, Allow);
    s.call("c2", "vault.read", r#"{"key":"k"}"#);
    // Even with lineage that avoids the credential, the history forbids it.
    assert_eq!(
        s.call_with(
            "c3",
            "http.get",
            r#"{"url":"b"}"#,
            r#","lineage":{"url":[]}"#
        ),
        v(Deny, "exfil")
    );
    s.call("c4", "session.clear", "{}");
    assert_eq!(
        s.call_with(
            "c5",
            "http.get",
            r#"{"url":"c"}"#,
            r#","lineage":{"url":[]}"#
        )
        .0,
        Allow
    );
}

#[test]
fn counts_stop_calls_beyond_their_limit() {
    let mut s = Session::new(
        r#"
        tool web.fetch(url: string);
        grant f: web.fetch quota unlimited;
        pause count burst: at most 2 call web.fetch;
        "#,
    );
    assert_eq!(s.call("c1", "web.fetch", r#"{"url":"a"}"#).0, Allow);
    assert_eq!(s.call("c2", "web.fetch", r#"{"url":"b"}"#).0, Allow);
    assert_eq!(
        s.call("c3", "web.fetch", r#"{"url":"c"}"#),
        v(Pause, "burst")
    );
}

#[test]
fn delegates_consume_along_the_chain_and_stay_in_scope() {
    let mut s = Session::new(
        r#"
        tool web.fetch(url: string) { resource url; }
        tool vault.read(key: string);
        scope browsing: web.fetch;
        agent browser from main scope browsing;
        grant fetch: web.fetch on prefix "https://" quota 2;
        grant key: vault.read quota unlimited;
        grant b_fetch: web.fetch on prefix "https://" quota 2 agent browser;
        "#,
    );
    let browser = r#","agent":"browser""#;
    assert_eq!(
        s.call_with("c1", "web.fetch", r#"{"url":"https://a"}"#, browser),
        v(Allow, "b_fetch")
    );
    assert_eq!(
        s.remaining("fetch"),
        Quota::Limited(1),
        "the delegator's grant is consumed too"
    );
    assert_eq!(
        s.call("c2", "web.fetch", r#"{"url":"https://b"}"#),
        v(Allow, "fetch")
    );
    // main's grant is exhausted, so the browser cannot go on even with its own quota.
    assert_eq!(
        s.call_with("c3", "web.fetch", r#"{"url":"https://c"}"#, browser),
        v(Deny, "no-grant")
    );
    assert_eq!(s.remaining("b_fetch"), Quota::Limited(1), "all or nothing");
    assert_eq!(
        s.call_with("c4", "vault.read", r#"{"key":"k"}"#, browser),
        v(Deny, "browsing")
    );
}

#[test]
fn delegates_that_exceed_their_delegator_are_rejected() {
    let err = compile_policy(
        r#"
        tool web.fetch(url: string) { resource url; }
        agent browser from main;
        grant fetch: web.fetch on prefix "https://" quota 2;
        grant b_fetch: web.fetch on prefix "http" quota 2 agent browser;
        "#,
        "t",
    )
    .unwrap_err();
    assert!(err.to_string().contains("b_fetch"), "{err}");
}

#[test]
fn trusted_sanitizers_transform_labels_and_other_tools_propagate_them() {
    let mut s = Session::new(
        r#"
        categories web;
        sinks email;
        tool web.fetch(url: string) { output <public, {web}, untrusted>; }
        tool summarize(text: string);
        tool extract(text: string) { sanitizer facts_only; }
        tool email.send(body: string) { sink email; }
        sanitizer facts_only removes {web} trusts;
        grant f: web.fetch quota unlimited;
        grant sm: summarize quota unlimited;
        grant ex: extract quota unlimited;
        grant e: email.send quota unlimited;
        deny flow no_web: untrusted -> email;
        "#,
    );
    s.call("c1", "web.fetch", r#"{"url":"u"}"#);
    s.result("c1", "succeeded", "");
    s.call_with(
        "c2",
        "summarize",
        r#"{"text":"t"}"#,
        r#","lineage":{"text":["c1"]}"#,
    );
    s.result("c2", "succeeded", "");
    s.call_with(
        "c3",
        "extract",
        r#"{"text":"t"}"#,
        r#","lineage":{"text":["c1"]}"#,
    );
    s.result("c3", "succeeded", "");
    // A summary is not a sanitizer.
    assert_eq!(
        s.call_with(
            "c4",
            "email.send",
            r#"{"body":"b"}"#,
            r#","lineage":{"body":["c2"]}"#
        ),
        v(Deny, "no_web")
    );
    assert_eq!(
        s.call_with(
            "c5",
            "email.send",
            r#"{"body":"b"}"#,
            r#","lineage":{"body":["c3"]}"#
        )
        .0,
        Allow
    );
    // Without observed lineage the whole context flows in, web page included.
    assert_eq!(
        s.call("c6", "email.send", r#"{"body":"b"}"#),
        v(Deny, "no_web")
    );
    // Inferred lineage is recorded but never narrows the flow.
    assert_eq!(
        s.call_with(
            "c7",
            "email.send",
            r#"{"body":"b"}"#,
            r#","inferred":{"body":["c3"]}"#
        ),
        v(Deny, "no_web")
    );
}

#[test]
fn allow_rules_exempt_labels_under_their_ceiling_when_their_condition_holds() {
    let mut s = Session::new(
        r#"
        levels public < confidential;
        sinks email;
        tool report.read(id: string) { output <confidential, {}, trusted>; }
        tool email.send(to: string) { resource to; sink email; }
        grant r: report.read quota unlimited;
        grant e: email.send quota unlimited;
        deny flow stays_in: sensitivity >= confidential -> email;
        allow flow colleagues: up to <confidential, {}, trusted> -> email when to ends_with "@corp.example";
        "#,
    );
    s.call("c1", "report.read", r#"{"id":"q3"}"#);
    s.result("c1", "succeeded", "");
    assert_eq!(
        s.call("c2", "email.send", r#"{"to":"ann@corp.example"}"#).0,
        Allow
    );
    assert_eq!(
        s.call("c3", "email.send", r#"{"to":"eve@evil.example"}"#),
        v(Deny, "stays_in")
    );
}

#[test]
fn the_library_facade_approves_and_rejects_by_id() {
    let p = compile_policy(
        r#"
        tool pay(amount: int);
        grant big: pay quota 1 approval;
        "#,
        "t",
    )
    .expect("compiles");
    let mut m = Monitor::new(p).expect("valid");
    let call: agenra::Call =
        serde_json::from_str(r#"{"id":"p1","time":1,"tool":"pay","args":{"amount":10}}"#)
            .expect("json");
    assert_eq!(m.authorize(&call).expect("decides").verdict, Pause);
    assert!(matches!(m.approve("nope"), Err(StepError::UnknownCall(_))));
    m.approve("p1").expect("approve");
    assert!(
        m.reject("p1").is_err(),
        "an admitted call cannot be rejected"
    );
}

#[test]
fn a_test_that_started_before_an_approved_edit_does_not_cover_it() {
    let mut s = Session::new(
        r#"
        facts tests_passed;
        tool fs.write(path: string);
        tool tests.run() { fact tests_passed when output.exit_code == 0; }
        tool deploy();
        grant w: fs.write quota unlimited approval;
        grant t: tests.run quota unlimited;
        grant d: deploy quota unlimited;
        obligation tested: require tests_passed since fs.write before deploy;
        "#,
    );
    assert_eq!(s.call("w1", "fs.write", r#"{"path":"a"}"#).0, Pause);
    assert_eq!(s.call("t1", "tests.run", "{}").0, Allow);
    assert_eq!(s.approve("w1").verdict, Allow);
    s.result("t1", "succeeded", r#","output":{"exit_code":0}"#);
    // The edit was admitted (approved) after the test run was.
    assert_eq!(s.call("d1", "deploy", "{}"), v(Deny, "tested"));
    s.call("t2", "tests.run", "{}");
    s.result("t2", "succeeded", r#","output":{"exit_code":0}"#);
    assert_eq!(s.call("d2", "deploy", "{}").0, Allow);
}
