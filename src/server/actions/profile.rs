//! `workspace get` and `profile get|update`: the caller's workspace, and its own public profile
//! (`profile update` is the only writer of an agent's display name and description once the
//! operator created it).

use super::Caller;
use crate::contract::error::ErrorCode;
use crate::contract::types::{
    ProfileGetInput, ProfileGetOutput, ProfileUpdateInput, ProfileUpdateOutput, Workspace,
    WorkspaceGetInput, WorkspaceGetOutput,
};
use crate::contract::{ActionError, ActionResult};
use crate::server::actions::Found;
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::{ProfileChange, rfc3339};

pub async fn workspace(
    state: &AppState,
    caller: &Caller,
    _input: WorkspaceGetInput,
) -> ActionResult<WorkspaceGetOutput> {
    let (name, created_at) = state
        .store
        .workspace(&caller.workspace_id)
        .await
        .found("workspace", &caller.workspace_id)?;
    let workspace: Workspace = serde_json::from_value(serde_json::json!({
        "id": caller.workspace_id,
        "name": name,
        "createdAt": rfc3339(created_at),
    }))
    .map_err(|error| failure::saying("the stored workspace is damaged", error))?;
    Ok(WorkspaceGetOutput { workspace })
}

pub async fn get(
    state: &AppState,
    caller: &Caller,
    _input: ProfileGetInput,
) -> ActionResult<ProfileGetOutput> {
    let profile = state
        .store
        .profile(&caller.workspace_id, &caller.agent_id)
        .await
        .found("agent", &caller.agent_id)?;
    Ok(ProfileGetOutput { profile })
}

pub async fn update(
    state: &AppState,
    caller: &Caller,
    input: ProfileUpdateInput,
) -> ActionResult<ProfileUpdateOutput> {
    let ProfileUpdateInput {
        display_name,
        description,
        status,
        expected_revision,
        request_id: _,
    } = input;
    if display_name.is_none() && description.is_none() && status.is_none() {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            "nothing to update: give `displayName`, `description` or `status`",
        ));
    }
    let profile = state
        .store
        .change_profile(
            &caller.workspace_id,
            &caller.agent_id,
            caller.now_ms,
            |current| {
                if let Some(expected) = expected_revision
                    && expected.get() != current.revision.get()
                {
                    return Err(ActionError::new(
                        ErrorCode::RevisionMismatch,
                        format!(
                            "the profile is at revision {}, not {expected}",
                            current.revision
                        ),
                    )
                    .with_next("read it again with `profile get` and reapply the change"));
                }
                Ok(ProfileChange {
                    display_name: display_name
                        .as_ref()
                        .unwrap_or(&current.display_name)
                        .to_string(),
                    description: description
                        .as_ref()
                        .or(current.description.as_ref())
                        .map(|d| d.to_string()),
                    status: status.unwrap_or(current.status).to_string(),
                })
            },
        )
        .await
        .found("agent", &caller.agent_id)??;
    Ok(ProfileUpdateOutput { profile })
}
