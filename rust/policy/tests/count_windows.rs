//! Counts over sliding time windows (`deny count big: at most 2 call
//! bank.pay where amount > 1000 within 1h;`): syntax, lowering, errors, the
//! canonical form, and decisions on the window's edges.

use agenra_core::decision::{Rule, Verdict};
use agenra_core::event::{Event, Resolve};
use agenra_core::policy::CountWindow;
use agenra_core::{Call, Monitor};
use serde_json::json;

const TOOLS: &str = "tool bank.pay(recipient: string, amount: decimal);\n\
                     tool bank.reset();\n\
                     grant p: bank.pay quota unlimited;\n\
                     grant r: bank.reset quota unlimited;\n";

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

fn pay(id: &str, time: u64, amount: &str) -> Call {
    Call::new(id, "bank.pay", time)
        .arg("recipient", json!("acme"))
        .arg("amount", json!(amount))
}

fn verdict(m: &mut Monitor, call: &Call) -> Verdict {
    m.authorize(call).expect("a well-formed call").verdict
}

#[test]
fn within_is_lowered_into_count_windows() {
    let p = compile(&format!(
        "{TOOLS}deny path s: call bank.reset -> call bank.pay;\n\
         deny count big: at most 2 call bank.pay where amount > 1000 within 1h;\n\
         pause count all: at most 5 call bank.pay;\n\
         pause count fast: at most 1 call bank.pay within 30s reset on call bank.reset;\n"
    ));
    assert_eq!(
        p.count_windows,
        vec![
            CountWindow {
                rule: 1,
                secs: 3_600
            },
            CountWindow { rule: 3, secs: 30 },
        ]
    );
    assert_eq!(p.count_window(1), Some(3_600));
    assert_eq!(p.count_window(2), None);
    // Without a window, the encoding has no `count_windows` key (content
    // hashes of existing policies stay).
    let plain = compile(&format!("{TOOLS}deny count c: at most 2 call bank.pay;\n"));
    let json = serde_json::to_string(&plain).unwrap();
    assert!(!json.contains("count_windows"), "{json}");
}

#[test]
fn bad_windows_are_errors_naming_the_place() {
    let e = errors(&format!(
        "{TOOLS}deny count c: at most 2 call bank.pay within 0m;\n"
    ));
    assert!(e[0].contains("at least 1 second"), "{e:?}");
    let e = errors(&format!(
        "{TOOLS}deny count c: at most 2 call bank.pay within fortnight;\n"
    ));
    assert!(e[0].contains("after `within`"), "{e:?}");
    let e = errors(&format!(
        "{TOOLS}deny count c: at most 2 call bank.pay within 3y;\n"
    ));
    assert!(e[0].contains("window unit"), "{e:?}");
    // A window on a path rule is not part of the syntax.
    let e = errors(&format!(
        "{TOOLS}deny path c: call bank.reset -> call bank.pay within 1h;\n"
    ));
    assert!(!e.is_empty());
}

#[test]
fn windows_keep_their_form() {
    let src = format!(
        "{TOOLS}deny count c: at most 2 call bank.pay where amount > 1000 within  3600 s reset on call bank.reset;\n"
    );
    let formatted = agenra_policy::format(&src).unwrap();
    assert!(
        formatted.contains(
            "deny count c: at most 2 call bank.pay where amount > 1000 within hour reset on call bank.reset;"
        ),
        "{formatted}"
    );
    assert_eq!(
        agenra_policy::compile(&src, "m").unwrap().policy,
        agenra_policy::compile(&formatted, "m").unwrap().policy
    );
}

#[test]
fn a_count_looks_back_over_a_sliding_window_exclusive_of_its_start() {
    let p = compile(&format!(
        "{TOOLS}deny count big: at most 2 call bank.pay where amount > 1000 within 1h;\n"
    ));
    let mut m = Monitor::new(p).unwrap();
    assert_eq!(verdict(&mut m, &pay("a", 0, "1500")), Verdict::Allow);
    // Small payments are not counted.
    assert_eq!(verdict(&mut m, &pay("s", 5, "10")), Verdict::Allow);
    assert_eq!(verdict(&mut m, &pay("b", 10, "2000")), Verdict::Allow);
    let d = m.authorize(&pay("c", 20, "1001")).unwrap();
    assert_eq!((d.verdict, d.rule), (Verdict::Deny, Rule::Path(0)));
    // At 3600 "a" (0) is exactly one window old: out of the window (a call
    // admitted at `t` counts while `now - t < 3600`), so only "b" counts.
    assert_eq!(verdict(&mut m, &pay("d", 3_600, "5000")), Verdict::Allow);
    // b (10) and d (3600) are inside the window at 3609.
    assert_eq!(verdict(&mut m, &pay("e", 3_609, "5000")), Verdict::Deny);
    // At 3610, b is out; d alone counts.
    assert_eq!(verdict(&mut m, &pay("f", 3_610, "5000")), Verdict::Allow);
}

#[test]
fn a_running_call_counts_and_a_paused_one_from_its_approval() {
    let p = compile(&format!(
        "{TOOLS}pause count fast: at most 1 call bank.pay within 10s;\n"
    ));
    let mut m = Monitor::new(p).unwrap();
    assert_eq!(verdict(&mut m, &pay("a", 0, "1")), Verdict::Allow);
    // In flight (running, no result yet): "a" counts.
    assert_eq!(verdict(&mut m, &pay("b", 5, "1")), Verdict::Pause);
    // Paused, not yet admitted: "b" does not count, "a" still does.
    assert_eq!(verdict(&mut m, &pay("c", 9, "1")), Verdict::Pause);
    // "a" left the window at 10; approving "b" at 12 admits it at 12.
    let approve = |id: &str, t: u64| {
        Event::Approve(Resolve {
            session: None,
            call: id.into(),
            time: Some(t),
        })
    };
    m.step(&approve("b", 12)).unwrap();
    // "c" is re-checked at its approval (13): "b" (12) is in the window,
    // the approval is not stopped by a pause rule, so it is admitted too.
    m.step(&approve("c", 13)).unwrap();
    // At 21, "b" (12) and "c" (13) are both inside: paused.
    assert_eq!(verdict(&mut m, &pay("d", 21, "1")), Verdict::Pause);
    // At 23 both are 10s or more old.
    assert_eq!(verdict(&mut m, &pay("e", 23, "1")), Verdict::Allow);
}

#[test]
fn reset_empties_the_window() {
    let p = compile(&format!(
        "{TOOLS}deny count fast: at most 1 call bank.pay within 1h reset on call bank.reset;\n"
    ));
    let mut m = Monitor::new(p).unwrap();
    assert_eq!(verdict(&mut m, &pay("a", 0, "1")), Verdict::Allow);
    assert_eq!(verdict(&mut m, &pay("b", 1, "1")), Verdict::Deny);
    assert_eq!(
        verdict(&mut m, &Call::new("r", "bank.reset", 2)),
        Verdict::Allow
    );
    assert_eq!(verdict(&mut m, &pay("c", 3, "1")), Verdict::Allow);
    assert_eq!(verdict(&mut m, &pay("d", 4, "1")), Verdict::Deny);
}

#[test]
fn a_long_session_under_a_window_decides_like_a_short_one() {
    // 10,000 calls, one a second, under `at most 3 within 10s`: every call
    // sees the calls admitted in the 9 seconds before it, never the whole
    // history (the monitor keeps at most 3 times per rule).
    let p = compile(&format!(
        "{TOOLS}deny count fast: at most 3 call bank.pay within 10s;\n"
    ));
    let mut m = Monitor::new(p).unwrap();
    let mut admitted: Vec<u64> = Vec::new();
    for t in 0..10_000u64 {
        let inside = admitted.iter().filter(|&&a| t - a < 10).count();
        let want = if inside >= 3 {
            Verdict::Deny
        } else {
            Verdict::Allow
        };
        let got = verdict(&mut m, &pay(&format!("c{t}"), t, "1"));
        assert_eq!(got, want, "at {t}");
        if got == Verdict::Allow {
            admitted.push(t);
        }
        admitted.retain(|&a| t - a < 10);
    }
}
