//! Deliveries: a person's message to an agent it wakes, decided in the transaction that posts
//! the message (one per message and agent), and what became of it; and which device hosts an
//! agent, with the fence that keeps two daemons from both starting one delivery.
//!
//! What wakes an agent (`deliver!`): a message of a person who may wake it (its owner, and the
//! people the owner allowed: `agent_wakers`; no agent: no agent wakes another, nor itself) in a
//! direct conversation with the agent, or mentioning `@handle` in a channel or thread the agent
//! belongs to, or in a thread the agent answered in since that person last wrote `/end` there (a
//! message that is `/end` alone wakes nobody). A delivery is the agent owner's to see, host and
//! ask again, and its sender's to see and ask again. A delivery waits
//! `pending` until the hosting daemon starts it (`started`, once: the start carries the host's
//! fence), and ends `answered` (the agent posted in its target while it ran, decided in that
//! post's transaction: `answered!`), `ended`, `interrupted`, `failed`, or `expired` (no daemon
//! started it within the store's delivery TTL; `expire_deliveries`).

use serde_json::{Value, json};

use super::shape::{Query, Resource};
use super::{
    Columns, EventKind, NewEvent, Page, Position, Store, StoreError, here, on_backend,
    record_event, rfc3339,
};
use crate::contract::types::Delivery;

/// How long a delivery no daemon started waits before it expires, unless the server says.
pub const DEFAULT_DELIVERY_TTL_MS: i64 = 15 * 60 * 1000;

/// The text that ends a thread's continuation with the agents that answered in it.
pub const END_THREAD: &str = "/end";

impl Resource for Delivery {
    const TABLE: &'static str = "deliveries";
    const ALIAS: &'static str = "d";
    const COLUMNS: &'static str = "d.id, d.message_id, d.agent_id, d.target, d.state, d.run_id, d.reply_id, d.reason, d.created_at, d.updated_at, d.expires_at";

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        let id: String = row.column(0)?;
        let updated_at: i64 = row.column(9)?;
        let mut value = json!({
            "id": id,
            "messageId": row.column::<String>(1)?,
            "agentId": row.column::<String>(2)?,
            "target": row.column::<String>(3)?,
            "state": row.column::<String>(4)?,
            "createdAt": rfc3339(row.column(8)?),
            "updatedAt": rfc3339(updated_at),
            "expiresAt": rfc3339(row.column(10)?),
        });
        for (key, index) in [("runId", 5), ("replyId", 6), ("reason", 7)] {
            if let Some(text) = row.column::<Option<String>>(index)? {
                value[key] = Value::from(text);
            }
        }
        let delivery = serde_json::from_value(value).map_err(|_| StoreError::Corrupt {
            column: "deliveries",
        })?;
        Ok((
            delivery,
            Position {
                at_ms: updated_at,
                id,
            },
        ))
    }
}

/// The lock every change to what waits in a workspace takes in turn (PostgreSQL): its event head,
/// which a message's transaction updates before it counts what waits.
const LOCK_EVENT_HEAD: &str =
    "SELECT seq FROM event_heads WHERE workspace_id = $1 FOR NO KEY UPDATE";

/// Pending deliveries one agent may have in one conversation; a message past them is refused.
pub const MAX_WAITING_PER_CONVERSATION: i64 = 20;
/// Deliveries one person's messages may make in a minute, unless the server is told otherwise
/// (`agentteam server --deliveries-per-minute`); past them, a message wakes nobody.
pub const DEFAULT_DELIVERIES_PER_MINUTE: i64 = 60;

/// Why a new delivery is refused, given the agent's deliveries `waiting` in the conversation and
/// the sender's `recent` ones (of the last minute, of at most `per_minute`); `None`: it is not.
pub fn refusal(waiting: i64, (recent, per_minute): (i64, i64), handle: &str) -> Option<String> {
    if waiting >= MAX_WAITING_PER_CONVERSATION {
        Some(format!(
            "not started: {waiting} messages already wait for @{handle} in this conversation"
        ))
    } else if recent >= per_minute {
        Some(format!(
            "not started: your messages woke agents {recent} times in the last minute"
        ))
    } else {
        None
    }
}

/// Whether `content` mentions `@handle` as a word of its own (not `a@handle` or `@handles`).
pub fn mentions(content: &str, handle: &str) -> bool {
    let is_handle_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'-';
    let needle = format!("@{handle}");
    let bytes = content.as_bytes();
    content.match_indices(&needle).any(|(at, _)| {
        let before_ok = at == 0 || !is_handle_byte(bytes[at - 1]) && bytes[at - 1] != b'@';
        let end = at + needle.len();
        let after_ok = end == bytes.len() || !is_handle_byte(bytes[end]);
        before_ok && after_ok
    })
}

/// Inside the transaction `$tx` that posted message `$message` by `$author` in `$at`: one
/// pending delivery for each agent the message wakes, each with its event (seen by the agent's
/// owner). A message by an agent wakes nobody.
macro_rules! deliver {
    ($tx:expr, $workspace:expr, $now:expr, ($ttl:expr, $per_minute:expr), $message:expr, $at:expr, $author:expr, $content:expr) => {{
        let author: &str = $author;
        let content: &str = $content;
        let at: &$crate::server::store::Membership = $at;
        if author.starts_with("hum_") && content.trim() != $crate::server::store::END_THREAD {
            // The agents in the conversation the author may wake (owns, or was allowed to), and
            // what kind of conversation it is.
            let candidates: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT a.id, a.handle, c.kind FROM channel_members m \
                 JOIN agents a ON a.id = m.member_id JOIN channels c ON c.id = m.channel_id \
                 WHERE m.channel_id = $1 AND (a.owner_human_id = $2 \
                   OR EXISTS (SELECT 1 FROM agent_wakers w WHERE w.agent_id = a.id AND w.human_id = $2)) \
                 ORDER BY a.id",
            )
            .bind(&at.channel_id)
            .bind(author)
            .fetch_all(&mut *$tx)
            .await?;
            // A message that names some of them is for those alone.
            let named_any = candidates
                .iter()
                .any(|(_, handle, _)| $crate::server::store::deliveries_mentions(content, handle));
            for (agent_id, handle, kind) in candidates {
                let mut wakes = kind == "dm"
                    || $crate::server::store::deliveries_mentions(content, &handle);
                if !wakes && !named_any && let Some(thread_id) = &at.thread_id {
                    // The agent answered in this thread since this person last ended it.
                    let answered: Option<(i64,)> = sqlx::query_as(
                        "SELECT created_at FROM messages WHERE thread_id = $1 AND author_id = $2 AND created_at >= \
                         COALESCE((SELECT MAX(created_at) FROM messages WHERE thread_id = $1 AND author_id = $3 AND content = $4), -1) \
                         LIMIT 1",
                    )
                    .bind(thread_id)
                    .bind(&agent_id)
                    .bind(author)
                    .bind($crate::server::store::END_THREAD)
                    .fetch_optional(&mut *$tx)
                    .await?;
                    wakes = answered.is_some();
                }
                if !wakes {
                    continue;
                }
                let target = match (&at.thread_id, kind.as_str()) {
                    (Some(thread_id), _) => format!("thread:{thread_id}"),
                    (None, "dm") => format!("dm:{}", at.channel_id),
                    (None, _) => format!("channel:{}", at.channel_id),
                };
                // Past a bound it is recorded, refused: the person sees why. What is counted holds
                // until this commits: the message's event took its workspace's event head first,
                // which every other message's transaction waits for.
                let (waiting,): (i64,) = sqlx::query_as(
                    "SELECT COUNT(*) FROM deliveries WHERE agent_id = $1 AND target = $2 AND state = 'pending'",
                )
                .bind(&agent_id)
                .bind(&target)
                .fetch_one(&mut *$tx)
                .await?;
                let (recent,): (i64,) = sqlx::query_as(
                    "SELECT COUNT(*) FROM deliveries WHERE sender_id = $1 AND created_at > $2",
                )
                .bind(author)
                .bind($now - 60_000)
                .fetch_one(&mut *$tx)
                .await?;
                let refused =
                    $crate::server::store::deliveries_refusal(waiting, (recent, $per_minute), &handle);
                let id = $crate::server::store::new_id("dlv", $now);
                sqlx::query(
                    "INSERT INTO deliveries (id, workspace_id, message_id, agent_id, target, state, reason, sender_id, created_at, updated_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10) ON CONFLICT (message_id, agent_id) DO NOTHING",
                )
                .bind(&id)
                .bind($workspace)
                .bind($message)
                .bind(&agent_id)
                .bind(&target)
                .bind(if refused.is_some() { "failed" } else { "pending" })
                .bind(&refused)
                .bind(author)
                .bind($now)
                .bind($now + $ttl)
                .execute(&mut *$tx)
                .await?;
                let event = $crate::server::store::NewEvent {
                    kind: $crate::server::store::EventKind::Delivery,
                    channel_id: None,
                    thread_id: None,
                    agent_id: Some(&agent_id),
                    subject: &id,
                };
                record_event!($tx, $workspace, $now, &event);
            }
        }
    }};
}
pub(crate) use deliver;

/// Inside the transaction `$tx` that posted message `$message` by `$author` in one of
/// `$targets` (the conversation's target, spelled each way it may be): the author's started
/// deliveries on it are answered by it.
macro_rules! answered {
    ($tx:expr, $workspace:expr, $now:expr, $message:expr, $author:expr, $targets:expr) => {{
        let author: &str = $author;
        let targets: &[String; 2] = $targets;
        {
            let answered: Vec<(String,)> = sqlx::query_as(
                "UPDATE deliveries SET state = 'answered', reply_id = $1, updated_at = $2 \
                 WHERE agent_id = $3 AND target IN ($4, $5) AND state = 'started' RETURNING id",
            )
            .bind($message)
            .bind($now)
            .bind(author)
            .bind(&targets[0])
            .bind(&targets[1])
            .fetch_all(&mut *$tx)
            .await?;
            for (id,) in answered {
                let event = $crate::server::store::NewEvent {
                    kind: $crate::server::store::EventKind::Delivery,
                    channel_id: None,
                    thread_id: None,
                    agent_id: Some(author),
                    subject: &id,
                };
                record_event!($tx, $workspace, $now, &event);
            }
        }
    }};
}
pub(crate) use answered;

/// Why a delivery could not be changed as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryRefusal {
    /// Another device hosts the agent now, or this one claimed it again since (a newer fence).
    NotHost,
    /// The delivery is in a state the change does not start from.
    State(String),
    /// It waited past its expiry.
    Expired,
    /// This many of the agent's deliveries wait in the conversation already (the bound).
    Waiting(i64),
}

/// Which of the person's deliveries a list keeps (each filter when set).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeliveryFilter<'a> {
    pub agent_id: Option<&'a str>,
    pub target: Option<&'a str>,
    pub state: Option<&'a str>,
}

/// The people besides its owner who may wake one agent, at most.
pub const MAX_WAKERS: i64 = 32;

/// Why a change of who may wake an agent is refused (nothing of it is made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakersRefusal {
    /// No person of the workspace has this handle.
    UnknownHandle(String),
    /// The handle is both allowed and disallowed.
    Both(String),
    /// The agent would have this many, past [`MAX_WAKERS`].
    TooMany(i64),
}

/// The device a change comes from, and the hosting fence it holds.
#[derive(Debug, Clone, Copy)]
pub struct Host<'a> {
    pub device_id: &'a str,
    pub fence: i64,
}

/// The person's delivery `id` they may ask again for: of an agent they own, or sent by them
/// while the owner still lets them wake the agent.
fn retriable<'a>(workspace_id: &'a str, human_id: &'a str, id: &'a str) -> Query<'a> {
    Query::select::<Delivery>(
        "WHERE d.id = $1 AND d.workspace_id = $2 AND (\
         d.agent_id IN (SELECT o.id FROM agents o WHERE o.owner_human_id = $3) \
         OR (d.sender_id = $3 AND EXISTS (SELECT 1 FROM agent_wakers w \
             WHERE w.agent_id = d.agent_id AND w.human_id = $3)))",
    )
    .bind(id)
    .bind(workspace_id)
    .bind(human_id)
}

/// The person's delivery `id` (of an agent they own).
fn owned<'a>(workspace_id: &'a str, human_id: &'a str, id: &'a str) -> Query<'a> {
    Query::select::<Delivery>(
        "WHERE d.id = $1 AND d.workspace_id = $2 \
         AND d.agent_id IN (SELECT o.id FROM agents o WHERE o.owner_human_id = $3)",
    )
    .bind(id)
    .bind(workspace_id)
    .bind(human_id)
}

impl Store {
    /// The person's deliveries (of the agents they own, or of their messages), newest change
    /// first.
    pub async fn deliveries_for_person(
        &self,
        workspace_id: &str,
        human_id: &str,
        only: DeliveryFilter<'_>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<Delivery>, StoreError> {
        let query = Query::select::<Delivery>(
            "WHERE d.workspace_id = $1 AND (d.sender_id = $2 \
             OR d.agent_id IN (SELECT o.id FROM agents o WHERE o.owner_human_id = $2))",
        )
        .bind(workspace_id)
        .bind(human_id)
        .and_some("d.agent_id", only.agent_id)
        .and_some("d.target", only.target)
        .and_some("d.state", only.state)
        .newest::<Delivery>(after, limit);
        self.page(here!(), query, limit).await
    }

    /// The person's delivery `id`, if it is of an agent they own.
    pub async fn delivery_for_owner(
        &self,
        workspace_id: &str,
        human_id: &str,
        id: &str,
    ) -> Result<Option<Delivery>, StoreError> {
        self.one(here!(), owned(workspace_id, human_id, id)).await
    }

    /// Makes `device_id` the host of `agent_id`, an agent `human_id` owns: a new fence, so a
    /// start or finish carrying an older one (another device's, or this device's before) is
    /// refused. `None` when the person owns no such agent.
    pub async fn host_agent(
        &self,
        workspace_id: &str,
        human_id: &str,
        device_id: &str,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let owned: Option<(String,)> = sqlx::query_as(
                "SELECT id FROM agents WHERE id = $1 AND workspace_id = $2 AND owner_human_id = $3",
            )
            .bind(agent_id)
            .bind(workspace_id)
            .bind(human_id)
            .fetch_optional(&mut *tx)
            .await?;
            if owned.is_none() {
                return Ok(None);
            }
            let (fence,): (i64,) = sqlx::query_as(
                "INSERT INTO agent_hosts (agent_id, device_id, fence, claimed_at) VALUES ($1, $2, 1, $3) \
                 ON CONFLICT (agent_id) DO UPDATE SET device_id = excluded.device_id, \
                 fence = agent_hosts.fence + 1, claimed_at = excluded.claimed_at RETURNING fence",
            )
            .bind(agent_id)
            .bind(device_id)
            .bind(now_ms)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(fence))
        })
    }

    /// Moves the person's delivery `id` as `change` says, when `device_id` holds the agent's
    /// current fence. `Ok(None)` when the person has no such delivery.
    async fn change_hosted(
        &self,
        workspace_id: &str,
        human_id: &str,
        host: Host<'_>,
        id: &str,
        decide: impl FnOnce(&Delivery) -> Result<Delivery, DeliveryRefusal>,
        write: impl for<'r> FnOnce(&'r Delivery, &'r str) -> Query<'r>,
    ) -> Result<Option<Result<Delivery, DeliveryRefusal>>, StoreError> {
        let hosted = owned(workspace_id, human_id, id)
            .push(
                " AND EXISTS (SELECT 1 FROM agent_hosts h WHERE h.agent_id = d.agent_id \
                 AND h.device_id = $4 AND h.fence = $5)",
            )
            .bind(host.device_id)
            .bind(host.fence);
        let changed = self.change(here!(), hosted, decide, write).await?;
        if changed.is_some() {
            return Ok(changed);
        }
        // Not changed: no such delivery, or not this device's to change.
        Ok(self
            .delivery_for_owner(workspace_id, human_id, id)
            .await?
            .map(|_| Err(DeliveryRefusal::NotHost)))
    }

    /// Starts the person's pending delivery `id` as run `run_id` of `host`'s device, when it
    /// holds the agent's current fence: at most once.
    pub async fn start_delivery(
        &self,
        workspace_id: &str,
        human_id: &str,
        host: Host<'_>,
        id: &str,
        run_id: &str,
        now_ms: i64,
    ) -> Result<Option<Result<Delivery, DeliveryRefusal>>, StoreError> {
        let decide = |current: &Delivery| {
            let state = current.state.to_string();
            if state != "pending" {
                return Err(DeliveryRefusal::State(state));
            }
            if now_ms >= current.expires_at.timestamp_millis() {
                return Err(DeliveryRefusal::Expired);
            }
            Ok(current.clone())
        };
        let (run, device) = (run_id.to_string(), host.device_id.to_string());
        let started = self
            .change_hosted(workspace_id, human_id, host, id, decide, move |_, id| {
                Query::new(
                    "UPDATE deliveries SET state = 'started', run_id = $1, device_id = $2, \
                         updated_at = $3 WHERE id = $4",
                )
                .bind(run)
                .bind(device)
                .bind(now_ms)
                .bind(id)
            })
            .await?;
        self.announce_delivery(workspace_id, now_ms, &started)
            .await?;
        Ok(started)
    }

    /// Records how the person's started delivery `id` ended without an answer: `ended` is the
    /// state (`ended`, `interrupted` or `failed`) and why. An answered one stays answered.
    pub async fn finish_delivery(
        &self,
        workspace_id: &str,
        human_id: &str,
        host: Host<'_>,
        id: &str,
        ended: (&str, Option<&str>),
        now_ms: i64,
    ) -> Result<Option<Result<Delivery, DeliveryRefusal>>, StoreError> {
        let decide = |current: &Delivery| match current.state.to_string().as_str() {
            "started" | "answered" => Ok(current.clone()),
            other => Err(DeliveryRefusal::State(other.to_string())),
        };
        // No reason is bound as '' (a reason is never empty).
        let (ended, why) = (ended.0.to_string(), ended.1.unwrap_or_default().to_string());
        let finished = self
            .change_hosted(workspace_id, human_id, host, id, decide, move |_, id| {
                Query::new(
                    "UPDATE deliveries SET state = CASE WHEN state = 'answered' THEN state ELSE $1 END, \
                     reason = CASE WHEN state = 'answered' THEN reason ELSE NULLIF($2, '') END, updated_at = $3 \
                     WHERE id = $4",
                )
                .bind(ended)
                .bind(why)
                .bind(now_ms)
                .bind(id)
            })
            .await?;
        self.announce_delivery(workspace_id, now_ms, &finished)
            .await?;
        Ok(finished)
    }

    /// Makes the person's interrupted, failed or expired delivery `id` pending again, with a new
    /// expiry (the person asked for it).
    pub async fn retry_delivery(
        &self,
        workspace_id: &str,
        human_id: &str,
        id: &str,
        now_ms: i64,
    ) -> Result<Option<Result<Delivery, DeliveryRefusal>>, StoreError> {
        let expires = now_ms + self.delivery_ttl_ms();
        let Some(current): Option<Delivery> = self
            .one(here!(), retriable(workspace_id, human_id, id))
            .await?
        else {
            return Ok(None);
        };
        // The bound of what waits in a conversation holds for a retry too: counted under the
        // workspace's event head, as a message counts it, held by the request's transaction
        // (every human write runs in one) until the change commits, so neither racing retries nor
        // a retry racing a message can pass it.
        self.lock_event_head(workspace_id).await?;
        let waiting = self
            .deliveries_waiting(&current.agent_id.to_string(), &current.target.to_string())
            .await?;
        if waiting >= MAX_WAITING_PER_CONVERSATION {
            return Ok(Some(Err(DeliveryRefusal::Waiting(waiting))));
        }
        let decide = |current: &Delivery| match current.state.to_string().as_str() {
            "interrupted" | "failed" | "expired" => Ok(current.clone()),
            other => Err(DeliveryRefusal::State(other.to_string())),
        };
        let retried = self
            .change(
                here!(),
                retriable(workspace_id, human_id, id),
                decide,
                |_, id| {
                    Query::new(
                        "UPDATE deliveries SET state = 'pending', run_id = NULL, device_id = NULL, \
                     reason = NULL, updated_at = $1, expires_at = $2 WHERE id = $3",
                    )
                    .bind(now_ms)
                    .bind(expires)
                    .bind(id)
                },
            )
            .await?;
        self.announce_delivery(workspace_id, now_ms, &retried)
            .await?;
        Ok(retried)
    }

    /// Takes the workspace's event head until the transaction ends (PostgreSQL; SQLite's one
    /// writer runs the changes one at a time already).
    async fn lock_event_head(&self, workspace_id: &str) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            if pg {
                sqlx::query(LOCK_EVENT_HEAD)
                    .bind(workspace_id)
                    .execute(writer)
                    .await?;
            }
            Ok(())
        })
    }

    /// How many of `agent_id`'s deliveries wait in `target`.
    async fn deliveries_waiting(&self, agent_id: &str, target: &str) -> Result<i64, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let (waiting,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM deliveries WHERE agent_id = $1 AND target = $2 AND state = 'pending'",
            )
            .bind(agent_id)
            .bind(target)
            .fetch_one(reader)
            .await?;
            Ok(waiting)
        })
    }

    /// The event of a delivery that changed.
    async fn announce_delivery(
        &self,
        workspace_id: &str,
        now_ms: i64,
        changed: &Option<Result<Delivery, DeliveryRefusal>>,
    ) -> Result<(), StoreError> {
        if let Some(Ok(delivery)) = changed {
            let event = NewEvent {
                kind: EventKind::Delivery,
                channel_id: None,
                thread_id: None,
                agent_id: Some(delivery.agent_id.as_str()),
                subject: delivery.id.as_str(),
            };
            self.record_event(workspace_id, now_ms, &event).await?;
        }
        Ok(())
    }

    /// Expires every pending delivery past its expiry, each with its event; returns how many.
    pub async fn expire_deliveries(&self, now_ms: i64) -> Result<u64, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let expired: Vec<(String, String, String)> = sqlx::query_as(
                "UPDATE deliveries SET state = 'expired', reason = 'no daemon started it in time', \
                 updated_at = $1 WHERE state = 'pending' AND expires_at <= $1 \
                 RETURNING id, workspace_id, agent_id",
            )
            .bind(now_ms)
            .fetch_all(&mut *tx)
            .await?;
            for (id, workspace_id, agent_id) in &expired {
                let event = NewEvent {
                    kind: EventKind::Delivery,
                    channel_id: None,
                    thread_id: None,
                    agent_id: Some(agent_id),
                    subject: id,
                };
                record_event!(tx, workspace_id, now_ms, &event);
            }
            tx.commit().await?;
            Ok(expired.len() as u64)
        })
    }

    /// The workspace's delivery `id`, as an event shows it.
    pub async fn delivery(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<Delivery>, StoreError> {
        let query = Query::select::<Delivery>("WHERE d.id = $1 AND d.workspace_id = $2")
            .bind(id)
            .bind(workspace_id);
        self.one(here!(), query).await
    }

    /// How long a delivery waits for a daemon (ms).
    pub fn delivery_ttl_ms(&self) -> i64 {
        self.delivery_ttl.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many deliveries one person's messages may make in a minute.
    pub fn deliveries_per_minute(&self) -> i64 {
        self.deliveries_per_minute
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets how many deliveries one person's messages may make in a minute (the server's
    /// configuration).
    pub fn set_deliveries_per_minute(&self, per_minute: u32) {
        self.deliveries_per_minute
            .store(i64::from(per_minute), std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets how long a delivery waits for a daemon (the server's configuration).
    pub fn set_delivery_ttl(&self, ttl: std::time::Duration) {
        self.delivery_ttl.store(
            ttl.as_millis().min(i64::MAX as u128) as i64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// A person who may wake an agent: `(human id, handle)`.
pub type Waker = (String, String);

impl Store {
    /// Who besides its owner may wake `agent_id`, an agent `human_id` owns, by handle; `None`
    /// when the person owns no such agent.
    pub async fn agent_wakers(
        &self,
        workspace_id: &str,
        human_id: &str,
        agent_id: &str,
    ) -> Result<Option<Vec<Waker>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let owned: Option<(String,)> = sqlx::query_as(
                "SELECT id FROM agents WHERE id = $1 AND workspace_id = $2 AND owner_human_id = $3",
            )
            .bind(agent_id)
            .bind(workspace_id)
            .bind(human_id)
            .fetch_optional(reader)
            .await?;
            if owned.is_none() {
                return Ok(None);
            }
            let wakers: Vec<Waker> = sqlx::query_as(
                "SELECT h.id, h.handle FROM agent_wakers w JOIN humans h ON h.id = w.human_id \
                 WHERE w.agent_id = $1 ORDER BY h.handle",
            )
            .bind(agent_id)
            .fetch_all(reader)
            .await?;
            Ok(Some(wakers))
        })
    }

    /// Lets the people of `allow` wake `agent_id` (an agent `human_id` owns) and no longer those
    /// of `disallow`, by handle, all or nothing; who may now. The owner always may: naming them
    /// changes nothing. `None` when the person owns no such agent.
    pub async fn set_agent_wakers(
        &self,
        workspace_id: &str,
        human_id: &str,
        agent_id: &str,
        (allow, disallow): (&[String], &[String]),
        now_ms: i64,
    ) -> Result<Option<Result<Vec<Waker>, WakersRefusal>>, StoreError> {
        if let Some(both) = allow.iter().find(|handle| disallow.contains(handle)) {
            return Ok(Some(Err(WakersRefusal::Both(both.clone()))));
        }
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            // The agent's row is the lock two changes of its wakers take in turn, so the bound
            // holds under both.
            let owned: Option<(String,)> = sqlx::query_as(if pg {
                "SELECT id FROM agents WHERE id = $1 AND workspace_id = $2 AND owner_human_id = $3 FOR UPDATE"
            } else {
                "SELECT id FROM agents WHERE id = $1 AND workspace_id = $2 AND owner_human_id = $3"
            })
            .bind(agent_id)
            .bind(workspace_id)
            .bind(human_id)
            .fetch_optional(&mut *tx)
            .await?;
            if owned.is_none() {
                return Ok(None);
            }
            for (handle, allowed) in disallow
                .iter()
                .map(|h| (h, false))
                .chain(allow.iter().map(|h| (h, true)))
            {
                let person: Option<(String,)> =
                    sqlx::query_as("SELECT id FROM humans WHERE workspace_id = $1 AND handle = $2")
                        .bind(workspace_id)
                        .bind(handle)
                        .fetch_optional(&mut *tx)
                        .await?;
                let Some((person,)) = person else {
                    return Ok(Some(Err(WakersRefusal::UnknownHandle(handle.clone()))));
                };
                if person == human_id {
                    continue;
                }
                if allowed {
                    sqlx::query(
                        "INSERT INTO agent_wakers (agent_id, human_id, created_at) VALUES ($1, $2, $3) \
                         ON CONFLICT (agent_id, human_id) DO NOTHING",
                    )
                    .bind(agent_id)
                    .bind(&person)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                } else {
                    sqlx::query("DELETE FROM agent_wakers WHERE agent_id = $1 AND human_id = $2")
                        .bind(agent_id)
                        .bind(&person)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            let (count,): (i64,) =
                sqlx::query_as("SELECT COUNT(*) FROM agent_wakers WHERE agent_id = $1")
                    .bind(agent_id)
                    .fetch_one(&mut *tx)
                    .await?;
            if count > MAX_WAKERS {
                return Ok(Some(Err(WakersRefusal::TooMany(count))));
            }
            let wakers: Vec<Waker> = sqlx::query_as(
                "SELECT h.id, h.handle FROM agent_wakers w JOIN humans h ON h.id = w.human_id \
                 WHERE w.agent_id = $1 ORDER BY h.handle",
            )
            .bind(agent_id)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(Ok(wakers)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn a_mention_is_a_word_of_its_own() {
        assert!(mentions("@builder ship it", "builder"));
        assert!(mentions("ship it, @builder.", "builder"));
        assert!(mentions("(@builder)", "builder"));
        assert!(!mentions("@builders ship it", "builder"));
        assert!(!mentions("@builder-two ship it", "builder"));
        assert!(!mentions("mail me@builder", "builder"));
        assert!(!mentions("@@builder", "builder"));
        assert!(!mentions("builder", "builder"));
    }
}
