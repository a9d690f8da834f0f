//! The MCP half of `schema/`: `mcp/<tool>.json` files and the result budget contract.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::loader::{Loader, file_name, sorted_dir};
use super::{
    MAX_MODEL_VISIBLE_NAME, MAX_TOOL_NAME, MCP_BUDGET_FILE, MCP_DIR, MODEL_VISIBLE_PREFIXES,
    McpBudget, McpTool, Subject, check_policy, is_tool_name,
};
use super::{ResultPolicy, ToolOwner};
use crate::codegen::pascal_case;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolFile {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    name: String,
    description: String,
    annotations: Map<String, Value>,
    owner: ToolOwner,
    result_policy: ResultPolicy,
    #[serde(default)]
    hint: Option<String>,
    #[serde(default)]
    next: Option<String>,
    input_schema: Value,
    output_schema: Value,
    /// Guidance injected together with the tool (a runtime skill).
    #[serde(default)]
    skill: Option<SkillFile>,
    #[serde(rename = "$defs", default)]
    _defs: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SkillFile {
    name: String,
    text: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BudgetFile {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    max_result_bytes: u64,
    description: String,
}

/// Tool names from `schema/mcp/<tool>.json` (the file stem; the MCP generator checks the
/// `name` field matches it).
pub(super) fn scan(loader: &mut Loader<'_>) -> Vec<String> {
    let budget = Path::new(MCP_BUDGET_FILE)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let mut tools = Vec::new();
    for path in sorted_dir(&loader.root.join(MCP_DIR)) {
        let name = file_name(&path);
        if name == budget {
            continue;
        }
        match name.strip_suffix(".json") {
            Some(stem) if is_tool_name(stem) => tools.push(stem.to_string()),
            _ => loader.diag(
                &format!("{MCP_DIR}/{name}"),
                "",
                format!("unexpected file: MCP tools are named <tool>.json with a name matching ^[a-z][a-z0-9_]*$ of at most {MAX_TOOL_NAME} characters (its model-visible form `{}<tool>` must stay within {MAX_MODEL_VISIBLE_NAME})", MODEL_VISIBLE_PREFIXES[0]),
            ),
        }
    }
    tools
}

/// Loads, checks and hoists `schema/mcp/<stem>.json`.
pub(super) fn load(loader: &mut Loader<'_>, stem: &str) -> Option<McpTool> {
    let file = format!("{MCP_DIR}/{stem}.json");
    let value = loader.read_json(&file)?;
    let tool: ToolFile = serde_json::from_value(value.clone())
        .map_err(|e| loader.diag(&file, "", format!("malformed MCP tool: {e}")))
        .ok()?;
    if tool.name != stem {
        loader.diag(
            &file,
            "/name",
            format!(
                "tool name `{}` must equal the file name `{stem}`",
                tool.name
            ),
        );
    }
    if tool.description.trim().is_empty() {
        loader.diag(
            &file,
            "/description",
            "a tool needs a description (clients show it to the model)",
        );
    }
    let read_only = match tool.annotations.get("readOnlyHint") {
        Some(Value::Bool(read_only)) => *read_only,
        _ => {
            loader.diag(&file, "/annotations", "`readOnlyHint` must be stated explicitly as true or false: the delegated-child gate reads it");
            false
        }
    };
    for (key, value) in &tool.annotations {
        let ok = match key.as_str() {
            "title" => value.is_string(),
            "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint" => {
                value.is_boolean()
            }
            _ => false,
        };
        if !ok {
            loader.diag(
                &file,
                &format!("/annotations/{key}"),
                format!("`{key}` is not an MCP tool annotation of the right type"),
            );
        }
    }
    check_policy(
        loader,
        &file,
        "",
        Subject::Tool(stem),
        !read_only,
        tool.result_policy,
        [&tool.hint, &tool.next],
    );
    if let Some(skill) = &tool.skill
        && (!super::is_name(&skill.name) || skill.text.trim().is_empty())
    {
        loader.diag(
            &file,
            "/skill",
            "a skill has a name matching ^[a-z][a-z0-9-]*$ and a text",
        );
    }
    let stem_type = pascal_case(stem);
    let input_type = format!("{stem_type}Input");
    let output_type = format!("{stem_type}Output");
    loader.hoist_local(&file, &value, &stem_type);
    for (pointer, schema, type_name) in [
        ("/inputSchema", &tool.input_schema, &input_type),
        ("/outputSchema", &tool.output_schema, &output_type),
    ] {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            loader.diag(&file, pointer, "must be an object schema (`type: object`): MCP requires it for arguments, and legacy clients for structured results");
        }
        loader.lint(&file, schema);
        loader.add_root(&file, type_name, schema, &stem_type);
    }
    Some(McpTool {
        name: tool.name,
        description: tool.description,
        annotations: tool.annotations,
        read_only,
        owner: tool.owner,
        result_policy: tool.result_policy,
        hint: tool.hint,
        next: tool.next,
        skill: tool.skill.map(|s| (s.name, s.text)),
        input_type,
        output_type,
    })
}

pub(super) fn load_budget(loader: &mut Loader<'_>) -> Option<McpBudget> {
    let value = loader.read_json(MCP_BUDGET_FILE)?;
    let budget: BudgetFile = serde_json::from_value(value)
        .map_err(|e| loader.diag(MCP_BUDGET_FILE, "", format!("malformed result budget: {e}")))
        .ok()?;
    if !(1024..=16 * 1024 * 1024).contains(&budget.max_result_bytes) {
        loader.diag(
            MCP_BUDGET_FILE,
            "/maxResultBytes",
            "must be between 1 KiB and 16 MiB",
        );
    }
    Some(McpBudget {
        max_result_bytes: budget.max_result_bytes,
        description: budget.description,
    })
}
