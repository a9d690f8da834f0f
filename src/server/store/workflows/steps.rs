//! A run's steps as rows and as the contract shows them, read one at a time or a page at a time.

use serde_json::{Value, json};

use super::{decode, parse_enum, put};
use crate::server::store::shape::{Query, Resource};
use crate::server::store::{Columns, Page, Position, Store, StoreError, here, rfc3339};
use crate::server::workflow::StepRecord;

impl Resource for StepRecord {
    const TABLE: &'static str = "workflow_steps";
    const ALIAS: &'static str = "s";
    const COLUMNS: &'static str = "s.id, s.run_id, s.position, s.step_key, s.title, s.kind, s.instructions, s.status, s.approval_id, s.output, s.reason, s.revision, s.created_at, s.updated_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let step = StepRecord {
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
        };
        let position = Position::of(step.updated_at, &step.id);
        Ok((step, position))
    }
}

/// The steps of run `$1`, in run order.
pub(super) fn of_run(run_id: &str) -> Query<'_> {
    Query::select::<StepRecord>("WHERE s.run_id = $1 ORDER BY s.position").bind(run_id)
}

impl Store {
    /// The step `step_id` of a run of the workspace.
    pub async fn step(
        &self,
        workspace_id: &str,
        step_id: &str,
    ) -> Result<Option<StepRecord>, StoreError> {
        let query = Query::select::<StepRecord>(
            "JOIN workflow_runs r ON r.id = s.run_id WHERE s.id = $1 AND r.workspace_id = $2",
        );
        self.one(here!(), query.bind(step_id).bind(workspace_id))
            .await
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
        let run = Query::new("SELECT 1 FROM workflow_runs WHERE id = $1 AND workspace_id = $2");
        if !self
            .exists(here!(), run.bind(run_id).bind(workspace_id))
            .await?
        {
            return Ok(None);
        }
        let query = Query::select::<StepRecord>("WHERE s.run_id = $1")
            .bind(run_id)
            .and_some("s.status", status)
            .newest::<StepRecord>(after, limit);
        self.page(here!(), query, limit).await.map(Some)
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
