//! Registry invariants over the whole generated catalog: when a new action breaks a convention,
//! this fails, not a reviewer.

use std::collections::BTreeSet;

use agentteam::contract::Validators;
use agentteam::contract::catalog::{ACTIONS, ActionId, DOMAINS, OPENAPI, ResultPolicy, Risk};
use serde_json::Value;

use crate::support::repo_root;

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

#[test]
fn names_are_unique_and_well_formed() {
    let mut keys = BTreeSet::new();
    for action in ACTIONS {
        assert!(
            is_name(action.domain) && is_name(action.action),
            "{}.{}",
            action.domain,
            action.action
        );
        assert!(
            keys.insert((action.domain, action.action)),
            "duplicate {}.{}",
            action.domain,
            action.action
        );
        assert!(
            DOMAINS.iter().any(|d| d.name == action.domain),
            "{} has no domain row",
            action.domain
        );
    }
    let domains: BTreeSet<&str> = DOMAINS.iter().map(|d| d.name).collect();
    assert_eq!(domains.len(), DOMAINS.len(), "duplicate domain");
    for domain in DOMAINS {
        assert!(
            ACTIONS.iter().any(|a| a.domain == domain.name),
            "domain {} has no action",
            domain.name
        );
    }
}

#[test]
fn action_ids_index_their_descriptors() {
    assert_eq!(ActionId::ALL.len(), ACTIONS.len());
    for id in ActionId::ALL {
        assert_eq!(id.descriptor().id, *id);
    }
}

#[test]
fn every_example_validates_against_its_input_schema() {
    let compiled = Validators::new().expect("every descriptor schema compiles");
    for action in ACTIONS {
        let example: Value = serde_json::from_str(action.example).unwrap();
        if let Err(error) = compiled.validate_input(action.id, &example) {
            panic!(
                "example of {}.{} is invalid: {error:?}",
                action.domain, action.action
            );
        }
    }
}

#[test]
fn summaries_are_one_line_without_period() {
    for action in ACTIONS {
        assert!(
            !action.summary.is_empty()
                && !action.summary.ends_with('.')
                && !action.summary.contains('\n'),
            "{}.{}",
            action.domain,
            action.action
        );
    }
}

#[test]
fn read_actions_have_continuations_and_no_mutation_policy() {
    // Per operation, for an operation union.
    for effective in ACTIONS.iter().flat_map(|a| a.each_operation()) {
        let key = effective.name();
        match effective.risk() {
            Risk::Read => {
                assert!(
                    effective.hint().is_some_and(|h| !h.is_empty()),
                    "{key} lacks hint"
                );
                assert!(
                    effective.next().is_some_and(|n| !n.is_empty()),
                    "{key} lacks next"
                );
                assert_ne!(effective.result_policy(), ResultPolicy::Mutation, "{key}");
            }
            Risk::Write | Risk::Destructive => {
                assert_eq!(effective.result_policy(), ResultPolicy::Mutation, "{key}")
            }
        }
    }
}

#[test]
fn openapi_has_one_post_path_per_action_and_nothing_else() {
    let document: Value = serde_json::from_str(OPENAPI).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().unwrap();
    assert_eq!(paths.len(), ACTIONS.len(), "one path per action");
    for action in ACTIONS {
        let path = format!(
            "/api/internal/exec/servers/{{serverId}}/agents/{{agentId}}/{}/{}",
            action.domain, action.action
        );
        let operation = &paths.get(&path).unwrap_or_else(|| panic!("no path {path}"))["post"];
        assert_eq!(
            operation["operationId"],
            format!("{}.{}", action.domain, action.action)
        );
        assert_eq!(
            operation["x-agentteam-risk"],
            action.as_whole().risk().as_str()
        );
        // An operation union also states each operation's own risk and policy.
        let operations: Vec<Value> = action
            .operations
            .iter()
            .map(|op| {
                serde_json::json!({"operation": op.name, "risk": op.risk.as_str(), "resultPolicy": op.result_policy.as_str()})
            })
            .collect();
        assert_eq!(
            operation
                .pointer("/x-agentteam-operations/operations")
                .cloned()
                .unwrap_or(Value::Array(vec![])),
            Value::Array(operations)
        );
        let input_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap();
        assert_eq!(
            input_ref,
            format!("#/components/schemas/{}", action.input_type)
        );
    }
}

/// A tool family has one transport: no Exec domain is also an MCP tool family.
#[test]
fn no_exec_domain_is_an_mcp_tool_family() {
    let mcp_dir = repo_root().join("schema/mcp");
    let tools: Vec<String> = std::fs::read_dir(&mcp_dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .strip_suffix(".json")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    for tool in &tools {
        for domain in DOMAINS {
            assert!(
                !crate::codegen::model::collides(tool, domain.name),
                "MCP tool {tool} collides with Exec domain {}",
                domain.name
            );
        }
    }
}

/// The descriptor's property list (what the legacy aliases consult instead of re-parsing the
/// schema on every request) is exactly the input schema's top-level properties.
#[test]
fn input_properties_match_the_input_schema() {
    for action in ACTIONS {
        let schema: Value = serde_json::from_str(action.input_schema).unwrap();
        let properties: Vec<&str> = schema["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(action.input_properties, properties, "{}", action.id.key());
    }
}
