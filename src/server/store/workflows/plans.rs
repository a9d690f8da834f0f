//! Plans and their versions: a plan's row, its draft and published versions, read-decide-write
//! changes with the plan's row locked on PostgreSQL.

use serde_json::{Value, json};

use super::{decode, put};
use crate::contract::types::{PlanSteps, WorkflowPlan, WorkflowPlanVersion};
use crate::server::store::shape::{Query, Resource, bound, read_one};
use crate::server::store::{
    Columns, Page, Position, Store, StoreError, here, new_id, on_backend, rfc3339,
};

impl Resource for WorkflowPlan {
    const TABLE: &'static str = "workflow_plans";
    const ALIAS: &'static str = "p";
    const COLUMNS: &'static str = "p.id, p.name, p.description, p.status, p.latest_version, p.published_version, p.created_by_agent_id, p.revision, p.created_at, p.updated_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        plan_row(row)
    }
}

/// The workspace's plan `plan_id`.
fn in_workspace<'a>(workspace_id: &'a str, plan_id: &'a str) -> Query<'a> {
    Query::select::<WorkflowPlan>("WHERE p.id = $1 AND p.workspace_id = $2")
        .bind(plan_id)
        .bind(workspace_id)
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
        let id = new_id("wfp", now_ms);
        let insert = Query::new(
            "INSERT INTO workflow_plans (id, workspace_id, name, description, status, latest_version, published_version, created_by_agent_id, revision, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'active', 1, NULL, $5, 1, $6, $6)",
        );
        let insert = insert.bind(&id).bind(workspace_id).bind(name);
        let insert = insert.bind(description).bind(agent_id).bind(now_ms);
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            bound!(&insert).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO workflow_plan_versions (plan_id, version, state, steps, created_at) VALUES ($1, 1, 'draft', $2, $3)")
                .bind(&id)
                .bind(steps_json(steps))
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            let plan = bound!(&Query::by_id::<WorkflowPlan>(&id))
                .fetch_one(&mut *tx)
                .await?;
            let plan = read_one(&plan)?;
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
        self.one(here!(), in_workspace(workspace_id, plan_id)).await
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
        let query = Query::select::<WorkflowPlan>("WHERE p.workspace_id = $1")
            .bind(workspace_id)
            .and_some("p.status", status)
            .newest::<WorkflowPlan>(after, limit);
        self.page(here!(), query, limit).await
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
            let lookup = in_workspace(workspace_id, plan_id).locked::<WorkflowPlan>(pg);
            let row = bound!(&lookup).fetch_optional(&mut *tx).await?;
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
            let row = bound!(&Query::by_id::<WorkflowPlan>(plan_id))
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
