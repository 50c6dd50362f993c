//! Identifiers in events: what an id or a name may contain.
//!
//! Call, task and session ids, agent, tool, parameter and set names are
//! *identifiers*: they are compared, recorded in the audit log and shown to
//! the humans who approve calls and read reports. A character that a reader
//! cannot see, or that changes how the text around it is displayed, lets an
//! event show one thing and mean another (`c4\u{202e}gnp.exe` displays as
//! `c4exe.png`), so it is refused in every identifier ([`is_refused`]).
//! Argument values, outputs, task texts, discovered resources and seeded set
//! values are *data*: they stay free-form.
//!
//! Decoding an [`Event`] from JSON checks its identifiers
//! ([`Event::check_identifiers`]); [`Event::from_recorded`] decodes an event
//! of an audit log that was written before this check existed.
//! [`visible`] writes any text with the refused characters as escapes.

use crate::event::{Call, Event, Report, Resolve, Task};
use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` may not appear in an identifier: control characters
/// (U+0000–U+001F, U+007F–U+009F, which include NUL, tab, CR and LF),
/// bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
/// U+2066–U+2069), the line and paragraph separators (U+2028, U+2029), and
/// invisible format characters (U+00AD soft hyphen, U+180E, the zero-width
/// U+200B–U+200D, U+2060–U+2064 and the deprecated U+206A–U+206F (with
/// U+2065), U+FEFF, the interlinear annotation characters U+FFF9–U+FFFB and
/// the tag characters U+E0000–U+E007F).
pub fn is_refused(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// The Unicode name of a refused character, or what kind of character it
/// is when it has no common name.
pub fn describe(c: char) -> &'static str {
    match c {
        '\u{0}' => "NULL",
        '\u{9}' => "CHARACTER TABULATION",
        '\u{a}' => "LINE FEED",
        '\u{d}' => "CARRIAGE RETURN",
        '\u{1b}' => "ESCAPE",
        '\u{7f}' => "DELETE",
        '\u{85}' => "NEXT LINE",
        '\u{ad}' => "SOFT HYPHEN",
        '\u{61c}' => "ARABIC LETTER MARK",
        '\u{180e}' => "MONGOLIAN VOWEL SEPARATOR",
        '\u{200b}' => "ZERO WIDTH SPACE",
        '\u{200c}' => "ZERO WIDTH NON-JOINER",
        '\u{200d}' => "ZERO WIDTH JOINER",
        '\u{200e}' => "LEFT-TO-RIGHT MARK",
        '\u{200f}' => "RIGHT-TO-LEFT MARK",
        '\u{2028}' => "LINE SEPARATOR",
        '\u{2029}' => "PARAGRAPH SEPARATOR",
        '\u{202a}' => "LEFT-TO-RIGHT EMBEDDING",
        '\u{202b}' => "RIGHT-TO-LEFT EMBEDDING",
        '\u{202c}' => "POP DIRECTIONAL FORMATTING",
        '\u{202d}' => "LEFT-TO-RIGHT OVERRIDE",
        '\u{202e}' => "RIGHT-TO-LEFT OVERRIDE",
        '\u{2060}' => "WORD JOINER",
        '\u{2066}' => "LEFT-TO-RIGHT ISOLATE",
        '\u{2067}' => "RIGHT-TO-LEFT ISOLATE",
        '\u{2068}' => "FIRST STRONG ISOLATE",
        '\u{2069}' => "POP DIRECTIONAL ISOLATE",
        '\u{feff}' => "ZERO WIDTH NO-BREAK SPACE",
        c if c.is_control() => "a control character",
        '\u{e0000}'..='\u{e007f}' => "a tag character",
        _ => "an invisible format character",
    }
}

/// An identifier holds a refused character ([`is_refused`]). Displayed as
/// `call.id contains U+202E (RIGHT-TO-LEFT OVERRIDE) at byte 2: ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{field} contains U+{code:04X} ({name}) at byte {at}: ids and names may not hold control, bidirectional or invisible characters",
    code = u32::from(*.found),
    name = describe(*.found)
)]
pub struct IdentError {
    /// The field, as a path: `call.id`, `call.lineage.body[0]`, `task.sets.payees`.
    pub field: String,
    /// The first refused character.
    pub found: char,
    /// Its byte offset in the identifier.
    pub at: usize,
}

/// The first refused character of `value` and its byte offset.
pub fn first_refused(value: &str) -> Option<(usize, char)> {
    value.char_indices().find(|&(_, c)| is_refused(c))
}

/// Checks one identifier; `field` names it in the error.
pub fn check(field: &str, value: &str) -> Result<(), IdentError> {
    match first_refused(value) {
        None => Ok(()),
        Some((at, found)) => Err(IdentError {
            field: field.to_string(),
            found,
            at,
        }),
    }
}

/// `s` with every refused character written as an escape: `\n`, `\r`, `\t`,
/// and `\u{202e}` for the others. Other text is unchanged.
///
/// ```
/// use agenra_core::ident::visible;
/// assert_eq!(visible("c4\u{202e}gnp.exe"), "c4\\u{202e}gnp.exe");
/// assert_eq!(visible("a\nb"), "a\\nb");
/// assert_eq!(visible("c1"), "c1");
/// ```
pub fn visible(s: &str) -> Cow<'_, str> {
    if first_refused(s).is_none() {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_refused(c) => {
                let _ = write!(out, "{}", c.escape_unicode());
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `prefix.name`, or `name` without a prefix.
fn path(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn check_opt(prefix: &str, name: &str, value: Option<&str>) -> Result<(), IdentError> {
    match value {
        Some(v) => check(&path(prefix, name), v),
        None => Ok(()),
    }
}

/// Keys of a map (names), and with `values`, each value of its lists (ids).
fn check_lists<'a>(
    prefix: &str,
    name: &str,
    map: impl IntoIterator<Item = (&'a String, &'a Vec<String>)>,
    values: bool,
) -> Result<(), IdentError> {
    for (key, list) in map {
        let field = format!("{}.{}", path(prefix, name), visible(key));
        check(&field, key)?;
        if values {
            for (i, v) in list.iter().enumerate() {
                check(&format!("{field}[{i}]"), v)?;
            }
        }
    }
    Ok(())
}

impl Call {
    /// Checks the call's identifiers: `session`, `id`, `agent`, `tool`, the
    /// argument names, and the names and call ids of `lineage` and
    /// `inferred`. Argument values are data and are not checked. Fields are
    /// named `PREFIX.id` and so on (`id` with an empty prefix).
    pub fn check_identifiers(&self, prefix: &str) -> Result<(), IdentError> {
        check_opt(prefix, "session", self.session.as_deref())?;
        check(&path(prefix, "id"), &self.id)?;
        check_opt(prefix, "agent", self.agent.as_deref())?;
        check(&path(prefix, "tool"), &self.tool)?;
        for key in self.args.keys() {
            check(&format!("{}.{}", path(prefix, "args"), visible(key)), key)?;
        }
        check_lists(prefix, "lineage", &self.lineage, true)?;
        check_lists(prefix, "inferred", &self.inferred, true)
    }
}

impl Report {
    /// Checks `session` and `call`. The output and the discovered resources
    /// are data.
    pub fn check_identifiers(&self, prefix: &str) -> Result<(), IdentError> {
        check_opt(prefix, "session", self.session.as_deref())?;
        check(&path(prefix, "call"), &self.call)
    }
}

impl Resolve {
    /// Checks `session` and `call`.
    pub fn check_identifiers(&self, prefix: &str) -> Result<(), IdentError> {
        check_opt(prefix, "session", self.session.as_deref())?;
        check(&path(prefix, "call"), &self.call)
    }
}

impl Task {
    /// Checks `session`, `id`, the names of the seeded sets and the tool
    /// globs of the scope. The text, the seeded values and the resource
    /// globs are data.
    pub fn check_identifiers(&self, prefix: &str) -> Result<(), IdentError> {
        check_opt(prefix, "session", self.session.as_deref())?;
        check(&path(prefix, "id"), &self.id)?;
        check_lists(prefix, "sets", &self.sets, false)?;
        if let Some(scope) = &self.scope {
            let scope_path = path(prefix, "scope");
            for (i, g) in scope.tools.iter().flatten().enumerate() {
                check(&format!("{scope_path}.tools[{i}]"), g)?;
            }
            for (i, g) in scope.forbid.iter().enumerate() {
                check(&format!("{scope_path}.forbid[{i}]"), g)?;
            }
        }
        Ok(())
    }
}

impl Event {
    /// Checks every identifier of the event ([`is_refused`]); fields are
    /// named after the event's kind: `call.id`, `result.call`,
    /// `task.sets.payees`.
    ///
    /// Decoding an event from JSON runs this check. [`Monitor::step`]
    /// does not (it also replays recorded events): an application that
    /// builds events from untrusted strings calls it itself.
    ///
    /// [`Monitor::step`]: crate::Monitor::step
    pub fn check_identifiers(&self) -> Result<(), IdentError> {
        match self {
            Event::Call(c) => c.check_identifiers("call"),
            Event::Result(r) => r.check_identifiers("result"),
            Event::Approve(a) => a.check_identifiers("approve"),
            Event::Reject(a) => a.check_identifiers("reject"),
            Event::Task(t) => t.check_identifiers("task"),
        }
    }

    /// Decodes an event of an audit log as it was recorded, without
    /// checking its identifiers: a log written before the check existed
    /// still replays (its records were decided and are hash-chained; they
    /// cannot be rewritten). New input is decoded with `Deserialize`, which
    /// checks them.
    pub fn from_recorded(value: serde_json::Value) -> Result<Event, serde_json::Error> {
        serde_json::from_value::<crate::event::Unchecked>(value)
            .map(crate::event::Unchecked::into_event)
    }
}

// Decoding an event checks its identifiers (`Event` is `try_from =
// "Unchecked"`); the impl lives here so that `event` needs nothing of this
// module.
impl TryFrom<crate::event::Unchecked> for Event {
    type Error = IdentError;
    fn try_from(u: crate::event::Unchecked) -> Result<Event, Self::Error> {
        let event = u.into_event();
        event.check_identifiers()?;
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every boundary of every refused range, and the characters just
    /// outside it.
    #[test]
    fn the_refused_set_is_exactly_the_documented_ranges() {
        let ranges: [(u32, u32); 11] = [
            (0x0, 0x1f),
            (0x7f, 0x9f),
            (0xad, 0xad),
            (0x61c, 0x61c),
            (0x180e, 0x180e),
            (0x200b, 0x200f),
            (0x2028, 0x202e),
            (0x2060, 0x206f),
            (0xfeff, 0xfeff),
            (0xfff9, 0xfffb),
            (0xe0000, 0xe007f),
        ];
        for (lo, hi) in ranges {
            for inside in [lo, hi, lo + (hi - lo) / 2] {
                let c = char::from_u32(inside).unwrap();
                assert!(is_refused(c), "U+{inside:04X} must be refused");
            }
            for outside in [lo.checked_sub(1), Some(hi + 1)].into_iter().flatten() {
                let c = char::from_u32(outside).unwrap();
                let in_another = ranges.iter().any(|&(l, h)| (l..=h).contains(&outside));
                assert_eq!(is_refused(c), in_another, "U+{outside:04X}");
            }
        }
        // Ordinary identifiers, including non-ASCII letters and symbols.
        for ok in [
            'a', 'Z', '0', ' ', '~', '.', '/', 'é', 'ж', '中', '€', '\u{a0}', '🙂',
        ] {
            assert!(!is_refused(ok), "{ok:?}");
        }
        assert!(!is_refused(char::MAX));
        // Exhaustively over the BMP: exactly the listed ranges.
        let listed = |u: u32| ranges.iter().any(|&(l, h)| (l..=h).contains(&u));
        for u in (0..0x1_0000u32).chain(0xe0000..0xe0100) {
            if let Some(c) = char::from_u32(u) {
                assert_eq!(is_refused(c), listed(u), "U+{u:04X}");
            }
        }
    }

    #[test]
    fn errors_name_the_field_the_character_and_its_byte() {
        let e = check("call.id", "c4\u{202e}gnp.exe").unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.found, e.at),
            ("call.id", '\u{202e}', 2)
        );
        assert!(
            e.to_string()
                .starts_with("call.id contains U+202E (RIGHT-TO-LEFT OVERRIDE) at byte 2: "),
            "{e}"
        );
        let e = check("task.id", "t\0").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("task.id contains U+0000 (NULL) at byte 1"));
        // The byte offset counts bytes, not characters.
        let e = check("x", "é\n").unwrap_err();
        assert_eq!(e.at, 2);
        assert!(e.to_string().contains("U+000A (LINE FEED)"), "{e}");
        let e = check("x", "\u{e0041}").unwrap_err();
        assert!(e.to_string().contains("U+E0041 (a tag character)"), "{e}");
        assert_eq!(check("x", "c-1.é/中"), Ok(()));
        assert_eq!(check("x", ""), Ok(()));
        assert_eq!(first_refused("ab\u{200b}c\u{0}"), Some((2, '\u{200b}')));
        assert_eq!(first_refused("abc"), None);
    }

    #[test]
    fn each_refused_character_has_a_description() {
        let named = [
            ('\u{0}', "NULL"),
            ('\u{9}', "CHARACTER TABULATION"),
            ('\u{a}', "LINE FEED"),
            ('\u{d}', "CARRIAGE RETURN"),
            ('\u{1b}', "ESCAPE"),
            ('\u{7f}', "DELETE"),
            ('\u{85}', "NEXT LINE"),
            ('\u{ad}', "SOFT HYPHEN"),
            ('\u{61c}', "ARABIC LETTER MARK"),
            ('\u{180e}', "MONGOLIAN VOWEL SEPARATOR"),
            ('\u{200b}', "ZERO WIDTH SPACE"),
            ('\u{200c}', "ZERO WIDTH NON-JOINER"),
            ('\u{200d}', "ZERO WIDTH JOINER"),
            ('\u{200e}', "LEFT-TO-RIGHT MARK"),
            ('\u{200f}', "RIGHT-TO-LEFT MARK"),
            ('\u{2028}', "LINE SEPARATOR"),
            ('\u{2029}', "PARAGRAPH SEPARATOR"),
            ('\u{202a}', "LEFT-TO-RIGHT EMBEDDING"),
            ('\u{202b}', "RIGHT-TO-LEFT EMBEDDING"),
            ('\u{202c}', "POP DIRECTIONAL FORMATTING"),
            ('\u{202d}', "LEFT-TO-RIGHT OVERRIDE"),
            ('\u{202e}', "RIGHT-TO-LEFT OVERRIDE"),
            ('\u{2060}', "WORD JOINER"),
            ('\u{2066}', "LEFT-TO-RIGHT ISOLATE"),
            ('\u{2067}', "RIGHT-TO-LEFT ISOLATE"),
            ('\u{2068}', "FIRST STRONG ISOLATE"),
            ('\u{2069}', "POP DIRECTIONAL ISOLATE"),
            ('\u{feff}', "ZERO WIDTH NO-BREAK SPACE"),
            ('\u{1}', "a control character"),
            ('\u{9f}', "a control character"),
            ('\u{e0000}', "a tag character"),
            ('\u{e007f}', "a tag character"),
            ('\u{2061}', "an invisible format character"),
            ('\u{fff9}', "an invisible format character"),
        ];
        for (c, name) in named {
            assert_eq!(describe(c), name, "U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn visible_escapes_exactly_the_refused_characters() {
        assert!(matches!(visible("plain é"), Cow::Borrowed("plain é")));
        assert_eq!(
            visible("a\nb\rc\td\u{0}e\u{202e}f\u{200b}"),
            "a\\nb\\rc\\td\\u{0}e\\u{202e}f\\u{200b}"
        );
        assert!(matches!(visible("\u{1b}"), Cow::Owned(_)));
        assert_eq!(visible("\u{1b}[31m"), "\\u{1b}[31m");
    }

    fn decode(v: serde_json::Value) -> Result<Event, String> {
        serde_json::from_value::<Event>(v).map_err(|e| e.to_string())
    }

    fn refused(v: serde_json::Value, field: &str) {
        let err = decode(v.clone()).expect_err("refused");
        assert!(err.starts_with(&format!("{field} contains U+")), "{err}");
        // Recorded, it still decodes as it was.
        let e = Event::from_recorded(v.clone()).expect("recorded");
        let back = serde_json::to_value(&e).unwrap();
        for (k, x) in v.as_object().unwrap() {
            assert_eq!(&back[k], x, "{k}");
        }
    }

    #[test]
    fn decoding_refuses_every_identifier_field() {
        let call = |extra: serde_json::Value| {
            let mut v = json!({"kind": "call", "id": "c1", "time": 1, "tool": "t"});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        assert!(decode(call(json!({"agent": "a", "session": "s",
            "args": {"p": "value\nwith\u{202e}data"},
            "lineage": {"p": ["c0"]}, "inferred": {"p": ["c0"]}})))
        .is_ok());
        refused(call(json!({"id": "c4\u{202e}gnp.exe"})), "call.id");
        refused(call(json!({"id": "c\u{0}"})), "call.id");
        refused(call(json!({"id": "c\n"})), "call.id");
        refused(call(json!({"session": "s\t"})), "call.session");
        refused(call(json!({"agent": "\u{200b}main"})), "call.agent");
        refused(call(json!({"tool": "t\u{2066}"})), "call.tool");
        refused(call(json!({"args": {"p\u{7f}": 1}})), "call.args.p\\u{7f}");
        refused(
            call(json!({"lineage": {"p\u{feff}": []}})),
            "call.lineage.p\\u{feff}",
        );
        refused(
            call(json!({"lineage": {"p": ["c0", "c\u{85}"]}})),
            "call.lineage.p[1]",
        );
        refused(
            call(json!({"inferred": {"p\u{ad}": []}})),
            "call.inferred.p\\u{ad}",
        );
        refused(
            call(json!({"inferred": {"p": ["\u{61c}"]}})),
            "call.inferred.p[0]",
        );

        let ok = json!({"kind": "result", "call": "c1", "status": "succeeded",
            "output": "text\u{202e}\n", "discovered": ["a\u{0}b"]});
        assert!(decode(ok).is_ok());
        refused(
            json!({"kind": "result", "call": "c\u{9f}", "status": "failed"}),
            "result.call",
        );
        refused(
            json!({"kind": "result", "session": "\u{1}", "call": "c", "status": "failed"}),
            "result.session",
        );
        refused(
            json!({"kind": "approve", "call": "c\u{2028}"}),
            "approve.call",
        );
        refused(
            json!({"kind": "approve", "session": "s\u{2029}", "call": "c"}),
            "approve.session",
        );
        refused(json!({"kind": "reject", "call": "\u{180e}"}), "reject.call");
        refused(
            json!({"kind": "reject", "session": "\u{206f}", "call": "c"}),
            "reject.session",
        );

        let task = |extra: serde_json::Value| {
            let mut v = json!({"kind": "task", "id": "t1", "text": "x"});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        assert!(decode(task(json!({"text": "pay\u{202e}\n", "sets": {"s": ["v\u{0}"]},
            "scope": {"tools": ["a.*"], "forbid": ["b"], "resources": ["r\n"], "forbid_resources": ["\u{202e}"]}})))
        .is_ok());
        refused(task(json!({"id": "t\u{202e}"})), "task.id");
        refused(task(json!({"session": "\u{e0020}"})), "task.session");
        refused(
            task(json!({"sets": {"s\u{fffb}": []}})),
            "task.sets.s\\u{fffb}",
        );
        refused(
            task(json!({"scope": {"tools": ["a", "b\u{200d}"]}})),
            "task.scope.tools[1]",
        );
        refused(
            task(json!({"scope": {"forbid": ["\u{202a}"]}})),
            "task.scope.forbid[0]",
        );
    }

    #[test]
    fn prefixes_name_fields_as_the_caller_spells_them() {
        let c = Call::new("c\u{0}", "t", 1);
        assert_eq!(c.check_identifiers("").unwrap_err().field, "id");
        assert_eq!(c.check_identifiers("call").unwrap_err().field, "call.id");
        let r = Report::succeeded("\u{202e}");
        assert_eq!(r.check_identifiers("").unwrap_err().field, "call");
        let t = Task {
            session: None,
            id: "t".into(),
            time: None,
            text: String::new(),
            sets: [("s\n".to_string(), vec![])].into(),
            scope: None,
        };
        assert_eq!(t.check_identifiers("").unwrap_err().field, "sets.s\\n");
        assert_eq!(
            Event::Call(Call::new("c", "t", 1).agent("a").in_session("s")).check_identifiers(),
            Ok(())
        );
    }

    #[test]
    fn a_recorded_event_is_still_checked_for_its_shape() {
        assert!(Event::from_recorded(json!({"kind": "call", "id": "c"})).is_err());
        assert!(Event::from_recorded(json!({"kind": "nope"})).is_err());
        let e = Event::from_recorded(json!({"kind": "reject", "call": "c\u{202e}"})).unwrap();
        assert_eq!(e.kind(), "reject");
    }
}
