//! What the approval-bypass warning says is what the monitor does: once the
//! approval grant's units are reserved, the broader grant after it admits
//! the same call without asking anyone; with the fix, it PAUSEs.

use agenra_core::{CompiledPolicy, Event, StepOutput, Verdict};

fn session(src: &str) -> (agenra_core::Monitor, Vec<String>) {
    let c = match agenra_policy::compile(src, "x") {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let warnings = c.warnings.iter().map(ToString::to_string).collect();
    match CompiledPolicy::new(c.policy) {
        Ok(p) => (p.session(), warnings),
        Err(e) => panic!("{e}"),
    }
}

fn pay(s: &mut agenra_core::Monitor, id: &str) -> (Verdict, String) {
    let json = serde_json::json!({"kind": "call", "id": id, "time": 0, "tool": "bank.pay", "args": {"to": "bob", "amount": 500}});
    let event: Event = match serde_json::from_value(json) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    match s.step(&event) {
        Ok(StepOutput::Decision(d)) => {
            let grant = d
                .grants
                .first()
                .and_then(|g| s.policy().grants.get(*g))
                .map_or(String::new(), |g| g.name.clone());
            (d.verdict, grant)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_warned_bypass_happens_and_the_fix_removes_it() {
    let src = "tool bank.pay(to: string, amount: int);\ngrant big: bank.pay where amount > 100 quota 1 approval;\ngrant any_pay: bank.pay quota 10;\n";
    let (mut s, warnings) = session(src);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("2:7: warning: grant `big` (2:7) requires approval, but the later grant `any_pay` (3:7)"),
        "{warnings:?}"
    );
    assert_eq!(pay(&mut s, "p1"), (Verdict::Pause, "big".into()));
    // The unit of `big` is reserved: the same large payment runs unasked.
    assert_eq!(pay(&mut s, "p2"), (Verdict::Allow, "any_pay".into()));

    let fixed = src.replace("bank.pay quota 10;", "bank.pay quota 10 approval;");
    let (mut s, warnings) = session(&fixed);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(pay(&mut s, "p1"), (Verdict::Pause, "big".into()));
    assert_eq!(pay(&mut s, "p2"), (Verdict::Pause, "any_pay".into()));
}
