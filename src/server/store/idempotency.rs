//! Idempotency records: `(agent, action, key)` → the fingerprint of the first payload and, once it
//! finished, its response; a person's writes through the human API keep theirs the same way,
//! keyed by the human, in a table of their own ([`Principal`]).
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

/// Whose key it is: an agent's (the runtime API's) or a person's (the human API's). Each has its
/// own table, so a key never crosses from one to the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal<'a> {
    Agent(&'a str),
    Human(&'a str),
}

impl<'a> Principal<'a> {
    fn id(self) -> &'a str {
        match self {
            Principal::Agent(id) | Principal::Human(id) => id,
        }
    }

    fn sql(self) -> &'static Statements {
        static AGENT: std::sync::LazyLock<Statements> =
            std::sync::LazyLock::new(|| Statements::new("idempotency_keys", "agent_id"));
        static HUMAN: std::sync::LazyLock<Statements> =
            std::sync::LazyLock::new(|| Statements::new("human_idempotency_keys", "human_id"));
        match self {
            Principal::Agent(_) => &AGENT,
            Principal::Human(_) => &HUMAN,
        }
    }
}

/// The statements of one principal's table, written once from one text.
struct Statements {
    insert: &'static str,
    select: &'static str,
    take_over: &'static str,
    finish: &'static str,
    prune: &'static str,
}

impl Statements {
    fn new(table: &str, who: &str) -> Statements {
        // Built once per table, for the life of the process (each lives in a static).
        let write = |sql: &str| -> &'static str {
            let sql = sql.replace("{table}", table).replace("{who}", who);
            Box::leak(sql.into_boxed_str())
        };
        Statements {
            insert: write(
                "INSERT INTO {table} ({who}, action, idempotency_key, fingerprint, state, created_at) VALUES ($1, $2, $3, $4, 'running', $5) \
                 ON CONFLICT ({who}, action, idempotency_key) DO NOTHING",
            ),
            select: write(
                "SELECT fingerprint, state, status_code, response, created_at FROM {table} WHERE {who} = $1 AND action = $2 AND idempotency_key = $3",
            ),
            take_over: write(
                "UPDATE {table} SET fingerprint = $4, state = 'running', status_code = NULL, response = NULL, created_at = $5 \
                 WHERE {who} = $1 AND action = $2 AND idempotency_key = $3 AND created_at = $6",
            ),
            finish: write(
                "UPDATE {table} SET state = 'done', status_code = $4, response = $5 WHERE {who} = $1 AND action = $2 AND idempotency_key = $3",
            ),
            prune: write(
                "DELETE FROM {table} WHERE ({who}, action, idempotency_key) IN \
                 (SELECT {who}, action, idempotency_key FROM {table} WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
            ),
        }
    }
}

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
    /// Claims `key` for `(principal, action)` with `fingerprint` at `now_ms`; a record created
    /// before `expired_before_ms` no longer counts.
    pub async fn claim_idempotent(
        &self,
        principal: Principal<'_>,
        action: &str,
        key: &str,
        fingerprint: &[u8],
        now_ms: i64,
        expired_before_ms: i64,
    ) -> Result<Claim, StoreError> {
        let (sql, who) = (principal.sql(), principal.id());
        on_backend!(self, |writer, reader, pg| {
            // The record can vanish between the conflict and the read (pruned, or a takeover
            // that rolled back); a second round settles it.
            for _ in 0..3 {
                let inserted = sqlx::query(sqlx::AssertSqlSafe(sql.insert))
                    .bind(who)
                    .bind(action)
                    .bind(key)
                    .bind(fingerprint)
                    .bind(now_ms)
                    .execute(writer)
                    .await?;
                if inserted.rows_affected() == 1 {
                    return Ok(Claim::Acquired);
                }
                let row = sqlx::query(sqlx::AssertSqlSafe(sql.select))
                    .bind(who)
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
                    let taken = sqlx::query(sqlx::AssertSqlSafe(sql.take_over))
                        .bind(who)
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
        principal: Principal<'_>,
        action: &str,
        key: &str,
        status: u16,
        response: &str,
    ) -> Result<(), StoreError> {
        let (sql, who) = (principal.sql(), principal.id());
        on_backend!(self, |writer, reader, pg| {
            sqlx::query(sqlx::AssertSqlSafe(sql.finish))
                .bind(who)
                .bind(action)
                .bind(key)
                .bind(i64::from(status))
                .bind(response)
                .execute(writer)
                .await?;
            Ok(())
        })
    }

    /// Deletes up to [`MAX_PRUNED_PER_PASS`] records of each table created before `before_ms` (a
    /// key is reusable as a new request after that); returns how many went.
    pub async fn prune_idempotency(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut pruned = 0;
        for principal in [Principal::Agent(""), Principal::Human("")] {
            let sql = principal.sql();
            pruned += on_backend!(self, |writer, reader, pg| {
                let deleted = sqlx::query(sqlx::AssertSqlSafe(sql.prune))
                    .bind(before_ms)
                    .bind(MAX_PRUNED_PER_PASS)
                    .execute(writer)
                    .await?;
                Ok::<_, StoreError>(deleted.rows_affected())
            })?;
        }
        Ok(pruned)
    }
}
