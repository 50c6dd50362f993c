//! Building a [`Gate`]: its session, how call ids and times are made, and
//! the approval and observation callbacks.

use super::*;

/// Builds a [`Gate`]: the session, and how ids, times and approvals are made.
pub struct GateBuilder {
    pub(super) session: Session,
    pub(super) clock: Clock,
    pub(super) approve: Approver,
    pub(super) observe: Option<Observer>,
    pub(super) prefix: String,
    pub(super) agent: Option<String>,
    pub(super) errors_refund: bool,
    pub(super) discoverers: BTreeMap<String, Discoverer>,
}

impl GateBuilder {
    /// The clock calls are stamped with, in seconds (the default reads the
    /// system clock). A reading earlier than the last one is raised to it,
    /// since the monitor refuses time that goes backwards.
    pub fn clock(mut self, clock: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// The approval callback, asked on a PAUSE: true approves. Without one,
    /// every PAUSE is rejected. It runs on the task that made the call, so
    /// a callback that waits for a person should be
    /// [`GateBuilder::on_pause_async`].
    pub fn on_pause(self, approve: impl Fn(&Paused) -> bool + Send + Sync + 'static) -> Self {
        self.on_pause_async(move |paused| {
            let answer = approve(&paused);
            Box::pin(std::future::ready(answer))
        })
    }

    /// An asynchronous approval callback (a chat message to a reviewer, a
    /// ticket): the session is not locked while it runs, so other calls go on.
    pub fn on_pause_async(
        mut self,
        approve: impl Fn(Paused) -> BoxFuture<bool> + Send + Sync + 'static,
    ) -> Self {
        self.approve = Box::new(approve);
        self
    }

    /// Called with every decided call (for logs, metrics or tests).
    pub fn on_entry(mut self, observe: impl Fn(&Entry) + Send + Sync + 'static) -> Self {
        self.observe = Some(Box::new(observe));
        self
    }

    /// The prefix of generated call ids (default `rig-`): ids are the
    /// prefix and a counter from 1. Use distinct prefixes if other code
    /// authorizes calls in the same session.
    pub fn id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The calling agent, for policies with several agents (default: the
    /// policy's `main`).
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Reports a tool error as a failed call (no effect: its units come
    /// back). By default an error is an unknown outcome: the units stay
    /// spent, since a tool that failed half-way may have acted.
    pub fn errors_refund(mut self) -> Self {
        self.errors_refund = true;
        self
    }

    /// What a successful call of the policy's tool `policy_tool`
    /// discovered, read from its output (e.g. the addresses a contact search
    /// returned): reported with the result, so a grant with `discovers SET`
    /// adds them to the set. Without it a result discovers nothing.
    pub fn discovers(
        mut self,
        policy_tool: impl Into<String>,
        extract: impl Fn(&Value) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.discoverers
            .insert(policy_tool.into(), Box::new(extract));
        self
    }

    /// The gate. Clones share its session.
    pub fn build(self) -> Gate {
        Gate {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    session: self.session,
                    last_time: 0,
                }),
                next: AtomicU64::new(1),
                clock: self.clock,
                approve: self.approve,
                observe: self.observe,
                prefix: self.prefix,
                agent: self.agent,
                errors_refund: self.errors_refund,
                discoverers: self.discoverers,
            }),
        }
    }
}

impl fmt::Debug for GateBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateBuilder")
            .field("prefix", &self.prefix)
            .field("agent", &self.agent)
            .field("errors_refund", &self.errors_refund)
            .finish_non_exhaustive()
    }
}
