//! The six runtimes' session records, read-only: where each runtime keeps them and how each
//! format becomes a `Session`. Every reader streams its files a line at a time and parses only
//! the lines that can matter to it, judged by their bytes; one of those that does not parse, or
//! whose record type it does not know, is counted, never fatal.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::daemon::runtime::driver::Family;

use super::lines;
use super::session::{Builder, LAUNCH_MARKS, Session};

mod claude;
mod codex;
mod copilot;
mod gemini;
mod kimi;
mod opencode;

/// Where a runtime's records are: resolved from the environment the way the runtime resolves it.
pub struct Roots {
    pub home: PathBuf,
    pub env: HashMap<String, String>,
}

impl Roots {
    pub fn from_env() -> Roots {
        Roots {
            home: std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default(),
            env: std::env::vars().collect(),
        }
    }

    fn var(&self, name: &str) -> Option<PathBuf> {
        self.env
            .get(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// The files (or databases) that hold `family`'s sessions.
    pub fn files(&self, family: Family) -> Vec<PathBuf> {
        let mut files = Vec::new();
        match family {
            Family::Claude => {
                let roots: Vec<PathBuf> = match self.var("CLAUDE_CONFIG_DIR") {
                    Some(dir) => vec![dir.join("projects")],
                    None => vec![
                        self.home.join(".claude/projects"),
                        self.home.join(".config/claude/projects"),
                    ],
                };
                for root in roots {
                    // `<project>/<session>.jsonl`; sub-agents are found beside their session.
                    for project in list(&root) {
                        files.extend(list(&project).into_iter().filter(|p| ends(p, ".jsonl")));
                    }
                }
            }
            Family::Codex => {
                let home = self.var("CODEX_HOME").unwrap_or(self.home.join(".codex"));
                walk(&home.join("sessions"), 4, &mut files);
                walk(&home.join("archived_sessions"), 4, &mut files);
                files.retain(|p| {
                    let name = p.file_name().unwrap_or_default().to_string_lossy();
                    name.starts_with("rollout-")
                        && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
                });
            }
            Family::Opencode => {
                if let Some(db) = self.var("OPENCODE_DB") {
                    files.push(db);
                } else {
                    let data = self
                        .var("XDG_DATA_HOME")
                        .unwrap_or(self.home.join(".local/share"));
                    files.extend(list(&data.join("opencode")).into_iter().filter(|p| {
                        let name = p.file_name().unwrap_or_default().to_string_lossy();
                        name.starts_with("opencode") && name.ends_with(".db")
                    }));
                }
            }
            Family::Gemini => {
                let home = self.var("GEMINI_CLI_HOME").unwrap_or(self.home.clone());
                for project in list(&home.join(".gemini/tmp")) {
                    let chats = project.join("chats");
                    files.extend(list(&chats).into_iter().filter(|p| ends(p, ".jsonl")));
                    // Sub-agents: `chats/<parent session>/<id>.jsonl`.
                    for dir in list(&chats).into_iter().filter(|p| p.is_dir()) {
                        files.extend(list(&dir).into_iter().filter(|p| ends(p, ".jsonl")));
                    }
                }
            }
            Family::Kimi => {
                let home = self
                    .var("KIMI_CODE_HOME")
                    .unwrap_or(self.home.join(".kimi-code"));
                for workdir in list(&home.join("sessions")) {
                    for session in list(&workdir) {
                        for agent in list(&session.join("agents")) {
                            let wire = agent.join("wire.jsonl");
                            if wire.is_file() {
                                files.push(wire);
                            }
                        }
                    }
                }
            }
            Family::Copilot => {
                let home = self
                    .var("COPILOT_HOME")
                    .unwrap_or(self.home.join(".copilot"));
                for session in list(&home.join("session-state")) {
                    let events = session.join("events.jsonl");
                    if events.is_file() {
                        files.push(events);
                    }
                }
            }
            Family::Auto | Family::Generic => {}
        }
        files.sort();
        files
    }
}

pub(super) fn ends(path: &Path, suffix: &str) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(suffix))
}

/// A directory's entries, sorted; none when it cannot be read.
pub(super) fn list(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| Ok::<_, ()>(e.ok()?.path()).ok())
        .collect();
    paths.sort();
    paths
}

pub(super) fn walk(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) {
    for path in list(dir) {
        if path.is_dir() {
            if depth > 0 {
                walk(&path, depth - 1, files);
            }
        } else {
            files.push(path);
        }
    }
}

pub(super) fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn u(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A tool result's text as the model saw it: a string, or the text of a list of blocks.
pub(super) fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b {
                Value::String(s) => s.clone(),
                _ => b
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| b.to_string()),
            })
            .collect::<Vec<_>>()
            .join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What a session file yields: its sessions (a Claude session file also yields its sub-agents').
pub fn read(family: Family, path: &Path, tokenize: bool) -> std::io::Result<Vec<Session>> {
    match family {
        Family::Claude => claude::read(path, tokenize),
        Family::Codex => codex::read(path, tokenize).map(|s| vec![s]),
        Family::Opencode => opencode::read(path, tokenize),
        Family::Gemini => gemini::read(path, tokenize).map(|s| vec![s]),
        Family::Kimi => kimi::read(path, tokenize).map(|s| vec![s]),
        Family::Copilot => copilot::read(path, tokenize).map(|s| vec![s]),
        Family::Auto | Family::Generic => Ok(Vec::new()),
    }
}

pub(super) fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.split('.').next().unwrap_or("").to_string()
}

/// Feeds `each` every line of `path` parsed as JSON; counts the lines that do not parse.
pub(super) fn json_lines(
    path: &Path,
    builder: &mut Builder,
    each: impl FnMut(&mut Builder, Value),
) -> std::io::Result<()> {
    json_lines_where(path, builder, |_, _| true, each)
}

/// `json_lines` for the lines `wanted` lets through, judged on their bytes: a reader skips
/// without parsing the lines that cannot matter to it (most of a transcript's bytes are results
/// of tools that are not AgentTeam's).
pub(super) fn json_lines_where(
    path: &Path,
    builder: &mut Builder,
    mut wanted: impl FnMut(&mut Builder, &[u8]) -> bool,
    mut each: impl FnMut(&mut Builder, Value),
) -> std::io::Result<()> {
    let mut reader = lines::open(path)?;
    let marks = LAUNCH_MARKS.map(|mark| memchr::memmem::Finder::new(mark.as_bytes()));
    lines::for_each(&mut *reader, lines::MAX_LINE, |line, overlong| {
        if overlong {
            builder.malformed += 1;
            return;
        }
        if !builder.agentteam && marks.iter().any(|m| m.find(line).is_some()) {
            builder.agentteam = true;
        }
        if !wanted(builder, line) {
            return;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(value) => each(builder, value),
            Err(_) => builder.malformed += 1,
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::Path;

    use serde_json::json;

    use super::*;

    fn write_lines(path: &Path, lines: &[Value]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(path, text).unwrap();
    }

    fn roots(home: &Path) -> Roots {
        Roots {
            home: home.to_path_buf(),
            env: HashMap::new(),
        }
    }

    fn all(family: Family, home: &Path) -> Vec<Session> {
        roots(home)
            .files(family)
            .iter()
            .flat_map(|f| read(family, f, true).unwrap())
            .collect()
    }

    fn claude_assistant(key: (&str, &str), output: u64, content: Value) -> Value {
        json!({"type": "assistant", "sessionId": "s1", "requestId": key.1, "timestamp": "2026-12-01T10:00:00Z",
               "message": {"id": key.0, "model": "claude-sonnet-4-5", "content": content,
                           "usage": {"input_tokens": 10, "output_tokens": output,
                                     "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}}})
    }

    #[test]
    fn claude_streaming_snapshots_count_once_and_the_fuller_copy_stands() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".claude/projects/-p/s1.jsonl");
        let call = json!([{"type": "tool_use", "id": "t1", "name": "mcp__agentteam__message_send", "input": {}}]);
        write_lines(
            &file,
            &[
                claude_assistant(
                    ("m1", "r1"),
                    1,
                    json!([{"type": "text", "text": "partial"}]),
                ),
                claude_assistant(("m1", "r1"), 40, call),
                json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "hello world"}]}}),
                json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "other", "content": "x"}]}}),
                claude_assistant(("m2", "r2"), 7, json!([])),
                json!({"type": "system", "subtype": "compact_boundary"}),
                claude_assistant(("m3", "r3"), 7, json!([])),
                json!({"type": "a-record-type-of-tomorrow", "usage": {}}),
                json!(["usage"]),
            ],
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(b"{\"usage\": not json\n")
            .unwrap();
        let sessions = all(Family::Claude, home.path());
        assert_eq!(sessions.len(), 1);
        let s = &sessions[0];
        assert_eq!(s.id, "s1");
        assert_eq!(s.requests, 3);
        assert_eq!(s.usage.output, 40 + 7 + 7);
        assert_eq!(
            (s.usage.input, s.usage.cache_read, s.usage.cache_write),
            (30, 300, 15)
        );
        assert_eq!(s.calls.len(), 1);
        // Carried by the next request only: a compaction came before the third.
        assert_eq!((s.calls[0].result_tokens, s.calls[0].carried_by), (2, 1));
        assert_eq!(s.compactions, 1);
        assert_eq!((s.malformed_lines, s.unknown_records), (1, 2));
    }

    #[test]
    fn only_a_session_that_shows_an_agentteam_launch_bears_the_fixed_cost() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join(".claude/projects/-p");
        write_lines(
            &project.join("plain.jsonl"),
            &[claude_assistant(("m1", "r1"), 5, json!([]))],
        );
        let mut launched = claude_assistant(("m2", "r2"), 5, json!([]));
        launched["note"] = json!(format!("x {} y", LAUNCH_MARKS[0]));
        write_lines(&project.join("launched.jsonl"), &[launched]);
        let options = super::super::Options {
            runtimes: vec![Family::Claude],
            top: 5,
            ..Default::default()
        };
        let report = super::super::analyze(&options, &roots(home.path()), |_, _| {});
        let fixed: Vec<(&str, u64, &str)> = report
            .sessions
            .iter()
            .map(|r| {
                (
                    r.session.path.file_name().unwrap().to_str().unwrap(),
                    r.fixed_tokens,
                    r.fixed_source,
                )
            })
            .collect();
        let per_request = super::super::fixed::fixed(Family::Claude).tokens;
        assert_eq!(
            fixed,
            vec![
                ("launched.jsonl", per_request, "rebuilt"),
                ("plain.jsonl", 0, "no AgentTeam launch")
            ]
        );
    }

    #[test]
    fn a_claude_sub_agent_is_its_own_session_without_its_parents_replays() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join(".claude/projects/-p");
        write_lines(
            &project.join("s1.jsonl"),
            &[claude_assistant(("m1", "r1"), 5, json!([]))],
        );
        let mut replay = claude_assistant(("m1", "r1"), 5, json!([]));
        replay["isSidechain"] = json!(true);
        let mut own = claude_assistant(("m9", "r9"), 9, json!([]));
        own["agentId"] = json!("a1");
        write_lines(&project.join("s1/subagents/agent-a1.jsonl"), &[replay, own]);
        let sessions = all(Family::Claude, home.path());
        let ids: Vec<(&str, u64, u64)> = sessions
            .iter()
            .map(|s| (s.id.as_str(), s.requests, s.usage.output))
            .collect();
        assert_eq!(ids, vec![("s1", 1, 5), ("s1/agent-a1", 1, 9)]);
    }

    #[test]
    fn gemini_rewritten_records_last_wins_and_rewinds_drop_what_followed() {
        let home = tempfile::tempdir().unwrap();
        let tokens = |input: u64| json!({"input": input, "output": 5, "cached": 4, "thoughts": 1, "tool": 0, "total": input + 6});
        write_lines(
            &home.path().join(".gemini/tmp/p/chats/session-x.jsonl"),
            &[
                json!({"sessionId": "g1", "projectHash": "h", "startTime": "2026-12-01T10:00:00Z", "kind": "main"}),
                json!({"$set": {"messages": [{"id": "stale", "type": "gemini", "tokens": tokens(999)}]}}),
                json!({"$set": {"messages": []}}),
                json!({"id": "a", "type": "gemini", "timestamp": "2026-12-01T10:00:01Z", "tokens": tokens(10)}),
                json!({"id": "a", "type": "gemini", "timestamp": "2026-12-01T10:00:01Z", "tokens": tokens(10),
                   "toolCalls": [{"id": "c1", "name": "mcp_agentteam_kb_search", "args": {},
                                  "result": [{"functionResponse": {"response": {"output": "found"}}}]}]}),
                json!({"id": "b", "type": "gemini", "tokens": tokens(20)}),
                json!({"id": "c", "type": "gemini", "tokens": tokens(30)}),
                json!({"$rewindTo": "c"}),
                json!({"$set": {"lastUpdated": "2026-12-01T10:00:09Z"}}),
            ],
        );
        let sessions = all(Family::Gemini, home.path());
        assert_eq!(sessions.len(), 1);
        let s = &sessions[0];
        assert_eq!((s.id.as_str(), s.requests), ("g1", 2));
        // Cached tokens come out of the input; thoughts are output.
        assert_eq!(
            (s.usage.input, s.usage.cache_read, s.usage.output),
            (6 + 16, 8, 12)
        );
        assert_eq!(s.calls.len(), 1);
        assert_eq!(s.calls[0].carried_by, 1);
    }

    fn codex_lines(id: &str) -> Vec<Value> {
        let usage = json!({"input_tokens": 100, "cached_input_tokens": 60, "output_tokens": 9, "reasoning_output_tokens": 3, "total_tokens": 109});
        vec![
            json!({"timestamp": "2026-12-01T10:00:00Z", "type": "session_meta", "payload": {"id": id, "cwd": "/w"}}),
            json!({"type": "turn_context", "payload": {"model": "gpt-5.1-codex"}}),
            json!({"type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1",
                    "arguments": "{\"cmd\":\"agentteam exec task get '{}'\"}"}}),
            json!({"type": "token_usage_record", "payload": {"usage": usage}}),
            json!({"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": usage, "last_token_usage": usage}}}),
            json!({"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "Output:\n{\"ok\":true}"}}),
            json!({"type": "token_usage_record", "payload": {"usage": usage}}),
        ]
    }

    #[test]
    fn codex_archived_and_compressed_rollouts_read_like_plain_ones() {
        let home = tempfile::tempdir().unwrap();
        let codex = home.path().join(".codex");
        write_lines(
            &codex.join("sessions/2026/12/01/rollout-2026-12-01T10-00-00-plain.jsonl"),
            &codex_lines("plain"),
        );
        let text: String = codex_lines("packed")
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        let packed = ruzstd::encoding::compress_to_vec(
            text.as_bytes(),
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        std::fs::create_dir_all(codex.join("archived_sessions")).unwrap();
        std::fs::write(
            codex.join("archived_sessions/rollout-2026-12-01T10-00-00-packed.jsonl.zst"),
            packed,
        )
        .unwrap();
        let sessions = all(Family::Codex, home.path());
        assert_eq!(sessions.len(), 2);
        for s in &sessions {
            // Usage from the per-response records only, never the token_count copies too.
            assert_eq!(s.requests, 2, "{}", s.id);
            assert_eq!(
                (s.usage.input, s.usage.cache_read, s.usage.output),
                (80, 120, 18)
            );
            assert_eq!(s.count_method, super::super::count::Method::Counted);
            assert_eq!(s.calls.len(), 1);
            assert_eq!(s.calls[0].carried_by, 1);
        }
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, vec!["packed", "plain"]);
    }

    #[test]
    fn a_usage_totals_pass_reads_no_result() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".codex/sessions/rollout-x.jsonl");
        write_lines(&file, &codex_lines("x"));
        let s = read(Family::Codex, &file, false).unwrap().remove(0);
        assert_eq!(s.requests, 2);
        assert!(s.calls.is_empty());
    }
}
