//! The one seam between the crate and the operating system. Every Unix-only call (file modes and
//! owners, opens that do not follow a symlink, process groups, sessions and signals, `flock`,
//! `/proc`, signal handlers, resource limits) is made here and nowhere else in `src/`, so what
//! the crate asks of Linux is this module's list, and a port is this module's rewrite
//! (`tidy::unix_only_calls_live_in_the_platform_seam` holds the rest of `src/` to it).
//!
//! The functions are named for what their callers need (an owner-only file, a private directory,
//! a process group's stop), not for the syscall that does it.
//!
//! - [`fs`]: private directories and files, owners and modes, a file's identity.
//! - [`process`]: commands in a group or a session of their own, signals, exit codes, this
//!   process's user, its open-file limit, the shutdown signals.
//! - [`lock`]: an exclusive `flock`, and who holds one.
//! - [`procfs`]: what `/proc` says of a process.

pub mod fs;
pub mod lock;
pub mod process;
pub mod procfs;
