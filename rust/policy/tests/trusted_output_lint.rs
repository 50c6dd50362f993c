//! The trusted-output lint (issue #27, point 6): a trusted `output` label
//! does not launder an untrusted argument; `check` says so where a policy
//! relies on it.

fn warnings(src: &str) -> Vec<String> {
    match agenra_policy::compile(src, "p") {
        Ok(c) => c.warnings.into_iter().map(|d| d.message).collect(),
        Err(e) => panic!("{e:?}"),
    }
}

const BASE: &str = r#"
    sinks net;
    sanitizer vouch trusts;
    tool web() { output <public, {}, untrusted>; }
    grant w: web quota unlimited;
"#;

#[test]
fn a_trusted_output_tool_with_arguments_that_may_be_untrusted_is_flagged() {
    let w = warnings(&format!(
        "{BASE} tool summarize(text: string) {{ output <public, {{}}, trusted>; }} grant s: summarize quota 3;"
    ));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains(
            "tool `summarize` declares a trusted output, but its argument `text` may be untrusted"
        ),
        "{}",
        w[0]
    );
    assert!(w[0].contains("does not launder"), "{}", w[0]);
}

#[test]
fn a_trusting_sanitizer_a_guarded_sink_or_no_untrusted_data_silences_it() {
    // A sanitizer that vouches.
    assert!(warnings(&format!(
        "{BASE} tool summarize(text: string) {{ output <public, {{}}, trusted>; sanitizer vouch; }} grant s: summarize quota 3;"
    ))
    .is_empty());
    // Every argument flows into a sink where untrusted flows are denied.
    assert!(warnings(&format!(
        "{BASE} tool run(cmd: string) {{ sink net; output <public, {{}}, trusted>; }} grant r: run quota 3; deny flow d: untrusted -> net;"
    ))
    .is_empty());
    // ... but not when an allow rule may exempt some.
    assert_eq!(
        warnings(&format!(
            "{BASE} tool run(cmd: string) {{ sink net; output <public, {{}}, trusted>; }} grant r: run quota 3; deny flow d: untrusted -> net; allow flow a: up to <public, {{}}, untrusted> -> net when cmd == \"ls\";"
        ))
        .len(),
        1
    );
    // No untrusted data anywhere: arguments are trusted.
    assert!(warnings(
        "tool summarize(text: string) { output <public, {}, trusted>; } grant s: summarize quota 3;"
    )
    .is_empty());
    // No parameters, or no explicit output clause.
    assert!(warnings(&format!(
        "{BASE} tool list() {{ output <public, {{}}, trusted>; }} tool t(x: string); grant l: list quota 3; grant g: t quota 1;"
    ))
    .is_empty());
}

#[test]
fn the_resource_parameter_only_selects_what_is_read() {
    assert!(warnings(&format!(
        "{BASE} tool fs.read(path: string) {{ resource path; output <public, {{}}, trusted>; }} grant r: fs.read quota 3;"
    ))
    .is_empty());
    assert_eq!(
        warnings(&format!(
            "{BASE} tool fs.grep(path: string, pattern: string) {{ resource path; output <public, {{}}, trusted>; }} grant r: fs.grep quota 3;"
        ))
        .len(),
        1
    );
}
