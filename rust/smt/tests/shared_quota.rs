//! A quota shared by a tenant's sessions: the SMT authorizer keeps no pool,
//! so it answers `unsupported`; `verify` checks one session's traces in
//! which the pool may be empty at any step, and says so.

use agenra_smt::authorizer::{SmtError, SmtSession};
use agenra_smt::verify::{verify, Options, Outcome, Property};

const SRC: &str = "sinks net;\ntool pay(to: string) { sink net; }\ntool read(path: string);\n\
grant daily: pay quota 2 per tenant;\ngrant fallback: pay quota 1 approval;\ngrant reads: read quota unlimited;\n";

#[test]
fn the_authorizer_does_not_decide_shared_quotas() {
    let p = agenra_policy::compile(SRC, "p").unwrap().policy;
    match SmtSession::new(&p) {
        Err(SmtError::Unsupported(why)) => assert!(why.contains("`daily`"), "{why}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
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
