//! `agentteam admin audit`: what happened in a workspace, newest first: every runtime request
//! and operator action the server recorded (who, what, the outcome, how long), as a table or as
//! JSON. Follows the server's keyset pages until `--limit` records.

use clap::Args;
use serde_json::{Value, json};

use super::http::{Peer, Session};
use super::operator::Connection;
use super::output::{Exit, print, usage_error};

/// Records at most, whatever `--limit` asks.
pub const MAX_LIMIT: usize = 10_000;
/// Records per page asked of the server (its maximum).
const PAGE: usize = 100;

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    connection: Connection,
    #[arg(long)]
    workspace: String,
    /// Only this agent's records
    #[arg(long)]
    agent: Option<String>,
    /// Only records from this time on (RFC 3339, e.g. 2026-11-30T09:00:00Z)
    #[arg(long)]
    since: Option<String>,
    /// How many records, newest first (1 to 10000)
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

/// Prints the records as a table, or as JSON with `json` (`agentteam admin --json`).
pub fn run(args: AuditArgs, json: bool) -> Exit {
    if !(1..=MAX_LIMIT).contains(&args.limit) {
        return usage_error(&format!("`--limit` is 1 to {MAX_LIMIT}"), &[]);
    }
    let (base, token, remote) = match args.connection.open() {
        Ok(opened) => opened,
        Err(exit) => return exit,
    };
    let session = Session::new(Peer::Server(&remote));
    let url = format!("{base}/admin/workspaces/{}/audit/list", args.workspace);
    let mut records: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut body = json!({ "limit": PAGE.min(args.limit - records.len()) });
        for (field, value) in [
            ("agentId", &args.agent),
            ("since", &args.since),
            ("cursor", &cursor),
        ] {
            if let Some(value) = value {
                body[field] = json!(value);
            }
        }
        let data = match session.call(reqwest::Method::POST, &url, &token, Some(&body)) {
            Ok(data) => data,
            Err(exit) => return exit,
        };
        records.extend(data["records"].as_array().cloned().unwrap_or_default());
        cursor = data["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() || records.len() >= args.limit {
            break;
        }
    }
    if json {
        return print(&format!("{}\n", json!({ "records": records })));
    }
    print(&records_table(&records))
}

/// The records as aligned columns.
fn records_table(records: &[Value]) -> String {
    let text = |record: &Value, field: &str| record[field].as_str().unwrap_or("-").to_string();
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let agent = match (text(r, "agentId"), r["verified"].as_bool()) {
                (agent, Some(false)) if agent != "-" => format!("{agent} (unverified)"),
                (agent, _) => agent,
            };
            vec![
                text(r, "at"),
                text(r, "family"),
                text(r, "action"),
                text(r, "outcome"),
                agent,
                text(r, "deviceId"),
                format!(
                    "{:.1} ms",
                    r["durationUs"].as_i64().unwrap_or(0) as f64 / 1000.0
                ),
            ]
        })
        .collect();
    let mut out = super::output::table(
        &[
            "TIME", "FAMILY", "ACTION", "OUTCOME", "AGENT", "DEVICE", "DURATION",
        ],
        &rows,
    );
    if rows.is_empty() {
        out.push_str("(no records)\n");
    }
    out
}
