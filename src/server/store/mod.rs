//! The server's store: the only module that contains SQL.
//!
//! One `Store` over either backend (`db.rs`): SQLite, the embedded default (WAL, foreign keys,
//! `synchronous=FULL`, one writer connection, a read pool), or PostgreSQL for several stateless
//! server replicas behind one database. Every method is written once and expanded per backend.

mod approvals;
mod audit;
mod db;
mod deliveries;
mod events;
mod extensions;
mod idempotency;
mod kb;
mod messages;
mod migrations;
mod people;
mod projects;
mod raw;
mod reviews;
mod schedules;
mod shape;
mod sqlite_file;
mod tasks;
mod teams;
mod tenancy;
mod tx;
mod workflows;

use std::str::FromStr;

use rand::Rng;

pub use crate::clock::Clock;
pub use audit::{AuditRecord, shown as shown_audit};
pub use db::is_postgres;
pub(crate) use db::{Columns, here, on_backend};
pub use deliveries::{
    DEFAULT_DELIVERIES_PER_MINUTE, DEFAULT_DELIVERY_TTL_MS, DeliveryFilter, DeliveryRefusal,
    END_THREAD, Host, MAX_WAKERS, Waker, WakersRefusal, mentions as deliveries_mentions,
    refusal as deliveries_refusal,
};
pub(crate) use deliveries::{answered, deliver};
pub(crate) use events::record_event;
pub use events::{EVENT_RETENTION_MS, Event, EventKind, EventPage, MAX_EVENTS, NewEvent};
pub use extensions::{AppAccess, MAX_REFRESH_CLAIM, PullState, WatchRecord};
pub use idempotency::{Claim, MAX_PRUNED_PER_PASS, Principal, RUNNING_LEASE_MS};
pub use kb::{Document, Hit, ScopeRefusal, source_token};
pub use messages::{MAX_ATTACHMENTS, NewAttachment};
pub use migrations::SCHEMA_VERSION;
pub use people::MAX_UNREAD;
pub use schedules::{NewSchedule, PassReport};
pub use teams::TeamPosition;
pub use tenancy::{DeviceIdentity, MemberKind, Membership, ProfileChange};
pub use workflows::{
    DecideRefusal, PlanChange, StartRefusal, TriggerChange, TriggerRecord, run_contract,
    step_contract,
};

/// A handle on the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: db::Db,
    /// On SQLite only (see `db::DatabaseLock`).
    devices: Option<std::sync::Arc<tenancy::DeviceCache>>,
    /// How long a delivery waits for a daemon to start it (ms), shared by the store's clones.
    delivery_ttl: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// How many deliveries one person's messages may make in a minute, shared likewise.
    deliveries_per_minute: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

/// What can go wrong below the product rules.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL's scheme only: the rest can carry credentials.
    #[error("unsupported database url scheme `{0}` (expected `sqlite://PATH` or `postgres://…`)")]
    UnsupportedUrl(String),
    #[error("database is at schema version {found}, newer than this binary's {known}")]
    TooNew { found: i64, known: usize },
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error("the SQLite database `{0}` is in use by another agentteam server")]
    InUse(String),
    #[error(
        "an in-memory SQLite database keeps nothing once the server stops: give a file (`sqlite://PATH`)"
    )]
    InMemory,
    #[error("cannot lock the SQLite database")]
    Lock(#[source] std::io::Error),
    /// A stored value no longer parses as its contract type: corruption or a defect.
    #[error("stored `{column}` does not match its contract type")]
    Corrupt { column: &'static str },
    /// A caller-thread SQLite read failed in SQLite itself (`raw.rs`).
    #[error("database error")]
    Raw(#[source] raw::RawError),
}

impl Store {
    /// Opens the database at `url` (`sqlite://PATH`, created if missing, or `postgres://…`) and
    /// runs pending migrations.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        let db = db::Db::open(url).await?;
        let devices = matches!(db, db::Db::Sqlite { .. }).then(std::sync::Arc::default);
        Ok(Store {
            db,
            devices,
            delivery_ttl: std::sync::Arc::new(std::sync::atomic::AtomicI64::new(
                DEFAULT_DELIVERY_TTL_MS,
            )),
            deliveries_per_minute: std::sync::Arc::new(std::sync::atomic::AtomicI64::new(
                DEFAULT_DELIVERIES_PER_MINUTE,
            )),
        })
    }

    /// The caller-thread SQLite readers, on SQLite with a database file.
    fn raw(&self) -> Option<&raw::RawReaders> {
        // Its connections cannot see the writes of the request's transaction.
        if tx::current().is_some() {
            return None;
        }
        match &self.db {
            db::Db::Sqlite { raw, .. } => Some(raw),
            db::Db::Postgres(_) => None,
        }
    }

    /// Runs `work` inside one transaction on the writer: every store method it calls runs its
    /// statements there (`tx.rs`). The transaction commits when `work` answers
    /// `Ok((value, true))`, and is rolled back when it answers `Ok((value, false))` or fails.
    pub async fn atomically<T, Fut>(&self, work: impl FnOnce() -> Fut) -> Result<T, StoreError>
    where
        Fut: std::future::Future<Output = Result<(T, bool), StoreError>>,
    {
        match &self.db {
            db::Db::Sqlite { writer, .. } => {
                tx::run_in(writer.begin().await?, tx::RequestTx::Sqlite, work()).await
            }
            // Boxed whole: PostgreSQL's `begin` alone is a future of several pages, which every
            // caller's future (every request's, through the server's handlers) would otherwise
            // carry and move, whichever backend it runs on.
            db::Db::Postgres(pool) => {
                Box::pin(async move {
                    tx::run_in(pool.begin().await?, tx::RequestTx::Postgres, work()).await
                })
                .await
            }
        }
    }

    /// Whether this store is on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.db, db::Db::Postgres(_))
    }

    /// Closes the pools, waiting for their connections to finish.
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// The persistent secret `name` (32 random bytes), created on first use (by whichever
    /// replica comes first; the others read it).
    pub async fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let mut fresh = [0u8; 32];
        rand::rng().fill(&mut fresh);
        on_backend!(self, |writer, _reader, _pg| {
            sqlx::query(
                "INSERT INTO server_keys (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(fresh.as_slice())
            .execute(writer)
            .await?;
            let (secret,): (Vec<u8>,) =
                sqlx::query_as("SELECT secret FROM server_keys WHERE name = $1")
                    .bind(name)
                    .fetch_one(writer)
                    .await?;
            Ok(secret)
        })
    }
}

/// Crockford base32: sortable, unambiguous, inside `[0-9A-Za-z]`.
const ID_ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A new opaque, prefixed, time-sortable id: `task_` + 10 chars of milliseconds + 16 random chars.
pub fn new_id(prefix: &str, now_ms: i64) -> String {
    let mut id = String::with_capacity(prefix.len() + 27);
    id.push_str(prefix);
    id.push('_');
    let millis = now_ms.max(0) as u64;
    for shift in (0..10).rev() {
        id.push(ID_ALPHABET[((millis >> (shift * 5)) & 31) as usize] as char);
    }
    let mut rng = rand::rng();
    for _ in 0..16 {
        id.push(ID_ALPHABET[rng.random_range(0..32)] as char);
    }
    id
}

/// A keyset position: the sort time (epoch milliseconds) and the id that breaks ties, of the
/// last row of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub at_ms: i64,
    pub id: String,
}

impl Position {
    pub(crate) fn of(at_ms: i64, id: impl Into<String>) -> Position {
        Position {
            at_ms,
            id: id.into(),
        }
    }
}

/// One page of a keyset list: the items, and the position of the last one when another page
/// exists.
#[derive(Debug)]
pub struct Page<T, P = Position> {
    pub items: Vec<T>,
    pub next: Option<P>,
}

/// The most bytes of JSON the items of one page carry. A message's text, a task's description or
/// an approval's details is bounded in characters, not in bytes once written (a control
/// character takes six), and a full page of them could pass the 1 MiB a client of ours reads of
/// an answer: past this a page ends early, and its cursor continues after the last item it kept.
pub const PAGE_BYTES: usize = 512 * 1024;

/// How many of `items`, from the first, fit in [`PAGE_BYTES`] as JSON: at least one, so every
/// page moves on.
pub fn fitting<'a, T: serde::Serialize + 'a>(items: impl IntoIterator<Item = &'a T>) -> usize {
    let (mut bytes, mut fit) = (0, 0);
    for item in items {
        // The item and the comma after it; an item that does not serialize weighs all there is.
        bytes += crate::contract::json::json_len(item).map_or(PAGE_BYTES, |len| len + 1);
        if bytes > PAGE_BYTES && fit > 0 {
            break;
        }
        fit += 1;
    }
    fit
}

impl<T: serde::Serialize, P: Clone> Page<T, P> {
    /// [`Page::from_rows`], ended early past [`PAGE_BYTES`] of items.
    pub(crate) fn from_rows_within_bytes(mut rows: Vec<(T, P)>, limit: usize) -> Self {
        rows.truncate(limit + 1);
        let keep = fitting(rows.iter().take(limit).map(|(item, _)| item));
        if keep < limit.min(rows.len()) {
            // One row past what is kept: it says another page exists.
            rows.truncate(keep + 1);
            return Page::from_rows(rows, keep);
        }
        Page::from_rows(rows, limit)
    }
}

impl<T, P: Clone> Page<T, P> {
    /// From up to `limit + 1` rows with their positions; the extra row only says another page
    /// exists.
    pub(crate) fn from_rows(mut rows: Vec<(T, P)>, limit: usize) -> Self {
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        let next = if has_more {
            rows.last().map(|(_, position)| position.clone())
        } else {
            None
        };
        Page {
            items: rows.into_iter().map(|(item, _)| item).collect(),
            next,
        }
    }
}

/// Parses a stored text column into its contract type; a mismatch is corruption, not a client error.
pub(crate) fn parse_column<T: FromStr>(
    value: String,
    column: &'static str,
) -> Result<T, StoreError> {
    value.parse().map_err(|_| StoreError::Corrupt { column })
}

/// The instant of a stored epoch-milliseconds column (what parsing its [`rfc3339`] text gives,
/// without writing and parsing the text).
pub(crate) fn instant<T: From<chrono::DateTime<chrono::Utc>>>(
    ms: i64,
    column: &'static str,
) -> Result<T, StoreError> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(T::from)
        .ok_or(StoreError::Corrupt { column })
}

/// RFC 3339 UTC with millisecond precision.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page's items fit [`PAGE_BYTES`] to the byte: an item of `n` bytes of JSON weighs `n`
    /// and its comma; the first item is kept whatever it weighs.
    #[test]
    fn a_page_ends_where_its_bytes_do() {
        // Each item: a string of `k` characters, `k + 2` bytes of JSON and a comma.
        let item = |k: usize| "x".repeat(k);
        let exact = PAGE_BYTES / 4 - 3;
        let mut items = vec![item(exact), item(exact), item(exact), item(exact)];
        let last = PAGE_BYTES - 3 * (exact + 3) - 3;
        items[3] = item(last);
        assert_eq!(fitting(&items), 4, "exactly the bound");
        items[3] = item(last + 1);
        assert_eq!(fitting(&items), 3, "one byte over");
        assert_eq!(fitting(&[item(PAGE_BYTES * 2)]), 1, "one item always");
        assert_eq!(fitting(&Vec::<String>::new()), 0);

        // A page read from rows: cut short, its next position is the last item kept's.
        let rows: Vec<(String, i64)> = items.iter().cloned().zip(0..).collect();
        let page = Page::from_rows_within_bytes(rows.clone(), 10);
        assert_eq!((page.items.len(), page.next), (3, Some(2)));
        let page = Page::from_rows_within_bytes(rows[..2].to_vec(), 10);
        assert_eq!(
            (page.items.len(), page.next),
            (2, None),
            "all fit, none past"
        );
        let page = Page::from_rows_within_bytes(rows[..3].to_vec(), 2);
        assert_eq!(
            (page.items.len(), page.next),
            (2, Some(1)),
            "the limit first"
        );
    }

    #[tokio::test]
    async fn migrating_twice_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        Store::open(&url).await.unwrap().close().await;
        let store = Store::open(&url).await.unwrap();
        let db::Db::Sqlite { writer, .. } = &store.db else {
            unreachable!("a sqlite url")
        };
        let (version,): (i64,) = sqlx::query_as("PRAGMA user_version")
            .fetch_one(writer)
            .await
            .unwrap();
        assert_eq!(version as usize, migrations::MIGRATIONS.len());
    }

    #[tokio::test]
    async fn connections_enforce_foreign_keys_in_wal_mode_with_full_sync() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        let store = Store::open(&url).await.unwrap();
        let db::Db::Sqlite { writer, reader, .. } = &store.db else {
            unreachable!("a sqlite url")
        };
        async fn pragmas<'a>(
            on: impl sqlx::Executor<'a, Database = sqlx::Sqlite> + Copy,
        ) -> (i64, String, i64) {
            let (foreign_keys,): (i64,) = sqlx::query_as("PRAGMA foreign_keys")
                .fetch_one(on)
                .await
                .unwrap();
            let (journal,): (String,) = sqlx::query_as("PRAGMA journal_mode")
                .fetch_one(on)
                .await
                .unwrap();
            let (synchronous,): (i64,) = sqlx::query_as("PRAGMA synchronous")
                .fetch_one(on)
                .await
                .unwrap();
            (foreign_keys, journal, synchronous)
        }
        for (foreign_keys, journal, synchronous) in [pragmas(writer).await, pragmas(reader).await] {
            assert_eq!((foreign_keys, journal.as_str(), synchronous), (1, "wal", 2));
        }
        let orphan = sqlx::query("INSERT INTO humans (id, workspace_id, handle, display_name, created_at) VALUES ('hum_x', 'wsp_missing', 'h', 'H', 0)")
            .execute(writer)
            .await;
        assert!(
            orphan.is_err(),
            "a row pointing at a missing workspace was accepted"
        );
    }

    #[tokio::test]
    async fn secrets_persist_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        let first = Store::open(&url)
            .await
            .unwrap()
            .secret("cursor")
            .await
            .unwrap();
        let second = Store::open(&url)
            .await
            .unwrap()
            .secret("cursor")
            .await
            .unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(first, second);
    }

    /// A store on a SQLite file in `dir` with a workspace, a human and two of the human's agents:
    /// `(store, workspace, human, member, outsider)`.
    pub(crate) async fn people(dir: &std::path::Path) -> (Store, String, String, String, String) {
        let url = format!("sqlite://{}", dir.join("db.sqlite").display());
        let store = Store::open(&url).await.unwrap();
        let wsp = store.create_workspace("w", 1).await.unwrap();
        let human = store
            .create_human(&wsp, "h", "H", 1)
            .await
            .unwrap()
            .unwrap();
        let member = store
            .create_agent(&wsp, &human, "a", "A", 1)
            .await
            .unwrap()
            .unwrap();
        let outsider = store
            .create_agent(&wsp, &human, "b", "B", 1)
            .await
            .unwrap()
            .unwrap();
        (store, wsp, human, member, outsider)
    }

    /// The reads that run on the caller's thread (`raw.rs`) answer exactly as the pooled readers
    /// do, which take over when every caller-thread connection is in use: a member's task and
    /// pages of a channel, and nothing for a non-member.
    #[tokio::test]
    async fn hot_reads_answer_alike_on_the_callers_thread_and_through_the_pool() {
        use crate::contract::target::{Target, TargetKind};
        let dir = tempfile::tempdir().unwrap();
        let (store, wsp, _, member, outsider) = people(dir.path()).await;
        let channel = store
            .create_channel(&wsp, "general", std::slice::from_ref(&member), 1)
            .await
            .unwrap()
            .unwrap();
        let at = Membership {
            channel_id: channel.clone(),
            thread_id: None,
        };
        for n in 0..5 {
            store
                .post_message(&wsp, &at, &member, &format!("m{n}"), &[], 10 + n)
                .await
                .unwrap();
        }
        let task = store
            .insert_task(&wsp, &at, "t", Some("d"), &member, 20)
            .await
            .unwrap();
        let target = Target {
            kind: TargetKind::Channel,
            id: channel.clone(),
        };

        let reads = async || {
            let task_id = task.id.to_string();
            let tasks = [
                store
                    .task_for_member(&wsp, &member, &task_id)
                    .await
                    .unwrap(),
                store
                    .task_for_member(&wsp, &outsider, &task_id)
                    .await
                    .unwrap(),
            ];
            let first = store
                .history_for_member(&wsp, &member, &target, None, 2)
                .await
                .unwrap()
                .unwrap();
            let second = store
                .history_for_member(&wsp, &member, &target, first.next.as_ref(), 2)
                .await
                .unwrap()
                .unwrap();
            let refused = store
                .history_for_member(&wsp, &outsider, &target, None, 2)
                .await
                .unwrap();
            assert!(refused.is_none(), "a non-member reads nothing");
            serde_json::to_value((tasks, first.items, second.items, first.next.is_some())).unwrap()
        };
        let here = reads().await;
        assert_eq!(here[0][0]["title"], "t");
        assert!(here[0][1].is_null(), "a non-member's task is not found");
        let contents = |page: &serde_json::Value| -> Vec<String> {
            page.as_array()
                .unwrap()
                .iter()
                .map(|m| m["content"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(contents(&here[1]), ["m4", "m3"], "newest first");
        assert_eq!(contents(&here[2]), ["m2", "m1"], "the cursor continues");
        assert_eq!(here[3], true);

        let raw = store
            .raw()
            .expect("a database file has caller-thread readers");
        let held = raw.exhaust();
        assert_eq!(held.len(), raw::RAW_READERS);
        assert_eq!(reads().await, here, "the pooled readers answer alike");
        drop(held);
        assert_eq!(reads().await, here);
    }

    #[test]
    fn ids_sort_by_time_and_fit_the_contract_pattern() {
        let a = new_id("task", 1_000);
        let b = new_id("task", 2_000);
        assert!(a < b);
        assert_eq!(a.len(), "task_".len() + 26);
        assert!(
            a["task_".len()..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric())
        );
    }
}
