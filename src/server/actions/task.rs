//! `task` actions: a task lives in exactly one thread or channel of the workspace, and its status
//! moves `open` → `claimed` → `completed`, or `open`/`claimed` → `cancelled`; final states stay.

use super::{Caller, page, resolve};
use crate::contract::error::ErrorCode;
use crate::contract::types::{
    Task, TaskCancelInput, TaskCancelOutput, TaskClaimInput, TaskClaimOutput, TaskCompleteInput,
    TaskCompleteOutput, TaskCreateInput, TaskCreateOutput, TaskGetInput, TaskGetOutput,
    TaskListInput, TaskListOutput, TaskResult, TaskStatus, TaskUpdateInput, TaskUpdateOutput,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::failure;
use crate::server::state::AppState;

pub async fn create(
    state: &AppState,
    caller: &Caller,
    input: TaskCreateInput,
) -> ActionResult<TaskCreateOutput> {
    let TaskCreateInput {
        location,
        title,
        description,
        request_id: _,
    } = input;
    let membership = resolve(state, caller, (&location).into()).await?;
    let task = state
        .store
        .insert_task(
            &caller.workspace_id,
            &membership,
            &title,
            description.as_deref().map(String::as_str),
            &caller.agent_id,
            caller.now_ms,
        )
        .await
        .map_err(failure::store)?;
    announce(state, caller, &task).await?;
    Ok(TaskCreateOutput(TaskResult { task }))
}

pub async fn get(
    state: &AppState,
    caller: &Caller,
    input: TaskGetInput,
) -> ActionResult<TaskGetOutput> {
    let TaskGetInput { task_id } = input;
    let task = state
        .store
        .task_for_member(&caller.workspace_id, &caller.agent_id, &task_id)
        .await
        .found("task", &task_id)?;
    Ok(TaskGetOutput(TaskResult { task }))
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    input: TaskListInput,
) -> ActionResult<TaskListOutput> {
    let TaskListInput {
        location,
        status,
        limit,
        cursor,
    } = input;
    let membership = resolve(state, caller, (&location).into()).await?;
    let mut statuses = status.unwrap_or_default();
    statuses.sort();
    statuses.dedup();
    // The cursor is bound to everything that shapes the result: list, caller, location, filter.
    let filter = page::Filter::of(caller, ActionId::TaskList)
        .with("location", &location)
        .with("status", &statuses);
    let listed = filter
        .page(state, cursor.as_ref(), limit, async |after, limit| {
            state
                .store
                .list_tasks(&membership, &statuses, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(TaskListOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        tasks: listed.items,
    })
}

pub async fn update(
    state: &AppState,
    caller: &Caller,
    input: TaskUpdateInput,
) -> ActionResult<TaskUpdateOutput> {
    let TaskUpdateInput {
        task_id,
        title,
        description,
        expected_revision,
        request_id: _,
    } = input;
    if title.is_none() && description.is_none() {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            "nothing to update: give `title` or `description`",
        ));
    }
    let fields = [
        ("/title".to_string(), title.as_deref().map(String::as_str)),
        (
            "/description".to_string(),
            description.as_deref().map(String::as_str),
        ),
    ];
    let task = mutate(state, caller, &task_id, &fields, |current| {
        refuse_final(current)?;
        if let Some(expected) = expected_revision
            && expected != current.revision
        {
            return Err(ActionError::new(
                ErrorCode::RevisionMismatch,
                format!(
                    "task `{}` is at revision {}, not {expected}",
                    current.id.as_str(),
                    current.revision
                ),
            )
            .with_next("read the task again with `task get` and reapply the change"));
        }
        let mut changed = current.clone();
        if let Some(title) = &title {
            changed.title = title.clone();
        }
        if let Some(description) = &description {
            changed.description = Some(description.clone());
        }
        Ok(changed)
    })
    .await?;
    announce(state, caller, &task).await?;
    Ok(TaskUpdateOutput(TaskResult { task }))
}

pub async fn claim(
    state: &AppState,
    caller: &Caller,
    input: TaskClaimInput,
) -> ActionResult<TaskClaimOutput> {
    let TaskClaimInput {
        task_id,
        request_id: _,
    } = input;
    let task = mutate(state, caller, &task_id, &[], |current| {
        refuse_final(current)?;
        if current.status == TaskStatus::Claimed {
            return Err(invalid_state(current, "is already claimed"));
        }
        let mut changed = current.clone();
        changed.status = TaskStatus::Claimed;
        changed.assignee_agent_id = Some(
            caller
                .agent_id
                .parse()
                .map_err(|_| invalid_state(current, "cannot be claimed by this agent"))?,
        );
        Ok(changed)
    })
    .await?;
    announce(state, caller, &task).await?;
    Ok(TaskClaimOutput(TaskResult { task }))
}

pub async fn complete(
    state: &AppState,
    caller: &Caller,
    input: TaskCompleteInput,
) -> ActionResult<TaskCompleteOutput> {
    let TaskCompleteInput {
        task_id,
        result,
        request_id: _,
    } = input;
    let fields = [("/result".to_string(), result.as_deref().map(String::as_str))];
    let task = mutate(state, caller, &task_id, &fields, |current| {
        refuse_final(current)?;
        if current.status == TaskStatus::Open {
            return Err(
                invalid_state(current, "is open; claim it before completing it")
                    .with_next("run `task claim` first"),
            );
        }
        if current.assignee_agent_id.as_deref().map(String::as_str)
            != Some(caller.agent_id.as_str())
        {
            return Err(invalid_state(current, "is claimed by another agent"));
        }
        let mut changed = current.clone();
        changed.status = TaskStatus::Completed;
        changed.result = result.clone();
        Ok(changed)
    })
    .await?;
    announce(state, caller, &task).await?;
    Ok(TaskCompleteOutput(TaskResult { task }))
}

pub async fn cancel(
    state: &AppState,
    caller: &Caller,
    input: TaskCancelInput,
) -> ActionResult<TaskCancelOutput> {
    let TaskCancelInput {
        task_id,
        reason,
        request_id: _,
    } = input;
    let fields = [("/reason".to_string(), reason.as_deref().map(String::as_str))];
    let task = mutate(state, caller, &task_id, &fields, |current| {
        refuse_final(current)?;
        let mut changed = current.clone();
        changed.status = TaskStatus::Cancelled;
        changed.cancel_reason = reason.clone();
        Ok(changed)
    })
    .await?;
    announce(state, caller, &task).await?;
    Ok(TaskCancelOutput(TaskResult { task }))
}

/// Runs `change` on the visible task inside one writer transaction, and refuses (before anything
/// is written) a change after which `task get` could not return the task within the Exec result
/// budget; `fields` are the request's text fields the change stores, by JSON pointer.
async fn mutate(
    state: &AppState,
    caller: &Caller,
    task_id: &str,
    fields: &[(String, Option<&str>)],
    change: impl FnOnce(&Task) -> ActionResult<Task>,
) -> ActionResult<Task> {
    let now_ms = caller.now_ms;
    state
        .store
        .update_task(
            &caller.workspace_id,
            &caller.agent_id,
            task_id,
            now_ms,
            |current| {
                let changed = change(current)?;
                // As the store will write it: the next revision, updated now.
                let mut stored = changed.clone();
                stored.revision = current.revision.saturating_add(1);
                stored.updated_at = super::timestamp(now_ms)?;
                crate::contract::budget::readable(
                    &super::read_name(ActionId::TaskGet, None),
                    &TaskGetOutput(TaskResult { task: stored }),
                    fields,
                )?;
                Ok(changed)
            },
        )
        .await
        .found("task", task_id)?
}

fn refuse_final(task: &Task) -> ActionResult<()> {
    match task.status {
        TaskStatus::Completed => Err(invalid_state(
            task,
            "is completed; completed tasks do not change",
        )),
        TaskStatus::Cancelled => Err(invalid_state(
            task,
            "is cancelled; cancelled tasks do not change",
        )),
        TaskStatus::Open | TaskStatus::Claimed => Ok(()),
    }
}

fn invalid_state(task: &Task, why: &str) -> ActionError {
    ActionError::new(
        ErrorCode::InvalidState,
        format!("task `{}` {why}", task.id.as_str()),
    )
}

/// Records the change of `task` on the event feed, in the request's transaction.
async fn announce(
    state: &AppState,
    caller: &Caller,
    task: &crate::contract::types::Task,
) -> ActionResult<()> {
    state
        .store
        .record_task_event(&caller.workspace_id, caller.now_ms, &task.id)
        .await
        .map_err(failure::store)
}
