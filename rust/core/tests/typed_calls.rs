//! What a typed call's builder records: an explicit `null` (told apart
//! from an absent argument), a later lineage of a parameter replacing its
//! earlier one (and leaving the other parameters' lineage alone), and a
//! scalar given to a list parameter. Each typed call is also checked
//! against the JSON call that spells the same final arguments.

mod fixtures;

use agenra_core::decision::{Reason, Rule};
use agenra_core::event::Report;
use agenra_core::label::{CategorySet, LabelPattern};
use agenra_core::policy::{FlowEffect, FlowRule, Param, Policy, SinkUse, Tool};
use agenra_core::{
    Call, CompiledPolicy, Decision, Event, Label, NamedCond, Session, TypedCall, Value, Verdict,
};
use fixtures::{grant, list, params};
use serde_json::json;

/// A tool that, with `sink`, reaches the sink `email` with all its arguments.
fn tool(name: &str, params: Vec<Param>, output: Label, sink: bool) -> Tool {
    let sinks = if sink {
        vec![SinkUse {
            sink: 0,
            params: None,
        }]
    } else {
        vec![]
    };
    Tool {
        sinks,
        ..fixtures::tool(name, params, output)
    }
}

/// `web.fetch` (untrusted output), `notes.read` (trusted output) and
/// `email.send(to, body, cc?: list<string>)` into sink `email`, which no
/// untrusted flow may reach.
fn policy() -> CompiledPolicy {
    let mut p = Policy::empty("typed");
    p.sinks = vec!["email".into()];
    let untrusted = Label::new(0, CategorySet::EMPTY, false);
    let mut send = params(&["to", "body"]);
    send.push(Param {
        optional: true,
        ..list("cc")
    });
    p.tools = vec![
        tool("web.fetch", params(&["url"]), untrusted, false),
        tool("notes.read", params(&["id"]), Label::BOTTOM, false),
        tool("email.send", send, Label::BOTTOM, true),
    ];
    p.grants = (0..3).map(grant).collect();
    p.flow_rules = vec![FlowRule {
        name: "no_web_mail".into(),
        sink: 0,
        effect: FlowEffect::Deny(LabelPattern {
            untrusted: true,
            ..LabelPattern::default()
        }),
        when: NamedCond::TRUE,
    }];
    CompiledPolicy::new(p).expect("valid policy")
}

/// A session where `n1` (a note, trusted: read while the context was
/// clean) and then `w1` (a web page, untrusted) have run and succeeded:
/// the context is untrusted.
fn session(policy: &CompiledPolicy) -> Session {
    let mut s = policy.session();
    for (id, tool, arg, v) in [
        ("n1", "notes.read", "id", "n"),
        ("w1", "web.fetch", "url", "https://x"),
    ] {
        let d = s
            .authorize(&Call::new(id, tool, 1).arg(arg, json!(v)))
            .expect("decided");
        assert_eq!(d.verdict, Verdict::Allow);
        s.step(&Event::Result(Report::succeeded(id)))
            .expect("result");
    }
    s
}

/// The typed call's decision, after checking that the JSON call `json`
/// gets the same one in an identical session.
fn decide(policy: &CompiledPolicy, typed: TypedCall, json: Call) -> Decision {
    let want = session(policy).authorize(&json).expect("decided");
    let got = session(policy).authorize(typed).expect("decided");
    assert_eq!(got, want, "the typed call decides as its JSON");
    got
}

#[test]
fn an_explicit_null_stays_ill_typed_after_another_argument_is_set() {
    let p = policy();
    let send = p.tool("email.send").unwrap();
    let (to, body) = (p.param(send, "to").unwrap(), p.param(send, "body").unwrap());
    // Both required arguments null, then `to` given a value: `body` is
    // still an explicit null, which is ill-typed, not missing.
    let typed = TypedCall::new(send, "s1", 2)
        .arg(to, Value::Null)
        .arg(body, Value::Null)
        .arg(to, "bob@example.com");
    let json = Call::new("s1", "email.send", 2)
        .arg("to", json!("bob@example.com"))
        .arg("body", json!(null));
    let d = decide(&p, typed, json);
    assert_eq!((d.verdict, d.rule), (Verdict::Deny, Rule::WellFormed));
    assert_eq!(
        d.reason,
        Reason::IllTyped {
            param: "body".into(),
            expected: "string".into(),
            got: "null".into()
        }
    );

    // A null replaced by a value is no longer null; one never given is
    // missing.
    let typed = TypedCall::new(send, "s2", 2)
        .arg(body, Value::Null)
        .arg(body, "hi")
        .arg(to, Value::Null)
        .arg(to, "bob@example.com")
        .arg(to, Value::Null);
    let json = Call::new("s2", "email.send", 2)
        .arg("to", json!(null))
        .arg("body", json!("hi"));
    let d = decide(&p, typed, json);
    assert_eq!(
        d.reason,
        Reason::IllTyped {
            param: "to".into(),
            expected: "string".into(),
            got: "null".into()
        }
    );
    let typed = TypedCall::new(send, "s3", 2)
        .arg(to, Value::Null)
        .arg(to, "bob@example.com");
    let json = Call::new("s3", "email.send", 2).arg("to", json!("bob@example.com"));
    let d = decide(&p, typed, json);
    assert_eq!(
        d.reason,
        Reason::MissingArg {
            param: "body".into()
        }
    );
}

#[test]
fn a_later_lineage_replaces_the_parameters_earlier_one_only() {
    let p = policy();
    let send = p.tool("email.send").unwrap();
    let (to, body) = (p.param(send, "to").unwrap(), p.param(send, "body").unwrap());
    let none: [&str; 0] = [];
    // `to` comes from nothing, `body` first from the web page, then (the
    // adapter corrects itself) from the note only: nothing untrusted
    // reaches the sink.
    let typed = TypedCall::new(send, "s1", 2)
        .arg(to, "bob@example.com")
        .arg(body, "hi")
        .lineage(to, none)
        .lineage(body, ["w1"])
        .lineage(body, ["n1"]);
    let json = Call::new("s1", "email.send", 2)
        .arg("to", json!("bob@example.com"))
        .arg("body", json!("hi"))
        .lineage("to", none)
        .lineage("body", ["n1"]);
    let d = decide(&p, typed, json);
    assert_eq!(d.verdict, Verdict::Allow, "{:?}", d.reason);

    // The other way round: the web page replaces the note.
    let typed = TypedCall::new(send, "s2", 2)
        .arg(to, "bob@example.com")
        .arg(body, "hi")
        .lineage(to, none)
        .lineage(body, ["n1"])
        .lineage(body, ["w1"]);
    let json = Call::new("s2", "email.send", 2)
        .arg("to", json!("bob@example.com"))
        .arg("body", json!("hi"))
        .lineage("to", none)
        .lineage("body", ["w1"]);
    let d = decide(&p, typed, json);
    assert_eq!(
        (d.verdict, d.rule),
        (Verdict::Deny, Rule::Flow(0)),
        "{:?}",
        d.reason
    );

    // An unknown call replaced by a known one is forgotten; another
    // parameter's unknown call is not.
    let typed = TypedCall::new(send, "s3", 2)
        .arg(to, "bob@example.com")
        .arg(body, "hi")
        .lineage(body, ["ghost"])
        .lineage(to, ["phantom"])
        .lineage(body, none);
    let json = Call::new("s3", "email.send", 2)
        .arg("to", json!("bob@example.com"))
        .arg("body", json!("hi"))
        .lineage("body", none)
        .lineage("to", ["phantom"]);
    let d = decide(&p, typed, json);
    assert_eq!(
        d.reason,
        Reason::UnknownLineage {
            param: "to".into(),
            call: "phantom".into()
        }
    );
}

#[test]
fn a_scalar_is_not_a_list() {
    let p = policy();
    let send = p.tool("email.send").unwrap();
    let (to, body, cc) = (
        p.param(send, "to").unwrap(),
        p.param(send, "body").unwrap(),
        p.param(send, "cc").unwrap(),
    );
    let typed = TypedCall::new(send, "s1", 2)
        .arg(to, "bob@example.com")
        .arg(body, "hi")
        .arg(cc, "eve@example.com");
    let json = Call::new("s1", "email.send", 2)
        .arg("to", json!("bob@example.com"))
        .arg("body", json!("hi"))
        .arg("cc", json!("eve@example.com"));
    let d = decide(&p, typed, json);
    assert_eq!(
        d.reason,
        Reason::IllTyped {
            param: "cc".into(),
            expected: "list<string>".into(),
            got: "string".into()
        }
    );
    // As a list it is well-formed (and, the context being untrusted, the
    // flow rule then denies).
    let typed = TypedCall::new(send, "s2", 2)
        .arg(to, "bob@example.com")
        .arg(body, "hi")
        .arg(cc, vec!["eve@example.com"]);
    let json = Call::new("s2", "email.send", 2)
        .arg("to", json!("bob@example.com"))
        .arg("body", json!("hi"))
        .arg("cc", json!(["eve@example.com"]));
    let d = decide(&p, typed, json);
    assert_eq!(d.rule, Rule::Flow(0), "{:?}", d.reason);
}
