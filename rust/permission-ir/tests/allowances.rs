//! Allowances narrow the policy's declassifications into sinks and into
//! delegated agents (`allow flow ... -> agent A`), and never grant anything
//! the policy alone does not: a property test compares every call under
//! policy ∧ task with the same call under the policy alone.

use agenra_core::{Call, Event, Policy, Session, StepOutput, Verdict};
use agenra_permission_ir as pir;
use pir::{CheckKind, IrError};
use proptest::prelude::*;
use serde_json::{json, Value};

const POLICY: &str = r#"
levels public < internal < secret;
categories pii, web;
sinks network;

tool db.read(key: string) { resource key; output <secret, {pii}, trusted>; }
tool web.fetch(url: string) { resource url; sink network; output <public, {web}, untrusted>; }
tool notes.write(path: string, text?: string) { resource path; }

agent browser from main;

grant read: db.read quota unlimited;
grant fetch: web.fetch quota unlimited;
grant notes: notes.write quota unlimited;
grant b_fetch: web.fetch quota unlimited agent browser;
grant b_notes: notes.write quota unlimited agent browser;

deny flow secrets_out: sensitivity >= secret -> network;
allow flow lookups_out: up to <secret, {pii}, trusted> -> network when url starts_with "https://api.";
deny flow no_secrets_to_browser: sensitivity >= internal -> agent browser;
allow flow browser_notes: up to <secret, {pii}, trusted> -> agent browser when path starts_with "notes/";
"#;

const TEXT: &str = "Read the customer record, let the browser file notes about it.";

fn policy() -> Policy {
    agenra_policy::compile(POLICY, "test")
        .expect("the test policy compiles")
        .policy
}

fn span() -> Value {
    json!({"text": {"start": 0, "end": TEXT.len()}})
}

/// Every tool covered, no constraints: only the allowances narrow.
fn ir(allowances: Value) -> Value {
    json!({
        "version": 1,
        "source": {"text": TEXT},
        "actions": [
            {"id": "read", "tool": "db.read", "evidence": [span()]},
            {"id": "fetch", "tool": "web.fetch", "evidence": [span()]},
            {"id": "note", "tool": "notes.write", "evidence": [span()]}
        ],
        "sinks": [{"id": "net", "pattern": "network", "evidence": [span()]}],
        "allowances": allowances
    })
}

fn lowered(doc: &Value) -> pir::Lowered {
    pir::load(&doc.to_string(), &policy()).expect("the IR validates and lowers")
}

fn event(v: Value) -> Event {
    serde_json::from_value(v).expect("an event")
}

fn call_event(id: &str, time: u64, agent: &str, tool: &str, args: Value) -> Event {
    event(
        json!({"kind": "call", "id": id, "time": time, "agent": agent, "tool": tool, "args": args}),
    )
}

/// main reads the record (its result goes into the shared context), then
/// the browser writes `path`: the verdict and rule of the write.
fn read_then_browser_writes(mut s: Session, path: &str) -> (Verdict, String) {
    s.step(&call_event(
        "c1",
        1,
        "main",
        "db.read",
        json!({"key": "alice"}),
    ))
    .expect("applies");
    s.step(&event(
        json!({"kind": "result", "call": "c1", "time": 2, "status": "succeeded", "output": "x"}),
    ))
    .expect("applies");
    match s
        .step(&call_event(
            "c2",
            3,
            "browser",
            "notes.write",
            json!({"path": path}),
        ))
        .expect("applies")
    {
        StepOutput::Decision(d) => {
            let rule = d.rule.name(s.policy());
            (d.verdict, rule)
        }
        other => panic!("not a decision: {other:?}"),
    }
}

fn under(doc: &Value) -> Session {
    lowered(doc).session().expect("a session under the task")
}

fn agent_allowance(up_to: Value, args: Value) -> Value {
    json!({"id": "browser-notes", "agent": "browser", "up_to": up_to, "args": args, "evidence": [span()]})
}

fn top() -> Value {
    json!({"level": "secret", "categories": ["pii"], "trusted": true})
}

#[test]
fn the_policy_alone_declassifies_into_the_browser() {
    let s = Session::new(policy()).expect("a session");
    assert_eq!(
        read_then_browser_writes(s, "notes/a"),
        (Verdict::Allow, "b_notes".into())
    );
    let s = Session::new(policy()).expect("a session");
    assert_eq!(
        read_then_browser_writes(s, "tmp/a"),
        (Verdict::Deny, "no_secrets_to_browser".into())
    );
}

#[test]
fn without_an_agent_allowance_the_agent_rule_declassifies_nothing() {
    let doc = ir(json!([]));
    assert_eq!(
        read_then_browser_writes(under(&doc), "notes/a"),
        (Verdict::Deny, "no_secrets_to_browser".into())
    );
    let low = lowered(&doc);
    assert!(low.checks.iter().any(|c| c.kind == CheckKind::Allowance
        && c.rule == "browser_notes"
        && c.description.contains("no allowance for agent `browser`")));
}

#[test]
fn an_agent_allowance_bounds_the_declassification_by_ceiling_and_arguments() {
    // As wide as the policy's rule: the policy's answer.
    let doc = ir(json!([agent_allowance(top(), json!({}))]));
    assert_eq!(
        read_then_browser_writes(under(&doc), "notes/a"),
        (Verdict::Allow, "b_notes".into())
    );
    // Scoped to one path: another path under notes/ is no longer declassified.
    let doc = ir(json!([agent_allowance(
        top(),
        json!({"path": ["notes/a"]})
    )]));
    assert_eq!(
        read_then_browser_writes(under(&doc), "notes/a").0,
        Verdict::Allow
    );
    assert_eq!(
        read_then_browser_writes(under(&doc), "notes/b"),
        (Verdict::Deny, "no_secrets_to_browser".into())
    );
    // A path the policy does not declassify stays denied, whatever the allowance says.
    let doc = ir(json!([agent_allowance(top(), json!({"path": ["tmp/a"]}))]));
    assert_eq!(
        read_then_browser_writes(under(&doc), "tmp/a"),
        (Verdict::Deny, "no_secrets_to_browser".into())
    );
    // A ceiling below the record's label: not declassified.
    let low = json!({"level": "internal", "categories": ["pii"], "trusted": true});
    let doc = ir(json!([agent_allowance(low, json!({}))]));
    assert_eq!(
        read_then_browser_writes(under(&doc), "notes/a"),
        (Verdict::Deny, "no_secrets_to_browser".into())
    );
    let l = lowered(&doc);
    let check = l
        .checks
        .iter()
        .find(|c| c.rule == "browser_notes")
        .expect("a check for the rule");
    assert_eq!(check.id, "browser-notes");
    assert!(
        check.description.contains("into agent `browser`"),
        "{}",
        check.description
    );
}

#[test]
fn agent_allowances_are_validated() {
    let errors = |allowances: Value| -> Vec<IrError> {
        pir::validate(
            pir::parse(&ir(allowances).to_string()).expect("parses"),
            &policy(),
        )
        .expect_err("invalid")
        .errors
    };
    let e = errors(json!([agent_allowance(top(), json!({})).as_object().map(
        |o| {
            let mut o = o.clone();
            o.insert("agent".into(), json!("crawler"));
            Value::Object(o)
        }
    )]));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].kind(), "unknown-agent");
    assert_eq!(e[0].path(), "allowances[0].agent");
    assert!(e[0].to_string().contains("main, browser"), "{}", e[0]);
    // Both targets, or none.
    let mut both = agent_allowance(top(), json!({}));
    both["sink"] = json!("net");
    let mut neither = agent_allowance(top(), json!({}));
    neither.as_object_mut().unwrap().remove("agent");
    neither["id"] = json!("other");
    let e = errors(json!([both, neither]));
    assert_eq!(
        e.iter().map(|x| (x.kind(), x.path())).collect::<Vec<_>>(),
        [
            ("allowance-target", "allowances[0]"),
            ("allowance-target", "allowances[1]")
        ]
    );
    // Twice the same agent.
    let mut second = agent_allowance(top(), json!({}));
    second["id"] = json!("again");
    let e = errors(json!([agent_allowance(top(), json!({})), second]));
    assert_eq!(
        e,
        [IrError::DuplicateAgentAllowance {
            path: "allowances[1]".into(),
            agent: "browser".into(),
            first: "allowances[0]".into()
        }]
    );
    // A parameter none of the agent's tools has; a value of the wrong type.
    let e = errors(json!([agent_allowance(top(), json!({"nom": ["x"]}))]));
    assert_eq!(e[0].kind(), "unknown-param");
    let e = errors(json!([agent_allowance(top(), json!({"path": [3]}))]));
    assert_eq!(e[0].kind(), "ill-typed-value");
}

#[test]
fn from_trace_keeps_the_policys_agent_declassification() {
    let events = vec![
        call_event("c1", 1, "main", "db.read", json!({"key": "alice"})),
        event(
            json!({"kind": "result", "call": "c1", "time": 2, "status": "succeeded", "output": "x"}),
        ),
        call_event(
            "c2",
            3,
            "browser",
            "notes.write",
            json!({"path": "notes/a"}),
        ),
    ];
    let p = policy();
    let ir = pir::from_trace(&events, &p);
    let agent: Vec<_> = ir.allowances.iter().filter(|a| a.agent.is_some()).collect();
    assert_eq!(agent.len(), 1, "{:?}", ir.allowances);
    assert_eq!(agent[0].agent.as_deref(), Some("browser"));
    let valid = pir::validate(ir, &p).expect("valid");
    let low = pir::lower(&valid, &p).expect("lowers");
    let s = low.session().expect("a session");
    assert_eq!(
        read_then_browser_writes(s, "notes/a"),
        (Verdict::Allow, "b_notes".into())
    );
}

// ---------------------------------------------------------------------
// Property: an allowance never grants what the policy alone does not.

#[derive(Clone, Debug)]
struct Step {
    agent: &'static str,
    tool: usize,
    arg: usize,
    result: bool,
}

const ARGS: [&str; 4] = ["notes/a", "https://api.x/", "tmp/b", "http://evil/"];

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![Just("main"), Just("browser")],
        0usize..3,
        0usize..ARGS.len(),
        any::<bool>(),
    )
        .prop_map(|(agent, tool, arg, result)| Step {
            agent,
            tool,
            arg,
            result,
        })
}

fn label() -> impl Strategy<Value = Value> {
    let any_label = (
        prop_oneof![Just("public"), Just("internal"), Just("secret")],
        proptest::sample::subsequence(vec!["pii", "web"], 0..=2),
        any::<bool>(),
    )
        .prop_map(|(level, cats, trusted)| {
            json!({"level": level, "categories": cats, "trusted": trusted})
        });
    // Often the top label: the widest ceiling an allowance can ask for.
    prop_oneof![
        2 => Just(json!({"level": "secret", "categories": ["pii", "web"], "trusted": false})),
        1 => any_label,
    ]
}

/// Zero to two allowances: one for the network sink and/or one for the
/// browser, each with a random ceiling and maybe an argument scope.
fn allowances() -> impl Strategy<Value = Value> {
    (
        proptest::option::of((label(), proptest::option::of(0usize..ARGS.len()))),
        proptest::option::of((label(), proptest::option::of(0usize..ARGS.len()))),
    )
        .prop_map(|(sink, agent)| {
            let mut out = vec![];
            if let Some((up_to, arg)) = sink {
                let args = arg.map_or(json!({}), |a| json!({"url": [ARGS[a]]}));
                out.push(json!({"id": "s", "sink": "net", "up_to": up_to, "args": args, "evidence": [span()]}));
            }
            if let Some((up_to, arg)) = agent {
                let args = arg.map_or(json!({}), |a| json!({"path": [ARGS[a]]}));
                out.push(json!({"id": "a", "agent": "browser", "up_to": up_to, "args": args, "evidence": [span()]}));
            }
            Value::Array(out)
        })
}

fn rank(v: Verdict) -> u8 {
    match v {
        Verdict::Deny => 0,
        Verdict::Pause => 1,
        Verdict::Allow => 2,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Both sessions see the same admitted calls (a call is applied only
    /// when both allow it); every call is first checked in both, and the
    /// task's answer is never more permissive than the policy's.
    #[test]
    fn an_allowance_never_grants_what_the_policy_does_not(
        allowances in allowances(),
        steps in proptest::collection::vec(step(), 1..12),
    ) {
        let low = lowered(&ir(allowances));
        let mut task = low.session().expect("a session under the task");
        let mut alone = Session::new(policy()).expect("a session");
        // The policy alone runs the task event too (its scope only narrows).
        alone.step(&low.task_event()).expect("the task applies");
        // main reads the record first: its result is in the shared context.
        let read = call_event("r0", 1, "main", "db.read", json!({"key": "alice"}));
        let done = event(json!({"kind": "result", "call": "r0", "time": 2, "status": "succeeded", "output": "x"}));
        for e in [&read, &done] {
            task.step(e).expect("applies");
            alone.step(e).expect("applies");
        }
        let mut time = 3;
        for (i, s) in steps.iter().enumerate() {
            let (tool, param) = [("db.read", "key"), ("web.fetch", "url"), ("notes.write", "path")][s.tool];
            let id = format!("c{i}");
            let e = call_event(&id, time, s.agent, tool, json!({param: ARGS[s.arg]}));
            time += 1;
            let Event::Call(c) = &e else { unreachable!() };
            let c: &Call = c;
            let under_task = task.check(c).expect("checks").verdict;
            let under_policy = alone.check(c).expect("checks").verdict;
            prop_assert!(
                rank(under_task) <= rank(under_policy),
                "call {} {} {:?}: task {:?}, policy {:?}", s.agent, tool, ARGS[s.arg], under_task, under_policy
            );
            if under_task == Verdict::Allow && under_policy == Verdict::Allow {
                task.step(&e).expect("applies");
                alone.step(&e).expect("applies");
                if s.result {
                    let r = event(json!({"kind": "result", "call": id, "time": time, "status": "succeeded", "output": "x"}));
                    time += 1;
                    task.step(&r).expect("applies");
                    alone.step(&r).expect("applies");
                }
            }
        }
    }
}
