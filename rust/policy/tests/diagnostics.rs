//! Every error and warning kind: its message and its line:column.

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

fn warnings(src: &str) -> Vec<String> {
    match agenra_policy::compile(src, "test") {
        Ok(c) => c.warnings.iter().map(ToString::to_string).collect(),
        Err(e) => panic!("{e}"),
    }
}

const TOOLS: &str =
    "sinks net;\ntool fs.read(path: string, n: int) { resource path; sink net; }\ntool ping();\n";

// ---- syntax -----------------------------------------------------------------

#[test]
fn syntax_errors_name_what_was_expected() {
    assert_eq!(
        error("grant g fs.read quota 1;"),
        "1:9: error: expected `:`, found `fs.read`"
    );
    assert_eq!(
        error("grant g: t quota;"),
        "1:17: error: expected a quota (an integer or `unlimited`), found `;`"
    );
    assert_eq!(error("policy \"x"), "1:8: error: unterminated string");
    assert_eq!(
        error("tool t() {\n  resource p"),
        "2:13: error: expected `;`, found end of file"
    );
}

#[test]
fn several_statements_with_errors_are_all_reported() {
    assert_eq!(
        errors("grant a: t quota x;\ntoool t();\nsinks a b;\n"),
        vec![
            "1:18: error: expected a quota (an integer or `unlimited`), found `x`",
            "2:1: error: unknown statement `toool` (did you mean `tool`?)",
            "3:9: error: expected `,` or `;`, found `b`",
        ]
    );
}

// ---- names ------------------------------------------------------------------

#[test]
fn duplicate_names_per_kind() {
    assert_eq!(
        error("tool t();\ntool t();"),
        "2:6: error: duplicate tool `t` (first declared at 1:6)"
    );
    assert_eq!(
        error("agent main from main;"),
        "1:7: error: duplicate agent `main` (it is built in)"
    );
    assert_eq!(
        error("sinks a;\nsink b, a;"),
        "2:9: error: duplicate sink `a` (first declared at 1:7)"
    );
    assert_eq!(
        error("tool t();\ngrant g: t quota 1;\ngrant g: t quota 2;"),
        "3:7: error: duplicate grant `g` (first declared at 2:7)"
    );
    // Flow, path and count rules and obligations share one namespace.
    assert_eq!(
        error(
            "sinks s;\ntool t() { sink s; }\ndeny flow r: any -> s;\ndeny count r: at most 1 any;"
        ),
        "4:12: error: duplicate rule `r` (first declared at 3:11)"
    );
    // A name may be reused across kinds.
    assert!(agenra_policy::compile(
        "sinks x;\nsets x;\ntool x() { sink x; }\ngrant x: x quota 1 discovers x;",
        "t"
    )
    .is_ok());
    assert_eq!(
        error("tool t(a: int, a: string);"),
        "1:16: error: duplicate parameter `a` (first declared at 1:8)"
    );
    assert_eq!(
        error("policy \"a\";\npolicy \"b\";"),
        "2:8: error: the policy name is set twice (first at 1:8)"
    );
    assert_eq!(
        error("levels a < b;\nlevels c;"),
        "2:1: error: `levels` is declared twice (first at 1:1)"
    );
}

#[test]
fn unknown_references_suggest_close_names() {
    let src = format!("{TOOLS}grant g: fs.raed quota 1;");
    assert_eq!(
        error(&src),
        "4:10: error: unknown tool `fs.raed` (did you mean `fs.read`?)"
    );
    let src = format!("{TOOLS}grant g: fs.read where pth == \"a\" quota 1;");
    assert_eq!(
        error(&src),
        "4:24: error: tool `fs.read` has no parameter `pth` (did you mean `path`?)"
    );
    assert_eq!(
        error("levels low < high;\nlabel l = <hihg, {}, trusted>;"),
        "2:12: error: unknown level `hihg` (did you mean `high`?)"
    );
    assert_eq!(
        errors("categories pii;\nlabel l = <public, {pi, secret}, trusted>;"),
        vec![
            "2:21: error: unknown category `pi` (did you mean `pii`?)",
            "2:25: error: unknown category `secret`",
        ]
    );
    assert_eq!(
        error("tool t(a: strng);"),
        "1:11: error: unknown type `strng` (did you mean `string`?)"
    );
    assert_eq!(
        error("sinks net;\ntool t() { sink nett; }"),
        "2:17: error: unknown sink `nett` (did you mean `net`?)"
    );
    assert_eq!(
        error("tool t() { sanitizer redact; }"),
        "1:22: error: unknown sanitizer `redact`"
    );
    assert_eq!(
        error("facts done;\ntool t() { fact dne; }"),
        "2:17: error: unknown fact `dne` (did you mean `done`?)"
    );
    assert_eq!(
        error("label web = <public, {}, untrusted>;\ntool t() { output wbe; }"),
        "2:19: error: unknown label `wbe` (did you mean `web`?)"
    );
    assert_eq!(
        error("agent a from mian;"),
        "1:14: error: unknown agent `mian` (did you mean `main`?)"
    );
    assert_eq!(
        error("agent a from main scope ro;"),
        "1:25: error: unknown scope `ro`"
    );
    assert_eq!(
        error("sets contacts;\ntool t(to: string);\ngrant g: t where to in contact quota 1;"),
        "3:24: error: unknown set `contact` (did you mean `contacts`?)"
    );
    assert_eq!(
        error("tool t();\nscope s: t, tt;"),
        "2:13: error: unknown tool `tt` (did you mean `t`?)"
    );
    assert_eq!(
        error("facts f;\ntool t();\nobligation o: require f before x;"),
        "3:32: error: unknown tool `x` (did you mean `t`?)"
    );
}

#[test]
fn label_alias_cycles_are_rejected_once() {
    assert_eq!(
        error("label a = b;\nlabel b = a;"),
        "1:7: error: label alias cycle: a -> b -> a"
    );
}

// ---- types --------------------------------------------------------------------

#[test]
fn tests_are_type_checked_against_parameters() {
    let src = format!("{TOOLS}grant g: fs.read where n starts_with \"x\" quota 1;");
    assert_eq!(
        error(&src),
        "4:24: error: type mismatch in grant `g`: parameter `n` is int, but `starts_with` here needs string"
    );
    let src = format!("{TOOLS}grant g: fs.read where path < 3 quota 1;");
    assert_eq!(
        error(&src),
        "4:24: error: type mismatch in grant `g`: parameter `path` is string, but `<` here needs a number"
    );
    let src = format!("{TOOLS}grant g: fs.read where n in [1, \"2\", true] quota 1;");
    assert_eq!(
        errors(&src),
        vec![
            "4:33: error: the values of an `in` list must have one type: \"2\" is string, but the first value is int",
            "4:38: error: the values of an `in` list must have one type: true is bool, but the first value is int",
        ]
    );
    let src = format!("{TOOLS}deny flow f: any -> net when n == \"x\";");
    assert_eq!(
        error(&src),
        "4:30: error: type mismatch in flow rule `f` (tool `fs.read`): parameter `n` is int, but `==` here needs string"
    );
    assert_eq!(
        error("tool t(n: int) { resource n; }"),
        "1:27: error: the resource parameter `n` of tool `t` must be a string, not int"
    );
}

// ---- grants -------------------------------------------------------------------

#[test]
fn grant_errors() {
    let src = format!("{TOOLS}grant g: ping on prefix \"a\" quota 1;");
    assert_eq!(
        error(&src),
        "4:15: error: grant `g` has an `on` clause, but tool `ping` has no resource parameter (add `resource PARAM;` to the tool)"
    );
    assert_eq!(
        error("tool t();\ngrant g: t approval;"),
        "2:7: error: grant `g` has no quota (add `quota N`, `quota unlimited` or `budget AMOUNT on PARAM`)"
    );
    assert_eq!(
        error("tool t();\ngrant g: t quota -1;"),
        "2:18: error: the quota of grant `g` must not be negative"
    );
    assert_eq!(
        error("tool t();\ngrant g: t quota 1 expires -5;"),
        "2:28: error: the expiry of grant `g` must not be negative"
    );
    assert_eq!(
        error("tool t();\ngrant g: t quota 1 quota 2;"),
        "2:20: error: duplicate `quota` clause in grant `g`"
    );
}

#[test]
fn tool_and_sanitizer_clause_errors() {
    assert_eq!(
        error("tool t() {\n  output <public, {}, trusted>;\n  output <public, {}, trusted>;\n}"),
        "3:3: error: duplicate `output` clause in tool `t`"
    );
    assert_eq!(
        error("sinks s;\ntool t() { sink s, s; }"),
        "2:20: error: sink `s` is listed twice for tool `t`"
    );
    assert_eq!(
        error("facts f;\ntool t() { fact f when output \"a/b\" == 1; }"),
        "2:31: error: \"a/b\" is not a JSON pointer: it must be empty or start with `/` (RFC 6901)"
    );
    assert_eq!(
        error("sanitizer s trusts max public trusts;"),
        "1:31: error: duplicate `trusts` clause in sanitizer `s`"
    );
}

// ---- limits -------------------------------------------------------------------

#[test]
fn at_most_64_categories_and_255_levels() {
    let cats: Vec<String> = (0..65).map(|i| format!("c{i}")).collect();
    let src = format!("categories {};", cats.join(", "));
    let col = src.find("c64").unwrap_or_default() + 1;
    assert_eq!(
        error(&src),
        format!("1:{col}: error: more than 64 categories (`c64` is one too many)")
    );

    let levels: Vec<String> = (0..256).map(|i| format!("l{i}")).collect();
    let src = format!("levels {};", levels.join(" < "));
    let col = src.find("l255").unwrap_or_default() + 1;
    assert_eq!(
        error(&src),
        format!("1:{col}: error: more than 255 levels (`l255` is one too many)")
    );
}

// ---- rules --------------------------------------------------------------------

#[test]
fn rule_errors() {
    let src = format!("{TOOLS}deny flow f: untrusted and untrusted -> net;");
    assert_eq!(
        error(&src),
        "4:28: error: `untrusted` appears twice in this label pattern"
    );
    let src = format!("{TOOLS}deny path p: call ping and call ping -> any;");
    assert_eq!(
        error(&src),
        "4:28: error: `call` appears twice in this step"
    );
    let src = format!("{TOOLS}deny count c: at most -1 call ping;");
    assert_eq!(
        error(&src),
        "4:23: error: the count of rule `c` must not be negative"
    );
    let src = format!("{TOOLS}deny flow f: any -> nte;");
    assert_eq!(
        error(&src),
        "4:21: error: unknown sink `nte` (did you mean `net`?)"
    );
}

// ---- agents -------------------------------------------------------------------

#[test]
fn agent_cycles_are_rejected() {
    assert_eq!(
        error("agent a from b;\nagent b from c;\nagent c from a;\nagent d from a;"),
        "1:7: error: agent cycle: a -> b -> c -> a"
    );
}

#[test]
fn delegate_grants_must_attenuate() {
    let base = format!("{TOOLS}sets s;\nagent r from main;\ngrant m: fs.read on prefix \"src/\" where n > 0 quota 5 approval expires 100 discovers s;\n");
    let ok = format!("{base}grant d: fs.read on prefix \"src/a/\" where n > 0 and n < 9 quota 5 approval expires 50 agent r;");
    assert!(agenra_policy::compile(&ok, "t").is_ok());
    let cases = [
        (
            "on prefix \"lib/\" where n > 0 quota 1 approval expires 50",
            "its resource pattern is not covered",
        ),
        (
            "where n > 0 quota 1 approval expires 50",
            "its resource pattern is not covered",
        ),
        (
            "on prefix \"src/\" quota 1 approval expires 50",
            "it lacks some of the argument tests",
        ),
        (
            "on prefix \"src/\" where n > 0 quota 6 approval expires 50",
            "its quota is larger",
        ),
        (
            "on prefix \"src/\" where n > 0 quota unlimited approval expires 50",
            "its quota is larger",
        ),
        (
            "on prefix \"src/\" where n > 0 quota 1 expires 50",
            "it does not require approval",
        ),
        (
            "on prefix \"src/\" where n > 0 quota 1 approval",
            "it expires later",
        ),
        (
            "on prefix \"src/\" where n > 0 quota 1 approval expires 101",
            "it expires later",
        ),
    ];
    for (clauses, why) in cases {
        let src = format!("{base}grant d: fs.read {clauses} agent r;");
        assert_eq!(
            error(&src),
            format!("7:7: error: grant `d` of agent `r` is not an attenuation of its delegator's grants: compared with grant `m` of agent `main`, {why}"),
            "{clauses}"
        );
    }
    let src = format!("{TOOLS}sets s, t;\nagent r from main;\ngrant m: ping quota 1 discovers s;\ngrant d: ping quota 1 discovers t agent r;");
    assert_eq!(
        error(&src),
        "7:7: error: grant `d` of agent `r` is not an attenuation of its delegator's grants: compared with grant `m` of agent `main`, it discovers into a different set"
    );
    let src = format!("{TOOLS}agent r from main;\ngrant d: ping quota 1 agent r;");
    assert_eq!(
        error(&src),
        "5:7: error: grant `d` of agent `r` is not an attenuation of its delegator's grants: agent `main` has no grant for tool `ping`"
    );
}

// ---- warnings -------------------------------------------------------------------

#[test]
fn warnings_are_reported_and_compilation_succeeds() {
    let src = format!("{TOOLS}grant a: fs.read quota unlimited;\ngrant b: fs.read on prefix \"x\" where n == 1 quota 3;");
    assert_eq!(
        warnings(&src),
        vec!["5:7: warning: grant `b` is never used: the earlier grant `a` is unlimited, needs no approval, never expires and covers it"]
    );
    // Not shadowed when the earlier grant is limited, needs approval or expires.
    for earlier in [
        "quota 9",
        "quota unlimited approval",
        "quota unlimited expires 10",
        "on \"y\" quota unlimited",
    ] {
        let src = format!(
            "{TOOLS}grant a: fs.read {earlier};\ngrant b: fs.read on prefix \"x\" quota 3;"
        );
        assert!(warnings(&src).is_empty(), "{earlier}");
    }

    let src = format!("{TOOLS}sinks mail;\ndeny flow f: any -> mail;");
    assert_eq!(
        warnings(&src),
        vec!["5:21: warning: flow rule `f`: no tool reaches sink `mail`"]
    );
    let src = format!("{TOOLS}allow flow f: up to <public, {{}}, trusted> -> net;");
    assert_eq!(
        warnings(&src),
        vec!["4:46: warning: allow rule `f` has no effect: sink `net` has no deny rule"]
    );
    let src = format!("{TOOLS}deny flow f: any -> net when url == \"x\";");
    assert_eq!(
        warnings(&src),
        vec!["4:30: warning: flow rule `f`: no tool reaching sink `net` has a parameter `url`, so this test never holds"]
    );
    let src =
        format!("{TOOLS}deny path p: call \"web.*\" -> call ping and to net reset on call \"x\";");
    assert_eq!(
        warnings(&src),
        vec![
            "4:14: warning: rule `p`: this step matches no tool",
            "4:30: warning: rule `p`: this step matches no tool",
            "4:60: warning: rule `p`: this step matches no tool",
        ]
    );
    let src = format!(
        "{TOOLS}facts done;\nobligation o: require done since \"git.*\" before \"email.*\";"
    );
    assert_eq!(
        warnings(&src),
        vec![
            "5:23: warning: obligation `o`: no tool establishes fact `done`",
            "5:34: warning: obligation `o`: the `since` pattern \"git.*\" matches no tool",
            "5:49: warning: obligation `o`: the `before` pattern \"email.*\" matches no tool",
        ]
    );
    assert_eq!(
        warnings("sets contacts;"),
        vec!["1:6: warning: no grant discovers into set `contacts` and no task seeds it, so it stays empty"]
    );
}

#[test]
fn an_approval_grant_bypassed_by_a_later_grant_without_approval_is_reported() {
    let src = format!(
        "{TOOLS}grant ask: fs.read on prefix \"src/\" where n == 1 quota 2 approval;\ngrant free: fs.read on prefix \"src\" quota 10;"
    );
    assert_eq!(
        warnings(&src),
        vec!["4:7: warning: grant `ask` (4:7) requires approval, but the later grant `free` (5:7) needs none and covers it: once the 2 units of `ask` are reserved or spent, the calls it matches are admitted by `free` without approval (put `free` first with a narrower match, add `approval` to `free`, or make `ask` unlimited)"]
    );
    // Found past a covering grant that needs approval and runs out; a
    // grant in between that covers only some calls changes nothing; one
    // unit is one unit.
    let src = format!(
        "{TOOLS}grant ask: fs.read on \"src/a\" quota 1 approval;\ngrant more: fs.read quota 3 approval;\ngrant other: fs.read on \"b\" quota 9;\ngrant free: fs.read quota unlimited;"
    );
    let w = warnings(&src);
    assert_eq!(w.len(), 2, "{w:#?}");
    assert!(
        w[0].starts_with("4:7: warning: grant `ask` (4:7) requires approval, but the later grant `free` (7:7) needs none and covers it: once the 1 unit of `ask` is reserved"),
        "{w:#?}"
    );
    assert!(
        w[1].starts_with(
            "5:7: warning: grant `more` (5:7) requires approval, but the later grant `free` (7:7)"
        ),
        "{w:#?}"
    );

    // Near misses: no warning.
    for (what, g, h) in [
        (
            "H narrower (resource)",
            "on prefix \"src/\" quota 2 approval",
            "on prefix \"src/a\" quota 10",
        ),
        (
            "H narrower (test)",
            "quota 2 approval",
            "where n == 1 quota 10",
        ),
        ("H needs approval", "quota 2 approval", "quota 10 approval"),
        ("G unlimited", "quota unlimited approval", "quota 10"),
        ("G needs no approval", "quota 2", "quota 10"),
        (
            "H expires before G",
            "quota 2 approval expires 100",
            "quota 10 expires 50",
        ),
        (
            "H expires, G never",
            "quota 2 approval",
            "quota 10 expires 50",
        ),
        ("H admits nothing", "quota 2 approval", "quota 0"),
        (
            "G for another agent",
            "quota 2 approval agent helper",
            "quota 10",
        ),
        ("H for another tool", "quota 2 approval", "quota 10 TOOL"),
    ] {
        let (tool, h) = match h.strip_suffix(" TOOL") {
            Some(h) => ("ping", h.to_string()),
            None => ("fs.read", h.to_string()),
        };
        let src = format!(
            "{TOOLS}agent helper from main;\ngrant ask: fs.read {g};\ngrant free: {tool} {h};"
        );
        assert!(warnings(&src).is_empty(), "{what}: {:#?}", warnings(&src));
    }
    // H before G: the existing order is the fix, not a bypass.
    let src = format!("{TOOLS}grant free: fs.read quota 10;\ngrant ask: fs.read quota 2 approval;");
    assert!(warnings(&src).is_empty(), "{:#?}", warnings(&src));
    // A covering unlimited grant with approval in between takes every call first.
    let src = format!(
        "{TOOLS}grant ask: fs.read quota 2 approval;\ngrant all: fs.read quota unlimited approval;\ngrant free: fs.read quota 10;"
    );
    assert!(warnings(&src).is_empty(), "{:#?}", warnings(&src));
}

// ---- rendering -------------------------------------------------------------------

#[test]
fn golden_rendered_diagnostic() {
    let src = "sinks network;\ntool fs.write(path: string) { resource path; }\n\n\n\n\n\n\n\n\n\ngrant w: fs.wrte on prefix \"src/\" quota 3;\n";
    let err = match agenra_policy::compile(src, "policy") {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    };
    assert_eq!(
        err.render("policy.agr", src),
        "policy.agr:12:10: error: unknown tool `fs.wrte` (did you mean `fs.write`?)\n   |\n12 | grant w: fs.wrte on prefix \"src/\" quota 3;\n   |          ^^^^^^^\n"
    );
    assert_eq!(
        err.to_string(),
        "12:10: error: unknown tool `fs.wrte` (did you mean `fs.write`?)"
    );
}

#[test]
fn several_rendered_diagnostics_are_separated_by_a_blank_line() {
    let src = "grant a: x quota 1;\ngrant b: y quota 1;";
    let err = match agenra_policy::compile(src, "p") {
        Ok(_) => panic!("expected errors"),
        Err(e) => e,
    };
    assert_eq!(
        err.render("p.agr", src),
        "p.agr:1:10: error: unknown tool `x`\n  |\n1 | grant a: x quota 1;\n  |          ^\n\np.agr:2:10: error: unknown tool `y`\n  |\n2 | grant b: y quota 1;\n  |          ^\n"
    );
}

// ---- several kinds at once --------------------------------------------------

#[test]
fn name_and_type_errors_are_reported_with_syntax_errors() {
    let src = "\
tool fs.read(path: string, n: int) { resource path; }
tool broken(x: ) { resource x; }
grant a: fs.read where n starts_with \"x\" quota 1;
grant b: fs.wrte quota 1;
grant c: fs.read quota;
grant d: broken quota 1;
deny flow f: untrusted -> nowhere;
";
    assert_eq!(
        errors(src),
        vec![
            "2:16: error: expected a parameter type (string, int, bool, decimal, list<TYPE> or {FIELD: TYPE, ...}), found `)`",
            "3:24: error: type mismatch in grant `a`: parameter `n` is int, but `starts_with` here needs string",
            "4:10: error: unknown tool `fs.wrte`",
            "5:23: error: expected a quota (an integer or `unlimited`), found `;`",
            "7:27: error: unknown sink `nowhere`",
        ],
        "the grant on the tool that did not parse is not reported as unknown"
    );
}

#[test]
fn at_most_fifty_errors_are_reported() {
    let src: String = (0..80)
        .map(|i| format!("grant g{i}: nope quota 1;\n"))
        .collect();
    let errs = errors(&src);
    assert_eq!(errs.len(), agenra_policy::MAX_ERRORS + 1);
    assert_eq!(
        errs.last().map(String::as_str),
        Some("50:12: error: 30 more errors not shown (fix these first)")
    );
    // Syntax errors count among them, in source order.
    let errs = errors(&format!("grant x quota;\n{src}"));
    assert_eq!(errs.len(), agenra_policy::MAX_ERRORS + 1);
    assert_eq!(errs[0], "1:9: error: expected `:`, found `quota`");
    assert!(errs[50].ends_with("31 more errors not shown (fix these first)"));
}

#[test]
fn odd_characters_are_named() {
    // A byte order mark is skipped.
    assert!(agenra_policy::compile("\u{feff}tool t();", "t").is_ok());
    assert_eq!(
        error("gr\u{430}nt g: t quota 1;"),
        "1:1: error: `gr\u{430}nt` contains `\u{430}` (U+0430), which is not an ASCII letter; names are ASCII"
    );
    assert_eq!(
        error("policy \"a\u{0}b\";"),
        "1:8: error: the control character U+0000 cannot appear in a string"
    );
    assert_eq!(
        error("tool t();\ngrant g: t quota 99999999999999999999;"),
        "2:18: error: integer `99999999999999999999` is out of range (from -9223372036854775808 to 9223372036854775807)"
    );
}

// ---- quota scope ------------------------------------------------------------

#[test]
fn quota_scope_per_tenant_and_per_session() {
    let src = format!(
        "{TOOLS}grant a: ping quota 5 per tenant;\ngrant b: ping quota 2 per session;\ngrant c: ping quota 1;\n"
    );
    let compiled = agenra_policy::compile(&src, "test").expect("valid");
    let p = &compiled.policy;
    assert_eq!(p.shared_grants, vec![0], "only `per tenant` shares");
    assert!(p.is_shared(0) && !p.is_shared(1) && !p.is_shared(2));
    assert_eq!(p.grants[0].quota, agenra_core::policy::Quota::Limited(5));
    // `per session` is the default: the same policy as without it.
    let explicit = agenra_policy::compile(
        &format!("{TOOLS}grant b: ping quota 2 per session;\n"),
        "test",
    )
    .expect("valid");
    let implicit =
        agenra_policy::compile(&format!("{TOOLS}grant b: ping quota 2;\n"), "test").expect("valid");
    assert_eq!(explicit.policy, implicit.policy);
    assert!(explicit.policy.shared_grants.is_empty());
}

#[test]
fn quota_scope_errors_name_the_grant_and_the_place() {
    assert_eq!(
        error(&format!("{TOOLS}grant pay: ping quota unlimited per tenant;\n")),
        "4:33: error: grant `pay` has `quota unlimited per tenant`: an unlimited quota has nothing to share (write `quota N per tenant`, or `quota unlimited`)"
    );
    // `per day` is a renewing quota now (`windows.rs`); other words are not.
    assert_eq!(
        error("grant g: t quota 3 per year;"),
        "1:24: error: expected `tenant`, `session` or a window (`day`, `hour`, `minute`, `second`, `10m`, `2h`, `30s`, `7d`) after `per`, found `year`"
    );
    assert_eq!(
        error("grant g: t quota 3 per;"),
        "1:23: error: expected `tenant`, `session` or a window (`day`, `hour`, `minute`, `second`, `10m`, `2h`, `30s`, `7d`) after `per`, found `;`"
    );
    assert_eq!(
        error("grant g: t per tenant quota 3;"),
        "1:12: error: expected a grant clause (on, where, quota, budget, approval, expires, discovers, agent) or `;`, found `per`"
    );
}

// ---- declared token shapes --------------------------------------------------

#[test]
fn bad_token_shapes_name_line_and_column() {
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
fn token_kind_names_are_unique_and_known() {
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
        error(
            "tool send(body: string);\ntoken order_id = \"ORD-\" digit{6};\ndeny call r: send when any order_ids in body from untrusted;\n"
        ),
        "3:28: error: unknown token kind `order_ids`: `url`, `email`, `iban`, `phone`, `quantity`, `token` or a kind declared with `token NAME = SHAPE;` (did you mean `order_id`?)"
    );
}
