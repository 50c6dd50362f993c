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
//! 6. Every row of that table (header `| Claim | Bridge | Theorems | Rust
//!    code | Tests | Limits |`) starts with a key `**Key.**` and carries
//!    one bridge: *construction*, *proved in Lean (not machine-checked
//!    here)* (names a theorem), *tested* (names tests that are `fn`s) or
//!    *assumed* (Limits start with `Assumed`).
//! 7. The README's claims list (`<!-- claims -->` … `<!-- /claims -->`,
//!    items `* **Key** [label]: text`) names only rows of that table, with
//!    their label and their theorems; a Lean name `Agenra.x` anywhere in
//!    the README is a theorem of the table.
//! 8. "verified" appears in README.md, docs/*.md and package descriptions
//!    only on a line that also says "not machine-checked".
//! 9. Anonymous constructors `⟨…⟩` whose expected type is written next to
//!    them (`x : X := ⟨…⟩`, `(⟨…⟩ : X)`, an argument of a project `def`
//!    declared `(p : X)`) have as many arguments as the project structure
//!    `X` has fields (`check_anonymous_constructors` says what it cannot
//!    see: inferred expected types, `extends`, patterns, nested `⟨…⟩`).
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

/// A structure of the project: its explicit fields in order, with their
/// types (the text after ` : `, up to ` := `), and where it is declared.
#[derive(Debug, Clone)]
struct Structure {
    fields: Vec<(String, String)>,
    at: String,
}

/// `structure X … where` declarations of lean/ and proofs/ (stripped
/// text): their explicit fields. A structure that `extends` another is left
/// out (its anonymous constructor takes the parent first: not modelled).
fn lean_structures(
    root: &Path,
    sources: &BTreeMap<PathBuf, String>,
) -> BTreeMap<String, Structure> {
    let mut out = BTreeMap::new();
    for (p, text) in sources {
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i];
            let indent = l.len() - l.trim_start().len();
            let mut t = l.split_whitespace();
            if t.next() != Some("structure") {
                i += 1;
                continue;
            }
            let Some(name) = t
                .next()
                .map(|n| n.chars().take_while(|c| is_ident(*c)).collect::<String>())
            else {
                i += 1;
                continue;
            };
            // The header may run over several lines up to `where`.
            let mut j = i;
            let mut header = String::new();
            while j < lines.len() {
                header.push_str(lines[j]);
                header.push(' ');
                if lines[j].split_whitespace().any(|w| w == "where") {
                    break;
                }
                j += 1;
            }
            let extends = header.split_whitespace().any(|w| w == "extends");
            let mut fields = Vec::new();
            let mut field_indent = None;
            let mut k = j + 1;
            while k < lines.len() {
                let f = lines[k];
                if f.trim().is_empty() {
                    k += 1;
                    continue;
                }
                let ind = f.len() - f.trim_start().len();
                if ind <= indent {
                    break;
                }
                let body = f.trim();
                if body.starts_with("deriving") {
                    break;
                }
                let fi = *field_indent.get_or_insert(ind);
                if ind == fi && !body.contains("::") {
                    // `a b : T`, `a : T := d`, `(a : T)`.
                    let body = body.trim_start_matches('(').trim_end_matches(')');
                    if let Some((names, ty)) = body.split_once(" : ") {
                        let ty = ty.split(" := ").next().unwrap_or(ty).trim().to_string();
                        for n in names.split_whitespace() {
                            fields.push((n.to_string(), ty.clone()));
                        }
                    }
                }
                k += 1;
            }
            if !extends {
                let last = name.rsplit('.').next().unwrap_or(&name).to_string();
                out.insert(
                    last,
                    Structure {
                        fields,
                        at: format!("{}:{}", rel(root, p), i + 1),
                    },
                );
            }
            i = k.max(i + 1);
        }
    }
    out
}

/// The index just past the bracket that closes the one at `open` (any of
/// `(` `[` `{` `⟨`), or `None`.
fn close_of(c: &[char], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, &ch) in c.iter().enumerate().skip(open) {
        match ch {
            '(' | '[' | '{' | '⟨' => depth += 1,
            ')' | ']' | '}' | '⟩' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The top-level arguments of the anonymous constructor at `open`.
fn anon_args(c: &[char], open: usize, close: usize) -> usize {
    let inner: String = c[open + 1..close - 1].iter().collect();
    if inner.trim().is_empty() {
        return 0;
    }
    let mut depth = 0i32;
    let mut n = 1;
    for ch in inner.chars() {
        match ch {
            '(' | '[' | '{' | '⟨' => depth += 1,
            ')' | ']' | '}' | '⟩' => depth -= 1,
            ',' if depth == 0 => n += 1,
            _ => {}
        }
    }
    n
}

/// Types the anonymous constructor cannot nest into (not structures).
fn is_leaf_type(ty: &str) -> bool {
    let head = ty.split_whitespace().next().unwrap_or("");
    matches!(
        head,
        "Nat"
            | "Int"
            | "Bool"
            | "String"
            | "Char"
            | "List"
            | "Option"
            | "Array"
            | "ByteArray"
            | "UInt8"
            | "UInt16"
            | "UInt32"
            | "UInt64"
            | "Fin"
            | "Prop"
    )
}

/// The error, if `args` arguments cannot build structure `name`: fewer
/// than its fields always; more only when the last field is a structure
/// of the project that the rest cannot build, or a type that is no
/// structure (`Nat`, `List …`, …): Lean nests extra arguments into the
/// last field.
fn arity_error(structs: &BTreeMap<String, Structure>, name: &str, args: usize) -> Option<String> {
    let s = structs.get(name)?;
    let n = s.fields.len();
    if args < n {
        return Some(format!(
            "⟨…⟩ with {args} argument(s) for `{name}`, which has {n} fields ({}; declared {}): the anonymous constructor fills no defaults",
            s.fields.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", "),
            s.at
        ));
    }
    if args > n && n > 0 {
        let last = &s.fields[n - 1].1;
        let head = last.split_whitespace().next().unwrap_or("");
        let head = head.rsplit('.').next().unwrap_or(head);
        if structs.contains_key(head) && !last.contains(' ') {
            return arity_error(structs, head, args - n + 1);
        }
        if is_leaf_type(last) {
            return Some(format!(
                "⟨…⟩ with {args} argument(s) for `{name}`, which has {n} fields (declared {}), the last of type `{last}`",
                s.at
            ));
        }
    }
    None
}

/// Explicit parameter types of the project's `def`s/`abbrev`s whose
/// parameters are written as binders: `def f (a : T) (b c : U) {x : V} …`.
/// `None` for a parameter whose type is not one identifier.
fn def_params(sources: &BTreeMap<PathBuf, String>) -> BTreeMap<String, Vec<Option<String>>> {
    let mut out = BTreeMap::new();
    for text in sources.values() {
        let c: Vec<char> = text.chars().collect();
        let s: String = c.iter().collect();
        for kw in ["def ", "abbrev "] {
            let mut from = 0;
            while let Some(k) = s[from..].find(kw) {
                let at = from + k;
                from = at + kw.len();
                if at > 0 && s[..at].chars().next_back().is_some_and(is_ident) {
                    continue;
                }
                let rest = &s[at + kw.len()..];
                let name: String = rest.chars().take_while(|ch| is_ident(*ch)).collect();
                let last = name.rsplit('.').next().unwrap_or(&name).to_string();
                let mut params = Vec::new();
                let mut r = rest[name.len()..].trim_start();
                while let Some(open) = r
                    .chars()
                    .next()
                    .filter(|ch| matches!(ch, '(' | '{' | '[' | '⦃'))
                {
                    let rc: Vec<char> = r.chars().collect();
                    let Some(end) = close_of(&rc, 0) else { break };
                    let group: String = rc[1..end - 1].iter().collect();
                    if open == '(' {
                        if let Some((names, ty)) = group.split_once(" : ") {
                            let ty = ty.trim();
                            let one = lean_name_shaped(ty)
                                .then(|| ty.rsplit('.').next().unwrap_or(ty).to_string());
                            for _ in names.split_whitespace() {
                                params.push(one.clone());
                            }
                        }
                    }
                    let bytes: usize = rc[..end].iter().map(|ch| ch.len_utf8()).sum();
                    r = r[bytes..].trim_start();
                }
                if !last.is_empty() && params.iter().any(Option::is_some) {
                    out.entry(last).or_insert(params);
                }
            }
        }
    }
    out
}

/// Anonymous constructors `⟨…⟩` whose expected type is written next to
/// them, checked against the project's structures: `x : X := ⟨…⟩` (a
/// `def`, `let`, `have`, `instance`), `(⟨…⟩ : X)`, and an argument of a
/// project `def` whose parameter at that position is declared `(p : X)`
/// (`step ⟨…⟩ (State.initial ⟨…⟩)`). It cannot see an expected type that
/// Lean infers (unification, `show`, implicit or instance arguments, a
/// parameter written as `A → B`, a function value), structures that
/// `extends` another, nor patterns (`fun ⟨a, b⟩`, `match`, `obtain`,
/// `rcases`), and `.mk` applications; it reads stripped source text, not
/// Lean's parse.
fn check_anonymous_constructors(
    root: &Path,
    sources: &BTreeMap<PathBuf, String>,
    f: &mut Findings,
) {
    let structs = lean_structures(root, sources);
    let params = def_params(sources);
    let mut checked = 0;
    for (p, text) in sources {
        let c: Vec<char> = text.chars().collect();
        let line_of = |k: usize| c[..k].iter().filter(|&&ch| ch == '\n').count() + 1;
        let mut report = |k: usize, name: &str, args: usize, f: &mut Findings| {
            checked += 1;
            if let Some(e) = arity_error(&structs, name, args) {
                f.errors
                    .push(format!("{}:{}: {e}", rel(root, p), line_of(k)));
            }
        };
        for k in 0..c.len() {
            if c[k] != '⟨' {
                continue;
            }
            let Some(end) = close_of(&c, k) else { continue };
            let args = anon_args(&c, k, end);
            // `(⟨…⟩ : X)`
            let before: String = c[..k].iter().collect();
            let after: String = c[end..].iter().collect();
            if before.trim_end().ends_with('(') {
                if let Some(rest) = after.trim_start().strip_prefix(':') {
                    let ty: String = rest
                        .trim_start()
                        .chars()
                        .take_while(|ch| is_ident(*ch))
                        .collect();
                    let rest2 = rest.trim_start()[ty.len()..].trim_start();
                    if rest2.starts_with(')') {
                        report(k, ty.rsplit('.').next().unwrap_or(&ty), args, f);
                        continue;
                    }
                }
            }
            // `x : X := ⟨…⟩`
            if let Some(b) = before.trim_end().strip_suffix(":=") {
                let b = b.trim_end();
                let ty: String = b
                    .chars()
                    .rev()
                    .take_while(|ch| is_ident(*ch))
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                let b2 = b[..b.len() - ty.len()].trim_end();
                if !ty.is_empty() && b2.ends_with(':') && !b2.ends_with("::") {
                    report(k, ty.rsplit('.').next().unwrap_or(&ty), args, f);
                    continue;
                }
            }
        }
        // Arguments of project defs: `f a (b) ⟨…⟩ …`.
        let s: String = c.iter().collect();
        for (fname, ptys) in &params {
            let mut from = 0;
            while let Some(off) = s[from..].find(fname.as_str()) {
                let at = from + off;
                from = at + fname.len();
                let prev = s[..at].chars().next_back();
                let next = s[at + fname.len()..].chars().next();
                if next.is_some_and(is_ident) || prev.is_some_and(|ch| is_ident(ch) && ch != '.') {
                    continue;
                }
                // Not the declaration itself.
                let head = s[..at].trim_end();
                if head.ends_with("def") || head.ends_with("abbrev") || head.ends_with("theorem") {
                    continue;
                }
                let rc: Vec<char> = s[from..].chars().collect();
                let base = s[..from].chars().count();
                let mut q = 0;
                let mut index = 0;
                loop {
                    while q < rc.len() && matches!(rc[q], ' ' | '\n') {
                        q += 1;
                    }
                    if q >= rc.len() || index >= ptys.len() {
                        break;
                    }
                    let ch = rc[q];
                    let end = if matches!(ch, '(' | '[' | '⟨') {
                        match close_of(&rc, q) {
                            Some(e) => e,
                            None => break,
                        }
                    } else if is_ident(ch) || ch.is_ascii_digit() {
                        let word: String = rc[q..].iter().take_while(|x| is_ident(**x)).collect();
                        if matches!(
                            word.as_str(),
                            "then"
                                | "else"
                                | "with"
                                | "at"
                                | "by"
                                | "do"
                                | "fun"
                                | "in"
                                | "from"
                                | "if"
                                | "match"
                                | "let"
                                | "have"
                                | "show"
                                | "using"
                        ) {
                            break;
                        }
                        q + word.chars().count()
                    } else {
                        break;
                    };
                    if ch == '⟨' {
                        if let Some(ty) = &ptys[index] {
                            let args = anon_args(&rc, q, end);
                            report(base + q, ty, args, f);
                        }
                    }
                    q = end;
                    index += 1;
                }
            }
        }
    }
    f.notes.push(format!(
        "lean/, proofs/: {checked} anonymous constructors with a visible expected type checked against {} structures",
        structs.len()
    ));
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

/// The header of the claims table of docs/assurance.md.
const ASSURANCE_HEADER: [&str; 6] = [
    "Claim",
    "Bridge",
    "Theorems",
    "Rust code",
    "Tests",
    "Limits",
];

/// The labels of the column *Bridge* (written in italics in the table).
const LEAN_LABEL: &str = "proved in Lean (not machine-checked here)";
const BRIDGES: [&str; 4] = ["construction", LEAN_LABEL, "tested", "assumed"];

/// One row of the claims table: its key (the bold lead of the Claim cell,
/// without the final period), label, theorem names and line.
#[derive(Debug)]
struct ClaimRow {
    line: usize,
    key: String,
    label: String,
    theorems: Vec<String>,
}

/// The bold lead `**Key.**` of a cell, without its final period.
fn bold_key(cell: &str) -> Option<String> {
    let rest = cell.trim_start().strip_prefix("**")?;
    let end = rest.find("**")?;
    let key = rest[..end].trim().trim_end_matches('.').trim();
    (!key.is_empty()).then(|| key.to_string())
}

/// The claims table's rows, keyed; errors for a row without a key or a
/// label, a duplicated key, a label its columns do not back.
fn claim_rows(text: &str, tests: &BTreeSet<String>, f: &mut Findings) -> Option<Vec<ClaimRow>> {
    let rows = table(text, |c| {
        c.len() == ASSURANCE_HEADER.len() && c.iter().zip(ASSURANCE_HEADER).all(|(a, b)| a == b)
    })?;
    let mut out: Vec<ClaimRow> = Vec::new();
    for (line, c) in rows {
        if c.len() != ASSURANCE_HEADER.len() {
            continue; // reported by check_assurance
        }
        let Some(key) = bold_key(&c[0]) else {
            f.errors.push(format!(
                "docs/assurance.md:{line}: the claim has no key (a cell starting `**Key.**`)"
            ));
            continue;
        };
        if out.iter().any(|r| r.key == key) {
            f.errors.push(format!(
                "docs/assurance.md:{line}: the key `{key}` is used by an earlier row"
            ));
        }
        let label = c[1].trim().trim_matches('*').trim().to_string();
        if !BRIDGES.contains(&label.as_str()) {
            f.errors.push(format!(
                "docs/assurance.md:{line}: bridge `{}` is not one of: {}",
                c[1],
                BRIDGES.join(", ")
            ));
        }
        let theorems: Vec<String> = backticked(&c[2])
            .into_iter()
            .filter(|n| lean_name_shaped(n))
            .collect();
        if label == LEAN_LABEL && theorems.is_empty() {
            f.errors.push(format!(
                "docs/assurance.md:{line}: `{key}` is labelled proved in Lean but names no theorem"
            ));
        }
        if label == "tested" {
            let named: Vec<String> = backticked(&c[4])
                .into_iter()
                .filter(|n| !n.ends_with(".rs") && !n.contains('/'))
                .map(|n| n.rsplit("::").next().unwrap_or(&n).to_string())
                .filter(|n| {
                    n.contains('_')
                        && n.chars()
                            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
                })
                .collect();
            if named.is_empty() {
                f.errors.push(format!(
                    "docs/assurance.md:{line}: `{key}` is labelled tested but names no test"
                ));
            }
            for n in named.iter().filter(|n| !tests.contains(*n)) {
                f.errors.push(format!(
                    "docs/assurance.md:{line}: test `{n}` of `{key}` is not a `fn` under tests/, rust/, src/ or ffi/"
                ));
            }
        }
        if label == "assumed" && !c[5].starts_with("Assumed") {
            f.errors.push(format!(
                "docs/assurance.md:{line}: `{key}` is labelled assumed, but its Limits do not start with `Assumed`: say what"
            ));
        }
        out.push(ClaimRow {
            line,
            key,
            label,
            theorems,
        });
    }
    Some(out)
}

/// The README's claims (the list between `<!-- claims` and `<!-- /claims
/// -->`, items `* **Key** [label]: text`) must be rows of the table, with
/// the same label, and name only theorems of that row; a Lean name
/// (`Agenra.x`) anywhere in the README must be in the table.
fn check_readme(root: &Path, rows: &[ClaimRow], f: &mut Findings) {
    let Ok(text) = fs::read_to_string(root.join("README.md")) else {
        f.notes
            .push("README.md does not exist yet: no claims to check".into());
        return;
    };
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_start().starts_with("<!-- claims"));
    let end = lines.iter().position(|l| l.trim() == "<!-- /claims -->");
    let (Some(start), Some(end)) = (start, end) else {
        f.errors
            .push("README.md: no claims list (`<!-- claims ... -->` … `<!-- /claims -->`)".into());
        return;
    };
    let all_theorems: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.theorems.iter().map(String::as_str))
        .collect();
    for (n, l) in lines.iter().enumerate() {
        for name in backticked(l) {
            if name.starts_with("Agenra.")
                && lean_name_shaped(&name)
                && !all_theorems.contains(name.as_str())
            {
                f.errors.push(format!(
                    "README.md:{}: theorem `{name}` is not carried by the table of docs/assurance.md",
                    n + 1
                ));
            }
        }
    }
    let mut count = 0;
    for (n, l) in lines.iter().enumerate().take(end).skip(start + 1) {
        let line = n + 1;
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        let parsed = l.strip_prefix("* ").and_then(|rest| {
            let key = bold_key(rest)?;
            let after = rest.trim_start().strip_prefix("**")?;
            let after = &after[after.find("**")? + 2..];
            let label = after.trim_start().strip_prefix('[')?;
            let label = &label[..label.find(']')?];
            Some((key, label.trim().to_string()))
        });
        let Some((key, label)) = parsed else {
            f.errors.push(format!(
                "README.md:{line}: a claim must read `* **Key** [label]: text`"
            ));
            continue;
        };
        count += 1;
        let Some(row) = rows.iter().find(|r| r.key == key) else {
            f.errors.push(format!(
                "README.md:{line}: claim `{key}` is not a row of the table of docs/assurance.md"
            ));
            continue;
        };
        if row.label != label {
            f.errors.push(format!(
                "README.md:{line}: claim `{key}` is labelled [{label}], docs/assurance.md:{} says [{}]",
                row.line, row.label
            ));
        }
        for name in backticked(l)
            .into_iter()
            .filter(|x| x.starts_with("Agenra."))
        {
            if !row.theorems.contains(&name) {
                f.errors.push(format!(
                    "README.md:{line}: claim `{key}` cites `{name}`, which its row (docs/assurance.md:{}) does not carry",
                    row.line
                ));
            }
        }
    }
    f.notes.push(format!(
        "README.md: {count} claims checked against docs/assurance.md"
    ));
}

/// "verified" (the word, any case) in README.md, docs/*.md or a package
/// description only on a line that also says "not machine-checked".
fn check_verified(root: &Path, f: &mut Findings) {
    let mut files: Vec<PathBuf> = vec![root.join("README.md")];
    files_with(&root.join("docs"), "md", &mut files);
    let mut manifests = Vec::new();
    files_with(root, "toml", &mut manifests);
    for p in manifests {
        if p.file_name().and_then(|n| n.to_str()) == Some("Cargo.toml") {
            files.push(p);
        }
    }
    for p in files {
        let Ok(text) = fs::read_to_string(&p) else {
            continue;
        };
        let is_manifest = p.extension().and_then(|e| e.to_str()) == Some("toml");
        for (n, l) in text.lines().enumerate() {
            if is_manifest && !l.trim_start().starts_with("description") {
                continue;
            }
            let lower = l.to_lowercase();
            if !word_lines(&lower, "verified").is_empty() && !lower.contains("not machine-checked")
            {
                f.errors.push(format!(
                    "{}:{}: says \"verified\" without \"not machine-checked\" (no Lean toolchain has built the proofs)",
                    rel(root, &p),
                    n + 1
                ));
            }
        }
    }
}

/// Names of `fn`s under tests/, rust/, src/ and ffi/ (test names).
fn rust_fns(root: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in ["tests", "rust", "src", "ffi"] {
        files_with(&root.join(dir), "rs", &mut files);
    }
    let mut names = BTreeSet::new();
    for p in files {
        let text = fs::read_to_string(&p).unwrap_or_default();
        let tokens: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|t| !t.is_empty())
            .collect();
        for w in tokens.windows(2) {
            if w[0] == "fn" {
                names.insert(w[1].to_string());
            }
        }
    }
    names
}

fn check_claims(root: &Path, f: &mut Findings) {
    let Ok(text) = fs::read_to_string(root.join("docs/assurance.md")) else {
        return;
    };
    // Without the table (reported by check_assurance) there is nothing to
    // hold the README to.
    if let Some(rows) = claim_rows(&text, &rust_fns(root), f) {
        check_readme(root, &rows, f);
    }
}

fn check_assurance(root: &Path, declared: &BTreeSet<String>, f: &mut Findings) {
    let path = root.join("docs/assurance.md");
    let Ok(text) = fs::read_to_string(&path) else {
        f.notes
            .push("docs/assurance.md does not exist yet: no theorem names to check".into());
        return;
    };
    let header = ASSURANCE_HEADER;
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
        for name in backticked(&c[2])
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
    check_anonymous_constructors(root, &sources, &mut f);
    check_imports(root, &sources, &mut f);
    check_assurance(root, &declared, &mut f);
    check_mirror(root, &declared, &mut f);
    check_exports(root, &mut f);
    check_claims(root, &mut f);
    check_verified(root, &mut f);
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
                "# A\n\n| Claim | Bridge | Theorems | Rust code | Tests | Limits |\n|---|---|---|---|---|---|\n| **Zero.** zero matches | *proved in Lean (not machine-checked here)* | `Agenra.grantMatches_zero` | `x.rs` | `t` | `a || b` — none |\n| **Spec runs.** the spec runs | *tested* | — | `x.rs` | `tests/spec.rs` (`the_spec_runs`) | — |\n",
            )
            .write(
                "README.md",
                "# R\n\n<!-- claims -->\n* **Zero** [proved in Lean (not machine-checked here)]: zero matches (`Agenra.grantMatches_zero`).\n* **Spec runs** [tested]: it runs.\n<!-- /claims -->\n",
            )
            .write("tests/spec.rs", "#[test]\nfn the_spec_runs() {}\n",
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
        "| Claim | Bridge | Theorems | Rust code | Tests | Limits |\n|---|---|---|---|---|---|\n| **Zero.** c | *proved in Lean (not machine-checked here)* | `Agenra.grantMatches_zero`, `Agenra.no_such_theorem` | r | t | l |\n| **Spec runs.** c | *tested* | — | r | `the_spec_runs` | l |\n",
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
        "docs/assurance.md: no table with the header `| Claim | Bridge | Theorems | Rust code | Tests | Limits |`"
    );
    f.write(
        "docs/assurance.md",
        "| Claim | Bridge | Theorems | Rust code | Tests | Limits |\n|---|---|---|---|---|---|\n| **Zero.** c | *proved in Lean (not machine-checked here)* | `Agenra.grantMatches_zero` | r | t | l |\n| **Spec runs.** c | *tested* | — | r | `the_spec_runs` | l |\n",
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

#[test]
fn the_readme_claims_are_held_to_the_table() {
    let f = Fixture::good("readme");
    let lean = "proved in Lean (not machine-checked here)";
    // Another label than the table's.
    f.write(
        "README.md",
        "<!-- claims -->\n* **Zero** [tested]: zero matches.\n<!-- /claims -->\n",
    );
    assert_eq!(
        only_error(&f),
        format!(
            "README.md:2: claim `Zero` is labelled [tested], docs/assurance.md:5 says [{lean}]"
        )
    );
    // A claim the table does not carry.
    f.write(
        "README.md",
        "<!-- claims -->\n* **Fast** [tested]: it is fast.\n<!-- /claims -->\n",
    );
    assert_eq!(
        only_error(&f),
        "README.md:2: claim `Fast` is not a row of the table of docs/assurance.md"
    );
    // A theorem the table does not carry, inside or outside the list.
    f.write(
        "README.md",
        "Proved: `Agenra.other_theorem`.\n<!-- claims -->\n* **Zero** [proved in Lean (not machine-checked here)]: `Agenra.grantMatches_zero`.\n<!-- /claims -->\n",
    );
    assert_eq!(
        only_error(&f),
        "README.md:1: theorem `Agenra.other_theorem` is not carried by the table of docs/assurance.md"
    );
    // A theorem of another row.
    f.write(
        "README.md",
        "<!-- claims -->\n* **Spec runs** [tested]: `Agenra.grantMatches_zero`.\n<!-- /claims -->\n",
    );
    assert_eq!(
        only_error(&f),
        "README.md:2: claim `Spec runs` cites `Agenra.grantMatches_zero`, which its row (docs/assurance.md:6) does not carry"
    );
    // A line that is not a claim, and no list at all.
    f.write(
        "README.md",
        "<!-- claims -->\n* Zero matches, proved.\n<!-- /claims -->\n",
    );
    assert_eq!(
        only_error(&f),
        "README.md:2: a claim must read `* **Key** [label]: text`"
    );
    f.write("README.md", "# R\n\nZero matches.\n");
    assert_eq!(
        only_error(&f),
        "README.md: no claims list (`<!-- claims ... -->` … `<!-- /claims -->`)"
    );
}

#[test]
fn every_claim_carries_one_backed_bridge() {
    let f = Fixture::good("bridges");
    let head = "| Claim | Bridge | Theorems | Rust code | Tests | Limits |\n|---|---|---|---|---|---|\n| **Zero.** c | *proved in Lean (not machine-checked here)* | `Agenra.grantMatches_zero` | r | t | l |\n| **Spec runs.** c | *tested* | — | r | `the_spec_runs` | l |\n";
    f.write(
        "docs/assurance.md",
        &format!("{head}| **Proved.** c | *proved* | — | r | t | l |\n| **Lean.** c | *proved in Lean (not machine-checked here)* | — | r | t | l |\n| **Tested.** c | *tested* | — | r | `no_such_test` | l |\n| **Guess.** c | *assumed* | — | r | — | — |\n| no key | *tested* | — | r | `the_spec_runs` | l |\n"),
    );
    assert_eq!(
        f.errors(),
        vec![
            "docs/assurance.md:5: bridge `*proved*` is not one of: construction, proved in Lean (not machine-checked here), tested, assumed".to_string(),
            "docs/assurance.md:6: `Lean` is labelled proved in Lean but names no theorem".to_string(),
            "docs/assurance.md:7: test `no_such_test` of `Tested` is not a `fn` under tests/, rust/, src/ or ffi/".to_string(),
            "docs/assurance.md:8: `Guess` is labelled assumed, but its Limits do not start with `Assumed`: say what".to_string(),
            "docs/assurance.md:9: the claim has no key (a cell starting `**Key.**`)".to_string(),
        ]
    );
}

#[test]
fn verified_needs_its_qualification() {
    let f = Fixture::good("verified");
    f.write(
        "Cargo.toml",
        "[package]\nname = \"x\"\ndescription = \"Verified authorization layer\"\n# verified: comments are not descriptions\n",
    );
    assert_eq!(
        only_error(&f),
        "Cargo.toml:3: says \"verified\" without \"not machine-checked\" (no Lean toolchain has built the proofs)"
    );
    f.write("Cargo.toml", "[package]\nname = \"x\"\n");
    f.write("docs/x.md", "A formally VERIFIED monitor.\nProofs verified in Lean (not machine-checked here).\nUnverified.\n");
    assert_eq!(
        only_error(&f),
        "docs/x.md:1: says \"verified\" without \"not machine-checked\" (no Lean toolchain has built the proofs)"
    );
}

#[test]
fn anonymous_constructors_with_the_wrong_number_of_fields_are_found() {
    let f = Fixture::good("anon");
    f.write(
        "lean/Agenra/Spec.lean",
        "namespace Agenra\ndef grantMatches (n : Nat) : Bool := n == 0\n\
         structure Policy where\n  tools : List Nat\n  agents : List Nat\n  grants : List Nat\n  \
         /-- a doc comment -/\n  sets : List String\n  shared : List Nat := []\n  deriving Repr\n\
         structure State where\n  sets : List (List String)\n\
         structure Flags where\n  a b : Bool\n\
         structure Pair where\n  n : Nat\n  flags : Flags\n\
         def State.initial (p : Policy) : State := ⟨p.sets.map (fun _ => [])⟩\n\
         def step (p : Policy) (s : State) (n : Nat) : Nat := n\nend Agenra\n",
    );
    // The bug of issue 26 (proofs/AgenraProofs/Ledger.lean): four
    // arguments for a five-field Policy, as function arguments.
    f.write(
        "proofs/AgenraProofs/Basic.lean",
        "import Agenra.Spec\nnamespace Agenra\ntheorem grantMatches_zero : grantMatches 0 = true := rfl\n\
         example : step ⟨[], [], [], [\"a\", \"b\"]⟩ (State.initial ⟨[], [], [], [\"a\"]⟩) 1 = 1 := rfl\n\
         def p5 : Policy := ⟨[], [], [], [], []⟩\n\
         def p3 : Policy := ⟨[], [], []⟩\n\
         example : (⟨true, false, true⟩ : Flags) = ⟨true, false⟩ := rfl\n\
         def nested : Pair := ⟨1, true, false⟩\n\
         def short : Pair := ⟨1, ⟨true⟩⟩\nend Agenra\n",
    );
    let fields = "tools, agents, grants, sets, shared; declared lean/Agenra/Spec.lean:3";
    let mut errors = f.errors();
    errors.sort();
    assert_eq!(
        errors,
        vec![
            format!("proofs/AgenraProofs/Basic.lean:4: ⟨…⟩ with 4 argument(s) for `Policy`, which has 5 fields ({fields}): the anonymous constructor fills no defaults"),
            format!("proofs/AgenraProofs/Basic.lean:4: ⟨…⟩ with 4 argument(s) for `Policy`, which has 5 fields ({fields}): the anonymous constructor fills no defaults"),
            format!("proofs/AgenraProofs/Basic.lean:6: ⟨…⟩ with 3 argument(s) for `Policy`, which has 5 fields ({fields}): the anonymous constructor fills no defaults"),
            "proofs/AgenraProofs/Basic.lean:7: ⟨…⟩ with 3 argument(s) for `Flags`, which has 2 fields (declared lean/Agenra/Spec.lean:13), the last of type `Bool`".to_string(),
        ]
    );
}
