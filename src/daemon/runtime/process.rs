//! The runtime's processes: the spawn of a launch's first process in a process group of its
//! own, the stop of every process of that group, the pumps that relay its output as frames, and
//! the private `bin/agentteam` link to the daemon's own executable.

use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::env::ChildEnv;
use super::{BIN_DIR, KILL_GRACE, Output};
use crate::platform;
use crate::platform::process::{Pid, Signal, group_alive, signal_group};

/// Starts `program` with `args` in `workdir` with exactly `env` (nothing else inherited), its stdin
/// piped from the daemon when `stdin` (the launcher's, relayed) and empty otherwise, and its
/// stdout and stderr piped to the daemon. Dropping the child kills its first process.
pub(super) fn spawn<'a>(
    program: &str,
    args: impl IntoIterator<Item = &'a String>,
    workdir: &Path,
    env: &ChildEnv,
    stdin: bool,
) -> io::Result<Child> {
    let mut command = env.command(program);
    command
        .args(args)
        .current_dir(workdir)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, so the whole runtime (a shell's commands, a runtime's tool
    // processes and MCP servers) is signalled at its end, not just its first process.
    platform::process::in_own_group(&mut command);
    command.spawn()
}

/// `dir/bin/agentteam` (and `dir/bin/<alias>`) → the daemon's executable: the runtime's
/// `agentteam` is the daemon's own.
pub(super) fn link_executable(
    dir: &Path,
    executable: &Path,
    alias: Option<&str>,
) -> io::Result<()> {
    let bin = dir.join(BIN_DIR);
    platform::fs::create_private_dir(&bin)?;
    platform::fs::symlink(executable, &bin.join("agentteam"))?;
    match alias {
        Some(alias) => platform::fs::symlink(executable, &bin.join(alias)),
        None => Ok(()),
    }
}

/// Stops what is left of `group` once its first process exited: SIGTERM, then SIGKILL once
/// [`KILL_GRACE`] passed with any of them left.
pub(super) async fn stop_rest_of_group(group: Pid) {
    if !group_alive(group) {
        return;
    }
    let _ = signal_group(group, Signal::Terminate);
    finish_group(group, tokio::time::Instant::now() + KILL_GRACE).await;
}

/// Stops every process of `group` and reaps `leader`, its first, which still runs: SIGTERM, then
/// SIGKILL once [`KILL_GRACE`] passed with any of them left. Returns the leader's status.
pub(super) async fn stop_group(group: Pid, leader: &mut Child) -> io::Result<ExitStatus> {
    if !group_alive(group) {
        return leader.wait().await;
    }
    let _ = signal_group(group, Signal::Terminate);
    let deadline = tokio::time::Instant::now() + KILL_GRACE;
    let status = tokio::time::timeout_at(deadline, leader.wait()).await.ok();
    // Members other than the leader get the rest of the grace.
    finish_group(group, deadline).await;
    match status {
        Some(status) => status,
        None => leader.wait().await,
    }
}

/// Waits until no process of `group` runs or `deadline` passed, then kills those left.
async fn finish_group(group: Pid, deadline: tokio::time::Instant) {
    while group_alive(group) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    if group_alive(group) {
        let _ = signal_group(group, Signal::Kill);
    }
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
