//! Agreement of `verify` with the monitor: on random small policies, every
//! trace of at most K calls over the policy's alphabet that exhaustive
//! enumeration (replayed through the monitor) shows violating a property
//! is also found by `verify`. Covered: non-leakage, trust preservation,
//! quota soundness, delegation safety (the last call replayed by the
//! delegator) and taint monotonicity (each denied trace replayed again with
//! one earlier call carrying the context in every argument);
//! docs/verification.md says why privilege escalation and consistency are
//! not. Few cases by default; set `AGENRA_VERIFY_CASES` for more.

use agenra_core::label::Label;
use agenra_core::policy::{FlowEffect, Policy, Quota};
use agenra_core::value::Cond;
use agenra_core::Verdict;
use agenra_smt::verify::alphabet::{alphabet, Letter};
use agenra_smt::verify::concrete::{replay, CStep, Replayed};
use agenra_smt::verify::{verify, Options, Outcome, Property};
use proptest::prelude::*;

const K: usize = 3;

#[derive(Clone, Debug)]
struct Spec {
    secret_source: bool,
    untrusted_source: bool,
    bound_to: bool,
    sanitizer: bool,
    deny_untrusted: bool,
    deny_secret: bool,
    allow: Option<(bool, bool)>,
    q_read: u8,
    q_narrow: Option<u8>,
    q_send: u8,
    /// A delegate `helper` of `main`, and which rule names an agent: 0 an
    /// allow rule for the helper only, 1 a pause for `main` only, 2 a deny
    /// for `main` only, 3 a pause for the helper only (harmless).
    delegate: Option<u8>,
    /// A tool `mid` and `deny path q: call src -> call send reset on
    /// reads(untrusted)`.
    reset: bool,
}

fn source(s: &Spec) -> String {
    let mut t = String::from("levels public < secret;\ncategories c;\nsinks net;\n");
    if s.sanitizer {
        t.push_str("sanitizer scrub removes {c} max public trusts;\ntool clean(text: string) {\n  sanitizer scrub;\n}\ngrant cl: clean quota unlimited;\n");
    }
    t.push_str(&format!(
        "tool src(x: string) {{\n  output <{}, {{c}}, {}>;\n}}\n",
        if s.secret_source { "secret" } else { "public" },
        if s.untrusted_source {
            "untrusted"
        } else {
            "trusted"
        }
    ));
    t.push_str(&format!(
        "tool send(to: string, body: string) {{\n  sink net{};\n}}\n",
        if s.bound_to { " on to" } else { "" }
    ));
    t.push_str(&format!("grant rd: src quota {};\n", s.q_read));
    if let Some(q) = s.q_narrow {
        t.push_str(&format!(
            "grant narrow: send where to == \"a\" quota {q};\n"
        ));
    }
    t.push_str(&format!("grant snd: send quota {};\n", s.q_send));
    if s.reset {
        t.push_str("tool mid(x: string);\ngrant md: mid quota 2;\n");
        t.push_str("deny path q: call src -> call send reset on reads(untrusted);\n");
    }
    if let Some(d) = s.delegate {
        t.push_str("agent helper from main;\ngrant h_rd: src quota 1 agent helper;\ngrant h_snd: send quota 1 agent helper;\n");
        t.push_str(match d {
            0 => "allow flow a2: up to <secret, {c}, untrusted> -> net when agent == helper;\n",
            1 => "pause call pm: send when agent == main;\n",
            2 => "deny call dm: send when agent == main and to == \"a\";\n",
            _ => "pause call ph: send when agent == helper;\n",
        });
    }
    if s.deny_untrusted {
        t.push_str("deny flow d1: untrusted -> net;\n");
    }
    if s.deny_secret {
        t.push_str("deny flow d2: sensitivity >= secret -> net;\n");
    }
    if let Some((untrusted, when)) = s.allow {
        t.push_str(&format!(
            "allow flow a1: up to <secret, {{c}}, {}> -> net{};\n",
            if untrusted { "untrusted" } else { "trusted" },
            if when { " when to == \"a\"" } else { "" }
        ));
    }
    t
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        proptest::option::of((any::<bool>(), any::<bool>())),
        (1u8..3, proptest::option::of(1u8..3), 1u8..4),
        (proptest::option::of(0u8..4), any::<bool>()),
    )
        .prop_map(
            |((a, b, c, d, e, f), allow, (q_read, q_narrow, q_send), (delegate, reset))| Spec {
                secret_source: a,
                untrusted_source: b,
                bound_to: c,
                sanitizer: d,
                deny_untrusted: e,
                deny_secret: f,
                allow,
                q_read,
                q_narrow,
                q_send,
                delegate,
                reset,
            },
        )
}

fn holds(p: &Policy, l: &Letter, c: &agenra_core::NamedCond) -> bool {
    let t = &p.tools[l.tool];
    c.resolve(&|n| t.param_index(n)).eval(&l.args, l.agent, &[])
}

/// The properties the replayed trace violates at its last call
/// (docs/verification.md, computed on the monitor's verdicts).
fn violations(p: &Policy, steps: &[CStep], r: &Replayed) -> Vec<Property> {
    let mut out = Vec::new();
    let j = steps.len() - 1;
    let (l, seen) = (&steps[j].letter, &r.steps[j]);
    let tool = &p.tools[l.tool];
    if seen.admitted {
        for (u, use_) in tool.sinks.iter().enumerate() {
            let rules: Vec<_> = p
                .flow_rules
                .iter()
                .filter(|x| x.sink == use_.sink)
                .collect();
            let trusted_only = rules.iter().any(|x| {
                x.when == Cond::TRUE
                    && matches!(x.effect, FlowEffect::Deny(pt) if pt.untrusted && pt.min_sensitivity.unwrap_or(0) == 0 && pt.any_category.is_empty())
            });
            if trusted_only && !seen.sinks[u].trusted {
                out.push(Property::TrustPreservation);
            }
            let raw = Label {
                trusted: true,
                ..seen.raw_full
            };
            let exempt = rules.iter().any(|x| match x.effect {
                FlowEffect::Allow(c) => holds(p, l, &x.when) && seen.sinks[u].flows_to(&c),
                _ => false,
            });
            let leak = rules.iter().any(|x| match x.effect {
                FlowEffect::Deny(pt) => {
                    !pt.untrusted
                        && (pt.min_sensitivity.unwrap_or(0) > 0 || !pt.any_category.is_empty())
                        && holds(p, l, &x.when)
                        && pt.matches(&raw)
                }
                _ => false,
            });
            if leak && !exempt {
                out.push(Property::NonLeakage);
            }
        }
    }
    // Quota: a grant answers for the calls it is the first of its agent to match.
    for (g, grant) in p.grants.iter().enumerate() {
        let Quota::Limited(q) = grant.quota else {
            continue;
        };
        let covers = |l: &Letter| {
            let m = |h: &agenra_core::policy::Grant| {
                agenra_core::spec::grant_matches(p, h, h.agent, &l.request(), &[])
            };
            p.chain_iter(l.agent).any(|x| x == grant.agent)
                && m(grant)
                && !p.grants[..g].iter().any(|h| h.agent == grant.agent && m(h))
        };
        let n = steps
            .iter()
            .zip(&r.steps)
            .filter(|(s, x)| x.verdict == agenra_core::Verdict::Allow && covers(&s.letter))
            .count() as u64;
        if n > q && r.steps[j].verdict == agenra_core::Verdict::Allow && covers(l) {
            out.push(Property::QuotaSoundness);
        }
    }
    // Delegation: the same trace, the last call made by the delegator.
    if let Some(parent) = p.agents[l.agent].parent {
        if seen.verdict != Verdict::Deny {
            let mut alt = steps.to_vec();
            alt[j].letter = alt[j].letter.as_agent(parent);
            if let Ok(pr) = replay(p, &alt) {
                let pv = pr.steps[j].verdict;
                if pv == Verdict::Deny || (seen.verdict == Verdict::Allow && pv == Verdict::Pause) {
                    out.push(Property::DelegationSafety);
                }
            }
        }
    }
    // Taint monotonicity: a denied last call, and the same trace with one
    // earlier call carrying the context in every argument.
    if seen.verdict == Verdict::Deny {
        for (i, st) in steps.iter().enumerate().take(j) {
            if st.lineage.iter().all(|x| x.is_none()) {
                continue;
            }
            let mut more = steps.to_vec();
            more[i].lineage = vec![None; more[i].lineage.len()];
            let Ok(rb) = replay(p, &more) else { continue };
            let below = r
                .steps
                .iter()
                .zip(&rb.steps)
                .all(|(x, y)| x.args.iter().zip(&y.args).all(|(u, v)| u.flows_to(v)));
            let agree = (0..j).all(|x| {
                r.steps[x].verdict == rb.steps[x].verdict
                    && r.steps[x].admitted == rb.steps[x].admitted
            });
            if below && agree && rb.steps[j].verdict != Verdict::Deny {
                out.push(Property::TaintMonotonicity);
                break;
            }
        }
    }
    out
}

/// Every trace of 1..=K calls over the letters (each argument without
/// observed lineage or with lineage `[]`; approvals approved, results
/// succeeded): the properties some violates.
fn enumerate(p: &Policy, letters: &[Letter]) -> Vec<Property> {
    let mut found = Vec::new();
    let mut seq: Vec<(usize, u32)> = Vec::new();
    fn rec(p: &Policy, letters: &[Letter], seq: &mut Vec<(usize, u32)>, found: &mut Vec<Property>) {
        if !seq.is_empty() {
            let steps: Vec<CStep> = seq
                .iter()
                .map(|&(i, mask)| CStep {
                    letter: letters[i].clone(),
                    lineage: (0..p.tools[letters[i].tool].params.len())
                        .map(|a| (mask & (1 << a) != 0).then(Vec::new))
                        .collect(),
                    approve: true,
                    succeed: true,
                })
                .collect();
            if steps
                .windows(2)
                .all(|w| w[0].letter.time <= w[1].letter.time)
            {
                if let Ok(r) = replay(p, &steps) {
                    for v in violations(p, &steps, &r) {
                        if std::env::var_os("AGENRA_VERIFY_LOG").is_some() && !found.contains(&v) {
                            let calls: Vec<String> = steps
                                .iter()
                                .zip(&r.steps)
                                .map(|(s, x)| {
                                    format!(
                                        "{} {} {:?} {:?} {:?}",
                                        p.agents[s.letter.agent].name,
                                        p.tools[s.letter.tool].name,
                                        s.letter.args,
                                        x.verdict,
                                        x.grants
                                    )
                                })
                                .collect();
                            eprintln!("{v:?}: {calls:?}");
                            eprintln!("{}", agenra_smt::verify::concrete::to_jsonl(&r.events));
                        }
                        if !found.contains(&v) {
                            found.push(v);
                        }
                    }
                }
            }
        }
        if seq.len() == K {
            return;
        }
        for i in 0..letters.len() {
            for mask in 0..(1u32 << p.tools[letters[i].tool].params.len()) {
                seq.push((i, mask));
                rec(p, letters, seq, found);
                seq.pop();
            }
        }
    }
    rec(p, letters, &mut seq, &mut found);
    found
}

fn cases() -> u32 {
    std::env::var("AGENRA_VERIFY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn verify_finds_every_violation_enumeration_finds(s in spec()) {
        let src = source(&s);
        let p = agenra_policy::compile(&src, "random").map_err(|e| TestCaseError::fail(e.render("random", &src)))?.policy;
        let letters = alphabet(&p).unwrap().letters;
        let found = enumerate(&p, &letters);
        if std::env::var_os("AGENRA_VERIFY_LOG").is_some() {
            eprintln!("{} letters, enumeration finds {:?}", letters.len(), found);
        }
        let props = [
            Property::NonLeakage,
            Property::TrustPreservation,
            Property::DelegationSafety,
            Property::TaintMonotonicity,
            Property::QuotaSoundness,
        ];
        let opts = Options { bound: K, timeout_ms: 20_000 };
        for f in verify(&p, &props, &opts) {
            if found.contains(&f.property) {
                prop_assert_eq!(f.result, Outcome::Violated, "{}: {}\n{:?}", f.property.name(), src, f.detail);
            } else {
                prop_assert_ne!(f.result, Outcome::Unknown, "{}: {:?}", f.property.name(), f.detail);
            }
        }
    }
}
