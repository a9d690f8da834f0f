//! The shared half of every keyset list: page sizes, cursors bound to a filter, and [`list`], the
//! one way a handler reads a page: the cursor decoded under its filter, the store asked for the
//! page after it (the store reads `limit + 1` rows: the extra one says another page exists), and
//! the next page's cursor encoded under the same filter.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::Caller;
use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::types::{Cursor, PageLimit};
use crate::contract::{ActionError, ActionId, ActionResult, ResultPolicy};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::{Page, Position, StoreError, TeamPosition};

/// What a cursor is bound to: the list, the caller (workspace and agent, always) and every input
/// that shapes the result. A cursor issued under one filter is refused under any other.
pub struct Filter(Value);

impl Filter {
    /// The filter of the list named `list` for `caller`: an operator's or an extension's list, or
    /// a tool's (by its generated name). A catalog action's list is [`Filter::of`].
    pub fn new(caller: &Caller, list: &str) -> Filter {
        Filter(json!({ "list": list, "workspace": caller.workspace_id, "agent": caller.agent_id }))
    }

    /// The filter of `action`'s list ([`list_key`]) for `caller`.
    pub fn of(caller: &Caller, action: ActionId) -> Filter {
        Filter::new(caller, &list_key(action))
    }

    /// Adds one normalized input that shapes the result.
    pub fn with(mut self, name: &str, value: impl Serialize) -> Filter {
        let value = serde_json::to_value(value).expect("filter values serialize");
        let object: &mut Map<String, Value> = self.0.as_object_mut().expect("an object");
        object.insert(name.to_string(), value);
        self
    }

    /// [`list`] under this filter, `limit` items (or [`DEFAULT_LIMIT`]) after `cursor`.
    pub async fn page<T, P: Keyset, E: ReadFailure>(
        &self,
        state: &AppState,
        cursor: Option<&Cursor>,
        limit: Option<PageLimit>,
        read: impl AsyncFnOnce(Option<P>, usize) -> Result<Page<T, P>, E>,
    ) -> ActionResult<Listed<T>> {
        list(state, self, cursor, self::limit(limit), read).await
    }
}

/// The name of `action`'s keyset list, from the generated catalog: its key (`task.list`), or for
/// an operation union, its key and the one operation whose result is cursor-paged
/// (`workflow.plan list`).
pub fn list_key(action: ActionId) -> String {
    let descriptor = action.descriptor();
    let paged = descriptor
        .operations
        .iter()
        .find(|operation| operation.result_policy == ResultPolicy::Cursor);
    match paged {
        Some(operation) => format!("{} {}", action.key(), operation.name),
        None => action.key(),
    }
}

/// Page size when the request names none (the maximum, 100, is the schema's).
pub const DEFAULT_LIMIT: usize = 20;

/// The page size a request asks for, or [`DEFAULT_LIMIT`].
pub fn limit(limit: Option<PageLimit>) -> usize {
    limit.map_or(DEFAULT_LIMIT, |l| l.0.get() as usize)
}

pub use crate::server::store::fitting;

/// A store's keyset position, as a cursor carries it: the tuple of its fields.
pub trait Keyset: Sized {
    type Fields: Serialize + DeserializeOwned;

    fn into_fields(self) -> Self::Fields;
    fn from_fields(fields: Self::Fields) -> Self;
}

/// `(time, id)`, the position of most lists.
impl Keyset for Position {
    type Fields = (i64, String);

    fn into_fields(self) -> (i64, String) {
        (self.at_ms, self.id)
    }

    fn from_fields((at_ms, id): (i64, String)) -> Position {
        Position { at_ms, id }
    }
}

/// `(display name, handle, id)`, the order teams are listed in.
impl Keyset for TeamPosition {
    type Fields = (String, String, String);

    fn into_fields(self) -> (String, String, String) {
        (self.display_name, self.handle, self.id)
    }

    fn from_fields((display_name, handle, id): (String, String, String)) -> TeamPosition {
        TeamPosition {
            display_name,
            handle,
            id,
        }
    }
}

/// What reading a page may fail with: the store (an internal failure) or the handler's own
/// refusal (a parent the caller cannot see).
pub trait ReadFailure {
    fn into_error(self) -> ActionError;
}

impl ReadFailure for StoreError {
    fn into_error(self) -> ActionError {
        failure::store(self)
    }
}

impl ReadFailure for ActionError {
    fn into_error(self) -> ActionError {
        self
    }
}

/// One page as an answer carries it: its items and the cursor of the next page, if any.
pub struct Listed<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<Cursor>,
}

impl<T> Listed<T> {
    /// Whether another page follows.
    pub fn has_more(&self) -> bool {
        self.next_cursor.is_some()
    }

    /// The page as an untyped answer (an operator's or an extension's list, which have no
    /// generated output type): each item as `shown` writes it under `name`, `hasMore`, and
    /// `nextCursor` when another page follows.
    pub fn into_json(self, name: &str, shown: impl Fn(&T) -> Value) -> Value {
        let items: Vec<Value> = self.items.iter().map(shown).collect();
        let mut data = json!({ name: items, "hasMore": self.next_cursor.is_some() });
        if let Some(cursor) = self.next_cursor {
            data["nextCursor"] = json!(cursor);
        }
        data
    }
}

/// The page of `limit` items after `cursor`, which must have been issued under `filter`:
/// `read` gets the position the cursor names (none for the first page) and the limit, and
/// answers the store's page; the next page's cursor is bound to the same `filter`.
pub async fn list<T, P: Keyset, E: ReadFailure>(
    state: &AppState,
    filter: &Filter,
    cursor: Option<&Cursor>,
    limit: usize,
    read: impl AsyncFnOnce(Option<P>, usize) -> Result<Page<T, P>, E>,
) -> ActionResult<Listed<T>> {
    let after = after(state, cursor, filter)?;
    let page = read(after, limit).await.map_err(E::into_error)?;
    let next_cursor = page
        .next
        .map(|position| next_cursor(state, filter, position))
        .transpose()?;
    Ok(Listed {
        items: page.items,
        next_cursor,
    })
}

/// The position inside `cursor`, which must have been issued under exactly `filter`.
pub fn after<P: Keyset>(
    state: &AppState,
    cursor: Option<&Cursor>,
    filter: &Filter,
) -> ActionResult<Option<P>> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    let position = state
        .cursors
        .decode(cursor, &filter.0)
        .map_err(|_| cursor_error())?;
    serde_json::from_value(position)
        .map(|fields| Some(P::from_fields(fields)))
        .map_err(|_| cursor_error())
}

/// The cursor after `position` under `filter`.
///
/// `Cursor.maxLength` is sized for the largest keyset boundary any list can have (a test computes
/// it from the schemas), so a cursor that does not fit the contract is a defect: reported as an
/// internal error, never a panic, never a truncated boundary.
pub fn next_cursor<P: Keyset>(
    state: &AppState,
    filter: &Filter,
    position: P,
) -> ActionResult<Cursor> {
    let position = serde_json::to_value(position.into_fields()).expect("positions serialize");
    let text = state.cursors.encode(&filter.0, &position);
    let length = text.len();
    text.parse().map_err(|_| {
        failure::saying(
            "the server could not continue this list",
            format_args!("an issued cursor of {length} bytes does not fit the contract's `Cursor`"),
        )
    })
}

/// Every malformed, foreign, tampered or filter-mismatched cursor: one validation error.
pub fn cursor_error() -> ActionError {
    ActionError::new(
        ErrorCode::ValidationFailed,
        "`cursor` was not issued by this list for these filters",
    )
    .with_next("repeat the request without `cursor` to start from the first page")
    .with_details(vec![ErrorDetail {
        path: "/cursor".into(),
        message: "invalid cursor".into(),
    }])
}
