//! A rig agent whose tools go through Agenra, run with a scripted model
//! (no provider, no network, no async runtime):
//!
//! ```text
//! cargo run --example rig_agent --features rig
//! ```
//!
//! The script reads `docs/plan.md` (allowed by the grant `read_docs`), then
//! tries to mail it to `attacker@evil.test` (denied: no grant covers that
//! address), then answers. The denial reaches the model as the tool's
//! result.

mod agent;
mod scripted;

use std::process::ExitCode;

fn main() -> ExitCode {
    let run = match agent::run(agent::default_script(), false) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("the policy does not compile: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("prompt: {}", agent::PROMPT);
    for e in &run.entries {
        let ran = if e.disposition.ran() {
            "ran"
        } else {
            "did not run"
        };
        println!(
            "{} {} {}: {:?} by `{}` ({ran}): {}",
            e.id,
            e.tool,
            serde_json::Value::Object(e.args.clone()),
            e.disposition,
            e.rule,
            e.reason
        );
    }
    // What the session recorded for each call.
    for e in &run.entries {
        let status = run.gate.with_session(|s| {
            let node = s.state().call_node(&e.id)?;
            s.state()
                .graph
                .node(node)
                .map(|n| format!("{:?}", n.status))
        });
        let status = status.unwrap_or_else(|| "unknown".into());
        println!("session: {} is {status}", e.id);
    }
    println!("read_file ran {} time(s)", run.reads);
    println!("send_email sent {} message(s)", run.sent.len());
    // What the model was told about each tool call, as rig sent it back.
    if let Some(last) = run.script.requests().last() {
        for message in &last.chat_history {
            if let Ok(json) = serde_json::to_string(message) {
                if json.contains("tool_result") || json.contains("toolresult") {
                    println!("model saw: {json}");
                }
            }
        }
    }
    match run.answer {
        Ok(answer) => {
            println!("answer: {answer}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("the agent failed: {e}");
            ExitCode::FAILURE
        }
    }
}
