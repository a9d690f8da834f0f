//! Conversations and what is in them: direct conversations (channels of kind `dm`), messages with
//! their reactions and attachments.
//!
//! Every read that starts from an id an agent sent joins `channel_members`, so a row in a
//! conversation the member does not belong to is indistinguishable from a missing one.

use sqlx::Row;

use super::raw::Bind;
use super::{Columns, Membership, Page, Position, Store, StoreError, instant, new_id, on_backend};
use crate::contract::target::{Target, TargetKind};
use crate::contract::timestamp::Timestamp;
use crate::contract::types::{
    AttachmentInfo, ConversationTarget, Message, MessageAuthorId, MessageId, Reaction,
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

/// What follows the columns in the statement of a channel's or a dm's history page, with the
/// caller's membership checked inside it: `$1` the conversation, `$2`/`$3` the position read
/// after, `$4` the rows wanted, `$5` the workspace, `$6` the conversation's kind, `$7` the member.
macro_rules! channel_page {
    () => {
        " FROM messages g JOIN channels c ON c.id = g.channel_id \
          WHERE g.channel_id = $1 AND g.thread_id IS NULL AND (g.created_at, g.id) < ($2, $3) \
          AND c.workspace_id = $5 AND c.kind = $6 \
          AND EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = $1 AND m.member_id = $7) \
          ORDER BY g.thread_id, g.created_at DESC, g.id DESC LIMIT $4"
    };
}

/// The values of [`channel_page!`]'s parameters, in their order; without a position, the page
/// starts past every message.
fn channel_page_binds<'a>(
    workspace_id: &'a str,
    member_id: &'a str,
    channel_id: &'a str,
    kind: &'a str,
    after: Option<&'a Position>,
    limit: usize,
) -> [Bind<'a>; 7] {
    let (after_ms, after_id) = match after {
        Some(p) => (p.at_ms, p.id.as_str()),
        None => (i64::MAX, "\u{10FFFF}"),
    };
    [
        Bind::Text(channel_id),
        Bind::Int(after_ms),
        Bind::Text(after_id),
        Bind::Int((limit + 1) as i64),
        Bind::Text(workspace_id),
        Bind::Text(kind),
        Bind::Text(member_id),
    ]
}

/// One message of a written page: where its fields lie in the page's buffer.
struct WrittenRow {
    /// `"authorId":…,"content":…,"createdAt":…,"id":…`, the members `Message` writes between
    /// `attachments` and `reactions`.
    fields: std::ops::Range<usize>,
    /// The id's text (inside its quotes).
    id: std::ops::Range<usize>,
    created_at: i64,
    has_reactions: bool,
    has_attachments: bool,
}

/// Checks one row of a written page's statement as `Message`'s field types check it and writes
/// its fields at the end of `fields`. `author` is the last author checked, with its JSON text: a
/// page's messages mostly share theirs.
fn written_fields(
    row: &super::raw::RawRow<'_>,
    fields: &mut Vec<u8>,
    author: &mut Option<(String, Vec<u8>)>,
) -> Result<WrittenRow, StoreError> {
    let corrupt = |column| StoreError::Corrupt { column };
    let id = row.str(0)?;
    if !MessageId::is_valid(id) {
        return Err(corrupt("id"));
    }
    let author_id = row.str(1)?;
    if author.as_ref().is_none_or(|(known, _)| known != author_id) {
        author_id
            .parse::<MessageAuthorId>()
            .map_err(|_| corrupt("author_id"))?;
        let text = serde_json::to_vec(author_id).expect("a text serializes");
        *author = Some((author_id.to_string(), text));
    }
    let (_, author_text) = author.as_ref().expect("set above");
    let content = row.str(2)?;
    if !content_is_valid(content) {
        return Err(corrupt("content"));
    }
    let created_at: i64 = row.int(3)?;
    let start = fields.len();
    fields.extend_from_slice(b"\"authorId\":");
    fields.extend_from_slice(author_text);
    // serde_json's own serializer for the text, so it is escaped as its typed field would be.
    member(fields, b",\"content\":", content);
    fields.extend_from_slice(b",\"createdAt\":");
    if !crate::contract::timestamp::write_millis(created_at, fields) {
        let at: Timestamp = instant(created_at, "created_at")?;
        serde_json::to_writer(&mut *fields, &at).expect("a time serializes");
    }
    // An id is ASCII letters, digits and `_`: written as it is, between its quotes.
    fields.extend_from_slice(b",\"id\":\"");
    let id_range = fields.len()..fields.len() + id.len();
    fields.extend_from_slice(id.as_bytes());
    fields.push(b'"');
    Ok(WrittenRow {
        fields: start..fields.len(),
        id: id_range,
        created_at,
        has_reactions: row.int(4)? != 0,
        has_attachments: row.int(5)? != 0,
    })
}

/// Whether `text` is a `MessageContent` (1 to 4,000 characters), without making one: its type
/// counts the characters twice and copies the text.
fn content_is_valid(text: &str) -> bool {
    crate::contract::borrowed::length_within(text, 1, 4000)
}

/// Writes `"name":value` (`name` given with its quotes, colon and any leading comma).
fn member<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, name: &[u8], value: &T) {
    out.extend_from_slice(name);
    serde_json::to_writer(out, value).expect("a text or a time serializes");
}

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
        const SQL: &str = concat!("SELECT ", message_columns!(), channel_page!());
        let binds = channel_page_binds(workspace_id, member_id, &target.id, kind, after, limit);
        let read = match self.raw() {
            Some(raw) => raw.query(SQL, &binds, |row| message_row(row))?,
            None => None,
        };
        let rows = match read {
            Some(rows) => rows,
            None => on_backend!(self, |writer, reader, pg| {
                // The same values, bound in the same order.
                let mut query = sqlx::query(SQL);
                for &bind in &binds {
                    query = match bind {
                        Bind::Int(value) => query.bind(value),
                        Bind::Text(text) => query.bind(text),
                    };
                }
                let rows = query.fetch_all(reader).await?;
                rows.iter()
                    .map(message_row)
                    .collect::<Result<_, StoreError>>()
            })?,
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

    /// The history page of `target`, as [`Store::history_for_member`] reads it, written as the
    /// JSON text of its `Message` array at the end of `out`; the position of its last message
    /// when another page exists. `None` (and `out` unchanged) where the member may not read it.
    ///
    /// A channel's or dm's page read on the caller's thread is written from its rows as they are
    /// stepped: each field checked as its contract type checks it, and written by the same
    /// serializer, without building the `Message` values in between (about a sixth of a history
    /// read, BENCHMARKS.md). Any other page (a thread's, or one the pooled readers answer) is
    /// the typed page serialized.
    pub async fn history_written_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        target: &Target,
        after: Option<&Position>,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Option<Position>>, StoreError> {
        let kind = match target.kind {
            TargetKind::Thread => None,
            TargetKind::Channel => Some("channel"),
            TargetKind::Dm => Some("dm"),
        };
        let written = match (kind, self.raw()) {
            (Some(kind), Some(raw)) => {
                let binds =
                    channel_page_binds(workspace_id, member_id, &target.id, kind, after, limit);
                let mut fields = Vec::with_capacity(256 * (limit + 1));
                let mut author: Option<(String, Vec<u8>)> = None;
                const SQL: &str = concat!(
                    "SELECT g.id, g.author_id, g.content, g.created_at, \
                     g.reaction_count > 0, g.attachment_count > 0",
                    channel_page!()
                );
                raw.query(SQL, &binds, |row| {
                    written_fields(row, &mut fields, &mut author)
                })?
                .map(|rows| (rows, fields, kind))
            }
            _ => None,
        };
        let Some((mut rows, fields, kind)) = written else {
            let Some(page) = self
                .history_for_member(workspace_id, member_id, target, after, limit)
                .await?
            else {
                return Ok(None);
            };
            serde_json::to_writer(&mut *out, &page.items).expect("messages serialize");
            return Ok(Some(page.next));
        };
        if rows.is_empty()
            && self
                .member_channel(workspace_id, member_id, &target.id, Some(kind))
                .await?
                .is_none()
        {
            return Ok(None);
        }
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        let id = |row: &WrittenRow| {
            std::str::from_utf8(&fields[row.id.clone()]).expect("an id is checked ASCII")
        };
        let flags: Vec<_> = rows
            .iter()
            .map(|r| (id(r), r.has_reactions, r.has_attachments))
            .collect();
        let mut extras = self.extras(&flags, member_id).await?;
        // Every row of this statement lives at the target read (its `WHERE`), whose canonical
        // text the handler checked.
        let target_text = serde_json::to_string(&target.to_string()).expect("a string serializes");
        out.reserve(fields.len() + rows.len() * (64 + target_text.len()) + 2);
        out.push(b'[');
        for (n, row) in rows.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            // `Message`'s members in the order its serializer writes them.
            let (reactions, attachments) = extras.take(id(row));
            out.extend_from_slice(b"{\"attachments\":");
            serde_json::to_writer(&mut *out, &attachments).expect("attachments serialize");
            out.push(b',');
            out.extend_from_slice(&fields[row.fields.clone()]);
            out.extend_from_slice(b",\"reactions\":");
            serde_json::to_writer(&mut *out, &reactions).expect("reactions serialize");
            out.extend_from_slice(b",\"target\":");
            out.extend_from_slice(target_text.as_bytes());
            out.push(b'}');
        }
        out.push(b']');
        Ok(Some(has_more.then(|| {
            let last = rows.last().expect("a page with more has a last message");
            Position {
                at_ms: last.created_at,
                id: id(last).to_string(),
            }
        })))
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
        let flags: Vec<_> = rows
            .iter()
            .map(|r| (r.id.as_str(), r.has_reactions, r.has_attachments))
            .collect();
        let mut extras = self.extras(&flags, member_id).await?;
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
    async fn extras(
        &self,
        messages: &[(&str, bool, bool)],
        member_id: &str,
    ) -> Result<Extras, StoreError> {
        let with = |has: fn(&(&str, bool, bool)) -> bool| -> Vec<&str> {
            messages.iter().filter(|m| has(m)).map(|m| m.0).collect()
        };
        let (with_reactions, with_attachments) = (with(|m| m.1), with(|m| m.2));
        let ids = |ids: &[&str]| serde_json::to_string(ids).expect("strings serialize");
        let reactions = if with_reactions.is_empty() {
            Vec::new()
        } else {
            self.reactions_of(&ids(&with_reactions), member_id).await?
        };
        let attachments = if with_attachments.is_empty() {
            Vec::new()
        } else {
            let ids = ids(&with_attachments);
            on_backend!(self, |writer, reader, pg| {
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
                .iter()
                .map(|row| Ok((Columns::column(row, 0)?, attachment_info(row)?)))
                .collect::<Result<_, StoreError>>()
            })?
        };
        Ok(Extras {
            reactions,
            attachments,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::MessageContent;

    /// The written page's content check is `MessageContent`'s, at both edges and with characters
    /// of every width.
    #[test]
    fn content_is_checked_as_its_type_checks_it() {
        for unit in ["x", "\u{e9}", "\u{20ac}", "\u{1f600}"] {
            for n in [0, 1, 2, 999, 1000, 1001, 3999, 4000, 4001, 16001] {
                let text = unit.repeat(n);
                assert_eq!(
                    content_is_valid(&text),
                    text.parse::<MessageContent>().is_ok(),
                    "{n} of {unit:?}"
                );
            }
        }
    }

    /// Every page of `target` for `member`, `limit` at a time, as the written text and the
    /// position each page ends at, and the same pages typed and serialized.
    async fn both_ways(
        store: &Store,
        workspace: &str,
        member: &str,
        target: &Target,
        limit: usize,
    ) -> Option<(
        Vec<(String, Option<Position>)>,
        Vec<(String, Option<Position>)>,
    )> {
        let (mut written, mut typed) = (Vec::new(), Vec::new());
        let mut after: Option<Position> = None;
        loop {
            let mut out = Vec::new();
            let next = store
                .history_written_for_member(
                    workspace,
                    member,
                    target,
                    after.as_ref(),
                    limit,
                    &mut out,
                )
                .await
                .unwrap()?;
            written.push((String::from_utf8(out).unwrap(), next.clone()));
            let done = next.is_none();
            after = next;
            if done {
                break;
            }
        }
        let mut after: Option<Position> = None;
        loop {
            let page = store
                .history_for_member(workspace, member, target, after.as_ref(), limit)
                .await
                .unwrap()
                .expect("the typed read finds what the written one found");
            typed.push((
                serde_json::to_string(&page.items).unwrap(),
                page.next.clone(),
            ));
            if page.next.is_none() {
                break;
            }
            after = page.next;
        }
        Some((written, typed))
    }

    /// A written page is byte for byte its typed page serialized, with the same position, for a
    /// channel, a dm and a thread, on the caller's thread and through the pooled readers: escapes,
    /// non-ASCII text, the longest content, two authors, reactions (the caller's and others'),
    /// attachments, and pages of 1, 2 and 100.
    #[tokio::test]
    async fn a_written_page_is_its_typed_page_serialized() {
        let dir = tempfile::tempdir().unwrap();
        let (store, wsp, human, member, outsider) =
            crate::server::store::tests::people(dir.path()).await;
        let channel = store
            .create_channel(&wsp, "general", &[member.clone(), human.clone()], 1)
            .await
            .unwrap()
            .unwrap();
        let dm = store.open_dm(&wsp, &member, &human, 1).await.unwrap();
        let thread = store.create_thread(&channel, "t", 1).await.unwrap();
        let empty = store
            .create_channel(&wsp, "quiet", std::slice::from_ref(&member), 1)
            .await
            .unwrap()
            .unwrap();
        let contents = [
            "plain".to_string(),
            "quote \" backslash \\ newline \n tab \t bell \u{7} slash /".to_string(),
            "é 漢字 🎉 \u{2028}".to_string(),
            "x".repeat(4000),
            "last".to_string(),
        ];
        let mut now = 10;
        for conversation in [(&channel, None), (&dm, None), (&channel, Some(&thread))] {
            let at = Membership {
                channel_id: conversation.0.clone(),
                thread_id: conversation.1.cloned(),
            };
            for (n, content) in contents.iter().enumerate() {
                now += 1;
                let author = if n % 2 == 0 { &member } else { &human };
                let attachments = if n == 2 {
                    vec![
                        NewAttachment {
                            name: "notes \"1\".txt".into(),
                            media_type: "text/plain".into(),
                            content: b"hello".to_vec(),
                        },
                        NewAttachment {
                            name: "b.bin".into(),
                            media_type: "application/octet-stream".into(),
                            content: vec![0; 3],
                        },
                    ]
                } else {
                    Vec::new()
                };
                let (id, _) = store
                    .post_message(&wsp, &at, author, content, &attachments, now)
                    .await
                    .unwrap();
                if n == 1 || n == 4 {
                    for (who, emoji) in [(&member, "👍"), (&human, "👍"), (&human, "eyes")] {
                        now += 1;
                        assert!(store.add_reaction(&id, who, emoji, now).await.unwrap());
                    }
                }
            }
            // Two messages at the same millisecond: the id orders them.
            for content in ["same ms a", "same ms b"] {
                store
                    .post_message(&wsp, &at, &member, content, &[], now)
                    .await
                    .unwrap();
            }
        }
        let targets = [
            Target {
                kind: TargetKind::Channel,
                id: channel.clone(),
            },
            Target {
                kind: TargetKind::Dm,
                id: dm.clone(),
            },
            Target {
                kind: TargetKind::Thread,
                id: thread.clone(),
            },
        ];
        let check = async || {
            for target in &targets {
                for limit in [1, 2, 100] {
                    let (written, typed) = both_ways(&store, &wsp, &member, target, limit)
                        .await
                        .expect("a member reads the conversation");
                    assert_eq!(written, typed, "{target} by {limit}");
                    let messages: usize = written
                        .iter()
                        .map(|(text, _)| serde_json::from_str::<Vec<Message>>(text).unwrap().len())
                        .sum();
                    assert_eq!(messages, contents.len() + 2, "{target} by {limit}");
                }
                assert!(
                    both_ways(&store, &wsp, &outsider, target, 2)
                        .await
                        .is_none(),
                    "a non-member reads nothing of {target}"
                );
            }
            let quiet = Target {
                kind: TargetKind::Channel,
                id: empty.clone(),
            };
            let (written, typed) = both_ways(&store, &wsp, &member, &quiet, 2).await.unwrap();
            assert_eq!(written, [("[]".to_string(), None)]);
            assert_eq!(written, typed);
            assert!(
                both_ways(&store, &wsp, &outsider, &quiet, 2)
                    .await
                    .is_none()
            );
        };
        check().await;
        let raw = store
            .raw()
            .expect("a database file has caller-thread readers");
        let held = raw.exhaust();
        check().await;
        drop(held);
        check().await;
    }
}
