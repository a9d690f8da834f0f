//! The closed operation matrix of the `workflow` actions: the catalog serves exactly the matrix
//! (walked operation by operation), every rule that depends on risk resolves it per operation,
//! and an inventory row or schema that adds, drops or misclassifies an operation fails the build
//! with a message naming the action and the operation.

use std::fs;

use agentteam::contract::{ACTIONS, ResultPolicy, Risk, Validators, budget};
use serde_json::{Value, json};

use crate::codegen::model::operations::OPERATION_MATRIX;
use crate::codegen_pipeline::edit_inventory;
use crate::support::schema_copy;

fn row<'a>(inventory: &'a mut Value, domain: &str, action: &str) -> &'a mut Value {
    inventory["actions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["domain"] == domain && r["action"] == action)
        .unwrap()
}

fn op<'a>(row: &'a mut Value, name: &str) -> &'a mut Value {
    row["operations"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|o| o["operation"] == name)
        .unwrap()
}

#[track_caller]
fn refused(schema: &std::path::Path, file: &str, message: &str) {
    let diags = match crate::codegen::generate(schema) {
        Ok(_) => panic!("the generator accepted a broken schema/"),
        Err(diags) => diags,
    };
    assert!(
        diags
            .iter()
            .any(|d| d.file == file && d.to_string().contains(message)),
        "expected `{file}: …{message}…`, got:\n{}",
        diags.iter().map(|d| format!("{d}\n")).collect::<String>()
    );
}

const INVENTORY: &str = "schema/exec/agentteam-exec-action-inventory.json";

#[test]
fn the_catalog_serves_exactly_the_matrix_operation_by_operation() {
    assert_eq!(OPERATION_MATRIX.len(), 4);
    let catalog = Validators::new().unwrap();
    for union in OPERATION_MATRIX {
        let descriptor = ACTIONS
            .iter()
            .find(|a| a.domain == union.domain && a.action == union.action)
            .unwrap_or_else(|| panic!("no descriptor for {}.{}", union.domain, union.action));
        assert_eq!(descriptor.discriminator, Some(union.discriminator));
        let served: Vec<&str> = descriptor.operations.iter().map(|o| o.name).collect();
        let matrix: Vec<&str> = union.all().collect();
        assert_eq!(served, matrix, "{}.{}", union.domain, union.action);
        for operation in descriptor.operations {
            let read = union.reads.contains(&operation.name);
            let key = format!("{} {} {}", union.domain, union.action, operation.name);
            // The inventory's classification.
            assert_eq!(operation.risk == Risk::Read, read, "{key}");
            assert_eq!(
                operation.result_policy == ResultPolicy::Mutation,
                !read,
                "{key}"
            );
            // What every rule reads: the operation the input names, resolved from the
            // discriminator of the operation's own example (which the schema accepts).
            let example: Value = serde_json::from_str(operation.example).unwrap();
            catalog
                .validate_input(descriptor.id, &example)
                .unwrap_or_else(|e| panic!("{key}: the example is refused: {e:?}"));
            let effective = descriptor.effective(&example);
            assert_eq!(effective.operation.map(|o| o.name), Some(operation.name));
            assert_eq!(effective.risk().is_mutation(), !read, "{key}");
            assert_eq!(effective.name(), key);
            if read {
                assert!(
                    effective.hint().is_some() && effective.next().is_some(),
                    "{key}"
                );
                // An over-budget read continues; it never claims a mutation.
                let refusal = budget::over_budget(&catalog, effective, &json!({}), 70_000, None);
                assert!(refusal.metadata.is_none(), "{key}");
                assert_eq!(refusal.next.as_deref(), effective.next(), "{key}");
            } else {
                // An over-budget side effect answers with a receipt.
                let refusal = budget::over_budget(
                    &catalog,
                    effective,
                    &json!({}),
                    70_000,
                    Some("req-00000001"),
                );
                let metadata = refusal.metadata.expect("a mutation receipt");
                assert_eq!(metadata["mutation_applied"], true, "{key}");
            }
        }
    }
}

#[test]
fn every_side_effect_of_the_matrix_has_a_retrieval_through_its_read() {
    let catalog = Validators::new().unwrap();
    let ids = [
        ("plan", "plan", "wfp_01JD7M9Q2R", "show"),
        ("trigger", "trigger", "wft_01JD7MA3C4", "show"),
        ("run", "run", "wfr_01JD7MB5D6", "show"),
        ("step", "step", "wfs_01JD7MC7E8", "get"),
    ];
    for (action, resource, id, read) in ids {
        let descriptor = ACTIONS
            .iter()
            .find(|a| a.domain == "workflow" && a.action == action)
            .unwrap();
        for operation in descriptor
            .operations
            .iter()
            .filter(|o| o.risk.is_mutation())
        {
            let effective = descriptor.effective(&json!({ "operation": operation.name }));
            let data =
                json!({ "operation": operation.name, resource: { "id": id, "revision": 3 } });
            let receipt = budget::receipt(&catalog, effective, &data, Some("req-00000001"));
            let expected = format!(
                "agentteam exec workflow {action} '{{\"operation\":\"{read}\",\"{resource}Id\":\"{id}\"}}'"
            );
            assert_eq!(
                receipt,
                json!({
                    "selectors": { format!("{resource}Id"): id },
                    "revision": 3,
                    "idempotencyKey": "req-00000001",
                    "retrieval": expected,
                }),
                "workflow {action} {}",
                operation.name
            );
        }
    }
}

#[test]
fn an_operation_the_matrix_lacks_fails_the_build_naming_it() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        let plan = row(inventory, "workflow", "plan");
        plan["operations"].as_array_mut().unwrap().push(json!({
            "operation": "frobnicate", "risk": "write", "resultPolicy": "mutation",
            "example": {"operation": "frobnicate"}
        }));
    });
    refused(
        &schema,
        INVENTORY,
        "action `workflow.plan` lists operation `frobnicate`, which the operation matrix does not have",
    );
}

#[test]
fn a_misclassified_operation_fails_the_build_naming_it() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        let list = op(row(inventory, "workflow", "plan"), "list");
        list["risk"] = json!("write");
        list["resultPolicy"] = json!("mutation");
        let start = op(row(inventory, "workflow", "run"), "start");
        start["risk"] = json!("read");
        start["resultPolicy"] = json!("bounded");
        start["hint"] = json!("h");
        start["next"] = json!("n");
    });
    refused(
        &schema,
        INVENTORY,
        "operation `workflow plan list` is a read in the operation matrix, but its row says `write`",
    );
    refused(
        &schema,
        INVENTORY,
        "operation `workflow run start` is a side effect in the operation matrix, but its row says `read`",
    );
}

#[test]
fn a_read_operation_with_a_mutation_policy_or_no_continuation_is_refused() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        let logs = op(row(inventory, "workflow", "run"), "logs");
        logs["resultPolicy"] = json!("mutation");
        logs.as_object_mut().unwrap().remove("next");
    });
    refused(
        &schema,
        INVENTORY,
        "operation `workflow run logs` is a `read` operation with a `mutation` result policy",
    );
    refused(
        &schema,
        INVENTORY,
        "read operation `workflow run logs` needs `next`",
    );
}

#[test]
fn a_missing_operation_or_variant_fails_the_build_naming_it() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        let step = row(inventory, "workflow", "step");
        step["operations"]
            .as_array_mut()
            .unwrap()
            .retain(|o| o["operation"] != "park");
    });
    let input = schema.join("exec/workflow/trigger.input.json");
    let mut document: Value = serde_json::from_str(&fs::read_to_string(&input).unwrap()).unwrap();
    let variants = document["oneOf"].as_array_mut().unwrap();
    variants.retain(|v| v["properties"]["operation"]["const"] != "disable");
    let mut extra = variants[0].clone();
    extra["properties"]["operation"]["const"] = json!("explode");
    variants.push(extra);
    fs::write(&input, serde_json::to_string_pretty(&document).unwrap()).unwrap();
    refused(
        &schema,
        INVENTORY,
        "action `workflow.step` lacks operation `park` of the operation matrix",
    );
    refused(
        &schema,
        "schema/exec/workflow/trigger.input.json",
        "the input of `workflow.trigger` lacks a variant for operation `disable` of the operation matrix",
    );
    refused(
        &schema,
        "schema/exec/workflow/trigger.input.json",
        "the input of `workflow.trigger` has a variant for operation `explode`, which the operation matrix does not have",
    );
}

#[test]
fn a_row_of_the_matrix_without_operations_is_refused() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        let run = row(inventory, "workflow", "run");
        let object = run.as_object_mut().unwrap();
        object.remove("operations");
        object.remove("discriminator");
        object.insert("risk".into(), json!("write"));
        object.insert("resultPolicy".into(), json!("mutation"));
    });
    refused(
        &schema,
        INVENTORY,
        "action `workflow.run` is in the operation matrix: its row needs `discriminator` and one `operations` row per operation",
    );
}
