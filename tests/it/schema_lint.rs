//! The schema lint: every file under `schema/` is valid JSON Schema 2020-12, uses only allowed
//! keywords, and names only existing properties in `required`; and the lint really rejects what
//! it promises to.

use std::path::Path;

use serde_json::{Value, json};

use crate::codegen::lint::lint_schema;
use crate::support::repo_root;

fn schema_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            schema_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

#[test]
fn every_schema_file_is_valid_2020_12_and_lint_clean() {
    let mut files = Vec::new();
    schema_files(&repo_root().join("schema"), &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    for file in files {
        if file.ends_with("agentteam-exec-action-inventory.json") {
            continue;
        }
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        // An MCP tool file is a definition holding two schemas; the budget file holds none; an
        // extension definition holds two per action; a human action holds two, or none when it
        // shares an Exec read's.
        let schemas = if file.parent().unwrap().ends_with("human") {
            ["inputSchema", "outputSchema"]
                .iter()
                .filter_map(|key| value.get(*key).cloned())
                .collect()
        } else if file.parent().unwrap().ends_with("mcp") {
            if file.ends_with("result-budget.json") {
                continue;
            }
            vec![value["inputSchema"].clone(), value["outputSchema"].clone()]
        } else if file.parent().unwrap().ends_with("extensions") {
            value["actions"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|action| [action["input"].clone(), action["output"].clone()])
                .collect()
        } else {
            vec![value]
        };
        for schema in schemas {
            assert!(schema.is_object(), "{}", file.display());
            if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
                panic!("{} is not valid JSON Schema 2020-12: {e}", file.display());
            }
            assert_eq!(lint_schema(&schema), vec![], "{}", file.display());
        }
    }
}

#[track_caller]
fn check_rejected(schema: Value, expected: &str) {
    let problems = lint_schema(&schema);
    assert!(
        problems.iter().any(|p| p.message.contains(expected)),
        "expected a problem mentioning {expected:?}, got {problems:?}"
    );
}

fn object(properties: Value, extra: Value) -> Value {
    let mut schema =
        json!({"type": "object", "properties": properties, "additionalProperties": false});
    schema
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    schema
}

#[test]
fn lint_rejects_what_typify_cannot_do() {
    check_rejected(
        object(
            json!({"a": {"type": "string"}}),
            json!({"if": {}, "then": {}}),
        ),
        "keyword `if` is not allowed",
    );
    check_rejected(
        json!({"allOf": [{"type": "object"}]}),
        "keyword `allOf` is not allowed",
    );
    check_rejected(
        json!({"type": "array", "prefixItems": [{"type": "string"}]}),
        "keyword `prefixItems` is not allowed",
    );
    check_rejected(
        json!({"type": "string", "enum": ["a", null]}),
        "`null` in `enum`",
    );
    check_rejected(
        object(
            json!({"a": {"type": "string", "unevaluatedProperties": false}}),
            json!({}),
        ),
        "keyword `unevaluatedProperties`",
    );
}

#[test]
fn lint_rejects_typos_and_missing_required_names() {
    check_rejected(
        object(json!({"a": {"type": "string"}}), json!({"requried": ["a"]})),
        "keyword `requried` is not allowed",
    );
    check_rejected(
        object(json!({"a": {"type": "string"}}), json!({"required": ["b"]})),
        "required property \"b\" is not in `properties`",
    );
}

#[test]
fn lint_requires_closed_camel_case_objects() {
    check_rejected(
        json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        "additionalProperties: false",
    );
    check_rejected(
        object(json!({"task_id": {"type": "string"}}), json!({})),
        "lowerCamelCase",
    );
}

#[test]
fn lint_walks_nested_positions() {
    let nested = json!({"$defs": {"X": {"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "a"}}, "additionalProperties": false},
        {"type": "array", "items": {"type": "string", "not": {}}}
    ]}}});
    check_rejected(nested, "keyword `not` is not allowed");
}

#[test]
fn lint_accepts_the_house_style() {
    let schema = object(
        json!({"taskId": {"$ref": "#/$defs/TaskId"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 4}}),
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "required": ["taskId"], "$defs": {"TaskId": {"type": "string", "pattern": "^task_"}}}),
    );
    assert_eq!(lint_schema(&schema), vec![]);
}
