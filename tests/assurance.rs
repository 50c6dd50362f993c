//! The assurance check (issue #12), runnable without a Lean toolchain.
//! `.ci/run` runs it (`scripts/assurance-check`); so does `cargo test`.
//!
//! 1. No `sorry`, `admit` or `axiom` under `lean/` and `proofs/` (outside
//!    comments and strings).
//! 2. Every `.lean` file under `lean/` and `proofs/` is imported, directly
//!    or through other imports, from a root module (a `.lean` file at the
//!    top of the folder: `lean/Agenra.lean`, `proofs/AgenraProofs.lean`).
//! 3. Every theorem named in the table `| Claim | Theorems | Rust code |
//!    Tests | Limits |` of `docs/assurance.md` exists: a name exists when
//!    `(def|theorem|lemma|structure|inductive|abbrev|instance) <its last
//!    component>` occurs under `lean/` or `proofs/`.
//! 4. Every row `| `rust_name` | `LeanName` | note |` of the mirror table of
//!    `docs/lean.md` (header `| Rust | Lean | ... |`) names a Rust item that
//!    is declared under `rust/`, `src/` or `ffi/` (`fn`, `struct`, `enum`,
//!    `type`, `trait`, `const`, `static`, `mod`) and a Lean name that exists.
//! 5. Every entry point of the wire format (`agenra_lean::Entry`) is an
//!    `@[export ...]` of `lean/Agenra/Ffi.lean`, once that file exists.
//!
//! A document that does not exist yet is reported as a note, not an error;
//! a document that exists without its table is an error.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

/// What the check found: errors fail it, notes are printed.
#[derive(Debug, Default)]
struct Findings {
    errors: Vec<String>,
    notes: Vec<String>,
}

fn files_with(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name != "target" && !name.starts_with('.') {
                files_with(&p, ext, out);
            }
        } else if p.extension().and_then(|e| e.to_str()) == Some(ext) {
            out.push(p);
        }
    }
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '\'' || c == '.' || c == '!' || c == '?'
}

/// Lean source with comments (`--`, nested `/- -/`), strings and character
/// literals blanked out; newlines are kept, so line numbers stay.
fn strip_lean(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        if c[i] == '-' && c.get(i + 1) == Some(&'-') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'-') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'-') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '-' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    out.push(' ');
                    i += 1;
                }
                out.push(blank(c[i]));
                i += 1;
            }
            if i < c.len() {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '\'' && (i == 0 || !is_ident(c[i - 1])) {
            // A character literal: 'x' or '\n', '\x41', '\u0041'.
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len().min(i + 10)).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    for _ in i..=e {
                        out.push(' ');
                    }
                    i = e + 1;
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Whole-word occurrences of `word` (Lean identifier characters, `.`
/// included, delimit words), as 1-based line numbers.
fn word_lines(text: &str, word: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(k) = line[from..].find(word) {
            let at = from + k;
            let before = line[..at].chars().next_back();
            let after = line[at + word.len()..].chars().next();
            if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
                lines.push(n + 1);
                break;
            }
            from = at + word.len();
        }
    }
    lines
}

/// The Lean sources: path → stripped text.
fn lean_sources(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut files = Vec::new();
    for dir in ["lean", "proofs"] {
        files_with(&root.join(dir), "lean", &mut files);
    }
    files
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(&p).unwrap_or_default();
            (p, strip_lean(&text))
        })
        .collect()
}

/// Last components of the names declared with the contract's keywords.
fn lean_declarations(sources: &BTreeMap<PathBuf, String>) -> BTreeSet<String> {
    const KEYWORDS: [&str; 7] = [
        "def",
        "theorem",
        "lemma",
        "structure",
        "inductive",
        "abbrev",
        "instance",
    ];
    let mut names = BTreeSet::new();
    for text in sources.values() {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        for w in tokens.windows(2) {
            if KEYWORDS.contains(&w[0]) {
                let name: String = w[1].chars().take_while(|c| is_ident(*c)).collect();
                if let Some(last) = name.rsplit('.').next().filter(|s| !s.is_empty()) {
                    names.insert(last.to_string());
                }
            }
        }
    }
    names
}

fn check_holes(root: &Path, sources: &BTreeMap<PathBuf, String>, f: &mut Findings) {
    for (p, text) in sources {
        for word in ["sorry", "admit", "axiom"] {
            for line in word_lines(text, word) {
                f.errors.push(format!(
                    "{}:{line}: `{word}` (no proof holes or axioms under lean/ and proofs/)",
                    rel(root, p)
                ));
            }
        }
    }
}

/// `import` lines: module names.
fn imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut t = line.split_whitespace();
        if t.next() == Some("import") {
            out.extend(t.map(str::to_string));
        }
    }
    out
}

fn check_imports(root: &Path, sources: &BTreeMap<PathBuf, String>, f: &mut Findings) {
    let module_path = |m: &str| -> Option<PathBuf> {
        let rel: PathBuf = m.split('.').collect::<PathBuf>().with_extension("lean");
        ["lean", "proofs"]
            .iter()
            .map(|d| root.join(d).join(&rel))
            .find(|p| sources.contains_key(p))
    };
    for dir in ["lean", "proofs"] {
        let base = root.join(dir);
        let roots: Vec<PathBuf> = sources
            .keys()
            .filter(|p| p.parent() == Some(base.as_path()))
            .cloned()
            .collect();
        let mut seen: BTreeSet<PathBuf> = roots.iter().cloned().collect();
        let mut queue: VecDeque<PathBuf> = roots.iter().cloned().collect();
        while let Some(p) = queue.pop_front() {
            for m in imports(&sources[&p]) {
                if let Some(q) = module_path(&m) {
                    if seen.insert(q.clone()) {
                        queue.push_back(q);
                    }
                }
            }
        }
        let root_names: Vec<String> = roots.iter().map(|r| rel(root, r)).collect();
        for p in sources.keys().filter(|p| p.starts_with(&base)) {
            if !seen.contains(p) {
                let module = p
                    .strip_prefix(&base)
                    .unwrap_or(p)
                    .with_extension("")
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(".");
                f.errors.push(format!(
                    "{}: module {module} is not imported from the root module ({}), so `lake build` never checks it",
                    rel(root, p),
                    if root_names.is_empty() {
                        format!("there is no {dir}/<Root>.lean")
                    } else {
                        root_names.join(", ")
                    }
                ));
            }
        }
    }
}

/// Splits a Markdown table row into cells; `|` inside backticks or escaped
/// does not split.
fn cells(line: &str) -> Vec<String> {
    let body = line.trim().trim_start_matches('|');
    let body = body.strip_suffix('|').unwrap_or(body);
    let mut out = vec![String::new()];
    let mut code = false;
    let mut prev = ' ';
    for ch in body.chars() {
        if ch == '`' {
            code = !code;
        }
        if ch == '|' && !code && prev != '\\' {
            out.push(String::new());
        } else {
            out.last_mut().expect("one cell").push(ch);
        }
        prev = ch;
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

/// The rows (line number, cells) of the first table whose header satisfies
/// `is_header`; `None` if there is no such table.
fn table(text: &str, is_header: impl Fn(&[String]) -> bool) -> Option<Vec<(usize, Vec<String>)>> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_start().starts_with('|') && is_header(&cells(l)))?;
    let mut rows = Vec::new();
    for (k, l) in lines.iter().enumerate().skip(start + 1) {
        if !l.trim_start().starts_with('|') {
            break;
        }
        let c = cells(l);
        if c.iter()
            .all(|x| x.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
        {
            continue;
        }
        rows.push((k + 1, c));
    }
    Some(rows)
}

/// The backticked spans of a cell.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

fn lean_name_shaped(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(is_ident)
}

/// The cell is exactly one backticked identifier.
fn one_identifier(cell: &str) -> Option<String> {
    let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
    (lean_name_shaped(inner) && !inner.contains('`')).then(|| inner.to_string())
}

fn check_assurance(root: &Path, declared: &BTreeSet<String>, f: &mut Findings) {
    let path = root.join("docs/assurance.md");
    let Ok(text) = fs::read_to_string(&path) else {
        f.notes
            .push("docs/assurance.md does not exist yet: no theorem names to check".into());
        return;
    };
    let header = ["Claim", "Theorems", "Rust code", "Tests", "Limits"];
    let Some(rows) = table(&text, |c| {
        c.len() == header.len() && c.iter().zip(header).all(|(a, b)| a == b)
    }) else {
        f.errors.push(format!(
            "docs/assurance.md: no table with the header `| {} |`",
            header.join(" | ")
        ));
        return;
    };
    let mut checked = 0;
    for (line, c) in rows {
        if c.len() != header.len() {
            f.errors.push(format!(
                "docs/assurance.md:{line}: {} cells, the table has {}",
                c.len(),
                header.len()
            ));
            continue;
        }
        for name in backticked(&c[1])
            .into_iter()
            .filter(|n| lean_name_shaped(n))
        {
            checked += 1;
            let last = name.rsplit('.').next().unwrap_or(&name);
            if !declared.contains(last) {
                f.errors.push(format!(
                    "docs/assurance.md:{line}: theorem `{name}` is not declared under lean/ or proofs/ (no `theorem {last}`)"
                ));
            }
        }
    }
    f.notes.push(format!(
        "docs/assurance.md: {checked} theorem names checked"
    ));
}

fn rust_declarations(root: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in ["rust", "src", "ffi"] {
        files_with(&root.join(dir), "rs", &mut files);
    }
    const KEYWORDS: [&str; 8] = [
        "fn", "struct", "enum", "type", "trait", "const", "static", "mod",
    ];
    let mut names = BTreeSet::new();
    for p in files {
        let text = fs::read_to_string(&p).unwrap_or_default();
        let tokens: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|t| !t.is_empty())
            .collect();
        for w in tokens.windows(2) {
            if KEYWORDS.contains(&w[0]) {
                names.insert(w[1].to_string());
            }
        }
    }
    names
}

fn check_mirror(root: &Path, declared: &BTreeSet<String>, f: &mut Findings) {
    let path = root.join("docs/lean.md");
    let Ok(text) = fs::read_to_string(&path) else {
        f.notes
            .push("docs/lean.md does not exist yet: no mirror table to check".into());
        return;
    };
    let Some(rows) = table(&text, |c| c.len() >= 2 && c[0] == "Rust" && c[1] == "Lean") else {
        f.errors
            .push("docs/lean.md: no mirror table (header `| Rust | Lean | ... |`)".into());
        return;
    };
    let rust = rust_declarations(root);
    for (line, c) in &rows {
        let (Some(r), Some(l)) = (
            c.first().and_then(|x| one_identifier(x)),
            c.get(1).and_then(|x| one_identifier(x)),
        ) else {
            f.errors.push(format!(
                "docs/lean.md:{line}: a mirror row must be | `rust_name` | `LeanName` | note |, found | {} |",
                c.iter().take(2).cloned().collect::<Vec<_>>().join(" | ")
            ));
            continue;
        };
        if !rust.contains(&r) {
            f.errors.push(format!(
                "docs/lean.md:{line}: Rust item `{r}` is not declared under rust/, src/ or ffi/"
            ));
        }
        let last = l.rsplit('.').next().unwrap_or(&l);
        if !declared.contains(last) {
            f.errors.push(format!(
                "docs/lean.md:{line}: Lean name `{l}` is not declared under lean/ or proofs/ (no `def`/`structure`/... `{last}`)"
            ));
        }
    }
    f.notes
        .push(format!("docs/lean.md: {} mirror rows checked", rows.len()));
}

fn check_exports(root: &Path, f: &mut Findings) {
    let path = root.join("lean/Agenra/Ffi.lean");
    let Ok(text) = fs::read_to_string(&path) else {
        f.notes
            .push("lean/Agenra/Ffi.lean does not exist yet: no exports to check".into());
        return;
    };
    let text = strip_lean(&text);
    for e in agenra_lean::Entry::ALL {
        let sym = e.symbol();
        if !text.contains(&format!("@[export {sym}]")) {
            f.errors.push(format!(
                "lean/Agenra/Ffi.lean: no `@[export {sym}]` (an entry point of docs/lean-ffi.md)"
            ));
        }
    }
}

fn check(root: &Path) -> Findings {
    let mut f = Findings::default();
    let sources = lean_sources(root);
    let declared = lean_declarations(&sources);
    check_holes(root, &sources, &mut f);
    check_imports(root, &sources, &mut f);
    check_assurance(root, &declared, &mut f);
    check_mirror(root, &declared, &mut f);
    check_exports(root, &mut f);
    f
}

#[test]
fn the_repository_passes_the_assurance_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let f = check(root);
    for n in &f.notes {
        println!("assurance: note: {n}");
    }
    assert!(
        f.errors.is_empty(),
        "assurance check failed:\n  {}",
        f.errors.join("\n  ")
    );
    println!("assurance: OK");
}

/// A scratch repository for the fixture tests.
struct Fixture(PathBuf);

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("agenra-assurance-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        Fixture(dir)
    }

    fn write(&self, path: &str, text: &str) -> &Fixture {
        let p = self.0.join(path);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
        self
    }

    /// A repository that passes: two roots, one spec file, one proof file,
    /// both documents, a Rust item.
    fn good(name: &str) -> Fixture {
        let f = Fixture::new(name);
        f.write("lean/Agenra.lean", "import Agenra.Spec\n")
            .write(
                "lean/Agenra/Spec.lean",
                "namespace Agenra\n-- no sorry here: a comment\ndef grantMatches (n : Nat) : Bool := n == 0\n/- admit, axiom: in a comment -/\ndef msg : String := \"sorry\"\nend Agenra\n",
            )
            .write("proofs/AgenraProofs.lean", "import AgenraProofs.Basic\n")
            .write(
                "proofs/AgenraProofs/Basic.lean",
                "import Agenra.Spec\nnamespace Agenra\ntheorem grantMatches_zero : grantMatches 0 = true := rfl\nend Agenra\n",
            )
            .write(
                "docs/assurance.md",
                "# A\n\n| Claim | Theorems | Rust code | Tests | Limits |\n|---|---|---|---|---|\n| zero matches | `Agenra.grantMatches_zero` | `x.rs` | `t` | `a || b` — none |\n",
            )
            .write(
                "docs/lean.md",
                "| Rust | Lean | Note |\n|---|---|---|\n| `grant_matches` | `Agenra.grantMatches` | |\n",
            )
            .write("rust/core/src/spec.rs", "pub fn grant_matches() {}\n");
        f
    }

    fn errors(&self) -> Vec<String> {
        check(&self.0).errors
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn only_error(f: &Fixture) -> String {
    let e = f.errors();
    assert_eq!(e.len(), 1, "expected one error, got {e:#?}");
    e[0].clone()
}

#[test]
fn a_good_fixture_passes() {
    let f = Fixture::good("good");
    assert_eq!(f.errors(), Vec::<String>::new());
}

#[test]
fn holes_are_found_with_file_and_line() {
    let f = Fixture::good("sorry");
    f.write(
        "proofs/AgenraProofs/Basic.lean",
        "import Agenra.Spec\nnamespace Agenra\ntheorem grantMatches_zero : grantMatches 0 = true := by\n  sorry\nend Agenra\n",
    );
    assert_eq!(
        only_error(&f),
        "proofs/AgenraProofs/Basic.lean:4: `sorry` (no proof holes or axioms under lean/ and proofs/)"
    );
    let f = Fixture::good("axiom");
    f.write("lean/Agenra/Spec.lean", "namespace Agenra\naxiom grantMatches_zero : True\ndef grantMatches (n : Nat) : Bool := true\nend Agenra\n");
    assert!(only_error(&f).starts_with("lean/Agenra/Spec.lean:2: `axiom`"));
    let f = Fixture::good("admit");
    f.write(
        "proofs/AgenraProofs/Basic.lean",
        "import Agenra.Spec\nnamespace Agenra\ntheorem grantMatches_zero : grantMatches 0 = true := by admit\nend Agenra\n",
    );
    assert!(only_error(&f).starts_with("proofs/AgenraProofs/Basic.lean:3: `admit`"));
    // Names that merely contain the words are fine.
    let f = Fixture::good("names");
    f.write(
        "lean/Agenra/Spec.lean",
        "namespace Agenra\ndef grantMatches (n : Nat) : Bool := true\ndef admitCall := 1\ndef x := Foo.sorry_free\n#print axioms grantMatches\ndef c : Char := '\"'\nend Agenra\n",
    );
    assert_eq!(f.errors(), Vec::<String>::new());
}

#[test]
fn an_unimported_proof_file_is_found() {
    let f = Fixture::good("import");
    f.write(
        "proofs/AgenraProofs/Extra.lean",
        "theorem extra : True := trivial\n",
    );
    assert_eq!(
        only_error(&f),
        "proofs/AgenraProofs/Extra.lean: module AgenraProofs.Extra is not imported from the root module (proofs/AgenraProofs.lean), so `lake build` never checks it"
    );
    // Imported through another file: fine.
    f.write("proofs/AgenraProofs/Basic.lean", "import Agenra.Spec\nimport AgenraProofs.Extra\nnamespace Agenra\ntheorem grantMatches_zero : True := trivial\nend Agenra\n");
    assert_eq!(f.errors(), Vec::<String>::new());
}

#[test]
fn a_missing_theorem_is_named() {
    let f = Fixture::good("theorem");
    f.write(
        "docs/assurance.md",
        "| Claim | Theorems | Rust code | Tests | Limits |\n|---|---|---|---|---|\n| c | `Agenra.grantMatches_zero`, `Agenra.no_such_theorem` | r | t | l |\n",
    );
    assert_eq!(
        only_error(&f),
        "docs/assurance.md:3: theorem `Agenra.no_such_theorem` is not declared under lean/ or proofs/ (no `theorem no_such_theorem`)"
    );
    // Named only in a comment: still missing.
    f.write("lean/Agenra/Spec.lean", "namespace Agenra\ndef grantMatches (n : Nat) : Bool := true\n-- theorem no_such_theorem\nend Agenra\n");
    assert_eq!(f.errors().len(), 1);
}

#[test]
fn documents_are_optional_until_they_exist_then_need_their_tables() {
    let f = Fixture::good("absent");
    fs::remove_file(f.0.join("docs/assurance.md")).unwrap();
    fs::remove_file(f.0.join("docs/lean.md")).unwrap();
    assert_eq!(f.errors(), Vec::<String>::new());
    assert!(check(&f.0)
        .notes
        .iter()
        .any(|n| n.contains("docs/assurance.md does not exist yet")));
    f.write("docs/assurance.md", "# Assurance\n\nTo be written.\n");
    assert_eq!(
        only_error(&f),
        "docs/assurance.md: no table with the header `| Claim | Theorems | Rust code | Tests | Limits |`"
    );
    f.write(
        "docs/assurance.md",
        "| Claim | Theorems | Rust code | Tests | Limits |\n|---|---|---|---|---|\n",
    );
    f.write("docs/lean.md", "# Lean\n");
    assert_eq!(
        only_error(&f),
        "docs/lean.md: no mirror table (header `| Rust | Lean | ... |`)"
    );
}

#[test]
fn mirror_rows_need_both_names() {
    let f = Fixture::good("mirror");
    f.write(
        "docs/lean.md",
        "| Rust | Lean | Note |\n|---|---|---|\n| `grant_matches` | `Agenra.grantMatches` | |\n| `no_such_fn` | `Agenra.grantMatches` | |\n| `grant_matches` | `Agenra.noSuchDef` | |\n| `spec::grant_matches(p, g)` | `grantMatches p g` | |\n",
    );
    assert_eq!(
        f.errors(),
        vec![
            "docs/lean.md:4: Rust item `no_such_fn` is not declared under rust/, src/ or ffi/".to_string(),
            "docs/lean.md:5: Lean name `Agenra.noSuchDef` is not declared under lean/ or proofs/ (no `def`/`structure`/... `noSuchDef`)".to_string(),
            "docs/lean.md:6: a mirror row must be | `rust_name` | `LeanName` | note |, found | `spec::grant_matches(p, g)` | `grantMatches p g` |".to_string(),
        ]
    );
}

#[test]
fn the_ffi_module_must_export_every_entry_point() {
    let f = Fixture::good("exports");
    f.write(
        "lean/Agenra.lean",
        "import Agenra.Spec\nimport Agenra.Ffi\n",
    );
    f.write(
        "lean/Agenra/Ffi.lean",
        "@[export agenra_ffi_version] def ffiVersion (b : ByteArray) : ByteArray := b\n",
    );
    let e = f.errors();
    assert_eq!(e.len(), agenra_lean::Entry::ALL.len() - 1, "{e:#?}");
    assert!(e.iter().any(|x| x == "lean/Agenra/Ffi.lean: no `@[export agenra_ffi_step]` (an entry point of docs/lean-ffi.md)"));
}
