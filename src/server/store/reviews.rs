//! Reviews: rows left in a thread, optionally about one task of that thread.

use sqlx::Row;

use super::{Columns, Page, Position, Store, StoreError, new_id, on_backend, rfc3339};
use crate::contract::types::{Review, ReviewVerdict};

/// The columns `review_row` reads, in its order.
macro_rules! review_columns {
    () => {
        "r.id, r.thread_id, r.task_id, r.author_agent_id, r.verdict, r.body, r.status, r.created_at, r.updated_at"
    };
}

impl Store {
    /// True when `task_id` is a task of `thread_id`.
    pub async fn task_in_thread(&self, task_id: &str, thread_id: &str) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            Ok(
                sqlx::query("SELECT 1 FROM tasks WHERE id = $1 AND thread_id = $2")
                    .bind(task_id)
                    .bind(thread_id)
                    .fetch_optional(reader)
                    .await?
                    .is_some(),
            )
        })
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
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("rev", now_ms);
            sqlx::query(
                "INSERT INTO reviews (id, thread_id, task_id, author_agent_id, verdict, body, status, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, $7)",
            )
            .bind(&id)
            .bind(thread_id)
            .bind(task_id)
            .bind(agent_id)
            .bind(verdict.to_string())
            .bind(body)
            .bind(now_ms)
            .execute(writer)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                review_columns!(),
                " FROM reviews r WHERE r.id = $1"
            ))
            .bind(&id)
            .fetch_one(writer)
            .await?;
            review_row(&row)
        })
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

impl Store {
    /// The review if its thread's channel has the agent as a member, in the workspace.
    pub async fn review_for_member(
        &self,
        workspace_id: &str,
        agent_id: &str,
        review_id: &str,
    ) -> Result<Option<Review>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                review_columns!(),
                " FROM reviews r JOIN threads t ON t.id = r.thread_id JOIN channels c ON c.id = t.channel_id JOIN channel_members m ON m.channel_id = c.id \
                  WHERE r.id = $1 AND c.workspace_id = $2 AND m.member_id = $3"
            ))
            .bind(review_id)
            .bind(workspace_id)
            .bind(agent_id)
            .fetch_optional(reader)
            .await?;
            row.map(|row| review_row(&row)).transpose()
        })
    }

    /// A thread's reviews in `updatedAt DESC, id DESC` order (one direction: row values).
    pub async fn list_reviews(
        &self,
        thread_id: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Review>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let (after_ms, after_id) = match after {
                Some(p) => (p.at_ms, p.id.clone()),
                None => (i64::MAX, "\u{10FFFF}".to_string()),
            };
            let rows = sqlx::query(concat!(
                "SELECT ",
                review_columns!(),
                " FROM reviews r WHERE r.thread_id = $1 AND (r.updated_at, r.id) < ($2, $3) ORDER BY r.updated_at DESC, r.id DESC LIMIT $4"
            ))
            .bind(thread_id)
            .bind(after_ms)
            .bind(after_id)
            .bind((limit + 1) as i64)
            .fetch_all(reader)
            .await?;
            let rows: Vec<(Review, Position)> = rows
                .iter()
                .map(|row| {
                    let review = review_row(row)?;
                    let id = review.id.to_string();
                    Ok((
                        review,
                        Position {
                            at_ms: row.try_get::<i64, _>(8)?,
                            id,
                        },
                    ))
                })
                .collect::<Result<_, StoreError>>()?;
            Ok(Page::from_rows(rows, limit))
        })
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
        on_backend!(self, |writer, reader, pg| {
            if self
                .review_for_member(workspace_id, agent_id, review_id)
                .await?
                .is_none()
            {
                return Ok(None);
            }
            let updated = sqlx::query("UPDATE reviews SET status = 'resolved', updated_at = $2 WHERE id = $1 AND status = 'open'")
                .bind(review_id)
                .bind(now_ms)
                .execute(writer)
                .await?;
            if updated.rows_affected() == 0 {
                return Ok(Some(None));
            }
            let row = sqlx::query(concat!(
                "SELECT ",
                review_columns!(),
                " FROM reviews r WHERE r.id = $1"
            ))
            .bind(review_id)
            .fetch_one(writer)
            .await?;
            Ok(Some(Some(review_row(&row)?)))
        })
    }
}
