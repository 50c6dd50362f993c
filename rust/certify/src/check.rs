//! `agenra check-cert OLD NEW CERT`: the certificate checker. It searches
//! nothing; it re-derives what the certificate must contain and re-checks
//! the relation's closure conditions. This is what an auditor reads, and
//! what the Lean checker (#10) mirrors.
//!
//! Trusted: the class enumeration (`classes`, recomputed and compared
//! entry by entry) and the product step (`product`).

use crate::certificate::{policy_hash, Certificate, Proof, FORMAT};
use crate::classes::{components, enumerate, restrict};
use crate::product::{events, initial, step, Ctx, Step};
use crate::recognise::recognise;
use crate::structure::split_differences;
use crate::{flags_of, same_policy, RuleCheck, RuleOracle};
use agenra_core::Policy;
use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("not a certificate of format {FORMAT}")]
    Format,
    #[error("the certificate is for {which} policy {cert}, not {actual}")]
    Hash {
        which: &'static str,
        cert: String,
        actual: String,
    },
    #[error("OLD and NEW differ outside their grants: {0}")]
    Structure(String),
    #[error("the rule side does not hold: {0}")]
    Rules(String),
    #[error("OLD and NEW are not identical")]
    NotIdentical,
    #[error("the call classes are not those of OLD and NEW ({0})")]
    Classes(String),
    #[error("the rule flags are not those of OLD and NEW")]
    Flags,
    #[error("the construction does not hold: {0}")]
    Construction(String),
    #[error("the relation does not start at the initial pair")]
    Initial,
    #[error("pair {pair} of the relation: {why}")]
    Closure { pair: usize, why: String },
}

/// Checks a certificate without a rule checker: one with a rule side is
/// rejected ([`check_with`]).
pub fn check(old: &Policy, new: &Policy, cert: &Certificate) -> Result<(), CheckError> {
    check_with(old, new, cert, None)
}

/// Checks a certificate; `rules` re-runs its rule side, if it has one.
pub fn check_with(
    old: &Policy,
    new: &Policy,
    cert: &Certificate,
    rules: Option<&dyn RuleOracle>,
) -> Result<(), CheckError> {
    // 1. The certificate is about these two policies.
    if cert.format != FORMAT {
        return Err(CheckError::Format);
    }
    for (which, p, h) in [("OLD", old, &cert.old_hash), ("NEW", new, &cert.new_hash)] {
        let actual = policy_hash(p);
        if &actual != h {
            return Err(CheckError::Hash {
                which,
                cert: h.clone(),
                actual,
            });
        }
    }
    // Shared quotas and budgets are not modeled (only identical policies
    // certify).
    if !matches!(cert.proof, Proof::Identical) {
        if let Some(why) = crate::structure::shared_quota(old, new)
            .or_else(|| crate::structure::budgets(old, new))
            .or_else(|| crate::structure::renewals(old, new))
            .or_else(|| crate::structure::count_windows(old, new))
        {
            return Err(CheckError::Structure(why));
        }
    }
    // 2. Only grants differ: steps 1–4 are the same function on both
    // sides; or only grants and rules differ, and the rule side (NEW's
    // steps 3–4 decide OLD's workflows as OLD's do) is re-checked by SMT.
    let (rule_parts, others) = split_differences(old, new);
    if !others.is_empty() {
        return Err(CheckError::Structure(others.join("; ")));
    }
    match (&cert.rules, rule_parts.is_empty()) {
        (None, true) => {}
        (None, false) => return Err(CheckError::Structure(rule_parts.join("; "))),
        (Some(_), true) => {
            return Err(CheckError::Rules(
                "the rules of OLD and NEW are identical; the certificate claims a rule side".into(),
            ))
        }
        (Some(side), false) => {
            let Some(oracle) = rules else {
                return Err(CheckError::Rules(
                    "the certificate's rule side was checked by SMT; re-checking it needs the rule checker (`agenra check-cert` links it)".into(),
                ));
            };
            match oracle.check_rules(old, new) {
                RuleCheck::Certified(again) if &again == side => {}
                RuleCheck::Certified(again) => {
                    return Err(CheckError::Rules(format!(
                        "the rule side differs from the one re-checked ({} parts, {} classes, {} queries)",
                        again.parts.len(),
                        again.classes,
                        again.queries
                    )))
                }
                RuleCheck::NotCertified(why) => return Err(CheckError::Rules(why.join("; "))),
            }
        }
    }
    match &cert.proof {
        Proof::Identical => {
            if !same_policy(old, new) {
                return Err(CheckError::NotIdentical);
            }
        }
        Proof::Construction {
            classes,
            construction,
        } => {
            // 3. The classes are exactly those of the two policies.
            let expected = enumerate(old, new).map_err(|e| CheckError::Classes(e.to_string()))?;
            compare_classes(&expected, classes)?;
            // 4. The side conditions hold on every class.
            let found = recognise(old, new, classes).map_err(CheckError::Construction)?;
            if &found != construction {
                return Err(CheckError::Construction("the mapping differs".into()));
            }
        }
        Proof::Simulation {
            classes,
            flags,
            components: parts,
        } => {
            let expected = enumerate(old, new).map_err(|e| CheckError::Classes(e.to_string()))?;
            compare_classes(&expected, classes)?;
            if *flags != flags_of(old) {
                return Err(CheckError::Flags);
            }
            let tools = components(old, new, classes);
            if tools.len() != parts.len() || tools.iter().zip(parts).any(|(t, p)| *t != p.tools) {
                return Err(CheckError::Classes("the components differ".into()));
            }
            for part in parts {
                let sub = restrict(classes, &part.tools);
                closed(
                    &Ctx {
                        old,
                        new,
                        classes: &sub,
                        flags,
                    },
                    &part.relation,
                )?;
            }
        }
    }
    Ok(())
}

/// R holds the initial pair, and from every pair of R, every event OLD
/// admits is admitted by NEW and leads back into R. Public for the
/// differential suite (`tests/reference/mod.rs`, Lean `checkSimulation`).
pub fn closed(ctx: &Ctx, relation: &[crate::product::State]) -> Result<(), CheckError> {
    if relation.first() != Some(&initial(ctx.old, ctx.new)) {
        return Err(CheckError::Initial);
    }
    // A certificate is input: its states must fit the policies before any
    // step reads them.
    for (i, s) in relation.iter().enumerate() {
        if !fits(ctx, s) {
            return Err(CheckError::Closure {
                pair: i,
                why: "the pair does not fit the policies (grant, region, chain or held count out of range)"
                    .into(),
            });
        }
    }
    let members: HashSet<_, crate::simulation::FxBuild> = relation.iter().collect();
    for (i, s) in relation.iter().enumerate() {
        for e in events(ctx, s) {
            let why = match step(ctx, s, &e) {
                Step::NotAdmitted => continue,
                Step::Next(t) if members.contains(&t) => continue,
                Step::Next(_) => "a successor is not in the relation".to_string(),
                Step::Lost(how) => format!("NEW loses the workflow ({how:?})"),
                Step::Unknown(why) => why,
            };
            return Err(CheckError::Closure {
                pair: i,
                why: format!("{e:?}: {why}"),
            });
        }
    }
    Ok(())
}

/// Whether every index in a state is in range for the two policies.
fn fits(ctx: &Ctx, s: &crate::product::State) -> bool {
    let chain_ok = |c: &crate::product::Chain, n: usize| {
        let ids = c.to_vec();
        ids.len() == c.len() && ids.iter().all(|&g| g < n)
    };
    s.old.len() == ctx.old.grants.len()
        && s.new.len() == ctx.new.grants.len()
        && s.region < ctx.classes.regions.len()
        && s.calls.iter().all(|(h, &n)| {
            chain_ok(&h.old, ctx.old.grants.len())
                && chain_ok(&h.new, ctx.new.grants.len())
                // A count the product's steps can take one from and add one
                // to without wrapping (a held entry is never 0).
                && (1..u32::MAX).contains(&n)
        })
}

fn compare_classes(
    expected: &crate::classes::Classes,
    got: &crate::classes::Classes,
) -> Result<(), CheckError> {
    if expected.regions != got.regions
        || expected.tested_sets != got.tested_sets
        || expected.possible_types != got.possible_types
    {
        return Err(CheckError::Classes(
            "regions, tested sets or types differ".into(),
        ));
    }
    if expected.classes.len() != got.classes.len() {
        return Err(CheckError::Classes(format!(
            "{} classes expected, {} given",
            expected.classes.len(),
            got.classes.len()
        )));
    }
    for (i, (a, b)) in expected.classes.iter().zip(&got.classes).enumerate() {
        if a != b {
            return Err(CheckError::Classes(format!("class {i} differs")));
        }
    }
    Ok(())
}
