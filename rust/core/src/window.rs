//! Renewing quotas and budgets (`quota 20 per 10m`, `budget 5000.00 on
//! amount per day`): fixed calendar windows on the event's clock.
//!
//! The window of a call at time `t` (seconds, the server's clock in the
//! gateway) for a limit renewing every `secs` seconds is `t / secs`
//! (UTC-aligned when `t` is Unix time). Each renewing limit keeps what is
//! held (reserved by paused and running calls, or kept) in its **current**
//! window only: a call in a later window starts it from zero (the limit
//! renewed); a call in an earlier window than the one the holdings are at
//! (a clock that stepped back) is not served (`spec::WindowRefusal::Past`), so a
//! step back never opens a fresh window. A call records the window that
//! lent it its units or amount ([`Lent`]); a refund goes back to that
//! window only, so it is lost when that window has already passed (it can
//! no longer be spent) and never raises a later window.
//! `docs/semantics.md`, "Renewing quotas and budgets".

use crate::decimal::Decimal;
use crate::policy::{GrantId, Policy, RenewLimit, Renewal};
use std::collections::BTreeMap;

/// What a session holds of each renewing limit in its current window: the
/// renewal's index in `Policy::renewals` → (window, held). Units are held
/// as whole decimals. Nothing held: no entry.
pub type Windows = BTreeMap<usize, (u64, Decimal)>;

/// What one call holds of renewing limits: (renewal, the window that lent
/// it, units or amount), in the order the grants serve.
pub type Lent = Vec<(usize, u64, Decimal)>;

/// The window of time `time` for `r`: `time / secs`.
pub fn window_of(r: &Renewal, time: u64) -> u64 {
    time / r.secs.max(1)
}

/// What is held in window `w` when the holdings are `slot`: all of it when
/// they are at `w`; nothing when they are at an earlier window (renewed);
/// `None` when they are at a later window (`w` has passed).
pub fn held_in(slot: Option<(u64, Decimal)>, w: u64) -> Option<Decimal> {
    match slot {
        None => Some(Decimal::default()),
        Some((at, held)) if at == w => Some(held),
        Some((at, _)) if at < w => Some(Decimal::default()),
        Some(_) => None,
    }
}

/// `slot` after `x` more is held in window `w` (a later window starts
/// from zero). The caller checked that it fits.
pub fn added(slot: Option<(u64, Decimal)>, w: u64, x: Decimal) -> Option<(u64, Decimal)> {
    let held = held_in(slot, w).unwrap_or_default();
    let next = held.checked_add(x).unwrap_or(held);
    (next > Decimal::default()).then_some((w, next))
}

/// `slot` after `x` lent by window `w` comes back: taken off when the
/// holdings are still at `w` (never below zero), otherwise unchanged (the
/// window passed). Answers the new slot and how much came off.
pub fn given_back(
    slot: Option<(u64, Decimal)>,
    w: u64,
    x: Decimal,
) -> (Option<(u64, Decimal)>, Decimal) {
    match slot {
        Some((at, held)) if at == w => {
            let back = x.min(held);
            let rest = held.saturating_sub(back);
            ((rest > Decimal::default()).then_some((at, rest)), back)
        }
        other => (other, Decimal::default()),
    }
}

/// The key of a tenant's renewing limit in its pool: `u/SECS/NAME` for
/// units, `a/SECS/NAME` for amounts (the grant's name last, so keys of
/// different limits never collide).
pub fn pool_key(policy: &Policy, r: &Renewal) -> String {
    let kind = if r.limit.is_amount() { 'a' } else { 'u' };
    let name = policy.grants.get(r.grant).map_or("", |g| g.name.as_str());
    format!("{kind}/{}/{name}", r.secs)
}

/// The limit of `r` as a decimal (a units quota beyond `i64` is capped).
pub fn limit_of(r: &Renewal) -> Decimal {
    match &r.limit {
        RenewLimit::Units(n) => Decimal::from(i64::try_from(*n).unwrap_or(i64::MAX)),
        RenewLimit::Amount { amount, .. } => *amount,
    }
}

/// What is left of each renewing limit of `g` at time `time`, given what
/// each holds (`slot`): (renewal, what is left), for displays.
pub fn left(
    policy: &Policy,
    g: GrantId,
    time: u64,
    slot: impl Fn(usize) -> Option<(u64, Decimal)>,
) -> Vec<(usize, Decimal)> {
    policy
        .renewals_of(g)
        .map(|i| {
            let r = &policy.renewals[i];
            let held = held_in(slot(i), window_of(r, time)).unwrap_or_default();
            (i, limit_of(r).saturating_sub(held))
        })
        .collect()
}

/// Adds `lent` to `windows` (a session's own holdings).
pub fn hold(windows: &mut Windows, lent: &[(usize, u64, Decimal)]) {
    for &(i, w, x) in lent {
        match added(windows.get(&i).copied(), w, x) {
            Some(v) => windows.insert(i, v),
            None => windows.remove(&i),
        };
    }
}

/// Gives `lent` back to `windows`; answers how much came off each entry.
pub fn release(windows: &mut Windows, lent: &[(usize, u64, Decimal)]) -> Vec<Decimal> {
    lent.iter()
        .map(|&(i, w, x)| {
            let (v, back) = given_back(windows.get(&i).copied(), w, x);
            match v {
                Some(v) => windows.insert(i, v),
                None => windows.remove(&i),
            };
            back
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn a_later_window_starts_from_zero_an_earlier_one_is_refused() {
        assert_eq!(held_in(None, 3), Some(d("0")));
        assert_eq!(held_in(Some((3, d("5"))), 3), Some(d("5")));
        assert_eq!(held_in(Some((2, d("5"))), 3), Some(d("0")));
        assert_eq!(held_in(Some((4, d("5"))), 3), None);
        assert_eq!(added(Some((2, d("5"))), 3, d("1")), Some((3, d("1"))));
        assert_eq!(added(Some((3, d("5"))), 3, d("1")), Some((3, d("6"))));
    }

    #[test]
    fn a_refund_goes_back_to_the_window_that_lent_it_only() {
        assert_eq!(
            given_back(Some((3, d("5"))), 3, d("2")),
            (Some((3, d("3"))), d("2"))
        );
        assert_eq!(given_back(Some((3, d("5"))), 3, d("9")), (None, d("5")));
        // Lent by window 2, the holdings are at 3 now: window 3 is not raised.
        assert_eq!(
            given_back(Some((3, d("5"))), 2, d("2")),
            (Some((3, d("5"))), d("0"))
        );
    }
}
