//! Reading traces: one JSON event per line (`docs/events.md`).
//!
//! [`parse_line`] reads one line; `replay`, `explain` and `monitor` all go
//! through it (see [`crate::replay::Stepper`]).

use agenra_core::Event;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Event {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// A line that is not an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct LineParseError {
    /// 1-based column in the line (as read, before trimming) where the JSON went wrong.
    pub column: usize,
    pub message: String,
}

/// One event and the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub line: usize,
    pub event: Event,
}

/// Whether a trace line carries no event: blank, or a `//` comment.
pub fn is_skipped(line: &str) -> bool {
    let line = line.trim();
    line.is_empty() || line.starts_with("//")
}

/// Parses one trace line: `Ok(None)` for a blank or `//` line, otherwise
/// exactly one event.
pub fn parse_line(raw: &str) -> Result<Option<Event>, LineParseError> {
    if is_skipped(raw) {
        return Ok(None);
    }
    let line = raw.trim();
    let indent = raw.len() - raw.trim_start().len();
    serde_json::from_str::<Event>(line)
        .map(Some)
        .map_err(|e| LineParseError {
            column: indent + e.column().max(1),
            message: describe_json_error(&e),
        })
}

/// Parses a JSONL trace. Blank lines and lines starting with `//` are
/// skipped; anything else must be one event.
pub fn parse_trace(path: &Path, text: &str) -> Result<Vec<TraceEvent>, TraceError> {
    let mut events = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        match parse_line(raw) {
            Ok(Some(event)) => events.push(TraceEvent { line: i + 1, event }),
            Ok(None) => {}
            Err(e) => {
                return Err(TraceError::Event {
                    path: path.to_path_buf(),
                    line: i + 1,
                    column: e.column,
                    message: e.message,
                })
            }
        }
    }
    Ok(events)
}

/// serde's messages mention Rust types; say it in the trace's terms.
fn describe_json_error(e: &serde_json::Error) -> String {
    shorten(&describe_json_error_in_full(e))
}

/// The most characters of an event's error message: a 16 MB line must not
/// come back in full.
pub const MAX_MESSAGE: usize = 300;

/// `text`, cut to `MAX_MESSAGE` characters with a note of how much was left out.
pub fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE) {
        None => text.to_string(),
        Some((cut, _)) => format!(
            "{}… ({} more characters)",
            &text[..cut],
            text[cut..].chars().count()
        ),
    }
}

fn describe_json_error_in_full(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    // Drop serde's own " at line L column C" suffix: we print our own.
    let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
    if msg.contains("missing field `kind`") {
        "event has no `kind` (one of call, result, approve, reject, task)".into()
    } else if msg.starts_with("unknown variant") {
        format!(
            "unknown event {}",
            msg.replacen("variant", "kind", 1)
                .trim_start_matches("unknown ")
        )
    } else {
        format!("invalid event: {msg}")
    }
}

pub fn read_trace(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub fn load_trace(path: &Path) -> Result<Vec<TraceEvent>, TraceError> {
    parse_trace(path, &read_trace(path)?)
}
