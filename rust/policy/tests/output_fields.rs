//! `output FIELD.PATH: LABEL;` in a tool body (per-field output labels,
//! issue #27): compiled into `Policy::output_fields` sorted by (tool,
//! path), printed back by the formatter, and refused with line:column for
//! an unknown label, a path declared twice or an empty key.

use agenra_core::label::{CategorySet, Label};

fn errors(src: &str) -> Vec<String> {
    match agenra_policy::compile(src, "test") {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e.diagnostics.iter().map(ToString::to_string).collect(),
    }
}

const BANK: &str = r#"label trusted_public = <public, {}, trusted>;
levels public < secret;
tool bank() {
    output <public, {}, untrusted>;
    output tx.subject: <public, {}, untrusted>;
    output tx.iban: trusted_public;
    output `a.b`: <secret, {}, trusted>;
}
tool other() { output tx: <public, {}, trusted>; }
"#;

#[test]
fn fields_compile_sorted_by_tool_and_path() {
    let p = agenra_policy::compile(BANK, "bank")
        .expect("compiles")
        .policy;
    let got: Vec<(usize, Vec<String>, Label)> = p
        .output_fields
        .iter()
        .map(|f| (f.tool, f.path.clone(), f.label))
        .collect();
    let t = Label::BOTTOM;
    let u = Label::new(0, CategorySet::EMPTY, false);
    let s = Label::new(1, CategorySet::EMPTY, true);
    let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (0, v(&["a.b"]), s),
            (0, v(&["tx", "iban"]), t),
            (0, v(&["tx", "subject"]), u),
            (1, v(&["tx"]), t),
        ]
    );
    // The tool's own label is unchanged.
    assert_eq!(p.tools[0].output, u);
    assert_eq!(p.output_fields_of(1).len(), 1);
    assert!(p.output_fields_of(2).is_empty());
    agenra_core::validate::validate(&p).expect("valid");
}

#[test]
fn policies_without_fields_keep_their_encoding() {
    let p = agenra_policy::compile("tool t() { output <public, {}, trusted>; }", "t")
        .unwrap()
        .policy;
    let json = serde_json::to_string(&p).unwrap();
    assert!(!json.contains("output_fields"), "{json}");
    let with = agenra_policy::compile(BANK, "bank").unwrap().policy;
    assert!(serde_json::to_string(&with)
        .unwrap()
        .contains("output_fields"));
}

#[test]
fn the_formatter_prints_fields_back() {
    let out = agenra_policy::format(BANK).expect("formats");
    assert!(out.contains("output tx.iban: trusted_public;"), "{out}");
    assert!(
        out.contains("output `a.b`: <secret, {}, trusted>;"),
        "{out}"
    );
    let again = agenra_policy::compile(&out, "bank").unwrap().policy;
    let first = agenra_policy::compile(BANK, "bank").unwrap().policy;
    assert_eq!(again.output_fields, first.output_fields);
}

#[test]
fn errors_name_line_and_column() {
    let errs = errors("tool t() {\n  output a.b: nosuch;\n}\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(errs[0].starts_with("2:15: error: "), "{errs:#?}");
    assert!(errs[0].contains("nosuch"), "{errs:#?}");
    assert_eq!(
        errors("tool t() {\n  output a.b: <public, {}, trusted>;\n  output a.b: <public, {}, untrusted>;\n}\n"),
        vec!["3:10: error: output field `a.b` of tool `t` has its label declared twice"]
    );
    // An empty key never gets past the lexer.
    assert_eq!(
        errors("tool t() { output a..b: <public, {}, trusted>; }"),
        vec!["1:20: error: unexpected character `.`"]
    );
    let empty = errors("tool t() { output ``: <public, {}, trusted>; }");
    assert_eq!(empty.len(), 1, "{empty:#?}");
    assert!(empty[0].starts_with("1:19: error: "), "{empty:#?}");
    // The whole-output clause stays once per tool; fields do not count.
    assert_eq!(
        errors("tool t() { output <public, {}, trusted>; output x: <public, {}, trusted>; output <public, {}, trusted>; }"),
        vec!["1:75: error: duplicate `output` clause in tool `t`"]
    );
}

fn warnings(src: &str) -> Vec<String> {
    agenra_policy::compile(src, "test")
        .expect("compiles")
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Field labels change only provenance by value and token tests: a policy
/// with neither is warned at the tool's first field clause, one with
/// either is not.
#[test]
fn field_labels_nothing_reads_are_warned() {
    let w = warnings(BANK);
    let fields: Vec<_> = w
        .iter()
        .filter(|w| w.contains("output field labels"))
        .collect();
    assert_eq!(fields.len(), 2, "{w:?}");
    assert!(
        fields[0].starts_with("5:5: warning: the output field labels of `bank` change no decision"),
        "{w:?}"
    );
    assert!(
        fields[1].starts_with("9:16: warning: the output field labels of `other`"),
        "{w:?}"
    );
    let read = format!("provenance by value;\n{BANK}");
    assert!(!warnings(&read)
        .iter()
        .any(|w| w.contains("output field labels")));
}
