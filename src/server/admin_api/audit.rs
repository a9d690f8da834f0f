//! The workspace's audit records, a page at a time.

use axum::extract::{Path, State};
use serde::Deserialize;

use super::{Answer, OperatorJson, operator};
use crate::contract::types as t;
use crate::server::actions::page;
use crate::server::state::AppState;
use crate::wire::Data;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AuditPage {
    #[serde(default)]
    agent_id: Option<t::AgentId>,
    /// Only records from this time on (RFC 3339).
    #[serde(default)]
    since: Option<t::Timestamp>,
    #[serde(default)]
    limit: Option<t::PageLimit>,
    #[serde(default)]
    cursor: Option<t::Cursor>,
}

/// `POST …/audit/list`: one page of the workspace's audit records, newest first, optionally of
/// one agent and from a time on; the cursor is bound to the workspace and both filters.
pub(super) async fn list_audit(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(AuditPage {
        agent_id,
        since,
        limit,
        cursor,
    }): OperatorJson<AuditPage>,
) -> Answer {
    let since_ms = since.map_or(0, |since| since.0.timestamp_millis());
    let filter = page::Filter::new(&operator(&state, &workspace_id), "admin.audit")
        .with("agentId", &agent_id)
        .with("since", since_ms);
    let listed = filter
        .page(&state, cursor.as_ref(), limit, async |after, limit| {
            state
                .store
                .list_audit(
                    &workspace_id,
                    agent_id.as_ref().map(|a| a.as_str()),
                    since_ms,
                    after.as_ref(),
                    limit,
                )
                .await
        })
        .await?;
    Ok(Data(
        listed.into_json("records", crate::server::store::shown_audit),
    ))
}
