//! Owner-only files, written one way: every token, credential and state file of the daemon and
//! the server goes through here.
//!
//! `replace` writes a `0600` temp file beside the target (never following a symlink), `fsync`s
//! it, renames it over the target and `fsync`s the directory, so a reader sees the old contents
//! or the new, never a mix, and a crash keeps one of them. `create_new` is for a secret that must
//! not overwrite anything; `create_or_read` for one that several processes share: the first
//! creates it whole, the others read it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use rand::Rng;

use crate::platform;
use crate::platform::fs::PrivateOpen;

/// Atomically replaces `path` with `contents` (mode 0600).
pub fn replace(path: &Path, contents: &str) -> io::Result<()> {
    replace_bytes(path, contents.as_bytes())
}

/// [`replace`] for binary contents.
pub fn replace_bytes(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut suffix = [0u8; 8];
    rand::rng().fill(&mut suffix);
    let tmp = dir.join(format!(".tmp-{}", hex::encode(suffix)));
    let result = (|| {
        let mut file = open_new(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates `path`, which must not exist, with mode 0600 and `contents`.
pub fn create_new(path: &Path, contents: &str) -> io::Result<()> {
    let mut file = open_new(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// Creates `path` with `contents` (mode 0600) unless it exists, and returns what it holds then:
/// `(contents, true)` when this call created it, `(existing, false)` otherwise.
///
/// The file is written and synced under a temp name and then hard-linked into place (a link never
/// replaces an existing name), so a process that starts at the same moment reads either nothing
/// (and links its own, losing to the first) or the whole file, never a half-written one.
pub fn create_or_read(path: &Path, contents: &str) -> io::Result<(String, bool)> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut suffix = [0u8; 8];
    rand::rng().fill(&mut suffix);
    let tmp = dir.join(format!(".tmp-{}", hex::encode(suffix)));
    let linked = (|| {
        let mut file = open_new(&tmp)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        match fs::hard_link(&tmp, path) {
            Ok(()) => File::open(dir)?.sync_all().map(|()| true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    })();
    let _ = fs::remove_file(&tmp);
    if linked? {
        return Ok((contents.to_string(), true));
    }
    read_private(path).map(|existing| (existing, false))
}

/// Reads a file that must be this user's own regular file, owner-only (no group or other
/// permission bits), and not a symlink; at most 4 KiB of it (a secret file is small).
pub fn read_private(path: &Path) -> io::Result<String> {
    read_private_limited(path, 4096)
}

/// [`read_private`] of at most `limit` bytes. The file is opened without following a link and
/// without blocking (a FIFO at the path is refused as not a regular file, not waited on).
pub fn read_private_limited(path: &Path, limit: u64) -> io::Result<String> {
    use std::io::Read;
    let mut file = OpenOptions::new()
        .read(true)
        .no_follow_nonblocking()
        .open(path)?;
    let metadata = file.metadata()?;
    let refused = |why: String| Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    if !metadata.is_file() {
        return refused("it is not a regular file".into());
    }
    let (owner, euid) = (platform::fs::owner(&metadata), platform::process::euid());
    if owner != euid {
        return refused(format!(
            "it belongs to user {owner}, not to this user ({euid})"
        ));
    }
    let mode = platform::fs::mode(&metadata);
    if mode & 0o077 != 0 {
        return refused(format!(
            "mode {mode:o} lets others read it; it must be 0600"
        ));
    }
    let mut text = String::new();
    (&mut file).take(limit).read_to_string(&mut text)?;
    Ok(text)
}

fn open_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .owner_only()
        .no_follow()
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_is_owner_only_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        replace(&path, "one").unwrap();
        replace(&path, "two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(platform::fs::mode(&fs::metadata(&path).unwrap()), 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn create_new_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credential");
        create_new(&path, "secret").unwrap();
        assert_eq!(
            create_new(&path, "other").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "secret");
    }

    #[test]
    fn create_or_read_keeps_the_first_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.token");
        assert_eq!(
            create_or_read(&path, "first").unwrap(),
            ("first".to_string(), true)
        );
        assert_eq!(
            create_or_read(&path, "second").unwrap(),
            ("first".to_string(), false)
        );
        assert_eq!(platform::fs::mode(&fs::metadata(&path).unwrap()), 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn create_or_read_races_to_one_winner() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.token");
        let results: Vec<(String, bool)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let path = &path;
                    scope.spawn(move || create_or_read(path, &format!("token-{i}")).unwrap())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(results.iter().filter(|(_, created)| *created).count(), 1);
        let winner = fs::read_to_string(&path).unwrap();
        assert!(results.iter().all(|(token, _)| *token == winner));
    }

    #[test]
    fn read_private_refuses_a_readable_file_and_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        fs::write(&path, "secret").unwrap();
        platform::fs::set_mode(&path, 0o644).unwrap();
        let error = read_private(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        assert!(error.to_string().contains("644"), "{error}");
        platform::fs::set_mode(&path, 0o600).unwrap();
        assert_eq!(read_private(&path).unwrap(), "secret");
        let link = dir.path().join("link");
        platform::fs::symlink(&path, &link).unwrap();
        assert!(read_private(&link).is_err());
        let error = read_private(dir.path()).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
        // A FIFO is refused, not waited on.
        let fifo = dir.path().join("fifo");
        platform::fs::mkfifo(&fifo).unwrap();
        let error = read_private(&fifo).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}
