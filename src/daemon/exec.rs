//! The Exec action route: `POST /api/internal/exec/servers/{serverId}/agents/{agentId}/{domain}/{action}`.
//!
//! The order is the spec's, and each step closes a hole:
//! 1. authenticate and bind the path (one uniform 403) — nothing else happens for a stranger;
//! 2. admission: 32 acquired requests per authorization, 1024 in all, refused with 409 *before*
//!    the body is read, so a slow body cannot pin more than its own slot;
//! 3. the body: at most 1 MiB, under a 5-second absolute deadline (413 / 408);
//! 4. strict JSON (duplicate keys, trailing bytes, depth) and the action's input schema;
//! 5. the idempotency selector (mutations);
//! 6. the generated typed adapter into `ServerClient`, the server-owned domains' handler.
//!
//! The request is cancelled when its authorization is revoked: body-read completion, dispatch
//! and success publication are each fenced against that signal. The success envelope then passes
//! the 64 KiB result budget (`budget.rs`).

use super::auth::Scope;
use super::budget;
use super::http::{BODY_DEADLINE, BodyFailure, DaemonState, forbidden, read_runtime_body};
use crate::client::CallContext;
use crate::contract::catalog::{builtin_digest, find_action};
use crate::contract::error::ErrorCode;
use crate::contract::json::parse_strict;
use crate::contract::{ActionError, DispatchError, dispatch};
use crate::wire;
use crate::wire::idempotency::resolve_selector;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

pub async fn action(
    State(state): State<DaemonState>,
    Path((server_id, agent_id, domain, action)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    state
        .counters
        .exec_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // 1. Authentication and path binding, before anything else.
    let Ok(authorization) =
        state
            .store
            .verify(wire::bearer(&headers), &server_id, &agent_id, Scope::Exec)
    else {
        return forbidden();
    };
    let Some(descriptor) = find_action(&domain, &action) else {
        let shown = |s: &str| s.chars().take(32).collect::<String>();
        return wire::error_response(
            &ActionError::new(
                ErrorCode::UnknownAction,
                format!("unknown action: `{} {}`", shown(&domain), shown(&action)),
            )
            .with_next("run `agentteam exec --help` for the domains and actions"),
        );
    };
    // A caller that states its catalog must be built from the daemon's: a mismatched binary
    // would validate, help and forward against another contract.
    if let Some(digest) = headers.get(wire::CATALOG_DIGEST_HEADER)
        && digest.as_bytes() != builtin_digest().as_bytes()
    {
        return wire::error_response(
            &ActionError::new(
                ErrorCode::CatalogMismatch,
                "this `agentteam` was built from another action catalog than the daemon's",
            )
            .with_next(
                "call the `agentteam` the daemon put first on the runtime's PATH, or restart the runtime",
            ),
        );
    }
    // 2. Admission, before the body is read.
    let Some(_admission) = state.store.admit(&authorization) else {
        return wire::error_response(&ActionError::new(
            ErrorCode::AdmissionLimited,
            "too many requests in flight; retry shortly",
        ));
    };
    let cancel = authorization.cancel.clone();

    // 3. The body, bounded in size and time, and fenced against revocation.
    let bytes = match read_runtime_body(body, &cancel).await {
        Ok(bytes) => bytes,
        Err(BodyFailure::Revoked) => return forbidden(),
        Err(failure) => {
            return wire::error_response(&match failure {
                BodyFailure::TooLarge => ActionError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("the body exceeds {} bytes", wire::MAX_BODY_BYTES),
                ),
                BodyFailure::Timeout => ActionError::new(
                    ErrorCode::RequestTimeout,
                    format!(
                        "the body did not arrive within {} seconds",
                        BODY_DEADLINE.as_secs()
                    ),
                ),
                _ => ActionError::new(ErrorCode::InvalidRequest, "the body could not be read"),
            });
        }
    };

    // 4. Strict JSON, then the action's schema from this authorization's catalog.
    let input = match parse_strict(&bytes) {
        Ok(input) => input,
        Err(e) => {
            return wire::error_response(&ActionError::new(
                ErrorCode::InvalidRequest,
                format!("the body is not one JSON value: {e}"),
            ));
        }
    };
    if let Err(error) = state.catalog.validate_input(descriptor.id, &input) {
        return wire::error_response(&error);
    }
    // 5. One agreed, well-formed idempotency selector for a mutation.
    let idempotency_key = if descriptor.risk.is_mutation() {
        match resolve_selector(&headers, &input) {
            Ok(key) => key,
            Err(error) => return wire::error_response(&error),
        }
    } else {
        None
    };

    // 6. Dispatch through the generated adapter, fenced against revocation.
    if cancel.is_cancelled() {
        return forbidden();
    }
    let ctx = CallContext {
        server_id: server_id.clone(),
        agent_id: agent_id.clone(),
        idempotency_key: idempotency_key.clone(),
    };
    let client = state.server.clone();
    let result = tokio::select! {
        result = dispatch(client.as_ref(), &ctx, descriptor.id, input) => result,
        () = cancel.cancelled() => return forbidden(),
    };
    // Success publication is fenced too: a revoked authorization gets nothing back.
    if cancel.is_cancelled() || authorization.is_revoked() {
        return forbidden();
    }
    match result {
        Ok(data) => budget::respond(&state.catalog, descriptor, data, idempotency_key.as_deref()),
        Err(DispatchError::Action(error)) => wire::error_response(&error),
        Err(DispatchError::Decode(cause)) => {
            tracing::debug!(action = %descriptor.id.key(), error = %cause, "validated input does not fit the typed request");
            wire::error_response(&ActionError::unrepresentable_input())
        }
        Err(DispatchError::Encode(_)) => budget::unserializable(descriptor),
    }
}
