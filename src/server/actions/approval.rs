//! `approval` actions: an agent asks the workspace's humans for a decision and reads it back.
//! Humans decide through the operator API (`agentteam admin approval decide`); an approval a
//! workflow step created moves its run when decided.

use super::{Caller, page};
use crate::contract::types::{
    ApprovalGetInput, ApprovalGetOutput, ApprovalListInput, ApprovalListOutput,
    ApprovalRequestInput, ApprovalRequestOutput, ApprovalResult,
};
use crate::contract::{ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::failure;
use crate::server::state::AppState;

pub async fn request(
    state: &AppState,
    caller: &Caller,
    input: ApprovalRequestInput,
) -> ActionResult<ApprovalRequestOutput> {
    let ApprovalRequestInput {
        title,
        details,
        request_id: _,
    } = input;
    let approval = state
        .store
        .insert_approval(
            &caller.workspace_id,
            &title,
            details.as_deref().map(String::as_str),
            &caller.agent_id,
            caller.now_ms,
        )
        .await
        .map_err(failure::store)?;
    Ok(ApprovalRequestOutput(ApprovalResult { approval }))
}

pub async fn get(
    state: &AppState,
    caller: &Caller,
    input: ApprovalGetInput,
) -> ActionResult<ApprovalGetOutput> {
    let ApprovalGetInput { approval_id } = input;
    let approval = state
        .store
        .approval(&caller.workspace_id, &approval_id)
        .await
        .found("approval", &approval_id)?;
    Ok(ApprovalGetOutput(ApprovalResult { approval }))
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    input: ApprovalListInput,
) -> ActionResult<ApprovalListOutput> {
    let ApprovalListInput {
        status,
        limit,
        cursor,
    } = input;
    let filter = page::Filter::of(caller, ActionId::ApprovalList).with("status", status);
    let status = status.map(|s| s.to_string());
    let listed = filter
        .page(state, cursor.as_ref(), limit, async |after, limit| {
            let status = status.as_deref();
            state
                .store
                .list_approvals(&caller.workspace_id, status, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(ApprovalListOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        approvals: listed.items,
    })
}
