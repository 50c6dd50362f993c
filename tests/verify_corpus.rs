//! `agenra verify` on the seeded-defect corpus (`tests/verify-corpus`):
//! every `bad-*.agr` under a property's folder must be reported violated,
//! every `good-*.agr` must hold, and every witness must replay through the
//! monitor and show the violation. The example policies must hold.

use agenra_core::decision::StepOutput;
use agenra_core::event::Event;
use agenra_core::{Monitor, Policy, Verdict};
use agenra_smt::verify::{verify, Finding, Options, Outcome, Property};
use std::path::{Path, PathBuf};

fn load(path: &Path) -> Policy {
    let src = std::fs::read_to_string(path).unwrap();
    let stem = path.file_stem().unwrap().to_str().unwrap();
    agenra_policy::compile(&src, stem)
        .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.render(stem, &src)))
        .policy
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verify-corpus")
}

/// The final verdict of each call of a trace (an approval's verdict
/// replaces the PAUSE), in call order; the events go through a JSON Lines
/// round trip first, as a witness file would.
fn replay(policy: &Policy, events: &[Event]) -> Vec<(String, Verdict)> {
    replay_with(policy, events, true)
}

/// The verdict of each call, approvals ignored (`approvals == false`) or
/// replacing the PAUSE they answer.
fn replay_with(policy: &Policy, events: &[Event], approvals: bool) -> Vec<(String, Verdict)> {
    let text = agenra_smt::verify::concrete::to_jsonl(events);
    let mut m = Monitor::new(policy.clone()).unwrap();
    let mut out: Vec<(String, Verdict)> = Vec::new();
    for line in text.lines() {
        let e: Event = serde_json::from_str(line).unwrap();
        let o = m.step(&e).unwrap_or_else(|err| panic!("{line}: {err}"));
        if let StepOutput::Decision(d) = o {
            match &e {
                Event::Call(c) => out.push((c.id.clone(), d.verdict)),
                Event::Approve(r) if approvals => {
                    if let Some(x) = out.iter_mut().find(|(id, _)| *id == r.call) {
                        x.1 = d.verdict;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn last(v: &[(String, Verdict)]) -> Verdict {
    v.last().expect("a witness has a call").1
}

/// Checks that the witnesses of a violation show it when replayed.
fn check_witnesses(policy: &Policy, f: &Finding, file: &str) {
    assert!(
        !f.witnesses.is_empty() || f.property == Property::Consistency,
        "{file}: no witness"
    );
    let main = f.witnesses.iter().find(|w| w.role.is_empty());
    let role = |r: &str| {
        f.witnesses
            .iter()
            .find(|w| w.role == r)
            .map(|w| replay(policy, &w.events))
    };
    match f.property {
        Property::NonLeakage | Property::TrustPreservation => {
            let v = replay(policy, &main.unwrap().events);
            assert_eq!(
                last(&v),
                Verdict::Allow,
                "{file}: the leaking call is admitted"
            );
        }
        Property::QuotaSoundness => {
            let v = replay(policy, &main.unwrap().events);
            let name = f.detail[0].split('`').nth(1).unwrap();
            let g = policy.grants.iter().find(|g| g.name == name).unwrap();
            let agenra_core::policy::Quota::Limited(q) = g.quota else {
                panic!("{file}: unlimited")
            };
            let allowed = v.iter().filter(|(_, x)| *x == Verdict::Allow).count() as u64;
            assert!(allowed > q, "{file}: {allowed} ALLOWs, quota {q}");
            assert_eq!(last(&v), Verdict::Allow, "{file}");
        }
        Property::DelegationSafety => {
            // The calls' own verdicts: ALLOW against PAUSE is the point.
            let d = last(&replay_with(policy, &main.unwrap().events, false));
            let w = f.witnesses.iter().find(|w| w.role == "delegator");
            let p = last(&replay_with(
                policy,
                &w.expect("the delegator's trace").events,
                false,
            ));
            assert_ne!(d, Verdict::Deny, "{file}: the delegate is admitted");
            assert!(
                p == Verdict::Deny || (d == Verdict::Allow && p == Verdict::Pause),
                "{file}: delegator {p:?}"
            );
        }
        Property::TaintMonotonicity => {
            assert_eq!(
                last(&replay(policy, &main.unwrap().events)),
                Verdict::Deny,
                "{file}"
            );
            assert_ne!(
                last(&role("more-labels").expect("second run")),
                Verdict::Deny,
                "{file}"
            );
        }
        Property::PrivilegeEscalation => {
            assert_ne!(
                last(&replay(policy, &main.unwrap().events)),
                Verdict::Deny,
                "{file}"
            );
            assert_eq!(
                last(&role("without-discovery").expect("second trace")),
                Verdict::Deny,
                "{file}"
            );
        }
        Property::Consistency => {
            for w in &f.witnesses {
                replay(policy, &w.events);
            }
        }
    }
}

#[test]
fn every_seeded_defect_is_caught_and_every_correct_policy_holds() {
    let opts = Options::default();
    let mut checked = 0;
    for p in Property::ALL {
        let dir = corpus().join(p.name());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|x| x.extension().is_some_and(|e| e == "agr"))
            .collect();
        files.sort();
        let bad = files
            .iter()
            .filter(|f| f.file_name().unwrap().to_str().unwrap().starts_with("bad-"))
            .count();
        assert!(bad >= 3, "{}: at least three seeded defects", p.name());
        for file in files {
            let name = file.file_name().unwrap().to_str().unwrap().to_string();
            let policy = load(&file);
            let f = verify(&policy, &[p], &opts).remove(0);
            if name.starts_with("bad-") {
                assert_eq!(
                    f.result,
                    Outcome::Violated,
                    "{}/{name}: {:?}",
                    p.name(),
                    f.detail
                );
                check_witnesses(&policy, &f, &name);
            } else {
                assert_eq!(
                    f.result,
                    Outcome::Holds,
                    "{}/{name}: {:?}",
                    p.name(),
                    f.detail
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 40);
}

#[test]
fn the_example_policies_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    for ex in [
        "banking-agent",
        "coding-agent",
        "email-assistant",
        "research-agent",
        "rig-agent",
    ] {
        let policy = load(&root.join(ex).join("policy.agr"));
        for f in verify(&policy, &Property::ALL, &Options::default()) {
            assert_eq!(
                f.result,
                Outcome::Holds,
                "{ex}: {}: {:?}",
                f.property.name(),
                f.detail
            );
        }
    }
}
