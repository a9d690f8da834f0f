//! Tasks: rows, keyset pages, and read-check-write mutations in one writer transaction.
//!
//! Lifecycle rules are not here: a mutation takes a closure from the action layer that sees the
//! current task inside the transaction and returns the changed task or a typed refusal.

use sqlx::QueryBuilder;

use super::raw::Bind;
use super::tenancy::Membership;
use super::{Columns, Page, Position, Store, StoreError, here, instant, new_id, on_backend};
use crate::contract::types::{Task, TaskLocation, TaskStatus};

/// The columns `task_row` reads, in its order; a macro so queries stay `&'static str` literals.
macro_rules! task_columns {
    () => {
        "t.id, t.channel_id, t.thread_id, t.title, t.description, t.status, t.assignee_agent_id, t.created_by_agent_id, t.result, t.cancel_reason, t.revision, t.created_at, t.updated_at"
    };
}

impl Store {
    /// Creates an `open` task at `location`, revision 1.
    pub async fn insert_task(
        &self,
        workspace_id: &str,
        location: &Membership,
        title: &str,
        description: Option<&str>,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<Task, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("task", now_ms);
            sqlx::query(
                "INSERT INTO tasks (id, workspace_id, channel_id, thread_id, title, description, status, created_by_agent_id, revision, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, 1, $8, $8)",
            )
            .bind(&id)
            .bind(workspace_id)
            .bind(&location.channel_id)
            .bind(&location.thread_id)
            .bind(title)
            .bind(description)
            .bind(agent_id)
            .bind(now_ms)
            .execute(writer)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks t WHERE t.id = $1"
            ))
            .bind(&id)
            .fetch_one(writer)
            .await?;
            Ok(task_row(&row)?.0)
        })
    }

    /// The task `task_id` if it is in `workspace_id` and `agent_id` is a member of its channel.
    pub async fn task_for_member(
        &self,
        workspace_id: &str,
        agent_id: &str,
        task_id: &str,
    ) -> Result<Option<Task>, StoreError> {
        const SQL: &str = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks t JOIN channel_members m ON m.channel_id = t.channel_id WHERE t.id = $1 AND t.workspace_id = $2 AND m.member_id = $3"
        );
        if let Some(raw) = self.raw() {
            let binds = [
                Bind::Text(task_id),
                Bind::Text(workspace_id),
                Bind::Text(agent_id),
            ];
            if let Some(rows) = raw.query(here!(), SQL, &binds, |row| task_row(row).map(|r| r.0))? {
                return Ok(rows.into_iter().next());
            }
        }
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(SQL)
                .bind(task_id)
                .bind(workspace_id)
                .bind(agent_id)
                .fetch_optional(reader)
                .await?;
            row.map(|row| task_row(&row).map(|r| r.0)).transpose()
        })
    }

    /// One page of the tasks at exactly `location` (a thread's tasks, or a channel's own tasks),
    /// in `updatedAt DESC, id ASC` order, starting after `after`.
    pub async fn list_tasks(
        &self,
        location: &Membership,
        statuses: &[TaskStatus],
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Task>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut query: QueryBuilder<Backend> = QueryBuilder::new(concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks t WHERE t.channel_id = "
            ));
            query.push_bind(&location.channel_id);
            match &location.thread_id {
                Some(thread_id) => {
                    query.push(" AND t.thread_id = ").push_bind(thread_id);
                }
                None => {
                    query.push(" AND t.thread_id IS NULL");
                }
            }
            // With `thread_id IS NULL`, PostgreSQL walks the index in order only when the column
            // leads the ORDER BY (it is constant in the result, so the order is unchanged).
            let order = match &location.thread_id {
                Some(_) => " ORDER BY t.updated_at DESC, t.id ASC LIMIT ",
                None => " ORDER BY t.thread_id, t.updated_at DESC, t.id ASC LIMIT ",
            };
            if !statuses.is_empty() {
                query.push(" AND t.status IN (");
                let mut separated = query.separated(", ");
                for status in statuses {
                    separated.push_bind(status.to_string());
                }
                query.push(")");
            }
            if let Some(after) = after {
                // Mixed directions: an expanded predicate, never a row-value comparison.
                query.push(" AND t.updated_at <= ").push_bind(after.at_ms);
                query.push(" AND (t.updated_at < ").push_bind(after.at_ms);
                query.push(" OR t.id > ").push_bind(&after.id).push(")");
            }
            query.push(order).push_bind((limit + 1) as i64);
            let rows = query.build().fetch_all(reader).await?;
            let rows: Vec<(Task, Position)> =
                rows.iter().map(task_row).collect::<Result<_, _>>()?;
            Ok(Page::from_rows(rows, limit))
        })
    }

    /// Reads the task (as `task_for_member` would), lets `change` decide, and writes the result
    /// with `revision + 1` and `updatedAt = now`, all in one writer transaction.
    ///
    /// `Ok(None)` when the task is not visible to the agent; `Ok(Some(Err(e)))` when `change`
    /// refused.
    pub async fn update_task<E>(
        &self,
        workspace_id: &str,
        agent_id: &str,
        task_id: &str,
        now_ms: i64,
        change: impl FnOnce(&Task) -> Result<Task, E>,
    ) -> Result<Option<Result<Task, E>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            // PostgreSQL: lock the task row (only it) so a concurrent update on another replica
            // waits and then reads this one's result; SQLite's single writer serializes already.
            let row = sqlx::query(if pg {
                concat!(
                    "SELECT ",
                    task_columns!(),
                    " FROM tasks t JOIN channel_members m ON m.channel_id = t.channel_id WHERE t.id = $1 AND t.workspace_id = $2 AND m.member_id = $3 FOR UPDATE OF t"
                )
            } else {
                concat!(
                    "SELECT ",
                    task_columns!(),
                    " FROM tasks t JOIN channel_members m ON m.channel_id = t.channel_id WHERE t.id = $1 AND t.workspace_id = $2 AND m.member_id = $3"
                )
            })
            .bind(task_id)
            .bind(workspace_id)
            .bind(agent_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let current = task_row(&row)?.0;
            let changed = match change(&current) {
                Ok(changed) => changed,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            let Task {
                title,
                description,
                status,
                assignee_agent_id,
                result,
                cancel_reason,
                ..
            } = &changed;
            sqlx::query(
                "UPDATE tasks SET title = $2, description = $3, status = $4, assignee_agent_id = $5, result = $6, cancel_reason = $7, \
                 revision = revision + 1, updated_at = $8 WHERE id = $1",
            )
            .bind(task_id)
            .bind(title.as_str())
            .bind(description.as_deref().map(String::as_str))
            .bind(status.to_string())
            .bind(assignee_agent_id.as_deref().map(String::as_str))
            .bind(result.as_deref().map(String::as_str))
            .bind(cancel_reason.as_deref().map(String::as_str))
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks t WHERE t.id = $1"
            ))
            .bind(task_id)
            .fetch_one(&mut *tx)
            .await?;
            let stored = task_row(&row)?.0;
            tx.commit().await?;
            Ok(Some(Ok(stored)))
        })
    }
}

/// A stored task and its keyset position (`updatedAt`, `id`).
fn task_row(row: &impl Columns) -> Result<(Task, Position), StoreError> {
    fn parse<T: std::str::FromStr>(value: &str, column: &'static str) -> Result<T, StoreError> {
        value.parse().map_err(|_| StoreError::Corrupt { column })
    }
    fn optional<T: std::str::FromStr>(
        value: Option<String>,
        column: &'static str,
    ) -> Result<Option<T>, StoreError> {
        value.map(|v| parse(&v, column)).transpose()
    }
    let channel_id: String = row.column(1)?;
    let thread_id: Option<String> = row.column(2)?;
    let location = match thread_id {
        Some(thread_id) => TaskLocation::Thread {
            thread_id: parse(&thread_id, "thread_id")?,
        },
        None => TaskLocation::Channel {
            channel_id: parse(&channel_id, "channel_id")?,
        },
    };
    let revision: i64 = row.column(10)?;
    let created_at: i64 = row.column(11)?;
    let updated_at: i64 = row.column(12)?;
    let id: String = row.column(0)?;
    let task = Task {
        id: parse(&id, "id")?,
        location,
        title: parse(&row.column::<String>(3)?, "title")?,
        description: optional(row.column(4)?, "description")?,
        status: parse(&row.column::<String>(5)?, "status")?,
        assignee_agent_id: optional(row.column(6)?, "assignee_agent_id")?,
        created_by_agent_id: optional(row.column(7)?, "created_by_agent_id")?,
        result: optional(row.column(8)?, "result")?,
        cancel_reason: optional(row.column(9)?, "cancel_reason")?,
        revision: std::num::NonZeroU64::new(revision as u64)
            .ok_or(StoreError::Corrupt { column: "revision" })?,
        created_at: instant(created_at, "created_at")?,
        updated_at: instant(updated_at, "updated_at")?,
    };
    Ok((
        task,
        Position {
            at_ms: updated_at,
            id,
        },
    ))
}
