//! Errors and warnings about a policy source, and their rustc-like rendering.

use crate::span::Span;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// How bad a diagnostic is.
pub enum Severity {
    /// The policy is rejected.
    Error,
    /// The policy compiles, but probably does not mean what was intended.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// An error or warning at a place in the source.
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong, in one line (e.g. ``unknown tool `fs.wrte` (did you mean `fs.write`?)``).
    pub message: String,
    /// The offending token or construct.
    pub span: Span,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
        }
    }

    /// A warning at `span`.
    pub fn warning(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            message: message.into(),
            span,
        }
    }

    /// The diagnostic with the offending source line and a caret underline:
    ///
    /// ```text
    /// policy.agr:12:10: error: unknown tool `fs.wrte` (did you mean `fs.write`?)
    ///    |
    /// 12 | grant w: fs.wrte on prefix "src/" quota 3;
    ///    |          ^^^^^^^
    /// ```
    pub fn render(&self, file_name: &str, source: &str) -> String {
        self.render_with(file_name, source, &Lines::new(source))
    }

    /// `render` with the source's lines found once, for many diagnostics.
    pub fn render_with(&self, file_name: &str, source: &str, lines: &Lines) -> String {
        let Span {
            start,
            end,
            line,
            col,
        } = self.span;
        let line_text = lines.get(source, line).trim_end_matches('\r');
        // Keep tabs in the padding so the carets line up with the source.
        let pad: String = line_text
            .chars()
            .take((col as usize).saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let width = source
            .get(start..end.max(start))
            .map_or(0, |s| s.chars().take_while(|c| *c != '\n').count())
            .max(1);
        let number = line.to_string();
        let gutter = " ".repeat(number.len());
        format!(
            "{file_name}:{line}:{col}: {}: {}\n{gutter} |\n{number} | {line_text}\n{gutter} | {pad}{}\n",
            self.severity,
            self.message,
            "^".repeat(width)
        )
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.span.line, self.span.col, self.severity, self.message
        )
    }
}

/// Where each line of a source starts, so that rendering many diagnostics
/// does not split the source again for each.
pub struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    /// The line starts of `source`.
    pub fn new(source: &str) -> Lines {
        let starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { starts }
    }

    /// Line `line` (1-based) without its newline; empty past the end.
    pub fn get<'s>(&self, source: &'s str, line: u32) -> &'s str {
        let i = (line as usize).saturating_sub(1);
        let Some(&start) = self.starts.get(i) else {
            return "";
        };
        let end = self.starts.get(i + 1).map_or(source.len(), |&e| e - 1);
        source.get(start..end).unwrap_or("")
    }
}

/// Edit distance between two names, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev
                .get(j)
                .map_or(usize::MAX, |d| d + usize::from(ca != *cb));
            let delete = prev.get(j + 1).map_or(usize::MAX, |d| d + 1);
            let insert = cur.last().map_or(usize::MAX, |d| d + 1);
            cur.push(substitute.min(delete).min(insert));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// The closest candidate within edit distance 2 (first on ties), for
/// "did you mean" hints.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|c| *c != name)
        // Cheap length filter first: names of very different lengths are
        // never within distance 2, and long garbage should not cost O(n·m).
        .filter(|c| c.chars().count().abs_diff(name.chars().count()) <= 2)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ` (did you mean `x`?)`, or nothing.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(name, candidates).map_or(String::new(), |s| format!(" (did you mean `{s}`?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("fs.wrte", "fs.write"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            suggest("fs.wrte", ["fs.read", "fs.write"]),
            Some("fs.write")
        );
        assert_eq!(suggest("zzz", ["fs.read"]), None);
    }

    #[test]
    fn render_at_end_of_file_and_with_tabs() {
        let src = "\tgrant x";
        let d = Diagnostic::error(
            Span {
                start: 8,
                end: 8,
                line: 1,
                col: 9,
            },
            "expected `:`, found end of file",
        );
        assert_eq!(
            d.render("p.agr", src),
            "p.agr:1:9: error: expected `:`, found end of file\n  |\n1 | \tgrant x\n  | \t       ^\n"
        );
    }
}
