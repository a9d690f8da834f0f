//! `agentteam status` and `agentteam extensions`: what the local daemon runs and which extension
//! definitions it pinned (and which it left out, and why). Readable text for a person; `--json`
//! prints the daemon's answer for a program.

use serde_json::Value;

use super::daemon::{StateDir, admin_call};
use super::output::{Exit, print};

/// `agentteam status [--json]`.
pub fn status(state: StateDir, json: bool) -> Exit {
    let data = match admin_call(
        &state.state_dir,
        reqwest::Method::GET,
        "/api/admin/status",
        None,
    ) {
        Ok(data) => data,
        Err(exit) => return exit,
    };
    if json {
        return print(&format!("{data}\n"));
    }
    let number = |field: &str| data[field].as_u64().unwrap_or(0);
    let mut out = format!(
        "workspace  {}\nagents     {}\nruntimes   {}\nrequests   {} exec, {} mcp ({} in flight)\n",
        data["workspaceId"].as_str().unwrap_or("?"),
        number("agents"),
        number("leases"),
        number("execRequests"),
        number("mcpRequests"),
        number("acquiredRequests"),
    );
    out.push_str(&extensions_text(&data["extensions"]));
    print(&out)
}

/// `agentteam extensions [--reload] [--json]`.
pub fn extensions(state: StateDir, reload: bool, json: bool) -> Exit {
    let report = if reload {
        admin_call(
            &state.state_dir,
            reqwest::Method::POST,
            "/api/admin/extensions/reload",
            Some(serde_json::json!({})),
        )
    } else {
        admin_call(
            &state.state_dir,
            reqwest::Method::GET,
            "/api/admin/status",
            None,
        )
        .map(|data| data["extensions"].clone())
    };
    let report = match report {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    if json {
        return print(&format!("{report}\n"));
    }
    print(&extensions_text(&report))
}

fn extensions_text(report: &Value) -> String {
    let list = |field: &str| report[field].as_array().cloned().unwrap_or_default();
    let pinned = list("pinned");
    let mut out = String::new();
    if pinned.is_empty() {
        out.push_str("extensions none pinned\n");
    }
    for (index, entry) in pinned.iter().enumerate() {
        out.push_str(&format!(
            "{} {} version {} ({}, catalog {})\n",
            if index == 0 {
                "extensions"
            } else {
                "          "
            },
            entry["name"].as_str().unwrap_or("?"),
            entry["version"],
            entry["digest"].as_str().unwrap_or("?"),
            entry["catalogVersion"],
        ));
    }
    for entry in list("rejected") {
        out.push_str(&format!(
            "not pinned {} version {}: {}\n",
            entry["name"].as_str().unwrap_or("?"),
            entry["version"],
            entry["reason"].as_str().unwrap_or("?"),
        ));
    }
    if let Some(error) = report["fetchError"].as_str() {
        out.push_str(&format!("last fetch failed: {error}\n"));
    }
    out
}
