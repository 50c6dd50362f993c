//! Human-readable output of `replay` and `explain`.
//!
//! Every text that comes from events or the policy (call ids, tool, session,
//! rule and agent names, reasons) goes through [`escape`], so a crafted call
//! id cannot forge a table line or send terminal escapes. Columns are as
//! wide as their widest cell.

use crate::replay::Record;
use crate::sessions::Sessions;
use agenra_core::graph::{NodeId, NodeKind};
use agenra_core::ledger::Ledger;
use agenra_core::policy::Quota;
use agenra_core::{Monitor, Verdict};
use std::borrow::Cow;
use std::fmt::Write;

/// `s` with control, bidirectional and invisible format characters
/// (`agenra_core::ident::is_refused`) written as escapes: `\n`, `\r`, `\t`,
/// and `\u{202e}` style for the others. Other text is unchanged.
pub fn escape(s: &str) -> Cow<'_, str> {
    agenra_core::ident::visible(s)
}

/// `s` as text of a Markdown (CommonMark / GitHub) document, inside a
/// table cell or a paragraph: refused characters are made visible
/// ([`escape`]); `&`, `<` and `>` become entities, so no HTML tag or entity
/// of the text is ever interpreted; every other character that makes markup
/// (`\` `` ` `` `*` `_` `[` `]` `|` `~` `#` `!` `$`) gets a backslash.
/// The result holds no line break and no refused character.
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in escape(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '!' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` as HTML text or a quoted attribute value: refused characters are
/// made visible ([`escape`]), and `&`, `<`, `>`, `"` and `'` become
/// entities.
pub fn html(s: &str) -> String {
    // The entity escaping is the approvals page's, so that the reviewer's
    // HTML and the page can never escape differently.
    agenra_gateway::page::escape(&escape(s))
}

/// The display width of a cell (cells are escaped: no control characters).
fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(out: &mut String, s: &str, w: usize, right: bool) {
    let fill = w.saturating_sub(width(s));
    if right {
        let _ = write!(out, "{:fill$}{s}", "");
    } else {
        let _ = write!(out, "{s}{:fill$}", "");
    }
}

/// Between columns. The last column is not padded.
const GAP: &str = "  ";

/// Lays out rows of cells under `titles`, each column as wide as its widest
/// cell. Returns the lines (without newlines) and the column widths.
fn layout(titles: &[&str], right: &[bool], rows: &[Vec<String>]) -> (Vec<String>, Vec<usize>) {
    layout_at_least(titles, right, rows, &[])
}

/// [`layout`] with columns at least as wide as `floor` (a table printed in
/// blocks keeps the widths of the blocks before).
fn layout_at_least(
    titles: &[&str],
    right: &[bool],
    rows: &[Vec<String>],
    floor: &[usize],
) -> (Vec<String>, Vec<usize>) {
    let mut widths: Vec<usize> = titles.iter().map(|t| width(t)).collect();
    for (w, f) in widths.iter_mut().zip(floor) {
        *w = (*w).max(*f);
    }
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let line = |cells: &[&str]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                out.push_str(GAP);
            }
            if i + 1 == cells.len() && !right[i] {
                out.push_str(cell);
            } else {
                pad(&mut out, cell, widths[i], right[i]);
            }
        }
        out.truncate(out.trim_end_matches(' ').len());
        out
    };
    let mut lines = vec![line(titles)];
    for row in rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        lines.push(line(&cells));
    }
    (lines, widths)
}

fn verdict_cell(r: &Record) -> &'static str {
    r.decision.map_or("-", Verdict::as_str)
}

/// `session/call` (escaped), or the call id in the default session.
fn call_cell(r: &Record) -> String {
    match &r.session {
        Some(s) => format!("{}/{}", escape(s), escape(&r.call)),
        None => escape(&r.call).into_owned(),
    }
}

/// The first line of `replay`'s human output.
pub fn policy_line(monitor: &Monitor) -> String {
    format!(
        "policy {} {}",
        escape(&monitor.policy().name),
        monitor.policy_hash()
    )
}

/// The event table of `replay`: a header, one line per event, and a path
/// line (under the call column) below each event that has a path. Every
/// line ends with a newline.
pub fn table(sessions: &Sessions, records: &[Record]) -> String {
    Table::default().block(sessions, records)
}

/// `replay`'s event table written block by block, so that a long trace is
/// printed as it runs and never held whole: each block's columns are as
/// wide as its widest cell and never narrower than the blocks before (a
/// single block is exactly [`table`]).
#[derive(Default)]
pub struct Table {
    widths: Vec<usize>,
}

impl Table {
    /// The lines of `records` (and, for the first block, the header).
    pub fn block(&mut self, sessions: &Sessions, records: &[Record]) -> String {
        const TITLES: [&str; 7] = ["seq", "event", "call", "tool", "answer", "rule", "reason"];
        const RIGHT: [bool; 7] = [true, false, false, false, false, false, false];
        let first = self.widths.is_empty();
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|r| {
                vec![
                    r.seq.to_string(),
                    r.kind.to_string(),
                    call_cell(r),
                    escape(r.tool.as_deref().unwrap_or("")).into_owned(),
                    verdict_cell(r).to_string(),
                    escape(r.rule.as_deref().unwrap_or("-")).into_owned(),
                    escape(&r.reason).into_owned(),
                ]
            })
            .collect();
        let (lines, widths) = layout_at_least(&TITLES, &RIGHT, &rows, &self.widths);
        let indent = widths[0] + GAP.len() + widths[1] + GAP.len();
        self.widths = widths;
        let mut lines = lines.into_iter();
        let mut out = String::new();
        if let Some(header) = lines.next() {
            if first {
                out.push_str(&header);
                out.push('\n');
            }
        }
        for (r, line) in records.iter().zip(lines) {
            out.push_str(&line);
            out.push('\n');
            if let (false, Some(monitor)) = (r.path.is_empty(), sessions.get(r.session.as_deref()))
            {
                let _ = writeln!(
                    out,
                    "{:indent$}path: {}",
                    "",
                    describe_path(monitor, &r.path)
                );
            }
        }
        out
    }
}

/// `n3 c3 fs.read -> n0 context -> n5 c5 http.get` (escaped)
pub fn describe_path(monitor: &Monitor, path: &[NodeId]) -> String {
    path.iter()
        .map(|n| describe_node(monitor, *n))
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// `n3 c3 fs.read` (escaped)
pub fn describe_node(monitor: &Monitor, id: NodeId) -> String {
    let session = monitor.state();
    let Some(node) = session.graph.node(id) else {
        return id.to_string();
    };
    if node.kind == NodeKind::Context {
        // Node 0 is the shared context; others belong to one agent.
        return match (id.0, monitor.policy().agents.get(node.agent as usize)) {
            (0, _) | (_, None) => format!("{id} context"),
            (_, Some(agent)) => format!("{id} context of {}", escape(&agent.name)),
        };
    }
    if node.kind == NodeKind::Task {
        return match session.call_id_of(id) {
            Some(task) => format!("{id} {} task", escape(task)),
            None => format!("{id} task"),
        };
    }
    let tool = monitor
        .policy()
        .tools
        .get(node.tool as usize)
        .map_or("?", |t| t.name.as_str());
    match session.call_id_of(id) {
        Some(call) => format!("{id} {} {}", escape(call), escape(tool)),
        None => format!("{id} {}", escape(tool)),
    }
}

pub fn summary(records: &[Record]) -> String {
    let mut tally = Tally::default();
    records.iter().for_each(|r| tally.add(r));
    tally.line()
}

/// What `replay`'s summary line counts, accumulated one record at a time.
#[derive(Default)]
pub struct Tally {
    events: usize,
    allow: usize,
    deny: usize,
    pause: usize,
    ledger: Option<String>,
}

impl Tally {
    /// Counts one record.
    pub fn add(&mut self, r: &Record) {
        self.events += 1;
        match r.decision {
            Some(Verdict::Allow) => self.allow += 1,
            Some(Verdict::Deny) => self.deny += 1,
            Some(Verdict::Pause) => self.pause += 1,
            None => {}
        }
        self.ledger = Some(r.ledger_hash.clone());
    }

    /// `N events: A ALLOW, D DENY, P PAUSE; ledger HASH`
    pub fn line(&self) -> String {
        format!(
            "{} events: {} ALLOW, {} DENY, {} PAUSE; ledger {}",
            self.events,
            self.allow,
            self.deny,
            self.pause,
            self.ledger.as_deref().unwrap_or("-")
        )
    }
}

fn quota(q: Quota) -> String {
    match q {
        Quota::Unlimited => "unlimited".into(),
        Quota::Limited(n) => n.to_string(),
    }
}

/// Indents each line of `lines` by two spaces and appends it to `out`.
fn push_indented(out: &mut String, lines: &[String]) {
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// The `explain` report for one event.
pub fn explanation(
    monitor: &Monitor,
    r: &Record,
    line: usize,
    before: &Ledger,
    before_hash: &str,
) -> String {
    let policy = monitor.policy();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "event {} (trace line {line}): {} {}{}",
        r.seq,
        r.kind,
        call_cell(r),
        r.tool
            .as_deref()
            .map(|t| format!(" {}", escape(t)))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "decision: {}", verdict_cell(r));
    let _ = writeln!(
        out,
        "rule:     {}",
        escape(r.rule.as_deref().unwrap_or("-"))
    );
    let _ = writeln!(out, "reason:   {}", escape(&r.reason));
    if let Some(node) = monitor.state().graph.node(r.node) {
        let _ = writeln!(
            out,
            "node:     {} ({:?}, {:?})",
            describe_node(monitor, r.node),
            node.kind,
            node.status
        );
        if node.kind != NodeKind::Context {
            let _ = writeln!(
                out,
                "output label: {}",
                escape(&policy.show_label(&node.label))
            );
        }
    }
    if !r.path.is_empty() {
        let _ = writeln!(out, "path (source to sink):");
        let rows: Vec<Vec<String>> = r
            .path
            .iter()
            .map(|n| {
                let label = monitor
                    .state()
                    .graph
                    .node(*n)
                    .map(|x| policy.show_label(&x.label))
                    .unwrap_or_default();
                vec![describe_node(monitor, *n), escape(&label).into_owned()]
            })
            .collect();
        let (lines, _) = layout(&["", ""], &[false, false], &rows);
        push_indented(&mut out, &lines[1..]);
    }
    let after = monitor.state().ledger.to_ledger();
    let _ = writeln!(out, "ledger (grant: before -> after):");
    let quotas: Vec<(String, String)> = (0..policy.grants.len())
        .map(|g| {
            // A shared grant's entry is what this session holds of the
            // tenant's pool, not what is left.
            let show = |l: &agenra_core::ledger::Ledger| match l.remaining[g] {
                Quota::Limited(n) if l.is_shared(g) => format!("{n} held"),
                q => quota(q),
            };
            (show(before), show(&after))
        })
        .collect();
    // `before` is right-aligned so that the arrows line up.
    let before_width = quotas.iter().map(|(b, _)| width(b)).max().unwrap_or(0);
    let rows: Vec<Vec<String>> = policy
        .grants
        .iter()
        .zip(&quotas)
        .map(|(grant, (b, a))| {
            let agent = policy
                .agents
                .get(grant.agent)
                .map_or("?", |a| a.name.as_str());
            let mark = if a != b { "  *" } else { "" };
            vec![
                escape(&grant.name).into_owned(),
                escape(agent).into_owned(),
                format!("{b:>before_width$} -> {a}{mark}"),
            ]
        })
        .collect();
    let (lines, _) = layout(&["", "", ""], &[false, false, false], &rows);
    push_indented(&mut out, &lines[1..]);
    let _ = writeln!(out, "policy hash: {}", r.policy_hash);
    let _ = writeln!(out, "ledger hash: {before_hash} -> {}", r.ledger_hash);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_plain_text_alone() {
        assert!(matches!(escape("c1 ü é `x`"), Cow::Borrowed(_)));
    }

    #[test]
    fn escape_writes_control_characters_as_escapes() {
        assert_eq!(escape("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(escape("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape("\u{0}\u{7f}\u{85}"), "\\u{0}\\u{7f}\\u{85}");
        assert_eq!(escape("x\u{2028}y\u{202e}z"), "x\\u{2028}y\\u{202e}z");
        assert!(!escape("\u{1b}\n\u{9b}").chars().any(char::is_control));
    }

    #[test]
    fn escape_makes_bidi_and_invisible_characters_visible() {
        assert_eq!(escape("c4\u{202e}gnp.exe"), "c4\\u{202e}gnp.exe");
        assert_eq!(escape("a\u{200b}b\u{feff}"), "a\\u{200b}b\\u{feff}");
    }

    #[test]
    fn markdown_escapes_markup_and_makes_invisible_characters_visible() {
        assert_eq!(
            markdown("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(markdown("a|b\nc"), "a\\|b\\\\nc");
        assert_eq!(
            markdown("`*_[]~#!$\\&"),
            "\\`\\*\\_\\[\\]\\~\\#\\!\\$\\\\&amp;"
        );
        assert_eq!(markdown("c4\u{202e}gnp.exe"), "c4\\\\u{202e}gnp.exe");
        assert_eq!(markdown("plain c1 é (x) → y"), "plain c1 é (x) → y");
    }

    #[test]
    fn html_escapes_the_five_characters_and_makes_invisible_ones_visible() {
        assert_eq!(
            html("<script>\"'&</script>"),
            "&lt;script&gt;&quot;&#39;&amp;&lt;/script&gt;"
        );
        assert_eq!(html("c4\u{202e}gnp\n"), "c4\\u{202e}gnp\\n");
        assert_eq!(html("plain é"), "plain é");
    }

    /// Whether the character at byte `i` of `s` follows an odd run of
    /// backslashes (is escaped).
    fn escaped_at(s: &str, i: usize) -> bool {
        s[..i].bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn escapers_never_let_markup_or_invisible_characters_through(
            s in proptest::string::string_regex(
                "([a-z0-9 <>&\"'|`*_\\[\\]~#!$\\\\\\n\\r\\t\\x00\\x1b\\x7f\\x{85}\\x{ad}\\x{61c}\\x{200b}-\\x{200f}\\x{2028}-\\x{202e}\\x{2060}-\\x{206f}\\x{feff}\\x{e0041}é中]|\\PC){0,40}"
            ).unwrap(),
            any in proptest::prelude::any::<String>(),
        ) {
            for input in [s.as_str(), any.as_str()] {
                let md = markdown(input);
                proptest::prop_assert!(!md.chars().any(agenra_core::ident::is_refused), "{md:?}");
                proptest::prop_assert!(!md.contains('<') && !md.contains('>'), "{md:?}");
                for (i, c) in md.char_indices() {
                    if "`*_[]|~#!$".contains(c) {
                        proptest::prop_assert!(escaped_at(&md, i), "{md:?} at {i}");
                    }
                    if c == '&' {
                        let rest = &md[i..];
                        proptest::prop_assert!(
                            ["&amp;", "&lt;", "&gt;"].iter().any(|e| rest.starts_with(e)),
                            "{md:?} at {i}"
                        );
                    }
                }
                // Markdown ends with no dangling escape.
                proptest::prop_assert!(!escaped_at(&md, md.len()), "{md:?}");

                let h = html(input);
                proptest::prop_assert!(!h.chars().any(agenra_core::ident::is_refused), "{h:?}");
                proptest::prop_assert!(!h.contains(['<', '>', '"', '\'']), "{h:?}");
                for (i, _) in h.match_indices('&') {
                    let rest = &h[i..];
                    proptest::prop_assert!(
                        ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"].iter().any(|e| rest.starts_with(e)),
                        "{h:?} at {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn layout_sizes_columns_to_the_widest_cell() {
        let rows = vec![
            vec![
                "1".to_string(),
                "a-very-long-cell".to_string(),
                "x".to_string(),
            ],
            vec!["10".to_string(), "b".to_string(), "".to_string()],
        ];
        let (lines, widths) = layout(&["n", "name", "last"], &[true, false, false], &rows);
        assert_eq!(widths, [2, 16, 4]);
        assert_eq!(
            lines,
            [
                " n  name              last",
                " 1  a-very-long-cell  x",
                "10  b",
            ]
        );
    }
}
