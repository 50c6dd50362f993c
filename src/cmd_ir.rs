//! `agenra ir ...`: the Permission IR (docs/permission-ir.md) from the
//! command line: validate, produce from a trace or from text, lower.

use super::{fail, load_policy, Failed};
use agenra_permission_ir as pir;
use clap::Subcommand;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum IrCommand {
    /// Check an IR against a policy: exit 0 when valid, 1 with one line per defect.
    Validate {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// The IR (JSON).
        ir: PathBuf,
        /// One JSON object: `valid`, and `errors` (`kind`, `path`, `message`).
        #[arg(long)]
        json: bool,
    },
    /// Print the IR of what a trace did (observed calls, arguments, lineage).
    FromTrace {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// A trace: one JSON event per line (docs/events.md).
        trace: PathBuf,
    },
    /// Ask an OpenAI-compatible endpoint for the IR of a task text, validate
    /// and print it. Needs AGENRA_LLM_BASE_URL and AGENRA_LLM_MODEL (and
    /// AGENRA_LLM_API_KEY if the endpoint wants one).
    FromText {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// What the user asked, verbatim.
        text: String,
    },
    /// Print the task scope and the constraints an IR lowers to.
    Lower {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// The IR (JSON).
        ir: PathBuf,
        /// One JSON object: `task` (the event), `policy_hash`, `checks`.
        #[arg(long)]
        json: bool,
        /// Write the narrowed policy (compiled JSON) here: `agenra replay --policy` takes it.
        #[arg(long)]
        policy_out: Option<PathBuf>,
        /// Write the task event here (one JSON line, to put before a trace).
        #[arg(long)]
        task_out: Option<PathBuf>,
    },
}

pub fn run(command: IrCommand) -> Result<(), Failed> {
    match command {
        IrCommand::Validate { policy, ir, json } => validate(&policy, &ir, json),
        IrCommand::FromTrace { policy, trace } => from_trace(&policy, &trace),
        IrCommand::FromText { policy, text } => from_text(&policy, &text),
        IrCommand::Lower {
            policy,
            ir,
            json,
            policy_out,
            task_out,
        } => lower(
            &policy,
            &ir,
            json,
            policy_out.as_deref(),
            task_out.as_deref(),
        ),
    }
}

fn print(text: &str) {
    super::out(format_args!("{text}"));
}

fn read(path: &Path) -> Result<String, Failed> {
    std::fs::read_to_string(path).map_err(|e| fail(format!("{}: cannot read: {e}", path.display())))
}

fn parse(path: &Path) -> Result<pir::PermissionIr, Failed> {
    pir::parse(&read(path)?).map_err(|e| fail(format!("{}: {e}", path.display())))
}

fn validate(policy: &Path, ir: &Path, json: bool) -> Result<(), Failed> {
    let (policy, _) = load_policy(policy, true)?;
    let parsed = match pir::parse(&read(ir)?) {
        Ok(p) => p,
        Err(e) if json => {
            let out = serde_json::json!({
                "file": ir.display().to_string(),
                "valid": false,
                "errors": [{"kind": match e {
                    pir::ParseError::DuplicateKey { .. } => "duplicate-key",
                    pir::ParseError::Json { .. } => "not-an-ir",
                }, "path": "", "message": e.to_string()}],
            });
            print(&format!("{out}\n"));
            return Err(Failed(1));
        }
        Err(e) => return Err(fail(format!("{}: {e}", ir.display()))),
    };
    let errors = pir::check(&parsed, &policy);
    if json {
        let out = serde_json::json!({
            "file": ir.display().to_string(),
            "valid": errors.is_empty(),
            "errors": errors.iter().map(|e| serde_json::json!({
                "kind": e.kind(), "path": e.path(), "message": e.to_string(),
            })).collect::<Vec<_>>(),
        });
        print(&format!("{out}\n"));
    } else if errors.is_empty() {
        print(&format!(
            "{}: ok ({} actions, {} assets, {} obligations, {} allowances, {} forbidden, {} sinks, {} flows)\n",
            ir.display(),
            parsed.actions.len(),
            parsed.assets.len(),
            parsed.obligations.len(),
            parsed.allowances.len(),
            parsed.forbidden.len(),
            parsed.sinks.len(),
            parsed.flows.len()
        ));
    } else {
        for e in &errors {
            fail(format!("{}: {e}", ir.display()));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Failed(1))
    }
}

fn from_trace(policy: &Path, trace: &Path) -> Result<(), Failed> {
    let (policy, _) = load_policy(policy, true)?;
    let text = agenra::trace::read_trace(trace).map_err(fail)?;
    let events: Vec<agenra_core::Event> = agenra::trace::parse_trace(trace, &text)
        .map_err(fail)?
        .into_iter()
        .map(|t| t.event)
        .collect();
    let ir = pir::from_trace(&events, &policy);
    // The producer's contract: its output validates. Checked, not assumed.
    let errors = pir::check(&ir, &policy);
    if let Some(e) = errors.first() {
        return Err(fail(format!(
            "internal error: from-trace produced an invalid IR: {e}"
        )));
    }
    print(&pir::to_json(&ir));
    Ok(())
}

fn from_text(policy: &Path, text: &str) -> Result<(), Failed> {
    let config = pir::LlmConfig::from_env().map_err(fail)?;
    let (policy, _) = load_policy(policy, true)?;
    match pir::from_text(text, &policy, &config) {
        Ok(valid) => {
            print(&pir::to_json(valid.ir()));
            Ok(())
        }
        Err(pir::LlmError::Invalid(e)) => {
            fail("the model's IR is invalid:");
            for err in &e.errors {
                fail(err);
            }
            Err(Failed(1))
        }
        Err(e) => Err(fail(e)),
    }
}

fn lower(
    policy_path: &Path,
    ir: &Path,
    json: bool,
    policy_out: Option<&Path>,
    task_out: Option<&Path>,
) -> Result<(), Failed> {
    let (policy, _) = load_policy(policy_path, true)?;
    let valid = pir::validate(parse(ir)?, &policy).map_err(|e| {
        for err in &e.errors {
            fail(format!("{}: {err}", ir.display()));
        }
        Failed(1)
    })?;
    let lowered = pir::lower(&valid, &policy).map_err(fail)?;
    let hash = agenra_core::hash::content_hash(&lowered.policy).map_err(fail)?;
    let task_line = serde_json::to_string(&lowered.task_event()).map_err(fail)?;
    if let Some(path) = policy_out {
        let mut text = agenra_core::hash::to_json(&lowered.policy).map_err(fail)?;
        text.push('\n');
        std::fs::write(path, text)
            .map_err(|e| fail(format!("{}: cannot write: {e}", path.display())))?;
    }
    if let Some(path) = task_out {
        std::fs::write(path, format!("{task_line}\n"))
            .map_err(|e| fail(format!("{}: cannot write: {e}", path.display())))?;
    }
    if json {
        let out = serde_json::json!({
            "task": lowered.task_event(),
            "policy_hash": hash.to_string(),
            "checks": lowered.checks,
        });
        print(&format!("{out}\n"));
        return Ok(());
    }
    let base = &policy;
    let low = &lowered.policy;
    print(&format!("task event: {task_line}\n"));
    print(&format!(
        "policy: {} {} (policy ∧ task: +{} call rules, +{} obligations, +{} resource labels)\n",
        low.name,
        hash,
        low.call_rules.len() - base.call_rules.len(),
        low.obligations.len() - base.obligations.len(),
        low.resources.len() - base.resources.len()
    ));
    let kind = |k: pir::CheckKind| {
        serde_json::to_value(k)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let rows: Vec<(String, String, String)> = lowered
        .checks
        .iter()
        .map(|c| (kind(c.kind), c.rule.clone(), c.description.clone()))
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    for (k, rule, what) in rows {
        let line = format!("  {k:w0$}  {rule:w1$}  {what}");
        print(&format!(
            "{}\n",
            agenra_cli::render::escape(line.trim_end())
        ));
    }
    Ok(())
}
