//! The approval endpoints of the HTTP API alone, over any holder of
//! paused calls (an [`ApprovalDesk`]): `GET /health`, `GET /v1/approvals`,
//! `POST /v1/approvals/{call}/approve` and `/reject`, with the same bodies,
//! answers and errors as `agenra serve` (`docs/http-api.md`), and the
//! approvals page under `/desk` ([`crate::page`]). Every other path is a
//! 404, every other method a 405.
//!
//! `agenra mcp-proxy --on-pause wait` serves them for its own session
//! (`docs/mcp-proxy.md`), so a human approves the proxy's paused calls
//! with the same requests as the gateway's.

use crate::api::ApiError;
use crate::api::PendingCall;
pub use crate::approvals::{ApprovalDesk, GatewayDesk};
use crate::auth::{Principal, Role};
use crate::perimeter::{self, Perimeter, Refusal, RefusalSink};
use crate::reply::json;
use crate::request::{path, query, resolve_body, scoped, TenantQuery};
use crate::ServeError;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;

type Desk = Arc<dyn ApprovalDesk>;

/// A desk's refusals, as the perimeter records them.
struct DeskSink(Desk);

impl RefusalSink for DeskSink {
    fn refused(&self, r: Refusal) {
        self.0.refused(r);
    }
}

/// The approval routes over `desk`, behind `perimeter` (an approver's
/// credential, no cross-site request).
pub fn router(desk: Desk, perimeter: Arc<Perimeter>) -> Router {
    let sink: Arc<dyn RefusalSink> = Arc::new(DeskSink(Arc::clone(&desk)));
    Router::new()
        .route("/health", get(health))
        .route("/v1/approvals", get(approvals))
        .route("/v1/approvals/{call}/approve", post(approve))
        .route("/v1/approvals/{call}/reject", post(reject))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            (
                Arc::clone(&perimeter),
                sink,
                perimeter::need_approvals as perimeter::Needs,
            ),
            perimeter::guard,
        ))
        .with_state(Arc::clone(&desk))
        .merge(crate::page::router(desk, perimeter))
}

fn error(e: &ApiError) -> Response {
    json(e.status, e)
}

async fn health(State(desk): State<Desk>) -> Response {
    let h = desk.health();
    json(if h.status == "ok" { 200 } else { 503 }, &h)
}

#[derive(Serialize)]
struct Approvals {
    approvals: Vec<PendingCall>,
}

async fn approvals(
    State(desk): State<Desk>,
    Extension(p): Extension<Principal>,
    q: Result<Query<TenantQuery>, QueryRejection>,
) -> Response {
    let sink = DeskSink(Arc::clone(&desk));
    let list = || {
        let given = query(q)?.tenant;
        let all = given.is_none();
        let tenant = scoped(&sink, &p, &[Role::Approver], "GET /v1/approvals", given)?;
        let calls = desk.approvals(tenant)?;
        // Only what the credential serves, when it named no tenant.
        Ok::<_, ApiError>(if all {
            calls.into_iter().filter(|c| p.serves(&c.tenant)).collect()
        } else {
            calls
        })
    };
    match list() {
        Ok(approvals) => json(200, &Approvals { approvals }),
        Err(e) => error(&e),
    }
}

async fn resolve(
    desk: Desk,
    p: Principal,
    call: Result<Path<String>, PathRejection>,
    body: Body,
    approve: bool,
) -> Response {
    let run = async {
        let call = path(call)?;
        let mut req = resolve_body(body).await?;
        let sink = DeskSink(Arc::clone(&desk));
        req.tenant = scoped(
            &sink,
            &p,
            &[Role::Approver],
            "POST /v1/approvals/{call}",
            req.tenant,
        )?;
        crate::approvals::settle_on(desk, call, req, approve, p.actor()).await
    };
    match run.await {
        Ok(out) => json(200, &out),
        Err(e) => error(&e),
    }
}

async fn approve(
    State(desk): State<Desk>,
    Extension(p): Extension<Principal>,
    call: Result<Path<String>, PathRejection>,
    body: Body,
) -> Response {
    resolve(desk, p, call, body, true).await
}

async fn reject(
    State(desk): State<Desk>,
    Extension(p): Extension<Principal>,
    call: Result<Path<String>, PathRejection>,
    body: Body,
) -> Response {
    resolve(desk, p, call, body, false).await
}

async fn not_found(uri: axum::http::Uri) -> Response {
    error(&ApiError::field(
        404,
        "path",
        format!("no such endpoint: {}", uri.path()),
    ))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    error(&ApiError::field(
        405,
        "method",
        format!("{method} is not allowed on {}", uri.path()),
    ))
}

/// The approval endpoints served from a runtime on their own threads.
pub struct DeskServer {
    addr: SocketAddr,
    serving: crate::Serving,
}

impl DeskServer {
    /// Serves `desk` behind `perimeter` on `listen` (port 0 picks a free
    /// one).
    pub fn spawn(
        desk: Arc<dyn ApprovalDesk>,
        perimeter: Arc<Perimeter>,
        listen: &str,
    ) -> Result<DeskServer, ServeError> {
        let (addr, serving) = crate::Serving::spawn(router(desk, perimeter), listen, "approvals")?;
        Ok(DeskServer { addr, serving })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, finishes the requests in flight, and returns.
    pub fn stop(mut self) {
        self.serving.shutdown();
    }
}
