//! Triggers: the manual and scheduled starters of a plan's runs, read-decide-write with the
//! trigger's row locked on PostgreSQL.

use serde_json::{Value, json};

use super::{OfPlan, decode, put};
use crate::contract::types::WorkflowTrigger;
use crate::server::store::shape::{Query, Resource};
use crate::server::store::{Columns, Position, Store, StoreError, here, new_id, rfc3339};

/// A trigger's row (serialized only to weigh a page of them).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
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

impl OfPlan for TriggerRecord {}

impl Resource for TriggerRecord {
    const TABLE: &'static str = "workflow_triggers";
    const ALIAS: &'static str = "g";
    const COLUMNS: &'static str = "g.id, g.workspace_id, g.plan_id, g.name, g.kind, g.status, g.start_at, g.every_minutes, g.next_fire_at, g.created_by_agent_id, g.revision, g.created_at, g.updated_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let trigger = TriggerRecord {
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
        };
        let position = Position::of(trigger.updated_at, &trigger.id);
        Ok((trigger, position))
    }
}

/// The workspace's trigger `trigger_id`.
pub(super) fn in_workspace<'a>(workspace_id: &'a str, trigger_id: &'a str) -> Query<'a> {
    Query::select::<TriggerRecord>("WHERE g.id = $1 AND g.workspace_id = $2")
        .bind(trigger_id)
        .bind(workspace_id)
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
        let id = new_id("wft", now_ms);
        let insert = Query::new(
            "INSERT INTO workflow_triggers (id, workspace_id, plan_id, name, kind, status, start_at, every_minutes, next_fire_at, created_by_agent_id, revision, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11, $11)",
        );
        let insert = insert.bind(&id).bind(workspace_id).bind(plan_id);
        let insert = insert.bind(&trigger.name).bind(kind).bind(&trigger.status);
        let insert = insert.bind(trigger.start_at).bind(trigger.every_minutes);
        let insert = insert
            .bind(trigger.next_fire_at)
            .bind(agent_id)
            .bind(now_ms);
        self.insert(here!(), insert, &id).await
    }

    pub async fn trigger(
        &self,
        workspace_id: &str,
        trigger_id: &str,
    ) -> Result<Option<TriggerRecord>, StoreError> {
        self.one(here!(), in_workspace(workspace_id, trigger_id))
            .await
    }

    /// Reads the trigger, lets `change` decide, writes it with `revision + 1`; one transaction.
    pub async fn change_trigger<E>(
        &self,
        workspace_id: &str,
        trigger_id: &str,
        now_ms: i64,
        change: impl FnOnce(&TriggerRecord) -> Result<TriggerChange, E>,
    ) -> Result<Option<Result<TriggerRecord, E>>, StoreError> {
        let decide = |current: &TriggerRecord| {
            let TriggerChange {
                name,
                status,
                start_at,
                every_minutes,
                next_fire_at,
            } = change(current)?;
            Ok(TriggerRecord {
                name,
                status,
                start_at,
                every_minutes,
                next_fire_at,
                ..current.clone()
            })
        };
        let lookup = in_workspace(workspace_id, trigger_id);
        self.change(here!(), lookup, decide, |changed, id| {
            Query::new(
                "UPDATE workflow_triggers SET name = $2, status = $3, start_at = $4, every_minutes = $5, next_fire_at = $6, revision = revision + 1, updated_at = $7 WHERE id = $1",
            )
            .bind(id)
            .bind(&changed.name)
            .bind(&changed.status)
            .bind(changed.start_at)
            .bind(changed.every_minutes)
            .bind(changed.next_fire_at)
            .bind(now_ms)
        })
        .await
    }
}
