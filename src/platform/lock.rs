//! Advisory locks: an exclusive `flock` taken without waiting, and which processes the kernel's
//! lock table says hold one on a file.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Takes an exclusive `flock` on `file` without waiting; it is held until the file is closed, and
/// the kernel drops it when the process dies, so a crashed holder never leaves it taken. An error
/// (`WouldBlock` when another holds it) leaves the file unlocked.
pub fn try_lock_exclusive(file: &File) -> io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .map_err(io::Error::from)
}

/// The pids `/proc/locks` lists as holding a `flock` on `path`, matched by its device and inode
/// (`1: FLOCK  ADVISORY  WRITE 16304 fe:00:10010670 0 EOF`): which process a lock file's lock
/// belongs to, which the lock itself does not say. `None` where the file or the table cannot be
/// read.
pub fn lock_holders(path: &Path) -> Option<Vec<u32>> {
    let metadata = std::fs::metadata(path).ok()?;
    let dev = metadata.dev();
    let (major, minor) = (
        ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
        (dev & 0xff) | ((dev >> 12) & !0xff),
    );
    let file = format!("{major:02x}:{minor:02x}:{}", metadata.ino());
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    Some(
        table
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (kind, pid, locked) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
                (*kind == "FLOCK" && *locked == file).then(|| pid.parse().ok())?
            })
            .collect(),
    )
}
