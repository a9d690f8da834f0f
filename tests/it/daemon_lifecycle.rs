//! The daemon is there when a command needs it: started on demand (detached, exactly one for
//! concurrent first uses, its log owner-only), refused with `--no-start`; stopped and restarted
//! with what that ends said first; a replaced binary reported; and its login service files
//! (a systemd user unit checked by `systemd-analyze verify --user`, a launchd property list
//! parsed) carrying the state directory and no secret; its transparent huge pages off, a
//! runtime's as they were.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Run, TestDaemon, bin, process_alive, wait_for};

/// `agentteam ARGS` with `env`, its output.
fn run_with(args: &[&str], env: &[(&str, &str)]) -> Run {
    std::process::Command::new(bin())
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// The pid `daemon.json` of `state` names.
fn announced_pid(state: &Path) -> i32 {
    let announcement: Value =
        serde_json::from_slice(&std::fs::read(state.join("daemon.json")).unwrap()).unwrap();
    announcement["pid"].as_i64().unwrap() as i32
}

/// Every live `agentteam daemon` process of `state`.
fn daemons_of(state: &Path) -> Vec<i32> {
    let needle = format!("daemon\0--state-dir\0{}", state.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            (String::from_utf8_lossy(&cmdline).contains(&needle) && process_alive(pid))
                .then_some(pid)
        })
        .collect()
}

/// Creates `dir` as a state directory must be: owner-only.
fn private_dir(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
}

/// Stops the daemon of `state` by its pid when dropped, should the test fail before it stops it
/// (it runs detached: nothing else would).
struct Detached(PathBuf);

impl Drop for Detached {
    fn drop(&mut self) {
        for pid in daemons_of(&self.0) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
    }
}

/// Stops the daemon of `state` (it runs detached: nothing else would).
fn stop(state: &Path) {
    let stopped = run_with(
        &[
            "daemon",
            "stop",
            "--state-dir",
            state.to_str().unwrap(),
            "--yes",
        ],
        &[],
    );
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    // The lock is released as the process ends: it is gone a moment later.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !daemons_of(state).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon survived its stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_command_with_no_daemon_starts_one_that_outlives_it_and_its_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    private_dir(&state);
    let _guard = Detached(state.clone());
    // On a terminal of its own, which closes (hanging up its session) when the command ends.
    let output = tokio::process::Command::new("python3")
        .args([
            "-c",
            "import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)",
        ])
        .arg(bin())
        .args(["status", "--state-dir"])
        .arg(&state)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("daemon     up"), "{said}");
    let log = state.join("daemon.log");
    assert!(
        said.contains(&format!("started the daemon for `{}`", state.display()))
            && said.contains(&format!("its log: {}", log.display())),
        "{said}"
    );
    let pid = announced_pid(&state);
    assert!(
        process_alive(pid),
        "the daemon died with its command's terminal"
    );
    assert_eq!(daemons_of(&state), vec![pid]);
    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the log is owner-only");
    // It is its own session's leader: no terminal of the command reaches it.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], pid.to_string(), "its session id is its own pid");
    // The next command finds it, and starts nothing.
    let again = run_with(&["runs", "--state-dir", state.to_str().unwrap()], &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        !again.stderr.contains("started the daemon"),
        "{}",
        again.stderr
    );
    stop(&state);
}

#[tokio::test]
async fn ten_concurrent_first_uses_start_exactly_one_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    private_dir(&state);
    let _guard = Detached(state.clone());
    let commands = (0..10).map(|_| {
        tokio::process::Command::new(bin())
            .args(["status", "--json", "--state-dir"])
            .arg(&state)
            .stdin(std::process::Stdio::null())
            .output()
    });
    let outputs = futures_util::future::join_all(commands).await;
    let mut started = 0;
    let mut pids = Vec::new();
    for output in outputs {
        let output = output.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        started += stderr.matches("started the daemon").count();
        let status: Value = serde_json::from_slice(&output.stdout).unwrap();
        pids.push(status["pid"].as_u64().unwrap());
    }
    assert_eq!(started, 1, "one command started the daemon");
    pids.dedup();
    assert_eq!(
        pids.len(),
        1,
        "every command talked to the same daemon: {pids:?}"
    );
    assert_eq!(daemons_of(&state).len(), 1);
    stop(&state);
}

#[test]
fn no_start_refuses_with_the_hint() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    for (args, env) in [
        (
            vec![
                "status",
                "--no-start",
                "--state-dir",
                state.to_str().unwrap(),
            ],
            vec![],
        ),
        (
            vec!["agent", "list", "--state-dir", state.to_str().unwrap()],
            vec![("AGENTTEAM_NO_START", "1")],
        ),
        (
            vec![
                "admin",
                "workspace",
                "--name",
                "x",
                "--no-start",
                "--state-dir",
                state.to_str().unwrap(),
            ],
            vec![],
        ),
    ] {
        let refused = run_with(&args, &env);
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains(&format!(
                "no daemon is running with state dir `{}`",
                state.display()
            )),
            "{}",
            refused.stderr
        );
        assert!(
            refused.stderr.contains("`--no-start`"),
            "{}",
            refused.stderr
        );
    }
    assert!(daemons_of(&state).is_empty());
    assert!(!state.join("daemon.log").exists(), "nothing was started");
}

/// An on-demand start runs the flags the state directory's last daemon recorded, and never
/// starts in a directory that does not exist, or in one a daemon of another server used
/// without recording its flags.
#[tokio::test]
async fn an_on_demand_start_takes_the_recorded_flags_and_no_guess() {
    let mut daemon = TestDaemon::start(&["--token-ttl-secs", "3600"]).await;
    let state = daemon.state_dir.clone();
    let _guard = Detached(state.clone());
    assert_eq!(daemon.stop().await, 0);
    let started = run_with(&["status", "--state-dir", state.to_str().unwrap()], &[]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    assert!(
        started.stderr.contains("started the daemon"),
        "{}",
        started.stderr
    );
    let pid = announced_pid(&state);
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--token-ttl-secs\u{0}3600"),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    stop(&state);
    drop(daemon);

    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("typo");
    let refused = run_with(&["status", "--state-dir", missing.to_str().unwrap()], &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("does not exist"),
        "{}",
        refused.stderr
    );
    assert!(!missing.exists(), "nothing was created");
    let remote = root.path().join("remote");
    private_dir(&remote);
    std::fs::write(remote.join("identity.json"), "{}").unwrap();
    let refused = run_with(&["status", "--state-dir", remote.to_str().unwrap()], &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("used another server"),
        "{}",
        refused.stderr
    );
    assert!(daemons_of(&remote).is_empty());
}

#[tokio::test]
async fn stop_says_what_it_ends_and_asks_then_revokes_and_stops() {
    let mut daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let mut runtime = daemon.launch(
        "worker",
        &[],
        r#"dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 60"#,
    );
    let credentials = PathBuf::from(runtime.line().await);
    let state = daemon.state_dir.to_str().unwrap().to_string();
    // Not a terminal and no `--yes`: refused, nothing stopped.
    let refused = run_with(&["daemon", "stop", "--state-dir", &state], &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("revokes the authorization of 1 running runtime and stops it"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("--yes"), "{}", refused.stderr);
    assert!(credentials.exists());
    let stopped = run_with(&["daemon", "stop", "--state-dir", &state, "--yes"], &[]);
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    assert!(
        stopped.stderr.contains("1 runtime revoked and stopped"),
        "{}",
        stopped.stderr
    );
    let exit = tokio::time::timeout(Duration::from_secs(30), daemon.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.code(), Some(0));
    let _ = runtime.child.wait().await;
    assert!(
        !credentials.exists(),
        "the runtime's credentials outlived the stop"
    );
    // The strong shutdown's order: every authorization revoked before the drain.
    let log = daemon.log();
    assert!(
        log.contains("daemon stopping: revoking credentials and stopping runtimes"),
        "{log}"
    );
    // Nothing runs now: a second stop says so.
    let again = run_with(&["daemon", "stop", "--state-dir", &state], &[]);
    assert_eq!(again.code, 0);
    assert!(
        again.stderr.contains("no daemon is running"),
        "{}",
        again.stderr
    );
}

#[tokio::test]
async fn restart_runs_the_daemon_again_with_its_flags() {
    let daemon = TestDaemon::start(&["--token-ttl-secs", "3600"]).await;
    let state = daemon.state_dir.clone();
    let _guard = Detached(state.clone());
    let before = announced_pid(&state);
    let restarted = run_with(
        &[
            "daemon",
            "restart",
            "--state-dir",
            state.to_str().unwrap(),
            "--yes",
        ],
        &[],
    );
    assert_eq!(restarted.code, 0, "{}", restarted.stderr);
    let after = announced_pid(&state);
    assert_ne!(before, after);
    assert!(process_alive(after));
    let recorded: Vec<String> =
        serde_json::from_slice(&std::fs::read(state.join("daemon.args")).unwrap()).unwrap();
    let args: Vec<&str> = recorded.iter().map(String::as_str).collect();
    assert!(
        args.windows(2).any(|w| w == ["--token-ttl-secs", "3600"]),
        "{args:?}"
    );
    let status = run_with(&["status", "--state-dir", state.to_str().unwrap()], &[]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    stop(&state);
    drop(daemon);
}

#[tokio::test]
async fn status_says_when_the_binary_was_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let installed = dir.path().join("bin/agentteam");
    std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
    std::fs::copy(bin(), &installed).unwrap();
    let state = dir.path().join("state");
    let status = || {
        run_with(
            &[
                "status",
                "--json",
                "--no-start",
                "--state-dir",
                state.to_str().unwrap(),
            ],
            &[],
        )
    };
    let mut daemon = tokio::process::Command::new(&installed)
        .args(["daemon", "--state-dir"])
        .arg(&state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for("the daemon", Duration::from_secs(30), || {
        state.join("daemon.json").exists()
    })
    .await;
    let before: Value = serde_json::from_str(&status().stdout).unwrap();
    assert_eq!(before["binary"]["replaced"], false, "{before}");
    assert_eq!(before["binary"]["path"], installed.to_str().unwrap());
    // An upgrade puts a new file at the path (a copy renamed over it, as installers do).
    let upgrade = dir.path().join("bin/agentteam.new");
    std::fs::copy(bin(), &upgrade).unwrap();
    std::fs::rename(&upgrade, &installed).unwrap();
    let after: Value = serde_json::from_str(&status().stdout).unwrap();
    assert_eq!(after["binary"]["replaced"], true, "{after}");
    let text = run_with(
        &[
            "status",
            "--no-start",
            "--state-dir",
            state.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        text.stdout.contains("`agentteam daemon restart` runs it"),
        "{}",
        text.stdout
    );
    let _ = daemon.start_kill();
    let _ = daemon.wait().await;
}

/// A private `XDG_RUNTIME_DIR`, which `systemd-analyze verify --user` needs.
fn runtime_dir(root: &Path) -> PathBuf {
    let dir = root.join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// `systemd-analyze verify --user UNIT`: its exit code and what it printed.
fn verify(unit: &Path, runtime: &Path) -> Option<(i32, String)> {
    let output = std::process::Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime)
        .output();
    match output {
        Ok(output) => Some((
            output.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        )),
        Err(_) => {
            crate::support::missing_precondition(
                "systemd-analyze is missing (scripts/test installs systemd as root)",
                "the unit check",
            );
            None
        }
    }
}

/// `agentteam daemon install --print [--format F]` for `state` with a remote server whose
/// operator token file holds a secret: the file it prints, which must not hold the secret.
fn printed(format: &[&str], state: &Path, token_file: &Path) -> String {
    std::fs::write(token_file, "ato_SECRETSECRETSECRET").unwrap();
    let printed = run_with(
        &[
            &["daemon", "install", "--print"][..],
            format,
            &[
                "--state-dir",
                state.to_str().unwrap(),
                "--server-url",
                "https://agentteam.example",
                "--operator-token-file",
                token_file.to_str().unwrap(),
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(printed.code, 0, "{}", printed.stderr);
    assert!(!printed.stdout.contains("SECRET"), "{}", printed.stdout);
    printed.stdout
}

#[test]
fn the_systemd_unit_verifies_carries_the_state_dir_and_no_secret() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("my state");
    let token_file = root.path().join("operator.token");
    let unit = printed(&[], &state, &token_file);
    assert!(
        unit.contains(&format!("--state-dir \"{}\"", state.display())),
        "{unit}"
    );
    assert!(unit.contains("Restart=on-failure") && unit.contains("StartLimitBurst=5"));
    assert!(
        !unit.contains("SECRET") && !unit.contains("Environment"),
        "{unit}"
    );
    let runtime = runtime_dir(root.path());
    let file = root.path().join("agentteam.service");
    std::fs::write(&file, &unit).unwrap();
    let Some((code, said)) = verify(&file, &runtime) else {
        return;
    };
    assert_eq!(
        (code, said.as_str()),
        (0, ""),
        "the unit does not verify cleanly"
    );
    // The check catches a broken unit: one without its command fails, an unknown setting warns.
    let broken = root.path().join("broken.service");
    let without: String = unit
        .lines()
        .filter(|line| !line.starts_with("ExecStart="))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&broken, without).unwrap();
    let (code, said) = verify(&broken, &runtime).unwrap();
    assert_ne!(code, 0, "{said}");
    let typo = root.path().join("typo.service");
    std::fs::write(
        &typo,
        unit.replace("Restart=on-failure", "Restat=on-failure"),
    )
    .unwrap();
    let (_, said) = verify(&typo, &runtime).unwrap();
    assert!(said.contains("Unknown key"), "{said}");
}

#[test]
fn the_launchd_plist_parses_with_the_expected_keys() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let token_file = root.path().join("operator.token");
    let plist = printed(&["--format", "launchd"], &state, &token_file);
    let file = root.path().join("agentteam.plist");
    std::fs::write(&file, &plist).unwrap();
    let parsed = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let plist: Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert!(
        plist["Label"]
            .as_str()
            .unwrap()
            .starts_with("dev.agentteam.")
    );
    let arguments: Vec<&str> = plist["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(arguments[0], bin());
    assert_eq!(
        &arguments[1..],
        [
            "daemon",
            "--state-dir",
            state.to_str().unwrap(),
            "--operator-token-file",
            token_file.to_str().unwrap(),
            "--server-url",
            "https://agentteam.example",
        ]
    );
    assert_eq!(plist["RunAtLoad"], true);
    assert_eq!(plist["KeepAlive"]["SuccessfulExit"], false);
    assert!(plist["ThrottleInterval"].as_u64().unwrap() >= 10);
    assert!(
        plist["StandardErrorPath"]
            .as_str()
            .unwrap()
            .contains("Library/Logs/agentteam")
    );
    assert!(plist.get("EnvironmentVariables").is_none());
}

#[test]
fn install_writes_the_unit_and_uninstall_removes_it_never_a_users_own() {
    if std::process::Command::new("systemctl")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::support::missing_precondition(
            "systemctl is missing (scripts/test installs systemd as root)",
            "the install test",
        );
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let config = root.path().join("config");
    let runtime = runtime_dir(root.path());
    // No user manager to reach: nothing is started on this machine.
    let env = [
        ("HOME", root.path().to_str().unwrap()),
        ("XDG_CONFIG_HOME", config.to_str().unwrap()),
        ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent"),
    ];
    let state_flag = ["--state-dir", state.to_str().unwrap()];
    let installed = run_with(&[&["daemon", "install"][..], &state_flag].concat(), &env);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let units: Vec<PathBuf> = std::fs::read_dir(config.join("systemd/user"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "service"))
        .collect();
    assert_eq!(units.len(), 1, "{units:?}");
    // Enabled at login where systemctl works offline: a link in `default.target.wants`.
    let wants = config.join("systemd/user/default.target.wants");
    let linked = || {
        std::fs::read_dir(&wants)
            .map(|entries| entries.count())
            .unwrap_or(0)
    };
    let unit = std::fs::read_to_string(&units[0]).unwrap();
    assert!(
        unit.contains(&format!("--state-dir {}", state.display())),
        "{unit}"
    );
    // `systemctl --user enable` works without a user manager: it links the unit for login.
    assert!(
        installed.stderr.contains("starts at login"),
        "{}",
        installed.stderr
    );
    assert_eq!(linked(), 1, "the unit is linked into default.target.wants");
    assert!(
        installed.stderr.contains("does not run yet"),
        "no user manager here: {}",
        installed.stderr
    );
    let printed = run_with(
        &[&["daemon", "install", "--print"][..], &state_flag].concat(),
        &env,
    );
    assert_eq!(printed.stdout, unit, "install writes what --print shows");
    let removed = run_with(&[&["daemon", "uninstall"][..], &state_flag].concat(), &env);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert!(!units[0].exists());
    assert_eq!(linked(), 0, "the login link went with the unit");
    // A unit of the user's own at that path is left alone.
    std::fs::write(&units[0], "[Service]\nExecStart=/bin/true\n").unwrap();
    let refused = run_with(&[&["daemon", "install"][..], &state_flag].concat(), &env);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("was not written by"),
        "{}",
        refused.stderr
    );
    let kept = run_with(&[&["daemon", "uninstall"][..], &state_flag].concat(), &env);
    assert_eq!(kept.code, 2);
    assert_eq!(
        std::fs::read_to_string(&units[0]).unwrap(),
        "[Service]\nExecStart=/bin/true\n"
    );
}

/// The embedded database still held when a daemon starts (here by a server process, as the
/// daemon being replaced holds it until its process ends): the daemon waits, says so, and starts
/// once the database is free.
#[tokio::test]
async fn a_new_daemon_waits_for_the_database_the_old_one_still_holds() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    agentteam::platform::fs::create_private_dirs(&state).unwrap();
    let database = format!("sqlite://{}", state.join("server.db").display());
    let (mut holder, _, _) =
        crate::support::spawn_server_on(&database, &root.path().join("holder.token"), None).await;
    let release = async {
        let waiting = || {
            std::fs::read_dir(root.path())
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("daemon-"))
                .any(|e| {
                    std::fs::read_to_string(e.path())
                        .unwrap_or_default()
                        .contains("the embedded database is still in use")
                })
        };
        wait_for(
            "the daemon waiting for the database",
            Duration::from_secs(10),
            waiting,
        )
        .await;
        holder.start_kill().unwrap();
        holder.wait().await.unwrap();
    };
    let (daemon, ()) = tokio::join!(TestDaemon::start_in(root.path(), &[]), release);
    daemon.add_agent("after").await;
}

/// `THP_enabled` of the process `pid` (`self` for this one), from its status.
fn huge_pages_enabled(pid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("THP_enabled:"))
        .unwrap_or_else(|| panic!("no THP_enabled in the status of {pid}"))
        .trim()
        .to_string()
}

/// The daemon and each `agentteam run` relay run without transparent huge pages (their own flag;
/// the kernel's setting is untouched), and the runtime a relay starts gets back the setting this
/// test started with: the flag would otherwise pass to it across fork and exec.
#[tokio::test]
async fn huge_pages_are_off_in_the_daemon_and_as_they_were_in_a_runtime() {
    let own = huge_pages_enabled("self");
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("a").await;
    let daemon_pid = daemon.child.id().unwrap().to_string();
    assert_eq!(huge_pages_enabled(&daemon_pid), "0");
    // The runtime's shell: its parent is the relay; `grep` inherits the shell's flag.
    let script = "grep THP_enabled /proc/$PPID/status; grep THP_enabled /proc/self/status";
    let output = daemon
        .cli(&["run", "--agent", "a", "--", "sh", "-c", script])
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let flags: Vec<&str> = stdout
        .lines()
        .map(|line| line.trim_start_matches("THP_enabled:").trim())
        .collect();
    assert_eq!(flags, ["0", own.as_str()], "{stdout}");
}
