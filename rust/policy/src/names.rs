//! Symbol tables: one per kind of name, in declaration order (the index is
//! the id in the compiled policy), reporting duplicates and unknown names
//! with "did you mean" hints.

use crate::ast::Ident;
use crate::diagnostic::{did_you_mean, Diagnostic};
use crate::span::Span;
use std::collections::{BTreeSet, HashMap};

/// Errors and warnings collected while compiling.
#[derive(Debug, Default)]
pub struct Diags {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// Names that appear in statements that did not parse: an unknown-name
    /// error for them would only echo the syntax error.
    pub broken_names: BTreeSet<String>,
}

impl Diags {
    pub fn error(&mut self, span: Span, message: impl Into<String>) {
        self.errors.push(Diagnostic::error(span, message));
    }
    pub fn warn(&mut self, span: Span, message: impl Into<String>) {
        self.warnings.push(Diagnostic::warning(span, message));
    }
}

#[derive(Debug)]
pub struct Names {
    kind: &'static str,
    /// Names and where they are declared (`None`: built in).
    entries: Vec<(String, Option<Span>)>,
    /// Name to index into `entries`, so large policies stay linear.
    index: HashMap<String, usize>,
}

impl Names {
    pub fn new(kind: &'static str) -> Names {
        Names {
            kind,
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// A table holding one built-in name (`main`, the default level `public`).
    pub fn with_builtin(kind: &'static str, name: &str) -> Names {
        Names {
            kind,
            entries: vec![(name.to_string(), None)],
            index: HashMap::from([(name.to_string(), 0)]),
        }
    }

    /// A table holding built-in names (the built-in token kinds).
    pub fn with_builtins(kind: &'static str, names: &[&str]) -> Names {
        Names {
            kind,
            entries: names.iter().map(|n| (n.to_string(), None)).collect(),
            index: names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), i))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    pub fn to_vec(&self) -> Vec<String> {
        self.names().map(str::to_string).collect()
    }

    pub fn span(&self, index: usize) -> Option<Span> {
        self.entries.get(index).and_then(|(_, s)| *s)
    }

    pub fn get(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Adds the name, or reports it as a duplicate and returns `None`.
    pub fn declare(&mut self, id: &Ident, d: &mut Diags) -> Option<usize> {
        if let Some(i) = self.get(&id.name) {
            let first = match self.span(i) {
                Some(s) => format!(" (first declared at {}:{})", s.line, s.col),
                None => " (it is built in)".to_string(),
            };
            d.error(
                id.span,
                format!("duplicate {} `{}`{first}", self.kind, id.name),
            );
            return None;
        }
        let i = self.entries.len();
        self.entries.push((id.name.clone(), Some(id.span)));
        self.index.insert(id.name.clone(), i);
        Some(i)
    }

    /// The id of a declared name, or an "unknown" error.
    pub fn resolve(&self, id: &Ident, d: &mut Diags) -> Option<usize> {
        let found = self.get(&id.name);
        if found.is_none() && !d.broken_names.contains(&id.name) {
            d.error(
                id.span,
                format!(
                    "unknown {} `{}`{}",
                    self.kind,
                    id.name,
                    did_you_mean(&id.name, self.names())
                ),
            );
        }
        found
    }
}
