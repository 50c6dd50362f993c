//! No module of ours imports a module that imports it back (issue #31).
//!
//! For every crate of the workspace, each source file is a module; a path
//! `crate::a::b::…`, `super::x::…` or `self::x::…` in code (comments are
//! skipped) is an edge to the deepest file module it names. Edges from a
//! module to its own ancestors are left out (a child reading its parent's
//! items is how Rust modules are built); any other cycle is reported with
//! its files. A file's `#[cfg(test)]` module (at its end) is not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, with its module path (`["monitor",
/// "flows"]`; `lib.rs`, `main.rs` and `mod.rs` name their folder).
fn modules(dir: &Path) -> BTreeMap<Vec<String>, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(dir).expect("under dir");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("lib" | "main" | "mod")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).expect("read source");
            out.insert(parts, text);
        }
    }
    out
}

/// The identifiers of a path that starts at `at` in `line`.
fn path_after(line: &str, at: usize) -> Vec<String> {
    line[at..]
        .split("::")
        .map(|seg| {
            seg.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .take_while(|seg| !seg.is_empty())
        .collect()
}

/// The module paths `text` (the source of module `me`) refers to.
fn references(me: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // A file's unit tests (its `#[cfg(test)]` module, last by convention)
    // may use anything.
    for line in text.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" //").next().unwrap_or(code);
        // `super` of `a/b.rs` and of `a/b/mod.rs` alike is `a`.
        let parent = me[..me.len().saturating_sub(1)].to_vec();
        for (prefix, base) in [
            ("crate::", Vec::new()),
            ("super::", parent),
            ("self::", me.to_vec()),
        ] {
            let mut from = 0;
            while let Some(i) = code[from..].find(prefix) {
                let at = from + i;
                from = at + prefix.len();
                let before = code[..at].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut path = base.clone();
                path.extend(path_after(code, from));
                out.push(path);
            }
        }
    }
    out
}

/// The deepest module of `known` that `path` names.
fn resolve(known: &BTreeSet<Vec<String>>, path: &[String]) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains(p))
}

/// The cycles among `crate_src`'s modules, each as its files.
fn cycles(crate_src: &Path) -> Vec<Vec<String>> {
    let mods = modules(crate_src);
    let known: BTreeSet<Vec<String>> = mods.keys().cloned().collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (me, text) in &mods {
        for path in references(me, text) {
            if let Some(to) = resolve(&known, &path) {
                // Left out: itself, and its ancestors (the crate root too).
                if to != *me && !me.starts_with(&to) {
                    edges.entry(me.clone()).or_default().insert(to);
                }
            }
        }
    }
    // A cycle exists where some module reaches itself.
    let mut found = Vec::new();
    for start in edges.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, trail)) = stack.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if next == start {
                    let names = trail.iter().map(|m| m.join("/")).collect::<Vec<_>>();
                    found.push(names);
                } else if seen.insert(next.clone()) {
                    let mut t = trail.clone();
                    t.push(next.clone());
                    stack.push((next.clone(), t));
                }
            }
        }
    }
    found
}

fn crate_sources() -> Vec<PathBuf> {
    let mut dirs = vec![root().join("src"), root().join("ffi/src")];
    if let Ok(entries) = std::fs::read_dir(root().join("rust")) {
        for e in entries.flatten() {
            dirs.push(e.path().join("src"));
        }
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let mut report = Vec::new();
    for dir in crate_sources() {
        for cycle in cycles(&dir) {
            report.push(format!("{}: {}", dir.display(), cycle.join(" -> ")));
        }
    }
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_between_siblings_and_ignores_parents() {
    let dir = std::env::temp_dir().join(format!("agenra-cycles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("m")).expect("mkdir");
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\nmod m;\n");
    write("a.rs", "use crate::b::B;\npub struct A;\n");
    write(
        "b.rs",
        "// use crate::a::A; (a comment)\npub struct B(crate::a::A);\n",
    );
    write("m/mod.rs", "mod x;\nuse self::x::X;\npub struct M;\n");
    write("m/x.rs", "use super::M;\npub struct X;\n");
    let found = cycles(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 2, "a -> b -> a seen from both ends: {found:?}");
    assert!(found
        .iter()
        .all(|c| c.contains(&"a".to_string()) && c.contains(&"b".to_string())));
}
