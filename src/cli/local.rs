//! Finding the local daemon of a state directory, and starting one when a command needs it and
//! none runs (ssh-agent style): the daemon's own lock on `<state dir>/daemon.lock` says whether
//! one runs, a second lock (`<state dir>/start.lock`) lets one starter at a time start it, so
//! however many commands start at once, exactly one daemon is started. It starts with the flags
//! the state directory's last daemon recorded (`<state dir>/daemon.args`), runs detached from the
//! command and its terminal (a session of its own), its output appended to the owner-only
//! `<state dir>/daemon.log`.
//!
//! Also `agentteam daemon stop` and `restart`: what a stop ends is said first (every runtime's
//! authorization is revoked and its processes stopped), and asked on a terminal.

use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::output::{Exit, count, usage_error};
use crate::daemon::{ADMIN_TOKEN_FILE, ARGS_FILE, DAEMON_FILE, default_state_dir};
use crate::platform;
use crate::platform::fs::PrivateOpen;
use crate::platform::process::{Pid, Signal};

/// Where a started daemon's output goes, in its state directory.
pub const LOG_FILE: &str = "daemon.log";
/// A log over this size is moved to `daemon.log.1` (replacing it) when a daemon is started.
const LOG_ROTATE_BYTES: u64 = 4 * 1024 * 1024;
/// The lock the daemon holds while it runs (`daemon::app`).
const LOCK_FILE: &str = "daemon.lock";
/// The lock one starter holds while it starts a daemon.
const START_LOCK_FILE: &str = "start.lock";
/// How long a starter waits for the daemon it started (or another starter's) to serve: the
/// embedded server migrates its database on a first start.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// How long `daemon stop` waits for the daemon to release its lock: its strong shutdown (drain,
/// process groups' grace, credential cleanup) is bounded well below this.
const STOP_DEADLINE: Duration = Duration::from_secs(40);

/// What `daemon.json` says of the running daemon.
#[derive(Debug)]
pub struct Announcement {
    /// The state directory it was read from.
    pub state_dir: PathBuf,
    /// The daemon's loopback base URL.
    pub base_url: String,
    /// The server it uses: its embedded one's loopback listener, or `--server-url`.
    pub server_url: String,
    /// Whether that server is the embedded one (its operator token is in the state directory).
    pub server_embedded: bool,
    pub pid: u32,
}

/// The daemon of `state_dir` (default: the default state directory): the running one, or, unless
/// `no_start`, one started now (said on stderr, with its log).
pub fn daemon(state_dir: &Option<PathBuf>, no_start: bool) -> Result<Announcement, Exit> {
    let dir = state_dir.clone().unwrap_or_else(default_state_dir);
    if let Some(running) = running(&dir)? {
        return Ok(running);
    }
    if no_start {
        return Err(not_running(&dir));
    }
    let flags = start_flags(&dir)?;
    start(&dir, &flags)
}

fn not_running(dir: &Path) -> Exit {
    usage_error(
        &format!("no daemon is running with state dir `{}`", dir.display()),
        &[
            "start it with `agentteam daemon`, or leave out `--no-start` (and AGENTTEAM_NO_START) to let this command start one".to_string(),
        ],
    )
}

/// The flags a daemon of `dir` is started with on demand: those its last daemon recorded. A
/// directory no daemon recorded flags in gets the embedded default only where that cannot be
/// wrong: the default state directory, or an existing one no daemon of a remote server used (a
/// mistyped `--state-dir` is not a new daemon).
fn start_flags(dir: &Path) -> Result<Vec<String>, Exit> {
    if let Some(flags) = recorded_flags(dir) {
        return Ok(flags);
    }
    let start_it = format!(
        "start it once with `agentteam daemon --state-dir {}` and the flags it needs",
        dir.display()
    );
    if !dir.exists() && *dir != default_state_dir() {
        return Err(usage_error(
            &format!(
                "no daemon is running with state dir `{}`, and it does not exist",
                dir.display()
            ),
            &[start_it],
        ));
    }
    if dir.join("identity.json").exists() && !dir.join("server.db").exists() {
        return Err(usage_error(
            &format!(
                "the daemon of `{}` used another server, and its flags are not recorded",
                dir.display()
            ),
            &[start_it],
        ));
    }
    Ok(vec!["--state-dir".to_string(), dir.display().to_string()])
}

/// The flags `dir`'s last daemon recorded (`daemon.args`, an owner-only JSON array).
fn recorded_flags(dir: &Path) -> Option<Vec<String>> {
    let text = crate::private_file::read_private_limited(&dir.join(ARGS_FILE), 64 * 1024).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether a daemon holds `dir`'s lock: `None` when none does, else its announcement once it
/// serves (a daemon still starting is waited for).
fn running(dir: &Path) -> Result<Option<Announcement>, Exit> {
    if !held(&dir.join(LOCK_FILE))? {
        return Ok(None);
    }
    wait_until_serving(dir, None).map(Some)
}

/// Whether another process holds the lock on `path` (a missing file is no lock).
fn held(path: &Path) -> Result<bool, Exit> {
    let cannot = |e: std::io::Error| {
        usage_error(
            &format!("cannot read the daemon's lock `{}`: {e}", path.display()),
            &[],
        )
    };
    match File::open(path) {
        Ok(file) => match file.try_lock_shared() {
            Ok(()) => Ok(false),
            Err(std::fs::TryLockError::WouldBlock) => Ok(true),
            Err(std::fs::TryLockError::Error(e)) => Err(cannot(e)),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(cannot(e)),
    }
}

/// Calls `attempt` every 50 ms until it answers, or fails with `late` once `deadline` passed.
fn poll_until<T>(
    deadline: Instant,
    late: impl Fn() -> Exit,
    mut attempt: impl FnMut() -> Result<Option<T>, Exit>,
) -> Result<T, Exit> {
    loop {
        if let Some(done) = attempt()? {
            return Ok(done);
        }
        if Instant::now() >= deadline {
            return Err(late());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `agentteam daemon FLAGS` for `dir`, detached, unless a starter racing this one already
/// did; returns the daemon that then serves.
fn start(dir: &Path, flags: &[String]) -> Result<Announcement, Exit> {
    let cannot = |what: &str, e: std::io::Error| {
        usage_error(
            &format!("cannot start the daemon: {what} `{}`: {e}", dir.display()),
            &[],
        )
    };
    crate::daemon::auth::files::ensure_private_dir(dir)
        .map_err(|e| cannot("cannot prepare the state dir", e))?;
    // One starter at a time: the others wait here, then find the daemon it started.
    let start_lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .owner_only()
        .open(dir.join(START_LOCK_FILE))
        .map_err(|e| cannot("cannot open the start lock in", e))?;
    poll_until(
        Instant::now() + START_DEADLINE,
        || {
            usage_error(
                &format!(
                    "another command has been starting the daemon of `{}` for {} s",
                    dir.display(),
                    START_DEADLINE.as_secs()
                ),
                &[format!("its log: {}", dir.join(LOG_FILE).display())],
            )
        },
        || Ok(start_lock.try_lock().is_ok().then_some(())),
    )?;
    if let Some(running) = running(dir)? {
        return Ok(running);
    }
    let log_path = dir.join(LOG_FILE);
    let log = open_log(&log_path).map_err(|e| cannot("cannot open its log in", e))?;
    let executable =
        std::env::current_exe().map_err(|e| cannot("cannot find this executable for", e))?;
    let mut command = Command::new(executable);
    command
        .arg("daemon")
        .args(flags)
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| cannot("cannot open its log in", e))?,
        )
        .stderr(log);
    // A session of its own: neither a closed terminal nor this command's end reaches the daemon.
    platform::process::in_own_session(&mut command);
    platform::process::child_keeps_huge_pages(&mut command);
    let child = command
        .spawn()
        .map_err(|e| cannot("cannot run the daemon for", e))?;
    let started = wait_until_serving(dir, Some(child.id()))?;
    eprintln!(
        "agentteam: started the daemon for `{}` (pid {}); its log: {}",
        dir.display(),
        started.pid,
        log_path.display()
    );
    Ok(started)
}

/// The daemon's log, appended to, owner-only (a log from before is made so, and a link is not
/// followed); one over [`LOG_ROTATE_BYTES`] becomes `daemon.log.1` first.
fn open_log(path: &Path) -> std::io::Result<File> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() > LOG_ROTATE_BYTES) {
        std::fs::rename(path, path.with_extension("log.1"))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .owner_only()
        .no_follow()
        .open(path)?;
    file.set_permissions(platform::fs::permissions(0o600))?;
    Ok(file)
}

/// Polls until the daemon of `dir` (the process `started`, when this command started it) has
/// announced itself and holds the lock; fails with its log's last lines when it exits first.
fn wait_until_serving(dir: &Path, started: Option<u32>) -> Result<Announcement, Exit> {
    let late = || {
        usage_error(
            &format!(
                "the daemon for `{}` did not serve within {} s",
                dir.display(),
                START_DEADLINE.as_secs()
            ),
            &[format!("its log: {}", dir.join(LOG_FILE).display())],
        )
    };
    poll_until(Instant::now() + START_DEADLINE, late, || {
        if let Some(announced) = read(dir)
            && started.is_none_or(|pid| pid == announced.pid || !alive(pid))
            && serving(dir, &announced)
        {
            return Ok(Some(announced));
        }
        // The process this command started is gone and nobody holds the lock: it failed.
        if let Some(pid) = started
            && !alive(pid)
            && !held(&dir.join(LOCK_FILE))?
        {
            return Err(usage_error(
                &format!("the daemon for `{}` exited as it started", dir.display()),
                &[log_tail(&dir.join(LOG_FILE))],
            ));
        }
        Ok(None)
    })
}

/// `daemon.json` of `dir`, when it is whole.
fn read(dir: &Path) -> Option<Announcement> {
    let mut bytes = Vec::new();
    File::open(dir.join(DAEMON_FILE))
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut bytes)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let text = |field: &str| value[field].as_str().map(str::to_string);
    Some(Announcement {
        base_url: text("baseUrl")?,
        server_url: text("serverUrl")?,
        server_embedded: value["serverEmbedded"].as_bool() == Some(true),
        pid: u32::try_from(value["pid"].as_u64()?).ok()?,
        state_dir: dir.to_path_buf(),
    })
}

/// Whether `announced` is the daemon that holds `dir`'s lock now (not a `daemon.json` a crashed
/// one left while another starts): the kernel's lock table names the holder's pid. Where it lists
/// no holder of that file, whether the announced listener takes a connection.
fn serving(dir: &Path, announced: &Announcement) -> bool {
    match platform::lock::lock_holders(&dir.join(LOCK_FILE)) {
        Some(holders) if !holders.is_empty() => holders.contains(&announced.pid),
        _ => answers(announced),
    }
}

/// Whether the announced daemon's loopback listener takes a connection now.
fn answers(announced: &Announcement) -> bool {
    let Some(address) = announced
        .base_url
        .strip_prefix("http://")
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
    else {
        return false;
    };
    std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok()
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    platform::procfs::stat_fields(pid)
        .is_some_and(|fields| fields.first().is_some_and(|state| state != "Z"))
}

/// The last lines of a daemon log (read from its last 8 KiB), for a failure message.
fn log_tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let length = file.metadata().map_or(0, |m| m.len());
        let _ = file.seek(std::io::SeekFrom::Start(length.saturating_sub(8 * 1024)));
        let mut bytes = Vec::new();
        let _ = file.take(8 * 1024).read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<&str> = lines.into_iter().rev().collect();
    format!("its log ({}) ends:\n{}", path.display(), tail.join("\n"))
}

/// This start's admin token of the daemon of `dir`, read from its owner-only file.
pub fn admin_token(dir: &Path) -> Result<String, Exit> {
    let token_file = dir.join(ADMIN_TOKEN_FILE);
    let token = crate::private_file::read_private(&token_file).map_err(|e| {
        usage_error(
            &format!("cannot read `{}`: {e}", token_file.display()),
            &["start the daemon with `agentteam daemon`".to_string()],
        )
    })?;
    Ok(token.trim().to_string())
}

/// Refuses (printed) when this process is one of a runtime that the daemon of `dir`, if one
/// runs, launched: the daemon decides, from the connection this asks on (`GET
/// /api/admin/person`), never from what this process says of itself.
pub fn refuse_runtime(dir: &Path) -> Result<(), Exit> {
    let Some(running) = running(dir)? else {
        return Ok(());
    };
    super::http::call(
        super::http::Peer::Daemon,
        reqwest::Method::GET,
        &format!("{}/api/admin/person", running.base_url),
        &admin_token(&running.state_dir)?,
        None,
    )?;
    Ok(())
}

/// How many runtimes the daemon `running` runs now.
fn runtimes(running: &Announcement) -> Result<u64, Exit> {
    let status = super::http::call(
        super::http::Peer::Daemon,
        reqwest::Method::GET,
        &format!("{}/api/admin/status", running.base_url),
        &admin_token(&running.state_dir)?,
        None,
    )?;
    Ok(status["admission"]["runtimes"].as_u64().unwrap_or(0))
}

/// `agentteam daemon stop` (and the first half of `restart`): says how many runtimes lose their
/// authorization and are stopped, asks on a terminal unless `yes` (refuses elsewhere, when any
/// runs), checks the daemon it asked about still holds the lock, sends it SIGTERM (its strong
/// shutdown: revoke first, then files, then process groups, then the drain) and waits until it
/// has released the lock. `false` when no daemon ran.
pub fn stop(state_dir: &Option<PathBuf>, yes: bool) -> Result<bool, Exit> {
    let dir = state_dir.clone().unwrap_or_else(default_state_dir);
    let Some(first) = running(&dir)? else {
        eprintln!(
            "agentteam: no daemon is running with state dir `{}`",
            dir.display()
        );
        return Ok(false);
    };
    let ends = |n: u64| {
        format!(
            "stopping the daemon revokes the authorization of {} and stops {}",
            count(n, "running runtime", "running runtimes"),
            if n == 1 { "it" } else { "them" }
        )
    };
    let asked = runtimes(&first)?;
    if asked > 0 && !yes {
        if !std::io::stdin().is_terminal() {
            return Err(usage_error(
                &ends(asked),
                &["pass `--yes` to stop it anyway".to_string()],
            ));
        }
        eprint!("{}. Stop it? [y/N] ", ends(asked));
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
            return Err(usage_error("the daemon keeps running", &[]));
        }
    }
    // Time passed while asking: the signal goes only to the daemon that still holds the lock.
    let Some(still) = running(&dir)?.filter(|now| now.pid == first.pid) else {
        return Err(usage_error(
            &format!(
                "the daemon (pid {}) stopped or was replaced meanwhile",
                first.pid
            ),
            &["run `agentteam daemon stop` again".to_string()],
        ));
    };
    let stopping = runtimes(&still)?;
    if stopping > 0 && yes {
        eprintln!("agentteam: {}", ends(stopping));
    }
    let pid =
        Pid::new(still.pid).ok_or_else(|| usage_error("`daemon.json` names no process", &[]))?;
    platform::process::signal(pid, Signal::Terminate).map_err(|e| {
        usage_error(
            &format!("cannot signal the daemon (pid {}): {e}", still.pid),
            &[],
        )
    })?;
    let lock = dir.join(LOCK_FILE);
    poll_until(
        Instant::now() + STOP_DEADLINE,
        || {
            usage_error(
                &format!(
                    "the daemon (pid {}) is still stopping after {} s",
                    still.pid,
                    STOP_DEADLINE.as_secs()
                ),
                &[],
            )
        },
        || Ok((!held(&lock)?).then_some(())),
    )?;
    eprintln!(
        "agentteam: stopped the daemon (pid {}){}",
        still.pid,
        match stopping {
            0 => String::new(),
            n => format!("; {} revoked and stopped", count(n, "runtime", "runtimes")),
        }
    );
    Ok(true)
}

/// `agentteam daemon restart`: [`stop`], then the same daemon again (its recorded flags),
/// detached as on demand. A daemon a systemd unit runs is left to systemd.
pub fn restart(state_dir: &Option<PathBuf>, yes: bool) -> Exit {
    let dir = state_dir.clone().unwrap_or_else(default_state_dir);
    match running(&dir) {
        Ok(Some(running)) if under_systemd(running.pid) => {
            return usage_error(
                &format!(
                    "the daemon of `{}` runs under systemd (pid {})",
                    dir.display(),
                    running.pid
                ),
                &["restart it there: `systemctl --user restart UNIT`, the unit `agentteam daemon install` wrote".to_string()],
            );
        }
        Ok(_) => {}
        Err(exit) => return exit,
    }
    if let Err(exit) = stop(state_dir, yes) {
        return exit;
    }
    match start_flags(&dir).and_then(|flags| start(&dir, &flags)) {
        Ok(_) => Exit::Success,
        Err(exit) => exit,
    }
}

/// Whether process `pid` runs as a systemd service: systemd is its parent, and set its
/// `INVOCATION_ID` (which a process started from a service's shell inherits too, so the parent
/// decides).
pub fn under_systemd(pid: u32) -> bool {
    let invoked = platform::procfs::environ(pid).is_ok_and(|environ| {
        environ
            .split(|b| *b == 0)
            .any(|entry| entry.starts_with(b"INVOCATION_ID="))
    });
    let parent_is_systemd = platform::procfs::stat_fields(pid)
        .and_then(|fields| fields.get(1)?.parse::<u32>().ok())
        .is_some_and(|ppid| {
            platform::procfs::comm(ppid).is_ok_and(|comm| comm.trim() == "systemd")
        });
    invoked && parent_is_systemd
}

/// Whether a daemon not run by systemd runs for `dir` now (`daemon install` would start a
/// second one, which could not take the lock).
pub fn detached_daemon(dir: &Path) -> Result<Option<u32>, Exit> {
    Ok(running(dir)?
        .map(|running| running.pid)
        .filter(|pid| !under_systemd(*pid)))
}
