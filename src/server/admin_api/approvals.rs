//! Approvals: a page of the workspace's approvals, and a human's decision on one.

use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::json;

use super::{Answer, Human, Noun, OperatorJson, missing, operator};
use crate::contract::types as t;
use crate::server::actions::approval::{self, Undecided};
use crate::server::actions::page;
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
    let approve = decision == Decision::Approve;
    match approval::decide(
        &state,
        &workspace_id,
        &approval_id,
        &human_id,
        approve,
        comment,
    )
    .await
    {
        Ok(approval) => Ok(Data(json!({ "approval": approval }))),
        Err(Undecided::Missing) => Err(missing("approval", &approval_id).into()),
        Err(Undecided::UnknownHuman) => Err(Human::missing(&human_id).into()),
        Err(Undecided::Refused(error)) => Err(error.into()),
    }
}
