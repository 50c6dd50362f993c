//! `examples/banking-agent/budget.agr`: the banking assistant with daily
//! payment budgets (`budget 1500.00 on amount per day` and `quota 5 per
//! hour` on what it pays on its own, `budget 5000.00 on amount per day` on
//! what a human approves). The benign trace pays two
//! bills from the budget and hands the third, which the budget cannot
//! cover, to a human; the attack trace's second transfer exceeds what the
//! approval grant's budget has left (the first is reserved while paused)
//! and is denied, and a repeated rent payment is passed over by the
//! exhausted budget to the approval grant. The monitor and the SMT engine
//! decide both traces alike. The `budget-daily-*` traces cross midnight:
//! the budget renews, and a refund goes back to the day that lent it. The
//! `budget-window-*` traces show `deny count large_hourly: ... within 1h`
//! (a sliding window): a third large payment within the hour is denied
//! even with a human approving, and passes to a human again once the first
//! is an hour old.

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `(call, decision, rule, grants)` of each decided event of the replay.
fn replay(trace: &str, engine: Option<&str>) -> Vec<(String, String, String, Vec<String>)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agenra"));
    cmd.args([
        "replay",
        "--json",
        "--policy",
        "examples/banking-agent/budget.agr",
    ]);
    if let Some(e) = engine {
        cmd.args(["--engine", e]);
    }
    let out = cmd
        .arg(format!("examples/banking-agent/{trace}.jsonl"))
        .current_dir(root())
        .output()
        .expect("the agenra binary runs");
    assert!(
        out.status.success(),
        "{trace}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .filter(|v| v["decision"].is_string())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            let grants = v["grants"]
                .as_array()
                .map(|g| {
                    g.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (s("call"), s("decision"), s("rule"), grants)
        })
        .collect()
}

fn row(
    call: &str,
    decision: &str,
    rule: &str,
    grants: &[&str],
) -> (String, String, String, Vec<String>) {
    (
        call.into(),
        decision.into(),
        rule.into(),
        grants.iter().map(|g| g.to_string()).collect(),
    )
}

#[test]
fn the_benign_trace_pays_from_the_budget_and_asks_when_it_runs_out() {
    assert_eq!(
        replay("budget-benign", None),
        vec![
            row("c1", "ALLOW", "pay_known", &["pay_known"]),
            row("c2", "ALLOW", "pay_known", &["pay_known"]),
            // 45.00 > the 40.00 left of pay_known's 1500.00: a human decides.
            row("c3", "PAUSE", "pay_reviewed", &["pay_reviewed"]),
            row("c3", "ALLOW", "pay_reviewed", &["pay_reviewed"]),
        ]
    );
}

#[test]
fn the_attack_trace_is_stopped_by_the_budgets() {
    let rows = replay("budget-attack", None);
    assert_eq!(
        rows,
        vec![
            row("c1", "ALLOW", "read_mail", &["read_mail"]),
            row("c2", "PAUSE", "mail_steers_payment", &["pay_reviewed"]),
            // 4999.00 of 5000.00 is reserved by the paused c2: 6000.00 is denied.
            row("c3", "DENY", "no-grant", &[]),
            row("c4", "ALLOW", "pay_known", &["pay_known"]),
            // 980.00 > the 520.00 left of pay_known: the approval grant serves.
            row("c5", "PAUSE", "large_payments", &["pay_reviewed"]),
        ]
    );
    let out = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(["replay", "--policy", "examples/banking-agent/budget.agr"])
        .arg("examples/banking-agent/budget-attack.jsonl")
        .current_dir(root())
        .output()
        .expect("the agenra binary runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("grant `pay_reviewed` of `main` matches but its budget does not serve the call: the amount 6000 exceeds what is left of the budget (1)"),
        "{text}"
    );
}

/// The daily budget renews at midnight (time 86400): the water bill the
/// human rejected yesterday is paid today from the renewed budget.
#[test]
fn the_daily_benign_trace_pays_from_the_renewed_budget_after_midnight() {
    assert_eq!(
        replay("budget-daily-benign", None),
        vec![
            row("c1", "ALLOW", "pay_known", &["pay_known"]),
            row("c2", "ALLOW", "pay_known", &["pay_known"]),
            // 45.00 > the 40.00 left of today's 1500.00: a human decides.
            row("c3", "PAUSE", "pay_reviewed", &["pay_reviewed"]),
            // A new day: the budget is 1500.00 again.
            row("c4", "ALLOW", "pay_known", &["pay_known"]),
        ]
    );
}

/// An agent repeating a payment across midnight: the day's budget and the
/// hour's quota stop it, and a payment of yesterday that fails today gives
/// its amount back to yesterday, not to today's budget.
#[test]
fn the_daily_attack_trace_is_stopped_by_the_window_that_lent() {
    assert_eq!(
        replay("budget-daily-attack", None),
        vec![
            row("c1", "ALLOW", "pay_known", &["pay_known"]),
            row("c2", "ALLOW", "pay_known", &["pay_known"]),
            row("c3", "ALLOW", "pay_known", &["pay_known"]),
            row("c4", "ALLOW", "pay_known", &["pay_known"]),
            // c1 (lent by yesterday) failed: today has 30.00 left, not
            // 520.00, so 40.00 goes to a human.
            row("c5", "PAUSE", "pay_reviewed", &["pay_reviewed"]),
            row("c6", "ALLOW", "pay_known", &["pay_known"]),
            row("c7", "ALLOW", "pay_known", &["pay_known"]),
            // The 6th payment this hour: `quota 5 per hour` is used up.
            row("c8", "PAUSE", "pay_reviewed", &["pay_reviewed"]),
        ]
    );
}

/// `deny count large_hourly: at most 2 call bank.pay where amount >
/// 1000.00 within 1h`: two large payments approved at 20 and 40; the third
/// comes at 3620, when the first is exactly an hour old (out of the
/// window), so a human decides it as usual.
#[test]
fn the_window_benign_trace_pays_a_third_large_payment_an_hour_later() {
    assert_eq!(
        replay("budget-window-benign", None),
        vec![
            // Over 1000.00: only the approval grant serves it.
            row("c1", "PAUSE", "pay_reviewed", &["pay_reviewed"]),
            row("c1", "ALLOW", "pay_reviewed", &["pay_reviewed"]),
            row("c2", "PAUSE", "large_payments", &["pay_reviewed"]),
            row("c2", "ALLOW", "pay_reviewed", &["pay_reviewed"]),
            row("c3", "PAUSE", "large_payments", &["pay_reviewed"]),
            row("c3", "ALLOW", "pay_reviewed", &["pay_reviewed"]),
        ]
    );
}

/// A human rubber-stamping transfers to new bank details: after two large
/// payments approved within the hour (c2 still in flight), the third is
/// denied whatever the human would say, and stays denied until the first
/// approval (at 20) is an hour old: at 3619 it is still inside the window,
/// at 3620 it has left it.
#[test]
fn the_window_attack_trace_is_stopped_by_the_hourly_count() {
    assert_eq!(
        replay("budget-window-attack", None),
        vec![
            // Over 1000.00: only the approval grant serves it.
            row("c1", "PAUSE", "pay_reviewed", &["pay_reviewed"]),
            row("c1", "ALLOW", "pay_reviewed", &["pay_reviewed"]),
            row("c2", "PAUSE", "large_payments", &["pay_reviewed"]),
            row("c2", "ALLOW", "pay_reviewed", &["pay_reviewed"]),
            row("c3", "DENY", "large_hourly", &[]),
            row("c4", "DENY", "large_hourly", &[]),
            row("c5", "PAUSE", "large_payments", &["pay_reviewed"]),
        ]
    );
}

#[test]
fn the_smt_engine_decides_the_budget_traces_alike() {
    // `--engine both` turns any difference into a DENY `engine-disagreement`.
    for trace in [
        "budget-benign",
        "budget-attack",
        "budget-daily-benign",
        "budget-daily-attack",
        "budget-window-benign",
        "budget-window-attack",
    ] {
        assert_eq!(replay(trace, Some("both")), replay(trace, None), "{trace}");
    }
}
