//! Object types (`docs/policy-language.md`, "Objects"): parameters with
//! named fields and lists of them, closed shapes refused with the path of
//! the first mismatch, tests on fields (`cfg.mode`, `edits.newText`), and
//! the formatter printing them back.

use agenra_core::decision::Reason;
use agenra_core::{CompiledPolicy, Event, StepOutput, Verdict};
use serde_json::json;

const SRC: &str = r#"policy "objects";
sinks fs;
tool edit_file(path: string, edits: {oldText: string, newText: string}[], dryRun?: bool) {
  resource path;
  sink fs on edits;
}
tool configure(cfg: {mode: string, level?: int, inner?: {`dry-run`: bool, tags: list<string>}}, note?: string);
grant edit: edit_file on prefix "/src/" where all edits.newText ends_with "\n" and !(any edits.oldText matches glob "*SECRET*") quota unlimited;
grant ro: configure where cfg.mode == "ro" and cfg.level != null quota unlimited;
grant deep: configure where cfg.mode == "rw" and `cfg.inner.dry-run` == true and cfg.inner.tags contains "safe" quota unlimited;
deny call no_level_9: configure when cfg.level >= 9;
"#;

fn compiled() -> agenra_policy::Compiled {
    match agenra_policy::compile(SRC, "x") {
        Ok(c) => c,
        Err(e) => panic!("{}", e.render("objects.agr", SRC)),
    }
}

fn call(id: &str, tool: &str, args: serde_json::Value) -> Event {
    let json = json!({"kind": "call", "id": id, "time": 0, "tool": tool, "args": args});
    match serde_json::from_value(json) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    }
}

fn decide(session: &mut agenra_core::Monitor, event: &Event) -> (Verdict, Reason) {
    match session.step(event) {
        Ok(StepOutput::Decision(d)) => (d.verdict, d.reason),
        other => panic!("{other:?}"),
    }
}

fn session() -> agenra_core::Monitor {
    match CompiledPolicy::new(compiled().policy) {
        Ok(c) => c.session(),
        Err(e) => panic!("{e}"),
    }
}

fn errors(src: &str) -> String {
    match agenra_policy::compile(src, "x") {
        Ok(c) => panic!("compiled: {:?}", c.policy.tools),
        Err(e) => e.render("x.agr", src),
    }
}

#[test]
fn object_types_compile_and_print_back() {
    let c = compiled();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let edit = &c.policy.tools[0];
    assert_eq!(
        edit.params[1].type_name(),
        "list<{oldText: string, newText: string}>"
    );
    assert_eq!(
        c.policy.tools[1].params[0].type_name(),
        "{mode: string, level?: int, inner?: {`dry-run`: bool, tags: list<string>}}"
    );
    let printed = match agenra_policy::format(SRC) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    assert!(
        printed.contains("edits: list<{oldText: string, newText: string}>"),
        "{printed}"
    );
    let again = match agenra_policy::compile(&printed, "x") {
        Ok(c) => c,
        Err(e) => panic!("{}", e.render("printed.agr", &printed)),
    };
    assert_eq!(
        again.policy, c.policy,
        "the printed form compiles to the same policy"
    );
    assert_eq!(agenra_policy::format(&printed).ok(), Some(printed));
}

#[test]
fn arguments_of_the_wrong_shape_are_denied_naming_the_field() {
    let mut s = session();
    let ok = call(
        "c1",
        "edit_file",
        json!({"path": "/src/a.rs", "edits": [{"oldText": "a", "newText": "b\n"}]}),
    );
    assert_eq!(decide(&mut s, &ok).0, Verdict::Allow);
    for (i, (edits, at, expected, got)) in [
        (
            json!([{"oldText": "a", "newText": "b\n"}, {"oldText": "a", "newText": 7}]),
            "edits[1].newText",
            "string",
            "int",
        ),
        (
            json!([{"oldText": "a", "newText": "b\n", "mode": "x"}]),
            "edits[0].mode",
            agenra_core::object::UNDECLARED,
            "string",
        ),
        (
            json!([{"oldText": "a"}]),
            "edits[0].newText",
            "string",
            agenra_core::object::MISSING,
        ),
        (
            json!({"oldText": "a", "newText": "b\n"}),
            "edits",
            "list<{oldText: string, newText: string}>",
            "object",
        ),
        (
            json!([{"oldText": "a", "newText": {"x": "b\n"}}]),
            "edits[0].newText",
            "string",
            "object",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let bad = call(
            &format!("bad{i}"),
            "edit_file",
            json!({"path": "/src/a.rs", "edits": edits}),
        );
        let (verdict, reason) = decide(&mut s, &bad);
        assert_eq!(verdict, Verdict::Deny, "{edits}");
        assert_eq!(
            reason,
            Reason::IllTyped {
                param: at.into(),
                expected: expected.into(),
                got: got.into()
            },
            "{edits}"
        );
    }
}

#[test]
fn tests_on_fields_decide_calls() {
    let mut s = session();
    let cases = [
        // Every newText must end with a newline, no oldText may hold SECRET.
        (
            "edit_file",
            json!({"path": "/src/a", "edits": [{"oldText": "x", "newText": "y\n"}, {"oldText": "z", "newText": "w\n"}]}),
            Verdict::Allow,
        ),
        (
            "edit_file",
            json!({"path": "/src/a", "edits": [{"oldText": "x", "newText": "y\n"}, {"oldText": "z", "newText": "w"}]}),
            Verdict::Deny,
        ),
        (
            "edit_file",
            json!({"path": "/src/a", "edits": [{"oldText": "a SECRET", "newText": "y\n"}]}),
            Verdict::Deny,
        ),
        (
            "edit_file",
            json!({"path": "/src/a", "edits": []}),
            Verdict::Allow,
        ),
        (
            "configure",
            json!({"cfg": {"mode": "ro", "level": 1}}),
            Verdict::Allow,
        ),
        // `cfg.level != null`: an absent optional field is null.
        ("configure", json!({"cfg": {"mode": "ro"}}), Verdict::Deny),
        (
            "configure",
            json!({"cfg": {"mode": "ro", "level": null}}),
            Verdict::Deny,
        ),
        (
            "configure",
            json!({"cfg": {"mode": "rw", "level": 1}}),
            Verdict::Deny,
        ),
        (
            "configure",
            json!({"cfg": {"mode": "ro", "level": 9}}),
            Verdict::Deny,
        ),
        (
            "configure",
            json!({"cfg": {"mode": "rw", "inner": {"dry-run": true, "tags": ["a", "safe"]}}}),
            Verdict::Allow,
        ),
        (
            "configure",
            json!({"cfg": {"mode": "rw", "inner": {"dry-run": false, "tags": ["safe"]}}}),
            Verdict::Deny,
        ),
        // A nested object with an undeclared field is refused however the
        // rest looks.
        (
            "configure",
            json!({"cfg": {"mode": "rw", "inner": {"dry-run": true, "tags": ["safe"], "x": 1}}}),
            Verdict::Deny,
        ),
        ("configure", json!({"cfg": {"mode": "rw"}}), Verdict::Deny),
    ];
    for (i, (tool, args, want)) in cases.into_iter().enumerate() {
        let e = call(&format!("c{i}"), tool, args.clone());
        assert_eq!(decide(&mut s, &e).0, want, "{tool} {args}");
    }
}

#[test]
fn ill_typed_field_tests_and_unknown_fields_do_not_compile() {
    let head = "tool t(cfg: {mode: string, n?: int}, xs: list<{a: string}>);\n";
    let err = errors(&format!("{head}grant g: t where cfg.mode > 3 quota 1;\n"));
    assert!(err.contains("parameter `cfg.mode` is string"), "{err}");
    let err = errors(&format!(
        "{head}grant g: t where cfg.modes == \"a\" quota 1;\n"
    ));
    assert!(err.contains("has no field `modes`"), "{err}");
    assert!(err.contains("did you mean `mode`"), "{err}");
    let err = errors(&format!("{head}grant g: t where cfg == \"a\" quota 1;\n"));
    assert!(err.contains("type mismatch"), "{err}");
    let err = errors(&format!(
        "{head}grant g: t where cfg.mode.x == \"a\" quota 1;\n"
    ));
    assert!(err.contains("has no fields"), "{err}");
    let err = errors(&format!(
        "{head}grant g: t where any cfg.mode == \"a\" quota 1;\n"
    ));
    assert!(err.contains("applies to list parameters"), "{err}");
    // A field of a list of objects is a list: quantifiers apply.
    assert!(agenra_policy::compile(
        &format!("{head}grant g: t where any xs.a == \"a\" quota 1;\n"),
        "x"
    )
    .is_ok());
    let err = errors("tool t(cfg: {a: string, a: int});\n");
    assert!(err.contains("duplicate field `a`"), "{err}");
    let err = errors("tool t(cfg: object);\n");
    assert!(err.contains("lists its fields"), "{err}");
    let err = errors("tool t(cfg: {a: string}) { resource cfg; }\n");
    assert!(err.contains("must be a string"), "{err}");
    let deep = format!(
        "tool t(x: {}string{});\n",
        "{a: ".repeat(20),
        "}".repeat(20)
    );
    let err = errors(&deep);
    assert!(err.contains("nest more than"), "{err}");
}

#[test]
fn flow_rules_name_fields_across_tools() {
    let src = r#"sinks net;
tool send(msg: {to: string, body: string}) { sink net; }
tool post(msg: {to: string}, extra?: string) { sink net; }
grant s: send quota unlimited;
grant p: post quota unlimited;
deny call evil: send when msg.to ends_with "@evil";
"#;
    let c = match agenra_policy::compile(src, "x") {
        Ok(c) => c,
        Err(e) => panic!("{}", e.render("x.agr", src)),
    };
    let mut s = match CompiledPolicy::new(c.policy) {
        Ok(c) => c.session(),
        Err(e) => panic!("{e}"),
    };
    let ok = call("1", "send", json!({"msg": {"to": "a@corp", "body": "hi"}}));
    assert_eq!(decide(&mut s, &ok).0, Verdict::Allow);
    let bad = call("2", "send", json!({"msg": {"to": "a@evil", "body": "hi"}}));
    assert_eq!(decide(&mut s, &bad).0, Verdict::Deny);
}
