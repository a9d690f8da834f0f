//! Faults under a running daemon: a SIGKILL and a restart, a full disk under the state dir, the
//! credential directories' modes changed, and the server gone for a while. Each fails closed,
//! says why, loses nothing acknowledged, and recovers without a restart where one is not the fault.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    Launched, TestDaemon, bin, database_url, sample, spawn_server, spawn_server_at, wait_for,
};

/// What a runtime launched by [`launch_reporting`] told about itself.
struct Reported {
    launched: Launched,
    pid: i32,
    exec_base: String,
    exec_token_file: PathBuf,
    mcp_url: String,
    mcp_token_file: PathBuf,
}

impl Reported {
    fn dir(&self) -> PathBuf {
        self.exec_token_file.parent().unwrap().to_path_buf()
    }

    fn exec_token(&self) -> String {
        std::fs::read_to_string(&self.exec_token_file).unwrap()
    }

    fn kill(&self) {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
}

/// Launches a runtime of `agent` that prints its pid, bridges and token files, then sleeps.
async fn launch_reporting(daemon: &TestDaemon, agent: &str) -> Reported {
    let mut launched = daemon.launch(
        agent,
        &[],
        r#"echo "$$"; echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 120"#,
    );
    let pid = launched.line().await.parse().unwrap();
    let exec_base = launched.line().await;
    let exec_token_file = PathBuf::from(launched.line().await);
    let mcp_url = launched.line().await;
    let mcp_token_file = PathBuf::from(launched.line().await);
    Reported {
        launched,
        pid,
        exec_base,
        exec_token_file,
        mcp_url,
        mcp_token_file,
    }
}

/// `POST {base}/{path}` with `token`: the status and the envelope.
async fn exec(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    token: &str,
    body: Value,
) -> (u16, Value) {
    let response = client
        .post(format!("{base}/{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A legacy-era `tools/list` on `url` with `token`: the status.
async fn mcp_list(client: &reqwest::Client, url: &str, token: &str) -> u16 {
    client
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// `url` with its `http://host:port` replaced by `base`'s.
fn rebase(url: &str, base: &str) -> String {
    let path = url.splitn(4, '/').nth(3).unwrap();
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// The daemon is SIGKILLed while four writers create projects through a runtime. The next daemon
/// on the same state dir removes the dead one's credentials before it serves, refuses the old
/// runtime's tokens on both bridges, and still has every project whose creation was
/// acknowledged.
#[tokio::test]
async fn a_sigkilled_daemon_comes_back_clean_and_keeps_every_acknowledged_write() {
    let root = tempfile::tempdir().unwrap();
    let mut first = TestDaemon::start_in(root.path(), &[]).await;
    first.add_agent("writer").await;
    let runtime = launch_reporting(&first, "writer").await;
    let exec_token = runtime.exec_token();
    let mcp_token = std::fs::read_to_string(&runtime.mcp_token_file).unwrap();
    assert_eq!(
        mcp_list(&first.client, &runtime.mcp_url, &mcp_token).await,
        200
    );

    let acknowledged = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let (client, base, token) = (
                first.client.clone(),
                runtime.exec_base.clone(),
                exec_token.clone(),
            );
            let acknowledged = acknowledged.clone();
            tokio::spawn(async move {
                for n in 0.. {
                    let name = format!("project {writer}-{n}");
                    let sent = client
                        .post(format!("{base}/project/create"))
                        .bearer_auth(&token)
                        .json(&json!({ "name": name }))
                        .send()
                        .await;
                    let Ok(response) = sent else { return };
                    let Ok(envelope) = response.json::<Value>().await else {
                        return;
                    };
                    let Some(id) = envelope["data"]["project"]["id"].as_str() else {
                        return;
                    };
                    acknowledged.lock().unwrap().push((id.to_string(), name));
                }
            })
        })
        .collect();
    wait_for("20 acknowledged writes", Duration::from_secs(30), || {
        acknowledged.lock().unwrap().len() >= 20
    })
    .await;
    first.child.start_kill().unwrap();
    first.child.wait().await.unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    runtime.kill();
    let acknowledged = acknowledged.lock().unwrap().clone();
    let dir = runtime.dir();
    assert!(dir.exists(), "a SIGKILLed daemon cannot clean up");

    let second = TestDaemon::start_in(root.path(), &[]).await;
    assert!(
        !dir.exists(),
        "the dead daemon's credentials outlived the restart"
    );
    // The old runtime's next calls, at the new daemon, fail closed on both bridges: refused
    // exactly as a token that never existed is.
    let old_exec = rebase(&runtime.exec_base, &second.base_url);
    let refused = exec(
        &second.client,
        &old_exec,
        "project/list",
        &exec_token,
        json!({}),
    )
    .await;
    let never = exec(
        &second.client,
        &old_exec,
        "project/list",
        "v1.never.issued",
        json!({}),
    )
    .await;
    assert_eq!(refused, never, "an old Exec token was told apart");
    assert_eq!(
        refused.0, 403,
        "an old Exec token was honoured: {refused:?}"
    );
    let old_mcp = rebase(&runtime.mcp_url, &second.base_url);
    assert_eq!(mcp_list(&second.client, &old_mcp, &mcp_token).await, 401);
    assert_eq!(
        mcp_list(&second.client, &old_mcp, "v1.never.issued").await,
        401
    );
    // And through its own CLI, whose token file is gone: a refusal, not a hang or a panic.
    let old_cli = tokio::process::Command::new(bin())
        .args(["exec", "project", "list", "{}"])
        .env(
            "AGENTTEAM_EXEC_BASE_URL",
            rebase(&runtime.exec_base, &second.base_url),
        )
        .env("AGENTTEAM_EXEC_TOKEN_FILE", &runtime.exec_token_file)
        .output()
        .await
        .unwrap();
    assert_eq!(old_cli.status.code(), Some(2), "{old_cli:?}");
    drop(runtime.launched);

    let reader = launch_reporting(&second, "writer").await;
    let token = reader.exec_token();
    for (id, name) in &acknowledged {
        let (status, envelope) = exec(
            &second.client,
            &reader.exec_base,
            "project/get",
            &token,
            json!({ "projectId": id }),
        )
        .await;
        assert_eq!(status, 200, "acknowledged {id} was lost: {envelope}");
        assert_eq!(envelope["data"]["project"]["name"], json!(name));
    }
    reader.kill();
}

/// A tmpfs of `size` mounted on `dir` for the guard's lifetime. The test needs root (CI runs as
/// root); without it, it fails saying so rather than passing untested.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        assert!(
            rustix::process::geteuid().is_root(),
            "this test mounts a tmpfs to fill the state dir's disk and must run as root"
        );
        std::fs::create_dir_all(dir).unwrap();
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a tmpfs on {} failed",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Writes `path` until the disk under it is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) => break,
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
    let _ = file.sync_all();
}

/// The file names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "bin")
        .collect();
    names.sort();
    names
}

/// The state dir's disk fills up under a running runtime: rotation keeps the current token
/// (still honoured, its file untouched, no temp file left), the log and the metrics say so, a new
/// launch is refused naming the cause; once there is room again, rotation resumes by itself.
#[tokio::test]
async fn a_full_disk_keeps_the_current_token_and_rotation_resumes_when_there_is_room() {
    let root = tempfile::tempdir().unwrap();
    let _disk = Tmpfs::mount(&root.path().join("state"), "48m");
    let daemon = TestDaemon::start_in_with_env(
        root.path(),
        &["--token-ttl-secs", "4", "--rotation-tick-ms", "100"],
        &[("XDG_RUNTIME_DIR", "")],
    )
    .await;
    let agent = daemon.add_agent("cramped").await;
    let workspace = daemon.workspace_id();
    let runtime = launch_reporting(&daemon, "cramped").await;
    assert!(
        runtime.dir().starts_with(&daemon.state_dir),
        "credentials live on the full disk"
    );
    let first = runtime.exec_token();

    let filler = daemon.state_dir.join("filler");
    fill(&filler);
    wait_for("a failed rotation", Duration::from_secs(10), || {
        daemon.log().contains("credential rotation failed")
    })
    .await;
    assert!(
        daemon.log().contains("No space left on device"),
        "the log does not say why"
    );
    assert_eq!(
        runtime.exec_token(),
        first,
        "the current token file was touched"
    );
    assert_eq!(
        daemon.catalog(&workspace, &agent, Some(&first)).await.0,
        200,
        "a failed rotation revoked the current generation"
    );
    assert_eq!(
        names(&runtime.dir()),
        ["catalog.json", "mcp-token", "token"]
    );
    let metrics = daemon.metrics().await;
    assert!(sample(&metrics, r#"agentteam_rotations_total{outcome="failed"}"#) >= Some(1.0));

    let refused = daemon
        .cli(&["run", "--agent", "cramped", "--", "true"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");

    std::fs::remove_file(&filler).unwrap();
    wait_for("rotation to resume", Duration::from_secs(15), || {
        std::fs::read_to_string(&runtime.exec_token_file).is_ok_and(|t| t != first)
    })
    .await;
    let next = runtime.exec_token();
    assert_eq!(daemon.catalog(&workspace, &agent, Some(&next)).await.0, 200);
    let metrics = daemon.metrics().await;
    assert!(sample(&metrics, r#"agentteam_rotations_total{outcome="ok"}"#) >= Some(1.0));
    runtime.kill();
}

/// Someone loosens the credential directories under a running daemon: a runtime directory that is
/// no longer private gets no new token (the current one stays until it expires), a loosened
/// instance directory gets no new runtime, each saying which directory; restored, both recover.
#[tokio::test]
async fn loosened_credential_directories_get_no_new_secret_until_restored() {
    let daemon = TestDaemon::start_with_env(
        &["--token-ttl-secs", "4", "--rotation-tick-ms", "100"],
        &[("XDG_RUNTIME_DIR", "")],
    )
    .await;
    let agent = daemon.add_agent("exposed").await;
    let workspace = daemon.workspace_id();
    let runtime = launch_reporting(&daemon, "exposed").await;
    let dir = runtime.dir();
    let instance = dir.parent().unwrap().to_path_buf();
    let first = runtime.exec_token();
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };

    chmod(&dir, 0o755);
    wait_for("a refused rotation", Duration::from_secs(10), || {
        daemon
            .log()
            .contains("is not a private directory of this user")
    })
    .await;
    assert_eq!(
        runtime.exec_token(),
        first,
        "a token was written into a loosened directory"
    );
    assert_eq!(
        daemon.catalog(&workspace, &agent, Some(&first)).await.0,
        200
    );

    chmod(&instance, 0o777);
    let refused = daemon
        .cli(&["run", "--agent", "exposed", "--", "true"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is not a private directory of this user")
            && stderr.contains(&instance.display().to_string()),
        "{stderr}"
    );

    chmod(&instance, 0o700);
    chmod(&dir, 0o700);
    wait_for("rotation to resume", Duration::from_secs(15), || {
        std::fs::read_to_string(&runtime.exec_token_file).is_ok_and(|t| t != first)
    })
    .await;
    assert_eq!(
        daemon
            .catalog(&workspace, &agent, Some(&runtime.exec_token()))
            .await
            .0,
        200
    );
    let ran = daemon
        .cli(&["run", "--agent", "exposed", "--", "true"])
        .output()
        .await
        .unwrap();
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    runtime.kill();
}

/// The server behind the daemon goes away for a while: calls answer `upstream_unavailable`
/// (nothing of the server's address or the socket error), the status says unreachable; the server
/// comes back on its address and the same runtime's next call succeeds with no daemon restart,
/// with what it wrote before the outage still there.
#[tokio::test]
async fn the_server_gone_for_a_while_is_unavailable_then_recovered_without_a_restart() {
    let server_dir = tempfile::tempdir().unwrap();
    let database = database_url(server_dir.path()).await;
    let token_file = server_dir.path().join("operator.token");
    let (mut server, server_url, _) = spawn_server(server_dir.path()).await;
    let daemon = TestDaemon::start(&[
        "--server-url",
        &server_url,
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ])
    .await;
    daemon.add_agent("patient").await;
    let runtime = launch_reporting(&daemon, "patient").await;
    let call = |path: &'static str, body: Value| {
        let (client, base, token) = (
            daemon.client.clone(),
            runtime.exec_base.clone(),
            runtime.exec_token(),
        );
        async move { exec(&client, &base, path, &token, body).await }
    };
    let (status, created) = call("project/create", json!({"name": "before the outage"})).await;
    assert_eq!(status, 200, "{created}");
    let id = created["data"]["project"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    server.start_kill().unwrap();
    server.wait().await.unwrap();
    for _ in 0..3 {
        let (status, envelope) = call("project/get", json!({ "projectId": id })).await;
        assert_eq!(
            (status, envelope["error"]["code"].as_str()),
            (503, Some("upstream_unavailable")),
            "{envelope}"
        );
        let port = server_url.rsplit(':').next().unwrap();
        assert!(!envelope.to_string().contains(port), "{envelope}");
    }
    assert_eq!(daemon.admin_get("status").await["serverReachable"], false);

    let listen = server_url.trim_start_matches("http://");
    // The killed server's listener is closed, and the server binds with `SO_REUSEADDR`.
    let (_server, _, _) = spawn_server_at(listen, &database, &token_file, None, &[]).await;
    let (status, envelope) = call("project/get", json!({ "projectId": id })).await;
    assert_eq!(status, 200, "the daemon did not recover: {envelope}");
    assert_eq!(envelope["data"]["project"]["name"], "before the outage");
    assert_eq!(daemon.admin_get("status").await["serverReachable"], true);
    let (status, _) = call("project/create", json!({"name": "after the outage"})).await;
    assert_eq!(status, 200);
    runtime.kill();
}
