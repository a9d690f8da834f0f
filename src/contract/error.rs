//! The error half of the contract: what a handler returns when an action fails, in the closed
//! code set of `schema/errors/error-envelope.json`.

use std::fmt;

use serde::Serialize;

pub use super::types::{ErrorCode, KnowledgeStage};

/// A typed action failure: the `error` object of the error envelope.
///
/// `message` is for the caller (a person or a model): lowercase, no trailing period, never a
/// secret, a path or an internal cause. Internal causes are logged where they happen.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionError {
    pub code: ErrorCode,
    /// Only on a failure of a knowledge tool: the hop that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<KnowledgeStage>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<ErrorDetail>,
    /// The closed `ErrorMetadata` object (`mutation_applied`, `mutation_receipt`), only on a
    /// mutation whose result exceeded the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<serde_json::Value>>,
}

/// One offending value of a request, named by its JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorDetail {
    pub path: String,
    pub message: String,
}

impl ActionError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ActionError {
            code,
            stage: None,
            message: message.into(),
            hint: None,
            next: None,
            details: Vec::new(),
            metadata: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_next(mut self, next: impl Into<String>) -> Self {
        self.next = Some(next.into());
        self
    }

    /// The knowledge hop that failed (knowledge tools only).
    pub fn at_stage(mut self, stage: KnowledgeStage) -> Self {
        self.stage = Some(stage);
        self
    }

    pub fn with_details(mut self, details: Vec<ErrorDetail>) -> Self {
        self.details = details;
        self
    }

    /// The one answer to every refused credential on an envelope route, whatever the reason.
    pub fn forbidden() -> Self {
        ActionError::new(ErrorCode::Forbidden, "forbidden")
    }

    /// The refusal of an owner's answer that is not within its output contract (a server's or
    /// the daemon's own): what a runtime reads, whatever the cause, which goes to the log only.
    pub fn owner_off_contract(operation: &str) -> Self {
        ActionError::new(
            ErrorCode::UpstreamFailed,
            format!("the owner of `{operation}` answered with a result off its output contract"),
        )
    }

    /// The refusal of an action no catalog has; the names are echoed cut to 32 characters.
    pub fn unknown_action(domain: &str, action: &str) -> Self {
        let shown = |s: &str| s.chars().take(32).collect::<String>();
        ActionError::new(
            ErrorCode::UnknownAction,
            format!("unknown action: `{} {}`", shown(domain), shown(action)),
        )
    }

    /// The refusal of an idempotency selector already used with another payload for `action`.
    pub fn idempotency_key_reused(key: &str, action: &str) -> Self {
        ActionError::new(
            ErrorCode::IdempotencyKeyReused,
            format!("`{key}` was already used with another payload for `{action}`"),
        )
        .with_next("use a new `requestId` for a different request")
    }

    /// The refusal of a repeat while the first request with its selector still runs.
    pub fn idempotency_in_progress(key: &str, action: &str) -> Self {
        ActionError::new(
            ErrorCode::IdempotencyInProgress,
            format!("the first request with `{key}` for `{action}` has not finished"),
        )
        .with_next("retry the same request later; it will replay the first result")
    }

    /// The refusal of input that its schema accepts but its typed request cannot hold (a number
    /// beyond the type's range): the caller's mistake, so a validation failure, never a 5xx.
    pub fn unrepresentable_input() -> Self {
        ActionError::new(
            ErrorCode::ValidationFailed,
            "the input does not fit the action: a number is out of range",
        )
    }

    /// The whole error envelope, `{"ok":false,"error":{…}}`.
    pub fn envelope(&self) -> serde_json::Value {
        serde_json::json!({ "ok": false, "error": self })
    }
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ActionError {}

/// What a typed action handler returns.
pub type ActionResult<T> = Result<T, ActionError>;

/// Why the generated adapter could not complete a call.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// Validated JSON did not deserialize into the typed input: a codegen mismatch, a defect.
    #[error("validated input does not match the generated type")]
    Decode(#[source] serde_json::Error),
    /// The handler reported a typed failure.
    #[error("action failed")]
    Action(#[source] ActionError),
    /// The typed output did not serialize (the result may already be committed).
    #[error("action output does not serialize")]
    Encode(#[source] serde_json::Error),
    /// The action belongs to another owner's dispatcher (a routing defect).
    #[error("the action belongs to another owner")]
    NotOwned(super::catalog::ActionId),
}
