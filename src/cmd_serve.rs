//! `agenra serve`: the HTTP decision API on the durable store
//! (`docs/http-api.md`, `docs/store.md`).

use crate::{fail, Failed};
use agenra_gateway::{Limits, ServeConfig};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// `agenra serve`'s limits on connections (docs/http-api.md, "Connections").
#[derive(Clone, Debug, clap::Args)]
pub struct LimitArgs {
    /// Connections served at once; more are answered 503 and closed. Keep it
    /// below the open-file limit (`ulimit -n`).
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// Connections served at once from one client IP address.
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections_per_ip: u64,
    /// Seconds to receive a request's head, counted from when the server waits for it (also how
    /// long an idle keep-alive connection stays open).
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = seconds)]
    header_timeout: Duration,
    /// Seconds to receive a request's body after its head; a late body gets 408.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = seconds)]
    body_timeout: Duration,
    /// Seconds an answer may wait for the client to read it before the connection is closed.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = seconds)]
    idle_timeout: Duration,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            max_connections_per_ip: usize::try_from(self.max_connections_per_ip)
                .unwrap_or(usize::MAX),
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            idle_timeout: self.idle_timeout,
        }
    }
}

/// Seconds (a decimal number, over 0 and at most a day).
fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v > 0.0 && v <= 86_400.0) {
        return Err(format!("`{s}`: must be over 0 and at most 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Serves until SIGINT or SIGTERM; prints one line when it listens.
pub fn run(
    policy: PathBuf,
    store: PathBuf,
    listen: String,
    require_certified: bool,
    limits: LimitArgs,
) -> Result<(), Failed> {
    let config = ServeConfig {
        policy,
        store,
        listen,
        require_certified,
        // Revisions that change rules are certified with Z3, as `agenra
        // certify` does.
        rules: Some(&agenra_smt::rules::RuleChecker),
        limits: limits.limits(),
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
