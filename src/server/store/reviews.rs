//! Reviews: rows left in a thread, optionally about one task of that thread.

use super::shape::{Query, Resource};
use super::{Columns, Page, Position, Store, StoreError, here, new_id, rfc3339};
use crate::contract::types::{Review, ReviewStatus, ReviewVerdict};

impl Resource for Review {
    const TABLE: &'static str = "reviews";
    const ALIAS: &'static str = "r";
    const COLUMNS: &'static str = "r.id, r.thread_id, r.task_id, r.author_agent_id, r.verdict, r.body, r.status, r.created_at, r.updated_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let review = review_row(row)?;
        let position = Position {
            at_ms: row.column(8)?,
            id: review.id.to_string(),
        };
        Ok((review, position))
    }
}

/// The review `$1` if its thread's channel in workspace `$2` has member `$3`.
fn for_member<'a>(workspace_id: &'a str, agent_id: &'a str, review_id: &'a str) -> Query<'a> {
    Query::select::<Review>(
        "JOIN threads t ON t.id = r.thread_id JOIN channels c ON c.id = t.channel_id JOIN channel_members m ON m.channel_id = c.id \
         WHERE r.id = $1 AND c.workspace_id = $2 AND m.member_id = $3",
    )
    .bind(review_id)
    .bind(workspace_id)
    .bind(agent_id)
}

impl Store {
    /// True when `task_id` is a task of `thread_id`.
    pub async fn task_in_thread(&self, task_id: &str, thread_id: &str) -> Result<bool, StoreError> {
        let query = Query::new("SELECT 1 FROM tasks WHERE id = $1 AND thread_id = $2");
        self.exists(here!(), query.bind(task_id).bind(thread_id))
            .await
    }

    /// Creates an `open` review in `thread_id`.
    pub async fn insert_review(
        &self,
        thread_id: &str,
        task_id: Option<&str>,
        agent_id: &str,
        verdict: ReviewVerdict,
        body: &str,
        now_ms: i64,
    ) -> Result<Review, StoreError> {
        let id = new_id("rev", now_ms);
        let insert = Query::new(
            "INSERT INTO reviews (id, thread_id, task_id, author_agent_id, verdict, body, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, $7)",
        );
        let insert = insert
            .bind(&id)
            .bind(thread_id)
            .bind(task_id)
            .bind(agent_id);
        let insert = insert.bind(verdict.to_string()).bind(body).bind(now_ms);
        self.insert(here!(), insert, &id).await
    }

    /// The review if its thread's channel has the agent as a member, in the workspace.
    pub async fn review_for_member(
        &self,
        workspace_id: &str,
        agent_id: &str,
        review_id: &str,
    ) -> Result<Option<Review>, StoreError> {
        self.one(here!(), for_member(workspace_id, agent_id, review_id))
            .await
    }

    /// A thread's reviews in `updatedAt DESC, id DESC` order.
    pub async fn list_reviews(
        &self,
        thread_id: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Review>, StoreError> {
        let query = Query::select::<Review>("WHERE r.thread_id = $1")
            .bind(thread_id)
            .newest::<Review>(after, limit);
        self.page(here!(), query, limit).await
    }

    /// Resolves an `open` review: `Ok(None)` when invisible to the agent, `Ok(Some(None))` when
    /// it was already resolved.
    pub async fn resolve_review(
        &self,
        workspace_id: &str,
        agent_id: &str,
        review_id: &str,
        now_ms: i64,
    ) -> Result<Option<Option<Review>>, StoreError> {
        let decide = |current: &Review| match current.status {
            ReviewStatus::Open => Ok(current.clone()),
            _ => Err(()),
        };
        let lookup = for_member(workspace_id, agent_id, review_id);
        let resolved = self.change(here!(), lookup, decide, |_, id| {
            Query::new("UPDATE reviews SET status = 'resolved', updated_at = $2 WHERE id = $1")
                .bind(id)
                .bind(now_ms)
        });
        Ok(resolved.await?.map(Result::ok))
    }
}

fn review_row(row: &impl Columns) -> Result<Review, StoreError> {
    fn parse<T: std::str::FromStr>(value: String, column: &'static str) -> Result<T, StoreError> {
        value.parse().map_err(|_| StoreError::Corrupt { column })
    }
    let task_id: Option<String> = row.column(2)?;
    let author: Option<String> = row.column(3)?;
    Ok(Review {
        id: parse(row.column(0)?, "id")?,
        thread_id: parse(row.column(1)?, "thread_id")?,
        task_id: task_id.map(|v| parse(v, "task_id")).transpose()?,
        author_agent_id: author.map(|v| parse(v, "author_agent_id")).transpose()?,
        verdict: parse(row.column(4)?, "verdict")?,
        body: parse(row.column(5)?, "body")?,
        status: parse(row.column(6)?, "status")?,
        created_at: parse(rfc3339(row.column(7)?), "created_at")?,
        updated_at: parse(rfc3339(row.column(8)?), "updated_at")?,
    })
}
