//! Quoted names (`` `get-tiny-image` ``): real MCP tool and parameter names
//! compile to their plain names, so events carrying those names are decided.

use agenra_core::{CompiledPolicy, Event, StepOutput, Verdict};

/// The everything server's tools, named as the server names them.
const SRC: &str = r#"policy "everything";
sinks net;
tool `get-tiny-image`();
tool `annotated-message`(`message-type`: string, `include-image`?: bool) {
  sink net on `message-type`;
}
tool longRunningOperation(duration: int, steps: int);
tool `fs.read-file`(`file path`: string, `agent`: string) { resource `file path`; }
grant tiny: `get-tiny-image` quota 2;
grant msg: `annotated-message` where `message-type` in ["error", "success"] and `include-image` != true quota unlimited;
grant long: longRunningOperation where duration <= 10 quota 1;
grant read: `fs.read-file` on prefix "docs/" where `agent` == "me" quota unlimited;
deny call no_debug: `annotated-message` when `message-type` == "debug";
deny path no_image_then_message: call `get-tiny-image` -> call `annotated-message`;
"#;

fn compiled() -> agenra_policy::Compiled {
    match agenra_policy::compile(SRC, "x") {
        Ok(c) => c,
        Err(e) => panic!("{}", e.render("everything.agr", SRC)),
    }
}

fn call(id: &str, tool: &str, args: serde_json::Value) -> Event {
    let json = serde_json::json!({"kind": "call", "id": id, "time": 0, "tool": tool, "args": args});
    match serde_json::from_value(json) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    }
}

fn verdict(session: &mut agenra_core::Monitor, event: &Event) -> Verdict {
    match session.step(event) {
        Ok(StepOutput::Decision(d)) => d.verdict,
        other => panic!("{other:?}"),
    }
}

#[test]
fn quoted_names_compile_to_the_plain_names() {
    let c = compiled();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let p = &c.policy;
    let tools: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        [
            "get-tiny-image",
            "annotated-message",
            "longRunningOperation",
            "fs.read-file"
        ]
    );
    let params: Vec<&str> = p.tools[1].params.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(params, ["message-type", "include-image"]);
    let params: Vec<&str> = p.tools[3].params.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(params, ["file path", "agent"]);
    assert_eq!(p.tools[3].resource, Some(0));
    // Quoting a name that needs no quotes changes nothing.
    let plain = SRC.replace("longRunningOperation", "`longRunningOperation`");
    match agenra_policy::compile(&plain, "x") {
        Ok(again) => assert_eq!(again.policy, c.policy),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn calls_to_hyphenated_tools_are_decided_on_their_names() {
    let compiled = match CompiledPolicy::new(compiled().policy) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let mut s = compiled.session();
    let msg = |id: &str, kind: &str| {
        call(
            id,
            "annotated-message",
            serde_json::json!({"message-type": kind, "include-image": false}),
        )
    };
    assert_eq!(verdict(&mut s, &msg("m1", "error")), Verdict::Allow);
    assert_eq!(verdict(&mut s, &msg("m2", "debug")), Verdict::Deny);
    assert_eq!(verdict(&mut s, &msg("m3", "info")), Verdict::Deny);
    let read = |id: &str, path: &str, agent: &str| {
        call(
            id,
            "fs.read-file",
            serde_json::json!({"file path": path, "agent": agent}),
        )
    };
    assert_eq!(
        verdict(&mut s, &read("r1", "docs/a.md", "me")),
        Verdict::Allow
    );
    assert_eq!(
        verdict(&mut s, &read("r2", "src/a.rs", "me")),
        Verdict::Deny
    );
    assert_eq!(
        verdict(&mut s, &read("r3", "docs/a.md", "you")),
        Verdict::Deny
    );
    // The path rule names both hyphenated tools.
    let tiny = call("t1", "get-tiny-image", serde_json::json!({}));
    assert_eq!(verdict(&mut s, &tiny), Verdict::Allow);
    assert_eq!(verdict(&mut s, &msg("m4", "success")), Verdict::Deny);
    // A name the policy does not declare is still unknown.
    let other = call("x1", "get_tiny_image", serde_json::json!({}));
    assert_eq!(verdict(&mut s, &other), Verdict::Deny);
}

#[test]
fn quoted_names_round_trip_through_the_formatter() {
    let formatted = match agenra_policy::format(SRC) {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    assert!(
        formatted.contains("tool `annotated-message`(`message-type`: string, `include-image`?: bool) {\n  sink net on `message-type`;\n}"),
        "{formatted}"
    );
    assert!(
        formatted.contains("grant read: `fs.read-file` on prefix \"docs/\" where `agent` == \"me\" quota unlimited;"),
        "{formatted}"
    );
    assert_eq!(
        agenra_policy::format(&formatted).ok(),
        Some(formatted.clone())
    );
    match agenra_policy::compile(&formatted, "x") {
        Ok(again) => assert_eq!(again.policy, compiled().policy),
        Err(e) => panic!("{e}"),
    }
    // Backticks and backslashes in a name are escaped; a quoted bare word
    // stays quoted (it may be a parameter called `agent`).
    let src =
        "tool `a\\`b\\\\c`(`agent`: int);\ngrant g: `a\\`b\\\\c` where `agent` > 1 quota 1;\n";
    assert_eq!(agenra_policy::format(src).ok().as_deref(), Some(src));
    match agenra_policy::compile(src, "x") {
        Ok(c) => assert_eq!(c.policy.tools[0].name, "a`b\\c"),
        Err(e) => panic!("{e}"),
    }
}

fn errors(src: &str) -> Vec<String> {
    match agenra_policy::compile(src, "x") {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e.diagnostics.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn bad_quoted_names_are_reported_with_line_and_column() {
    assert_eq!(
        errors("tool `get-tiny-image`();\ngrant g: `get-tiny-imag` quota 1;"),
        vec!["2:10: error: unknown tool `get-tiny-imag` (did you mean `get-tiny-image`?)"]
    );
    assert_eq!(
        errors("tool t(`file-path`: string);\ngrant g: t where `file_path` == \"x\" quota 1;"),
        vec!["2:18: error: tool `t` has no parameter `file_path` (did you mean `file-path`?)"]
    );
    assert_eq!(
        errors("tool t(`a`: string, a: int);"),
        vec!["1:21: error: duplicate parameter `a` (first declared at 1:8)"]
    );
    assert_eq!(
        errors("tool `c4\u{202e}gnp`();"),
        vec!["1:9: error: quoted name contains U+202E (RIGHT-TO-LEFT OVERRIDE): names may not hold control, bidirectional or invisible characters"]
    );
    assert_eq!(errors("tool ``();"), vec!["1:6: error: empty quoted name"]);
    assert_eq!(
        errors("tool get-tiny-image();"),
        vec!["1:6: error: `get-tiny-image` contains `-`; a name with characters other than letters, digits, `_` and `.` is written in backticks: `get-tiny-image`"]
    );
}
