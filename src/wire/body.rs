//! The one bounded request-body reader of every route that takes JSON: the daemon's Exec, MCP and
//! admin routes and the server's runtime and operator APIs.
//!
//! In order: the body must be declared `application/json` (415); a declared `Content-Length`
//! over [`MAX_BODY_BYTES`] is refused before anything is read, and so is a body that grows past
//! it (413); the whole body must arrive within [`BODY_DEADLINE`] (408); a runtime request is
//! abandoned the moment its authorization is revoked; then the bytes must be exactly one strict
//! JSON value (400). Each failure is one [`BodyFailure`], answered in each protocol from the one
//! mapping below.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::MAX_BODY_BYTES;
use super::jsonrpc;
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::contract::json::parse_strict;

/// The absolute deadline for receiving a request's body.
pub const BODY_DEADLINE: Duration = Duration::from_secs(5);

/// Why a request's body was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyFailure {
    /// Not declared `application/json`.
    NotJson,
    /// Over [`MAX_BODY_BYTES`], declared or actual.
    TooLarge,
    /// The connection failed mid-body.
    Unreadable,
    /// Not complete within [`BODY_DEADLINE`].
    Timeout,
    /// The runtime's authorization was revoked while the body arrived.
    Revoked,
    /// Not exactly one strict JSON value; the parser's reason.
    Malformed(String),
}

/// Reads and parses the body of a request with `headers`. `cancel` (a runtime request's
/// authorization) abandons the read when it fires.
pub async fn read_json(
    headers: &HeaderMap,
    body: Body,
    cancel: Option<&CancellationToken>,
) -> Result<Value, BodyFailure> {
    if !is_json(headers) {
        return Err(BodyFailure::NotJson);
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Err(BodyFailure::TooLarge);
    }
    let read = tokio::time::timeout(BODY_DEADLINE, axum::body::to_bytes(body, MAX_BODY_BYTES));
    let revoked = async {
        match cancel {
            Some(cancel) => cancel.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let bytes = tokio::select! {
        read = read => match read {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => {
                let over = std::error::Error::source(&e)
                    .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
                return Err(if over { BodyFailure::TooLarge } else { BodyFailure::Unreadable });
            }
            Err(_) => return Err(BodyFailure::Timeout),
        },
        () = revoked => return Err(BodyFailure::Revoked),
    };
    if cancel.is_some_and(CancellationToken::is_cancelled) {
        return Err(BodyFailure::Revoked);
    }
    parse_strict(&bytes).map_err(|e| BodyFailure::Malformed(e.to_string()))
}

/// `Content-Type: application/json`, with or without parameters.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

impl BodyFailure {
    /// The HTTP status of the refusal, in every protocol.
    pub fn status(&self) -> StatusCode {
        match self {
            BodyFailure::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            BodyFailure::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            BodyFailure::Timeout => StatusCode::REQUEST_TIMEOUT,
            BodyFailure::Unreadable | BodyFailure::Malformed(_) => StatusCode::BAD_REQUEST,
            BodyFailure::Revoked => StatusCode::FORBIDDEN,
        }
    }

    /// What to tell the caller.
    pub fn message(&self) -> String {
        match self {
            BodyFailure::NotJson => "the body must be `application/json`".into(),
            BodyFailure::TooLarge => format!("the body exceeds {MAX_BODY_BYTES} bytes"),
            BodyFailure::Timeout => format!(
                "the body did not arrive within {} seconds",
                BODY_DEADLINE.as_secs()
            ),
            BodyFailure::Unreadable => "the body could not be read".into(),
            BodyFailure::Malformed(why) => format!("the body is not one JSON value: {why}"),
            BodyFailure::Revoked => "forbidden".into(),
        }
    }

    /// The refusal as an error envelope (Exec, the admin API, the server). A revoked runtime's
    /// request is `forbidden`, like any other refused credential.
    pub fn error(&self) -> ActionError {
        let code = match self {
            BodyFailure::NotJson => ErrorCode::UnsupportedMediaType,
            BodyFailure::TooLarge => ErrorCode::PayloadTooLarge,
            BodyFailure::Timeout => ErrorCode::RequestTimeout,
            BodyFailure::Unreadable | BodyFailure::Malformed(_) => ErrorCode::InvalidRequest,
            BodyFailure::Revoked => ErrorCode::Forbidden,
        };
        ActionError::new(code, self.message())
    }

    /// The refusal's JSON-RPC error code (MCP).
    pub fn rpc_code(&self) -> i64 {
        match self {
            BodyFailure::Unreadable | BodyFailure::Malformed(_) => jsonrpc::PARSE_ERROR,
            _ => jsonrpc::INVALID_REQUEST,
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(content_type: &str, length: Option<usize>) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).unwrap(),
        );
        if let Some(length) = length {
            map.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        map
    }

    #[tokio::test]
    async fn each_failure_is_classified_at_its_edge() {
        let ok = read_json(
            &headers("application/json; charset=utf-8", None),
            Body::from("{}"),
            None,
        )
        .await;
        assert_eq!(ok, Ok(serde_json::json!({})));
        let not_json = read_json(&headers("text/plain", None), Body::from("{}"), None).await;
        assert_eq!(not_json, Err(BodyFailure::NotJson));
        let declared = read_json(
            &headers("application/json", Some(MAX_BODY_BYTES + 1)),
            Body::empty(),
            None,
        )
        .await;
        assert_eq!(declared, Err(BodyFailure::TooLarge));
        let exactly = format!("\"{}\"", "a".repeat(MAX_BODY_BYTES - 2));
        assert!(
            read_json(
                &headers("application/json", None),
                Body::from(exactly),
                None
            )
            .await
            .is_ok()
        );
        let over = format!("\"{}\"", "a".repeat(MAX_BODY_BYTES - 1));
        assert_eq!(
            read_json(&headers("application/json", None), Body::from(over), None).await,
            Err(BodyFailure::TooLarge)
        );
        let trailing = read_json(
            &headers("application/json", None),
            Body::from("{} {}"),
            None,
        )
        .await;
        assert!(matches!(trailing, Err(BodyFailure::Malformed(_))));
        let revoked = CancellationToken::new();
        revoked.cancel();
        let refused = read_json(
            &headers("application/json", None),
            Body::from("{}"),
            Some(&revoked),
        )
        .await;
        assert_eq!(refused, Err(BodyFailure::Revoked));
    }
}
