//! The Exec result budget (spec "Result Boundaries"): the complete success envelope, serialized,
//! is at most [`RESULT_BUDGET`] bytes, or it is not returned at all.
//!
//! Over budget, nothing is truncated: a read answers `result_budget_exceeded` with its inventory
//! row's `hint` and `next`; a mutation, which may already have committed, answers the same code
//! with `metadata.mutation_applied = true` and a closed receipt built only from allow-listed
//! selectors (the resource's `<name>Id`), its revision, the idempotency key, and a retrieval
//! command rebuilt from the catalog's `retrieval` action and validated against its input schema.
//! For an operation union (a `workflow` action) all of this is the operation's: its risk, its
//! continuation, and a retrieval through the union's read operation. An extension action follows
//! the same rules through its pinned definition: every function takes a [`Rule`].
//!
//! The CLI re-projects what the daemon sent through [`reproject`]: only that closed contract
//! survives, and the retrieval command is rebuilt locally, never trusted from the wire.

use serde_json::{Map, Value, json};

use super::catalog::Effective;
use super::error::{ActionError, ErrorCode};
use super::validate::Validators;

/// 64 KiB.
pub const RESULT_BUDGET: usize = 64 * 1024;

/// What the budget needs to know about the action (or operation) that produced a result.
pub trait Rule {
    /// `task create`, `workflow plan publish`, `github watch`.
    fn name(&self) -> String;
    fn is_mutation(&self) -> bool;
    /// Why an over-budget read was refused.
    fn hint(&self) -> Option<&str>;
    /// What to request instead of an over-budget read.
    fn next(&self) -> Option<&str>;
    /// A property of the result beside its resource (an operation union's discriminator).
    fn discriminator(&self) -> Option<&str> {
        None
    }
    /// The command that reads back the resource whose `selector` is `id`, if the action has a
    /// read that accepts exactly that input.
    fn retrieval(&self, selector: &str, id: &str) -> Option<String>;
}

/// A built-in action or operation, with the validators its retrieval input is checked against.
pub struct Builtin<'a> {
    pub catalog: &'a Validators,
    pub descriptor: Effective,
}

impl Rule for Builtin<'_> {
    fn name(&self) -> String {
        self.descriptor.name()
    }

    fn is_mutation(&self) -> bool {
        self.descriptor.risk().is_mutation()
    }

    fn hint(&self) -> Option<&str> {
        self.descriptor.hint()
    }

    fn next(&self) -> Option<&str> {
        self.descriptor.next()
    }

    fn discriminator(&self) -> Option<&str> {
        self.descriptor.descriptor.discriminator
    }

    fn retrieval(&self, selector: &str, id: &str) -> Option<String> {
        retrieval(self.catalog, self.descriptor, selector, id)
    }
}

/// The success envelope around its `data`, as every writer of ours writes it (`fit`, `fit_with`
/// and the server's `wire::render_as`: a `Value` object's keys in order, `data` then `ok`) and as
/// the daemon recognises it to take `data`'s text as written.
pub const SUCCESS_OPEN: &str = r#"{"data":"#;
/// What follows `data` in the success envelope.
pub const SUCCESS_CLOSE: &str = r#","ok":true}"#;

/// The length of `data`'s success envelope, `data` serialized compactly as every answer is: what
/// the Exec bridge holds to [`RESULT_BUDGET`]. Counted, not written.
pub fn envelope_len(data: &impl serde::Serialize) -> usize {
    // A typed output always serializes; a failure counts as over budget.
    match super::json::json_len(data) {
        Ok(len) => SUCCESS_OPEN.len() + len + SUCCESS_CLOSE.len(),
        Err(_) => usize::MAX,
    }
}

/// Refuses a write after which `read`, the resource's own retrieval read (`task get`), could no
/// longer return it within [`RESULT_BUDGET`]: `data` is that read's output as it would be once
/// the write commits. The refusal is a validation error (nothing is written) naming the one of
/// `fields` (the request's text fields this write stores, by JSON pointer) whose shortening would
/// help most (the largest), and how many bytes of JSON text it may take: the bound is in
/// serialized bytes, so a control character counts 6, a quote or a backslash 2.
pub fn readable(
    read: &str,
    data: &impl serde::Serialize,
    fields: &[(String, Option<&str>)],
) -> Result<(), ActionError> {
    let size = envelope_len(data);
    if size <= RESULT_BUDGET {
        return Ok(());
    }
    let over = size - RESULT_BUDGET;
    // A string's JSON text without its quotes, which stay when it is emptied.
    let text_len = |text: &str| envelope_len(&text) - SUCCESS_OPEN.len() - SUCCESS_CLOSE.len() - 2;
    let largest = fields
        .iter()
        .filter_map(|(path, text)| text.map(|text| (path, text_len(text))))
        .max_by_key(|(_, len)| *len);
    let message = format!(
        "`{read}` could not return the result of this change: it would be {size} bytes, over the {RESULT_BUDGET}-byte result budget"
    );
    let mut error = ActionError::new(ErrorCode::ValidationFailed, message);
    match largest {
        Some((path, len)) if len >= over => {
            error = error.with_details(vec![super::error::ErrorDetail {
                path: path.clone(),
                message: format!(
                    "at most {} bytes of JSON text fit here (a control character takes 6, a quote or a backslash 2)",
                    len - over
                ),
            }])
        }
        _ => {
            error = error.with_next(format!(
                "the rest of what `{read}` returns already fills the budget: shorten the other long fields first"
            ))
        }
    }
    Err(error)
}

/// `envelope`, a success envelope as every writer of ours writes it ([`SUCCESS_OPEN`], `data`,
/// [`SUCCESS_CLOSE`], then the transport's newline), when it fits the budget; otherwise the
/// refusal under `rule`. The data is parsed only to explain a refusal.
pub fn fit(
    rule: &(impl Rule + ?Sized),
    envelope: String,
    idempotency_key: Option<&str>,
) -> Result<String, ActionError> {
    let size = envelope.trim_end_matches('\n').len();
    if size <= RESULT_BUDGET {
        return Ok(envelope);
    }
    let data = envelope[..size]
        .strip_prefix(SUCCESS_OPEN)
        .and_then(|rest| rest.strip_suffix(SUCCESS_CLOSE))
        .and_then(|data| serde_json::from_str(data).ok())
        .unwrap_or(Value::Null);
    Err(refuse(rule, &data, size, idempotency_key))
}

/// The refusal of an over-budget result of `size` bytes.
pub fn over_budget(
    catalog: &Validators,
    descriptor: Effective,
    data: &Value,
    size: usize,
    idempotency_key: Option<&str>,
) -> ActionError {
    refuse(
        &Builtin {
            catalog,
            descriptor,
        },
        data,
        size,
        idempotency_key,
    )
}

/// [`over_budget`] under any [`Rule`].
pub fn refuse(
    rule: &(impl Rule + ?Sized),
    data: &Value,
    size: usize,
    idempotency_key: Option<&str>,
) -> ActionError {
    let name = rule.name();
    if !rule.is_mutation() {
        let mut error = ActionError::new(
            ErrorCode::ResultBudgetExceeded,
            format!("the result of `{name}` is {size} bytes, over the {RESULT_BUDGET}-byte budget"),
        );
        error.hint = rule.hint().map(str::to_string);
        error.next = rule.next().map(str::to_string);
        return error;
    }
    let receipt = receipt_with(rule, data, idempotency_key);
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

/// The closed receipt of an applied mutation whose `data` is `{"<resource>": {"id": …, "revision": …}}`
/// (beside the discriminator, for an operation).
pub fn receipt(
    catalog: &Validators,
    descriptor: Effective,
    data: &Value,
    idempotency_key: Option<&str>,
) -> Value {
    receipt_with(
        &Builtin {
            catalog,
            descriptor,
        },
        data,
        idempotency_key,
    )
}

/// [`receipt`] under any [`Rule`].
pub fn receipt_with(
    rule: &(impl Rule + ?Sized),
    data: &Value,
    idempotency_key: Option<&str>,
) -> Value {
    let mut receipt = Map::new();
    let discriminator = rule.discriminator();
    let resource = data
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| Some(k.as_str()) != discriminator)
                .collect::<Vec<_>>()
        })
        .filter(|fields| fields.len() == 1)
        .and_then(|fields| fields.into_iter().next())
        .filter(|(_, v)| v.is_object());
    if let Some((name, resource)) = resource
        && let Some(id) = resource.get("id").and_then(Value::as_str)
    {
        let selector = format!("{name}Id");
        receipt.insert("selectors".into(), json!({ selector.clone(): id }));
        if let Some(revision) = resource.get("revision").and_then(Value::as_u64) {
            receipt.insert("revision".into(), json!(revision));
        }
        if let Some(retrieval) = rule.retrieval(&selector, id) {
            receipt.insert("retrieval".into(), json!(retrieval));
        }
    }
    if let Some(key) = idempotency_key {
        receipt.insert("idempotencyKey".into(), json!(key));
    }
    Value::Object(receipt)
}

/// `agentteam exec <domain> <read> '{"<selector>":"<id>"}'`, where `<read>` is the catalog's
/// retrieval action (and operation) of the mutation `descriptor`, if it accepts exactly this
/// input.
pub fn retrieval(
    catalog: &Validators,
    descriptor: Effective,
    selector: &str,
    id: &str,
) -> Option<String> {
    let retrieval = descriptor.retrieval()?;
    let read = retrieval.action.descriptor();
    let mut input = json!({ selector: id });
    if let (Some(operation), Some(field)) = (retrieval.operation, read.discriminator) {
        input[field] = json!(operation);
    }
    catalog.validate_input(read.id, &input).ok()?;
    Some(format!(
        "agentteam exec {} {} '{input}'",
        read.domain, read.action
    ))
}

/// Keeps only the closed error metadata contract: `mutation_applied` and a receipt whose
/// selectors, revision and idempotency key are well formed, with the retrieval command rebuilt
/// from the catalog instead of trusted from the wire. Anything else is dropped.
pub fn reproject(envelope: Value, descriptor: Effective, catalog: &Validators) -> Value {
    reproject_with(
        envelope,
        &Builtin {
            catalog,
            descriptor,
        },
    )
}

/// [`reproject`] under any [`Rule`].
pub fn reproject_with(mut envelope: Value, rule: &impl Rule) -> Value {
    let Some(metadata) = envelope.pointer_mut("/error/metadata").map(Value::take) else {
        return envelope;
    };
    let mut projected = Map::new();
    if metadata.get("mutation_applied") == Some(&Value::Bool(true)) && rule.is_mutation() {
        projected.insert("mutation_applied".into(), Value::Bool(true));
        if let Some(receipt) = metadata.get("mutation_receipt").and_then(Value::as_object) {
            projected.insert(
                "mutation_receipt".into(),
                Value::Object(reproject_receipt(receipt, rule)),
            );
        }
    }
    let error = envelope["error"]
        .as_object_mut()
        .expect("an error envelope");
    if projected.is_empty() {
        error.remove("metadata");
    } else {
        error.insert("metadata".into(), Value::Object(projected));
    }
    envelope
}

fn reproject_receipt(receipt: &Map<String, Value>, rule: &impl Rule) -> Map<String, Value> {
    let mut out = Map::new();
    let selectors = receipt
        .get("selectors")
        .and_then(Value::as_object)
        .filter(|s| s.len() == 1);
    if let Some((selector, id)) = selectors.and_then(|s| s.iter().next())
        && let Some(id) = id.as_str()
        && selector.len() <= 64
        && selector.ends_with("Id")
        && selector.chars().all(|c| c.is_ascii_alphanumeric())
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        out.insert("selectors".into(), json!({ selector: id }));
        if let Some(retrieval) = rule.retrieval(selector, id) {
            out.insert("retrieval".into(), json!(retrieval));
        }
    }
    if let Some(revision) = receipt.get("revision").and_then(Value::as_u64) {
        out.insert("revision".into(), json!(revision));
    }
    if let Some(key) = receipt.get("idempotencyKey").and_then(Value::as_str)
        && super::selector::well_formed(key)
    {
        out.insert("idempotencyKey".into(), json!(key));
    }
    out
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

    /// The bound is the serialized envelope: a field gets exactly the bytes the rest leaves, and
    /// the refusal names the largest of the fields the write stores.
    #[test]
    fn a_write_is_readable_up_to_the_last_byte_of_the_budget() {
        let frame = envelope_len(&json!({"text": "", "other": "x"}));
        let fits = "a".repeat(RESULT_BUDGET - frame);
        let data = json!({"text": fits, "other": "x"});
        assert_eq!(envelope_len(&data), RESULT_BUDGET);
        let fields = [("/text".to_string(), Some(fits.as_str()))];
        assert!(readable("thing get", &data, &fields).is_ok());
        let over = format!("{fits}\u{1}");
        let data = json!({"text": over, "other": "x"});
        let fields = [
            ("/other".to_string(), Some("x")),
            ("/text".to_string(), Some(over.as_str())),
            ("/unset".to_string(), None),
        ];
        let refusal = readable("thing get", &data, &fields).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::ValidationFailed);
        assert_eq!(refusal.details[0].path, "/text");
        assert!(
            refusal.details[0]
                .message
                .starts_with(&format!("at most {} bytes", RESULT_BUDGET - frame)),
            "{refusal:?}"
        );
        assert!(
            refusal
                .message
                .contains(&format!("{} bytes", RESULT_BUDGET + 6))
        );
        // No field of this write can make room: the refusal says the rest is too large.
        let refusal =
            readable("thing get", &data, &[("/other".to_string(), Some("x"))]).unwrap_err();
        assert!(
            refusal.details.is_empty() && refusal.next.is_some(),
            "{refusal:?}"
        );
    }

    #[test]
    fn exactly_64_kib_is_returned_unchanged_and_one_byte_more_is_refused() {
        let catalog = Validators::new().unwrap();
        let list = ActionId::TaskList.descriptor().as_whole();
        let at_budget = data_of_envelope_size(RESULT_BUDGET);
        assert_eq!(
            serde_json::to_string(&json!({"ok": true, "data": at_budget}))
                .unwrap()
                .len(),
            RESULT_BUDGET
        );
        let rule = Builtin {
            catalog: &catalog,
            descriptor: list,
        };
        let envelope = |data: &Value| format!("{SUCCESS_OPEN}{data}{SUCCESS_CLOSE}\n");
        assert_eq!(
            fit(&rule, envelope(&at_budget), None).unwrap(),
            envelope(&at_budget),
            "returned unchanged"
        );

        let over = data_of_envelope_size(RESULT_BUDGET + 1);
        let error = over_budget(&catalog, list, &over, RESULT_BUDGET + 1, None);
        assert_eq!(error.code, ErrorCode::ResultBudgetExceeded);
        assert_eq!(
            (error.hint.as_deref(), error.next.as_deref()),
            (list.hint(), list.next())
        );
        assert!(error.metadata.is_none(), "a read has no receipt");
        let refused = fit(&rule, envelope(&over), None).unwrap_err();
        assert_eq!(refused, error);
    }

    #[test]
    fn a_mutation_receipt_is_closed_and_its_retrieval_validated() {
        let catalog = Validators::new().unwrap();
        let complete = ActionId::TaskComplete.descriptor().as_whole();
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

    #[test]
    fn reprojection_keeps_only_the_closed_contract_and_rebuilds_the_retrieval() {
        let catalog = Validators::new().unwrap();
        let descriptor = ActionId::TaskComplete.descriptor().as_whole();
        let envelope = json!({"ok": false, "error": {"code": "result_budget_exceeded", "message": "m", "metadata": {
            "mutation_applied": true,
            "extra": "dropped",
            "mutation_receipt": {
                "selectors": {"taskId": "task_01JD7M4B2C"},
                "revision": 3,
                "idempotencyKey": "req-00000001",
                "retrieval": "rm -rf / # a path from the wire is never trusted",
                "unknown": 1
            }
        }}});
        let projected = reproject(envelope, descriptor, &catalog);
        assert_eq!(
            projected["error"]["metadata"],
            json!({
                "mutation_applied": true,
                "mutation_receipt": {
                    "selectors": {"taskId": "task_01JD7M4B2C"},
                    "revision": 3,
                    "idempotencyKey": "req-00000001",
                    "retrieval": r#"agentteam exec task get '{"taskId":"task_01JD7M4B2C"}'"#
                }
            })
        );
    }

    #[test]
    fn malformed_or_oversized_metadata_is_dropped() {
        let catalog = Validators::new().unwrap();
        let descriptor = ActionId::TaskComplete.descriptor().as_whole();
        let bad = json!({"ok": false, "error": {"code": "result_budget_exceeded", "message": "m", "metadata": {
            "mutation_applied": "yes",
            "mutation_receipt": {"selectors": {"taskId": "x".repeat(500)}}
        }}});
        assert!(
            reproject(bad, descriptor, &catalog)["error"]
                .get("metadata")
                .is_none()
        );
        let read = ActionId::TaskGet.descriptor().as_whole();
        let claimed = json!({"ok": false, "error": {"code": "result_budget_exceeded", "message": "m", "metadata": {"mutation_applied": true}}});
        assert!(
            reproject(claimed, read, &catalog)["error"]
                .get("metadata")
                .is_none(),
            "a read never carries a mutation receipt"
        );
    }
}
