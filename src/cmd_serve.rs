//! `agenra serve`: the HTTP decision API on the durable store
//! (`docs/http-api.md`, `docs/store.md`).

use crate::{fail, Failed};
use agenra_gateway::ServeConfig;
use std::io::Write;
use std::path::PathBuf;

/// Serves until SIGINT or SIGTERM; prints one line when it listens.
pub fn run(
    policy: PathBuf,
    store: PathBuf,
    listen: String,
    require_certified: bool,
) -> Result<(), Failed> {
    let config = ServeConfig {
        policy,
        store,
        listen,
        require_certified,
        // Revisions that change rules are certified with Z3, as `agenra
        // certify` does.
        rules: Some(&agenra_smt::rules::RuleChecker),
    };
    agenra_gateway::run(&config, |addr, gateway| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "agenra serve: listening on http://{addr} (policy {}, store {}, {} sessions recovered)",
            gateway.current_policy().hash(),
            agenra_store::redact(&config.store.display().to_string()),
            gateway.session_count()
        );
        let _ = out.flush();
    })
    .map_err(fail)
}
