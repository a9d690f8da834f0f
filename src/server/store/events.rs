//! The event feed's log: one row per change a person may be shown live (a message posted, a
//! reaction changed, a task or an approval changed), numbered per workspace by `seq`, written in
//! the transaction of the change.
//!
//! `seq` comes from the workspace's row of `event_heads`, incremented in that same transaction:
//! on PostgreSQL the row's lock is held until the commit, so the workspace's events commit in
//! `seq` order, and a reader that sees head `H` sees every event up to `H` (none of them can
//! still be in flight); SQLite's one writer orders them already. So a cursor (the last `seq`
//! read) resumes with nothing missed and nothing repeated. Events are kept for
//! [`EVENT_RETENTION_MS`] and at most [`MAX_EVENTS`] in all; a cursor from before what is kept
//! reads `resync`.

use super::{Store, StoreError, on_backend};

/// Events are kept at least this long.
pub const EVENT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Events kept at most, in all workspaces (the oldest go first).
pub const MAX_EVENTS: i64 = 1_000_000;
/// Events one prune deletes at most.
const MAX_PRUNED: i64 = 10_000;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Message,
    Reaction,
    Task,
    Approval,
    Delivery,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Message => "message",
            EventKind::Reaction => "reaction",
            EventKind::Task => "task",
            EventKind::Approval => "approval",
            EventKind::Delivery => "delivery",
        }
    }

    fn parse(text: &str) -> Result<EventKind, StoreError> {
        Ok(match text {
            "message" => EventKind::Message,
            "reaction" => EventKind::Reaction,
            "task" => EventKind::Task,
            "approval" => EventKind::Approval,
            "delivery" => EventKind::Delivery,
            _ => {
                return Err(StoreError::Corrupt {
                    column: "events.kind",
                });
            }
        })
    }
}

/// One change to record: its kind, where it happened (a conversation's, or an agent's for an
/// approval) and the id of what changed.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub kind: EventKind,
    pub channel_id: Option<&'a str>,
    pub thread_id: Option<&'a str>,
    /// The agent an approval belongs to (its owner sees it).
    pub agent_id: Option<&'a str>,
    pub subject: &'a str,
}

/// A recorded event as a reader gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub seq: i64,
    pub at_ms: i64,
    pub kind: EventKind,
    pub channel_id: Option<String>,
    pub thread_id: Option<String>,
    /// `channel` or `dm`: the kind of the event's channel, when it has one.
    pub channel_kind: Option<String>,
    pub subject: String,
}

/// What a reader finds after its cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPage {
    /// The events the member may see, in `seq` order.
    pub events: Vec<Event>,
    /// Where the next read starts: past every event looked at, shown or not.
    pub cursor: i64,
    /// The cursor was older than what is kept: the reader missed events and must read its views
    /// again; `cursor` is the head.
    pub resync: bool,
}

/// An event's columns as read: seq, at, kind, channel, thread, the channel's kind, subject.
type EventRow = (
    i64,
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

/// Records `$event` in workspace `$workspace` at `$at` inside the transaction `$tx`.
macro_rules! record_event {
    ($tx:expr, $workspace:expr, $at:expr, $event:expr) => {{
        let event: &$crate::server::store::NewEvent<'_> = $event;
        sqlx::query("INSERT INTO event_heads (workspace_id, seq) VALUES ($1, 0) ON CONFLICT (workspace_id) DO NOTHING")
            .bind($workspace)
            .execute(&mut *$tx)
            .await?;
        let (seq,): (i64,) = sqlx::query_as(
            "UPDATE event_heads SET seq = seq + 1 WHERE workspace_id = $1 RETURNING seq",
        )
        .bind($workspace)
        .fetch_one(&mut *$tx)
        .await?;
        sqlx::query(
            "INSERT INTO events (workspace_id, seq, at, kind, channel_id, thread_id, agent_id, subject) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind($workspace)
        .bind(seq)
        .bind($at)
        .bind(event.kind.as_str())
        .bind(event.channel_id)
        .bind(event.thread_id)
        .bind(event.agent_id)
        .bind(event.subject)
        .execute(&mut *$tx)
        .await?;
    }};
}
pub(crate) use record_event;

impl Store {
    /// Records `event` in `workspace_id` at `now_ms`, in the request's transaction when there is
    /// one (a change and its event commit together), else in one of its own.
    pub async fn record_event(
        &self,
        workspace_id: &str,
        now_ms: i64,
        event: &NewEvent<'_>,
    ) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            record_event!(tx, workspace_id, now_ms, event);
            tx.commit().await?;
            Ok(())
        })
    }

    /// Records the change of task `task_id` (its conversation read from its row).
    pub async fn record_task_event(
        &self,
        workspace_id: &str,
        now_ms: i64,
        task_id: &str,
    ) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let (channel_id, thread_id): (String, Option<String>) =
                sqlx::query_as("SELECT channel_id, thread_id FROM tasks WHERE id = $1")
                    .bind(task_id)
                    .fetch_one(&mut *tx)
                    .await?;
            let event = NewEvent {
                kind: EventKind::Task,
                channel_id: Some(&channel_id),
                thread_id: thread_id.as_deref(),
                agent_id: None,
                subject: task_id,
            };
            record_event!(tx, workspace_id, now_ms, &event);
            tx.commit().await?;
            Ok(())
        })
    }

    /// The events after `after` that `member_id` may see in `workspace_id`, at most `limit`: those
    /// of the conversations they belong to, and the approvals of the agents they own. Without
    /// `after`, none: the page's cursor is the head, where a new reader starts.
    pub async fn events_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        after: Option<i64>,
        limit: usize,
    ) -> Result<EventPage, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            // The head first: every event up to it has committed (see the module's comment).
            let head: Option<(i64,)> =
                sqlx::query_as("SELECT seq FROM event_heads WHERE workspace_id = $1")
                    .bind(workspace_id)
                    .fetch_optional(reader)
                    .await?;
            let head = head.map_or(0, |(seq,)| seq);
            let Some(after) = after.filter(|after| *after < head) else {
                return Ok(EventPage {
                    events: Vec::new(),
                    cursor: after.map_or(head, |after| after.min(head).max(0)),
                    resync: after.is_some_and(|after| after > head),
                });
            };
            // Dense per workspace: a first kept event past `after + 1` means some were pruned.
            let (oldest,): (Option<i64>,) =
                sqlx::query_as("SELECT MIN(seq) FROM events WHERE workspace_id = $1 AND seq > $2")
                    .bind(workspace_id)
                    .bind(after)
                    .fetch_one(reader)
                    .await?;
            if oldest.is_none_or(|oldest| oldest > after + 1) {
                return Ok(EventPage {
                    events: Vec::new(),
                    cursor: head,
                    resync: true,
                });
            }
            let rows: Vec<EventRow> =
                sqlx::query_as(
                    "SELECT e.seq, e.at, e.kind, e.channel_id, e.thread_id, c.kind, e.subject FROM events e \
                     LEFT JOIN channels c ON c.id = e.channel_id \
                     WHERE e.workspace_id = $1 AND e.seq > $2 AND e.seq <= $3 AND ( \
                       (e.channel_id IS NOT NULL AND EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = e.channel_id AND m.member_id = $4)) \
                       OR (e.agent_id IS NOT NULL AND e.agent_id IN (SELECT o.id FROM agents o WHERE o.owner_human_id = $4)) \
                       OR (e.kind = 'delivery' AND EXISTS (SELECT 1 FROM deliveries d WHERE d.id = e.subject AND d.sender_id = $4))) \
                     ORDER BY e.seq LIMIT $5",
                )
                .bind(workspace_id)
                .bind(after)
                .bind(head)
                .bind(member_id)
                .bind(limit as i64)
                .fetch_all(reader)
                .await?;
            let full = rows.len() == limit;
            let events = rows
                .into_iter()
                .map(
                    |(seq, at_ms, kind, channel_id, thread_id, channel_kind, subject)| {
                        Ok(Event {
                            seq,
                            at_ms,
                            kind: EventKind::parse(&kind)?,
                            channel_id,
                            thread_id,
                            channel_kind,
                            subject,
                        })
                    },
                )
                .collect::<Result<Vec<_>, StoreError>>()?;
            // A full page stops at its last event; otherwise everything up to the head was looked
            // at, what the member may not see included.
            let cursor = match (full, events.last()) {
                (true, Some(last)) => last.seq,
                _ => head,
            };
            Ok(EventPage {
                events,
                cursor,
                resync: false,
            })
        })
    }

    /// Deletes events older than `before_ms`, then the oldest beyond [`MAX_EVENTS`], at most
    /// a bounded batch each; returns how many went.
    pub async fn prune_events(&self, before_ms: i64) -> Result<u64, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let aged = sqlx::query(
                "DELETE FROM events WHERE (workspace_id, seq) IN \
                 (SELECT workspace_id, seq FROM events WHERE at < $1 ORDER BY at LIMIT $2)",
            )
            .bind(before_ms)
            .bind(MAX_PRUNED)
            .execute(writer)
            .await?
            .rows_affected();
            let over = sqlx::query(
                "DELETE FROM events WHERE (workspace_id, seq) IN \
                 (SELECT workspace_id, seq FROM events ORDER BY at, seq LIMIT \
                  (SELECT CASE WHEN COUNT(*) <= $1 THEN 0 WHEN COUNT(*) - $1 > $2 THEN $2 ELSE COUNT(*) - $1 END FROM events))",
            )
            .bind(MAX_EVENTS)
            .bind(MAX_PRUNED)
            .execute(writer)
            .await?
            .rows_affected();
            Ok(aged + over)
        })
    }
}
