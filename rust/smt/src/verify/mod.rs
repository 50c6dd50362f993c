//! `agenra verify`: bounded checks of one policy, Zelkova style (DESIGN
//! §4): each property is a Z3 query whose models are violations, over `K`
//! steps of the shared one-step encoding ([`crate::step`]) instantiated
//! with symbolic state ([`run`]). A model becomes a concrete trace
//! ([`concrete`]) that is replayed through the real monitor; a violation
//! is reported only when the replay reproduces it. `docs/verification.md`
//! gives the exact meaning of each property.

pub mod alphabet;
pub mod concrete;
pub mod diff;
mod props;
pub mod run;
mod taint;

use agenra_core::event::Event;
use agenra_core::Policy;
use serde::Serialize;

/// The seven properties of DESIGN §4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Property {
    /// No confidential data reaches a sink whose deny rules forbid it,
    /// whatever argument carries it and whatever sanitizer it went through.
    NonLeakage,
    /// No untrusted data reaches a trusted-only sink.
    TrustPreservation,
    /// No authority comes from untrusted data (a discovered set filled by an
    /// untrusted result).
    PrivilegeEscalation,
    /// A delegate is never admitted where its delegator would be denied.
    DelegationSafety,
    /// Adding labels never turns a DENY into an ALLOW or PAUSE.
    TaintMonotonicity,
    /// A limited grant never covers more ALLOWed calls than its quota.
    QuotaSoundness,
    /// No dead or shadowed rule, no obligation that can never be met.
    Consistency,
}

impl Property {
    /// Every property, in DESIGN §4's order.
    pub const ALL: [Property; 7] = [
        Property::NonLeakage,
        Property::TrustPreservation,
        Property::PrivilegeEscalation,
        Property::DelegationSafety,
        Property::TaintMonotonicity,
        Property::QuotaSoundness,
        Property::Consistency,
    ];

    /// The property's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Property::NonLeakage => "non-leakage",
            Property::TrustPreservation => "trust-preservation",
            Property::PrivilegeEscalation => "privilege-escalation",
            Property::DelegationSafety => "delegation-safety",
            Property::TaintMonotonicity => "taint-monotonicity",
            Property::QuotaSoundness => "quota-soundness",
            Property::Consistency => "consistency",
        }
    }

    /// The property called `name`.
    pub fn parse(name: &str) -> Option<Property> {
        Property::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// The answer for one property.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// No violation within the bound.
    Holds,
    /// A violation, with a witness the monitor reproduces.
    Violated,
    /// A timeout, or a construct the encoding does not model (named).
    Unknown,
}

impl Outcome {
    /// `holds`, `violated`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::Violated => "violated",
            Outcome::Unknown => "unknown",
        }
    }
}

/// A concrete trace that shows a violation (or its other half).
#[derive(Clone, Debug, Serialize)]
pub struct Witness {
    /// Suffix of the file name (`""` for the main trace, `delegator` for
    /// the companion of delegation safety, `more-labels` for taint
    /// monotonicity, `without-discovery` for privilege escalation).
    pub role: String,
    /// The events (docs/events.md).
    pub events: Vec<Event>,
    /// What replaying the trace shows.
    pub shows: String,
}

/// The report of one property.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// The property.
    pub property: Property,
    /// Holds, violated or unknown.
    pub result: Outcome,
    /// Wall-clock seconds (encoding and solving).
    pub seconds: f64,
    /// What was violated (rule, grant, sink), or why unknown, or notes.
    pub detail: Vec<String>,
    /// Witness traces (for a violation that has one).
    pub witnesses: Vec<Witness>,
}

/// Options of a run.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The number of calls in a bounded trace (`K`).
    pub bound: usize,
    /// Per Z3 query (milliseconds).
    pub timeout_ms: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bound: 5,
            timeout_ms: 10_000,
        }
    }
}

/// Checks `props` of `policy` (a validated policy) within `opts.bound`.
pub fn verify(policy: &Policy, props: &[Property], opts: &Options) -> Vec<Finding> {
    let ctx = props::Ctx::new(policy, opts);
    props
        .iter()
        .map(|&p| {
            let start = std::time::Instant::now();
            let (result, detail, witnesses) = ctx.check(p);
            Finding {
                property: p,
                result,
                seconds: start.elapsed().as_secs_f64(),
                detail,
                witnesses,
            }
        })
        .collect()
}

#[cfg(test)]
mod bench_file {
    /// `AGENRA_VERIFY_FILE=policy.agr cargo test --release -p agenra-smt
    /// --lib bench_file -- --ignored --nocapture`: every property of one
    /// policy file, with the times (a profiling aid).
    #[test]
    #[ignore]
    fn verify_file() {
        let Ok(path) = std::env::var("AGENRA_VERIFY_FILE") else {
            return;
        };
        let src = std::fs::read_to_string(&path).unwrap();
        let p = agenra_policy::compile(&src, "file").unwrap().policy;
        let t = std::time::Instant::now();
        let a = super::alphabet::alphabet(&p).unwrap();
        eprintln!("alphabet: {} letters, {:?}", a.letters.len(), t.elapsed());
        let t = std::time::Instant::now();
        let d = super::alphabet::distinct(&p, &a.letters);
        eprintln!("distinct: {} letters, {:?}", d.len(), t.elapsed());
        for f in super::verify(&p, &super::Property::ALL, &super::Options::default()) {
            eprintln!(
                "{:22} {:8} {:7.3} s  {:?}",
                f.property.name(),
                f.result.as_str(),
                f.seconds,
                f.detail.first()
            );
            for d in f.detail.iter().filter(|d| d.contains("call classes")) {
                eprintln!("    {d}");
            }
        }
    }
}
