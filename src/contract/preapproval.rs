//! The Exec actions a launched runtime may run without asking, and the one other name
//! `agentteam exec` runs under for a runtime whose command rules cannot approve `agentteam exec`
//! itself. The drivers turn the prefixes into each runtime's own rules; the CLI's `agentteam-exec`
//! runs nothing else.

use super::catalog::ACTIONS;
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

#[cfg(test)]
mod tests {
    use super::*;

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
