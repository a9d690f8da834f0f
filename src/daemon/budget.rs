//! The Exec result budget: the complete success envelope, serialized, is at most
//! [`RESULT_BUDGET`] bytes (the trailing newline of the HTTP body not counted), or it is not
//! returned at all.
//!
//! Over budget, nothing is truncated: a read answers `result_budget_exceeded` with its inventory
//! row's `hint` and `next`; a mutation, which may already have committed, answers the same code
//! with `metadata.mutation_applied = true` and a closed receipt built only from allow-listed
//! selectors (the resource's `<name>Id`), its revision, the idempotency key, and a retrieval
//! command rebuilt from the catalog and validated against the read action's input schema.

use serde_json::{Map, Value, json};

use crate::contract::catalog::{ActionDescriptor, find_action};
use crate::contract::error::ErrorCode;
use crate::contract::{ActionError, CompiledCatalog};
use crate::wire;

/// 64 KiB.
pub const RESULT_BUDGET: usize = 64 * 1024;

/// The response for a successful action's `data`.
pub fn respond(
    catalog: &CompiledCatalog,
    descriptor: &ActionDescriptor,
    data: Value,
    idempotency_key: Option<&str>,
) -> axum::response::Response {
    let envelope = json!({ "ok": true, "data": data });
    let text = serde_json::to_string(&envelope).expect("a Value always serializes");
    if text.len() <= RESULT_BUDGET {
        return wire::raw_json_response(200, text + "\n");
    }
    wire::error_response(&over_budget(
        catalog,
        descriptor,
        &envelope["data"],
        text.len(),
        idempotency_key,
    ))
}

/// The refusal of an over-budget result of `size` bytes.
pub fn over_budget(
    catalog: &CompiledCatalog,
    descriptor: &ActionDescriptor,
    data: &Value,
    size: usize,
    idempotency_key: Option<&str>,
) -> ActionError {
    let name = format!("{} {}", descriptor.domain, descriptor.action);
    if !descriptor.risk.is_mutation() {
        let mut error = ActionError::new(
            ErrorCode::ResultBudgetExceeded,
            format!("the result of `{name}` is {size} bytes, over the {RESULT_BUDGET}-byte budget"),
        );
        error.hint = descriptor.hint.map(str::to_string);
        error.next = descriptor.next.map(str::to_string);
        return error;
    }
    let receipt = receipt(catalog, descriptor, data, idempotency_key);
    let mut error = ActionError::new(ErrorCode::ResultBudgetExceeded, format!("`{name}` was applied, but its result is {size} bytes, over the {RESULT_BUDGET}-byte budget"))
        .with_hint("the change is committed; do not repeat it");
    error.next = receipt
        .get("retrieval")
        .and_then(Value::as_str)
        .map(|r| format!("read the result with `{r}`"));
    error.metadata = Some(Box::new(
        json!({ "mutation_applied": true, "mutation_receipt": receipt }),
    ));
    error
}

/// The response when a result could not be serialized: never a receipt (nothing trustworthy to
/// build it from) and never replay advice.
pub fn unserializable(descriptor: &ActionDescriptor) -> axum::response::Response {
    let name = format!("{} {}", descriptor.domain, descriptor.action);
    let mut error = ActionError::new(
        ErrorCode::ResultBudgetExceeded,
        format!("the result of `{name}` could not be encoded"),
    );
    if !descriptor.risk.is_mutation() {
        error.hint = descriptor.hint.map(str::to_string);
        error.next = descriptor.next.map(str::to_string);
    }
    wire::error_response(&error)
}

/// The closed receipt of an applied mutation whose `data` is `{"<resource>": {"id": …, "revision": …}}`.
pub fn receipt(
    catalog: &CompiledCatalog,
    descriptor: &ActionDescriptor,
    data: &Value,
    idempotency_key: Option<&str>,
) -> Value {
    let mut receipt = Map::new();
    let resource = data
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
        .filter(|(_, v)| v.is_object());
    if let Some((name, resource)) = resource
        && let Some(id) = resource.get("id").and_then(Value::as_str)
    {
        let selector = format!("{name}Id");
        receipt.insert("selectors".into(), json!({ selector.clone(): id }));
        if let Some(revision) = resource.get("revision").and_then(Value::as_u64) {
            receipt.insert("revision".into(), json!(revision));
        }
        if let Some(retrieval) = retrieval(catalog, descriptor.domain, &selector, id) {
            receipt.insert("retrieval".into(), json!(retrieval));
        }
    }
    if let Some(key) = idempotency_key {
        receipt.insert("idempotencyKey".into(), json!(key));
    }
    Value::Object(receipt)
}

/// `agentteam exec <domain> get '{"<selector>":"<id>"}'`, if that read exists and accepts
/// exactly this input.
pub fn retrieval(
    catalog: &CompiledCatalog,
    domain: &str,
    selector: &str,
    id: &str,
) -> Option<String> {
    let get = find_action(domain, "get")?;
    let input = json!({ selector: id });
    catalog.validate_input(get.id, &input).ok()?;
    Some(format!("agentteam exec {domain} get '{input}'"))
}
