//! Property tests: the front end never panics, and formatting is idempotent
//! and preserves the compiled policy.

use proptest::prelude::*;
use proptest::sample::select;

const FULL: &str = include_str!("data/coding_agent.agr");
const SMALL: &str = "// c\npolicy \"p\";\nsinks net;\ntool t(a: string) { resource a; sink net; } // t\ngrant g: t on prefix \"x\" where a != \"y\" quota 2;\ndeny flow f: untrusted -> net when a == \"z\";\n";

/// Runs the whole front end on `src`; panics only if a property fails.
fn exercise(src: &str) {
    if let Err(e) = agenra_policy::parse(src) {
        let _ = e.render("fuzz.agr", src);
    }
    let compiled = agenra_policy::compile(src, "fuzz");
    if let Err(e) = &compiled {
        let _ = e.render("fuzz.agr", src);
        let _ = e.to_string();
    }
    if let Ok(formatted) = agenra_policy::format(src) {
        assert_eq!(
            agenra_policy::format(&formatted).ok(),
            Some(formatted.clone()),
            "not idempotent:\n{src}"
        );
        let again = agenra_policy::compile(&formatted, "fuzz");
        match (compiled, again) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.policy, b.policy, "formatting changed the policy:\n{src}")
            }
            (Err(_), Err(_)) => {}
            (a, b) => panic!(
                "formatting changed validity ({} vs {}):\n{src}",
                a.is_ok(),
                b.is_ok()
            ),
        }
    }
}

const TOKENS: &[&str] = &[
    "policy",
    "levels",
    "categories",
    "sinks",
    "sink",
    "sets",
    "facts",
    "fact",
    "label",
    "tool",
    "resource",
    "sanitizer",
    "scope",
    "agent",
    "grant",
    "deny",
    "allow",
    "pause",
    "flow",
    "path",
    "count",
    "obligation",
    "on",
    "where",
    "quota",
    "unlimited",
    "approval",
    "expires",
    "discovers",
    "from",
    "up",
    "to",
    "at",
    "most",
    "require",
    "since",
    "before",
    "else",
    "reset",
    "call",
    "reads",
    "any",
    "untrusted",
    "trusted",
    "sensitivity",
    "category",
    "and",
    "in",
    "starts_with",
    "ends_with",
    "matches",
    "prefix",
    "glob",
    "when",
    "output",
    "output.x",
    "removes",
    "max",
    "trusts",
    "true",
    "false",
    "string",
    "int",
    "bool",
    "main",
    "t",
    "fs.read",
    "net",
    "public",
    "x",
    "\"s\"",
    "\"a*\"",
    "\"",
    "0",
    "-1",
    "99999999999999999999",
    ";",
    ":",
    ",",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "<=",
    ">=",
    "==",
    "!=",
    "->",
    "=",
    "// c\n",
    "\n",
    ".",
    "!",
    "é",
    "or",
    "not",
    "contains",
    "null",
    "decimal",
    "list",
    "?",
    "98.70",
    "-0.5",
    "1.",
    "provenance",
    "by",
    "value",
    "task",
    "seeds",
    "all",
    "\"/a/0\"",
    "output.a.b",
    "own",
    "context",
    "`get-tiny-image`",
    "`agent`",
    "`a\\`b`",
    "`",
    "get-tiny",
];

#[derive(Clone, Debug)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, char),
    Swap(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..6).prop_map(|(at, n)| Edit::Delete(at, n)),
        (
            any::<usize>(),
            select(vec![
                ';', '{', '}', '"', '<', '>', '-', '/', '\n', ' ', 'a', '.', ',', '\\', '=', 'é',
                '`'
            ])
        )
            .prop_map(|(at, c)| Edit::Insert(at, c)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
    ]
}

fn apply<T: Clone>(items: &mut Vec<T>, edits: &[Edit], insert: impl Fn(char) -> T) {
    for e in edits {
        let len = items.len().max(1);
        match *e {
            Edit::Delete(at, n) => {
                let at = at % len;
                let end = (at + n).min(items.len());
                if at < end {
                    items.drain(at..end);
                }
            }
            Edit::Insert(at, c) => {
                let at = at % (items.len() + 1);
                items.insert(at, insert(c));
            }
            Edit::Swap(a, b) => {
                let n = items.len();
                if n > 0 {
                    items.swap(a % n, b % n);
                }
            }
        }
    }
}

// ---- generated valid policies ---------------------------------------------------

/// Source text for a string literal: escapes what must be escaped, but
/// leaves tabs raw (not the canonical form).
fn lit(s: &str) -> String {
    format!(
        "\"{}\"",
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )
}

fn text() -> impl Strategy<Value = String> {
    "[a-z/*?\"\\\\ \t\n]{0,6}"
}

fn toks(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn pattern() -> impl Strategy<Value = Vec<String>> {
    (0..3usize, text()).prop_map(|(k, t)| match k {
        0 => vec![lit(&t)],
        1 => vec!["prefix".into(), lit(&t)],
        _ => vec!["glob".into(), lit(&t)],
    })
}

const LEVELS: &[&str] = &["public", "internal", "secret"];

fn label() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(toks(&["lbl"])),
        (select(LEVELS), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
            |(level, pii, web, trusted)| {
                let mut t = toks(&["<", level, ",", "{"]);
                let cats: Vec<&str> = [(pii, "pii"), (web, "web")]
                    .iter()
                    .filter(|c| c.0)
                    .map(|c| c.1)
                    .collect();
                for (i, c) in cats.iter().enumerate() {
                    if i > 0 {
                        t.push(",".into());
                    }
                    t.push(c.to_string());
                }
                t.extend(toks(&[
                    "}",
                    ",",
                    if trusted { "trusted" } else { "untrusted" },
                    ">",
                ]));
                t
            }
        ),
    ]
}

fn label_pat() -> impl Strategy<Value = Vec<String>> {
    (
        any::<bool>(),
        proptest::option::of(select(LEVELS)),
        0..4usize,
    )
        .prop_map(|(untrusted, level, cats)| {
            let mut atoms: Vec<Vec<String>> = Vec::new();
            if untrusted {
                atoms.push(toks(&["untrusted"]));
            }
            if let Some(l) = level {
                atoms.push(toks(&["sensitivity", ">=", l]));
            }
            match cats {
                1 => atoms.push(toks(&["category", "pii"])),
                2 => atoms.push(toks(&["category", "{", "pii", ",", "web", "}"])),
                3 => atoms.push(toks(&["category", "{", "web", "}"])),
                _ => {}
            }
            if atoms.is_empty() {
                return toks(&["any"]);
            }
            atoms.join(&"and".to_string())
        })
}

fn tool_pat() -> impl Strategy<Value = String> {
    select(vec![
        "fs.read".to_string(),
        "ping".into(),
        "`get-tiny-image`".into(),
        "`ping`".into(),
        lit("fs.*"),
        lit("*"),
    ])
}

fn step() -> impl Strategy<Value = Vec<String>> {
    (
        proptest::option::of(tool_pat()),
        proptest::option::of(select(vec!["net", "shell"])),
        proptest::option::of(label_pat()),
    )
        .prop_map(|(tool, sink, reads)| {
            let mut atoms: Vec<Vec<String>> = Vec::new();
            if let Some(t) = tool {
                atoms.push(vec!["call".into(), t]);
            }
            if let Some(s) = sink {
                atoms.push(toks(&["to", s]));
            }
            if let Some(r) = reads {
                let mut a = toks(&["reads", "("]);
                a.extend(r);
                a.push(")".into());
                atoms.push(a);
            }
            if atoms.is_empty() {
                return toks(&["any"]);
            }
            atoms.join(&"and".to_string())
        })
}

fn value_pred(tool: usize) -> impl Strategy<Value = Vec<String>> {
    (0..4usize, text(), -5i64..1000, pattern()).prop_map(move |(k, t, n, p)| match (tool, k) {
        (0, 0) => vec!["path".into(), "starts_with".into(), lit(&t)],
        (0, 1) => vec!["n".into(), "<".into(), n.to_string()],
        (0, 2) => toks(&["n", "in", "[", "1", ",", "-2", "]"]),
        (0, _) => [toks(&["path", "matches"]), p].concat(),
        (_, 0) => vec!["url".into(), "==".into(), lit(&t)],
        (_, 1) => toks(&["url", "in", "found"]),
        (_, 2) => vec!["url".into(), "!=".into(), lit(&t)],
        (_, _) => vec!["url".into(), "ends_with".into(), lit(&t)],
    })
}

fn grant() -> impl Strategy<Value = Vec<String>> {
    (0..3usize).prop_flat_map(|tool| {
        let preds = if tool < 2 {
            proptest::collection::vec(value_pred(tool), 0..3).boxed()
        } else {
            Just(Vec::new()).boxed()
        };
        let on = if tool < 2 {
            proptest::option::of(pattern()).boxed()
        } else {
            Just(None).boxed()
        };
        (
            proptest::option::of(0u64..100),
            on,
            preds,
            any::<bool>(),
            proptest::option::of(0u64..100_000),
            any::<bool>(),
        )
            .prop_flat_map(move |(quota, on, preds, approval, expires, discovers)| {
                let mut clauses = vec![match quota {
                    Some(q) => vec!["quota".to_string(), q.to_string()],
                    None => toks(&["quota", "unlimited"]),
                }];
                if let Some(p) = on {
                    clauses.push([vec!["on".to_string()], p].concat());
                }
                if !preds.is_empty() {
                    clauses
                        .push([vec!["where".to_string()], preds.join(&"and".to_string())].concat());
                }
                if approval {
                    clauses.push(toks(&["approval"]));
                }
                if let Some(e) = expires {
                    clauses.push(vec!["expires".into(), e.to_string()]);
                }
                if discovers {
                    clauses.push(toks(&["discovers", "found"]));
                }
                let tool_name = ["fs.read", "web.get", "ping"][tool];
                Just(clauses).prop_shuffle().prop_map(move |clauses| {
                    let mut t = toks(&["grant", "NAME", ":", tool_name]);
                    t.extend(clauses.into_iter().flatten());
                    t.push(";".into());
                    t
                })
            })
    })
}

/// A condition on `pay`'s arguments: tests combined with `!`, `and`, `or`
/// and parentheses.
fn pay_cond() -> impl Strategy<Value = Vec<String>> {
    let leaf = prop_oneof![
        text().prop_map(|t| vec!["any".into(), "to".into(), "ends_with".into(), lit(&t)]),
        Just(toks(&["all", "to", "in", "found"])),
        Just(toks(&["to", "not", "in", "found"])),
        Just(toks(&["amount", ">", "98.70"])),
        Just(toks(&["amount", "<=", "-3"])),
        Just(toks(&["amount", "not", "in", "[", "1", ",", "2.5", "]"])),
        Just(toks(&["memo", "==", "null"])),
        text().prop_map(|t| vec!["memo".into(), "contains".into(), lit(&t)]),
        text().prop_map(|t| vec!["to".into(), "contains".into(), lit(&t)]),
        Just(toks(&["agent", "==", "sub"])),
        Just(toks(&["agent", "not", "in", "[", "main", ",", "sub", "]"])),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner
                .clone()
                .prop_map(|c| [toks(&["!", "("]), c, toks(&[")"])].concat()),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| [a, toks(&["and"]), b].concat()),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| [a, toks(&["or"]), b].concat()),
            inner.prop_map(|c| [toks(&["("]), c, toks(&[")"])].concat()),
        ]
    })
}

fn statement() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        1 => (label_pat(), select(vec!["main", "sub", "solo"]), any::<bool>()).prop_map(|(p, agent, pause)| {
            [toks(&[if pause { "pause" } else { "deny" }, "flow", "NAME", ":"]), p, toks(&["->", "agent", agent, ";"])].concat()
        }),
        1 => (any::<bool>(), pay_cond()).prop_map(|(pause, c)| {
            [toks(&[if pause { "pause" } else { "deny" }, "call", "NAME", ":", "pay", "when"]), c, toks(&[";"])].concat()
        }),
        1 => (pay_cond(), any::<bool>()).prop_map(|(c, pause)| {
            [toks(&[if pause { "pause" } else { "deny" }, "flow", "NAME", ":", "untrusted", "->", "net", "when"]), c, toks(&[";"])].concat()
        }),
        1 => (pay_cond(), 0u64..5).prop_map(|(c, max)| {
            [toks(&["deny", "count", "NAME", ":", "at", "most"]), vec![max.to_string()], toks(&["call", "pay", "where"]), c, toks(&[";"])].concat()
        }),
        1 => pay_cond().prop_map(|c| [toks(&["grant", "NAME", ":", "pay", "where"]), c, toks(&["quota", "3", ";"])].concat()),
        1 => (text(), -5i64..10, any::<bool>(), any::<bool>()).prop_map(|(t, n, approval, deny)| {
            let mut out = if deny {
                toks(&["deny", "call", "NAME", ":", "`get-tiny-image`", "when"])
            } else {
                toks(&["grant", "NAME", ":", "`get-tiny-image`", "where"])
            };
            out.extend(vec!["`message-type`".into(), "starts_with".into(), lit(&t), "and".into()]);
            out.extend(vec!["`agent`".into(), ">".into(), n.to_string(), "and".into()]);
            out.extend(toks(&["any", "`a\\`b`", "==", "1", "and", "agent", "==", "sub"]));
            if !deny {
                out.extend(toks(&["quota", "unlimited"]));
                if approval {
                    out.push("approval".into());
                }
            }
            out.push(";".into());
            out
        }),
        3 => grant(),
        1 => (label_pat(), select(vec!["net", "shell"]), proptest::option::of(text())).prop_map(|(p, sink, when)| {
            let mut t = [toks(&["deny", "flow", "NAME", ":"]), p, toks(&["->", sink])].concat();
            if let Some(w) = when {
                t.extend(vec!["when".into(), "path".into(), "==".into(), lit(&w)]);
            }
            t.push(";".into());
            t
        }),
        1 => label().prop_map(|l| [toks(&["allow", "flow", "NAME", ":", "up", "to"]), l, toks(&["->", "net", ";"])].concat()),
        1 => (any::<bool>(), proptest::collection::vec(step(), 2..4), proptest::option::of(step())).prop_map(|(pause, steps, reset)| {
            let mut t = toks(&[if pause { "pause" } else { "deny" }, "path", "NAME", ":"]);
            t.extend(steps.join(&"->".to_string()));
            if let Some(r) = reset {
                t.extend(toks(&["reset", "on"]));
                t.extend(r);
            }
            t.push(";".into());
            t
        }),
        1 => (any::<bool>(), 0u64..50, step(), proptest::option::of(step())).prop_map(|(pause, max, step, reset)| {
            let mut t = toks(&[if pause { "pause" } else { "deny" }, "count", "NAME", ":", "at", "most"]);
            t.push(max.to_string());
            t.extend(step);
            if let Some(r) = reset {
                t.extend(toks(&["reset", "on"]));
                t.extend(r);
            }
            t.push(";".into());
            t
        }),
        1 => (proptest::option::of(tool_pat()), tool_pat(), any::<bool>()).prop_map(|(since, before, pause)| {
            let mut t = toks(&["obligation", "NAME", ":", "require", "ok"]);
            if let Some(s) = since {
                t.extend(vec!["since".into(), s]);
            }
            t.extend(vec!["before".into(), before]);
            if pause {
                t.extend(toks(&["else", "pause"]));
            }
            t.push(";".into());
            t
        }),
        1 => (pattern(), label()).prop_map(|(p, l)| [toks(&["resource"]), p, toks(&["label"]), l, toks(&[";"])].concat()),
    ]
}

const PRELUDE: &[&str] = &[
    "levels public < internal < secret ;",
    "categories pii , web ;",
    "sinks net , shell ;",
    "sets found ;",
    "facts ok ;",
    "label lbl = < public , { web } , untrusted > ;",
    "tool fs.read ( path : string , n : int ) { resource path ; output < internal , { pii } , trusted > ; sink net ; fact ok when output.code == 0 ; }",
    "tool web.get ( url : string ) { resource url ; sink net , shell ; sanitizer clean ; output lbl ; }",
    "tool ping ( ) ;",
    "sanitizer clean removes { pii } max public trusts ;",
    "scope sc : ping , \"web.*\" ;",
    "agent sub from main scope sc ;",
    "tool pay ( to : list<string> , amount : decimal , memo ? : string ) { sink net on to , amount ; fact ok when any output \"/checks\" == \"pass\" ; }",
    "provenance by value ;",
    "agent solo from sub own context ;",
    "tool lint ( ) { fact ok when output matches glob \"*passed*\" ; fact ok when output.a.b != null ; }",
    "task seeds found ;",
    "tool `get-tiny-image` ( `message-type` : string , `agent` : int , `a\\`b` : list<int> ) { resource `message-type` ; sink net on `message-type` , `agent` ; }",
];

const SEPARATORS: &[&str] = &[
    " ",
    " ",
    " ",
    "\n",
    "  ",
    "\n\n",
    " // note\n",
    "\n// c \"x\"\n\n\n",
    "\t",
];

fn policy_source() -> impl Strategy<Value = String> {
    let prelude: Vec<Vec<String>> = PRELUDE
        .iter()
        .map(|s| s.split(' ').map(str::to_string).collect())
        .collect();
    (
        proptest::collection::vec(statement(), 0..10),
        proptest::collection::vec(0..SEPARATORS.len(), 64),
    )
        .prop_flat_map(move |(stmts, seps)| {
            let all: Vec<Vec<String>> = prelude.iter().cloned().chain(stmts).collect();
            (Just(all).prop_shuffle(), Just(seps))
        })
        .prop_map(|(stmts, seps)| {
            let mut out = String::new();
            let mut k = 0usize;
            for (i, stmt) in stmts.iter().enumerate() {
                for tok in stmt {
                    out.push_str(&if tok == "NAME" {
                        format!("n{i}")
                    } else {
                        tok.clone()
                    });
                    out.push_str(SEPARATORS[seps[k % seps.len()]]);
                    k += 1;
                }
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        // `AGENRA_PROPTEST_CASES=N` for a soak run.
        cases: std::env::var("AGENRA_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(384),
        // Integration tests have no lib.rs for proptest to find its regression directory.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn never_panics_on_arbitrary_text(src in ".{0,200}") {
        exercise(&src);
    }

    #[test]
    fn never_panics_on_token_soup(words in proptest::collection::vec(select(TOKENS), 0..60)) {
        exercise(&words.join(" "));
    }

    #[test]
    fn never_panics_on_mutated_policies(edits in proptest::collection::vec(edit(), 1..6), full in any::<bool>()) {
        let base = if full { FULL } else { SMALL };
        let mut chars: Vec<char> = base.chars().collect();
        apply(&mut chars, &edits, |c| c);
        exercise(&chars.into_iter().collect::<String>());
    }

    #[test]
    fn never_panics_on_token_mutations(edits in proptest::collection::vec(edit(), 1..6), full in any::<bool>()) {
        let base = if full { FULL } else { SMALL };
        let mut words: Vec<String> = base.split(' ').map(str::to_string).collect();
        apply(&mut words, &edits, |c| TOKENS[c as usize % TOKENS.len()].to_string());
        exercise(&words.join(" "));
    }

    #[test]
    fn format_is_idempotent_and_preserves_the_policy(src in policy_source()) {
        let compiled = agenra_policy::compile(&src, "gen");
        prop_assert!(compiled.is_ok(), "generated policy does not compile: {}\n{src}", compiled.err().map(|e| e.to_string()).unwrap_or_default());
        let formatted = agenra_policy::format(&src).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(agenra_policy::format(&formatted).ok(), Some(formatted.clone()));
        let again = agenra_policy::compile(&formatted, "gen").map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(compiled.ok().map(|c| c.policy), Some(again.policy));
        // Every comment survives.
        prop_assert_eq!(src.matches("//").count(), formatted.matches("//").count());
    }
}
