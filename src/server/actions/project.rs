//! `project` actions: workspace-wide projects every agent of the workspace can see; `active`
//! until archived, and archiving is final.

use super::{Caller, page};
use crate::contract::error::ErrorCode;
use crate::contract::types::{
    Project, ProjectArchiveInput, ProjectArchiveOutput, ProjectCreateInput, ProjectCreateOutput,
    ProjectGetInput, ProjectGetOutput, ProjectListInput, ProjectListOutput, ProjectResult,
    ProjectStatus, ProjectUpdateInput, ProjectUpdateOutput,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::failure;
use crate::server::state::AppState;

pub async fn create(
    state: &AppState,
    caller: &Caller,
    input: ProjectCreateInput,
) -> ActionResult<ProjectCreateOutput> {
    let ProjectCreateInput {
        name,
        description,
        request_id: _,
    } = input;
    let project = state
        .store
        .insert_project(
            &caller.workspace_id,
            &name,
            description.as_deref().map(String::as_str),
            &caller.agent_id,
            caller.now_ms,
        )
        .await
        .map_err(failure::store)?;
    Ok(ProjectCreateOutput(ProjectResult { project }))
}

pub async fn get(
    state: &AppState,
    caller: &Caller,
    input: ProjectGetInput,
) -> ActionResult<ProjectGetOutput> {
    let ProjectGetInput { project_id } = input;
    let project = state
        .store
        .project(&caller.workspace_id, &project_id)
        .await
        .found("project", &project_id)?;
    Ok(ProjectGetOutput(ProjectResult { project }))
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    input: ProjectListInput,
) -> ActionResult<ProjectListOutput> {
    let ProjectListInput {
        status,
        limit,
        cursor,
    } = input;
    let filter = page::Filter::of(caller, ActionId::ProjectList).with("status", status);
    let listed = filter
        .page(state, cursor.as_ref(), limit, async |after, limit| {
            state
                .store
                .list_projects(&caller.workspace_id, status, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(ProjectListOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        projects: listed.items,
    })
}

pub async fn update(
    state: &AppState,
    caller: &Caller,
    input: ProjectUpdateInput,
) -> ActionResult<ProjectUpdateOutput> {
    let ProjectUpdateInput {
        project_id,
        name,
        description,
        expected_revision,
        request_id: _,
    } = input;
    if name.is_none() && description.is_none() {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            "nothing to update: give `name` or `description`",
        ));
    }
    let project = mutate(state, caller, &project_id, |current| {
        refuse_archived(current)?;
        if let Some(expected) = expected_revision
            && expected != current.revision
        {
            return Err(ActionError::new(
                ErrorCode::RevisionMismatch,
                format!(
                    "project `{}` is at revision {}, not {expected}",
                    current.id.as_str(),
                    current.revision
                ),
            )
            .with_next("read the project again with `project get` and reapply the change"));
        }
        let mut changed = current.clone();
        if let Some(name) = &name {
            changed.name = name.clone();
        }
        if let Some(description) = &description {
            changed.description = Some(description.clone());
        }
        Ok(changed)
    })
    .await?;
    Ok(ProjectUpdateOutput(ProjectResult { project }))
}

pub async fn archive(
    state: &AppState,
    caller: &Caller,
    input: ProjectArchiveInput,
) -> ActionResult<ProjectArchiveOutput> {
    let ProjectArchiveInput {
        project_id,
        request_id: _,
    } = input;
    let project = mutate(state, caller, &project_id, |current| {
        refuse_archived(current)?;
        let mut changed = current.clone();
        changed.status = ProjectStatus::Archived;
        Ok(changed)
    })
    .await?;
    Ok(ProjectArchiveOutput(ProjectResult { project }))
}

async fn mutate(
    state: &AppState,
    caller: &Caller,
    project_id: &str,
    change: impl FnOnce(&Project) -> ActionResult<Project>,
) -> ActionResult<Project> {
    state
        .store
        .update_project(&caller.workspace_id, project_id, caller.now_ms, change)
        .await
        .found("project", project_id)?
}

fn refuse_archived(project: &Project) -> ActionResult<()> {
    match project.status {
        ProjectStatus::Archived => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!(
                "project `{}` is archived; archived projects do not change",
                project.id.as_str()
            ),
        )),
        ProjectStatus::Active => Ok(()),
    }
}
