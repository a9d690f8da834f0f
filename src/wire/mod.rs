//! HTTP wire helpers shared by the daemon and the server: the envelope responses, the one mapping
//! from error code to HTTP status, bearer extraction, bounded strict JSON bodies, and the
//! idempotency selector rules.

pub mod body;
pub mod frame;
pub mod idempotency;
pub mod jsonrpc;
pub mod observe;
pub mod turn;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::contract::{ActionError, error::ErrorCode};

/// The header on which `agentteam exec` sends the SHA-256 of its built-in catalog
/// (`sha256:<hex>`), so the daemon refuses a binary built from another catalog.
pub const CATALOG_DIGEST_HEADER: &str = "agentteam-catalog-digest";

/// The headers on which the daemon forwards an extension call with the definition digest and
/// catalog version the runtime was launched with (never taken from the runtime's request).
pub const EXTENSION_DIGEST_HEADER: &str = "agentteam-extension-digest";
pub const EXTENSION_CATALOG_VERSION_HEADER: &str = "agentteam-extension-catalog-version";

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
        | ErrorCode::CatalogMismatch
        | ErrorCode::ExtensionStale => StatusCode::CONFLICT,
        ErrorCode::AppUnauthorized => StatusCode::FORBIDDEN,
        ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::IdempotencyKeyReused | ErrorCode::ResultBudgetExceeded => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ErrorCode::UpstreamFailed | ErrorCode::OutcomeUnknown | ErrorCode::ProviderError => {
            StatusCode::BAD_GATEWAY
        }
        ErrorCode::UpstreamUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::UpstreamTimeout | ErrorCode::ProviderTimeout => StatusCode::GATEWAY_TIMEOUT,
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
    render_as(result)
}

/// [`render`] for any data that serializes: a typed adapter's output goes straight to text
/// (`Box<RawValue>`), without a `Value` tree in between.
pub fn render_as<T: serde::Serialize>(result: &Result<T, ActionError>) -> (u16, String) {
    /// The success envelope, keys in the order a `Value` object writes them: the form of
    /// `contract::budget::SUCCESS_OPEN`/`SUCCESS_CLOSE` (a client test holds the two together).
    #[derive(serde::Serialize)]
    struct Success<'a, D> {
        data: &'a D,
        ok: bool,
    }
    let (status, body) = match result {
        Ok(data) => (
            StatusCode::OK,
            serde_json::to_string(&Success { data, ok: true }),
        ),
        Err(error) => (
            status_for(error.code),
            serde_json::to_string(&error.envelope()),
        ),
    };
    let mut body = body.expect("typed data and Values serialize");
    body.push('\n');
    (status.as_u16(), body)
}

/// [`render_as`] for data already written as JSON text (a typed adapter's output): the success
/// envelope written around it in one buffer of its final size.
pub fn render_text(result: &Result<String, ActionError>) -> (u16, String) {
    use crate::contract::budget::{SUCCESS_CLOSE, SUCCESS_OPEN};
    let Ok(data) = result else {
        return render_as(result);
    };
    let mut body = String::with_capacity(SUCCESS_OPEN.len() + data.len() + SUCCESS_CLOSE.len() + 1);
    body.push_str(SUCCESS_OPEN);
    body.push_str(data);
    body.push_str(SUCCESS_CLOSE);
    body.push('\n');
    (StatusCode::OK.as_u16(), body)
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

/// A success envelope `{"ok":true,"data":…}` as a handler's answer.
#[derive(Debug)]
pub struct Data(pub Value);

impl IntoResponse for Data {
    fn into_response(self) -> Response {
        success_response(self.0)
    }
}

/// An error envelope as a handler's answer.
#[derive(Debug)]
pub struct Refusal(pub ActionError);

impl From<ActionError> for Refusal {
    fn from(error: ActionError) -> Refusal {
        Refusal(error)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error_response(&self.0)
    }
}

/// The size of the future `handler` makes from its arguments `A`, without making one. A request's
/// handler future is built and then moved whole (into the router's box), so its size is paid by
/// every request, whichever of its states the request passes through.
#[cfg(test)]
pub(crate) fn future_size<A, F: std::future::Future>(_handler: impl FnOnce(A) -> F) -> usize {
    std::mem::size_of::<F>()
}
