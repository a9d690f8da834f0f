//! Claude Code: `<projects>/<project>/<session>.jsonl` and its sub-agents' files beside it.

use std::collections::HashSet;
use std::path::Path;

use memchr::memmem;
use serde_json::Value;

use crate::daemon::runtime::driver::Family;
use crate::daemon::runtime::guidance::HEADLINE;
use crate::token::session::{Builder, Session, Usage};

use super::{ends, json_lines_where, result_text, stem, str_of, u, walk};

/// The fixed cost a Claude Code session recorded (`api-request-shape`, `attachment`): AgentTeam's
/// tool definitions, its guidance, its MCP instructions and its skill line, as sent.
#[derive(Default)]
struct ClaudeFixed {
    tools: Option<Vec<String>>,
    guidance: Option<String>,
    instructions: Option<String>,
    skill: Option<String>,
}

pub(super) fn read(path: &Path, tokenize: bool) -> std::io::Result<Vec<Session>> {
    let mut seen_keys = HashSet::new();
    let mut main = claude_file(path, stem(path), true, tokenize, &mut seen_keys)?;
    let mut sessions = Vec::new();
    // Sub-agents: `<session>/subagents/agent-<id>.jsonl` (and deeper, for workflows).
    let mut files = Vec::new();
    walk(&path.with_extension("").join("subagents"), 3, &mut files);
    for file in files
        .iter()
        .filter(|p| ends(p, ".jsonl") && stem(p).starts_with("agent-"))
    {
        let id = format!("{}/{}", main.id, stem(file));
        // A sub-agent file that cannot be read costs its own session only.
        match claude_file(file, id, false, tokenize, &mut seen_keys) {
            Ok(session) => sessions.push(session),
            Err(_) => main.malformed_lines += 1,
        }
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
        if usage.find(line).is_some() || others[0].find(line).is_some() {
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
                let key = match (
                    str_of(&v, "requestRef"),
                    str_of(message, "id"),
                    str_of(&v, "requestId"),
                ) {
                    (r, _, _) if !r.is_empty() => Some(format!("ref:{r}")),
                    (_, m, r) if !m.is_empty() => Some(format!("{m}:{r}")),
                    _ => None,
                };
                // A sub-agent's replay of its parent's request is the parent's: neither its
                // usage nor its calls are the sub-agent's.
                if let Some(key) = &key
                    && seen.contains(key)
                    && !b.has_key(key)
                {
                    return;
                }
                for block in message["content"].as_array().into_iter().flatten() {
                    if str_of(block, "type") == "tool_use" {
                        let command = block["input"].get("command").and_then(Value::as_str);
                        b.call(str_of(block, "id"), str_of(block, "name"), command);
                    }
                }
                let usage = &message["usage"];
                if usage.is_object() {
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
    if let (true, Some(tools), Some(guidance)) = (tokenize, &fixed.tools, &fixed.guidance) {
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
            tokens += crate::token::count::tokens(text);
        }
        session.recorded_fixed = Some((bytes, tokens));
    }
    Ok(session)
}
