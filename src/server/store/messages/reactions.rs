//! Reactions on messages: read as a member sees them (`mine`), added (at most [`MAX_REACTIONS`]
//! distinct ones per message) and removed.

use super::parse;
use crate::contract::types::Reaction;
use crate::server::store::raw::Bind;
use crate::server::store::shape::{Query, bound};
use crate::server::store::{
    Columns, EventKind, NewEvent, Store, StoreError, here, on_backend, record_event,
};

/// Distinct reactions one message can carry (the `Message.reactions` bound).
pub const MAX_REACTIONS: usize = 64;

/// The most reactions (one per member and emoji) a read aggregates on the caller's thread, which
/// runs only bounded statements; messages carrying more are read by the pooled readers.
const RAW_REACTION_ROWS: i64 = 2_000;

/// On PostgreSQL, locks the row of message `$message_id` inside the transaction `$tx`:
/// reactions to one message change in turn (SQLite's one writer serializes already).
macro_rules! lock_message {
    ($tx:ident, $pg:expr, $message_id:expr) => {
        if $pg {
            let lock =
                Query::new("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE").bind($message_id);
            bound!(&lock).execute(&mut *$tx).await?;
        }
    };
}

/// Records a change of the reactions of message `$message_id` on the event feed, in `$tx`.
macro_rules! announce {
    ($tx:ident, $message_id:expr, $now_ms:expr) => {{
        let (workspace_id, channel_id, thread_id): (String, String, Option<String>) =
            sqlx::query_as(
                "SELECT workspace_id, channel_id, thread_id FROM messages WHERE id = $1",
            )
            .bind($message_id)
            .fetch_one(&mut *$tx)
            .await?;
        let event = NewEvent {
            kind: EventKind::Reaction,
            channel_id: Some(&channel_id),
            thread_id: thread_id.as_deref(),
            agent_id: None,
            subject: $message_id,
        };
        record_event!($tx, &workspace_id, $now_ms, &event);
    }};
}

/// Whether reactions numbering `rows` in all are read on the caller's thread.
fn on_callers_thread(rows: i64) -> bool {
    rows <= RAW_REACTION_ROWS
}

/// `(message id, reaction)` from a row of [`Store::reactions_of`]'s statement.
fn reaction_row(row: &impl Columns) -> Result<(String, Reaction), StoreError> {
    let count: i64 = row.column(2)?;
    let emoji: String = row.column(1)?;
    let reaction = Reaction {
        emoji: parse(emoji, "emoji")?,
        count: std::num::NonZeroU64::new(count as u64).ok_or(StoreError::Corrupt {
            column: "reactions",
        })?,
        mine: row.column::<i64>(3)? == 1,
    };
    Ok((row.column(0)?, reaction))
}

/// One emoji on one message, added up from its rows (one per member).
struct Tally {
    message_id: String,
    emoji: String,
    count: u64,
    mine: bool,
    /// When its first member added it.
    first_ms: i64,
}

/// `(message id, reaction)` from tallies grouped by message: each message's most used first,
/// then the earliest added, then by emoji, as [`Store::reactions_of`]'s grouping statement
/// orders them.
fn ranked(mut tallies: Vec<Tally>) -> Result<Vec<(String, Reaction)>, StoreError> {
    for message in tallies.chunk_by_mut(|a, b| a.message_id == b.message_id) {
        message.sort_by(|a, b| {
            (b.count.cmp(&a.count))
                .then(a.first_ms.cmp(&b.first_ms))
                .then(a.emoji.cmp(&b.emoji))
        });
    }
    tallies
        .into_iter()
        .map(|tally| {
            let reaction = Reaction {
                emoji: parse(tally.emoji, "emoji")?,
                count: std::num::NonZeroU64::new(tally.count).expect("a tally counts its rows"),
                mine: tally.mine,
            };
            Ok((tally.message_id, reaction))
        })
        .collect()
}

impl Store {
    /// The reactions of `message_id` as `member_id` sees them.
    pub async fn reactions(
        &self,
        message_id: &str,
        member_id: &str,
    ) -> Result<Vec<Reaction>, StoreError> {
        let ids = serde_json::to_string(&[message_id]).expect("strings serialize");
        Ok(self
            .reactions_of(&ids, member_id, i64::MAX)
            .await?
            .into_iter()
            .map(|(_, reaction)| reaction)
            .collect())
    }

    /// `(message id, reaction)` for the messages in the JSON array `ids`, each message's most
    /// used first, as `member_id` sees them (`mine`). `rows`: the reactions they carry in all
    /// (`i64::MAX` when not known); up to [`RAW_REACTION_ROWS`], they are read on the caller's
    /// thread.
    pub(super) async fn reactions_of(
        &self,
        ids: &str,
        member_id: &str,
        rows: i64,
    ) -> Result<Vec<(String, Reaction)>, StoreError> {
        const SQLITE: &str = "SELECT message_id, emoji, COUNT(*), CAST(MAX(CASE WHEN member_id = $2 THEN 1 ELSE 0 END) AS BIGINT) FROM reactions \
             WHERE message_id IN (SELECT value FROM json_each($1)) \
             GROUP BY message_id, emoji ORDER BY message_id, COUNT(*) DESC, MIN(created_at), emoji";
        // The rows themselves, in the primary key's order: SQLite's grouping and sorting of a
        // page's few reactions cost more than adding them up here.
        const SQLITE_ROWS: &str = "SELECT message_id, emoji, member_id = $2, created_at FROM reactions \
             WHERE message_id IN (SELECT value FROM json_each($1)) ORDER BY message_id, emoji";
        let binds = [Bind::Text(ids), Bind::Text(member_id)];
        if on_callers_thread(rows)
            && let Some(raw) = self.raw()
        {
            let mut tallies: Vec<Tally> = Vec::new();
            let read = raw.query(here!(), SQLITE_ROWS, &binds, |row| {
                let (message_id, emoji) = (row.str(0)?, row.str(1)?);
                let (mine, at) = (row.int(2)? == 1, row.int(3)?);
                match tallies.last_mut() {
                    Some(tally) if tally.message_id == message_id && tally.emoji == emoji => {
                        tally.count += 1;
                        tally.mine |= mine;
                        tally.first_ms = tally.first_ms.min(at);
                    }
                    _ => tallies.push(Tally {
                        message_id: message_id.to_string(),
                        emoji: emoji.to_string(),
                        count: 1,
                        mine,
                        first_ms: at,
                    }),
                }
                Ok(())
            })?;
            if read.is_some() {
                return ranked(tallies);
            }
        }
        on_backend!(self, |writer, reader, pg| {
            let rows = sqlx::query(if pg {
                "SELECT message_id, emoji, COUNT(*), CAST(MAX(CASE WHEN member_id = $2 THEN 1 ELSE 0 END) AS BIGINT) FROM reactions \
                 WHERE message_id IN (SELECT json_array_elements_text($1::json)) \
                 GROUP BY message_id, emoji ORDER BY message_id, COUNT(*) DESC, MIN(created_at), emoji"
            } else {
                SQLITE
            })
            .bind(ids)
            .bind(member_id)
            .fetch_all(reader)
            .await?;
            rows.iter().map(reaction_row).collect()
        })
    }

    /// Adds `member_id`'s `emoji` to a message: `Ok(false)` when the message already carries
    /// [`MAX_REACTIONS`] distinct reactions and this would be a new one.
    pub async fn add_reaction(
        &self,
        message_id: &str,
        member_id: &str,
        emoji: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            // Serializes reactions per message: two writers both counting 63 distinct emoji
            // would otherwise end at 65.
            lock_message!(tx, pg, message_id);
            let (known, distinct): (i64, i64) = sqlx::query_as(
                "SELECT COUNT(*) FILTER (WHERE emoji = $2), COUNT(DISTINCT emoji) FROM reactions WHERE message_id = $1",
            )
            .bind(message_id)
            .bind(emoji)
            .fetch_one(&mut *tx)
            .await?;
            if known == 0 && distinct as usize >= MAX_REACTIONS {
                return Ok(false);
            }
            let added = sqlx::query("INSERT INTO reactions (message_id, emoji, member_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING")
                .bind(message_id)
                .bind(emoji)
                .bind(member_id)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            if added.rows_affected() > 0 {
                announce!(tx, message_id, now_ms);
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    /// Removes `member_id`'s `emoji` from a message (no-op when absent) at `now_ms`.
    pub async fn remove_reaction(
        &self,
        message_id: &str,
        member_id: &str,
        emoji: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            // The message row first, as an addition takes it: the count trigger updates it after
            // the delete, and a remove taking the reaction's row before the message's could
            // deadlock with an add of the same reaction.
            lock_message!(tx, pg, message_id);
            let removed = sqlx::query(
                "DELETE FROM reactions WHERE message_id = $1 AND emoji = $2 AND member_id = $3",
            )
            .bind(message_id)
            .bind(emoji)
            .bind(member_id)
            .execute(&mut *tx)
            .await?;
            if removed.rows_affected() > 0 {
                announce!(tx, message_id, now_ms);
            }
            tx.commit().await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reactions_are_read_on_the_callers_thread_up_to_their_bound() {
        assert!(on_callers_thread(0));
        assert!(on_callers_thread(RAW_REACTION_ROWS));
        assert!(!on_callers_thread(RAW_REACTION_ROWS + 1));
        assert!(!on_callers_thread(i64::MAX));
    }
}
