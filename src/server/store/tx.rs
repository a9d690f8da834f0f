//! One transaction for a whole request: a mutation's effects and its idempotency receipt commit
//! together, or not at all.
//!
//! [`Store::atomically`] begins a transaction on the writer and runs the request inside a
//! task-local scope holding it. Inside that scope every store method runs its statements in that
//! transaction: `on_backend!` (`db.rs`) binds `writer` and `reader` to an
//! [`Exec::Tx`] instead of the pools, a method's own `writer.begin()` joins the request's
//! transaction ([`ExecTx::Shared`]) and its `commit` leaves the commit to the request, and the
//! caller-thread reads (`raw.rs`, which cannot see the transaction's writes) are not used. Outside
//! a scope, [`Exec::Pool`] is the pool itself.
//!
//! The transaction is one connection used by one request: a second use while one holds it (a
//! store method called while another's `begin()` is open) is refused with an error, never a
//! wait that could not end. A method's explicit `rollback` inside the request's transaction is
//! an error too: its writes cannot be undone apart from the request's, so the request fails and
//! all of it is rolled back.

use std::future::Future;
use std::sync::Arc;

use sqlx::{Postgres, Sqlite, Transaction};

use super::StoreError;

/// A request's transaction, while the request runs.
pub(crate) struct TxCell<DB: sqlx::Database>(tokio::sync::Mutex<Option<Transaction<'static, DB>>>);

impl<DB: sqlx::Database> std::fmt::Debug for TxCell<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TxCell")
    }
}

impl<DB: sqlx::Database> TxCell<DB> {
    pub(crate) fn hold(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, Option<Transaction<'static, DB>>>, sqlx::Error> {
        let held = self.0.try_lock().map_err(|_| {
            sqlx::Error::Protocol(
                "the request's transaction was used while a statement of its own held it".into(),
            )
        })?;
        match held.is_some() {
            true => Ok(held),
            false => Err(sqlx::Error::Protocol(
                "the request's transaction is over".into(),
            )),
        }
    }
}

/// The transaction of the request this task runs, on either backend.
#[derive(Clone)]
pub(crate) enum RequestTx {
    Sqlite(Arc<TxCell<Sqlite>>),
    Postgres(Arc<TxCell<Postgres>>),
}

tokio::task_local! {
    static REQUEST_TX: RequestTx;
}

/// The transaction of the request this task runs, if it runs in one.
pub(crate) fn current() -> Option<RequestTx> {
    REQUEST_TX.try_with(RequestTx::clone).ok()
}

impl RequestTx {
    pub(crate) fn sqlite(&self) -> Option<&TxCell<Sqlite>> {
        match self {
            RequestTx::Sqlite(cell) => Some(cell),
            RequestTx::Postgres(_) => None,
        }
    }

    pub(crate) fn postgres(&self) -> Option<&TxCell<Postgres>> {
        match self {
            RequestTx::Postgres(cell) => Some(cell),
            RequestTx::Sqlite(_) => None,
        }
    }
}

/// Where a store method's statements run: the pool `P`, or the request's transaction.
pub(crate) enum Exec<'a, P, DB: sqlx::Database> {
    Pool(&'a P),
    Tx(&'a TxCell<DB>),
}

impl<'a, P, DB: sqlx::Database> Exec<'a, P, DB> {
    /// The request's transaction when `tx` holds one of this backend, else `pool`.
    pub(crate) fn of(pool: &'a P, tx: Option<&'a TxCell<DB>>) -> Exec<'a, P, DB> {
        match tx {
            Some(cell) => Exec::Tx(cell),
            None => Exec::Pool(pool),
        }
    }
}

impl<P, DB: sqlx::Database> std::fmt::Debug for Exec<'_, P, DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exec::Pool(_) => "Exec::Pool",
            Exec::Tx(_) => "Exec::Tx",
        })
    }
}

/// A store method's own transaction, or its part of the request's.
pub(crate) enum ExecTx<'a, DB: sqlx::Database> {
    Own(Transaction<'static, DB>),
    Shared(tokio::sync::MutexGuard<'a, Option<Transaction<'static, DB>>>),
}

impl<DB: sqlx::Database> ExecTx<'_, DB> {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            ExecTx::Own(tx) => tx.commit().await,
            // The request commits.
            ExecTx::Shared(_) => Ok(()),
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            ExecTx::Own(tx) => tx.rollback().await,
            ExecTx::Shared(_) => Err(sqlx::Error::Protocol(
                "a store method rolled back inside the request's transaction".into(),
            )),
        }
    }
}

impl<DB: sqlx::Database> std::ops::Deref for ExecTx<'_, DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        match self {
            ExecTx::Own(tx) => tx,
            ExecTx::Shared(held) => held.as_ref().expect("held only while open"),
        }
    }
}

impl<DB: sqlx::Database> std::ops::DerefMut for ExecTx<'_, DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        match self {
            ExecTx::Own(tx) => tx,
            ExecTx::Shared(held) => held.as_mut().expect("held only while open"),
        }
    }
}

impl<'a, DB: sqlx::Database> Exec<'a, sqlx::Pool<DB>, DB> {
    pub(crate) async fn begin(&self) -> Result<ExecTx<'a, DB>, sqlx::Error> {
        match self {
            Exec::Pool(pool) => pool.begin().await.map(ExecTx::Own),
            Exec::Tx(cell) => cell.hold().map(ExecTx::Shared),
        }
    }
}

/// `sqlx::Executor` for `&Exec` over pool type `$pool` of backend `$db`: the pool's own, or the
/// statement run on the request's transaction (its rows collected, then streamed: every
/// statement of the store is bounded). `db.rs` invokes it for its SQLite readers.
macro_rules! executor {
    ($pool:ty, $db:ty, $result:ty, $row:ty, $statement:ty, $type_info:ty) => {
        impl<'c, 'a: 'c> ::sqlx::Executor<'c>
            for &'c $crate::server::store::tx::Exec<'a, $pool, $db>
        {
            type Database = $db;

            fn fetch_many<'e, 'q: 'e, E>(
                self,
                query: E,
            ) -> ::futures_util::stream::BoxStream<
                'e,
                Result<::sqlx::Either<$result, $row>, ::sqlx::Error>,
            >
            where
                'c: 'e,
                E: 'q + ::sqlx::Execute<'q, $db>,
            {
                match self {
                    $crate::server::store::tx::Exec::Pool(pool) => {
                        ::sqlx::Executor::fetch_many(*pool, query)
                    }
                    $crate::server::store::tx::Exec::Tx(cell) => {
                        let cell = *cell;
                        let all = async move {
                            let mut held = cell.hold()?;
                            let connection: &mut <$db as sqlx::Database>::Connection =
                                held.as_mut().expect("held only while open");
                            ::futures_util::TryStreamExt::try_collect::<Vec<_>>(
                                ::sqlx::Executor::fetch_many(connection, query),
                            )
                            .await
                        };
                        let once = ::futures_util::stream::once(all);
                        let rows = ::futures_util::TryStreamExt::map_ok(once, |all| {
                            ::futures_util::stream::iter(all.into_iter().map(Ok))
                        });
                        ::futures_util::StreamExt::boxed(::futures_util::TryStreamExt::try_flatten(
                            rows,
                        ))
                    }
                }
            }

            fn fetch_optional<'e, 'q: 'e, E>(
                self,
                query: E,
            ) -> ::futures_util::future::BoxFuture<'e, Result<Option<$row>, ::sqlx::Error>>
            where
                'c: 'e,
                E: 'q + ::sqlx::Execute<'q, $db>,
            {
                match self {
                    $crate::server::store::tx::Exec::Pool(pool) => {
                        ::sqlx::Executor::fetch_optional(*pool, query)
                    }
                    $crate::server::store::tx::Exec::Tx(cell) => {
                        let cell = *cell;
                        Box::pin(async move {
                            let mut held = cell.hold()?;
                            let connection: &mut <$db as sqlx::Database>::Connection =
                                held.as_mut().expect("held only while open");
                            ::sqlx::Executor::fetch_optional(connection, query).await
                        })
                    }
                }
            }

            fn prepare_with<'e>(
                self,
                sql: ::sqlx::SqlStr,
                parameters: &'e [$type_info],
            ) -> ::futures_util::future::BoxFuture<'e, Result<$statement, ::sqlx::Error>>
            where
                'c: 'e,
            {
                match self {
                    $crate::server::store::tx::Exec::Pool(pool) => {
                        ::sqlx::Executor::prepare_with(*pool, sql, parameters)
                    }
                    $crate::server::store::tx::Exec::Tx(cell) => {
                        let cell = *cell;
                        Box::pin(async move {
                            let mut held = cell.hold()?;
                            let connection: &mut <$db as sqlx::Database>::Connection =
                                held.as_mut().expect("held only while open");
                            ::sqlx::Executor::prepare_with(connection, sql, parameters).await
                        })
                    }
                }
            }
        }
    };
}
pub(crate) use executor;

executor!(
    sqlx::SqlitePool,
    Sqlite,
    sqlx::sqlite::SqliteQueryResult,
    sqlx::sqlite::SqliteRow,
    sqlx::sqlite::SqliteStatement,
    sqlx::sqlite::SqliteTypeInfo
);
executor!(
    sqlx::PgPool,
    Postgres,
    sqlx::postgres::PgQueryResult,
    sqlx::postgres::PgRow,
    sqlx::postgres::PgStatement,
    sqlx::postgres::PgTypeInfo
);

/// Runs `work` with `tx` as the request's transaction, then commits `tx` when `work` answers
/// `Ok((value, true))`; otherwise it is rolled back (`Store::atomically`).
pub(crate) async fn run_in<T, DB: sqlx::Database, Fut>(
    tx: Transaction<'static, DB>,
    wrap: fn(Arc<TxCell<DB>>) -> RequestTx,
    work: Fut,
) -> Result<T, StoreError>
where
    Fut: Future<Output = Result<(T, bool), StoreError>>,
{
    let cell = Arc::new(TxCell(tokio::sync::Mutex::new(Some(tx))));
    let done = REQUEST_TX.scope(wrap(cell.clone()), work).await;
    let tx = cell.0.lock().await.take();
    settle(tx, done).await
}

/// Commits `tx` when `done` says so; otherwise it is rolled back.
async fn settle<T, DB: sqlx::Database>(
    tx: Option<Transaction<'static, DB>>,
    done: Result<(T, bool), StoreError>,
) -> Result<T, StoreError> {
    let tx = tx.expect("the transaction is taken once");
    match done {
        Ok((value, true)) => {
            tx.commit().await?;
            Ok(value)
        }
        Ok((value, false)) => {
            tx.rollback().await?;
            Ok(value)
        }
        Err(error) => {
            // Dropped: sqlx rolls it back.
            drop(tx);
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Claim, Store};

    /// A store with one agent, and the agent's id.
    async fn store() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _, agent, _) = super::super::tests::people(dir.path()).await;
        (dir, store, agent)
    }

    async fn claim(store: &Store, agent: &str, key: &str) -> Claim {
        store
            .claim_idempotent(
                super::super::Principal::Agent(agent),
                "task.create",
                key,
                b"f",
                1_000,
                0,
            )
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_store_methods_of_a_scope_commit_together_or_not_at_all() {
        let (_dir, store, agent) = store().await;
        // Rolled back: the claim made inside the scope is gone, the key is free.
        let inside = store
            .atomically(|| async { Ok((claim(&store, &agent, "req-rolled-back").await, false)) })
            .await
            .unwrap();
        assert_eq!(inside, Claim::Acquired);
        assert_eq!(
            claim(&store, &agent, "req-rolled-back").await,
            Claim::Acquired
        );
        // Committed: the claim and the answer recorded inside the scope are there together.
        store
            .atomically(|| async {
                assert_eq!(
                    claim(&store, &agent, "req-committed").await,
                    Claim::Acquired
                );
                store
                    .finish_idempotent(
                        super::super::Principal::Agent(&agent),
                        "task.create",
                        "req-committed",
                        200,
                        "{}",
                    )
                    .await?;
                Ok(((), true))
            })
            .await
            .unwrap();
        assert_eq!(
            claim(&store, &agent, "req-committed").await,
            Claim::Done {
                status: 200,
                response: "{}".into()
            }
        );
        // A failure inside the scope rolls it back and is the answer.
        let failed = store
            .atomically(|| async {
                assert_eq!(claim(&store, &agent, "req-failed").await, Claim::Acquired);
                Err::<((), bool), _>(super::StoreError::Corrupt { column: "test" })
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(claim(&store, &agent, "req-failed").await, Claim::Acquired);
    }

    #[tokio::test]
    async fn a_second_use_of_the_request_transaction_while_one_holds_it_fails_at_once() {
        let (_dir, store, _) = store().await;
        let refused = store
            .atomically(|| async {
                let current = super::current().unwrap();
                let cell = current.sqlite().unwrap();
                let held = cell.hold().unwrap();
                // While a store method's `begin()` holds it, any other statement is refused.
                let second = cell.hold().map(|_| ()).unwrap_err();
                drop(held);
                Ok((second.to_string(), false))
            })
            .await
            .unwrap();
        assert!(refused.contains("was used while"), "{refused}");
        assert!(super::current().is_none(), "the scope ended with the call");
    }
}
