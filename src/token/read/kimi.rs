//! Kimi Code: `sessions/<workdir>/session_<id>/agents/<agent>/wire.jsonl`.

use std::path::Path;

use serde_json::Value;

use crate::daemon::runtime::driver::Family;
use crate::token::session::{Builder, Session, Usage};

use super::{json_lines, result_text, str_of, u};

pub(super) fn read(path: &Path, tokenize: bool) -> std::io::Result<Session> {
    // `.../session_<id>/agents/<agent>/wire.jsonl`
    let agent = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let session = path
        .ancestors()
        .nth(3)
        .and_then(Path::file_name)
        .map(|n| {
            n.to_string_lossy()
                .trim_start_matches("session_")
                .to_string()
        })
        .unwrap_or_default();
    let id = if agent == "main" {
        session
    } else {
        format!("{session}/{agent}")
    };
    let mut b = Builder::new(Family::Kimi, id, path.to_path_buf(), tokenize);
    json_lines(path, &mut b, |b, v| {
        if let Some(ms) = v.get("time").and_then(Value::as_i64)
            && let Some(at) = chrono::DateTime::from_timestamp_millis(ms)
        {
            b.time(&at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        }
        match str_of(&v, "type") {
            "llm.request" => {
                if let Some(model) = v.get("model").and_then(Value::as_str) {
                    b.model = Some(model.to_string());
                }
            }
            "usage.record" => {
                let usage = &v["usage"];
                b.request(
                    None,
                    Usage {
                        input: u(usage, "/inputOther"),
                        output: u(usage, "/output"),
                        cache_read: u(usage, "/inputCacheRead"),
                        cache_write: u(usage, "/inputCacheCreation"),
                    },
                );
            }
            "profile.bind" => {
                if let Some(cwd) = v
                    .pointer("/environmentDisclosure/cwd")
                    .and_then(Value::as_str)
                {
                    b.cwd = Some(cwd.to_string());
                }
            }
            "context.append_loop_event" => {
                let event = &v["event"];
                match str_of(event, "type") {
                    "tool.call" => {
                        let command = event["args"].get("command").and_then(Value::as_str);
                        b.call(str_of(event, "toolCallId"), str_of(event, "name"), command);
                    }
                    "tool.result" => {
                        let id = str_of(event, "toolCallId");
                        let text = if b.is_ours(id) {
                            result_text(&event["result"]["output"])
                        } else {
                            String::new()
                        };
                        b.result(id, &text);
                    }
                    _ => {}
                }
            }
            "context.compacted" | "context.compaction" => b.compaction(),
            _ => {}
        }
    })?;
    Ok(b.finish())
}
