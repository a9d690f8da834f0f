//! Conversations and what is in them: direct conversations (channels of kind `dm`), messages with
//! their reactions and attachments.
//!
//! Every read that starts from an id an agent sent joins `channel_members`, so a row in a
//! conversation the member does not belong to is indistinguishable from a missing one.
//!
//! [`history`] reads a conversation's pages (typed, or written as JSON while the rows are
//! stepped), [`reactions`] and [`attachments`] what a message carries; this module posts messages,
//! reads one, and joins a page's reactions and attachments into its messages.

mod around;
mod attachments;
mod history;
mod reactions;

pub use attachments::{MAX_ATTACHMENTS, NewAttachment};

use super::raw::Bind;
use super::{
    Columns, EventKind, Membership, NewEvent, Store, StoreError, answered, deliver, here, instant,
    new_id, on_backend, record_event,
};
use crate::contract::target::{Target, TargetKind};
use crate::contract::types::{
    AttachmentInfo, ConversationTarget, Message, MessageAuthorId, Reaction,
};
use attachments::attachment_info;

/// The columns `message_row` reads, in its order, with the conversation's kind read as `$kind`.
/// The two flags come from the counts that migration 9's triggers keep on the message row: a
/// page fetches reactions and attachments only for the messages that have some, and skips those
/// queries when none has.
macro_rules! message_columns_with_kind {
    ($kind:literal) => {
        concat!(
            "g.id, g.channel_id, g.thread_id, ",
            $kind,
            ", g.author_id, g.content, g.created_at, g.reaction_count > 0, g.attachment_count > 0"
        )
    };
}

/// [`message_columns_with_kind!`] where `c` is the message's channel.
macro_rules! message_columns {
    () => {
        message_columns_with_kind!("c.kind")
    };
}
// The history pages read the same columns.
use {message_columns, message_columns_with_kind};

/// The reactions and attachments of a page's messages that have some, each with its message's
/// id, fetched in at most two queries.
struct Extras {
    reactions: Vec<(String, Reaction)>,
    attachments: Vec<(String, AttachmentInfo)>,
}

impl Extras {
    /// The reactions and attachments of `message_id`, taken out of the page's.
    fn take(&mut self, message_id: &str) -> (Vec<Reaction>, Vec<AttachmentInfo>) {
        let reactions = self
            .reactions
            .extract_if(.., |(id, _)| id == message_id)
            .map(|(_, reaction)| reaction)
            .collect();
        let attachments = self
            .attachments
            .extract_if(.., |(id, _)| id == message_id)
            .map(|(_, attachment)| attachment)
            .collect();
        (reactions, attachments)
    }
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
            let event = NewEvent {
                kind: EventKind::Message,
                channel_id: Some(&at.channel_id),
                thread_id: at.thread_id.as_deref(),
                agent_id: None,
                subject: &id,
            };
            record_event!(tx, workspace_id, now_ms, &event);
            // Who the message wakes, or which of its author's runs it answers.
            let (ttl, per_minute) = (self.delivery_ttl_ms(), self.deliveries_per_minute());
            deliver!(
                tx,
                workspace_id,
                now_ms,
                (ttl, per_minute),
                &id,
                at,
                author_id,
                content
            );
            if author_id.starts_with("agt_") {
                // The target's kind is not at hand: a channel's id is `channel:` or `dm:` it.
                let targets = match &at.thread_id {
                    Some(thread_id) => [format!("thread:{thread_id}"), String::new()],
                    None => [
                        format!("channel:{}", at.channel_id),
                        format!("dm:{}", at.channel_id),
                    ],
                };
                answered!(tx, workspace_id, now_ms, &id, author_id, &targets);
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

    /// Joins reactions and attachments into message rows (two queries for the whole page).
    async fn complete(
        &self,
        rows: Vec<MessageRow>,
        member_id: &str,
    ) -> Result<Vec<Message>, StoreError> {
        let flags: Vec<_> = rows
            .iter()
            .map(|r| (r.id.as_str(), r.has_reactions, r.has_attachments))
            .collect();
        let mut extras = self.extras(&flags, member_id, i64::MAX).await?;
        let mut out = Vec::with_capacity(rows.len());
        // A page's messages share their target and mostly their authors: each is checked
        // against its schema type once, and cloned for the rows that repeat it.
        let mut target: Option<(Target, ConversationTarget)> = None;
        let mut author: Option<(String, MessageAuthorId)> = None;
        for row in rows {
            let (reactions, attachments) = extras.take(&row.id);
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
    }

    /// The reactions and attachments of a page's messages, each given as `(id, has reactions,
    /// has attachments)`: one query for each kind some message has, none otherwise.
    /// `reaction_rows` is how many reactions the messages carry in all, as far as the caller
    /// knows (`i64::MAX` when it does not): it decides where they may be read.
    async fn extras(
        &self,
        messages: &[(&str, bool, bool)],
        member_id: &str,
        reaction_rows: i64,
    ) -> Result<Extras, StoreError> {
        let with = |has: fn(&(&str, bool, bool)) -> bool| -> Vec<&str> {
            messages.iter().filter(|m| has(m)).map(|m| m.0).collect()
        };
        let (with_reactions, with_attachments) = (with(|m| m.1), with(|m| m.2));
        let ids = |ids: &[&str]| serde_json::to_string(ids).expect("strings serialize");
        let reactions = if with_reactions.is_empty() {
            Vec::new()
        } else {
            self.reactions_of(&ids(&with_reactions), member_id, reaction_rows)
                .await?
        };
        let attachments = if with_attachments.is_empty() {
            Vec::new()
        } else {
            // At most `MAX_ATTACHMENTS` rows a message: a bounded read on the caller's thread.
            let ids = ids(&with_attachments);
            const SQLITE: &str = "SELECT message_id, id, name, media_type, size FROM attachments \
                 WHERE message_id IN (SELECT value FROM json_each($1)) ORDER BY message_id, position";
            let read = match self.raw() {
                Some(raw) => raw.query(here!(), SQLITE, &[Bind::Text(&ids)], |row| {
                    Ok((Columns::column(row, 0)?, attachment_info(row)?))
                })?,
                None => None,
            };
            match read {
                Some(read) => read,
                None => on_backend!(self, |writer, reader, pg| {
                    sqlx::query(if pg {
                        "SELECT message_id, id, name, media_type, size FROM attachments \
                         WHERE message_id IN (SELECT json_array_elements_text($1::json)) ORDER BY message_id, position"
                    } else {
                        SQLITE
                    })
                    .bind(ids)
                    .fetch_all(reader)
                    .await?
                    .iter()
                    .map(|row| Ok((Columns::column(row, 0)?, attachment_info(row)?)))
                    .collect::<Result<_, StoreError>>()
                })?,
            }
        };
        Ok(Extras {
            reactions,
            attachments,
        })
    }
}
