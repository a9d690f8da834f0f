//! The steps every runtime route takes, whatever it calls (a catalog action or tool in
//! `runtime_api.rs`, a knowledge tool in `knowledge.rs`, an extension action in
//! `extensions.rs`): the device credential authenticated and bound to the path's workspace (and
//! agent), with one uniform 403 before the body is read; and the execution at most once per
//! `(agent, action, selector)` when the request carries an idempotency selector.

use axum::http::HeaderMap;
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::actions::Caller;
use super::state::AppState;
use super::store::Claim;
use super::{audit, auth, failure};
use crate::contract::ActionError;
use crate::wire;

/// Idempotency records are kept at least this long (then a reused key is a new request).
pub const IDEMPOTENCY_RETENTION_MS: i64 = 24 * 60 * 60 * 1000;

/// The caller of a runtime route: the device credential authenticated and bound to the path's
/// workspace and agent (its human owns the agent), with one uniform 403 for every failure, before
/// the body is read. Counts the request as dispatched.
pub async fn authenticate(
    state: &AppState,
    server_id: &str,
    agent_id: &str,
    headers: &HeaderMap,
) -> Result<Caller, ActionError> {
    verify_device(state, server_id, Some(agent_id), headers).await?;
    state
        .dispatched
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Caller {
        workspace_id: server_id.to_string(),
        agent_id: agent_id.to_string(),
        now_ms: state.clock.now_ms(),
    })
}

/// The device credential authenticated and bound to the path's workspace alone, for a route that
/// names no agent; the same uniform 403. Not counted as dispatched.
pub async fn authenticate_workspace(
    state: &AppState,
    server_id: &str,
    headers: &HeaderMap,
) -> Result<(), ActionError> {
    verify_device(state, server_id, None, headers).await
}

/// The device behind the request's bearer, if it belongs to workspace `server_id` and, given an
/// `agent_id`, its human owns that agent; recorded as verified for the audit trail. Every failure
/// is [`ActionError::forbidden`].
async fn verify_device(
    state: &AppState,
    server_id: &str,
    agent_id: Option<&str>,
    headers: &HeaderMap,
) -> Result<(), ActionError> {
    let credential = wire::bearer(headers).ok_or_else(ActionError::forbidden)?;
    let (device, owns_agent) =
        auth::authenticate_device(&state.store, credential, agent_id.unwrap_or(""))
            .await
            .map_err(failure::store)?
            .ok_or_else(ActionError::forbidden)?;
    if device.workspace_id != server_id || (agent_id.is_some() && !owns_agent) {
        return Err(ActionError::forbidden());
    }
    audit::device_verified(&device.device_id);
    Ok(())
}

/// Runs `execute` and answers with its envelope, written by `render`; with an idempotency
/// `selector`, at most once per `(agent, action, selector)`: a repeat replays the first answer,
/// another payload is `idempotency_key_reused`, a repeat while the first runs is
/// `idempotency_in_progress`.
pub async fn once<F, Fut, T>(
    state: &AppState,
    caller: &Caller,
    action: &str,
    selector: Option<String>,
    input: &serde_json::Value,
    render: fn(&Result<T, ActionError>) -> (u16, String),
    execute: F,
) -> Result<Response, ActionError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, ActionError>>,
{
    let Some(key) = selector else {
        let (status, body) = render(&execute().await);
        return Ok(wire::raw_json_response(status, body));
    };
    // The selector is scoped by agent and action; the fingerprint is the canonical input.
    let fingerprint = Sha256::digest(serde_json::to_vec(input).expect("a Value always serializes"));
    let claim = state
        .store
        .claim_idempotent(
            &caller.agent_id,
            action,
            &key,
            &fingerprint,
            caller.now_ms,
            caller.now_ms - IDEMPOTENCY_RETENTION_MS,
        )
        .await
        .map_err(failure::store)?;
    match claim {
        Claim::Acquired => {
            let (status, body) = render(&execute().await);
            state
                .store
                .finish_idempotent(&caller.agent_id, action, &key, status, &body)
                .await
                .map_err(failure::store)?;
            Ok(wire::raw_json_response(status, body))
        }
        Claim::Done { status, response } => Ok(wire::raw_json_response(status, response)),
        Claim::Mismatch => Err(ActionError::idempotency_key_reused(&key, action)),
        Claim::InProgress => Err(ActionError::idempotency_in_progress(&key, action)),
    }
}
