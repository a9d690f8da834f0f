//! A run's steps as rows and as the contract shows them, read one at a time or a page at a time.

use serde_json::{Value, json};

use super::{decode, parse_enum, put, upper_bound};
use crate::server::store::{Columns, Page, Position, Store, StoreError, on_backend, rfc3339};
use crate::server::workflow::StepRecord;

macro_rules! step_columns {
    () => {
        "s.id, s.run_id, s.position, s.step_key, s.title, s.kind, s.instructions, s.status, s.approval_id, s.output, s.reason, s.revision, s.created_at, s.updated_at"
    };
}
pub(super) use step_columns;

pub(super) fn step_row(row: &impl Columns) -> Result<StepRecord, StoreError> {
    Ok(StepRecord {
        id: row.column(0)?,
        run_id: row.column(1)?,
        position: row.column(2)?,
        key: row.column(3)?,
        title: row.column(4)?,
        kind: parse_enum(row.column(5)?, "workflow_steps.kind")?,
        instructions: row.column(6)?,
        status: parse_enum(row.column(7)?, "workflow_steps.status")?,
        approval_id: row.column(8)?,
        output: row.column(9)?,
        reason: row.column(10)?,
        revision: row.column(11)?,
        created_at: row.column(12)?,
        updated_at: row.column(13)?,
    })
}

impl Store {
    /// The step `step_id` of a run of the workspace.
    pub async fn step(
        &self,
        workspace_id: &str,
        step_id: &str,
    ) -> Result<Option<StepRecord>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!("SELECT ", step_columns!(), " FROM workflow_steps s JOIN workflow_runs r ON r.id = s.run_id WHERE s.id = $1 AND r.workspace_id = $2"))
                .bind(step_id)
                .bind(workspace_id)
                .fetch_optional(reader)
                .await?;
            row.as_ref().map(step_row).transpose()
        })
    }

    /// The steps of the workspace's run `run_id`, `updatedAt DESC, id DESC`, optionally in one
    /// status; `None` when there is no such run.
    pub async fn list_steps(
        &self,
        workspace_id: &str,
        run_id: &str,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Option<Page<StepRecord>>, StoreError> {
        let (after_ms, after_id) = upper_bound(after);
        on_backend!(self, |writer, reader, pg| {
            let visible =
                sqlx::query("SELECT 1 FROM workflow_runs WHERE id = $1 AND workspace_id = $2")
                    .bind(run_id)
                    .bind(workspace_id)
                    .fetch_optional(reader)
                    .await?;
            if visible.is_none() {
                return Ok(None);
            }
            let rows = sqlx::query(concat!("SELECT ", step_columns!(),
                " FROM workflow_steps s WHERE s.run_id = $1 AND ($2 IS NULL OR s.status = $2) AND (s.updated_at, s.id) < ($3, $4) ORDER BY s.updated_at DESC, s.id DESC LIMIT $5"))
                .bind(run_id).bind(status).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                .fetch_all(reader)
                .await?;
            let rows = rows
                .iter()
                .map(|row| {
                    let step = step_row(row)?;
                    let position = Position {
                        at_ms: step.updated_at,
                        id: step.id.clone(),
                    };
                    Ok((step, position))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Some(Page::from_rows(rows, limit)))
        })
    }
}

/// The step as the contract shows it.
pub fn step_contract(
    step: &StepRecord,
) -> Result<crate::contract::types::WorkflowStep, StoreError> {
    let mut value = json!({
        "id": step.id,
        "runId": step.run_id,
        "key": step.key,
        "title": step.title,
        "kind": step.kind.to_string(),
        "position": step.position,
        "status": step.status.to_string(),
        "revision": step.revision,
        "createdAt": rfc3339(step.created_at),
        "updatedAt": rfc3339(step.updated_at),
    });
    put(
        &mut value,
        "instructions",
        step.instructions.clone().map(Value::from),
    );
    put(
        &mut value,
        "approvalId",
        step.approval_id.clone().map(Value::from),
    );
    put(&mut value, "output", step.output.clone().map(Value::from));
    put(&mut value, "reason", step.reason.clone().map(Value::from));
    decode(value, "workflow_steps")
}
