//! A rig tool behind a [`Gate`].

use super::*;

/// A rig [`Tool`] behind a [`Gate`]: the same name, description and
/// schema; each call is authorized before the inner tool runs.
pub struct Gated<T> {
    pub(super) inner: T,
    pub(super) gate: Gate,
    pub(super) policy_tool: String,
}

impl<T> Gated<T> {
    /// The policy's name for this tool, when it differs from the rig name
    /// (policies name tools like `email.send`; model providers often allow
    /// only letters, digits, `_` and `-`).
    pub fn policy_tool(mut self, name: impl Into<String>) -> Self {
        self.policy_tool = name.into();
        self
    }

    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The gate this tool goes through.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }
}

impl<T: fmt::Debug> fmt::Debug for Gated<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gated")
            .field("inner", &self.inner)
            .field("policy_tool", &self.policy_tool)
            .finish_non_exhaustive()
    }
}

impl<T: Tool> Tool for Gated<T> {
    const NAME: &'static str = T::NAME;
    /// The raw arguments: the monitor reads them as JSON before the inner
    /// tool decodes them.
    type Args = Value;
    type Output = ToolOutput;
    type Error = ToolExecutionError;

    fn description(&self) -> String {
        self.inner.description()
    }

    fn parameters(&self) -> Value {
        self.inner.parameters()
    }

    fn map_error(&self, error: ToolExecutionError) -> ToolExecutionError {
        error
    }

    async fn call(
        &self,
        context: &mut ToolContext,
        args: Value,
    ) -> Result<ToolOutput, ToolExecutionError> {
        let inner = &self.inner;
        self.gate
            .guard(&self.policy_tool, args, |args| async move {
                let args: T::Args = serde_json::from_value(args).map_err(|e| {
                    Failure::NotRun(ToolExecutionError::invalid_args(format!(
                        "failed to parse tool arguments: {e}"
                    )))
                })?;
                match inner.call(context, args).await {
                    Ok(output) => output.into_tool_output().map_err(Failure::Ran),
                    Err(error) => Err(Failure::Ran(inner.map_error(error))),
                }
            })
            .await
    }
}
