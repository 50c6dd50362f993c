//! The approvals page: a human settles paused calls in a browser
//! (`docs/http-api.md`, "The approvals page").
//!
//! Served under `/desk` by `agenra serve` on the control listener (or the
//! one listener without `--control-listen`), and by `agenra mcp-proxy
//! --on-pause wait` over its [`ApprovalDesk`]. Plain server-rendered HTML
//! (every string escaped here, control and invisible characters made
//! visible), one script and one style sheet served from here, a strict
//! Content-Security-Policy, nothing loaded from elsewhere.
//!
//! How a browser authenticates: `POST /desk/login` with the approver's
//! token in a JSON body (sent by the page's script) checks it like a bearer
//! token and answers with an `HttpOnly; SameSite=Strict` cookie naming a
//! random session id; the server keeps, for that id, the token's SHA-256
//! digest (never the token) and looks the credential up again on every
//! request, so a credential revoked with SIGHUP stops working at once.
//! Every `POST` of the desk must be `application/json` and pass the
//! Origin / `Sec-Fetch-Site` checks of the perimeter (no cross-site form can
//! send one). A request with `Authorization: Bearer` is served as well (the
//! same credential, no cookie). Any credential that is not an approver's
//! gets 403 on every page and endpoint of the desk.

use crate::api::{self, ApiError};
use crate::api::{PendingCall, RecentCall};
use crate::approvals::ApprovalDesk;
use crate::auth::{Principal, Role};
use crate::perimeter::{self, Perimeter, Refusal};
use crate::reply::json;
use crate::request::{path, read_body, resolve_body};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The Content-Security-Policy of every answer of the desk.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; \
base-uri 'none'";

/// The cookie that names a browser's session of the desk.
pub const COOKIE: &str = "agenra_desk";

/// How long a browser session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// At most this many browser sessions are kept (the oldest goes first).
const MAX_SESSIONS: usize = 1024;

/// How many of a session's calls the page lists.
const RECENT: usize = 8;

/// Argument values longer than this are folded.
const FOLD: usize = 120;

const SCRIPT: &str = include_str!("page/desk.js");
const STYLE: &str = include_str!("page/desk.css");

struct Login {
    digest: String,
    until: Instant,
    since: Instant,
}

/// The desk's state: the paused calls, the perimeter, and the browser
/// sessions.
pub struct Page {
    desk: Arc<dyn ApprovalDesk>,
    perimeter: Arc<Perimeter>,
    logins: Mutex<HashMap<String, Login>>,
}

type Shared = Arc<Page>;

/// The routes of the desk (`/desk`, `/desk/desk.js`, `/desk/desk.css`,
/// `/desk/login`, `/desk/logout`, `/desk/api/approvals`,
/// `/desk/api/approvals/{call}/approve` and `/reject`), to merge into a
/// server's router. They check their own credentials (cookie or bearer).
pub fn router(desk: Arc<dyn ApprovalDesk>, perimeter: Arc<Perimeter>) -> Router {
    let page = Arc::new(Page {
        desk,
        perimeter,
        logins: Mutex::new(HashMap::new()),
    });
    Router::new()
        .route("/desk", get(index))
        .route("/desk/", get(index))
        .route("/desk/desk.js", get(script))
        .route("/desk/desk.css", get(style))
        .route("/desk/login", post(login))
        .route("/desk/logout", post(logout))
        .route("/desk/api/approvals", get(list))
        .route("/desk/api/approvals/{call}/approve", post(approve))
        .route("/desk/api/approvals/{call}/reject", post(reject))
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(page)
}

async fn secure_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn error(e: &ApiError) -> Response {
    perimeter::refusal(e.clone())
}

impl Page {
    fn refuse(&self, p: Option<&Principal>, request: &str, e: &ApiError) {
        if e.status == 401 || e.status == 403 {
            self.desk.refused(Refusal {
                actor: p.map(Principal::actor),
                tenant: None,
                request: request.to_string(),
                status: e.status,
                why: e.error.clone(),
            });
        }
    }

    /// The request's `Host` names this server, and it does not come from a
    /// page of another site.
    fn same_site(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.perimeter.host_allowed(host) {
            return Err(ApiError::field(
                403,
                "host",
                format!(
                    "Host `{host}` is not this server's (an IP address, localhost, or a name given with --allow-host)"
                ),
            ));
        }
        if let Some(why) = perimeter::cross_site(headers) {
            return Err(ApiError::field(403, "origin", why));
        }
        Ok(())
    }

    /// The browser session a cookie names, if it is live.
    fn session_digest(&self, headers: &HeaderMap) -> Option<String> {
        let sid = cookie(headers, COOKIE)?;
        let mut logins = self.logins.lock().ok()?;
        let now = Instant::now();
        logins.retain(|_, l| l.until > now);
        logins.get(&sid).map(|l| l.digest.clone())
    }

    /// Who asks: a bearer credential, or a browser session's; `None` for
    /// neither (`Err` for a bearer credential that is not known, or a
    /// session whose credential was revoked).
    fn who(&self, headers: &HeaderMap) -> Result<Option<Principal>, ApiError> {
        if self.perimeter.is_insecure() {
            return Ok(Some(Principal::insecure()));
        }
        if headers.contains_key(header::AUTHORIZATION) {
            return self.perimeter.authenticate(headers).map(Some);
        }
        match self.session_digest(headers) {
            None => Ok(None),
            Some(d) => self
                .perimeter
                .principal_of_digest(&d)
                .map(Some)
                .ok_or_else(|| {
                    ApiError::field(
                        401,
                        "authorization",
                        "the credential of this session was revoked: sign in again",
                    )
                }),
        }
    }

    /// An approver, or the refusal (recorded).
    fn approver(&self, headers: &HeaderMap, request: &str) -> Result<Principal, ApiError> {
        let run = || {
            self.same_site(headers).map_err(|e| (None, e))?;
            let p = self.who(headers).map_err(|e| (None, e))?.ok_or_else(|| {
                (
                    None,
                    ApiError::field(
                        401,
                        "authorization",
                        "not signed in: sign in at /desk with an approver's token",
                    ),
                )
            })?;
            approver_role(&p, request).map_err(|e| (Some(p.clone()), e))?;
            Ok(p)
        };
        run().map_err(|(p, e): (Option<Principal>, ApiError)| {
            self.refuse(p.as_ref(), request, &e);
            e
        })
    }

    /// For the open parts (the sign-in page, the script and the style
    /// sheet): nobody, or an approver; any other credential is refused.
    fn nobody_or_approver(
        &self,
        headers: &HeaderMap,
        request: &str,
    ) -> Result<Option<Principal>, ApiError> {
        let run = || {
            self.same_site(headers).map_err(|e| (None, e))?;
            match self.who(headers) {
                Ok(None) => Ok(None),
                // A revoked session signs in again.
                Err(e) if e.status == 401 && !headers.contains_key(header::AUTHORIZATION) => {
                    Ok(None)
                }
                Err(e) => Err((None, e)),
                Ok(Some(p)) => {
                    approver_role(&p, request).map_err(|e| (Some(p.clone()), e))?;
                    Ok(Some(p))
                }
            }
        };
        run().map_err(|(p, e): (Option<Principal>, ApiError)| {
            self.refuse(p.as_ref(), request, &e);
            e
        })
    }

    fn remember(&self, digest: String) -> Result<String, ApiError> {
        let sid = crate::auth::new_token().map_err(|e| ApiError::new(500, e.to_string()))?;
        let mut logins = self
            .logins
            .lock()
            .map_err(|_| ApiError::new(500, "sessions poisoned"))?;
        let now = Instant::now();
        logins.retain(|_, l| l.until > now);
        while logins.len() >= MAX_SESSIONS {
            let oldest = logins
                .iter()
                .min_by_key(|(_, l)| l.since)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => logins.remove(&k),
                None => break,
            };
        }
        logins.insert(
            sid.clone(),
            Login {
                digest,
                until: now + SESSION_LIFETIME,
                since: now,
            },
        );
        Ok(sid)
    }
}

fn approver_role(p: &Principal, request: &str) -> Result<(), ApiError> {
    if p.has(Role::Approver) {
        return Ok(());
    }
    let held = p.role.map_or("every role", Role::as_str);
    Err(ApiError::field(
        403,
        "authorization",
        format!(
            "credential `{}` is an {held} credential; {request} needs the approver role",
            p.name
        ),
    ))
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_string())
}

fn html_response(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn index(State(page): State<Shared>, headers: HeaderMap) -> Response {
    match page.nobody_or_approver(&headers, "GET /desk") {
        Ok(None) => html_response(200, login_page()),
        Ok(Some(p)) => html_response(200, desk_page(&p)),
        Err(e) => error(&e),
    }
}

async fn script(State(page): State<Shared>, headers: HeaderMap) -> Response {
    match page.nobody_or_approver(&headers, "GET /desk/desk.js") {
        Ok(_) => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            SCRIPT,
        )
            .into_response(),
        Err(e) => error(&e),
    }
}

async fn style(State(page): State<Shared>, headers: HeaderMap) -> Response {
    match page.nobody_or_approver(&headers, "GET /desk/desk.css") {
        Ok(_) => ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response(),
        Err(e) => error(&e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginIn {
    token: String,
}

#[derive(Serialize)]
struct LoginOut {
    approver: String,
}

/// The checks of a `POST` of the desk: JSON, this server, this site.
fn post_checks(page: &Page, headers: &HeaderMap) -> Result<(), ApiError> {
    page.same_site(headers)?;
    if !perimeter::is_json(headers) {
        return Err(ApiError::field(
            415,
            "content-type",
            "the body must be sent as application/json",
        ));
    }
    Ok(())
}

async fn login(State(page): State<Shared>, headers: HeaderMap, body: Body) -> Response {
    let request = "POST /desk/login";
    let run = async {
        post_checks(&page, &headers).map_err(|e| (None, e))?;
        let bytes = read_body(body).await.map_err(|e| (None, e))?;
        let req: LoginIn = api::parse(&bytes).map_err(|e| (None, e))?;
        let token = req.token.trim();
        let digest = crate::auth::digest(token);
        let p = page.perimeter.principal_of_digest(&digest).ok_or_else(|| {
            (
                None,
                ApiError::field(401, "token", "unknown or revoked credential"),
            )
        })?;
        approver_role(&p, request).map_err(|e| (Some(p.clone()), e))?;
        let sid = page.remember(digest).map_err(|e| (None, e))?;
        Ok::<_, (Option<Principal>, ApiError)>((p, sid))
    };
    match run.await {
        Ok((p, sid)) => {
            let mut r = json(200, &LoginOut { approver: p.name });
            let c = format!(
                "{COOKIE}={sid}; Path=/desk; HttpOnly; SameSite=Strict; Max-Age={}",
                SESSION_LIFETIME.as_secs()
            );
            if let Ok(v) = HeaderValue::from_str(&c) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err((p, e)) => {
            page.refuse(p.as_ref(), request, &e);
            error(&e)
        }
    }
}

async fn logout(State(page): State<Shared>, headers: HeaderMap) -> Response {
    let run = || {
        post_checks(&page, &headers).inspect_err(|e| page.refuse(None, "POST /desk/logout", e))?;
        page.approver(&headers, "POST /desk/logout")?;
        if let Some(sid) = cookie(&headers, COOKIE) {
            if let Ok(mut l) = page.logins.lock() {
                l.remove(&sid);
            }
        }
        Ok::<_, ApiError>(())
    };
    match run() {
        Ok(()) => {
            let mut r = json(200, &serde_json::json!({"signed_out": true}));
            let c = format!("{COOKIE}=; Path=/desk; HttpOnly; SameSite=Strict; Max-Age=0");
            if let Ok(v) = HeaderValue::from_str(&c) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(e) => error(&e),
    }
}

/// One paused call as the page's script receives it.
#[derive(Serialize)]
struct Card {
    #[serde(flatten)]
    call: PendingCall,
    /// The card, rendered (every string escaped).
    html: String,
}

#[derive(Serialize)]
struct List {
    approver: String,
    /// The server's clock (seconds), for the time left.
    now: u64,
    approvals: Vec<Card>,
}

async fn list(State(page): State<Shared>, headers: HeaderMap) -> Response {
    let run = || {
        let p = page.approver(&headers, "GET /desk/api/approvals")?;
        // A credential's tenants, each asked by name (a desk may hold
        // another tenant than the default one); every tenant otherwise.
        let calls = match &p.tenants {
            Some(ts) => {
                let mut all = Vec::new();
                for t in ts {
                    all.extend(page.desk.approvals(Some(t.clone()))?);
                }
                all
            }
            None => page.desk.approvals_where(&|_| true)?,
        };
        let now = crate::state::now_secs();
        let mut shown: Vec<(usize, Card)> = calls
            .into_iter()
            .map(|c| {
                let recent = page
                    .desk
                    .recent_calls(&c.tenant, &c.session, RECENT)
                    .unwrap_or_default();
                // Within one second, the session's order (newest first).
                let rank = recent
                    .iter()
                    .position(|r| r.call == c.call)
                    .unwrap_or(usize::MAX);
                let html = card(&c, &recent, now);
                (rank, Card { call: c, html })
            })
            .collect();
        shown.sort_by_key(|(rank, c)| (std::cmp::Reverse(c.call.time), *rank));
        let approvals = shown.into_iter().map(|(_, c)| c).collect();
        Ok::<_, ApiError>(List {
            approver: p.name,
            now,
            approvals,
        })
    };
    match run() {
        Ok(l) => json(200, &l),
        Err(e) => error(&e),
    }
}

async fn settle(
    page: Shared,
    headers: HeaderMap,
    call: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Body,
    approve: bool,
) -> Response {
    let request = if approve {
        "POST /desk/api/approvals/{call}/approve"
    } else {
        "POST /desk/api/approvals/{call}/reject"
    };
    let run = async {
        post_checks(&page, &headers).inspect_err(|e| page.refuse(None, request, e))?;
        let p = page.approver(&headers, request)?;
        let call = path(call)?;
        let mut req: api::ResolveIn = resolve_body(body).await?;
        let given = req.tenant.clone();
        req.tenant = perimeter::tenant_for(&p, req.tenant).inspect_err(|e| {
            if e.status == 403 {
                page.desk.refused(Refusal {
                    actor: Some(p.actor()),
                    tenant: given.clone(),
                    request: request.to_string(),
                    status: e.status,
                    why: e.error.clone(),
                });
            }
        })?;
        crate::approvals::settle_on(Arc::clone(&page.desk), call, req, approve, p.actor()).await
    };
    match run.await {
        Ok(out) => json(200, &out),
        Err(e) => error(&e),
    }
}

async fn approve(
    State(page): State<Shared>,
    headers: HeaderMap,
    call: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Body,
) -> Response {
    settle(page, headers, call, body, true).await
}

async fn reject(
    State(page): State<Shared>,
    headers: HeaderMap,
    call: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Body,
) -> Response {
    settle(page, headers, call, body, false).await
}

// ---------------------------------------------------------------------
// Rendering. Every string that reaches a page goes through `text`.

/// `s` with control characters and invisible or direction-changing
/// characters made visible: `⟨LF⟩`, `⟨CR⟩`, `⟨TAB⟩`, `⟨ESC⟩`, and any
/// other as `⟨U+XXXX⟩` (control pictures such as `␊` are missing from
/// common fonts).
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let u = c as u32;
        match c {
            '\n' => out.push_str("\u{27e8}LF\u{27e9}"),
            '\r' => out.push_str("\u{27e8}CR\u{27e9}"),
            '\t' => out.push_str("\u{27e8}TAB\u{27e9}"),
            '\u{1b}' => out.push_str("\u{27e8}ESC\u{27e9}"),
            '\u{0}'..='\u{1f}'
            | '\u{7f}'
            | '\u{80}'..='\u{9f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}' => {
                let _ = write!(out, "\u{27e8}U+{u:04X}\u{27e9}");
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` escaped for HTML text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` made visible, then escaped: what every page prints.
pub fn text(s: &str) -> String {
    escape(&visible(s))
}

/// An argument's value as shown: a string as itself, anything else as
/// JSON; longer than 120 characters (`FOLD`), folded (`<details>`).
pub fn value_html(v: &serde_json::Value) -> String {
    let raw = match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let n = raw.chars().count();
    if n <= FOLD {
        return format!("<code>{}</code>", text(&raw));
    }
    let head: String = raw.chars().take(FOLD).collect();
    format!(
        "<details><summary><code>{}</code>… ({n} characters: show all)</summary><pre>{}</pre></details>",
        text(&head),
        text(&raw)
    )
}

/// A data path (node names, from the source to the sink) drawn as inline
/// SVG: one box per node, arrows between; `tool` names a node's tool
/// when known. With a text version for screen readers.
pub fn path_svg(path: &[String], tool: &dyn Fn(&str) -> Option<String>) -> String {
    path_svg_with(path, tool, &text)
}

/// [`path_svg`] with every string printed through `text` (it must escape
/// for HTML: the audit report passes its own escaping).
pub fn path_svg_with(
    path: &[String],
    tool: &dyn Fn(&str) -> Option<String>,
    text: &dyn Fn(&str) -> String,
) -> String {
    if path.is_empty() {
        return "<p class=\"nopath\">No labelled data path: the grant itself asks for approval.</p>"
            .into();
    }
    const W: usize = 150;
    const GAP: usize = 40;
    const H: usize = 54;
    let width = path.len() * W + (path.len() - 1) * GAP + 2;
    let words: Vec<String> = path
        .iter()
        .map(|n| match tool(n) {
            Some(t) => format!("{n} ({t})"),
            None => n.clone(),
        })
        .collect();
    let mut out = format!(
        "<svg class=\"path\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" \
viewBox=\"0 0 {width} {}\" role=\"img\" aria-label=\"{}\">",
        H + 2,
        H + 2,
        text(&format!("data path: {}", words.join(" → ")))
    );
    let short = |s: &str| -> String {
        let n = s.chars().count();
        if n > 18 {
            let head: String = s.chars().take(17).collect();
            format!("{head}…")
        } else {
            s.to_string()
        }
    };
    for (i, node) in path.iter().enumerate() {
        let x = 1 + i * (W + GAP);
        let role = if i == 0 {
            "source"
        } else if i + 1 == path.len() {
            "this call"
        } else {
            "via"
        };
        let class = if i == 0 {
            "src"
        } else if i + 1 == path.len() {
            "sink"
        } else {
            "mid"
        };
        let _ = write!(
            out,
            "<g class=\"{class}\"><title>{}</title><rect x=\"{x}\" y=\"1\" width=\"{W}\" height=\"{H}\" rx=\"6\"/>\
<text x=\"{}\" y=\"18\" class=\"role\">{role}</text>\
<text x=\"{}\" y=\"34\">{}</text>\
<text x=\"{}\" y=\"48\" class=\"tool\">{}</text></g>",
            text(&words[i]),
            x + 8,
            x + 8,
            text(&short(node)),
            x + 8,
            text(&short(&tool(node).unwrap_or_default())),
        );
        if i + 1 < path.len() {
            let x0 = x + W;
            let x1 = x0 + GAP;
            let y = 1 + H / 2;
            let _ = write!(
                out,
                "<path class=\"edge\" d=\"M{x0} {y} L{} {y}\"/><path class=\"head\" d=\"M{} {} L{x1} {y} L{} {} Z\"/>",
                x1 - 2,
                x1 - 8,
                y - 5,
                x1 - 8,
                y + 5
            );
        }
    }
    out.push_str("</svg>");
    let _ = write!(
        out,
        "<p class=\"pathtext\">{}</p>",
        text(&words.join(" → "))
    );
    out
}

fn minutes(secs: u64) -> String {
    format!("{}:{:02}", secs / 60, secs % 60)
}

/// A short, HTML-id-safe name for a card (from its digest).
fn card_id(c: &PendingCall) -> String {
    let hex: String = c
        .digest
        .trim_start_matches("sha256:")
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(16)
        .collect();
    format!("c-{hex}")
}

/// One paused call, rendered: what it is, why it paused, the data that
/// flowed into it, the session's recent calls, the time left, and the
/// form that approves or rejects it (bound to its digest).
pub fn card(c: &PendingCall, recent: &[RecentCall], now: u64) -> String {
    let id = card_id(c);
    let tool = c.tool.as_deref().unwrap_or("(unknown tool)");
    let mut out = format!(
        "<article class=\"call\" id=\"{id}\" data-digest=\"{}\" data-call=\"{}\" data-tenant=\"{}\" \
data-session=\"{}\" aria-labelledby=\"{id}-h\">",
        text(&c.digest),
        text(&c.call),
        text(&c.tenant),
        text(&c.session)
    );
    let _ = write!(
        out,
        "<h2 id=\"{id}-h\"><span class=\"tool\">{}</span> <span class=\"meta\">call {} · session {} · tenant {}</span></h2>",
        text(tool),
        text(&c.call),
        text(&c.session),
        text(&c.tenant)
    );
    let _ = write!(
        out,
        "<p class=\"why\"><span class=\"label\">Paused by</span> <code>{}</code>: {}</p>",
        text(c.rule.as_deref().unwrap_or("(no rule)")),
        text(&c.reason)
    );
    let left = c.expires.saturating_sub(now);
    let _ = write!(
        out,
        "<p class=\"left\">Time left: <span class=\"count\" data-expires=\"{}\">{}</span></p>",
        c.expires,
        minutes(left)
    );
    out.push_str("<h3>Arguments</h3><dl class=\"args\">");
    match &c.args {
        serde_json::Value::Object(m) if !m.is_empty() => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", text(k), value_html(&m[k]));
            }
        }
        serde_json::Value::Object(_) => out.push_str("<dt>(none)</dt><dd></dd>"),
        other => {
            let _ = write!(out, "<dt>(value)</dt><dd>{}</dd>", value_html(other));
        }
    }
    out.push_str("</dl><h3>Data that flowed into it</h3>");
    let tools: HashMap<&str, &str> = recent
        .iter()
        .filter_map(|r| Some((r.call.as_str(), r.tool.as_deref()?)))
        .collect();
    let lookup = |n: &str| -> Option<String> {
        if n == c.call {
            return Some(tool.to_string());
        }
        tools.get(n).map(|t| t.to_string())
    };
    out.push_str(&path_svg(&c.path, &lookup));
    out.push_str("<h3>The session's recent calls</h3>");
    if recent.is_empty() {
        out.push_str("<p class=\"recent none\">(none known)</p>");
    } else {
        out.push_str("<ol class=\"recent\">");
        for r in recent {
            let status = r
                .status
                .and_then(|s| serde_json::to_value(s).ok())
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = write!(
                out,
                "<li><code>{}</code> {} <span class=\"decision\">{}</span> <span class=\"status\">{}</span></li>",
                text(&r.call),
                text(r.tool.as_deref().unwrap_or("?")),
                text(r.decision.unwrap_or("")),
                text(&status)
            );
        }
        out.push_str("</ol>");
    }
    let _ = write!(
        out,
        "<form class=\"decide\" action=\"/desk\" method=\"post\" data-for=\"{id}\">\
<label for=\"{id}-reason\">Reason (required to approve)</label>\
<textarea id=\"{id}-reason\" name=\"reason\" rows=\"2\" maxlength=\"1000\"></textarea>\
<div class=\"buttons\"><button type=\"submit\" name=\"act\" value=\"approve\" class=\"approve\">Approve</button> \
<button type=\"submit\" name=\"act\" value=\"reject\" class=\"reject\">Reject</button></div></form>\
<p class=\"answer\" role=\"status\" aria-live=\"polite\" tabindex=\"-1\"></p>\
<p class=\"digest\">Digest of what is shown: <code>{}</code></p></article>",
        text(&c.digest)
    );
    out
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><link rel=\"stylesheet\" href=\"/desk/desk.css\">\
<script src=\"/desk/desk.js\" defer></script></head>",
        text(title)
    )
}

fn login_page() -> String {
    head("Agenra approvals: sign in")
        + "<body class=\"login\"><main><h1>Agenra approvals</h1>\
<form id=\"login\" action=\"/desk\" method=\"post\">\
<label for=\"token\">Approver token</label>\
<input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\" required autofocus>\
<button type=\"submit\">Sign in</button></form>\
<p id=\"login-error\" role=\"alert\"></p>\
<p class=\"hint\">The token is sent once; the browser keeps only a session cookie.</p>\
</main></body></html>"
}

fn desk_page(p: &Principal) -> String {
    let tenants = match &p.tenants {
        None => "every tenant".to_string(),
        Some(ts) => ts.join(", "),
    };
    head("Agenra approvals")
        + &format!(
            "<body class=\"desk\"><header><h1>Paused calls</h1>\
<p>Signed in as <strong>{}</strong>, approver for {}.</p>\
<form id=\"logout\" action=\"/desk\" method=\"post\"><button type=\"submit\">Sign out</button></form></header>\
<p id=\"status\" role=\"status\" aria-live=\"polite\">Loading…</p>\
<main id=\"list\" aria-label=\"Paused calls, newest first\"></main></body></html>",
            text(&p.name),
            text(&tenants)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_printed_is_escaped_and_visible() {
        assert_eq!(
            text("<script>\"a\"&'b'</script>"),
            "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;&lt;/script&gt;"
        );
        assert_eq!(visible("a\nb\u{1b}[31m\u{7f}"), "a⟨LF⟩b⟨ESC⟩[31m⟨U+007F⟩");
        assert_eq!(visible("x\u{202e}y"), "x\u{27e8}U+202E\u{27e9}y");
        let long = "z".repeat(FOLD + 5);
        let v = value_html(&serde_json::Value::String(long));
        assert!(v.starts_with("<details>"), "{v}");
        assert!(v.contains("125 characters"));
        let c = PendingCall {
            tenant: "acme".into(),
            session: "s<1>".into(),
            call: "c\"1".into(),
            tool: Some("pay.send".into()),
            rule: Some("big".into()),
            reason: "needs <b>approval</b>".into(),
            time: 10,
            args: serde_json::json!({"to": "<img src=x onerror=alert(1)>\n"}),
            policy_hash: "h".into(),
            digest: "sha256:00ff".into(),
            expires: 70,
            path: vec!["r1".into(), "c\"1".into()],
        };
        let html = card(&c, &[], 10);
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;⟨LF⟩"));
        assert!(html.contains("1:00"));
        assert!(html.contains("<svg"));
        assert!(html.contains("data-call=\"c&quot;1\""));
    }

    #[test]
    fn cookies_are_read_by_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; agenra_desk=xyz; b=2"),
        );
        assert_eq!(cookie(&h, COOKIE).as_deref(), Some("xyz"));
        assert_eq!(cookie(&h, "nope"), None);
    }
}
