//! `agenra verify POLICY` and `agenra diff OLD NEW`: the command-line side
//! of `agenra_smt::verify` (docs/verification.md).

use crate::certify::load;
use agenra_smt::verify::diff::{diff, DiffReport, Relation};
use agenra_smt::verify::{verify, Finding, Options, Outcome, Property};
use serde_json::json;
use std::path::Path;

/// Exit codes of `agenra verify`: 0 every requested property holds, 2 a
/// property is violated, 3 none is violated but one is unknown (1 is an
/// error: a policy that does not load, an unknown property, a witness that
/// cannot be written).
pub fn verify_exit_code(findings: &[Finding]) -> u8 {
    if findings.iter().any(|f| f.result == Outcome::Violated) {
        2
    } else if findings.iter().any(|f| f.result == Outcome::Unknown) {
        3
    } else {
        0
    }
}

/// The properties named on the command line (all seven when none is).
pub fn parse_properties(names: &[String]) -> Result<Vec<Property>, String> {
    if names.is_empty() {
        return Ok(Property::ALL.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        for part in n.split(',').filter(|s| !s.is_empty()) {
            let p = Property::parse(part.trim()).ok_or_else(|| {
                let all: Vec<&str> = Property::ALL.iter().map(|p| p.name()).collect();
                format!("unknown property `{part}` (one of: {})", all.join(", "))
            })?;
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The file a witness is written to: `PROPERTY.jsonl`, or
/// `PROPERTY.ROLE.jsonl` for a companion trace.
pub fn witness_file(f: &Finding, role: &str) -> String {
    if role.is_empty() {
        format!("{}.jsonl", f.property.name())
    } else {
        format!("{}.{role}.jsonl", f.property.name())
    }
}

fn jsonl(events: &[agenra_core::Event]) -> String {
    agenra_smt::verify::concrete::to_jsonl(events)
}

/// `agenra verify`: the report (human or JSON) and the exit code.
pub fn run_verify(
    policy: &Path,
    bound: usize,
    properties: &[String],
    timeout_ms: u32,
    witness_dir: Option<&Path>,
    json_out: bool,
) -> Result<(String, u8), String> {
    if bound == 0 {
        return Err("--bound must be at least 1".into());
    }
    let props = parse_properties(properties)?;
    let p = load(policy)?;
    let opts = Options { bound, timeout_ms };
    let findings = verify(&p, &props, &opts);
    if let Some(dir) = witness_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for f in &findings {
            for w in &f.witnesses {
                let path = dir.join(witness_file(f, &w.role));
                std::fs::write(&path, jsonl(&w.events))
                    .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            }
        }
    }
    let hash = agenra_certify::certificate::policy_hash(&p);
    let text = if json_out {
        let props: Vec<serde_json::Value> = findings
            .iter()
            .map(|f| {
                json!({
                    "name": f.property.name(),
                    "result": f.result.as_str(),
                    "seconds": f.seconds,
                    "detail": f.detail,
                    "witnesses": f.witnesses.iter().map(|w| json!({
                        "file": witness_dir.map(|d| d.join(witness_file(f, &w.role)).display().to_string()),
                        "role": w.role,
                        "shows": w.shows,
                        "events": w.events,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        format!(
            "{}\n",
            json!({"policy": p.name, "policy_hash": hash, "bound": bound, "properties": props})
        )
    } else {
        let mut s = format!("policy {} {hash}, bound {bound}\n", p.name);
        let w = findings
            .iter()
            .map(|f| f.property.name().len())
            .max()
            .unwrap_or(8);
        for f in &findings {
            s.push_str(&format!(
                "{:w$}  {:8}  {:>7.3} s\n",
                f.property.name(),
                f.result.as_str(),
                f.seconds
            ));
            let shown: Vec<&String> = match f.result {
                Outcome::Holds => vec![],
                _ => f.detail.iter().collect(),
            };
            for d in shown {
                s.push_str(&format!("    {d}\n"));
            }
            for wt in &f.witnesses {
                match witness_dir {
                    Some(dir) => s.push_str(&format!(
                        "    witness {}: {}\n",
                        dir.join(witness_file(f, &wt.role)).display(),
                        wt.shows
                    )),
                    None => s.push_str(&format!(
                        "    witness ({} events; --witness-dir DIR writes it): {}\n",
                        wt.events.len(),
                        wt.shows
                    )),
                }
            }
        }
        s
    };
    Ok((text, verify_exit_code(&findings)))
}

/// Exit codes of `agenra diff`: 0 equivalent, 2 they differ (more or less
/// permissive, incomparable), 3 unknown.
pub fn diff_exit_code(r: &DiffReport) -> u8 {
    match r.relation {
        Relation::Equivalent => 0,
        Relation::Unknown => 3,
        _ => 2,
    }
}

/// `agenra diff`: the report and the exit code.
pub fn run_diff(
    old: &Path,
    new: &Path,
    bound: usize,
    json_out: bool,
) -> Result<(String, u8), String> {
    let po = load(old)?;
    let pn = load(new)?;
    let r = diff(&po, &pn, bound);
    let text = if json_out {
        format!(
            "{}\n",
            json!({
                "relation": r.relation.as_str(),
                "new_only": r.new_only,
                "old_only": r.old_only,
                "reasons": r.reasons,
            })
        )
    } else {
        let mut s = format!("{}\n", r.relation.as_str());
        for (title, w) in [
            ("NEW admits, OLD does not", &r.new_only),
            ("OLD admits, NEW does not", &r.old_only),
        ] {
            if let Some(events) = w {
                s.push_str(&format!("{title}:\n"));
                for line in jsonl(events).lines() {
                    s.push_str(&format!("  {line}\n"));
                }
            }
        }
        for why in &r.reasons {
            s.push_str(&format!("note: {why}\n"));
        }
        s
    };
    Ok((text, diff_exit_code(&r)))
}
