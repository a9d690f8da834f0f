//! `agentteam catalog [--json]`: every built-in action with its risk and result policy.

use super::output::{Exit, print};
use crate::contract::catalog::{ACTIONS, CATALOG_JSON};

pub fn run(json: bool) -> Exit {
    if json {
        return print(CATALOG_JSON);
    }
    let headers = ["DOMAIN", "ACTION", "RISK", "POLICY", "SUMMARY"];
    let rows: Vec<[&str; 5]> = ACTIONS
        .iter()
        .map(|a| {
            [
                a.domain,
                a.action,
                a.risk.as_str(),
                a.result_policy.as_str(),
                a.summary,
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
    for row in std::iter::once(headers).chain(rows) {
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
