//! Knowledge: a workspace's sources, their grants to channels and teams, and their documents.

use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::json;

use super::{Answer, OperatorJson, Workspace, clip, known, missing, not_blank, taken};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::server::failure;
use crate::server::state::AppState;
use crate::wire::Data;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewKbSource {
    name: t::Name,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewKbGrant {
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    team_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewKbDocument {
    /// Where the document came from (a relative file path); a second document at the same path
    /// replaces the first.
    path: String,
    #[serde(default)]
    title: Option<t::Name>,
    body: String,
}

/// The longest document path the knowledge base keeps.
const MAX_KB_PATH: usize = 512;

/// `POST …/kb/sources`: a knowledge source of the workspace.
pub(super) async fn create_kb_source(
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
pub(super) async fn grant_kb_source(
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
pub(super) async fn put_kb_document(
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
