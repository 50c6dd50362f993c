//! By-construction certification: quota increases, appended grants and
//! independent reorderings (and combinations of them), recognised from the
//! grants' structure and accepted only under their side conditions, which
//! are checked here on every call class:
//!
//! * each grant of OLD has a grant of NEW with the same name and the same
//!   fields (agent, tool, resource, conditions, approval, expiry,
//!   discovers), except a quota that is at least as large;
//! * for every class and every agent, the grants of that agent which match
//!   the class keep their relative order;
//! * of those, only the last may have a larger quota (an earlier one
//!   could serve in NEW while OLD, having exhausted it, uses a later one
//!   with another approval, expiry or discovered set);
//! * a grant only in NEW that matches the class comes after all of them.
//!
//! Then NEW serves every call OLD admits from the image of OLD's serving
//! grant, and R = "holdings equal under the mapping; counts equal, or at
//! least as large for increased grants" is a simulation (docs/certify.md).

use crate::classes::Classes;
use crate::product::MAX_CHAIN;
use agenra_core::policy::{GrantId, Policy, Quota};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Construction {
    /// `mapping[g]`: NEW's index of OLD's grant `g`.
    pub mapping: Vec<GrantId>,
    /// OLD grants whose quota NEW raises.
    pub increased: Vec<GrantId>,
    /// NEW grants that OLD does not have.
    pub appended: Vec<GrantId>,
    /// Whether the mapping changes the order of grants.
    pub reordered: bool,
}

impl Construction {
    pub fn method(&self) -> String {
        let mut parts = Vec::new();
        if !self.increased.is_empty() {
            parts.push("quota increase");
        }
        if !self.appended.is_empty() {
            parts.push("appended grants");
        }
        if self.reordered {
            parts.push("independent reordering");
        }
        match parts.len() {
            0 => "by construction: same grants".into(),
            1 => format!("by construction: {}", parts[0]),
            _ => format!("by construction: a combination ({})", parts.join(" + ")),
        }
    }
}

fn at_least(new: Quota, old: Quota) -> bool {
    match (new, old) {
        (Quota::Unlimited, _) => true,
        (Quota::Limited(_), Quota::Unlimited) => false,
        (Quota::Limited(n), Quota::Limited(o)) => n >= o,
    }
}

/// The construction, or why the revision is not one.
pub fn recognise(old: &Policy, new: &Policy, classes: &Classes) -> Result<Construction, String> {
    let mut mapping = Vec::with_capacity(old.grants.len());
    let mut increased = Vec::new();
    for (g, go) in old.grants.iter().enumerate() {
        let Some(n) = new.grants.iter().position(|x| x.name == go.name) else {
            return Err(format!("grant `{}` is not in NEW", go.name));
        };
        let gn = &new.grants[n];
        // The whole grant, quota aside: a field added to `Grant` later is
        // compared too.
        let mut like = go.clone();
        like.quota = gn.quota;
        let same_but_quota = like == *gn;
        if !same_but_quota {
            return Err(format!("grant `{}` changes more than its quota", go.name));
        }
        if !at_least(gn.quota, go.quota) {
            return Err(format!("grant `{}` has a smaller quota in NEW", go.name));
        }
        if gn.quota != go.quota {
            increased.push(g);
        }
        mapping.push(n);
    }
    let mut sorted = mapping.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err("two grants of OLD have the same name".into());
    }
    let appended: Vec<GrantId> = (0..new.grants.len())
        .filter(|n| !mapping.contains(n))
        .collect();
    let reordered = mapping.windows(2).any(|w| w[0] > w[1]);
    for c in &classes.classes {
        // The side condition `ConstructionOk.chain` of the Lean proof: the
        // abstraction models delegation chains of at most MAX_CHAIN agents.
        let chain = old.chain_iter(c.agent).count();
        if chain > MAX_CHAIN {
            return Err(format!(
                "agent `{}` acts through a delegation chain of {chain} agents (the construction is proved for at most {MAX_CHAIN})",
                old.agents.get(c.agent).map_or("?", |a| a.name.as_str())
            ));
        }
        for agent in 0..old.agents.len() {
            let m: Vec<GrantId> = c
                .old
                .iter()
                .copied()
                .filter(|&g| old.grants[g].agent == agent)
                .collect();
            let images: Vec<GrantId> = m.iter().map(|&g| mapping[g]).collect();
            let in_new: Vec<GrantId> = c
                .new
                .iter()
                .copied()
                .filter(|&g| new.grants[g].agent == agent)
                .collect();
            if images.iter().any(|i| !in_new.contains(i))
                || in_new
                    .iter()
                    .any(|i| mapping.contains(i) && !images.contains(i))
            {
                return Err("a grant matches different calls in OLD and NEW".into());
            }
            if images.windows(2).any(|w| w[0] > w[1]) {
                return Err(format!(
                    "grants `{}` and `{}` match a common call and NEW swaps them",
                    old.grants[m[0]].name, old.grants[m[1]].name
                ));
            }
            if let Some(&g) = m[..m.len().saturating_sub(1)]
                .iter()
                .find(|g| increased.contains(g))
            {
                return Err(format!(
                    "grant `{}` has a larger quota and a later grant matches some of its calls",
                    old.grants[g].name
                ));
            }
            if let Some(&last) = images.last() {
                if let Some(&x) = in_new.iter().find(|&&x| appended.contains(&x) && x < last) {
                    return Err(format!(
                        "new grant `{}` comes before grant `{}`, which matches some of its calls",
                        new.grants[x].name, new.grants[last].name
                    ));
                }
            }
            // The side condition `ConstructionOk.order` of the Lean proof
            // (proofs/AgenraProofs/Construction.lean), checked as stated:
            // NEW's grants of this agent for the class are the images, in
            // order, followed only by appended grants. On ascending class
            // lists the checks above already imply it.
            let (head, tail) = in_new.split_at(images.len().min(in_new.len()));
            if head != images.as_slice() || tail.iter().any(|x| !appended.contains(x)) {
                return Err("a grant matches different calls in OLD and NEW".into());
            }
        }
    }
    Ok(Construction {
        mapping,
        increased,
        appended,
        reordered,
    })
}
