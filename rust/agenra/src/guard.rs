//! Guarding tool functions: the tool runs only when its call is allowed,
//! its result goes back to the session, and a PAUSE goes to an approval
//! callback.
//!
//! ```
//! use agenra::{compile, Guard, Guarded, TypedCall};
//! let compiled = compile(r#"
//!     tool email.send(to: string) { resource to; }
//!     grant mail: email.send on glob "*@example.com" quota 1;
//! "#, "doc").unwrap();
//! let policy = compiled.policy;
//! let send = policy.tool("email.send").unwrap();
//! let to = policy.param(send, "to").unwrap();
//! let mut session = policy.session();
//!
//! let call = TypedCall::new(send, "c1", 1).arg(to, "alice@example.com");
//! let out = Guard::new(&mut session, call).run(|| Ok::<_, String>("sent")).unwrap();
//! assert!(matches!(out, Guarded::Ran(Ok("sent"))));
//!
//! // The quota is spent: the second send never runs.
//! let call = TypedCall::new(send, "c2", 2).arg(to, "bob@example.com");
//! let out = Guard::new(&mut session, call).run(|| -> Result<&str, String> { unreachable!() }).unwrap();
//! assert!(matches!(out, Guarded::Denied(_)));
//! ```

use agenra_core::decision::{Decision, StepError, Verdict};
use agenra_core::event::{Outcome, Report};
use agenra_core::{CallArg, Session};
use serde::Serialize;
use std::future::Future;

/// What became of a guarded tool call.
#[derive(Debug)]
pub enum Guarded<T, E> {
    /// Allowed (or approved) and run: the tool's own result.
    Ran(Result<T, E>),
    /// Denied (by the monitor, or by the re-check when a human approved):
    /// the tool did not run.
    Denied(Decision),
    /// Paused, and the approval callback said no: the tool did not run.
    Rejected(Decision),
}

/// The approval callback: the paused decision and the session; true approves.
type Approver<'a> = Box<dyn FnOnce(&Decision, &Session) -> bool + 'a>;

/// Runs one tool call under a session's monitor.
pub struct Guard<'s, 'c> {
    session: &'s mut Session,
    call: CallArg<'c>,
    approve: Approver<'s>,
    errors_refund: bool,
}

impl<'s, 'c> Guard<'s, 'c> {
    /// Guards `call` (a [`agenra_core::TypedCall`] or a JSON
    /// [`agenra_core::Call`]). A PAUSE is rejected unless
    /// [`Guard::on_pause`] says otherwise.
    pub fn new(session: &'s mut Session, call: impl Into<CallArg<'c>>) -> Guard<'s, 'c> {
        Guard {
            session,
            call: call.into(),
            approve: Box::new(|_, _| false),
            errors_refund: false,
        }
    }

    /// The approval callback: asked on a PAUSE with the decision and the
    /// session (`session.reason_text(d)` renders why), true to approve. An
    /// approved call is re-checked.
    pub fn on_pause(mut self, approve: impl FnOnce(&Decision, &Session) -> bool + 's) -> Self {
        self.approve = Box::new(approve);
        self
    }

    /// Reports a tool error as a failed call (no effect: its units come
    /// back). By default an error is an unknown outcome: the units stay
    /// spent, since a tool that failed half-way may have acted.
    pub fn errors_refund(mut self) -> Self {
        self.errors_refund = true;
        self
    }

    /// Runs `tool` if the call is allowed, and reports its result.
    pub fn run<T: Serialize, E>(
        self,
        tool: impl FnOnce() -> Result<T, E>,
    ) -> Result<Guarded<T, E>, StepError> {
        let session = &mut *self.session;
        let ticket = match Self::decide(session, self.call, self.approve, self.errors_refund)? {
            Admitted::Go(ticket) => ticket,
            Admitted::Denied(d) => return Ok(Guarded::Denied(d)),
            Admitted::Rejected(d) => return Ok(Guarded::Rejected(d)),
        };
        let result = tool();
        ticket.finish(session, &result)?;
        Ok(Guarded::Ran(result))
    }

    /// [`Guard::run`] for an `async` tool; works with any executor. The
    /// session stays borrowed while the tool runs: with a session shared
    /// between tasks, use [`Guard::admit`] and [`Ticket::finish`] instead.
    pub async fn run_async<T: Serialize, E, F: Future<Output = Result<T, E>>>(
        self,
        tool: impl FnOnce() -> F,
    ) -> Result<Guarded<T, E>, StepError> {
        let session = &mut *self.session;
        let ticket = match Self::decide(session, self.call, self.approve, self.errors_refund)? {
            Admitted::Go(ticket) => ticket,
            Admitted::Denied(d) => return Ok(Guarded::Denied(d)),
            Admitted::Rejected(d) => return Ok(Guarded::Rejected(d)),
        };
        let result = tool().await;
        ticket.finish(session, &result)?;
        Ok(Guarded::Ran(result))
    }

    /// The first half of a guarded call, for sessions shared between tasks:
    /// decides the call (asking the approval callback on a PAUSE) and
    /// releases the session. Run the tool on [`Admitted::Go`], then report
    /// with [`Ticket::finish`] (a ticket dropped unfinished leaves the call
    /// running: report it, or its units stay held).
    pub fn admit(self) -> Result<Admitted, StepError> {
        Self::decide(self.session, self.call, self.approve, self.errors_refund)
    }

    fn decide(
        session: &mut Session,
        call: CallArg<'_>,
        approve: Approver<'_>,
        errors_refund: bool,
    ) -> Result<Admitted, StepError> {
        let id = call.id().to_string();
        let decision = session.authorize(call)?;
        let go = |id| {
            Ok(Admitted::Go(Ticket {
                call: id,
                errors_refund,
            }))
        };
        match decision.verdict {
            Verdict::Allow => go(id),
            Verdict::Deny => Ok(Admitted::Denied(decision)),
            Verdict::Pause => {
                if !approve(&decision, session) {
                    session.reject(&id)?;
                    return Ok(Admitted::Rejected(decision));
                }
                let approved = session.approve(&id)?;
                if approved.verdict == Verdict::Allow {
                    go(id)
                } else {
                    Ok(Admitted::Denied(approved))
                }
            }
        }
    }
}

/// What [`Guard::admit`] decided.
#[derive(Debug)]
pub enum Admitted {
    /// Allowed (or approved and re-checked): run the tool, then finish the
    /// ticket.
    Go(Ticket),
    /// Denied: do not run the tool.
    Denied(Decision),
    /// Paused and rejected: do not run the tool.
    Rejected(Decision),
}

/// An admitted call whose result is still to be reported.
#[derive(Debug)]
#[must_use = "report the tool's result with `finish`, or the call stays running"]
pub struct Ticket {
    call: String,
    errors_refund: bool,
}

impl Ticket {
    /// The call's id.
    pub fn call(&self) -> &str {
        &self.call
    }

    /// Reports the tool's result to the session that admitted the call.
    pub fn finish<T: Serialize, E>(
        self,
        session: &mut Session,
        result: &Result<T, E>,
    ) -> Result<(), StepError> {
        report(session, self.call, result, self.errors_refund)
    }
}

/// Reports a tool's result: its output (for `fact ... when output...` and
/// provenance by value), or an error as failed or unknown.
fn report<T: Serialize, E>(
    session: &mut Session,
    call: String,
    result: &Result<T, E>,
    errors_refund: bool,
) -> Result<(), StepError> {
    let (status, output) = match result {
        Ok(v) => (
            Outcome::Succeeded,
            serde_json::to_value(v).unwrap_or(serde_json::Value::Null),
        ),
        Err(_) if errors_refund => (Outcome::Failed, serde_json::Value::Null),
        Err(_) => (Outcome::Unknown, serde_json::Value::Null),
    };
    session.report(&Report {
        session: None,
        call,
        time: None,
        status,
        output,
        discovered: Vec::new(),
    })?;
    Ok(())
}
