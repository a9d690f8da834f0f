//! `agentteam status`, `runs`, `turn` and `extensions`: what the local daemon runs, the turn each
//! run answers, and which extension definitions it pinned (and which it left out, and why).
//! Readable text for a person; `--json` prints the daemon's answer for a program.

use serde_json::Value;

use super::daemon::{StateDir, admin_call};
use super::output::{Exit, count, print, table};

/// `agentteam status [--json] [--ids]`.
pub fn status(state: StateDir, json: bool, ids: bool) -> Exit {
    let data = match admin_call(&state, reqwest::Method::GET, "/api/admin/status", None) {
        Ok(data) => data,
        Err(exit) => return exit,
    };
    if json {
        return print(&format!("{data}\n"));
    }
    let number = |field: &str| data[field].as_u64().unwrap_or(0);
    let admission = &data["admission"];
    let mut out = format!(
        "daemon     up, version {}, pid {}\nserver     {} ({})\nworkspace  {} (your channel {})\nagents     {} registered here\n",
        data["version"].as_str().unwrap_or("?"),
        number("pid"),
        if data["serverReachable"].as_bool() == Some(true) {
            "reachable"
        } else {
            "UNREACHABLE"
        },
        data["serverHop"].as_str().unwrap_or("?"),
        data["workspaceId"].as_str().unwrap_or("?"),
        data["channelId"].as_str().unwrap_or("?"),
        count(number("agents"), "agent", "agents"),
    );
    out.push_str(&format!(
        "runtimes   {} of {}{}\n",
        admission["runtimes"].as_u64().unwrap_or(0),
        admission["maxRuntimes"].as_u64().unwrap_or(0),
        match data["nextRotationInMs"].as_u64() {
            Some(ms) => format!("; next credential rotation in {}", age(ms)),
            None => String::new(),
        },
    ));
    let runtimes: Vec<Vec<String>> = data["runtimes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|run| {
            vec![
                run["runId"].as_str().unwrap_or("?").to_string(),
                agent_name(run, ids),
                format!("up {}", age(run["ageMs"].as_u64().unwrap_or(0))),
            ]
        })
        .collect();
    if !runtimes.is_empty() {
        for line in table(&["RUN", "AGENT", "AGE"], &runtimes).lines() {
            out.push_str(&format!("           {line}\n"));
        }
    }
    out.push_str(&format!(
        "requests   {} exec, {} mcp; {} of {} admission slots in use\ncleanup    {} waiting for removal\n",
        number("execRequests"),
        number("mcpRequests"),
        admission["requestsInFlight"].as_u64().unwrap_or(0),
        admission["maxRequestsInFlight"].as_u64().unwrap_or(0),
        count(number("cleanupDebt"), "credential directory", "credential directories"),
    ));
    let memory = &data["memory"];
    out.push_str(&format!(
        "memory     {}, {} indexed for {}{}{}\n",
        count(memory["files"].as_u64().unwrap_or(0), "file", "files"),
        count(
            memory["sections"].as_u64().unwrap_or(0),
            "section",
            "sections"
        ),
        count(memory["agents"].as_u64().unwrap_or(0), "agent", "agents"),
        match memory["building"].as_u64().unwrap_or(0) {
            0 => String::new(),
            n => format!(", {n} building"),
        },
        if memory["watching"].as_bool().unwrap_or(false) {
            ""
        } else {
            " (no file watcher: every search scans)"
        },
    ));
    if let Some(skipped) = memory["skippedFiles"].as_u64().filter(|n| *n > 0) {
        out.push_str(&format!(
            "           {} left out (over 1 MiB, a path over 512 bytes, or over 50000 files)\n",
            count(skipped, "file", "files")
        ));
    }
    out.push_str(&extensions_text(&data["extensions"]));
    if data["binary"]["replaced"] == true {
        out.push_str(&format!(
            "upgrade    `{}` is another binary than this daemon started from: `agentteam daemon restart` runs it ({} then stopped)\n",
            data["binary"]["path"].as_str().unwrap_or("?"),
            count(
                admission["runtimes"].as_u64().unwrap_or(0),
                "runtime is",
                "runtimes are"
            ),
        ));
    }
    print(&out)
}

/// `agentteam status --metrics`: the daemon's metrics as Prometheus scrapes them, fetched with
/// the admin token the CLI reads itself (no token on a command line).
pub fn metrics(state: StateDir) -> Exit {
    match super::daemon::admin_text(&state, "/api/admin/metrics") {
        Ok(text) => print(&text),
        Err(exit) => exit,
    }
}

/// A duration for a person: `45s`, `3m 12s`, `2h 5m`.
fn age(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {}s", secs / 60, secs % 60),
        _ => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
    }
}

/// `agentteam runs [--json] [--ids]`.
pub fn runs(state: StateDir, json: bool, ids: bool) -> Exit {
    let data = match admin_call(&state, reqwest::Method::GET, "/api/admin/runs", None) {
        Ok(data) => data,
        Err(exit) => return exit,
    };
    if json {
        return print(&format!("{data}\n"));
    }
    let runs = data["runs"].as_array().cloned().unwrap_or_default();
    if runs.is_empty() {
        return print("no runtime is running\n");
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            vec![
                run["runId"].as_str().unwrap_or("?").to_string(),
                agent_name(run, ids),
                run["session"].as_str().unwrap_or("?").to_string(),
                run["pid"].to_string(),
                turn_text(&run["turn"]),
            ]
        })
        .collect();
    print(&table(&["RUN", "AGENT", "SESSION", "PID", "TURN"], &rows))
}

/// A run's agent for a person: its handle, or its id when asked (or when no profile is left).
fn agent_name(run: &Value, ids: bool) -> String {
    let id = run["agentId"].as_str().unwrap_or("?");
    match run["agentHandle"].as_str() {
        Some(handle) if !ids => handle.to_string(),
        _ => id.to_string(),
    }
}

/// `agentteam turn RUN (--target T --message M | --clear) [--json]`.
pub fn turn(state: StateDir, run: &str, turn: Option<(String, String)>, json: bool) -> Exit {
    let path = format!("/api/admin/runs/{}/turn", percent(run));
    let answer = match &turn {
        Some((target, message)) => admin_call(
            &state,
            reqwest::Method::PUT,
            &path,
            Some(serde_json::json!({ "target": target, "messageId": message })),
        ),
        None => admin_call(&state, reqwest::Method::DELETE, &path, None),
    };
    let data = match answer {
        Ok(data) => data,
        Err(exit) => return exit,
    };
    if json {
        return print(&format!("{data}\n"));
    }
    print(&format!(
        "run {} now answers {}\n",
        data["run"]["runId"].as_str().unwrap_or(run),
        turn_text(&data["run"]["turn"])
    ))
}

fn turn_text(turn: &Value) -> String {
    match (turn["target"].as_str(), turn["messageId"].as_str()) {
        (Some(target), Some(message)) => format!("{target} (message {message})"),
        _ => "no turn".to_string(),
    }
}

/// A path segment with everything but unreserved characters escaped.
fn percent(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `agentteam extensions [--reload] [--json]`.
pub fn extensions(state: StateDir, reload: bool, json: bool) -> Exit {
    let report = if reload {
        admin_call(
            &state,
            reqwest::Method::POST,
            "/api/admin/extensions/reload",
            Some(serde_json::json!({})),
        )
    } else {
        admin_call(&state, reqwest::Method::GET, "/api/admin/status", None)
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
