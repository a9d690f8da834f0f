//! The CLI surfaces that need no daemon: the `exec` help hierarchy, schemas, `openapi`,
//! `catalog` and `prompt`, driven through the real binary.

use std::fs;

use agentteam::contract::catalog::{ACTIONS, DOMAINS};
use serde_json::Value;

use crate::support::{Run, agentteam, repo_root};

#[track_caller]
fn check_ok(args: &[&str]) -> String {
    let run = agentteam(args);
    assert_eq!(run.code, 0, "agentteam {args:?} failed: {}", run.stderr);
    assert_eq!(run.stderr, "", "agentteam {args:?} wrote to stderr");
    run.stdout
}

#[track_caller]
fn check_usage_error(args: &[&str]) -> Run {
    let run = agentteam(args);
    assert_eq!(
        run.code, 2,
        "agentteam {args:?} should be a usage error: {run:?}"
    );
    assert_eq!(run.stdout, "", "a usage error prints nothing on stdout");
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

#[test]
fn root_help_snapshot() {
    insta::assert_snapshot!("exec_root_help", check_ok(&["exec", "--help"]));
}

#[test]
fn domain_help_snapshots() {
    for domain in DOMAINS {
        let help = check_ok(&["exec", domain.name, "--help"]);
        insta::assert_snapshot!(format!("exec_domain_help_{}", domain.name), help);
    }
}

/// The spec: an action's help renders concise usage and one canonical example, operation
/// unions included.
#[test]
fn action_help_snapshots_each_with_one_canonical_example() {
    for action in ACTIONS {
        let help = check_ok(&["exec", action.domain, action.action, "--help"]);
        let command = format!("agentteam exec {} {} '", action.domain, action.action);
        assert_eq!(
            help.matches(&command).count(),
            1,
            "{}.{} help must show exactly one example:\n{help}",
            action.domain,
            action.action
        );
        insta::assert_snapshot!(
            format!("exec_action_help_{}_{}", action.domain, action.action),
            help
        );
    }
}

#[test]
fn prompt_snapshot() {
    let prompt = check_ok(&["prompt"]);
    // The mixed index points to the help hierarchy and inlines the lifecycle examples.
    assert!(prompt.contains("agentteam exec <domain> --help"));
    for action in ACTIONS.iter().filter(|a| a.prompt_inline) {
        assert!(
            prompt.contains(&format!(
                "agentteam exec {} {} '{}'",
                action.domain, action.action, action.example
            )),
            "{}.{} example not inline",
            action.domain,
            action.action
        );
    }
    // The MCP guidance names every tool of the inventory, under the requested convention.
    for tool in agentteam::contract::TOOLS {
        assert!(
            prompt.contains(&format!("- `{}` (", tool.name)),
            "{}",
            tool.name
        );
    }
    let claude = check_ok(&["prompt", "--runtime", "claude"]);
    assert!(claude.contains("- `mcp__agentteam__message_history_read` (read-only)"));
    insta::assert_snapshot!("prompt", prompt);
}

#[test]
fn help_example_is_the_catalog_example() {
    for action in ACTIONS {
        let help = check_ok(&["exec", action.domain, action.action, "--help"]);
        assert!(
            help.contains(&format!("'{}'", action.example)),
            "{}.{}",
            action.domain,
            action.action
        );
    }
}

/// `--input-schema` and `--output-schema` print standalone schemas: they compile with no
/// registry, so no `$ref` dangles, and the canonical example passes the input schema.
#[test]
fn schemas_are_standalone() {
    for action in ACTIONS {
        for flag in ["--input-schema", "--output-schema"] {
            let text = check_ok(&["exec", action.domain, action.action, flag]);
            let schema: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{flag} of {}.{}: {e}", action.domain, action.action));
            assert_eq!(
                schema["$schema"],
                "https://json-schema.org/draft/2020-12/schema"
            );
            for reference in refs(&schema) {
                let name = reference
                    .strip_prefix("#/$defs/")
                    .unwrap_or_else(|| panic!("non-local ref `{reference}`"));
                assert!(
                    schema["$defs"].get(name).is_some(),
                    "dangling ref `{reference}` in {flag} of {}.{}",
                    action.domain,
                    action.action
                );
            }
            let validator = jsonschema::draft202012::options()
                .should_validate_formats(true)
                .build(&schema)
                .expect("standalone schema compiles offline");
            if flag == "--input-schema" {
                let example: Value = serde_json::from_str(action.example).unwrap();
                assert!(
                    validator.is_valid(&example),
                    "example of {}.{} does not validate",
                    action.domain,
                    action.action
                );
            }
        }
    }
}

#[test]
fn error_schema_is_the_envelope() {
    let schema: Value = serde_json::from_str(&check_ok(&["exec", "--error-schema"])).unwrap();
    let validator = jsonschema::draft202012::options().build(&schema).unwrap();
    let envelope = serde_json::json!({"ok": false, "error": {"code": "validation_failed", "message": "invalid input", "details": [{"path": "/title", "message": "too long"}]}});
    assert!(validator.is_valid(&envelope));
    assert!(!validator.is_valid(
        &serde_json::json!({"ok": false, "error": {"code": "no_such_code", "message": "x"}})
    ));
}

#[test]
fn openapi_is_byte_identical_to_generated() {
    let committed = fs::read_to_string(repo_root().join("generated/openapi.json")).unwrap();
    assert_eq!(check_ok(&["openapi"]), committed);
}

#[test]
fn catalog_json_is_byte_identical_to_generated() {
    let committed = fs::read_to_string(repo_root().join("generated/catalog.json")).unwrap();
    let printed = check_ok(&["catalog", "--json"]);
    assert_eq!(printed, committed);
    let catalog: Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(catalog["actions"].as_array().unwrap().len(), ACTIONS.len());
}

#[test]
fn catalog_table_lists_every_action_and_operation_with_risk_and_policy() {
    let table = check_ok(&["catalog"]);
    let rows: Vec<_> = ACTIONS.iter().flat_map(|a| a.each_operation()).collect();
    assert!(
        rows.len() > ACTIONS.len(),
        "operation unions have a row each"
    );
    assert_eq!(table.lines().count(), rows.len() + 1);
    for effective in rows {
        let mut name = vec![effective.descriptor.domain, effective.descriptor.action];
        name.extend(effective.operation.map(|op| op.name));
        let row = table
            .lines()
            .find(|line| {
                line.split_whitespace()
                    .take(name.len())
                    .eq(name.iter().copied())
                    && !line.split_whitespace().nth(name.len()).is_some_and(|next| {
                        effective
                            .descriptor
                            .operations
                            .iter()
                            .any(|op| op.name == next)
                    })
            })
            .unwrap_or_else(|| panic!("no row for {}", effective.name()));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            &cells[name.len()..name.len() + 2],
            [
                effective.risk().as_str(),
                effective.result_policy().as_str()
            ]
        );
    }
}

#[test]
fn unknown_domain_suggests_and_lists_valid_names() {
    let run = check_usage_error(&["exec", "tsak", "create"]);
    insta::assert_snapshot!("exec_unknown_domain", run.stderr);
}

#[test]
fn unknown_action_suggests_and_lists_valid_names() {
    let run = check_usage_error(&["exec", "task", "craete"]);
    insta::assert_snapshot!("exec_unknown_action", run.stderr);
}

#[test]
fn usage_errors_exit_2_without_panicking() {
    for args in [
        &["exec"][..],
        &["exec", "task"],
        &["exec", "--bogus"],
        &["exec", "task", "--bogus"],
        &["exec", "task", "create", "--bogus"],
        &["exec", "task", "create", "{}", "extra"],
        &["exec", "nope", "--help"],
        &["exec", "task", "nope", "--input-schema"],
    ] {
        let run = check_usage_error(args);
        assert!(run.stderr.contains("error: "), "{args:?}: {}", run.stderr);
    }
}

/// Without the daemon-injected variables, execution fails closed before anything else.
#[test]
fn execution_outside_a_runtime_fails_closed() {
    let run = check_usage_error(&["exec", "task", "get", r#"{"taskId":"task_01JD7M4B2C"}"#]);
    assert!(
        run.stderr.contains("AGENTTEAM_EXEC_BASE_URL"),
        "{}",
        run.stderr
    );
}

fn refs(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| {
                if k == "$ref" {
                    vec![v.as_str().unwrap().to_string()]
                } else {
                    refs(v)
                }
            })
            .collect(),
        Value::Array(items) => items.iter().flat_map(refs).collect(),
        _ => Vec::new(),
    }
}

/// The committed OpenAPI document passes an independent validator (`scripts/test` installs it).
#[test]
fn openapi_passes_openapi_spec_validator() {
    let validator = crate::support::venv_tool("openapi-spec-validator");
    let output = std::process::Command::new(&validator)
        .args(["--schema", "3.1", "--validation-errors", "all"])
        .arg(repo_root().join("generated/openapi.json"))
        .output()
        .expect("openapi-spec-validator runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("OK"),
        "openapi-spec-validator refused generated/openapi.json:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
