//! Tool-use guidance for the `agentteam` MCP namespace (the spec's `SkillDoc` / `SkillDocSplit`),
//! rendered from the same `TOOLS` inventory `tools/list` serves, so the prompt can never name a
//! tool the route does not offer or miss one it does.
//!
//! Runtimes show raw tool names under their own convention; a [`ToolNamer`] maps each raw name to
//! what the model sees (`mcp__agentteam__message_send`, `mcp_agentteam_message_send`), and
//! [`RuntimeNaming::resolve`] (with [`RuntimeNaming::resolve_codex`] for Codex's namespaces)
//! maps a model-visible name back to `{server, raw tool}`. Only `agentteam token analyze` uses
//! that, to recognise AgentTeam's calls in a runtime's session records: the MCP route dispatches
//! on the raw name the runtime's MCP client sends, and maps nothing back. The generator refuses a
//! raw name whose model-visible form would exceed 64 characters (`kinds::max_raw_tool_name`).

use super::catalog::{TOOLS, ToolDescriptor, ToolId, find_tool};
use super::kinds::MODEL_VISIBLE_PREFIXES;

/// The MCP server name runtimes register the namespace under (inside every
/// `kinds::MODEL_VISIBLE_PREFIXES`).
pub const NAMESPACE: &str = "agentteam";

/// Maps a raw tool name to the name a runtime shows its model.
pub trait ToolNamer {
    fn model_name(&self, raw: &str) -> String;
}

/// The naming conventions of the runtimes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeNaming {
    /// Raw names, as `tools/list` serves them.
    Raw,
    /// Claude Code and Codex: `mcp__agentteam__<tool>`.
    Claude,
    /// OpenCode: `mcp_agentteam_<tool>`.
    Opencode,
    /// Gemini CLI: `mcp_<server>_<tool>`, that is `mcp_agentteam_<tool>`.
    Gemini,
    /// Kimi Code: `mcp__<server>__<tool>`.
    Kimi,
    /// Copilot CLI: `<server>-<tool>`.
    Copilot,
}

impl RuntimeNaming {
    /// Every convention.
    pub const ALL: [RuntimeNaming; 6] = [
        RuntimeNaming::Raw,
        RuntimeNaming::Claude,
        RuntimeNaming::Opencode,
        RuntimeNaming::Gemini,
        RuntimeNaming::Kimi,
        RuntimeNaming::Copilot,
    ];
}

/// A tool of the inventory, as a model-visible name resolves to it.
#[derive(Debug, Clone, Copy)]
pub struct ToolRef {
    /// The MCP server the runtime registered ([`NAMESPACE`]).
    pub server: &'static str,
    pub tool: &'static ToolDescriptor,
}

impl RuntimeNaming {
    /// What this convention puts before a raw name.
    fn prefix(self) -> &'static str {
        match self {
            RuntimeNaming::Raw => "",
            RuntimeNaming::Claude | RuntimeNaming::Kimi => MODEL_VISIBLE_PREFIXES[0],
            RuntimeNaming::Opencode | RuntimeNaming::Gemini => MODEL_VISIBLE_PREFIXES[1],
            RuntimeNaming::Copilot => MODEL_VISIBLE_PREFIXES[2],
        }
    }

    /// The tool a model-visible name stands for under this convention, or `None` when the name
    /// is not this convention's form of a tool in the inventory.
    pub fn resolve(self, visible: &str) -> Option<ToolRef> {
        let raw = visible.strip_prefix(self.prefix())?;
        find_tool(raw).map(|tool| ToolRef {
            server: NAMESPACE,
            tool,
        })
    }

    /// Codex shows a tool as a Responses API namespace and a function in it: the tool behind
    /// `namespace` + `function`, or `None`.
    pub fn resolve_codex(namespace: &str, function: &str) -> Option<ToolRef> {
        let server = namespace.strip_prefix("mcp__")?;
        (server == NAMESPACE)
            .then(|| find_tool(function))
            .flatten()
            .map(|tool| ToolRef {
                server: NAMESPACE,
                tool,
            })
    }
}

impl ToolNamer for RuntimeNaming {
    fn model_name(&self, raw: &str) -> String {
        format!("{}{raw}", self.prefix())
    }
}

/// The guidance in two parts, for a prompt compiler that places them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDocParts {
    /// How to use the namespace as a whole.
    pub rules: String,
    /// One line per tool, in inventory order.
    pub tools: String,
}

/// The guidance as its two parts.
pub fn skill_doc_split(namer: &dyn ToolNamer) -> SkillDocParts {
    let send = namer.model_name(ToolId::MessageSend.descriptor().name);
    let rules = format!(
        "## AgentTeam MCP tools (`{NAMESPACE}`)\n\n\
         - Reply with `{send}` using the exact `target` shown on the message you answer (`channel:…`, `dm:…` or `thread:…`); never guess or reuse another target.\n\
         - A failed call returns `isError` with a JSON error envelope: read its `code`, `message` and `next`, fix the call, and do not retry the same arguments.\n\
         - Results are bounded: when a read reports `result_budget_exceeded`, follow its `next` (a smaller `limit`, then `nextCursor`).\n\
         - Tools marked read-only never change anything; the others act in the workspace as you.\n\
         - Tasks, reviews, projects, teams and scheduled messages are not MCP tools: use `agentteam exec`.\n"
    );
    let mut tools = String::new();
    for tool in TOOLS {
        let access = if tool.read_only { "read-only" } else { "acts" };
        tools.push_str(&format!(
            "- `{}` ({access}): {}\n",
            namer.model_name(tool.name),
            tool.description
        ));
    }
    SkillDocParts { rules, tools }
}

/// The longest MCP `instructions` the daemon sends. Claude Code 2.1.332 cuts a server's
/// instructions after 4 096 characters (measured: ARCHITECTURE.md); this leaves room below it.
pub const MAX_MCP_INSTRUCTIONS: usize = 3_500;

/// What `initialize` and `server/discover` tell a model about the namespace, in raw tool names:
/// the tools, the reply rule, the memory skill's summary and where the Exec surface is described.
/// Within [`MAX_MCP_INSTRUCTIONS`] (a unit test holds it there).
pub fn mcp_instructions() -> String {
    let send = ToolId::MessageSend.descriptor().name;
    let mut text = format!(
        "AgentTeam tools for this agent. Reply with `{send}` using the exact `target` shown on the message you answer (`channel:…`, `dm:…` or `thread:…`); never guess or reuse another target.\n\nTools:\n"
    );
    for tool in TOOLS {
        let access = if tool.read_only { "read-only" } else { "acts" };
        text.push_str(&format!(
            "- `{}` ({access}): {}\n",
            tool.name,
            first_sentence(tool.description)
        ));
    }
    text.push_str(
        "\nA failed call returns `isError` with a JSON envelope: read its `code`, `message` and `next` and fix the call instead of repeating it. A read over its budget says `result_budget_exceeded`: follow its `next`.\n",
    );
    for tool in TOOLS {
        if let Some(skill) = &tool.skill {
            text.push_str(&format!(
                "\nMemory (`{}`, skill `{}`): {}\n",
                tool.name,
                skill.name,
                first_sentence(skill.text)
            ));
        }
    }
    text.push_str(
        "\nTasks, reviews, projects, teams, scheduled messages, approvals and the extensions are not MCP tools: they are `agentteam exec <domain> <action> '<JSON>'`, run through your command tool; `agentteam exec --help` lists them, and the launch's guidance describes them.",
    );
    text
}

/// The text up to the end of its first sentence (`. ` or the end).
fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(end) => &text[..=end],
        None => text.trim_end(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_instructions_name_every_tool_within_their_bound() {
        let text = mcp_instructions();
        assert!(
            text.chars().count() <= MAX_MCP_INSTRUCTIONS,
            "{} characters",
            text.chars().count()
        );
        for tool in TOOLS {
            assert_eq!(text.matches(&format!("- `{}` (", tool.name)).count(), 1);
        }
        assert!(text.contains("memory-maintenance"));
        assert!(text.ends_with("the launch's guidance describes them."));
    }

    #[test]
    fn the_guidance_names_every_tool_once_under_the_runtime_convention() {
        for naming in RuntimeNaming::ALL {
            let parts = skill_doc_split(&naming);
            let doc = format!("{}{}", parts.rules, parts.tools);
            for tool in TOOLS {
                let shown = format!("- `{}` (", naming.model_name(tool.name));
                assert_eq!(doc.matches(&shown).count(), 1, "{shown}");
            }
            assert_eq!(
                doc.lines().filter(|l| l.starts_with("- `")).count(),
                TOOLS.len()
            );
        }
        assert!(
            skill_doc_split(&RuntimeNaming::Claude)
                .rules
                .contains("`mcp__agentteam__message_send`")
        );
        assert!(
            skill_doc_split(&RuntimeNaming::Opencode)
                .tools
                .contains("`mcp_agentteam_message_send`")
        );
    }

    /// Raw → model-visible → `{server, raw tool}` is the identity over the whole
    /// inventory under every convention, each form fits 64 characters, and nothing else resolves.
    #[test]
    fn every_tool_name_round_trips_under_every_runtime_convention() {
        use super::super::kinds::{MAX_GEMINI_NAME, MAX_MODEL_VISIBLE_NAME, max_raw_tool_name};
        // Gemini's policy parser splits a server name at its first `_`.
        assert!(!NAMESPACE.contains('_'));
        // The generator's bound on raw names keeps every form within every runtime's limit.
        for naming in RuntimeNaming::ALL {
            let longest = naming.model_name(&"x".repeat(max_raw_tool_name()));
            let limit = if naming == RuntimeNaming::Gemini {
                MAX_GEMINI_NAME
            } else {
                MAX_MODEL_VISIBLE_NAME
            };
            assert!(longest.len() <= limit, "{naming:?}: {longest}");
        }
        for naming in RuntimeNaming::ALL {
            for tool in TOOLS {
                let visible = naming.model_name(tool.name);
                assert!(visible.len() <= MAX_MODEL_VISIBLE_NAME);
                let back = naming.resolve(&visible).unwrap();
                assert_eq!((back.server, back.tool.name), (NAMESPACE, tool.name));
                let codex = RuntimeNaming::resolve_codex("mcp__agentteam", tool.name).unwrap();
                assert_eq!(codex.tool.name, tool.name);
            }
        }
        assert_eq!(
            RuntimeNaming::Claude.model_name("message_send"),
            "mcp__agentteam__message_send"
        );
        assert_eq!(
            RuntimeNaming::Opencode.model_name("message_send"),
            "mcp_agentteam_message_send"
        );
        assert_eq!(
            RuntimeNaming::Gemini.model_name("message_send"),
            "mcp_agentteam_message_send"
        );
        assert_eq!(
            RuntimeNaming::Kimi.model_name("message_send"),
            "mcp__agentteam__message_send"
        );
        assert_eq!(
            RuntimeNaming::Copilot.model_name("message_send"),
            "agentteam-message_send"
        );
        assert!(
            RuntimeNaming::Copilot
                .resolve("mcp_agentteam_message_send")
                .is_none()
        );
        assert!(
            RuntimeNaming::Gemini
                .resolve("agentteam-message_send")
                .is_none()
        );
        // Another convention's form, another server, an unknown tool: none resolves.
        assert!(
            RuntimeNaming::Claude
                .resolve("mcp_agentteam_message_send")
                .is_none()
        );
        assert!(
            RuntimeNaming::Opencode
                .resolve("mcp__agentteam__message_send")
                .is_none()
        );
        assert!(
            RuntimeNaming::Claude
                .resolve("mcp__other__message_send")
                .is_none()
        );
        assert!(
            RuntimeNaming::Claude
                .resolve("mcp__agentteam__no_such_tool")
                .is_none()
        );
        assert!(RuntimeNaming::resolve_codex("mcp__other", "message_send").is_none());
        assert!(RuntimeNaming::resolve_codex("agentteam", "message_send").is_none());
    }
}
