//! HTTP wire helpers shared by the daemon and the server: the envelope responses, the one mapping
//! from error code to HTTP status, bearer extraction, bounded strict JSON bodies, and the
//! idempotency selector rules.

pub mod frame;
pub mod idempotency;
pub mod jsonrpc;
pub mod observe;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::contract::json::parse_strict;
use crate::contract::{ActionError, error::ErrorCode};

/// The header on which `agentteam exec` sends the SHA-256 of its built-in catalog
/// (`sha256:<hex>`), so the daemon refuses a binary built from another catalog.
pub const CATALOG_DIGEST_HEADER: &str = "agentteam-catalog-digest";

/// Request bodies larger than this are refused (spec: the 1 MiB body cap).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The HTTP status of each error code; the only place this mapping lives.
pub fn status_for(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidRequest | ErrorCode::ValidationFailed => StatusCode::BAD_REQUEST,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::NotFound | ErrorCode::UnknownAction => StatusCode::NOT_FOUND,
        ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::InvalidState
        | ErrorCode::RevisionMismatch
        | ErrorCode::AdmissionLimited
        | ErrorCode::IdempotencyInProgress
        | ErrorCode::CatalogMismatch => StatusCode::CONFLICT,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::IdempotencyKeyReused | ErrorCode::ResultBudgetExceeded => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ErrorCode::UpstreamFailed => StatusCode::BAD_GATEWAY,
        ErrorCode::UpstreamUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A response whose JSON body was rendered earlier (an idempotent replay).
pub fn raw_json_response(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The envelope of `result` as `(status, body text)`, as it goes on the wire.
pub fn render(result: &Result<Value, ActionError>) -> (u16, String) {
    let (status, value) = match result {
        Ok(data) => (
            StatusCode::OK,
            serde_json::json!({ "ok": true, "data": data }),
        ),
        Err(error) => (status_for(error.code), error.envelope()),
    };
    let mut body = serde_json::to_string(&value).expect("a Value always serializes");
    body.push('\n');
    (status.as_u16(), body)
}

/// The error envelope with the code's status.
pub fn error_response(error: &ActionError) -> Response {
    let (status, body) = render(&Err(error.clone()));
    raw_json_response(status, body)
}

/// `200 {"ok":true,"data":…}`.
pub fn success_response(data: Value) -> Response {
    let (status, body) = render(&Ok(data));
    raw_json_response(status, body)
}

/// The token of an `Authorization: Bearer <token>` header, if there is exactly one well-formed one.
/// The scheme is matched case-insensitively (RFC 9110 §11.1): `bearer x` and `BEARER x` are the
/// same credential.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= 512)
        .then_some(token)
}

/// Reads at most [`MAX_BODY_BYTES`] and parses exactly one strict JSON value.
pub async fn read_json_body(headers: &HeaderMap, body: Body) -> Result<Value, ActionError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        return Err(ActionError::new(
            ErrorCode::InvalidRequest,
            "the body must be `application/json`",
        ));
    }
    let bytes: Bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            let over_limit = std::error::Error::source(&e)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            if over_limit {
                too_large()
            } else {
                ActionError::new(ErrorCode::InvalidRequest, "the body could not be read")
            }
        })?;
    parse_strict(&bytes).map_err(|e| {
        ActionError::new(
            ErrorCode::InvalidRequest,
            format!("the body is not one JSON value: {e}"),
        )
    })
}

fn too_large() -> ActionError {
    ActionError::new(
        ErrorCode::PayloadTooLarge,
        format!("the body exceeds {MAX_BODY_BYTES} bytes"),
    )
}
