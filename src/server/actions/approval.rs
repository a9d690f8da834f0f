//! `approval` actions: an agent asks the workspace's humans for a decision and reads it back.
//! A person decides through the human API (the approvals their agents asked for) or the operator
//! through the operator API, both with [`decide`]; an approval a workflow step created moves its
//! run when decided.

use super::{Caller, page};
use crate::contract::error::ErrorCode;
use crate::contract::types::Approval;
use crate::contract::types::{
    ApprovalGetInput, ApprovalGetOutput, ApprovalListInput, ApprovalListOutput,
    ApprovalRequestInput, ApprovalRequestOutput, ApprovalResult,
};
use crate::contract::{ActionError, ActionId, ActionResult};
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

/// Why a decision was not recorded, other than the store failing.
pub(crate) enum Undecided {
    /// The workspace has no such approval.
    Missing,
    /// The workspace has no such human.
    UnknownHuman,
    Refused(ActionError),
}

/// `human_id` approves or rejects the pending approval `approval_id` of `workspace_id`, once, with
/// `comment`; the workflow step waiting on it moves on in the same transaction. Nothing is written
/// unless the approval and that step can still be read back with the comment.
pub(crate) async fn decide(
    state: &AppState,
    workspace_id: &str,
    approval_id: &str,
    human_id: &str,
    approve: bool,
    comment: Option<&str>,
) -> Result<Approval, Undecided> {
    let fields = [("/comment".to_string(), comment)];
    let decided = state
        .store
        .decide_approval(
            workspace_id,
            approval_id,
            human_id,
            approve,
            comment,
            state.clock.now_ms(),
            |approval, run| {
                crate::contract::budget::readable(
                    &super::read_name(ActionId::ApprovalGet, None),
                    &ApprovalGetOutput(ApprovalResult {
                        approval: approval.clone(),
                    }),
                    &fields,
                )?;
                let waiting = run.and_then(|run| {
                    run.steps
                        .iter()
                        .find(|step| step.approval_id.as_deref() == Some(approval_id))
                });
                match waiting {
                    Some(step) => super::step_readable(step, &fields),
                    None => Ok(()),
                }
            },
        )
        .await
        .map_err(|error| Undecided::Refused(failure::store(error)))?
        .ok_or(Undecided::Missing)?;
    match decided {
        Ok(approval) => Ok(approval),
        Err(crate::server::store::DecideRefusal::Decided(status)) => {
            Err(Undecided::Refused(ActionError::new(
                ErrorCode::InvalidState,
                format!("approval `{approval_id}` was already decided: {status}"),
            )))
        }
        Err(crate::server::store::DecideRefusal::UnknownHuman) => Err(Undecided::UnknownHuman),
        Err(crate::server::store::DecideRefusal::Refused(error)) => Err(Undecided::Refused(error)),
    }
}
