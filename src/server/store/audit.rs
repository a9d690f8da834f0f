//! The audit trail's rows: one per runtime request and operator action, with who, what, the
//! outcome and how long it took; never an input value, content or a credential (the record has
//! no field that could hold one). Written in batches (`server::audit` queues them), read newest
//! first with keyset pages, pruned by age and by count.

use serde::{Deserialize, Serialize};

use super::{Columns, Page, Position, Store, StoreError, on_backend, rfc3339};

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
    let position = Position {
        at_ms: record.at,
        id: record.id.clone(),
    };
    Ok((record, position))
}

/// A record as the operator API shows it (`at` as RFC 3339).
pub fn shown(record: &AuditRecord) -> serde_json::Value {
    let mut value = serde_json::to_value(record).expect("records serialize");
    value["at"] = rfc3339(record.at).into();
    value
}

impl Store {
    /// Appends `records` in one statement (one commit for the whole batch).
    pub async fn insert_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
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
        on_backend!(self, |writer, reader, pg| {
            if pg {
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
                sqlx::query(concat!(
                    "INSERT INTO audit_records (",
                    audit_columns!(),
                    ") SELECT json_extract(value, '$.id'), json_extract(value, '$.at'), \
                     json_extract(value, '$.workspace_id'), json_extract(value, '$.device_id'), \
                     json_extract(value, '$.agent_id'), json_extract(value, '$.verified'), \
                     json_extract(value, '$.family'), json_extract(value, '$.action'), \
                     json_extract(value, '$.outcome'), json_extract(value, '$.key_hash'), \
                     json_extract(value, '$.duration_us') FROM json_each($1)"
                ))
                .bind(&rows)
                .execute(writer)
                .await?;
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
        let (after_ms, after_id) = match after {
            Some(p) => (p.at_ms, p.id.clone()),
            None => (i64::MAX, "\u{10FFFF}".to_string()),
        };
        on_backend!(self, |writer, reader, pg| {
            let rows = match agent_id {
                Some(agent) => sqlx::query(concat!("SELECT ", audit_columns!(),
                    " FROM audit_records WHERE workspace_id = $1 AND agent_id = $2 AND at >= $3 AND (at, id) < ($4, $5) ORDER BY at DESC, id DESC LIMIT $6"))
                    .bind(workspace_id).bind(agent).bind(since_ms).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
                None => sqlx::query(concat!("SELECT ", audit_columns!(),
                    " FROM audit_records WHERE workspace_id = $1 AND at >= $2 AND (at, id) < ($3, $4) ORDER BY at DESC, id DESC LIMIT $5"))
                    .bind(workspace_id).bind(since_ms).bind(after_ms).bind(&after_id).bind((limit + 1) as i64)
                    .fetch_all(reader).await?,
            };
            let rows: Vec<_> = rows.iter().map(audit_row).collect::<Result<_, _>>()?;
            Ok(Page::from_rows(rows, limit))
        })
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
