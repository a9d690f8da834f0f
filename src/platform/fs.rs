//! Files and directories this user alone may use: directories made 0700 (and checked or taken
//! back to it), files created 0600, opens that refuse a symlink (and do not block on a FIFO),
//! the owner and mode of what a path holds, and a file's identity across renames.

use std::ffi::OsStr;
use std::fs::{DirBuilder, Metadata, OpenOptions, Permissions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use rustix::fs::OFlags;

use super::process::euid;

/// What an open of a secret, a log or a lock adds to `std`'s portable options. The two `no_follow`
/// forms set the open's flags, so the one called last is the one in force.
pub trait PrivateOpen {
    /// A file this open creates gets mode 0600 (before the umask), so no other user can read a
    /// secret between its creation and a later `chmod`.
    fn owner_only(&mut self) -> &mut Self;
    /// A symlink as the last component of the path is refused (`ELOOP`), not followed: a link
    /// another user planted cannot redirect the read or the write. Close-on-exec, as `std` opens
    /// every file, so a runtime the daemon starts inherits no descriptor.
    fn no_follow(&mut self) -> &mut Self;
    /// [`PrivateOpen::no_follow`], and a FIFO or device at the path neither blocks the open nor
    /// becomes the controlling terminal: for a path someone may have replaced, which is then
    /// refused by its type after the open instead of waited on.
    fn no_follow_nonblocking(&mut self) -> &mut Self;
}

impl PrivateOpen for OpenOptions {
    fn owner_only(&mut self) -> &mut Self {
        self.mode(0o600)
    }

    fn no_follow(&mut self) -> &mut Self {
        self.custom_flags((OFlags::NOFOLLOW | OFlags::CLOEXEC).bits() as i32)
    }

    fn no_follow_nonblocking(&mut self) -> &mut Self {
        let flags = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        self.custom_flags(flags.bits() as i32)
    }
}

/// Creates the directory `path` (its parent must exist, `path` must not) with mode 0700, so it is
/// never readable by others, not even for a moment after its creation.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    DirBuilder::new().mode(0o700).create(path)
}

/// Creates `path` and every missing parent, each new one 0700; directories that exist are left
/// as they are (check them with [`check_private_dir`] or [`tighten_private_dir`]).
pub fn create_private_dirs(path: &Path) -> io::Result<()> {
    DirBuilder::new().mode(0o700).recursive(true).create(path)
}

/// `path` (not followed if a symlink) is a directory this user owns with no group or other bit:
/// a loosened mode, another owner or a symlink in its place is refused before a secret goes into
/// it.
pub fn check_private_dir(path: &Path) -> io::Result<()> {
    let metadata = std::fs::symlink_metadata(path)?;
    if !metadata.is_dir() || !is_owner_only(&metadata) {
        return Err(io::Error::other(format!(
            "`{}` is not a private directory of this user",
            path.display()
        )));
    }
    Ok(())
}

/// Takes the directory `path` (not followed if a symlink) back to 0700 when it has a group or
/// other bit, for a directory another process of this user may recreate under its umask; a
/// symlink, a file or another user's directory is refused. Returns whether it had to be tightened.
pub fn tighten_private_dir(path: &Path) -> io::Result<bool> {
    let metadata = std::fs::symlink_metadata(path)?;
    if !metadata.is_dir() || owner(&metadata) != euid() {
        return Err(io::Error::other(format!(
            "`{}` is not a directory of this user",
            path.display()
        )));
    }
    if mode(&metadata) & 0o077 == 0 {
        return Ok(false);
    }
    set_mode(path, 0o700)?;
    Ok(true)
}

/// The user that owns what `metadata` describes.
pub fn owner(metadata: &Metadata) -> u32 {
    metadata.uid()
}

/// The permission bits (`0o777`) of what `metadata` describes, for a refusal that says which
/// bits are wrong.
pub fn mode(metadata: &Metadata) -> u32 {
    metadata.mode() & 0o777
}

/// Whether `metadata` is of something this user owns and no group or other user may use: what a
/// secret, and a directory holding one, must be.
pub fn is_owner_only(metadata: &Metadata) -> bool {
    owner(metadata) == euid() && mode(metadata) & 0o077 == 0
}

/// Permissions of exactly `mode` (`0o600`, `0o700`), for `set_permissions` of an open file or a
/// temp directory's builder.
pub fn permissions(mode: u32) -> Permissions {
    Permissions::from_mode(mode)
}

/// Sets the mode of `path` (following a symlink, as `chmod` does) to exactly `mode`.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, permissions(mode))
}

/// The `(device, inode)` pair of the file `metadata` describes: the same pair is the same file
/// whatever its path, and a file replaced by a rename gets another.
pub fn file_id(metadata: &Metadata) -> (u64, u64) {
    (metadata.dev(), metadata.ino())
}

/// The modification time of what `metadata` describes in nanoseconds since the epoch: finer than
/// a second, so two writes within one second still differ.
pub fn modified_ns(metadata: &Metadata) -> i64 {
    metadata.mtime() * 1_000_000_000 + metadata.mtime_nsec()
}

/// A symlink at `link` that points to `target`.
pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// The bytes the kernel takes for `name` (a path is bytes here, not text), for an API that wants
/// a C string.
pub fn os_str_bytes(name: &OsStr) -> &[u8] {
    name.as_bytes()
}

/// A FIFO at `path` (mode 0600): what a test puts where a reader expects a regular file.
#[cfg(test)]
pub fn mkfifo(path: &Path) -> io::Result<()> {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .map_err(io::Error::from)
}
