//! Why a request to the server has no usable answer: the contract's error, and whether the
//! server may have seen the request ([`Transient`]); the refusals the server wrote, re-projected
//! onto the contract's fields.

use serde_json::Value;

use super::http;
use crate::contract::ActionError;
use crate::contract::error::{ErrorCode, ErrorDetail};

/// A forwarded request that got no answer of the server's, and whether the server may have
/// seen it.
#[derive(Debug)]
pub struct Failed {
    pub error: ActionError,
    /// `None` when the server answered (a refusal, a failure of its own): sending the same
    /// request again gets the same kind of answer.
    pub transient: Option<Transient>,
}

/// Why a request has no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    /// The connection was never made: the server cannot have seen the request.
    NotSent,
    /// The request left, and its answer was lost on the way back (a reset, a timeout, a truncated
    /// answer, a gateway's 502, 503 or 504): the server may have applied it.
    AnswerLost,
}

impl From<Failed> for ActionError {
    fn from(failed: Failed) -> ActionError {
        failed.error
    }
}

/// A failure before the request left, or of the server's own answer: not transient.
impl From<ActionError> for Failed {
    fn from(error: ActionError) -> Failed {
        Failed::answered(error)
    }
}

impl Failed {
    pub(super) fn answered(error: ActionError) -> Failed {
        Failed {
            error,
            transient: None,
        }
    }

    pub(super) fn lost(error: ActionError) -> Failed {
        Failed {
            error,
            transient: Some(Transient::AnswerLost),
        }
    }
}

/// The contract's error in a refusal's body (a status that is neither a success nor a server
/// failure): `{"ok":false,"error":…}`, or an upstream failure naming what it is not.
pub(super) fn refusal(bytes: &[u8]) -> ActionError {
    match serde_json::from_slice::<Value>(bytes) {
        Err(_) => upstream_failed("the server's answer is not JSON"),
        Ok(envelope) if envelope.get("ok").and_then(Value::as_bool) == Some(false) => {
            reproject_error(&envelope["error"])
        }
        Ok(_) => upstream_failed("the server's answer is not the contract's envelope"),
    }
}

/// The contract error code in a body, when it is the contract's error envelope.
pub(super) fn refusal_code(bytes: &[u8]) -> Option<ErrorCode> {
    let envelope = serde_json::from_slice::<Value>(bytes).ok()?;
    (envelope.get("ok")? == &Value::Bool(false))
        .then(|| envelope.pointer("/error/code")?.as_str()?.parse().ok())
        .flatten()
}

/// Rebuilds an `ActionError` from only the contract's fields; anything else is dropped.
pub(super) fn reproject_error(error: &Value) -> ActionError {
    let Some(code) = error
        .get("code")
        .and_then(Value::as_str)
        .and_then(|c| c.parse::<ErrorCode>().ok())
    else {
        return upstream_failed("the server answered with an unknown error code");
    };
    let text = |field: &str| {
        error
            .get(field)
            .and_then(Value::as_str)
            .map(|s| s.chars().take(1024).collect::<String>())
    };
    let mut projected = ActionError::new(code, text("message").unwrap_or_default());
    projected.stage = error
        .get("stage")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok());
    projected.hint = text("hint");
    projected.next = text("next");
    projected.details = error
        .get("details")
        .and_then(Value::as_array)
        .map(|details| {
            details
                .iter()
                .take(crate::contract::validate::MAX_DETAILS)
                .filter_map(|d| {
                    Some(ErrorDetail {
                        path: d.get("path")?.as_str()?.chars().take(512).collect(),
                        message: d.get("message")?.as_str()?.chars().take(512).collect(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    projected
}

/// A request that got no answer: never sent when the connection was never made (a TLS
/// failure included), lost otherwise.
pub(super) fn classify(error: reqwest::Error) -> Failed {
    // A refused redirect is the server's whole answer: the same request gets it again.
    let transient = match (error.is_redirect(), error.is_connect()) {
        (true, _) => None,
        (false, true) => Some(Transient::NotSent),
        (false, false) => Some(Transient::AnswerLost),
    };
    let error = if error.is_timeout() {
        timed_out()
    } else {
        ActionError::new(
            ErrorCode::UpstreamUnavailable,
            format!(
                "the AgentTeam Server is unreachable: {}",
                http::why_unreachable(&error)
            ),
        )
        .with_next("retry later")
    };
    Failed { error, transient }
}

pub(super) fn timed_out() -> ActionError {
    ActionError::new(
        ErrorCode::UpstreamTimeout,
        "the AgentTeam Server did not answer in time",
    )
    .with_next("retry later")
}

pub(super) fn upstream_failed(message: &str) -> ActionError {
    ActionError::new(ErrorCode::UpstreamFailed, message)
}
