//! `agentteam catalog [--json]`: every built-in action with its risk and result policy.

use super::output::{Exit, print};
use crate::contract::catalog::{ACTIONS, CATALOG_JSON};

pub fn run(json: bool) -> Exit {
    if json {
        return print(CATALOG_JSON);
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
