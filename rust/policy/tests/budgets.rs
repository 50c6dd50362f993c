//! `budget AMOUNT on PARAM [per tenant|per session]`: syntax, lowering,
//! the errors that name the grant and the place, and the canonical form.

use agenra_core::policy::{Budget, Quota};

const TOOLS: &str = "tool bank.pay(recipient: string, amount: decimal, cents: int, memo?: string, tags: list<int>);\n";

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

#[test]
fn a_budget_is_lowered_with_its_grant_parameter_and_scope() {
    let p = compile(&format!(
        "{TOOLS}grant small: bank.pay where amount <= 10 quota 3;\ngrant pay: bank.pay budget 5000.00 on amount;\ngrant team: bank.pay budget 700 on cents per tenant quota 9;\ngrant solo: bank.pay budget 1.5 on amount per session;\n"
    ));
    let d = |s: &str| s.parse::<agenra_core::Decimal>().unwrap();
    assert_eq!(
        p.budgets,
        vec![
            Budget {
                grant: 1,
                amount: d("5000"),
                param: 1,
                per_tenant: false
            },
            Budget {
                grant: 2,
                amount: d("700"),
                param: 2,
                per_tenant: true
            },
            Budget {
                grant: 3,
                amount: d("1.5"),
                param: 1,
                per_tenant: false
            },
        ]
    );
    // Without a quota clause, a budget grant's quota is unlimited.
    assert_eq!(p.grants[1].quota, Quota::Unlimited);
    assert_eq!(p.grants[2].quota, Quota::Limited(9));
    assert!(
        p.shared_grants.is_empty(),
        "a tenant budget is not a shared quota"
    );
    assert!(agenra_core::validate::validate(&p).is_ok());
    // Policies without budgets encode as before (no `budgets` field).
    let plain = compile(&format!("{TOOLS}grant a: bank.pay quota 1;\n"));
    let json = serde_json::to_value(&plain).unwrap();
    assert!(json.get("budgets").is_none());
}

#[test]
fn a_budget_must_be_spent_in_a_scalar_number() {
    assert_eq!(
        errors(&format!("{TOOLS}grant g: bank.pay budget 5 on recipient;\n")),
        vec!["2:31: error: grant `g` spends its budget in `recipient` of type `string`: a budget is spent in a `decimal` or `int` parameter"]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant g: bank.pay budget 5 on tags;\n")),
        vec!["2:31: error: grant `g` spends its budget in `tags` of type `list<int>`: a budget is spent in a `decimal` or `int` parameter"]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant g: bank.pay budget 5 on amont;\n")),
        vec!["2:31: error: grant `g` spends its budget in `amont`, but tool `bank.pay` has no such parameter"]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant g: bank.pay budget -5 on amount;\n")),
        vec!["2:26: error: the budget of grant `g` must not be negative"]
    );
    assert_eq!(
        errors(&format!(
            "{TOOLS}grant g: bank.pay budget \"5\" on amount;\n"
        )),
        vec!["2:26: error: expected a number, found string \"5\""]
    );
    assert_eq!(
        errors(&format!("{TOOLS}grant g: bank.pay budget 5 amount;\n")),
        vec!["2:28: error: expected `on PARAM` after the budget, found `amount`"]
    );
    assert_eq!(
        errors(&format!(
            "{TOOLS}grant g: bank.pay budget 5 on amount budget 6 on amount;\n"
        )),
        vec!["2:38: error: duplicate `budget` clause in grant `g`"]
    );
    // An optional parameter may carry a budget: a call without it is not
    // served by the grant (`docs/semantics.md`, "Budgets").
    let p = compile("tool t(a?: decimal);\ngrant g: t budget 1 on a;\n");
    assert_eq!(p.budgets.len(), 1);
}

#[test]
fn a_grant_with_a_budget_shadows_nothing() {
    let warnings = |src: &str| -> Vec<String> {
        match agenra_policy::compile(src, "test") {
            Ok(c) => c.warnings.iter().map(ToString::to_string).collect(),
            Err(e) => panic!("{e}"),
        }
    };
    // An unlimited grant with a budget runs out: the later grant serves then.
    assert!(warnings(&format!(
        "{TOOLS}grant a: bank.pay budget 100 on amount;\ngrant b: bank.pay quota 1 approval;\n"
    ))
    .is_empty());
    // Without the budget, `b` is never used.
    assert_eq!(
        warnings(&format!(
            "{TOOLS}grant a: bank.pay quota unlimited;\ngrant b: bank.pay quota 1 approval;\n"
        ))
        .len(),
        1
    );
}

#[test]
fn budgets_keep_their_form() {
    let src = "tool t(n: decimal);\ngrant a: t budget 5000.00   on n  per   tenant;\ngrant b: t quota 2 budget 7 on n per session approval;\ngrant c: t budget 0.5 on n;\n";
    let formatted = agenra_policy::format(src).unwrap();
    assert_eq!(
        formatted,
        "tool t(n: decimal);\ngrant a: t budget 5000.00 on n per tenant;\ngrant b: t quota 2 budget 7 on n per session approval;\ngrant c: t budget 0.5 on n;\n"
    );
    assert_eq!(
        agenra_policy::compile(src, "m").unwrap().policy,
        agenra_policy::compile(&formatted, "m").unwrap().policy
    );
}
