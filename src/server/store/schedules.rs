//! Scheduled messages and their runs.
//!
//! A due schedule becomes a `pending` run in one transaction (which also advances or finishes
//! the schedule), and each pending run is attempted in its own transaction: it posts the message
//! as the schedule's agent, or records why it could not. A crash between the two leaves a pending
//! run that the next pass attempts, so no due occurrence is lost or posted twice.

use sqlx::Row;

use super::shape::{Keyset, Query, Resource, Ties, bound};
use super::tenancy::Membership;
use super::{
    Columns, Page, Position, Store, StoreError, here, new_id, on_backend, parse_column, rfc3339,
};
use crate::contract::types::{
    MessageTarget, RunStatus, ScheduleStatus, ScheduledMessage, ScheduledRun,
};

/// At most this many schedules become runs, and this many runs are attempted, per pass.
pub const MAX_RUNS_PER_PASS: i64 = 100;

impl Resource for ScheduledMessage {
    const TABLE: &'static str = "scheduled_messages";
    const ALIAS: &'static str = "s";
    const COLUMNS: &'static str = "s.id, s.channel_id, s.thread_id, s.content, s.send_at, s.repeat_every_minutes, s.next_run_at, s.status, s.created_by_agent_id, s.created_at, s.updated_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        schedule_row(row)
    }
}

impl Resource for ScheduledRun {
    const TABLE: &'static str = "scheduled_runs";
    const ALIAS: &'static str = "r";
    const COLUMNS: &'static str = "r.id, r.scheduled_message_id, r.status, COALESCE(r.attempted_at, r.created_at), r.message_id, r.failure";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        run_row(row)
    }
}

/// The schedule `$1` in workspace `$2` whose channel has member `$3`.
fn for_member<'a>(workspace_id: &'a str, agent_id: &'a str, schedule_id: &'a str) -> Query<'a> {
    Query::select::<ScheduledMessage>(
        "JOIN channel_members m ON m.channel_id = s.channel_id WHERE s.id = $1 AND s.workspace_id = $2 AND m.member_id = $3",
    )
    .bind(schedule_id)
    .bind(workspace_id)
    .bind(agent_id)
}

/// What a new scheduled message says and when it runs.
#[derive(Debug, Clone, Copy)]
pub struct NewSchedule<'a> {
    pub content: &'a str,
    pub send_at_ms: i64,
    pub repeat_every_minutes: Option<i64>,
}

/// What one scheduler pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassReport {
    pub runs_created: usize,
    pub sent: usize,
    pub failed: usize,
    /// Expired idempotency records deleted (filled in by the server's pass).
    pub keys_pruned: u64,
    /// Workflow runs scheduled triggers started (filled in by the server's pass).
    pub runs_started: usize,
    /// Pull request watches read again from their provider (filled in by the server's pass).
    pub watches_refreshed: usize,
    /// Pending deliveries that waited past their expiry (filled in by the server's pass).
    pub deliveries_expired: u64,
}

impl Store {
    pub async fn insert_schedule(
        &self,
        workspace_id: &str,
        target: &Membership,
        schedule: NewSchedule<'_>,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<ScheduledMessage, StoreError> {
        let id = new_id("sch", now_ms);
        let insert = Query::new(
            "INSERT INTO scheduled_messages (id, workspace_id, channel_id, thread_id, content, send_at, repeat_every_minutes, next_run_at, status, \
             created_by_agent_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $6, 'scheduled', $8, $9, $9)",
        );
        let insert = insert.bind(&id).bind(workspace_id).bind(&target.channel_id);
        let insert = insert.bind(&target.thread_id).bind(schedule.content);
        let insert = insert
            .bind(schedule.send_at_ms)
            .bind(schedule.repeat_every_minutes);
        let insert = insert.bind(agent_id).bind(now_ms);
        self.insert(here!(), insert, &id).await
    }

    /// The schedule if it is in the workspace and the agent is a member of its channel.
    pub async fn schedule_for_member(
        &self,
        workspace_id: &str,
        agent_id: &str,
        schedule_id: &str,
    ) -> Result<Option<ScheduledMessage>, StoreError> {
        self.one(here!(), for_member(workspace_id, agent_id, schedule_id))
            .await
    }

    /// The schedules of exactly `target`, `createdAt DESC, id DESC`.
    pub async fn list_schedules(
        &self,
        target: &Membership,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<ScheduledMessage>, StoreError> {
        let (query, lead) = Query::select::<ScheduledMessage>("WHERE s.channel_id = $1")
            .bind(&target.channel_id)
            .at_thread("s.thread_id", target.thread_id.as_deref());
        let order = Keyset {
            time: "s.created_at",
            id: "s.id",
            ties: Ties::Descending,
            lead,
        };
        self.page(here!(), query.page(order, after, limit), limit)
            .await
    }

    /// Cancels a `scheduled` schedule; `Ok(None)` when invisible, `Ok(Some(Err(status)))` when
    /// it is already `done` or `cancelled`.
    pub async fn cancel_schedule(
        &self,
        workspace_id: &str,
        agent_id: &str,
        schedule_id: &str,
        now_ms: i64,
    ) -> Result<Option<Result<ScheduledMessage, ScheduleStatus>>, StoreError> {
        let decide = |current: &ScheduledMessage| match current.status {
            ScheduleStatus::Scheduled => Ok(current.clone()),
            status => Err(status),
        };
        let lookup = for_member(workspace_id, agent_id, schedule_id);
        self.change(here!(), lookup, decide, |_, id| {
            Query::new("UPDATE scheduled_messages SET status = 'cancelled', next_run_at = NULL, updated_at = $2 WHERE id = $1")
                .bind(id)
                .bind(now_ms)
        })
        .await
    }

    /// The runs of one schedule, by effective time (`attemptedAt`, or `createdAt` while pending)
    /// descending, then id descending.
    pub async fn list_runs(
        &self,
        schedule_id: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<ScheduledRun>, StoreError> {
        let order = Keyset {
            time: "COALESCE(r.attempted_at, r.created_at)",
            id: "r.id",
            ties: Ties::Descending,
            lead: None,
        };
        let query = Query::select::<ScheduledRun>("WHERE r.scheduled_message_id = $1")
            .bind(schedule_id)
            .page(order, after, limit);
        self.page(here!(), query, limit).await
    }

    /// One scheduler pass at `now_ms`: due schedules become pending runs, then pending runs are
    /// attempted. Each step is bounded by [`MAX_RUNS_PER_PASS`].
    pub async fn run_due_schedules(&self, now_ms: i64) -> Result<PassReport, StoreError> {
        let runs_created = self.materialize_due_runs(now_ms).await?;
        let (sent, failed) = self.attempt_pending_runs(now_ms).await?;
        Ok(PassReport {
            runs_created,
            sent,
            failed,
            keys_pruned: 0,
            runs_started: 0,
            watches_refreshed: 0,
            deliveries_expired: 0,
        })
    }

    /// Turns every schedule due at `now_ms` into a `pending` run (created at its due time) and
    /// advances or finishes the schedule, in one transaction. On PostgreSQL the due schedules are
    /// claimed with `FOR UPDATE SKIP LOCKED`: replicas running passes at once never materialize
    /// one occurrence twice (the lock lasts until the schedule has moved on).
    pub async fn materialize_due_runs(&self, now_ms: i64) -> Result<usize, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let due = Query::new(
                "SELECT id, next_run_at, repeat_every_minutes FROM scheduled_messages WHERE status = 'scheduled' AND next_run_at <= $1 ORDER BY next_run_at, id LIMIT $2",
            )
            .bind(now_ms)
            .bind(MAX_RUNS_PER_PASS)
            .claimed(pg);
            let due = bound!(&due).fetch_all(&mut *tx).await?;
            for row in &due {
                let schedule_id: String = row.try_get(0)?;
                let due_at: i64 = row.try_get(1)?;
                let repeat: Option<i64> = row.try_get(2)?;
                sqlx::query("INSERT INTO scheduled_runs (id, scheduled_message_id, status, created_at) VALUES ($1, $2, 'pending', $3)")
                    .bind(new_id("run", due_at))
                    .bind(&schedule_id)
                    .bind(due_at)
                    .execute(&mut *tx)
                    .await?;
                match repeat {
                    Some(minutes) => {
                        // Occurrences missed while the server was down collapse into this one run.
                        let step = minutes * 60_000;
                        let next = due_at + step * ((now_ms - due_at) / step + 1);
                        sqlx::query("UPDATE scheduled_messages SET next_run_at = $2, updated_at = $3 WHERE id = $1").bind(&schedule_id).bind(next).bind(now_ms).execute(&mut *tx).await?;
                    }
                    None => {
                        sqlx::query("UPDATE scheduled_messages SET next_run_at = NULL, status = 'done', updated_at = $2 WHERE id = $1").bind(&schedule_id).bind(now_ms).execute(&mut *tx).await?;
                    }
                }
            }
            tx.commit().await?;
            Ok(due.len())
        })
    }

    /// Attempts the oldest pending runs, each in its own transaction; returns `(sent, failed)`.
    ///
    /// A run is claimed by its row (`FOR UPDATE SKIP LOCKED` on PostgreSQL; the one writer on
    /// SQLite) and every status change is guarded by `status = 'pending'`, so a run another
    /// replica is attempting or has attempted is skipped, never posted twice, never counted.
    pub async fn attempt_pending_runs(&self, now_ms: i64) -> Result<(usize, usize), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let pending = sqlx::query("SELECT id FROM scheduled_runs WHERE status = 'pending' ORDER BY created_at, id LIMIT $1")
                .bind(MAX_RUNS_PER_PASS)
                .fetch_all(writer)
                .await?;
            let claim = if pg {
                "SELECT s.workspace_id, s.channel_id, s.thread_id, s.content, s.created_by_agent_id, \
                        EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = s.channel_id AND m.member_id = s.created_by_agent_id) \
                 FROM scheduled_runs r JOIN scheduled_messages s ON s.id = r.scheduled_message_id WHERE r.id = $1 AND r.status = 'pending' \
                 FOR UPDATE OF r SKIP LOCKED"
            } else {
                "SELECT s.workspace_id, s.channel_id, s.thread_id, s.content, s.created_by_agent_id, \
                        EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = s.channel_id AND m.member_id = s.created_by_agent_id) \
                 FROM scheduled_runs r JOIN scheduled_messages s ON s.id = r.scheduled_message_id WHERE r.id = $1 AND r.status = 'pending'"
            };
            let (mut sent, mut failed) = (0, 0);
            for row in &pending {
                let run_id: String = row.try_get(0)?;
                let mut tx = writer.begin().await?;
                let claimed = sqlx::query(claim)
                    .bind(&run_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(run) = claimed else {
                    // Another replica holds or finished it.
                    tx.commit().await?;
                    continue;
                };
                let still_member: bool = run.try_get(5)?;
                if !still_member {
                    sqlx::query("UPDATE scheduled_runs SET status = 'failed', attempted_at = $2, failure = $3 WHERE id = $1 AND status = 'pending'")
                        .bind(&run_id)
                        .bind(now_ms)
                        .bind("the agent is no longer a member of the target's channel")
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    failed += 1;
                    continue;
                }
                let message_id = new_id("msg", now_ms);
                let author: String = run.try_get(4)?;
                let workspace_id: String = run.try_get(0)?;
                let channel_id: String = run.try_get(1)?;
                let thread_id: Option<String> = run.try_get(2)?;
                sqlx::query("INSERT INTO messages (id, workspace_id, channel_id, thread_id, author_id, content, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
                    .bind(&message_id)
                    .bind(&workspace_id)
                    .bind(&channel_id)
                    .bind(&thread_id)
                    .bind(&author)
                    .bind(run.try_get::<String, _>(3)?)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                let event = super::NewEvent {
                    kind: super::EventKind::Message,
                    channel_id: Some(&channel_id),
                    thread_id: thread_id.as_deref(),
                    agent_id: None,
                    subject: &message_id,
                };
                super::record_event!(tx, &workspace_id, now_ms, &event);
                let marked = sqlx::query("UPDATE scheduled_runs SET status = 'sent', attempted_at = $2, message_id = $3 WHERE id = $1 AND status = 'pending'")
                    .bind(&run_id)
                    .bind(now_ms)
                    .bind(&message_id)
                    .execute(&mut *tx)
                    .await?;
                if marked.rows_affected() == 1 {
                    tx.commit().await?;
                    sent += 1;
                } else {
                    // Attempted meanwhile: this transaction's message is not posted.
                    tx.rollback().await?;
                }
            }
            Ok((sent, failed))
        })
    }

    /// How many messages `author_id` has posted at exactly `target` (used by tests and checks).
    pub async fn count_messages(
        &self,
        target: &Membership,
        author_id: &str,
    ) -> Result<i64, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let query = match &target.thread_id {
                Some(thread_id) => sqlx::query_as("SELECT COUNT(*) FROM messages WHERE channel_id = $1 AND thread_id = $2 AND author_id = $3")
                    .bind(&target.channel_id)
                    .bind(thread_id)
                    .bind(author_id),
                None => sqlx::query_as("SELECT COUNT(*) FROM messages WHERE channel_id = $1 AND thread_id IS NULL AND author_id = $2")
                    .bind(&target.channel_id)
                    .bind(author_id),
            };
            let (count,): (i64,) = query.fetch_one(reader).await?;
            Ok(count)
        })
    }
}

/// A stored schedule and its keyset position (`createdAt`, `id`).
fn schedule_row(row: &impl Columns) -> Result<(ScheduledMessage, Position), StoreError> {
    let channel_id: String = row.column(1)?;
    let thread_id: Option<String> = row.column(2)?;
    let target = match thread_id {
        Some(thread_id) => MessageTarget::Thread {
            thread_id: parse_column(thread_id, "thread_id")?,
        },
        None => MessageTarget::Channel {
            channel_id: parse_column(channel_id, "channel_id")?,
        },
    };
    let repeat: Option<i64> = row.column(5)?;
    let next_run_at: Option<i64> = row.column(6)?;
    let created_at: i64 = row.column(9)?;
    let schedule = ScheduledMessage {
        id: parse_column(row.column(0)?, "id")?,
        target,
        content: parse_column(row.column(3)?, "content")?,
        send_at: parse_column(rfc3339(row.column(4)?), "send_at")?,
        repeat_every_minutes: repeat
            .map(|m| parse_column(m.to_string(), "repeat_every_minutes"))
            .transpose()?,
        next_run_at: next_run_at
            .map(|ms| parse_column(rfc3339(ms), "next_run_at"))
            .transpose()?,
        status: parse_column(row.column(7)?, "status")?,
        created_by_agent_id: Some(parse_column(row.column(8)?, "created_by_agent_id")?),
        created_at: parse_column(rfc3339(created_at), "created_at")?,
        updated_at: parse_column(rfc3339(row.column(10)?), "updated_at")?,
    };
    let id = schedule.id.to_string();
    Ok((
        schedule,
        Position {
            at_ms: created_at,
            id,
        },
    ))
}

/// A stored run and its keyset position (effective `attemptedAt`, `id`).
fn run_row(row: &impl Columns) -> Result<(ScheduledRun, Position), StoreError> {
    let effective: i64 = row.column(3)?;
    let message_id: Option<String> = row.column(4)?;
    let failure: Option<String> = row.column(5)?;
    let status: RunStatus = parse_column(row.column(2)?, "status")?;
    let run = ScheduledRun {
        id: parse_column(row.column(0)?, "id")?,
        scheduled_message_id: parse_column(row.column(1)?, "scheduled_message_id")?,
        status,
        attempted_at: parse_column(rfc3339(effective), "attempted_at")?,
        message_id: message_id
            .map(|m| parse_column(m, "message_id"))
            .transpose()?,
        failure: failure.map(|f| parse_column(f, "failure")).transpose()?,
    };
    let id = run.id.to_string();
    Ok((
        run,
        Position {
            at_ms: effective,
            id,
        },
    ))
}
