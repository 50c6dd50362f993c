//! One test per validation defect: each breaks the valid fixture in one
//! place and expects exactly that defect, at that path.

mod common;

use agenra_permission_ir::{self as pir, IrError, ParseError};
use common::{ir, policy, span, TEXT};
use serde_json::{json, Value};

fn errors_of(doc: &Value) -> Vec<IrError> {
    let parsed = pir::parse(&doc.to_string()).expect("parses");
    pir::check(&parsed, &policy())
}

/// The defects after `change`; the fixture itself has none.
fn broken(change: impl FnOnce(&mut Value)) -> Vec<IrError> {
    let mut doc = ir();
    change(&mut doc);
    errors_of(&doc)
}

fn only(errors: Vec<IrError>) -> IrError {
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.into_iter().next().unwrap()
}

fn at<'a>(doc: &'a mut Value, pointer: &str) -> &'a mut Value {
    doc.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer}"))
}

#[test]
fn the_fixture_is_valid_and_round_trips() {
    let doc = ir();
    assert_eq!(errors_of(&doc), vec![]);
    let parsed = pir::parse(&doc.to_string()).unwrap();
    let text = pir::to_json(&parsed);
    assert_eq!(pir::parse(&text).unwrap(), parsed);
    let valid = pir::validate(parsed.clone(), &policy()).unwrap();
    assert_eq!(valid.ir(), &parsed);
    assert_eq!(
        valid.policy_hash(),
        agenra_core::hash::content_hash(&policy()).ok()
    );
}

#[test]
fn duplicate_keys_are_rejected_at_any_depth() {
    let text = ir().to_string();
    // In an argument map, deep inside.
    let dup = text.replacen(
        r#""args":{"name":["Alice"]}"#,
        r#""args":{"name":["Alice"],"name":["Mallory"]}"#,
        1,
    );
    assert_ne!(dup, text);
    match pir::parse(&dup) {
        Err(ParseError::DuplicateKey { key, line, .. }) => {
            assert_eq!(key, "name");
            assert_eq!(line, 1);
        }
        other => panic!("{other:?}"),
    }
    // At the top.
    let top = format!(r#"{{"version":1,{}"#, &text[1..]);
    assert!(
        matches!(pir::parse(&top), Err(ParseError::DuplicateKey { key, .. }) if key == "version")
    );
}

#[test]
fn unknown_fields_and_wrong_shapes_are_parse_errors() {
    let mut doc = ir();
    at(&mut doc, "/actions/0")
        .as_object_mut()
        .unwrap()
        .insert("tools".into(), json!("x"));
    match pir::parse(&doc.to_string()) {
        Err(ParseError::Json { message, .. }) => {
            assert!(message.contains("unknown field `tools`"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(pir::parse("{\"version\":1}"), Err(ParseError::Json { message, .. }) if message.contains("missing field `source`"))
    );
    assert!(matches!(pir::parse("[1,"), Err(ParseError::Json { .. })));
    // A span is either text or event, not both.
    let mut doc = ir();
    *at(&mut doc, "/intent/evidence/0") = json!({"text": {"start": 0, "end": 1}, "event": 1});
    assert!(pir::parse(&doc.to_string()).is_err());
}

#[test]
fn unsupported_version() {
    let e = only(broken(|d| *at(d, "/version") = json!(2)));
    assert_eq!(e, IrError::UnsupportedVersion { found: 2 });
    assert_eq!(e.path(), "version");
}

#[test]
fn empty_id() {
    let e = only(broken(|d| *at(d, "/forbidden/0/id") = json!("")));
    assert_eq!(
        e,
        IrError::EmptyId {
            path: "forbidden[0].id".into()
        }
    );
}

#[test]
fn duplicate_id_across_kinds() {
    let e = only(broken(|d| *at(d, "/forbidden/0/id") = json!("report")));
    assert_eq!(
        e,
        IrError::DuplicateId {
            path: "forbidden[0].id".into(),
            id: "report".into(),
            first: "assets[0].id".into()
        }
    );
}

#[test]
fn part_without_evidence() {
    let e = only(broken(|d| *at(d, "/actions/1/evidence") = json!([])));
    assert_eq!(
        e,
        IrError::MissingEvidence {
            path: "actions[1].evidence".into()
        }
    );
    assert_eq!(e.kind(), "missing-evidence");
}

#[test]
fn label_without_evidence() {
    let e = only(broken(|d| *at(d, "/assets/0/label/evidence") = json!([])));
    assert_eq!(
        e,
        IrError::LabelWithoutEvidence {
            path: "assets[0].label.evidence".into()
        }
    );
    assert_eq!(e.kind(), "label-without-evidence");
}

#[test]
fn span_outside_the_task_text() {
    let len = TEXT.len();
    let e = only(broken(|d| {
        *at(d, "/actions/0/evidence/0") = json!({"text": {"start": 80, "end": len + 1}})
    }));
    assert_eq!(
        e,
        IrError::SpanOutsideText {
            path: "actions[0].evidence[0]".into(),
            start: 80,
            end: len + 1,
            len
        }
    );
    // Empty and reversed spans cite nothing.
    let e = only(broken(|d| {
        *at(d, "/sinks/0/evidence/0") = json!({"text": {"start": 5, "end": 5}})
    }));
    assert!(matches!(e, IrError::SpanOutsideText { .. }), "{e:?}");
}

#[test]
fn span_cutting_a_character() {
    let mut doc = ir();
    *at(&mut doc, "/source/text") = json!(format!("{TEXT} Grüße"));
    let e = at(&mut doc, "/intent/evidence/0");
    let cut = TEXT.len() + 4; // inside `ü`
    *e = json!({"text": {"start": TEXT.len() + 1, "end": cut}});
    assert_eq!(
        only(errors_of(&doc)),
        IrError::SpanNotOnCharBoundary {
            path: "intent.evidence[0]".into(),
            offset: cut
        }
    );
}

#[test]
fn quote_that_is_not_the_spanned_text() {
    let e = only(broken(|d| {
        *at(d, "/actions/0/evidence/0/text/quote") = json!("Look up Bob")
    }));
    assert!(
        matches!(&e, IrError::QuoteMismatch { path, actual, .. } if path == "actions[0].evidence[0]" && actual == "Look up Alice"),
        "{e:?}"
    );
}

#[test]
fn event_outside_the_trace() {
    let e = only(broken(|d| {
        *at(d, "/flows/0/evidence/0") = json!({"event": 3})
    }));
    assert_eq!(
        e,
        IrError::EventOutsideTrace {
            path: "flows[0].evidence[0]".into(),
            seq: 3,
            events: 0
        }
    );
    // With a trace of 3 events, event 3 is fine and 0 is not.
    let mut doc = ir();
    doc["source"]["events"] = json!(3);
    *at(&mut doc, "/flows/0/evidence/0") = json!({"event": 3});
    assert_eq!(errors_of(&doc), vec![]);
    *at(&mut doc, "/flows/0/evidence/0") = json!({"event": 0});
    assert!(matches!(
        only(errors_of(&doc)),
        IrError::EventOutsideTrace { seq: 0, .. }
    ));
}

#[test]
fn dangling_edges() {
    let e = only(broken(|d| *at(d, "/flows/1/to") = json!("sned")));
    assert_eq!(
        e,
        IrError::DanglingEdge {
            path: "flows[1].to".into(),
            id: "sned".into(),
            expected: "an action or sink"
        }
    );
    // An edge to a part of the wrong kind dangles too: flows never enter an asset.
    let e = only(broken(|d| *at(d, "/flows/1/to") = json!("report")));
    assert!(
        matches!(
            e,
            IrError::DanglingEdge {
                expected: "an action or sink",
                ..
            }
        ),
        "{e:?}"
    );
    let e = only(broken(|d| *at(d, "/flows/3/from") = json!("mail")));
    assert!(
        matches!(
            e,
            IrError::DanglingEdge {
                expected: "an asset or action",
                ..
            }
        ),
        "{e:?}"
    );
    let e = only(broken(|d| *at(d, "/actions/1/assets/0") = json!("send")));
    assert_eq!(
        e,
        IrError::DanglingEdge {
            path: "actions[1].assets[0]".into(),
            id: "send".into(),
            expected: "an asset"
        }
    );
    let e = only(broken(|d| *at(d, "/allowances/0/sink") = json!("email")));
    assert!(
        matches!(
            e,
            IrError::DanglingEdge {
                expected: "a sink",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn data_cycle() {
    let e = only(broken(|d| {
        at(d, "/flows")
            .as_array_mut()
            .unwrap()
            .push(json!({"from": "send", "to": "read", "evidence": [span(20, 24)]}));
    }));
    assert_eq!(
        e,
        IrError::DataCycle {
            path: "flows".into(),
            cycle: vec!["send".into(), "read".into(), "send".into()]
        }
    );
    // A self-loop is a cycle.
    let e = only(broken(|d| {
        at(d, "/flows")
            .as_array_mut()
            .unwrap()
            .push(json!({"from": "lookup", "to": "lookup", "evidence": [span(0, 4)]}));
    }));
    assert!(matches!(e, IrError::DataCycle { cycle, .. } if cycle == ["lookup", "lookup"]));
}

#[test]
fn unknown_tool() {
    let e = only(broken(|d| *at(d, "/actions/2/tool") = json!("email.sned")));
    assert_eq!(
        e,
        IrError::UnknownTool {
            path: "actions[2].tool".into(),
            tool: "email.sned".into()
        }
    );
    // A glob matching no tool.
    let e = only(broken(|d| *at(d, "/forbidden/0/tool") = json!("ftp.*")));
    assert_eq!(
        e,
        IrError::UnknownTool {
            path: "forbidden[0].tool".into(),
            tool: "ftp.*".into()
        }
    );
}

#[test]
fn unknown_param() {
    let e = only(broken(|d| {
        *at(d, "/actions/0/args") = json!({"nom": ["Alice"]})
    }));
    assert_eq!(
        e,
        IrError::UnknownParam {
            path: "actions[0].args.nom".into(),
            tool: "contacts.lookup".into(),
            param: "nom".into()
        }
    );
    // An allowance names parameters of the tools reaching its sink.
    let e = only(broken(|d| {
        *at(d, "/allowances/0/args") = json!({"url": ["x"]})
    }));
    assert!(
        matches!(e, IrError::UnknownParam { tool, param, .. } if tool == "email.send" && param == "url")
    );
}

#[test]
fn ill_typed_value() {
    let e = only(broken(|d| {
        *at(d, "/actions/2/args") = json!({"to": ["a@example.com"], "urgent": ["yes"]})
    }));
    assert_eq!(
        e,
        IrError::IllTypedValue {
            path: "actions[2].args.urgent[0]".into(),
            tool: "email.send".into(),
            param: "urgent".into(),
            expected: "bool?".into(),
            got: "string".into()
        }
    );
    // `null` only for an optional parameter.
    assert_eq!(
        broken(|d| d["actions"][2]["args"]["urgent"] = json!([null])),
        vec![]
    );
    let e = only(broken(|d| *at(d, "/actions/2/args/to") = json!([null])));
    assert!(matches!(e, IrError::IllTypedValue { got, .. } if got == "null"));
}

#[test]
fn empty_value_list() {
    let e = only(broken(|d| *at(d, "/actions/2/args/to") = json!([])));
    assert_eq!(
        e,
        IrError::EmptyValues {
            path: "actions[2].args.to".into()
        }
    );
}

#[test]
fn resource_constraint_on_a_tool_without_resource() {
    let e = only(broken(|d| d["actions"][0]["assets"] = json!(["report"])));
    assert_eq!(
        e,
        IrError::NoResourceParam {
            path: "actions[0].assets".into(),
            tool: "contacts.lookup".into()
        }
    );
}

#[test]
fn asset_without_resource_named_by_an_action() {
    let e = only(broken(|d| {
        at(d, "/assets")
            .as_array_mut()
            .unwrap()
            .push(json!({"id": "summary", "evidence": [span(33, 46)]}));
        *at(d, "/actions/1/assets") = json!(["report", "summary"]);
    }));
    assert_eq!(
        e,
        IrError::AssetWithoutResource {
            path: "actions[1].assets[1]".into(),
            id: "summary".into()
        }
    );
}

#[test]
fn unknown_sink_pattern() {
    let e = only(broken(|d| *at(d, "/sinks/0/pattern") = json!("e-mail")));
    assert_eq!(
        e,
        IrError::UnknownSinkPattern {
            path: "sinks[0].pattern".into(),
            pattern: "e-mail".into(),
            known: "email, network".into()
        }
    );
    assert_eq!(broken(|d| *at(d, "/sinks/0/pattern") = json!("e*")), vec![]);
}

#[test]
fn unknown_fact() {
    let obligation = |fact: &str| json!([{"id": "o", "require": fact, "before": "send", "since": "reports.*", "evidence": [span(20, 46)]}]);
    assert_eq!(
        broken(|d| d["obligations"] = obligation("reviewed")),
        vec![]
    );
    let e = only(broken(|d| d["obligations"] = obligation("reveiwed")));
    assert_eq!(
        e,
        IrError::UnknownFact {
            path: "obligations[0].require".into(),
            fact: "reveiwed".into()
        }
    );
    let e = only(broken(|d| {
        d["obligations"] = obligation("reviewed");
        *at(d, "/obligations/0/before") = json!("mail");
    }));
    assert!(matches!(
        e,
        IrError::DanglingEdge {
            expected: "an action",
            ..
        }
    ));
}

#[test]
fn unknown_level_and_category() {
    let e = only(broken(|d| {
        *at(d, "/assets/0/label/level") = json!("secret")
    }));
    assert_eq!(
        e,
        IrError::UnknownLevel {
            path: "assets[0].label.level".into(),
            level: "secret".into()
        }
    );
    let e = only(broken(|d| {
        *at(d, "/allowances/0/up_to/categories/1") = json!("finance")
    }));
    assert_eq!(
        e,
        IrError::UnknownCategory {
            path: "allowances[0].up_to.categories[1]".into(),
            category: "finance".into()
        }
    );
}

#[test]
fn two_allowances_for_one_sink() {
    let e = only(broken(|d| {
        let mut second = d["allowances"][0].clone();
        second["id"] = json!("again");
        d["allowances"].as_array_mut().unwrap().push(second);
    }));
    assert_eq!(
        e,
        IrError::DuplicateAllowance {
            path: "allowances[1]".into(),
            sink: "email".into(),
            first: "allowances[0]".into()
        }
    );
}

#[test]
fn forbidden_action_that_names_nothing() {
    let e = only(broken(|d| {
        d["forbidden"][0].as_object_mut().unwrap().remove("tool");
    }));
    assert_eq!(
        e,
        IrError::EmptyForbidden {
            path: "forbidden[0]".into()
        }
    );
}

#[test]
fn every_defect_is_reported_in_document_order() {
    let errors = broken(|d| {
        *at(d, "/version") = json!(7);
        *at(d, "/actions/2/tool") = json!("nope");
        *at(d, "/flows/1/to") = json!("nowhere");
    });
    let kinds: Vec<&str> = errors.iter().map(IrError::kind).collect();
    assert_eq!(
        kinds,
        ["unsupported-version", "unknown-tool", "dangling-edge"]
    );
    let all = pir::validate(
        pir::parse(
            &{
                let mut d = ir();
                d["version"] = json!(7);
                d
            }
            .to_string(),
        )
        .unwrap(),
        &policy(),
    )
    .unwrap_err();
    assert_eq!(
        all.to_string(),
        "version: unsupported IR version 7 (this build reads 1)"
    );
}
