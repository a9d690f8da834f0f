//! Tenancy: workspaces; their humans, agents (created, looked up, renamed) and devices; channels
//! with their threads and members; direct conversations; teams.

use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::json;

use super::{
    Answer, Channel, Human, Member, OperatorJson, Workspace, known, missing, not_blank, taken,
};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::server::auth::{hash_secret, random_secret};
use crate::server::failure;
use crate::server::state::AppState;
use crate::wire::Data;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewWorkspace {
    name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewHuman {
    handle: t::Handle,
    display_name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewAgent {
    owner_human_id: String,
    handle: t::Handle,
    display_name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewDevice {
    human_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewChannel {
    /// A channel's name is handle-shaped.
    name: t::Handle,
    #[serde(default)]
    members: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewThread {
    title: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewMember {
    member_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewTeam {
    handle: t::Handle,
    display_name: t::Name,
    #[serde(default)]
    members: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewDm {
    member_ids: [String; 2],
}

pub(super) async fn create_workspace(
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

pub(super) async fn create_human(
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

pub(super) async fn create_agent(
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
pub(super) struct AgentLookup {
    agent_ids: Vec<String>,
}

/// At most this many agents are looked up in one request.
const MAX_LOOKUP: usize = 1000;

/// `POST …/agents/lookup`: which of these agents exist in the workspace, with their public
/// profile (a daemon's orphan cleanup).
pub(super) async fn lookup_agents(
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
pub(super) struct AgentRename {
    handle: t::Handle,
}

/// `PATCH …/agents/{agentId}`: a new handle.
pub(super) async fn rename_agent(
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

pub(super) async fn create_device(
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

pub(super) async fn create_channel(
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

pub(super) async fn create_thread(
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

pub(super) async fn create_team(
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

pub(super) async fn open_dm(
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

pub(super) async fn add_channel_member(
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
