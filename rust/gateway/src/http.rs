//! The HTTP routes (axum). Every answer is JSON except `GET /metrics`;
//! every error is `{"error": …, "field": …}` with a 4xx (the request) or
//! 5xx (the server) status.

use crate::api::{self, ApiError, Outcome};
use crate::auth::{Principal, Role};
use crate::perimeter::{self, Perimeter, RefusalSink};
use crate::state::{Gateway, Pending};
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

pub use crate::api::Health;
pub use crate::request::MAX_BODY;

/// Which routes a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routes {
    /// Every route (one listener).
    All,
    /// The agent's routes (sessions, calls, results, tasks) and `/health`.
    Agent,
    /// The approver's and admin's routes (approvals, policy, metrics), the
    /// session view and `/health` (`--control-listen`).
    Control,
}

/// The API's routes over `gateway`, behind `perimeter` (every route but
/// `/health` needs a credential of the right role; `docs/http-api.md`).
pub fn router(gateway: Arc<Gateway>, perimeter: Arc<Perimeter>, routes: Routes) -> Router {
    let agent = routes != Routes::Control;
    let control = routes != Routes::Agent;
    let mut r = Router::new().route("/health", get(health)).route(
        "/v1/sessions/{session}",
        get(get_session).delete(close_session),
    );
    if agent {
        r = r
            .route("/v1/sessions", post(create_session))
            .route("/v1/authorize", post(authorize))
            .route("/v1/report", post(report))
            .route("/v1/tasks", post(task));
    }
    if control {
        r = r
            .route("/metrics", get(metrics))
            .route("/v1/approvals", get(approvals))
            .route("/v1/approvals/{call}/approve", post(approve))
            .route("/v1/approvals/{call}/reject", post(reject))
            .route("/v1/policy", post(reload));
    }
    let sink: Arc<dyn RefusalSink> = Arc::clone(&gateway) as Arc<dyn RefusalSink>;
    let needs: perimeter::Needs = match routes {
        Routes::All => perimeter::need,
        Routes::Agent => perimeter::need_agent,
        Routes::Control => perimeter::need_control,
    };
    let page = control.then(|| {
        let desk = Arc::new(crate::desk::GatewayDesk(Arc::clone(&gateway)));
        crate::page::router(desk, Arc::clone(&perimeter))
    });
    let r = r
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            (perimeter, sink, needs),
            perimeter::guard,
        ))
        .with_state(gateway);
    // The approvals page checks its own credentials (a cookie or a bearer
    // token; `page.rs`), on the control listener only.
    match page {
        Some(p) => r.merge(p),
        None => r,
    }
}

use crate::reply::json;
use crate::request::{expired, path, query, read_body, resolve_body, scoped, TenantQuery};

fn error(gw: &Gateway, e: ApiError) -> Response {
    gw.metrics.error(e.status);
    json(e.status, &e)
}

/// `GET /health` of `agenra serve`: [`Health`], and the webhook's state
/// when `--notify-url` is given (failing deliveries show here, never as a
/// 503: notifications decide nothing).
#[derive(Serialize)]
struct ServeHealth {
    #[serde(flatten)]
    health: Health,
    #[serde(skip_serializing_if = "Option::is_none")]
    notify: Option<crate::notify::NotifyHealth>,
}

async fn health(State(gw): State<Arc<Gateway>>) -> Response {
    let status = if gw.is_failed() { "failed" } else { "ok" };
    let h = ServeHealth {
        health: Health {
            status,
            policy_hash: gw.current_policy().hash().to_string(),
            sessions: gw.session_count(),
            pending_approvals: gw.pending_count(),
        },
        notify: gw.notifier().map(|n| n.health()),
    };
    json(if gw.is_failed() { 503 } else { 200 }, &h)
}

async fn metrics(State(gw): State<Arc<Gateway>>, Extension(p): Extension<Principal>) -> Response {
    if let Err(e) = perimeter::holds(&p, &[Role::Admin]) {
        return error(&gw, e);
    }
    let stats = gw.store_stats();
    let mut extra: Vec<(&str, &str, f64)> = Vec::new();
    if let Some(n) = gw.notifier() {
        use std::sync::atomic::Ordering::Relaxed;
        let s = n.stats();
        extra = vec![
            (
                "agenra_notify_sent",
                "Webhook notifications delivered (--notify-url).",
                s.sent.load(Relaxed) as f64,
            ),
            (
                "agenra_notify_failures",
                "Webhook delivery attempts that failed.",
                s.failures.load(Relaxed) as f64,
            ),
            (
                "agenra_notify_dropped",
                "Webhook notifications given up or dropped.",
                s.dropped.load(Relaxed) as f64,
            ),
            (
                "agenra_notify_queued",
                "Webhook notifications waiting to be delivered.",
                s.queued.load(Relaxed) as f64,
            ),
            (
                "agenra_notify_failing",
                "1 while the last webhook delivery attempt failed.",
                if s.failing.load(Relaxed) { 1.0 } else { 0.0 },
            ),
        ];
    }
    let evict = gw.eviction_stats();
    let mut gauges = vec![
        (
            "agenra_sessions",
            "Open sessions held in memory (evicted ones are not counted).",
            gw.session_count() as f64,
        ),
        (
            "agenra_sessions_evicted",
            "Open sessions evicted from memory (--evict-idle), reloaded on their next request.",
            evict.evicted as f64,
        ),
        (
            "agenra_session_evictions",
            "Sessions evicted since start.",
            evict.evictions as f64,
        ),
        (
            "agenra_session_reloads",
            "Evicted sessions reloaded from the store since start.",
            evict.reloads as f64,
        ),
        (
            "agenra_session_index_bytes",
            "Heap bytes of the index of each session's record numbers (for reloads).",
            evict.index_bytes as f64,
        ),
        (
            "agenra_pending_approvals",
            "Calls paused for a human.",
            gw.pending_count() as f64,
        ),
        (
            "agenra_store_commits",
            "Store transactions since start (one fsync each).",
            stats.commits as f64,
        ),
        (
            "agenra_store_records",
            "Audit records written since start.",
            stats.records as f64,
        ),
        (
            "agenra_store_caught_up",
            "Records other replicas appended that this one applied (PostgreSQL store).",
            stats.caught_up as f64,
        ),
    ];
    gauges.extend(extra);
    let text = gw.metrics.render(&gauges);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn not_found(State(gw): State<Arc<Gateway>>, uri: axum::http::Uri) -> Response {
    error(
        &gw,
        ApiError::field(404, "path", format!("no such endpoint: {}", uri.path())),
    )
}

async fn method_not_allowed(
    State(gw): State<Arc<Gateway>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> Response {
    error(
        &gw,
        ApiError::field(
            405,
            "method",
            format!("{method} is not allowed on {}", uri.path()),
        ),
    )
}

/// Sends an event's answer once it is durable, counting it.
async fn answer(gw: &Gateway, start: Instant, pending: Pending<Outcome>) -> Response {
    match pending.durable().await {
        Ok((mut out, seq)) => {
            out.audit_seq = seq;
            gw.metrics
                .observe(out.decision, out.replayed, start.elapsed());
            json(200, &out)
        }
        Err(e) => error(gw, e),
    }
}

async fn create_session(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    body: Body,
) -> Response {
    let run = async {
        let bytes = read_body(body).await?;
        let req: api::NewSession = if bytes.iter().all(u8::is_ascii_whitespace) {
            api::NewSession {
                tenant: None,
                session: None,
                agent: None,
            }
        } else {
            api::parse(&bytes)?
        };
        let tenant = scoped(&*gw, &p, &[Role::Agent], "POST /v1/sessions", req.tenant)?;
        gw.create_session(tenant, req.session, req.agent)?
            .durable()
            .await
    };
    match run.await {
        Ok((view, _)) => json(if view.created { 201 } else { 200 }, &view),
        Err(e) => error(&gw, e),
    }
}

async fn get_session(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    session: Result<Path<String>, PathRejection>,
    q: Result<Query<TenantQuery>, QueryRejection>,
) -> Response {
    let run = || -> Result<_, ApiError> {
        let session = path(session)?;
        let tenant = scoped(
            &*gw,
            &p,
            &[Role::Agent, Role::Approver, Role::Admin],
            "GET /v1/sessions",
            query(q)?.tenant,
        )?;
        gw.session_view_current(tenant, &session)
    };
    match run() {
        Ok(pending) => match pending.durable().await {
            Ok((v, _)) => json(200, &v),
            Err(e) => error(&gw, e),
        },
        Err(e) => error(&gw, e),
    }
}

/// `DELETE /v1/sessions/{id}?tenant=T`: the agent of the tenant, or an
/// admin, closes the session (an audit record `closed`; its units stay
/// spent; later requests naming it are 409).
async fn close_session(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    session: Result<Path<String>, PathRejection>,
    q: Result<Query<TenantQuery>, QueryRejection>,
) -> Response {
    let run = async {
        let session = path(session)?;
        let tenant = scoped(
            &*gw,
            &p,
            &[Role::Agent, Role::Admin],
            "DELETE /v1/sessions",
            query(q)?.tenant,
        )?;
        gw.close_session(tenant, &session, p.actor())?
            .durable()
            .await
    };
    match run.await {
        Ok((mut view, seq)) => {
            view.audit_seq = seq;
            json(200, &view)
        }
        Err(e) => error(&gw, e),
    }
}

async fn authorize(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    body: Body,
) -> Response {
    let start = Instant::now();
    let pending = async {
        let bytes = read_body(body).await?;
        let mut req: api::Authorize = api::parse(&bytes)?;
        req.tenant = scoped(&*gw, &p, &[Role::Agent], "POST /v1/authorize", req.tenant)?;
        gw.authorize(req)
    };
    match pending.await {
        Ok(p) => answer(&gw, start, p).await,
        Err(e) => error(&gw, e),
    }
}

async fn report(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    body: Body,
) -> Response {
    let start = Instant::now();
    let pending = async {
        let bytes = read_body(body).await?;
        let mut req: api::ReportIn = api::parse(&bytes)?;
        req.tenant = scoped(&*gw, &p, &[Role::Agent], "POST /v1/report", req.tenant)?;
        gw.report(req)
    };
    match pending.await {
        Ok(p) => answer(&gw, start, p).await,
        Err(e) => error(&gw, e),
    }
}

async fn task(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    body: Body,
) -> Response {
    let start = Instant::now();
    let pending = async {
        let bytes = read_body(body).await?;
        let mut req: api::TaskIn = api::parse(&bytes)?;
        req.tenant = scoped(&*gw, &p, &[Role::Agent], "POST /v1/tasks", req.tenant)?;
        gw.task(req)
    };
    match pending.await {
        Ok(p) => answer(&gw, start, p).await,
        Err(e) => error(&gw, e),
    }
}

#[derive(Serialize)]
struct Approvals {
    approvals: Vec<crate::state::PendingCall>,
}

async fn approvals(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    q: Result<Query<TenantQuery>, QueryRejection>,
) -> Response {
    let list = || match query(q)?.tenant {
        // Every tenant the credential serves.
        None => {
            perimeter::holds(&p, &[Role::Approver])?;
            gw.approvals_where(|t| p.serves(t))
        }
        given => {
            let t = scoped(&*gw, &p, &[Role::Approver], "GET /v1/approvals", given)?;
            gw.approvals(t)
        }
    };
    match list() {
        Ok(approvals) => json(200, &Approvals { approvals }),
        Err(e) => error(&gw, e),
    }
}

async fn resolve(
    gw: Arc<Gateway>,
    p: Principal,
    call: Result<Path<String>, PathRejection>,
    body: Body,
    approve: bool,
) -> Response {
    let start = Instant::now();
    let request = if approve {
        "POST /v1/approvals/{call}/approve"
    } else {
        "POST /v1/approvals/{call}/reject"
    };
    let pending = async {
        let call = path(call)?;
        let mut req = resolve_body(body).await?;
        req.tenant = scoped(&*gw, &p, &[Role::Approver], request, req.tenant)?;
        gw.resolve(call, req, approve, &p.actor())
    };
    let pending = match pending.await {
        Ok(p) => p,
        Err(e) => return error(&gw, e),
    };
    match pending.durable().await {
        Ok((mut out, seq)) => {
            if let Some(e) = expired(approve, &out) {
                return error(&gw, e);
            }
            out.audit_seq = seq;
            gw.metrics
                .observe(out.decision, out.replayed, start.elapsed());
            json(200, &out)
        }
        Err(e) => error(&gw, e),
    }
}

async fn approve(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    call: Result<Path<String>, PathRejection>,
    body: Body,
) -> Response {
    resolve(gw, p, call, body, true).await
}

async fn reject(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    call: Result<Path<String>, PathRejection>,
    body: Body,
) -> Response {
    resolve(gw, p, call, body, false).await
}

async fn reload(
    State(gw): State<Arc<Gateway>>,
    Extension(p): Extension<Principal>,
    body: Body,
) -> Response {
    let run = async {
        let bytes = read_body(body).await?;
        let req: api::PolicyIn = api::parse(&bytes)?;
        let name = req.name.unwrap_or_else(|| "api".into());
        let policy = agenra_policy::compile(&req.source, &name)
            .map_err(|e| {
                ApiError::field(
                    422,
                    "source",
                    e.render(&name, &req.source).trim_end().to_string(),
                )
            })?
            .policy;
        // Certification can take a while: off the async workers.
        let gw2 = Arc::clone(&gw);
        perimeter::holds(&p, &[Role::Admin])?;
        let (actor, widen) = (p.actor(), req.allow_widening);
        let pending = tokio::task::spawn_blocking(move || gw2.reload(policy, &name, &actor, widen))
            .await
            .map_err(|e| ApiError::new(500, e.to_string()))??;
        pending.durable().await
    };
    match run.await {
        Ok((mut r, seq)) => {
            r.audit_seq = seq;
            json(200, &r)
        }
        Err(e) => error(&gw, e),
    }
}
