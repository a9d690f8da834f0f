//! The snake_case request field names the server accepts for their lowerCamelCase ones, in one
//! place.
//!
//! Daemons released with these names send them. They are accepted only here, on the way into the
//! runtime action API, and rewritten to the canonical lowerCamelCase before validation; they never
//! appear in schemas, OpenAPI or responses. An alias beside its canonical name is refused.

use serde_json::Value;

use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::{ActionError, ActionId};

/// `(alias, canonical)` top-level request field names accepted by every action whose input has
/// the canonical field.
pub const REQUEST_ALIASES: &[(&str, &str)] = &[
    ("task_id", "taskId"),
    ("thread_id", "threadId"),
    ("request_id", "requestId"),
    ("expected_revision", "expectedRevision"),
];

/// Rewrites the aliased top-level names of `input` to their canonical ones, in place.
pub fn canonicalize(id: ActionId, input: &mut Value) -> Result<(), ActionError> {
    let Some(object) = input.as_object_mut() else {
        return Ok(());
    };
    let known = id.descriptor().input_properties;
    for (alias, canonical) in REQUEST_ALIASES {
        if !object.contains_key(*alias) || !known.contains(canonical) {
            continue;
        }
        if object.contains_key(*canonical) {
            return Err(ActionError::new(
                ErrorCode::ValidationFailed,
                format!("`{alias}` and `{canonical}` name the same field; send only `{canonical}`"),
            )
            .with_details(vec![ErrorDetail {
                path: format!("/{alias}"),
                message: format!("legacy alias of `{canonical}`"),
            }]));
        }
        let value = object.remove(*alias).expect("checked above");
        object.insert((*canonical).to_string(), value);
    }
    Ok(())
}
