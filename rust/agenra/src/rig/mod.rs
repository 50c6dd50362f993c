//! The monitor in front of [rig](https://crates.io/crates/rig-core) tools
//! (feature `rig`; rig-core and rig-agent 0.44).
//!
//! A [`Gate`] holds one Agenra [`Session`] shared by every tool it wraps.
//! [`Gate::wrap`] turns a rig [`Tool`] into a [`Gated`] tool with the same
//! name, description and schema, and [`Gate::wrap_dynamic`] does the same
//! for a rig [`DynamicTool`]. Register the wrapped tools on a rig agent as
//! usual: every call the model makes is then authorized first.
//!
//! * ALLOW: the tool runs, and its result goes back to the session (its
//!   output for `fact ... when output...` and provenance by value; an error
//!   as an unknown outcome, or a failed one with [`GateBuilder::errors_refund`]).
//! * DENY: the tool does not run; the model gets a `permission_denied`
//!   tool error that names the rule and the reason.
//! * PAUSE: the approval callback ([`GateBuilder::on_pause`] or
//!   [`GateBuilder::on_pause_async`]) decides. Approved, the call is
//!   re-checked (`Session::approve`) and runs if that allows it; rejected
//!   (the default when no callback is set), it is rejected in the session
//!   and the model is told so.
//!
//! A call whose future rig drops half-way (a cancelled run, a timeout) is
//! settled by the drop: rejected if it was paused, reported as an unknown
//! outcome if it was running.
//!
//! Call ids come from a counter (`rig-1`, `rig-2`, ...; see
//! [`GateBuilder::id_prefix`]); times come from a clock the host can replace
//! ([`GateBuilder::clock`]; the default reads the system clock in seconds)
//! and never go backwards. rig carries no provenance, so calls have no
//! observed lineage: every argument is taken to depend on everything the
//! session has read, the conservative choice (a policy with `provenance by
//! value;` narrows that by matching argument values against what the
//! session read). What a tool discovered (addresses a search returned) is
//! read from its output by [`GateBuilder::discovers`].
//!
//! ```no_run
//! use agenra::rig::Gate;
//! use rig_agent::core::{operation::Completion, DynModel};
//! use rig_agent::{Agent, AgentBuilder};
//! # use rig_agent::tool::{Tool, ToolContext};
//! # struct ReadFile;
//! # impl Tool for ReadFile {
//! #     const NAME: &'static str = "read_file";
//! #     type Args = serde_json::Value;
//! #     type Output = String;
//! #     type Error = std::convert::Infallible;
//! #     fn description(&self) -> String { "Reads a file".into() }
//! #     fn parameters(&self) -> serde_json::Value { serde_json::json!({"type": "object"}) }
//! #     async fn call(&self, _: &mut ToolContext, _: serde_json::Value) -> Result<String, Self::Error> {
//! #         Ok(String::new())
//! #     }
//! # }
//!
//! fn agent(model: DynModel<Completion>) -> Agent {
//!     let policy = agenra::compile(
//!         r#"tool fs.read(path: string) { resource path; }
//!            grant docs: fs.read on prefix "docs/" quota unlimited;"#,
//!         "agent",
//!     )
//!     .unwrap()
//!     .policy;
//!     let gate = Gate::builder(policy.session()).build();
//!     AgentBuilder::new(model)
//!         // The rig tool `read_file` is the policy's `fs.read`.
//!         .tool(gate.wrap(ReadFile).policy_tool("fs.read"))
//!         .build()
//! }
//! ```

use crate::{Call, Decision, Outcome, Report, Session, StepError, Verdict};
use rig_core::message::ToolName;
use rig_core::tool::{
    DynamicTool, IntoToolOutput, Tool, ToolContext, ToolExecutionError, ToolOutput,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

mod builder;
mod gated;
pub use builder::GateBuilder;
pub use gated::Gated;

/// A boxed, `Send` future (what an asynchronous approval callback returns).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

type Clock = Box<dyn Fn() -> u64 + Send + Sync>;
type Approver = Box<dyn Fn(Paused) -> BoxFuture<bool> + Send + Sync>;
type Observer = Box<dyn Fn(&Entry) + Send + Sync>;
type Discoverer = Box<dyn Fn(&Value) -> Vec<String> + Send + Sync>;

/// A call the monitor paused, as the approval callback sees it.
#[derive(Clone, Debug)]
pub struct Paused {
    /// The call as the monitor saw it (id, time, tool, arguments).
    pub call: Call,
    /// The PAUSE decision.
    pub decision: Decision,
    /// The name of the rule that paused the call.
    pub rule: String,
    /// The reason, as a sentence a person can read.
    pub reason: String,
}

/// What became of one tool call that went through a [`Gate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Allowed, and the tool ran.
    Allowed,
    /// Paused, approved, allowed by the re-check, and the tool ran.
    Approved,
    /// Denied: the tool did not run.
    Denied,
    /// Paused and approved, but the re-check denied it: the tool did not run.
    DeniedAfterApproval,
    /// Paused, and the approval callback said no: the tool did not run.
    Rejected,
    /// The monitor could not decide (a malformed call, a clock error, ...):
    /// the tool did not run.
    Error,
}

impl Disposition {
    /// Whether the tool ran.
    pub fn ran(self) -> bool {
        matches!(self, Disposition::Allowed | Disposition::Approved)
    }
}

/// One decided call, as reported to [`GateBuilder::on_entry`].
#[derive(Clone, Debug)]
pub struct Entry {
    /// The call id the gate gave it.
    pub id: String,
    /// The policy's tool name.
    pub tool: String,
    /// The call's arguments.
    pub args: Map<String, Value>,
    /// What became of it.
    pub disposition: Disposition,
    /// The monitor's first verdict (`None` when it could not decide).
    pub verdict: Option<Verdict>,
    /// The name of the deciding rule (empty when the monitor could not decide).
    pub rule: String,
    /// The reason, or the error when the monitor could not decide.
    pub reason: String,
    /// For a call that ran: whether the tool succeeded.
    pub tool_ok: Option<bool>,
    /// An error the session returned when the tool's result was reported.
    pub report_error: Option<String>,
}

/// One Agenra session in front of a set of rig tools. Cheap to clone; the
/// clones share the session, the id counter and the callbacks.
#[derive(Clone)]
pub struct Gate {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    next: AtomicU64,
    clock: Clock,
    approve: Approver,
    observe: Option<Observer>,
    prefix: String,
    agent: Option<String>,
    errors_refund: bool,
    discoverers: BTreeMap<String, Discoverer>,
}

struct State {
    session: Session,
    last_time: u64,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("prefix", &self.inner.prefix)
            .field("agent", &self.inner.agent)
            .field("next", &self.inner.next.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The seconds since the Unix epoch (0 if the system clock is before it).
fn system_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Whether a guarded tool ran before it failed.
enum Failure {
    /// It never ran (its arguments did not decode): nothing happened.
    NotRun(ToolExecutionError),
    /// It ran and failed.
    Ran(ToolExecutionError),
}

/// The monitor's answer, with its rule and reason rendered.
struct Answer {
    disposition: Disposition,
    verdict: Verdict,
    rule: String,
    reason: String,
}

/// A call the session holds (paused, or allowed and not yet reported).
/// If the call's future is dropped before it settles (rig cancelled the
/// run, a timeout fired), the drop settles it: a paused call is rejected,
/// a running one is reported as an unknown outcome (it may have acted), so
/// the session never keeps a call pending forever.
struct Held<'g> {
    gate: &'g Gate,
    id: String,
    paused: bool,
    armed: bool,
}

impl Held<'_> {
    /// The call has settled: nothing to do on drop.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.gate.lock();
        // Nothing to tell anyone if this fails: the call is then already
        // settled, or unknown to the session.
        let _ = if self.paused {
            state.session.reject(&self.id).map(drop)
        } else {
            state
                .session
                .report(&Report {
                    session: None,
                    call: self.id.clone(),
                    time: None,
                    status: Outcome::Unknown,
                    output: Value::Null,
                    discovered: Vec::new(),
                })
                .map(drop)
        };
    }
}

impl Gate {
    /// A gate over `session`, with the system clock and no approvals.
    pub fn builder(session: Session) -> GateBuilder {
        GateBuilder {
            session,
            clock: Box::new(system_seconds),
            approve: Box::new(|_| Box::pin(std::future::ready(false))),
            observe: None,
            prefix: "rig-".into(),
            agent: None,
            errors_refund: false,
            discoverers: BTreeMap::new(),
        }
    }

    /// Wraps a rig tool; the policy's tool name is the rig tool's name
    /// unless [`Gated::policy_tool`] says otherwise.
    pub fn wrap<T: Tool>(&self, tool: T) -> Gated<T> {
        Gated {
            inner: tool,
            gate: self.clone(),
            policy_tool: T::NAME.to_string(),
        }
    }

    /// Wraps a rig [`DynamicTool`] (a tool defined at run time, such as one
    /// from an MCP server) under the policy's tool `policy_tool` (`None`:
    /// the rig tool's own name).
    pub fn wrap_dynamic(&self, tool: DynamicTool, policy_tool: Option<&str>) -> DynamicTool {
        let definition = tool.definition();
        let name: ToolName = definition.name.clone();
        let policy_tool: Arc<str> = policy_tool.unwrap_or(name.as_str()).into();
        let gate = self.clone();
        DynamicTool::new_with_context(
            name,
            definition.description,
            definition.parameters,
            move |context: &mut ToolContext, args: Value| {
                let gate = gate.clone();
                let tool = tool.clone();
                let policy_tool = policy_tool.clone();
                Box::pin(async move {
                    gate.guard(&policy_tool, args, |args| async move {
                        tool.execute_with(context, args).await.map_err(Failure::Ran)
                    })
                    .await
                })
            },
        )
    }

    /// Runs `f` on the session (to inspect it, or to approve a call by hand).
    /// Do not call it from inside a gated tool: the session is locked.
    pub fn with_session<R>(&self, f: impl FnOnce(&mut Session) -> R) -> R {
        f(&mut self.lock().session)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while the lock was held leaves the session as
        // the monitor left it (its steps are atomic), so it stays usable.
        match self.inner.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn next_call(&self, tool: &str, args: Map<String, Value>) -> Call {
        let n = self.inner.next.fetch_add(1, Ordering::Relaxed);
        Call {
            session: None,
            id: format!("{}{n}", self.inner.prefix),
            time: 0,
            agent: self.inner.agent.clone(),
            tool: tool.to_string(),
            args,
            lineage: BTreeMap::new(),
            inferred: BTreeMap::new(),
        }
    }

    /// Authorizes `call` (stamping its time), and settles a PAUSE with the
    /// approval callback; the session is never locked across an await.
    /// `Ok(Ok(_))`: the tool may run (the call is held by `held`);
    /// `Ok(Err(_))`: it may not, and the error says why.
    async fn admit(
        &self,
        call: &mut Call,
        held: &mut Held<'_>,
    ) -> Result<Result<Answer, (Answer, ToolExecutionError)>, StepError> {
        let (decision, rule, reason) = {
            let mut state = self.lock();
            let now = (self.inner.clock)();
            state.last_time = state.last_time.max(now);
            call.time = state.last_time;
            let decision = state.session.authorize(&*call)?;
            let rule = decision.rule.name(state.session.policy());
            let reason = state.session.reason_text(&decision);
            (decision, rule, reason)
        };
        let verdict = decision.verdict;
        let answer = |disposition, rule: &str, reason: &str| Answer {
            disposition,
            verdict,
            rule: rule.to_string(),
            reason: reason.to_string(),
        };
        match verdict {
            Verdict::Allow => {
                held.armed = true;
                Ok(Ok(answer(Disposition::Allowed, &rule, &reason)))
            }
            Verdict::Deny => {
                let error = denial(call, "denied", &rule, &reason);
                Ok(Err((answer(Disposition::Denied, &rule, &reason), error)))
            }
            Verdict::Pause => {
                held.paused = true;
                held.armed = true;
                let paused = Paused {
                    call: call.clone(),
                    decision,
                    rule: rule.clone(),
                    reason: reason.clone(),
                };
                let approved = (self.inner.approve)(paused).await;
                let mut state = self.lock();
                if !approved {
                    held.disarm();
                    state.session.reject(&call.id)?;
                    let error = denial(call, "paused for approval and rejected", &rule, &reason);
                    return Ok(Err((answer(Disposition::Rejected, &rule, &reason), error)));
                }
                held.disarm();
                let recheck = state.session.approve(&call.id)?;
                if recheck.verdict == Verdict::Allow {
                    held.paused = false;
                    held.armed = true;
                    return Ok(Ok(answer(Disposition::Approved, &rule, &reason)));
                }
                let rule = recheck.rule.name(state.session.policy());
                let reason = state.session.reason_text(&recheck);
                let error = denial(call, "approved, then denied on re-check", &rule, &reason);
                let stop = answer(Disposition::DeniedAfterApproval, &rule, &reason);
                Ok(Err((stop, error)))
            }
        }
    }

    /// Authorizes a call of `tool` with `args`, runs `run` if it is allowed,
    /// and reports the result.
    async fn guard<F, Fut>(
        &self,
        tool: &str,
        args: Value,
        run: F,
    ) -> Result<ToolOutput, ToolExecutionError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<ToolOutput, Failure>>,
    {
        let map = match &args {
            Value::Object(map) => map.clone(),
            // rig reads `null` arguments as no arguments.
            Value::Null => Map::new(),
            other => {
                return Err(ToolExecutionError::invalid_args(format!(
                    "tool arguments must be a JSON object, not {}",
                    json_kind(other)
                )));
            }
        };
        let mut call = self.next_call(tool, map);
        let mut held = Held {
            gate: self,
            id: call.id.clone(),
            paused: false,
            armed: false,
        };
        let answer = match self.admit(&mut call, &mut held).await {
            Ok(Ok(answer)) => answer,
            Ok(Err((answer, error))) => {
                self.observe(entry(call, answer));
                return Err(error);
            }
            Err(step) => {
                // The session is unchanged by a failed step; nothing is held.
                held.disarm();
                let message = format!(
                    "agenra could not decide on `{}` (call {}): {step}",
                    call.tool, call.id
                );
                let mut e = entry(
                    call,
                    Answer {
                        disposition: Disposition::Error,
                        verdict: Verdict::Deny,
                        rule: String::new(),
                        reason: message.clone(),
                    },
                );
                e.verdict = None;
                self.observe(e);
                return Err(ToolExecutionError::other(message));
            }
        };
        let args = if args.is_null() {
            Value::Object(Map::new())
        } else {
            args
        };
        let result = run(args).await;
        let (status, output) = match &result {
            Ok(out) => (Outcome::Succeeded, output_json(out)),
            Err(Failure::NotRun(_)) => (Outcome::Failed, Value::Null),
            Err(Failure::Ran(_)) if self.inner.errors_refund => (Outcome::Failed, Value::Null),
            Err(Failure::Ran(_)) => (Outcome::Unknown, Value::Null),
        };
        held.disarm();
        let discovered = match (status, self.inner.discoverers.get(&call.tool)) {
            (Outcome::Succeeded, Some(extract)) => extract(&output),
            _ => Vec::new(),
        };
        let reported = self.lock().session.report(
            &Report::new(call.id.clone(), status)
                .output(output)
                .discovered(discovered),
        );
        let mut e = entry(call, answer);
        e.tool_ok = Some(result.is_ok());
        e.report_error = reported.err().map(|err| err.to_string());
        self.observe(e);
        result.map_err(|failure| match failure {
            Failure::NotRun(error) | Failure::Ran(error) => error,
        })
    }

    fn observe(&self, entry: Entry) {
        if let Some(observe) = &self.inner.observe {
            observe(&entry);
        }
    }
}

/// The entry for a decided call.
fn entry(call: Call, answer: Answer) -> Entry {
    Entry {
        id: call.id,
        tool: call.tool,
        args: call.args,
        disposition: answer.disposition,
        verdict: Some(answer.verdict),
        rule: answer.rule,
        reason: answer.reason,
        tool_ok: None,
        report_error: None,
    }
}

/// The tool error the model sees when a call does not run.
fn denial(call: &Call, what: &str, rule: &str, reason: &str) -> ToolExecutionError {
    ToolExecutionError::permission_denied(format!(
        "agenra {what} the call to `{}` (call {}): rule `{rule}`: {reason}",
        call.tool, call.id
    ))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A tool's output as the session sees it: its JSON, or its text as a
/// string, or (for several blocks) rig's content list.
fn output_json(out: &ToolOutput) -> Value {
    if let Some(v) = out.as_json() {
        return v.clone();
    }
    if let Some(t) = out.as_text() {
        return Value::String(t.to_string());
    }
    serde_json::to_value(out).unwrap_or(Value::Null)
}
