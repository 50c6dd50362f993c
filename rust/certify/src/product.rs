//! One step of OLD and NEW side by side, on abstract states: the ledger
//! semantics of `agenra_core::spec` (first matching grant with quota along
//! the delegation chain, approvals, rejections, refunds, unknown outcomes,
//! discovered resources), on call classes instead of concrete calls.
//!
//! This is the transition function both the search (`simulation`) and the
//! certificate checker (`check`) use: keep it small and literal.
//!
//! Events are the ones OLD admits. What the client observes must be
//! acceptable on NEW's side: where OLD ALLOWs, NEW must ALLOW; where OLD
//! PAUSEs, NEW may PAUSE or ALLOW (OLD's approval is then a no-op for NEW;
//! OLD's rejection leaves NEW's call spent, the worst case for NEW).

use crate::classes::{make_type, set_bit, type_masks, Class, Classes};
use agenra_core::ledger::Ledger;
use agenra_core::policy::{AgentId, GrantId, Policy, Quota};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What steps 1–4 (flows, call rules, path rules, counts, obligations) may
/// do to an admitted call, given the rules (identical in OLD and NEW).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flags {
    /// A rule may PAUSE a call its grants would ALLOW.
    pub rule_pauses: bool,
    /// A rule may DENY an approval at re-authorization time.
    pub approval_denials: bool,
    /// Decisions depend on the order of admission (path rules, counts,
    /// obligations).
    pub history_rules: bool,
    /// Rules read discovered-set membership (then sets must stay equal).
    pub rules_read_sets: bool,
}

/// The longest delegation chain the abstraction follows (a longer one is
/// `unknown`): held units are kept inline, without allocation.
pub const MAX_CHAIN: usize = 4;

/// The grants a call took along its delegation chain, the caller's first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Chain {
    len: u8,
    ids: [u32; MAX_CHAIN],
}

impl Chain {
    pub fn from_slice(grants: &[GrantId]) -> Option<Chain> {
        let mut ids = [0u32; MAX_CHAIN];
        if grants.len() > MAX_CHAIN {
            return None;
        }
        for (slot, &g) in ids.iter_mut().zip(grants) {
            *slot = u32::try_from(g).ok()?;
        }
        Some(Chain {
            len: grants.len() as u8,
            ids,
        })
    }

    pub fn to_vec(&self) -> Vec<GrantId> {
        self.ids[..usize::from(self.len).min(MAX_CHAIN)]
            .iter()
            .map(|&g| g as GrantId)
            .collect()
    }

    /// How many grants the chain claims (at most `MAX_CHAIN` are kept).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The caller's own grant.
    pub fn first(&self) -> Option<GrantId> {
        (self.len > 0).then_some(self.ids[0] as GrantId)
    }
}

/// A call OLD paused or admitted and that has no result yet, with the units
/// each side holds for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Held {
    pub old_paused: bool,
    pub new_paused: bool,
    pub old: Chain,
    pub new: Chain,
}

/// A pair of abstract states: OLD's and NEW's ledgers, the calls held, and
/// the membership types values may have.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct State {
    pub region: usize,
    pub old: Vec<Quota>,
    pub new: Vec<Quota>,
    /// How many calls are held this way. Calls held only by unlimited
    /// grants are counted as present (1) and never removed: their number
    /// changes nothing, and keeping them only adds OLD workflows.
    #[serde(with = "pairs")]
    pub calls: BTreeMap<Held, u32>,
    pub types: u64,
}

/// The held calls as a list of pairs (JSON object keys must be strings).
mod pairs {
    use super::Held;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(m: &BTreeMap<Held, u32>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<Held, u32>, D::Error> {
        let pairs: Vec<(Held, u32)> = Vec::deserialize(d)?;
        let n = pairs.len();
        let map: BTreeMap<Held, u32> = pairs.into_iter().collect();
        if map.len() != n {
            return Err(serde::de::Error::custom("a held call is listed twice"));
        }
        Ok(map)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    /// A call of class `class`; `rule_pause`: a rule (identical on both
    /// sides) asked for a human.
    Call {
        class: usize,
        rule_pause: bool,
    },
    Approve {
        held: Held,
    },
    /// The re-check at approval time denies: the units return.
    ApprovalDenied {
        held: Held,
    },
    Reject {
        held: Held,
    },
    /// The call succeeded; `from`: the type of the value it discovered
    /// (it gains the sets the serving grants discover into), or nothing.
    Succeeded {
        held: Held,
        from: Option<u8>,
    },
    Failed {
        held: Held,
    },
    Unknown {
        held: Held,
    },
    /// A task seeds a value of type `from` into `set` (both sides).
    Seed {
        set: usize,
        from: u8,
    },
}

/// How NEW fails a workflow OLD admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Loss {
    /// No grant of NEW serves the call.
    Denied,
    /// NEW PAUSEs a call OLD ALLOWs.
    Paused,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// OLD does not admit the event: it is in no workflow.
    NotAdmitted,
    Next(State),
    Lost(Loss),
    /// The abstraction cannot follow this step; the reason names why.
    Unknown(String),
}

pub struct Ctx<'a> {
    pub old: &'a Policy,
    pub new: &'a Policy,
    pub classes: &'a Classes,
    pub flags: &'a Flags,
}

pub fn initial(old: &Policy, new: &Policy) -> State {
    State {
        region: 0,
        old: Ledger::initial(old).remaining,
        new: Ledger::initial(new).remaining,
        calls: BTreeMap::new(),
        types: 1,
    }
}

/// The serving grants along the delegation chain (as `spec::admit`), on a
/// class's matching grants; `None` if some agent has none with quota.
fn admit(
    p: &Policy,
    ledger: &[Quota],
    matching: &[GrantId],
    agent: AgentId,
) -> Option<(Vec<GrantId>, Vec<Quota>)> {
    let mut next = Ledger {
        remaining: ledger.to_vec(),
        shared: vec![],
    };
    let mut used = Vec::new();
    for owner in p.chain_iter(agent) {
        let g = matching
            .iter()
            .copied()
            .find(|&g| p.grants[g].agent == owner && next.has_quota(g))?;
        next.consume(g);
        used.push(g);
    }
    Some((used, next.remaining))
}

fn refund(p: &Policy, ledger: &[Quota], used: &[GrantId]) -> Vec<Quota> {
    let mut next = Ledger {
        remaining: ledger.to_vec(),
        shared: vec![],
    };
    for &g in used {
        next.refund(p, g);
    }
    next.remaining
}

fn unlimited_only(ctx: &Ctx, h: &Held) -> bool {
    h.old
        .to_vec()
        .iter()
        .all(|&g| ctx.old.grants[g].quota == Quota::Unlimited)
        && h.new
            .to_vec()
            .iter()
            .all(|&g| ctx.new.grants[g].quota == Quota::Unlimited)
}

fn add(ctx: &Ctx, s: &mut State, h: Held) {
    let saturate = unlimited_only(ctx, &h);
    let n = s.calls.entry(h).or_insert(0);
    // Saturating: a crafted certificate's count never wraps (the checker
    // refuses counts outside 1..u32::MAX before any step).
    *n = if saturate { 1 } else { n.saturating_add(1) };
}

fn remove(ctx: &Ctx, s: &mut State, h: &Held) {
    if unlimited_only(ctx, h) {
        return;
    }
    if let Some(n) = s.calls.get_mut(h) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            s.calls.remove(h);
        }
    }
}

/// The events to try from `s`, in a fixed order (calls first).
pub fn events(ctx: &Ctx, s: &State) -> Vec<Event> {
    let mut out = Vec::new();
    for (i, c) in ctx.classes.classes.iter().enumerate() {
        if c.region >= s.region && c.types & !s.types == 0 {
            out.push(Event::Call {
                class: i,
                rule_pause: false,
            });
            if ctx.flags.rule_pauses {
                out.push(Event::Call {
                    class: i,
                    rule_pause: true,
                });
            }
        }
    }
    for h in s.calls.keys() {
        if h.old_paused {
            out.push(Event::Approve { held: *h });
            if ctx.flags.approval_denials {
                out.push(Event::ApprovalDenied { held: *h });
            }
            out.push(Event::Reject { held: *h });
        } else {
            // An unknown outcome leads where a success that discovers
            // nothing does (units spent, nothing added): `Succeeded` with
            // `from: None` stands for both.
            out.push(Event::Succeeded {
                held: *h,
                from: None,
            });
            for t in 0..64u8 {
                let grows = s.types & (1 << discovered(ctx, h, t)) == 0;
                if s.types & (1 << t) != 0 && (grows || diverges(ctx, h)) {
                    out.push(Event::Succeeded {
                        held: *h,
                        from: Some(t),
                    });
                }
            }
            out.push(Event::Failed { held: *h });
        }
    }
    let n_sets = ctx.classes.tested_sets.len();
    for set in ctx.old.task_seeds.iter().copied() {
        let b = set_bit(&ctx.classes.tested_sets, Some(set));
        if b != 0 {
            for t in 0..64u8 {
                let (o, n) = type_masks(t, n_sets);
                if s.types & (1 << t) != 0 && s.types & (1 << make_type(o | b, n | b, n_sets)) == 0
                {
                    out.push(Event::Seed { set, from: t });
                }
            }
        }
    }
    out
}

/// What a call does to both sides.
pub enum Admission {
    /// OLD does not admit it.
    Old,
    Lost(Loss),
    Unknown(String),
    Both {
        held: Held,
        old: Vec<Quota>,
        new: Vec<Quota>,
        region: usize,
    },
}

pub fn admit_call(ctx: &Ctx, s: &State, class: usize, rule_pause: bool) -> Admission {
    let Some(c) = ctx.classes.classes.get(class) else {
        return Admission::Old;
    };
    if c.region < s.region || c.types & !s.types != 0 {
        return Admission::Old;
    }
    let Some((old_used, old_ledger)) = admit(ctx.old, &s.old, &c.old, c.agent) else {
        return Admission::Old;
    };
    let Some((new_used, new_ledger)) = admit(ctx.new, &s.new, &c.new, c.agent) else {
        return Admission::Lost(Loss::Denied);
    };
    let old_paused = rule_pause || old_used.iter().any(|&g| ctx.old.grants[g].approval);
    let new_paused = rule_pause || new_used.iter().any(|&g| ctx.new.grants[g].approval);
    if new_paused && !old_paused {
        return Admission::Lost(Loss::Paused);
    }
    if old_paused && !new_paused && ctx.flags.history_rules {
        return Admission::Unknown(format!(
            "NEW admits at once (grant `{}`) a call OLD pauses (grant `{}`): path rules, counts and obligations would see a different history",
            ctx.new.grants[new_used[0]].name, ctx.old.grants[old_used[0]].name
        ));
    }
    let (Some(old), Some(new)) = (Chain::from_slice(&old_used), Chain::from_slice(&new_used))
    else {
        return Admission::Unknown(format!(
            "a delegation chain of more than {MAX_CHAIN} agents is not modeled"
        ));
    };
    Admission::Both {
        held: Held {
            old_paused,
            new_paused,
            old,
            new,
        },
        old: old_ledger,
        new: new_ledger,
        region: c.region,
    }
}

/// The type a value of type `t` has after a success of `h` discovers it.
fn discovered(ctx: &Ctx, h: &Held, t: u8) -> u8 {
    let n_sets = ctx.classes.tested_sets.len();
    let (o, n) = type_masks(t, n_sets);
    let d_old = h.old.first().and_then(|g| ctx.old.grants[g].discovers);
    let d_new = h.new.first().and_then(|g| ctx.new.grants[g].discovers);
    let b_old = set_bit(&ctx.classes.tested_sets, d_old);
    let b_new = set_bit(&ctx.classes.tested_sets, d_new);
    make_type(o | b_old, n | b_new, n_sets)
}

/// Whether a success of `h` adds discovered values to different sets on
/// the two sides while rules read set membership (`step` answers unknown).
fn diverges(ctx: &Ctx, h: &Held) -> bool {
    let d_old = h.old.first().and_then(|g| ctx.old.grants[g].discovers);
    let d_new = h.new.first().and_then(|g| ctx.new.grants[g].discovers);
    ctx.flags.rules_read_sets && d_old != d_new
}

/// One step of both sides.
pub fn step(ctx: &Ctx, s: &State, e: &Event) -> Step {
    let n_sets = ctx.classes.tested_sets.len();
    let enabled = match e {
        Event::Call { .. } => true,
        Event::Approve { held } | Event::ApprovalDenied { held } | Event::Reject { held } => {
            held.old_paused && s.calls.contains_key(held)
        }
        Event::Succeeded { held, .. } | Event::Failed { held } | Event::Unknown { held } => {
            !held.old_paused && s.calls.contains_key(held)
        }
        Event::Seed { .. } => true,
    };
    if !enabled {
        return Step::NotAdmitted;
    }
    let admission = match e {
        Event::Call { class, rule_pause } => Some(admit_call(ctx, s, *class, *rule_pause)),
        _ => None,
    };
    let mut next = match admission {
        Some(Admission::Old) => return Step::NotAdmitted,
        Some(Admission::Lost(how)) => return Step::Lost(how),
        Some(Admission::Unknown(why)) => return Step::Unknown(why),
        _ => s.clone(),
    };
    match e {
        Event::Call { .. } => match admission {
            Some(Admission::Both {
                held,
                old,
                new,
                region,
            }) => {
                next.region = region;
                next.old = old;
                next.new = new;
                add(ctx, &mut next, held);
            }
            _ => return Step::NotAdmitted,
        },
        Event::Approve { held } | Event::ApprovalDenied { held } | Event::Reject { held } => {
            if !held.old_paused || !s.calls.contains_key(held) {
                return Step::NotAdmitted;
            }
            remove(ctx, &mut next, held);
            if matches!(e, Event::Approve { .. }) {
                // Both admit now (NEW's re-check sees the same history), or
                // NEW's call was already running.
                add(
                    ctx,
                    &mut next,
                    Held {
                        old_paused: false,
                        new_paused: false,
                        ..*held
                    },
                );
            } else {
                next.old = refund(ctx.old, &s.old, &held.old.to_vec());
                if held.new_paused {
                    next.new = refund(ctx.new, &s.new, &held.new.to_vec());
                }
                // Otherwise NEW's call ran: its units stay spent.
            }
        }
        Event::Succeeded { held, from } => {
            if held.old_paused || !s.calls.contains_key(held) {
                return Step::NotAdmitted;
            }
            remove(ctx, &mut next, held);
            // The caller's own grant says where discovered values go.
            let d_old = held.old.first().and_then(|g| ctx.old.grants[g].discovers);
            let d_new = held.new.first().and_then(|g| ctx.new.grants[g].discovers);
            if let Some(t) = from {
                if s.types & (1 << t) == 0 {
                    return Step::NotAdmitted;
                }
                if d_old != d_new && ctx.flags.rules_read_sets {
                    return Step::Unknown(format!(
                        "a result adds to discovered set {} in OLD but {} in NEW, and rules read set membership",
                        set_name(ctx.old, d_old),
                        set_name(ctx.new, d_new)
                    ));
                }
                let (o, n) = type_masks(*t, n_sets);
                let b_old = set_bit(&ctx.classes.tested_sets, d_old);
                let b_new = set_bit(&ctx.classes.tested_sets, d_new);
                next.types |= 1 << make_type(o | b_old, n | b_new, n_sets);
            }
        }
        Event::Failed { held } | Event::Unknown { held } => {
            if held.old_paused || !s.calls.contains_key(held) {
                return Step::NotAdmitted;
            }
            remove(ctx, &mut next, held);
            if matches!(e, Event::Failed { .. }) {
                next.old = refund(ctx.old, &s.old, &held.old.to_vec());
                next.new = refund(ctx.new, &s.new, &held.new.to_vec());
            }
        }
        Event::Seed { set, from } => {
            if s.types & (1 << from) == 0 || !ctx.old.task_seeds.contains(set) {
                return Step::NotAdmitted;
            }
            let (o, n) = type_masks(*from, n_sets);
            let b = set_bit(&ctx.classes.tested_sets, Some(*set));
            next.types |= 1 << make_type(o | b, n | b, n_sets);
        }
    }
    Step::Next(next)
}

fn set_name(p: &Policy, s: Option<usize>) -> String {
    match s.and_then(|s| p.sets.get(s)) {
        Some(n) => format!("`{n}`"),
        None => "none".into(),
    }
}

/// The class of a call event, for rendering.
pub fn class_of<'a>(ctx: &'a Ctx, e: &Event) -> Option<&'a Class> {
    match e {
        Event::Call { class, .. } => ctx.classes.classes.get(*class),
        _ => None,
    }
}
