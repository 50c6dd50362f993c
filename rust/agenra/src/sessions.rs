//! Several sessions under one policy: each has its own graph and ledger.
//! Events name their session (`"session": "s1"`); events without one belong
//! to the default session, which always exists. A named session starts
//! with its first call or task. The sessions of one trace are one
//! tenant's: quotas shared by the tenant (`quota N per tenant`) are spent
//! from one pool by all of them.

use agenra_core::{Event, Monitor, MonitorError, Policy, StepError, StepOutput};
use std::collections::BTreeMap;

/// Why an event could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// A result or an approval names a session that never started.
    #[error("unknown session `{0}` (a session starts with its first call or task)")]
    UnknownSession(String),
    /// The session refused the event (see [`StepError`]).
    #[error(transparent)]
    Step(#[from] StepError),
}

/// The sessions of one policy, keyed by the events' `session` field.
#[derive(Debug, Clone)]
pub struct Sessions {
    default: Monitor,
    named: BTreeMap<String, Monitor>,
}

impl Sessions {
    /// Compiles `policy` and opens its default session; every session
    /// shares one tenant pool.
    pub fn new(policy: Policy) -> Result<Sessions, MonitorError> {
        let pool = agenra_core::SessionOptions::default().pool(agenra_core::TenantPool::new());
        Ok(Sessions {
            default: agenra_core::CompiledPolicy::new(policy)?.session_with(pool),
            named: BTreeMap::new(),
        })
    }

    /// The session's monitor (`None`: the default session).
    pub fn get(&self, session: Option<&str>) -> Option<&Monitor> {
        match session {
            None => Some(&self.default),
            Some(s) => self.named.get(s),
        }
    }

    /// Applies one event to its session.
    pub fn step(&mut self, event: &Event) -> Result<StepOutput, SessionError> {
        let monitor = match event.session() {
            None => &mut self.default,
            Some(name) => {
                if !self.named.contains_key(name) {
                    if !matches!(event, Event::Call(_) | Event::Task(_)) {
                        return Err(SessionError::UnknownSession(name.to_string()));
                    }
                    self.named
                        .insert(name.to_string(), self.default.new_session());
                }
                self.named
                    .get_mut(name)
                    .ok_or_else(|| SessionError::UnknownSession(name.to_string()))?
            }
        };
        Ok(monitor.step(event)?)
    }

    /// The policy every session runs under.
    pub fn policy(&self) -> &Policy {
        self.default.policy()
    }
}
