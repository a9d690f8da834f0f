//! An agent's launch recipe, the person's alone, and the deliverer's own record of the agents
//! this daemon hosts and the conversations with a delivered run live now.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::daemon::runtime::{MAX_ARGV, MAX_ENV_ENTRIES, driver};

/// Where the recipes are kept, in the state directory.
pub const RECIPES_DIR: &str = "recipes";
/// The largest recipe file read.
const MAX_RECIPE_FILE: u64 = 1024 * 1024;

/// An agent's launch recipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recipe {
    /// The family whose driver wires the launch (`auto`: from the program's name).
    #[serde(default)]
    pub runtime: driver::Family,
    /// The runtime's working directory (absolute).
    pub workdir: PathBuf,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The environment the runtime starts with (`PATH`, provider keys…).
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

impl Recipe {
    /// The recipe's own bounds.
    pub fn check(&self) -> Result<(), String> {
        if self.argv.is_empty() || self.argv.len() > MAX_ARGV {
            return Err(format!("give a program and at most {MAX_ARGV} arguments"));
        }
        if self.env.len() > MAX_ENV_ENTRIES {
            return Err(format!("at most {MAX_ENV_ENTRIES} environment entries"));
        }
        if !self.workdir.is_absolute() {
            return Err("the working directory must be an absolute path".into());
        }
        if let Some((name, _)) = self
            .env
            .iter()
            .find(|(name, _)| crate::daemon::runtime::env::is_daemon_owned(name))
        {
            return Err(format!("`{name}` is the daemon's to set, not a recipe's"));
        }
        Ok(())
    }

    /// What may be shown of it: everything but the environment's values.
    pub fn shown(&self) -> Value {
        json!({
            "runtime": self.runtime,
            "workdir": self.workdir,
            "argv": self.argv,
            "envNames": self.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        })
    }
}

/// The daemon's deliverer: the recipes, the agents it hosts, the conversations with a live run.
pub struct Deliverer {
    dir: PathBuf,
    /// Agent id → the hosting fence the server gave this daemon.
    pub(super) fences: Mutex<HashMap<String, i64>>,
    /// `(agent id, target)` with a delivered run live now.
    pub(super) busy: Mutex<HashSet<(String, String)>>,
    /// Asks for a pass now (a recipe was set, a run ended).
    pub(super) wake: tokio::sync::Notify,
}

impl Deliverer {
    pub fn new(state_dir: &Path) -> Deliverer {
        Deliverer {
            dir: state_dir.join(RECIPES_DIR),
            fences: Mutex::default(),
            busy: Mutex::default(),
            wake: tokio::sync::Notify::new(),
        }
    }

    fn path(&self, agent_id: &str) -> PathBuf {
        self.dir.join(format!("{agent_id}.json"))
    }

    /// Agent `agent_id`'s recipe, if it has one.
    pub fn recipe(&self, agent_id: &str) -> std::io::Result<Option<Recipe>> {
        match crate::private_file::read_private_limited(&self.path(agent_id), MAX_RECIPE_FILE) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(std::io::Error::other),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Sets agent `agent_id`'s recipe (owner-only), and has the deliverer claim it again: the
    /// daemon where a recipe was set last hosts the agent.
    pub fn set_recipe(&self, agent_id: &str, recipe: &Recipe) -> std::io::Result<()> {
        crate::daemon::auth::files::ensure_private_dir(&self.dir)?;
        let text = serde_json::to_string(recipe).map_err(std::io::Error::other)?;
        crate::private_file::replace(&self.path(agent_id), &text)?;
        self.fences.lock().expect("not poisoned").remove(agent_id);
        self.wake.notify_one();
        Ok(())
    }

    /// Removes agent `agent_id`'s recipe: its deliveries are no longer started here.
    pub fn clear_recipe(&self, agent_id: &str) -> std::io::Result<bool> {
        self.fences.lock().expect("not poisoned").remove(agent_id);
        match std::fs::remove_file(self.path(agent_id)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }
}

/// `ActionError` for a recipe request the daemon refuses.
pub fn refused(message: impl Into<String>) -> ActionError {
    ActionError::new(ErrorCode::ValidationFailed, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_keeps_its_bounds_and_the_daemons_variables() {
        let recipe = |argv: Vec<&str>, env: Vec<(&str, &str)>, workdir: &str| Recipe {
            runtime: driver::Family::Auto,
            workdir: workdir.into(),
            argv: argv.into_iter().map(str::to_string).collect(),
            env: env
                .into_iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        };
        assert!(
            recipe(vec!["claude", "-p"], vec![("PATH", "/bin")], "/tmp")
                .check()
                .is_ok()
        );
        assert!(recipe(vec![], vec![], "/tmp").check().is_err());
        assert!(recipe(vec!["sh"], vec![], "relative").check().is_err());
        let owned = recipe(vec!["sh"], vec![("AGENTTEAM_MCP_TOKEN_FILE", "/x")], "/tmp").check();
        assert!(owned.unwrap_err().contains("AGENTTEAM_MCP_TOKEN_FILE"));
        let shown = recipe(vec!["sh"], vec![("API_KEY", "sk-secret")], "/tmp").shown();
        assert_eq!(shown["envNames"], json!(["API_KEY"]));
        assert!(!shown.to_string().contains("sk-secret"));
    }
}
