//! The managed memory of local agents and the owner of `memory_search`.
//!
//! Each agent has a memory directory, `<state dir>/memory/<agent id>/` (owner-only), that its
//! runtimes edit freely and find in `AGENTTEAM_MEMORY_DIR`. Its Markdown files (`*.md`,
//! `*.markdown`; hidden names and symlinks are skipped) are indexed in memory ([`index`]): built at
//! start, from the snapshot ([`snapshot`]) plus a stat scan that re-reads only changed files, and
//! then kept current by one recursive file watcher over `<state dir>/memory/`, whose events mark
//! paths dirty. A call drains its agent's dirty set first, so a file written a moment ago is in
//! the answer; a full scan runs only at start, after a watcher overflow or error, and on every
//! call when no watcher could be set up (then each call pays a stat scan).
//!
//! The snapshot (`<state dir>/memory-index/<agent id>.idx`) is written after a build and then at
//! most every [`PERSIST_EVERY`] while the index changes, and at shutdown. A call checks that the
//! snapshot is still the file this daemon wrote; one removed or rewritten behind its back means
//! the persisted index can no longer be trusted: that call gets a classified result, the index is
//! rebuilt from the files, and the next call waits for it (at most [`BUILD_WAIT`]).
//!
//! Every failure is a classified `upstream_unavailable` result naming the fallback (read the
//! files directly), never a crash, and a hit is only a locator: path, heading, line range and
//! score, never a line of a file.

pub mod index;
pub mod snapshot;

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

use self::index::{Hit, Index, Stamp};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::daemon::auth::files::ensure_private_dir;
use crate::platform;
use crate::platform::fs::PrivateOpen;

/// The memory directories' root, under the state directory.
pub const MEMORY_DIR: &str = "memory";
/// The snapshots' directory, under the state directory (outside what the runtimes edit).
pub const INDEX_DIR: &str = "memory-index";
/// At most this many files of one memory directory are indexed; the rest are skipped (counted).
pub const MAX_FILES: usize = 50_000;
/// A larger file is skipped (counted).
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The longest indexed relative path (the tool's output schema says so).
pub const MAX_PATH_BYTES: usize = 512;
/// Directories deeper than this are not walked.
pub const MAX_DEPTH: usize = 16;
/// At most this many dirty paths wait per agent; more turn into one full scan.
pub const MAX_DIRTY: usize = 4096;
/// How long a call waits for an index being built before it answers the classified result.
pub const BUILD_WAIT: Duration = Duration::from_secs(2);
/// How often a changing index is written to its snapshot, at most.
pub const PERSIST_EVERY: Duration = Duration::from_secs(30);
/// How often dirty sets are drained and snapshots written without a call.
pub const MAINTAIN_EVERY: Duration = Duration::from_secs(5);

/// The fallback every classified result names.
const READ_DIRECTLY: &str = "read the Markdown files in `$AGENTTEAM_MEMORY_DIR` directly (for example with grep) for now; `memory_search` works again once the index is ready";

/// Every agent's memory, and the watcher over all of them.
pub struct Memory {
    shared: Arc<Shared>,
    /// `None` when no watcher could be set up: every call then scans.
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

struct Shared {
    root: PathBuf,
    index_dir: PathBuf,
    agents: Mutex<HashMap<String, Arc<AgentMemory>>>,
    /// One index build at a time.
    builds: Arc<Semaphore>,
    watching: AtomicBool,
}

/// Whether an agent's index can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Building,
    Ready,
}

/// What changed since the index last looked.
#[derive(Debug, Default)]
struct Pending {
    dirty: HashSet<PathBuf>,
    rescan: bool,
}

/// The snapshot this daemon last wrote: the file it expects to find.
#[derive(Debug, Default)]
struct Persisted {
    stamp: Option<Stamp>,
    generation: u64,
    at: Option<Instant>,
}

/// One agent's memory directory and its index.
struct AgentMemory {
    dir: PathBuf,
    snapshot: PathBuf,
    index: RwLock<Index>,
    pending: Mutex<Pending>,
    phase: watch::Sender<Phase>,
    persisted: Mutex<Persisted>,
    /// Bumps on every change of the index.
    generation: AtomicU64,
    /// Files left out by the last scan (over [`MAX_FILES`] or [`MAX_FILE_BYTES`], or a path over
    /// [`MAX_PATH_BYTES`]).
    skipped: AtomicU64,
}

/// A memory directory name: an agent id.
fn is_agent_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A classified refusal: the owner cannot answer now.
fn unavailable(message: &str) -> ActionError {
    ActionError::new(ErrorCode::UpstreamUnavailable, message).with_next(READ_DIRECTLY)
}

impl Memory {
    /// Prepares `<state dir>/memory` and `<state dir>/memory-index` and starts the watcher (a
    /// failure to watch is logged and leaves per-call scans).
    pub fn open(state_dir: &Path) -> io::Result<Memory> {
        let root = state_dir.join(MEMORY_DIR);
        let index_dir = state_dir.join(INDEX_DIR);
        ensure_private_dir(&root)?;
        ensure_private_dir(&index_dir)?;
        let root = root.canonicalize()?;
        let shared = Arc::new(Shared {
            root,
            index_dir,
            agents: Mutex::new(HashMap::new()),
            builds: Arc::new(Semaphore::new(1)),
            watching: AtomicBool::new(false),
        });
        let watcher = start_watcher(&shared);
        shared.watching.store(watcher.is_some(), Ordering::Relaxed);
        Ok(Memory {
            shared,
            watcher: Mutex::new(watcher),
        })
    }

    /// The memory directory of `agent_id`, created (owner-only) if missing; its index starts
    /// building the first time. The directory is what a launch puts in `AGENTTEAM_MEMORY_DIR`.
    pub fn directory(&self, agent_id: &str) -> io::Result<PathBuf> {
        let agent = self.agent(agent_id)?;
        prepare_agent_dir(&agent.dir)?;
        Ok(agent.dir.clone())
    }

    fn agent(&self, agent_id: &str) -> io::Result<Arc<AgentMemory>> {
        if !is_agent_id(agent_id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an agent id",
            ));
        }
        let mut agents = self.shared.agents.lock().expect("not poisoned");
        if let Some(agent) = agents.get(agent_id) {
            return Ok(agent.clone());
        }
        let dir = self.shared.root.join(agent_id);
        prepare_agent_dir(&dir)?;
        let agent = Arc::new(AgentMemory {
            dir,
            snapshot: self.shared.index_dir.join(format!("{agent_id}.idx")),
            index: RwLock::new(Index::default()),
            pending: Mutex::new(Pending::default()),
            phase: watch::Sender::new(Phase::Building),
            persisted: Mutex::new(Persisted::default()),
            generation: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        });
        agents.insert(agent_id.to_string(), agent.clone());
        drop(agents);
        spawn_build(&self.shared, agent.clone(), true);
        Ok(agent)
    }

    /// `memory_search` for `agent_id`: the `limit` best sections for `query`, as locators.
    pub async fn search(
        &self,
        agent_id: &str,
        query: &str,
        limit: usize,
    ) -> Result<Value, ActionError> {
        let agent = self
            .agent_if_present(agent_id)
            .ok_or_else(|| unavailable("this agent has no memory directory yet"))?;
        if !agent.dir.is_dir() {
            return Err(ActionError::new(
                ErrorCode::UpstreamUnavailable,
                "your memory directory does not exist",
            )
            .with_next("create it with `mkdir -p \"$AGENTTEAM_MEMORY_DIR\"`: files written there are searchable at once"));
        }
        let mut phase = agent.phase.subscribe();
        if tokio::time::timeout(BUILD_WAIT, phase.wait_for(|phase| *phase == Phase::Ready))
            .await
            .is_err()
        {
            return Err(unavailable("the memory index is still being built"));
        }
        if agent.snapshot_damaged() {
            tracing::warn!(snapshot = %agent.snapshot.display(), "the memory index snapshot was removed or changed by someone else; rebuilding from the files");
            if agent.phase.send_replace(Phase::Building) == Phase::Ready {
                spawn_build(&self.shared, agent.clone(), false);
            }
            return Err(unavailable(
                "the memory index was removed or damaged and is being rebuilt from the files",
            ));
        }
        let terms = crate::search::Query::parse(query).index_terms();
        let watching = self.shared.watching.load(Ordering::Relaxed);
        let hits = tokio::task::spawn_blocking(move || {
            if !watching {
                agent.pending.lock().expect("not poisoned").rescan = true;
            }
            agent.apply_pending();
            agent
                .index
                .read()
                .expect("not poisoned")
                .search(&terms, limit)
        })
        .await
        .map_err(|_| unavailable("the memory search failed"))?;
        Ok(json!({ "matches": hits.iter().map(locator).collect::<Vec<_>>() }))
    }

    fn agent_if_present(&self, agent_id: &str) -> Option<Arc<AgentMemory>> {
        let present = self
            .shared
            .agents
            .lock()
            .expect("not poisoned")
            .get(agent_id)
            .cloned();
        present.or_else(|| {
            let dir = self.shared.root.join(agent_id);
            (is_agent_id(agent_id) && dir.is_dir())
                .then(|| self.agent(agent_id).ok())
                .flatten()
        })
    }

    /// Drains dirty sets and writes due snapshots, every [`MAINTAIN_EVERY`], until `stop`; then
    /// writes every changed snapshot once more.
    pub async fn maintain(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut ticker = tokio::time::interval(MAINTAIN_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stopping = tokio::select! {
                _ = ticker.tick() => false,
                () = stop.cancelled() => true,
            };
            let agents: Vec<Arc<AgentMemory>> = self
                .shared
                .agents
                .lock()
                .expect("not poisoned")
                .values()
                .cloned()
                .collect();
            let watching = self.shared.watching.load(Ordering::Relaxed);
            let _ = tokio::task::spawn_blocking(move || {
                for agent in agents {
                    if *agent.phase.borrow() != Phase::Ready {
                        continue;
                    }
                    if watching || stopping {
                        agent.apply_pending();
                    }
                    agent.persist(stopping);
                }
            })
            .await;
            if stopping {
                break;
            }
        }
        // The watcher's thread ends with it.
        self.watcher.lock().expect("not poisoned").take();
    }

    /// What `agentteam status` shows.
    pub fn report(&self) -> Value {
        let agents = self.shared.agents.lock().expect("not poisoned");
        let (mut files, mut sections, mut skipped, mut building) = (0, 0, 0, 0);
        for agent in agents.values() {
            let index = agent.index.read().expect("not poisoned");
            files += index.files();
            sections += index.sections();
            skipped += agent.skipped.load(Ordering::Relaxed);
            building += usize::from(*agent.phase.borrow() == Phase::Building);
        }
        json!({
            "watching": self.shared.watching.load(Ordering::Relaxed),
            "agents": agents.len(),
            "building": building,
            "files": files,
            "sections": sections,
            "skippedFiles": skipped,
        })
    }
}

fn locator(hit: &Hit) -> Value {
    json!({
        "path": hit.path,
        "heading": hit.heading,
        "lineStart": hit.line_start,
        "lineEnd": hit.line_end,
        // Four decimals: enough to order by, without float noise in the text.
        "score": (f64::from(hit.score) * 10_000.0).round() / 10_000.0,
    })
}

/// Builds `agent`'s index on the blocking pool, one build at a time, then marks it ready.
fn spawn_build(shared: &Arc<Shared>, agent: Arc<AgentMemory>, from_snapshot: bool) {
    let builds = shared.builds.clone();
    tokio::spawn(async move {
        let _permit = builds.acquire_owned().await;
        let started = Instant::now();
        let built = agent.clone();
        let _ = tokio::task::spawn_blocking(move || built.build(from_snapshot)).await;
        let index = agent.index.read().expect("not poisoned");
        tracing::info!(
            dir = %agent.dir.display(),
            files = index.files(),
            sections = index.sections(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "memory index ready"
        );
        drop(index);
        agent.phase.send_replace(Phase::Ready);
    });
}

/// Watches the whole memory root; each event marks its path dirty in its agent's set.
fn start_watcher(shared: &Arc<Shared>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let events = Arc::downgrade(shared);
    let handler = move |event: notify::Result<notify::Event>| {
        let Some(shared) = events.upgrade() else {
            return;
        };
        match event {
            Ok(event) if event.need_rescan() => shared.rescan_all(),
            Ok(event) => {
                use notify::EventKind;
                use notify::event::{AccessKind, AccessMode};
                let relevant = match event.kind {
                    EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
                    EventKind::Access(_) => false,
                    _ => true,
                };
                if relevant {
                    for path in &event.paths {
                        shared.mark(path);
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the memory watcher reported an error; rescanning");
                shared.rescan_all();
            }
        }
    };
    let watcher = notify::recommended_watcher(handler).and_then(|mut watcher| {
        watcher.watch(&shared.root, notify::RecursiveMode::Recursive)?;
        Ok(watcher)
    });
    match watcher {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            tracing::warn!(%error, "cannot watch the memory directories; every memory_search scans them instead");
            None
        }
    }
}

impl Shared {
    fn rescan_all(&self) {
        for agent in self.agents.lock().expect("not poisoned").values() {
            agent.pending.lock().expect("not poisoned").rescan = true;
        }
    }

    /// Routes an absolute event path to its agent's dirty set.
    fn mark(&self, path: &Path) {
        let Ok(relative) = path.strip_prefix(&self.root) else {
            return;
        };
        let mut components = relative.components();
        let Some(Component::Normal(agent_id)) = components.next() else {
            return;
        };
        let Some(agent) = agent_id
            .to_str()
            .and_then(|id| self.agents.lock().expect("not poisoned").get(id).cloned())
        else {
            return;
        };
        let inside = components.as_path().to_path_buf();
        let mut pending = agent.pending.lock().expect("not poisoned");
        if inside.as_os_str().is_empty() {
            // The agent's directory itself was created, moved or removed.
            pending.rescan = true;
        } else if pending.dirty.len() >= MAX_DIRTY {
            pending.rescan = true;
            pending.dirty.clear();
        } else if !pending.rescan {
            pending.dirty.insert(inside);
        }
    }
}

impl AgentMemory {
    /// Builds the index: the snapshot when asked and valid, then a full scan that re-reads only
    /// what changed; writes the snapshot.
    fn build(&self, from_snapshot: bool) {
        let mut index = Index::default();
        if from_snapshot {
            match std::fs::read(&self.snapshot) {
                Ok(bytes) => match snapshot::decode(&bytes) {
                    Ok(loaded) => index = loaded,
                    Err(error) => {
                        tracing::warn!(snapshot = %self.snapshot.display(), %error, "ignoring the memory index snapshot; rebuilding from the files")
                    }
                },
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => {
                    tracing::warn!(snapshot = %self.snapshot.display(), %error, "cannot read the memory index snapshot; rebuilding from the files")
                }
            }
        }
        // Events from here on are applied after the scan (re-applying one is harmless).
        *self.pending.lock().expect("not poisoned") = Pending::default();
        let skipped = scan(&self.dir, Path::new(""), &mut index, true);
        self.skipped.store(skipped, Ordering::Relaxed);
        *self.index.write().expect("not poisoned") = index;
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.persist(true);
    }

    /// Applies the dirty paths (or a full scan) to the index.
    fn apply_pending(&self) {
        let pending = std::mem::take(&mut *self.pending.lock().expect("not poisoned"));
        if !pending.rescan && pending.dirty.is_empty() {
            return;
        }
        let mut index = self.index.write().expect("not poisoned");
        if pending.rescan {
            let skipped = scan(&self.dir, Path::new(""), &mut index, true);
            self.skipped.store(skipped, Ordering::Relaxed);
        } else {
            for path in pending.dirty {
                refresh(&self.dir, &path, &mut index);
            }
        }
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the snapshot this daemon wrote was removed or replaced.
    fn snapshot_damaged(&self) -> bool {
        let persisted = self.persisted.lock().expect("not poisoned");
        let Some(expected) = persisted.stamp else {
            return false;
        };
        std::fs::symlink_metadata(&self.snapshot)
            .map(|m| Stamp::of(&m))
            .ok()
            != Some(expected)
    }

    /// Writes the snapshot if the index changed since the last write, and either `now` or the
    /// last write is [`PERSIST_EVERY`] old.
    fn persist(&self, now: bool) {
        let mut persisted = self.persisted.lock().expect("not poisoned");
        let generation = self.generation.load(Ordering::Relaxed);
        let due = now || persisted.at.is_none_or(|at| at.elapsed() >= PERSIST_EVERY);
        if (persisted.generation == generation && persisted.stamp.is_some()) || !due {
            return;
        }
        let bytes = snapshot::encode(&self.index.read().expect("not poisoned"));
        match crate::private_file::replace_bytes(&self.snapshot, &bytes)
            .and_then(|()| std::fs::symlink_metadata(&self.snapshot))
        {
            Ok(metadata) => {
                *persisted = Persisted {
                    stamp: Some(Stamp::of(&metadata)),
                    generation,
                    at: Some(Instant::now()),
                };
            }
            Err(error) => {
                tracing::warn!(snapshot = %self.snapshot.display(), %error, "cannot write the memory index snapshot; the next start rebuilds from the files");
                persisted.stamp = None;
                persisted.at = Some(Instant::now());
            }
        }
    }
}

/// Creates an agent's memory directory (0700) or takes the existing one back to 0700: a runtime
/// that removed and recreated it (`mkdir -p` under its umask) does not lock itself out. A
/// symlink or another user's directory is refused.
fn prepare_agent_dir(dir: &Path) -> io::Result<()> {
    platform::fs::create_private_dirs(dir)?;
    if platform::fs::tighten_private_dir(dir)? {
        tracing::info!(dir = %dir.display(), "made the memory directory owner-only again");
    }
    Ok(())
}

fn is_markdown(name: &str) -> bool {
    name.ends_with(".md") || name.ends_with(".markdown")
}

fn is_hidden(path: &Path) -> bool {
    path.components().any(
        |c| matches!(c, Component::Normal(name) if name.as_encoded_bytes().first() == Some(&b'.')),
    )
}

/// Re-indexes one dirty path (relative to `dir`): a file is read again if it changed, a directory
/// is scanned, and a path that is gone takes its file and everything under it out of the index.
fn refresh(dir: &Path, relative: &Path, index: &mut Index) {
    if is_hidden(relative) {
        return;
    }
    let Some(key) = relative.to_str() else {
        return;
    };
    match std::fs::symlink_metadata(dir.join(relative)) {
        Ok(metadata) if metadata.is_dir() => {
            scan(dir, relative, index, false);
        }
        Ok(metadata) if metadata.is_file() && is_markdown(key) => {
            index_file(dir, key, &metadata, index);
        }
        // A symlink, a non-Markdown file, or gone: whatever was indexed there goes.
        _ => {
            index.remove(key);
            let prefix = format!("{key}/");
            let under: Vec<String> = index
                .paths()
                .filter(|path| path.starts_with(&prefix))
                .map(|path| path.to_string())
                .collect();
            for path in under {
                index.remove(&path);
            }
        }
    }
}

/// Indexes `key` (a Markdown file relative to `dir`) if its stamp changed. Returns false when
/// the file is skipped (too large, path too long, or the index is full).
fn index_file(dir: &Path, key: &str, metadata: &std::fs::Metadata, index: &mut Index) -> bool {
    let stamp = Stamp::of(metadata);
    if index.stamp(key) == Some(stamp) {
        return true;
    }
    let fits = key.len() <= MAX_PATH_BYTES
        && stamp.len <= MAX_FILE_BYTES
        && (index.stamp(key).is_some() || index.files() < MAX_FILES);
    if !fits {
        index.remove(key);
        return false;
    }
    match read_text(&dir.join(key)) {
        Ok(text) => {
            index.put(key, stamp, index::parse(&text));
            true
        }
        Err(_) => {
            // Gone or unreadable since the stat: not indexed; a later event brings it back.
            index.remove(key);
            true
        }
    }
}

/// Reads a file without following a symlink, at most [`MAX_FILE_BYTES`].
fn read_text(path: &Path) -> io::Result<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .no_follow()
        .open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Scans `dir/under` (the whole directory when `under` is empty): indexes every changed Markdown
/// file and removes indexed files under it that are gone. Returns how many files were skipped.
fn scan(dir: &Path, under: &Path, index: &mut Index, whole: bool) -> u64 {
    let mut seen: HashSet<String> = HashSet::new();
    let mut skipped = 0;
    let mut stack = vec![(under.to_path_buf(), 0usize)];
    while let Some((relative, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&relative)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            let child = relative.join(name);
            if metadata.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((child, depth + 1));
                }
            } else if metadata.is_file() && is_markdown(name) {
                let Some(key) = child.to_str() else { continue };
                if index_file(dir, key, &metadata, index) {
                    seen.insert(key.to_string());
                } else {
                    skipped += 1;
                }
            }
        }
    }
    let prefix = under
        .to_str()
        .filter(|p| !p.is_empty())
        .map(|p| format!("{p}/"));
    let gone: Vec<String> = index
        .paths()
        .filter(|path| {
            whole
                || prefix
                    .as_ref()
                    .is_some_and(|p| path.starts_with(p.as_str()))
        })
        .filter(|path| !seen.contains(&***path))
        .map(|path| path.to_string())
        .collect();
    for path in gone {
        index.remove(&path);
    }
    skipped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, path: &str, text: &str) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn found(index: &Index, query: &str) -> Vec<String> {
        index
            .search(&crate::search::Query::parse(query).index_terms(), 10)
            .into_iter()
            .map(|hit| hit.path)
            .collect()
    }

    #[test]
    fn a_scan_indexes_markdown_only_skips_hidden_and_symlinks_and_forgets_removed_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "deploy.md", "# Deploy\nblue green rollout\n");
        write(root, "notes/db.markdown", "# Database\nvacuum rollout\n");
        write(root, "notes/skip.txt", "rollout");
        write(root, ".git/x.md", "rollout");
        platform::fs::symlink(&root.join("deploy.md"), &root.join("link.md")).unwrap();
        let mut index = Index::default();
        assert_eq!(scan(root, Path::new(""), &mut index, true), 0);
        let mut paths = found(&index, "rollout");
        paths.sort();
        assert_eq!(paths, ["deploy.md", "notes/db.markdown"]);

        std::fs::remove_dir_all(root.join("notes")).unwrap();
        refresh(root, Path::new("notes"), &mut index);
        assert_eq!(found(&index, "rollout"), ["deploy.md"]);
    }

    #[test]
    fn the_bounds_skip_and_count_large_files_and_long_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "big.md",
            &"word ".repeat((MAX_FILE_BYTES as usize) / 5 + 1),
        );
        write(
            root,
            "edge.md",
            &"word ".repeat((MAX_FILE_BYTES as usize) / 5),
        );
        let long = format!(
            "{}/{}/{}.md",
            "a".repeat(200),
            "b".repeat(200),
            "c".repeat(200)
        );
        assert!(long.len() > MAX_PATH_BYTES && long.len() < 4096);
        write(root, &long, "word\n");
        let mut index = Index::default();
        assert_eq!(scan(root, Path::new(""), &mut index, true), 2);
        assert_eq!(found(&index, "word"), ["edge.md"]);
    }
}
