//! Projects: workspace-wide rows, keyset pages in `updatedAt DESC, id ASC` order, and
//! read-check-write mutations in one writer transaction.

use sqlx::QueryBuilder;

use super::{
    Columns, Page, Position, Store, StoreError, new_id, on_backend, parse_column, rfc3339,
};
use crate::contract::types::{Project, ProjectStatus};

macro_rules! project_columns {
    () => {
        "p.id, p.name, p.description, p.status, p.created_by_agent_id, p.revision, p.created_at, p.updated_at"
    };
}

impl Store {
    pub async fn insert_project(
        &self,
        workspace_id: &str,
        name: &str,
        description: Option<&str>,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<Project, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("prj", now_ms);
            sqlx::query(
                "INSERT INTO projects (id, workspace_id, name, description, status, created_by_agent_id, revision, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, 'active', $5, 1, $6, $6)",
            )
            .bind(&id)
            .bind(workspace_id)
            .bind(name)
            .bind(description)
            .bind(agent_id)
            .bind(now_ms)
            .execute(writer)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                project_columns!(),
                " FROM projects p WHERE p.id = $1"
            ))
            .bind(&id)
            .fetch_one(writer)
            .await?;
            Ok(project_row(&row)?.0)
        })
    }

    pub async fn project(
        &self,
        workspace_id: &str,
        project_id: &str,
    ) -> Result<Option<Project>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                project_columns!(),
                " FROM projects p WHERE p.id = $1 AND p.workspace_id = $2"
            ))
            .bind(project_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            row.map(|row| project_row(&row).map(|r| r.0)).transpose()
        })
    }

    /// One page of the workspace's projects in `updatedAt DESC, id ASC` order after `after`.
    pub async fn list_projects(
        &self,
        workspace_id: &str,
        status: Option<ProjectStatus>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Project>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut query: QueryBuilder<Backend> = QueryBuilder::new(concat!(
                "SELECT ",
                project_columns!(),
                " FROM projects p WHERE p.workspace_id = "
            ));
            query.push_bind(workspace_id);
            if let Some(status) = status {
                query.push(" AND p.status = ").push_bind(status.to_string());
            }
            if let Some(after) = after {
                // Mixed directions: an expanded, index-friendly predicate, never a row-value comparison.
                query.push(" AND p.updated_at <= ").push_bind(after.at_ms);
                query.push(" AND (p.updated_at < ").push_bind(after.at_ms);
                query.push(" OR p.id > ").push_bind(&after.id).push(")");
            }
            query
                .push(" ORDER BY p.updated_at DESC, p.id ASC LIMIT ")
                .push_bind((limit + 1) as i64);
            let rows = query.build().fetch_all(reader).await?;
            let rows: Vec<(Project, Position)> =
                rows.iter().map(project_row).collect::<Result<_, _>>()?;
            Ok(Page::from_rows(rows, limit))
        })
    }

    /// Reads the project, lets `change` decide, writes the result with `revision + 1`; one
    /// transaction. `Ok(None)` when no such project is in the workspace.
    pub async fn update_project<E>(
        &self,
        workspace_id: &str,
        project_id: &str,
        now_ms: i64,
        change: impl FnOnce(&Project) -> Result<Project, E>,
    ) -> Result<Option<Result<Project, E>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            // PostgreSQL: lock the row so concurrent updates on other replicas apply in turn.
            let row = sqlx::query(if pg {
                concat!(
                    "SELECT ",
                    project_columns!(),
                    " FROM projects p WHERE p.id = $1 AND p.workspace_id = $2 FOR UPDATE"
                )
            } else {
                concat!(
                    "SELECT ",
                    project_columns!(),
                    " FROM projects p WHERE p.id = $1 AND p.workspace_id = $2"
                )
            })
            .bind(project_id)
            .bind(workspace_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let current = project_row(&row)?.0;
            let changed = match change(&current) {
                Ok(changed) => changed,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            sqlx::query("UPDATE projects SET name = $2, description = $3, status = $4, revision = revision + 1, updated_at = $5 WHERE id = $1")
                .bind(project_id)
                .bind(changed.name.as_str())
                .bind(changed.description.as_deref().map(String::as_str))
                .bind(changed.status.to_string())
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                project_columns!(),
                " FROM projects p WHERE p.id = $1"
            ))
            .bind(project_id)
            .fetch_one(&mut *tx)
            .await?;
            let stored = project_row(&row)?.0;
            tx.commit().await?;
            Ok(Some(Ok(stored)))
        })
    }
}

/// A stored project and its keyset position (`updatedAt`, `id`).
fn project_row(row: &impl Columns) -> Result<(Project, Position), StoreError> {
    let description: Option<String> = row.column(2)?;
    let creator: Option<String> = row.column(4)?;
    let revision: i64 = row.column(5)?;
    let updated_at: i64 = row.column(7)?;
    let project = Project {
        id: parse_column(row.column(0)?, "id")?,
        name: parse_column(row.column(1)?, "name")?,
        description: description
            .map(|d| parse_column(d, "description"))
            .transpose()?,
        status: parse_column(row.column(3)?, "status")?,
        created_by_agent_id: creator
            .map(|c| parse_column(c, "created_by_agent_id"))
            .transpose()?,
        revision: std::num::NonZeroU64::new(revision as u64)
            .ok_or(StoreError::Corrupt { column: "revision" })?,
        created_at: parse_column(rfc3339(row.column(6)?), "created_at")?,
        updated_at: parse_column(rfc3339(updated_at), "updated_at")?,
    };
    let id = project.id.to_string();
    Ok((
        project,
        Position {
            at_ms: updated_at,
            id,
        },
    ))
}
