//! Idempotency records: `(agent, action, key)` → the fingerprint of the first payload and, once it
//! finished, its response.
//!
//! The claim is one `INSERT … ON CONFLICT DO NOTHING`: atomic on both backends, so of any number of
//! concurrent requests with one key (on one server or on several replicas) exactly one acquires it.
//! A claim whose request has not finished after [`RUNNING_LEASE_MS`] belongs to a process that
//! died between claim and finish; the next request with the same payload takes it over. A record
//! older than the retention is a new request's to take, whatever it held; the scheduler pass
//! deletes such records in bounded batches ([`Store::prune_idempotency`]).

use super::{Columns, Store, StoreError, on_backend};

/// How long a `running` claim is honoured before a retry may take it over. Far above any request
/// the server executes (each is a few statements with a 10 s pool acquire bound).
pub const RUNNING_LEASE_MS: i64 = 2 * 60 * 1000;

/// Records one [`Store::prune_idempotency`] call deletes at most.
pub const MAX_PRUNED_PER_PASS: i64 = 1_000;

/// What a key already holds when a request claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key was free (or its claimant's lease ran out); this request owns it and must
    /// [`Store::finish_idempotent`] it.
    Acquired,
    /// The key holds another payload.
    Mismatch,
    /// The first request with this key has not finished.
    InProgress,
    /// The first request finished with this status and envelope.
    Done { status: u16, response: String },
}

impl Store {
    /// Claims `key` for `(agent_id, action)` with `fingerprint` at `now_ms`; a record created
    /// before `expired_before_ms` no longer counts.
    pub async fn claim_idempotent(
        &self,
        agent_id: &str,
        action: &str,
        key: &str,
        fingerprint: &[u8],
        now_ms: i64,
        expired_before_ms: i64,
    ) -> Result<Claim, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            // The record can vanish between the conflict and the read (pruned, or a takeover
            // that rolled back); a second round settles it.
            for _ in 0..3 {
                let inserted = sqlx::query(
                    "INSERT INTO idempotency_keys (agent_id, action, idempotency_key, fingerprint, state, created_at) VALUES ($1, $2, $3, $4, 'running', $5) \
                     ON CONFLICT (agent_id, action, idempotency_key) DO NOTHING",
                )
                .bind(agent_id)
                .bind(action)
                .bind(key)
                .bind(fingerprint)
                .bind(now_ms)
                .execute(writer)
                .await?;
                if inserted.rows_affected() == 1 {
                    return Ok(Claim::Acquired);
                }
                let row = sqlx::query("SELECT fingerprint, state, status_code, response, created_at FROM idempotency_keys WHERE agent_id = $1 AND action = $2 AND idempotency_key = $3")
                    .bind(agent_id)
                    .bind(action)
                    .bind(key)
                    .fetch_optional(writer)
                    .await?;
                let Some(row) = row else { continue };
                let stored: Vec<u8> = row.column(0)?;
                let state: String = row.column(1)?;
                let claimed_at: i64 = row.column(4)?;
                let expired = claimed_at < expired_before_ms;
                let abandoned = state == "running"
                    && stored == fingerprint
                    && claimed_at <= now_ms - RUNNING_LEASE_MS;
                if expired || abandoned {
                    // Take the record over, unless another request just did (it then holds a
                    // newer `created_at`).
                    let taken = sqlx::query(
                        "UPDATE idempotency_keys SET fingerprint = $4, state = 'running', status_code = NULL, response = NULL, created_at = $5 \
                         WHERE agent_id = $1 AND action = $2 AND idempotency_key = $3 AND created_at = $6",
                    )
                    .bind(agent_id)
                    .bind(action)
                    .bind(key)
                    .bind(fingerprint)
                    .bind(now_ms)
                    .bind(claimed_at)
                    .execute(writer)
                    .await?;
                    if taken.rows_affected() == 1 {
                        return Ok(Claim::Acquired);
                    }
                    continue;
                }
                if stored != fingerprint {
                    return Ok(Claim::Mismatch);
                }
                if state != "running" {
                    let status: Option<i64> = row.column(2)?;
                    let response: Option<String> = row.column(3)?;
                    let (Some(status), Some(response)) = (status, response) else {
                        return Err(StoreError::Corrupt {
                            column: "idempotency_keys",
                        });
                    };
                    return Ok(Claim::Done {
                        status: status as u16,
                        response,
                    });
                }
                return Ok(Claim::InProgress);
            }
            Ok(Claim::InProgress)
        })
    }

    /// Records the response of the request that acquired `key`.
    pub async fn finish_idempotent(
        &self,
        agent_id: &str,
        action: &str,
        key: &str,
        status: u16,
        response: &str,
    ) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            sqlx::query("UPDATE idempotency_keys SET state = 'done', status_code = $4, response = $5 WHERE agent_id = $1 AND action = $2 AND idempotency_key = $3")
                .bind(agent_id)
                .bind(action)
                .bind(key)
                .bind(i64::from(status))
                .bind(response)
                .execute(writer)
                .await?;
            Ok(())
        })
    }

    /// Deletes up to [`MAX_PRUNED_PER_PASS`] records created before `before_ms` (a key is reusable
    /// as a new request after that); returns how many went.
    pub async fn prune_idempotency(&self, before_ms: i64) -> Result<u64, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let deleted = sqlx::query(
                "DELETE FROM idempotency_keys WHERE (agent_id, action, idempotency_key) IN \
                 (SELECT agent_id, action, idempotency_key FROM idempotency_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
            )
            .bind(before_ms)
            .bind(MAX_PRUNED_PER_PASS)
            .execute(writer)
            .await?;
            Ok(deleted.rows_affected())
        })
    }
}
