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
/// What the person paused, in the recipes directory.
const PAUSED_FILE: &str = "paused.json";
/// Where a delivered turn's file is kept while its run lives (`turns/<delivery id>/`).
const TURNS_DIR: &str = "turns";
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
    /// Runs of this recipe may share the working directory at once (by default a run waits
    /// while another delivered run works in it).
    #[serde(default)]
    pub shared_workdir: bool,
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
            "sharedWorkdir": self.shared_workdir,
        })
    }
}

/// What the person paused: every agent, or these.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Paused {
    pub all: bool,
    pub agents: std::collections::BTreeSet<String>,
}

/// The daemon's deliverer: the recipes, the agents it hosts, the runs it has live.
pub struct Deliverer {
    dir: PathBuf,
    /// Agent id → the hosting fence the server gave this daemon.
    pub(super) fences: Mutex<HashMap<String, i64>>,
    /// `(agent id, target)` with a delivered run live now.
    pub(super) busy: Mutex<HashSet<(String, String)>>,
    /// Working directories a delivered run works in now (of recipes that do not share theirs).
    pub(super) workdirs: Mutex<HashSet<PathBuf>>,
    /// `(delivery id, updatedAt)` the server refused to start here (another host's, or no longer
    /// pending): not tried again until it changes.
    pub(super) refused: Mutex<HashSet<(String, String)>>,
    /// `(delivery id, updatedAt)` this daemon sent the start of: never sent again, even by a pass
    /// whose list was read before the start (the server would replay the start's answer, and a
    /// second run would follow), until the delivery changes.
    pub(super) begun: Mutex<HashSet<(String, String)>>,
    paused: Mutex<Paused>,
    /// The runtime session each delivered conversation runs in.
    pub(super) sessions: super::session::Sessions,
    /// Asks for a pass now (a recipe was set, a run ended, the person resumed).
    pub(super) wake: tokio::sync::Notify,
}

impl Deliverer {
    /// The deliverer of the state directory, with what the person paused there.
    pub fn new(state_dir: &Path) -> Deliverer {
        let dir = state_dir.join(RECIPES_DIR);
        let paused = match crate::private_file::read_private_limited(
            &dir.join(PAUSED_FILE),
            MAX_RECIPE_FILE,
        ) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|error| {
                // Unreadable: everything stays paused rather than starting what the person held.
                tracing::warn!(%error, "the paused agents cannot be read: every agent is paused");
                Paused {
                    all: true,
                    agents: Default::default(),
                }
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Paused::default(),
            Err(error) => {
                tracing::warn!(%error, "the paused agents cannot be read: every agent is paused");
                Paused {
                    all: true,
                    agents: Default::default(),
                }
            }
        };
        // The turn files a daemon stopped before removing are of runs that ended with it.
        let _ = std::fs::remove_dir_all(dir.join(TURNS_DIR));
        Deliverer {
            dir: dir.clone(),
            fences: Mutex::default(),
            busy: Mutex::default(),
            workdirs: Mutex::default(),
            refused: Mutex::default(),
            begun: Mutex::default(),
            paused: Mutex::new(paused),
            sessions: super::session::Sessions::new(&dir),
            wake: tokio::sync::Notify::new(),
        }
    }

    fn path(&self, agent_id: &str) -> PathBuf {
        self.dir.join(format!("{agent_id}.json"))
    }

    /// Writes a delivered turn's prompt (the person's message and the target to answer) to an
    /// owner-only file of its own, for a runtime that cannot take it on stdin; its path.
    pub(super) fn turn_file(&self, delivery_id: &str, text: &str) -> std::io::Result<PathBuf> {
        // The server's id, but a path component here: nothing that could leave the directory.
        if delivery_id.is_empty()
            || !delivery_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the delivery's id is not a plain name",
            ));
        }
        let dir = self.dir.join(TURNS_DIR).join(delivery_id);
        crate::platform::fs::create_private_dirs(&dir)?;
        let file = dir.join("message.md");
        crate::private_file::replace(&file, text)?;
        Ok(file)
    }

    /// Removes a delivered turn's file once its run ended.
    pub(super) fn forget_turn(&self, delivery_id: &str) {
        let _ = std::fs::remove_dir_all(self.dir.join(TURNS_DIR).join(delivery_id));
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
        // Another runtime or directory has none of the sessions the old recipe ran in.
        self.sessions.forget_agent(agent_id);
        self.fences.lock().expect("not poisoned").remove(agent_id);
        self.refused.lock().expect("not poisoned").clear();
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

    /// What is paused now.
    pub fn paused(&self) -> Paused {
        self.paused.lock().expect("not poisoned").clone()
    }

    /// Whether agent `agent_id`'s deliveries wait, paused.
    pub fn is_paused(&self, agent_id: &str) -> bool {
        let paused = self.paused.lock().expect("not poisoned");
        paused.all || paused.agents.contains(agent_id)
    }

    /// Pauses (`hold`) or resumes agent `agent_id`, or every agent (`None`), and keeps it: a
    /// paused agent's deliveries wait (and expire in time); its live runs go on. Resuming every
    /// agent resumes each one paused by name too.
    pub fn pause(&self, agent_id: Option<&str>, hold: bool) -> std::io::Result<Paused> {
        let mut paused = self.paused.lock().expect("not poisoned");
        let mut next = paused.clone();
        match (agent_id, hold) {
            (None, true) => next.all = true,
            (None, false) => next = Paused::default(),
            (Some(agent), true) => {
                next.agents.insert(agent.to_string());
            }
            (Some(agent), false) => {
                next.agents.remove(agent);
            }
        }
        crate::daemon::auth::files::ensure_private_dir(&self.dir)?;
        let text = serde_json::to_string(&next).map_err(std::io::Error::other)?;
        crate::private_file::replace(&self.dir.join(PAUSED_FILE), &text)?;
        *paused = next.clone();
        drop(paused);
        if !hold {
            self.wake.notify_one();
        }
        Ok(next)
    }
}

/// `ActionError` for a recipe request the daemon refuses.
pub fn refused(message: impl Into<String>) -> ActionError {
    ActionError::new(ErrorCode::ValidationFailed, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn's file is the owner's alone, in a directory of its own, gone once forgotten; an id
    /// that is not a plain name writes nothing; a new deliverer removes what a stopped one left.
    #[test]
    fn a_turns_file_is_owner_only_and_removed() {
        let state = tempfile::tempdir().unwrap();
        let deliverer = Deliverer::new(state.path());
        let file = deliverer.turn_file("dlv_01abc", "the message").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "the message");
        let mode = |p: &Path| crate::platform::fs::mode(&std::fs::metadata(p).unwrap()) & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        for bad in ["", "../x", "a/b", "."] {
            assert!(deliverer.turn_file(bad, "x").is_err(), "{bad:?}");
        }
        deliverer.forget_turn("dlv_01abc");
        assert!(!file.exists());
        let left = deliverer.turn_file("dlv_02left", "x").unwrap();
        Deliverer::new(state.path());
        assert!(!left.exists());
    }

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
            shared_workdir: false,
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

    #[test]
    fn a_pause_is_kept_and_resuming_all_resumes_each() {
        let dir = tempfile::tempdir().unwrap();
        let deliverer = Deliverer::new(dir.path());
        assert!(!deliverer.is_paused("agt_a"));
        deliverer.pause(Some("agt_a"), true).unwrap();
        assert!(deliverer.is_paused("agt_a") && !deliverer.is_paused("agt_b"));
        deliverer.pause(None, true).unwrap();
        // A new daemon on the same state directory keeps what the person paused.
        let again = Deliverer::new(dir.path());
        assert!(again.is_paused("agt_b"));
        assert_eq!(again.paused().agents.len(), 1);
        again.pause(None, false).unwrap();
        assert!(!again.is_paused("agt_a") && !again.is_paused("agt_b"));
        // An unreadable record pauses everything rather than starting what was held.
        std::fs::write(dir.path().join("recipes/paused.json"), "not json").unwrap();
        assert!(Deliverer::new(dir.path()).is_paused("agt_c"));
    }
}
