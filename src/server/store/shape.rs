//! The store's one shape: what every resource's rows share, written once.
//!
//! A resource ([`Resource`]) names its table, its alias, the columns its row mapper reads, and
//! the mapper, which answers the row and its keyset [`Position`]. A statement is a [`Query`]:
//! SQL text with `$N` placeholders (the same text on both backends) and its [`Bind`]s. On those
//! two, each piece is one function here, on both backends:
//!
//! - a lookup ([`Store::one`]) whose not-found is `None`, for the action layer to answer in its
//!   own words;
//! - a keyset page ([`Query::page`] then [`Store::page`]): the order, the cursor's predicate, the
//!   limit-plus-one and the `hasMore`/`nextCursor` rule of [`Page::from_rows`];
//! - an insert that reads back what it wrote ([`Store::insert`]);
//! - a read-check-write ([`Store::change`]): the row read (locked on PostgreSQL), a decision
//!   without SQL, the write, the row read back, in one transaction;
//! - [`Store::exists`] and [`Store::execute`], and, inside a store method's own transaction,
//!   [`bound!`], which makes a `Query` that backend's statement.
//!
//! A new read is a `Query` and a `Resource`. Every statement runs where `on_backend!` puts it:
//! inside a request's transaction ([`Store::atomically`]) when there is one, so a request's
//! insert or change commits with its idempotency receipt and its audit record, or not at all.

use std::borrow::Cow;

use super::{Columns, Page, Position, Store, StoreError, on_backend};

/// A table the store reads whole rows of.
pub(crate) trait Resource: Sized {
    /// The table's name.
    const TABLE: &'static str;
    /// The alias every column of [`Self::COLUMNS`] and every predicate on the table is written
    /// with.
    const ALIAS: &'static str;
    /// The columns [`Self::read`] reads, in its order.
    const COLUMNS: &'static str;

    /// The row and its keyset position.
    fn read(row: &impl Columns) -> Result<(Self, Position), StoreError>;
}

/// Whether ties on a page's time are broken by id ascending (a mixed-direction order, whose
/// cursor is an expanded predicate, index-friendly where a row value is not) or descending (one
/// direction: a row-value comparison).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ties {
    Ascending,
    Descending,
}

/// The order of a keyset page: newest `time` first, ties by `id`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keyset<'k> {
    /// The time expression (epoch milliseconds) the position's `at_ms` is read from.
    pub time: &'k str,
    pub id: &'k str,
    pub ties: Ties,
    /// A column constant in the result that leads the `ORDER BY`, so PostgreSQL walks its index
    /// in order when the query fixes it with `IS NULL`.
    pub lead: Option<&'static str>,
}

/// One bound parameter: `$N` takes the query's `N`th. The optional ones bind SQL `NULL` for
/// `None`, typed (PostgreSQL checks a parameter's type against its column's).
#[derive(Debug, Clone)]
pub(crate) enum Bind<'a> {
    Text(Cow<'a, str>),
    Int(i64),
    MaybeText(Option<Cow<'a, str>>),
    MaybeInt(Option<i64>),
    Bytes(&'a [u8]),
}

impl<'a> From<&'a [u8]> for Bind<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Bind::Bytes(bytes)
    }
}

impl<'a> From<&'a str> for Bind<'a> {
    fn from(text: &'a str) -> Self {
        Bind::Text(Cow::Borrowed(text))
    }
}

impl<'a> From<&'a String> for Bind<'a> {
    fn from(text: &'a String) -> Self {
        Bind::Text(Cow::Borrowed(text))
    }
}

impl From<String> for Bind<'_> {
    fn from(text: String) -> Self {
        Bind::Text(Cow::Owned(text))
    }
}

impl From<i64> for Bind<'_> {
    fn from(value: i64) -> Self {
        Bind::Int(value)
    }
}

impl<'a> From<Option<&'a str>> for Bind<'a> {
    fn from(text: Option<&'a str>) -> Self {
        Bind::MaybeText(text.map(Cow::Borrowed))
    }
}

impl<'a> From<&'a Option<String>> for Bind<'a> {
    fn from(text: &'a Option<String>) -> Self {
        Bind::MaybeText(text.as_deref().map(Cow::Borrowed))
    }
}

impl From<Option<i64>> for Bind<'_> {
    fn from(value: Option<i64>) -> Self {
        Bind::MaybeInt(value)
    }
}

/// One statement: its SQL, with `$N` placeholders, and what they bind.
#[derive(Debug)]
pub(crate) struct Query<'a> {
    sql: String,
    binds: Vec<Bind<'a>>,
}

impl<'a> Query<'a> {
    /// A statement as written; its placeholders start at `$1`.
    pub(crate) fn new(sql: &str) -> Self {
        Query {
            sql: sql.to_owned(),
            binds: Vec::new(),
        }
    }

    /// `SELECT` the resource's columns `FROM` its table, then `rest` (joins, `WHERE …`).
    pub(crate) fn select<R: Resource>(rest: &str) -> Self {
        Query::new(&format!(
            "SELECT {} FROM {} {} {rest}",
            R::COLUMNS,
            R::TABLE,
            R::ALIAS
        ))
    }

    /// The resource's row with id `$1`.
    pub(crate) fn by_id<R: Resource>(id: &'a str) -> Self {
        Query::select::<R>(&format!("WHERE {}.id = $1", R::ALIAS)).bind(id)
    }

    /// The next placeholder binds `value`.
    pub(crate) fn bind(mut self, value: impl Into<Bind<'a>>) -> Self {
        self.binds.push(value.into());
        self
    }

    /// Appends `sql` as written.
    pub(crate) fn push(mut self, sql: &str) -> Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends ` AND {column} = $N`, binding `value` at the next placeholder.
    pub(crate) fn and(self, column: &str, value: impl Into<Bind<'a>>) -> Self {
        let placeholder = self.binds.len() + 1;
        self.push(&format!(" AND {column} = ${placeholder}"))
            .bind(value)
    }

    /// [`Query::and`] when there is a `value`.
    pub(crate) fn and_some(self, column: &str, value: Option<impl Into<Bind<'a>>>) -> Self {
        match value {
            Some(value) => self.and(column, value),
            None => self,
        }
    }

    /// Appends ` AND {column} = $N` for a thread's rows, or ` AND {column} IS NULL` for a
    /// channel's own: exactly one place of a channel. With no thread it also gives `column` as
    /// the page's leading order column ([`Keyset::lead`]): PostgreSQL walks the index in order
    /// only when the column it fixed leads the `ORDER BY` (constant in the result, so the order
    /// is unchanged).
    pub(crate) fn at_thread(
        self,
        column: &'static str,
        thread_id: Option<&'a str>,
    ) -> (Self, Option<&'static str>) {
        match thread_id {
            Some(thread_id) => (self.and(column, thread_id), None),
            None => (self.push(&format!(" AND {column} IS NULL")), Some(column)),
        }
    }

    /// Appends ` AND {column} IN ($N, …)` binding `values`, unless there are none.
    pub(crate) fn and_any<T: Into<Bind<'a>>>(
        mut self,
        column: &str,
        values: impl IntoIterator<Item = T>,
    ) -> Self {
        let mut list = String::new();
        for value in values {
            let separator = if list.is_empty() { "" } else { ", " };
            list.push_str(&format!("{separator}${}", self.binds.len() + 1));
            self = self.bind(value);
        }
        match list.is_empty() {
            true => self,
            false => self.push(&format!(" AND {column} IN ({list})")),
        }
    }

    /// Appends the keyset predicate for the rows after `after` in `keyset`'s order, that order,
    /// and `LIMIT limit + 1`: the extra row only says another page exists.
    pub(crate) fn page(
        mut self,
        keyset: Keyset<'_>,
        after: Option<&'a Position>,
        limit: usize,
    ) -> Self {
        let Keyset { time, id, ties, .. } = keyset;
        let n = self.binds.len();
        match (ties, after) {
            (Ties::Ascending, Some(after)) => {
                self = self
                    .push(&format!(
                        " AND {time} <= ${a} AND ({time} < ${a} OR {id} > ${b})",
                        a = n + 1,
                        b = n + 2
                    ))
                    .bind(after.at_ms)
                    .bind(after.id.as_str());
            }
            (Ties::Ascending, None) => {}
            // Without a position, `(i64::MAX, U+10FFFF)` is above every row: one statement
            // serves the first page and the next.
            (Ties::Descending, after) => {
                let (at_ms, after_id) = after.map_or((i64::MAX, "\u{10FFFF}"), |after| {
                    (after.at_ms, after.id.as_str())
                });
                self = self
                    .push(&format!(
                        " AND ({time}, {id}) < (${a}, ${b})",
                        a = n + 1,
                        b = n + 2
                    ))
                    .bind(at_ms)
                    .bind(after_id);
            }
        }
        let lead = keyset
            .lead
            .map(|lead| format!("{lead}, "))
            .unwrap_or_default();
        let ties = match ties {
            Ties::Ascending => "ASC",
            Ties::Descending => "DESC",
        };
        let placeholder = self.binds.len() + 1;
        self.push(&format!(
            " ORDER BY {lead}{time} DESC, {id} {ties} LIMIT ${placeholder}"
        ))
        .bind((limit + 1) as i64)
    }

    /// [`Query::page`] in the order most resources list in: `updatedAt DESC, id DESC`.
    pub(crate) fn newest<R: Resource>(self, after: Option<&'a Position>, limit: usize) -> Self {
        let time = format!("{}.updated_at", R::ALIAS);
        let id = format!("{}.id", R::ALIAS);
        let keyset = Keyset {
            time: &time,
            id: &id,
            ties: Ties::Descending,
            lead: None,
        };
        self.page(keyset, after, limit)
    }

    /// On PostgreSQL, locks the resource's row against a concurrent change on another replica
    /// (SQLite's one writer serializes already).
    pub(crate) fn locked<R: Resource>(self, pg: bool) -> Self {
        match pg {
            true => self.push(&format!(" FOR UPDATE OF {}", R::ALIAS)),
            false => self,
        }
    }

    /// On PostgreSQL, claims the rows selected for this transaction, skipping those another
    /// replica's transaction holds: replicas claim disjoint rows of one queue.
    pub(crate) fn claimed(self, pg: bool) -> Self {
        match pg {
            true => self.push(" FOR UPDATE SKIP LOCKED"),
            false => self,
        }
    }

    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }

    pub(crate) fn binds(&self) -> &[Bind<'a>] {
        &self.binds
    }
}

/// The sqlx statement of a [`Query`], inside an `on_backend!` body (a macro: each backend's
/// statement is its own type).
macro_rules! bound {
    ($query:expr) => {{
        let query: &$crate::server::store::shape::Query<'_> = $query;
        // Only the store's own fragments make the text (column lists, placeholders); every value
        // is bound.
        let mut statement = ::sqlx::query(::sqlx::AssertSqlSafe(query.sql().to_owned()));
        for bind in query.binds() {
            use $crate::server::store::shape::Bind;
            statement = match bind {
                Bind::Text(text) => statement.bind(text.as_ref()),
                Bind::Int(value) => statement.bind(*value),
                Bind::MaybeText(text) => statement.bind(text.as_deref()),
                Bind::MaybeInt(value) => statement.bind(*value),
                Bind::Bytes(bytes) => statement.bind(*bytes),
            };
        }
        statement
    }};
}
pub(crate) use bound;

/// Rows read as `R`, with their positions.
pub(crate) fn read_all<R: Resource, C: Columns>(
    rows: &[C],
) -> Result<Vec<(R, Position)>, StoreError> {
    rows.iter().map(R::read).collect()
}

/// One row read as `R`, without its position.
pub(crate) fn read_one<R: Resource>(row: &impl Columns) -> Result<R, StoreError> {
    R::read(row).map(|(value, _)| value)
}

impl Store {
    /// The row `query` selects, if any; `caller` names the store method for its span.
    pub(crate) async fn one<R: Resource>(
        &self,
        caller: &'static str,
        query: Query<'_>,
    ) -> Result<Option<R>, StoreError> {
        on_backend!(self, caller, |writer, reader, pg| {
            let row = bound!(&query).fetch_optional(reader).await?;
            row.as_ref().map(read_one).transpose()
        })
    }

    /// Whether `query` selects any row.
    pub(crate) async fn exists(
        &self,
        caller: &'static str,
        query: Query<'_>,
    ) -> Result<bool, StoreError> {
        on_backend!(self, caller, |writer, reader, pg| {
            Ok(bound!(&query).fetch_optional(reader).await?.is_some())
        })
    }

    /// Runs `statement`; answers the rows it changed.
    pub(crate) async fn execute(
        &self,
        caller: &'static str,
        statement: Query<'_>,
    ) -> Result<u64, StoreError> {
        on_backend!(self, caller, |writer, reader, pg| {
            Ok(bound!(&statement).execute(writer).await?.rows_affected())
        })
    }

    /// The page a query built with [`Query::page`] selects, `limit` rows at most.
    pub(crate) async fn page<R: Resource + serde::Serialize>(
        &self,
        caller: &'static str,
        query: Query<'_>,
        limit: usize,
    ) -> Result<Page<R>, StoreError> {
        on_backend!(self, caller, |writer, reader, pg| {
            let rows = bound!(&query).fetch_all(reader).await?;
            Ok(Page::from_rows_within_bytes(read_all(&rows)?, limit))
        })
    }

    /// Runs `insert`, which writes the row `id`, and reads that row back.
    pub(crate) async fn insert<R: Resource>(
        &self,
        caller: &'static str,
        insert: Query<'_>,
        id: &str,
    ) -> Result<R, StoreError> {
        on_backend!(self, caller, |writer, reader, pg| {
            bound!(&insert).execute(writer).await?;
            let row = bound!(&Query::by_id::<R>(id)).fetch_one(writer).await?;
            read_one(&row)
        })
    }

    /// Reads the row `lookup` selects (locked on PostgreSQL), lets `decide` answer the changed
    /// row or a refusal, runs the statement `write` makes of the changed row, and reads the row
    /// back; one transaction. `Ok(None)` when `lookup` selects nothing; `Ok(Some(Err(_)))`
    /// when `decide` refused, and nothing is written.
    pub(crate) async fn change<R: Resource, E>(
        &self,
        caller: &'static str,
        lookup: Query<'_>,
        decide: impl FnOnce(&R) -> Result<R, E>,
        write: impl for<'r> FnOnce(&'r R, &'r str) -> Query<'r>,
    ) -> Result<Option<Result<R, E>>, StoreError> {
        on_backend!(self, caller, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let lookup = lookup.locked::<R>(pg);
            let row = bound!(&lookup).fetch_optional(&mut *tx).await?;
            let Some(row) = row else { return Ok(None) };
            let (current, position) = R::read(&row)?;
            let changed = match decide(&current) {
                Ok(changed) => changed,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            bound!(&write(&changed, &position.id))
                .execute(&mut *tx)
                .await?;
            let row = bound!(&Query::by_id::<R>(&position.id))
                .fetch_one(&mut *tx)
                .await?;
            let stored = read_one(&row)?;
            tx.commit().await?;
            Ok(Some(Ok(stored)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Row;

    impl Resource for Row {
        const TABLE: &'static str = "rows";
        const ALIAS: &'static str = "r";
        const COLUMNS: &'static str = "r.id, r.updated_at";

        fn read(_: &impl Columns) -> Result<(Self, Position), StoreError> {
            unreachable!("never read")
        }
    }

    fn binds(query: &Query<'_>) -> Vec<String> {
        query
            .binds()
            .iter()
            .map(|bind| format!("{bind:?}"))
            .collect()
    }

    /// Every appended predicate takes the next placeholder, a filter without a value and an empty
    /// `IN` list add nothing, and the page's limit is one more than asked.
    #[test]
    fn placeholders_follow_the_binds_in_order() {
        let after = Position::of(7, "row_b");
        let none: [&str; 0] = [];
        let query = Query::select::<Row>("WHERE r.owner = $1")
            .bind("me")
            .and_some("r.kind", None::<&str>)
            .and_some("r.status", Some("open"))
            .and_any("r.tag", none)
            .and_any("r.tag", ["x", "y"])
            .page(
                Keyset {
                    time: "r.updated_at",
                    id: "r.id",
                    ties: Ties::Ascending,
                    lead: None,
                },
                Some(&after),
                20,
            );
        assert_eq!(
            query.sql(),
            "SELECT r.id, r.updated_at FROM rows r WHERE r.owner = $1 AND r.status = $2 \
             AND r.tag IN ($3, $4) AND r.updated_at <= $5 AND (r.updated_at < $5 OR r.id > $6) \
             ORDER BY r.updated_at DESC, r.id ASC LIMIT $7"
        );
        assert_eq!(
            binds(&query),
            [
                "Text(\"me\")",
                "Text(\"open\")",
                "Text(\"x\")",
                "Text(\"y\")",
                "Int(7)",
                "Text(\"row_b\")",
                "Int(21)"
            ]
        );
    }

    /// The first page of a one-direction order starts above every row, so one statement serves
    /// it and the next; a lead column comes first in the order; a lock names the alias.
    #[test]
    fn a_descending_page_needs_no_position_to_start() {
        let first = Query::select::<Row>("WHERE r.owner = $1").bind("me").page(
            Keyset {
                time: "r.created_at",
                id: "r.id",
                ties: Ties::Descending,
                lead: Some("r.thread_id"),
            },
            None,
            5,
        );
        assert_eq!(
            first.sql(),
            "SELECT r.id, r.updated_at FROM rows r WHERE r.owner = $1 AND (r.created_at, r.id) < ($2, $3) \
             ORDER BY r.thread_id, r.created_at DESC, r.id DESC LIMIT $4"
        );
        assert_eq!(
            binds(&first)[1..],
            [
                format!("Int({})", i64::MAX),
                "Text(\"\\u{10ffff}\")".to_string(),
                "Int(6)".to_string()
            ]
        );
        // A channel's own rows: `IS NULL`, no bind, and the column leads the order; a thread's:
        // the next placeholder, no lead.
        let (own, lead) = Query::select::<Row>("WHERE r.channel = $1")
            .bind("chn")
            .at_thread("r.thread_id", None);
        assert_eq!(
            (
                own.sql().ends_with(" AND r.thread_id IS NULL"),
                own.binds().len(),
                lead
            ),
            (true, 1, Some("r.thread_id"))
        );
        let (thread, lead) = Query::select::<Row>("WHERE r.channel = $1")
            .bind("chn")
            .at_thread("r.thread_id", Some("thr"));
        assert_eq!(
            (
                thread.sql().ends_with(" AND r.thread_id = $2"),
                binds(&thread)[1].as_str(),
                lead
            ),
            (true, "Text(\"thr\")", None)
        );
        let newest = Query::by_id::<Row>("row_a").newest::<Row>(None, 1);
        assert!(
            newest
                .sql()
                .ends_with("ORDER BY r.updated_at DESC, r.id DESC LIMIT $4"),
            "{}",
            newest.sql()
        );
        assert_eq!(
            Query::by_id::<Row>("row_a").locked::<Row>(true).sql(),
            "SELECT r.id, r.updated_at FROM rows r WHERE r.id = $1 FOR UPDATE OF r"
        );
        assert_eq!(
            Query::by_id::<Row>("row_a").locked::<Row>(false).sql(),
            "SELECT r.id, r.updated_at FROM rows r WHERE r.id = $1"
        );
    }
}
