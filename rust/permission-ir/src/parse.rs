//! Strict reading: duplicate keys at any depth and unknown fields are
//! errors, as everywhere in Agenra (`agenra_core::strict`).

use crate::error::ParseError;
use crate::ir::PermissionIr;
use serde::Deserialize;

/// Reads an IR document. A key given twice in any object is
/// [`ParseError::DuplicateKey`]; anything else that is not an IR (not JSON,
/// unknown or missing field, wrong type) is [`ParseError::Json`]. Checking
/// it against a policy is [`validate`](crate::validate)'s job.
pub fn parse(text: &str) -> Result<PermissionIr, ParseError> {
    let text = text.trim_start_matches('\u{feff}');
    // First pass: no duplicate keys anywhere (serde keeps the last value).
    let mut de = serde_json::Deserializer::from_str(text);
    agenra_core::strict::StrictValue::deserialize(&mut de)
        .and_then(|_| de.end())
        .map_err(json_error)?;
    // Second pass: the typed document, with line numbers.
    serde_json::from_str(text).map_err(json_error)
}

/// As [`parse`], with a chance to change the (duplicate-free) JSON before
/// it is read as an IR: the text producer puts its own `source` in.
pub(crate) fn parse_patched(
    text: &str,
    patch: impl FnOnce(&mut serde_json::Value),
) -> Result<PermissionIr, ParseError> {
    let text = text.trim_start_matches('\u{feff}');
    let mut de = serde_json::Deserializer::from_str(text);
    let mut value = agenra_core::strict::StrictValue::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v.0))
        .map_err(json_error)?;
    patch(&mut value);
    serde_json::from_value(value).map_err(json_error)
}

fn json_error(e: serde_json::Error) -> ParseError {
    let message = e.to_string();
    let (line, column) = (e.line(), e.column());
    if let Some(rest) = message.strip_prefix("duplicate key `") {
        if let Some(end) = rest.find('`') {
            return ParseError::DuplicateKey {
                key: rest[..end].to_string(),
                line,
                column,
            };
        }
    }
    // serde_json appends " at line L column C"; the fields carry it.
    let message = match message.rfind(" at line ") {
        Some(i) if line > 0 => message[..i].to_string(),
        _ => message,
    };
    ParseError::Json {
        message,
        line,
        column,
    }
}

/// The canonical JSON text of an IR (pretty-printed, fields in schema order,
/// defaults left out), ending in a newline.
pub fn to_json(ir: &PermissionIr) -> String {
    // Serializing plain data to a string cannot fail.
    let mut text = serde_json::to_string_pretty(ir).unwrap_or_default();
    text.push('\n');
    text
}
