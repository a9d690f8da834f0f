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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::{Value, json};

    use super::*;
    use crate::token::count::{Method, tokens};
    use crate::token::{Options, analyze, fixed, read::Roots};

    /// AgentTeam's pieces of a recorded request, as Claude Code 2.1.332 writes them: two of its
    /// tools, its guidance at the end of a system block, its MCP instructions and its skill line.
    struct Recorded {
        tools: [Value; 2],
        guidance: String,
        instructions: &'static str,
        skill: &'static str,
    }

    impl Recorded {
        /// Each piece's text as the report counts it: a tool as its JSON.
        fn pieces(&self) -> [String; 5] {
            [
                self.tools[0].to_string(),
                self.tools[1].to_string(),
                self.guidance.clone(),
                self.instructions.to_string(),
                self.skill.to_string(),
            ]
        }
    }

    fn recorded() -> Recorded {
        let tool = |name: &str, description: &str| {
            json!({"name": format!("mcp__agentteam__{name}"), "description": description,
                   "input_schema": {"type": "object", "properties": {"target": {"type": "string"}}}})
        };
        Recorded {
            tools: [
                tool(
                    "message_send",
                    "Send a message to a channel, a DM or a thread.",
                ),
                tool("kb_search", "Full-text search of the knowledge sources."),
            ],
            guidance: format!(
                "# AgentTeam\n\n{HEADLINE}\n\nTwo bridges: MCP tools and `agentteam exec`.\n"
            ),
            instructions: "AgentTeam tools for this agent. Reply with `message_send`.",
            skill: "- agentteam:memory-maintenance: How to keep the AgentTeam memory directory useful.",
        }
    }

    /// A session of two requests with one AgentTeam call between them, and the request shape
    /// Claude Code recorded when `with_shape`. The call's result (`hello world`, 2 tokens) grew
    /// the recorded input by 4: an error of -50%.
    fn transcript(r: &Recorded, with_shape: bool) -> Vec<Value> {
        let line = |kind: &str, rest: Value| {
            let mut line = json!({"type": kind, "sessionId": "s1", "cwd": "/home/dev/project",
                                  "timestamp": "2026-12-01T10:00:00.000Z"});
            line.as_object_mut()
                .unwrap()
                .extend(rest.as_object().unwrap().clone());
            line
        };
        let assistant = |id: &str, input: u64, content: Value| {
            line(
                "assistant",
                json!({"requestId": format!("req_{id}"), "message": {
                "id": id, "model": "claude-sonnet-4-5", "content": content,
                "usage": {"input_tokens": input, "output_tokens": 5,
                          "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}}),
            )
        };
        let mut lines = vec![
            line(
                "user",
                json!({"message": {"role": "user", "content": "reply to the channel"}}),
            ),
            line(
                "attachment",
                json!({"attachment": {"type": "mcp_instructions_delta",
                "addedNames": ["agentteam"],
                "addedBlocks": [format!("## agentteam\n{}", r.instructions), "## mine\nOther."]}}),
            ),
            line(
                "attachment",
                json!({"attachment": {"type": "skill_listing",
                "content": format!("{}\n- dataviz: Charts.", r.skill)}}),
            ),
        ];
        if with_shape {
            let other = json!({"name": "Bash", "description": "Run a command.",
                               "input_schema": {"type": "object"}});
            lines.push(line(
                "api-request-shape",
                json!({"version": "2.1.332", "shape": {
                    "system": [
                        {"type": "text", "text": "You are Claude Code."},
                        {"type": "text", "text": format!("Be careful.\n\n{}", r.guidance)},
                    ],
                    "tools": [other, r.tools[0], r.tools[1], {"name": "mcp__mine__ping"}],
                }}),
            ));
        }
        lines.extend([
            assistant(
                "m1",
                100,
                json!([{"type": "tool_use", "id": "toolu_1",
                "name": "mcp__agentteam__message_send", "input": {"target": "channel:x"}}]),
            ),
            line(
                "user",
                json!({"message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello world"}]}}),
            ),
            assistant("m2", 109, json!([{"type": "text", "text": "done"}])),
        ]);
        lines
    }

    fn home_with(lines: &[Value]) -> (tempfile::TempDir, PathBuf) {
        let home = tempfile::tempdir().unwrap();
        let file = home
            .path()
            .join(".claude/projects/-home-dev-project/s1.jsonl");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&file, text).unwrap();
        (home, file)
    }

    #[test]
    fn the_recorded_request_shape_is_the_sessions_fixed_cost() {
        let r = recorded();
        let (_home, file) = home_with(&transcript(&r, true));
        let session = read(&file, true).unwrap().remove(0);
        let pieces = r.pieces();
        let bytes = pieces.iter().map(|p| p.len() as u64).sum();
        let counted = pieces.iter().map(|p| tokens(p)).sum();
        assert_eq!(session.recorded_fixed, Some((bytes, counted)));
        // A usage-totals pass counts nothing.
        assert_eq!(read(&file, false).unwrap()[0].recorded_fixed, None);
        // Without the record, there is nothing recorded to count.
        let (_home, file) = home_with(&transcript(&r, false));
        assert_eq!(read(&file, true).unwrap()[0].recorded_fixed, None);
    }

    #[test]
    fn the_report_says_whether_the_fixed_cost_was_recorded_or_rebuilt() {
        let r = recorded();
        let options = Options {
            runtimes: vec![Family::Claude],
            top: 3,
            ..Options::default()
        };
        let report_of = |lines: &[Value]| {
            let (home, _) = home_with(lines);
            let roots = Roots {
                home: home.path().to_path_buf(),
                env: Default::default(),
            };
            analyze(&options, &roots, |_, _| {})
        };
        let recorded = report_of(&transcript(&r, true));
        let row = &recorded.sessions[0];
        let pieces: u64 = r.pieces().iter().map(|p| tokens(p)).sum();
        assert_eq!(
            (row.fixed_source, row.fixed_per_request, row.fixed_tokens),
            ("transcript", pieces, pieces * 2)
        );
        assert_eq!(row.fixed_method, Method::JsonText);

        let rebuilt = report_of(&transcript(&r, false));
        let row = &rebuilt.sessions[0];
        let catalog = fixed::fixed(Family::Claude).tokens;
        assert_eq!(
            (row.fixed_source, row.fixed_per_request),
            ("rebuilt", catalog)
        );
        assert_eq!(row.fixed_method, Method::JsonText);
        assert_eq!(rebuilt.fixed[0].method, Method::JsonText);

        // The count of the call's result against the input growth it caused, for this runtime.
        let check = &recorded.estimates_by_runtime["claude"];
        assert_eq!((check.samples, check.median_error), (1, Some(-0.5)));
        assert_eq!(recorded.estimates.median_error, Some(-0.5));
    }
}
