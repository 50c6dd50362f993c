//! Declared token shapes (`token order_id = "ORD-" digit{6};`): what they
//! compile to, `fmt` keeping them, and every compile error with its
//! line:column.

use agenra_core::token_shapes::{CharClass, ShapePart};
use agenra_core::tokens::TokenKind;
use agenra_core::value::Cond;

const TOOLS: &str = "tool send(body: string);\n";

fn errors(src: &str) -> Vec<String> {
    match agenra_policy::compile(src, "test") {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e.diagnostics.iter().map(ToString::to_string).collect(),
    }
}

fn error(src: &str) -> String {
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    errs.into_iter().next().unwrap_or_default()
}

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

#[test]
fn bad_shapes_name_line_and_column() {
    let cases = [
        (
            "token t = digit{0,3};\n",
            "1:11: error: token shape `t`: the shape can match the empty text: it needs a literal or a class repeated at least once",
        ),
        (
            "token t = \"A\" digits{2};\n",
            "1:15: error: unknown character class `digits`: `digit`, `upper`, `lower`, `letter`, `alnum` or `hex` (did you mean `digit`?)",
        ),
        (
            "token t = \"A\" digit{3,2};\n",
            "1:15: error: token shape `t`: part 1: repetition {3,2} must have 0 <= min <= max, 1 <= max <= 64",
        ),
        (
            "token t = \"A\" digit{65};\n",
            "1:21: error: a repetition count must be 0 to 64, not 65",
        ),
        (
            "token t = \"A\" \"b c\";\n",
            "1:15: error: token shape `t`: part 1: literal \"b c\" must be printable ASCII without spaces, at least one character",
        ),
        (
            "token t = hex{64} hex{64};\n",
            "1:11: error: token shape `t`: the shape matches up to 128 characters; at most 120",
        ),
        ("token t = ;\n", "1:11: error: expected a string or a character class (`digit`, `upper`, `lower`, `letter`, `alnum`, `hex`), found `;`"),
        ("token t = \"A\" digit{1\n", "2:1: error: expected `}`, found end of file"),
    ];
    for (src, want) in cases {
        assert_eq!(error(src), want, "{src}");
    }
}

#[test]
fn kind_names_are_unique_and_known() {
    assert_eq!(
        error("token url = \"U\" digit;\n"),
        "1:7: error: duplicate token kind `url` (it is built in)"
    );
    assert_eq!(
        error("token token = \"U\" digit;\n"),
        "1:7: error: duplicate token kind `token` (it is built in)"
    );
    assert_eq!(
        error("token a = \"U\" digit;\ntoken a = \"V\" digit;\n"),
        "2:7: error: duplicate token kind `a` (first declared at 1:7)"
    );
    assert_eq!(
        error(&format!(
            "{TOOLS}token order_id = \"ORD-\" digit{{6}};\ndeny call r: send when any order_ids in body from untrusted;\n"
        )),
        "3:28: error: unknown token kind `order_ids`: `url`, `email`, `iban`, `phone`, `quantity`, `token` or a kind declared with `token NAME = SHAPE;` (did you mean `order_id`?)"
    );
}
