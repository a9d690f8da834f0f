//! What the human API reads for a person: who they are, the agents of their workspace (and which
//! they own), their conversations with unread counts, their read marks, and the approvals and
//! audit records they answer for (their agents'). Every read is bound to the person's workspace
//! and memberships in its own statement: a row of another conversation or another person's agent
//! is not there, exactly as a missing one.

use super::shape::{Keyset, Query, Resource, Ties};
use super::{
    AuditRecord, Columns, Membership, Page, Position, Store, StoreError, here, on_backend,
};
use crate::contract::types::{Approval, ConversationSummary, PublicProfile};
use crate::server::workflow::RunRecord;

/// Messages a read mark's unread count counts at most (the `UnreadCount` bound).
pub const MAX_UNREAD: i64 = 1000;

/// The agents a human owns, as a SQL set; `$2` is the human.
const OWNED_AGENTS: &str = "SELECT o.id FROM agents o WHERE o.owner_human_id = $2";

/// The statement of [`Store::unread`] in a thread or a channel: `$1` the member, `$2` the
/// conversation's target text, `$3` the channel, `$4` the thread (none in a channel). Each has
/// its own text, so the conversation is an equality on the messages' index (an `OR` of the two
/// is not).
pub(super) fn unread_statement(in_thread: bool) -> &'static str {
    macro_rules! unread {
        ($location:literal) => {
            concat!(
                "SELECT COUNT(*) FROM (SELECT 1 FROM messages g \
                 LEFT JOIN read_marks r ON r.member_id = $1 AND r.conversation = $2 \
                 WHERE g.channel_id = $3 AND ",
                $location,
                " AND g.author_id <> $1 \
                 AND (r.read_at IS NULL OR (g.created_at, g.id) > (r.read_at, r.message_id)) LIMIT 1000) u"
            )
        };
    }
    if in_thread {
        unread!("g.thread_id = $4")
    } else {
        unread!("g.thread_id IS NULL AND $4 IS NULL")
    }
}

/// A channel or direct conversation in a member's list; `$1` is the member.
#[derive(serde::Serialize)]
struct ChannelEntry(ConversationSummary);

/// Channels before direct conversations, the newest of each first: the list's keyset time.
const CHANNEL_RANK: &str = "CAST(CASE WHEN c.kind = 'channel' THEN 1 ELSE 0 END AS BIGINT)";

impl Resource for ChannelEntry {
    const TABLE: &'static str = "channels";
    const ALIAS: &'static str = "c";
    // A dm's name is the other member's handle; the unread count stops at `MAX_UNREAD` (its
    // inner LIMIT), and counts neither the member's own messages nor those at or before the mark.
    const COLUMNS: &'static str = "c.kind || ':' || c.id, \
        CASE WHEN c.kind = 'dm' THEN COALESCE((SELECT COALESCE(a.handle, h.handle) FROM channel_members o \
            LEFT JOIN agents a ON a.id = o.member_id LEFT JOIN humans h ON h.id = o.member_id \
            WHERE o.channel_id = c.id AND o.member_id <> $1 ORDER BY o.member_id LIMIT 1), c.name) ELSE c.name END, \
        (SELECT MAX(g.created_at) FROM messages g WHERE g.channel_id = c.id AND g.thread_id IS NULL), \
        (SELECT COUNT(*) FROM (SELECT 1 FROM messages g \
            LEFT JOIN read_marks r ON r.member_id = $1 AND r.conversation = c.kind || ':' || c.id \
            WHERE g.channel_id = c.id AND g.thread_id IS NULL AND g.author_id <> $1 \
            AND (r.read_at IS NULL OR (g.created_at, g.id) > (r.read_at, r.message_id)) LIMIT 1000) u), \
        CAST(CASE WHEN c.kind = 'channel' THEN 1 ELSE 0 END AS BIGINT), c.id";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let (summary, _) = summary(row)?;
        let position = Position::of(row.column(4)?, row.column::<String>(5)?);
        Ok((ChannelEntry(summary), position))
    }
}

/// A thread in a member's list; `$1` is the member.
#[derive(serde::Serialize)]
struct ThreadEntry(ConversationSummary);

impl Resource for ThreadEntry {
    const TABLE: &'static str = "threads";
    const ALIAS: &'static str = "t";
    const COLUMNS: &'static str = "'thread:' || t.id, t.title, \
        (SELECT MAX(g.created_at) FROM messages g WHERE g.channel_id = t.channel_id AND g.thread_id = t.id), \
        (SELECT COUNT(*) FROM (SELECT 1 FROM messages g \
            LEFT JOIN read_marks r ON r.member_id = $1 AND r.conversation = 'thread:' || t.id \
            WHERE g.channel_id = t.channel_id AND g.thread_id = t.id AND g.author_id <> $1 \
            AND (r.read_at IS NULL OR (g.created_at, g.id) > (r.read_at, r.message_id)) LIMIT 1000) u), \
        t.created_at, t.id";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let (summary, _) = summary(row)?;
        let position = Position::of(row.column(4)?, row.column::<String>(5)?);
        Ok((ThreadEntry(summary), position))
    }
}

/// The first four columns of either entry: target, name, newest message, unread.
fn summary(row: &impl Columns) -> Result<(ConversationSummary, ()), StoreError> {
    let corrupt = |column| StoreError::Corrupt { column };
    let last: Option<i64> = row.column(2)?;
    let unread: i64 = row.column(3)?;
    let mut value = serde_json::json!({
        "target": row.column::<String>(0)?,
        "name": row.column::<String>(1)?,
        "unread": unread.min(MAX_UNREAD),
    });
    if let Some(last) = last {
        value["lastMessageAt"] = super::rfc3339(last).into();
    }
    let summary = serde_json::from_value(value).map_err(|_| corrupt("conversation"))?;
    Ok((summary, ()))
}

/// An agent as a person's list shows it, with whether `$1` owns it.
#[derive(serde::Serialize)]
struct AgentEntry(PublicProfile, bool);

impl Resource for AgentEntry {
    const TABLE: &'static str = "agents";
    const ALIAS: &'static str = "g";
    const COLUMNS: &'static str = "g.id, g.handle, g.display_name, g.description, g.profile_status, g.profile_revision, \
        COALESCE(g.profile_updated_at, g.created_at), CAST(CASE WHEN g.owner_human_id = $1 THEN 1 ELSE 0 END AS BIGINT), CAST(0 AS BIGINT)";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let profile = super::tenancy::profile_row(row)?;
        let owned = row.column::<i64>(7)? == 1;
        let position = Position::of(row.column(8)?, profile.handle.to_string());
        Ok((AgentEntry(profile, owned), position))
    }
}

impl Store {
    /// The human `human_id` of `workspace_id`: `(handle, display name)`.
    pub async fn human(
        &self,
        workspace_id: &str,
        human_id: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            Ok(sqlx::query_as::<_, (String, String)>(
                "SELECT handle, display_name FROM humans WHERE id = $1 AND workspace_id = $2",
            )
            .bind(human_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?)
        })
    }

    /// The member of `workspace_id` with `handle`: an agent's id, or else a human's.
    pub async fn member_by_handle(
        &self,
        workspace_id: &str,
        handle: &str,
    ) -> Result<Option<String>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let found: Option<(String,)> = sqlx::query_as(
                "SELECT id FROM (SELECT id, 0 AS pick FROM agents WHERE workspace_id = $1 AND handle = $2 \
                 UNION ALL SELECT id, 1 AS pick FROM humans WHERE workspace_id = $1 AND handle = $2) m \
                 ORDER BY pick LIMIT 1",
            )
            .bind(workspace_id)
            .bind(handle)
            .fetch_optional(reader)
            .await?;
            Ok(found.map(|(id,)| id))
        })
    }

    /// A page of the workspace's agents by handle, each with whether `human_id` owns it; only
    /// theirs when `owned_only`.
    pub async fn agents_for_human(
        &self,
        workspace_id: &str,
        human_id: &str,
        owned_only: bool,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<(PublicProfile, bool)>, StoreError> {
        let mut query = Query::select::<AgentEntry>("WHERE g.workspace_id = $2")
            .bind(human_id)
            .bind(workspace_id);
        if owned_only {
            query = query.push(" AND g.owner_human_id = $1");
        }
        let after_handle = after.map_or("", |after| after.id.as_str());
        // `$1` the human, `$2` the workspace.
        let next = 3;
        let query = query
            .push(&format!(
                " AND g.handle > ${next} ORDER BY g.handle LIMIT ${}",
                next + 1
            ))
            .bind(after_handle)
            .bind((limit + 1) as i64);
        let page: Page<AgentEntry> = self.page(here!(), query, limit).await?;
        Ok(Page {
            items: page.items.into_iter().map(|e| (e.0, e.1)).collect(),
            next: page.next,
        })
    }

    /// A page of the channels and direct conversations `member_id` belongs to in `workspace_id`:
    /// channels first, then direct conversations, the newest of each first.
    pub async fn conversations_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<ConversationSummary>, StoreError> {
        let query = Query::select::<ChannelEntry>(
            "JOIN channel_members m ON m.channel_id = c.id AND m.member_id = $1 WHERE c.workspace_id = $2",
        )
        .bind(member_id)
        .bind(workspace_id)
        .page(
            Keyset {
                time: CHANNEL_RANK,
                id: "c.id",
                ties: Ties::Descending,
                lead: None,
            },
            after,
            limit,
        );
        let page: Page<ChannelEntry> = self.page(here!(), query, limit).await?;
        Ok(Page {
            items: page.items.into_iter().map(|e| e.0).collect(),
            next: page.next,
        })
    }

    /// A page of the threads of the channel `at` (whose membership the caller checked), newest
    /// first, with `member_id`'s unread counts.
    pub async fn threads_for_member(
        &self,
        at: &Membership,
        member_id: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<ConversationSummary>, StoreError> {
        let query = Query::select::<ThreadEntry>("WHERE t.channel_id = $2")
            .bind(member_id)
            .bind(at.channel_id.as_str())
            .page(
                Keyset {
                    time: "t.created_at",
                    id: "t.id",
                    ties: Ties::Descending,
                    lead: None,
                },
                after,
                limit,
            );
        let page: Page<ThreadEntry> = self.page(here!(), query, limit).await?;
        Ok(Page {
            items: page.items.into_iter().map(|e| e.0).collect(),
            next: page.next,
        })
    }

    /// Moves `member_id`'s read mark of `conversation` (a target's text) forward to the message
    /// `message_id` posted at `read_at`; a mark already past it stays.
    pub async fn mark_read(
        &self,
        member_id: &str,
        conversation: &str,
        read_at: i64,
        message_id: &str,
    ) -> Result<(), StoreError> {
        let upsert = Query::new(
            "INSERT INTO read_marks (member_id, conversation, read_at, message_id) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (member_id, conversation) DO UPDATE SET read_at = excluded.read_at, message_id = excluded.message_id \
             WHERE (excluded.read_at, excluded.message_id) > (read_marks.read_at, read_marks.message_id)",
        )
        .bind(member_id)
        .bind(conversation)
        .bind(read_at)
        .bind(message_id);
        self.execute(here!(), upsert).await?;
        Ok(())
    }

    /// `member_id`'s unread count of the conversation `at` (target text `conversation`).
    pub async fn unread(
        &self,
        member_id: &str,
        at: &Membership,
        conversation: &str,
    ) -> Result<i64, StoreError> {
        let sql = unread_statement(at.thread_id.is_some());
        on_backend!(self, |writer, reader, pg| {
            let (count,): (i64,) = sqlx::query_as(sql)
                .bind(member_id)
                .bind(conversation)
                .bind(&at.channel_id)
                .bind(&at.thread_id)
                .fetch_one(writer)
                .await?;
            Ok(count.min(MAX_UNREAD))
        })
    }

    /// The approvals `human_id` answers for in `workspace_id`: asked by an agent they own, or by
    /// a step of a workflow run one of their agents started; newest change first.
    pub async fn approvals_for_owner(
        &self,
        workspace_id: &str,
        human_id: &str,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Approval>, StoreError> {
        let query = owned_approvals(workspace_id, human_id)
            .and_some("a.status", status)
            .newest::<Approval>(after, limit);
        self.page(here!(), query, limit).await
    }

    /// The approval `approval_id`, if `human_id` answers for it.
    pub async fn approval_for_owner(
        &self,
        workspace_id: &str,
        human_id: &str,
        approval_id: &str,
    ) -> Result<Option<Approval>, StoreError> {
        let query = owned_approvals(workspace_id, human_id).and("a.id", approval_id);
        self.one(here!(), query).await
    }

    /// A page of the audit records of `human_id`'s agents and devices in `workspace_id`, newest
    /// first, optionally of one of their agents.
    pub async fn audit_for_human(
        &self,
        workspace_id: &str,
        human_id: &str,
        agent_id: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<AuditRecord>, StoreError> {
        let order = Keyset {
            time: "r.at",
            id: "r.id",
            ties: Ties::Descending,
            lead: None,
        };
        let query = Query::select::<AuditRecord>(&format!(
            "WHERE r.workspace_id = $1 AND (r.agent_id IN ({OWNED_AGENTS}) \
             OR r.device_id IN (SELECT d.id FROM devices d WHERE d.human_id = $2))"
        ))
        .bind(workspace_id)
        .bind(human_id)
        .and_some("r.agent_id", agent_id)
        .page(order, after, limit);
        self.page(here!(), query, limit).await
    }
}

impl Store {
    /// The workflow runs the agents of `human_id` started in `workspace_id`, newest change
    /// first, optionally in one status.
    pub async fn runs_for_owner(
        &self,
        workspace_id: &str,
        human_id: &str,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<RunRecord>, StoreError> {
        let query = Query::select::<RunRecord>(&format!(
            "WHERE r.workspace_id = $1 AND r.started_by_agent_id IN ({OWNED_AGENTS})"
        ))
        .bind(workspace_id)
        .bind(human_id)
        .and_some("r.status", status)
        .newest::<RunRecord>(after, limit);
        self.page(here!(), query, limit).await
    }
}

/// The approvals `human_id` answers for; `$1` the workspace, `$2` the human.
fn owned_approvals<'a>(workspace_id: &'a str, human_id: &'a str) -> Query<'a> {
    Query::select::<Approval>(&format!(
        "WHERE a.workspace_id = $1 AND (a.requested_by_agent_id IN ({OWNED_AGENTS}) \
         OR a.run_id IN (SELECT w.id FROM workflow_runs w WHERE w.started_by_agent_id IN ({OWNED_AGENTS})))"
    ))
    .bind(workspace_id)
    .bind(human_id)
}
