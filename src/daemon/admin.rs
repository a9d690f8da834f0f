//! The local admin API, for the human's CLI on this machine: status, local agents and runtime
//! launches. Every route requires this start's admin token (`<state dir>/admin.token`), checked
//! by the [`AdminAuth`] extractor before anything else; the token never reaches a runtime.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::agents::{MAX_PROFILES, Profile};
use super::runtime::{LaunchError, LaunchOptions, LaunchRequest};
use super::state::DaemonState;
use crate::contract::error::ErrorCode;
use crate::contract::{ActionError, ActionResult};
use crate::wire::{self, Data, Refusal, frame};

/// The caller presented this start's admin token.
pub struct AdminAuth;

impl FromRequestParts<DaemonState> for AdminAuth {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &DaemonState) -> Result<Self, Refusal> {
        let valid = wire::bearer(&parts.headers).is_some_and(|token| {
            Sha256::digest(token.as_bytes())
                .as_slice()
                .ct_eq(&state.admin_hash)
                .into()
        });
        if valid {
            Ok(AdminAuth)
        } else {
            Err(
                ActionError::new(ErrorCode::Forbidden, "the admin token is missing or wrong")
                    .into(),
            )
        }
    }
}

/// An admin request's decoded body, read only after the admin token was checked.
pub struct AdminJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<DaemonState> for AdminJson<T> {
    type Rejection = Refusal;

    async fn from_request(request: Request, state: &DaemonState) -> Result<Self, Refusal> {
        let (mut parts, body) = request.into_parts();
        AdminAuth::from_request_parts(&mut parts, state).await?;
        let value = wire::body::read_json(&parts.headers, body, None)
            .await
            .map_err(|failure| failure.error())?;
        serde_json::from_value(value).map(AdminJson).map_err(|e| {
            ActionError::new(ErrorCode::ValidationFailed, format!("invalid request: {e}")).into()
        })
    }
}

type Answer = Result<Data, Refusal>;

/// `GET /api/admin/status`.
pub async fn status(State(state): State<DaemonState>, _: AdminAuth) -> Answer {
    let counters = &state.counters;
    let load =
        |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    Ok(Data(json!({
        "workspaceId": state.identity.workspace_id,
        "agents": state.profiles.len(),
        "leases": state.dispatcher.leases(),
        "authorizations": state.authorizations.registered(),
        "execRequests": load(&counters.exec_requests),
        "mcpRequests": load(&counters.mcp_requests),
        "acquiredRequests": state.authorizations.acquired(),
    })))
}

/// `GET /api/admin/agents`.
pub async fn list_agents(State(state): State<DaemonState>, _: AdminAuth) -> Answer {
    Ok(Data(json!({ "agents": state.profiles.list() })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewAgent {
    handle: String,
    #[serde(default)]
    display_name: Option<String>,
}

/// `POST /api/admin/agents`: registers the agent on the server (and in the human's channel), then
/// here.
pub async fn add_agent(
    State(state): State<DaemonState>,
    AdminJson(NewAgent {
        handle,
        display_name,
    }): AdminJson<NewAgent>,
) -> Answer {
    if state.profiles.len() >= MAX_PROFILES {
        return Err(ActionError::new(
            ErrorCode::InvalidState,
            format!("this daemon already has {MAX_PROFILES} agents"),
        )
        .into());
    }
    if state.profiles.get(&handle).is_some() {
        return Err(ActionError::new(
            ErrorCode::InvalidState,
            format!("agent `{handle}` already exists"),
        )
        .into());
    }
    let display_name = display_name.unwrap_or_else(|| handle.clone());
    let upstream =
        |e: super::error::DaemonError| ActionError::new(ErrorCode::UpstreamFailed, e.to_string());
    let base = format!("/admin/workspaces/{}", state.identity.workspace_id);
    let created = state
        .operator
        .post(
            &format!("{base}/agents"),
            json!({"ownerHumanId": state.identity.human_id, "handle": handle, "displayName": display_name}),
        )
        .await
        .map_err(upstream)?;
    let agent_id = created_agent_id(&created).ok_or_else(|| {
        ActionError::new(
            ErrorCode::UpstreamFailed,
            "the server's answer names no valid `agentId`",
        )
    })?;
    state
        .operator
        .post(
            &format!("{base}/channels/{}/members", state.identity.channel_id),
            json!({"memberId": agent_id}),
        )
        .await
        .map_err(upstream)?;
    let profile = Profile {
        agent_id,
        handle,
        display_name,
    };
    state.profiles.add(profile.clone()).map_err(saving_failed)?;
    Ok(Data(
        json!({ "agent": profile, "channelId": state.identity.channel_id }),
    ))
}

/// The `agentId` of the server's answer to an agent creation, if it is a well-formed id.
fn created_agent_id(created: &Value) -> Option<String> {
    created["agentId"]
        .as_str()
        .filter(|id| {
            id.strip_prefix("agt_").is_some_and(|rest| {
                (8..=64).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            })
        })
        .map(str::to_string)
}

fn saving_failed(error: super::agents::ProfileError) -> ActionError {
    tracing::error!(incident_id = wire::observe::incident_id().unwrap_or_default(), %error, "cannot save agent profiles");
    ActionError::new(ErrorCode::InternalError, "cannot save the agent profiles")
}

/// `DELETE /api/admin/agents/{agent}` (by id or handle).
pub async fn remove_agent(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    _: AdminAuth,
) -> Answer {
    match state.profiles.remove(&agent).map_err(saving_failed)? {
        Some(profile) => Ok(Data(json!({ "removed": profile }))),
        None => Err(ActionError::new(
            ErrorCode::NotFound,
            format!(
                "no local agent `{}`",
                agent.chars().take(64).collect::<String>()
            ),
        )
        .into()),
    }
}

/// `GET /api/admin/runs`: every live launch.
pub async fn list_runs(State(state): State<DaemonState>, _: AdminAuth) -> Answer {
    Ok(Data(json!({ "runs": state.dispatcher.runs() })))
}

/// `POST /api/admin/runs`: launches a runtime and streams its output as NDJSON frames
/// (`wire::frame`). Closing the stream stops the runtime.
pub async fn launch(
    State(state): State<DaemonState>,
    AdminJson(options): AdminJson<LaunchOptions>,
) -> Response {
    let request = match resolve_launch(&state, options) {
        Ok(request) => request,
        Err(error) => return wire::error_response(&error),
    };
    let outputs = match state.dispatcher.launch(request).await {
        Ok(outputs) => outputs,
        Err(error) => return wire::error_response(&launch_refusal(&error)),
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

/// The launch's own checks, its agent and its working directory.
fn resolve_launch(state: &DaemonState, options: LaunchOptions) -> ActionResult<LaunchRequest> {
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

fn launch_refusal(error: &LaunchError) -> ActionError {
    let code = match error {
        LaunchError::TooManyRuntimes => ErrorCode::AdmissionLimited,
        LaunchError::SessionRunning(_) | LaunchError::SessionBusy(_) => ErrorCode::InvalidState,
        LaunchError::Spawn { .. } => ErrorCode::ValidationFailed,
        LaunchError::Credential(_) | LaunchError::ShuttingDown => ErrorCode::InternalError,
    };
    if let LaunchError::Credential(_) = error {
        tracing::error!(incident_id = wire::observe::incident_id().unwrap_or_default(), %error, cause = ?std::error::Error::source(error), "launch aborted");
    }
    let message = match error {
        LaunchError::Spawn { program, source } => format!("cannot start `{program}`: {source}"),
        other => other.to_string(),
    };
    ActionError::new(code, message)
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
