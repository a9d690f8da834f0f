//! Owner-private credential files and the daemon's instance directory.
//!
//! Layout: `<runtime base>/<instance>/<authorization dir>/token`. Every directory is created
//! `0700` (and checked after creation: a directory, ours, no group/other bits), every token file
//! `0600`. A token is published by writing a temp file in the same directory, `fsync`, `rename`
//! over `token`, and `fsync` of the directory, so a reader sees the old or the new token, never a
//! mix. Each daemon instance holds an exclusive `flock` on `<instance>/lock`; the next daemon
//! removes every instance directory whose lock it can take (its owner is gone).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use rand::Rng;

pub use crate::platform::fs::check_private_dir;
use crate::platform::fs::{PrivateOpen, create_private_dirs};

/// The file name of the Exec token inside an authorization's directory.
pub const TOKEN_FILE: &str = "token";
/// The file name of the MCP token inside an authorization's directory.
pub const MCP_TOKEN_FILE: &str = "mcp-token";
/// The launch's catalog for `agentteam exec` (pinned extensions), beside the token file.
pub const CATALOG_FILE: &str = "catalog.json";
const LOCK_FILE: &str = "lock";
/// Serializes the instance sweeps of daemons sharing one credential base.
const SWEEP_LOCK_FILE: &str = ".sweep.lock";

/// `prefix` + 32 random hex characters.
pub fn random_name(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

/// Creates `parent/<random>` with mode 0700 and checks both: a parent whose mode was loosened
/// under the daemon gets no new directory.
pub fn create_private_dir(parent: &Path, prefix: &str) -> io::Result<PathBuf> {
    check_private_dir(parent)?;
    let path = parent.join(random_name(prefix));
    crate::platform::fs::create_private_dir(&path)?;
    check_private_dir(&path)?;
    Ok(path)
}

/// Creates `path` and its parents as needed, each new one 0700, then checks `path`.
pub fn ensure_private_dir(path: &Path) -> io::Result<()> {
    create_private_dirs(path)?;
    check_private_dir(path)
}

/// Atomically replaces `dir/name` with `contents` (see `crate::private_file::replace`).
pub fn publish(dir: &Path, name: &str, contents: &str) -> io::Result<()> {
    crate::private_file::replace(&dir.join(name), contents)
}

/// Removes an authorization's directory and everything in it.
pub fn remove_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// This daemon's instance directory, locked for the daemon's lifetime.
#[derive(Debug)]
pub struct Instance {
    pub dir: PathBuf,
    /// Holding the file holds the `flock`; the kernel drops it when the process dies.
    _lock: File,
}

impl Instance {
    /// Removes the instance directories under `base` whose owner is gone, then creates and locks
    /// a fresh one. Returns it and how many stale directories were removed.
    ///
    /// Daemons of other state dirs may share `base` and start at the same moment: the sweep, the
    /// creation and the locking of the new directory happen under one exclusive lock on
    /// `base/.sweep.lock`, so no daemon can sweep another's directory between its creation and
    /// its lock.
    pub fn start(base: &Path) -> io::Result<(Instance, usize)> {
        ensure_private_dir(base)?;
        let sweep = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .owner_only()
            .no_follow()
            .open(base.join(SWEEP_LOCK_FILE))?;
        sweep.lock()?;
        let started = Self::sweep_and_create(base);
        drop(sweep);
        started
    }

    fn sweep_and_create(base: &Path) -> io::Result<(Instance, usize)> {
        let mut removed = 0;
        for entry in fs::read_dir(base)? {
            let path = entry?.path();
            if !path.is_dir()
                || !path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("instance-"))
            {
                continue;
            }
            let lock = match File::open(path.join(LOCK_FILE)) {
                Ok(lock) => lock,
                // No lock file: the instance died before it locked; nothing can own it.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    remove_dir(&path)?;
                    removed += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if lock.try_lock().is_ok() {
                remove_dir(&path)?;
                removed += 1;
            }
        }
        let dir = create_private_dir(base, "instance-")?;
        let lock = OpenOptions::new()
            .write(true)
            .create_new(true)
            .owner_only()
            .open(dir.join(LOCK_FILE))?;
        lock.try_lock().map_err(|e| {
            io::Error::other(format!("cannot lock the new instance directory: {e}"))
        })?;
        Ok((Instance { dir, _lock: lock }, removed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform;

    /// A temporary directory with mode 0700, like the instance directory.
    fn private_tempdir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .permissions(platform::fs::permissions(0o700))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn private_dirs_and_files_are_owner_only_and_published_atomically() {
        let loose = tempfile::tempdir().unwrap();
        platform::fs::set_mode(loose.path(), 0o755).unwrap();
        assert!(
            create_private_dir(loose.path(), "authz-").is_err(),
            "a directory was created under a loosened parent"
        );
        let base = private_tempdir();
        let dir = create_private_dir(base.path(), "authz-").unwrap();
        assert_eq!(platform::fs::mode(&fs::metadata(&dir).unwrap()), 0o700);
        publish(&dir, TOKEN_FILE, "first").unwrap();
        publish(&dir, TOKEN_FILE, "second").unwrap();
        assert_eq!(fs::read_to_string(dir.join(TOKEN_FILE)).unwrap(), "second");
        assert_eq!(
            platform::fs::mode(&fs::metadata(dir.join(TOKEN_FILE)).unwrap()),
            0o600
        );
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temp files are left behind"
        );
    }

    /// A reader re-reading the file during 500 rotations sees only whole tokens, never a missing,
    /// short or mixed file.
    #[test]
    fn readers_never_see_a_partial_token_during_500_rotations() {
        let base = private_tempdir();
        let dir = create_private_dir(base.path(), "authz-").unwrap();
        let token = |n: usize| format!("v1.{}.{n:06}", "x".repeat(120));
        publish(&dir, TOKEN_FILE, &token(0)).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let text =
                        fs::read_to_string(dir.join(TOKEN_FILE)).expect("the file always exists");
                    assert_eq!(text.len(), 130, "partial read: {text:?}");
                    assert!(
                        text.starts_with("v1.") && text[124..].chars().all(|c| c.is_ascii_digit()),
                        "mixed read: {text:?}"
                    );
                    reads += 1;
                }
                reads
            })
        };
        for n in 1..=500 {
            publish(&dir, TOKEN_FILE, &token(n)).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
        assert_eq!(
            fs::read_to_string(dir.join(TOKEN_FILE)).unwrap(),
            token(500)
        );
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temp files are left behind"
        );
    }

    /// Daemons starting at once never sweep each other's fresh directories.
    #[test]
    fn daemons_starting_at_once_keep_every_fresh_instance() {
        let temp = tempfile::tempdir().unwrap();
        let base = temp.path().join("run");
        for _ in 0..20 {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let starts: Vec<_> = (0..8)
                .map(|_| {
                    let (base, barrier) = (base.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        Instance::start(&base).unwrap().0
                    })
                })
                .collect();
            let live: Vec<Instance> = starts.into_iter().map(|t| t.join().unwrap()).collect();
            for instance in &live {
                assert!(
                    instance.dir.join(LOCK_FILE).exists(),
                    "a live instance was swept"
                );
            }
        }
    }

    #[test]
    fn a_new_instance_removes_unlocked_instances_but_not_live_ones() {
        let temp = tempfile::tempdir().unwrap();
        let base = temp.path().join("run");
        let (live, removed) = Instance::start(&base).unwrap();
        assert_eq!(removed, 0);
        let dead = create_private_dir(&base, "instance-").unwrap();
        File::create(dead.join(LOCK_FILE)).unwrap();
        let (_second, removed) = Instance::start(&base).unwrap();
        assert_eq!(removed, 1);
        assert!(!dead.exists());
        assert!(live.dir.exists(), "a locked instance is left alone");
    }
}
