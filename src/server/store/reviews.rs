//! Reviews: rows left in a thread, optionally about one task of that thread.

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{Store, StoreError, new_id, rfc3339};
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
        Ok(
            sqlx::query("SELECT 1 FROM tasks WHERE id = $1 AND thread_id = $2")
                .bind(task_id)
                .bind(thread_id)
                .fetch_optional(&self.reader)
                .await?
                .is_some(),
        )
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
        .execute(&self.writer)
        .await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            review_columns!(),
            " FROM reviews r WHERE r.id = $1"
        ))
        .bind(&id)
        .fetch_one(&self.writer)
        .await?;
        review_row(&row)
    }
}

fn review_row(row: &SqliteRow) -> Result<Review, StoreError> {
    fn parse<T: std::str::FromStr>(value: String, column: &'static str) -> Result<T, StoreError> {
        value.parse().map_err(|_| StoreError::Corrupt { column })
    }
    let task_id: Option<String> = row.try_get(2)?;
    let author: Option<String> = row.try_get(3)?;
    Ok(Review {
        id: parse(row.try_get(0)?, "id")?,
        thread_id: parse(row.try_get(1)?, "thread_id")?,
        task_id: task_id.map(|v| parse(v, "task_id")).transpose()?,
        author_agent_id: author.map(|v| parse(v, "author_agent_id")).transpose()?,
        verdict: parse(row.try_get(4)?, "verdict")?,
        body: parse(row.try_get(5)?, "body")?,
        status: parse(row.try_get(6)?, "status")?,
        created_at: parse(rfc3339(row.try_get(7)?), "created_at")?,
        updated_at: parse(rfc3339(row.try_get(8)?), "updated_at")?,
    })
}
