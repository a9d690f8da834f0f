//! The login service beyond its file: what `agentteam daemon install`, `stop` and `restart` ask
//! of systemd and how they read its answers. A user manager cannot run here (`systemd --user`
//! needs a booted systemd), so each test puts a stand-in `systemctl` first on `PATH`: a shell
//! script that records every call and answers as systemd 252 does in one scenario (no manager to
//! reach, a unit that fails to start, a unit that runs). Its `start` runs the unit's `ExecStart`
//! as systemd runs a `Type=simple` service: a child of a process named `systemd`, with an
//! `INVOCATION_ID`, which is how the CLI tells a daemon systemd runs.
//!
//! What rests on systemd alone, and is checked here only as far as the CLI's side of it:
//! restarting a daemon that failed (`Restart=on-failure`, `RestartSec=2`) and giving up after 5
//! starts in 5 minutes (here: the written unit says so, a failing daemon exits non-zero and a
//! stopped one 0); starting it at login (`WantedBy=default.target`, enabled); keeping a unit
//! stopped by `systemctl --user stop` stopped until the next login or start (here: `daemon stop`
//! asks for it); `KillMode=mixed` and `TimeoutStopSec=60`, the journal, `UMask`,
//! `NoNewPrivileges`; `systemctl --user restart`, which `daemon restart` points to; and the two
//! marks the CLI reads off a service's process, `INVOCATION_ID` and a parent named `systemd`,
//! and the words of `Failed to connect to …`, which the stand-in copies from systemd.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::support::{Run, bin, process_alive, wait_for};

/// How the stand-in user manager answers.
enum Manager {
    /// No manager is reachable: every verb but `enable` (which links files itself) fails to
    /// connect, in the words of the systemd release named.
    Unreachable(&'static str),
    /// The manager runs the job of `start`, and it fails (the words of a `Type=simple` unit
    /// whose start job failed, e.g. an `ExecStartPre=` or the start limit).
    StartFails,
    /// The manager runs the unit: `start` spawns its `ExecStart` under a process named
    /// `systemd`, with an `INVOCATION_ID`; that process records the daemon's pid and exit status.
    Runs,
}

/// What systemd 252 (Debian 12) says when it reaches no user manager (`XDG_RUNTIME_DIR` unset).
const NO_BUS_252: &str = "Failed to connect to bus: No medium found";
/// What later systemd says in the same case.
const NO_BUS_LATER: &str = "Failed to connect to user scope bus via local transport: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined (consider using --machine=<user>@.host --user to connect to bus of other user)";

/// A home, a state directory and a stand-in `systemctl` first on `PATH`.
struct StandIn {
    root: tempfile::TempDir,
    state: PathBuf,
}

impl StandIn {
    fn new(manager: Manager) -> StandIn {
        let root = tempfile::tempdir().unwrap();
        let at = |name: &str| root.path().join(name);
        for dir in ["bin", "config", "state"] {
            std::fs::create_dir(at(dir)).unwrap();
        }
        std::fs::create_dir(at("run")).unwrap();
        std::fs::set_permissions(at("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(at("state"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = |name: &str| {
            let path = at(name).display().to_string();
            assert!(!path.contains('\''), "{path}");
            path
        };
        // The manager: the parent of the service's process, as systemd is, until it exits.
        let manager_script = format!(
            "#!/bin/sh\n\
             INVOCATION_ID=6f1d0c9ab1e04c6e9a0c4c6b8d2e7f10; export INVOCATION_ID\n\
             \"$@\" &\n\
             echo $! > '{main_pid}'\n\
             wait $!\n\
             echo $? > '{exit_status}'\n",
            main_pid = path("main-pid"),
            exit_status = path("exit-status"),
        );
        let answer = match manager {
            Manager::Unreachable(words) => format!(
                "enable) exit 0 ;;\n  *) echo '{words}' >&2; exit 1 ;;"
            ),
            Manager::StartFails => "start) printf 'Job for %s failed because the control process exited with error code.\\nSee \"systemctl --user status %s\" and \"journalctl --user -xeu %s\" for details.\\n' \"$2\" \"$2\" \"$2\" >&2; exit 1 ;;\n  *) exit 0 ;;".to_string(),
            // The unit's command line, read back from what `install` wrote: its words hold no
            // quote, `$` or `%` here (the paths are plain), so the shell splits it as systemd does.
            Manager::Runs => format!(
                "start)\n    line=$(sed -n 's/^ExecStart=//p' \"$XDG_CONFIG_HOME/systemd/user/$2\")\n    eval \"set -- $line\"\n    '{manager}' \"$@\" </dev/null >>'{journal}' 2>&1 &\n    exit 0 ;;\n  *) exit 0 ;;",
                manager = path("systemd"),
                journal = path("journal"),
            ),
        };
        let systemctl = format!(
            "#!/bin/sh\n\
             printf '%s\\n' \"$*\" >> '{calls}'\n\
             [ \"$1\" = --user ] || {{ echo 'the stand-in answers --user only' >&2; exit 1; }}\n\
             shift\n\
             case \"$1\" in\n  {answer}\nesac\n",
            calls = path("calls"),
        );
        for (name, text) in [("systemd", manager_script), ("bin/systemctl", systemctl)] {
            std::fs::write(at(name), text).unwrap();
            std::fs::set_permissions(at(name), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        StandIn {
            state: at("state"),
            root,
        }
    }

    /// `agentteam ARGS --state-dir <state>` with this home, `XDG_*` and `PATH`, no stdin.
    fn agentteam(&self, args: &[&str]) -> Run {
        let at = |name: &str| self.root.path().join(name);
        let path = format!(
            "{}:{}",
            at("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        std::process::Command::new(bin())
            .args(args)
            .arg("--state-dir")
            .arg(&self.state)
            .env("PATH", path)
            .env("HOME", self.root.path())
            .env("XDG_CONFIG_HOME", at("config"))
            .env("XDG_RUNTIME_DIR", at("run"))
            .env("XDG_STATE_HOME", at("state-home"))
            .env("AGENTTEAM_NO_START", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
            .into()
    }

    /// Every `systemctl` call so far, one argv a line.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The one unit `install` wrote: its name and text.
    fn unit(&self) -> (String, String) {
        let dir = self.root.path().join("config/systemd/user");
        let units: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "service"))
            .collect();
        assert_eq!(units.len(), 1, "{units:?}");
        let name = units[0].file_name().unwrap().to_str().unwrap().to_string();
        (name, std::fs::read_to_string(&units[0]).unwrap())
    }

    /// `daemon install`, which must succeed, in the [`Manager::Runs`] scenario: the unit's name,
    /// and the pid of the daemon the stand-in manager runs once it serves.
    async fn install_running(&self) -> (String, i32) {
        let installed = self.agentteam(&["daemon", "install"]);
        assert_eq!(installed.code, 0, "{}", installed.stderr);
        let (unit, _) = self.unit();
        assert!(
            installed.stderr.contains(&format!("{unit} runs now")),
            "{}",
            installed.stderr
        );
        let main_pid = self.root.path().join("main-pid");
        let announced = self.state.join("daemon.json");
        wait_for("the unit's daemon", Duration::from_secs(30), || {
            main_pid.exists() && announced.exists()
        })
        .await;
        let pid: i32 = std::fs::read_to_string(&main_pid)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // It serves: a command finds it (and waits for it while it starts).
        let status = self.agentteam(&["status"]);
        assert_eq!(status.code, 0, "{}\n{}", status.stderr, self.journal());
        (unit, pid)
    }

    /// The daemon's exit status, as the stand-in manager saw it, once it has exited.
    async fn exit_status(&self) -> String {
        let file = self.root.path().join("exit-status");
        wait_for("the unit's daemon to exit", Duration::from_secs(30), || {
            file.exists()
        })
        .await;
        std::fs::read_to_string(file).unwrap().trim().to_string()
    }

    /// What the unit's daemon printed.
    fn journal(&self) -> String {
        std::fs::read_to_string(self.root.path().join("journal")).unwrap_or_default()
    }
}

impl Drop for StandIn {
    /// The daemon the stand-in manager runs is nobody's child here: it is stopped by its pid.
    fn drop(&mut self) {
        let Ok(pid) = std::fs::read_to_string(self.root.path().join("main-pid")) else {
            return;
        };
        if let Some(pid) = pid.trim().parse().ok().filter(|pid| process_alive(*pid))
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

/// `daemon install` with no user manager to reach writes and enables the unit, says it does not
/// run yet and how to start it, and succeeds: the login session finishes it. Both wordings of
/// systemd's connection failure are read alike.
#[test]
fn install_without_a_user_manager_says_so_and_succeeds() {
    for words in [NO_BUS_252, NO_BUS_LATER] {
        let systemd = StandIn::new(Manager::Unreachable(words));
        let installed = systemd.agentteam(&["daemon", "install"]);
        assert_eq!(installed.code, 0, "{}", installed.stderr);
        let (unit, _) = systemd.unit();
        assert!(
            installed.stderr.contains("starts at login")
                && installed.stderr.contains(&format!(
                    "systemd's user manager is not reachable here ({words}), so {unit} does not run yet: run `systemctl --user start {unit}` in your login session"
                )),
            "{}",
            installed.stderr
        );
        assert_eq!(
            systemd.calls(),
            [
                "--user daemon-reload".to_string(),
                format!("--user enable {unit}"),
                format!("--user start {unit}"),
            ]
        );
    }
}

/// A user manager that runs the start job and fails it is not an unreachable one: `install`
/// says the unit failed to start, with systemd's words and where to look, and exits 1.
#[test]
fn install_reports_a_unit_that_failed_to_start_and_exits_1() {
    let systemd = StandIn::new(Manager::StartFails);
    let installed = systemd.agentteam(&["daemon", "install"]);
    let (unit, _) = systemd.unit();
    assert_eq!(installed.code, 1, "{}", installed.stderr);
    assert!(
        installed.stderr.contains(&format!(
            "error: {unit} is installed but failed to start\n  caused by: systemctl: Job for {unit} failed because the control process exited with error code."
        )) && installed
            .stderr
            .contains(&format!("hint: `systemctl --user status {unit}`")),
        "{}",
        installed.stderr
    );
    assert!(
        !installed.stderr.contains("not reachable"),
        "{}",
        installed.stderr
    );
    assert!(
        installed.stderr.contains("starts at login"),
        "enabled all the same: {}",
        installed.stderr
    );
}

/// `daemon install` with a manager that runs the unit: reload, enable, start, in that order, and
/// the daemon that runs is the unit's command line.
#[tokio::test]
async fn install_reloads_enables_and_starts_the_unit_it_wrote() {
    let systemd = StandIn::new(Manager::Runs);
    let (unit, pid) = systemd.install_running().await;
    assert_eq!(
        systemd.calls(),
        [
            "--user daemon-reload".to_string(),
            format!("--user enable {unit}"),
            format!("--user start {unit}"),
        ]
    );
    let (_, text) = systemd.unit();
    let exec_start = text
        .lines()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|word| !word.is_empty())
        .map(|word| String::from_utf8_lossy(word).into_owned())
        .collect();
    assert_eq!(argv.join(" "), exec_start);
    assert_eq!(argv[..2], [bin(), "daemon"]);
    assert!(
        argv.windows(2)
            .any(|pair| pair == ["--state-dir", systemd.state.to_str().unwrap()]),
        "{argv:?}"
    );
    // Run as systemd runs a service: its parent is named `systemd`, and set its `INVOCATION_ID`.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let parent = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(1)
        .unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{parent}/comm")).unwrap();
    assert_eq!(comm.trim(), "systemd");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        environ
            .split(|b| *b == 0)
            .any(|entry| entry.starts_with(b"INVOCATION_ID=")),
        "no INVOCATION_ID"
    );
}

/// A daemon systemd runs is systemd's to restart: `daemon restart` refuses it, naming
/// `systemctl --user restart`, and leaves it running, untouched.
#[tokio::test]
async fn restart_refuses_a_daemon_systemd_runs_and_leaves_it_running() {
    let systemd = StandIn::new(Manager::Runs);
    let (_, pid) = systemd.install_running().await;
    let calls = systemd.calls();
    let refused = systemd.agentteam(&["daemon", "restart", "--yes"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains(&format!("runs under systemd (pid {pid})"))
            && refused.stderr.contains("`systemctl --user restart UNIT`"),
        "{}",
        refused.stderr
    );
    assert!(process_alive(pid), "the refused restart stopped the daemon");
    assert_eq!(systemd.calls(), calls, "restart asked systemd nothing");
    let status = systemd.agentteam(&["status", "--json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["pid"], pid, "the same daemon serves");
}

/// `daemon stop` leaves the unit stopped: the daemon exits 0 (a clean exit, which
/// `Restart=on-failure` never restarts), and the unit is stopped through systemd, which starts a
/// unit stopped that way again only at the next login or start.
#[tokio::test]
async fn stop_leaves_a_unit_systemd_runs_stopped() {
    let systemd = StandIn::new(Manager::Runs);
    let (unit, pid) = systemd.install_running().await;
    let stopped = systemd.agentteam(&["daemon", "stop", "--yes"]);
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    assert!(
        stopped
            .stderr
            .contains(&format!("stopped the daemon (pid {pid})"))
            && stopped.stderr.contains(&format!(
                "{unit} stays stopped until the next login (or `systemctl --user start {unit}`)"
            )),
        "{}",
        stopped.stderr
    );
    assert_eq!(systemd.exit_status().await, "0", "{}", systemd.journal());
    assert_eq!(
        systemd.calls().last().unwrap(),
        &format!("--user stop {unit}")
    );
    assert!(!process_alive(pid));
}

/// `daemon stop` of a state directory without a unit asks systemd nothing.
#[tokio::test]
async fn stop_without_a_unit_asks_systemd_nothing() {
    let systemd = StandIn::new(Manager::Runs);
    let stopped = systemd.agentteam(&["daemon", "stop", "--yes"]);
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    assert!(
        stopped.stderr.contains("no daemon is running"),
        "{}",
        stopped.stderr
    );
    assert!(systemd.calls().is_empty(), "{:?}", systemd.calls());
}

/// Restarting on failure is systemd's; the CLI's side is the written unit (on failure only, 2 s
/// apart, at most 5 starts in 5 minutes) and the daemon's exit status: one that cannot run (its
/// state directory's lock taken) exits non-zero, which that restarts, and a stopped one exits 0
/// (`stop_leaves_a_unit_systemd_runs_stopped`), which it does not.
#[tokio::test]
async fn the_installed_unit_restarts_a_failed_daemon_a_bounded_number_of_times() {
    let systemd = StandIn::new(Manager::Runs);
    let (_, pid) = systemd.install_running().await;
    let (_, text) = systemd.unit();
    let lines: Vec<&str> = text.lines().collect();
    for setting in [
        "Restart=on-failure",
        "RestartSec=2",
        "StartLimitIntervalSec=300",
        "StartLimitBurst=5",
    ] {
        assert!(lines.contains(&setting), "{setting}:\n{text}");
    }
    assert!(!text.contains("Restart=always"), "{text}");
    // The unit's command line again, while its daemon holds the lock: the start systemd would
    // count as a failure.
    let second = std::process::Command::new(bin())
        .args(["daemon", "--state-dir"])
        .arg(&systemd.state)
        .env("XDG_RUNTIME_DIR", systemd.root.path().join("run"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        second.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(process_alive(pid), "the first daemon runs on");
}

/// The launchd agent is only printed (this crate installs systemd units only): its comment says
/// so, and says to create the log directory it names, which launchd does not create.
#[test]
fn the_printed_launchd_agent_says_how_to_install_it_and_to_create_its_log_directory() {
    let systemd = StandIn::new(Manager::Runs);
    let printed = systemd.agentteam(&["daemon", "install", "--print", "--format", "launchd"]);
    assert_eq!(printed.code, 0, "{}", printed.stderr);
    let plist = printed.stdout;
    let comment = plist
        .split_once("<!--")
        .and_then(|(_, rest)| rest.split_once("-->"))
        .map(|(comment, _)| comment)
        .unwrap();
    assert!(!comment.contains("Written by"), "{comment}");
    assert!(
        comment.contains("Printed by `agentteam daemon install`")
            && comment.contains("mkdir -p ~/Library/Logs/agentteam")
            && comment
                .contains("launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/dev.agentteam."),
        "{comment}"
    );
    let logs = format!(
        "<string>{}/Library/Logs/agentteam/",
        systemd.root.path().display()
    );
    assert_eq!(plist.matches(&logs).count(), 2, "{plist}");
    assert!(systemd.calls().is_empty(), "printing asks systemd nothing");
    assert!(
        !systemd.root.path().join("Library").exists(),
        "printing writes nothing"
    );
}
