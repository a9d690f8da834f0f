//! A conversation's page around one of its messages: the newer ones, the message, and the older
//! ones, for a person jumping to a message.

use super::history::{located, positions};
use super::{message_columns, message_columns_with_kind, message_row};
use crate::contract::json::json_len;
use crate::contract::types::Message;
use crate::server::store::{Membership, PAGE_BYTES, Page, Store, StoreError, fitting, on_backend};

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
        let anchor = rows.len();
        rows.extend(older);
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        let positions = positions(&rows);
        let mut messages = self.complete(rows, member_id).await?;
        let (first, end) = around_fitting(&messages, anchor);
        messages.truncate(end);
        messages.drain(..first);
        let next = (has_more || end < positions.len()).then(|| positions[end - 1].clone());
        Ok(Some((
            Page {
                items: messages,
                next,
            },
            newer_remain || first > 0,
        )))
    }
}

/// The part `first..end` of an around page's `messages` (newest first, the asked-for one at
/// `anchor`) that fits [`PAGE_BYTES`] as [`fitting`] weighs it: the asked-for message always, then
/// the nearest ones, a newer and an older in turn, until one does not fit. Without an item at
/// `anchor`, the page is cut from its newest, as any page is.
fn around_fitting<T: serde::Serialize>(messages: &[T], anchor: usize) -> (usize, usize) {
    if anchor >= messages.len() {
        return (0, fitting(messages));
    }
    let weight = |m: &T| json_len(m).map_or(PAGE_BYTES, |len| len + 1);
    let (mut first, mut end) = (anchor, anchor + 1);
    let mut bytes = weight(&messages[anchor]);
    let mut newer_next = true;
    loop {
        let newer = first > 0;
        let older = end < messages.len();
        let take_newer = match (newer, older) {
            (false, false) => break,
            (true, true) => newer_next,
            (newer, _) => newer,
        };
        let at = if take_newer { first - 1 } else { end };
        bytes += weight(&messages[at]);
        if bytes > PAGE_BYTES {
            break;
        }
        if take_newer {
            first -= 1;
        } else {
            end += 1;
        }
        newer_next = !take_newer;
    }
    (first, end)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The asked-for item, then the nearest ones in turn, a newer first, to the bound exactly;
    /// one byte over stops at the item that passes it.
    #[test]
    fn an_around_page_fits_from_its_message_outward() {
        // A string of `n` characters is `n + 2` bytes of JSON, and a comma: a quarter of the bound.
        let quarter = || "x".repeat(PAGE_BYTES / 4 - 3);
        let items: Vec<String> = (0..5).map(|_| quarter()).collect();
        assert_eq!(around_fitting(&items, 2), (0, 4), "2, then 1, 3, 0");
        assert_eq!(
            around_fitting(&items, 0),
            (0, 4),
            "no newer: the older ones"
        );
        assert_eq!(
            around_fitting(&items, 4),
            (1, 5),
            "no older: the newer ones"
        );
        let mut heavier = items.clone();
        heavier[0].push('x');
        assert_eq!(around_fitting(&heavier, 2), (1, 4), "0 passes the bound");
        heavier[1] = "x".repeat(PAGE_BYTES);
        assert_eq!(
            around_fitting(&heavier, 2),
            (2, 3),
            "1 passes it, and 3 is not tried"
        );
        let huge = vec!["x".repeat(PAGE_BYTES * 2), quarter()];
        assert_eq!(around_fitting(&huge, 0), (0, 1), "the message always");
        assert_eq!(
            around_fitting(&items, 5),
            (0, 4),
            "no message: cut from the newest"
        );
        assert_eq!(around_fitting(&Vec::<String>::new(), 0), (0, 0));
    }
}
