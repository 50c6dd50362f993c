#![warn(missing_docs)]
//! The Agenra policy language (`.agr`): lexer, parser, diagnostics,
//! formatter and compiler to `agenra_core::Policy`. The language is
//! described in `docs/policy-language.md`.

pub mod ast;
mod checks;
mod compile;
pub mod diagnostic;
pub mod format;
pub mod lexer;
mod names;
pub mod parser;
mod source_map;
pub mod span;

pub use diagnostic::{Diagnostic, Severity};
pub use lexer::write_name;
pub use span::Span;

use std::fmt;
use std::path::{Path, PathBuf};

/// A compiled policy and the warnings about it.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The compiled policy, validated: what the monitor runs.
    pub policy: agenra_core::Policy,
    /// Warnings (shadowed grants, dead rules, ...), in source order; the policy compiled anyway.
    pub warnings: Vec<Diagnostic>,
}

/// A policy that does not parse or compile: its errors, in source order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// The errors (at most [`MAX_ERRORS`], then one saying how many more), in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.diagnostics.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl PolicyError {
    /// Every diagnostic rendered with its source line, separated by blank lines.
    pub fn render(&self, file_name: &str, source: &str) -> String {
        let lines = diagnostic::Lines::new(source);
        let parts: Vec<String> = self
            .diagnostics
            .iter()
            .map(|d| d.render_with(file_name, source, &lines))
            .collect();
        parts.join("\n")
    }
}

/// Parses a policy file into its syntax tree.
pub fn parse(source: &str) -> Result<ast::File, PolicyError> {
    let (file, errors) = parser::parse_file(source);
    if errors.is_empty() {
        Ok(file)
    } else {
        Err(PolicyError {
            diagnostics: errors,
        })
    }
}

/// The most errors one run reports.
pub const MAX_ERRORS: usize = 50;

/// Compiles a policy. `name` is used when the file has no `policy "..."`
/// statement.
///
/// A file with syntax errors is still resolved and type-checked as far as
/// it parsed, so one run reports every kind of error; unknown-name errors
/// for names that occur in a statement that did not parse are left out
/// (they would only echo the syntax error). At most `MAX_ERRORS` are
/// reported.
pub fn compile(source: &str, name: &str) -> Result<Compiled, PolicyError> {
    let parsed = parser::parse_recovering(source);
    let mut diagnostics = parsed.errors;
    match compile::compile_file(&parsed.file, name, parsed.broken_names) {
        Ok((policy, warnings)) if diagnostics.is_empty() => {
            return Ok(Compiled { policy, warnings })
        }
        Ok(_) => {}
        Err(more) => diagnostics.extend(more),
    }
    diagnostics.sort_by_key(|d| d.span.start);
    if diagnostics.len() > MAX_ERRORS {
        let hidden = diagnostics.len() - MAX_ERRORS;
        diagnostics.truncate(MAX_ERRORS);
        let last = diagnostics.last().map(|d| d.span).unwrap_or_default();
        diagnostics.push(Diagnostic::error(
            last,
            format!("{hidden} more errors not shown (fix these first)"),
        ));
    }
    Err(PolicyError { diagnostics })
}

/// The canonical form of a policy file (see "Formatting" in the reference).
pub fn format(source: &str) -> Result<String, PolicyError> {
    parse(source).map(|file| format::format_file(&file))
}

#[derive(Debug, thiserror::Error)]
/// Why [`load`] failed.
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file does not parse or compile.
    #[error("{}", error.render(&path.display().to_string(), text))]
    Policy {
        /// The file.
        path: PathBuf,
        /// The file's content, to render the diagnostics against.
        text: String,
        /// The errors.
        #[source]
        error: PolicyError,
    },
}

/// Reads and compiles a policy file; the file stem is the default policy
/// name. Returns the compiled policy and the source text.
pub fn load(path: &Path) -> Result<(Compiled, String), LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "policy".to_string());
    match compile(&text, &stem) {
        Ok(compiled) => Ok((compiled, text)),
        Err(error) => Err(LoadError::Policy {
            path: path.to_path_buf(),
            text,
            error,
        }),
    }
}
