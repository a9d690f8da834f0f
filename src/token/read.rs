//! The six runtimes' session records, read-only: where each runtime keeps them and how each
//! format becomes a `Session`. Every reader streams its files a line at a time; a line that does
//! not parse, or a record type it does not know, is counted, never fatal.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use memchr::memmem;
use serde_json::Value;

use crate::daemon::runtime::driver::Family;
use crate::daemon::runtime::guidance::HEADLINE;

use super::lines;
use super::session::{Builder, Session, Usage};

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
                let roots: Vec<PathBuf> = match self.env.get("CLAUDE_CONFIG_DIR") {
                    Some(dirs) if !dirs.is_empty() => dirs
                        .split(',')
                        .map(|d| PathBuf::from(d.trim()).join("projects"))
                        .collect(),
                    _ => vec![
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

fn ends(path: &Path, suffix: &str) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(suffix))
}

/// A directory's entries, sorted; none when it cannot be read.
fn list(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| Ok::<_, ()>(e.ok()?.path()).ok())
        .collect();
    paths.sort();
    paths
}

fn walk(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) {
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

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn u(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A tool result's text as the model saw it: a string, or the text of a list of blocks.
fn result_text(content: &Value) -> String {
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
        Family::Claude => claude(path, tokenize),
        Family::Codex => codex(path, tokenize).map(|s| vec![s]),
        Family::Opencode => super::opencode::read(path, tokenize),
        Family::Gemini => gemini(path, tokenize).map(|s| vec![s]),
        Family::Kimi => kimi(path, tokenize).map(|s| vec![s]),
        Family::Copilot => copilot(path, tokenize).map(|s| vec![s]),
        Family::Auto | Family::Generic => Ok(Vec::new()),
    }
}

fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.split('.').next().unwrap_or("").to_string()
}

/// Feeds `each` every line of `path` parsed as JSON; counts the lines that do not parse.
fn json_lines(
    path: &Path,
    builder: &mut Builder,
    each: impl FnMut(&mut Builder, Value),
) -> std::io::Result<()> {
    json_lines_where(path, builder, |_, _| true, each)
}

/// `json_lines` for the lines `wanted` lets through, judged on their bytes: a reader skips
/// without parsing the lines that cannot matter to it (most of a transcript's bytes are results
/// of tools that are not AgentTeam's).
fn json_lines_where(
    path: &Path,
    builder: &mut Builder,
    mut wanted: impl FnMut(&mut Builder, &[u8]) -> bool,
    mut each: impl FnMut(&mut Builder, Value),
) -> std::io::Result<()> {
    let mut reader = lines::open(path)?;
    lines::for_each(&mut *reader, lines::MAX_LINE, |line, overlong| {
        if overlong {
            builder.malformed += 1;
            return;
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

/// The fixed cost a Claude Code session recorded (`api-request-shape`, `attachment`): AgentTeam's
/// tool definitions, its guidance, its MCP instructions and its skill line, as sent.
#[derive(Default)]
struct ClaudeFixed {
    tools: Option<Vec<String>>,
    guidance: Option<String>,
    instructions: Option<String>,
    skill: Option<String>,
}

fn claude(path: &Path, tokenize: bool) -> std::io::Result<Vec<Session>> {
    let mut seen_keys = HashSet::new();
    let main = claude_file(path, stem(path), true, tokenize, &mut seen_keys)?;
    let mut sessions = Vec::new();
    // Sub-agents: `<session>/subagents/agent-<id>.jsonl` (and deeper, for workflows).
    let mut files = Vec::new();
    walk(&path.with_extension("").join("subagents"), 3, &mut files);
    for file in files
        .iter()
        .filter(|p| ends(p, ".jsonl") && stem(p).starts_with("agent-"))
    {
        let id = format!("{}/{}", main.id, stem(file));
        sessions.push(claude_file(file, id, false, tokenize, &mut seen_keys)?);
    }
    sessions.insert(0, main);
    Ok(sessions)
}

fn claude_file(
    path: &Path,
    id: String,
    main: bool,
    tokenize: bool,
    seen: &mut HashSet<String>,
) -> std::io::Result<Session> {
    let mut b = Builder::new(Family::Claude, id, path.to_path_buf(), tokenize);
    let mut fixed = ClaudeFixed::default();
    let mut session_id = None;
    let usage = memmem::Finder::new(b"\"usage\"");
    let result = memmem::Finder::new(b"\"tool_result\"");
    let result_id = memmem::Finder::new(b"\"tool_use_id\"");
    let others: [memmem::Finder; 4] = [
        memmem::Finder::new(b"compact_boundary"),
        memmem::Finder::new(b"api-request-shape"),
        memmem::Finder::new(b"mcp_instructions_delta"),
        memmem::Finder::new(b"skill_listing"),
    ];
    let wanted = |b: &mut Builder, line: &[u8]| {
        if usage.find(line).is_some() {
            return true;
        }
        if !b.tokenizes() {
            return false;
        }
        if result.find(line).is_some() {
            // Only an AgentTeam call's result is read; the others are counted.
            if b.pending()
                .any(|id| memmem::find(line, id.as_bytes()).is_some())
            {
                return true;
            }
            b.other_results(result_id.find_iter(line).count());
            return false;
        }
        others.iter().any(|f| f.find(line).is_some())
    };
    json_lines_where(path, &mut b, wanted, |b, v| {
        b.time(str_of(&v, "timestamp"));
        if session_id.is_none()
            && !str_of(&v, "sessionId").is_empty()
            && str_of(&v, "agentId").is_empty()
        {
            session_id = Some(str_of(&v, "sessionId").to_string());
        }
        if b.cwd.is_none() && !str_of(&v, "cwd").is_empty() {
            b.cwd = Some(str_of(&v, "cwd").to_string());
        }
        match str_of(&v, "type") {
            "assistant" => {
                let message = &v["message"];
                let model = str_of(message, "model");
                if model == "<synthetic>" {
                    return;
                }
                if !model.is_empty() {
                    b.model = Some(model.to_string());
                }
                for block in message["content"].as_array().into_iter().flatten() {
                    if str_of(block, "type") == "tool_use" {
                        let command = block["input"].get("command").and_then(Value::as_str);
                        b.call(str_of(block, "id"), str_of(block, "name"), command);
                    }
                }
                let usage = &message["usage"];
                if usage.is_object() {
                    let key = match (
                        str_of(&v, "requestRef"),
                        str_of(message, "id"),
                        str_of(&v, "requestId"),
                    ) {
                        (r, _, _) if !r.is_empty() => Some(format!("ref:{r}")),
                        (_, m, r) if !m.is_empty() => Some(format!("{m}:{r}")),
                        _ => None,
                    };
                    // A sub-agent's replay of its parent's request is the parent's.
                    if let Some(key) = &key
                        && seen.contains(key)
                        && !b.has_key(key)
                    {
                        return;
                    }
                    if let Some(key) = &key {
                        seen.insert(key.clone());
                    }
                    b.request(
                        key.as_deref(),
                        Usage {
                            input: u(usage, "/input_tokens"),
                            output: u(usage, "/output_tokens"),
                            cache_read: u(usage, "/cache_read_input_tokens"),
                            cache_write: u(usage, "/cache_creation_input_tokens"),
                        },
                    );
                }
            }
            "user" => {
                if v.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
                    return;
                }
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if str_of(block, "type") == "tool_result" {
                        let id = str_of(block, "tool_use_id");
                        if b.is_ours(id) {
                            b.result(id, &result_text(&block["content"]));
                        } else {
                            b.result(id, "");
                        }
                    }
                }
            }
            "system" => {
                if str_of(&v, "subtype") == "compact_boundary" {
                    b.compaction();
                }
            }
            "api-request-shape" => {
                let shape = &v["shape"];
                let tools = shape["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| str_of(t, "name").starts_with("mcp__agentteam__"))
                    .map(|t| t.to_string())
                    .collect();
                fixed.tools = Some(tools);
                for block in shape["system"].as_array().into_iter().flatten() {
                    let text = str_of(block, "text");
                    if let Some(at) = text.find(&format!("# AgentTeam\n\n{HEADLINE}")) {
                        fixed.guidance = Some(text[at..].to_string());
                    }
                }
            }
            "attachment" => {
                let attachment = &v["attachment"];
                match str_of(attachment, "type") {
                    "mcp_instructions_delta" => {
                        for block in attachment["addedBlocks"].as_array().into_iter().flatten() {
                            if let Some(text) = block
                                .as_str()
                                .and_then(|t| t.strip_prefix("## agentteam\n"))
                            {
                                fixed.instructions = Some(text.to_string());
                            }
                        }
                    }
                    "skill_listing" => {
                        if let Some(line) = str_of(attachment, "content")
                            .lines()
                            .find(|l| l.starts_with("- agentteam:"))
                        {
                            fixed.skill = Some(line.to_string());
                        }
                    }
                    _ => {}
                }
            }
            "summary"
            | "queue-operation"
            | "file-history-snapshot"
            | "api-request"
            | "api-request-blob"
            | "tools-used"
            | "last-prompt"
            | "atis-latch"
            | "cost-state"
            | "progress"
            | "custom-title"
            | "agent-name"
            | "pr-link"
            | "mode"
            | "permission-mode"
            | "worktree-state"
            | "ai-title" => {}
            _ => b.unknown += 1,
        }
    })?;
    // A sub-agent's lines carry its parent's session id: it keeps the name it was given.
    if let Some(id) = session_id.filter(|_| main) {
        b.set_id(&id);
    }
    let mut session = b.finish();
    if let (Some(tools), Some(guidance)) = (&fixed.tools, &fixed.guidance) {
        let texts = tools.iter().map(String::as_str).chain(
            [
                Some(guidance.as_str()),
                fixed.instructions.as_deref(),
                fixed.skill.as_deref(),
            ]
            .into_iter()
            .flatten(),
        );
        let (mut bytes, mut tokens) = (0, 0);
        for text in texts {
            bytes += text.len() as u64;
            tokens += super::count::tokens(text);
        }
        session.recorded_fixed = Some((bytes, tokens));
    }
    Ok(session)
}

fn codex(path: &Path, tokenize: bool) -> std::io::Result<Session> {
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
                    let command = match &parsed["cmd"] {
                        Value::String(s) => Some(s.clone()),
                        Value::Array(words) => Some(
                            words
                                .iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(" "),
                        ),
                        _ => parsed["command"].as_str().map(str::to_string),
                    };
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
        input: input.saturating_sub(cached + write),
        output: u(usage, "/output_tokens"),
        cache_read: cached,
        cache_write: write,
    }
}

/// One Gemini CLI message, as the last record of its id left it.
struct GeminiMessage {
    id: String,
    time: String,
    usage: Option<Usage>,
    model: Option<String>,
    /// `(record id, name, command, result text)`.
    calls: Vec<(String, String, Option<String>, String)>,
}

fn gemini(path: &Path, tokenize: bool) -> std::io::Result<Session> {
    let mut b = Builder::new(Family::Gemini, stem(path), path.to_path_buf(), tokenize);
    let mut messages: Vec<GeminiMessage> = Vec::new();
    let mut first = true;
    json_lines(path, &mut b, |b, v| {
        if std::mem::take(&mut first) && v.get("sessionId").is_some() {
            b.set_id(str_of(&v, "sessionId"));
            return;
        }
        if let Some(set) = v.get("$set") {
            if let Some(list) = set.get("messages").and_then(Value::as_array) {
                messages.clear();
                for m in list {
                    gemini_message(m, &mut messages);
                }
            }
            return;
        }
        if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
            let at = messages.iter().position(|m| m.id == to).unwrap_or(0);
            messages.truncate(at);
            return;
        }
        match str_of(&v, "type") {
            "user" | "gemini" | "info" | "error" | "warning" => gemini_message(&v, &mut messages),
            _ => b.unknown += 1,
        }
    })?;
    for m in messages {
        b.time(&m.time);
        if let Some(model) = m.model {
            b.model = Some(model);
        }
        if let Some(usage) = m.usage {
            b.request(None, usage);
        }
        for (id, name, command, _) in &m.calls {
            b.call(id, name, command.as_deref());
        }
        for (id, _, _, text) in &m.calls {
            b.result(id, text);
        }
    }
    Ok(b.finish())
}

fn gemini_message(v: &Value, messages: &mut Vec<GeminiMessage>) {
    let id = str_of(v, "id").to_string();
    let tokens = &v["tokens"];
    let usage = tokens.is_object().then(|| {
        let cached = u(tokens, "/cached");
        Usage {
            input: u(tokens, "/input").saturating_sub(cached) + u(tokens, "/tool"),
            output: u(tokens, "/output") + u(tokens, "/thoughts"),
            cache_read: cached,
            cache_write: 0,
        }
    });
    let calls = v["toolCalls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|call| {
            let result: Vec<String> = call["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|part| part["functionResponse"]["response"].to_string())
                .collect();
            (
                str_of(call, "id").to_string(),
                str_of(call, "name").to_string(),
                call["args"]
                    .get("command")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                result.join(""),
            )
        })
        .collect();
    let message = GeminiMessage {
        time: str_of(v, "timestamp").to_string(),
        usage,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        calls,
        id: id.clone(),
    };
    match messages.iter_mut().find(|m| !id.is_empty() && m.id == id) {
        Some(old) => *old = message,
        None => messages.push(message),
    }
}

fn kimi(path: &Path, tokenize: bool) -> std::io::Result<Session> {
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

fn copilot(path: &Path, tokenize: bool) -> std::io::Result<Session> {
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
                        input: u(usage, "/inputTokens").saturating_sub(read + write),
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use std::io::Write;

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
