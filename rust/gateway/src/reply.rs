//! The JSON answer every route and layer sends (`docs/http-api.md`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `value` as a JSON body with `status` (an encoding failure is itself a
/// JSON error body, never a panic).
pub(crate) fn json<T: Serialize>(status: u16, value: &T) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_else(|e| {
        format!("{{\"error\":\"cannot encode the answer: {e}\"}}").into_bytes()
    });
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
