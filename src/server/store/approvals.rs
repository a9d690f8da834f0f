//! Approvals: decisions asked of a workspace's humans, by an agent directly or by a workflow step
//! the run reached. Deciding one (`Store::decide_approval`, in `workflows/runs.rs`) also moves the run
//! whose step waits on it.

use serde_json::{Value, json};

use super::shape::{Query, Resource};
use super::{
    Columns, EventKind, NewEvent, Page, Position, Store, StoreError, here, new_id, rfc3339,
};
use crate::contract::types::Approval;

impl Resource for Approval {
    const TABLE: &'static str = "approvals";
    const ALIAS: &'static str = "a";
    const COLUMNS: &'static str = "a.id, a.title, a.details, a.status, a.requested_by_agent_id, a.run_id, a.step_id, a.decided_by_human_id, a.comment, a.decided_at, a.revision, a.created_at, a.updated_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        approval_row(row)
    }
}

/// The workspace's approval `approval_id`.
pub(super) fn in_workspace<'a>(workspace_id: &'a str, approval_id: &'a str) -> Query<'a> {
    Query::select::<Approval>("WHERE a.id = $1 AND a.workspace_id = $2")
        .bind(approval_id)
        .bind(workspace_id)
}

/// A stored approval and its keyset position (`updatedAt`, `id`).
fn approval_row(row: &impl Columns) -> Result<(Approval, Position), StoreError> {
    let id: String = row.column(0)?;
    let updated_at: i64 = row.column(12)?;
    let mut value = json!({
        "id": id,
        "title": row.column::<String>(1)?,
        "status": row.column::<String>(3)?,
        "revision": row.column::<i64>(10)?,
        "createdAt": rfc3339(row.column(11)?),
        "updatedAt": rfc3339(updated_at),
    });
    let optional = [
        ("details", row.column::<Option<String>>(2)?),
        ("requestedByAgentId", row.column::<Option<String>>(4)?),
        ("runId", row.column::<Option<String>>(5)?),
        ("stepId", row.column::<Option<String>>(6)?),
        ("decidedByHumanId", row.column::<Option<String>>(7)?),
        ("comment", row.column::<Option<String>>(8)?),
        ("decidedAt", row.column::<Option<i64>>(9)?.map(rfc3339)),
    ];
    for (key, text) in optional {
        if let Some(text) = text {
            value[key] = Value::from(text);
        }
    }
    let approval = serde_json::from_value(value).map_err(|_| StoreError::Corrupt {
        column: "approvals",
    })?;
    Ok((
        approval,
        Position {
            at_ms: updated_at,
            id,
        },
    ))
}

impl Store {
    /// A pending approval `agent_id` asks for.
    pub async fn insert_approval(
        &self,
        workspace_id: &str,
        title: &str,
        details: Option<&str>,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<Approval, StoreError> {
        let id = new_id("apr", now_ms);
        let insert = Query::new(
            "INSERT INTO approvals (id, workspace_id, title, details, status, requested_by_agent_id, revision, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'pending', $5, 1, $6, $6)",
        );
        let insert = insert.bind(&id).bind(workspace_id).bind(title);
        let insert = insert.bind(details).bind(agent_id).bind(now_ms);
        let approval = self.insert(here!(), insert, &id).await?;
        let event = NewEvent {
            kind: EventKind::Approval,
            channel_id: None,
            thread_id: None,
            agent_id: Some(agent_id),
            subject: &id,
        };
        self.record_event(workspace_id, now_ms, &event).await?;
        Ok(approval)
    }

    /// The workspace's approval `approval_id`.
    pub async fn approval(
        &self,
        workspace_id: &str,
        approval_id: &str,
    ) -> Result<Option<Approval>, StoreError> {
        self.one(here!(), in_workspace(workspace_id, approval_id))
            .await
    }

    /// The workspace's approvals `updatedAt DESC, id DESC`, optionally in one status.
    pub async fn list_approvals(
        &self,
        workspace_id: &str,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Approval>, StoreError> {
        let query = Query::select::<Approval>("WHERE a.workspace_id = $1")
            .bind(workspace_id)
            .and_some("a.status", status)
            .newest::<Approval>(after, limit);
        self.page(here!(), query, limit).await
    }
}
