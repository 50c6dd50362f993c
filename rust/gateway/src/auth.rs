//! Credentials and roles (`docs/http-api.md`, "Who may call what").
//!
//! Three roles, each with its own bearer token: the *agent* (sessions,
//! calls, results, tasks of the one tenant its credential names), the
//! *approver* (settles paused calls of the tenants it names), the *admin*
//! (policy revisions, metrics). An agent can never approve its own pause or
//! change the policy, wherever it runs.
//!
//! Tokens are kept as SHA-256 digests in a JSON file the operator manages
//! (`agenra token add`); the server never stores a token itself. A token is
//! 32 random bytes, so its digest cannot be inverted, and a presented
//! token's digest is compared with every stored one in constant time.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// What a credential may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Opens sessions and sends calls, results and tasks for its tenant.
    Agent,
    /// Lists and settles the paused calls of its tenants.
    Approver,
    /// Runs policy revisions; reads metrics.
    Admin,
}

impl Role {
    /// `agent`, `approver` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Approver => "approver",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = AuthError;
    fn from_str(s: &str) -> Result<Role, AuthError> {
        match s {
            "agent" => Ok(Role::Agent),
            "approver" => Ok(Role::Approver),
            "admin" => Ok(Role::Admin),
            other => Err(AuthError::Invalid(format!(
                "unknown role `{other}`: expected agent, approver or admin"
            ))),
        }
    }
}

/// Who made a request: a credential's name, its role and its tenants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The credential's name (recorded in the audit log as the actor).
    pub name: String,
    /// `None`: every role (only under `--insecure-no-auth`).
    pub role: Option<Role>,
    /// The tenants it acts for; `None`: every tenant (an admin, an
    /// approver for `*`, or `--insecure-no-auth`).
    pub tenants: Option<Vec<String>>,
}

impl Principal {
    /// The principal of `--insecure-no-auth`: every role, every tenant.
    pub fn insecure() -> Principal {
        Principal {
            name: "insecure-no-auth".into(),
            role: None,
            tenants: None,
        }
    }

    /// Whether it holds `role`.
    pub fn has(&self, role: Role) -> bool {
        self.role.is_none_or(|r| r == role)
    }

    /// Whether it may act for `tenant`.
    pub fn serves(&self, tenant: &str) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|ts| ts.iter().any(|t| t == tenant))
    }

    /// The actor as the audit log names it: `role:name`.
    pub fn actor(&self) -> String {
        match self.role {
            Some(r) => format!("{}:{}", r.as_str(), self.name),
            None => self.name.clone(),
        }
    }
}

/// One stored credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// Unique in the file; the actor's name in the audit log.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The tenants it acts for: exactly one for an agent; one or more, or
    /// `*` for all, for an approver; none for an admin.
    #[serde(default)]
    pub tenants: Vec<String>,
    /// The token's SHA-256 digest, in lowercase hex.
    pub sha256: String,
}

/// The credentials file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// The file's format version (1).
    pub version: u32,
    /// The credentials, in the order they were added.
    pub tokens: Vec<Credential>,
}

/// A credentials file that cannot be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Reading or writing the file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a credentials file.
    #[error("{path}: not a credentials file: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line and column.
        message: String,
    },
    /// A credential that breaks a rule (names the credential and the rule).
    #[error("{0}")]
    Invalid(String),
}

const VERSION: u32 = 1;

/// A 32-byte random token, `agr_` and 64 hex digits.
pub fn new_token() -> Result<String, AuthError> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|source| AuthError::Io {
            path: PathBuf::from("/dev/urandom"),
            source,
        })?;
    Ok(format!("agr_{}", hex(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest stored for `token`.
pub fn digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Equal bytes, in time that depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn check_tenant(name: &str, tenant: &str) -> Result<(), AuthError> {
    crate::api::check_name("tenant", tenant)
        .map_err(|e| AuthError::Invalid(format!("credential `{name}`: {}", e.error)))
}

impl Credential {
    /// Checks the rules of its role.
    pub fn validate(&self) -> Result<(), AuthError> {
        let name = &self.name;
        crate::api::check_name("name", name)
            .map_err(|e| AuthError::Invalid(format!("credential name: {}", e.error)))?;
        let ok_digest =
            self.sha256.len() == 64 && self.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !ok_digest {
            return Err(AuthError::Invalid(format!(
                "credential `{name}`: sha256 must be 64 hex digits"
            )));
        }
        match self.role {
            Role::Agent => match self.tenants.as_slice() {
                [t] if t != "*" => check_tenant(name, t),
                _ => Err(AuthError::Invalid(format!(
                    "credential `{name}`: an agent acts for exactly one tenant (its credential fixes it)"
                ))),
            },
            Role::Approver => {
                if self.tenants.is_empty() {
                    return Err(AuthError::Invalid(format!(
                        "credential `{name}`: an approver needs one or more tenants (or `*`)"
                    )));
                }
                if self.tenants.len() > 1 && self.tenants.iter().any(|t| t == "*") {
                    return Err(AuthError::Invalid(format!(
                        "credential `{name}`: `*` stands alone"
                    )));
                }
                self.tenants
                    .iter()
                    .filter(|t| *t != "*")
                    .try_for_each(|t| check_tenant(name, t))
            }
            Role::Admin if !self.tenants.is_empty() => Err(AuthError::Invalid(format!(
                "credential `{name}`: an admin names no tenant"
            ))),
            Role::Admin => Ok(()),
        }
    }

    fn principal(&self) -> Principal {
        let all = self.role == Role::Admin || self.tenants.iter().any(|t| t == "*");
        Principal {
            name: self.name.clone(),
            role: Some(self.role),
            tenants: (!all).then(|| self.tenants.clone()),
        }
    }
}

impl Credentials {
    /// Reads and checks a credentials file.
    pub fn load(path: &Path) -> Result<Credentials, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let creds: Credentials = serde_json::from_str(&text).map_err(|e| AuthError::Format {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if creds.version != VERSION {
            return Err(AuthError::Format {
                path: path.to_path_buf(),
                message: format!("version {} (this build reads {VERSION})", creds.version),
            });
        }
        creds.validate()?;
        Ok(creds)
    }

    /// Reads the file, or an empty set when it does not exist (for `add`).
    pub fn load_or_empty(path: &Path) -> Result<Credentials, AuthError> {
        if path.exists() {
            Credentials::load(path)
        } else {
            Ok(Credentials {
                version: VERSION,
                tokens: Vec::new(),
            })
        }
    }

    fn validate(&self) -> Result<(), AuthError> {
        let mut names = std::collections::HashSet::new();
        for c in &self.tokens {
            c.validate()?;
            if !names.insert(&c.name) {
                return Err(AuthError::Invalid(format!(
                    "credential `{}` appears twice",
                    c.name
                )));
            }
        }
        Ok(())
    }

    /// Writes the file (owner-only permissions), replacing it atomically.
    pub fn save(&self, path: &Path) -> Result<(), AuthError> {
        self.validate()?;
        let io = |source| AuthError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut text = serde_json::to_string_pretty(self).map_err(|e| AuthError::Format {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        text.push('\n');
        let tmp = path.with_extension("tmp");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&tmp).map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Adds a credential for a new random token, which is returned (it is
    /// shown once and never stored).
    pub fn add(
        &mut self,
        name: &str,
        role: Role,
        tenants: Vec<String>,
    ) -> Result<String, AuthError> {
        if self.tokens.iter().any(|c| c.name == name) {
            return Err(AuthError::Invalid(format!(
                "credential `{name}` exists already (remove it first to replace its token)"
            )));
        }
        let token = new_token()?;
        let credential = Credential {
            name: name.to_string(),
            role,
            tenants,
            sha256: digest(&token),
        };
        credential.validate()?;
        self.tokens.push(credential);
        Ok(token)
    }

    /// Removes the credential `name`; false when there is none.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.tokens.len();
        self.tokens.retain(|c| c.name != name);
        self.tokens.len() != before
    }

    /// The principal whose token is `token`, if any. Every stored digest is
    /// compared, each in constant time.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        let presented = digest(token);
        let mut found = None;
        for c in &self.tokens {
            if constant_time_eq(
                presented.as_bytes(),
                c.sha256.to_ascii_lowercase().as_bytes(),
            ) {
                found = Some(c);
            }
        }
        found.map(Credential::principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> (Credentials, String, String, String) {
        let mut c = Credentials {
            version: VERSION,
            tokens: vec![],
        };
        let a = c.add("bot", Role::Agent, vec!["acme".into()]).unwrap();
        let p = c
            .add("alice", Role::Approver, vec!["acme".into(), "beta".into()])
            .unwrap();
        let o = c.add("ops", Role::Admin, vec![]).unwrap();
        (c, a, p, o)
    }

    #[test]
    fn tokens_find_their_principal_and_nothing_else() {
        let (c, a, p, o) = creds();
        let agent = c.authenticate(&a).unwrap();
        assert_eq!(agent.actor(), "agent:bot");
        assert!(agent.has(Role::Agent) && !agent.has(Role::Approver) && !agent.has(Role::Admin));
        assert!(agent.serves("acme") && !agent.serves("beta"));
        let approver = c.authenticate(&p).unwrap();
        assert!(approver.has(Role::Approver) && !approver.has(Role::Agent));
        assert!(approver.serves("beta") && !approver.serves("other"));
        let admin = c.authenticate(&o).unwrap();
        assert!(admin.has(Role::Admin) && !admin.has(Role::Approver) && admin.serves("any"));
        assert!(c.authenticate("agr_0").is_none());
        assert!(c.authenticate(&a[..a.len() - 1]).is_none());
        assert!(c.authenticate("").is_none());
        assert_ne!(a, p);
        assert!(a.starts_with("agr_") && a.len() == 68);
    }

    #[test]
    fn the_file_holds_digests_only_and_round_trips() {
        let (c, a, _, _) = creds();
        let dir = std::env::temp_dir().join(format!("agenra-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.json");
        c.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&a[4..]), "the token itself is never stored");
        assert!(text.contains(&digest(&a)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let back = Credentials::load(&path).unwrap();
        assert_eq!(back, c);
        assert!(back.authenticate(&a).is_some());
        std::fs::write(&path, "{\"version\":1,\"tokens\":[{\"name\":\"x\"}]}").unwrap();
        let e = Credentials::load(&path).unwrap_err().to_string();
        assert!(e.contains("missing field `role`"), "{e}");
        std::fs::write(&path, "{\"version\":2,\"tokens\":[]}").unwrap();
        assert!(Credentials::load(&path)
            .unwrap_err()
            .to_string()
            .contains("version 2"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn roles_name_their_tenants() {
        let mut c = Credentials::default();
        let e = c.add("bot", Role::Agent, vec![]).unwrap_err().to_string();
        assert!(e.contains("exactly one tenant"), "{e}");
        assert!(c.add("bot", Role::Agent, vec!["*".into()]).is_err());
        assert!(c
            .add("bot", Role::Agent, vec!["a".into(), "b".into()])
            .is_err());
        assert!(c.add("bot", Role::Agent, vec!["a/b".into()]).is_err());
        assert!(c.add("p", Role::Approver, vec![]).is_err());
        assert!(c
            .add("p", Role::Approver, vec!["*".into(), "a".into()])
            .is_err());
        assert!(c.add("o", Role::Admin, vec!["a".into()]).is_err());
        assert!(c.add("bad name", Role::Admin, vec![]).is_err());
        let t = c.add("p", Role::Approver, vec!["*".into()]).unwrap();
        assert!(c.authenticate(&t).unwrap().serves("anything"));
        assert!(c
            .add("p", Role::Admin, vec![])
            .unwrap_err()
            .to_string()
            .contains("exists"));
        assert!(c.remove("p") && !c.remove("p"));
        assert!(c.authenticate(&t).is_none());
        assert!(constant_time_eq(b"ab", b"ab"));
        assert!(!constant_time_eq(b"ab", b"ac") && !constant_time_eq(b"ab", b"abc"));
    }
}
