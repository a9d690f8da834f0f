//! The seed extension definitions in `schema/extensions/<name>.json`: the server's extension host
//! serves them as version 1 (`extensions.json`), so they obey the rules every published version
//! obeys (`src/contract/extension.rs` checks those at run time): the file is named after the
//! extension, the name is free (no built-in domain, no MCP tool family), summaries are one line,
//! every action follows the read/mutation result-policy rule, and every schema passes the lint.

use std::fs;

use serde_json::Value;

use super::loader::Loader;
use super::{Domain, McpTool, Subject, check_policy, collides, is_name};
use crate::codegen::lint;

/// The directory of the seed definitions.
pub const EXTENSIONS_DIR: &str = "extensions";

/// One seed definition, as written.
#[derive(Debug, Clone)]
pub struct Extension {
    pub definition: Value,
}

/// Reads and checks every `schema/extensions/*.json`, sorted by name.
pub(super) fn load(
    loader: &mut Loader<'_>,
    domains: &[Domain],
    tools: &[McpTool],
) -> Vec<Extension> {
    let dir = loader.root.join(EXTENSIONS_DIR);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let mut extensions = Vec::new();
    for file_name in files {
        let file = format!("{EXTENSIONS_DIR}/{file_name}");
        let Some(definition) = loader.read_json(&file) else {
            continue;
        };
        let stem = file_name.trim_end_matches(".json");
        check(loader, &file, stem, &definition, domains, tools);
        extensions.push(Extension { definition });
    }
    extensions
}

fn check(
    loader: &mut Loader<'_>,
    file: &str,
    stem: &str,
    definition: &Value,
    domains: &[Domain],
    tools: &[McpTool],
) {
    let name = definition.get("name").and_then(Value::as_str).unwrap_or("");
    if name != stem {
        loader.diag(
            file,
            "/name",
            format!("the extension in `{file}` must be named `{stem}`, not `{name}`"),
        );
    }
    if !is_name(name) {
        loader.diag(
            file,
            "/name",
            format!("extension name `{name}` must match ^[a-z][a-z0-9-]*$"),
        );
    }
    if domains.iter().any(|d| d.name == name) {
        loader.diag(
            file,
            "/name",
            format!("extension `{name}` has the name of a built-in Exec domain"),
        );
    }
    for tool in tools {
        if collides(&tool.name, name) {
            loader.diag(file, "/name", format!("extension `{name}` collides with MCP tool `{}`: a tool family has one transport", tool.name));
        }
    }
    if !matches!(
        definition.get("provider").and_then(Value::as_str),
        Some("github" | "gitea")
    ) {
        loader.diag(
            file,
            "/provider",
            "`provider` must be `github` or `gitea`, the protocols the extension host speaks",
        );
    }
    let Some(actions) = definition.get("actions").and_then(Value::as_array) else {
        loader.diag(file, "/actions", "an extension lists its `actions`");
        return;
    };
    for (index, action) in actions.iter().enumerate() {
        let pointer = format!("/actions/{index}");
        let action_name = action.get("action").and_then(Value::as_str).unwrap_or("");
        let key = format!("{name}.{action_name}");
        let risk = action
            .get("risk")
            .and_then(|r| serde_json::from_value::<super::Risk>(r.clone()).ok());
        let policy = action
            .get("resultPolicy")
            .and_then(|p| serde_json::from_value::<super::ResultPolicy>(p.clone()).ok());
        let (Some(risk), Some(policy)) = (risk, policy) else {
            loader.diag(
                file,
                &pointer,
                format!("action `{key}` needs `risk` and `resultPolicy`"),
            );
            continue;
        };
        let text = |field: &str| {
            action
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        check_policy(
            loader,
            file,
            &pointer,
            Subject::Action(&key),
            risk.is_mutation(),
            policy,
            [&text("hint"), &text("next")],
        );
        for side in ["input", "output"] {
            match action.get(side) {
                Some(schema) => {
                    for problem in lint::lint_schema(schema) {
                        loader.diag(
                            file,
                            &format!("{pointer}/{side}{}", problem.pointer),
                            problem.message,
                        );
                    }
                }
                None => loader.diag(
                    file,
                    &pointer,
                    format!("action `{key}` has no `{side}` schema"),
                ),
            }
        }
    }
}
