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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ActionId;

    /// `data` whose success envelope serializes to exactly `size` bytes.
    fn data_of_envelope_size(size: usize) -> Value {
        let empty = serde_json::to_string(
            &json!({ "ok": true, "data": { "tasks": [], "hasMore": false, "pad": "" } }),
        )
        .unwrap()
        .len();
        json!({ "tasks": [], "hasMore": false, "pad": "a".repeat(size - empty) })
    }

    #[test]
    fn exactly_64_kib_is_returned_unchanged_and_one_byte_more_is_refused() {
        let catalog = CompiledCatalog::new().unwrap();
        let list = ActionId::TaskList.descriptor();
        let at_budget = data_of_envelope_size(RESULT_BUDGET);
        assert_eq!(
            serde_json::to_string(&json!({"ok": true, "data": at_budget}))
                .unwrap()
                .len(),
            RESULT_BUDGET
        );
        let response = respond(&catalog, list, at_budget, None);
        assert_eq!(response.status(), 200);

        let over = data_of_envelope_size(RESULT_BUDGET + 1);
        let error = over_budget(&catalog, list, &over, RESULT_BUDGET + 1, None);
        assert_eq!(error.code, ErrorCode::ResultBudgetExceeded);
        assert_eq!(
            (error.hint.as_deref(), error.next.as_deref()),
            (list.hint, list.next)
        );
        assert!(error.metadata.is_none(), "a read has no receipt");
        assert_eq!(respond(&catalog, list, over, None).status(), 422);
    }

    #[test]
    fn a_mutation_receipt_is_closed_and_its_retrieval_validated() {
        let catalog = CompiledCatalog::new().unwrap();
        let complete = ActionId::TaskComplete.descriptor();
        let data = json!({ "task": { "id": "task_01JD7M4B2C", "revision": 4, "description": "private text", "title": "t" } });
        let receipt = receipt(&catalog, complete, &data, Some("req-00000001"));
        assert_eq!(
            receipt,
            json!({
                "selectors": { "taskId": "task_01JD7M4B2C" },
                "revision": 4,
                "idempotencyKey": "req-00000001",
                "retrieval": "agentteam exec task get '{\"taskId\":\"task_01JD7M4B2C\"}'"
            })
        );
        // An id the read action would not accept gets no retrieval path.
        let odd = json!({ "task": { "id": "not an id", "revision": 1 } });
        assert!(
            super::receipt(&catalog, complete, &odd, None)
                .get("retrieval")
                .is_none()
        );
    }

    #[tokio::test]
    async fn an_unserializable_mutation_result_carries_no_receipt_and_no_replay_advice() {
        let response = unserializable(ActionId::TaskComplete.descriptor());
        assert_eq!(response.status(), 422);
        let body: Value = serde_json::from_slice(
            &axum::body::to_bytes(response.into_body(), 4096)
                .await
                .unwrap(),
        )
        .unwrap();
        assert_eq!(body["error"]["code"], "result_budget_exceeded");
        assert!(
            body["error"].get("metadata").is_none()
                && body["error"].get("next").is_none()
                && body["error"].get("hint").is_none(),
            "{body}"
        );
    }
}
