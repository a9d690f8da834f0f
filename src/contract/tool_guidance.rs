//! Tool-use guidance for the `agentteam` MCP namespace (the spec's `SkillDoc` / `SkillDocSplit`),
//! rendered from the same `TOOLS` inventory `tools/list` serves, so the prompt can never name a
//! tool the route does not offer or miss one it does.
//!
//! Runtimes show raw tool names under their own convention; a [`ToolNamer`] maps each raw name to
//! what the model sees (`mcp__agentteam__message_send`, `mcp_agentteam_message_send`), and
//! [`RuntimeNaming::resolve`] maps a model-visible name back to `{server, raw tool}` before
//! anything is dispatched. The generator refuses a raw name whose model-visible form would exceed
//! 64 characters (`kinds::max_raw_tool_name`).

use super::catalog::{TOOLS, ToolDescriptor, ToolId, find_tool};
use super::kinds::MODEL_VISIBLE_PREFIXES;

/// The MCP server name runtimes register the namespace under (inside every
/// `kinds::MODEL_VISIBLE_PREFIXES`).
pub const NAMESPACE: &str = "agentteam";

/// Maps a raw tool name to the name a runtime shows its model.
pub trait ToolNamer {
    fn model_name(&self, raw: &str) -> String;
}

/// The naming conventions of the runtimes the daemon drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeNaming {
    /// Raw names, as `tools/list` serves them.
    Raw,
    /// Claude Code and Codex: `mcp__agentteam__<tool>`.
    Claude,
    /// OpenCode: `mcp_agentteam_<tool>`.
    Opencode,
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
            RuntimeNaming::Claude => MODEL_VISIBLE_PREFIXES[0],
            RuntimeNaming::Opencode => MODEL_VISIBLE_PREFIXES[1],
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

/// The guidance as one document: the rules, the tools, then the runtime skills that come with
/// them, from the same inventory.
pub fn skill_doc(namer: &dyn ToolNamer) -> String {
    let parts = skill_doc_split(namer);
    let mut doc = format!("{}\nTools:\n{}", parts.rules, parts.tools);
    for tool in TOOLS {
        if let Some(skill) = &tool.skill {
            doc.push_str(&format!(
                "\n## Runtime skill `{}` (with `{}`)\n\n{}\n",
                skill.name,
                namer.model_name(tool.name),
                skill.text.trim_end()
            ));
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guidance_names_every_tool_once_under_the_runtime_convention() {
        for naming in [
            RuntimeNaming::Raw,
            RuntimeNaming::Claude,
            RuntimeNaming::Opencode,
        ] {
            let doc = skill_doc(&naming);
            for tool in TOOLS {
                let shown = format!("- `{}` (", naming.model_name(tool.name));
                assert_eq!(doc.matches(&shown).count(), 1, "{shown}");
            }
            assert_eq!(
                doc.lines().filter(|l| l.starts_with("- `")).count(),
                TOOLS.len()
            );
        }
        assert!(skill_doc(&RuntimeNaming::Claude).contains("`mcp__agentteam__message_send`"));
        assert!(skill_doc(&RuntimeNaming::Opencode).contains("`mcp_agentteam_message_send`"));
    }

    /// Raw → model-visible → `{server, raw tool}` is the identity over the whole
    /// inventory under every convention, each form fits 64 characters, and nothing else resolves.
    #[test]
    fn every_tool_name_round_trips_under_every_runtime_convention() {
        for naming in [
            RuntimeNaming::Raw,
            RuntimeNaming::Claude,
            RuntimeNaming::Opencode,
        ] {
            for tool in TOOLS {
                let visible = naming.model_name(tool.name);
                assert!(visible.len() <= super::super::kinds::MAX_MODEL_VISIBLE_NAME);
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
