//! The closed vocabularies of the contract, shared by the runtime and the generator: the
//! generator includes this file through `#[path]` (it depends only on `serde`), so an inventory
//! row and the descriptor it becomes can never disagree on a kind.

use serde::Deserialize;

/// How risky an action is for the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Risk {
    Read,
    Write,
    Destructive,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Write => "write",
            Risk::Destructive => "destructive",
        }
    }

    /// True for actions that change state (`write` and `destructive`).
    pub fn is_mutation(self) -> bool {
        !matches!(self, Risk::Read)
    }
}

/// How an over-budget result continues (spec "Result Boundaries").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResultPolicy {
    /// A page: continue with a smaller limit and the cursor.
    Cursor,
    /// A sectioned document: continue section by section.
    Section,
    /// A read that a narrower request can shrink.
    Narrow,
    /// A read bounded by design; over budget means a more specific request.
    Bounded,
    /// A side effect: over budget returns a receipt, never a replay.
    Mutation,
}

impl ResultPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ResultPolicy::Cursor => "cursor",
            ResultPolicy::Section => "section",
            ResultPolicy::Narrow => "narrow",
            ResultPolicy::Bounded => "bounded",
            ResultPolicy::Mutation => "mutation",
        }
    }
}

/// Who owns an Exec domain's actions: the product owner behind the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DomainOwner {
    /// The AgentTeam Server's runtime API (the daemon forwards through `ServerClient`).
    Server,
    /// The daemon itself (local agent profiles): a `DaemonActionHandler` answers.
    Daemon,
}

impl DomainOwner {
    pub fn as_str(self) -> &'static str {
        match self {
            DomainOwner::Server => "server",
            DomainOwner::Daemon => "daemon",
        }
    }
}

/// Who answers an MCP tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolOwner {
    /// The AgentTeam Server's runtime API.
    Server,
    /// The daemon's managed memory index.
    Memory,
    /// Knowledge retrieval (AgentTeam Core, then MeshX).
    Knowledge,
}

impl ToolOwner {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOwner::Server => "server",
            ToolOwner::Memory => "memory",
            ToolOwner::Knowledge => "knowledge",
        }
    }
}

/// Whether the MCP tool `tool` belongs to the family of the Exec domain `domain`: with `-` and `_`
/// read as one separator, the tool is the domain's name or starts with it plus a separator
/// (`scheduled_message_x` belongs to `scheduled-message`; `message_send` to `message`).
pub fn collides(tool: &str, domain: &str) -> bool {
    let family = domain.replace('-', "_");
    tool.replace('-', "_")
        .strip_prefix(&family)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
}

/// `^[a-z][a-z0-9-]*$`, no trailing or doubled hyphen.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name.len() <= 32
}

/// How the runtimes show a raw MCP tool name to their model: Claude Code, Codex and Kimi Code as
/// `mcp__agentteam__<tool>` (Codex: the namespace `mcp__agentteam` and the function `<tool>`),
/// OpenCode as `mcp_agentteam_<tool>` (its server key `mcp_agentteam`, `_`, the tool) and Gemini
/// CLI the same way (`mcp_`, the server, `_`, the tool), Copilot CLI as `agentteam-<tool>`.
pub const MODEL_VISIBLE_PREFIXES: [&str; 3] = ["mcp__agentteam__", "mcp_agentteam_", "agentteam-"];

/// Gemini CLI cuts a tool name longer than this to its first and last 30 characters.
pub const MAX_GEMINI_NAME: usize = 63;

/// The longest name a runtime shows its model for one tool (the Responses API and Anthropic's
/// tool names are at most 64 characters; Codex hashes a longer one into something else).
pub const MAX_MODEL_VISIBLE_NAME: usize = 64;

/// The longest raw tool name whose every model-visible form fits [`MAX_MODEL_VISIBLE_NAME`], and
/// Gemini's (`mcp_agentteam_<tool>`) fits [`MAX_GEMINI_NAME`] uncut.
pub const fn max_raw_tool_name() -> usize {
    let mut longest = 0;
    let mut i = 0;
    while i < MODEL_VISIBLE_PREFIXES.len() {
        if MODEL_VISIBLE_PREFIXES[i].len() > longest {
            longest = MODEL_VISIBLE_PREFIXES[i].len();
        }
        i += 1;
    }
    let any = MAX_MODEL_VISIBLE_NAME - longest;
    let gemini = MAX_GEMINI_NAME - MODEL_VISIBLE_PREFIXES[1].len();
    if gemini < any { gemini } else { any }
}
