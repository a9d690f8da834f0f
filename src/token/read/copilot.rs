//! Copilot CLI: `session-state/<id>/events.jsonl`.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::daemon::runtime::driver::Family;
use crate::token::session::{Builder, Session, Usage};

use super::{json_lines, result_text, str_of, u};

pub(super) fn read(path: &Path, tokenize: bool) -> std::io::Result<Session> {
    let id = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut b = Builder::new(Family::Copilot, id, path.to_path_buf(), tokenize);
    let mut sequences = HashSet::new();
    json_lines(path, &mut b, |b, v| {
        b.time(str_of(&v, "timestamp"));
        let data = &v["data"];
        match str_of(&v, "type") {
            "session.start" => {
                b.set_id(str_of(data, "sessionId"));
                if let Some(cwd) = data.pointer("/context/cwd").and_then(Value::as_str) {
                    b.cwd = Some(cwd.to_string());
                }
            }
            "session.usage_record" => {
                let usage = &data["usage"];
                let key = usage
                    .get("accounting")
                    .filter(|a| a["sequence"].is_u64())
                    .map(|a| format!("{}:{}", str_of(a, "sourceSessionId"), a["sequence"]));
                if let Some(key) = &key
                    && !sequences.insert(key.clone())
                {
                    return;
                }
                if let Some(model) = usage.get("model").and_then(Value::as_str) {
                    b.model = Some(model.to_string());
                }
                let read = u(usage, "/cacheReadTokens");
                let write = u(usage, "/cacheWriteTokens");
                b.request(
                    None,
                    Usage {
                        input: u(usage, "/inputTokens").saturating_sub(read.saturating_add(write)),
                        output: u(usage, "/outputTokens"),
                        cache_read: read,
                        cache_write: write,
                    },
                );
            }
            "tool.execution_start" => {
                let command = data["arguments"].get("command").and_then(Value::as_str);
                b.call(
                    str_of(data, "toolCallId"),
                    str_of(data, "toolName"),
                    command,
                );
            }
            "tool.execution_complete" => {
                let id = str_of(data, "toolCallId");
                let text = if !b.is_ours(id) {
                    String::new()
                } else if data["result"].is_object() {
                    result_text(&data["result"]["content"])
                } else {
                    str_of(&data["error"], "message").to_string()
                };
                b.result(id, &text);
            }
            "session.compaction_complete" => b.compaction(),
            _ => {}
        }
    })?;
    Ok(b.finish())
}
