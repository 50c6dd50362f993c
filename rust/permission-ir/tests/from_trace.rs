//! The deterministic producer: on any trace, `validate(from_trace(t))`
//! succeeds, and the trace replayed under the lowered IR gets the verdicts
//! it gets under the policy alone (the IR covers exactly what it did).

mod common;

use agenra_core::{Event, Session, StepOutput, Verdict};
use agenra_permission_ir as pir;
use common::policy;
use proptest::prelude::*;
use serde_json::{json, Value};

fn events(lines: &[Value]) -> Vec<Event> {
    lines
        .iter()
        .map(|l| serde_json::from_value(l.clone()).expect("an event"))
        .collect()
}

/// The verdict of each event (`None` for non-decisions), `Err` where the
/// event does not apply.
fn replay(mut s: Session, events: &[Event]) -> Vec<Result<Option<Verdict>, String>> {
    events
        .iter()
        .map(|e| match s.step(e) {
            Ok(StepOutput::Decision(d)) => Ok(Some(d.verdict)),
            Ok(_) => Ok(None),
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

#[test]
fn the_benign_trace_becomes_its_own_task() {
    let trace = events(&[
        json!({"kind": "task", "id": "t1", "time": 1, "text": "Send Alice the weekly report"}),
        json!({"kind": "call", "id": "c1", "time": 2, "tool": "contacts.lookup", "args": {"name": "Alice"}}),
        json!({"kind": "result", "call": "c1", "status": "succeeded"}),
        json!({"kind": "call", "id": "c2", "time": 3, "tool": "reports.read", "args": {"id": "weekly-48"}}),
        json!({"kind": "result", "call": "c2", "status": "succeeded"}),
        json!({"kind": "call", "id": "c3", "time": 4, "tool": "email.send",
               "args": {"to": "alice@example.com", "subject": "Report", "body": "..."},
               "lineage": {"body": ["c2"], "to": ["c1"], "subject": []}}),
    ]);
    let p = policy();
    let ir = pir::from_trace(&trace, &p);
    assert_eq!(ir.source.text, "Send Alice the weekly report");
    assert_eq!(ir.source.events, 6);
    assert_eq!(ir.source.task_id, "ir-task");
    let ids: Vec<&str> = ir.actions.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["call:c1", "call:c2", "call:c3"]);
    assert_eq!(ir.actions[2].args["subject"], vec![json!("Report")]);
    assert_eq!(ir.actions[2].evidence, vec![pir::Span::Event(6)]);
    assert_eq!(ir.assets.len(), 2); // weekly-48 and the recipient
    let flows: Vec<(&str, &str)> = ir
        .flows
        .iter()
        .map(|f| (f.from.as_str(), f.to.as_str()))
        .collect();
    for edge in [
        ("call:c2", "call:c3"),
        ("call:c1", "call:c3"),
        ("call:c3", "sink:email"),
    ] {
        assert!(flows.contains(&edge), "{edge:?} not in {flows:?}");
    }
    assert_eq!(ir.allowances.len(), 1);
    assert_eq!(
        ir.allowances[0].args["to"],
        vec![json!("alice@example.com")]
    );
    let valid = pir::validate(ir, &p).unwrap();
    let low = pir::lower(&valid, &p).unwrap();
    // The trace runs as before under its own task...
    let before = replay(Session::new(p.clone()).unwrap(), &trace);
    assert_eq!(replay(low.session().unwrap(), &trace), before);
    assert_eq!(before[5], Ok(Some(Verdict::Allow)));
    // ... and a variation of it does not.
    let mut other = trace.clone();
    other[5] = events(&[
        json!({"kind": "call", "id": "c3", "time": 4, "tool": "email.send",
        "args": {"to": "bob@example.com", "subject": "Report", "body": "..."}}),
    ])[0]
        .clone();
    assert_eq!(
        replay(Session::new(p.clone()).unwrap(), &other)[5],
        Ok(Some(Verdict::Allow))
    );
    assert_eq!(
        replay(low.session().unwrap(), &other)[5],
        Ok(Some(Verdict::Deny))
    );
}

/// A `null` optional argument is an absent one: the task that covers the
/// call must not turn its ALLOW into a DENY (found by the property below).
#[test]
fn a_null_optional_argument_stays_covered() {
    let trace = events(&[
        json!({"kind": "task", "id": "t0", "time": 1, "text": "Send the weekly-1 report to x@example.com"}),
        json!({"kind": "call", "id": "c0", "time": 2, "tool": "email.send",
               "args": {"to": "x@example.com", "subject": "s", "body": "b", "urgent": null}}),
    ]);
    let p = policy();
    let ir = pir::from_trace(&trace, &p);
    let low = pir::lower(&pir::validate(ir, &p).unwrap(), &p).unwrap();
    let before = replay(Session::new(p.clone()).unwrap(), &trace);
    assert_eq!(before[1], Ok(Some(Verdict::Allow)));
    assert_eq!(replay(low.session().unwrap(), &trace), before);
    // `urgent: [null]` admits the absent argument, not a present one.
    let mut other = trace.clone();
    other[1] = events(&[
        json!({"kind": "call", "id": "c0", "time": 2, "tool": "email.send",
        "args": {"to": "x@example.com", "subject": "s", "body": "b", "urgent": true}}),
    ])[0]
        .clone();
    assert_eq!(
        replay(low.session().unwrap(), &other)[1],
        Ok(Some(Verdict::Deny))
    );
    other[1] = events(&[
        json!({"kind": "call", "id": "c0", "time": 2, "tool": "email.send",
        "args": {"to": "x@example.com", "subject": "s", "body": "b"}}),
    ])[0]
        .clone();
    assert_eq!(
        replay(low.session().unwrap(), &other)[1],
        Ok(Some(Verdict::Allow))
    );
}

fn arg_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(vec!["Alice", "weekly-1", "weekly-2", "x@example.com", "monthly-3", "*"])
            .prop_map(|s| json!(s)),
        1 => (0i64..3).prop_map(|n| json!(n)),
        1 => any::<bool>().prop_map(|b| json!(b)),
        1 => Just(Value::Null),
        1 => prop::collection::vec(prop::sample::select(vec!["a", "b"]), 0..3).prop_map(|v| json!(v)),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    Task(bool),
    Call {
        session: Option<u8>,
        id: u8,
        tool: &'static str,
        args: Vec<(&'static str, Value)>,
        lineage: Vec<(&'static str, u8)>,
    },
    Result {
        id: u8,
        ok: bool,
    },
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let tools = vec![
        "contacts.lookup",
        "reports.read",
        "web.fetch",
        "review.run",
        "notes.count",
        "email.send",
        "nope",
    ];
    let params = vec![
        "name", "id", "url", "n", "tags", "to", "subject", "body", "urgent", "bogus",
    ];
    prop_oneof![
        1 => any::<bool>().prop_map(Step::Task),
        6 => (
            prop::option::weighted(0.2, 0u8..2),
            0u8..24,
            prop::sample::select(tools),
            prop_oneof![4 => Just(vec![]), 1 => prop::collection::vec((prop::sample::select(params.clone()), arg_value()), 1..3)],
            prop::collection::vec((prop::sample::select(params), 0u8..12), 0..2),
        )
            .prop_map(|(session, id, tool, args, lineage)| Step::Call { session, id, tool, args, lineage }),
        2 => (0u8..12, prop::bool::weighted(0.8)).prop_map(|(id, ok)| Step::Result { id, ok }),
    ]
}

/// Well-formed calls are likelier with arguments that fit the tool.
fn fitting_args(tool: &str) -> Vec<(&'static str, Value)> {
    match tool {
        "contacts.lookup" => vec![("name", json!("Alice"))],
        "reports.read" => vec![("id", json!("weekly-1"))],
        "web.fetch" => vec![("url", json!("https://example.com"))],
        "review.run" => vec![("id", json!("weekly-2"))],
        "notes.count" => vec![("n", json!(2))],
        "email.send" => vec![
            ("to", json!("x@example.com")),
            ("subject", json!("s")),
            ("body", json!("b")),
        ],
        _ => vec![],
    }
}

fn trace_of(steps: &[Step]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut time = 0;
    // Call ids seen so far: lineage mostly names one of them (an unknown
    // call in lineage makes the call ill-formed).
    let mut seen: Vec<String> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        time += 1;
        let v = match s {
            Step::Task(scoped) => {
                let mut t = json!({"kind": "task", "id": format!("t{i}"), "time": time,
                                   "text": "Send the weekly-1 report to x@example.com, thanks"});
                if *scoped {
                    t["scope"] = json!({"tools": ["*"]});
                }
                t
            }
            Step::Call {
                session,
                id,
                tool,
                args,
                lineage,
            } => {
                let mut a = serde_json::Map::new();
                let base = if i % 5 == 0 {
                    vec![]
                } else {
                    fitting_args(tool)
                };
                for (k, v) in base.into_iter().chain(args.iter().cloned()) {
                    a.insert(k.to_string(), v);
                }
                let mut l = serde_json::Map::new();
                for (p, src) in lineage {
                    if *src % 4 != 0 && !a.contains_key(*p) {
                        continue; // mostly lineage for arguments the call has
                    }
                    let name = match seen.len() {
                        0 => format!("c{src}"),
                        n if *src < 10 => seen[*src as usize % n].clone(),
                        _ => format!("c{src}"),
                    };
                    l.insert(p.to_string(), json!([name]));
                }
                seen.push(format!("c{id}"));
                let mut c = json!({"kind": "call", "id": format!("c{id}"), "time": time, "tool": tool,
                                   "args": a, "lineage": l});
                if let Some(s) = session {
                    c["session"] = json!(format!("s{s}"));
                }
                c
            }
            Step::Result { id, ok } => json!({"kind": "result", "call": format!("c{id}"),
                "status": if *ok { "succeeded" } else { "failed" }}),
        };
        out.push(serde_json::from_value(v).expect("an event"));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn from_trace_always_validates(steps in prop::collection::vec(step_strategy(), 0..30)) {
        let p = policy();
        let trace = trace_of(&steps);
        let ir = pir::from_trace(&trace, &p);
        // It survives its own JSON, too.
        let text = pir::to_json(&ir);
        prop_assert_eq!(&pir::parse(&text).unwrap(), &ir);
        let valid = pir::validate(ir, &p);
        prop_assert!(valid.is_ok(), "{}", valid.unwrap_err());
        let low = pir::lower(&valid.unwrap(), &p).unwrap();
        // The trace under its own task decides as under the policy alone.
        let before = replay(Session::new(p.clone()).unwrap(), &trace);
        let after = replay(low.session().unwrap(), &trace);
        prop_assert_eq!(before, after);
    }
}
