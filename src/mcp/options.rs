//! The flags of `agenra mcp-proxy` and their checks.

use super::*;

/// What a PAUSE does (`--on-pause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnPause {
    /// Answer at once with a tool error asking for approval; the paused
    /// call is withdrawn (its units come back).
    Error,
    /// Hold the call until it is approved or rejected through the approval
    /// endpoints (`--approvals-listen`), or times out.
    Wait,
}

/// The PAUSE flags of `agenra mcp-proxy`.
#[derive(Clone, Debug)]
pub struct PauseOptions {
    /// `--on-pause`.
    pub on_pause: OnPause,
    /// `--approvals-listen`: where the approval endpoints listen.
    pub approvals_listen: Option<String>,
    /// `--pause-timeout`: seconds a paused call waits.
    pub pause_timeout: Option<u64>,
    /// `--tokens`: the credentials file; approvers need a token of theirs.
    pub tokens: Option<PathBuf>,
    /// `--insecure-no-auth`: the approval endpoints take any request.
    pub insecure_no_auth: bool,
}

/// Other flags of `agenra mcp-proxy`.
#[derive(Clone, Debug, Default)]
pub struct ProxyOptions {
    /// `--cancel-timeout`: seconds a cancelled call's answer is waited for
    /// before the call is reported `unknown`.
    pub cancel_timeout: Option<u64>,
    /// `--show-all-tools`: `tools/list` answers are forwarded unchanged.
    pub show_all_tools: bool,
    /// `--listen`: the client speaks MCP's streamable HTTP to the proxy
    /// at `http://ADDR/mcp` instead of stdio.
    pub listen: Option<String>,
    /// `--http-token`: a file holding the bearer token `--listen` requires.
    pub http_token: Option<PathBuf>,
    /// `--upstream`: the server is reached over MCP's streamable HTTP at
    /// this URL instead of started as a child.
    pub upstream: Option<String>,
}

/// The tools a session of `policy` may ever call: declared, and named by a
/// grant (with or without approval).
pub(super) fn callable_tools(policy: &agenra_core::policy::Policy) -> HashSet<String> {
    policy
        .grants
        .iter()
        .filter_map(|g| policy.tools.get(g.tool))
        .map(|t| t.name.clone())
        .collect()
}

/// Where the proxy keeps its session: `--store`, `--tenant`, `--session`.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// `--store`: the embedded store's file or a `postgres://` URL, as for
    /// `agenra serve`; `None`: a log in memory that ends with the proxy.
    pub store: Option<PathBuf>,
    /// `--tenant`: the session's tenant.
    pub tenant: String,
    /// `--session`: the session's id, resumed when the store has it.
    pub session: String,
}

/// Wait mode, validated: where to listen, how long to wait, and who may
/// approve.
pub(super) struct WaitMode {
    pub(super) listen: String,
    pub(super) timeout: u64,
    pub(super) perimeter: Arc<agenra_gateway::Perimeter>,
}

impl PauseOptions {
    /// Checks the combination of flags: `None` for error mode.
    pub(super) fn validate(&self) -> Result<Option<WaitMode>, String> {
        match self.on_pause {
            OnPause::Error => {
                if self.approvals_listen.is_some() {
                    return Err("--approvals-listen is only used with --on-pause wait \
                                (error mode answers a PAUSE at once)"
                        .into());
                }
                if self.pause_timeout.is_some() {
                    return Err("--pause-timeout is only used with --on-pause wait \
                                (error mode answers a PAUSE at once)"
                        .into());
                }
                if self.tokens.is_some() || self.insecure_no_auth {
                    return Err(
                        "--tokens and --insecure-no-auth are only used with --on-pause wait \
                                (error mode serves no approval endpoints)"
                            .into(),
                    );
                }
                Ok(None)
            }
            OnPause::Wait => {
                let Some(listen) = self.approvals_listen.clone() else {
                    return Err("--on-pause wait needs --approvals-listen ADDR \
                                (e.g. 127.0.0.1:8080), where paused calls are approved"
                        .into());
                };
                let timeout = self.pause_timeout.unwrap_or(DEFAULT_PAUSE_TIMEOUT);
                if timeout == 0 {
                    return Err("--pause-timeout must be at least 1 second".into());
                }
                // The agent can reach a loopback port: approvals need an
                // approver's credential.
                let mut config = agenra_gateway::ServeConfig::new(
                    PathBuf::new(),
                    PathBuf::new(),
                    listen.clone(),
                );
                config.tokens = self.tokens.clone();
                config.insecure = self.insecure_no_auth;
                let perimeter = Arc::new(
                    config
                        .perimeter()
                        .map_err(|e| format!("--on-pause wait serves approvals: {e}"))?,
                );
                Ok(Some(WaitMode {
                    listen,
                    timeout,
                    perimeter,
                }))
            }
        }
    }
}
