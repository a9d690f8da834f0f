//! Projects: workspace-wide rows, keyset pages in `updatedAt DESC, id ASC` order, and
//! read-check-write mutations in one writer transaction.

use super::shape::{Keyset, Query, Resource, Ties};
use super::{Columns, Page, Position, Store, StoreError, here, new_id, parse_column, rfc3339};
use crate::contract::types::{Project, ProjectStatus};

impl Resource for Project {
    const TABLE: &'static str = "projects";
    const ALIAS: &'static str = "p";
    const COLUMNS: &'static str = "p.id, p.name, p.description, p.status, p.created_by_agent_id, p.revision, p.created_at, p.updated_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        project_row(row)
    }
}

/// `updatedAt DESC, id ASC`.
const ORDER: Keyset<'static> = Keyset {
    time: "p.updated_at",
    id: "p.id",
    ties: Ties::Ascending,
    lead: None,
};

impl Store {
    pub async fn insert_project(
        &self,
        workspace_id: &str,
        name: &str,
        description: Option<&str>,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<Project, StoreError> {
        let id = new_id("prj", now_ms);
        let insert = Query::new(
            "INSERT INTO projects (id, workspace_id, name, description, status, created_by_agent_id, revision, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'active', $5, 1, $6, $6)",
        );
        let insert = insert.bind(&id).bind(workspace_id).bind(name);
        let insert = insert.bind(description).bind(agent_id).bind(now_ms);
        self.insert(here!(), insert, &id).await
    }

    pub async fn project(
        &self,
        workspace_id: &str,
        project_id: &str,
    ) -> Result<Option<Project>, StoreError> {
        self.one(here!(), in_workspace(workspace_id, project_id))
            .await
    }

    /// One page of the workspace's projects in `updatedAt DESC, id ASC` order after `after`.
    pub async fn list_projects(
        &self,
        workspace_id: &str,
        status: Option<ProjectStatus>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Project>, StoreError> {
        let status = status.map(|status| status.to_string());
        let query = Query::select::<Project>("WHERE p.workspace_id = $1")
            .bind(workspace_id)
            .and_some("p.status", status.as_ref())
            .page(ORDER, after, limit);
        self.page(here!(), query, limit).await
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
        let lookup = in_workspace(workspace_id, project_id);
        self.change(here!(), lookup, change, |changed, id| {
            Query::new("UPDATE projects SET name = $2, description = $3, status = $4, revision = revision + 1, updated_at = $5 WHERE id = $1")
                .bind(id)
                .bind(changed.name.as_str())
                .bind(changed.description.as_deref().map(String::as_str))
                .bind(changed.status.to_string())
                .bind(now_ms)
        })
        .await
    }
}

/// The workspace's project `project_id`.
fn in_workspace<'a>(workspace_id: &'a str, project_id: &'a str) -> Query<'a> {
    Query::select::<Project>("WHERE p.id = $1 AND p.workspace_id = $2")
        .bind(project_id)
        .bind(workspace_id)
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
