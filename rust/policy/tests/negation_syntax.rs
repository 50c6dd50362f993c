//! The syntax of issue #27's new forms: `not OP`, `any|all x in LIST: ...`
//! and `provenance MODE on PARAM`; their canonical form, what they compile
//! to, and the errors for what they refuse.

use agenra_core::policy::ProvenanceMode;
use agenra_core::{ArgOp, Cond, Quant, Value};

fn errors(src: &str) -> Vec<String> {
    match agenra_policy::compile(src, "p") {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => e.diagnostics.into_iter().map(|d| d.message).collect(),
    }
}

const SRC: &str = r#"sets contacts;
sinks mail;
tool send(to: list<string>, cc?: string, n: int) {
  sink mail;
  provenance exact on n;
  provenance tokens on to, cc;
}
grant g: send where cc not ends_with "@evil.com" and all x in to: (x in contacts or x not matches glob "*@*.biz") quota 1;
deny call c: send when any x in to: !(x in contacts) and n not > 5;
"#;

#[test]
fn the_new_forms_print_canonically_and_round_trip() {
    let messy = SRC
        .replace(": (", ":(")
        .replace("not ends_with", "not   ends_with");
    let formatted = agenra_policy::format(&messy).expect("formats");
    assert_eq!(formatted, SRC);
    assert_eq!(
        agenra_policy::format(&formatted).expect("formats"),
        formatted
    );
    let a = agenra_policy::compile(&messy, "p")
        .expect("compiles")
        .policy;
    let b = agenra_policy::compile(SRC, "p").expect("compiles").policy;
    assert_eq!(a, b);
}

#[test]
fn the_new_forms_compile_to_core_conditions() {
    let p = agenra_policy::compile(SRC, "p").expect("compiles").policy;
    // In a grant (it admits), `not` needs a present value.
    assert_eq!(
        p.grants[0].args[0],
        Cond::And(vec![
            Cond::Test {
                param: 1,
                quant: Quant::All,
                op: ArgOp::Ne(Value::Null)
            },
            Cond::Not(Box::new(Cond::Test {
                param: 1,
                quant: Quant::Any,
                op: ArgOp::Suffix("@evil.com".into())
            })),
        ])
    );
    // On an element, `not` is plain negation.
    let Cond::Each { param, quant, body } = &p.grants[0].args[1] else {
        panic!("{:?}", p.grants[0].args[1]);
    };
    assert_eq!((*param, *quant), (0, Quant::All));
    assert_eq!(
        **body,
        Cond::Or(vec![
            Cond::Elem(ArgOp::InSet(0)),
            Cond::Not(Box::new(Cond::Elem(ArgOp::Matches(
                agenra_core::Pattern::Glob("*@*.biz".into())
            )))),
        ])
    );
    // In a deny rule (it refuses), `not` holds on a missing value.
    let Cond::And(parts) = &p.call_rules[0].when else {
        panic!("{:?}", p.call_rules[0].when);
    };
    assert_eq!(
        parts[1],
        Cond::Not(Box::new(Cond::Test {
            param: 2,
            quant: Quant::Any,
            op: ArgOp::Gt(5.into())
        }))
    );
    assert_eq!(p.provenance_mode(0, 0), ProvenanceMode::Tokens);
    assert_eq!(p.provenance_mode(0, 1), ProvenanceMode::Tokens);
    assert_eq!(p.provenance_mode(0, 2), ProvenanceMode::Exact);
    assert_eq!(p.provenance_mode(1, 0), ProvenanceMode::Words);
}

#[test]
fn under_bang_a_grant_condition_refuses() {
    let p = agenra_policy::compile(
        "tool t(a?: string); grant g: t where !(a not ends_with \"x\") quota 1;",
        "p",
    )
    .expect("compiles")
    .policy;
    // Inside `!`, the negated test is the refusing form, so the grant is
    // `!!(a ends_with "x")`: an absent `a` is not served.
    let c = &p.grants[0].args[0];
    assert!(!c.eval(&[Value::Null], 0, &[]));
    assert!(c.eval(&[Value::Str("yx".into())], 0, &[]));
    assert!(!c.eval(&[Value::Str("y".into())], 0, &[]));
}

#[test]
fn what_the_new_forms_refuse() {
    let t = "sets s; tool t(to: list<string>, a?: string, n: int) { fact f when output not ends_with \"x\"; } facts f;";
    let e = errors(&format!(
        "{t} grant g: t where a not not ends_with \"x\" quota 1;"
    ));
    assert!(e.iter().any(|m| m.contains("not another `not`")), "{e:?}");
    let e = errors(&format!("{t} grant g: t where a not == null quota 1;"));
    assert!(
        e.iter().any(|m| m.contains("write `== null` or `!= null`")),
        "{e:?}"
    );
    let e = errors(&format!(
        "{t} grant g: t where any x in to: (any y in to: y == \"b\") quota 1;"
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("per-element test inside another")),
        "{e:?}"
    );
    let e = errors(&format!(
        "{t} grant g: t where any agent in to: agent == main quota 1;"
    ));
    assert!(
        e.iter().any(|m| m.contains("keyword in conditions")),
        "{e:?}"
    );
    let e = errors(&format!(
        "{t} grant g: t where any x in a: x == \"b\" quota 1;"
    ));
    assert!(
        e.iter().any(|m| m.contains("applies to list parameters")),
        "{e:?}"
    );
    let e = errors(&format!("{t} grant g: t where any x in to: x > 3 quota 1;"));
    assert!(e.iter().any(|m| m.contains("type mismatch")), "{e:?}");
    let e = errors(&format!(
        "{t} grant g: t where n not starts_with \"1\" quota 1;"
    ));
    assert!(e.iter().any(|m| m.contains("type mismatch")), "{e:?}");
    assert!(
        e.iter()
            .any(|m| m.contains("not supported in a fact's output test")),
        "{e:?}"
    );
    let e = errors("tool t(a: string) { provenance loose on a; }");
    assert!(
        e.iter()
            .any(|m| m.contains("unknown provenance mode `loose`")),
        "{e:?}"
    );
    let e = errors("tool t(a: string) { provenance off on a; provenance exact on a; }");
    assert!(e.iter().any(|m| m.contains("declared twice")), "{e:?}");
    let e = errors("tool t(a: string) { provenance off on b; }");
    assert!(
        e.iter().any(|m| m.contains("has no parameter `b`")),
        "{e:?}"
    );
}

#[test]
fn a_set_membership_test_after_any_is_not_a_per_element_test() {
    let p = agenra_policy::compile(
        "sets s; tool t(to: list<string>); grant g: t where any to in s quota 1;",
        "p",
    )
    .expect("compiles")
    .policy;
    assert_eq!(
        p.grants[0].args[0],
        Cond::Test {
            param: 0,
            quant: Quant::Any,
            op: ArgOp::InSet(0)
        }
    );
}
