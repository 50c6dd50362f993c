//! The embedding API against the event API: `check` predicts `authorize`
//! and changes nothing, `check_all` agrees with the decision, and a typed
//! call gets the decision of the same call as JSON.

mod common;
mod fixtures;

use agenra_core::decision::Reason;
use agenra_core::decision::{StepOutput, Verdict};
use agenra_core::policy::Policy;
use agenra_core::{
    Call, CompiledPolicy, Event, PathError, Session, SessionOptions, TypedCall, Value,
};
use common::*;
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What a session holds that later decisions can read, compared by value.
fn fingerprint(s: &Session) -> String {
    let st = s.state();
    format!(
        "{:?}|{:?}|{:?}|{}|{}|{}",
        st.graph,
        st.ledger.to_ledger(),
        st.sets,
        st.seq,
        st.time,
        st.ledger_hash()
    )
}

/// The typed form of a JSON call, when it has one (known tool, agent and
/// parameters; arguments that are JSON scalars or arrays of them).
fn typed(policy: &CompiledPolicy, c: &Call) -> Option<TypedCall> {
    let tool = policy.tool(&c.tool).ok()?;
    let mut t = TypedCall::new(tool, c.id.clone(), c.time);
    if let Some(a) = &c.agent {
        t = t.agent(policy.agent(a).ok()?);
    }
    for (name, v) in &c.args {
        let value = match v {
            serde_json::Value::Array(items) => Value::List(
                items
                    .iter()
                    .map(Value::from_json)
                    .collect::<Option<Vec<_>>>()?,
            ),
            other => Value::from_json(other)?,
        };
        t = t.arg(policy.param(tool, name).ok()?, value);
    }
    for (name, ids) in &c.lineage {
        t = t.lineage(policy.param(tool, name).ok()?, ids.iter().cloned());
    }
    if !c.inferred.is_empty() {
        return None;
    }
    Some(t)
}

fn strategy() -> impl Strategy<Value = (Policy, Vec<Step>)> {
    full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(300)))]

    /// `check` returns the decision `authorize` then gives (the same
    /// verdict, rule, reason, path and grants), leaves the session exactly
    /// as it was, and a session that checks before every call decides the
    /// whole trace as one that never checks.
    #[test]
    fn check_predicts_authorize_and_records_nothing((policy, steps) in strategy()) {
        let events = events(&policy, &steps);
        let mut plain = Session::new(policy.clone()).expect("valid policy");
        let mut checked = plain.new_session();
        for e in &events {
            if let Event::Call(c) = e {
                let before = fingerprint(&checked);
                let predicted = checked.check(c);
                prop_assert_eq!(&fingerprint(&checked), &before, "check changed the session on {:?}", c);
                let stops = checked.check_all(c);
                prop_assert_eq!(&fingerprint(&checked), &before, "check_all changed the session on {:?}", c);
                let got = checked.authorize(c);
                match (&predicted, &got, &stops) {
                    (Ok(p), Ok(d), Ok(stops)) => {
                        // `check` builds its path before the rollback;
                        // `authorize`'s is built here, when read.
                        let path = checked.path(d).expect("the node is there");
                        prop_assert_eq!(checked.path(p), Ok(path.clone()));
                        prop_assert_eq!(p.path.nodes(), Some(path.as_slice()));
                        prop_assert_eq!(
                            (p.verdict, p.rule, &p.reason, &p.grants, p.node),
                            (d.verdict, d.rule, &d.reason, &d.grants, d.node)
                        );
                        let first = |v: Verdict| stops.iter().find(|s| s.verdict == v);
                        match d.verdict {
                            Verdict::Allow => prop_assert!(stops.is_empty(), "{:?}", stops),
                            Verdict::Deny => {
                                let s = first(Verdict::Deny).expect("a deny");
                                prop_assert_eq!((s.rule, &s.reason, &s.path), (d.rule, &d.reason, &path));
                            }
                            Verdict::Pause => {
                                prop_assert!(first(Verdict::Deny).is_none());
                                let s = first(Verdict::Pause).expect("a pause");
                                prop_assert_eq!((s.rule, &s.reason), (d.rule, &d.reason));
                            }
                        }
                    }
                    (Err(a), Err(b), Err(c)) => {
                        prop_assert_eq!(a, b);
                        prop_assert_eq!(a, c);
                    }
                    other => prop_assert!(false, "check and authorize disagree: {:?}", other),
                }
            }
            let want = plain.step(e);
            let got = checked.step(e);
            if let (Ok(StepOutput::Decision(w)), Ok(StepOutput::Decision(g))) = (&want, &got) {
                prop_assert_eq!(w, g);
            } else if !matches!(e, Event::Call(_)) {
                prop_assert_eq!(want, got);
            }
            prop_assert_eq!(fingerprint(&plain), fingerprint(&checked));
        }
    }

    /// A call built from handles gets the decision of the same call sent as
    /// JSON, and leaves the session in the same state.
    #[test]
    fn typed_calls_decide_as_json_calls((policy, steps) in strategy()) {
        let events = events(&policy, &steps);
        let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
        let mut json = compiled.session();
        let mut typed_session = compiled.session();
        for e in &events {
            match e {
                Event::Call(c) => {
                    let Some(t) = typed(&compiled, c) else { continue };
                    let want = json.authorize(c);
                    let got = if c.id.len() % 2 == 0 {
                        typed_session.authorize(&t)
                    } else {
                        typed_session.authorize(t)
                    };
                    prop_assert_eq!(want, got, "on {:?}", c);
                }
                other => {
                    prop_assert_eq!(json.step(other), typed_session.step(other));
                }
            }
            prop_assert_eq!(fingerprint(&json), fingerprint(&typed_session));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(300)))]

    /// A compact session decides as a full one (verdict, rule, reason,
    /// grants, node ids; paths may stop where the graph was forgotten), and
    /// keeps the same ledger and sets, until a call names a forgotten call
    /// in its lineage: that call is denied as unknown lineage (fail closed).
    /// Every node is either kept or handed to the audit sink, once.
    #[test]
    fn compact_sessions_decide_as_full_sessions((policy, steps) in strategy(), window in 1usize..10) {
        let events = events(&policy, &steps);
        let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
        let released = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&released);
        let mut flows = Vec::new();
        let mut full = compiled.session();
        let mut compact = compiled.session_with(SessionOptions::compact(window).audit(move |f| {
            if !f.kept {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }));
        for e in &events {
            let want = full.step(e);
            let got = compact.step(e);
            match (&want, &got) {
                (Ok(StepOutput::Decision(w)), Ok(StepOutput::Decision(g))) => {
                    if matches!(g.reason, Reason::UnknownLineage { .. }) && w.reason != g.reason {
                        // Lineage into the forgotten part: the sessions part here.
                        prop_assert_eq!(g.verdict, Verdict::Deny);
                        break;
                    }
                    prop_assert_eq!(
                        (w.verdict, w.rule, &w.reason, &w.grants, w.node, &w.refunded),
                        (g.verdict, g.rule, &g.reason, &g.grants, g.node, &g.refunded),
                        "on {:?}", e
                    );
                    // Read right after the decision, a compact session's
                    // path resolves: it ends at the call, like the full one.
                    let (wp, gp) = (full.path(w), compact.path(g));
                    prop_assert!(gp.is_ok(), "{:?}", gp);
                    prop_assert_eq!(wp.is_ok_and(|p| p.is_empty()), gp.is_ok_and(|p| p.is_empty()));
                    if let (Ok(wp), Ok(gp)) = (full.path(w), compact.path(g)) {
                        if w.path.nodes().is_none() {
                            prop_assert_eq!(wp.last(), Some(&w.node));
                            prop_assert_eq!(gp.last(), Some(&g.node));
                            flows.push(g.clone());
                        }
                    }
                }
                (Ok(StepOutput::Applied(w)), Ok(StepOutput::Applied(g))) => {
                    prop_assert_eq!((w.node, w.rule, &w.refunded), (g.node, g.rule, &g.refunded));
                }
                // A result or an approval for a forgotten (finished) call:
                // an error either way.
                (Err(_), Err(_)) => {}
                other => prop_assert!(false, "full and compact differ on {:?}: {:?}", e, other),
            }
            prop_assert_eq!(&full.state().ledger, &compact.state().ledger);
            prop_assert_eq!(&full.state().sets, &compact.state().sets);
            let graph = &compact.state().graph;
            prop_assert!(graph.nodes.len() < 2 * window.max(1) + 1);
            prop_assert_eq!(
                released.load(Ordering::Relaxed) + graph.nodes.len() + graph.pinned.len(),
                graph.len()
            );
        }
        // Read at the end, a flow's path resolves while its node is kept,
        // and is a typed error (never a panic) once the node is forgotten.
        let graph = &compact.state().graph;
        for d in &flows {
            match compact.path(d) {
                Ok(p) => prop_assert_eq!(p.last(), Some(&d.node)),
                Err(e) => {
                    prop_assert_eq!(e, PathError::Forgotten { node: d.node });
                    prop_assert!(graph.node(d.node).is_none());
                }
            }
        }
    }
}

/// A handle from another policy is an error, not a decision.
#[test]
fn handles_of_another_policy_are_refused() {
    let mut a = Policy::empty("a");
    a.tools.push(agenra_core::policy::Tool {
        resource: Some(0),
        ..fixtures::tool(
            "fs.read",
            fixtures::params(&["path"]),
            agenra_core::Label::BOTTOM,
        )
    });
    let mut b = a.clone();
    b.name = "b".into();
    let (a, b) = (
        CompiledPolicy::new(a).expect("valid"),
        CompiledPolicy::new(b).expect("valid"),
    );
    let read_b = b.tool("fs.read").expect("tool");
    let mut session = a.session();
    let err = session
        .authorize(TypedCall::new(read_b, "c1", 1))
        .expect_err("foreign tool");
    assert_eq!(
        err.to_string(),
        "call `c1` uses a tool handle of another policy or tool"
    );
    let read_a = a.tool("fs.read").expect("tool");
    let path_b = b.param(read_b, "path").expect("param");
    let err = session
        .authorize(TypedCall::new(read_a, "c1", 1).arg(path_b, "x"))
        .expect_err("foreign parameter");
    assert!(err.to_string().contains("parameter handle"), "{err}");
    assert_eq!(session.state().seq, 0, "errors leave the session unchanged");
    assert_eq!(session.state().call_status("c1"), None);
    session
        .authorize(
            TypedCall::new(read_a, "c2", 1).arg(a.param(read_a, "path").expect("param"), "x"),
        )
        .expect("decided");
    assert_eq!(
        session.state().call_status("c2"),
        Some(agenra_core::graph::Status::Denied)
    );
    assert!(a.param(read_a, "nope").is_err());
    assert_eq!(
        a.tool("nope").expect_err("unknown").to_string(),
        "the policy has no tool `nope`"
    );
}

/// A compact session hands every node to the audit sink with its edges, a
/// kept one (a call still running) too, and again when it is released.
#[test]
fn compact_sessions_audit_kept_nodes_and_their_edges() {
    use std::sync::Mutex;
    let mut p = Policy::empty("audit");
    p.tools.push(fixtures::tool(
        "ping",
        fixtures::params(&["x"]),
        agenra_core::Label::BOTTOM,
    ));
    p.grants.push(fixtures::grant(0));
    let compiled = CompiledPolicy::new(p).expect("valid policy");
    let ping = compiled.tool("ping").expect("tool");
    let x = compiled.param(ping, "x").expect("param");
    type Record = (Option<String>, u32, usize, bool);
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let sink = Arc::clone(&log);
    let mut s = compiled.session_with(SessionOptions::compact(2).audit(move |f| {
        sink.lock().expect("lock").push((
            f.call.map(str::to_string),
            f.node.0,
            f.edges.len(),
            f.kept,
        ))
    }));
    let report = |s: &mut Session, id: &str| {
        s.report(&agenra_core::Report {
            session: None,
            call: id.into(),
            time: None,
            status: agenra_core::event::Outcome::Succeeded,
            output: serde_json::Value::Null,
            discovered: vec![],
        })
        .expect("reported");
    };
    // c0 stays running while c1..c5 come and go.
    for i in 0..6 {
        let id = format!("c{i}");
        let d = s
            .authorize(TypedCall::new(ping, id.clone(), i).arg(x, "v"))
            .expect("decided");
        assert_eq!(d.verdict, Verdict::Allow);
        if i > 0 {
            report(&mut s, &id);
        }
    }
    let kept: Vec<Record> = log
        .lock()
        .expect("lock")
        .iter()
        .filter(|r| r.3 && r.0.is_some())
        .cloned()
        .collect();
    assert_eq!(kept.len(), 1, "{:?}", log.lock().expect("lock"));
    assert_eq!(kept[0].0.as_deref(), Some("c0"));
    assert!(
        kept[0].2 >= 1,
        "c0's edge from the context reaches the sink"
    );
    // Released once it finishes, then reported again without edges.
    report(&mut s, "c0");
    for i in 6..12 {
        let id = format!("c{i}");
        s.authorize(TypedCall::new(ping, id.clone(), i).arg(x, "v"))
            .expect("decided");
        report(&mut s, &id);
    }
    let log = log.lock().expect("lock");
    let released: Vec<&Record> = log
        .iter()
        .filter(|r| r.0.as_deref() == Some("c0") && !r.3)
        .collect();
    assert_eq!(released.len(), 1, "{log:?}");
    assert_eq!(released[0].2, 0);
    assert_eq!(s.state().call_status("c0"), None, "forgotten for good");
}

/// What a call's node records: an edge from the context only when an
/// argument with a value has no lineage, a control edge from the previous
/// call, the node's kind, and the typed call's id.
#[test]
fn call_nodes_record_their_context_edge_control_edge_and_kind() {
    use agenra_core::graph::{EdgeKind, NodeId, NodeKind};
    let mut p = Policy::empty("edges");
    p.tools.push(fixtures::tool(
        "ping",
        vec![fixtures::param("x"), fixtures::optional("y")],
        agenra_core::Label::BOTTOM,
    ));
    p.grants.push(fixtures::grant(0));
    let compiled = CompiledPolicy::new(p).expect("valid policy");
    let ping = compiled.tool("ping").expect("tool");
    let (x, y) = (
        compiled.param(ping, "x").expect("x"),
        compiled.param(ping, "y").expect("y"),
    );
    let call = TypedCall::new(ping, "c0", 1)
        .arg(x, "v")
        .lineage(x, Vec::<String>::new());
    assert_eq!(call.id(), "c0");
    let mut s = compiled.session();
    let calls = [
        // x has (empty) lineage, y is absent: nothing reads the context.
        (call, false),
        // x has no lineage: it reads the context.
        (TypedCall::new(ping, "c1", 2).arg(x, "v"), true),
        // y has a value and no lineage.
        (
            TypedCall::new(ping, "c2", 3)
                .arg(x, "v")
                .lineage(x, Vec::<String>::new())
                .arg(y, "w"),
            true,
        ),
    ];
    for (call, reads) in calls {
        let d = s.authorize(call).expect("decided");
        let graph = &s.state().graph;
        assert_eq!(
            graph.data_preds(d.node).contains(&NodeId(0)),
            reads,
            "node {:?}",
            d.node
        );
        assert_eq!(graph.node(d.node).map(|n| n.kind), Some(NodeKind::Tool));
    }
    let graph = &s.state().graph;
    let control: Vec<(u32, u32)> = graph
        .edges
        .iter()
        .filter(|e| e.kind == EdgeKind::Control)
        .map(|e| (e.from.0, e.to.0))
        .collect();
    assert_eq!(control, [(1, 2), (2, 3)]);
    // A typed value of the wrong type is named in the reason.
    let d = s
        .authorize(TypedCall::new(ping, "c3", 4).arg(x, 5).arg(y, vec!["a"]))
        .expect("decided");
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(
        d.reason,
        Reason::IllTyped {
            param: "x".into(),
            expected: "string".into(),
            got: "int".into()
        }
    );
    let d = s
        .authorize(TypedCall::new(ping, "c4", 5).arg(x, "v").arg(y, vec!["a"]))
        .expect("decided");
    assert!(
        matches!(&d.reason, Reason::IllTyped { got, .. } if got == "list"),
        "{:?}",
        d.reason
    );
}
