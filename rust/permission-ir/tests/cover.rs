//! The cover rules (`task:cover:TOOL`): actions are merged into as few
//! conditions as the calls they cover allow, without covering more or less.

use agenra_core::policy::Policy;
use agenra_core::{Cond, Event, Session, Verdict};
use agenra_permission_ir as pir;
use proptest::prelude::*;
use serde_json::{json, Value};

const POLICY: &str = r#"
tool t(r: string, a: string, b: int, tags?: list<string>) { resource r; }
tool reports.read(id: string) { resource id; }
tool email.send(to: string, subject: string, body: string) { resource to; }
grant g: t quota unlimited;
grant read: reports.read quota unlimited;
grant send: email.send quota unlimited;
"#;

fn policy() -> Policy {
    agenra_policy::compile(POLICY, "cover")
        .expect("the test policy compiles")
        .policy
}

/// How many conditions the cover rule of `tool` has (`None`: no rule).
fn disjuncts(p: &Policy, tool: &str) -> Option<usize> {
    let r = p
        .call_rules
        .iter()
        .find(|r| r.name == format!("task:cover:{tool}"))?;
    match &r.when {
        Cond::Not(inner) => match inner.as_ref() {
            Cond::Or(covers) => Some(covers.len()),
            _ => None,
        },
        _ => None,
    }
}

fn rule_size(p: &Policy, tool: &str) -> usize {
    let r = p
        .call_rules
        .iter()
        .find(|r| r.name == format!("task:cover:{tool}"))
        .expect("a cover rule");
    serde_json::to_string(&r.when).expect("json").len()
}

/// `n` calls: reports on `n / 2` distinct ids, and e-mails of four kinds
/// (two recipients × two subjects) with one body.
fn long_trace(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let call = if i % 2 == 0 {
                json!({"kind": "call", "id": format!("c{i}"), "time": i, "tool": "reports.read",
                       "args": {"id": format!("weekly-{i}")}})
            } else {
                let to = ["alice@x", "bob@x"][i / 2 % 2];
                let subject = ["report", "notes"][i / 4 % 2];
                json!({"kind": "call", "id": format!("c{i}"), "time": i, "tool": "email.send",
                       "args": {"to": to, "subject": subject, "body": "hi"}})
            };
            serde_json::from_value(call).expect("an event")
        })
        .collect()
}

#[test]
fn a_long_traces_cover_rules_have_one_condition_per_kind_of_call() {
    let p = policy();
    let mut sizes = vec![];
    for n in [40, 4000] {
        let events = long_trace(n);
        let ir = pir::from_trace(&events, &p);
        assert_eq!(ir.actions.len(), n);
        let valid = pir::validate(ir, &p).expect("valid");
        let low = pir::lower(&valid, &p).expect("lowers");
        // Reports differ only in their resource, e-mails only in the
        // values of two scalar arguments: one condition each.
        assert_eq!(disjuncts(&low.policy, "reports.read"), Some(1));
        assert_eq!(disjuncts(&low.policy, "email.send"), Some(1));
        sizes.push(rule_size(&low.policy, "email.send"));
        // Still exactly the trace's calls: every one is allowed, others not.
        let mut s = low.session().expect("a session");
        for e in &events {
            let Event::Call(c) = e else { continue };
            assert_eq!(s.check(c).expect("checks").verdict, Verdict::Allow);
        }
        let other: Event = serde_json::from_value(json!({"kind": "call", "id": "x", "time": n,
            "tool": "email.send", "args": {"to": "alice@x", "subject": "report", "body": "bye"}}))
        .expect("an event");
        let Event::Call(c) = &other else {
            unreachable!()
        };
        let d = s.check(c).expect("checks");
        assert_eq!(
            (d.verdict, d.rule.name(s.policy())),
            (Verdict::Deny, "task:cover:email.send".to_string())
        );
    }
    // The e-mails' rule does not grow with the trace.
    assert_eq!(sizes[0], sizes[1]);
}

// ---------------------------------------------------------------------
// Exactness: the merged rule covers exactly the calls some action covers.

#[derive(Clone, Debug)]
struct Act {
    assets: Vec<&'static str>,
    a: Option<Vec<&'static str>>,
    b: Option<Vec<i64>>,
    tags: Option<Vec<&'static str>>,
}

fn nonempty<T: Clone + std::fmt::Debug + 'static>(xs: Vec<T>) -> impl Strategy<Value = Vec<T>> {
    let n = xs.len();
    proptest::sample::subsequence(xs, 1..=n)
}

fn act() -> impl Strategy<Value = Act> {
    // Small domains, so that actions often differ in one part only.
    (
        proptest::sample::subsequence(vec!["x", "y"], 0..=2),
        proptest::option::of(nonempty(vec!["p", "q"])),
        proptest::option::of(Just(vec![1i64])),
        proptest::option::of(nonempty(vec!["u", "v"])),
    )
        .prop_map(|(assets, a, b, tags)| Act { assets, a, b, tags })
}

#[derive(Clone, Debug)]
struct CallArgs {
    r: &'static str,
    a: &'static str,
    b: i64,
    tags: Vec<&'static str>,
}

fn call_args() -> impl Strategy<Value = CallArgs> {
    (
        proptest::sample::select(vec!["x", "y", "z", "w"]),
        proptest::sample::select(vec!["p", "q", "s"]),
        1i64..=3,
        proptest::sample::select(vec![vec!["u"], vec!["u", "v"], vec!["v", "s"], vec!["s"]]),
    )
        .prop_map(|(r, a, b, tags)| CallArgs { r, a, b, tags })
}

fn covers(act: &Act, c: &CallArgs) -> bool {
    (act.assets.is_empty() || act.assets.contains(&c.r))
        && act.a.as_ref().is_none_or(|v| v.contains(&c.a))
        && act.b.as_ref().is_none_or(|v| v.contains(&c.b))
        && act
            .tags
            .as_ref()
            .is_none_or(|v| c.tags.iter().all(|t| v.contains(t)))
}

fn ir_of(acts: &[Act]) -> Value {
    let ev = json!([{"text": {"start": 0, "end": 4}}]);
    let assets: Vec<Value> = ["x", "y", "z"]
        .iter()
        .map(|r| json!({"id": format!("asset-{r}"), "resource": {"exact": r}, "evidence": ev}))
        .collect();
    let actions: Vec<Value> = acts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut args = serde_json::Map::new();
            if let Some(v) = &a.a {
                args.insert("a".into(), json!(v));
            }
            if let Some(v) = &a.b {
                args.insert("b".into(), json!(v));
            }
            if let Some(v) = &a.tags {
                args.insert("tags".into(), json!(v));
            }
            let assets: Vec<String> = a.assets.iter().map(|r| format!("asset-{r}")).collect();
            json!({"id": format!("act{i}"), "tool": "t", "assets": assets, "args": args, "evidence": ev})
        })
        .collect();
    json!({"version": 1, "source": {"text": "task"}, "assets": assets, "actions": actions})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn merged_cover_rules_cover_exactly_the_actions_calls(
        acts in proptest::collection::vec(act(), 1..7),
        calls in proptest::collection::vec(call_args(), 1..24),
    ) {
        let p = policy();
        let low = pir::load(&ir_of(&acts).to_string(), &p).expect("valid");
        if let Some(n) = disjuncts(&low.policy, "t") {
            prop_assert!(n <= acts.len());
        }
        let mut s: Session = low.session().expect("a session");
        for (i, c) in calls.iter().enumerate() {
            let e: Event = serde_json::from_value(json!({"kind": "call", "id": format!("c{i}"),
                "time": 1, "tool": "t", "args": {"r": c.r, "a": c.a, "b": c.b, "tags": c.tags}}))
                .expect("an event");
            let Event::Call(call) = &e else { unreachable!() };
            let expected = acts.iter().any(|a| covers(a, c));
            let got = s.check(call).expect("checks").verdict == Verdict::Allow;
            prop_assert_eq!(got, expected, "call {:?}", c);
        }
    }
}

#[test]
fn list_parameters_are_not_merged_by_value() {
    let acts = [
        Act {
            assets: vec![],
            a: Some(vec!["p"]),
            b: None,
            tags: Some(vec!["u"]),
        },
        Act {
            assets: vec![],
            a: Some(vec!["p"]),
            b: None,
            tags: Some(vec!["v"]),
        },
    ];
    let low = pir::load(&ir_of(&acts).to_string(), &policy()).expect("valid");
    assert_eq!(disjuncts(&low.policy, "t"), Some(2));
    // Tags `u` or tags `v`, not a mix of both.
    let mut s = low.session().expect("a session");
    for (tags, allowed) in [
        (json!(["u"]), true),
        (json!(["v", "v"]), true),
        (json!(["u", "v"]), false),
    ] {
        let e: Event = serde_json::from_value(json!({"kind": "call", "id": "c", "time": 1,
            "tool": "t", "args": {"r": "x", "a": "p", "b": 1, "tags": tags}}))
        .expect("an event");
        let Event::Call(call) = &e else {
            unreachable!()
        };
        assert_eq!(
            s.check(call).expect("checks").verdict == Verdict::Allow,
            allowed,
            "{tags}"
        );
    }
}
