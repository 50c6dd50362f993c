//! `Call::new` and `Report::succeeded` build exactly the events their JSON
//! spells, field by field.

use agenra_core::event::Outcome;
use agenra_core::{Call, Event, Report};
use serde_json::json;

fn decode(v: serde_json::Value) -> Event {
    serde_json::from_value(v).expect("an event")
}

#[test]
fn a_built_call_is_the_call_its_json_spells() {
    let built = Call::new("c2", "email.send", 7)
        .agent("helper")
        .in_session("s1")
        .arg("to", json!("alice@example.com"))
        .arg("body", json!("draft"))
        .arg("body", json!("the report"))
        .lineage("body", ["c1"])
        .lineage("to", Vec::<String>::new());
    let json = decode(json!({
        "kind": "call", "session": "s1", "id": "c2", "time": 7, "agent": "helper",
        "tool": "email.send", "args": {"to": "alice@example.com", "body": "the report"},
        "lineage": {"body": ["c1"], "to": []}
    }));
    assert_eq!(Event::Call(built), json);
    // Without the builder methods: main, no arguments, no lineage.
    let bare = decode(json!({"kind": "call", "id": "c3", "time": 8, "tool": "notes.read"}));
    assert_eq!(Event::Call(Call::new("c3", "notes.read", 8)), bare);
}

#[test]
fn a_built_report_is_the_report_its_json_spells() {
    let built = Report::succeeded("c2")
        .at(9)
        .in_session("s1")
        .output(json!({"id": 7}))
        .discovered(["bob@example.com"]);
    let json = decode(json!({
        "kind": "result", "session": "s1", "call": "c2", "time": 9, "status": "succeeded",
        "output": {"id": 7}, "discovered": ["bob@example.com"]
    }));
    assert_eq!(Event::Result(built), json);
    for (r, status) in [
        (Report::failed("c4"), "failed"),
        (Report::unknown("c4"), "unknown"),
    ] {
        let json = decode(json!({"kind": "result", "call": "c4", "status": status}));
        assert_eq!(Event::Result(r), json);
    }
    assert_eq!(Report::new("c5", Outcome::Unknown), Report::unknown("c5"));
}
