//! Reading a request: its body (bounded, timed), its query and path, the
//! tenant it acts for, and what an approval answer means.

use crate::api::{self, ApiError, Outcome};
use crate::auth::{Principal, Role};
use crate::perimeter::{self, Refusal, RefusalSink};
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use serde::Deserialize;

/// The largest request body accepted (1 MiB); larger ones get 413.
pub const MAX_BODY: usize = 1 << 20;

/// The tenant `p` acts for in a request naming `given`; a refusal (403)
/// is recorded.
pub(crate) fn scoped(
    sink: &dyn RefusalSink,
    p: &Principal,
    roles: &[Role],
    request: &str,
    given: Option<String>,
) -> Result<Option<String>, ApiError> {
    perimeter::holds(p, roles)?;
    perimeter::tenant_for(p, given.clone()).inspect_err(|e| {
        if e.status == 403 {
            sink.refused(Refusal {
                actor: Some(p.actor()),
                tenant: given,
                request: request.to_string(),
                status: e.status,
                why: e.error.clone(),
            });
        }
    })
}

pub(crate) async fn read_body(body: Body) -> Result<axum::body::Bytes, ApiError> {
    // A Content-Length over the limit is refused before any of it is read.
    let announced = axum::body::HttpBody::size_hint(&body).lower();
    if announced > MAX_BODY as u64 {
        return Err(ApiError::field(
            413,
            "body",
            format!("the body is {announced} bytes; at most {MAX_BODY} are accepted"),
        ));
    }
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|e| {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(c) = cause {
            if let Some(t) = c.downcast_ref::<crate::conn::BodyTimeout>() {
                return ApiError::field(408, "body", t.to_string());
            }
            cause = c.source();
        }
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.to_string().contains("length limit"))
            || e.to_string().contains("length limit");
        if too_large {
            ApiError::field(
                413,
                "body",
                format!("the body is larger than {MAX_BODY} bytes"),
            )
        } else {
            ApiError::field(400, "body", format!("cannot read the body: {e}"))
        }
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TenantQuery {
    #[serde(default)]
    pub(crate) tenant: Option<String>,
}

pub(crate) fn query(
    q: Result<Query<TenantQuery>, QueryRejection>,
) -> Result<TenantQuery, ApiError> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::field(400, "query", format!("bad query string: {}", e.body_text())))
}

pub(crate) fn path(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(p)| p)
        .map_err(|e| ApiError::field(400, "path", e.body_text()))
}

/// The body of an approval or rejection (an empty body is an empty
/// object: a rejection needs nothing).
pub(crate) async fn resolve_body(body: Body) -> Result<api::ResolveIn, ApiError> {
    let bytes = read_body(body).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        Ok(api::ResolveIn::default())
    } else {
        api::parse(&bytes)
    }
}

/// An approval answered with a rejection: the pause had expired.
pub(crate) fn expired(approve: bool, out: &Outcome) -> Option<ApiError> {
    (approve && out.kind == "reject").then(|| {
        ApiError::field(
            410,
            "call",
            format!(
                "the pause of call `{}` expired: it was rejected and its units returned",
                out.call
            ),
        )
    })
}
