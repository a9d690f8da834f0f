//! `scheduled-message` actions: a message the server posts later as the agent, once or
//! repeatedly, to an explicit thread or channel the agent belongs to.

use super::{Caller, page, resolve};
use crate::contract::error::ErrorCode;
use crate::contract::types::{
    ScheduledMessageCancelInput, ScheduledMessageCancelOutput, ScheduledMessageCreateInput,
    ScheduledMessageCreateOutput, ScheduledMessageGetInput, ScheduledMessageGetOutput,
    ScheduledMessageListInput, ScheduledMessageListOutput, ScheduledMessageResult,
    ScheduledMessageRunsInput, ScheduledMessageRunsOutput,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::NewSchedule;

pub async fn create(
    state: &AppState,
    caller: &Caller,
    input: ScheduledMessageCreateInput,
) -> ActionResult<ScheduledMessageCreateOutput> {
    let ScheduledMessageCreateInput {
        target,
        content,
        send_at,
        repeat_every_minutes,
        request_id: _,
    } = input;
    let membership = resolve(state, caller, (&target).into()).await?;
    let scheduled_message = state
        .store
        .insert_schedule(
            &caller.workspace_id,
            &membership,
            NewSchedule {
                content: &content,
                send_at_ms: send_at.timestamp_millis(),
                repeat_every_minutes: repeat_every_minutes.map(|m| m.0),
            },
            &caller.agent_id,
            caller.now_ms,
        )
        .await
        .map_err(failure::store)?;
    Ok(ScheduledMessageCreateOutput(ScheduledMessageResult {
        scheduled_message,
    }))
}

pub async fn get(
    state: &AppState,
    caller: &Caller,
    input: ScheduledMessageGetInput,
) -> ActionResult<ScheduledMessageGetOutput> {
    let ScheduledMessageGetInput {
        scheduled_message_id,
    } = input;
    let scheduled_message = state
        .store
        .schedule_for_member(
            &caller.workspace_id,
            &caller.agent_id,
            &scheduled_message_id,
        )
        .await
        .found("scheduled message", &scheduled_message_id)?;
    Ok(ScheduledMessageGetOutput(ScheduledMessageResult {
        scheduled_message,
    }))
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    input: ScheduledMessageListInput,
) -> ActionResult<ScheduledMessageListOutput> {
    let ScheduledMessageListInput {
        target,
        limit,
        cursor,
    } = input;
    let membership = resolve(state, caller, (&target).into()).await?;
    let filter = page::Filter::of(caller, ActionId::ScheduledMessageList).with("target", &target);
    let listed = filter
        .page(state, cursor.as_ref(), limit, async |after, limit| {
            state
                .store
                .list_schedules(&membership, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(ScheduledMessageListOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        scheduled_messages: listed.items,
    })
}

pub async fn cancel(
    state: &AppState,
    caller: &Caller,
    input: ScheduledMessageCancelInput,
) -> ActionResult<ScheduledMessageCancelOutput> {
    let ScheduledMessageCancelInput {
        scheduled_message_id,
        request_id: _,
    } = input;
    let scheduled_message = state
        .store
        .cancel_schedule(
            &caller.workspace_id,
            &caller.agent_id,
            &scheduled_message_id,
            caller.now_ms,
        )
        .await
        .found("scheduled message", &scheduled_message_id)?
        .map_err(|status| {
            ActionError::new(
                ErrorCode::InvalidState,
                format!(
                    "scheduled message `{}` is {status}; only a scheduled one can be cancelled",
                    scheduled_message_id.as_str()
                ),
            )
        })?;
    Ok(ScheduledMessageCancelOutput(ScheduledMessageResult {
        scheduled_message,
    }))
}

pub async fn runs(
    state: &AppState,
    caller: &Caller,
    input: ScheduledMessageRunsInput,
) -> ActionResult<ScheduledMessageRunsOutput> {
    let ScheduledMessageRunsInput {
        scheduled_message_id,
        limit,
        cursor,
    } = input;
    state
        .store
        .schedule_for_member(
            &caller.workspace_id,
            &caller.agent_id,
            &scheduled_message_id,
        )
        .await
        .found("scheduled message", &scheduled_message_id)?;
    let filter = page::Filter::of(caller, ActionId::ScheduledMessageRuns)
        .with("schedule", scheduled_message_id.as_str());
    let listed = filter
        .page(state, cursor.as_ref(), limit, async |after, limit| {
            state
                .store
                .list_runs(&scheduled_message_id, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(ScheduledMessageRunsOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        runs: listed.items,
    })
}
