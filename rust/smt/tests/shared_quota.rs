//! A quota shared by a tenant's sessions (`quota N per tenant`): the SMT
//! authorizer reads what the tenant pool has left when it decides, as the
//! native monitor does, and takes and gives back units of the pool when
//! events are applied; without a pool its shared grants behave per
//! session. `verify` checks one session's traces in which the pool may be
//! empty at any step, and says so.

use agenra_core::decision::StepOutput;
use agenra_core::{CompiledPolicy, Event, SessionOptions, SharedCounts, TenantPool, Verdict};
use agenra_smt::authorizer::SmtSession;
use agenra_smt::verify::{verify, Options, Outcome, Property};

const SRC: &str = "sinks net;\ntool pay(to: string) { sink net; }\ntool read(path: string);\n\
grant daily: pay quota 2 per tenant;\ngrant fallback: pay quota 1 approval;\ngrant reads: read quota unlimited;\n";

fn event(j: serde_json::Value) -> Event {
    serde_json::from_value(j).expect("an event")
}

fn pay(id: &str, time: u64) -> Event {
    event(
        serde_json::json!({"kind": "call", "id": id, "time": time, "tool": "pay", "args": {"to": "x"}}),
    )
}

fn pool_with(daily: u64) -> TenantPool {
    let pool = TenantPool::new();
    let mut c = SharedCounts::default();
    c.set_taken("daily", daily);
    pool.replace(c);
    pool
}

/// `verdict grant` of the SMT decision of `e`, which is then applied.
fn smt_step(s: &mut SmtSession, e: &Event) -> String {
    let d = match e {
        Event::Call(c) => Some(s.decide(c).expect("decided")),
        Event::Approve(a) => Some(s.decide_approval(a).expect("decided")),
        _ => None,
    };
    s.apply(e).expect("applies");
    d.map_or("applied".into(), |d| {
        format!("{} {}", d.verdict.as_str(), d.rule_name)
    })
}

#[test]
fn the_authorizer_reads_the_tenant_pool_as_the_monitor_does() {
    let p = agenra_policy::compile(SRC, "p").unwrap().policy;
    // Another session of the tenant took one of the two daily payments.
    let (native_pool, smt_pool) = (pool_with(1), pool_with(1));
    let mut native = CompiledPolicy::new(p.clone())
        .unwrap()
        .session_with(SessionOptions::default().pool(native_pool.clone()));
    let mut smt = SmtSession::with_pool(&p, smt_pool.clone()).unwrap();
    assert!(smt.tenant_pool().is_some_and(|t| t.same_as(&smt_pool)));
    let events = [
        pay("c1", 1),
        pay("c2", 2),
        event(serde_json::json!({"kind": "result", "call": "c1", "status": "failed"})),
        pay("c3", 3),
        pay("c4", 4),
    ];
    let mut got = Vec::new();
    for e in &events {
        let want = match native.step(e).expect("applies") {
            StepOutput::Decision(d) => format!("{} {}", d.verdict.as_str(), d.rule.name(&p)),
            StepOutput::Applied(_) => "applied".into(),
        };
        let ours = smt_step(&mut smt, e);
        assert_eq!(ours, want, "{e:?}");
        assert_eq!(smt_pool.snapshot(), native_pool.snapshot(), "{e:?}");
        got.push(ours);
    }
    // One daily unit left: c1 takes it, c2 falls back to the approval
    // grant, c1's failure gives the unit back to the pool, c3 takes it,
    // and c4 finds both grants spent.
    assert_eq!(
        got,
        [
            "ALLOW daily",
            "PAUSE fallback",
            "applied",
            "ALLOW daily",
            "DENY no-grant"
        ]
    );
    assert_eq!(smt_pool.snapshot().taken("daily"), 2);
}

#[test]
fn a_second_session_of_the_tenant_finds_the_units_taken() {
    let p = agenra_policy::compile(SRC, "p").unwrap().policy;
    let pool = TenantPool::new();
    let mut a = SmtSession::with_pool(&p, pool.clone()).unwrap();
    let mut b = SmtSession::with_pool(&p, pool.clone()).unwrap();
    assert_eq!(smt_step(&mut a, &pay("a1", 1)), "ALLOW daily");
    // Units the other session takes after this one started count too.
    let d = b
        .decide(match &pay("b1", 1) {
            Event::Call(c) => c,
            _ => unreachable!(),
        })
        .unwrap();
    assert_eq!((d.verdict, d.rule_name.as_str()), (Verdict::Allow, "daily"));
    assert_eq!(smt_step(&mut a, &pay("a2", 2)), "ALLOW daily");
    assert_eq!(smt_step(&mut b, &pay("b1", 2)), "PAUSE fallback");
    assert_eq!(pool.snapshot().taken("daily"), 2);
    // Without a pool, shared grants behave per session.
    let mut private = SmtSession::new(&p).unwrap();
    assert!(private.tenant_pool().is_none());
    assert_eq!(smt_step(&mut private, &pay("p1", 1)), "ALLOW daily");
    assert_eq!(smt_step(&mut private, &pay("p2", 2)), "ALLOW daily");
    assert_eq!(smt_step(&mut private, &pay("p3", 3)), "PAUSE fallback");
    assert_eq!(pool.snapshot().taken("daily"), 2);
}

#[test]
fn verify_says_what_it_assumes_about_the_pool() {
    let p = agenra_policy::compile(SRC, "p").unwrap().policy;
    let findings = verify(
        &p,
        &[Property::QuotaSoundness, Property::NonLeakage],
        &Options::default(),
    );
    for f in &findings {
        assert_ne!(f.result, Outcome::Violated, "{f:?}");
        assert!(
            f.detail
                .iter()
                .any(|d| d.contains("grant `daily` shares its quota")),
            "{:?}",
            f.detail
        );
    }
}
