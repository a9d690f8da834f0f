//! The operator API: enough to set up a workspace by hand or from a test. Every route requires
//! the operator token of this server start (`Authorization: Bearer ato_…`).
//!
//! `POST /admin/workspaces`, then under `/admin/workspaces/{workspaceId}`: `humans`, `agents`,
//! `devices` (returns the device credential once), `channels`, `channels/{channelId}/threads`,
//! `channels/{channelId}/members`, `dms` (the direct conversation of two members, created once),
//! `teams`, and `messages` (a human posts in a channel, dm or thread they belong to, optionally with
//! attachments).

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::AppState;
use super::actions::internal;
use super::auth::{hash_secret, random_secret};
use super::store::{MAX_ATTACHMENTS, NewAttachment};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::wire;
use base64::Engine;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/workspaces", post(create_workspace))
        .route("/admin/stats", axum::routing::get(stats))
        .route("/admin/workspaces/{workspaceId}/humans", post(create_human))
        .route("/admin/workspaces/{workspaceId}/agents", post(create_agent))
        .route(
            "/admin/workspaces/{workspaceId}/devices",
            post(create_device),
        )
        .route(
            "/admin/workspaces/{workspaceId}/channels",
            post(create_channel),
        )
        .route(
            "/admin/workspaces/{workspaceId}/channels/{channelId}/threads",
            post(create_thread),
        )
        .route(
            "/admin/workspaces/{workspaceId}/channels/{channelId}/members",
            post(add_channel_member),
        )
        .route("/admin/workspaces/{workspaceId}/dms", post(open_dm))
        .route("/admin/workspaces/{workspaceId}/teams", post(create_team))
        .route(
            "/admin/workspaces/{workspaceId}/messages",
            post(post_message),
        )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewWorkspace {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewHuman {
    handle: String,
    display_name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewAgent {
    owner_human_id: String,
    handle: String,
    display_name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewDevice {
    human_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewChannel {
    name: String,
    #[serde(default)]
    members: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewThread {
    title: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewMember {
    member_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewTeam {
    handle: String,
    display_name: String,
    #[serde(default)]
    members: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewMessage {
    author_human_id: String,
    /// A channel or dm id.
    channel_id: String,
    #[serde(default)]
    thread_id: Option<String>,
    content: String,
    #[serde(default)]
    attachments: Vec<NewAttachmentBody>,
}

/// One attachment: its bytes as UTF-8 `text` or as standard `base64`, exactly one of them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewAttachmentBody {
    name: String,
    media_type: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
}

/// The largest attachment the operator API stores.
const MAX_ATTACHMENT_BYTES: usize = 1024 * 1024;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewDm {
    member_ids: [String; 2],
}

/// Authenticates the operator, then decodes the body into `T`.
async fn admit<T: DeserializeOwned>(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, ActionError> {
    let token = wire::bearer(headers).ok_or_else(super::runtime_api::forbidden)?;
    if !state.operator.matches(token) {
        return Err(super::runtime_api::forbidden());
    }
    let value = wire::read_json_body(headers, body).await?;
    serde_json::from_value(value)
        .map_err(|e| ActionError::new(ErrorCode::ValidationFailed, format!("invalid request: {e}")))
}

fn respond(result: Result<Value, ActionError>) -> Response {
    match result {
        Ok(data) => wire::success_response(data),
        Err(error) => wire::error_response(&error),
    }
}

fn check_name(field: &str, value: &str, max: usize) -> Result<(), ActionError> {
    if value.trim().is_empty() || value.chars().count() > max {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("`{field}` must be 1 to {max} characters"),
        ));
    }
    Ok(())
}

fn check_handle(value: &str) -> Result<(), ActionError> {
    let valid = value.len() <= 32
        && value.starts_with(|c: char| c.is_ascii_lowercase())
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if valid {
        Ok(())
    } else {
        Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!(
                "`handle` must match ^[a-z][a-z0-9-]{{0,31}}$, got `{}`",
                value.chars().take(40).collect::<String>()
            ),
        ))
    }
}

fn taken(what: &str, value: &str) -> ActionError {
    ActionError::new(
        ErrorCode::InvalidState,
        format!("{what} `{value}` already exists in this workspace"),
    )
}

async fn known_workspace(state: &AppState, workspace_id: &str) -> Result<(), ActionError> {
    if state
        .store
        .workspace_exists(workspace_id)
        .await
        .map_err(internal)?
    {
        Ok(())
    } else {
        Err(ActionError::new(
            ErrorCode::NotFound,
            format!("no workspace `{workspace_id}`"),
        ))
    }
}

/// At most this many members are named in one request.
const MAX_MEMBERS: usize = 1000;

/// `human_id` is a human of `workspace_id`.
async fn known_human(
    state: &AppState,
    workspace_id: &str,
    human_id: &str,
) -> Result<(), ActionError> {
    if state
        .store
        .human_workspace(human_id)
        .await
        .map_err(internal)?
        .as_deref()
        == Some(workspace_id)
    {
        Ok(())
    } else {
        Err(ActionError::new(
            ErrorCode::NotFound,
            format!("no human `{human_id}` in this workspace"),
        ))
    }
}

/// At most [`MAX_MEMBERS`] ids in one request.
fn check_member_count(members: &[String]) -> Result<(), ActionError> {
    if members.len() > MAX_MEMBERS {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("`members` holds at most {MAX_MEMBERS} ids"),
        ));
    }
    Ok(())
}

/// Each id is a human or agent of `workspace_id`.
async fn known_members(
    state: &AppState,
    workspace_id: &str,
    members: &[String],
) -> Result<(), ActionError> {
    for member in members {
        if !state
            .store
            .is_workspace_member(workspace_id, member)
            .await
            .map_err(internal)?
        {
            return Err(ActionError::new(
                ErrorCode::NotFound,
                format!("no human or agent `{member}` in this workspace"),
            ));
        }
    }
    Ok(())
}

async fn create_workspace(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewWorkspace { name } = admit(&state, &headers, body).await?;
            check_name("name", &name, 200)?;
            let id = state
                .store
                .create_workspace(&name, state.clock.now_ms())
                .await
                .map_err(internal)?;
            Ok(json!({ "workspaceId": id }))
        }
        .await,
    )
}

async fn create_human(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewHuman {
                handle,
                display_name,
            } = admit(&state, &headers, body).await?;
            check_handle(&handle)?;
            check_name("displayName", &display_name, 200)?;
            known_workspace(&state, &workspace_id).await?;
            let id = state
                .store
                .create_human(&workspace_id, &handle, &display_name, state.clock.now_ms())
                .await
                .map_err(internal)?
                .ok_or_else(|| taken("human", &handle))?;
            Ok(json!({ "humanId": id }))
        }
        .await,
    )
}

async fn create_agent(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewAgent {
                owner_human_id,
                handle,
                display_name,
            } = admit(&state, &headers, body).await?;
            check_handle(&handle)?;
            check_name("displayName", &display_name, 200)?;
            known_workspace(&state, &workspace_id).await?;
            known_human(&state, &workspace_id, &owner_human_id).await?;
            let id = state
                .store
                .create_agent(
                    &workspace_id,
                    &owner_human_id,
                    &handle,
                    &display_name,
                    state.clock.now_ms(),
                )
                .await
                .map_err(internal)?
                .ok_or_else(|| taken("agent", &handle))?;
            Ok(json!({ "agentId": id }))
        }
        .await,
    )
}

async fn create_device(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewDevice { human_id } = admit(&state, &headers, body).await?;
            known_human(&state, &workspace_id, &human_id).await?;
            let secret = random_secret();
            let id = state
                .store
                .create_device(&human_id, &hash_secret(&secret), state.clock.now_ms())
                .await
                .map_err(internal)?;
            Ok(json!({ "deviceId": id, "credential": format!("{id}.{secret}") }))
        }
        .await,
    )
}

async fn create_channel(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewChannel { name, members } = admit(&state, &headers, body).await?;
            check_handle(&name).map_err(|_| {
                ActionError::new(
                    ErrorCode::ValidationFailed,
                    "`name` must match ^[a-z][a-z0-9-]{0,31}$",
                )
            })?;
            check_member_count(&members)?;
            known_workspace(&state, &workspace_id).await?;
            known_members(&state, &workspace_id, &members).await?;
            let id = state
                .store
                .create_channel(&workspace_id, &name, &members, state.clock.now_ms())
                .await
                .map_err(internal)?
                .ok_or_else(|| taken("channel", &name))?;
            Ok(json!({ "channelId": id }))
        }
        .await,
    )
}

async fn create_thread(
    State(state): State<AppState>,
    Path((workspace_id, channel_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewThread { title } = admit(&state, &headers, body).await?;
            check_name("title", &title, 200)?;
            if state
                .store
                .channel_workspace(&channel_id)
                .await
                .map_err(internal)?
                .as_deref()
                != Some(workspace_id.as_str())
            {
                return Err(ActionError::new(
                    ErrorCode::NotFound,
                    format!("no channel `{channel_id}` in this workspace"),
                ));
            }
            let id = state
                .store
                .create_thread(&channel_id, &title, state.clock.now_ms())
                .await
                .map_err(internal)?;
            Ok(json!({ "threadId": id }))
        }
        .await,
    )
}

async fn create_team(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewTeam {
                handle,
                display_name,
                members,
            } = admit(&state, &headers, body).await?;
            check_handle(&handle)?;
            check_name("displayName", &display_name, 200)?;
            check_member_count(&members)?;
            known_workspace(&state, &workspace_id).await?;
            known_members(&state, &workspace_id, &members).await?;
            let mut typed = Vec::with_capacity(members.len());
            for member in members {
                let kind = if member.starts_with("hum_") {
                    "human"
                } else {
                    "agent"
                };
                typed.push((kind.to_string(), member));
            }
            let id = state
                .store
                .create_team(
                    &workspace_id,
                    &handle,
                    &display_name,
                    &typed,
                    state.clock.now_ms(),
                )
                .await
                .map_err(internal)?
                .ok_or_else(|| taken("team", &handle))?;
            Ok(json!({ "teamId": id }))
        }
        .await,
    )
}

/// A human posts a message in a channel (or one of its threads) they belong to.
async fn post_message(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewMessage {
                author_human_id,
                channel_id,
                thread_id,
                content,
                attachments,
            } = admit(&state, &headers, body).await?;
            check_name("content", &content, 4000)?;
            let attachments = decode_attachments(attachments)?;
            let membership = match &thread_id {
                Some(thread_id) => {
                    state
                        .store
                        .thread_for_member(&workspace_id, &author_human_id, thread_id)
                        .await
                }
                None => {
                    state
                        .store
                        .channel_for_member(&workspace_id, &author_human_id, &channel_id)
                        .await
                }
            }
            .map_err(internal)?
            .filter(|m| m.channel_id == channel_id)
            .ok_or_else(|| {
                ActionError::new(
                    ErrorCode::NotFound,
                    "no such channel or thread with this human as a member",
                )
            })?;
            let (id, attachment_ids) = state
                .store
                .post_message(
                    &workspace_id,
                    &membership,
                    &author_human_id,
                    &content,
                    &attachments,
                    state.clock.now_ms(),
                )
                .await
                .map_err(internal)?;
            Ok(json!({ "messageId": id, "attachmentIds": attachment_ids }))
        }
        .await,
    )
}

fn decode_attachments(
    attachments: Vec<NewAttachmentBody>,
) -> Result<Vec<NewAttachment>, ActionError> {
    if attachments.len() > MAX_ATTACHMENTS {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("a message has at most {MAX_ATTACHMENTS} attachments"),
        ));
    }
    attachments
        .into_iter()
        .map(|a| {
            check_name("name", &a.name, 200)?;
            check_name("mediaType", &a.media_type, 128)?;
            let content = match (a.text, a.base64) {
                (Some(text), None) => text.into_bytes(),
                (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|_| {
                        ActionError::new(
                            ErrorCode::ValidationFailed,
                            "`base64` is not standard base64",
                        )
                    })?,
                _ => {
                    return Err(ActionError::new(
                        ErrorCode::ValidationFailed,
                        "an attachment has exactly one of `text` and `base64`",
                    ));
                }
            };
            if content.len() > MAX_ATTACHMENT_BYTES {
                return Err(ActionError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("an attachment has at most {MAX_ATTACHMENT_BYTES} bytes"),
                ));
            }
            Ok(NewAttachment {
                name: a.name,
                media_type: a.media_type,
                content,
            })
        })
        .collect()
}

async fn open_dm(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewDm { member_ids } = admit(&state, &headers, body).await?;
            if member_ids[0] == member_ids[1] {
                return Err(ActionError::new(
                    ErrorCode::ValidationFailed,
                    "a direct conversation has two different members",
                ));
            }
            known_members(&state, &workspace_id, &member_ids).await?;
            let id = state
                .store
                .open_dm(
                    &workspace_id,
                    &member_ids[0],
                    &member_ids[1],
                    state.clock.now_ms(),
                )
                .await
                .map_err(internal)?;
            Ok(json!({ "dmId": id, "target": format!("dm:{id}") }))
        }
        .await,
    )
}

async fn add_channel_member(
    State(state): State<AppState>,
    Path((workspace_id, channel_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let NewMember { member_id } = admit(&state, &headers, body).await?;
            if state
                .store
                .channel_workspace(&channel_id)
                .await
                .map_err(internal)?
                .as_deref()
                != Some(workspace_id.as_str())
            {
                return Err(ActionError::new(
                    ErrorCode::NotFound,
                    format!("no channel `{channel_id}` in this workspace"),
                ));
            }
            known_members(&state, &workspace_id, std::slice::from_ref(&member_id)).await?;
            state
                .store
                .add_channel_member(&channel_id, &member_id)
                .await
                .map_err(internal)?;
            Ok(json!({ "channelId": channel_id, "memberId": member_id }))
        }
        .await,
    )
}

/// `GET /admin/stats`: counters an operator (or a test) reads.
async fn stats(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match wire::bearer(&headers) {
        Some(token) if state.operator.matches(token) => {
            wire::success_response(json!({ "runtimeRequests": state.dispatched() }))
        }
        _ => wire::error_response(&super::runtime_api::forbidden()),
    }
}
