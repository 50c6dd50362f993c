//! The canonical form: exact output, idempotence, comments and round-trip.

const FULL: &str = include_str!("data/coding_agent.agr");

#[test]
fn messy_input_gets_the_canonical_form() {
    let messy = "// header\n\n\npolicy   \"a\tb\"  ;   // trailing\nlevels public<secret;\n\
tool t(p:string,n:int){   // after brace\n  resource p; // tail\n  // closing\n\n}\ntool u ( ) { }\n\
grant g : t // inside\n   on prefix \"x\\\\\" where n in [1,2] quota 1\n   ;\n\n\n\
deny flow f: category {web} and sensitivity>=secret -> s;\ndeny path p: reads(any) -> call \"t*\" and to s reset on any;\n\
category web; sink s;\n// end\n";
    let expected = "// header\n\npolicy \"a\\tb\"; // trailing\nlevels public < secret;\n\
tool t(p: string, n: int) {\n  // after brace\n  resource p; // tail\n  // closing\n}\ntool u();\n\
// inside\ngrant g: t on prefix \"x\\\\\" where n in [1, 2] quota 1;\n\n\
deny flow f: category web and sensitivity >= secret -> s;\ndeny path p: reads(any) -> call \"t*\" and to s reset on any;\n\
categories web;\nsinks s;\n// end\n";
    let formatted = agenra_policy::format(messy).unwrap();
    assert_eq!(formatted, expected);
    assert_eq!(agenra_policy::format(&formatted).unwrap(), formatted);
    assert_eq!(
        agenra_policy::compile(messy, "m").unwrap().policy,
        agenra_policy::compile(&formatted, "m").unwrap().policy
    );
}

#[test]
fn the_full_policy_round_trips() {
    let formatted = agenra_policy::format(FULL).unwrap();
    assert_eq!(agenra_policy::format(&formatted).unwrap(), formatted);
    assert_eq!(
        agenra_policy::compile(FULL, "x").unwrap().policy,
        agenra_policy::compile(&formatted, "x").unwrap().policy
    );
    assert_eq!(FULL.matches("//").count(), formatted.matches("//").count());
    // Only the singular declaration keywords change.
    let changed: Vec<(&str, &str)> = FULL
        .lines()
        .zip(formatted.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        vec![
            ("category web;", "categories web;"),
            ("sink email;", "sinks email;")
        ]
    );
}

#[test]
fn format_reports_syntax_errors_only() {
    // Unknown names are a compile matter; formatting needs only a parse.
    assert_eq!(
        agenra_policy::format("grant g:nope quota 1;").unwrap(),
        "grant g: nope quota 1;\n"
    );
    let err = agenra_policy::format("grant g nope;").unwrap_err();
    assert_eq!(err.to_string(), "1:9: error: expected `:`, found `nope`");
    assert_eq!(agenra_policy::format("").unwrap(), "");
    assert_eq!(
        agenra_policy::format("\n// only a comment\n").unwrap(),
        "// only a comment\n"
    );
}

#[test]
fn quota_scopes_keep_their_form() {
    let src = "tool t();\ngrant a: t quota 5  per   tenant;\ngrant b: t quota 2 per session approval;\ngrant c: t quota unlimited;\n";
    let formatted = agenra_policy::format(src).unwrap();
    assert_eq!(
        formatted,
        "tool t();\ngrant a: t quota 5 per tenant;\ngrant b: t quota 2 per session approval;\ngrant c: t quota unlimited;\n"
    );
    assert_eq!(
        agenra_policy::compile(src, "m").unwrap().policy,
        agenra_policy::compile(&formatted, "m").unwrap().policy
    );
}
