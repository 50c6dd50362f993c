//! Certify policy revisions (DESIGN §4, issue #11): does NEW preserve every
//! workflow OLD admits, and what does NEW admit that OLD did not?
//!
//! * `structure`: which non-grant parts differ (each is `unknown`);
//! * `classes`: the finite abstraction of calls, with witnesses;
//! * `recognise`: by-construction classes, under their side conditions;
//! * `product`: one step of OLD and NEW on abstract states;
//! * `simulation`: the reachable pairs (the relation R) or a shortest
//!   lost workflow;
//! * `certificate` / `check`: the certificate and its tiny checker;
//! * `emit_lean`: the certificate as a Lean file (`--emit-lean`);
//! * `replay`: concrete events, confirmed through both real monitors;
//! * `rule_probe`: concrete workflows whose loss needs a rule to pause a
//!   call or deny an approval at one moment (rule changes).
//!
//! A wrong "certified" is the worst bug this crate can have: whenever a
//! condition cannot be established the verdict is `unknown`, naming it.

pub mod certificate;
pub mod check;
pub mod classes;
pub mod emit_lean;
pub mod product;
pub mod recognise;
pub mod replay;
pub mod rule_probe;
pub mod simulation;
pub mod structure;

use agenra_core::event::Event;
use agenra_core::Policy;
pub use certificate::RuleSide;
use certificate::{policy_hash, Certificate, Proof, FORMAT};
use product::{Ctx, Flags};
use serde::Serialize;
use simulation::Outcome;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Certified,
    NotPreserved,
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Certified => "certified",
            Verdict::NotPreserved => "not-preserved",
            Verdict::Unknown => "unknown",
        }
    }
}

/// The answer to both questions.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub verdict: Verdict,
    /// How it was certified (or how the lost workflow was found).
    pub method: Option<String>,
    pub old_hash: String,
    pub new_hash: String,
    /// Events OLD admits and NEW loses at the last one (not-preserved).
    pub lost_workflow: Option<Vec<Event>>,
    pub confirmed_by_replay: Option<bool>,
    /// A workflow NEW admits and OLD does not (its last event), confirmed
    /// through both monitors; `null` when there is none or none was found.
    pub safety_delta: Option<Vec<Event>>,
    /// What could not be checked (for `unknown`), or notes.
    pub reasons: Vec<String>,
    #[serde(skip)]
    pub certificate: Option<Certificate>,
}

/// The reason given when the abstraction loses a workflow that no replay
/// confirms: it over-approximates OLD's workflows.
pub const NOT_CONFIRMED: &str = "the abstraction loses a workflow that no replay confirmed: it may need a rule to pause a call or deny an approval, or one value both in and out of a discovered set (the abstraction lets values of one string cell carry different memberships)";

/// The rule side of a revision: whether NEW's rule stage (flows, call
/// rules, path rules, counts, obligations) decides every call and every
/// approval re-check of OLD's workflows as OLD's does. This crate does not
/// link Z3; `agenra_smt::rules::RuleChecker` implements it over the shared
/// step encoding, and the command line passes it in
/// ([`certify_with`], [`check_certificate_with`]).
pub trait RuleOracle {
    /// Decides the rule side of OLD → NEW (policies whose non-rule,
    /// non-grant parts are identical).
    fn check_rules(&self, old: &Policy, new: &Policy) -> RuleCheck;
}

/// The answer of a [`RuleOracle`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleCheck {
    /// Proven: the grant-side certificate carries this summary.
    Certified(RuleSide),
    /// Not proven: each entry names the rule (or part) not certified, and why.
    NotCertified(Vec<String>),
}

/// The rule flags of a policy (OLD's; they are NEW's when only grants differ).
pub fn flags_of(p: &Policy) -> Flags {
    Flags {
        rule_pauses: structure::has_pause_rules(p),
        approval_denials: structure::has_deny_rules(p),
        history_rules: structure::has_history_rules(p),
        rules_read_sets: structure::rules_read_sets(p),
    }
}

/// The flags of the confirmable part of the abstraction: no rule-induced
/// pauses or approval denials (which a replay cannot produce on demand).
fn ledger_only() -> Flags {
    Flags {
        rule_pauses: false,
        approval_denials: false,
        history_rules: false,
        rules_read_sets: false,
    }
}

/// Whether two policies are the same up to their names.
pub fn same_policy(old: &Policy, new: &Policy) -> bool {
    let mut renamed = new.clone();
    renamed.name = old.name.clone();
    *old == renamed
}

/// A shortest confirmed workflow that `a` admits and `b` loses, searched
/// in the ledger-only abstraction, then by short probes through both
/// monitors (rule changes).
fn confirmed_loss(a: &Policy, b: &Policy) -> Option<Vec<Event>> {
    confirmed_loss_within(a, b, simulation::MAX_STATES)
}

/// The safety delta is a best effort: a smaller search.
const DELTA_STATES: usize = 20_000;

fn confirmed_loss_within(a: &Policy, b: &Policy, max_states: usize) -> Option<Vec<Event>> {
    if !structure::ledger_compatible(a, b) {
        return None;
    }
    let classes = classes::enumerate(a, b).ok()?;
    let flags = ledger_only();
    for tools in classes::components(a, b, &classes) {
        let sub = classes::restrict(&classes, &tools);
        let ctx = Ctx {
            old: a,
            new: b,
            classes: &sub,
            flags: &flags,
        };
        if let Outcome::Lost { events, .. } = simulation::explore_bounded(&ctx, max_states) {
            if let Ok(concrete) = replay::concretize(&ctx, &events) {
                if replay::confirm(a, b, &concrete).is_ok() {
                    return Some(concrete);
                }
                // Obligations may need facts first: establish each once.
                let mut warm = warm_up(a, &classes);
                warm.extend(concrete);
                if replay::confirm(a, b, &warm).is_ok() {
                    return Some(warm);
                }
            }
        }
    }
    let witnesses = classes::enumerate_witnesses(a, b).ok()?;
    if let Some(w) = probe(a, b, &witnesses) {
        return Some(w);
    }
    // A rule that pauses or denies at one moment: only when OLD has one.
    if !(structure::has_pause_rules(a) || structure::has_deny_rules(a)) {
        return None;
    }
    let flags = ledger_only();
    let ctx = Ctx {
        old: a,
        new: b,
        classes: &witnesses,
        flags: &flags,
    };
    rule_probe::probe(&ctx, drain(a, b))
}

/// How many drain calls the rule probe makes: past every limited quota of
/// OLD together, and past the repeat probe's bound.
fn drain(a: &Policy, b: &Policy) -> usize {
    let quotas: u64 = a
        .grants
        .iter()
        .filter_map(|g| match g.quota {
            agenra_core::policy::Quota::Limited(n) => Some(n),
            agenra_core::policy::Quota::Unlimited => None,
        })
        .fold(0, u64::saturating_add);
    usize::try_from(quotas)
        .unwrap_or(MAX_REPEATS)
        .saturating_add(repeats(a, b))
        .min(MAX_REPEATS)
}

/// One succeeded call of each tool that establishes a fact (its first
/// class that OLD serves), so that obligations are met.
fn warm_up(a: &Policy, classes: &classes::Classes) -> Vec<Event> {
    let flags = ledger_only();
    let ctx = Ctx {
        old: a,
        new: a,
        classes,
        flags: &flags,
    };
    let mut out = Vec::new();
    for (tool, t) in a.tools.iter().enumerate() {
        if t.facts.is_empty() {
            continue;
        }
        let Some(i) = classes
            .classes
            .iter()
            .position(|c| c.tool == tool && c.region == 0 && !c.old.is_empty() && c.types == 0)
        else {
            continue;
        };
        if let Ok(mut w) = replay::concretize(
            &ctx,
            &[product::Event::Call {
                class: i,
                rule_pause: false,
            }],
        ) {
            if let Some(Event::Call(mut c)) = w.pop() {
                c.id = format!("w{}", out.len() + 1);
                let done = result(&c.id, agenra_core::event::Outcome::Succeeded);
                out.push(Event::Call(c));
                out.push(done);
            }
        }
    }
    out
}

/// Calls repeated by the repeat probe, at least.
const REPEATS: usize = 6;
/// Calls repeated by the repeat probe, at most.
const MAX_REPEATS: usize = 64;

/// How often the repeat probe repeats a call: past the largest count of
/// either policy (a count NEW adds above every quota is only reached by
/// calls whose failures refund their units), within bounds.
fn repeats(a: &Policy, b: &Policy) -> usize {
    let largest = [a, b]
        .iter()
        .flat_map(|p| &p.path_rules)
        .filter_map(|r| match &r.kind {
            agenra_core::policy::PathKind::AtMost { max, .. } => Some(*max),
            agenra_core::policy::PathKind::Sequence(_) => None,
        })
        .max()
        .unwrap_or(0);
    usize::try_from(largest)
        .unwrap_or(MAX_REPEATS)
        .saturating_add(2)
        .clamp(REPEATS, MAX_REPEATS)
}

/// The result of probe call `id`.
fn result(id: &str, status: agenra_core::event::Outcome) -> Event {
    Event::Result(agenra_core::event::Report {
        session: None,
        call: id.to_string(),
        time: None,
        status,
        output: serde_json::Value::Null,
        discovered: vec![],
    })
}

/// Short concrete workflows (one call; the same call repeated, each
/// succeeding or each failing; a call, its success, another call) over
/// the class witnesses: catches rules that NEW adds or tightens.
fn probe(a: &Policy, b: &Policy, classes: &classes::Classes) -> Option<Vec<Event>> {
    use agenra_core::event::Outcome::{Failed, Succeeded};
    let flags = ledger_only();
    let ctx = Ctx {
        old: a,
        new: b,
        classes,
        flags: &flags,
    };
    let n = classes.classes.len().min(60);
    let one = |i: usize| {
        replay::concretize(
            &ctx,
            &[product::Event::Call {
                class: i,
                rule_pause: false,
            }],
        )
        .ok()
    };
    for i in 0..n {
        let Some(w) = one(i) else { continue };
        if replay::confirm(a, b, &w).is_ok() {
            return Some(w);
        }
    }
    // The same call again and again, each succeeding (counts and path
    // rules NEW tightens) or each failing (a failure refunds its unit, so
    // only a count stops the calls: a count NEW adds above the quotas).
    let times = repeats(a, b);
    for status in [Succeeded, Failed] {
        for i in 0..n {
            let Some(Event::Call(first)) = one(i).and_then(|w| w.first().cloned()) else {
                continue;
            };
            let mut w = Vec::new();
            for k in 0..times {
                let mut c = first.clone();
                c.id = format!("r{}", k + 1);
                w.push(Event::Call(c.clone()));
                if k > 0 && replay::confirm(a, b, &w).is_ok() {
                    return Some(w);
                }
                w.push(result(&c.id, status));
            }
        }
    }
    for i in 0..n {
        for j in 0..n {
            let (Some(mut w), Some(second)) = (one(i), one(j)) else {
                continue;
            };
            let Some(Event::Call(first)) = w.first().cloned() else {
                continue;
            };
            w.push(result(&first.id, Succeeded));
            if let Some(Event::Call(mut c)) = second.first().cloned() {
                c.id = "c2".into();
                c.time = c.time.max(first.time);
                w.push(Event::Call(c));
                if replay::confirm(a, b, &w).is_ok() {
                    return Some(w);
                }
            }
        }
    }
    None
}

/// Certifies that NEW preserves every workflow OLD admits, and reports the
/// safety delta. Rule changes are `unknown` here (no SMT): see
/// [`certify_with`].
pub fn certify(old: &Policy, new: &Policy) -> Report {
    certify_with(old, new, None)
}

/// [`certify`], with a rule-side checker for revisions that change flow
/// rules, call rules, path rules, counts or obligations.
pub fn certify_with(old: &Policy, new: &Policy, rules: Option<&dyn RuleOracle>) -> Report {
    let mut report = Report {
        verdict: Verdict::Unknown,
        method: None,
        old_hash: policy_hash(old),
        new_hash: policy_hash(new),
        lost_workflow: None,
        confirmed_by_replay: None,
        safety_delta: None,
        reasons: Vec::new(),
        certificate: None,
    };
    if same_policy(old, new) {
        report.verdict = Verdict::Certified;
        report.method = Some("identical policies".into());
        report.certificate = Some(Certificate {
            format: FORMAT.into(),
            old_hash: report.old_hash.clone(),
            new_hash: report.new_hash.clone(),
            proof: Proof::Identical,
            rules: None,
        });
        return report;
    }
    if let Some(why) = structure::shared_quota(old, new)
        .or_else(|| structure::budgets(old, new))
        .or_else(|| structure::renewals(old, new))
        .or_else(|| structure::count_windows(old, new))
    {
        report.reasons.push(why);
        return report;
    }
    preservation(old, new, rules, &mut report);
    report.safety_delta = confirmed_loss_within(new, old, DELTA_STATES);
    report
}

fn preservation(old: &Policy, new: &Policy, oracle: Option<&dyn RuleOracle>, report: &mut Report) {
    let (rule_parts, others) = structure::split_differences(old, new);
    let lost = |report: &mut Report, events: Vec<Event>, method: &str| {
        report.verdict = Verdict::NotPreserved;
        report.method = Some(method.into());
        report.lost_workflow = Some(events);
        report.confirmed_by_replay = Some(true);
    };
    // The rule side: proven by the oracle, or the parts that differ.
    let mut rule_side = None;
    let differences = match (others.is_empty(), rule_parts.is_empty(), oracle) {
        (true, true, _) => Vec::new(),
        (true, false, Some(o)) => match o.check_rules(old, new) {
            RuleCheck::Certified(side) => {
                rule_side = Some(side);
                Vec::new()
            }
            RuleCheck::NotCertified(why) => why,
        },
        _ => rule_parts.into_iter().chain(others).collect(),
    };
    if !differences.is_empty() {
        // Only a confirmed lost workflow can answer here.
        if let Some(events) = confirmed_loss(old, new) {
            lost(
                report,
                events,
                "lost workflow replayed through both monitors",
            );
            report.reasons = differences;
        } else {
            report.reasons = differences;
        }
        return;
    }
    let classes = match classes::enumerate(old, new) {
        Ok(c) => c,
        Err(e) => {
            report.reasons.push(e.to_string());
            return;
        }
    };
    let mut notes = Vec::new();
    match recognise::recognise(old, new, &classes) {
        Ok(construction) => {
            report.verdict = Verdict::Certified;
            report.method = Some(construction.method());
            report.certificate = Some(Certificate {
                format: FORMAT.into(),
                old_hash: report.old_hash.clone(),
                new_hash: report.new_hash.clone(),
                proof: Proof::Construction {
                    classes,
                    construction,
                },
                rules: rule_side.clone(),
            });
            report.method = report.certificate.as_ref().map(Certificate::method);
            report.reasons.extend(rule_notes(&rule_side));
            return;
        }
        Err(why) => notes.push(format!("not by construction: {why}")),
    }
    let flags = flags_of(old);
    let mut parts = Vec::new();
    for tools in classes::components(old, new, &classes) {
        let sub = classes::restrict(&classes, &tools);
        let ctx = Ctx {
            old,
            new,
            classes: &sub,
            flags: &flags,
        };
        match simulation::explore(&ctx) {
            Outcome::Closed { states, unknown } if unknown.is_empty() => {
                parts.push(certificate::Component {
                    tools,
                    relation: states,
                });
            }
            Outcome::Closed { unknown, .. } => {
                // A confirmed loss elsewhere in the abstraction still decides.
                if let Some(events) = confirmed_loss(old, new) {
                    lost(
                        report,
                        events,
                        "lost workflow replayed through both monitors",
                    );
                    report.reasons = unknown;
                    return;
                }
                report.reasons.extend(unknown)
            }
            Outcome::TooLarge => report.reasons.push(format!(
                "the checked simulation of tools {} exceeds {} state pairs ({})",
                tool_names(old, &tools),
                simulation::MAX_STATES,
                notes.join("; ")
            )),
            Outcome::Lost { .. } => {
                match confirmed_loss(old, new) {
                    Some(events) => lost(report, events, "checked simulation: lost workflow"),
                    None => report.reasons.push(NOT_CONFIRMED.into()),
                }
                return;
            }
        }
    }
    if report.reasons.is_empty() {
        report.verdict = Verdict::Certified;
        report.method = Some("checked simulation".into());
        report.reasons = notes;
        report.certificate = Some(Certificate {
            format: FORMAT.into(),
            old_hash: report.old_hash.clone(),
            new_hash: report.new_hash.clone(),
            proof: Proof::Simulation {
                classes,
                flags,
                components: parts,
            },
            rules: rule_side.clone(),
        });
        report.method = report.certificate.as_ref().map(Certificate::method);
        report.reasons.extend(rule_notes(&rule_side));
    }
}

/// Notes naming the rule parts the rule side certified.
fn rule_notes(side: &Option<RuleSide>) -> Vec<String> {
    side.iter()
        .flat_map(|s| {
            s.parts
                .iter()
                .map(move |p| format!("rule side certified ({}): {p}", s.method))
        })
        .collect()
}

fn tool_names(p: &Policy, tools: &[usize]) -> String {
    tools
        .iter()
        .map(|&t| format!("`{}`", p.tools[t].name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Re-checks a certificate (`agenra check-cert`). A certificate with a
/// rule side is rejected here (no SMT): see [`check_certificate_with`].
pub fn check_certificate(
    old: &Policy,
    new: &Policy,
    cert: &Certificate,
) -> Result<(), check::CheckError> {
    check::check_with(old, new, cert, None)
}

/// [`check_certificate`], re-running the rule-side check with `rules`.
pub fn check_certificate_with(
    old: &Policy,
    new: &Policy,
    cert: &Certificate,
    rules: Option<&dyn RuleOracle>,
) -> Result<(), check::CheckError> {
    check::check_with(old, new, cert, rules)
}
