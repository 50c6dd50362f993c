//! Shared fixtures: a policy with every kind of name the IR refers to, and
//! a valid IR for it.
#![allow(dead_code)]

use agenra_core::{Event, Policy, Session, StepOutput, Verdict};
use serde_json::{json, Value};

pub const POLICY: &str = r#"
levels public < internal < confidential;
categories pii, report, web;
sinks email, network;
facts reviewed;
task seeds contacts;
sets contacts;

tool contacts.lookup(name: string) { output <internal, {pii}, trusted>; }
tool reports.read(id: string) { resource id; output <confidential, {report}, trusted>; }
tool web.fetch(url: string) { resource url; sink network; output <public, {web}, untrusted>; }
tool review.run(id: string) { fact reviewed; }
tool notes.count(n: int, tags?: list<string>);
tool email.send(to: string, subject: string, body: string, urgent?: bool) {
  resource to;
  sink email;
}

grant lookup: contacts.lookup quota 20;
grant read_reports: reports.read on prefix "weekly-" quota unlimited;
grant browse: web.fetch quota 10;
grant review: review.run quota unlimited;
grant count: notes.count quota unlimited;
grant send: email.send quota unlimited;

deny flow web_needs_review: untrusted -> email;
deny flow confidential_stays_in: sensitivity >= confidential -> email;
allow flow reports_to_colleagues: up to <confidential, {pii, report}, trusted> -> email when to ends_with "@example.com";
"#;

pub const TEXT: &str =
    "Look up Alice, then send her the weekly report weekly-48 by e-mail. Do not browse the web.";

pub fn policy() -> Policy {
    agenra_policy::compile(POLICY, "test")
        .expect("the test policy compiles")
        .policy
}

pub fn span(start: usize, end: usize) -> Value {
    json!({"text": {"start": start, "end": end, "quote": &TEXT[start..end]}})
}

/// A valid IR for [`TEXT`] under [`POLICY`].
pub fn ir() -> Value {
    json!({
        "version": 1,
        "source": {"text": TEXT},
        "intent": {"summary": "send Alice the weekly report", "evidence": [span(0, 66)]},
        "assets": [
            {"id": "report", "resource": {"exact": "weekly-48"},
             "label": {"level": "confidential", "categories": ["report"], "trusted": true,
                       "evidence": [span(33, 56)]},
             "evidence": [span(47, 56)]}
        ],
        "actions": [
            {"id": "lookup", "tool": "contacts.lookup", "args": {"name": ["Alice"]},
             "evidence": [span(0, 13)]},
            {"id": "read", "tool": "reports.read", "assets": ["report"],
             "evidence": [span(20, 56)]},
            {"id": "send", "tool": "email.send", "args": {"to": ["alice@example.com"]},
             "evidence": [span(20, 66)]}
        ],
        "sinks": [{"id": "mail", "pattern": "email", "evidence": [span(57, 66)]}],
        "allowances": [
            {"id": "send-report", "sink": "mail",
             "up_to": {"level": "confidential", "categories": ["pii", "report"], "trusted": true},
             "args": {"to": ["alice@example.com"]},
             "evidence": [span(20, 66)]}
        ],
        "forbidden": [{"id": "no-web", "tool": "web.*", "evidence": [span(68, 89)]}],
        "flows": [
            {"from": "report", "to": "read", "evidence": [span(33, 56)]},
            {"from": "read", "to": "send", "evidence": [span(20, 56)]},
            {"from": "lookup", "to": "send", "evidence": [span(0, 46)]},
            {"from": "send", "to": "mail", "evidence": [span(57, 66)]}
        ]
    })
}

/// Steps one event given as JSON; the verdict of a decision, `None` otherwise.
pub fn step(session: &mut Session, event: Value) -> Option<Verdict> {
    let event: Event = serde_json::from_value(event).expect("an event");
    match session.step(&event).expect("the event applies") {
        StepOutput::Decision(d) => Some(d.verdict),
        _ => None,
    }
}

/// Steps a call and returns its verdict and rule name.
pub fn call(session: &mut Session, id: &str, tool: &str, args: Value) -> (Verdict, String) {
    let event: Event = serde_json::from_value(json!({
        "kind": "call", "id": id, "time": 1, "tool": tool, "args": args
    }))
    .expect("a call");
    match session.step(&event).expect("the call applies") {
        StepOutput::Decision(d) => {
            let rule = d.rule.name(session.policy());
            (d.verdict, rule)
        }
        other => panic!("not a decision: {other:?}"),
    }
}
