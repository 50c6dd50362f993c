//! `agenra token`: the credentials file of `agenra serve --tokens` and
//! `agenra mcp-proxy --tokens` (`docs/http-api.md`, "Who may call what").

use crate::{fail, Failed};
use agenra_gateway::auth::{Credentials, Role};
use std::path::PathBuf;

/// `agenra token …`.
#[derive(clap::Subcommand, Debug)]
pub enum TokenCmd {
    /// Adds a credential and prints its token once (only its SHA-256 digest is kept).
    Add {
        /// The credentials file (created, owner-only, if missing).
        #[arg(long)]
        file: PathBuf,
        /// agent (one tenant), approver (tenants, or `*`), or admin (no tenant).
        #[arg(long, value_enum)]
        role: RoleArg,
        /// A tenant the credential acts for (repeatable).
        #[arg(long = "tenant", value_name = "TENANT")]
        tenants: Vec<String>,
        /// The credential's name: the actor in the audit log.
        name: String,
    },
    /// Lists the credentials (names, roles, tenants; never tokens).
    List {
        /// The credentials file.
        #[arg(long)]
        file: PathBuf,
    },
    /// Removes a credential: its token stops working (a running server: after SIGHUP).
    Remove {
        /// The credentials file.
        #[arg(long)]
        file: PathBuf,
        /// The credential's name.
        name: String,
    },
}

/// A role, as the command line names it.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum RoleArg {
    /// Sessions, calls, results and tasks of one tenant.
    Agent,
    /// Settles paused calls of its tenants.
    Approver,
    /// Policy revisions and metrics.
    Admin,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Role {
        match r {
            RoleArg::Agent => Role::Agent,
            RoleArg::Approver => Role::Approver,
            RoleArg::Admin => Role::Admin,
        }
    }
}

/// Writes `line` to standard output (an error, never a panic, if it is
/// closed).
fn say(line: &str) -> Result<(), Failed> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| fail(format!("cannot write to standard output: {e}")))
}

pub fn run(cmd: TokenCmd) -> Result<(), Failed> {
    match cmd {
        TokenCmd::Add {
            file,
            role,
            tenants,
            name,
        } => {
            let role = Role::from(role);
            let mut creds = Credentials::load_or_empty(&file).map_err(fail)?;
            let token = creds.add(&name, role, tenants).map_err(fail)?;
            creds.save(&file).map_err(fail)?;
            say(&token)?;
            eprintln!(
                "agenra token: added {} credential `{name}` to {} (the token above is shown once)",
                role.as_str(),
                file.display()
            );
            Ok(())
        }
        TokenCmd::List { file } => {
            let creds = Credentials::load(&file).map_err(fail)?;
            for c in &creds.tokens {
                say(&format!(
                    "{}\t{}\t{}",
                    c.name,
                    c.role.as_str(),
                    c.tenants.join(",")
                ))?;
            }
            Ok(())
        }
        TokenCmd::Remove { file, name } => {
            let mut creds = Credentials::load(&file).map_err(fail)?;
            if !creds.remove(&name) {
                return Err(fail(format!("{}: no credential `{name}`", file.display())));
            }
            creds.save(&file).map_err(fail)?;
            eprintln!("agenra token: removed `{name}` (a running server drops it on SIGHUP)");
            Ok(())
        }
    }
}
