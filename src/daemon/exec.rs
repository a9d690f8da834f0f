//! The Exec route family: `POST /api/internal/exec/servers/{serverId}/agents/{agentId}/{domain}/{action}`
//! and `GET …/catalog`.
//!
//! What is Exec's, in the spec's order, each step closing a hole:
//! 1. authenticate and bind the path (one uniform 403), then admission: 32 acquired requests per
//!    authorization, 1024 in all, refused with 409 — nothing reads the body before both;
//! 2. a caller that states its catalog digest must match the daemon's built-in one (409);
//! 3. the action, built-in or of an extension the runtime's catalog pinned;
//! 4. the body (`wire::body`): JSON (415), at most 1 MiB (413), under a 5-second absolute deadline
//!    (408), strict (400), fenced against revocation;
//! 5. the call core (`call`): validation, the selector, the owner and the output check;
//! 6. the success envelope and its 64 KiB result budget (`contract::budget`).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::access;
use super::auth::Scope;
use super::call::{self, Call, Operation};
use super::state::DaemonState;
use crate::contract::ActionError;
use crate::contract::budget::{self, Rule};
use crate::contract::catalog::builtin_digest;
use crate::contract::error::ErrorCode;
use crate::wire;
use crate::wire::body::BodyFailure;

/// `POST …/{domain}/{action}`.
pub async fn action(
    State(state): State<DaemonState>,
    Path((server_id, agent_id, domain, action)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = std::time::Instant::now();
    state
        .counters
        .exec_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // 1. Authentication, path binding and admission, before anything else.
    let (authorization, admission) = match access::verify_and_admit(
        &state.authorizations,
        wire::bearer(&headers),
        &server_id,
        &agent_id,
        Scope::Exec,
    ) {
        Ok((authorization, admission)) => (authorization, access::Slot::new(admission)),
        Err(denied) => {
            let action = format!("{domain} {action}");
            return refused(
                &state,
                &denied,
                &action,
                (&server_id, &agent_id),
                &headers,
                started,
            );
        }
    };
    // 2. A caller that states its catalog must be built from the daemon's: a mismatched binary
    // would validate, help and forward against another contract.
    if let Some(refusal) = catalog_mismatch(&headers) {
        return refusal;
    }
    // 3. The action the runtime's catalog names.
    let operation = match Operation::exec(&authorization.catalog, &domain, &action) {
        Ok(operation) => operation,
        Err(error) => return wire::error_response(&error),
    };
    // 4. The body, bounded in size and time, and fenced against revocation.
    let input = match wire::body::read_json(&headers, body, Some(&authorization.cancel)).await {
        Ok(input) => input,
        Err(BodyFailure::Revoked) => return wire::error_response(&ActionError::forbidden()),
        Err(failure) => return wire::error_response(&failure.error()),
    };
    // 5. The call core.
    let call = Call {
        authorization: &authorization,
        operation: &operation,
        input,
        selectors: &headers,
        admission: &admission,
    };
    let answer = call::run(&state, call).await;
    crate::telemetry::request::outcome_of(&answer);
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return wire::error_response(&error),
    };
    // 6. The envelope, within the result budget.
    let Some(rule) = ExecRule::of(&state, &operation, &answer) else {
        let error = call::internal("an Exec call answered as an operation of neither kind");
        return wire::error_response(&error);
    };
    let key = answer.idempotency_key.as_deref();
    let fitted = budget::fit(rule.rule(), answer.data.into_envelope(), key);
    if crate::telemetry::request::is_traced() {
        crate::telemetry::request::budget(fitted.is_ok());
    }
    match fitted {
        Ok(envelope) => wire::raw_json_response(200, envelope),
        Err(error) => {
            crate::telemetry::request::outcome(&error.code.to_string());
            wire::error_response(&error)
        }
    }
}

/// The result-budget rule of an Exec operation.
enum ExecRule<'a> {
    Builtin(budget::Builtin<'a>),
    Extension(crate::contract::extension::ExtensionRule<'a>),
}

impl<'a> ExecRule<'a> {
    fn of(
        state: &'a DaemonState,
        operation: &'a Operation,
        answer: &call::Answer,
    ) -> Option<ExecRule<'a>> {
        match (operation.extension_action(), answer.effective) {
            (Some((pinned, declared)), _) => Some(ExecRule::Extension(pinned.rule(declared))),
            (None, Some(effective)) => Some(ExecRule::Builtin(budget::Builtin {
                catalog: &state.validators,
                descriptor: effective,
            })),
            (None, None) => None,
        }
    }

    fn rule(&self) -> &dyn Rule {
        match self {
            ExecRule::Builtin(rule) => rule,
            ExecRule::Extension(rule) => rule,
        }
    }
}

/// The answer to a request refused at step 1, recorded in the daemon's refusal log.
fn refused(
    state: &DaemonState,
    denied: &access::Denied,
    action: &str,
    binding: (&str, &str),
    headers: &HeaderMap,
    started: std::time::Instant,
) -> Response {
    state
        .refusals
        .denied(denied, "exec", action, binding, headers, started);
    wire::error_response(&denied.error())
}

/// The refusal of a caller whose stated catalog digest is not the daemon's built-in one.
fn catalog_mismatch(headers: &HeaderMap) -> Option<Response> {
    let digest = headers.get(wire::CATALOG_DIGEST_HEADER)?;
    (digest.as_bytes() != builtin_digest().as_bytes()).then(|| {
        wire::error_response(
            &ActionError::new(
                ErrorCode::CatalogMismatch,
                "this `agentteam` was built from another action catalog than the daemon's",
            )
            .with_next(
                "call the `agentteam` the daemon put first on the runtime's PATH, or restart the runtime",
            ),
        )
    })
}

/// `GET …/catalog`: the authorization's immutable `RuntimeCatalog`.
pub async fn catalog(
    State(state): State<DaemonState>,
    Path((server_id, agent_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let started = std::time::Instant::now();
    match access::verify_and_admit(
        &state.authorizations,
        wire::bearer(&headers),
        &server_id,
        &agent_id,
        Scope::Exec,
    ) {
        Ok((authorization, _admission)) => {
            wire::success_response(authorization.catalog.json.clone())
        }
        Err(denied) => refused(
            &state,
            &denied,
            "catalog",
            (&server_id, &agent_id),
            &headers,
            started,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Exec request's handler future stays small: a call's owner (the hop, the server's
    /// answer) lives on the heap, not in the future every request builds and moves.
    #[test]
    fn the_handler_future_of_every_exec_request_stays_small() {
        type Arguments = (
            State<DaemonState>,
            Path<(String, String, String, String)>,
            HeaderMap,
            Body,
        );
        let size = wire::future_size(|a: Arguments| action(a.0, a.1, a.2, a.3));
        assert!(size <= 2048, "the Exec handler's future is {size} bytes");
    }
}
