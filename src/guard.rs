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

/// Runs one tool call under a session's monitor.
pub struct Guard<'s, 'c> {
    session: &'s mut Session,
    call: CallArg<'c>,
    approve: Box<dyn FnOnce(&Decision) -> bool + 's>,
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
            approve: Box::new(|_| false),
            errors_refund: false,
        }
    }

    /// The approval callback: asked on a PAUSE (it sees the decision and
    /// its reason), true to approve. An approved call is re-checked.
    pub fn on_pause(mut self, approve: impl FnOnce(&Decision) -> bool + 's) -> Self {
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
        let (session, id, refund) = match self.admit()? {
            Admission::Go(session, id, refund) => (session, id, refund),
            Admission::Stop(out) => return Ok(out.into()),
        };
        let result = tool();
        report(session, id, &result, refund)?;
        Ok(Guarded::Ran(result))
    }

    /// [`Guard::run`] for an `async` tool; works with any executor.
    pub async fn run_async<T: Serialize, E, F: Future<Output = Result<T, E>>>(
        self,
        tool: impl FnOnce() -> F,
    ) -> Result<Guarded<T, E>, StepError> {
        let (session, id, refund) = match self.admit()? {
            Admission::Go(session, id, refund) => (session, id, refund),
            Admission::Stop(out) => return Ok(out.into()),
        };
        let result = tool().await;
        report(session, id, &result, refund)?;
        Ok(Guarded::Ran(result))
    }

    /// Authorizes the call, asking the approval callback on a PAUSE.
    fn admit(self) -> Result<Admission<'s>, StepError> {
        let id = self.call.id().to_string();
        let session = self.session;
        let decision = session.authorize(self.call)?;
        match decision.verdict {
            Verdict::Allow => Ok(Admission::Go(session, id, self.errors_refund)),
            Verdict::Deny => Ok(Admission::Stop(Stopped::Denied(decision))),
            Verdict::Pause => {
                if !(self.approve)(&decision) {
                    session.reject(&id)?;
                    return Ok(Admission::Stop(Stopped::Rejected(decision)));
                }
                let approved = session.approve(&id)?;
                if approved.verdict == Verdict::Allow {
                    Ok(Admission::Go(session, id, self.errors_refund))
                } else {
                    Ok(Admission::Stop(Stopped::Denied(approved)))
                }
            }
        }
    }
}

enum Admission<'s> {
    Go(&'s mut Session, String, bool),
    Stop(Stopped),
}

enum Stopped {
    Denied(Decision),
    Rejected(Decision),
}

impl<T, E> From<Stopped> for Guarded<T, E> {
    fn from(s: Stopped) -> Self {
        match s {
            Stopped::Denied(d) => Guarded::Denied(d),
            Stopped::Rejected(d) => Guarded::Rejected(d),
        }
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
