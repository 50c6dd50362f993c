//! Declared token shapes (`token order_id = "ORD-" digit{6};`): what they
//! compile to and `fmt` keeping them (their compile errors are in
//! `diagnostics.rs`).

use agenra_core::token_shapes::{CharClass, ShapePart};
use agenra_core::tokens::TokenKind;
use agenra_core::value::Cond;

const TOOLS: &str = "tool send(body: string);\n";

#[test]
fn a_declared_kind_compiles_to_its_shape_and_index() {
    let src = format!(
        "{TOOLS}token order_id = \"ORD-\" digit{{6}};\ntoken ticket = upper{{2,3}} \"-\" alnum;\n\
         deny call r: send when any ticket in body from untrusted or all order_id in body from user;\n"
    );
    let p = agenra_policy::compile(&src, "test")
        .expect("compiles")
        .policy;
    let names: Vec<&str> = p.token_shapes.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["order_id", "ticket"]);
    assert_eq!(
        p.token_shapes[1].parts(),
        [
            ShapePart::Class {
                class: CharClass::Upper,
                min: 2,
                max: 3
            },
            ShapePart::Literal("-".into()),
            ShapePart::Class {
                class: CharClass::Alnum,
                min: 1,
                max: 1
            },
        ]
    );
    let Cond::Or(cs) = &p.call_rules[0].when else {
        panic!("{:?}", p.call_rules[0].when)
    };
    let kinds: Vec<Option<TokenKind>> = cs
        .iter()
        .map(|c| match c {
            Cond::Tokens { kind, .. } => *kind,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [Some(TokenKind::Declared(1)), Some(TokenKind::Declared(0))]
    );
}

#[test]
fn policies_without_shapes_keep_their_encoding() {
    let src = format!("{TOOLS}deny call r: send when any url in body from untrusted;\n");
    let p = agenra_policy::compile(&src, "test")
        .expect("compiles")
        .policy;
    let json = serde_json::to_string(&p).unwrap();
    assert!(!json.contains("token_shapes"), "{json}");
    let with = format!("{TOOLS}token t = \"T\" digit;\n");
    let q = agenra_policy::compile(&with, "test")
        .expect("compiles")
        .policy;
    let json = serde_json::to_string(&q).unwrap();
    assert!(json.contains("\"token_shapes\""), "{json}");
    // Read back, the shape is checked and matches again.
    let back: agenra_core::Policy = serde_json::from_str(&json).unwrap();
    assert_eq!(back, q);
    assert!(back.token_shapes[0].matches_whole("T7"));
}

#[test]
fn fmt_keeps_the_shapes() {
    let src = "token a = \"ORD-\" digit{6};\ntoken b = upper{2,3} \"-\" alnum;\n";
    let out = agenra_policy::format(src).expect("formats");
    assert_eq!(out, src);
}
