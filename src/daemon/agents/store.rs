//! The daemon-owned profile store: `<state dir>/agents/<agent id>/{profile,secrets}.json`, loaded
//! at start, reloadable, every write atomic and owner-only (`private_file`).
//!
//! In memory it keeps each profile and only a *summary* of its secrets (whether an API key is set,
//! the header names): secret values are read from disk only when a launch needs them. It holds at
//! most [`MAX_PROFILES`] profiles, ordered by agent id, and a collection [`Revision`] that every
//! add, update, delete, reload and orphan cleanup advances; a new epoch at every load makes a
//! revision from before a restart or reload stale.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;

use super::profile::{Profile, SecretSummary, Secrets};
use crate::daemon::auth::files::{ensure_private_dir, remove_dir};

/// At most this many local agent profiles (the daemon refuses the next one).
pub const MAX_PROFILES: usize = 10_000;
const PROFILE_FILE: &str = "profile.json";
const SECRETS_FILE: &str = "secrets.json";
/// The profile list of daemons before this store, migrated at the first start.
const LEGACY_FILE: &str = "agents.json";

/// The state of the whole collection: cursors bind it, so any change makes them stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revision {
    /// Random at every load.
    pub epoch: u64,
    /// Advanced by every change.
    pub counter: u64,
}

/// Why a change was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("no agent profile `{0}`")]
    NotFound(String),
    #[error("the profile is at revision {current}")]
    RevisionMismatch { current: u64 },
    #[error("handle `{0}` is taken")]
    HandleTaken(String),
    #[error("this daemon already has {MAX_PROFILES} agent profiles")]
    Full,
    #[error(
        "the profile directory holds more than {MAX_PROFILES} agent profiles (the store's bound): remove the extra ones"
    )]
    TooMany,
    #[error("cannot write the profile store")]
    Io(#[from] io::Error),
}

/// What a load or reload found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadReport {
    pub loaded: usize,
    /// Profiles without a secret file (or incomplete ones) that were removed.
    pub removed: usize,
}

/// Counters tests and status read: how much work `agent list` did.
#[derive(Debug, Default)]
pub struct ListCounters {
    /// Profiles copied out of the store by list pages.
    pub copied: AtomicU64,
}

/// A profile with its secrets' summary.
#[derive(Debug, Clone)]
pub struct Stored {
    pub profile: Profile,
    pub secrets: SecretSummary,
}

struct Inner {
    profiles: BTreeMap<String, Stored>,
    /// Handle → agent id.
    handles: HashMap<String, String>,
    revision: Revision,
}

/// The store.
pub struct ProfileStore {
    dir: PathBuf,
    inner: Mutex<Inner>,
    pub counters: ListCounters,
}

impl std::fmt::Debug for ProfileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileStore")
            .field("dir", &self.dir)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// A list page's filter (the normalized query).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    pub runtime_family: Option<String>,
    pub provider: Option<String>,
}

impl ListFilter {
    fn matches(&self, profile: &Profile) -> bool {
        self.runtime_family
            .as_ref()
            .is_none_or(|f| *f == profile.runtime_family)
            && self
                .provider
                .as_ref()
                .is_none_or(|p| Some(p) == profile.provider.as_ref())
    }
}

impl ProfileStore {
    /// Opens `<state_dir>/agents`, migrating a legacy `agents.json`, and loads every profile.
    pub fn open(
        state_dir: &Path,
        clock: &crate::clock::Clock,
    ) -> Result<(ProfileStore, LoadReport), ProfileError> {
        let dir = state_dir.join("agents");
        ensure_private_dir(&dir)?;
        migrate_legacy(&state_dir.join(LEGACY_FILE), &dir, clock.now_ms())?;
        let (profiles, report) = load_dir(&dir)?;
        let store = ProfileStore {
            dir,
            inner: Mutex::new(Inner::new(profiles)),
            counters: ListCounters::default(),
        };
        Ok((store, report))
    }

    /// Reads every profile from disk again (a new revision epoch).
    pub fn reload(&self) -> Result<LoadReport, ProfileError> {
        let (profiles, report) = load_dir(&self.dir)?;
        *self.lock() = Inner::new(profiles);
        Ok(report)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("not poisoned")
    }

    pub fn len(&self) -> usize {
        self.lock().profiles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn revision(&self) -> Revision {
        self.lock().revision
    }

    /// Every agent id, in order.
    pub fn ids(&self) -> Vec<String> {
        self.lock().profiles.keys().cloned().collect()
    }

    /// The profile with this agent id.
    pub fn get(&self, agent_id: &str) -> Option<Stored> {
        self.lock().profiles.get(agent_id).cloned()
    }

    /// The profile with this agent id or handle.
    pub fn find(&self, id_or_handle: &str) -> Option<Stored> {
        let inner = self.lock();
        let id = inner
            .handles
            .get(id_or_handle)
            .map(String::as_str)
            .unwrap_or(id_or_handle);
        inner.profiles.get(id).cloned()
    }

    /// Up to `limit` profiles matching `filter` after the agent id `after`, copying at most
    /// `limit + 1` of them; whether more exist, and the revision they were read at.
    pub fn page(
        &self,
        filter: &ListFilter,
        after: Option<&str>,
        limit: usize,
    ) -> (Vec<Stored>, bool, Revision) {
        let inner = self.lock();
        let range = match after {
            Some(after) => (Bound::Excluded(after.to_string()), Bound::Unbounded),
            None => (Bound::Unbounded, Bound::Unbounded),
        };
        let mut page: Vec<Stored> = inner
            .profiles
            .range(range)
            .filter(|(_, stored)| filter.matches(&stored.profile))
            .take(limit + 1)
            .map(|(_, stored)| stored.clone())
            .collect();
        self.counters
            .copied
            .fetch_add(page.len() as u64, Ordering::Relaxed);
        let more = page.len() > limit;
        page.truncate(limit);
        (page, more, inner.revision)
    }

    /// Adds a new profile with its secrets.
    pub fn insert(&self, profile: Profile, secrets: Secrets) -> Result<Stored, ProfileError> {
        let mut inner = self.lock();
        if inner.profiles.len() >= MAX_PROFILES {
            return Err(ProfileError::Full);
        }
        if inner.handles.contains_key(&profile.handle)
            || inner.profiles.contains_key(&profile.agent_id)
        {
            return Err(ProfileError::HandleTaken(profile.handle.clone()));
        }
        let dir = self.dir.join(&profile.agent_id);
        ensure_private_dir(&dir)?;
        // The secrets first: a crash before the profile leaves an incomplete directory, which the
        // next load removes; a profile never exists without its secret file.
        write_json(&dir.join(SECRETS_FILE), &secrets)?;
        write_json(&dir.join(PROFILE_FILE), &profile)?;
        let stored = Stored {
            profile,
            secrets: secrets.summary(),
        };
        inner.add(stored.clone());
        inner.advance();
        Ok(stored)
    }

    /// Changes the profile `agent_id` (at `expected` revision, if given) through `change`; with
    /// `edit_secrets`, `change` also gets its secrets (read under the lock) and they are written
    /// back. Bumps the profile's revision and the collection's.
    pub fn update<E: From<ProfileError>>(
        &self,
        agent_id: &str,
        expected: Option<u64>,
        now_ms: i64,
        edit_secrets: bool,
        change: impl FnOnce(&mut Profile, Option<&mut Secrets>) -> Result<(), E>,
    ) -> Result<Stored, E> {
        let mut inner = self.lock();
        let current = inner
            .profiles
            .get(agent_id)
            .ok_or_else(|| ProfileError::NotFound(agent_id.to_string()))?
            .clone();
        if let Some(expected) = expected
            && expected != current.profile.revision
        {
            return Err(ProfileError::RevisionMismatch {
                current: current.profile.revision,
            }
            .into());
        }
        let dir = self.dir.join(agent_id);
        let mut profile = current.profile.clone();
        let mut secrets = if edit_secrets {
            Some(read_secrets(&dir)?)
        } else {
            None
        };
        change(&mut profile, secrets.as_mut())?;
        if profile.handle != current.profile.handle && inner.handles.contains_key(&profile.handle) {
            return Err(ProfileError::HandleTaken(profile.handle).into());
        }
        profile.revision = current.profile.revision + 1;
        profile.updated_at_ms = now_ms;
        let summary = match &secrets {
            Some(secrets) => {
                write_json(&dir.join(SECRETS_FILE), secrets).map_err(ProfileError::from)?;
                secrets.summary()
            }
            None => current.secrets.clone(),
        };
        write_json(&dir.join(PROFILE_FILE), &profile).map_err(ProfileError::from)?;
        inner.remove(agent_id);
        let stored = Stored {
            profile,
            secrets: summary,
        };
        inner.add(stored.clone());
        inner.advance();
        Ok(stored)
    }

    /// Removes the profile `agent_id` (at `expected` revision, if given) and its secrets.
    pub fn remove(&self, agent_id: &str, expected: Option<u64>) -> Result<Profile, ProfileError> {
        let mut inner = self.lock();
        let current = inner
            .profiles
            .get(agent_id)
            .ok_or_else(|| ProfileError::NotFound(agent_id.to_string()))?;
        if let Some(expected) = expected
            && expected != current.profile.revision
        {
            return Err(ProfileError::RevisionMismatch {
                current: current.profile.revision,
            });
        }
        delete_profile_dir(&self.dir.join(agent_id))?;
        let removed = inner.remove(agent_id).expect("checked above");
        inner.advance();
        Ok(removed.profile)
    }

    /// Orphan cleanup against the server: removes every profile whose agent is not in `known`.
    /// Returns how many were removed (the revision advances when any was).
    pub fn retain_known(&self, known: &HashSet<String>) -> Result<usize, ProfileError> {
        let mut inner = self.lock();
        let orphans: Vec<String> = inner
            .profiles
            .keys()
            .filter(|id| !known.contains(*id))
            .cloned()
            .collect();
        for id in &orphans {
            delete_profile_dir(&self.dir.join(id))?;
            inner.remove(id);
        }
        if !orphans.is_empty() {
            inner.advance();
        }
        Ok(orphans.len())
    }

    /// Refreshes the read-only public profile (display name, description) the server reports.
    pub fn refresh_public(
        &self,
        agent_id: &str,
        display_name: &str,
        description: Option<&str>,
    ) -> Result<(), ProfileError> {
        let mut inner = self.lock();
        let Some(stored) = inner.profiles.get_mut(agent_id) else {
            return Ok(());
        };
        if stored.profile.display_name == display_name
            && stored.profile.description.as_deref() == description
        {
            return Ok(());
        }
        let mut profile = stored.profile.clone();
        profile.display_name = display_name.to_string();
        profile.description = description.map(str::to_string);
        write_json(&self.dir.join(agent_id).join(PROFILE_FILE), &profile)?;
        stored.profile = profile;
        inner.advance();
        Ok(())
    }

    /// The secrets of `agent_id`, read from disk.
    pub fn secrets(&self, agent_id: &str) -> Result<Secrets, ProfileError> {
        read_secrets(&self.dir.join(agent_id))
    }
}

impl Inner {
    fn new(profiles: Vec<Stored>) -> Inner {
        let mut inner = Inner {
            profiles: BTreeMap::new(),
            handles: HashMap::new(),
            revision: Revision {
                epoch: rand::rng().random(),
                counter: 1,
            },
        };
        for stored in profiles {
            inner.add(stored);
        }
        inner
    }

    fn add(&mut self, stored: Stored) {
        self.handles.insert(
            stored.profile.handle.clone(),
            stored.profile.agent_id.clone(),
        );
        self.profiles
            .insert(stored.profile.agent_id.clone(), stored);
    }

    fn remove(&mut self, agent_id: &str) -> Option<Stored> {
        let stored = self.profiles.remove(agent_id)?;
        self.handles.remove(&stored.profile.handle);
        Some(stored)
    }

    fn advance(&mut self) {
        self.revision.counter += 1;
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).expect("profiles serialize");
    text.push('\n');
    crate::private_file::replace(path, &text)
}

fn read_secrets(dir: &Path) -> Result<Secrets, ProfileError> {
    let bytes = std::fs::read(dir.join(SECRETS_FILE))?;
    serde_json::from_slice(&bytes).map_err(|e| ProfileError::Io(io::Error::other(e)))
}

/// Removes a profile's directory, its profile first (so a half-removed directory never looks
/// like a complete profile).
fn delete_profile_dir(dir: &Path) -> io::Result<()> {
    match std::fs::remove_file(dir.join(PROFILE_FILE)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    remove_dir(dir)
}

/// Every complete profile under `dir`; incomplete directories and profiles without a secret file
/// are removed (orphans), unreadable ones are left on disk and reported in the log.
fn load_dir(dir: &Path) -> Result<(Vec<Stored>, LoadReport), ProfileError> {
    let mut report = LoadReport::default();
    let mut profiles = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let is_profile_dir = path.is_dir()
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("agt_"));
        if !is_profile_dir {
            continue;
        }
        if !path.join(PROFILE_FILE).exists() || !path.join(SECRETS_FILE).exists() {
            delete_profile_dir(&path)?;
            report.removed += 1;
            continue;
        }
        let profile: Profile = match std::fs::read(path.join(PROFILE_FILE))
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        {
            Ok(profile) => profile,
            Err(error) => {
                tracing::warn!(dir = %path.display(), %error, "an agent profile cannot be read; it is left out");
                continue;
            }
        };
        let secrets = match read_secrets(&path) {
            Ok(secrets) => secrets,
            Err(error) => {
                tracing::warn!(dir = %path.display(), %error, "an agent's secret file cannot be read; the profile is left out");
                continue;
            }
        };
        if profiles.len() == MAX_PROFILES {
            return Err(ProfileError::TooMany);
        }
        profiles.push(Stored {
            profile,
            secrets: secrets.summary(),
        });
    }
    report.loaded = profiles.len();
    Ok((profiles, report))
}

/// The `agents.json` of earlier daemons: `[{"agentId", "handle", "displayName"}]`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LegacyProfile {
    agent_id: String,
    handle: String,
    display_name: String,
}

/// Moves a legacy `agents.json` into the store (once), then removes it.
fn migrate_legacy(legacy: &Path, dir: &Path, now: i64) -> Result<(), ProfileError> {
    let bytes = match std::fs::read(legacy) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let list: Vec<LegacyProfile> =
        serde_json::from_slice(&bytes).map_err(|e| ProfileError::Io(io::Error::other(e)))?;
    for old in list {
        let profile_dir = dir.join(&old.agent_id);
        if profile_dir.join(PROFILE_FILE).exists() || !old.agent_id.starts_with("agt_") {
            continue;
        }
        ensure_private_dir(&profile_dir)?;
        write_json(&profile_dir.join(SECRETS_FILE), &Secrets::default())?;
        write_json(
            &profile_dir.join(PROFILE_FILE),
            &Profile {
                agent_id: old.agent_id,
                handle: old.handle,
                runtime_family: "generic".into(),
                provider: None,
                model: None,
                base_url: None,
                knowledge_source_ids: Vec::new(),
                allowed_paths: Vec::new(),
                display_name: old.display_name,
                description: None,
                revision: 1,
                created_at_ms: now,
                updated_at_ms: now,
            },
        )?;
    }
    std::fs::remove_file(legacy)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(id: &str, handle: &str) -> Profile {
        Profile {
            agent_id: id.into(),
            handle: handle.into(),
            runtime_family: "generic".into(),
            provider: None,
            model: None,
            base_url: None,
            knowledge_source_ids: Vec::new(),
            allowed_paths: Vec::new(),
            display_name: handle.into(),
            description: None,
            revision: 1,
            created_at_ms: 1,
            updated_at_ms: 1,
        }
    }

    #[test]
    fn changes_are_owner_only_atomic_and_advance_the_revision() {
        let state = tempfile::tempdir().unwrap();
        let (store, report) =
            ProfileStore::open(state.path(), &crate::clock::Clock::default()).unwrap();
        assert_eq!(report, LoadReport::default());
        let start = store.revision();
        let secrets = Secrets {
            api_key: Some("sk-x".into()),
            ..Secrets::default()
        };
        store
            .insert(profile("agt_00000001", "one"), secrets)
            .unwrap();
        assert!(store.revision().counter > start.counter);
        let dir = state.path().join("agents/agt_00000001");
        for file in [PROFILE_FILE, SECRETS_FILE] {
            let metadata = std::fs::metadata(dir.join(file)).unwrap();
            assert_eq!(crate::platform::fs::mode(&metadata), 0o600, "{file}");
        }
        assert!(
            !std::fs::read_to_string(dir.join(PROFILE_FILE))
                .unwrap()
                .contains("sk-x"),
            "the profile file holds no secret"
        );
        assert!(matches!(
            store.insert(profile("agt_00000002", "one"), Secrets::default()),
            Err(ProfileError::HandleTaken(_))
        ));
        let before = store.revision();
        let updated = store
            .update(
                "agt_00000001",
                Some(1),
                5,
                false,
                |p: &mut Profile, _| -> Result<(), ProfileError> {
                    p.model = Some("m".into());
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(updated.profile.revision, 2);
        assert!(store.revision().counter > before.counter);
        assert!(matches!(
            store.remove("agt_00000001", Some(1)),
            Err(ProfileError::RevisionMismatch { current: 2 })
        ));
        store.remove("agt_00000001", Some(2)).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn a_reload_starts_a_new_epoch_and_drops_profiles_without_secrets() {
        let state = tempfile::tempdir().unwrap();
        let (store, _) = ProfileStore::open(state.path(), &crate::clock::Clock::default()).unwrap();
        store
            .insert(profile("agt_00000001", "one"), Secrets::default())
            .unwrap();
        store
            .insert(profile("agt_00000002", "two"), Secrets::default())
            .unwrap();
        let before = store.revision();
        std::fs::remove_file(state.path().join("agents/agt_00000002").join(SECRETS_FILE)).unwrap();
        let report = store.reload().unwrap();
        assert_eq!(
            report,
            LoadReport {
                loaded: 1,
                removed: 1
            }
        );
        assert_ne!(store.revision().epoch, before.epoch);
        assert!(store.get("agt_00000002").is_none());
        let removed = store
            .retain_known(&HashSet::from(["agt_00000009".to_string()]))
            .unwrap();
        assert_eq!(removed, 1, "the server no longer knows agt_00000001");
        assert!(store.is_empty());
    }

    #[test]
    fn a_legacy_profile_list_is_migrated_once() {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(
            state.path().join(LEGACY_FILE),
            r#"[{"agentId": "agt_00000001", "handle": "builder", "displayName": "Builder"}]"#,
        )
        .unwrap();
        let (store, report) =
            ProfileStore::open(state.path(), &crate::clock::Clock::default()).unwrap();
        assert_eq!(report.loaded, 1);
        assert_eq!(
            store.find("builder").unwrap().profile.agent_id,
            "agt_00000001"
        );
        assert!(!state.path().join(LEGACY_FILE).exists());
    }

    #[test]
    fn a_page_copies_at_most_one_more_than_it_returns() {
        let state = tempfile::tempdir().unwrap();
        let (store, _) = ProfileStore::open(state.path(), &crate::clock::Clock::default()).unwrap();
        for n in 0..50 {
            store
                .insert(
                    profile(&format!("agt_{n:08}"), &format!("a{n}")),
                    Secrets::default(),
                )
                .unwrap();
        }
        let (page, more, _) = store.page(&ListFilter::default(), Some("agt_00000010"), 5);
        assert!(more);
        assert_eq!(page.first().unwrap().profile.agent_id, "agt_00000011");
        assert_eq!(store.counters.copied.load(Ordering::Relaxed), 6);
    }
}
