//! Reading traces: one JSON event per line (`docs/events.md`).

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
    #[error("{path}:{line}:{column}: error: {message}")]
    Event {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// One event and the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub line: usize,
    pub event: Event,
}

/// Parses a JSONL trace. Blank lines and lines starting with `//` are
/// skipped; anything else must be one event.
pub fn parse_trace(path: &Path, text: &str) -> Result<Vec<TraceEvent>, TraceError> {
    let mut events = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(event) => events.push(TraceEvent { line: i + 1, event }),
            Err(e) => {
                return Err(TraceError::Event {
                    path: path.to_path_buf(),
                    line: i + 1,
                    column: e.column().max(1),
                    message: describe_json_error(&e),
                })
            }
        }
    }
    Ok(events)
}

/// serde's messages mention Rust types; say it in the trace's terms.
fn describe_json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    // Drop serde's own " at line L column C" suffix: we print our own.
    let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
    if msg.contains("missing field `kind`") {
        "event has no `kind` (one of call, result, approve, reject)".into()
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

pub fn load_trace(path: &Path) -> Result<Vec<TraceEvent>, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_trace(path, &text)
}
