//! A conversation's page around one of its messages: the newer ones, the message, and the older
//! ones, for a person jumping to a message.

use super::history::located;
use super::{message_columns, message_columns_with_kind, message_row};
use crate::contract::types::Message;
use crate::server::store::{Membership, Page, Store, StoreError, on_backend};

impl Store {
    /// The page of `at` around its message `message_id`: up to `limit / 2` newer messages, the
    /// message, and older ones up to `limit` in all, newest first; the page's `next` continues
    /// with older ones, and the flag says newer ones remain past it. `None` when the message is
    /// not in `at`.
    pub async fn history_around(
        &self,
        at: &Membership,
        member_id: &str,
        message_id: &str,
        limit: usize,
    ) -> Result<Option<(Page<Message>, bool)>, StoreError> {
        let newer_wanted = limit / 2;
        let read = on_backend!(self, |writer, reader, pg| {
            let found: Option<(i64,)> = sqlx::query_as(
                "SELECT created_at FROM messages WHERE id = $1 AND channel_id = $2                  AND ((thread_id IS NULL AND $3 IS NULL) OR thread_id = $3)",
            )
            .bind(message_id)
            .bind(&at.channel_id)
            .bind(&at.thread_id)
            .fetch_optional(reader)
            .await?;
            let Some((created_at,)) = found else {
                return Ok(None);
            };
            let (newer_sql, older_sql) = around_statements(at.thread_id.is_some());
            let newer = sqlx::query(newer_sql)
                .bind(&at.channel_id)
                .bind(&at.thread_id)
                .bind(created_at)
                .bind(message_id)
                .bind((newer_wanted + 1) as i64)
                .fetch_all(reader)
                .await?;
            let mut newer = newer
                .iter()
                .map(message_row)
                .collect::<Result<Vec<_>, _>>()?;
            let newer_remain = newer.len() > newer_wanted;
            newer.truncate(newer_wanted);
            newer.reverse();
            let older_wanted = limit - newer.len();
            let older = sqlx::query(older_sql)
                .bind(&at.channel_id)
                .bind(&at.thread_id)
                .bind(created_at)
                .bind(message_id)
                .bind((older_wanted + 1) as i64)
                .fetch_all(reader)
                .await?;
            let older = older
                .iter()
                .map(message_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, StoreError>(Some((newer, older, newer_remain)))
        })?;
        let Some((mut rows, older, newer_remain)) = read else {
            return Ok(None);
        };
        rows.extend(older);
        let page = self.page_of(rows, member_id, limit).await?;
        Ok(Some((page, newer_remain)))
    }
}

/// The statements of [`Store::history_around`] in a thread or a channel: the newer messages,
/// oldest first, then the message and the older ones, newest first.
pub(super) fn around_statements(in_thread: bool) -> (&'static str, &'static str) {
    if in_thread {
        (
            located!("g.thread_id = $2", ">", "g.created_at ASC, g.id ASC"),
            located!("g.thread_id = $2", "<=", "g.created_at DESC, g.id DESC"),
        )
    } else {
        (
            located!(
                "g.thread_id IS NULL AND $2 IS NULL",
                ">",
                "g.thread_id DESC, g.created_at ASC, g.id ASC"
            ),
            located!(
                "g.thread_id IS NULL AND $2 IS NULL",
                "<=",
                "g.thread_id, g.created_at DESC, g.id DESC"
            ),
        )
    }
}
