//! The daemon's HTTP surface on loopback: the Exec route family (for runtimes) and the admin API
//! (for the local human CLI).
//!
//! Loopback is not a trust boundary: every request must name a loopback host (`127.0.0.1`,
//! `localhost`, `[::1]`, any port: a local proxy may forward to us) in `Host`, which a
//! DNS-rebinding page cannot, and carry no `Origin` other than the same origin (`http://` + that
//! host; a page of another site or another local port is refused), or it is refused with 403
//! before any route runs. The daemon serves no pages, so its own origin is never a foreign script.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::agents::{MAX_PROFILES, Profile, Profiles};
use super::auth::{RuntimeAuthorizationStore, Scope};
use super::identity::{Identity, Operator};
use super::runtime::{Dispatcher, LaunchError, LaunchOptions, LaunchRequest};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::wire;
use crate::wire::frame;
use crate::wire::observe::Protocol;

/// Everything the daemon's handlers share.
#[derive(Clone)]
pub struct DaemonState {
    pub dispatcher: Arc<Dispatcher>,
    pub store: Arc<RuntimeAuthorizationStore>,
    pub profiles: Arc<Profiles>,
    pub identity: Arc<Identity>,
    pub operator: Operator,
    /// SHA-256 of this start's admin token.
    pub admin_hash: [u8; 32],
    /// The typed client of the server's runtime action API, acting as this daemon's device.
    pub server: Arc<crate::client::ServerClient>,
    /// Every action's compiled input validator.
    pub catalog: Arc<crate::contract::CompiledCatalog>,
    pub counters: Arc<Counters>,
}

/// Request counters shown by `GET /api/admin/status` (tests use them to prove a request never
/// reached a route).
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests that reached the Exec action route.
    pub exec_requests: std::sync::atomic::AtomicU64,
    /// Requests that reached the MCP routes (before authentication).
    pub mcp_requests: std::sync::atomic::AtomicU64,
}

pub fn router(state: DaemonState) -> Router {
    Router::new()
        .route(
            "/api/internal/exec/servers/{serverId}/agents/{agentId}/catalog",
            get(catalog),
        )
        .route(
            "/api/internal/exec/servers/{serverId}/agents/{agentId}/{domain}/{action}",
            post(super::exec::action),
        )
        .merge(super::mcp::routes(state.clone()))
        .route("/api/admin/status", get(status))
        .route("/api/admin/agents", get(list_agents).post(add_agent))
        .route("/api/admin/agents/{agent}", delete(remove_agent))
        .route("/api/admin/runs", get(list_runs).post(run))
        .fallback(|| async {
            wire::error_response(&ActionError::new(ErrorCode::NotFound, "no such route"))
        })
        .layer(middleware::from_fn(loopback_only))
        .layer(middleware::from_fn_with_state(
            classify as wire::observe::Classify,
            wire::observe::observe,
        ))
        .with_state(state)
}

/// The absolute deadline for receiving a runtime request's body.
pub const BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a runtime request's body was not read; each route answers it in its own protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFailure {
    /// Over `wire::MAX_BODY_BYTES`.
    TooLarge,
    /// The connection failed mid-body.
    Unreadable,
    /// Not complete within [`BODY_DEADLINE`].
    Timeout,
    /// The authorization was revoked while the body arrived.
    Revoked,
}

/// The body of an admitted runtime request (Exec or MCP): bounded in size and time, and
/// abandoned at revocation.
pub async fn read_runtime_body(
    body: Body,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Bytes, BodyFailure> {
    let read = tokio::time::timeout(
        BODY_DEADLINE,
        axum::body::to_bytes(body, wire::MAX_BODY_BYTES),
    );
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
        () = cancel.cancelled() => return Err(BodyFailure::Revoked),
    };
    if cancel.is_cancelled() {
        return Err(BodyFailure::Revoked);
    }
    Ok(bytes)
}

/// The one answer to every refused runtime credential, whatever the reason.
pub fn forbidden() -> Response {
    wire::error_response(&ActionError::new(ErrorCode::Forbidden, "forbidden"))
}

/// The route family and protocol of a daemon path, for the request span and panic answers.
fn classify(path: &str) -> (&'static str, Protocol) {
    if path.starts_with("/api/internal/mcp/") || path.starts_with("/mcp/") {
        ("mcp", Protocol::JsonRpc)
    } else if path.starts_with("/api/internal/exec/") {
        ("exec", Protocol::Envelope)
    } else {
        ("admin", Protocol::Envelope)
    }
}

/// `127.0.0.1`, `localhost` or `[::1]`, with or without a port.
fn is_loopback_authority(authority: &str) -> bool {
    let name = match authority.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => authority,
    };
    matches!(
        name.to_ascii_lowercase().as_str(),
        "127.0.0.1" | "localhost" | "[::1]"
    )
}

/// A loopback `Host`, and no `Origin` or the same-origin one (`http://` + that host).
fn loopback_request(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or("\u{0}"));
    let Some(host) = text(header::HOST).filter(|host| is_loopback_authority(host)) else {
        return false;
    };
    text(header::ORIGIN).is_none_or(|origin| {
        origin
            .strip_prefix("http://")
            .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
    })
}

async fn loopback_only(request: Request, next: Next) -> Response {
    if !loopback_request(request.headers()) {
        return wire::error_response(&ActionError::new(
            ErrorCode::Forbidden,
            "requests must come from this machine's loopback, not a browser",
        ));
    }
    next.run(request).await
}

/// `GET …/catalog`: the authorization's immutable `RuntimeCatalog`.
async fn catalog(
    State(state): State<DaemonState>,
    Path((server_id, agent_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let Ok(authorization) =
        state
            .store
            .verify(wire::bearer(&headers), &server_id, &agent_id, Scope::Exec)
    else {
        return forbidden();
    };
    let Some(_admission) = state.store.admit(&authorization) else {
        return wire::error_response(&ActionError::new(
            ErrorCode::AdmissionLimited,
            "too many requests in flight for this runtime; retry shortly",
        ));
    };
    wire::success_response(authorization.catalog.json.clone())
}

fn admin_ok(state: &DaemonState, headers: &HeaderMap) -> bool {
    wire::bearer(headers).is_some_and(|token| {
        Sha256::digest(token.as_bytes())
            .as_slice()
            .ct_eq(&state.admin_hash)
            .into()
    })
}

fn admin_denied() -> Response {
    wire::error_response(&ActionError::new(
        ErrorCode::Forbidden,
        "the admin token is missing or wrong",
    ))
}

async fn status(State(state): State<DaemonState>, headers: HeaderMap) -> Response {
    if !admin_ok(&state, &headers) {
        return admin_denied();
    }
    wire::success_response(json!({
        "workspaceId": state.identity.workspace_id,
        "agents": state.profiles.len(),
        "leases": state.dispatcher.leases(),
        "authorizations": state.store.registered(),
        "execRequests": state.counters.exec_requests.load(std::sync::atomic::Ordering::Relaxed),
        "mcpRequests": state.counters.mcp_requests.load(std::sync::atomic::Ordering::Relaxed),
        "acquiredRequests": state.store.acquired(),
    }))
}

async fn list_agents(State(state): State<DaemonState>, headers: HeaderMap) -> Response {
    if !admin_ok(&state, &headers) {
        return admin_denied();
    }
    wire::success_response(json!({ "agents": state.profiles.list() }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewAgent {
    handle: String,
    #[serde(default)]
    display_name: Option<String>,
}

async fn add_agent(State(state): State<DaemonState>, headers: HeaderMap, body: Body) -> Response {
    if !admin_ok(&state, &headers) {
        return admin_denied();
    }
    let result = async {
        let value = wire::read_json_body(&headers, body).await?;
        let NewAgent { handle, display_name } = serde_json::from_value(value).map_err(|e| ActionError::new(ErrorCode::ValidationFailed, format!("invalid request: {e}")))?;
        if state.profiles.len() >= MAX_PROFILES {
            return Err(ActionError::new(ErrorCode::InvalidState, format!("this daemon already has {MAX_PROFILES} agents")));
        }
        if state.profiles.get(&handle).is_some() {
            return Err(ActionError::new(ErrorCode::InvalidState, format!("agent `{handle}` already exists")));
        }
        let display_name = display_name.unwrap_or_else(|| handle.clone());
        let base = format!("/admin/workspaces/{}", state.identity.workspace_id);
        let created = state
            .operator
            .post(&format!("{base}/agents"), json!({"ownerHumanId": state.identity.human_id, "handle": handle, "displayName": display_name}))
            .await
            .map_err(|e| ActionError::new(ErrorCode::UpstreamFailed, e.to_string()))?;
        let agent_id = created_agent_id(&created).ok_or_else(|| {
            ActionError::new(ErrorCode::UpstreamFailed, "the server's answer names no valid `agentId`")
        })?;
        state
            .operator
            .post(&format!("{base}/channels/{}/members", state.identity.channel_id), json!({"memberId": agent_id}))
            .await
            .map_err(|e| ActionError::new(ErrorCode::UpstreamFailed, e.to_string()))?;
        let profile = Profile { agent_id, handle, display_name };
        state.profiles.add(profile.clone()).map_err(|e| {
            tracing::error!(incident_id = crate::wire::observe::incident_id().unwrap_or_default(), error = %e, "cannot save agent profiles");
            ActionError::new(ErrorCode::InternalError, "cannot save the agent profile")
        })?;
        Ok(json!({ "agent": profile, "channelId": state.identity.channel_id }))
    }
    .await;
    match result {
        Ok(data) => wire::success_response(data),
        Err(error) => wire::error_response(&error),
    }
}

/// The `agentId` of the server's answer to an agent creation, if it is a well-formed id.
fn created_agent_id(created: &serde_json::Value) -> Option<String> {
    created["agentId"]
        .as_str()
        .filter(|id| {
            id.strip_prefix("agt_").is_some_and(|rest| {
                (8..=64).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            })
        })
        .map(str::to_string)
}

async fn remove_agent(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !admin_ok(&state, &headers) {
        return admin_denied();
    }
    match state.profiles.remove(&agent) {
        Ok(Some(profile)) => wire::success_response(json!({ "removed": profile })),
        Ok(None) => wire::error_response(&ActionError::new(
            ErrorCode::NotFound,
            format!(
                "no local agent `{}`",
                agent.chars().take(64).collect::<String>()
            ),
        )),
        Err(e) => {
            tracing::error!(incident_id = crate::wire::observe::incident_id().unwrap_or_default(), error = %e, "cannot save agent profiles");
            wire::error_response(&ActionError::new(
                ErrorCode::InternalError,
                "cannot save the agent profiles",
            ))
        }
    }
}

/// `GET /api/admin/runs`: every live launch.
async fn list_runs(State(state): State<DaemonState>, headers: HeaderMap) -> Response {
    if !admin_ok(&state, &headers) {
        return admin_denied();
    }
    wire::success_response(json!({ "runs": state.dispatcher.runs() }))
}

/// `POST /api/admin/runs`: launches a runtime and streams its output as NDJSON frames
/// (`{"stdout": base64}`, `{"stderr": base64}`, then `{"exit": code}`). Closing the stream
/// stops the runtime.
async fn run(State(state): State<DaemonState>, headers: HeaderMap, body: Body) -> Response {
    if !admin_ok(&state, &headers) {
        return admin_denied();
    }
    let request = async {
        let value = wire::read_json_body(&headers, body).await?;
        let options: LaunchOptions = serde_json::from_value(value).map_err(|e| {
            ActionError::new(ErrorCode::ValidationFailed, format!("invalid request: {e}"))
        })?;
        options
            .check()
            .map_err(|message| ActionError::new(ErrorCode::ValidationFailed, message))?;
        let profile = state.profiles.get(&options.agent).ok_or_else(|| {
            ActionError::new(
                ErrorCode::NotFound,
                format!(
                    "no local agent `{}`",
                    options.agent.chars().take(64).collect::<String>()
                ),
            )
            .with_next("add it with `agentteam agent add <handle>`")
        })?;
        if !options.workdir.is_dir() {
            return Err(ActionError::new(
                ErrorCode::ValidationFailed,
                format!("workdir `{}` is not a directory", options.workdir.display()),
            ));
        }
        Ok(LaunchRequest {
            server_id: state.identity.workspace_id.clone(),
            agent_id: profile.agent_id,
            options,
        })
    }
    .await;
    let request = match request {
        Ok(request) => request,
        Err(error) => return wire::error_response(&error),
    };
    let outputs = match state.dispatcher.launch(request).await {
        Ok(outputs) => outputs,
        Err(error) => {
            let code = match error {
                LaunchError::TooManyRuntimes => ErrorCode::AdmissionLimited,
                LaunchError::SessionRunning(_) | LaunchError::SessionBusy(_) => {
                    ErrorCode::InvalidState
                }
                LaunchError::Spawn { .. } => ErrorCode::ValidationFailed,
                LaunchError::Credential(_) | LaunchError::ShuttingDown => ErrorCode::InternalError,
            };
            if matches!(error, LaunchError::Credential(_)) {
                tracing::error!(incident_id = crate::wire::observe::incident_id().unwrap_or_default(), error = %error, cause = ?std::error::Error::source(&error), "launch aborted");
            }
            let message = match &error {
                LaunchError::Spawn { program, source } => {
                    format!("cannot start `{program}`: {source}")
                }
                other => other.to_string(),
            };
            return wire::error_response(&ActionError::new(code, message));
        }
    };
    let frames = ReceiverStream::new(outputs)
        .map(|output| Ok::<Bytes, std::convert::Infallible>(Bytes::from(frame::encode(&output))));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(frames),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::created_agent_id;

    /// Review finding 8: an answer without a usable `agentId` never becomes a local profile.
    #[test]
    fn an_answer_without_a_valid_agent_id_is_refused() {
        assert_eq!(
            created_agent_id(&json!({"agentId": "agt_0123456789"})).as_deref(),
            Some("agt_0123456789")
        );
        for answer in [
            json!({}),
            json!({"agentId": ""}),
            json!({"agentId": 7}),
            json!({"agentId": "agt_"}),
            json!({"agentId": "hum_0123456789"}),
            json!({"agentId": "agt_01234567/../x"}),
        ] {
            assert_eq!(created_agent_id(&answer), None, "{answer}");
        }
    }
}
