//! The runtime's processes: the spawn of a launch's first process in a process group of its
//! own, the stop of every process of that group, the pumps that relay its output as frames, and
//! the private `bin/agentteam` link to the daemon's own executable.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{BIN_DIR, KILL_GRACE, Output};

/// Starts `program` with `args` in `workdir` with exactly `env` (nothing inherited), its stdin
/// empty and its stdout and stderr piped to the daemon. Dropping the child kills its first process.
pub(super) fn spawn<'a>(
    program: &str,
    args: impl IntoIterator<Item = &'a String>,
    workdir: &Path,
    env: Vec<(String, String)>,
) -> io::Result<Child> {
    tokio::process::Command::new(program)
        .args(args)
        .current_dir(workdir)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the whole runtime (a shell's commands, a runtime's tool
        // processes and MCP servers) is signalled at its end, not just its first process.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
}

/// `dir/bin/agentteam` → the daemon's executable: the runtime's `agentteam` is the daemon's own.
pub(super) fn link_executable(dir: &Path, executable: &Path) -> io::Result<()> {
    let bin = dir.join(BIN_DIR);
    std::fs::DirBuilder::new().mode(0o700).create(&bin)?;
    std::os::unix::fs::symlink(executable, bin.join("agentteam"))
}

/// Whether any process of `group` is still running. A zombie does not count: an orphan's zombie
/// waits for whatever reaps orphans here, which may be slow, and a zombie cannot act. Read from
/// `/proc` where there is one; elsewhere a zombie counts.
fn group_alive(group: rustix::process::Pid) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return rustix::process::test_kill_process_group(group).is_ok();
    };
    let wanted = group.as_raw_nonzero().get().to_string();
    entries.filter_map(Result::ok).any(|entry| {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`: the command may hold anything, so parse after its `)`.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace())
            .into_iter()
            .flatten();
        let state = fields.next();
        let pgrp = fields.nth(1);
        pgrp == Some(wanted.as_str()) && state != Some("Z")
    })
}

/// Stops every process of `group`: SIGTERM, then SIGKILL once [`KILL_GRACE`] passed with any of
/// them left. With the group's first process still running (`leader`), it is reaped and its
/// status returned; otherwise the status is that of an already reaped process.
pub(super) async fn stop_group(
    group: rustix::process::Pid,
    leader: Option<&mut Child>,
) -> io::Result<std::process::ExitStatus> {
    use rustix::process::{Signal, kill_process_group};
    let alive = || group_alive(group);
    if !alive() {
        return match leader {
            Some(child) => child.wait().await,
            None => Ok(std::process::ExitStatus::from_raw(0)),
        };
    }
    let _ = kill_process_group(group, Signal::TERM);
    let deadline = tokio::time::Instant::now() + KILL_GRACE;
    let mut status = None;
    if let Some(child) = leader {
        if let Ok(reaped) = tokio::time::timeout_at(deadline, child.wait()).await {
            status = Some(reaped);
        }
        // Members other than the leader get the rest of the grace.
        while alive() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if alive() {
            let _ = kill_process_group(group, Signal::KILL);
        }
        return match status {
            Some(status) => status,
            None => child.wait().await,
        };
    }
    while alive() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    if alive() {
        let _ = kill_process_group(group, Signal::KILL);
    }
    Ok(std::process::ExitStatus::from_raw(0))
}

/// Sees each chunk a runtime writes before it is relayed.
pub(super) type Watch = Box<dyn FnMut(&[u8]) + Send>;

/// Forwards one pipe as `Output` frames; a gone receiver means the caller abandoned the launch.
pub(super) fn forward(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    sender: mpsc::Sender<Output>,
    frame: fn(Vec<u8>) -> Output,
    client_gone: CancellationToken,
    mut watch: Option<Watch>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if let Some(watch) = watch.as_mut() {
                        watch(&buffer[..n]);
                    }
                    if sender.send(frame(buffer[..n].to_vec())).await.is_err() {
                        client_gone.cancel();
                        return;
                    }
                }
            }
        }
    })
}
