//! Codex: `sessions/YYYY/MM/DD/rollout-*.jsonl`, archived ones too, plain or `.zst`.

use std::path::Path;

use memchr::memmem;
use serde_json::Value;

use crate::daemon::runtime::driver::Family;
use crate::token::session::{Builder, Session, Usage};

use super::{json_lines_where, result_text, stem, str_of, u};

pub(super) fn read(path: &Path, tokenize: bool) -> std::io::Result<Session> {
    let mut b = Builder::new(Family::Codex, stem(path), path.to_path_buf(), tokenize);
    let mut records = false;
    let mut last_total: Option<Usage> = None;
    let output = memmem::Finder::new(b"_call_output\"");
    let call_id = memmem::Finder::new(b"\"call_id\"");
    let calls = memmem::Finder::new(b"\"function_call\"");
    let custom = memmem::Finder::new(b"\"custom_tool_call\"");
    let keep: [memmem::Finder; 5] = [
        memmem::Finder::new(b"\"token_usage_record\""),
        memmem::Finder::new(b"\"token_count\""),
        memmem::Finder::new(b"\"turn_context\""),
        memmem::Finder::new(b"\"session_meta\""),
        memmem::Finder::new(b"\"compacted\""),
    ];
    let wanted = |b: &mut Builder, line: &[u8]| {
        if output.find(line).is_some() {
            if b.tokenizes()
                && b.pending()
                    .any(|id| memmem::find(line, id.as_bytes()).is_some())
            {
                return true;
            }
            b.other_results(call_id.find_iter(line).count().min(1));
            return false;
        }
        keep.iter().any(|f| f.find(line).is_some())
            || (b.tokenizes() && (calls.find(line).is_some() || custom.find(line).is_some()))
    };
    json_lines_where(path, &mut b, wanted, |b, v| {
        b.time(str_of(&v, "timestamp"));
        let payload = &v["payload"];
        match str_of(&v, "type") {
            "session_meta" => {
                b.set_id(str_of(payload, "id"));
                if let Some(cwd) = payload.get("cwd").and_then(Value::as_str) {
                    b.cwd = Some(cwd.to_string());
                }
            }
            "turn_context" => {
                if let Some(model) = payload.get("model").and_then(Value::as_str) {
                    b.model = Some(model.to_string());
                }
            }
            "token_usage_record" => {
                records = true;
                b.request(None, codex_usage(&payload["usage"]));
            }
            "event_msg" => {
                if str_of(payload, "type") == "token_count" && payload["info"].is_object() {
                    // Older rollouts have only these: the last request's usage, or the growth of
                    // the cumulative total.
                    let info = &payload["info"];
                    let total = codex_usage(&info["total_token_usage"]);
                    if last_total == Some(total) {
                        return;
                    }
                    let last = if info["last_token_usage"].is_object() {
                        codex_usage(&info["last_token_usage"])
                    } else {
                        let before = last_total.unwrap_or_default();
                        Usage {
                            input: total.input.saturating_sub(before.input),
                            output: total.output.saturating_sub(before.output),
                            cache_read: total.cache_read.saturating_sub(before.cache_read),
                            cache_write: total.cache_write.saturating_sub(before.cache_write),
                        }
                    };
                    last_total = Some(total);
                    if !records {
                        b.request(None, last);
                    }
                }
            }
            "response_item" => match str_of(payload, "type") {
                "function_call" | "custom_tool_call" => {
                    let arguments = payload
                        .get("arguments")
                        .or(payload.get("input"))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let parsed: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
                    let command = command_line(parsed.get("cmd").or(parsed.get("command")));
                    b.codex_call(
                        str_of(payload, "call_id"),
                        payload.get("namespace").and_then(Value::as_str),
                        str_of(payload, "name"),
                        command.as_deref(),
                    );
                }
                "function_call_output" | "custom_tool_call_output" => {
                    let id = str_of(payload, "call_id");
                    let text = if b.is_ours(id) {
                        result_text(&payload["output"])
                    } else {
                        String::new()
                    };
                    b.result(id, &text);
                }
                _ => {}
            },
            "compacted" => b.compaction(),
            "world_state" | "inter_agent_communication" => {}
            _ => b.unknown += 1,
        }
    })?;
    Ok(b.finish())
}

/// Codex's `TokenUsage`: its input includes the cached part.
fn codex_usage(usage: &Value) -> Usage {
    let input = u(usage, "/input_tokens");
    let cached = u(usage, "/cached_input_tokens");
    let write = u(usage, "/cache_write_input_tokens");
    Usage {
        input: input.saturating_sub(cached.saturating_add(write)),
        output: u(usage, "/output_tokens"),
        cache_read: cached,
        cache_write: write,
    }
}

/// A shell call's command line: `exec_command`'s `cmd` string, or the older `shell` tool's argv,
/// where `["bash", "-lc", "<script>"]` is the script.
fn command_line(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Array(words) => {
            let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
            match words[..] {
                [_, "-c" | "-lc", script] => Some(script.to_string()),
                _ => Some(words.join(" ")),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_shell_argv_reads_as_its_script() {
        let script = "agentteam exec task get '{}'";
        assert_eq!(
            command_line(Some(&json!(["bash", "-lc", script]))).as_deref(),
            Some(script)
        );
        assert_eq!(command_line(Some(&json!(script))).as_deref(), Some(script));
        assert_eq!(
            command_line(Some(&json!(["ls", "-la"]))).as_deref(),
            Some("ls -la")
        );
        assert_eq!(command_line(Some(&json!(7))), None);
        assert_eq!(command_line(None), None);
    }
}
