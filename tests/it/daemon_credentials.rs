//! The daemon's runtime credentials end to end: a real daemon (embedded server), real runtime
//! processes started by `agentteam run`, and the Exec catalog route as the first authenticated
//! route.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{TestDaemon, wait_for};

/// The expiry (epoch ms) inside a daemon token's claims.
fn expiry_ms(token: &str) -> i64 {
    let claims = token.split('.').nth(1).expect("v1.claims.mac");
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
    claims["e"].as_i64().unwrap()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Presents `token` on the catalog route of `(workspace, agent)` until it is refused, and holds
/// the refusal to the token's own expiry: every answer before the expiry is 200, every answer
/// after it is 403 (the daemon refuses at `now >= expiry`). It measures the bound instead of
/// sleeping past it.
async fn refused_from_its_expiry(daemon: &TestDaemon, workspace: &str, agent: &str, token: &str) {
    let expiry = expiry_ms(token);
    loop {
        let before = now_ms();
        let status = daemon.catalog(workspace, agent, Some(token)).await.0;
        let after = now_ms();
        match status {
            200 => assert!(
                before < expiry,
                "accepted {} ms past its expiry",
                before - expiry
            ),
            403 => {
                assert!(
                    after >= expiry,
                    "refused {} ms before its expiry",
                    expiry - after
                );
                return;
            }
            other => panic!("unexpected status {other}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts no observed token (nor its signature) appears in the daemon's log.
#[track_caller]
fn assert_log_has_no_token(daemon: &TestDaemon, tokens: &[String]) {
    let log = daemon.log();
    assert!(!log.is_empty(), "the daemon logged nothing");
    for token in tokens {
        let signature = token.rsplit('.').next().unwrap();
        assert!(
            !log.contains(token.as_str()) && !log.contains(signature),
            "a token reached the daemon's log"
        );
    }
}

#[tokio::test]
async fn a_runtime_gets_paths_not_tokens_in_owner_only_files() {
    let mut daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("a").await;
    let script = r#"cat "$AGENTTEAM_EXEC_TOKEN_FILE" >/dev/null; env; echo ---stat; stat -c '%a %u %F' "$(dirname "$AGENTTEAM_EXEC_TOKEN_FILE")" "$AGENTTEAM_EXEC_TOKEN_FILE"; echo ---token; cat "$AGENTTEAM_EXEC_TOKEN_FILE"; echo; dirname "$AGENTTEAM_EXEC_TOKEN_FILE""#;
    let output = daemon
        .cli(&["run", "--agent", "a", "--", "sh", "-c", script])
        .env("AGENTTEAM_EXEC_TOKEN", "leaked-from-the-shell")
        .env("agentteam_exec_token", "x-lowercase-leak")
        .env("AgentTeam_Exec_Base_Url", "http://evil.invalid")
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
    let (env, rest) = stdout.split_once("---stat\n").unwrap();
    let (stat, rest) = rest.split_once("---token\n").unwrap();
    let mut rest = rest.lines();
    let token = rest.next().unwrap().to_string();
    let dir = PathBuf::from(rest.next().unwrap());

    let names: Vec<&str> = env
        .lines()
        .filter_map(|line| line.split_once('=').map(|(n, _)| n))
        .collect();
    assert!(
        names.contains(&"AGENTTEAM_EXEC_BASE_URL") && names.contains(&"AGENTTEAM_EXEC_TOKEN_FILE"),
        "{env}"
    );
    let exec_vars: Vec<&&str> = names
        .iter()
        .filter(|n| n.to_ascii_uppercase().starts_with("AGENTTEAM_EXEC"))
        .collect();
    assert_eq!(exec_vars.len(), 2, "only the canonical pair: {exec_vars:?}");
    assert!(
        !env.contains("leak") && !env.contains("evil.invalid"),
        "a shell-captured variable reached the runtime:\n{env}"
    );
    assert!(!env.contains(&token), "the token is in the environment");
    let euid = rustix::process::geteuid().as_raw();
    assert_eq!(
        stat.lines().collect::<Vec<_>>(),
        [
            format!("700 {euid} directory"),
            format!("600 {euid} regular file")
        ]
    );

    // The runtime exited: its directory is gone and its token is refused.
    assert!(!dir.exists(), "{} still exists", dir.display());
    let agent = daemon.add_agent("b").await;
    let (status, _) = daemon
        .catalog(&daemon.workspace_id(), &agent, Some(&token))
        .await;
    assert_eq!(status, 403);
    assert_eq!(daemon.stop().await, 0);
    assert_log_has_no_token(&daemon, &[token]);
}

/// `agentteam run` from inside a runtime whose environment carries the parent's variables (its
/// real credential paths, and shell-captured ones in several casings, and the collector's
/// headers): neither the Kimi version probe nor the new runtime sees any of them. The new runtime
/// gets its own fresh pair only; the probe gets none at all.
#[tokio::test]
async fn no_child_of_a_launch_sees_the_parent_runtimes_variables() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("parent").await;
    daemon.add_agent("child").await;
    let dir = tempfile::tempdir().unwrap();
    let (probe, runtime) = (dir.path().join("probe.env"), dir.path().join("runtime.env"));
    let parent = dir.path().join("parent.env");
    let kimi = dir.path().join("bin").join("kimi");
    std::fs::create_dir_all(kimi.parent().unwrap()).unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::write(
        &kimi,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then env > {probe}; echo 2.1.0; exit 0; fi\nenv > {runtime}\n",
            probe = probe.display(),
            runtime = runtime.display()
        ),
    )
    .unwrap();
    agentteam::platform::fs::set_mode(&kimi, 0o755).unwrap();
    let script = format!(
        r#"env > {parent}
export agentteam_exec_token=marker-lower AgentTeam_Mcp_Token_File=/marker/mixed
export AGENTTEAM_EXEC_TOKEN=marker-raw AGENTTEAM_MEMORY_DIR=/marker/memory
export OTEL_EXPORTER_OTLP_HEADERS=authorization=marker-collector
HOME={home} agentteam run --state-dir {state} --agent child -- {kimi}
echo "exit $?""#,
        parent = parent.display(),
        home = dir.path().join("home").display(),
        state = daemon.state_dir.display(),
        kimi = kimi.display(),
    );
    let mut launched = daemon.launch("parent", &[], &script);
    assert_eq!(launched.line().await, "exit 0");
    let _ = launched.child.wait().await;

    let parent = std::fs::read_to_string(&parent).unwrap();
    let parent_values: Vec<&str> = parent
        .lines()
        .filter_map(|line| line.split_once('='))
        .filter(|(name, _)| agentteam::daemon::runtime::env::is_daemon_owned(name))
        .map(|(_, value)| value)
        .collect();
    assert_eq!(
        parent_values.len(),
        5,
        "the parent's own variables: {parent}"
    );
    let owned = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|line| line.split_once('=').map(|(name, _)| name.to_string()))
            .filter(|name| {
                agentteam::daemon::runtime::env::is_daemon_owned(name)
                    || name.to_ascii_uppercase().contains("OTLP_HEADERS")
            })
            .collect()
    };
    let probe = std::fs::read_to_string(&probe).expect("the version probe ran");
    assert_eq!(owned(&probe), Vec::<String>::new(), "{probe}");
    let runtime = std::fs::read_to_string(&runtime).expect("the runtime ran");
    let mut names = owned(&runtime);
    names.sort();
    assert_eq!(
        names,
        [
            "AGENTTEAM_EXEC_BASE_URL",
            "AGENTTEAM_EXEC_TOKEN_FILE",
            "AGENTTEAM_MCP_TOKEN_FILE",
            "AGENTTEAM_MCP_URL",
            "AGENTTEAM_MEMORY_DIR"
        ],
        "only the new launch's own: {runtime}"
    );
    for text in [&probe, &runtime] {
        assert!(!text.contains("marker"), "{text}");
        for value in &parent_values {
            assert!(
                !text
                    .lines()
                    .any(|line| line.ends_with(&format!("={value}"))),
                "a parent's value `{value}` reached a child:\n{text}"
            );
        }
    }
}

#[tokio::test]
async fn tokens_rotate_without_a_restart_and_each_generation_keeps_its_own_expiry() {
    let mut daemon =
        TestDaemon::start(&["--token-ttl-secs", "3", "--rotation-tick-ms", "100"]).await;
    let agent = daemon.add_agent("rotor").await;
    let workspace = daemon.workspace_id();
    let script = r#"last=""; end=$(($(date +%s) + 10)); while [ "$(date +%s)" -lt "$end" ]; do t=$(cat "$AGENTTEAM_EXEC_TOKEN_FILE"); if [ "$t" != "$last" ]; then code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $t" "$AGENTTEAM_EXEC_BASE_URL/catalog"); echo "$code $t"; last="$t"; fi; sleep 0.1; done"#;
    let mut runtime = daemon.launch("rotor", &[], script);

    let mut tokens: Vec<(u16, String)> = Vec::new();
    let mut checked_old = false;
    while let Ok(Some(line)) =
        tokio::time::timeout(Duration::from_secs(20), runtime.lines.next_line())
            .await
            .expect("output in time")
    {
        let (code, token) = line.split_once(' ').unwrap();
        tokens.push((code.parse().unwrap(), token.to_string()));
        if tokens.len() == 2 && !checked_old {
            // The first generation still works after the second was published...
            let first = tokens[0].1.clone();
            assert!(now_ms() < expiry_ms(&first));
            assert_eq!(
                daemon.catalog(&workspace, &agent, Some(&first)).await.0,
                200
            );
            // ...until its own expiry, and not after (the runtime is still running).
            refused_from_its_expiry(&daemon, &workspace, &agent, &first).await;
            checked_old = true;
        }
    }
    assert_eq!(runtime.child.wait().await.unwrap().code(), Some(0));
    assert!(checked_old);
    assert!(
        tokens.len() >= 3,
        "the file changed only {} times in 10 s",
        tokens.len() - 1
    );
    assert!(
        tokens.iter().all(|(code, _)| *code == 200),
        "a fresh generation was refused: {tokens:?}"
    );
    assert_eq!(daemon.stop().await, 0);
    assert_log_has_no_token(
        &daemon,
        &tokens.into_iter().map(|(_, t)| t).collect::<Vec<_>>(),
    );
}

/// Makes `dir` unwritable even for root (`chattr +i`), or for its owner otherwise.
fn set_unwritable(dir: &Path, unwritable: bool) {
    if rustix::process::geteuid().is_root() {
        let status = std::process::Command::new("chattr")
            .arg(if unwritable { "+i" } else { "-i" })
            .arg(dir)
            .status()
            .expect("chattr runs");
        assert!(status.success(), "chattr failed");
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode(if unwritable { 0o500 } else { 0o700 }),
        )
        .unwrap();
    }
}

/// Strong shutdown retries a credential directory it cannot remove, within its bound: one that
/// becomes removable while the daemon stops is gone when it exits; one that stays is reported and
/// left for the next daemon, which removes it before it serves.
#[tokio::test]
async fn strong_shutdown_retries_credential_removal_and_reports_what_is_left() {
    let root = tempfile::tempdir().unwrap();
    let mut daemon = TestDaemon::start_in(root.path(), &[]).await;
    daemon.add_agent("mended").await;
    daemon.add_agent("stuck").await;
    let mut dirs = Vec::new();
    let mut runtimes = Vec::new();
    for agent in ["mended", "stuck"] {
        let mut runtime = daemon.launch(
            agent,
            &[],
            r#"dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 60"#,
        );
        let dir = PathBuf::from(runtime.line().await);
        set_unwritable(&dir, true);
        dirs.push(dir);
        runtimes.push(runtime);
    }
    let pid = daemon.child.id().unwrap() as i32;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    wait_for(
        "a failed removal at shutdown",
        Duration::from_secs(20),
        || daemon.log().contains("credential cleanup failed; retrying"),
    )
    .await;
    set_unwritable(&dirs[0], false);
    let status = tokio::time::timeout(Duration::from_secs(30), daemon.child.wait())
        .await
        .expect("the daemon exits within its shutdown bound")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        !dirs[0].exists(),
        "a directory removable again during shutdown stayed"
    );
    assert!(dirs[1].exists());
    let log = daemon.log();
    assert!(
        log.contains("credential directories are left after shutdown"),
        "{log}"
    );
    set_unwritable(&dirs[1], false);
    for mut runtime in runtimes {
        let _ = runtime.child.wait().await;
    }
    let next = TestDaemon::start_in(root.path(), &[]).await;
    assert!(!dirs[1].exists(), "the next daemon removes what was left");
    drop(next);
}

#[tokio::test]
async fn a_failed_rotation_keeps_the_current_token_working() {
    let daemon = TestDaemon::start(&["--token-ttl-secs", "4", "--rotation-tick-ms", "100"]).await;
    let agent = daemon.add_agent("stuck").await;
    let workspace = daemon.workspace_id();
    let mut runtime = daemon.launch(
        "stuck",
        &[],
        r#"dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 12"#,
    );
    let dir = PathBuf::from(runtime.line().await);
    let token_file = dir.join("token");
    let first = std::fs::read_to_string(&token_file).unwrap();

    set_unwritable(&dir, true);
    wait_for("a failed rotation", Duration::from_secs(6), || {
        daemon.log().contains("credential rotation failed")
    })
    .await;
    let still = std::fs::read_to_string(&token_file).unwrap();
    assert_eq!(still, first, "the current file was touched");
    assert!(now_ms() < expiry_ms(&first));
    assert_eq!(
        daemon.catalog(&workspace, &agent, Some(&first)).await.0,
        200,
        "the current generation was revoked by a failed rotation"
    );
    let entries: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "bin")
        .collect();
    let mut entries = entries;
    entries.sort();
    assert_eq!(
        entries,
        ["catalog.json", "mcp-token", "token"],
        "no temp files are left behind"
    );

    set_unwritable(&dir, false);
    wait_for("rotation to resume", Duration::from_secs(10), || {
        std::fs::read_to_string(&token_file).is_ok_and(|t| t != first)
    })
    .await;
    let next = std::fs::read_to_string(&token_file).unwrap();
    assert_eq!(daemon.catalog(&workspace, &agent, Some(&next)).await.0, 200);
    let _ = runtime.child.start_kill();
    let _ = runtime.child.wait().await;
}

#[tokio::test]
async fn runtime_exit_revokes_at_once_and_removes_the_directory() {
    let daemon = TestDaemon::start(&[]).await;
    let agent = daemon.add_agent("brief").await;
    let output = daemon
        .cli(&["run", "--agent", "brief", "--", "sh", "-c", r#"cat "$AGENTTEAM_EXEC_TOKEN_FILE"; echo; dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exit 3"#])
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(3),
        "run exits with the runtime's code"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.lines();
    let (token, dir) = (lines.next().unwrap(), Path::new(lines.next().unwrap()));
    // `run` returns only after revocation and cleanup.
    assert!(!dir.exists());
    assert_eq!(
        daemon
            .catalog(&daemon.workspace_id(), &agent, Some(token))
            .await
            .0,
        403
    );
}

#[tokio::test]
async fn a_new_daemon_removes_a_killed_daemons_credentials_before_serving() {
    let root = tempfile::tempdir().unwrap();
    let mut first = TestDaemon::start_in(root.path(), &[]).await;
    first.add_agent("orphan").await;
    let mut runtime_cli = first.launch(
        "orphan",
        &[],
        r#"echo "$$"; dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 60"#,
    );
    let runtime_pid: i32 = runtime_cli.line().await.parse().unwrap();
    let dir = PathBuf::from(runtime_cli.line().await);
    assert!(dir.exists());

    first.child.start_kill().unwrap();
    first.child.wait().await.unwrap();
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(runtime_pid).unwrap(),
        rustix::process::Signal::KILL,
    );
    let _ = runtime_cli.child.wait().await;
    assert!(dir.exists(), "a SIGKILLed daemon cannot clean up");

    // The new daemon announces itself only after stale directories are gone.
    let second = TestDaemon::start_in(root.path(), &[]).await;
    assert!(!dir.exists(), "the stale credential directory survived");
    assert!(
        !dir.parent().unwrap().exists(),
        "the stale instance directory survived"
    );
    assert!(
        second
            .log()
            .contains("removed credential directories of a previous daemon")
    );
}

#[tokio::test]
async fn every_credential_failure_gets_the_same_bytes() {
    let mut daemon =
        TestDaemon::start(&["--token-ttl-secs", "4", "--rotation-tick-ms", "100"]).await;
    let agent = daemon.add_agent("main").await;
    let other_agent = daemon.add_agent("other").await;
    let workspace = daemon.workspace_id();

    let mut runtime = daemon.launch(
        "main",
        &[],
        r#"dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 8"#,
    );
    let dir = PathBuf::from(runtime.line().await);
    let first = std::fs::read_to_string(dir.join("token")).unwrap();
    assert_eq!(
        daemon.catalog(&workspace, &agent, Some(&first)).await.0,
        200
    );
    // Flip the first character of the MAC: it carries six whole bits, so the result still decodes
    // (flipping the last one can leave stray padding bits, which is `malformed`, 1 time in 16).
    let mac_at = first.rfind('.').unwrap() + 1;
    let flipped = if first[mac_at..].starts_with('A') {
        "B"
    } else {
        "A"
    };
    let mut bad_signature = first.clone();
    bad_signature.replace_range(mac_at..mac_at + 1, flipped);
    refused_from_its_expiry(&daemon, &workspace, &agent, &first).await;
    let current = std::fs::read_to_string(dir.join("token")).unwrap();
    let mcp = std::fs::read_to_string(dir.join("mcp-token")).unwrap();
    // A token of a runtime that has exited (well within its lifetime): revoked.
    let output = daemon
        .cli(&[
            "run",
            "--agent",
            "main",
            "--",
            "sh",
            "-c",
            r#"cat "$AGENTTEAM_EXEC_TOKEN_FILE""#,
        ])
        .output()
        .await
        .unwrap();
    let revoked = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        daemon.catalog(&workspace, &agent, Some(&current)).await.0,
        200,
        "the rotated token works"
    );

    let cases: Vec<(&str, String, Option<String>)> = vec![
        ("missing", agent.clone(), None),
        ("malformed", agent.clone(), Some("not-a-token".into())),
        ("bad signature", agent.clone(), Some(bad_signature)),
        ("expired", agent.clone(), Some(first.clone())),
        ("revoked", agent.clone(), Some(revoked.clone())),
        ("wrong scope", agent.clone(), Some(mcp.clone())),
        (
            "other agent's path",
            other_agent.clone(),
            Some(current.clone()),
        ),
    ];
    let mut bodies = Vec::new();
    for (kind, path_agent, bearer) in &cases {
        let (status, body) = daemon
            .catalog(&workspace, path_agent, bearer.as_deref())
            .await;
        assert_eq!(status, 403, "{kind}");
        bodies.push(body);
    }
    assert!(
        bodies.windows(2).all(|pair| pair[0] == pair[1]),
        "403 bodies differ"
    );
    let _ = runtime.child.start_kill();
    let _ = runtime.child.wait().await;
    assert_eq!(daemon.stop().await, 0);
    let log = daemon.log();
    for class in [
        "expired",
        "revoked-inactive",
        "scope-mismatch",
        "bad-signature",
        "malformed",
        "missing",
    ] {
        assert!(
            log.contains(&format!("class=\"{class}\"")) || log.contains(&format!("class={class}")),
            "no `{class}` diagnostic in the log:\n{log}"
        );
    }
    assert_log_has_no_token(&daemon, &[first, current, mcp, revoked]);
}

#[tokio::test]
async fn launch_admission_stops_at_512() {
    let mut daemon = TestDaemon::start(&["--rotation-tick-ms", "100"]).await;
    daemon.add_agent("many").await;
    let token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    let workdir = daemon.state_dir.display().to_string();
    let launches = (0..513).map(|_| {
        let request = daemon
            .client
            .post(format!("{}/api/admin/runs", daemon.base_url))
            .bearer_auth(&token)
            .json(&serde_json::json!({
                "agent": "many", "workdir": workdir, "argv": ["sleep", "60"], "env": []
            }));
        async move { request.send().await.unwrap() }
    });
    let responses = futures_join_all(launches).await;
    let admitted = responses.iter().filter(|r| r.status() == 200).count();
    let refused: Vec<&reqwest::Response> = responses.iter().filter(|r| r.status() == 409).collect();
    assert_eq!((admitted, refused.len()), (512, 1));
    drop(responses);
    // Closing the streams stops the runtimes; shutdown then finds nothing left to clean.
    assert_eq!(daemon.stop().await, 0);
    assert!(daemon.log().contains("daemon stopped"));
}

/// Awaits every future concurrently, in order.
async fn futures_join_all<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::with_capacity(handles.len());
    for handle in handles {
        outputs.push(handle.await.unwrap());
    }
    outputs
}

#[tokio::test]
async fn the_refused_launch_says_why() {
    let daemon = TestDaemon::start(&[]).await;
    let token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    let response = daemon
        .client
        .post(format!("{}/api/admin/runs", daemon.base_url))
        .bearer_auth(&token)
        .json(&serde_json::json!({"agent": "nobody", "workdir": "/", "argv": ["true"], "env": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["next"]
            .as_str()
            .unwrap()
            .contains("agentteam agent add")
    );
}

#[tokio::test]
async fn foreign_hosts_origins_and_a_second_daemon_are_refused() {
    let daemon = TestDaemon::start(&[]).await;
    let url = format!("{}/api/admin/status", daemon.base_url);
    let token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    assert_eq!(
        daemon
            .client
            .get(&url)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let rebinding = daemon
        .client
        .get(&url)
        .bearer_auth(&token)
        .header("Host", "attacker.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(rebinding.status(), 403);
    let browser = daemon
        .client
        .get(&url)
        .bearer_auth(&token)
        .header("Origin", "https://attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(browser.status(), 403);

    let second = tokio::process::Command::new(crate::support::bin())
        .args(["daemon", "--state-dir"])
        .arg(&daemon.state_dir)
        .output()
        .await
        .unwrap();
    assert_eq!(second.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&second.stderr).contains("another daemon is running"));
}

#[tokio::test]
async fn sigterm_stops_runtimes_and_removes_every_credential() {
    let mut daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("long").await;
    let mut runtime = daemon.launch(
        "long",
        &[],
        r#"dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 60"#,
    );
    let dir = PathBuf::from(runtime.line().await);
    let instance = dir.parent().unwrap().to_path_buf();
    assert_eq!(daemon.stop().await, 0);
    assert!(!instance.exists(), "credentials survived shutdown");
    assert!(!daemon.state_dir.join("daemon.json").exists());
    let status = runtime.child.wait().await.unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "the runtime was stopped with SIGTERM"
    );
    assert_eq!(
        std::fs::metadata(&daemon.state_dir).unwrap().mode() & 0o777,
        0o700
    );
}

#[tokio::test]
async fn a_failed_cleanup_is_retried_as_debt_without_restoring_access() {
    let daemon = TestDaemon::start(&["--rotation-tick-ms", "100"]).await;
    let agent = daemon.add_agent("debtor").await;
    let workspace = daemon.workspace_id();
    let mut runtime = daemon.launch(
        "debtor",
        &[],
        r#"dirname "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 60"#,
    );
    let dir = PathBuf::from(runtime.line().await);
    let token = std::fs::read_to_string(dir.join("token")).unwrap();
    let status = async || -> Value {
        let admin = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
        let response = daemon
            .client
            .get(format!("{}/api/admin/status", daemon.base_url))
            .bearer_auth(admin)
            .send()
            .await
            .unwrap();
        response.json::<Value>().await.unwrap()["data"].clone()
    };

    // The directory cannot be removed when the runtime exits.
    set_unwritable(&dir, true);
    let _ = runtime.child.start_kill();
    let _ = runtime.child.wait().await;
    wait_for("a failed cleanup", Duration::from_secs(10), || {
        daemon.log().matches("credential cleanup failed").count() >= 2
    })
    .await;
    assert_eq!(
        daemon.catalog(&workspace, &agent, Some(&token)).await.0,
        403,
        "revocation came first"
    );
    assert_eq!(
        status().await["leases"],
        1,
        "the lease stays counted while its cleanup is owed"
    );
    assert_eq!(status().await["cleanupDebt"], 1, "the debt is visible");
    assert!(dir.exists());

    // Once removal can succeed, the debt is paid and the slot freed.
    set_unwritable(&dir, false);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    // Polls the condition under test (the retry's backoff is randomized), bounded by the deadline.
    while dir.exists() || status().await["leases"] != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the cleanup debt was never paid"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status().await["cleanupDebt"], 0, "the debt is paid");
    assert_eq!(
        daemon.catalog(&workspace, &agent, Some(&token)).await.0,
        403
    );
}

/// A background process that keeps the runtime's pipes open does not hold the launch (or its
/// slot) after the runtime itself exited.
#[tokio::test]
async fn a_background_child_holding_the_pipes_does_not_hold_the_launch() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("forker").await;
    let started = std::time::Instant::now();
    let output = tokio::time::timeout(
        Duration::from_secs(20),
        daemon
            .cli(&[
                "run",
                "--agent",
                "forker",
                "--",
                "sh",
                "-c",
                "sleep 8 & echo started; exit 4",
            ])
            .output(),
    )
    .await
    .expect("run returned while the background child still held the pipes")
    .unwrap();
    assert_eq!(output.status.code(), Some(4));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "started\n");
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "run waited for the background child: {:?}",
        started.elapsed()
    );
}

/// Without `--state-dir` the daemon keeps its state under `$XDG_STATE_HOME/agentteam`.
#[tokio::test]
async fn the_default_state_dir_is_under_xdg_state_home() {
    let home = tempfile::tempdir().unwrap();
    let mut daemon = tokio::process::Command::new(crate::support::bin())
        .args(["daemon", "--listen", "127.0.0.1:0"])
        .env("XDG_STATE_HOME", home.path())
        .env_remove("XDG_RUNTIME_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(daemon.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().unwrap();
    assert!(line.starts_with("listening on http://127.0.0.1:"), "{line}");
    let state = home.path().join("agentteam");
    for file in ["daemon.json", "identity.json", "admin.token", "server.db"] {
        assert!(
            state.join(file).exists(),
            "no {file} in {}",
            state.display()
        );
    }
    assert!(
        state.join("run").is_dir(),
        "credentials default to <state dir>/run without XDG_RUNTIME_DIR"
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.id().unwrap() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    assert_eq!(daemon.wait().await.unwrap().code(), Some(0));
}
