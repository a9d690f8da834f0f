//! The shared half of every keyset list: page size, and cursors bound to a filter.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::types::{Cursor, PageLimit};
use crate::contract::{ActionError, ActionResult};
use crate::server::AppState;
use crate::server::store::Position;

/// Page size when the request names none (the maximum, 100, is the schema's).
pub const DEFAULT_LIMIT: usize = 20;

pub fn limit(limit: Option<PageLimit>) -> usize {
    limit.map_or(DEFAULT_LIMIT, |l| l.0.get() as usize)
}

/// The position inside `cursor`, which must have been issued for exactly `filter`.
pub fn decode<T: DeserializeOwned>(
    state: &AppState,
    cursor: Option<&Cursor>,
    filter: &Value,
) -> ActionResult<Option<T>> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    let position = state
        .cursors
        .decode(cursor, filter)
        .map_err(|_| cursor_error())?;
    serde_json::from_value(position)
        .map(Some)
        .map_err(|_| cursor_error())
}

/// The cursor for `position` under `filter`.
pub fn encode<T: Serialize>(state: &AppState, filter: &Value, position: &T) -> Cursor {
    let position = serde_json::to_value(position).expect("positions serialize");
    state
        .cursors
        .encode(filter, &position)
        .parse()
        .expect("issued cursors match the contract")
}

/// The `(time, id)` keyset position inside `cursor`.
pub fn decode_position(
    state: &AppState,
    cursor: Option<&Cursor>,
    filter: &Value,
) -> ActionResult<Option<Position>> {
    Ok(decode::<(i64, String)>(state, cursor, filter)?.map(|(at_ms, id)| Position { at_ms, id }))
}

/// The cursor after `position` under `filter`.
pub fn encode_position(state: &AppState, filter: &Value, position: &Position) -> Cursor {
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
