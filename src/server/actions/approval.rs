//! `approval` actions: an agent asks the workspace's humans for a decision and reads it back.
//! Humans decide through the operator API (`agentteam admin approval decide`); an approval a
//! workflow step created moves its run when decided.

use super::{Caller, not_found, page};
use crate::contract::types::{
    ApprovalGetInput, ApprovalGetOutput, ApprovalListInput, ApprovalListOutput,
    ApprovalRequestInput, ApprovalRequestOutput, ApprovalResult,
};
use crate::contract::{ActionId, ActionResult};
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
        .map_err(failure::store)?
        .ok_or_else(|| not_found("approval", &approval_id))?;
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
    let filter = page::Filter::new(caller, &ActionId::ApprovalList.key()).with("status", status);
    let after = page::decode_position(state, cursor.as_ref(), &filter)?;
    let found = state
        .store
        .list_approvals(
            &caller.workspace_id,
            status.map(|s| s.to_string()).as_deref(),
            after.as_ref(),
            page::limit(limit),
        )
        .await
        .map_err(failure::store)?;
    let next_cursor = found
        .next
        .map(|p| page::encode_position(state, &filter, &p))
        .transpose()?;
    Ok(ApprovalListOutput {
        has_more: next_cursor.is_some(),
        next_cursor,
        approvals: found.items,
    })
}
