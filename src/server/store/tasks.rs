//! Tasks: rows, keyset pages, and read-check-write mutations in one writer transaction.
//!
//! Lifecycle rules are not here: a mutation takes a closure from the action layer that sees the
//! current task inside the transaction and returns the changed task or a typed refusal.

use super::raw::Bind as RawBind;
use super::shape::{Keyset, Query, Resource, Ties, read_one};
use super::tenancy::Membership;
use super::{Columns, Page, Position, Store, StoreError, here, instant, new_id};
use crate::contract::types::{Task, TaskLocation, TaskStatus};

/// The columns `task_row` reads, in its order; a macro so the caller-thread read's statement
/// stays a `&'static str`.
macro_rules! task_columns {
    () => {
        "t.id, t.channel_id, t.thread_id, t.title, t.description, t.status, t.assignee_agent_id, t.created_by_agent_id, t.result, t.cancel_reason, t.revision, t.created_at, t.updated_at"
    };
}

impl Resource for Task {
    const TABLE: &'static str = "tasks";
    const ALIAS: &'static str = "t";
    const COLUMNS: &'static str = task_columns!();

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        task_row(row)
    }
}

/// The task `$1` in workspace `$2` whose channel has member `$3`.
const FOR_MEMBER: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks t JOIN channel_members m ON m.channel_id = t.channel_id WHERE t.id = $1 AND t.workspace_id = $2 AND m.member_id = $3"
);

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
        let id = new_id("task", now_ms);
        let insert = Query::new(
            "INSERT INTO tasks (id, workspace_id, channel_id, thread_id, title, description, status, created_by_agent_id, revision, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, 1, $8, $8)",
        );
        let insert = insert
            .bind(&id)
            .bind(workspace_id)
            .bind(&location.channel_id);
        let insert = insert
            .bind(&location.thread_id)
            .bind(title)
            .bind(description);
        let insert = insert.bind(agent_id).bind(now_ms);
        self.insert(here!(), insert, &id).await
    }

    /// The task `task_id` if it is in `workspace_id` and `agent_id` is a member of its channel.
    pub async fn task_for_member(
        &self,
        workspace_id: &str,
        agent_id: &str,
        task_id: &str,
    ) -> Result<Option<Task>, StoreError> {
        if let Some(raw) = self.raw() {
            let binds = [
                RawBind::Text(task_id),
                RawBind::Text(workspace_id),
                RawBind::Text(agent_id),
            ];
            if let Some(rows) = raw.query(here!(), FOR_MEMBER, &binds, |row| read_one(row))? {
                return Ok(rows.into_iter().next());
            }
        }
        self.one(here!(), for_member(workspace_id, agent_id, task_id))
            .await
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
        let (query, lead) = Query::select::<Task>("WHERE t.channel_id = $1")
            .bind(&location.channel_id)
            .at_thread("t.thread_id", location.thread_id.as_deref());
        let order = Keyset {
            time: "t.updated_at",
            id: "t.id",
            ties: Ties::Ascending,
            lead,
        };
        let query = query
            .and_any("t.status", statuses.iter().map(|status| status.to_string()))
            .page(order, after, limit);
        self.page(here!(), query, limit).await
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
        let lookup = for_member(workspace_id, agent_id, task_id);
        self.change(here!(), lookup, change, |changed, id| {
            let Task {
                title,
                description,
                status,
                assignee_agent_id,
                result,
                cancel_reason,
                ..
            } = changed;
            Query::new(
                "UPDATE tasks SET title = $2, description = $3, status = $4, assignee_agent_id = $5, result = $6, cancel_reason = $7, \
                 revision = revision + 1, updated_at = $8 WHERE id = $1",
            )
            .bind(id)
            .bind(title.as_str())
            .bind(description.as_deref().map(String::as_str))
            .bind(status.to_string())
            .bind(assignee_agent_id.as_deref().map(String::as_str))
            .bind(result.as_deref().map(String::as_str))
            .bind(cancel_reason.as_deref().map(String::as_str))
            .bind(now_ms)
        })
        .await
    }
}

fn for_member<'a>(workspace_id: &'a str, agent_id: &'a str, task_id: &'a str) -> Query<'a> {
    Query::new(FOR_MEMBER)
        .bind(task_id)
        .bind(workspace_id)
        .bind(agent_id)
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
