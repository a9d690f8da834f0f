//! What a launched runtime may call without asking its person, by the catalog's risk, the same
//! for every runtime: reads and writes are pre-approved, a destructive action or tool is asked
//! of the person (or refused where nobody can be asked). Here: the Exec prefixes and MCP tools
//! that are pre-approved, and the one other name `agentteam exec` runs under for a runtime whose
//! command rules cannot approve `agentteam exec` itself. The drivers turn them into each
//! runtime's own rules; the CLI's `agentteam-exec` runs nothing else.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::ActionError;
use super::catalog::{ACTIONS, MCP_TOOLS_JSON, TOOLS};
use super::error::ErrorCode;
use super::extension::Definition;
use super::kinds::Risk;

/// `agentteam exec` under another name, linked beside `agentteam` in a launch's bin directory where
/// the runtime needs it (`driver::Family::exec_alias`): it runs only the actions
/// [`preapproved_prefixes`] lists, and refuses every other command (`cli::exec::run_preapproved`).
pub const EXEC_ALIAS: &str = "agentteam-exec";

/// The `agentteam exec <domain> <action>` prefixes that may run without asking: every built-in
/// and pinned extension action whose risk is not destructive (for an operation union, its most
/// severe operation's).
pub fn preapproved_prefixes(extensions: &[&Definition]) -> Vec<String> {
    let builtin = ACTIONS
        .iter()
        .filter(|a| a.as_whole().risk() != Risk::Destructive)
        .map(|a| format!("agentteam exec {} {}", a.domain, a.action));
    let pinned = extensions.iter().flat_map(|definition| {
        definition
            .actions
            .iter()
            .filter(|a| a.risk != Risk::Destructive)
            .map(|a| format!("agentteam exec {} {}", definition.name, a.action))
    });
    builtin.chain(pinned).collect()
}

/// Why a launched runtime would run a destructive AgentTeam call without asking its person, per
/// bridge; `None` where the runtime asks (or, headless, refuses what nobody approved). The
/// rule, the same for every runtime: reads and writes run without asking, a destructive call is
/// asked, and where nobody would be asked the daemon refuses it, saying why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unasked {
    /// Its shell runs a destructive `agentteam exec` without asking.
    pub exec: Option<String>,
    /// Its MCP client calls a destructive `agentteam` tool without asking.
    pub mcp: Option<String>,
}

impl Unasked {
    /// Both bridges, for the same reason.
    pub fn both(why: impl Into<String>) -> Unasked {
        let why = why.into();
        Unasked {
            exec: Some(why.clone()),
            mcp: Some(why),
        }
    }

    /// The refusal of a destructive `operation` (`task cancel`, `reaction_remove`) through a
    /// bridge on which nobody would be asked (`why`): what the model reads.
    pub fn refusal(operation: &str, why: &str) -> ActionError {
        ActionError::new(
            ErrorCode::Forbidden,
            format!("`{operation}` is destructive, and nobody would be asked to approve it: {why}"),
        )
        .with_hint(
            "AgentTeam runs a destructive action only where the runtime asks its person first",
        )
        .with_next("leave it to your person: say what you would do and why, and let them run it")
    }
}

/// Whether the MCP tool `name` is destructive: its `destructiveHint`, which MCP takes as true
/// for a tool that is not read-only and does not say. A tool the inventory does not know is.
pub fn tool_is_destructive(name: &str) -> bool {
    static DESTRUCTIVE: OnceLock<BTreeMap<String, bool>> = OnceLock::new();
    let destructive = DESTRUCTIVE.get_or_init(|| {
        let inventory: Value = serde_json::from_str(MCP_TOOLS_JSON).expect("generated JSON parses");
        let destructive = super::gate::hints(&inventory, "destructiveHint");
        super::gate::read_only_hints(&inventory)
            .into_iter()
            .map(|(name, read_only)| {
                let marked = destructive.get(&name).copied().flatten();
                let is = read_only != Some(true) && marked != Some(false);
                (name, is)
            })
            .collect()
    });
    destructive.get(name).copied().unwrap_or(true)
}

/// The `agentteam` MCP tools that may run without asking: every tool that is not destructive.
pub fn preapproved_tools() -> Vec<&'static str> {
    TOOLS
        .iter()
        .map(|tool| tool.name)
        .filter(|name| !tool_is_destructive(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_but_a_destructive_one_is_preapproved() {
        let tools = preapproved_tools();
        for read_or_write in [
            "message_send",
            "reaction_add",
            "message_history_read",
            "kb_search",
        ] {
            assert!(tools.contains(&read_or_write), "{read_or_write}");
        }
        assert!(tool_is_destructive("reaction_remove"));
        assert!(!tools.contains(&"reaction_remove"));
        assert!(tool_is_destructive("no_such_tool"), "unknown fails closed");
        assert_eq!(tools.len() + 1, TOOLS.len(), "{tools:?}");
    }

    #[test]
    fn no_destructive_action_is_preapproved() {
        let prefixes = preapproved_prefixes(&[]);
        assert!(prefixes.contains(&"agentteam exec task create".to_string()));
        assert!(prefixes.contains(&"agentteam exec task get".to_string()));
        for destructive in ACTIONS
            .iter()
            .filter(|a| a.as_whole().risk() == Risk::Destructive)
        {
            let name = format!(
                "agentteam exec {} {}",
                destructive.domain, destructive.action
            );
            assert!(!prefixes.contains(&name), "{name}");
        }
        assert!(!prefixes.contains(&"agentteam exec task cancel".to_string()));
        assert!(prefixes.iter().all(|p| p.starts_with("agentteam exec ")));
    }
}
