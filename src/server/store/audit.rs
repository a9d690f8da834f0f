//! The audit trail's rows: one per runtime request and operator action, with who, what, the
//! outcome and how long it took; never an input value, content or a credential (the record has
//! no field that could hold one). Written in batches (`server::audit` queues them), read newest
//! first with keyset pages, pruned by age and by count.

use serde::{Deserialize, Serialize};

use super::shape::{Keyset, Query, Resource, Ties};
use super::{Columns, Page, Position, Store, StoreError, here, on_backend, rfc3339};

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    pub id: String,
    /// Epoch milliseconds when the request arrived.
    pub at: i64,
    pub workspace_id: Option<String>,
    pub device_id: Option<String>,
    pub agent_id: Option<String>,
    /// Whether the workspace and agent were authenticated (`false`: only what the route claimed).
    pub verified: bool,
    /// `actions`, `tools`, `extensions` or `operator`.
    pub family: String,
    /// The action, tool or operator route (ids replaced by `{id}`).
    pub action: String,
    /// `ok`, or the error code of the answer.
    pub outcome: String,
    /// SHA-256 (hex) of the request's idempotency key, if it had one.
    pub key_hash: Option<String>,
    pub duration_us: i64,
}

macro_rules! audit_columns {
    () => {
        "id, at, workspace_id, device_id, agent_id, verified, family, action, outcome, key_hash, duration_us"
    };
}

impl Resource for AuditRecord {
    const TABLE: &'static str = "audit_records";
    const ALIAS: &'static str = "r";
    const COLUMNS: &'static str = audit_columns!();

    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError> {
        audit_row(row)
    }
}

fn audit_row(row: &impl Columns) -> Result<(AuditRecord, Position), StoreError> {
    let record = AuditRecord {
        id: row.column(0)?,
        at: row.column(1)?,
        workspace_id: row.column(2)?,
        device_id: row.column(3)?,
        agent_id: row.column(4)?,
        verified: row.column::<i64>(5)? != 0,
        family: row.column(6)?,
        action: row.column(7)?,
        outcome: row.column(8)?,
        key_hash: row.column(9)?,
        duration_us: row.column(10)?,
    };
    let position = Position::of(record.at, &record.id);
    Ok((record, position))
}

/// A record as the operator API shows it (`at` as RFC 3339).
pub fn shown(record: &AuditRecord) -> serde_json::Value {
    let mut value = serde_json::to_value(record).expect("records serialize");
    value["at"] = rfc3339(record.at).into();
    value
}

/// Rows per SQLite insert statement, largest first: a batch is written as whole statements of
/// these sizes (1,024 rows: 16 statements of 64), so four statement texts are ever prepared.
const SQLITE_CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// `INSERT … VALUES (…), (…)` with `rows` tuples of the record's columns, per `SQLITE_CHUNKS`.
/// The parameters are anonymous `?`: sqlx asks SQLite the name of every parameter it binds, and
/// finding a `$N` name walks the statement's list of names, so 704 named parameters cost more
/// than the insert (`sqlite3_bind_parameter_name`).
static SQLITE_INSERTS: std::sync::LazyLock<[String; 4]> = std::sync::LazyLock::new(|| {
    SQLITE_CHUNKS.map(|rows| {
        let tuple = format!("({})", ["?"; 11].join(", "));
        let tuples: Vec<&str> = (0..rows).map(|_| tuple.as_str()).collect();
        format!(
            "INSERT INTO audit_records ({}) VALUES {}",
            audit_columns!(),
            tuples.join(", ")
        )
    })
});

impl Store {
    /// Appends `records` in one commit: on PostgreSQL one statement over a JSON array; on SQLite a
    /// few multi-row `VALUES` statements in one transaction (a JSON array costs SQLite more than
    /// the inserts: each element is written out as text and every column extracted from it
    /// again).
    pub async fn insert_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        on_backend!(self, |writer, reader, pg| {
            if pg {
                let rows: Vec<serde_json::Value> = records
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "id": r.id, "at": r.at, "workspace_id": r.workspace_id, "device_id": r.device_id,
                            "agent_id": r.agent_id, "verified": i64::from(r.verified), "family": r.family,
                            "action": r.action, "outcome": r.outcome, "key_hash": r.key_hash,
                            "duration_us": r.duration_us,
                        })
                    })
                    .collect();
                let rows = serde_json::Value::from(rows).to_string();
                sqlx::query(concat!(
                    "INSERT INTO audit_records (",
                    audit_columns!(),
                    ") SELECT ",
                    audit_columns!(),
                    " FROM json_to_recordset($1::json) AS x(id text, at bigint, workspace_id text, device_id text, \
                     agent_id text, verified bigint, family text, action text, outcome text, key_hash text, duration_us bigint)"
                ))
                .bind(&rows)
                .execute(writer)
                .await?;
            } else {
                let mut tx = writer.begin().await?;
                let mut rest = records;
                while !rest.is_empty() {
                    let which = SQLITE_CHUNKS
                        .iter()
                        .position(|&rows| rows <= rest.len())
                        .expect("the last chunk is one row");
                    let (chunk, tail) = rest.split_at(SQLITE_CHUNKS[which]);
                    let mut insert = sqlx::query(SQLITE_INSERTS[which].as_str());
                    for r in chunk {
                        insert = insert
                            .bind(&r.id)
                            .bind(r.at)
                            .bind(&r.workspace_id)
                            .bind(&r.device_id)
                            .bind(&r.agent_id)
                            .bind(i64::from(r.verified))
                            .bind(&r.family)
                            .bind(&r.action)
                            .bind(&r.outcome)
                            .bind(&r.key_hash)
                            .bind(r.duration_us);
                    }
                    insert.execute(&mut *tx).await?;
                    rest = tail;
                }
                tx.commit().await?;
            }
            Ok(())
        })
    }

    /// A page of `workspace_id`'s records, newest first, optionally of one agent and from
    /// `since_ms` on.
    pub async fn list_audit(
        &self,
        workspace_id: &str,
        agent_id: Option<&str>,
        since_ms: i64,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<AuditRecord>, StoreError> {
        let order = Keyset {
            time: "r.at",
            id: "r.id",
            ties: Ties::Descending,
            lead: None,
        };
        let query = Query::select::<AuditRecord>("WHERE r.workspace_id = $1 AND r.at >= $2")
            .bind(workspace_id)
            .bind(since_ms)
            .and_some("r.agent_id", agent_id)
            .page(order, after, limit);
        self.page(here!(), query, limit).await
    }

    /// Deletes records older than `before_ms`, then the oldest beyond the newest `keep`; returns
    /// how many went.
    pub async fn prune_audit(&self, before_ms: i64, keep: i64) -> Result<u64, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let aged = sqlx::query("DELETE FROM audit_records WHERE at < $1")
                .bind(before_ms)
                .execute(writer)
                .await?
                .rows_affected();
            let over = sqlx::query(
                "DELETE FROM audit_records WHERE (at, id) < (SELECT at, id FROM audit_records ORDER BY at DESC, id DESC LIMIT 1 OFFSET $1)",
            )
            .bind(keep - 1)
            .execute(writer)
            .await?
            .rows_affected();
            Ok(aged + over)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of every chunk size and a full one (1,024 rows) reads back whole and in order.
    #[tokio::test]
    async fn a_batch_of_any_size_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        let store = Store::open(&url).await.unwrap();
        let record = |n: i64| AuditRecord {
            id: format!("aud_{n:010}"),
            at: 1_000 + n,
            workspace_id: Some("wsp_1".into()),
            device_id: (n % 2 == 0).then(|| format!("dev_{n}")),
            agent_id: (n % 3 == 0).then(|| format!("agt_{n}")),
            verified: n % 2 == 1,
            family: "tools".into(),
            action: format!("action {n}"),
            outcome: "ok".into(),
            key_hash: (n % 5 == 0).then(|| format!("{n:064x}")),
            duration_us: n * 7,
        };
        // 85 = 64 + 16 + 4 + 1: one statement of each size; then a full batch.
        let first: Vec<_> = (0..85).map(record).collect();
        let second: Vec<_> = (85..85 + 1_024).map(record).collect();
        store.insert_audit(&first).await.unwrap();
        store.insert_audit(&second).await.unwrap();
        store.insert_audit(&[]).await.unwrap();
        let page = store
            .list_audit("wsp_1", None, 0, None, 2_000)
            .await
            .unwrap();
        let mut read: Vec<AuditRecord> = page.items;
        read.reverse();
        let written: Vec<AuditRecord> = first.into_iter().chain(second).collect();
        assert_eq!(read, written);
    }

    /// A trail written at schema version 9 reads back whole after the move to a table kept in
    /// `(at, id)` order, and each record then lives in two B-trees: the table and the workspace
    /// index.
    #[tokio::test]
    async fn the_trail_moves_to_its_time_ordered_table_whole() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let url = format!("sqlite://{}", path.display());
        {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true);
            let mut old = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            for sql in &super::super::migrations::MIGRATIONS[..9] {
                sqlx::raw_sql(*sql).execute(&mut old).await.unwrap();
            }
            sqlx::raw_sql("PRAGMA user_version = 9")
                .execute(&mut old)
                .await
                .unwrap();
            for n in 0..3i64 {
                sqlx::query(
                    "INSERT INTO audit_records (id, at, workspace_id, verified, family, action, \
                     outcome, duration_us) VALUES ($1, $2, 'wsp_1', 1, 'tools', 'x', 'ok', $3)",
                )
                .bind(format!("aud_{n:010}"))
                .bind(2_000 - n)
                .bind(n)
                .execute(&mut old)
                .await
                .unwrap();
            }
            old.close().await.unwrap();
        }
        let store = Store::open(&url).await.unwrap();
        let page = store.list_audit("wsp_1", None, 0, None, 10).await.unwrap();
        let read: Vec<(String, i64)> = page.items.iter().map(|r| (r.id.clone(), r.at)).collect();
        assert_eq!(
            read,
            [
                ("aud_0000000000".to_string(), 2_000),
                ("aud_0000000001".to_string(), 1_999),
                ("aud_0000000002".to_string(), 1_998),
            ]
        );
        let super::super::db::Db::Sqlite { writer, .. } = &store.db else {
            unreachable!("a sqlite url")
        };
        let trees: Vec<(String,)> = sqlx::query_as(
            "SELECT name FROM sqlite_schema WHERE tbl_name = 'audit_records' ORDER BY name",
        )
        .fetch_all(writer)
        .await
        .unwrap();
        let trees: Vec<&str> = trees.iter().map(|(name,)| name.as_str()).collect();
        assert_eq!(trees, ["audit_records", "audit_records_by_workspace"]);
        let (sql,): (String,) =
            sqlx::query_as("SELECT sql FROM sqlite_schema WHERE name = 'audit_records'")
                .fetch_one(writer)
                .await
                .unwrap();
        assert!(sql.ends_with("WITHOUT ROWID"), "{sql}");
    }
}
