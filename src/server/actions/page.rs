//! The shared half of every keyset list: page size, and cursors bound to a filter.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::Caller;
use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::types::{Cursor, PageLimit};
use crate::contract::{ActionError, ActionResult};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::Position;

/// What a cursor is bound to: the list, the caller (workspace and agent, always) and every input
/// that shapes the result. A cursor issued under one filter is refused under any other.
pub struct Filter(Value);

impl Filter {
    /// The filter of `list` (its catalog key, e.g. `task.list`) for `caller`.
    pub fn new(caller: &Caller, list: &str) -> Filter {
        Filter(json!({ "list": list, "workspace": caller.workspace_id, "agent": caller.agent_id }))
    }

    /// Adds one normalized input that shapes the result.
    pub fn with(mut self, name: &str, value: impl Serialize) -> Filter {
        let value = serde_json::to_value(value).expect("filter values serialize");
        let object: &mut Map<String, Value> = self.0.as_object_mut().expect("an object");
        object.insert(name.to_string(), value);
        self
    }
}

/// Page size when the request names none (the maximum, 100, is the schema's).
pub const DEFAULT_LIMIT: usize = 20;

pub fn limit(limit: Option<PageLimit>) -> usize {
    limit.map_or(DEFAULT_LIMIT, |l| l.0.get() as usize)
}

/// The position inside `cursor`, which must have been issued for exactly `filter`.
pub fn decode<T: DeserializeOwned>(
    state: &AppState,
    cursor: Option<&Cursor>,
    filter: &Filter,
) -> ActionResult<Option<T>> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    let position = state
        .cursors
        .decode(cursor, &filter.0)
        .map_err(|_| cursor_error())?;
    serde_json::from_value(position)
        .map(Some)
        .map_err(|_| cursor_error())
}

/// The cursor for `position` under `filter`.
///
/// `Cursor.maxLength` is sized for the largest keyset boundary any list can have (a test computes
/// it from the schemas), so a cursor that does not fit the contract is a defect: reported as an
/// internal error, never a panic, never a truncated boundary.
pub fn encode<T: Serialize>(
    state: &AppState,
    filter: &Filter,
    position: &T,
) -> ActionResult<Cursor> {
    let position = serde_json::to_value(position).expect("positions serialize");
    let text = state.cursors.encode(&filter.0, &position);
    let length = text.len();
    text.parse().map_err(|_| {
        failure::saying(
            "the server could not continue this list",
            format_args!("an issued cursor of {length} bytes does not fit the contract's `Cursor`"),
        )
    })
}

/// The `(time, id)` keyset position inside `cursor`.
pub fn decode_position(
    state: &AppState,
    cursor: Option<&Cursor>,
    filter: &Filter,
) -> ActionResult<Option<Position>> {
    Ok(decode::<(i64, String)>(state, cursor, filter)?.map(|(at_ms, id)| Position { at_ms, id }))
}

/// The cursor after `position` under `filter`.
pub fn encode_position(
    state: &AppState,
    filter: &Filter,
    position: &Position,
) -> ActionResult<Cursor> {
    encode(state, filter, &(position.at_ms, &position.id))
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
