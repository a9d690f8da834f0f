//! The Exec route family: `POST /api/internal/exec/servers/{serverId}/agents/{agentId}/{domain}/{action}`
//! and `GET …/catalog`.
//!
//! The order is the spec's, and each step closes a hole:
//! 1. authenticate and bind the path (one uniform 403), then admission: 32 acquired requests per
//!    authorization, 1024 in all, refused with 409 — nothing reads the body before both;
//! 2. a caller that states its catalog digest must match the daemon's built-in one (409);
//! 3. the body (`wire::body`): JSON (415), at most 1 MiB (413), under a 5-second absolute deadline
//!    (408), strict (400);
//! 4. the action's input schema;
//! 5. the idempotency selector (mutations);
//! 6. the generated typed adapter into the action's owner: `ServerClient` for server-owned domains,
//!    the daemon's own owner (with idempotent replay of its mutations) for daemon-owned ones.
//!
//! The request is cancelled when its authorization is revoked: body-read completion, dispatch
//! and success publication are each fenced against that signal. The success envelope then passes
//! the 64 KiB result budget (`contract::budget`).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use sha2::{Digest, Sha256};

use super::access::{self, forbidden};
use super::agents::owner::DaemonCaller;
use super::auth::Scope;
use super::replay::Claim;
use super::state::DaemonState;
use crate::client::CallContext;
use crate::contract::catalog::{Effective, builtin_digest, find_action};
use crate::contract::error::ErrorCode;
use crate::contract::{ActionError, DispatchError, DomainOwner, budget, dispatch, dispatch_daemon};
use crate::wire;
use crate::wire::body::BodyFailure;
use crate::wire::idempotency::resolve_selector;

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
    let (authorization, _admission) = match access::verify_and_admit(
        &state.authorizations,
        wire::bearer(&headers),
        &server_id,
        &agent_id,
        Scope::Exec,
    ) {
        Ok(admitted) => admitted,
        Err(denied) => {
            let action = format!("{domain} {action}");
            return refused(
                &state,
                &denied,
                "exec",
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
    let Some(descriptor) = find_action(&domain, &action) else {
        // An extension the runtime's catalog pinned: the same steps, then the forwarder.
        if let Some(pinned) = authorization.catalog.extension(&domain).cloned() {
            let call = ExtensionCall {
                server_id,
                agent_id,
                action,
            };
            return extension_action(&state, &authorization, &headers, body, &pinned, call).await;
        }
        let shown = |s: &str| s.chars().take(32).collect::<String>();
        return wire::error_response(
            &ActionError::new(
                ErrorCode::UnknownAction,
                format!("unknown action: `{} {}`", shown(&domain), shown(&action)),
            )
            .with_next("run `agentteam exec --help` for the domains and actions"),
        );
    };
    let cancel = authorization.cancel.clone();

    // 3. The body, bounded in size and time, and fenced against revocation.
    let input = match read_input(&headers, body, &cancel).await {
        Ok(input) => input,
        Err(refusal) => return refusal,
    };
    // 4. The action's schema.
    if let Err(error) = state.validators.validate_input(descriptor.id, &input) {
        return wire::error_response(&error);
    }
    // 5. One agreed, well-formed idempotency selector for a mutation (the operation's risk, for an
    // operation union).
    let effective = descriptor.effective(&input);
    let idempotency_key = if effective.risk().is_mutation() {
        match resolve_selector(&headers, &input) {
            Ok(key) => key,
            Err(error) => return wire::error_response(&error),
        }
    } else {
        None
    };

    // 6. Dispatch to the action's owner, fenced against revocation.
    if cancel.is_cancelled() {
        return wire::error_response(&forbidden());
    }
    let answer = async {
        match descriptor.owner {
            DomainOwner::Server => {
                let ctx = CallContext {
                    server_id: server_id.clone(),
                    agent_id: agent_id.clone(),
                    idempotency_key: idempotency_key.clone(),
                };
                let result =
                    dispatch(state.server_client.as_ref(), &ctx, descriptor.id, input).await;
                answer(&state, effective, result, idempotency_key.as_deref())
            }
            DomainOwner::Daemon => {
                let caller = DaemonCaller {
                    server_id: server_id.clone(),
                    agent_id: agent_id.clone(),
                };
                daemon_owned(
                    &state,
                    &caller,
                    effective,
                    input,
                    idempotency_key.as_deref(),
                )
                .await
            }
        }
    };
    let (status, body) = tokio::select! {
        answer = answer => answer,
        () = cancel.cancelled() => return wire::error_response(&forbidden()),
    };
    // Success publication is fenced too: a revoked authorization gets nothing back.
    if cancel.is_cancelled() || authorization.is_revoked() {
        return wire::error_response(&forbidden());
    }
    wire::raw_json_response(status, body)
}

/// The answer to a request refused at step 1, recorded in the daemon's refusal log.
fn refused(
    state: &DaemonState,
    denied: &access::Denied,
    family: &'static str,
    action: &str,
    (server_id, agent_id): (&str, &str),
    headers: &HeaderMap,
    started: std::time::Instant,
) -> Response {
    state.refusals.record(&super::refusals::Refusal {
        family,
        action,
        server_id,
        agent_id,
        outcome: denied.outcome(),
        idempotency_key: headers.get("idempotency-key").map(|v| v.as_bytes()),
        started,
    });
    wire::error_response(&denied.error())
}

/// Step 2: the refusal of a caller whose stated catalog digest is not the daemon's built-in one.
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

/// Step 3: the body as JSON, bounded in size and time, fenced against revocation.
async fn read_input(
    headers: &HeaderMap,
    body: Body,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<serde_json::Value, Response> {
    match wire::body::read_json(headers, body, Some(cancel)).await {
        Ok(input) => Ok(input),
        Err(BodyFailure::Revoked) => Err(wire::error_response(&forbidden())),
        Err(failure) => Err(wire::error_response(&failure.error())),
    }
}

/// Which extension action a request names, on whose behalf.
struct ExtensionCall {
    server_id: String,
    agent_id: String,
    action: String,
}

/// Steps 3–6 for an action of an extension pinned in the authorization's catalog: the body, the
/// pinned input schema, the selector of a side effect, then the forwarder
/// with the pin; every step fenced against revocation like a built-in's.
async fn extension_action(
    state: &DaemonState,
    authorization: &super::auth::Authorization,
    headers: &HeaderMap,
    body: Body,
    pinned: &crate::contract::extension::Pinned,
    call: ExtensionCall,
) -> Response {
    let Some(declared) = pinned.action(&call.action) else {
        return wire::error_response(
            &ActionError::new(
                ErrorCode::UnknownAction,
                format!(
                    "unknown action: `{} {}`",
                    pinned.name(),
                    call.action.chars().take(32).collect::<String>()
                ),
            )
            .with_next(format!(
                "run `agentteam exec {} --help` for its actions",
                pinned.name()
            )),
        );
    };
    let cancel = authorization.cancel.clone();
    let input = match read_input(headers, body, &cancel).await {
        Ok(input) => input,
        Err(refusal) => return refusal,
    };
    if let Err(error) = pinned.validate_input(&call.action, &input) {
        return wire::error_response(&error);
    }
    let idempotency_key = if declared.risk.is_mutation() {
        match resolve_selector(headers, &input) {
            Ok(key) => key,
            Err(error) => return wire::error_response(&error),
        }
    } else {
        None
    };
    if cancel.is_cancelled() {
        return wire::error_response(&forbidden());
    }
    let ctx = CallContext {
        server_id: call.server_id,
        agent_id: call.agent_id,
        idempotency_key,
    };
    let seen = state.extensions.current();
    let (status, body) = tokio::select! {
        answer = super::extensions::call(&state.server_client, &ctx, pinned, &call.action, input) => answer,
        () = cancel.cancelled() => return wire::error_response(&forbidden()),
    };
    if cancel.is_cancelled() || authorization.is_revoked() {
        return wire::error_response(&forbidden());
    }
    // The server has a newer definition than this runtime's pin: pin it for the next launches
    // before answering, so the restart the error asks for gets it.
    if !(200..300).contains(&status)
        && serde_json::from_str::<serde_json::Value>(&body)
            .is_ok_and(|answer| answer["error"]["code"] == "extension_stale")
    {
        state.extensions.reload_unless_newer_than(&seen).await;
    }
    wire::raw_json_response(status, body)
}

/// The wire answer `(status, body)` of a dispatch result: the result budget on a success, the
/// one classification of every failure.
fn answer(
    state: &DaemonState,
    effective: Effective,
    result: Result<Box<serde_json::value::RawValue>, DispatchError>,
    idempotency_key: Option<&str>,
) -> (u16, String) {
    let descriptor = effective.descriptor;
    let result = match result {
        Ok(data) => budget::fit(&state.validators, effective, &data, idempotency_key),
        Err(DispatchError::Action(error)) => Err(error),
        Err(DispatchError::Decode(cause)) => {
            tracing::debug!(action = %descriptor.id.key(), error = %cause, "validated input does not fit the typed request");
            Err(ActionError::unrepresentable_input())
        }
        Err(DispatchError::Encode(_)) => Err(budget::unserializable(&budget::Builtin {
            catalog: &state.validators,
            descriptor: effective,
        })),
        Err(DispatchError::NotOwned(id)) => {
            tracing::error!(incident_id = wire::observe::incident_id().unwrap_or_default(), action = %id.key(), "an action was dispatched to another owner");
            Err(ActionError::new(
                ErrorCode::InternalError,
                "the daemon failed to handle this request",
            ))
        }
    };
    match result {
        Ok(envelope) => (200, envelope + "\n"),
        Err(error) => wire::render(&Err(error)),
    }
}

/// A daemon-owned action: its local owner answers; a mutation with a selector runs once and is
/// replayed after (the server's idempotency rules, kept by the daemon).
async fn daemon_owned(
    state: &DaemonState,
    caller: &DaemonCaller,
    effective: Effective,
    input: serde_json::Value,
    idempotency_key: Option<&str>,
) -> (u16, String) {
    let descriptor = effective.descriptor;
    let run = |input| async {
        let result = dispatch_daemon(state.agents.as_ref(), caller, descriptor.id, input).await;
        answer(state, effective, result, idempotency_key)
    };
    let Some(key) = idempotency_key else {
        return run(input).await;
    };
    let action = descriptor.id.key();
    let fingerprint: [u8; 32] =
        Sha256::digest(serde_json::to_vec(&input).expect("a Value always serializes")).into();
    let record = (caller.agent_id.as_str(), action.as_str(), key);
    let now = crate::clock::Clock::default().now_ms();
    match state.replays.claim(record, fingerprint, now) {
        Claim::Acquired => {
            let (status, body) = run(input).await;
            state.replays.finish(record, status, &body);
            (status, body)
        }
        Claim::Done { status, body } => (status, body),
        Claim::Mismatch => wire::render(&Err(ActionError::new(
            ErrorCode::IdempotencyKeyReused,
            format!("`{key}` was already used with another payload for `{action}`"),
        )
        .with_next("use a new `requestId` for a different request"))),
        Claim::InProgress => wire::render(&Err(ActionError::new(
            ErrorCode::IdempotencyInProgress,
            format!("the first request with `{key}` for `{action}` has not finished"),
        )
        .with_next("retry the same request later; it will replay the first result"))),
    }
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
            "exec",
            "catalog",
            (&server_id, &agent_id),
            &headers,
            started,
        ),
    }
}
