//! The approval endpoints of the HTTP API alone, over any holder of
//! paused calls (an [`ApprovalDesk`]): `GET /health`, `GET /v1/approvals`,
//! `POST /v1/approvals/{call}/approve` and `/reject`, with the same bodies,
//! answers and errors as `agenra serve` (`docs/http-api.md`). Every other
//! path is a 404, every other method a 405.
//!
//! `agenra mcp-proxy --on-pause wait` serves them for its own session
//! (`docs/mcp-proxy.md`), so a human approves the proxy's paused calls
//! with the same requests as the gateway's.

use crate::api::{self, ApiError, Outcome};
use crate::http::{json, path, query, read_body, Health, TenantQuery};
use crate::state::PendingCall;
use crate::ServeError;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;

/// Holds calls paused for a human and settles them.
pub trait ApprovalDesk: Send + Sync + 'static {
    /// `GET /health` (answered with 503 unless `status` is `ok`).
    fn health(&self) -> Health;
    /// `GET /v1/approvals?tenant=T`: the tenant's paused calls.
    fn approvals(&self, tenant: Option<String>) -> Result<Vec<PendingCall>, ApiError>;
    /// `POST /v1/approvals/{call}/approve` (`approve` true) or `/reject`.
    /// May block briefly (it runs off the async workers).
    fn resolve(
        &self,
        call: String,
        req: api::ResolveIn,
        approve: bool,
    ) -> Result<Outcome, ApiError>;
}

type Desk = Arc<dyn ApprovalDesk>;

/// The approval routes over `desk`.
pub fn router(desk: Desk) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/approvals", get(approvals))
        .route("/v1/approvals/{call}/approve", post(approve))
        .route("/v1/approvals/{call}/reject", post(reject))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(desk)
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
    q: Result<Query<TenantQuery>, QueryRejection>,
) -> Response {
    match query(q).and_then(|q| desk.approvals(q.tenant)) {
        Ok(approvals) => json(200, &Approvals { approvals }),
        Err(e) => error(&e),
    }
}

async fn resolve(
    desk: Desk,
    call: Result<Path<String>, PathRejection>,
    body: Body,
    approve: bool,
) -> Response {
    let run = async {
        let call = path(call)?;
        let bytes = read_body(body).await?;
        let req: api::ResolveIn = if bytes.iter().all(u8::is_ascii_whitespace) {
            api::ResolveIn::default()
        } else {
            api::parse(&bytes)?
        };
        tokio::task::spawn_blocking(move || desk.resolve(call, req, approve))
            .await
            .map_err(|e| ApiError::new(500, e.to_string()))?
    };
    match run.await {
        Ok(out) => json(200, &out),
        Err(e) => error(&e),
    }
}

async fn approve(
    State(desk): State<Desk>,
    call: Result<Path<String>, PathRejection>,
    body: Body,
) -> Response {
    resolve(desk, call, body, true).await
}

async fn reject(
    State(desk): State<Desk>,
    call: Result<Path<String>, PathRejection>,
    body: Body,
) -> Response {
    resolve(desk, call, body, false).await
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
    /// Serves `desk` on `listen` (port 0 picks a free one).
    pub fn spawn(desk: Arc<dyn ApprovalDesk>, listen: &str) -> Result<DeskServer, ServeError> {
        let (addr, serving) = crate::Serving::spawn(router(desk), listen, "approvals")?;
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
