//! The perimeter in front of the routes: who is asking (a bearer
//! credential, [`crate::auth`]), whether their role may use the route, and
//! whether the request comes from a browser page of another site.
//!
//! Every refusal is a 401 or 403 (415 for a control request that is not
//! JSON) with a JSON error, and an audit record ([`RefusalSink`]).

use crate::api::ApiError;
use crate::auth::{Credentials, Principal, Role};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// How requests are authenticated.
pub enum Access {
    /// Bearer tokens from a credentials file (`--tokens FILE`); re-read on
    /// [`Perimeter::reload`].
    Tokens {
        /// The file.
        path: PathBuf,
        /// Its credentials, as last read.
        credentials: RwLock<Arc<Credentials>>,
    },
    /// `--insecure-no-auth`: every request acts with every role, for every
    /// tenant. For local experiments only; never the default.
    Insecure,
}

/// Who may reach the routes (see the module documentation).
pub struct Perimeter {
    /// How requests are authenticated.
    pub access: Access,
    /// Host names (lowercase, without port) that control requests may
    /// name in `Host`, besides IP literals and `localhost`
    /// (`--allow-host`): a guard against DNS rebinding.
    pub hosts: Vec<String>,
}

/// A request the perimeter refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `role:name` of the credential, when it was known.
    pub actor: Option<String>,
    /// The tenant the request named, when it did.
    pub tenant: Option<String>,
    /// `METHOD /path`.
    pub request: String,
    /// The answer's status (401, 403, 415).
    pub status: u16,
    /// Why.
    pub why: String,
}

/// Where a refusal is recorded.
pub trait RefusalSink: Send + Sync + 'static {
    /// Records a refusal.
    fn refused(&self, r: Refusal);

    /// Counts an error answer the perimeter sent itself (for `/metrics`).
    fn answered(&self, _status: u16) {}
}

impl RefusalSink for crate::Gateway {
    fn answered(&self, status: u16) {
        self.metrics.error(status);
    }

    fn refused(&self, r: Refusal) {
        self.record_refusal(r);
    }
}

/// What a route asks of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Anyone (`/health`, and the 404/405 answers).
    Open,
    /// One of these roles; `control` routes (approvals, policy, metrics)
    /// also refuse a foreign `Host` and, for `POST`, a body that is not
    /// `application/json`.
    Roles {
        /// The roles that may call it.
        roles: &'static [Role],
        /// A control route.
        control: bool,
    },
}

/// What the routes of a server need: [`need`] for `agenra serve`,
/// [`need_approvals`] for the approval endpoints alone.
pub type Needs = fn(&Method, &str) -> Need;

/// The routes of the approval endpoints alone (`agenra mcp-proxy
/// --on-pause wait`): the approver's; every other path is open (a 404).
pub fn need_approvals(method: &Method, path: &str) -> Need {
    match need(method, path) {
        n @ Need::Roles { roles, .. } if roles == [Role::Approver] => n,
        _ => Need::Open,
    }
}

/// The routes of the agent's listener alone (`--control-listen` given):
/// the control routes are not served there (a 404 for anyone).
pub fn need_agent(method: &Method, path: &str) -> Need {
    match need(method, path) {
        Need::Roles { control: true, .. } => Need::Open,
        n => n,
    }
}

/// The routes of the control listener alone (`--control-listen`): the
/// agent's routes are not served there, but the session view is.
pub fn need_control(method: &Method, path: &str) -> Need {
    match need(method, path) {
        Need::Roles { roles, .. } if roles == [Role::Agent] => Need::Open,
        n => n,
    }
}

/// The role a route needs (`docs/http-api.md`, "Who may call what").
pub fn need(method: &Method, path: &str) -> Need {
    const AGENT: &[Role] = &[Role::Agent];
    const APPROVER: &[Role] = &[Role::Approver];
    const ADMIN: &[Role] = &[Role::Admin];
    const ANY: &[Role] = &[Role::Agent, Role::Approver, Role::Admin];
    const AGENT_OR_ADMIN: &[Role] = &[Role::Agent, Role::Admin];
    let roles = |roles, control| Need::Roles { roles, control };
    match path {
        "/health" => Need::Open,
        "/metrics" => roles(ADMIN, true),
        "/v1/policy" => roles(ADMIN, true),
        "/v1/approvals" => roles(APPROVER, true),
        p if p.starts_with("/v1/approvals/") => roles(APPROVER, true),
        "/v1/sessions" | "/v1/authorize" | "/v1/report" | "/v1/tasks" => roles(AGENT, false),
        p if p.starts_with("/v1/sessions/") && method == Method::GET => roles(ANY, false),
        // Closing a session: the agent of its tenant, or an admin.
        p if p.starts_with("/v1/sessions/") && method == Method::DELETE => {
            roles(AGENT_OR_ADMIN, false)
        }
        _ => Need::Open,
    }
}

impl Perimeter {
    /// A perimeter that reads credentials from `path`.
    pub fn tokens(path: PathBuf, hosts: Vec<String>) -> Result<Perimeter, crate::auth::AuthError> {
        let credentials = Credentials::load(&path)?;
        if credentials.tokens.is_empty() {
            return Err(crate::auth::AuthError::Invalid(format!(
                "{}: no credentials (add one with `agenra token add`)",
                path.display()
            )));
        }
        Ok(Perimeter {
            access: Access::Tokens {
                path,
                credentials: RwLock::new(Arc::new(credentials)),
            },
            hosts: lowercase(hosts),
        })
    }

    /// `--insecure-no-auth`.
    pub fn insecure(hosts: Vec<String>) -> Perimeter {
        Perimeter {
            access: Access::Insecure,
            hosts: lowercase(hosts),
        }
    }

    /// Re-reads the credentials file (SIGHUP): revoked tokens stop
    /// working, new ones start. On error the old credentials stay.
    pub fn reload(&self) -> Result<usize, crate::auth::AuthError> {
        match &self.access {
            Access::Insecure => Ok(0),
            Access::Tokens { path, credentials } => {
                let fresh = Credentials::load(path)?;
                let n = fresh.tokens.len();
                if let Ok(mut c) = credentials.write() {
                    *c = Arc::new(fresh);
                }
                Ok(n)
            }
        }
    }

    /// Whether it runs without credentials.
    pub fn is_insecure(&self) -> bool {
        matches!(self.access, Access::Insecure)
    }

    /// The principal a request's `Authorization` header names.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        let credentials = match &self.access {
            Access::Insecure => return Ok(Principal::insecure()),
            Access::Tokens { credentials, .. } => credentials
                .read()
                .map(|c| Arc::clone(&c))
                .map_err(|_| ApiError::new(500, "credentials poisoned"))?,
        };
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| {
                ApiError::field(
                    401,
                    "authorization",
                    "no credential: send `Authorization: Bearer TOKEN`",
                )
            })?
            .to_str()
            .map_err(|_| {
                ApiError::field(401, "authorization", "unreadable Authorization header")
            })?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or_else(|| {
                ApiError::field(
                    401,
                    "authorization",
                    "the Authorization header must be `Bearer TOKEN`",
                )
            })?;
        credentials
            .authenticate(token)
            .ok_or_else(|| ApiError::field(401, "authorization", "unknown or revoked credential"))
    }

    /// The principal of the credential whose token has SHA-256 `digest`
    /// (a browser session of the approvals page keeps the digest, never
    /// the token), as the credentials are now: `None` once it is revoked.
    pub(crate) fn principal_of_digest(&self, digest: &str) -> Option<Principal> {
        let credentials = match &self.access {
            Access::Insecure => return Some(Principal::insecure()),
            Access::Tokens { credentials, .. } => {
                credentials.read().ok().map(|c| Arc::clone(&c))?
            }
        };
        let mut found = None;
        for c in &credentials.tokens {
            let stored = c.sha256.to_ascii_lowercase();
            let same = stored.len() == digest.len()
                && stored
                    .bytes()
                    .zip(digest.bytes())
                    .fold(0u8, |acc, (x, y)| acc | (x ^ y))
                    == 0;
            if same {
                found = Some(c);
            }
        }
        found.map(|c| {
            let all = c.role == Role::Admin || c.tenants.iter().any(|t| t == "*");
            Principal {
                name: c.name.clone(),
                role: Some(c.role),
                tenants: (!all).then(|| c.tenants.clone()),
            }
        })
    }

    /// Whether `host` (a `Host` header: a name or IP literal, and a port)
    /// names this server: an IP literal, `localhost`, or an allowed name.
    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        let name = if let Some(rest) = host.strip_prefix('[') {
            // [v6]:port
            return rest
                .split_once(']')
                .is_some_and(|(ip, _)| ip.parse::<std::net::Ipv6Addr>().is_ok());
        } else {
            host.rsplit_once(':').map_or(host, |(n, _)| n)
        };
        let name = name.to_ascii_lowercase();
        name.parse::<std::net::Ipv4Addr>().is_ok()
            || name == "localhost"
            || self.hosts.contains(&name)
    }
}

fn lowercase(hosts: Vec<String>) -> Vec<String> {
    hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect()
}

/// Refuses a request a browser sent from a page of another site: an
/// `Origin` that is not this server's own (`http(s)://` + its `Host`), or
/// `Sec-Fetch-Site: cross-site`/`same-site`.
pub(crate) fn cross_site(headers: &HeaderMap) -> Option<String> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("?").to_ascii_lowercase();
        let own = [format!("http://{host}"), format!("https://{host}")];
        if host.is_empty() || !own.iter().any(|o| o.eq_ignore_ascii_case(&origin)) {
            return Some(format!(
                "a request from another site (Origin `{origin}`, Host `{host}`)"
            ));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("?");
        if site != "same-origin" && site != "none" {
            return Some(format!(
                "a request from another site (Sec-Fetch-Site `{site}`)"
            ));
        }
    }
    None
}

/// Whether a body is declared JSON (`application/json`, any parameters).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// The checks of one request; the principal it acts as (none for an open
/// route: its handler needs none, and one that asked for it would fail).
fn admit(
    perimeter: &Perimeter,
    needs: Needs,
    req: &Request,
) -> Result<Option<Principal>, (Option<Principal>, ApiError)> {
    let headers = req.headers();
    let need = needs(req.method(), req.uri().path());
    if let Some(why) = cross_site(headers) {
        return Err((None, ApiError::field(403, "origin", why)));
    }
    let Need::Roles { roles, control } = need else {
        return Ok(None);
    };
    if control {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !perimeter.host_allowed(host) {
            return Err((
                None,
                ApiError::field(
                    403,
                    "host",
                    format!(
                        "Host `{host}` is not this server's (an IP address, localhost, or a name given with --allow-host)"
                    ),
                ),
            ));
        }
        if req.method() == Method::POST && !is_json(headers) {
            return Err((
                None,
                ApiError::field(
                    415,
                    "content-type",
                    "the body must be sent as application/json",
                ),
            ));
        }
    }
    let principal = perimeter.authenticate(headers).map_err(|e| (None, e))?;
    if !roles.iter().any(|r| principal.has(*r)) {
        let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
        let held = principal.role.map_or("every role", |r| r.as_str());
        let e = ApiError::field(
            403,
            "authorization",
            format!(
                "credential `{}` is an {held} credential; {} {} needs the {} role",
                principal.name,
                req.method(),
                req.uri().path(),
                names.join(" or ")
            ),
        );
        return Err((Some(principal), e));
    }
    Ok(Some(principal))
}

/// The middleware: admits the request (the principal goes into its
/// extensions for the handlers), or answers the refusal and records it.
pub async fn guard(
    State((perimeter, sink, needs)): State<(Arc<Perimeter>, Arc<dyn RefusalSink>, Needs)>,
    mut req: Request,
    next: Next,
) -> Response {
    match admit(&perimeter, needs, &req) {
        Ok(principal) => {
            if let Some(p) = principal {
                req.extensions_mut().insert(p);
            }
            next.run(req).await
        }
        Err((principal, e)) => {
            let request = format!("{} {}", req.method(), req.uri().path());
            sink.refused(Refusal {
                actor: principal.map(|p| p.actor()),
                tenant: None,
                request,
                status: e.status,
                why: e.error.clone(),
            });
            sink.answered(e.status);
            refusal(e)
        }
    }
}

/// The JSON answer to a refusal (401s say how to authenticate).
pub fn refusal(e: ApiError) -> Response {
    let mut r = crate::reply::json(e.status, &e);
    if e.status == 401 {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    r
}

/// Checks again, in the handler, that `p` holds one of `roles` (the guard
/// already did: this keeps a route the guard misclassified from running
/// with the wrong role).
pub fn holds(p: &Principal, roles: &[Role]) -> Result<(), ApiError> {
    if roles.iter().any(|r| p.has(*r)) {
        Ok(())
    } else {
        Err(ApiError::field(
            403,
            "authorization",
            format!(
                "credential `{}` does not hold the role this route needs",
                p.name
            ),
        ))
    }
}

/// The tenant a request acts for: the one its body or query names, which
/// the credential must serve (else 403); when it names none, the
/// credential's only tenant (an agent's), or `None` (the default tenant)
/// for a credential of every tenant.
pub fn tenant_for(p: &Principal, given: Option<String>) -> Result<Option<String>, ApiError> {
    match (&p.tenants, given) {
        (None, given) => Ok(given),
        (Some(ts), Some(g)) if ts.contains(&g) => Ok(Some(g)),
        (Some(ts), Some(g)) => Err(ApiError::field(
            403,
            "tenant",
            format!(
                "credential `{}` acts for tenant(s) {}, not `{g}`",
                p.name,
                ts.join(", ")
            ),
        )),
        (Some(ts), None) => match ts.as_slice() {
            [one] => Ok(Some(one.clone())),
            _ => Err(ApiError::field(
                422,
                "tenant",
                format!(
                    "credential `{}` acts for several tenants ({}): name the tenant",
                    p.name,
                    ts.join(", ")
                ),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_their_roles() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(need(&get, "/health"), Need::Open);
        let roles = |m: &Method, p: &str| match need(m, p) {
            Need::Roles { roles, control } => (roles.to_vec(), control),
            Need::Open => (vec![], false),
        };
        assert_eq!(roles(&post, "/v1/policy"), (vec![Role::Admin], true));
        assert_eq!(roles(&get, "/metrics"), (vec![Role::Admin], true));
        assert_eq!(roles(&get, "/v1/approvals"), (vec![Role::Approver], true));
        assert_eq!(
            roles(&post, "/v1/approvals/c1/approve"),
            (vec![Role::Approver], true)
        );
        assert_eq!(roles(&post, "/v1/authorize"), (vec![Role::Agent], false));
        assert_eq!(roles(&post, "/v1/sessions"), (vec![Role::Agent], false));
        assert_eq!(roles(&get, "/v1/sessions/s").0.len(), 3);
        assert_eq!(
            roles(&Method::DELETE, "/v1/sessions/s"),
            (vec![Role::Agent, Role::Admin], false)
        );
        assert_eq!(need(&get, "/nowhere"), Need::Open);
    }

    #[test]
    fn hosts_and_origins() {
        let p = Perimeter::insecure(vec!["Agenra.internal".into()]);
        assert!(p.host_allowed("127.0.0.1:8080"));
        assert!(p.host_allowed("localhost:8080"));
        assert!(p.host_allowed("[::1]:8080"));
        assert!(p.host_allowed("agenra.internal:80"));
        assert!(!p.host_allowed("evil.example:8080"));
        assert!(!p.host_allowed("127.0.0.1.evil.example"));
        assert!(!p.host_allowed(""));
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        assert!(cross_site(&h).is_none());
        h.insert(header::ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
        assert!(cross_site(&h).is_none());
        h.insert(header::ORIGIN, "http://127.0.0.1:9999".parse().unwrap());
        assert!(cross_site(&h).is_some());
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(cross_site(&h).is_some());
        h.remove(header::ORIGIN);
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(cross_site(&h).is_some());
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        assert!(cross_site(&h).is_none());
        let mut j = HeaderMap::new();
        assert!(!is_json(&j));
        j.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!is_json(&j));
        j.insert(
            header::CONTENT_TYPE,
            "Application/JSON; charset=utf-8".parse().unwrap(),
        );
        assert!(is_json(&j));
    }

    #[test]
    fn tenants_come_from_the_credential() {
        let agent = Principal {
            name: "bot".into(),
            role: Some(Role::Agent),
            tenants: Some(vec!["acme".into()]),
        };
        assert_eq!(tenant_for(&agent, None).unwrap().as_deref(), Some("acme"));
        assert_eq!(
            tenant_for(&agent, Some("acme".into())).unwrap().as_deref(),
            Some("acme")
        );
        assert_eq!(
            tenant_for(&agent, Some("beta".into())).unwrap_err().status,
            403
        );
        let two = Principal {
            tenants: Some(vec!["a".into(), "b".into()]),
            ..agent.clone()
        };
        assert_eq!(tenant_for(&two, None).unwrap_err().status, 422);
        assert_eq!(tenant_for(&Principal::insecure(), None).unwrap(), None);
        assert_eq!(
            tenant_for(&Principal::insecure(), Some("x".into()))
                .unwrap()
                .as_deref(),
            Some("x")
        );
    }
}
