//! Idempotency records: `(agent, action, key)` → the fingerprint of the first payload and, once it
//! finished, its response.

use sqlx::Row;

use super::{Store, StoreError};

/// What a key already holds when a request claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key was free; this request owns it and must [`Store::finish_idempotent`] it.
    Acquired,
    /// The key holds another payload.
    Mismatch,
    /// The first request with this key has not finished.
    InProgress,
    /// The first request finished with this status and envelope.
    Done { status: u16, response: String },
}

impl Store {
    /// Claims `key` for `(agent_id, action)` with `fingerprint`, in one writer transaction, and
    /// prunes records older than `expire_before_ms` on the way.
    pub async fn claim_idempotent(
        &self,
        agent_id: &str,
        action: &str,
        key: &str,
        fingerprint: &[u8],
        now_ms: i64,
        expire_before_ms: i64,
    ) -> Result<Claim, StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(expire_before_ms)
            .execute(&mut *tx)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (agent_id, action, idempotency_key, fingerprint, state, created_at) VALUES ($1, $2, $3, $4, 'running', $5) \
             ON CONFLICT (agent_id, action, idempotency_key) DO NOTHING",
        )
        .bind(agent_id)
        .bind(action)
        .bind(key)
        .bind(fingerprint)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        let claim = if inserted.rows_affected() == 1 {
            Claim::Acquired
        } else {
            let row = sqlx::query("SELECT fingerprint, state, status_code, response FROM idempotency_keys WHERE agent_id = $1 AND action = $2 AND idempotency_key = $3")
                .bind(agent_id)
                .bind(action)
                .bind(key)
                .fetch_one(&mut *tx)
                .await?;
            let stored: Vec<u8> = row.try_get(0)?;
            let state: String = row.try_get(1)?;
            if stored != fingerprint {
                Claim::Mismatch
            } else if state == "running" {
                Claim::InProgress
            } else {
                let status: i64 = row.try_get(2)?;
                Claim::Done {
                    status: status as u16,
                    response: row.try_get(3)?,
                }
            }
        };
        tx.commit().await?;
        Ok(claim)
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
        sqlx::query("UPDATE idempotency_keys SET state = 'done', status_code = $4, response = $5 WHERE agent_id = $1 AND action = $2 AND idempotency_key = $3")
            .bind(agent_id)
            .bind(action)
            .bind(key)
            .bind(i64::from(status))
            .bind(response)
            .execute(&self.writer)
            .await?;
        Ok(())
    }
}
