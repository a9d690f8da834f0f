//! A conversation's history pages: typed, or, read on the caller's thread, written as JSON
//! while their rows are stepped.

use super::{MessageRow, message_columns, message_columns_with_kind, message_row};
use crate::contract::target::{Target, TargetKind};
use crate::contract::timestamp::Timestamp;
use crate::contract::types::{Message, MessageAuthorId, MessageId};
use crate::server::store::raw::{Bind, RawRow};
use crate::server::store::{
    Membership, PAGE_BYTES, Page, Position, Store, StoreError, here, instant, on_backend,
};

/// What follows the columns in the statement of a channel's or a dm's history page, with the
/// conversation's workspace and kind and the caller's membership checked inside it. The checks
/// are constant subqueries, evaluated once: a row of the page is one step of the messages' index
/// and its row, with no join per row, and the index's order is the page's whatever the planner's
/// statistics say. The statement's parameters: `$1` the conversation, `$2`/`$3` the position read
/// after, `$4` the rows wanted, `$5` the workspace, `$6` the conversation's kind, `$7` the member.
/// `thread_id IS NULL` leads the ORDER BY so PostgreSQL walks the index in order (it does not
/// treat `IS NULL` as an equality); it is free on SQLite.
macro_rules! channel_page {
    () => {
        " FROM messages g \
          WHERE g.channel_id = $1 AND g.thread_id IS NULL AND (g.created_at, g.id) < ($2, $3) \
          AND EXISTS (SELECT 1 FROM channels c WHERE c.id = $1 AND c.workspace_id = $5 AND c.kind = $6) \
          AND EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = $1 AND m.member_id = $7) \
          ORDER BY g.thread_id, g.created_at DESC, g.id DESC LIMIT $4"
    };
}

/// What follows the columns in the statement of a thread's history page, with the caller's
/// membership of the thread's channel checked inside it, as [`channel_page!`] checks it. The
/// thread's channel is a constant subquery, so the messages' index is walked from its place, in
/// order. The parameters: `$1` the thread, `$2`/`$3` the position read after, `$4` the rows
/// wanted, `$5` the workspace, `$6` the member.
macro_rules! thread_page {
    () => {
        " FROM messages g \
          WHERE g.channel_id = (SELECT t.channel_id FROM threads t WHERE t.id = $1) AND g.thread_id = $1 \
          AND (g.created_at, g.id) < ($2, $3) \
          AND EXISTS (SELECT 1 FROM threads t JOIN channels c ON c.id = t.channel_id \
                      JOIN channel_members m ON m.channel_id = c.id \
                      WHERE t.id = $1 AND c.workspace_id = $5 AND m.member_id = $6) \
          ORDER BY g.created_at DESC, g.id DESC LIMIT $4"
    };
}

/// A typed statement of the messages of one conversation on one side of a position: `$1` the
/// channel, `$2` the thread (none in a channel), `$3`/`$4` the position, `$5` the rows wanted;
/// `$where` the conversation, `$op` the side, `$order` the order. A channel and a thread each have
/// their own text, so the conversation is an equality on the messages' index and the index is
/// walked in order from the position (`thread_id IS NULL` leads a channel's order for PostgreSQL,
/// as [`channel_page!`] explains).
macro_rules! located {
    ($where:literal, $op:literal, $order:literal) => {
        concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages g CROSS JOIN channels c \
              WHERE c.id = g.channel_id AND g.channel_id = $1 AND ",
            $where,
            " AND (g.created_at, g.id) ",
            $op,
            " ($3, $4) ORDER BY ",
            $order,
            " LIMIT $5"
        )
    };
}
pub(super) use located;

/// The columns of a typed page's statement, with the conversation's kind given as `$kind` (the
/// page's statement has no channel row to read it from; a thread's messages do not use it).
macro_rules! typed_columns {
    ($kind:literal) => {
        concat!("SELECT ", message_columns_with_kind!($kind))
    };
}

/// The columns of a written page's statement: what [`written_fields`] reads.
macro_rules! written_columns {
    () => {
        "SELECT g.id, g.author_id, g.content, g.created_at, \
         g.reaction_count, g.attachment_count > 0"
    };
}

/// A history page's statements: its typed one (`typed_columns!`), its written one
/// (`written_columns!`), and the values of its parameters, in their order.
struct PageQuery<'a> {
    typed: &'static str,
    written: &'static str,
    binds: Vec<Bind<'a>>,
}

impl<'a> PageQuery<'a> {
    /// The page of `target` for `member_id` after `after` (without a position, past every
    /// message): [`channel_page!`] for a channel or a dm, [`thread_page!`] for a thread.
    fn new(
        workspace_id: &'a str,
        member_id: &'a str,
        target: &'a Target,
        after: Option<&'a Position>,
        limit: usize,
    ) -> PageQuery<'a> {
        let (after_ms, after_id) = match after {
            Some(p) => (p.at_ms, p.id.as_str()),
            None => (i64::MAX, "\u{10FFFF}"),
        };
        let mut binds = vec![
            Bind::Text(&target.id),
            Bind::Int(after_ms),
            Bind::Text(after_id),
            Bind::Int((limit + 1) as i64),
            Bind::Text(workspace_id),
        ];
        let (typed, written) = match target.kind {
            TargetKind::Thread => (
                concat!(typed_columns!("'thread'"), thread_page!()),
                concat!(written_columns!(), thread_page!()),
            ),
            TargetKind::Channel | TargetKind::Dm => {
                binds.push(Bind::Text(target.kind.as_str()));
                (
                    concat!(typed_columns!("CAST($6 AS TEXT)"), channel_page!()),
                    concat!(written_columns!(), channel_page!()),
                )
            }
        };
        binds.push(Bind::Text(member_id));
        PageQuery {
            typed,
            written,
            binds,
        }
    }
}

/// One message of a written page: where its fields lie in the page's buffer.
struct WrittenRow {
    /// `"authorId":…,"content":…,"createdAt":…,"id":…`, the members `Message` writes between
    /// `attachments` and `reactions`.
    fields: std::ops::Range<usize>,
    /// The id's text (inside its quotes).
    id: std::ops::Range<usize>,
    created_at: i64,
    /// The message's reactions, one per member and emoji.
    reactions: i64,
    has_attachments: bool,
}

/// Checks one row of a written page's statement as `Message`'s field types check it and writes
/// its fields at the end of `fields`. `author` is the last author checked, with its JSON text: a
/// page's messages mostly share theirs.
fn written_fields(
    row: &RawRow<'_>,
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
        reactions: row.int(4)?,
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

impl Store {
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
                Some(_) => located!("g.thread_id = $2", "<", "g.created_at DESC, g.id DESC"),
                None => located!(
                    "g.thread_id IS NULL AND $2 IS NULL",
                    "<",
                    "g.thread_id, g.created_at DESC, g.id DESC"
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
    /// conversation). The membership is checked inside the page's own statement, so a page with
    /// messages is one query; an empty one takes a second to tell "not yours" from "nothing
    /// (more) to read".
    pub async fn history_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        target: &Target,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Option<Page<Message>>, StoreError> {
        let query = PageQuery::new(workspace_id, member_id, target, after, limit);
        let read = match self.raw() {
            Some(raw) => raw.query(here!(), query.typed, &query.binds, |row| message_row(row))?,
            None => None,
        };
        let rows = match read {
            Some(rows) => rows,
            None => on_backend!(self, |writer, reader, pg| {
                // The same values, bound in the same order.
                let mut sql = sqlx::query(query.typed);
                for &bind in &query.binds {
                    sql = match bind {
                        Bind::Int(value) => sql.bind(value),
                        Bind::Text(text) => sql.bind(text),
                    };
                }
                let rows = sql.fetch_all(reader).await?;
                rows.iter()
                    .map(message_row)
                    .collect::<Result<_, StoreError>>()
            })?,
        };
        let page = self.page_of(rows, member_id, limit).await?;
        if !page.items.is_empty() || self.may_read(workspace_id, member_id, target).await? {
            return Ok(Some(page));
        }
        Ok(None)
    }

    /// Whether `member_id` may read `target`: a member of its channel (a thread's, or the
    /// channel or dm itself), in `workspace_id`.
    async fn may_read(
        &self,
        workspace_id: &str,
        member_id: &str,
        target: &Target,
    ) -> Result<bool, StoreError> {
        Ok(match target.kind {
            TargetKind::Thread => self
                .thread_for_member(workspace_id, member_id, &target.id)
                .await?
                .is_some(),
            TargetKind::Channel | TargetKind::Dm => self
                .member_channel(
                    workspace_id,
                    member_id,
                    &target.id,
                    Some(target.kind.as_str()),
                )
                .await?
                .is_some(),
        })
    }

    /// The history page of `target`, as [`Store::history_for_member`] reads it (ended at the same
    /// message past [`PAGE_BYTES`]), written as the JSON text of its `Message` array at the end of
    /// `out`; the position of its last message when another page exists. `None` (and `out`
    /// unchanged) where the member may not read it.
    ///
    /// A page read on the caller's thread is written from its rows as they are stepped: each
    /// field checked as its contract type checks it, and written by the same serializer, without
    /// building the `Message` values in between (a large share of a history read otherwise). A
    /// page the pooled readers answer is the typed page serialized.
    pub async fn history_written_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        target: &Target,
        after: Option<&Position>,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Option<Position>>, StoreError> {
        let written = match self.raw() {
            Some(raw) => {
                let query = PageQuery::new(workspace_id, member_id, target, after, limit);
                let mut fields = Vec::with_capacity(256 * (limit + 1));
                let mut author: Option<(String, Vec<u8>)> = None;
                raw.query(here!(), query.written, &query.binds, |row| {
                    written_fields(row, &mut fields, &mut author)
                })?
                .map(|rows| (rows, fields))
            }
            None => None,
        };
        let Some((mut rows, fields)) = written else {
            let Some(page) = self
                .history_for_member(workspace_id, member_id, target, after, limit)
                .await?
            else {
                return Ok(None);
            };
            serde_json::to_writer(&mut *out, &page.items).expect("messages serialize");
            return Ok(Some(page.next));
        };
        if rows.is_empty() && !self.may_read(workspace_id, member_id, target).await? {
            return Ok(None);
        }
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        let id = |row: &WrittenRow| {
            std::str::from_utf8(&fields[row.id.clone()]).expect("an id is checked ASCII")
        };
        // Each id read once: the flags carry it to the page's writing below.
        let flags: Vec<_> = rows
            .iter()
            .map(|r| (id(r), r.reactions > 0, r.has_attachments))
            .collect();
        let reactions: i64 = rows.iter().map(|r| r.reactions).sum();
        let mut extras = self.extras(&flags, member_id, reactions).await?;
        // Every row of this statement lives at the target read (its `WHERE`), whose canonical
        // text the handler checked.
        let target_text = serde_json::to_string(&target.to_string()).expect("a string serializes");
        out.reserve(fields.len() + rows.len() * (64 + target_text.len()) + 2);
        out.push(b'[');
        // What `fitting` weighs the typed page's items at: each item's bytes and a comma.
        let (mut weight, mut kept) = (0, rows.len());
        for (n, (row, &(id, ..))) in rows.iter().zip(&flags).enumerate() {
            let start = out.len();
            if n > 0 {
                out.push(b',');
            }
            // `Message`'s members in the order its serializer writes them.
            let (reactions, attachments) = extras.take(id);
            out.extend_from_slice(b"{\"attachments\":");
            serde_json::to_writer(&mut *out, &attachments).expect("attachments serialize");
            out.push(b',');
            out.extend_from_slice(&fields[row.fields.clone()]);
            out.extend_from_slice(b",\"reactions\":");
            serde_json::to_writer(&mut *out, &reactions).expect("reactions serialize");
            out.extend_from_slice(b",\"target\":");
            out.extend_from_slice(target_text.as_bytes());
            out.push(b'}');
            weight += out.len() - start + usize::from(n == 0);
            if weight > PAGE_BYTES && n > 0 {
                // The page ends before this message; its cursor continues from the one before.
                out.truncate(start);
                kept = n;
                break;
            }
        }
        out.push(b']');
        rows.truncate(kept);
        Ok(Some((has_more || kept < flags.len()).then(|| {
            let last = rows.last().expect("a page with more has a last message");
            Position {
                at_ms: last.created_at,
                id: id(last).to_string(),
            }
        })))
    }

    pub(super) async fn page_of(
        &self,
        rows: Vec<MessageRow>,
        member_id: &str,
        limit: usize,
    ) -> Result<Page<Message>, StoreError> {
        let positions = positions(&rows);
        let messages = self.complete(rows, member_id).await?;
        Ok(Page::from_rows_within_bytes(
            messages.into_iter().zip(positions).collect(),
            limit,
        ))
    }
}

/// Where each of `rows` lies in its conversation's order: a history page's positions.
pub(super) fn positions(rows: &[MessageRow]) -> Vec<Position> {
    rows.iter()
        .map(|r| Position {
            at_ms: r.created_at,
            id: r.id.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
