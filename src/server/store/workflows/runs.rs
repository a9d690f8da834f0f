//! Runs: loaded and saved whole around a transition of the engine (`load_run!`/`save_run!`),
//! started through a trigger or by the scheduler's firing of due scheduled triggers, their logs by
//! section, and approval decisions (here because a decision drives the run whose step waits on
//! it).

use serde_json::{Value, json};

use super::triggers::TriggerRecord;
use super::{OfPlan, decode, parse_enum, put, steps, triggers};
use crate::contract::types::{Approval, PlanSteps};
use crate::server::store::approvals;
use crate::server::store::shape::{Query, Resource, bound, read_all, read_one};
use crate::server::store::{Columns, Position, Store, StoreError, on_backend, rfc3339};
use crate::server::workflow::{LogRecord, RunRecord, RunState, StepRecord};

/// Due scheduled triggers one scheduler pass fires at most.
pub const MAX_FIRINGS_PER_PASS: i64 = 100;

impl OfPlan for RunRecord {}

impl Resource for RunRecord {
    const TABLE: &'static str = "workflow_runs";
    const ALIAS: &'static str = "r";
    const COLUMNS: &'static str = "r.id, r.workspace_id, r.plan_id, r.plan_version, r.trigger_id, r.fire_at, r.status, r.current_step_key, r.started_by_agent_id, \
         r.cancel_reason, r.log_entries, r.log_section, r.log_section_bytes, r.revision, r.created_at, r.updated_at, r.finished_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let run = run_row(row)?;
        let position = Position::of(run.updated_at, &run.id);
        Ok((run, position))
    }
}

/// The workspace's run `run_id`.
fn in_workspace<'a>(workspace_id: &'a str, run_id: &'a str) -> Query<'a> {
    Query::select::<RunRecord>("WHERE r.id = $1 AND r.workspace_id = $2")
        .bind(run_id)
        .bind(workspace_id)
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
            let lookup = in_workspace($workspace_id, $run_id).locked::<RunRecord>($pg);
            let row = bound!(&lookup).fetch_optional(&mut *$tx).await?;
            let Some(row) = row else {
                return Ok::<_, StoreError>(None);
            };
            let run = run_row(&row)?;
            let steps = bound!(&steps::of_run($run_id)).fetch_all(&mut *$tx).await?;
            let steps = read_all(&steps)?
                .into_iter()
                .map(|(step, _)| step)
                .collect();
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
            let lookup =
                triggers::in_workspace(workspace_id, trigger_id).locked::<TriggerRecord>(pg);
            let row = bound!(&lookup).fetch_optional(&mut *tx).await?;
            let Some(row) = row else { return Ok(None) };
            let trigger = read_one(&row)?;
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
            let row = bound!(&in_workspace(workspace_id, run_id))
                .fetch_optional(reader)
                .await?;
            let Some(row) = row else { return Ok(None) };
            let run = run_row(&row)?;
            let steps = bound!(&steps::of_run(run_id)).fetch_all(reader).await?;
            let steps = read_all(&steps)?
                .into_iter()
                .map(|(step, _)| step)
                .collect();
            Ok(Some((run, steps)))
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

    /// One scheduler pass over scheduled triggers due at `now_ms`: each starts one run for its due
    /// time and moves to its next firing (or stops). On PostgreSQL the due triggers are claimed
    /// with `FOR UPDATE SKIP LOCKED`, so replicas never fire one twice; a firing is also unique in
    /// the schema (`UNIQUE (trigger_id, fire_at)`). A firing whose plan cannot run (archived or
    /// unpublished) starts nothing and still moves on. Returns the runs started.
    pub async fn fire_due_triggers(&self, now_ms: i64) -> Result<usize, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let due = Query::select::<TriggerRecord>(
                "WHERE g.status = 'enabled' AND g.next_fire_at IS NOT NULL AND g.next_fire_at <= $1 ORDER BY g.next_fire_at, g.id LIMIT $2",
            )
            .bind(now_ms)
            .bind(MAX_FIRINGS_PER_PASS);
            let due = bound!(&due.claimed(pg)).fetch_all(&mut *tx).await?;
            let due: Vec<TriggerRecord> = read_all(&due)?
                .into_iter()
                .map(|(trigger, _)| trigger)
                .collect();
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
            let lookup = approvals::in_workspace(workspace_id, approval_id).locked::<Approval>(pg);
            let row = bound!(&lookup).fetch_optional(&mut *tx).await?;
            let Some(row) = row else { return Ok(None) };
            let current: Approval = read_one(&row)?;
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
            // The agent whose person answers for it: the one that asked, or the run's starter.
            let (owner_agent,): (Option<String>,) = sqlx::query_as(
                "SELECT COALESCE(a.requested_by_agent_id, w.started_by_agent_id) FROM approvals a \
                 LEFT JOIN workflow_runs w ON w.id = a.run_id WHERE a.id = $1",
            )
            .bind(approval_id)
            .fetch_one(&mut *tx)
            .await?;
            let event = crate::server::store::NewEvent {
                kind: crate::server::store::EventKind::Approval,
                channel_id: None,
                thread_id: None,
                agent_id: owner_agent.as_deref(),
                subject: approval_id,
            };
            crate::server::store::record_event!(tx, workspace_id, now_ms, &event);
            let mut run = None;
            if let Some(run_id) = current.run_id.as_ref().map(|id| id.to_string())
                && let Some(mut state) = load_run!(tx, pg, workspace_id, &run_id, now_ms)?
            {
                state.approval_decided(approval_id, approved, comment);
                save_run!(tx, &state, now_ms)?;
                run = Some(state);
            }
            let row = bound!(&Query::by_id::<Approval>(approval_id))
                .fetch_one(&mut *tx)
                .await?;
            let decided = read_one(&row)?;
            if let Err(refusal) = admit(&decided, run.as_ref()) {
                return Ok(Some(Err(DecideRefusal::Refused(refusal))));
            }
            tx.commit().await?;
            Ok(Some(Ok(decided)))
        })
    }
}
