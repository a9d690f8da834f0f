//! Workflows: plans and their versions, triggers, runs with their steps and logs, and the
//! scheduler's firing of scheduled triggers.
//!
//! A run is loaded and saved whole (`load_run!`/`save_run!`, one transaction, the run's row locked
//! first on PostgreSQL) around a transition of the engine (`server/workflow.rs`), which decides
//! everything without SQL. Plans and triggers follow the read-decide-write pattern of the other
//! domains, their row locked on PostgreSQL.

use serde_json::{Value, json};

use super::{Columns, Page, Position, Store, StoreError, new_id, on_backend, rfc3339};
use crate::contract::types::{PlanSteps, WorkflowPlan, WorkflowPlanVersion, WorkflowTrigger};
use crate::server::workflow::{LogRecord, RunRecord, RunState, StepRecord};

/// Due scheduled triggers one scheduler pass fires at most.
pub const MAX_FIRINGS_PER_PASS: i64 = 100;

/// A contract value from a row built as JSON: the contract's own checks decide if it is intact.
fn decode<T: serde::de::DeserializeOwned>(
    value: Value,
    what: &'static str,
) -> Result<T, StoreError> {
    serde_json::from_value(value).map_err(|_| StoreError::Corrupt { column: what })
}

fn parse_enum<T: std::str::FromStr>(text: String, what: &'static str) -> Result<T, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt { column: what })
}

/// Inserts `value` under `key` when it is `Some`.
fn put(object: &mut Value, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        object[key] = value;
    }
}

// ---------------------------------------------------------------------------------------------
// Plans

macro_rules! plan_columns {
    () => {
        "p.id, p.name, p.description, p.status, p.latest_version, p.published_version, p.created_by_agent_id, p.revision, p.created_at, p.updated_at"
    };
}

fn plan_row(row: &impl Columns) -> Result<(WorkflowPlan, Position), StoreError> {
    let id: String = row.column(0)?;
    let updated_at: i64 = row.column(9)?;
    let mut plan = json!({
        "id": id,
        "name": row.column::<String>(1)?,
        "status": row.column::<String>(3)?,
        "latestVersion": row.column::<i64>(4)?,
        "revision": row.column::<i64>(7)?,
        "createdAt": rfc3339(row.column(8)?),
        "updatedAt": rfc3339(updated_at),
    });
    put(
        &mut plan,
        "description",
        row.column::<Option<String>>(2)?.map(Value::from),
    );
    put(
        &mut plan,
        "publishedVersion",
        row.column::<Option<i64>>(5)?.map(Value::from),
    );
    put(
        &mut plan,
        "createdByAgentId",
        row.column::<Option<String>>(6)?.map(Value::from),
    );
    Ok((
        decode(plan, "workflow_plans")?,
        Position {
            at_ms: updated_at,
            id,
        },
    ))
}

fn version_row(row: &impl Columns) -> Result<WorkflowPlanVersion, StoreError> {
    let steps: Value =
        serde_json::from_str(&row.column::<String>(3)?).map_err(|_| StoreError::Corrupt {
            column: "workflow_plan_versions",
        })?;
    let mut version = json!({
        "planId": row.column::<String>(0)?,
        "version": row.column::<i64>(1)?,
        "state": row.column::<String>(2)?,
        "steps": steps,
        "createdAt": rfc3339(row.column(4)?),
    });
    put(
        &mut version,
        "publishedAt",
        row.column::<Option<i64>>(5)?.map(|at| json!(rfc3339(at))),
    );
    decode(version, "workflow_plan_versions")
}

/// What a plan change writes.
#[derive(Debug, Clone)]
pub struct PlanChange {
    pub name: String,
    pub description: Option<String>,
    /// `active` or `archived`.
    pub status: String,
    /// New steps: into the draft version, or a new draft after a published one.
    pub steps: Option<PlanSteps>,
    /// Freeze the latest version.
    pub publish: bool,
}

fn steps_json(steps: &PlanSteps) -> String {
    serde_json::to_string(steps).expect("steps serialize")
}

/// Version `$version` of plan `$plan_id`, read inside the transaction `$tx` that wrote it (a
/// macro: the transaction's type is each backend's own).
macro_rules! version_in {
    ($tx:expr, $plan_id:expr, $version:expr) => {
        async {
            let row = sqlx::query("SELECT plan_id, version, state, steps, created_at, published_at FROM workflow_plan_versions WHERE plan_id = $1 AND version = $2")
                .bind($plan_id)
                .bind($version)
                .fetch_one(&mut *$tx)
                .await?;
            version_row(&row)
        }
    };
}

impl Store {
    /// Creates plan `name` with its first (draft) version; `admit` sees the plan and that version
    /// as stored before the transaction commits, and refuses the whole insert with its `Err`.
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_plan<E>(
        &self,
        workspace_id: &str,
        name: &str,
        description: Option<&str>,
        steps: &PlanSteps,
        agent_id: &str,
        now_ms: i64,
        admit: impl FnOnce(&WorkflowPlan, &WorkflowPlanVersion) -> Result<(), E>,
    ) -> Result<Result<WorkflowPlan, E>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("wfp", now_ms);
            let mut tx = writer.begin().await?;
            sqlx::query(
                "INSERT INTO workflow_plans (id, workspace_id, name, description, status, latest_version, published_version, created_by_agent_id, revision, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, 'active', 1, NULL, $5, 1, $6, $6)",
            )
            .bind(&id)
            .bind(workspace_id)
            .bind(name)
            .bind(description)
            .bind(agent_id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            sqlx::query("INSERT INTO workflow_plan_versions (plan_id, version, state, steps, created_at) VALUES ($1, 1, 'draft', $2, $3)")
                .bind(&id)
                .bind(steps_json(steps))
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                plan_columns!(),
                " FROM workflow_plans p WHERE p.id = $1"
            ))
            .bind(&id)
            .fetch_one(&mut *tx)
            .await?;
            let plan = plan_row(&row)?.0;
            let latest = version_in!(tx, &id, 1i64).await?;
            if let Err(refusal) = admit(&plan, &latest) {
                return Ok(Err(refusal));
            }
            tx.commit().await?;
            Ok(Ok(plan))
        })
    }

    /// The plan `plan_id` of the workspace.
    pub async fn plan(
        &self,
        workspace_id: &str,
        plan_id: &str,
    ) -> Result<Option<WorkflowPlan>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                plan_columns!(),
                " FROM workflow_plans p WHERE p.id = $1 AND p.workspace_id = $2"
            ))
            .bind(plan_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            row.map(|row| plan_row(&row).map(|r| r.0)).transpose()
        })
    }

    /// Version `version` of the workspace's plan `plan_id`.
    pub async fn plan_version(
        &self,
        workspace_id: &str,
        plan_id: &str,
        version: i64,
    ) -> Result<Option<WorkflowPlanVersion>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT v.plan_id, v.version, v.state, v.steps, v.created_at, v.published_at FROM workflow_plan_versions v \
                 JOIN workflow_plans p ON p.id = v.plan_id WHERE v.plan_id = $1 AND p.workspace_id = $2 AND v.version = $3",
            )
            .bind(plan_id)
            .bind(workspace_id)
            .bind(version)
            .fetch_optional(reader)
            .await?;
            row.as_ref().map(version_row).transpose()
        })
    }

    /// The workspace's plans, `updatedAt DESC, id DESC`, optionally in one status.
    pub async fn list_plans(
        &self,
        workspace_id: &str,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<WorkflowPlan>, StoreError> {
        let (after_ms, after_id) = upper_bound(after);
        on_backend!(self, |writer, reader, pg| {
            let rows = match status {
                Some(status) => sqlx::query(concat!("SELECT ", plan_columns!(),
                    " FROM workflow_plans p WHERE p.workspace_id = $1 AND p.status = $2 AND (p.updated_at, p.id) < ($3, $4) ORDER BY p.updated_at DESC, p.id DESC LIMIT $5"))
                    .bind(workspace_id).bind(status).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
                None => sqlx::query(concat!("SELECT ", plan_columns!(),
                    " FROM workflow_plans p WHERE p.workspace_id = $1 AND (p.updated_at, p.id) < ($2, $3) ORDER BY p.updated_at DESC, p.id DESC LIMIT $4"))
                    .bind(workspace_id).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
            };
            let rows: Vec<_> = rows.iter().map(plan_row).collect::<Result<_, _>>()?;
            Ok(Page::from_rows(rows, limit))
        })
    }

    /// Reads the plan and its latest version, lets `change` decide, and writes the result with
    /// `revision + 1`, in one transaction; `admit` sees the plan and its latest version as written
    /// before the transaction commits, and refuses the change with its `Err`. `Ok(None)` when the
    /// workspace has no such plan.
    pub async fn change_plan<E>(
        &self,
        workspace_id: &str,
        plan_id: &str,
        now_ms: i64,
        change: impl FnOnce(&WorkflowPlan, &WorkflowPlanVersion) -> Result<PlanChange, E>,
        admit: impl FnOnce(&WorkflowPlan, &WorkflowPlanVersion) -> Result<(), E>,
    ) -> Result<Option<Result<WorkflowPlan, E>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let row = sqlx::query(if pg {
                concat!(
                    "SELECT ",
                    plan_columns!(),
                    " FROM workflow_plans p WHERE p.id = $1 AND p.workspace_id = $2 FOR UPDATE"
                )
            } else {
                concat!(
                    "SELECT ",
                    plan_columns!(),
                    " FROM workflow_plans p WHERE p.id = $1 AND p.workspace_id = $2"
                )
            })
            .bind(plan_id)
            .bind(workspace_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let current = plan_row(&row)?.0;
            let latest_number = current.latest_version.get() as i64;
            let latest = version_in!(tx, plan_id, latest_number).await?;
            let changed = match change(&current, &latest) {
                Ok(changed) => changed,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            let mut latest_version = latest_number;
            if let Some(steps) = &changed.steps {
                if latest.state == crate::contract::types::PlanVersionState::Draft {
                    sqlx::query("UPDATE workflow_plan_versions SET steps = $3 WHERE plan_id = $1 AND version = $2")
                        .bind(plan_id).bind(latest_version).bind(steps_json(steps))
                        .execute(&mut *tx).await?;
                } else {
                    latest_version += 1;
                    sqlx::query("INSERT INTO workflow_plan_versions (plan_id, version, state, steps, created_at) VALUES ($1, $2, 'draft', $3, $4)")
                        .bind(plan_id).bind(latest_version).bind(steps_json(steps)).bind(now_ms)
                        .execute(&mut *tx).await?;
                }
            }
            let mut published = current.published_version.map(|v| v.get() as i64);
            if changed.publish {
                sqlx::query("UPDATE workflow_plan_versions SET state = 'published', published_at = $3 WHERE plan_id = $1 AND version = $2")
                    .bind(plan_id).bind(latest_version).bind(now_ms)
                    .execute(&mut *tx).await?;
                published = Some(latest_version);
            }
            sqlx::query(
                "UPDATE workflow_plans SET name = $2, description = $3, status = $4, latest_version = $5, published_version = $6, \
                 revision = revision + 1, updated_at = $7 WHERE id = $1",
            )
            .bind(plan_id)
            .bind(&changed.name)
            .bind(changed.description.as_deref())
            .bind(&changed.status)
            .bind(latest_version)
            .bind(published)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                plan_columns!(),
                " FROM workflow_plans p WHERE p.id = $1"
            ))
            .bind(plan_id)
            .fetch_one(&mut *tx)
            .await?;
            let plan = plan_row(&row)?.0;
            let latest = version_in!(tx, plan_id, latest_version).await?;
            if let Err(refusal) = admit(&plan, &latest) {
                return Ok(Some(Err(refusal)));
            }
            tx.commit().await?;
            Ok(Some(Ok(plan)))
        })
    }
}

/// `(i64::MAX, U+10FFFF)` is above every row: one descending keyset query serves the first page
/// and the next.
fn upper_bound(after: Option<&Position>) -> (i64, String) {
    match after {
        Some(p) => (p.at_ms, p.id.clone()),
        None => (i64::MAX, "\u{10FFFF}".to_string()),
    }
}

// ---------------------------------------------------------------------------------------------
// Triggers

macro_rules! trigger_columns {
    () => {
        "g.id, g.workspace_id, g.plan_id, g.name, g.kind, g.status, g.start_at, g.every_minutes, g.next_fire_at, g.created_by_agent_id, g.revision, g.created_at, g.updated_at"
    };
}

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

fn trigger_row(row: &impl Columns) -> Result<TriggerRecord, StoreError> {
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

// ---------------------------------------------------------------------------------------------
// Runs, steps and logs

macro_rules! run_columns {
    () => {
        "r.id, r.workspace_id, r.plan_id, r.plan_version, r.trigger_id, r.fire_at, r.status, r.current_step_key, r.started_by_agent_id, r.cancel_reason, \
         r.log_entries, r.log_section, r.log_section_bytes, r.revision, r.created_at, r.updated_at, r.finished_at"
    };
}

macro_rules! step_columns {
    () => {
        "s.id, s.run_id, s.position, s.step_key, s.title, s.kind, s.instructions, s.status, s.approval_id, s.output, s.reason, s.revision, s.created_at, s.updated_at"
    };
}

fn run_row(row: &impl Columns) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        id: row.column(0)?,
        workspace_id: row.column(1)?,
        plan_id: row.column(2)?,
        plan_version: row.column(3)?,
        trigger_id: row.column(4)?,
        fire_at: row.column(5)?,
        status: parse_enum(row.column(6)?, "workflow_runs.status")?,
        current_step_key: row.column(7)?,
        started_by_agent_id: row.column(8)?,
        cancel_reason: row.column(9)?,
        log_entries: row.column(10)?,
        log_section: row.column(11)?,
        log_section_bytes: row.column(12)?,
        revision: row.column(13)?,
        created_at: row.column(14)?,
        updated_at: row.column(15)?,
        finished_at: row.column(16)?,
    })
}

fn step_row(row: &impl Columns) -> Result<StepRecord, StoreError> {
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

fn log_row(row: &impl Columns) -> Result<LogRecord, StoreError> {
    Ok(LogRecord {
        seq: row.column(0)?,
        section: row.column(1)?,
        at: row.column(2)?,
        event: parse_enum(row.column(3)?, "workflow_log.event")?,
        step_key: row.column(4)?,
        text: row.column(5)?,
    })
}

/// Loads the run `$run_id` of `$workspace_id` and its steps into a [`RunState`] at `$now`, inside
/// the transaction `$tx`, the run's row locked on PostgreSQL. Evaluates to
/// `Result<Option<RunState>, StoreError>`.
macro_rules! load_run {
    ($tx:expr, $pg:expr, $workspace_id:expr, $run_id:expr, $now:expr) => {
        async {
            let row = sqlx::query(if $pg {
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM workflow_runs r WHERE r.id = $1 AND r.workspace_id = $2 FOR UPDATE"
                )
            } else {
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM workflow_runs r WHERE r.id = $1 AND r.workspace_id = $2"
                )
            })
            .bind($run_id)
            .bind($workspace_id)
            .fetch_optional(&mut *$tx)
            .await?;
            let Some(row) = row else {
                return Ok::<_, StoreError>(None);
            };
            let run = run_row(&row)?;
            let steps = sqlx::query(concat!(
                "SELECT ",
                step_columns!(),
                " FROM workflow_steps s WHERE s.run_id = $1 ORDER BY s.position"
            ))
            .bind($run_id)
            .fetch_all(&mut *$tx)
            .await?
            .iter()
            .map(step_row)
            .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(RunState::loaded(run, steps, $now)))
        }
        .await
    };
}

/// Writes what a transition of `$state` changed, inside the transaction `$tx`: the run (inserted
/// or updated), its changed steps, the approvals it created and the log entries it appended.
macro_rules! save_run {
    ($tx:expr, $state:expr, $now:expr) => {
        async {
            let state: &RunState = $state;
            let run = &state.run;
            if state.is_new {
                sqlx::query(
                    "INSERT INTO workflow_runs (id, workspace_id, plan_id, plan_version, trigger_id, fire_at, status, current_step_key, started_by_agent_id, cancel_reason, \
                     log_entries, log_section, log_section_bytes, revision, created_at, updated_at, finished_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
                )
                .bind(&run.id).bind(&run.workspace_id).bind(&run.plan_id).bind(run.plan_version).bind(&run.trigger_id).bind(run.fire_at)
                .bind(run.status.to_string()).bind(run.current_step_key.as_deref()).bind(run.started_by_agent_id.as_deref()).bind(run.cancel_reason.as_deref())
                .bind(run.log_entries).bind(run.log_section).bind(run.log_section_bytes).bind(run.revision).bind(run.created_at).bind(run.updated_at).bind(run.finished_at)
                .execute(&mut *$tx)
                .await?;
            } else if state.run_changed() {
                sqlx::query(
                    "UPDATE workflow_runs SET status = $2, current_step_key = $3, cancel_reason = $4, log_entries = $5, log_section = $6, log_section_bytes = $7, \
                     revision = $8, updated_at = $9, finished_at = $10 WHERE id = $1",
                )
                .bind(&run.id).bind(run.status.to_string()).bind(run.current_step_key.as_deref()).bind(run.cancel_reason.as_deref())
                .bind(run.log_entries).bind(run.log_section).bind(run.log_section_bytes).bind(run.revision).bind(run.updated_at).bind(run.finished_at)
                .execute(&mut *$tx)
                .await?;
            }
            for step in state.changed_steps() {
                if state.is_new {
                    sqlx::query(
                        "INSERT INTO workflow_steps (id, run_id, position, step_key, title, kind, instructions, status, approval_id, output, reason, revision, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                    )
                    .bind(&step.id).bind(&step.run_id).bind(step.position).bind(&step.key).bind(&step.title).bind(step.kind.to_string())
                    .bind(step.instructions.as_deref()).bind(step.status.to_string()).bind(step.approval_id.as_deref())
                    .bind(step.output.as_deref()).bind(step.reason.as_deref()).bind(step.revision).bind(step.created_at).bind(step.updated_at)
                    .execute(&mut *$tx)
                    .await?;
                } else {
                    sqlx::query(
                        "UPDATE workflow_steps SET status = $2, approval_id = $3, output = $4, reason = $5, revision = $6, updated_at = $7 WHERE id = $1",
                    )
                    .bind(&step.id).bind(step.status.to_string()).bind(step.approval_id.as_deref()).bind(step.output.as_deref())
                    .bind(step.reason.as_deref()).bind(step.revision).bind(step.updated_at)
                    .execute(&mut *$tx)
                    .await?;
                }
            }
            for approval in &state.new_approvals {
                sqlx::query(
                    "INSERT INTO approvals (id, workspace_id, title, details, status, requested_by_agent_id, run_id, step_id, revision, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, 1, $8, $8)",
                )
                .bind(&approval.id).bind(&run.workspace_id).bind(&approval.title).bind(approval.details.as_deref())
                .bind(approval.requested_by_agent_id.as_deref()).bind(&run.id).bind(&approval.step_id).bind($now)
                .execute(&mut *$tx)
                .await?;
            }
            for entry in &state.new_log {
                sqlx::query("INSERT INTO workflow_log (run_id, seq, section, at, event, step_key, text) VALUES ($1, $2, $3, $4, $5, $6, $7)")
                    .bind(&run.id).bind(entry.seq).bind(entry.section).bind(entry.at).bind(entry.event.to_string())
                    .bind(entry.step_key.as_deref()).bind(entry.text.as_deref())
                    .execute(&mut *$tx)
                    .await?;
            }
            Ok::<_, StoreError>(())
        }
        .await
    };
}

/// Why a trigger may not start a run, as the store sees it; the action words the refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartRefusal {
    /// The trigger is `disabled` or `archived`.
    Trigger(String),
    /// The plan is archived.
    PlanArchived,
    /// The plan has no published version.
    Unpublished,
}

/// Starts a run of the plan behind `trigger` inside `tx` (trigger already read under lock).
macro_rules! start_in {
    ($tx:expr, $trigger:expr, $fire_at:expr, $agent:expr, $now:expr) => {
        async {
            let trigger: &TriggerRecord = $trigger;
            if trigger.status != "enabled" {
                return Ok::<_, StoreError>(Err(StartRefusal::Trigger(trigger.status.clone())));
            }
            let plan =
                sqlx::query("SELECT status, published_version FROM workflow_plans WHERE id = $1")
                    .bind(&trigger.plan_id)
                    .fetch_one(&mut *$tx)
                    .await?;
            let status: String = plan.column(0)?;
            let published: Option<i64> = plan.column(1)?;
            if status != "active" {
                return Ok(Err(StartRefusal::PlanArchived));
            }
            let Some(version) = published else {
                return Ok(Err(StartRefusal::Unpublished));
            };
            let steps: String = sqlx::query(
                "SELECT steps FROM workflow_plan_versions WHERE plan_id = $1 AND version = $2",
            )
            .bind(&trigger.plan_id)
            .bind(version)
            .fetch_one(&mut *$tx)
            .await?
            .column(0)?;
            let steps: PlanSteps =
                serde_json::from_str(&steps).map_err(|_| StoreError::Corrupt {
                    column: "workflow_plan_versions",
                })?;
            let state = RunState::start(
                &trigger.workspace_id,
                &trigger.plan_id,
                version,
                &trigger.id,
                $fire_at,
                $agent,
                &steps,
                $now,
            );
            save_run!($tx, &state, $now)?;
            Ok(Ok(state))
        }
        .await
    };
}

impl Store {
    /// Starts a run through the workspace's trigger `trigger_id` (locked): `Ok(None)` when there is
    /// no such trigger, `Ok(Some(Err(_)))` when it may not start one.
    pub async fn start_run(
        &self,
        workspace_id: &str,
        trigger_id: &str,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<Option<Result<RunState, StartRefusal>>, StoreError> {
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
            let trigger = trigger_row(&row)?;
            let started = start_in!(tx, &trigger, None, Some(agent_id), now_ms)?;
            if started.is_ok() {
                tx.commit().await?;
            }
            Ok(Some(started))
        })
    }

    /// Loads the workspace's run `run_id` under lock, lets `change` drive it, and saves what
    /// changed; one transaction. `Ok(None)` when there is no such run.
    pub async fn change_run<T, E>(
        &self,
        workspace_id: &str,
        run_id: &str,
        now_ms: i64,
        change: impl FnOnce(&mut RunState) -> Result<T, E>,
    ) -> Result<Option<Result<(T, RunState), E>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let Some(mut state) = load_run!(tx, pg, workspace_id, run_id, now_ms)? else {
                return Ok(None);
            };
            let value = match change(&mut state) {
                Ok(value) => value,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            save_run!(tx, &state, now_ms)?;
            tx.commit().await?;
            Ok(Some(Ok((value, state))))
        })
    }

    /// The workspace's run `run_id` and its steps in run order.
    pub async fn run(
        &self,
        workspace_id: &str,
        run_id: &str,
    ) -> Result<Option<(RunRecord, Vec<StepRecord>)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                run_columns!(),
                " FROM workflow_runs r WHERE r.id = $1 AND r.workspace_id = $2"
            ))
            .bind(run_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let run = run_row(&row)?;
            let steps = sqlx::query(concat!(
                "SELECT ",
                step_columns!(),
                " FROM workflow_steps s WHERE s.run_id = $1 ORDER BY s.position"
            ))
            .bind(run_id)
            .fetch_all(reader)
            .await?
            .iter()
            .map(step_row)
            .collect::<Result<Vec<_>, _>>()?;
            Ok(Some((run, steps)))
        })
    }

    /// Runs `updatedAt DESC, id DESC`: one plan's or the workspace's, optionally in one status.
    pub async fn list_workflow_runs(
        &self,
        workspace_id: &str,
        plan_id: Option<&str>,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<RunRecord>, StoreError> {
        let (after_ms, after_id) = upper_bound(after);
        on_backend!(self, |writer, reader, pg| {
            let rows = match (plan_id, status) {
                (Some(plan_id), status) => sqlx::query(concat!("SELECT ", run_columns!(),
                    " FROM workflow_runs r WHERE r.plan_id = $1 AND r.workspace_id = $2 AND ($3 IS NULL OR r.status = $3) AND (r.updated_at, r.id) < ($4, $5) \
                     ORDER BY r.updated_at DESC, r.id DESC LIMIT $6"))
                    .bind(plan_id).bind(workspace_id).bind(status).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
                (None, Some(status)) => sqlx::query(concat!("SELECT ", run_columns!(),
                    " FROM workflow_runs r WHERE r.workspace_id = $1 AND r.status = $2 AND (r.updated_at, r.id) < ($3, $4) \
                     ORDER BY r.updated_at DESC, r.id DESC LIMIT $5"))
                    .bind(workspace_id).bind(status).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
                (None, None) => sqlx::query(concat!("SELECT ", run_columns!(),
                    " FROM workflow_runs r WHERE r.workspace_id = $1 AND (r.updated_at, r.id) < ($2, $3) ORDER BY r.updated_at DESC, r.id DESC LIMIT $4"))
                    .bind(workspace_id).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
            };
            let rows = rows
                .iter()
                .map(|row| {
                    let run = run_row(row)?;
                    let position = Position {
                        at_ms: run.updated_at,
                        id: run.id.clone(),
                    };
                    Ok((run, position))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Page::from_rows(rows, limit))
        })
    }

    /// Section `section` of the log of the workspace's run `run_id`, and the run's last section;
    /// `None` when there is no such run.
    pub async fn run_log(
        &self,
        workspace_id: &str,
        run_id: &str,
        section: i64,
    ) -> Result<Option<(Vec<LogRecord>, i64)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT log_section FROM workflow_runs WHERE id = $1 AND workspace_id = $2",
            )
            .bind(run_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let last: i64 = row.column(0)?;
            let entries = sqlx::query("SELECT seq, section, at, event, step_key, text FROM workflow_log WHERE run_id = $1 AND section = $2 ORDER BY seq")
                .bind(run_id)
                .bind(section)
                .fetch_all(reader)
                .await?
                .iter()
                .map(log_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some((entries, last)))
        })
    }

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

    /// One scheduler pass over scheduled triggers due at `now_ms`: each starts one run for its due
    /// time and moves to its next firing (or stops). On PostgreSQL the due triggers are claimed
    /// with `FOR UPDATE SKIP LOCKED`, so replicas never fire one twice; a firing is also unique in
    /// the schema (`UNIQUE (trigger_id, fire_at)`). A firing whose plan cannot run (archived or
    /// unpublished) starts nothing and still moves on. Returns the runs started.
    pub async fn fire_due_triggers(&self, now_ms: i64) -> Result<usize, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let due = sqlx::query(if pg {
                concat!("SELECT ", trigger_columns!(), " FROM workflow_triggers g WHERE g.status = 'enabled' AND g.next_fire_at IS NOT NULL AND g.next_fire_at <= $1 \
                         ORDER BY g.next_fire_at, g.id LIMIT $2 FOR UPDATE SKIP LOCKED")
            } else {
                concat!("SELECT ", trigger_columns!(), " FROM workflow_triggers g WHERE g.status = 'enabled' AND g.next_fire_at IS NOT NULL AND g.next_fire_at <= $1 \
                         ORDER BY g.next_fire_at, g.id LIMIT $2")
            })
            .bind(now_ms)
            .bind(MAX_FIRINGS_PER_PASS)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(trigger_row)
            .collect::<Result<Vec<_>, _>>()?;
            let mut started = 0;
            for trigger in &due {
                let fire_at = trigger.next_fire_at.expect("selected with a due time");
                match start_in!(tx, trigger, Some(fire_at), None, now_ms)? {
                    Ok(_) => started += 1,
                    Err(refusal) => {
                        tracing::warn!(trigger = %trigger.id, ?refusal, "a scheduled trigger fired but its plan cannot run")
                    }
                }
                // Firings missed while no server ran collapse into this one.
                let next = trigger.every_minutes.map(|minutes| {
                    let step = minutes * 60_000;
                    fire_at + step * ((now_ms - fire_at) / step + 1)
                });
                sqlx::query("UPDATE workflow_triggers SET next_fire_at = $2, updated_at = $3, revision = revision + 1 WHERE id = $1")
                    .bind(&trigger.id)
                    .bind(next)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(started)
        })
    }
}

/// The run as the contract shows it.
pub fn run_contract(run: &RunRecord) -> Result<crate::contract::types::WorkflowRun, StoreError> {
    let mut value = json!({
        "id": run.id,
        "planId": run.plan_id,
        "planVersion": run.plan_version,
        "triggerId": run.trigger_id,
        "status": run.status.to_string(),
        "revision": run.revision,
        "createdAt": rfc3339(run.created_at),
        "updatedAt": rfc3339(run.updated_at),
    });
    put(
        &mut value,
        "currentStepKey",
        run.current_step_key.clone().map(Value::from),
    );
    put(
        &mut value,
        "startedByAgentId",
        run.started_by_agent_id.clone().map(Value::from),
    );
    put(
        &mut value,
        "cancelReason",
        run.cancel_reason.clone().map(Value::from),
    );
    put(
        &mut value,
        "finishedAt",
        run.finished_at.map(|at| json!(rfc3339(at))),
    );
    decode(value, "workflow_runs")
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

// ---------------------------------------------------------------------------------------------
// Deciding approvals (here because it drives the run whose step waits on one)

use super::approvals::{approval_columns, approval_row};
use crate::contract::types::Approval;

/// Why an approval cannot be decided.
#[derive(Debug, Clone, PartialEq)]
pub enum DecideRefusal {
    /// It was decided already: `approved` or `rejected`.
    Decided(String),
    /// `human_id` is not a human of the workspace.
    UnknownHuman,
    /// The caller's `admit` refused what the decision would store.
    Refused(crate::contract::ActionError),
}

impl Store {
    /// A human of the workspace decides its pending approval `approval_id`; the run whose step
    /// waits on it moves on in the same transaction (the approval's row locked first, then the
    /// run's). `admit` sees the approval and the run as they would be stored, before the commit,
    /// and refuses the decision with its `Err`. `Ok(None)` when the workspace has no such
    /// approval.
    #[allow(clippy::too_many_arguments)]
    pub async fn decide_approval(
        &self,
        workspace_id: &str,
        approval_id: &str,
        human_id: &str,
        approved: bool,
        comment: Option<&str>,
        now_ms: i64,
        admit: impl FnOnce(&Approval, Option<&RunState>) -> Result<(), crate::contract::ActionError>,
    ) -> Result<Option<Result<Approval, DecideRefusal>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let row = sqlx::query(if pg {
                concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals a WHERE a.id = $1 AND a.workspace_id = $2 FOR UPDATE"
                )
            } else {
                concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals a WHERE a.id = $1 AND a.workspace_id = $2"
                )
            })
            .bind(approval_id)
            .bind(workspace_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let (current, _) = approval_row(&row)?;
            let status = current.status.to_string();
            if status != "pending" {
                return Ok(Some(Err(DecideRefusal::Decided(status))));
            }
            let human = sqlx::query("SELECT 1 FROM humans WHERE id = $1 AND workspace_id = $2")
                .bind(human_id)
                .bind(workspace_id)
                .fetch_optional(&mut *tx)
                .await?;
            if human.is_none() {
                return Ok(Some(Err(DecideRefusal::UnknownHuman)));
            }
            sqlx::query(
                "UPDATE approvals SET status = $2, decided_by_human_id = $3, comment = $4, decided_at = $5, revision = revision + 1, updated_at = $5 WHERE id = $1",
            )
            .bind(approval_id)
            .bind(if approved { "approved" } else { "rejected" })
            .bind(human_id)
            .bind(comment)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let mut run = None;
            if let Some(run_id) = current.run_id.as_ref().map(|id| id.to_string())
                && let Some(mut state) = load_run!(tx, pg, workspace_id, &run_id, now_ms)?
            {
                state.approval_decided(approval_id, approved, comment);
                save_run!(tx, &state, now_ms)?;
                run = Some(state);
            }
            let row = sqlx::query(concat!(
                "SELECT ",
                approval_columns!(),
                " FROM approvals a WHERE a.id = $1"
            ))
            .bind(approval_id)
            .fetch_one(&mut *tx)
            .await?;
            let decided = approval_row(&row)?.0;
            if let Err(refusal) = admit(&decided, run.as_ref()) {
                return Ok(Some(Err(DecideRefusal::Refused(refusal))));
            }
            tx.commit().await?;
            Ok(Some(Ok(decided)))
        })
    }
}
