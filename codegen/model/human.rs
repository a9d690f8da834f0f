//! The human half of `schema/`: `human/<action>.json`, the actions a person takes through the
//! server's human API (with a device credential of theirs), beside the Exec actions and MCP tools
//! a runtime takes.
//!
//! A human action has its own input and output schemas, or reads exactly as an Exec read does
//! (`sameAs`: the Exec action whose schema pair it shares, a read of a server-owned domain, so a
//! person and an agent see one shape). A write takes `requestId`, as runtime writes do.

use serde::Deserialize;
use serde_json::Value;

use super::loader::{Loader, file_name, sorted_dir};
use super::{Action, DomainOwner, HUMAN_DIR, HumanAction, Risk, is_tool_name};
use crate::codegen::pascal_case;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HumanFile {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    name: String,
    summary: String,
    write: bool,
    #[serde(default)]
    same_as: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default)]
    output_schema: Option<Value>,
    #[serde(rename = "$defs", default)]
    _defs: Option<Value>,
}

/// Action names from `schema/human/<name>.json`.
pub(super) fn scan(loader: &mut Loader<'_>) -> Vec<String> {
    let mut names = Vec::new();
    for path in sorted_dir(&loader.root.join(HUMAN_DIR)) {
        let name = file_name(&path);
        match name.strip_suffix(".json") {
            Some(stem) if is_tool_name(stem) => names.push(stem.to_string()),
            _ => loader.diag(
                &format!("{HUMAN_DIR}/{name}"),
                "",
                "unexpected file: human actions are named <action>.json, matching ^[a-z][a-z0-9_]*$",
            ),
        }
    }
    names
}

/// Loads, checks and hoists `schema/human/<stem>.json`; `actions` are the Exec actions a
/// `sameAs` may name.
pub(super) fn load(loader: &mut Loader<'_>, stem: &str, actions: &[Action]) -> Option<HumanAction> {
    let file = format!("{HUMAN_DIR}/{stem}.json");
    let value = loader.read_json(&file)?;
    let human: HumanFile = serde_json::from_value(value.clone())
        .map_err(|e| loader.diag(&file, "", format!("malformed human action: {e}")))
        .ok()?;
    if human.name != stem {
        loader.diag(
            &file,
            "/name",
            format!(
                "action name `{}` must equal the file name `{stem}`",
                human.name
            ),
        );
    }
    if human.summary.trim().is_empty() || human.summary.ends_with('.') {
        loader.diag(
            &file,
            "/summary",
            "a summary is one line without a trailing period",
        );
    }
    let stem_type = format!("Human{}", pascal_case(stem));
    let (input_type, output_type) = match (
        &human.same_as,
        &human.input_schema,
        &human.output_schema,
    ) {
        (Some(key), None, None) => {
            let Some(action) = actions.iter().find(|a| &a.key() == key) else {
                loader.diag(
                    &file,
                    "/sameAs",
                    format!("`{key}` is no Exec action (`domain.action`)"),
                );
                return None;
            };
            if action.owner != DomainOwner::Server || action.risk != Risk::Read || human.write {
                loader.diag(
                    &file,
                    "/sameAs",
                    format!("`{key}` must be a read of a server-owned domain, and the human action a read: a person's writes have schemas of their own"),
                );
            }
            (action.input_type.clone(), action.output_type.clone())
        }
        (None, Some(input), Some(output)) => {
            loader.hoist_local(&file, &value, &stem_type);
            let input_type = format!("{stem_type}Input");
            let output_type = format!("{stem_type}Output");
            for (pointer, schema, type_name) in [
                ("/inputSchema", input, &input_type),
                ("/outputSchema", output, &output_type),
            ] {
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    loader.diag(&file, pointer, "must be an object schema (`type: object`)");
                }
                loader.lint(&file, schema);
                loader.add_root(&file, type_name, schema, &stem_type);
            }
            let takes_request_id = input.pointer("/properties/requestId").is_some();
            if human.write && !takes_request_id {
                loader.diag(&file, "/inputSchema", "a human write takes `requestId` (its idempotency selector), as runtime writes do");
            }
            if !human.write && takes_request_id {
                loader.diag(&file, "/inputSchema", "a read takes no `requestId`");
            }
            (input_type, output_type)
        }
        _ => {
            loader.diag(
                &file,
                "",
                "a human action has `inputSchema` and `outputSchema`, or `sameAs` and neither",
            );
            return None;
        }
    };
    Some(HumanAction {
        name: human.name,
        summary: human.summary,
        write: human.write,
        same_as: human.same_as,
        input_type,
        output_type,
    })
}
