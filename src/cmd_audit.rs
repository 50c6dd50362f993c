//! `agenra audit`: check the hash-chained audit log (`verify`), write it out
//! as JSON lines (`export`), and render one session for a reviewer
//! (`report`). See `docs/store.md`.

use crate::{fail, Failed};
use agenra_store::{verify_lines, Kind, Log, Record};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The `audit` subcommands.
#[derive(clap::Subcommand)]
pub enum AuditCmd {
    /// Check the hash chain: exit 0 when intact, 1 naming the first broken
    /// record. Reads an exported file, or the store itself (`--store`; not
    /// while a server holds it open).
    Verify {
        /// An audit file (`audit export` output: one record per line).
        #[arg(required_unless_present = "store", conflicts_with = "store")]
        file: Option<PathBuf>,
        /// The store of `agenra serve`.
        #[arg(long)]
        store: Option<PathBuf>,
        /// Also check every signed checkpoint against this Ed25519 public key (64 hex
        /// digits, or a file holding them): each must be signed by it and commit to the
        /// chain at its place, and the log must hold at least one.
        #[arg(long, value_name = "HEX|FILE")]
        public_key: Option<String>,
        /// The last checkpoint kept apart from the store (`serve --checkpoint-out`): the
        /// log must reach it unchanged (catches a log truncated with its head).
        #[arg(long, value_name = "FILE", requires = "public_key")]
        checkpoint: Option<PathBuf>,
    },
    /// Make an Ed25519 key for `agenra serve --checkpoint-key` (mode 0600; never
    /// overwrites) and print its public key, for `audit verify --public-key`.
    Keygen {
        /// The key file to create.
        #[arg(long)]
        out: PathBuf,
    },
    /// Write the store's log as JSON lines (one record per line, each with
    /// its hash), the file `audit verify FILE` checks.
    Export {
        /// The store of `agenra serve`.
        #[arg(long)]
        store: PathBuf,
        /// Write here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Render one session for a reviewer: its decisions, DENY paths,
    /// approvals, and the policy revisions with the certificates that
    /// admitted them.
    Report {
        /// An audit file (`audit export` output).
        #[arg(required_unless_present = "store", conflicts_with = "store")]
        file: Option<PathBuf>,
        /// The store of `agenra serve`.
        #[arg(long)]
        store: Option<PathBuf>,
        /// The session.
        #[arg(long)]
        session: String,
        /// The session's tenant.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Markdown or HTML.
        #[arg(long, value_enum, default_value_t = ReportFormat::Markdown)]
        format: ReportFormat,
    },
}

/// The report's format.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ReportFormat {
    /// GitHub-flavoured Markdown.
    Markdown,
    /// A standalone HTML page.
    Html,
}

fn write_out(text: &str) -> Result<(), Failed> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(fail(format!("cannot write to standard output: {e}")))
        }
        _ => Ok(()),
    }
}

/// Runs one `audit` subcommand.
pub fn run(cmd: AuditCmd) -> Result<(), Failed> {
    match cmd {
        AuditCmd::Verify {
            file,
            store,
            public_key,
            checkpoint,
        } => verify(
            file.as_deref(),
            store.as_deref(),
            public_key.as_deref(),
            checkpoint.as_deref(),
        ),
        AuditCmd::Keygen { out } => {
            let public = agenra_store::generate_key_file(&out).map_err(fail)?;
            write_out(&format!("{public}\n"))
        }
        AuditCmd::Export { store, output } => {
            let lines = store_lines(&store)?;
            let mut text = Vec::new();
            for l in &lines {
                text.extend_from_slice(l);
                text.push(b'\n');
            }
            match output {
                Some(path) => std::fs::write(&path, &text)
                    .map_err(|e| fail(format!("{}: cannot write: {e}", path.display()))),
                None => write_out(&String::from_utf8_lossy(&text)),
            }
        }
        AuditCmd::Report {
            file,
            store,
            session,
            tenant,
            format,
        } => {
            let (lines, origin) = match (&file, &store) {
                (_, Some(s)) => (
                    store_lines(s)?,
                    agenra_store::redact(&s.display().to_string()),
                ),
                (Some(f), None) => (file_lines(f)?, f.display().to_string()),
                (None, None) => return Err(fail("give an audit file or --store")),
            };
            let head = verify_lines(lines.iter().map(Vec::as_slice)).map_err(|e| {
                fail(format!(
                    "{origin}: the chain is broken, so no report is given ({e}); see `agenra audit verify`"
                ))
            })?;
            let mut records = Vec::with_capacity(lines.len());
            for l in &lines {
                records.push(
                    serde_json::from_slice::<Record>(l)
                        .map_err(|e| fail(format!("{origin}: unreadable record: {e}")))?,
                );
            }
            let report = Report::build(&records, &tenant, &session).ok_or_else(|| {
                fail(format!(
                    "{origin}: no session `{session}` of tenant `{tenant}` in the log"
                ))
            })?;
            let chain = format!("{} records, head {}", head.seq, head.hash);
            write_out(&match format {
                ReportFormat::Markdown => report.markdown(&origin, &chain),
                ReportFormat::Html => report.html(&origin, &chain),
            })
        }
    }
}

/// Opens the store at `path` (a file, or a `postgres://` URL) and names it
/// (without a password).
fn open_store(path: &Path) -> Result<(Log, String), Failed> {
    if let Some(url) = path.to_str().filter(|p| agenra_store::is_postgres_url(p)) {
        return Ok((Log::open_pg(url).map_err(fail)?, agenra_store::redact(url)));
    }
    if !path.exists() {
        return Err(fail(format!("{}: no such store", path.display())));
    }
    Ok((
        Log::open_redb(path).map_err(fail)?,
        path.display().to_string(),
    ))
}

fn store_lines(path: &Path) -> Result<Vec<Vec<u8>>, Failed> {
    let (log, _) = open_store(path)?;
    let mut lines = Vec::new();
    log.scan(1, &mut |_, line| {
        lines.push(line.to_vec());
        Ok(())
    })
    .map_err(fail)?;
    Ok(lines)
}

fn file_lines(path: &Path) -> Result<Vec<Vec<u8>>, Failed> {
    let bytes =
        std::fs::read(path).map_err(|e| fail(format!("{}: cannot read: {e}", path.display())))?;
    Ok(bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(<[u8]>::to_vec)
        .collect())
}

/// A public key given as 64 hex digits, or the file holding them.
fn public_key(arg: &str) -> Result<agenra_store::PublicKey, Failed> {
    let text = if arg.len() == 64 && arg.bytes().all(|b| b.is_ascii_hexdigit()) {
        arg.to_string()
    } else {
        std::fs::read_to_string(arg).map_err(|e| {
            fail(format!(
                "--public-key {arg}: not 64 hex digits, and cannot read it as a file: {e}"
            ))
        })?
    };
    agenra_store::PublicKey::parse(&text).map_err(|e| fail(format!("--public-key {arg}: {e}")))
}

fn verify(
    file: Option<&Path>,
    store: Option<&Path>,
    key: Option<&str>,
    kept: Option<&Path>,
) -> Result<(), Failed> {
    if let Some(url) = store
        .and_then(Path::to_str)
        .filter(|p| agenra_store::is_postgres_url(p))
    {
        if agenra_store::is_partitioned_pg(url).map_err(fail)? {
            return verify_partitioned(url, key, kept);
        }
    }
    let (lines, head, origin) = match (file, store) {
        (_, Some(s)) => {
            let (log, name) = open_store(s)?;
            let mut lines = Vec::new();
            let head = log
                .read(1, &mut |_, line| {
                    lines.push(line.to_vec());
                    Ok(())
                })
                .map_err(|e| fail(format!("{name}: {e}")))?;
            (lines, head, name)
        }
        (Some(f), None) => {
            let lines = file_lines(f)?;
            let head = verify_lines(lines.iter().map(Vec::as_slice))
                .map_err(|e| fail(format!("{}: {e}", f.display())))?;
            (lines, head, f.display().to_string())
        }
        (None, None) => return Err(fail("give an audit file or --store")),
    };
    let key = key.map(public_key).transpose()?;
    let key_hex = key.as_ref().map(agenra_store::PublicKey::hex);
    let mut checker = agenra_store::CheckpointVerifier::new(key);
    if let Some(path) = kept {
        let bytes = read_kept(path)?;
        checker
            .keep(bytes.trim_ascii())
            .map_err(|e| fail(format!("--checkpoint {}: {}", path.display(), e.reason)))?;
    }
    for (i, line) in lines.iter().enumerate() {
        checker
            .push(i as u64 + 1, line)
            .map_err(|e| fail(format!("{origin}: {e}")))?;
    }
    let summary = checker
        .finish()
        .map_err(|e| fail(format!("{origin}: {e}")))?;
    let mut text = format!(
        "{origin}: ok: {} records, chain intact, head {}\n",
        head.seq, head.hash
    );
    match (&key_hex, summary.last) {
        (Some(k), Some(last)) => text.push_str(&format!(
            "{origin}: {} checkpoints signed by {k}, all check; the last is record {last} \
             ({} records after it are under the chain only)\n",
            summary.signed,
            head.seq - last
        )),
        (None, Some(_)) => text.push_str(&format!(
            "{origin}: {} checkpoints not checked (give --public-key)\n",
            summary.count
        )),
        _ => {}
    }
    if let Some(at) = summary.kept {
        text.push_str(&format!(
            "{origin}: reaches the kept checkpoint (record {at}) unchanged\n"
        ));
    }
    write_out(&text)
}

/// The checkpoint kept apart from the store (`audit verify --checkpoint`).
fn read_kept(path: &Path) -> Result<Vec<u8>, Failed> {
    std::fs::read(path)
        .map_err(|e| fail(format!("--checkpoint {}: cannot read: {e}", path.display())))
}

/// `audit verify --store` on a PostgreSQL log partitioned by session
/// (`serve --partitioned-log`): every partition's chain, and with a key
/// every checkpoint's signature and every partition head it commits to.
fn verify_partitioned(url: &str, key: Option<&str>, kept: Option<&Path>) -> Result<(), Failed> {
    let origin = agenra_store::redact(url);
    let key = key.map(public_key).transpose()?;
    let kept = kept.map(read_kept).transpose()?;
    let mut log = agenra_store::PartLog::open(Box::new(
        agenra_store::PgParts::open(url).map_err(|e| fail(format!("{origin}: {e}")))?,
    ));
    let s = log
        .verify_checkpoints(key.as_ref(), kept.as_deref().map(<[u8]>::trim_ascii))
        .map_err(|e| fail(format!("{origin}: {e}")))?;
    let mut text = format!(
        "{origin}: ok: {} records in {} partitions (by session), every chain intact\n",
        s.records, s.partitions
    );
    match (&key, s.last) {
        (Some(k), Some(last)) => text.push_str(&format!(
            "{origin}: {} checkpoints signed by {}, all check; the last is record {last} of the \
             log partition, and every partition head it commits to is there\n",
            s.checkpoints,
            k.hex()
        )),
        (None, Some(_)) => text.push_str(&format!(
            "{origin}: {} checkpoints not checked (give --public-key)\n",
            s.checkpoints
        )),
        _ => {}
    }
    if let Some(at) = s.kept {
        text.push_str(&format!(
            "{origin}: reaches the kept checkpoint (record {at} of the log partition) unchanged\n"
        ));
    }
    write_out(&text)
}

/// A UTC timestamp, `2026-12-01 01:02:03`.
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn short(hash: &str) -> &str {
    let h = hash.strip_prefix("sha256:").unwrap_or(hash);
    &h[..h.len().min(12)]
}

/// One session's records, and the policy revisions up to its last one.
struct Report<'a> {
    tenant: &'a str,
    session: &'a str,
    opened: &'a Record,
    events: Vec<&'a Record>,
    policies: Vec<&'a Record>,
}

/// A table: its title, column names and rows of plain text cells.
struct Table {
    title: String,
    note: Option<String>,
    columns: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl<'a> Report<'a> {
    fn build(records: &'a [Record], tenant: &'a str, session: &'a str) -> Option<Report<'a>> {
        let ours = |r: &Record| {
            r.tenant.as_deref() == Some(tenant) && r.session.as_deref() == Some(session)
        };
        let opened = records
            .iter()
            .find(|r| r.kind == Kind::Session && ours(r))?;
        let events: Vec<&Record> = records
            .iter()
            .filter(|r| r.kind == Kind::Event && ours(r))
            .collect();
        let last = events.last().map_or(opened.seq, |r| r.seq);
        let policies = records
            .iter()
            .filter(|r| r.kind == Kind::Policy && r.seq <= last)
            .collect();
        Some(Report {
            tenant,
            session,
            opened,
            events,
            policies,
        })
    }

    fn event_field(r: &Record, key: &str) -> String {
        r.event
            .as_ref()
            .and_then(|e| e.get(key))
            .map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default()
    }

    fn call_of(r: &Record) -> String {
        let id = Self::event_field(r, "id");
        if id.is_empty() {
            Self::event_field(r, "call")
        } else {
            id
        }
    }

    fn tables(&self) -> (Vec<(String, String)>, Vec<Table>) {
        let mut facts = vec![
            ("Tenant".to_string(), self.tenant.to_string()),
            ("Session".to_string(), self.session.to_string()),
            (
                "Agent".to_string(),
                self.opened.agent.clone().unwrap_or_else(|| "(none)".into()),
            ),
            (
                "Opened".to_string(),
                format!("{} (record {})", utc(self.opened.time_ms), self.opened.seq),
            ),
            ("Policy".to_string(), self.opened.policy_hash.clone()),
        ];
        let count = |v: &str| {
            self.events
                .iter()
                .filter(|r| r.verdict.as_deref() == Some(v))
                .count()
        };
        facts.push((
            "Decisions".to_string(),
            format!(
                "{} ALLOW, {} DENY, {} PAUSE over {} events",
                count("ALLOW"),
                count("DENY"),
                count("PAUSE"),
                self.events.len()
            ),
        ));
        if let Some(last) = self.events.last() {
            facts.push((
                "Ledger after the last event".to_string(),
                last.ledger_hash.clone().unwrap_or_default(),
            ));
        }

        let mut tables = Vec::new();
        let policy_rows = self
            .policies
            .iter()
            .map(|p| {
                let admitted = match &p.certificate {
                    Some(c) => format!(
                        "certify: {} ({}) against {}",
                        c.get("verdict").and_then(|v| v.as_str()).unwrap_or("?"),
                        c.get("method")
                            .and_then(|v| v.as_str())
                            .unwrap_or("no method"),
                        c.get("old_hash").and_then(|v| v.as_str()).unwrap_or("?"),
                    ),
                    None if p.seq == self.policies[0].seq => {
                        "the store's first policy (nothing to certify against)".into()
                    }
                    None => "no certificate (the server ran without --require-certified)".into(),
                };
                let admitted = match &p.actor {
                    Some(a) => format!("{admitted}; run by {a}"),
                    None => admitted,
                };
                let mark = if p.policy_hash == self.opened.policy_hash {
                    " (this session's)"
                } else {
                    ""
                };
                vec![
                    p.seq.to_string(),
                    utc(p.time_ms),
                    format!("{}{mark}", p.policy_hash),
                    p.source.clone().unwrap_or_default(),
                    admitted,
                ]
            })
            .collect();
        tables.push(Table {
            title: "Policy revisions".into(),
            note: Some("Every policy the server ran up to this session's last event, and what admitted it.".into()),
            columns: vec!["record", "time (UTC)", "policy", "source", "admitted by"],
            rows: policy_rows,
        });

        let rows = self
            .events
            .iter()
            .map(|r| {
                vec![
                    r.seq.to_string(),
                    utc(r.time_ms),
                    Self::event_field(r, "kind"),
                    Self::call_of(r),
                    Self::event_field(r, "tool"),
                    r.verdict.clone().unwrap_or_default(),
                    r.rule.clone().unwrap_or_default(),
                    r.reason.clone().unwrap_or_default(),
                    short(r.ledger_hash.as_deref().unwrap_or("")).to_string(),
                ]
            })
            .collect();
        tables.push(Table {
            title: "Events".into(),
            note: None,
            columns: vec![
                "record",
                "time (UTC)",
                "event",
                "call",
                "tool",
                "decision",
                "rule",
                "reason",
                "ledger",
            ],
            rows,
        });

        let denies: Vec<Vec<String>> = self
            .events
            .iter()
            .filter(|r| r.verdict.as_deref() == Some("DENY"))
            .map(|r| {
                vec![
                    r.seq.to_string(),
                    Self::call_of(r),
                    r.rule.clone().unwrap_or_default(),
                    if r.path.is_empty() {
                        "(no path: the call itself)".into()
                    } else {
                        r.path.join(" → ")
                    },
                    r.reason.clone().unwrap_or_default(),
                ]
            })
            .collect();
        tables.push(Table {
            title: "Denied calls and their paths".into(),
            note: Some(
                "A path runs from the labeled source to the denied call (call or task ids).".into(),
            ),
            columns: vec!["record", "call", "rule", "path", "reason"],
            rows: denies,
        });

        let mut approvals = Vec::new();
        for r in self.events.iter().filter(|r| {
            Self::event_field(r, "kind") == "call" && r.verdict.as_deref() == Some("PAUSE")
        }) {
            let call = Self::call_of(r);
            let resolution = self
                .events
                .iter()
                .find(|x| {
                    x.seq > r.seq
                        && matches!(Self::event_field(x, "kind").as_str(), "approve" | "reject")
                        && Self::call_of(x) == call
                })
                .map_or_else(
                    || "still waiting".to_string(),
                    |x| {
                        let kind = Self::event_field(x, "kind");
                        // Who settled it and why (records before the
                        // perimeter have neither).
                        let by = x
                            .actor
                            .as_ref()
                            .map(|a| format!(" by {a}"))
                            .unwrap_or_default();
                        let note = x
                            .note
                            .as_ref()
                            .map(|n| format!(", because \"{n}\""))
                            .unwrap_or_default();
                        let at = utc(x.time_ms);
                        if kind == "approve" {
                            format!(
                                "approved{by} at {at} (record {}{note}), re-checked: {} — {}",
                                x.seq,
                                x.verdict.clone().unwrap_or_default(),
                                x.reason.clone().unwrap_or_default()
                            )
                        } else {
                            format!(
                                "rejected{by} at {at} (record {}{note}): units returned",
                                x.seq
                            )
                        }
                    },
                );
            approvals.push(vec![
                r.seq.to_string(),
                call,
                r.rule.clone().unwrap_or_default(),
                r.reason.clone().unwrap_or_default(),
                resolution,
            ]);
        }
        tables.push(Table {
            title: "Approvals".into(),
            note: None,
            columns: vec!["record", "call", "paused by", "reason", "resolution"],
            rows: approvals,
        });
        (facts, tables)
    }

    /// GitHub-flavoured Markdown. Every text from the log goes through
    /// [`agenra_cli::render::markdown`] (or [`md_code`] in a code span), so a
    /// crafted id cannot add markup, HTML, a table cell or a line, and a
    /// control or bidirectional character shows as an escape.
    fn markdown(&self, origin: &str, chain: &str) -> String {
        use agenra_cli::render::markdown as cell;
        let (facts, tables) = self.tables();
        let mut out = format!(
            "# Audit report: session {} of tenant {}\n\nFrom {}; chain verified: {}.\n\n",
            md_code(self.session),
            md_code(self.tenant),
            md_code(origin),
            cell(chain)
        );
        for (k, v) in &facts {
            out.push_str(&format!("* **{}**: {}\n", cell(k), cell(v)));
        }
        for t in &tables {
            out.push_str(&format!("\n## {}\n\n", cell(&t.title)));
            if let Some(n) = &t.note {
                out.push_str(&format!("{}\n\n", cell(n)));
            }
            if t.rows.is_empty() {
                out.push_str("None.\n");
                continue;
            }
            let columns: Vec<String> = t.columns.iter().map(|c| cell(c)).collect();
            out.push_str(&format!("| {} |\n", columns.join(" | ")));
            out.push_str(&format!(
                "|{}\n",
                t.columns.iter().map(|_| " --- |").collect::<String>()
            ));
            for row in &t.rows {
                let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
                out.push_str(&format!("| {} |\n", cells.join(" | ")));
            }
        }
        out
    }

    fn html(&self, origin: &str, chain: &str) -> String {
        // Every text goes through it: HTML-escaped, and control or
        // bidirectional characters shown as escapes.
        let esc = agenra_cli::render::html;
        let (facts, tables) = self.tables();
        let title = format!(
            "Audit report: session {} of tenant {}",
            esc(self.session),
            esc(self.tenant)
        );
        let mut out = format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}.DENY{{color:#b00}}.PAUSE{{color:#a60}}.ALLOW{{color:#070}}svg.path rect{{fill:#fff;stroke:#555;stroke-width:1.5}}svg.path .src rect{{fill:#fff1e0;stroke:#b35900}}svg.path .sink rect{{fill:#e8f0fe;stroke:#1f4fa8}}svg.path text{{font:12px monospace;fill:#111}}svg.path text.role{{font-size:10px;fill:#555}}svg.path .edge{{stroke:#555;stroke-width:2;fill:none}}svg.path .head{{fill:#555}}.pathtext{{color:#555;font-size:.9em}}</style></head><body>\n<h1>{title}</h1>\n<p>From <code>{}</code>; chain verified: {}.</p>\n<ul>\n",
            esc(origin),
            esc(chain)
        );
        for (k, v) in &facts {
            out.push_str(&format!("<li><b>{}</b>: {}</li>\n", esc(k), esc(v)));
        }
        out.push_str("</ul>\n");
        for t in &tables {
            out.push_str(&format!("<h2>{}</h2>\n", esc(&t.title)));
            if let Some(n) = &t.note {
                out.push_str(&format!("<p>{}</p>\n", esc(n)));
            }
            if t.rows.is_empty() {
                out.push_str("<p>None.</p>\n");
                continue;
            }
            out.push_str("<table><tr>");
            for c in &t.columns {
                out.push_str(&format!("<th>{}</th>", esc(c)));
            }
            out.push_str("</tr>\n");
            for row in &t.rows {
                out.push_str("<tr>");
                for c in row {
                    let class = if matches!(c.as_str(), "ALLOW" | "DENY" | "PAUSE") {
                        format!(" class=\"{c}\"")
                    } else {
                        String::new()
                    };
                    out.push_str(&format!("<td{class}>{}</td>", esc(c)));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</table>\n");
        }
        out.push_str(&self.drawings());
        out.push_str("</body></html>\n");
        out
    }

    /// Each decision's data path (a DENY's, a PAUSE's, an approval's
    /// re-check), drawn as inline SVG (`agenra_gateway::page::path_svg`,
    /// as the approvals page draws it), every text escaped.
    fn drawings(&self) -> String {
        let esc = |s: &str| agenra_cli::render::html(s);
        let tools: std::collections::HashMap<String, String> = self
            .events
            .iter()
            .filter(|r| Self::event_field(r, "kind") == "call")
            .map(|r| (Self::call_of(r), Self::event_field(r, "tool")))
            .filter(|(_, t)| !t.is_empty())
            .collect();
        let tool = |n: &str| tools.get(n).cloned();
        let mut out = String::from(
            "<h2>Data paths, drawn</h2>\n<p>From the labelled source to the call, for every decision that names a path.</p>\n",
        );
        let mut any = false;
        for r in self.events.iter().filter(|r| !r.path.is_empty()) {
            any = true;
            out.push_str(&format!(
                "<figure><figcaption>record {}: {} <code>{}</code>: <span class=\"{}\">{}</span> by <code>{}</code></figcaption>\n{}</figure>\n",
                r.seq,
                esc(&Self::event_field(r, "kind")),
                esc(&Self::call_of(r)),
                esc(r.verdict.as_deref().unwrap_or("")),
                esc(r.verdict.as_deref().unwrap_or("")),
                esc(r.rule.as_deref().unwrap_or("")),
                agenra_gateway::page::path_svg_with(&r.path, &tool, &esc),
            ));
        }
        if !any {
            out.push_str("<p>None.</p>\n");
        }
        out
    }
}

/// `s` as a Markdown code span: refused characters made visible, and a
/// backtick fence longer than any backtick run of `s` (inside a code span,
/// CommonMark interprets no markup, HTML or entity).
fn md_code(s: &str) -> String {
    let s = agenra_cli::render::escape(s);
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if s.is_empty() || s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn code_spans_outlast_every_backtick_run() {
        use super::md_code;
        assert_eq!(md_code("s"), "`s`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("``x"), "``` ``x ```");
        assert_eq!(md_code(""), "`  `");
        assert_eq!(md_code("s\n\u{202e}<b>"), "`s\\n\\u{202e}<b>`");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_796_086_800_000), "2026-12-01 01:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
    }
}
