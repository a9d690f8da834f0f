//! Finding the local daemon of a state directory, and starting one when a command needs it and
//! none runs (ssh-agent style): the daemon's own lock on `<state dir>/daemon.lock` says whether
//! one runs, a second lock (`<state dir>/start.lock`) lets one starter at a time start it, so
//! however many commands start at once, exactly one daemon is started. It runs detached from the
//! command and its terminal (a session of its own), its output appended to the owner-only
//! `<state dir>/daemon.log`.
//!
//! Also `agentteam daemon stop` and `restart`: what a stop ends is said first (every runtime's
//! authorization is revoked and its processes stopped), and asked on a terminal.

use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::output::{Exit, usage_error};
use crate::daemon::{ADMIN_TOKEN_FILE, DAEMON_FILE, default_state_dir};

/// Where a started daemon's output goes, in its state directory.
pub const LOG_FILE: &str = "daemon.log";
/// The lock the daemon holds while it runs (`daemon::app`).
const LOCK_FILE: &str = "daemon.lock";
/// The lock one starter holds while it starts a daemon.
const START_LOCK_FILE: &str = "start.lock";
/// How long a starter waits for the daemon it started (or another starter's) to answer: the
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
    /// The `agentteam daemon` flags it was started with (a restart uses them again).
    pub args: Vec<String>,
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
    start(
        &dir,
        &["--state-dir".to_string(), dir.display().to_string()],
    )
}

fn not_running(dir: &Path) -> Exit {
    usage_error(
        &format!("no daemon is running with state dir `{}`", dir.display()),
        &[
            "start it with `agentteam daemon`, or leave out `--no-start` (and AGENTTEAM_NO_START) to let this command start one".to_string(),
        ],
    )
}

/// Whether a daemon holds `dir`'s lock: `None` when none does, else its announcement once it
/// answers (a daemon still starting is waited for).
fn running(dir: &Path) -> Result<Option<Announcement>, Exit> {
    if !held(&dir.join(LOCK_FILE)) {
        return Ok(None);
    }
    wait_until_serving(dir, None).map(Some)
}

/// Whether another process holds the lock on `path` (a missing file is no lock).
fn held(path: &Path) -> bool {
    match File::open(path) {
        Ok(file) => match file.try_lock_shared() {
            Ok(()) => false,
            Err(std::fs::TryLockError::WouldBlock) => true,
            Err(std::fs::TryLockError::Error(_)) => false,
        },
        Err(_) => false,
    }
}

/// Starts `agentteam daemon ARGS` for `dir`, detached, unless a starter racing this one already
/// did; returns the daemon that then serves.
fn start(dir: &Path, args: &[String]) -> Result<Announcement, Exit> {
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
        .mode(0o600)
        .open(dir.join(START_LOCK_FILE))
        .map_err(|e| cannot("cannot open the start lock in", e))?;
    let deadline = Instant::now() + START_DEADLINE;
    while start_lock.try_lock().is_err() {
        if Instant::now() >= deadline {
            return Err(usage_error(
                &format!(
                    "another command has been starting the daemon of `{}` for {} s",
                    dir.display(),
                    START_DEADLINE.as_secs()
                ),
                &[format!("its log: {}", dir.join(LOG_FILE).display())],
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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
        .args(args)
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| cannot("cannot open its log in", e))?,
        )
        .stderr(log);
    // SAFETY: `setsid` is async-signal-safe and touches no memory of this process; between fork
    // and exec the child only leaves this command's session and terminal, so neither a closed
    // terminal (SIGHUP) nor this command's end reaches the daemon.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
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
/// followed).
fn open_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::PermissionsExt;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// Polls until the daemon of `dir` (the process `started`, when this command started it) has
/// announced itself and answers; fails with its log's last lines when it exits first.
fn wait_until_serving(dir: &Path, started: Option<u32>) -> Result<Announcement, Exit> {
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        if let Some(announced) = read(dir)
            && started.is_none_or(|pid| pid == announced.pid || !alive(pid))
            && serving(dir, &announced)
        {
            return Ok(announced);
        }
        // The process this command started is gone and nobody holds the lock: it failed.
        if let Some(pid) = started
            && !alive(pid)
            && !held(&dir.join(LOCK_FILE))
        {
            return Err(usage_error(
                &format!("the daemon for `{}` exited as it started", dir.display()),
                &[log_tail(&dir.join(LOG_FILE))],
            ));
        }
        if Instant::now() >= deadline {
            return Err(usage_error(
                &format!(
                    "the daemon for `{}` did not answer within {} s",
                    dir.display(),
                    START_DEADLINE.as_secs()
                ),
                &[format!("its log: {}", dir.join(LOG_FILE).display())],
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `daemon.json` of `dir`, when it is whole.
fn read(dir: &Path) -> Option<Announcement> {
    let value: Value = serde_json::from_slice(&std::fs::read(dir.join(DAEMON_FILE)).ok()?).ok()?;
    let text = |field: &str| value[field].as_str().map(str::to_string);
    Some(Announcement {
        base_url: text("baseUrl")?,
        server_url: text("serverUrl")?,
        server_embedded: value["serverEmbedded"].as_bool() == Some(true),
        pid: value["pid"].as_u64()? as u32,
        args: value["args"]
            .as_array()
            .map(|args| {
                args.iter()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        state_dir: dir.to_path_buf(),
    })
}

/// Whether `announced` is the daemon that holds `dir`'s lock now (not a `daemon.json` a crashed
/// one left while another starts): the kernel's lock table names the holder's pid. Where it lists
/// no holder of that file, whether the announced listener takes a connection.
fn serving(dir: &Path, announced: &Announcement) -> bool {
    match lock_holders(&dir.join(LOCK_FILE)) {
        Some(holders) if !holders.is_empty() => holders.contains(&announced.pid),
        _ => answers(announced),
    }
}

/// The pids `/proc/locks` lists as holding a `flock` on `path` (matched by its inode).
fn lock_holders(path: &Path) -> Option<Vec<u32>> {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(path).ok()?.ino();
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    Some(
        table
            .lines()
            .filter_map(|line| {
                // `1: FLOCK  ADVISORY  WRITE 16304 fe:00:10010670 0 EOF`
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (kind, pid, file) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
                let lock_inode: u64 = file.rsplit(':').next()?.parse().ok()?;
                (*kind == "FLOCK" && lock_inode == inode).then(|| pid.parse().ok())?
            })
            .collect(),
    )
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
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// The last lines of a daemon log, for a failure message.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<&str> = lines.into_iter().rev().collect();
    format!("its log ({}) ends:\n{}", path.display(), tail.join("\n"))
}

/// `agentteam daemon stop` (and the first half of `restart`): says how many runtimes lose their
/// authorization and are stopped, asks on a terminal unless `yes` (refuses elsewhere, when any
/// runs), sends the daemon SIGTERM (its strong shutdown: revoke first, then files, then process
/// groups, then the drain) and waits until it has released its lock. `None` when no daemon ran.
pub fn stop(state_dir: &Option<PathBuf>, yes: bool) -> Result<Option<Announcement>, Exit> {
    let dir = state_dir.clone().unwrap_or_else(default_state_dir);
    let Some(running) = running(&dir)? else {
        eprintln!(
            "agentteam: no daemon is running with state dir `{}`",
            dir.display()
        );
        return Ok(None);
    };
    let token = crate::private_file::read_private(&dir.join(ADMIN_TOKEN_FILE)).map_err(|e| {
        usage_error(
            &format!(
                "cannot read `{}`: {e}",
                dir.join(ADMIN_TOKEN_FILE).display()
            ),
            &[],
        )
    })?;
    let status = super::http::call(
        super::http::Peer::Daemon,
        reqwest::Method::GET,
        &format!("{}/api/admin/status", running.base_url),
        token.trim(),
        None,
    )?;
    let runtimes = status["admission"]["runtimes"].as_u64().unwrap_or(0);
    if runtimes > 0 {
        let what = format!(
            "stopping the daemon revokes the authorization of {} and stops {}",
            super::output::count(runtimes, "running runtime", "running runtimes"),
            if runtimes == 1 { "it" } else { "them" }
        );
        if !yes {
            if !std::io::stdin().is_terminal() {
                return Err(usage_error(
                    &what,
                    &["pass `--yes` to stop it anyway".to_string()],
                ));
            }
            eprint!("{what}. Stop it? [y/N] ");
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().read_line(&mut answer);
            if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
                return Err(usage_error("the daemon keeps running", &[]));
            }
        } else {
            eprintln!("agentteam: {what}");
        }
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(running.pid as i32)
            .ok_or_else(|| usage_error("`daemon.json` names no process", &[]))?,
        rustix::process::Signal::TERM,
    )
    .map_err(|e| {
        usage_error(
            &format!("cannot signal the daemon (pid {}): {e}", running.pid),
            &[],
        )
    })?;
    let deadline = Instant::now() + STOP_DEADLINE;
    while held(&dir.join(LOCK_FILE)) {
        if Instant::now() >= deadline {
            return Err(usage_error(
                &format!(
                    "the daemon (pid {}) is still stopping after {} s",
                    running.pid,
                    STOP_DEADLINE.as_secs()
                ),
                &[],
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "agentteam: stopped the daemon (pid {}){}",
        running.pid,
        match runtimes {
            0 => String::new(),
            n => format!(
                "; {} revoked and stopped",
                super::output::count(n, "runtime", "runtimes")
            ),
        }
    );
    Ok(Some(running))
}

/// `agentteam daemon restart`: [`stop`], then the same daemon again (its recorded flags),
/// detached as on demand.
pub fn restart(state_dir: &Option<PathBuf>, yes: bool) -> Exit {
    let dir = state_dir.clone().unwrap_or_else(default_state_dir);
    // A daemon a systemd unit runs is restarted by systemd, or it would leave the unit.
    if let Ok(Some(running)) = running(&dir)
        && under_systemd(running.pid)
    {
        return usage_error(
            &format!(
                "the daemon of `{}` runs under systemd (pid {})",
                dir.display(),
                running.pid
            ),
            &["restart it there: `systemctl --user restart agentteam` (or the unit `agentteam daemon install` named)".to_string()],
        );
    }
    let args = match stop(state_dir, yes) {
        Ok(Some(stopped)) if !stopped.args.is_empty() => stopped.args,
        Ok(_) => vec!["--state-dir".to_string(), dir.display().to_string()],
        Err(exit) => return exit,
    };
    match start(&dir, &args) {
        Ok(_) => Exit::Success,
        Err(exit) => exit,
    }
}

/// Whether process `pid` runs as a systemd service: systemd is its parent, and set its
/// `INVOCATION_ID` (which a process started from a service's shell inherits too, so the parent
/// decides).
fn under_systemd(pid: u32) -> bool {
    let invoked = std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|b| *b == 0)
            .any(|entry| entry.starts_with(b"INVOCATION_ID="))
    });
    let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse::<u32>()
                .ok()
        });
    let parent_is_systemd = parent.is_some_and(|ppid| {
        std::fs::read_to_string(format!("/proc/{ppid}/comm"))
            .is_ok_and(|comm| comm.trim() == "systemd")
    });
    invoked && parent_is_systemd
}
