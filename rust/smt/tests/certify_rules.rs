//! The rule side of `agenra certify` (`agenra_smt::rules`): revisions that
//! change flow rules, call rules, counts and obligations.
//!
//! * the corpus (tests/certify-corpus) with the rule checker: every
//!   preserving revision certified, no non-preserving one, every
//!   certificate re-checked (and rejected without the rule checker when it
//!   has a rule side), every lost workflow replayed;
//! * named cases: which rule is reported when a revision is not certified;
//! * a property test: on random small policy pairs that differ in their
//!   rules (and sometimes a quota), `certified` ⇒ an exhaustive enumeration
//!   of concrete workflows through both monitors finds no lost workflow;
//!   `not-preserved` ⇒ the workflow replays; a certificate whose rule side
//!   is changed in one entry fails `check-cert`.

use agenra_certify::check::CheckError;
use agenra_certify::{
    certify_with, check_certificate, check_certificate_with, replay, structure, RuleOracle, Verdict,
};
use agenra_core::event::{Call, Event, Outcome, Report, Resolve};
use agenra_core::{Monitor, Policy, StepOutput, Verdict as V};
use agenra_smt::rules::RuleChecker;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

const ORACLE: Option<&dyn RuleOracle> = Some(&RuleChecker);

fn compile(src: &str) -> Policy {
    match agenra_policy::compile(src, "p") {
        Ok(c) => c.policy,
        Err(e) => panic!("{}", e.render("test", src)),
    }
}

#[test]
fn the_corpus_is_judged_as_labelled_with_the_rule_checker() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/certify-corpus");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground-truth.json")).unwrap())
            .unwrap();
    let load = |f: &str| compile(&std::fs::read_to_string(dir.join(f)).unwrap());
    let mut rule_revisions = (0, 0);
    for e in truth.as_array().unwrap() {
        let id = e["id"].as_str().unwrap();
        let (old, new) = (
            load(e["old"].as_str().unwrap()),
            load(e["new"].as_str().unwrap()),
        );
        let rules_differ = !structure::split_differences(&old, &new).0.is_empty();
        let report = certify_with(&old, &new, ORACLE);
        if let Some(cert) = &report.certificate {
            assert!(
                check_certificate_with(&old, &new, cert, ORACLE).is_ok(),
                "{id}"
            );
            assert_eq!(cert.rules.is_some(), rules_differ, "{id}");
            if rules_differ {
                // Without the rule checker, a rule side cannot be re-checked.
                assert!(
                    matches!(
                        check_certificate(&old, &new, cert),
                        Err(CheckError::Rules(_))
                    ),
                    "{id}"
                );
            }
        }
        if let Some(w) = &report.lost_workflow {
            assert!(replay::confirm(&old, &new, w).is_ok(), "{id}");
        }
        if e["preserving"] == true {
            assert_eq!(
                report.verdict,
                Verdict::Certified,
                "{id}: {:?}",
                report.reasons
            );
        } else {
            assert_ne!(report.verdict, Verdict::Certified, "{id}");
        }
        if rules_differ {
            if e["preserving"] == true {
                rule_revisions.0 += 1;
            } else {
                rule_revisions.1 += 1;
            }
        }
    }
    // Rule changes of both kinds are in the corpus.
    assert!(
        rule_revisions.0 >= 8 && rule_revisions.1 >= 8,
        "{rule_revisions:?}"
    );
}

const BASE: &str = r#"
levels public < secret;
sinks out;
tool src() { output <secret, {}, untrusted>; }
tool t(r: string, n: int) { resource r; sink out; }
grant gs: src quota unlimited;
"#;

fn reasons(old: &str, new: &str) -> (Verdict, Vec<String>) {
    let (o, n) = (compile(old), compile(new));
    let r = certify_with(&o, &n, ORACLE);
    (r.verdict, r.reasons)
}

#[test]
fn a_removed_deny_flow_rule_is_certified_when_nothing_is_paused() {
    let old = format!("{BASE}grant g: t quota 2;\ndeny flow f: untrusted -> out;\n");
    let new = format!("{BASE}grant g: t quota 2;\n");
    let (o, n) = (compile(&old), compile(&new));
    let r = certify_with(&o, &n, ORACLE);
    assert_eq!(r.verdict, Verdict::Certified, "{:?}", r.reasons);
    assert!(r.method.as_deref().unwrap().contains("rules: SMT"));
    let cert = r.certificate.unwrap();
    assert!(cert.rules.as_ref().unwrap().parts[0].contains("`f` only in OLD"));
    assert!(check_certificate_with(&o, &n, &cert, ORACLE).is_ok());
    // The reverse adds the rule: a call after reading `src` is lost, and
    // the replay confirms it.
    let back = certify_with(&n, &o, ORACLE);
    assert_eq!(back.verdict, Verdict::NotPreserved, "{:?}", back.reasons);
    assert_eq!(back.confirmed_by_replay, Some(true));
}

#[test]
fn a_count_added_above_the_quota_loses_a_workflow_of_failing_calls() {
    // Quota 2, count 7: only calls whose failures refund their units reach
    // the count, so the lost workflow is eight calls, the first seven
    // failing; the repeat probe must go past the count (more than its
    // minimum of six calls), and with failures, not successes.
    let old = format!("{BASE}grant g: t quota 2;\n");
    let new = format!("{BASE}grant g: t quota 2;\ndeny count c: at most 7 call t;\n");
    let (o, n) = (compile(&old), compile(&new));
    let r = certify_with(&o, &n, ORACLE);
    assert_eq!(r.verdict, Verdict::NotPreserved, "{:?}", r.reasons);
    assert_eq!(r.confirmed_by_replay, Some(true));
    let w = r.lost_workflow.unwrap();
    assert!(replay::confirm(&o, &n, &w).is_ok());
    let calls = w.iter().filter(|e| matches!(e, Event::Call(_))).count();
    assert_eq!(calls, 8, "{w:?}");
    assert!(w.iter().all(|e| match e {
        Event::Result(r) => r.status == Outcome::Failed,
        _ => true,
    }));
}

#[test]
fn a_removed_deny_rule_on_a_paused_tool_is_not_certified_and_says_why() {
    // The grant needs approval: an approval OLD's re-check denies (the
    // context turned untrusted meanwhile) refunds in OLD only. The rule
    // probe builds that workflow: pause, taint, approve (OLD denies, NEW
    // admits), then approved calls until NEW's quota runs out first.
    let old = format!("{BASE}grant g: t quota 2 approval;\ndeny flow f: untrusted -> out;\n");
    let new = format!("{BASE}grant g: t quota 2 approval;\n");
    let (o, n) = (compile(&old), compile(&new));
    let r = certify_with(&o, &n, ORACLE);
    assert_eq!(r.verdict, Verdict::NotPreserved, "{:?}", r.reasons);
    assert!(
        r.reasons
            .iter()
            .any(|w| w.contains("flow rule `f`") && w.contains("approval")),
        "{:?}",
        r.reasons
    );
    let w = r.lost_workflow.unwrap();
    assert!(replay::confirm(&o, &n, &w).is_ok());
    // The trigger is paused, then tainted, then approved: OLD denies the
    // approval and NEW admits it.
    let mut mo = Monitor::new(o.clone()).unwrap();
    let mut mn = Monitor::new(n.clone()).unwrap();
    let approval = w
        .iter()
        .position(|e| matches!(e, Event::Approve(r) if r.call == "trigger"))
        .expect("the trigger is approved");
    for e in &w[..approval] {
        mo.step(e).unwrap();
        mn.step(e).unwrap();
    }
    let verdict = |out: StepOutput| match out {
        StepOutput::Decision(d) => d.verdict,
        other => panic!("{other:?}"),
    };
    assert_eq!(verdict(mo.step(&w[approval]).unwrap()), V::Deny);
    assert_eq!(verdict(mn.step(&w[approval]).unwrap()), V::Allow);
}

#[test]
fn a_narrowed_pause_rule_loses_the_units_an_old_rejection_returns() {
    // OLD pauses every call after the untrusted read; NEW only large
    // ones. A small call OLD pauses runs at once in NEW; OLD's human
    // rejects it, so OLD gets its unit back and NEW does not: the third
    // clean call (explicit empty lineage) is lost.
    let old = format!("{BASE}grant g: t quota 2;\npause flow f: untrusted -> out;\n");
    let new = format!("{BASE}grant g: t quota 2;\npause flow f: untrusted -> out when n > 3;\n");
    let (o, n) = (compile(&old), compile(&new));
    let r = certify_with(&o, &n, ORACLE);
    assert_eq!(r.verdict, Verdict::NotPreserved, "{:?}", r.reasons);
    let w = r.lost_workflow.unwrap();
    assert!(replay::confirm(&o, &n, &w).is_ok());
    assert!(
        w.iter()
            .any(|e| matches!(e, Event::Reject(r) if r.call == "trigger")),
        "{w:?}"
    );
}

#[test]
fn a_dropped_pause_rule_names_the_rule() {
    let old = format!("{BASE}grant g: t quota 2;\npause flow f: untrusted -> out;\n");
    let new = format!("{BASE}grant g: t quota 2;\n");
    let (v, why) = reasons(&old, &new);
    assert_ne!(v, Verdict::Certified);
    assert!(
        why.iter()
            .any(|w| w.contains("flow rule `f`") && w.contains("OLD pauses")),
        "{why:?}"
    );
}

#[test]
fn counts_raised_are_certified_and_lowered_are_lost() {
    let at =
        |k: u8| format!("{BASE}grant g: t quota unlimited;\ndeny count k: at most {k} call t;\n");
    let (a2, a3) = (compile(&at(2)), compile(&at(3)));
    let up = certify_with(&a2, &a3, ORACLE);
    assert_eq!(up.verdict, Verdict::Certified, "{:?}", up.reasons);
    let down = certify_with(&a3, &a2, ORACLE);
    assert_eq!(down.verdict, Verdict::NotPreserved, "{:?}", down.reasons);
    assert_eq!(down.confirmed_by_replay, Some(true));
    assert_eq!(down.lost_workflow.as_ref().unwrap().len(), 5);
}

#[test]
fn a_new_deny_call_rule_outside_every_grant_is_certified() {
    let old = format!("{BASE}grant g: t where n <= 5 quota 2;\n");
    let new = format!("{BASE}grant g: t where n <= 5 quota 2;\ndeny call big: t when n > 5;\n");
    let (v, why) = reasons(&old, &new);
    assert_eq!(v, Verdict::Certified, "{why:?}");
    let new = format!("{BASE}grant g: t where n <= 5 quota 2;\ndeny call big: t when n > 4;\n");
    let (v, why) = reasons(&old, &new);
    assert_eq!(v, Verdict::NotPreserved, "{why:?}");
}

#[test]
fn a_weaker_obligation_is_certified_and_a_stronger_one_is_not() {
    let src = |since: &str| {
        format!(
            "facts ok;\ntool check() {{ fact ok; }}\ntool w(x: string);\ntool c(m: string);\ngrant gk: check quota 3;\ngrant gw: w quota 3;\ngrant gc: c quota 3;\nobligation o: require ok{since} before c;\n"
        )
    };
    let (strong, weak) = (compile(&src(" since w")), compile(&src("")));
    let r = certify_with(&strong, &weak, ORACLE);
    assert_eq!(r.verdict, Verdict::Certified, "{:?}", r.reasons);
    let r = certify_with(&weak, &strong, ORACLE);
    assert_ne!(r.verdict, Verdict::Certified);
}

#[test]
fn a_certificate_whose_rule_side_is_changed_fails() {
    let old = format!("{BASE}grant g: t quota 2;\ndeny flow f: untrusted -> out;\n");
    let new = format!("{BASE}grant g: t quota 2;\n");
    let (o, n) = (compile(&old), compile(&new));
    let cert = certify_with(&o, &n, ORACLE).certificate.unwrap();
    let side = cert.rules.clone().unwrap();
    let mut changed = Vec::new();
    let mut c = cert.clone();
    c.rules.as_mut().unwrap().queries += 1;
    changed.push(c);
    let mut c = cert.clone();
    c.rules.as_mut().unwrap().classes += 1;
    changed.push(c);
    let mut c = cert.clone();
    c.rules.as_mut().unwrap().parts.push("x".into());
    changed.push(c);
    let mut c = cert.clone();
    c.rules.as_mut().unwrap().method.push('x');
    changed.push(c);
    let mut c = cert.clone();
    c.rules = None;
    changed.push(c);
    for c in &changed {
        assert!(check_certificate_with(&o, &n, c, ORACLE).is_err(), "{c:?}");
    }
    // A rule side on a revision whose rules are identical fails too.
    let mut same = cert;
    same.new_hash = same.old_hash.clone();
    assert!(check_certificate_with(&o, &o, &same, ORACLE).is_err());
    assert!(!side.parts.is_empty());
}

// ---- Property test: random rule changes against exhaustive enumeration.

#[derive(Clone, Debug)]
struct Rules {
    flow: u8,
    call: u8,
    count: u8,
}

fn rules() -> impl Strategy<Value = Rules> {
    (0u8..5, 0u8..4, 0u8..5).prop_map(|(flow, call, count)| Rules { flow, call, count })
}

fn source(r: &Rules, quota: u8, approval: bool) -> String {
    let mut s = String::from(BASE);
    s.push_str(&format!(
        "grant g0: t on \"a\" quota {quota}{};\ngrant g1: t quota 1;\n",
        if approval { " approval" } else { "" }
    ));
    match r.flow {
        1 => s.push_str("deny flow f: untrusted -> out;\n"),
        2 => s.push_str("pause flow f: untrusted -> out;\n"),
        3 => s.push_str("deny flow f: untrusted -> out when n > 0;\n"),
        4 => s.push_str("deny flow f: sensitivity >= secret -> out;\n"),
        _ => {}
    }
    match r.call {
        1 => s.push_str("deny call c: t when n > 0;\n"),
        2 => s.push_str("pause call c: t when r == \"b\";\n"),
        3 => s.push_str("deny call c: t when r == \"b\" and n > 0;\n"),
        _ => {}
    }
    match r.count {
        1 => s.push_str("deny count k: at most 1 call t;\n"),
        2 => s.push_str("deny count k: at most 2 call t;\n"),
        3 => s.push_str("pause count k: at most 1 call t;\n"),
        4 => s.push_str("deny count k: at most 1 call t reset on call src;\n"),
        _ => {}
    }
    s
}

fn next_events(depth: usize, live: &[(String, bool)]) -> Vec<Event> {
    let call = |tool: &str, args: serde_json::Map<String, serde_json::Value>| {
        Event::Call(Call {
            session: None,
            id: format!("c{depth}"),
            time: 0,
            agent: None,
            tool: tool.into(),
            args,
            lineage: BTreeMap::new(),
            inferred: BTreeMap::new(),
        })
    };
    let mut out = vec![call("src", serde_json::Map::new())];
    for r in ["a", "b"] {
        for n in [0, 1] {
            let mut args = serde_json::Map::new();
            args.insert("r".into(), r.into());
            args.insert("n".into(), n.into());
            out.push(call("t", args));
        }
    }
    for (id, paused) in live {
        let resolve = Resolve {
            session: None,
            call: id.clone(),
            time: None,
        };
        if *paused {
            out.push(Event::Approve(resolve.clone()));
            out.push(Event::Reject(resolve));
        } else {
            for status in [Outcome::Succeeded, Outcome::Failed] {
                out.push(Event::Result(Report {
                    session: None,
                    call: id.clone(),
                    time: None,
                    status,
                    output: serde_json::Value::Null,
                    discovered: vec![],
                }));
            }
        }
    }
    out
}

fn verdict(o: &StepOutput) -> Option<V> {
    match o {
        StepOutput::Decision(d) => Some(d.verdict),
        StepOutput::Applied(_) => None,
    }
}

/// Depth-first search for a workflow OLD admits and NEW loses (as in
/// `rust/certify/tests/exhaustive.rs`): an OLD ALLOW must be a NEW ALLOW,
/// an OLD PAUSE a NEW PAUSE or ALLOW; an approval or rejection of a call
/// NEW already runs is a no-op for NEW; an approval OLD's re-check denies
/// may be answered anything by NEW, and the search goes on from both
/// states (so a unit OLD refunded and NEW spent is found missing later).
fn lost(
    old: &Monitor,
    new: &Monitor,
    live: Vec<(String, bool)>,
    new_only: Vec<String>,
    depth: usize,
    bound: usize,
) -> bool {
    if depth == bound {
        return false;
    }
    for e in next_events(depth, &live) {
        let (o, old2) = old.step_pure(&e);
        let Ok(o) = o else { continue };
        let ov = verdict(&o);
        if ov == Some(V::Deny) && matches!(e, Event::Call(_)) {
            continue;
        }
        let call = match &e {
            Event::Call(c) => c.id.clone(),
            Event::Approve(r) | Event::Reject(r) => r.call.clone(),
            Event::Result(r) => r.call.clone(),
            Event::Task(_) => continue,
        };
        let mut live2: Vec<(String, bool)> =
            live.iter().filter(|(id, _)| *id != call).cloned().collect();
        let skip_new =
            matches!(e, Event::Approve(_) | Event::Reject(_)) && new_only.contains(&call);
        let mut new_only2 = new_only.clone();
        let new2 = if skip_new {
            new.clone()
        } else {
            let (n, new2) = new.step_pure(&e);
            let Ok(n) = n else { return true };
            let nv = verdict(&n);
            // An approval OLD's re-check denies: whatever NEW answers, the
            // workflow goes on (DESIGN §4: only a NEW DENY, or a NEW PAUSE
            // where OLD ALLOWed, loses it). If NEW runs the call that OLD
            // refunded, the search below finds any later event OLD admits
            // and NEW refuses because of it (docs/certify.md).
            let recheck_denied = matches!(e, Event::Approve(_)) && ov == Some(V::Deny);
            if !recheck_denied
                && (nv == Some(V::Deny) || (ov == Some(V::Allow) && nv == Some(V::Pause)))
            {
                return true;
            }
            if ov == Some(V::Pause) && nv == Some(V::Allow) {
                new_only2.push(call.clone());
            }
            new2
        };
        match &e {
            Event::Call(_) => live2.push((call, ov == Some(V::Pause))),
            Event::Approve(_) if ov == Some(V::Allow) => live2.push((call, false)),
            _ => {}
        }
        if lost(&old2, &new2, live2, new_only2, depth + 1, bound) {
            return true;
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn certified_rule_changes_lose_no_workflow(
        a in rules(),
        b in rules(),
        quota in 1u8..3,
        raise in prop::bool::weighted(0.2),
        approval in any::<bool>(),
        mutate in 0u8..4,
    ) {
        // Three pairs in four change one kind of rule of OLD, so that
        // certified revisions are frequent.
        let b = match mutate {
            0 => Rules { flow: b.flow, ..a.clone() },
            1 => Rules { call: b.call, ..a.clone() },
            2 => Rules { count: b.count, ..a.clone() },
            _ => b,
        };
        let old_src = source(&a, quota, approval);
        let new_src = source(&b, quota + u8::from(raise), approval);
        let (old, new) = (compile(&old_src), compile(&new_src));
        let report = certify_with(&old, &new, ORACLE);
        if std::env::var("CERTIFY_STATS").is_ok() {
            eprintln!("STAT {:?} {:?}", report.verdict, report.reasons.first());
        }
        match report.verdict {
            Verdict::Certified => {
                let found = lost(&Monitor::new(old.clone()).unwrap(), &Monitor::new(new.clone()).unwrap(), vec![], vec![], 0, 5);
                prop_assert!(!found, "certified, yet a workflow is lost:\n{old_src}\n{new_src}");
                let cert = report.certificate.as_ref().unwrap();
                prop_assert!(check_certificate_with(&old, &new, cert, ORACLE).is_ok());
            }
            Verdict::NotPreserved => {
                let w = report.lost_workflow.as_ref().unwrap();
                prop_assert!(replay::confirm(&old, &new, w).is_ok());
            }
            Verdict::Unknown => {}
        }
    }
}
