//! `agentteam catalog [--json]`: every built-in action with its risk and result policy, and
//! inside a runtime the actions of the extensions its launch pinned, listed the same way.

use serde_json::{Value, json};

use super::output::{Exit, print};
use crate::contract::catalog::{ACTIONS, CATALOG_JSON};
use crate::contract::extension::Known;

/// The extensions pinned for the runtime this command runs in (none outside one).
pub fn launch_extensions() -> Vec<Known> {
    std::env::var_os(super::exec::TOKEN_FILE_VAR)
        .filter(|v| !v.is_empty())
        .map(|file| super::transport::launch_extensions(std::path::Path::new(&file)))
        .unwrap_or_default()
}

pub fn run(json: bool) -> Exit {
    let extensions = launch_extensions();
    if json {
        let mut catalog: Value = serde_json::from_str(CATALOG_JSON).expect("generated JSON parses");
        for extension in &extensions {
            let definition = &extension.definition;
            catalog["domains"]
                .as_array_mut()
                .expect("domains")
                .push(json!({
                    "domain": definition.name, "summary": definition.summary, "owner": "extension",
                }));
            for action in &definition.actions {
                let mut row = json!({
                    "domain": definition.name,
                    "action": action.action,
                    "summary": action.summary,
                    "risk": action.risk.as_str(),
                    "resultPolicy": action.result_policy.as_str(),
                    "promptInline": false,
                    "example": action.example,
                });
                if let Some(hint) = &action.hint {
                    row["hint"] = json!(hint);
                }
                if let Some(next) = &action.next {
                    row["next"] = json!(next);
                }
                catalog["actions"]
                    .as_array_mut()
                    .expect("actions")
                    .push(row);
            }
        }
        return print(
            &(serde_json::to_string_pretty(&catalog).expect("a Value serializes") + "\n"),
        );
    }
    // One row per action, or per operation of an operation union (`plan list`).
    let headers = ["DOMAIN", "ACTION", "RISK", "POLICY", "SUMMARY"];
    let rows: Vec<[String; 5]> = ACTIONS
        .iter()
        .flat_map(|a| a.each_operation())
        .map(|e| {
            let action = match e.operation {
                Some(op) => format!("{} {}", e.descriptor.action, op.name),
                None => e.descriptor.action.to_string(),
            };
            [
                e.descriptor.domain.to_string(),
                action,
                e.risk().as_str().to_string(),
                e.result_policy().as_str().to_string(),
                e.descriptor.summary.to_string(),
            ]
        })
        .chain(extensions.iter().flat_map(|extension| {
            extension.definition.actions.iter().map(|action| {
                [
                    extension.definition.name.clone(),
                    action.action.clone(),
                    action.risk.as_str().to_string(),
                    action.result_policy.as_str().to_string(),
                    action.summary.clone(),
                ]
            })
        }))
        .collect();
    let mut widths = headers.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(headers.map(str::to_string)).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    print(&out)
}
