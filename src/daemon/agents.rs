//! Local agent profiles: which agents this desktop runs, stored in `<state dir>/agents.json`
//! (owner-only, replaced atomically through `private_file`) and mirrored on the server.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// At most this many local profiles.
pub const MAX_PROFILES: usize = 1000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    pub agent_id: String,
    pub handle: String,
    pub display_name: String,
}

#[derive(Debug)]
pub struct Profiles {
    path: PathBuf,
    list: Mutex<Vec<Profile>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read `{path}`")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("`{path}` is not a valid profile list")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("cannot save `{path}`")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl Profiles {
    pub fn load(path: &Path) -> Result<Profiles, ProfileError> {
        let list = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| ProfileError::Parse {
                path: path.display().to_string(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(ProfileError::Read {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        Ok(Profiles {
            path: path.to_path_buf(),
            list: Mutex::new(list),
        })
    }

    pub fn list(&self) -> Vec<Profile> {
        self.list.lock().expect("not poisoned").clone()
    }

    pub fn get(&self, agent_id: &str) -> Option<Profile> {
        self.list
            .lock()
            .expect("not poisoned")
            .iter()
            .find(|p| p.agent_id == agent_id || p.handle == agent_id)
            .cloned()
    }

    pub fn add(&self, profile: Profile) -> Result<(), ProfileError> {
        let mut list = self.list.lock().expect("not poisoned");
        let mut next = list.clone();
        next.push(profile);
        self.save(&next)?;
        *list = next;
        Ok(())
    }

    /// Removes the profile with this id or handle; `false` when there is none.
    pub fn remove(&self, agent_id: &str) -> Result<Option<Profile>, ProfileError> {
        let mut list = self.list.lock().expect("not poisoned");
        let Some(index) = list
            .iter()
            .position(|p| p.agent_id == agent_id || p.handle == agent_id)
        else {
            return Ok(None);
        };
        let mut next = list.clone();
        let removed = next.remove(index);
        self.save(&next)?;
        *list = next;
        Ok(Some(removed))
    }

    pub fn len(&self) -> usize {
        self.list.lock().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn save(&self, list: &[Profile]) -> Result<(), ProfileError> {
        let error = |source| ProfileError::Write {
            path: self.path.display().to_string(),
            source,
        };
        let mut text = serde_json::to_string_pretty(list).expect("profiles serialize");
        text.push('\n');
        crate::private_file::replace(&self.path, &text).map_err(error)
    }
}
