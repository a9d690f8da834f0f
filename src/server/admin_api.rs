//! The operator API: enough to set up a workspace by hand or from a test. Every route requires
//! the operator token of this server start (`Authorization: Bearer ato_…`).
//!
//! `POST /admin/workspaces`, then under `/admin/workspaces/{workspaceId}`: `humans`, `agents`,
//! `devices` (returns the device credential once), `channels`, `channels/{channelId}/threads`,
//! `channels/{channelId}/members`, `dms` (the direct conversation of two members, created once),
//! `teams`, `messages` (a human posts in a channel, dm or thread they belong to, optionally with
//! attachments), `approvals/list` (a page of the workspace's approvals) and
//! `approvals/{approvalId}/decision` (a human approves or rejects; a waiting workflow step moves
//! on). Extensions: `POST /admin/extensions` publishes a definition's next version,
//! `/admin/extensions/list` lists the current ones; under a workspace, `apps` installs an
//! extension's app with its provider base URL and credential (kept server-side, never echoed),
//! `apps/{extension}/grants` allows an agent to use it, `apps/{extension}/revoke` deletes the
//! credential. Knowledge: `kb/sources` creates a source, `kb/sources/{source}/grants` grants it to
//! a channel or a team, `kb/sources/{source}/documents` adds (or replaces, by path) a document.
//! `GET /admin/stats` reads counters.
//!
//! Each handler takes an [`OperatorJson`] (the operator is authenticated, then the body is read
//! and decoded) and returns a [`Data`] or a [`Refusal`]. Request fields use the contract's types,
//! so a name, a handle or a message is checked against the same schema limits the actions use.

use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::routing::{get, post};
use base64::Engine;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::actions::{Caller, page};
use super::auth::{hash_secret, random_secret};
use super::failure;
use super::state::AppState;
use super::store::{MAX_ATTACHMENTS, MemberKind, NewAttachment, StoreError};
use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::contract::{ActionError, ActionResult};
use crate::wire::{self, Data, Refusal};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/workspaces", post(create_workspace))
        .route("/admin/stats", get(stats))
        .route("/admin/workspaces/{workspaceId}/humans", post(create_human))
        .route("/admin/workspaces/{workspaceId}/agents", post(create_agent))
        .route(
            "/admin/workspaces/{workspaceId}/agents/lookup",
            post(lookup_agents),
        )
        .route(
            "/admin/workspaces/{workspaceId}/agents/{agentId}",
            axum::routing::patch(rename_agent),
        )
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
        .route(
            "/admin/workspaces/{workspaceId}/approvals/list",
            post(list_approvals),
        )
        .route(
            "/admin/workspaces/{workspaceId}/audit/list",
            post(list_audit),
        )
        .route(
            "/admin/workspaces/{workspaceId}/approvals/{approvalId}/decision",
            post(decide_approval),
        )
        .route(
            "/admin/workspaces/{workspaceId}/kb/sources",
            post(create_kb_source),
        )
        .route(
            "/admin/workspaces/{workspaceId}/kb/sources/{sourceId}/grants",
            post(grant_kb_source),
        )
        .route(
            "/admin/workspaces/{workspaceId}/kb/sources/{sourceId}/documents",
            post(put_kb_document),
        )
        .route("/admin/extensions", post(publish_extension))
        .route("/admin/extensions/list", post(list_extensions))
        .route("/admin/workspaces/{workspaceId}/apps", post(install_app))
        .route(
            "/admin/workspaces/{workspaceId}/apps/{extension}/grants",
            post(grant_app),
        )
        .route(
            "/admin/workspaces/{workspaceId}/apps/{extension}/revoke",
            post(revoke_app),
        )
}

/// The operator of this server start; refused with the uniform `forbidden` otherwise.
pub struct OperatorAuth;

impl FromRequestParts<AppState> for OperatorAuth {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        match wire::bearer(&parts.headers) {
            Some(token) if state.operator.matches(token) => {
                super::audit::operator_verified();
                Ok(OperatorAuth)
            }
            _ => Err(ActionError::forbidden().into()),
        }
    }
}

/// An operator request's decoded body: the operator is authenticated before the body is read.
pub struct OperatorJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for OperatorJson<T> {
    type Rejection = Refusal;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Refusal> {
        let (mut parts, body) = request.into_parts();
        OperatorAuth::from_request_parts(&mut parts, state).await?;
        let value = wire::body::read_json(&parts.headers, body, None)
            .await
            .map_err(|failure| failure.error())?;
        serde_json::from_value(value)
            .map(OperatorJson)
            .map_err(|e| {
                ActionError::new(ErrorCode::ValidationFailed, format!("invalid request: {e}"))
                    .into()
            })
    }
}

type Answer = Result<Data, Refusal>;

/// At most this many members are named in one request.
const MAX_MEMBERS: usize = 1000;
/// The largest attachment the operator API stores.
const MAX_ATTACHMENT_BYTES: usize = 1024 * 1024;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewWorkspace {
    name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewHuman {
    handle: t::Handle,
    display_name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewAgent {
    owner_human_id: String,
    handle: t::Handle,
    display_name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewDevice {
    human_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewChannel {
    /// A channel's name is handle-shaped.
    name: t::Handle,
    #[serde(default)]
    members: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewThread {
    title: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewMember {
    member_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewTeam {
    handle: t::Handle,
    display_name: t::Name,
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
    content: t::MessageContent,
    #[serde(default)]
    attachments: Vec<NewAttachmentBody>,
}

/// One attachment: its bytes as UTF-8 `text` or as standard `base64`, exactly one of them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewAttachmentBody {
    name: t::Name,
    media_type: t::AttachmentInfoMediaType,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewDm {
    member_ids: [String; 2],
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApprovalPage {
    #[serde(default)]
    status: Option<t::ApprovalStatus>,
    #[serde(default)]
    limit: Option<t::PageLimit>,
    #[serde(default)]
    cursor: Option<t::Cursor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuditPage {
    #[serde(default)]
    agent_id: Option<t::AgentId>,
    /// Only records from this time on (RFC 3339).
    #[serde(default)]
    since: Option<t::Timestamp>,
    #[serde(default)]
    limit: Option<t::PageLimit>,
    #[serde(default)]
    cursor: Option<t::Cursor>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
enum Decision {
    Approve,
    Reject,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApprovalDecision {
    human_id: String,
    decision: Decision,
    #[serde(default)]
    comment: Option<t::LongText>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewExtensionVersion {
    definition: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Nothing {}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewApp {
    extension: String,
    base_url: String,
    credential: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewGrant {
    agent_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewKbSource {
    name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewKbGrant {
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    team_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewKbDocument {
    /// Where the document came from (a relative file path); a second document at the same path
    /// replaces the first.
    path: String,
    #[serde(default)]
    title: Option<t::Name>,
    body: String,
}

/// The longest document path the knowledge base keeps.
const MAX_KB_PATH: usize = 512;

/// The longest app credential the server stores.
const MAX_CREDENTIAL_BYTES: usize = 4096;

/// At most 64 characters of a caller's identifier, for a message that names it.
fn clip(id: &str) -> String {
    id.chars().take(64).collect()
}

/// Free text must say something: whitespace alone is refused.
fn not_blank(field: &str, value: &str) -> ActionResult<()> {
    if value.trim().is_empty() {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("`{field}` must not be blank"),
        ));
    }
    Ok(())
}

fn taken(what: &str, value: &str) -> ActionError {
    ActionError::new(
        ErrorCode::InvalidState,
        format!("{what} `{value}` already exists in this workspace"),
    )
}

/// The `not_found` every route answers for an id the request's workspace does not hold, naming
/// the noun and (at most 64 characters of) the id.
fn missing(noun: &str, id: &str) -> ActionError {
    ActionError::new(
        ErrorCode::NotFound,
        format!("no {noun} `{}` in this workspace", clip(id)),
    )
}

/// [`missing`] for what is not inside a workspace: a workspace itself, or an extension.
fn unknown(noun: &str, id: &str) -> ActionError {
    ActionError::new(ErrorCode::NotFound, format!("no {noun} `{}`", clip(id)))
}

/// What a route names by id and checks before it acts: how the store finds one in the request's
/// workspace, and how a refusal names it.
trait Noun {
    /// What the store knows about one that exists.
    type Found;

    /// The refusal for an `id` the store does not find.
    fn missing(id: &str) -> ActionError;

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<Self::Found>, StoreError>;
}

/// The request's workspace itself.
struct Workspace;
/// A human of the workspace.
struct Human;
/// A channel of the workspace.
struct Channel;
/// A human or an agent of the workspace; found as its [`MemberKind`].
struct Member;

impl Noun for Workspace {
    type Found = ();

    fn missing(id: &str) -> ActionError {
        unknown("workspace", id)
    }

    async fn find(state: &AppState, _: &str, id: &str) -> Result<Option<()>, StoreError> {
        Ok(state.store.workspace_exists(id).await?.then_some(()))
    }
}

impl Noun for Human {
    type Found = ();

    fn missing(id: &str) -> ActionError {
        missing("human", id)
    }

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<()>, StoreError> {
        let home = state.store.human_workspace(id).await?;
        Ok((home.as_deref() == Some(workspace_id)).then_some(()))
    }
}

impl Noun for Channel {
    type Found = ();

    fn missing(id: &str) -> ActionError {
        missing("channel", id)
    }

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<()>, StoreError> {
        let home = state.store.channel_workspace(id).await?;
        Ok((home.as_deref() == Some(workspace_id)).then_some(()))
    }
}

impl Noun for Member {
    type Found = MemberKind;

    fn missing(id: &str) -> ActionError {
        missing("human or agent", id)
    }

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<MemberKind>, StoreError> {
        state.store.member_kind(workspace_id, id).await
    }
}

/// Each of `ids` (at most [`MAX_MEMBERS`]) as the store finds it in `workspace_id`; the first it
/// does not find is that noun's `not_found`.
async fn known<N: Noun>(
    state: &AppState,
    workspace_id: &str,
    ids: &[impl AsRef<str>],
) -> ActionResult<Vec<N::Found>> {
    if ids.len() > MAX_MEMBERS {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("name at most {MAX_MEMBERS} members in one request"),
        ));
    }
    let mut found = Vec::with_capacity(ids.len());
    for id in ids {
        let id = id.as_ref();
        let one = N::find(state, workspace_id, id)
            .await
            .map_err(failure::store)?
            .ok_or_else(|| N::missing(id))?;
        found.push(one);
    }
    Ok(found)
}

async fn create_workspace(
    State(state): State<AppState>,
    OperatorJson(NewWorkspace { name }): OperatorJson<NewWorkspace>,
) -> Answer {
    not_blank("name", &name)?;
    let id = state
        .store
        .create_workspace(&name, state.clock.now_ms())
        .await
        .map_err(failure::store)?;
    Ok(Data(json!({ "workspaceId": id })))
}

async fn create_human(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(body): OperatorJson<NewHuman>,
) -> Answer {
    let NewHuman {
        handle,
        display_name,
    } = body;
    not_blank("displayName", &display_name)?;
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    let id = state
        .store
        .create_human(&workspace_id, &handle, &display_name, state.clock.now_ms())
        .await
        .map_err(failure::store)?
        .ok_or_else(|| taken("human", &handle))?;
    Ok(Data(json!({ "humanId": id })))
}

async fn create_agent(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(body): OperatorJson<NewAgent>,
) -> Answer {
    let NewAgent {
        owner_human_id,
        handle,
        display_name,
    } = body;
    not_blank("displayName", &display_name)?;
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    known::<Human>(&state, &workspace_id, &[&owner_human_id]).await?;
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
        .map_err(failure::store)?
        .ok_or_else(|| taken("agent", &handle))?;
    Ok(Data(json!({ "agentId": id })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentLookup {
    agent_ids: Vec<String>,
}

/// At most this many agents are looked up in one request.
const MAX_LOOKUP: usize = 1000;

/// `POST …/agents/lookup`: which of these agents exist in the workspace, with their public
/// profile (a daemon's orphan cleanup).
async fn lookup_agents(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(AgentLookup { agent_ids }): OperatorJson<AgentLookup>,
) -> Answer {
    if agent_ids.len() > MAX_LOOKUP {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("look up at most {MAX_LOOKUP} agents in one request"),
        )
        .into());
    }
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    let found = state
        .store
        .agents_among(&workspace_id, &agent_ids)
        .await
        .map_err(failure::store)?;
    let agents: Vec<serde_json::Value> = found
        .into_iter()
        .map(|(id, handle, display_name)| {
            json!({ "agentId": id, "handle": handle, "displayName": display_name })
        })
        .collect();
    Ok(Data(json!({ "agents": agents })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentRename {
    handle: t::Handle,
}

/// `PATCH …/agents/{agentId}`: a new handle.
async fn rename_agent(
    State(state): State<AppState>,
    Path((workspace_id, agent_id)): Path<(String, String)>,
    OperatorJson(AgentRename { handle }): OperatorJson<AgentRename>,
) -> Answer {
    match state
        .store
        .rename_agent(&workspace_id, &agent_id, &handle)
        .await
        .map_err(failure::store)?
    {
        Some(true) => Ok(Data(json!({ "agentId": agent_id, "handle": *handle }))),
        Some(false) => Err(taken("agent", &handle).into()),
        None => Err(missing("agent", &agent_id).into()),
    }
}

async fn create_device(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(NewDevice { human_id }): OperatorJson<NewDevice>,
) -> Answer {
    known::<Human>(&state, &workspace_id, &[&human_id]).await?;
    let secret = random_secret();
    let id = state
        .store
        .create_device(&human_id, &hash_secret(&secret), state.clock.now_ms())
        .await
        .map_err(failure::store)?;
    Ok(Data(
        json!({ "deviceId": id, "credential": format!("{id}.{secret}") }),
    ))
}

async fn create_channel(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(NewChannel { name, members }): OperatorJson<NewChannel>,
) -> Answer {
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    known::<Member>(&state, &workspace_id, &members).await?;
    let id = state
        .store
        .create_channel(&workspace_id, &name, &members, state.clock.now_ms())
        .await
        .map_err(failure::store)?
        .ok_or_else(|| taken("channel", &name))?;
    Ok(Data(json!({ "channelId": id })))
}

async fn create_thread(
    State(state): State<AppState>,
    Path((workspace_id, channel_id)): Path<(String, String)>,
    OperatorJson(NewThread { title }): OperatorJson<NewThread>,
) -> Answer {
    not_blank("title", &title)?;
    known::<Channel>(&state, &workspace_id, &[&channel_id]).await?;
    let id = state
        .store
        .create_thread(&channel_id, &title, state.clock.now_ms())
        .await
        .map_err(failure::store)?;
    Ok(Data(json!({ "threadId": id })))
}

async fn create_team(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(body): OperatorJson<NewTeam>,
) -> Answer {
    let NewTeam {
        handle,
        display_name,
        members,
    } = body;
    not_blank("displayName", &display_name)?;
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    let kinds = known::<Member>(&state, &workspace_id, &members).await?;
    let typed: Vec<(String, String)> = kinds
        .into_iter()
        .zip(members)
        .map(|(kind, id)| (kind.as_str().to_string(), id))
        .collect();
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
        .map_err(failure::store)?
        .ok_or_else(|| taken("team", &handle))?;
    Ok(Data(json!({ "teamId": id })))
}

/// A human posts a message in a channel (or one of its threads) they belong to.
async fn post_message(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(body): OperatorJson<NewMessage>,
) -> Answer {
    let NewMessage {
        author_human_id,
        channel_id,
        thread_id,
        content,
        attachments,
    } = body;
    not_blank("content", &content)?;
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
    .map_err(failure::store)?
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
        .map_err(failure::store)?;
    Ok(Data(
        json!({ "messageId": id, "attachmentIds": attachment_ids }),
    ))
}

fn decode_attachments(attachments: Vec<NewAttachmentBody>) -> ActionResult<Vec<NewAttachment>> {
    if attachments.len() > MAX_ATTACHMENTS {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("a message has at most {MAX_ATTACHMENTS} attachments"),
        ));
    }
    attachments
        .into_iter()
        .map(|a| {
            not_blank("name", &a.name)?;
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
                name: a.name.to_string(),
                media_type: a.media_type.to_string(),
                content,
            })
        })
        .collect()
}

async fn open_dm(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(NewDm { member_ids }): OperatorJson<NewDm>,
) -> Answer {
    if member_ids[0] == member_ids[1] {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            "a direct conversation has two different members",
        )
        .into());
    }
    known::<Member>(&state, &workspace_id, &member_ids).await?;
    let id = state
        .store
        .open_dm(
            &workspace_id,
            &member_ids[0],
            &member_ids[1],
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?;
    Ok(Data(json!({ "dmId": id, "target": format!("dm:{id}") })))
}

async fn add_channel_member(
    State(state): State<AppState>,
    Path((workspace_id, channel_id)): Path<(String, String)>,
    OperatorJson(NewMember { member_id }): OperatorJson<NewMember>,
) -> Answer {
    known::<Channel>(&state, &workspace_id, &[&channel_id]).await?;
    known::<Member>(&state, &workspace_id, &[&member_id]).await?;
    state
        .store
        .add_channel_member(&channel_id, &member_id)
        .await
        .map_err(failure::store)?;
    Ok(Data(
        json!({ "channelId": channel_id, "memberId": member_id }),
    ))
}

/// `GET /admin/stats`: counters an operator (or a test) reads.
async fn stats(State(state): State<AppState>, _: OperatorAuth) -> Answer {
    Ok(Data(json!({
        "runtimeRequests": state.dispatched(),
        "auditDropped": state.audit.dropped(),
    })))
}

/// `POST …/approvals/list`: one page of the workspace's approvals, newest change first; the
/// cursor is bound to the operator, the workspace and the status filter.
async fn list_approvals(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(ApprovalPage {
        status,
        limit,
        cursor,
    }): OperatorJson<ApprovalPage>,
) -> Answer {
    let filter = page::Filter::new(&operator(&state, &workspace_id), "admin.approvals")
        .with("status", status);
    let status = status.map(|s| s.to_string());
    let listed = page::list(
        &state,
        &filter,
        cursor.as_ref(),
        page::limit(limit),
        async |after, limit| {
            let status = status.as_deref();
            state
                .store
                .list_approvals(&workspace_id, status, after.as_ref(), limit)
                .await
        },
    )
    .await?;
    Ok(Data(
        listed.into_json("approvals", |approval| json!(approval)),
    ))
}

/// `POST …/audit/list`: one page of the workspace's audit records, newest first, optionally of
/// one agent and from a time on; the cursor is bound to the workspace and both filters.
async fn list_audit(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(AuditPage {
        agent_id,
        since,
        limit,
        cursor,
    }): OperatorJson<AuditPage>,
) -> Answer {
    let since_ms = since.map_or(0, |since| since.0.timestamp_millis());
    let filter = page::Filter::new(&operator(&state, &workspace_id), "admin.audit")
        .with("agentId", &agent_id)
        .with("since", since_ms);
    let listed = page::list(
        &state,
        &filter,
        cursor.as_ref(),
        page::limit(limit),
        async |after, limit| {
            state
                .store
                .list_audit(
                    &workspace_id,
                    agent_id.as_ref().map(|a| a.as_str()),
                    since_ms,
                    after.as_ref(),
                    limit,
                )
                .await
        },
    )
    .await?;
    Ok(Data(listed.into_json("records", super::store::shown_audit)))
}

/// The operator as a list's cursors know it: bound to `workspace_id`, never to an agent.
fn operator(state: &AppState, workspace_id: &str) -> Caller {
    Caller {
        workspace_id: workspace_id.to_string(),
        agent_id: "operator".into(),
        now_ms: state.clock.now_ms(),
    }
}

/// `POST …/approvals/{approvalId}/decision`: a human of the workspace approves or rejects a
/// pending approval, once; the workflow step waiting on it moves on in the same transaction.
async fn decide_approval(
    State(state): State<AppState>,
    Path((workspace_id, approval_id)): Path<(String, String)>,
    OperatorJson(ApprovalDecision {
        human_id,
        decision,
        comment,
    }): OperatorJson<ApprovalDecision>,
) -> Answer {
    let comment = comment.as_deref().map(String::as_str);
    let fields = [("/comment".to_string(), comment)];
    let decided = state
        .store
        .decide_approval(
            &workspace_id,
            &approval_id,
            &human_id,
            decision == Decision::Approve,
            comment,
            state.clock.now_ms(),
            // The comment lands on the approval and on the step that waited for it: nothing is
            // written unless both can still be read back.
            |approval, run| {
                crate::contract::budget::readable(
                    "approval get",
                    &crate::contract::types::ApprovalGetOutput(
                        crate::contract::types::ApprovalResult {
                            approval: approval.clone(),
                        },
                    ),
                    &fields,
                )?;
                let waiting = run.and_then(|run| {
                    run.steps
                        .iter()
                        .find(|step| step.approval_id.as_deref() == Some(approval_id.as_str()))
                });
                match waiting {
                    Some(step) => super::actions::step_readable(step, &fields),
                    None => Ok(()),
                }
            },
        )
        .await
        .map_err(failure::store)?
        .ok_or_else(|| missing("approval", &approval_id))?;
    match decided {
        Ok(approval) => Ok(Data(json!({ "approval": approval }))),
        Err(super::store::DecideRefusal::Decided(status)) => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!("approval `{approval_id}` was already decided: {status}"),
        )
        .into()),
        Err(super::store::DecideRefusal::UnknownHuman) => Err(Human::missing(&human_id).into()),
        Err(super::store::DecideRefusal::Refused(error)) => Err(error.into()),
    }
}

/// `POST /admin/extensions`: records the definition as its extension's next version (the first
/// for a new name) with its digest, and advances the catalog version.
async fn publish_extension(
    State(state): State<AppState>,
    OperatorJson(NewExtensionVersion { definition }): OperatorJson<NewExtensionVersion>,
) -> Answer {
    let (checked, digest) =
        super::extension_rules::check_publish(&definition).map_err(|problems| {
            ActionError::new(
                ErrorCode::ValidationFailed,
                format!("the definition breaks {} rule(s)", problems.len()),
            )
            .with_details(
                problems
                    .into_iter()
                    .take(32)
                    .map(|message| crate::contract::error::ErrorDetail {
                        path: "/definition".into(),
                        message: message.chars().take(512).collect(),
                    })
                    .collect(),
            )
        })?;
    let recorded = state
        .store
        .publish_extension(
            &checked.name,
            checked.provider.as_str(),
            &definition,
            &digest,
            false,
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?
        .expect("a publish that is not a seed always records");
    tracing::info!(extension = %recorded.name, version = recorded.version, digest = %recorded.digest, catalog_version = recorded.catalog_version, "extension published");
    Ok(Data(json!({
        "name": recorded.name,
        "version": recorded.version,
        "digest": recorded.digest,
        "catalogVersion": recorded.catalog_version,
    })))
}

/// `POST /admin/extensions/list`: every extension's current version.
async fn list_extensions(
    State(state): State<AppState>,
    OperatorJson(Nothing {}): OperatorJson<Nothing>,
) -> Answer {
    let current = state
        .store
        .current_extensions()
        .await
        .map_err(failure::store)?;
    Ok(Data(json!({
        "extensions": current.iter().map(|(recorded, provider)| json!({
            "name": recorded.name,
            "provider": provider,
            "version": recorded.version,
            "digest": recorded.digest,
            "catalogVersion": recorded.catalog_version,
        })).collect::<Vec<_>>(),
    })))
}

/// `POST …/apps`: installs (or reinstalls) an extension's app in the workspace.
async fn install_app(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(NewApp {
        extension,
        base_url,
        credential,
    }): OperatorJson<NewApp>,
) -> Answer {
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    let base_url = super::provider::check_base_url(&base_url)
        .map_err(|why| ActionError::new(ErrorCode::ValidationFailed, why))?;
    let credential_ok = !credential.is_empty()
        && credential.len() <= MAX_CREDENTIAL_BYTES
        && credential.bytes().all(|b| b.is_ascii_graphic());
    if !credential_ok {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("`credential` must be 1 to {MAX_CREDENTIAL_BYTES} printable ASCII characters without spaces"),
        )
        .into());
    }
    let installed = state
        .store
        .install_app(
            &workspace_id,
            &extension,
            &base_url,
            &credential,
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?;
    if !installed {
        return Err(unknown("extension", &extension).into());
    }
    Ok(Data(
        json!({ "extension": extension, "baseUrl": base_url, "status": "installed" }),
    ))
}

/// `POST …/apps/{extension}/grants`: allows an agent of the workspace to use the app.
async fn grant_app(
    State(state): State<AppState>,
    Path((workspace_id, extension)): Path<(String, String)>,
    OperatorJson(NewGrant { agent_id }): OperatorJson<NewGrant>,
) -> Answer {
    let granted = state
        .store
        .grant_app(&workspace_id, &extension, &agent_id, state.clock.now_ms())
        .await
        .map_err(failure::store)?;
    if !granted {
        return Err(ActionError::new(
            ErrorCode::NotFound,
            format!("the `{extension}` app is not installed in this workspace, or it has no agent `{agent_id}`"),
        )
        .into());
    }
    Ok(Data(json!({ "extension": extension, "agentId": agent_id })))
}

/// `POST …/apps/{extension}/revoke`: deletes the app's credential; calls are refused until it is
/// installed again.
async fn revoke_app(
    State(state): State<AppState>,
    Path((workspace_id, extension)): Path<(String, String)>,
    OperatorJson(Nothing {}): OperatorJson<Nothing>,
) -> Answer {
    let revoked = state
        .store
        .revoke_app(&workspace_id, &extension, state.clock.now_ms())
        .await
        .map_err(failure::store)?;
    if !revoked {
        return Err(ActionError::new(
            ErrorCode::NotFound,
            format!("the `{extension}` app is not installed in this workspace"),
        )
        .into());
    }
    Ok(Data(json!({ "extension": extension, "status": "revoked" })))
}

/// `POST …/kb/sources`: a knowledge source of the workspace.
async fn create_kb_source(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(NewKbSource { name }): OperatorJson<NewKbSource>,
) -> Answer {
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    not_blank("name", &name)?;
    let id = state
        .store
        .create_kb_source(&workspace_id, &name, state.clock.now_ms())
        .await
        .map_err(failure::store)?
        .ok_or_else(|| taken("knowledge source", &name))?;
    Ok(Data(json!({ "sourceId": id, "name": *name })))
}

/// `POST …/kb/sources/{sourceId}/grants`: grants the source to one channel (its threads and their
/// tasks included) or one team (the channels and dms of its members).
async fn grant_kb_source(
    State(state): State<AppState>,
    Path((workspace_id, source_id)): Path<(String, String)>,
    OperatorJson(grant): OperatorJson<NewKbGrant>,
) -> Answer {
    let (kind, grantee) = match (grant.channel_id, grant.team_id) {
        (Some(channel), None) => ("channel", channel),
        (None, Some(team)) => ("team", team),
        _ => {
            return Err(ActionError::new(
                ErrorCode::ValidationFailed,
                "give exactly one of `channelId` and `teamId`",
            )
            .into());
        }
    };
    let granted = state
        .store
        .grant_kb_source(
            &workspace_id,
            &source_id,
            kind,
            &grantee,
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?;
    if !granted {
        return Err(ActionError::new(
            ErrorCode::NotFound,
            format!(
                "no source `{}` and {kind} `{}` in this workspace",
                clip(&source_id),
                clip(&grantee)
            ),
        )
        .into());
    }
    Ok(Data(
        json!({ "sourceId": source_id, "grantee": { "kind": kind, "id": grantee } }),
    ))
}

/// `POST …/kb/sources/{sourceId}/documents`: adds a document, or replaces the one at its path.
/// Its title is the given one, else its first `#` heading, else its path's file name.
async fn put_kb_document(
    State(state): State<AppState>,
    Path((workspace_id, source_id)): Path<(String, String)>,
    OperatorJson(NewKbDocument { path, title, body }): OperatorJson<NewKbDocument>,
) -> Answer {
    if path.trim().is_empty() || path.chars().count() > MAX_KB_PATH {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("`path` must be 1 to {MAX_KB_PATH} characters"),
        )
        .into());
    }
    let title = title
        .map(|t| t.to_string())
        .or_else(|| {
            body.lines()
                .find_map(|line| line.strip_prefix("# "))
                .map(|heading| heading.trim().chars().take(200).collect::<String>())
                .filter(|heading| !heading.is_empty())
        })
        .unwrap_or_else(|| {
            path.rsplit('/')
                .next()
                .unwrap_or(&path)
                .chars()
                .take(200)
                .collect()
        });
    let (id, created) = state
        .store
        .put_kb_document(
            &workspace_id,
            &source_id,
            &path,
            &title,
            &body,
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?
        .ok_or_else(|| missing("knowledge source", &source_id))?;
    Ok(Data(
        json!({ "documentId": id, "title": title, "created": created }),
    ))
}
