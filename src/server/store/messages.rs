//! Conversations and what is in them: direct conversations (channels of kind `dm`), messages with
//! their reactions and attachments.
//!
//! Every read that starts from an id an agent sent joins `channel_members`, so a row in a
//! conversation the member does not belong to is indistinguishable from a missing one.

use sqlx::Row;

use super::raw::Bind;
use super::{Columns, Membership, Page, Position, Store, StoreError, instant, new_id, on_backend};
use crate::contract::target::{Target, TargetKind};
use crate::contract::types::{
    AttachmentInfo, ConversationTarget, Message, MessageAuthorId, Reaction,
};

/// Distinct reactions one message can carry (the `Message.reactions` bound).
pub const MAX_REACTIONS: usize = 64;
/// Attachments on one message (the `Message.attachments` bound).
pub const MAX_ATTACHMENTS: usize = 10;

/// The columns `message_row` reads, in its order; `c` is the message's channel. The two flags
/// come from the counts that migration 9's triggers keep on the message row: a page fetches
/// reactions and attachments only for the messages that have some, and skips those queries when
/// none has.
macro_rules! message_columns {
    () => {
        "g.id, g.channel_id, g.thread_id, c.kind, g.author_id, g.content, g.created_at, \
         g.reaction_count > 0, g.attachment_count > 0"
    };
}

/// An attachment to store with a new message.
#[derive(Debug, Clone)]
pub struct NewAttachment {
    pub name: String,
    pub media_type: String,
    pub content: Vec<u8>,
}

/// A message row before its reactions and attachments are joined in.
struct MessageRow {
    id: String,
    target: Target,
    author_id: String,
    content: String,
    created_at: i64,
    has_reactions: bool,
    has_attachments: bool,
}

fn message_row(row: &impl Columns) -> Result<MessageRow, StoreError> {
    let channel_id: String = row.column(1)?;
    let thread_id: Option<String> = row.column(2)?;
    let kind: String = row.column(3)?;
    let target = match (thread_id, kind.as_str()) {
        (Some(thread_id), _) => Target {
            kind: TargetKind::Thread,
            id: thread_id,
        },
        (None, "dm") => Target {
            kind: TargetKind::Dm,
            id: channel_id,
        },
        (None, "channel") => Target {
            kind: TargetKind::Channel,
            id: channel_id,
        },
        _ => return Err(StoreError::Corrupt { column: "kind" }),
    };
    Ok(MessageRow {
        id: row.column(0)?,
        target,
        author_id: row.column(4)?,
        content: row.column(5)?,
        created_at: row.column(6)?,
        has_reactions: row.column(7)?,
        has_attachments: row.column(8)?,
    })
}

fn parse<T: std::str::FromStr>(value: String, column: &'static str) -> Result<T, StoreError> {
    value.parse().map_err(|_| StoreError::Corrupt { column })
}

impl Store {
    /// The direct conversation between two members of `workspace_id`, created on first use.
    pub async fn open_dm(
        &self,
        workspace_id: &str,
        a: &str,
        b: &str,
        now_ms: i64,
    ) -> Result<String, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let (first, second) = if a <= b { (a, b) } else { (b, a) };
            // The name is the conversation's identity: one dm per pair.
            let name = format!("dm:{first}:{second}");
            let mut tx = writer.begin().await?;
            sqlx::query("INSERT INTO channels (id, workspace_id, name, kind, created_at) VALUES ($1, $2, $3, 'dm', $4) ON CONFLICT (workspace_id, name) DO NOTHING")
                .bind(new_id("dm", now_ms))
                .bind(workspace_id)
                .bind(&name)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            let (id,): (String,) = sqlx::query_as(
                "SELECT id FROM channels WHERE workspace_id = $1 AND name = $2 AND kind = 'dm'",
            )
            .bind(workspace_id)
            .bind(&name)
            .fetch_one(&mut *tx)
            .await?;
            for member in [first, second] {
                sqlx::query("INSERT INTO channel_members (channel_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                    .bind(&id)
                    .bind(member)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(id)
        })
    }

    /// The conversation `target` names, if it is in `workspace_id` and `member_id` belongs to it.
    pub async fn conversation_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        target: &Target,
    ) -> Result<Option<Membership>, StoreError> {
        let kind = match target.kind {
            TargetKind::Thread => {
                return self
                    .thread_for_member(workspace_id, member_id, &target.id)
                    .await;
            }
            TargetKind::Channel => "channel",
            TargetKind::Dm => "dm",
        };
        self.member_channel(workspace_id, member_id, &target.id, Some(kind))
            .await
    }

    /// Posts a message with its attachments in one transaction; the caller checked membership.
    /// Returns the message id and the attachment ids, in order.
    pub async fn post_message(
        &self,
        workspace_id: &str,
        at: &Membership,
        author_id: &str,
        content: &str,
        attachments: &[NewAttachment],
        now_ms: i64,
    ) -> Result<(String, Vec<String>), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("msg", now_ms);
            let mut attachment_ids = Vec::with_capacity(attachments.len());
            let mut tx = writer.begin().await?;
            sqlx::query("INSERT INTO messages (id, workspace_id, channel_id, thread_id, author_id, content, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
                .bind(&id)
                .bind(workspace_id)
                .bind(&at.channel_id)
                .bind(&at.thread_id)
                .bind(author_id)
                .bind(content)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            for (position, attachment) in attachments.iter().enumerate() {
                let attachment_id = new_id("att", now_ms);
                sqlx::query("INSERT INTO attachments (id, message_id, position, name, media_type, size, content, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
                    .bind(&attachment_id)
                    .bind(&id)
                    .bind(position as i64)
                    .bind(&attachment.name)
                    .bind(&attachment.media_type)
                    .bind(attachment.content.len() as i64)
                    .bind(attachment.content.as_slice())
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                attachment_ids.push(attachment_id);
            }
            tx.commit().await?;
            Ok((id, attachment_ids))
        })
    }

    /// One message as `member_id` sees it, if it is in a conversation they belong to.
    pub async fn message_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        message_id: &str,
    ) -> Result<Option<Message>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                message_columns!(),
                " FROM messages g JOIN channels c ON c.id = g.channel_id JOIN channel_members m ON m.channel_id = c.id \
                  WHERE g.id = $1 AND c.workspace_id = $2 AND m.member_id = $3"
            ))
            .bind(message_id)
            .bind(workspace_id)
            .bind(member_id)
            .fetch_optional(reader)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let mut messages = self.complete(vec![message_row(&row)?], member_id).await?;
            Ok(messages.pop())
        })
    }

    /// The messages at exactly `at` (a channel's or dm's top level, or one thread), newest first.
    pub async fn message_history(
        &self,
        at: &Membership,
        member_id: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Message>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let (after_ms, after_id) = match after {
                Some(p) => (p.at_ms, p.id.clone()),
                None => (i64::MAX, "\u{10FFFF}".to_string()),
            };
            // `thread_id IS NULL` leads the ORDER BY so PostgreSQL walks the index in order (it
            // does not treat `IS NULL` as an equality); `IS NOT DISTINCT FROM` is never an index
            // condition there. Both are free on SQLite.
            let sql = match at.thread_id {
                Some(_) => concat!(
                    "SELECT ",
                    message_columns!(),
                    " FROM messages g JOIN channels c ON c.id = g.channel_id \
                      WHERE g.channel_id = $1 AND g.thread_id = $2 AND (g.created_at, g.id) < ($3, $4) \
                      ORDER BY g.created_at DESC, g.id DESC LIMIT $5"
                ),
                None => concat!(
                    "SELECT ",
                    message_columns!(),
                    " FROM messages g JOIN channels c ON c.id = g.channel_id \
                      WHERE g.channel_id = $1 AND g.thread_id IS NULL AND $2 IS NULL AND (g.created_at, g.id) < ($3, $4) \
                      ORDER BY g.thread_id, g.created_at DESC, g.id DESC LIMIT $5"
                ),
            };
            let rows = sqlx::query(sql)
                .bind(&at.channel_id)
                .bind(&at.thread_id)
                .bind(after_ms)
                .bind(after_id)
                .bind((limit + 1) as i64)
                .fetch_all(reader)
                .await?;
            let rows = rows.iter().map(message_row).collect::<Result<_, _>>()?;
            self.page_of(rows, member_id, limit).await
        })
    }

    /// The history page of `target` if `member_id` may read it (`None` otherwise, like a missing
    /// conversation). For a channel or a DM the membership is checked inside the page's own
    /// statement, so a page with messages is one query; an empty one takes a second to tell "not
    /// yours" from "nothing (more) to read". A thread's membership is looked up first.
    pub async fn history_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        target: &Target,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Option<Page<Message>>, StoreError> {
        let kind = match target.kind {
            TargetKind::Thread => {
                let Some(at) = self
                    .thread_for_member(workspace_id, member_id, &target.id)
                    .await?
                else {
                    return Ok(None);
                };
                return self
                    .message_history(&at, member_id, after, limit)
                    .await
                    .map(Some);
            }
            TargetKind::Channel => "channel",
            TargetKind::Dm => "dm",
        };
        const SQL: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages g JOIN channels c ON c.id = g.channel_id \
              WHERE g.channel_id = $1 AND g.thread_id IS NULL AND (g.created_at, g.id) < ($2, $3) \
              AND c.workspace_id = $5 AND c.kind = $6 \
              AND EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = $1 AND m.member_id = $7) \
              ORDER BY g.thread_id, g.created_at DESC, g.id DESC LIMIT $4"
        );
        let (after_ms, after_id) = match after {
            Some(p) => (p.at_ms, p.id.as_str()),
            None => (i64::MAX, "\u{10FFFF}"),
        };
        let binds = [
            Bind::Text(&target.id),
            Bind::Int(after_ms),
            Bind::Text(after_id),
            Bind::Int((limit + 1) as i64),
            Bind::Text(workspace_id),
            Bind::Text(kind),
            Bind::Text(member_id),
        ];
        let read = match self.raw() {
            Some(raw) => raw.query(SQL, &binds, |row| message_row(row))?,
            None => None,
        };
        let rows = match read {
            Some(rows) => rows,
            None => on_backend!(self, |writer, reader, pg| {
                let rows = sqlx::query(SQL)
                    .bind(&target.id)
                    .bind(after_ms)
                    .bind(after_id)
                    .bind((limit + 1) as i64)
                    .bind(workspace_id)
                    .bind(kind)
                    .bind(member_id)
                    .fetch_all(reader)
                    .await?;
                rows.iter().map(message_row).collect::<Result<_, _>>()?
            }),
        };
        let page = self.page_of(rows, member_id, limit).await?;
        if !page.items.is_empty() {
            return Ok(Some(page));
        }
        Ok(self
            .member_channel(workspace_id, member_id, &target.id, Some(kind))
            .await?
            .map(|_| page))
    }

    /// A page of messages from up to `limit + 1` rows of `message_columns!`.
    async fn page_of(
        &self,
        rows: Vec<MessageRow>,
        member_id: &str,
        limit: usize,
    ) -> Result<Page<Message>, StoreError> {
        let positions: Vec<Position> = rows
            .iter()
            .map(|r| Position {
                at_ms: r.created_at,
                id: r.id.clone(),
            })
            .collect();
        let messages = self.complete(rows, member_id).await?;
        Ok(Page::from_rows(
            messages.into_iter().zip(positions).collect(),
            limit,
        ))
    }

    /// Joins reactions and attachments into message rows (two queries for the whole page).
    async fn complete(
        &self,
        rows: Vec<MessageRow>,
        member_id: &str,
    ) -> Result<Vec<Message>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let ids_where = |wanted: fn(&MessageRow) -> bool| {
                let ids: Vec<&String> = rows.iter().filter(|r| wanted(r)).map(|r| &r.id).collect();
                (!ids.is_empty()).then(|| serde_json::to_string(&ids).expect("strings serialize"))
            };
            let mut reactions = match ids_where(|r| r.has_reactions) {
                None => Vec::new(),
                Some(ids) => self.reactions_of(&ids, member_id).await?,
            };
            let attachment_rows = match ids_where(|r| r.has_attachments) {
                None => Vec::new(),
                Some(ids) => {
                    sqlx::query(if pg {
                        "SELECT message_id, id, name, media_type, size FROM attachments \
                         WHERE message_id IN (SELECT json_array_elements_text($1::json)) ORDER BY message_id, position"
                    } else {
                        "SELECT message_id, id, name, media_type, size FROM attachments \
                         WHERE message_id IN (SELECT value FROM json_each($1)) ORDER BY message_id, position"
                    })
                    .bind(ids)
                    .fetch_all(reader)
                    .await?
                }
            };
            let mut out = Vec::with_capacity(rows.len());
            // A page's messages share their target and mostly their authors: each is checked
            // against its schema type once, and cloned for the rows that repeat it.
            let mut target: Option<(Target, ConversationTarget)> = None;
            let mut author: Option<(String, MessageAuthorId)> = None;
            for row in rows {
                // This message's reactions, taken out of the page's.
                let reactions: Vec<Reaction> = reactions
                    .extract_if(.., |(message_id, _)| *message_id == row.id)
                    .map(|(_, reaction)| reaction)
                    .collect();
                let attachments = attachment_rows
                    .iter()
                    .filter(|a| a.get::<String, _>(0) == row.id)
                    .map(attachment_info)
                    .collect::<Result<_, _>>()?;
                let row_target = match &target {
                    Some((seen, parsed)) if *seen == row.target => parsed.clone(),
                    _ => {
                        let parsed: ConversationTarget = parse(row.target.to_string(), "target")?;
                        target.insert((row.target, parsed)).1.clone()
                    }
                };
                let author_id = match &author {
                    Some((seen, parsed)) if *seen == row.author_id => parsed.clone(),
                    _ => {
                        let parsed: MessageAuthorId =
                            row.author_id.parse().map_err(|_| StoreError::Corrupt {
                                column: "author_id",
                            })?;
                        author.insert((row.author_id, parsed)).1.clone()
                    }
                };
                out.push(Message {
                    id: parse(row.id, "id")?,
                    target: row_target,
                    author_id,
                    content: parse(row.content, "content")?,
                    created_at: instant(row.created_at, "created_at")?,
                    reactions,
                    attachments,
                });
            }
            Ok(out)
        })
    }

    /// The reactions of `message_id` as `member_id` sees them.
    pub async fn reactions(
        &self,
        message_id: &str,
        member_id: &str,
    ) -> Result<Vec<Reaction>, StoreError> {
        let ids = serde_json::to_string(&[message_id]).expect("strings serialize");
        Ok(self
            .reactions_of(&ids, member_id)
            .await?
            .into_iter()
            .map(|(_, reaction)| reaction)
            .collect())
    }

    /// `(message id, reaction)` for the messages in the JSON array `ids`, each message's most
    /// used first, as `member_id` sees them (`mine`).
    async fn reactions_of(
        &self,
        ids: &str,
        member_id: &str,
    ) -> Result<Vec<(String, Reaction)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let rows = sqlx::query(if pg {
                "SELECT message_id, emoji, COUNT(*), CAST(MAX(CASE WHEN member_id = $2 THEN 1 ELSE 0 END) AS BIGINT) FROM reactions \
                 WHERE message_id IN (SELECT json_array_elements_text($1::json)) \
                 GROUP BY message_id, emoji ORDER BY message_id, COUNT(*) DESC, MIN(created_at), emoji"
            } else {
                "SELECT message_id, emoji, COUNT(*), CAST(MAX(CASE WHEN member_id = $2 THEN 1 ELSE 0 END) AS BIGINT) FROM reactions \
                 WHERE message_id IN (SELECT value FROM json_each($1)) \
                 GROUP BY message_id, emoji ORDER BY message_id, COUNT(*) DESC, MIN(created_at), emoji"
            })
            .bind(ids)
            .bind(member_id)
            .fetch_all(reader)
            .await?;
            rows.iter()
                .map(|r| {
                    let count: i64 = r.try_get(2)?;
                    let reaction = Reaction {
                        emoji: parse(r.try_get(1)?, "emoji")?,
                        count: std::num::NonZeroU64::new(count as u64).ok_or(
                            StoreError::Corrupt {
                                column: "reactions",
                            },
                        )?,
                        mine: r.try_get::<i64, _>(3)? == 1,
                    };
                    Ok((r.try_get(0)?, reaction))
                })
                .collect()
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
            if pg {
                // Serializes reactions per message: two writers both counting 63 distinct
                // emoji would otherwise end at 65.
                sqlx::query("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE")
                    .bind(message_id)
                    .execute(&mut *tx)
                    .await?;
            }
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
            sqlx::query("INSERT INTO reactions (message_id, emoji, member_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING")
                .bind(message_id)
                .bind(emoji)
                .bind(member_id)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(true)
        })
    }

    /// Removes `member_id`'s `emoji` from a message (no-op when absent).
    pub async fn remove_reaction(
        &self,
        message_id: &str,
        member_id: &str,
        emoji: &str,
    ) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            if pg {
                // The message row first, as an addition takes it: the count trigger updates it
                // after the delete, and a remove taking the reaction's row before the message's
                // could deadlock with an add of the same reaction.
                sqlx::query("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE")
                    .bind(message_id)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(
                "DELETE FROM reactions WHERE message_id = $1 AND emoji = $2 AND member_id = $3",
            )
            .bind(message_id)
            .bind(emoji)
            .bind(member_id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    /// An attachment's metadata, if it is on a message in a conversation `member_id` belongs to.
    pub async fn attachment_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        attachment_id: &str,
    ) -> Result<Option<AttachmentInfo>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT a.message_id, a.id, a.name, a.media_type, a.size FROM attachments a \
                 JOIN messages g ON g.id = a.message_id JOIN channels c ON c.id = g.channel_id JOIN channel_members m ON m.channel_id = c.id \
                 WHERE a.id = $1 AND c.workspace_id = $2 AND m.member_id = $3",
            )
            .bind(attachment_id)
            .bind(workspace_id)
            .bind(member_id)
            .fetch_optional(reader)
            .await?;
            row.as_ref().map(attachment_info).transpose()
        })
    }

    /// Up to `len` bytes of an attachment from `offset` (`substr` on a BLOB or BYTEA is bytes;
    /// PostgreSQL has it for `integer` arguments only).
    pub async fn attachment_bytes(
        &self,
        attachment_id: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let (bytes,): (Vec<u8>,) =
                sqlx::query_as("SELECT substr(content, CAST($2 AS INTEGER), CAST($3 AS INTEGER)) FROM attachments WHERE id = $1")
                    .bind(attachment_id)
                    .bind(offset.saturating_add(1) as i64)
                    .bind(len as i64)
                    .fetch_one(reader)
                    .await?;
            Ok(bytes)
        })
    }
}

fn attachment_info(row: &impl Columns) -> Result<AttachmentInfo, StoreError> {
    let size: i64 = row.column(4)?;
    Ok(AttachmentInfo {
        id: parse(row.column(1)?, "attachment id")?,
        name: parse(row.column(2)?, "attachment name")?,
        media_type: parse(row.column(3)?, "media_type")?,
        size: size as u64,
    })
}
