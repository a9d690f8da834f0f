//! SQLite reads on the caller's thread: the store's hottest reads (a task by id, a page of a
//! conversation) without a round trip to a sqlx worker thread.
//!
//! sqlx runs every SQLite statement on the connection's own worker thread: the request's task
//! sends the statement over a channel, the worker wakes, steps it, and wakes the task again. On a
//! busy daemon those two wake-ups cost more than the indexed read itself. Here a read-only
//! connection of the same database file is taken from an idle list, the statement (prepared once
//! per connection and kept) is bound and stepped right here, and the connection goes back: no
//! `await`, no thread crossing. Only bounded statements come here (one row by key, or a page with
//! `LIMIT`), so the caller's thread is held for about as long as the rows take to decode.
//!
//! Never a wait: the connections have no busy timeout, and a read that SQLite answers with
//! `SQLITE_BUSY` or `SQLITE_LOCKED` (a WAL being recovered, a checkpoint resetting it), or that
//! finds every one of the [`RAW_READERS`] connections in use, is not run here at all: the caller
//! runs the same statement through the pooled sqlx readers, which do wait (5 s busy timeout).

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_int};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use libsqlite3_sys as ffi;

use super::StoreError;

/// Connections open at most; past it a read goes to the pooled readers.
pub(crate) const RAW_READERS: usize = 8;

/// One bound parameter: `$N` takes `binds[N - 1]`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bind<'a> {
    Text(&'a str),
    Int(i64),
}

/// The read-only connections of one SQLite database file.
pub(crate) struct RawReaders {
    path: CString,
    idle: Mutex<Vec<RawConnection>>,
    /// Connections that exist (idle or in use).
    open: AtomicUsize,
    closed: AtomicBool,
}

impl std::fmt::Debug for RawReaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawReaders")
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Why a statement failed in SQLite itself.
#[derive(Debug, thiserror::Error)]
#[error("SQLite error {code}: {message}")]
pub struct RawError {
    code: c_int,
    message: String,
}

impl RawReaders {
    /// Opens the first connection now, so a file that cannot be read fails the start.
    pub(crate) fn open(path: &std::path::Path) -> Result<RawReaders, StoreError> {
        let bytes = crate::platform::fs::os_str_bytes(path.as_os_str());
        let path = CString::new(bytes).map_err(|_| {
            StoreError::Raw(RawError {
                code: ffi::SQLITE_CANTOPEN,
                message: "the database path contains a NUL byte".into(),
            })
        })?;
        let first = RawConnection::open(&path)?;
        Ok(RawReaders {
            path,
            idle: Mutex::new(vec![first]),
            open: AtomicUsize::new(1),
            closed: AtomicBool::new(false),
        })
    }

    /// Runs `sql` with `binds` and maps every row with `map`, here and now. `None`: not run,
    /// because SQLite was busy or every connection is in use; the caller runs it elsewhere.
    ///
    /// `sql` is a literal of the program, so the statements kept per connection are bounded by
    /// the program's text.
    pub(crate) fn query<T>(
        &self,
        caller: &'static str,
        sql: &'static str,
        binds: &[Bind<'_>],
        mut map: impl FnMut(&RawRow<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<Vec<T>>, StoreError> {
        let _span = crate::telemetry::request::store("sqlite", caller);
        let Some(mut connection) = self.take() else {
            return Ok(None);
        };
        let result = connection.run(sql, binds, &mut map);
        match result {
            // SQLite's own failure (corruption, I/O): this connection is not reused.
            Err(StoreError::Raw(_)) => self.discard(connection),
            _ => self.give_back(connection),
        }
        result
    }

    /// Closes the idle connections, and every one given back from now on.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let idle = std::mem::take(&mut *self.idle.lock().expect("no panic holds it"));
        self.open.fetch_sub(idle.len(), Ordering::AcqRel);
    }

    fn take(&self) -> Option<RawConnection> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        if let Some(connection) = self.idle.lock().expect("no panic holds it").pop() {
            return Some(connection);
        }
        if self.open.fetch_add(1, Ordering::AcqRel) >= RAW_READERS {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        match RawConnection::open(&self.path) {
            Ok(connection) => Some(connection),
            Err(error) => {
                // Not one more connection now (out of file descriptors, say): the pooled
                // readers take the statement.
                self.open.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!(%error, "cannot open a read connection of the database; the pool reads instead");
                None
            }
        }
    }

    fn give_back(&self, connection: RawConnection) {
        if self.closed.load(Ordering::Acquire) {
            return self.discard(connection);
        }
        self.idle
            .lock()
            .expect("no panic holds it")
            .push(connection);
    }

    fn discard(&self, connection: RawConnection) {
        drop(connection);
        self.open.fetch_sub(1, Ordering::AcqRel);
    }

    /// Takes every connection that may be open and keeps them until the guard drops: reads then
    /// go to the pooled readers.
    #[cfg(test)]
    pub(crate) fn exhaust(&self) -> Vec<impl Drop + '_> {
        struct Held<'r>(&'r RawReaders, Option<RawConnection>);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                if let Some(connection) = self.1.take() {
                    self.0.give_back(connection);
                }
            }
        }
        std::iter::from_fn(|| self.take().map(|c| Held(self, Some(c)))).collect()
    }
}

/// A prepared statement kept on its connection, with where each of its parameters comes from.
struct Prepared {
    statement: *mut ffi::sqlite3_stmt,
    /// For parameter `i + 1`: the index into the binds.
    sources: Vec<usize>,
}

/// One read-only connection and the statements prepared on it.
struct RawConnection {
    db: *mut ffi::sqlite3,
    /// Keyed by the address and length of the `&'static str` SQL.
    prepared: HashMap<(usize, usize), Prepared>,
}

// SAFETY: the connection is opened with `SQLITE_OPEN_NOMUTEX` (SQLite's multi-thread mode): it
// may move between threads as long as one thread uses it at a time, which `&mut self` ensures.
unsafe impl Send for RawConnection {}

impl RawConnection {
    fn open(path: &CStr) -> Result<RawConnection, StoreError> {
        let mut db = std::ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READONLY | ffi::SQLITE_OPEN_NOMUTEX;
        // SAFETY: `path` is NUL-terminated; `db` receives a handle (also on failure, to be
        // closed).
        let rc = unsafe { ffi::sqlite3_open_v2(path.as_ptr(), &mut db, flags, std::ptr::null()) };
        let connection = RawConnection {
            db,
            prepared: HashMap::new(),
        };
        if rc != ffi::SQLITE_OK {
            return Err(connection.error(rc));
        }
        let mut enabled: c_int = 0;
        // SAFETY: `db` is open and ours; the same plans as every pooled connection (QPSG, see
        // `db::stable_plans`), and extended result codes for the error text.
        let rc = unsafe {
            ffi::sqlite3_extended_result_codes(db, 1);
            ffi::sqlite3_db_config(
                db,
                ffi::SQLITE_DBCONFIG_ENABLE_QPSG,
                1 as c_int,
                &mut enabled as *mut c_int,
            )
        };
        if rc != ffi::SQLITE_OK || enabled != 1 {
            return Err(connection.error(rc));
        }
        Ok(connection)
    }

    fn error(&self, code: c_int) -> StoreError {
        // SAFETY: `sqlite3_errmsg` accepts any handle this connection holds (NULL included) and
        // returns a NUL-terminated string valid until the next call on it.
        let message = unsafe {
            let text = ffi::sqlite3_errmsg(self.db);
            if text.is_null() {
                String::new()
            } else {
                CStr::from_ptr(text).to_string_lossy().into_owned()
            }
        };
        StoreError::Raw(RawError { code, message })
    }

    fn run<T>(
        &mut self,
        sql: &'static str,
        binds: &[Bind<'_>],
        map: &mut impl FnMut(&RawRow<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<Vec<T>>, StoreError> {
        // Preparing reads the schema: a locked database can refuse it too.
        let Some(key) = self.prepare(sql)? else {
            return Ok(None);
        };
        let Prepared { statement, sources } = &self.prepared[&key];
        let statement = *statement;
        // Reset and unbound on every way out (a mapper's error or panic included): the binds
        // are borrowed only for this call.
        let running = Running(statement);
        for (index, &source) in sources.iter().enumerate() {
            let Some(&bind) = binds.get(source) else {
                return Err(self.error_text(
                    ffi::SQLITE_RANGE,
                    "a statement parameter has no bound value",
                ));
            };
            let position = index as c_int + 1;
            // SAFETY: `statement` is a live statement of this connection; a text is bound
            // without a copy (`SQLITE_STATIC`) and unbound by `Running` before `binds` ends.
            let rc = unsafe {
                match bind {
                    Bind::Int(value) => ffi::sqlite3_bind_int64(statement, position, value),
                    Bind::Text(text) => ffi::sqlite3_bind_text(
                        statement,
                        position,
                        text.as_ptr().cast(),
                        c_int::try_from(text.len()).unwrap_or(c_int::MAX),
                        ffi::SQLITE_STATIC(),
                    ),
                }
            };
            if rc != ffi::SQLITE_OK {
                return Err(self.error(rc));
            }
        }
        let mut rows = Vec::new();
        loop {
            // SAFETY: as above; the statement is bound and owned by this connection.
            let rc = unsafe { ffi::sqlite3_step(statement) };
            match rc & 0xff {
                ffi::SQLITE_ROW => rows.push(map(&RawRow {
                    statement,
                    _running: std::marker::PhantomData,
                })?),
                ffi::SQLITE_DONE => break,
                ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED => return Ok(None),
                _ => return Err(self.error(rc)),
            }
        }
        drop(running);
        Ok(Some(rows))
    }

    fn error_text(&self, code: c_int, message: &str) -> StoreError {
        StoreError::Raw(RawError {
            code,
            message: message.into(),
        })
    }

    /// The key in `prepared` of the statement of `sql`, prepared on first use; `None` when SQLite
    /// is busy.
    fn prepare(&mut self, sql: &'static str) -> Result<Option<(usize, usize)>, StoreError> {
        let key = (sql.as_ptr() as usize, sql.len());
        if self.prepared.contains_key(&key) {
            return Ok(Some(key));
        }
        let mut statement = std::ptr::null_mut();
        // SAFETY: `sql` is valid UTF-8 of the given length; `statement` receives the handle.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                self.db,
                sql.as_ptr().cast(),
                c_int::try_from(sql.len()).unwrap_or(c_int::MAX),
                ffi::SQLITE_PREPARE_PERSISTENT as std::ffi::c_uint,
                &mut statement,
                std::ptr::null_mut(),
            )
        };
        if matches!(rc & 0xff, ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED) {
            return Ok(None);
        }
        if rc != ffi::SQLITE_OK || statement.is_null() {
            return Err(self.error(rc));
        }
        // `$N` and `?N` name their bind; a bare `?` takes the next one, as sqlx binds them.
        // SAFETY: `statement` is live; a parameter's name is NUL-terminated or NULL.
        let count = unsafe { ffi::sqlite3_bind_parameter_count(statement) };
        let mut sources = Vec::with_capacity(count as usize);
        for position in 1..=count {
            let name = unsafe { ffi::sqlite3_bind_parameter_name(statement, position) };
            let source = if name.is_null() {
                Some(position as usize - 1)
            } else {
                let name = unsafe { CStr::from_ptr(name) }.to_bytes();
                std::str::from_utf8(name.get(1..).unwrap_or_default())
                    .ok()
                    .and_then(|n| n.parse::<usize>().ok())
                    .and_then(|n| n.checked_sub(1))
            };
            let Some(source) = source else {
                // SAFETY: the statement is ours and not kept.
                unsafe { ffi::sqlite3_finalize(statement) };
                return Err(self.error_text(ffi::SQLITE_RANGE, "a statement parameter is unnamed"));
            };
            sources.push(source);
        }
        self.prepared.insert(key, Prepared { statement, sources });
        Ok(Some(key))
    }
}

impl Drop for RawConnection {
    fn drop(&mut self) {
        // SAFETY: every statement is this connection's and finalized once, before the close.
        unsafe {
            for prepared in self.prepared.values() {
                ffi::sqlite3_finalize(prepared.statement);
            }
            ffi::sqlite3_close(self.db);
        }
    }
}

/// Resets and unbinds a running statement when dropped.
struct Running(*mut ffi::sqlite3_stmt);

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: the statement outlives this guard (its connection is borrowed by `run`).
        unsafe {
            ffi::sqlite3_reset(self.0);
            ffi::sqlite3_clear_bindings(self.0);
        }
    }
}

/// The current row of a running statement.
pub(crate) struct RawRow<'s> {
    statement: *mut ffi::sqlite3_stmt,
    _running: std::marker::PhantomData<&'s Running>,
}

impl RawRow<'_> {
    fn is_null(&self, index: usize) -> bool {
        // SAFETY: the statement is on a row; an index past the columns reads as NULL.
        unsafe { ffi::sqlite3_column_type(self.statement, index as c_int) == ffi::SQLITE_NULL }
    }

    fn mismatch(index: usize, wanted: &str) -> sqlx::Error {
        sqlx::Error::ColumnDecode {
            index: index.to_string(),
            source: format!("expected {wanted}").into(),
        }
    }

    pub(crate) fn int(&self, index: usize) -> Result<i64, sqlx::Error> {
        // SAFETY: as in `is_null`.
        match unsafe { ffi::sqlite3_column_type(self.statement, index as c_int) } {
            ffi::SQLITE_INTEGER => {
                Ok(unsafe { ffi::sqlite3_column_int64(self.statement, index as c_int) })
            }
            _ => Err(Self::mismatch(index, "an integer")),
        }
    }

    pub(crate) fn float(&self, index: usize) -> Result<f64, sqlx::Error> {
        // SAFETY: as in `is_null`.
        match unsafe { ffi::sqlite3_column_type(self.statement, index as c_int) } {
            ffi::SQLITE_FLOAT | ffi::SQLITE_INTEGER => {
                Ok(unsafe { ffi::sqlite3_column_double(self.statement, index as c_int) })
            }
            _ => Err(Self::mismatch(index, "a number")),
        }
    }

    pub(crate) fn text(&self, index: usize) -> Result<String, sqlx::Error> {
        self.str(index).map(str::to_string)
    }

    /// The text of column `index`, borrowed from SQLite: it lives as long as this borrow of the
    /// row, which ends before the statement steps again.
    pub(crate) fn str(&self, index: usize) -> Result<&str, sqlx::Error> {
        // SAFETY: as in `is_null`; the text pointer is valid for `bytes` bytes until the next
        // step, and `RawRow` is only lent to a mapper between two steps.
        let bytes = unsafe {
            if ffi::sqlite3_column_type(self.statement, index as c_int) != ffi::SQLITE_TEXT {
                return Err(Self::mismatch(index, "a text"));
            }
            let text = ffi::sqlite3_column_text(self.statement, index as c_int);
            let len = ffi::sqlite3_column_bytes(self.statement, index as c_int);
            if text.is_null() {
                return Err(Self::mismatch(index, "a text"));
            }
            std::slice::from_raw_parts(text, len as usize)
        };
        std::str::from_utf8(bytes).map_err(|_| Self::mismatch(index, "UTF-8 text"))
    }

    pub(crate) fn blob(&self, index: usize) -> Result<Vec<u8>, sqlx::Error> {
        if self.is_null(index) {
            return Err(Self::mismatch(index, "a blob"));
        }
        // SAFETY: as in `text`.
        unsafe {
            let blob = ffi::sqlite3_column_blob(self.statement, index as c_int);
            let len = ffi::sqlite3_column_bytes(self.statement, index as c_int);
            if blob.is_null() || len == 0 {
                return Ok(Vec::new());
            }
            Ok(std::slice::from_raw_parts(blob.cast::<u8>(), len as usize).to_vec())
        }
    }

    pub(crate) fn optional<T>(
        &self,
        index: usize,
        read: impl FnOnce(&Self, usize) -> Result<T, sqlx::Error>,
    ) -> Result<Option<T>, sqlx::Error> {
        if self.is_null(index) {
            Ok(None)
        } else {
            read(self, index).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raw.db");
        setup(&path);
        (dir, path)
    }

    /// A database with one table, written through a raw read-write connection.
    fn setup(path: &std::path::Path) {
        let db = writer(path);
        execute(
            db,
            "PRAGMA journal_mode=WAL; CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, note TEXT); \
             INSERT INTO t VALUES ('a', 1, NULL), ('b', 2, 'two'), ('c', 3, 'three');",
        );
        // SAFETY: our connection, no statement open.
        unsafe { ffi::sqlite3_close(db) };
    }

    /// A read-write connection of `path` (created if missing), for the caller to close.
    fn writer(path: &std::path::Path) -> *mut ffi::sqlite3 {
        let path = CString::new(crate::platform::fs::os_str_bytes(path.as_os_str())).unwrap();
        let mut db = std::ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE;
        // SAFETY: `path` is NUL-terminated; `db` receives the handle.
        let rc = unsafe { ffi::sqlite3_open_v2(path.as_ptr(), &mut db, flags, std::ptr::null()) };
        assert_eq!(rc, ffi::SQLITE_OK);
        db
    }

    fn execute(db: *mut ffi::sqlite3, sql: &str) {
        let sql = CString::new(sql).unwrap();
        // SAFETY: `db` is an open connection of this test.
        let rc = unsafe {
            ffi::sqlite3_exec(
                db,
                sql.as_ptr(),
                None,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, ffi::SQLITE_OK);
    }

    const ABOVE: &str = "SELECT id, n, note FROM t WHERE n > $2 AND id <> $1 ORDER BY n";

    fn above(readers: &RawReaders, id: &str, n: i64) -> Option<Vec<(String, i64, Option<String>)>> {
        readers
            .query("test", ABOVE, &[Bind::Text(id), Bind::Int(n)], |row| {
                Ok((row.text(0)?, row.int(1)?, row.optional(2, RawRow::text)?))
            })
            .unwrap()
    }

    #[test]
    fn binds_by_number_reads_every_type_and_keeps_one_statement() {
        let (_dir, path) = database();
        let readers = RawReaders::open(&path).unwrap();
        // `$2` comes first in the text: binds go by number, not by order of appearance.
        assert_eq!(
            above(&readers, "c", 0).unwrap(),
            vec![("a".into(), 1, None), ("b".into(), 2, Some("two".into()))]
        );
        assert_eq!(
            above(&readers, "z", 2).unwrap(),
            vec![("c".into(), 3, Some("three".into()))]
        );
        let idle = readers.idle.lock().unwrap();
        assert_eq!(idle.len(), 1, "one connection served both reads");
        assert_eq!(idle[0].prepared.len(), 1, "the statement was prepared once");
    }

    #[test]
    fn a_wrong_column_type_is_an_error_and_not_a_panic() {
        let (_dir, path) = database();
        let readers = RawReaders::open(&path).unwrap();
        let error = readers
            .query("test", ABOVE, &[Bind::Text("z"), Bind::Int(0)], |row| {
                Ok(row.int(0)?)
            })
            .unwrap_err();
        assert!(error.to_string().contains("database error"), "{error}");
        let missing = readers.query("test", ABOVE, &[Bind::Text("z")], |row| Ok(row.int(1)?));
        assert!(missing.is_err(), "a missing bind is refused");
        // The connection is still good for the next read.
        assert_eq!(above(&readers, "z", 2).unwrap().len(), 1);
    }

    #[test]
    fn every_connection_in_use_means_not_run_here() {
        let (_dir, path) = database();
        let readers = RawReaders::open(&path).unwrap();
        let held = readers.exhaust();
        assert_eq!(held.len(), RAW_READERS, "bounded at the cap");
        assert_eq!(above(&readers, "z", 0), None);
        drop(held);
        assert_eq!(above(&readers, "z", 0).unwrap().len(), 3);
        readers.close();
        assert_eq!(above(&readers, "z", 0), None, "a closed set runs nothing");
        assert_eq!(readers.open.load(Ordering::Acquire), 0);
    }

    /// A connection that cannot be opened leaves the read to the pooled readers: no error, and
    /// the count of open connections as it was.
    #[test]
    fn a_connection_that_cannot_open_means_not_run_here() {
        let (dir, path) = database();
        let readers = RawReaders::open(&path).unwrap();
        // The database's directory gone: no connection opens, the one open stays.
        drop(dir);
        let held = readers.exhaust();
        assert_eq!(held.len(), 1, "only the connection already open");
        assert_eq!(above(&readers, "z", 0), None, "not run here, and no error");
        drop(held);
        assert_eq!(readers.open.load(Ordering::Acquire), 1);
    }

    /// A database SQLite cannot read at once is not waited on: the read is left to the pooled
    /// readers, and the connection stays for the next read.
    #[test]
    fn a_locked_database_is_not_waited_on() {
        let (_dir, path) = database();
        // A rollback journal instead of WAL: a writer's exclusive lock keeps every reader out.
        let db = writer(&path);
        execute(db, "PRAGMA journal_mode=DELETE");
        let readers = RawReaders::open(&path).unwrap();
        execute(db, "BEGIN EXCLUSIVE; UPDATE t SET n = n + 10;");
        let started = std::time::Instant::now();
        assert_eq!(above(&readers, "z", 0), None, "not run here while locked");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "no busy wait"
        );
        assert_eq!(
            readers.idle.lock().unwrap().len(),
            1,
            "the connection is kept"
        );
        execute(db, "COMMIT");
        assert_eq!(above(&readers, "z", 10).unwrap().len(), 3);
        // SAFETY: our connection, no statement open.
        unsafe { ffi::sqlite3_close(db) };
    }

    #[test]
    fn a_sql_error_names_sqlite_and_drops_the_connection() {
        let (_dir, path) = database();
        let readers = RawReaders::open(&path).unwrap();
        let error = readers
            .query("test", "SELECT missing FROM nowhere", &[], |row| {
                Ok(row.int(0)?)
            })
            .unwrap_err();
        let StoreError::Raw(raw) = &error else {
            panic!("{error:?}");
        };
        assert!(raw.to_string().contains("no such table: nowhere"), "{raw}");
        assert_eq!(readers.open.load(Ordering::Acquire), 0);
        assert_eq!(above(&readers, "z", 0).unwrap().len(), 3, "a new one opens");
    }
}
