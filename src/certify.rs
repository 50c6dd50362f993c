//! `agenra certify OLD NEW`, `agenra check-cert OLD NEW CERT` and
//! `agenra bench certify`: the command-line side of `agenra_certify`
//! (docs/certify.md).

use agenra_certify::certificate::Certificate;
use agenra_certify::{certify_with, check_certificate_with, Report, Verdict};

/// `certify` with the rule-side SMT check (rule changes, docs/certify.md).
pub fn certify(old: &Policy, new: &Policy) -> Report {
    certify_with(old, new, Some(&agenra_smt::rules::RuleChecker))
}

/// `check-cert`, re-running a certificate's rule side with Z3.
pub fn check_certificate(
    old: &Policy,
    new: &Policy,
    cert: &Certificate,
) -> Result<(), agenra_certify::check::CheckError> {
    check_certificate_with(old, new, cert, Some(&agenra_smt::rules::RuleChecker))
}
use agenra_core::Policy;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Exit codes of `agenra certify`: 0 certified, 2 not preserved, 3 unknown
/// (1 is an error: a policy that does not load, a file that cannot be written).
pub fn exit_code(v: Verdict) -> u8 {
    match v {
        Verdict::Certified => 0,
        Verdict::NotPreserved => 2,
        Verdict::Unknown => 3,
    }
}

/// Reads a policy: `.agr` source (compiled; diagnostics rendered in the
/// error), or a compiled policy (`.json`, `.cbor`), validated.
pub fn load(path: &Path) -> Result<Policy, String> {
    let ext = path.extension().and_then(|e| e.to_str());
    let bytes = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let policy = match ext {
        Some("json") | Some("cbor") => {
            let decoded = if ext == Some("cbor") {
                agenra_core::hash::from_cbor::<Policy>(&bytes)
            } else {
                let text = String::from_utf8(bytes)
                    .map_err(|e| format!("{}: not UTF-8: {e}", path.display()))?;
                agenra_core::hash::from_json::<Policy>(&text)
            };
            decoded.map_err(|e| format!("{}: not a compiled policy: {e}", path.display()))?
        }
        _ => {
            let source = String::from_utf8(bytes)
                .map_err(|e| format!("{}: not UTF-8: {e}", path.display()))?;
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("policy");
            agenra_policy::compile(&source, name)
                .map_err(|e| e.render(&path.display().to_string(), &source))?
                .policy
        }
    };
    agenra_core::validate::validate(&policy)
        .map_err(|e| format!("{}: invalid policy: {e}", path.display()))?;
    Ok(policy)
}

/// The `--json` object of `agenra certify`, keys in the documented order.
pub fn report_json(r: &Report) -> String {
    let fields: [(&str, serde_json::Value); 8] = [
        ("verdict", r.verdict.as_str().into()),
        ("method", serde_json::json!(r.method)),
        ("old_hash", r.old_hash.clone().into()),
        ("new_hash", r.new_hash.clone().into()),
        ("lost_workflow", serde_json::json!(r.lost_workflow)),
        (
            "confirmed_by_replay",
            serde_json::json!(r.confirmed_by_replay),
        ),
        ("safety_delta", serde_json::json!(r.safety_delta)),
        ("reasons", serde_json::json!(r.reasons)),
    ];
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(*k)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Human output of `agenra certify`.
pub fn report_text(r: &Report) -> String {
    let mut out = String::new();
    let method = r
        .method
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    out.push_str(&format!("{}{method}\n", r.verdict.as_str()));
    out.push_str(&format!("old: {}\nnew: {}\n", r.old_hash, r.new_hash));
    for why in &r.reasons {
        out.push_str(&format!("  - {why}\n"));
    }
    let events = |title: &str, ev: &Option<Vec<agenra_core::Event>>, out: &mut String| {
        if let Some(ev) = ev {
            out.push_str(&format!("{title}:\n"));
            for e in ev {
                out.push_str(&format!(
                    "  {}\n",
                    serde_json::to_string(e).unwrap_or_default()
                ));
            }
        }
    };
    events(
        "lost workflow (OLD admits every event, NEW loses the last)",
        &r.lost_workflow,
        &mut out,
    );
    if let Some(c) = r.confirmed_by_replay {
        out.push_str(&format!("confirmed by replay: {c}\n"));
    }
    match &r.safety_delta {
        Some(_) => events(
            "safety delta (NEW admits the last event, OLD does not)",
            &r.safety_delta,
            &mut out,
        ),
        None => out.push_str("safety delta: none found\n"),
    }
    out
}

/// `agenra certify`: prints the report, writes the certificate (CBOR when
/// the file name ends in `.cbor`, JSON otherwise) when one was produced.
pub fn run_certify(
    old: &Path,
    new: &Path,
    json: bool,
    out: Option<&Path>,
    emit_lean: Option<&Path>,
) -> Result<(String, u8), String> {
    let (po, pn) = (load(old)?, load(new)?);
    let report = certify(&po, &pn);
    // `--out` first, and the verdict whatever `--emit-lean` does: a Lean
    // file that cannot be written costs the exit code (1), not the verdict
    // or the certificate.
    if let Some(path) = out {
        match &report.certificate {
            Some(cert) => {
                let bytes = if path.extension().and_then(|e| e.to_str()) == Some("cbor") {
                    cert.to_cbor().map_err(|e| e.to_string())?
                } else {
                    cert.to_json().map_err(|e| e.to_string())?.into_bytes()
                };
                std::fs::write(path, bytes)
                    .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            }
            // No certificate to write: the verdict (and exit code) says why.
            None => eprintln!(
                "agenra: no certificate written to {}: the verdict is {}",
                path.display(),
                report.verdict.as_str()
            ),
        }
    }
    let text = if json {
        format!("{}\n", report_json(&report))
    } else {
        report_text(&report)
    };
    if let Some(path) = emit_lean {
        if let Err(e) = write_lean(&po, &pn, &report, path) {
            eprintln!("agenra: error: {e}");
            return Ok((text, 1));
        }
    }
    Ok((text, exit_code(report.verdict)))
}

/// `--emit-lean FILE`: the certificate as a Lean file (docs/lean.md); the
/// namespace is named after the file stem. No file without a certificate.
fn write_lean(po: &Policy, pn: &Policy, report: &Report, path: &Path) -> Result<(), String> {
    let Some(cert) = &report.certificate else {
        eprintln!(
            "agenra: no Lean certificate written to {}: the verdict is {}",
            path.display(),
            report.verdict.as_str()
        );
        return Ok(());
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("Cert");
    let text = agenra_certify::emit_lean::emit_lean(po, pn, cert, stem)
        .map_err(|e| format!("{}: cannot emit the Lean certificate: {e}", path.display()))?;
    std::fs::write(path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// `agenra check-cert`: `Ok` with a line when the certificate holds.
pub fn run_check_cert(old: &Path, new: &Path, cert: &Path) -> Result<String, String> {
    let (po, pn) = (load(old)?, load(new)?);
    let bytes = std::fs::read(cert).map_err(|e| format!("{}: cannot read: {e}", cert.display()))?;
    let c = Certificate::read(&bytes)
        .map_err(|e| format!("{}: not a certificate: {e}", cert.display()))?;
    check_certificate(&po, &pn, &c).map_err(|e| format!("{}: rejected: {e}", cert.display()))?;
    Ok(format!("{}: ok ({})\n", cert.display(), c.method()))
}

/// One revision of the corpus (`ground-truth.json`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revision {
    pub id: String,
    pub app: String,
    pub old: String,
    pub new: String,
    pub preserving: bool,
    pub reason: String,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct BenchSummary {
    pub total: usize,
    pub preserving_certified: usize,
    pub preserving_not_certified: usize,
    pub non_preserving_certified: usize,
    pub non_preserving_rejected: usize,
    pub confirmed_by_replay: usize,
    /// Certifying the whole corpus (both questions), wall clock.
    pub seconds: f64,
    /// Re-checking every certificate with `check-cert`, wall clock.
    pub check_seconds: f64,
}

/// The default corpus: `tests/certify-corpus` of this checkout.
pub fn default_corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/certify-corpus")
}

/// Runs the corpus: one line per revision, the summary last. Every
/// certificate is re-checked; a certificate that fails counts as not
/// certified (and is reported).
pub fn run_bench(dir: &Path, json: bool) -> Result<(String, BenchSummary), String> {
    let truth_path = dir.join("ground-truth.json");
    let text = std::fs::read_to_string(&truth_path)
        .map_err(|e| format!("{}: cannot read: {e}", truth_path.display()))?;
    let revisions: Vec<Revision> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", truth_path.display()))?;
    let mut policies = Vec::new();
    for r in &revisions {
        policies.push((load(&dir.join(&r.old))?, load(&dir.join(&r.new))?));
    }
    let mut s = BenchSummary {
        total: revisions.len(),
        ..Default::default()
    };
    let mut out = String::new();
    let mut elapsed = 0.0;
    let mut checking = 0.0;
    for (r, (old, new)) in revisions.iter().zip(&policies) {
        let start = Instant::now();
        let report = certify(old, new);
        elapsed += start.elapsed().as_secs_f64();
        let mut verdict = report.verdict;
        if let Some(cert) = &report.certificate {
            let start = Instant::now();
            let checked = check_certificate(old, new, cert);
            checking += start.elapsed().as_secs_f64();
            if let Err(e) = checked {
                out.push_str(&format!(
                    "{}: certificate rejected by check-cert: {e}\n",
                    r.id
                ));
                verdict = Verdict::Unknown;
            }
        }
        let certified = verdict == Verdict::Certified;
        match (r.preserving, certified) {
            (true, true) => s.preserving_certified += 1,
            (true, false) => s.preserving_not_certified += 1,
            (false, true) => s.non_preserving_certified += 1,
            (false, false) => s.non_preserving_rejected += 1,
        }
        if report.confirmed_by_replay == Some(true) {
            s.confirmed_by_replay += 1;
        }
        let mark = if r.preserving == certified {
            "ok "
        } else {
            "MISS"
        };
        let line = if json {
            serde_json::json!({"id": r.id, "app": r.app, "preserving": r.preserving, "verdict": verdict.as_str(),
                "method": report.method, "confirmed_by_replay": report.confirmed_by_replay,
                "safety_delta": report.safety_delta.is_some(), "reasons": report.reasons}).to_string()
        } else {
            format!(
                "{mark} {:<34} {:<6} {:<14} {}",
                r.id,
                if r.preserving { "keeps" } else { "breaks" },
                verdict.as_str(),
                report
                    .method
                    .as_deref()
                    .unwrap_or_else(|| report.reasons.first().map_or("", String::as_str))
            )
        };
        out.push_str(&line);
        out.push('\n');
    }
    s.seconds = (elapsed * 1000.0).round() / 1000.0;
    s.check_seconds = (checking * 1000.0).round() / 1000.0;
    out.push_str(&serde_json::to_string(&s).map_err(|e| e.to_string())?);
    out.push('\n');
    Ok((out, s))
}
