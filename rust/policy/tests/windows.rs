//! Renewing quotas and budgets (`quota 20 per 10m`, `budget 5000.00 on
//! amount per day [per tenant]`): syntax, lowering, errors, the canonical
//! form, shadowing, and decisions on the event's clock.

use agenra_core::decision::Verdict;
use agenra_core::policy::{Quota, RenewLimit, Renewal};
use agenra_core::{Call, Monitor};
use serde_json::json;

const TOOLS: &str =
    "tool bank.pay(recipient: string, amount: decimal, cents: int, memo?: string);\n";

fn compile(src: &str) -> agenra_core::Policy {
    match agenra_policy::compile(src, "test") {
        Ok(c) => c.policy,
        Err(e) => panic!("{e}"),
    }
}

fn errors(src: &str) -> Vec<String> {
    match agenra_policy::compile(src, "test") {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e.diagnostics.iter().map(ToString::to_string).collect(),
    }
}

fn d(s: &str) -> agenra_core::Decimal {
    s.parse().unwrap()
}

#[test]
fn windows_are_lowered_into_renewals_with_their_scope() {
    let p = compile(&format!(
        "{TOOLS}grant a: bank.pay quota 20 per 10m;\n\
         grant b: bank.pay budget 5000.00 on amount per day per tenant;\n\
         grant c: bank.pay quota 3 per hour per tenant budget 70 on cents per 2h;\n\
         grant e: bank.pay quota 1 per session per 30s;\n"
    ));
    assert_eq!(
        p.renewals,
        vec![
            Renewal {
                grant: 0,
                secs: 600,
                limit: RenewLimit::Units(20),
                per_tenant: false
            },
            Renewal {
                grant: 1,
                secs: 86_400,
                limit: RenewLimit::Amount {
                    amount: d("5000"),
                    param: 1
                },
                per_tenant: true
            },
            Renewal {
                grant: 2,
                secs: 3_600,
                limit: RenewLimit::Units(3),
                per_tenant: true
            },
            Renewal {
                grant: 2,
                secs: 7_200,
                limit: RenewLimit::Amount {
                    amount: d("70"),
                    param: 2
                },
                per_tenant: false
            },
            Renewal {
                grant: 3,
                secs: 30,
                limit: RenewLimit::Units(1),
                per_tenant: false
            },
        ]
    );
    // A renewing quota is the grant's quota: the ledger's own is unlimited,
    // and neither a shared quota nor a (non-renewing) budget is made.
    assert_eq!(p.grants[0].quota, Quota::Unlimited);
    assert!(p.shared_grants.is_empty() && p.budgets.is_empty());
    assert!(agenra_core::validate::validate(&p).is_ok());
    // Policies without windows encode as before (no `renewals` field).
    let plain = compile(&format!("{TOOLS}grant a: bank.pay quota 1 per tenant;\n"));
    let json = serde_json::to_value(&plain).unwrap();
    assert!(json.get("renewals").is_none());
    assert_eq!(plain.shared_grants, vec![0]);
}

#[test]
fn bad_windows_are_errors_naming_the_place() {
    assert_eq!(
        errors(&format!("{TOOLS}grant a: bank.pay quota 2 per fortnight;\n")),
        vec!["2:31: error: expected `tenant`, `session` or a window (`day`, `hour`, `minute`, `second`, `10m`, `2h`, `30s`, `7d`) after `per`, found `fortnight`"]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant a: bank.pay quota 2 per 10y;\n")),
        vec!["2:33: error: expected a window unit (`s`, `m`, `h` or `d`), found `y`"]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant a: bank.pay quota 2 per 0m;\n")),
        vec!["2:27: error: a window must be at least 1 second and fit in 64 bits, not 0"]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant a: bank.pay quota unlimited per day;\n")),
        vec!["2:35: error: grant `a` has `quota unlimited` with a window: an unlimited quota does not renew (write `quota N per day`)"]
    );
    assert_eq!(
        errors(&format!(
            "{TOOLS}grant a: bank.pay quota 2 per day per hour;\n"
        )),
        vec!["2:39: error: expected one window (`per 10m`, `per day`), found `hour`"]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant a: bank.pay budget 5 on recipient per day;\n")),
        vec!["2:31: error: grant `a` spends its budget in `recipient` of type `string`: a budget is spent in a `decimal` or `int` parameter"]
    );
}

#[test]
fn windows_keep_their_form() {
    let src = "tool t(n: decimal);\ngrant a: t quota 20   per 600 s;\ngrant b: t budget 5000.00 on n per   tenant per day;\ngrant c: t quota 3 per 2 h budget 1 on n per 90m per session;\n";
    let formatted = agenra_policy::format(src).unwrap();
    assert_eq!(
        formatted,
        "tool t(n: decimal);\ngrant a: t quota 20 per 10m;\ngrant b: t budget 5000.00 on n per day per tenant;\ngrant c: t quota 3 per 2h budget 1 on n per 90m per session;\n"
    );
    assert_eq!(
        agenra_policy::compile(src, "m").unwrap().policy,
        agenra_policy::compile(&formatted, "m").unwrap().policy
    );
}

#[test]
fn a_renewing_grant_shadows_nothing() {
    let warnings = |src: &str| -> Vec<String> {
        match agenra_policy::compile(src, "test") {
            Ok(c) => c.warnings.iter().map(ToString::to_string).collect(),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(
        warnings(&format!(
            "{TOOLS}grant a: bank.pay quota 5 per day;\ngrant b: bank.pay quota 1 approval;\n"
        )),
        Vec::<String>::new()
    );
    assert_eq!(
        warnings(&format!(
            "{TOOLS}grant a: bank.pay budget 5 on amount per day;\ngrant b: bank.pay quota 1 approval;\n"
        )),
        Vec::<String>::new()
    );
}

fn pay(id: &str, time: u64, amount: &str) -> Call {
    Call::new(id, "bank.pay", time)
        .arg("recipient", json!("acme"))
        .arg("amount", json!(amount))
        .arg("cents", json!(1))
}

fn verdict(m: &mut Monitor, call: &Call) -> Verdict {
    m.authorize(call).expect("a well-formed call").verdict
}

#[test]
fn a_quota_renews_in_the_next_window_and_a_refund_goes_to_the_window_that_lent_it() {
    let p = compile(&format!("{TOOLS}grant a: bank.pay quota 2 per 10m;\n"));
    let mut m = Monitor::new(p).unwrap();
    assert_eq!(verdict(&mut m, &pay("c1", 0, "1")), Verdict::Allow);
    assert_eq!(verdict(&mut m, &pay("c2", 599, "1")), Verdict::Allow);
    assert_eq!(
        verdict(&mut m, &pay("c3", 599, "1")),
        Verdict::Deny,
        "the window is used up"
    );
    assert_eq!(
        verdict(&mut m, &pay("c4", 600, "1")),
        Verdict::Allow,
        "a new window"
    );
    // c2 (lent by window 0) fails in window 1: window 1 is not raised.
    let failed: agenra_core::Event = serde_json::from_value(
        json!({"kind": "result", "call": "c2", "status": "failed", "time": 601}),
    )
    .unwrap();
    m.step(&failed).unwrap();
    assert_eq!(verdict(&mut m, &pay("c5", 602, "1")), Verdict::Allow);
    assert_eq!(
        verdict(&mut m, &pay("c6", 603, "1")),
        Verdict::Deny,
        "2 per window, not 3"
    );
    // c5 fails in its own window: its unit comes back.
    let failed: agenra_core::Event = serde_json::from_value(
        json!({"kind": "result", "call": "c5", "status": "failed", "time": 604}),
    )
    .unwrap();
    m.step(&failed).unwrap();
    assert_eq!(verdict(&mut m, &pay("c7", 605, "1")), Verdict::Allow);
}

#[test]
fn a_budget_renews_daily_and_a_clock_step_back_is_refused() {
    let p = compile(&format!(
        "{TOOLS}grant a: bank.pay budget 100.00 on amount per day;\n"
    ));
    let mut m = Monitor::new(p).unwrap();
    let day = 86_400;
    assert_eq!(
        verdict(&mut m, &pay("c1", day + 5, "60.00")),
        Verdict::Allow
    );
    assert_eq!(verdict(&mut m, &pay("c2", day + 6, "40.01")), Verdict::Deny);
    assert_eq!(
        verdict(&mut m, &pay("c3", day + 7, "40.00")),
        Verdict::Allow
    );
    assert_eq!(verdict(&mut m, &pay("c4", 2 * day, "100")), Verdict::Allow);
    // Time never goes backwards in a session: the event is refused.
    assert!(m.authorize(&pay("c5", day + 8, "1")).is_err());
}
