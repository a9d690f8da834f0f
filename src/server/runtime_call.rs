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
use super::store::{Claim, DeviceIdentity, Principal};
use super::{audit, auth, failure};
use crate::contract::ActionError;
use crate::telemetry::request;
use crate::wire;
use opentelemetry::KeyValue;

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
    verify_device(state, server_id, None, headers)
        .await
        .map(|_| ())
}

/// The person behind a human API request: the device credential authenticated and bound to the
/// path's workspace; its human is who the request acts as, whatever the body says. The same
/// uniform 403.
pub async fn authenticate_person(
    state: &AppState,
    server_id: &str,
    headers: &HeaderMap,
) -> Result<DeviceIdentity, ActionError> {
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
) -> Result<DeviceIdentity, ActionError> {
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
    // A verified device's hop context is the parent of this request's span.
    if request::is_traced() {
        request::trust_parent();
        request::set([
            KeyValue::new("agentteam.server_id", server_id.to_string()),
            KeyValue::new("agentteam.device_id", device.device_id.clone()),
        ]);
        if let Some(agent_id) = agent_id {
            request::set([KeyValue::new("agentteam.agent_id", agent_id.to_string())]);
        }
    }
    Ok(device)
}

/// How a request's idempotency receipt is kept with its effects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// The effects are the store's: the claim, the effects and the receipt commit in one
    /// transaction (`Store::atomically`), and a failure rolls all of it back, so the key is free
    /// again and a repeat runs anew.
    Atomic,
    /// The effects are a provider's, outside the store: the claim commits first, then the
    /// answer, whatever it is (a crash in between leaves the key in progress until its lease).
    Separate,
}

/// Runs `execute` and answers with its envelope, written by `render`; with an idempotency
/// `selector`, at most once per `(principal, action, selector)` (an agent's, or a person's on the
/// human API), the request's time `now_ms`: a repeat replays the first answer,
/// another payload is `idempotency_key_reused`, a repeat while the first runs is
/// `idempotency_in_progress`. `receipt` says how the answer is kept with the effects. A
/// `mutation` whose effects are the store's ([`Receipt::Atomic`]) commits them with its audit
/// record, or not at all.
#[allow(clippy::too_many_arguments)]
pub async fn once<F, Fut, T>(
    state: &AppState,
    principal: Principal<'_>,
    now_ms: i64,
    action: &str,
    mutation: bool,
    selector: Option<String>,
    input: &serde_json::Value,
    receipt: Receipt,
    render: fn(&Result<T, ActionError>) -> (u16, String),
    execute: F,
) -> Result<Response, ActionError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, ActionError>>,
{
    if mutation {
        audit::mutation();
    }
    let Some(key) = selector else {
        if mutation && receipt == Receipt::Atomic {
            // Boxed, as the keyed path: the transaction is a large future that a read never
            // builds.
            return Box::pin(recorded_with_effects(state, render, execute)).await;
        }
        let (status, body) = render(&execute().await);
        return Ok(wire::raw_json_response(status, body));
    };
    // Boxed: the claim's transaction is a large future, and a call without a selector (every
    // read) would otherwise carry it in its own and move it with every request.
    Box::pin(keyed(
        state, principal, now_ms, action, key, input, receipt, render, execute,
    ))
    .await
}

/// [`once`] with its selector `key`.
#[allow(clippy::too_many_arguments)]
async fn keyed<F, Fut, T>(
    state: &AppState,
    principal: Principal<'_>,
    now_ms: i64,
    action: &str,
    key: String,
    input: &serde_json::Value,
    receipt: Receipt,
    render: fn(&Result<T, ActionError>) -> (u16, String),
    execute: F,
) -> Result<Response, ActionError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, ActionError>>,
{
    // The selector is scoped by principal and action; the fingerprint is the canonical input.
    let fingerprint = Sha256::digest(serde_json::to_vec(input).expect("a Value always serializes"));
    let store = &state.store;
    let claim = || {
        store.claim_idempotent(
            principal,
            action,
            &key,
            &fingerprint,
            now_ms,
            now_ms - IDEMPOTENCY_RETENTION_MS,
        )
    };
    let answered = match receipt {
        Receipt::Atomic => {
            let answered = store
                .atomically(|| async {
                    match claim().await? {
                        Claim::Acquired => {
                            let (status, body) = render(&execute().await);
                            // Only a success is the key's answer: a failure leaves nothing behind.
                            let applied = (200..300).contains(&status);
                            if applied {
                                store
                                    .finish_idempotent(principal, action, &key, status, &body)
                                    .await?;
                                audit::write_in_transaction(store).await?;
                            }
                            Ok((Ok((status, body)), applied))
                        }
                        other => Ok((Err(other), false)),
                    }
                })
                .await
                .map_err(failure::store)?;
            // A success committed its effects, its receipt and its audit record.
            if matches!(&answered, Ok((status, _)) if (200..300).contains(status)) {
                audit::committed();
                #[cfg(debug_assertions)]
                fault::after_commit(action);
            }
            answered
        }
        Receipt::Separate => match claim().await.map_err(failure::store)? {
            Claim::Acquired => {
                let (status, body) = render(&execute().await);
                #[cfg(debug_assertions)]
                fault::after_commit(action);
                store
                    .finish_idempotent(principal, action, &key, status, &body)
                    .await
                    .map_err(failure::store)?;
                Ok((status, body))
            }
            other => Err(other),
        },
    };
    match answered {
        Ok((status, body)) => Ok(wire::raw_json_response(status, body)),
        Err(Claim::Done { status, response }) => Ok(wire::raw_json_response(status, response)),
        Err(Claim::Mismatch) => Err(ActionError::idempotency_key_reused(&key, action)),
        Err(Claim::InProgress) => Err(ActionError::idempotency_in_progress(&key, action)),
        Err(Claim::Acquired) => unreachable!("an acquired claim answers"),
    }
}

/// A mutation without a selector: its effects and its audit record in one transaction, which a
/// failure rolls back whole.
async fn recorded_with_effects<F, Fut, T>(
    state: &AppState,
    render: fn(&Result<T, ActionError>) -> (u16, String),
    execute: F,
) -> Result<Response, ActionError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, ActionError>>,
{
    let store = &state.store;
    let (status, body) = store
        .atomically(|| async {
            let (status, body) = render(&execute().await);
            let applied = (200..300).contains(&status);
            if applied {
                audit::write_in_transaction(store).await?;
            }
            Ok(((status, body), applied))
        })
        .await
        .map_err(failure::store)?;
    if (200..300).contains(&status) {
        audit::committed();
    }
    Ok(wire::raw_json_response(status, body))
}

/// A test-only fault point of debug builds: `AGENTTEAM_FAULT_KILL_AFTER_COMMIT=<action>` (e.g.
/// `task.create`) kills the server with SIGKILL right after the effects of a request of that
/// action with a selector were committed, before anything else: a crash between a mutation's
/// commit and its answer (with a separate receipt, before the receipt too).
#[cfg(debug_assertions)]
mod fault {
    pub fn after_commit(action: &str) {
        static ACTION: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let armed = ACTION.get_or_init(|| std::env::var("AGENTTEAM_FAULT_KILL_AFTER_COMMIT").ok());
        if armed.as_deref() == Some(action) {
            use crate::platform::process::{Pid, Signal, signal};
            let me = Pid::new(std::process::id()).expect("this process has an id");
            let _ = signal(me, Signal::Kill);
        }
    }
}
