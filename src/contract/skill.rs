//! Tool-use guidance for the `agentteam` MCP namespace (the spec's `SkillDoc` / `SkillDocSplit`),
//! rendered from the same `TOOLS` inventory `tools/list` serves, so the prompt can never name a
//! tool the route does not offer or miss one it does.
//!
//! Runtimes show raw tool names under their own convention; a [`ToolNamer`] maps each raw name to
//! what the model sees (`mcp__agentteam__message_send`, `mcp_agentteam_message_send`).

use super::catalog::{TOOLS, ToolId};

/// The MCP server name runtimes register the namespace under.
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

impl ToolNamer for RuntimeNaming {
    fn model_name(&self, raw: &str) -> String {
        match self {
            RuntimeNaming::Raw => raw.to_string(),
            RuntimeNaming::Claude => format!("mcp__{NAMESPACE}__{raw}"),
            RuntimeNaming::Opencode => format!("mcp_{NAMESPACE}_{raw}"),
        }
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
}
