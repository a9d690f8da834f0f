//! The two database backends behind one `Store`: SQLite (the embedded default) and PostgreSQL
//! (several stateless server replicas behind one database).
//!
//! Every store method is written once and expanded per backend by [`on_backend!`], so each
//! statement runs on a concrete sqlx pool (no `Any` driver: its placeholders, booleans and
//! connection options differ per backend in ways that break this code). Most of the SQL is
//! the same text on both (`$N` placeholders, BIGINT epoch milliseconds, `ON CONFLICT`); where the
//! dialects differ, the method picks one of two `&'static str` with `if pg { … } else { … }`.
//! Row mappers read through [`Columns`], which both row types implement.
//!
//! SQLite: WAL, foreign keys on, `synchronous=FULL`; all writes through one writer connection (a
//! pool of writers fails with "database is locked" under load), reads through a small read-only
//! pool, and the hottest reads on the caller's thread (`raw.rs`). PostgreSQL: one pool for both; rows a read-check-write changes are locked with
//! `FOR UPDATE`, and queue claims use `FOR UPDATE SKIP LOCKED`, so replicas never apply one change
//! twice.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use super::StoreError;
use super::migrations::{MIGRATIONS, PG_MIGRATIONS};
use super::raw::{RawReaders, RawRow};
use super::sqlite_file::{DatabaseLock, sqlite_in_memory};

/// SQLite reads in flight at once; the writer is always one connection.
const SQLITE_READERS: u32 = 4;
/// PostgreSQL connections of one server process (replicas × this ≤ the database's limit).
const PG_CONNECTIONS: u32 = 16;
/// The key of the advisory lock that serializes migrations across replicas ("agentteam").
const MIGRATION_LOCK: i64 = 0x6167_656e_7474_6561;

/// The pools of one backend.
#[derive(Clone)]
pub(crate) enum Db {
    Sqlite {
        writer: SqlitePool,
        reader: Readers,
        /// The hottest reads, on the caller's thread.
        raw: std::sync::Arc<RawReaders>,
        _lock: std::sync::Arc<DatabaseLock>,
    },
    Postgres(PgPool),
}

/// Expands `$body` once per backend with `$writer` and `$reader` bound to that backend's pools (or,
/// inside [`Store::atomically`](super::Store::atomically), to the request's transaction: `tx.rs`)
/// and `$pg` to whether it is PostgreSQL; `Backend` names the sqlx database type inside the body.
///
/// The PostgreSQL expansion runs as a boxed future of its own: sqlx's PostgreSQL pool futures
/// are about 14.5 KiB (its connection acquisition alone), and inline they would make every store
/// function's future, and every server handler's, about 17 KiB, on SQLite too; a handler's
/// future is moved into its box on every request, so that would be a 17 KiB copy per call.
/// `$body` may `return` only as the tail of its function (it is
/// the body of an `async` block there), and every use is.
///
/// `on_backend!(store, caller, |writer, reader, pg| …)` names the span for `caller` (a
/// [`here!`] of the store method that called the shared piece this expands in: `shape.rs`).
macro_rules! on_backend {
    ($store:expr, |$writer:ident, $reader:ident, $pg:ident| $body:expr) => {
        // The store call's span, named for the method this expands in (`fn here` is an item of
        // that method: its type name is the method's path).
        $crate::server::store::db::on_backend!(
            $store,
            $crate::server::store::db::here!(),
            |$writer, $reader, $pg| $body
        )
    };
    ($store:expr, $caller:expr, |$writer:ident, $reader:ident, $pg:ident| $body:expr) => {{
        let _span = $crate::server::store::db::store_span(&$store.db, $caller);
        match &$store.db {
            $crate::server::store::db::Db::Sqlite { writer, reader, .. } => {
                let tx = $crate::server::store::tx::current();
                let tx = tx.as_ref().and_then(|tx| tx.sqlite());
                let writer = $crate::server::store::tx::Exec::of(writer, tx);
                let reader = $crate::server::store::tx::Exec::of(reader, tx);
                #[allow(unused_variables)]
                let ($writer, $reader, $pg) = (&writer, &reader, false);
                #[allow(dead_code)]
                type Backend = ::sqlx::Sqlite;
                $body
            }
            $crate::server::store::db::Db::Postgres(pool) => {
                let tx = $crate::server::store::tx::current();
                let tx = tx.as_ref().and_then(|tx| tx.postgres());
                let pool = $crate::server::store::tx::Exec::of(pool, tx);
                #[allow(unused_variables)]
                let ($writer, $reader, $pg) = (&pool, &pool, true);
                #[allow(dead_code)]
                type Backend = ::sqlx::Postgres;
                ::std::boxed::Box::pin(async { $body }).await
            }
        }
    }};
}
pub(crate) use on_backend;

/// The path of the function this expands in (the type name of an item inside it, ending
/// `::here`), for [`store_span`] and the caller-thread reads' spans; a constant, made into a
/// method name only when a request is traced.
macro_rules! here {
    () => {{
        fn here() {}
        ::std::any::type_name_of_val(&here)
    }};
}
pub(crate) use here;

/// A column type both backends decode the same way.
pub(crate) trait Decodable: Sized {
    fn from_sqlite(row: &SqliteRow, index: usize) -> Result<Self, sqlx::Error>;
    fn from_pg(row: &PgRow, index: usize) -> Result<Self, sqlx::Error>;
    /// From a row of SQLite's caller-thread reads ([`RawReaders`]).
    fn from_raw(row: &RawRow<'_>, index: usize) -> Result<Self, sqlx::Error>;
}

macro_rules! decodable {
    ($($t:ty => $raw:expr),* $(,)?) => {$(
        impl Decodable for $t {
            fn from_sqlite(row: &SqliteRow, index: usize) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
            fn from_pg(row: &PgRow, index: usize) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
            fn from_raw(row: &RawRow<'_>, index: usize) -> Result<Self, sqlx::Error> {
                $raw(row, index)
            }
        }
    )*};
}
decodable!(
    String => RawRow::text,
    Option<String> => |row: &RawRow<'_>, index| row.optional(index, RawRow::text),
    i64 => RawRow::int,
    Option<i64> => |row: &RawRow<'_>, index| row.optional(index, RawRow::int),
    bool => |row: &RawRow<'_>, index| row.int(index).map(|n| n != 0),
    Vec<u8> => RawRow::blob,
    f64 => RawRow::float,
);

/// A row of either backend, read by column index.
pub(crate) trait Columns {
    fn column<T: Decodable>(&self, index: usize) -> Result<T, sqlx::Error>;
}

impl Columns for SqliteRow {
    fn column<T: Decodable>(&self, index: usize) -> Result<T, sqlx::Error> {
        T::from_sqlite(self, index)
    }
}

impl Columns for PgRow {
    fn column<T: Decodable>(&self, index: usize) -> Result<T, sqlx::Error> {
        T::from_pg(self, index)
    }
}

impl Columns for RawRow<'_> {
    fn column<T: Decodable>(&self, index: usize) -> Result<T, sqlx::Error> {
        T::from_raw(self, index)
    }
}

/// Whether `url` names a PostgreSQL database.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl Db {
    /// Connects to `url` (`sqlite://PATH`, created if missing, or `postgres://…`) and applies
    /// every pending migration.
    pub(crate) async fn open(url: &str) -> Result<Db, StoreError> {
        if is_postgres(url) {
            let options = PgConnectOptions::from_str(url)?.application_name("agentteam");
            let pool = PgPoolOptions::new()
                .max_connections(PG_CONNECTIONS)
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options)
                .await?;
            migrate_postgres(&pool).await?;
            return Ok(Db::Postgres(pool));
        }
        if !url.starts_with("sqlite:") {
            let scheme: String = url
                .split(':')
                .next()
                .unwrap_or("")
                .chars()
                .take(32)
                .collect();
            return Err(StoreError::UnsupportedUrl(scheme));
        }
        if sqlite_in_memory(url) {
            return Err(StoreError::InMemory);
        }
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let lock = std::sync::Arc::new(DatabaseLock::take(&options)?);
        // No ping before each acquire: a SQLite connection is a file handle in this process, it
        // cannot drop like a socket, and the ping is a round trip to the connection's worker
        // thread, as costly as the query it guards (measured: BENCHMARKS.md, history read).
        // The writer keeps its temporary files in memory: a multi-row `INSERT` inside a
        // transaction (the audit trail's batches) keeps a statement journal, which SQLite spills
        // to a temporary file past 64 KiB (seen under `strace`: 4 KiB records written to a
        // transient file). The writer's statements are bounded (at most 64 rows, indexed
        // reads), so the journals and temporary b-trees they hold are too.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .after_connect(|connection, _| Box::pin(stable_plans(connection)))
            .connect_with(options.clone().pragma("temp_store", "memory"))
            .await?;
        migrate_sqlite(&writer).await?;
        let raw = std::sync::Arc::new(RawReaders::open(options.get_filename())?);
        let reader = Readers::open(options.read_only(true)).await?;
        Ok(Db::Sqlite {
            writer,
            reader,
            raw,
            _lock: lock,
        })
    }

    pub(crate) async fn close(&self) {
        match self {
            Db::Sqlite {
                writer,
                reader,
                raw,
                ..
            } => {
                raw.close();
                writer.close().await;
                reader.close().await;
            }
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

/// SQLite's read connections: [`SQLITE_READERS`] read-only connections, each planned with
/// [`stable_plans`], handed out one per statement.
///
/// Not a sqlx pool: sqlx pings every connection it takes back (`PoolConnection::return_to_pool`,
/// unconditionally), and for SQLite a ping is a round trip to the connection's worker thread, as
/// costly as the statement it follows.
/// A SQLite connection is a file handle in this process: it cannot be dropped by a peer, and a
/// read-only connection is never left inside a transaction, so it goes straight back to the idle
/// list, unless its statement failed outside SQLite itself (its worker is gone: it is closed and
/// replaced on the next demand). Statements run through `&Readers` like through `&SqlitePool`
/// ([`sqlx::Executor`]), so each store method is written once for both backends.
#[derive(Clone)]
pub(crate) struct Readers(std::sync::Arc<ReadersInner>);

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers")
            .field("max", &SQLITE_READERS)
            .finish_non_exhaustive()
    }
}

struct ReadersInner {
    options: SqliteConnectOptions,
    idle: std::sync::Mutex<Vec<sqlx::SqliteConnection>>,
    /// One permit per connection that may be open.
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    closed: std::sync::atomic::AtomicBool,
}

/// One read connection, returned to the idle list on drop.
struct Reader {
    connection: Option<sqlx::SqliteConnection>,
    readers: std::sync::Arc<ReadersInner>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Readers {
    /// Opens the first connection now, so a file that cannot be read fails the start.
    async fn open(options: SqliteConnectOptions) -> Result<Readers, sqlx::Error> {
        let first = connect_reader(&options).await?;
        Ok(Readers(std::sync::Arc::new(ReadersInner {
            options,
            idle: std::sync::Mutex::new(vec![first]),
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(SQLITE_READERS as usize)),
            closed: std::sync::atomic::AtomicBool::new(false),
        })))
    }

    async fn acquire(&self) -> Result<Reader, sqlx::Error> {
        if self.0.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(sqlx::Error::PoolClosed);
        }
        let permit = self
            .0
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = self.0.idle.lock().expect("no panic holds it").pop();
        let connection = match idle {
            Some(connection) => connection,
            None => connect_reader(&self.0.options).await?,
        };
        Ok(Reader {
            connection: Some(connection),
            readers: self.0.clone(),
            _permit: permit,
        })
    }

    /// Closes the idle connections and every one returned from now on.
    async fn close(&self) {
        self.0
            .closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.0.permits.close();
        let idle = std::mem::take(&mut *self.0.idle.lock().expect("no panic holds it"));
        for connection in idle {
            let _ = sqlx::Connection::close(connection).await;
        }
    }

    /// Read connections take no transactions. The one transaction on the read side is
    /// PostgreSQL's (`kb` search, `SET LOCAL`), whose code is also compiled for SQLite.
    pub(crate) async fn begin(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        Err(sqlx::Error::Configuration(
            "a SQLite read connection takes no transaction".into(),
        ))
    }
}

impl Reader {
    fn connection(&mut self) -> &mut sqlx::SqliteConnection {
        self.connection.as_mut().expect("held until drop")
    }

    /// Keeps the connection after `result` unless the failure came from outside SQLite (the
    /// worker thread is gone, or I/O on its channel failed): such a connection is dropped.
    fn check<T>(&mut self, result: &Result<T, sqlx::Error>) {
        if matches!(
            result,
            Err(sqlx::Error::WorkerCrashed | sqlx::Error::Io(_) | sqlx::Error::Protocol(_))
        ) {
            self.connection = None;
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take()
            && !self
                .readers
                .closed
                .load(std::sync::atomic::Ordering::Acquire)
        {
            self.readers
                .idle
                .lock()
                .expect("no panic holds it")
                .push(connection);
        }
    }
}

async fn connect_reader(
    options: &SqliteConnectOptions,
) -> Result<sqlx::SqliteConnection, sqlx::Error> {
    use sqlx::ConnectOptions;
    let mut connection = options.connect().await?;
    stable_plans(&mut connection).await?;
    Ok(connection)
}

impl<'p> sqlx::Executor<'p> for &'_ Readers {
    type Database = sqlx::Sqlite;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> futures_util::stream::BoxStream<
        'e,
        Result<sqlx::Either<sqlx::sqlite::SqliteQueryResult, SqliteRow>, sqlx::Error>,
    >
    where
        E: 'q + sqlx::Execute<'q, sqlx::Sqlite>,
    {
        use futures_util::{StreamExt, TryStreamExt};
        let readers = self.clone();
        // Collected on the connection, then streamed: the connection goes back before the
        // caller reads the first row. Every read statement of the store is bounded (a page, a
        // `LIMIT`, or one row per key).
        let all = async move {
            let mut reader = readers.acquire().await?;
            let all = reader
                .connection()
                .fetch_many(query)
                .try_collect::<Vec<_>>()
                .await;
            reader.check(&all);
            all
        };
        futures_util::stream::once(all)
            .map_ok(|all| futures_util::stream::iter(all.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> futures_util::future::BoxFuture<'e, Result<Option<SqliteRow>, sqlx::Error>>
    where
        E: 'q + sqlx::Execute<'q, sqlx::Sqlite>,
    {
        let readers = self.clone();
        Box::pin(async move {
            let mut reader = readers.acquire().await?;
            let row = reader.connection().fetch_optional(query).await;
            reader.check(&row);
            row
        })
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [sqlx::sqlite::SqliteTypeInfo],
    ) -> futures_util::future::BoxFuture<'e, Result<sqlx::sqlite::SqliteStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        let readers = self.clone();
        Box::pin(async move {
            let mut reader = readers.acquire().await?;
            let statement = reader.connection().prepare_with(sql, parameters).await;
            reader.check(&statement);
            statement
        })
    }
}

super::tx::executor!(
    Readers,
    sqlx::Sqlite,
    sqlx::sqlite::SqliteQueryResult,
    sqlx::sqlite::SqliteRow,
    sqlx::sqlite::SqliteStatement,
    sqlx::sqlite::SqliteTypeInfo
);

impl<'a> super::tx::Exec<'a, Readers, sqlx::Sqlite> {
    pub(crate) async fn begin(&self) -> Result<super::tx::ExecTx<'a, sqlx::Sqlite>, sqlx::Error> {
        match self {
            super::tx::Exec::Pool(readers) => readers.begin().await.map(super::tx::ExecTx::Own),
            super::tx::Exec::Tx(cell) => cell.hold().map(super::tx::ExecTx::Shared),
        }
    }
}

/// Turns on SQLite's query planner stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`) for
/// `connection`.
///
/// Without it the planner reads some bound values while it prepares a statement (a `LIMIT $n`
/// among them), marks the statement as depending on them, and then every new binding of those
/// parameters expires it: each execution of a cached statement parses and plans its SQL again
/// (`sqlite3Reprepare`), which costs more than stepping it. With it, a statement is planned once per connection, independently of
/// the values bound to it: the same plans our keyset indexes were designed for.
async fn stable_plans(connection: &mut sqlx::SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = connection.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr();
    let mut enabled: std::ffi::c_int = 0;
    // SAFETY: `db` is this connection's open handle, held exclusively through `handle` for the
    // call; `SQLITE_DBCONFIG_ENABLE_QPSG` takes an int (1: on) and an `int*` for the new state.
    let rc = unsafe {
        libsqlite3_sys::sqlite3_db_config(
            db,
            libsqlite3_sys::SQLITE_DBCONFIG_ENABLE_QPSG,
            1 as std::ffi::c_int,
            &mut enabled as *mut std::ffi::c_int,
        )
    };
    if rc != libsqlite3_sys::SQLITE_OK || enabled != 1 {
        return Err(sqlx::Error::Configuration(
            "SQLite refused the query planner stability guarantee".into(),
        ));
    }
    Ok(())
}

/// Whether `connection` plans statements independently of bound values (see [`stable_plans`]).
#[cfg(test)]
async fn plans_are_stable(connection: &mut sqlx::SqliteConnection) -> bool {
    let mut handle = connection.lock_handle().await.unwrap();
    let db = handle.as_raw_handle().as_ptr();
    let mut enabled: std::ffi::c_int = -1;
    // SAFETY: as in `stable_plans`; -1 leaves the setting as it is and only reads it.
    let rc = unsafe {
        libsqlite3_sys::sqlite3_db_config(
            db,
            libsqlite3_sys::SQLITE_DBCONFIG_ENABLE_QPSG,
            -1 as std::ffi::c_int,
            &mut enabled as *mut std::ffi::c_int,
        )
    };
    rc == libsqlite3_sys::SQLITE_OK && enabled == 1
}

/// SQLite: every migration past `PRAGMA user_version`, each in its own transaction.
async fn migrate_sqlite(writer: &SqlitePool) -> Result<(), StoreError> {
    let (version,): (i64,) = sqlx::query_as("PRAGMA user_version")
        .fetch_one(writer)
        .await?;
    if version as usize > MIGRATIONS.len() {
        return Err(StoreError::TooNew {
            found: version,
            known: MIGRATIONS.len(),
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
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

/// PostgreSQL: every migration past `schema_migrations`, each in its own transaction that first
/// takes a transaction-scoped advisory lock, so replicas starting at once apply each exactly once
/// (the lock comes before any `CREATE`: concurrent `CREATE TABLE IF NOT EXISTS` still collide).
async fn migrate_postgres(pool: &PgPool) -> Result<(), StoreError> {
    loop {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        let (version,): (i64,) =
            sqlx::query_as("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
                .fetch_one(&mut *tx)
                .await?;
        if version as usize > PG_MIGRATIONS.len() {
            return Err(StoreError::TooNew {
                found: version,
                known: PG_MIGRATIONS.len(),
            });
        }
        let Some(sql) = PG_MIGRATIONS.get(version as usize) else {
            tx.commit().await?;
            return Ok(());
        };
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        // When a migration ran is the database's own wall time, not the server's clock.
        sqlx::query(
            "INSERT INTO schema_migrations (version, applied_at) \
             VALUES ($1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)",
        )
        .bind(version + 1)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
}

/// The span of one store call (`on_backend!`), named for the store method `path` names (the type
/// name of an item inside it); nothing when the request is not traced.
pub(crate) fn store_span(db: &Db, path: &'static str) -> crate::telemetry::request::Child {
    let system = match db {
        Db::Sqlite { .. } => "sqlite",
        Db::Postgres(_) => "postgresql",
    };
    crate::telemetry::request::store(system, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pooled SQLite connection, the writer and each reader, plans statements once and
    /// independently of bound values: a new `LIMIT $n` of a page query does not re-prepare it. The
    /// writer keeps its statement journals in memory.
    #[tokio::test]
    async fn every_sqlite_connection_has_stable_plans() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let Db::Sqlite { writer, reader, .. } = Db::open(&url).await.unwrap() else {
            panic!("a SQLite URL opens SQLite");
        };
        assert!(plans_are_stable(&mut writer.acquire().await.unwrap()).await);
        let (temp_store,): (i64,) = sqlx::query_as("PRAGMA temp_store")
            .fetch_one(&writer)
            .await
            .unwrap();
        assert_eq!(temp_store, 2, "the writer's temporary files are in memory");
        let mut readers = Vec::new();
        for _ in 0..SQLITE_READERS {
            readers.push(reader.acquire().await.unwrap());
        }
        for reader in &mut readers {
            assert!(plans_are_stable(reader.connection()).await);
        }
    }

    /// Migration 9 counts the reactions and attachments a database already holds, and its
    /// triggers keep the counts exact: a repeated reaction (`ON CONFLICT DO NOTHING`) and a
    /// removal of nothing leave them alone.
    #[tokio::test]
    async fn message_counts_are_backfilled_and_kept() {
        use sqlx::{ConnectOptions, Connection};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let url = format!("sqlite://{}", path.display());
        let mut old = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true)
            .foreign_keys(false)
            .connect()
            .await
            .unwrap();
        for sql in &MIGRATIONS[..8] {
            sqlx::raw_sql(*sql).execute(&mut old).await.unwrap();
        }
        sqlx::raw_sql(
            "PRAGMA user_version = 8;
             INSERT INTO messages (id, workspace_id, channel_id, author_id, content, created_at)
                 VALUES ('msg_1', 'wsp_1', 'chn_1', 'agt_1', 'one', 1),
                        ('msg_2', 'wsp_1', 'chn_1', 'agt_1', 'two', 2),
                        ('msg_3', 'wsp_1', 'chn_1', 'agt_1', 'three', 3);
             INSERT INTO reactions (message_id, emoji, member_id, created_at)
                 VALUES ('msg_1', ':+1:', 'agt_1', 4), ('msg_1', ':+1:', 'agt_2', 5),
                        ('msg_1', ':tada:', 'agt_1', 6);
             INSERT INTO attachments (id, message_id, position, name, media_type, size, content, created_at)
                 VALUES ('att_1', 'msg_2', 0, 'a.txt', 'text/plain', 1, x'61', 7);",
        )
        .execute(&mut old)
        .await
        .unwrap();
        old.close().await.unwrap();

        let db = Db::open(&url).await.unwrap();
        let Db::Sqlite { writer, .. } = &db else {
            panic!("a SQLite URL opens SQLite");
        };
        let counts = || async {
            sqlx::query_as::<_, (String, i64, i64)>(
                "SELECT id, reaction_count, attachment_count FROM messages ORDER BY id",
            )
            .fetch_all(writer)
            .await
            .unwrap()
        };
        let row =
            |id: &str, reactions: i64, attachments: i64| (id.to_string(), reactions, attachments);
        assert_eq!(
            counts().await,
            [row("msg_1", 3, 0), row("msg_2", 0, 1), row("msg_3", 0, 0)],
            "backfilled"
        );
        sqlx::raw_sql(
            "INSERT INTO reactions (message_id, emoji, member_id, created_at)
                 VALUES ('msg_1', ':+1:', 'agt_1', 8) ON CONFLICT DO NOTHING;
             DELETE FROM reactions WHERE message_id = 'msg_3';
             DELETE FROM reactions WHERE message_id = 'msg_1' AND emoji = ':tada:';
             INSERT INTO reactions (message_id, emoji, member_id, created_at)
                 VALUES ('msg_3', ':eyes:', 'agt_2', 9);
             INSERT INTO attachments (id, message_id, position, name, media_type, size, content, created_at)
                 VALUES ('att_2', 'msg_3', 0, 'b.txt', 'text/plain', 1, x'62', 10);",
        )
        .execute(writer)
        .await
        .unwrap();
        assert_eq!(
            counts().await,
            [row("msg_1", 2, 0), row("msg_2", 0, 1), row("msg_3", 1, 1)],
            "kept by the triggers"
        );
        db.close().await;
    }
}
