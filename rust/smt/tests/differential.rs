//! Differential tests: on random policies and traces (the generators of
//! `rust/core/tests/common.rs`), the SMT authorizer decides every call and
//! every approval (the paused call re-checked) as the native monitor does
//! (verdict, rule, grants taken), and every
//! counterexample path is a real path of the session graph that carries the
//! label from a node that adds it to the denied call. The policies have
//! provenance by value on or off (as generated) and some limited grants
//! shared by the tenant (`quota N per tenant`), with a tenant pool another
//! session has drawn from before the trace and draws from (and gives back
//! to) while it runs.
//!
//! 500 cases by default; `AGENRA_SMT_CASES=10000` for the long run.

#[path = "../../core/tests/common.rs"]
#[allow(unused_imports)]
mod common;

use agenra_core::decision::{Rule, StepOutput};
use agenra_core::label::Label;
use agenra_core::policy::{Policy, Quota};
use agenra_core::{CompiledPolicy, Event, Monitor, SessionOptions, TenantPool, Verdict};
use agenra_smt::graph::{EdgeTrust, NodeKind, SessionGraph};
use agenra_smt::step::Atom;
use agenra_smt::{SmtDecision, SmtSession};
use proptest::prelude::*;

fn cases(default: u32) -> u32 {
    std::env::var("AGENRA_SMT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A generated policy (every kind of rule; provenance by value on in
/// about half) whose limited grants are shared by the tenant (`quota N
/// per tenant`) where `mask` says so.
fn policy() -> impl Strategy<Value = Policy> {
    (
        common::full_policy(),
        proptest::collection::vec(prop::bool::weighted(0.4), 10),
    )
        .prop_map(|(mut p, mask)| {
            p.shared_grants = (0..p.grants.len())
                .filter(|&g| mask[g % mask.len()] && matches!(p.grants[g].quota, Quota::Limited(_)))
                .collect();
            p
        })
}

/// Another session of the tenant: the units of each shared grant it took
/// before the trace (`start[k]` of the `k`-th shared grant, at most its
/// quota), and what it does before each event (`moves[i]`: `(0..=4, _)`
/// nothing, `(5 | 6, k)` takes a unit of the `k`-th shared grant if the
/// pool has one left, `(7, k)` gives one it holds back).
#[derive(Clone, Debug, Default)]
struct Other {
    start: Vec<u64>,
    moves: Vec<(u8, usize)>,
}

fn other() -> impl Strategy<Value = Other> {
    (
        proptest::collection::vec(0u64..4, 4),
        proptest::collection::vec((0u8..8, 0usize..8), 0..12),
    )
        .prop_map(|(start, moves)| Other { start, moves })
}

/// The tenant pool as the other session leaves it, applied to both
/// engines' pools alike.
struct Tenant {
    native: TenantPool,
    smt: TenantPool,
    /// Per shared grant: the units the other session holds.
    held: Vec<u64>,
}

impl Tenant {
    fn new(policy: &Policy, other: &Other) -> Tenant {
        let mut t = Tenant {
            native: TenantPool::new(),
            smt: TenantPool::new(),
            held: vec![0; policy.shared_grants.len()],
        };
        for (k, &g) in policy.shared_grants.iter().enumerate() {
            let quota = match policy.grants[g].quota {
                Quota::Limited(q) => q,
                Quota::Unlimited => 0,
            };
            let n = other.start.get(k).copied().unwrap_or(0).min(quota);
            for _ in 0..n {
                t.change(policy, g, true);
            }
            t.held[k] = n;
        }
        t
    }

    /// Takes (or gives back) one unit of shared grant `g` in both pools.
    fn change(&self, policy: &Policy, g: usize, take: bool) {
        for pool in [&self.native, &self.smt] {
            pool.with_counts(|c| match take {
                true => c.take(&policy.grants[g].name),
                false => c.give_back(&policy.grants[g].name),
            });
        }
    }

    /// The other session's move before event `i`.
    fn step(&mut self, policy: &Policy, other: &Other, i: usize) {
        let Some(&(m, k)) = other.moves.get(i) else {
            return;
        };
        if policy.shared_grants.is_empty() || m < 5 {
            return;
        }
        let k = k % policy.shared_grants.len();
        let g = policy.shared_grants[k];
        let Quota::Limited(quota) = policy.grants[g].quota else {
            return;
        };
        if m == 7 && self.held[k] > 0 {
            self.change(policy, g, false);
            self.held[k] -= 1;
        } else if m < 7
            && self
                .native
                .snapshot()
                .remaining(&policy.grants[g].name, quota)
                > 0
        {
            self.change(policy, g, true);
            self.held[k] += 1;
        }
    }
}

/// Concrete labels of the graph's nodes, by propagation in plain Rust.
fn concrete_labels(policy: &Policy, g: &SessionGraph) -> Vec<Label> {
    let mut out: Vec<Label> = Vec::with_capacity(g.nodes.len());
    for (n, node) in g.nodes.iter().enumerate() {
        let input = g
            .preds(n)
            .fold(Label::BOTTOM, |acc, e| acc.join(&out[e.from]));
        let l = match node.kind {
            NodeKind::Task => Label::BOTTOM,
            NodeKind::Context => input,
            NodeKind::Call => {
                let through = match node.sanitizer.and_then(|s| policy.sanitizers.get(s)) {
                    Some(s) => s.apply(&input),
                    None => input,
                };
                through.join(&node.own)
            }
        };
        out.push(l);
    }
    out
}

fn atom_named(policy: &Policy, name: &str) -> Atom {
    agenra_smt::step::SymLabel::atom_list(policy)
        .into_iter()
        .find(|a| a.name(policy) == name)
        .expect("a known atom")
}

fn has(l: &Label, a: Atom) -> bool {
    match a {
        Atom::Sensitivity(s) => l.sensitivity >= s,
        Atom::Category(c) => l.categories.contains(c),
        Atom::Untrusted => !l.trusted,
    }
}

/// Every tainted path of `d` is a chain of data edges of the graph (after
/// the call was appended), each node carrying the atom, from a node that
/// adds it to the call.
fn check_paths(policy: &Policy, s: &SmtSession, d: &SmtDecision, call: &str) {
    let Some(cx) = &d.counterexample else { return };
    let g = s.graph();
    let labels = concrete_labels(policy, g);
    let index = |name: &str| {
        g.nodes
            .iter()
            .rposition(|n| n.name == name)
            .unwrap_or_else(|| panic!("path node {name} is in the graph"))
    };
    for tp in &cx.paths {
        let atom = atom_named(policy, &tp.label);
        let nodes: Vec<usize> = tp.path.iter().map(|st| index(&st.node)).collect();
        assert_eq!(
            g.nodes[*nodes.last().unwrap()].name,
            call,
            "the path ends at the call"
        );
        let first = nodes[0];
        assert!(
            has(&g.nodes[first].own, atom),
            "the path starts where {} is added: {tp:?}",
            tp.label
        );
        for w in nodes.windows(2) {
            assert!(
                g.edges
                    .iter()
                    .any(|e| e.from == w[0] && e.to == w[1] && e.trust != EdgeTrust::Inferred),
                "{} -> {} is a data edge",
                g.nodes[w[0]].name,
                g.nodes[w[1]].name
            );
        }
        for &n in &nodes[..nodes.len() - 1] {
            assert!(
                has(&labels[n], atom),
                "{} carries {}",
                g.nodes[n].name,
                tp.label
            );
        }
    }
}

/// An approval's counterexample path: it ends at the re-checked call,
/// starts at a node of the graph that adds the label, every node on it is
/// in the graph once the approval is applied (the context version made at
/// approval time included), and every hop but the last (into the call as
/// re-checked at approval time) is a data edge of the graph.
fn check_approval_paths(policy: &Policy, s: &SmtSession, d: &SmtDecision, call: &str) {
    let Some(cx) = &d.counterexample else { return };
    assert_eq!(cx.node, call, "the counterexample is the re-checked call's");
    let g = s.graph();
    let index = |name: &str| {
        g.nodes
            .iter()
            .rposition(|n| n.name == name)
            .unwrap_or_else(|| panic!("path node {name} is in the graph"))
    };
    for tp in &cx.paths {
        let atom = atom_named(policy, &tp.label);
        let (first, last) = (
            tp.path.first().expect("a path"),
            tp.path.last().expect("a path"),
        );
        assert_eq!(last.node, call, "the path ends at the call");
        let nodes: Vec<usize> = tp.path.iter().map(|st| index(&st.node)).collect();
        assert!(
            has(&g.nodes[nodes[0]].own, atom),
            "the path starts where {} is added: {tp:?} ({})",
            tp.label,
            first.node
        );
        for w in nodes[..nodes.len() - 1].windows(2) {
            assert!(
                g.edges
                    .iter()
                    .any(|e| e.from == w[0] && e.to == w[1] && e.trust != EdgeTrust::Inferred),
                "{} -> {} is a data edge",
                g.nodes[w[0]].name,
                g.nodes[w[1]].name
            );
        }
    }
}

/// What [`differential`] saw.
#[derive(Default, Debug, Clone, Copy)]
struct Seen {
    /// Calls decided by both engines.
    calls: usize,
    /// Approvals decided by both engines.
    approvals: usize,
    /// Approvals denied at the re-check: by a flow rule, a call rule, a
    /// path rule or count, an obligation.
    denied: [usize; 4],
}

/// Runs the trace through both engines, each with its tenant pool (the
/// same counts), while `other` draws on both pools alike; returns what
/// the SMT engine decided.
fn differential(policy: &Policy, events: &[Event], other: &Other) -> Seen {
    let mut tenant = Tenant::new(policy, other);
    let mut native = CompiledPolicy::new(policy.clone())
        .expect("a valid policy")
        .session_with(SessionOptions::default().pool(tenant.native.clone()));
    let mut smt = SmtSession::with_pool(policy, tenant.smt.clone()).expect("a valid policy");
    let mut seen = Seen::default();
    for (i, e) in events.iter().enumerate() {
        tenant.step(policy, other, i);
        let ours = match e {
            Event::Call(c) => Some(smt.decide(c)),
            Event::Approve(a) => Some(smt.decide_approval(a)),
            _ => None,
        };
        let theirs = native.step(e);
        match (ours, theirs) {
            (Some(Ok(d)), Ok(StepOutput::Decision(n))) => {
                match e {
                    Event::Approve(_) => seen.approvals += 1,
                    _ => seen.calls += 1,
                }
                if std::env::var("AGENRA_SMT_STATS").is_ok() {
                    eprintln!(
                        "STAT {:?} {} {}",
                        d.verdict,
                        d.rule_name,
                        d.counterexample.as_ref().map_or(0, |c| c.paths.len())
                    );
                }
                assert_eq!(
                    (d.verdict, d.rule_name.clone(), d.grants.clone()),
                    (n.verdict, n.rule.name(policy), n.grants.clone()),
                    "SMT and native decide {e:?} alike"
                );
                assert_eq!(d.refunded, n.refunded, "units given back by {e:?}");
                smt.apply(e).expect("the event applies");
                if d.verdict == Verdict::Deny {
                    match e {
                        Event::Call(c) => check_paths(policy, &smt, &d, &c.id),
                        Event::Approve(a) => {
                            check_approval_paths(policy, &smt, &d, &a.call);
                            let kind = match d.rule {
                                Rule::Flow(_) | Rule::Receive(_) => 0,
                                Rule::Call(_) => 1,
                                Rule::Path(_) => 2,
                                Rule::Obligation(_) => 3,
                                r => panic!("an approval denied by {r:?}"),
                            };
                            seen.denied[kind] += 1;
                        }
                        _ => {}
                    }
                }
            }
            (Some(Err(_)), Err(_)) | (None, Err(_)) => {
                assert!(smt.apply(e).is_err(), "both reject {e:?}");
            }
            (None, Ok(_)) => smt.apply(e).expect("the event applies"),
            (ours, theirs) => panic!("engines differ on {e:?}: {ours:?} vs {theirs:?}"),
        }
        assert_eq!(
            tenant.native.snapshot(),
            tenant.smt.snapshot(),
            "both pools after {e:?}"
        );
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(500), ..ProptestConfig::default() })]

    #[test]
    fn smt_and_native_decide_alike(
        (policy, steps, other) in policy().prop_flat_map(|p| {
            let agents = p.agents.len();
            (Just(p), common::steps(agents), other())
        })
    ) {
        let events = common::events(&policy, &steps);
        differential(&policy, &events, &other);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), ..ProptestConfig::default() })]

    /// The same with an object parameter on every tool, field tests in
    /// grants, call rules and flow rules, and calls passing well-formed and
    /// ill-typed objects (`docs/semantics.md`, "Objects").
    #[test]
    fn smt_and_native_decide_alike_with_objects(
        (policy, steps, shapes) in common::object_policy().prop_flat_map(|p| {
            let agents = p.agents.len();
            (Just(p), common::steps(agents), proptest::collection::vec(0u8..8, 1..6))
        })
    ) {
        let events = common::object_events(&policy, &steps, &shapes);
        differential(&policy, &events, &Other::default());
    }
}

/// `c` with each argument that has observed lineage also reading `extra`
/// (known ids of the session): the call's inputs only gain labels.
fn tainted(c: &agenra_core::Call, extra: &[String]) -> agenra_core::Call {
    let mut c2 = c.clone();
    for ids in c2.lineage.values_mut() {
        ids.extend(extra.iter().cloned());
    }
    c2
}

/// Taint monotonicity on both engines: whenever a call is denied, the
/// same call with more sources on its observed lineage is denied too.
/// Returns how many denied calls were extended.
fn monotone(policy: &Policy, events: &[Event], picks: &[usize]) -> usize {
    // Private pools on both sides (shared grants behave per session).
    let mut native = Monitor::new(policy.clone()).expect("a valid policy");
    let mut smt = SmtSession::new(policy).expect("a valid policy");
    let mut known: Vec<String> = Vec::new();
    let mut extended = 0;
    for (i, e) in events.iter().enumerate() {
        if let Event::Call(c) = e {
            let ours = smt.decide(c);
            let theirs = native.check(c);
            if let (Ok(d), Ok(n)) = (&ours, &theirs) {
                let has_lineage = c.lineage.values().any(|ids| !ids.is_empty());
                if d.verdict == Verdict::Deny
                    && n.verdict == Verdict::Deny
                    && has_lineage
                    && !known.is_empty()
                {
                    let extra: Vec<String> = picks
                        .iter()
                        .skip(i % picks.len().max(1))
                        .take(2)
                        .map(|&p| known[p % known.len()].clone())
                        .collect();
                    let c2 = tainted(c, &extra);
                    let d2 = smt
                        .decide(&c2)
                        .expect("the SMT engine decides the extension");
                    let n2 = native
                        .check(&c2)
                        .expect("the native engine decides the extension");
                    assert_eq!(
                        d2.verdict,
                        Verdict::Deny,
                        "SMT: tainting {c:?} with {extra:?} lifted the DENY ({})",
                        d.rule_name
                    );
                    assert_eq!(
                        n2.verdict,
                        Verdict::Deny,
                        "native: tainting {c:?} with {extra:?} lifted the DENY"
                    );
                    assert_eq!(
                        d2.rule_name,
                        n2.rule.name(policy),
                        "engines agree on the extension"
                    );
                    extended += 1;
                }
            }
        }
        let applied = native.step(e).is_ok();
        assert_eq!(smt.apply(e).is_ok(), applied, "both apply {e:?}");
        if applied {
            match e {
                Event::Call(c) => known.push(c.id.clone()),
                Event::Task(t) => known.push(t.id.clone()),
                _ => {}
            }
        }
    }
    extended
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(500), ..ProptestConfig::default() })]

    #[test]
    fn tainting_a_denied_call_keeps_it_denied(
        (policy, steps, picks) in policy().prop_flat_map(|p| {
            let agents = p.agents.len();
            (Just(p), common::steps(agents), proptest::collection::vec(0usize..64, 1..8))
        })
    ) {
        let events = common::events(&policy, &steps);
        let extended = monotone(&policy, &events, &picks);
        if std::env::var("AGENRA_SMT_STATS").is_ok() {
            eprintln!("EXTENDED {extended}");
        }
    }
}

/// A hand-built case: a secret read flows into a post through the
/// context; the counterexample path is read -> context -> post.
#[test]
fn a_secret_read_into_the_context_is_the_counterexample() {
    let mut p = Policy::empty("p");
    p.levels = vec!["public".into(), "secret".into()];
    p.sinks = vec!["net".into()];
    let t = |name: &str, params: &[&str]| agenra_core::policy::Tool {
        name: name.into(),
        params: params
            .iter()
            .map(|n| agenra_core::policy::Param {
                name: (*n).into(),
                ty: agenra_core::ParamType::Str,
                list: false,
                optional: false,
                fields: Vec::new(),
            })
            .collect(),
        resource: None,
        sinks: vec![],
        output: Label::BOTTOM,
        sanitizer: None,
        facts: vec![],
    };
    p.tools = vec![t("read", &[]), t("post", &["body"])];
    p.tools[0].output = Label::new(1, agenra_core::CategorySet::EMPTY, true);
    p.tools[1].sinks = vec![agenra_core::policy::SinkUse {
        sink: 0,
        params: None,
    }];
    for (i, _) in p.tools.clone().iter().enumerate() {
        p.grants.push(agenra_core::policy::Grant {
            name: format!("g{i}"),
            agent: 0,
            tool: i,
            resource: None,
            args: vec![],
            quota: agenra_core::policy::Quota::Unlimited,
            approval: false,
            expires_at: None,
            discovers: None,
        });
    }
    p.flow_rules = vec![agenra_core::policy::FlowRule {
        name: "no-secrets-out".into(),
        sink: 0,
        effect: agenra_core::policy::FlowEffect::Deny(agenra_core::LabelPattern {
            min_sensitivity: Some(1),
            ..agenra_core::LabelPattern::ANY
        }),
        when: agenra_core::NamedCond::TRUE,
    }];
    let ev = |j: serde_json::Value| -> Event { serde_json::from_value(j).expect("an event") };
    let events = [
        ev(
            serde_json::json!({"kind": "call", "id": "p0", "time": 1, "tool": "post", "args": {"body": "hi"}}),
        ),
        ev(serde_json::json!({"kind": "call", "id": "r1", "time": 2, "tool": "read", "args": {}})),
        ev(serde_json::json!({"kind": "result", "call": "r1", "status": "succeeded"})),
        ev(
            serde_json::json!({"kind": "call", "id": "p2", "time": 3, "tool": "post", "args": {"body": "x"}, "inferred": {"body": ["p0"]}}),
        ),
    ];
    let mut s = SmtSession::new(&p).expect("a valid policy");
    let mut verdicts = Vec::new();
    let mut last = None;
    for e in &events {
        if let Event::Call(c) = e {
            let d = s.decide(c).expect("decided");
            verdicts.push(format!("{} {}", d.verdict.as_str(), d.rule_name));
            last = Some(d);
        }
        s.apply(e).expect("applied");
    }
    assert_eq!(verdicts, ["ALLOW g1", "ALLOW g0", "DENY no-secrets-out"]);
    let d = last.expect("a decision");
    let cx = d.counterexample.clone().expect("a counterexample");
    assert_eq!(cx.sink.as_deref(), Some("sink net"));
    assert_eq!(cx.paths.len(), 1);
    assert_eq!(cx.paths[0].label, "sensitivity>=secret");
    let names: Vec<&str> = cx.paths[0].path.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(names, ["r1", "context@1", "p2"]);
    // The inferred edge from p0 is reported, never used.
    assert_eq!(d.inferred, ["p0 -> body"]);
    check_paths(&p, &s, &d, "p2");
}

/// History counterexamples: the admitted calls that moved the rule, from
/// the last reset on; obligations name the last `since` call.
#[test]
fn history_counterexamples_list_the_calls_that_matched() {
    let policy = agenra_policy::compile(
        r#"
        facts tested;
        tool read(p: string);
        tool note(p: string);
        tool post(p: string);
        tool edit(p: string);
        tool test(p: string) { fact tested; }
        tool deploy(p: string);
        grant r: read quota unlimited;
        grant n: note quota unlimited;
        grant po: post quota unlimited;
        grant e: edit quota unlimited;
        grant t: test quota unlimited;
        grant d: deploy quota unlimited;
        deny path read_then_post: call read -> call post reset on call note;
        obligation tested_deploy: require tested since edit before deploy;
        "#,
        "history",
    )
    .expect("the policy compiles")
    .policy;
    let call = |id: &str, time: u64, tool: &str| -> Event {
        serde_json::from_value(serde_json::json!({
            "kind": "call", "id": id, "time": time, "tool": tool, "args": {"p": "x"}
        }))
        .expect("an event")
    };
    let result = |id: &str| -> Event {
        serde_json::from_value(
            serde_json::json!({"kind": "result", "call": id, "status": "succeeded"}),
        )
        .expect("an event")
    };
    let events = [
        call("r1", 1, "read"),
        call("n1", 2, "note"),
        call("r2", 3, "read"),
        call("p1", 4, "post"),
        call("e1", 5, "edit"),
        call("t1", 6, "test"),
        result("t1"),
        call("e2", 7, "edit"),
        call("d1", 8, "deploy"),
    ];
    let mut native = Monitor::new(policy.clone()).expect("valid");
    let mut s = SmtSession::new(&policy).expect("a valid policy");
    let mut denials = Vec::new();
    for e in &events {
        if let Event::Call(c) = e {
            let d = s.decide(c).expect("decided");
            if d.verdict == Verdict::Deny {
                denials.push((
                    d.rule_name.clone(),
                    d.counterexample.expect("a counterexample").history,
                ));
            }
        }
        native.step(e).expect("applies");
        s.apply(e).expect("applies");
    }
    assert_eq!(
        denials,
        [
            (
                "read_then_post".to_string(),
                vec!["r2".to_string(), "p1".into()]
            ),
            (
                "tested_deploy".to_string(),
                vec!["e2".to_string(), "d1".into()]
            ),
        ]
    );
}

/// `events` with approvals (and some rejections) added: the `j`-th call
/// is approved `plan[j]` events after it (`0`: never; `> 8`: rejected
/// `plan[j] - 8` events after it instead), so the calls and results in
/// between run after its pause and before its approval.
fn with_approvals(events: Vec<Event>, plan: &[u8]) -> Vec<Event> {
    let mut due: Vec<(usize, Event)> = Vec::new();
    let mut calls = 0;
    for (i, e) in events.iter().enumerate() {
        if let Event::Call(c) = e {
            let resolve = agenra_core::event::Resolve {
                session: None,
                call: c.id.clone(),
                time: None,
            };
            match plan[calls % plan.len()] {
                0 => {}
                d @ 1..=8 => due.push((i + d as usize, Event::Approve(resolve))),
                d => due.push((i + (d - 8) as usize, Event::Reject(resolve))),
            }
            calls += 1;
        }
    }
    let mut out = Vec::new();
    for (i, e) in events.into_iter().enumerate() {
        out.push(e);
        out.extend(
            due.iter()
                .filter(|(at, _)| *at == i)
                .map(|(_, e)| e.clone()),
        );
    }
    let last = out.len();
    out.extend(
        due.into_iter()
            .filter(|(at, _)| *at >= last)
            .map(|(_, e)| e),
    );
    out
}

/// A generated policy where about half the grants require approval.
fn approval_policy() -> impl Strategy<Value = Policy> {
    (policy(), proptest::collection::vec(any::<bool>(), 16)).prop_map(|(mut p, flags)| {
        for (g, grant) in p.grants.iter_mut().enumerate() {
            grant.approval |= flags[g % flags.len()];
        }
        p
    })
}

/// Approvals are re-authorizations: on policies with approval grants and
/// pause rules, and traces where calls, results and rejections run between
/// a pause and its approval, the SMT engine decides every approval as the
/// native monitor does (verdict, rule, grants). A fixed seed, so the
/// count asserted below is the same on every run. (Re-check denials are
/// rare on random policies: [`approvals_re_check_every_kind_of_rule_alike`]
/// makes them common.)
#[test]
fn smt_and_native_decide_approvals_alike() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let cases = cases(400);
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = approval_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (
            Just(p),
            common::steps(agents),
            proptest::collection::vec(0u8..11, 1..16),
            other(),
        )
    });
    let mut total = Seen::default();
    for _ in 0..cases {
        let (policy, steps, plan, other) = strategy
            .new_tree(&mut runner)
            .expect("a generated case")
            .current();
        let events = with_approvals(common::events(&policy, &steps), &plan);
        let seen = std::panic::catch_unwind(|| differential(&policy, &events, &other))
            .unwrap_or_else(|e| {
                eprintln!(
                    "policy: {}",
                    serde_json::to_string(&policy).unwrap_or_default()
                );
                eprintln!(
                    "events: {}",
                    serde_json::to_string(&events).unwrap_or_default()
                );
                std::panic::resume_unwind(e)
            });
        total.calls += seen.calls;
        total.approvals += seen.approvals;
        for k in 0..4 {
            total.denied[k] += seen.denied[k];
        }
    }
    eprintln!("approvals: {total:?}");
    if cases >= 400 {
        assert!(total.approvals >= 250, "approvals decided: {total:?}");
    }
}

/// A policy whose every kind of rule can turn an approval into a DENY:
/// tools with the generated parameters, `t1` and `t2` pausing for approval
/// on small `n`, a flow the context can raise, a call rule on the
/// discovered set, a path rule, a count and an obligation other admitted
/// calls can move, and a pause flow the approval answers.
const RECHECK: &str = r#"
    levels public < internal < secret;
    categories a, b;
    sinks net, mail;
    sets found;
    facts ok;
    resource prefix "/secret" label <secret, {b}, trusted>;
    tool t0(target: string, n: int, to: list<string>, amount?: decimal) {
        resource target; output <internal, {a}, trusted>; fact ok;
    }
    tool t1(target: string, n: int, to: list<string>, amount?: decimal) {
        resource target; sink mail;
    }
    tool t2(target: string, n: int, to: list<string>, amount?: decimal) {
        resource target; sink net on to;
    }
    grant g0: t0 quota unlimited discovers found;
    grant g1: t1 where n <= 2 quota 3 approval;
    grant g1b: t1 quota unlimited;
    grant g2: t2 where n <= 1 quota 4 approval;
    grant g2b: t2 quota unlimited;
    deny flow secret_mail: sensitivity >= secret -> mail;
    pause flow a_to_mail: category a -> mail;
    pause flow a_to_net: category a -> net;
    deny call found_target: t1 when any to in found;
    deny path big_read_then_t2: call t0 where n > 3 -> call t2 reset on call t1;
    deny count two_t1: at most 2 call t1 reset on call t0 where n == 0;
    obligation ok_fresh: require ok since t2 before t1;
"#;

/// `steps` with calls mostly of `t1` (the tool the re-checks judge: half
/// the calls, `t0` 30%, `t2` 20%) and fewer reads of the secret resource,
/// so paused calls often live long enough for a rule to start firing.
fn skewed(mut steps: Vec<common::Step>, skew: &[u8]) -> Vec<common::Step> {
    for (k, s) in steps.iter_mut().enumerate() {
        if let common::Step::Call { tool, target, .. } = s {
            let r = skew[k % skew.len()];
            *tool = match r {
                0..=4 => 1,
                5..=7 => 0,
                _ => 2,
            };
            if *target == common::TARGETS.len() - 1 && !r.is_multiple_of(3) {
                *target = r as usize % 3;
            }
        }
    }
    steps
}

/// Random traces on [`RECHECK`], with approvals added: every approval is
/// decided alike by both engines, and re-checks deny by every kind of
/// rule. A fixed seed, so the counts asserted are the same on every run.
#[test]
fn approvals_re_check_every_kind_of_rule_alike() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let policy = agenra_policy::compile(RECHECK, "recheck")
        .expect("the policy compiles")
        .policy;
    let cases = cases(600);
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = (
        common::steps(1),
        proptest::collection::vec(0u8..11, 1..16),
        proptest::collection::vec(0u8..10, 1..16),
    );
    let mut total = Seen::default();
    for _ in 0..cases {
        let (steps, plan, skew) = strategy
            .new_tree(&mut runner)
            .expect("a generated case")
            .current();
        // A first read whose result establishes `ok`, so `t1` starts out
        // allowed by the obligation.
        let mut events: Vec<Event> = [
            serde_json::json!({"kind": "call", "id": "w", "time": 0, "tool": "t0",
                "args": {"target": "/a/1", "n": 1, "to": []}}),
            serde_json::json!({"kind": "result", "call": "w", "status": "succeeded"}),
        ]
        .into_iter()
        .map(|j| serde_json::from_value(j).expect("an event"))
        .collect();
        events.extend(common::events(&policy, &skewed(steps, &skew)));
        let events = with_approvals(events, &plan);
        let seen = std::panic::catch_unwind(|| differential(&policy, &events, &Other::default()))
            .unwrap_or_else(|e| {
                eprintln!(
                    "events: {}",
                    serde_json::to_string(&events).unwrap_or_default()
                );
                std::panic::resume_unwind(e)
            });
        total.calls += seen.calls;
        total.approvals += seen.approvals;
        for k in 0..4 {
            total.denied[k] += seen.denied[k];
        }
    }
    eprintln!("re-checks: {total:?}");
    if cases >= 600 {
        assert!(total.approvals >= 500, "approvals decided: {total:?}");
        // On the fixed seed: flows 10, call rules 2, path rules and
        // counts 84, obligations 37 among 928 approvals.
        assert!(
            total.denied.iter().all(|&n| n >= 1) && total.denied.iter().sum::<usize>() >= 50,
            "re-check denials of every kind: {total:?}"
        );
    }
}
