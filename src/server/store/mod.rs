//! The server's store: the only module that contains SQL.
//!
//! SQLite through sqlx, WAL mode, foreign keys on, `synchronous=FULL` so an acknowledged write
//! survives a crash of the process or the machine. All writes go through one writer connection
//! (several writers fail with "database is locked" under load even with a busy timeout); reads use
//! a separate small pool that never blocks the writer in WAL mode.

mod idempotency;
mod messages;
mod migrations;
mod projects;
mod reviews;
mod schedules;
mod tasks;
mod teams;
mod tenancy;

use std::str::FromStr;
use std::time::Duration;

use rand::Rng;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

pub use crate::clock::Clock;
pub use idempotency::Claim;
pub use messages::{MAX_ATTACHMENTS, NewAttachment};
pub use schedules::{NewSchedule, PassReport};
pub use teams::TeamPosition;
pub use tenancy::{DeviceIdentity, MemberKind, Membership};

/// Reads in flight at once; the writer is always one connection.
const READ_CONNECTIONS: u32 = 4;

/// A handle on the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    writer: SqlitePool,
    reader: SqlitePool,
}

/// What can go wrong below the product rules.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database url `{0}` (expected `sqlite://PATH`)")]
    UnsupportedUrl(String),
    #[error("database is at schema version {found}, newer than this binary's {known}")]
    TooNew { found: i64, known: usize },
    #[error("database error")]
    Database(#[from] sqlx::Error),
    /// A stored value no longer parses as its contract type: corruption or a defect.
    #[error("stored `{column}` does not match its contract type")]
    Corrupt { column: &'static str },
}

impl Store {
    /// Opens (creating if missing) the database at `url` and runs pending migrations.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        if !url.starts_with("sqlite:") {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        }
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        migrate(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .connect_with(options.read_only(true))
            .await?;
        Ok(Store { writer, reader })
    }

    /// Closes both pools, waiting for their connections to finish.
    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }

    /// The persistent secret `name` (32 random bytes), created on first use.
    pub async fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let mut fresh = [0u8; 32];
        rand::rng().fill(&mut fresh);
        sqlx::query(
            "INSERT INTO server_keys (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(fresh.as_slice())
        .execute(&self.writer)
        .await?;
        let (secret,): (Vec<u8>,) =
            sqlx::query_as("SELECT secret FROM server_keys WHERE name = $1")
                .bind(name)
                .fetch_one(&self.writer)
                .await?;
        Ok(secret)
    }
}

/// Applies every migration past the database's `user_version`, each in its own transaction.
async fn migrate(writer: &SqlitePool) -> Result<(), StoreError> {
    let (version,): (i64,) = sqlx::query_as("PRAGMA user_version")
        .fetch_one(writer)
        .await?;
    if version as usize > migrations::MIGRATIONS.len() {
        return Err(StoreError::TooNew {
            found: version,
            known: migrations::MIGRATIONS.len(),
        });
    }
    for (index, sql) in migrations::MIGRATIONS
        .iter()
        .enumerate()
        .skip(version as usize)
    {
        let mut tx = writer.begin().await?;
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        // A PRAGMA takes no bind parameters; the value is our own integer.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "PRAGMA user_version = {}",
            index + 1
        )))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(())
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

/// One page of a keyset list: the items, and the position of the last one when another page
/// exists.
#[derive(Debug)]
pub struct Page<T, P = Position> {
    pub items: Vec<T>,
    pub next: Option<P>,
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

/// RFC 3339 UTC with millisecond precision.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn migrating_twice_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        Store::open(&url).await.unwrap().close().await;
        let store = Store::open(&url).await.unwrap();
        let (version,): (i64,) = sqlx::query_as("PRAGMA user_version")
            .fetch_one(&store.writer)
            .await
            .unwrap();
        assert_eq!(version as usize, migrations::MIGRATIONS.len());
    }

    #[tokio::test]
    async fn connections_enforce_foreign_keys_in_wal_mode_with_full_sync() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        let store = Store::open(&url).await.unwrap();
        for pool in [&store.writer, &store.reader] {
            let (foreign_keys,): (i64,) = sqlx::query_as("PRAGMA foreign_keys")
                .fetch_one(pool)
                .await
                .unwrap();
            let (journal,): (String,) = sqlx::query_as("PRAGMA journal_mode")
                .fetch_one(pool)
                .await
                .unwrap();
            let (synchronous,): (i64,) = sqlx::query_as("PRAGMA synchronous")
                .fetch_one(pool)
                .await
                .unwrap();
            assert_eq!((foreign_keys, journal.as_str(), synchronous), (1, "wal", 2));
        }
        let orphan = sqlx::query("INSERT INTO humans (id, workspace_id, handle, display_name, created_at) VALUES ('hum_x', 'wsp_missing', 'h', 'H', 0)")
            .execute(&store.writer)
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
