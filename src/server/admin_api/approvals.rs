//! Approvals: a page of the workspace's approvals, and a human's decision on one.

use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::json;

use super::{Answer, Human, Noun, OperatorJson, missing, operator};
use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::contract::{ActionError, ActionId};
use crate::server::actions::{page, read_name};
use crate::server::failure;
use crate::server::state::AppState;
use crate::wire::Data;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ApprovalPage {
    #[serde(default)]
    status: Option<t::ApprovalStatus>,
    #[serde(default)]
    limit: Option<t::PageLimit>,
    #[serde(default)]
    cursor: Option<t::Cursor>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(super) enum Decision {
    Approve,
    Reject,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ApprovalDecision {
    human_id: String,
    decision: Decision,
    #[serde(default)]
    comment: Option<t::LongText>,
}

/// `POST …/approvals/list`: one page of the workspace's approvals, newest change first; the
/// cursor is bound to the operator, the workspace and the status filter.
pub(super) async fn list_approvals(
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
    let listed = filter
        .page(&state, cursor.as_ref(), limit, async |after, limit| {
            let status = status.as_deref();
            state
                .store
                .list_approvals(&workspace_id, status, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(Data(
        listed.into_json("approvals", |approval| json!(approval)),
    ))
}

/// `POST …/approvals/{approvalId}/decision`: a human of the workspace approves or rejects a
/// pending approval, once; the workflow step waiting on it moves on in the same transaction.
pub(super) async fn decide_approval(
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
                    &read_name(ActionId::ApprovalGet, None),
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
                    Some(step) => crate::server::actions::step_readable(step, &fields),
                    None => Ok(()),
                }
            },
        )
        .await
        .map_err(failure::store)?
        .ok_or_else(|| missing("approval", &approval_id))?;
    match decided {
        Ok(approval) => Ok(Data(json!({ "approval": approval }))),
        Err(crate::server::store::DecideRefusal::Decided(status)) => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!("approval `{approval_id}` was already decided: {status}"),
        )
        .into()),
        Err(crate::server::store::DecideRefusal::UnknownHuman) => {
            Err(Human::missing(&human_id).into())
        }
        Err(crate::server::store::DecideRefusal::Refused(error)) => Err(error.into()),
    }
}
