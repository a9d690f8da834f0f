//! Triggers: the manual and scheduled starters of a plan's runs, read-decide-write with the
//! trigger's row locked on PostgreSQL.

use serde_json::{Value, json};

use super::{decode, put, upper_bound};
use crate::contract::types::WorkflowTrigger;
use crate::server::store::{
    Columns, Page, Position, Store, StoreError, new_id, on_backend, rfc3339,
};

macro_rules! trigger_columns {
    () => {
        "g.id, g.workspace_id, g.plan_id, g.name, g.kind, g.status, g.start_at, g.every_minutes, g.next_fire_at, g.created_by_agent_id, g.revision, g.created_at, g.updated_at"
    };
}
pub(super) use trigger_columns;

/// A trigger's row.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerRecord {
    pub id: String,
    pub workspace_id: String,
    pub plan_id: String,
    pub name: String,
    /// `manual` or `scheduled`.
    pub kind: String,
    /// `enabled`, `disabled` or `archived`.
    pub status: String,
    pub start_at: Option<i64>,
    pub every_minutes: Option<i64>,
    pub next_fire_at: Option<i64>,
    pub created_by_agent_id: Option<String>,
    pub revision: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl TriggerRecord {
    /// The trigger as the contract shows it.
    pub fn to_contract(&self) -> Result<WorkflowTrigger, StoreError> {
        let mut trigger = json!({
            "id": self.id,
            "planId": self.plan_id,
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "revision": self.revision,
            "createdAt": rfc3339(self.created_at),
            "updatedAt": rfc3339(self.updated_at),
        });
        put(
            &mut trigger,
            "startAt",
            self.start_at.map(|at| json!(rfc3339(at))),
        );
        put(
            &mut trigger,
            "everyMinutes",
            self.every_minutes.map(Value::from),
        );
        put(
            &mut trigger,
            "nextFireAt",
            self.next_fire_at.map(|at| json!(rfc3339(at))),
        );
        put(
            &mut trigger,
            "createdByAgentId",
            self.created_by_agent_id.clone().map(Value::from),
        );
        decode(trigger, "workflow_triggers")
    }
}

pub(super) fn trigger_row(row: &impl Columns) -> Result<TriggerRecord, StoreError> {
    Ok(TriggerRecord {
        id: row.column(0)?,
        workspace_id: row.column(1)?,
        plan_id: row.column(2)?,
        name: row.column(3)?,
        kind: row.column(4)?,
        status: row.column(5)?,
        start_at: row.column(6)?,
        every_minutes: row.column(7)?,
        next_fire_at: row.column(8)?,
        created_by_agent_id: row.column(9)?,
        revision: row.column(10)?,
        created_at: row.column(11)?,
        updated_at: row.column(12)?,
    })
}

/// What a trigger change writes.
#[derive(Debug, Clone)]
pub struct TriggerChange {
    pub name: String,
    pub status: String,
    pub start_at: Option<i64>,
    pub every_minutes: Option<i64>,
    pub next_fire_at: Option<i64>,
}

impl Store {
    pub async fn insert_trigger(
        &self,
        workspace_id: &str,
        plan_id: &str,
        trigger: &TriggerChange,
        kind: &str,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<TriggerRecord, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("wft", now_ms);
            sqlx::query(
                "INSERT INTO workflow_triggers (id, workspace_id, plan_id, name, kind, status, start_at, every_minutes, next_fire_at, created_by_agent_id, revision, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11, $11)",
            )
            .bind(&id)
            .bind(workspace_id)
            .bind(plan_id)
            .bind(&trigger.name)
            .bind(kind)
            .bind(&trigger.status)
            .bind(trigger.start_at)
            .bind(trigger.every_minutes)
            .bind(trigger.next_fire_at)
            .bind(agent_id)
            .bind(now_ms)
            .execute(writer)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                trigger_columns!(),
                " FROM workflow_triggers g WHERE g.id = $1"
            ))
            .bind(&id)
            .fetch_one(writer)
            .await?;
            trigger_row(&row)
        })
    }

    pub async fn trigger(
        &self,
        workspace_id: &str,
        trigger_id: &str,
    ) -> Result<Option<TriggerRecord>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                trigger_columns!(),
                " FROM workflow_triggers g WHERE g.id = $1 AND g.workspace_id = $2"
            ))
            .bind(trigger_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            row.as_ref().map(trigger_row).transpose()
        })
    }

    /// Triggers `updatedAt DESC, id DESC`: one plan's when `plan_id` is given, else the
    /// workspace's; optionally in one status.
    pub async fn list_triggers(
        &self,
        workspace_id: &str,
        plan_id: Option<&str>,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<TriggerRecord>, StoreError> {
        let (after_ms, after_id) = upper_bound(after);
        on_backend!(self, |writer, reader, pg| {
            let rows = match plan_id {
                Some(plan_id) => sqlx::query(concat!("SELECT ", trigger_columns!(),
                    " FROM workflow_triggers g WHERE g.plan_id = $1 AND g.workspace_id = $2 AND ($3 IS NULL OR g.status = $3) AND (g.updated_at, g.id) < ($4, $5) \
                     ORDER BY g.updated_at DESC, g.id DESC LIMIT $6"))
                    .bind(plan_id).bind(workspace_id).bind(status).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
                None => sqlx::query(concat!("SELECT ", trigger_columns!(),
                    " FROM workflow_triggers g WHERE g.workspace_id = $1 AND ($2 IS NULL OR g.status = $2) AND (g.updated_at, g.id) < ($3, $4) \
                     ORDER BY g.updated_at DESC, g.id DESC LIMIT $5"))
                    .bind(workspace_id).bind(status).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
            };
            let rows = rows
                .iter()
                .map(|row| {
                    let trigger = trigger_row(row)?;
                    let position = Position {
                        at_ms: trigger.updated_at,
                        id: trigger.id.clone(),
                    };
                    Ok((trigger, position))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Page::from_rows(rows, limit))
        })
    }

    /// Reads the trigger, lets `change` decide, writes it with `revision + 1`; one transaction.
    pub async fn change_trigger<E>(
        &self,
        workspace_id: &str,
        trigger_id: &str,
        now_ms: i64,
        change: impl FnOnce(&TriggerRecord) -> Result<TriggerChange, E>,
    ) -> Result<Option<Result<TriggerRecord, E>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let row = sqlx::query(if pg {
                concat!(
                    "SELECT ",
                    trigger_columns!(),
                    " FROM workflow_triggers g WHERE g.id = $1 AND g.workspace_id = $2 FOR UPDATE"
                )
            } else {
                concat!(
                    "SELECT ",
                    trigger_columns!(),
                    " FROM workflow_triggers g WHERE g.id = $1 AND g.workspace_id = $2"
                )
            })
            .bind(trigger_id)
            .bind(workspace_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let current = trigger_row(&row)?;
            let changed = match change(&current) {
                Ok(changed) => changed,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            sqlx::query(
                "UPDATE workflow_triggers SET name = $2, status = $3, start_at = $4, every_minutes = $5, next_fire_at = $6, revision = revision + 1, updated_at = $7 WHERE id = $1",
            )
            .bind(trigger_id)
            .bind(&changed.name)
            .bind(&changed.status)
            .bind(changed.start_at)
            .bind(changed.every_minutes)
            .bind(changed.next_fire_at)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                trigger_columns!(),
                " FROM workflow_triggers g WHERE g.id = $1"
            ))
            .bind(trigger_id)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(Ok(trigger_row(&row)?)))
        })
    }
}
