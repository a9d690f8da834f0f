//! Owner-only files, written one way: every token, credential and state file of the daemon and
//! the server goes through here.
//!
//! `replace` writes a `0600` temp file beside the target (never following a symlink), `fsync`s
//! it, renames it over the target and `fsync`s the directory, so a reader sees the old contents
//! or the new, never a mix, and a crash keeps one of them. `create_new` is for a secret that must
//! not overwrite anything.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rand::Rng;

/// Atomically replaces `path` with `contents` (mode 0600).
pub fn replace(path: &Path, contents: &str) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut suffix = [0u8; 8];
    rand::rng().fill(&mut suffix);
    let tmp = dir.join(format!(".tmp-{}", hex::encode(suffix)));
    let result = (|| {
        let mut file = open_new(&tmp)?;
        file.write_all(contents.as_bytes())?;
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

fn open_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn replace_is_owner_only_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        replace(&path, "one").unwrap();
        replace(&path, "two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
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
}
