//! The runtime's boundary with the daemon, held end to end: proxies never see a credential, the
//! bearer goes only to the canonical loopback route, the CLI's bounds, the runtime's own
//! `agentteam`, the catalog digest, strong shutdown, sessions and their replacement, incidents,
//! selectors and process groups. Each drives the real daemon, server and binary.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::exec_transport::read_status;
use crate::support::{
    Launched, TestDaemon, TestServer, bin, process_alive, spawn_server, wait_for,
};

const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// A listener posing as an HTTP proxy: it counts every connection and answers none.
struct ProxyTrap {
    url: String,
    connections: Arc<AtomicUsize>,
}

impl ProxyTrap {
    async fn start() -> ProxyTrap {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        ProxyTrap { url, connections }
    }

    /// Every proxy variable, upper and lower case, pointing at the trap.
    fn env(&self) -> Vec<(&'static str, &str)> {
        PROXY_VARIABLES
            .iter()
            .map(|name| (*name, self.url.as_str()))
            .collect()
    }
}

/// Starts `agentteam run` for `agent` with `env` added to the CLI's (and so the runtime's)
/// environment.
fn launch_with_env(
    daemon: &TestDaemon,
    agent: &str,
    env: &[(&str, &str)],
    script: &str,
) -> Launched {
    let mut command = daemon.cli(&["run", "--agent", agent, "--", "sh", "-c", script]);
    command.envs(env.iter().copied());
    Launched::spawn(command)
}

/// The script of a runtime that proves the bridges work with every proxy variable set: it prints
/// its `NO_PROXY` lists, then runs an Exec action through the `agentteam` on its PATH.
const PROXIED_RUNTIME: &str =
    r#"echo "$NO_PROXY"; echo "$no_proxy"; agentteam exec team list '{}'; echo "exit=$?""#;

async fn check_proxied_runtime(mut runtime: Launched) {
    for _ in 0..2 {
        let list = runtime.line().await;
        for host in ["127.0.0.1", "localhost", "::1"] {
            assert!(
                list.split(',').any(|h| h == host),
                "{host} missing from {list}"
            );
        }
    }
    let envelope: Value = serde_json::from_str(&runtime.line().await).unwrap();
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert_eq!(runtime.line().await, "exit=0");
    assert!(runtime.child.wait().await.unwrap().success());
}

/// With every proxy variable set, no credential-carrying request of ours goes to the
/// proxy: `agentteam agent add` and `run` (admin token), `agentteam exec` inside a runtime (Exec
/// token), the daemon's operator and `ServerClient` calls to the embedded server and to an external
/// server on loopback (operator token, device credential), even with `--server-proxy` named
/// (loopback is never proxied). Runtimes get loopback in `NO_PROXY` for their own MCP clients.
#[tokio::test]
async fn no_credential_carrying_request_goes_through_a_proxy() {
    let trap = ProxyTrap::start().await;
    let env = trap.env();

    let embedded = TestDaemon::start_with_env(&[], &env).await;
    let output = embedded
        .cli(&["agent", "add", "proxied"])
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    check_proxied_runtime(launch_with_env(&embedded, "proxied", &env, PROXIED_RUNTIME)).await;
    // Profiles are owner-only files written through `private_file`.
    let profiles = embedded.state_dir.join("agents");
    for entry in std::fs::read_dir(&profiles).unwrap() {
        let dir = entry.unwrap().path();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        for file in ["profile.json", "secrets.json"] {
            let metadata = std::fs::symlink_metadata(dir.join(file)).unwrap();
            assert!(metadata.is_file(), "{file} is a regular file");
            assert_eq!(metadata.mode() & 0o777, 0o600, "{file} is owner-only");
        }
    }

    let server_dir = tempfile::tempdir().unwrap();
    let (_server, server_url, _) = spawn_server(server_dir.path()).await;
    let token_file = server_dir.path().join("operator.token");
    let external = TestDaemon::start_with_env(
        &[
            "--server-url",
            &server_url,
            "--operator-token-file",
            token_file.to_str().unwrap(),
            "--server-proxy",
            &trap.url,
        ],
        &env,
    )
    .await;
    let output = external
        .cli(&["agent", "add", "remote"])
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    check_proxied_runtime(launch_with_env(&external, "remote", &env, PROXIED_RUNTIME)).await;

    assert_eq!(
        trap.connections.load(Ordering::SeqCst),
        0,
        "a request went to the proxy"
    );
}

/// Runs `agentteam exec team list '{}'` with the given Exec variables and nothing else.
async fn exec_with(base_url: &str, token_file: &Path) -> std::process::Output {
    tokio::process::Command::new(bin())
        .args(["exec", "team", "list", "{}"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("AGENTTEAM_EXEC_BASE_URL", base_url)
        .env("AGENTTEAM_EXEC_TOKEN_FILE", token_file)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// The bearer goes only to the daemon's canonical route on a literal loopback address;
/// anything else is refused before the token file is read (exit 2), and nothing is sent.
#[tokio::test]
async fn exec_refuses_a_base_url_that_is_not_the_daemons_loopback_route() {
    let trap = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = trap.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = trap.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    // The token file does not exist: reading it first would print its refusal instead.
    let missing = PathBuf::from("/nonexistent/agentteam/token");
    let path = "/api/internal/exec/servers/wsp_0123456789/agents/agt_0123456789";
    for base in [
        format!("http://localhost:{port}{path}"),
        format!("https://127.0.0.1:{port}{path}"),
        format!("http://10.1.2.3:{port}{path}"),
        format!("http://user:pw@127.0.0.1:{port}{path}"),
        format!("http://127.0.0.1:{port}{path}?to=elsewhere"),
        format!(
            "http://127.0.0.1:{port}/api/internal/mcp/servers/wsp_0123456789/agents/agt_0123456789"
        ),
        format!("http://127.0.0.1:{port}/other/route"),
    ] {
        let output = exec_with(&base, &missing).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{base}: {stderr}");
        assert!(
            stderr.contains("AGENTTEAM_EXEC_BASE_URL is not the daemon's Exec route"),
            "{base}: {stderr}"
        );
        assert!(
            !stderr.contains("credential file"),
            "{base}: the token file was read first"
        );
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0, "a request was sent");
}

/// Accepts one connection, reads a request head, answers with `head` and then `body_len` bytes of
/// `fill` (or forever, when `body_len` is `None`, until the client hangs up).
async fn hostile_peer(listener: TcpListener, head: String, body_len: Option<usize>, fill: u8) {
    let (mut stream, _) = listener.accept().await.unwrap();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut read = Vec::new();
    while !read.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buffer).await.unwrap();
        if n == 0 {
            return;
        }
        read.extend_from_slice(&buffer[..n]);
    }
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let chunk = vec![fill; 16 * 1024];
    let mut sent = 0;
    while body_len.is_none_or(|len| sent < len) {
        if stream.write_all(&chunk).await.is_err() {
            return;
        }
        sent += chunk.len();
    }
}

/// The bounds: the CLI reads at most 1 MiB of an answer and at most 64 KiB of one
/// `run` output frame, whatever the peer sends.
#[tokio::test]
async fn the_cli_bounds_answers_and_run_frames() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "v1.e30.AAAA").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let peer = tokio::spawn(hostile_peer(
        listener,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n".into(),
        Some(2 * 1024 * 1024),
        b' ',
    ));
    let base =
        format!("http://{address}/api/internal/exec/servers/wsp_0123456789/agents/agt_0123456789");
    let output = exec_with(&base, &token_file).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("exceeds 1048576 bytes"), "{stderr}");
    peer.abort();

    // A "daemon" whose run stream is one endless line.
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    std::fs::write(
        state.join("daemon.json"),
        json!({"baseUrl": format!("http://{address}"), "serverUrl": format!("http://{address}"), "pid": std::process::id()})
            .to_string(),
    )
    .unwrap();
    // It holds the daemon's lock, as a running daemon does (no command starts another then).
    let lock = std::fs::File::create(state.join("daemon.lock")).unwrap();
    lock.lock().unwrap();
    std::fs::write(state.join("admin.token"), "adm_x").unwrap();
    std::fs::set_permissions(
        state.join("admin.token"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let peer = tokio::spawn(hostile_peer(
        listener,
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n".into(),
        None,
        b'a',
    ));
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(bin())
            .args(["run", "--state-dir"])
            .arg(&state)
            .args(["--agent", "a", "--", "true"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the CLI gave up on the endless frame")
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("a frame over 65536 bytes"), "{stderr}");
    peer.abort();
    drop(lock);
}

/// Inside a runtime, `agentteam` is the daemon's own executable, first on PATH, even
/// when the user's PATH has no `agentteam`; the link goes away with the launch's credentials.
#[tokio::test]
async fn a_runtimes_agentteam_is_the_daemons_own_executable() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let script = r#"command -v agentteam; readlink "$(command -v agentteam)"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; agentteam exec team list '{}'"#;
    let mut runtime = launch_with_env(&daemon, "worker", &[("PATH", "/usr/bin:/bin")], script);
    let found = PathBuf::from(runtime.line().await);
    let target = runtime.line().await;
    let token_file = PathBuf::from(runtime.line().await);
    assert_eq!(
        found.parent().unwrap(),
        token_file.parent().unwrap().join("bin")
    );
    assert_eq!(
        std::fs::canonicalize(&target).unwrap(),
        std::fs::canonicalize(bin()).unwrap()
    );
    let envelope: Value = serde_json::from_str(&runtime.line().await).unwrap();
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert!(runtime.child.wait().await.unwrap().success());
    assert!(!found.exists(), "the link outlived the launch");
}

/// A caller built from another catalog is refused with a typed error before its body
/// is read (the body below never arrives, yet the answer does).
#[tokio::test]
async fn a_mismatched_catalog_digest_is_refused_before_the_body() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let mut runtime = daemon.launch(
        "worker",
        &[],
        r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 60"#,
    );
    let base = runtime.line().await;
    let token = std::fs::read_to_string(runtime.line().await).unwrap();
    let address = daemon.base_url.trim_start_matches("http://").to_string();
    let path = format!("{}/team/list", base.trim_start_matches(&daemon.base_url));
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nAgentTeam-Catalog-Digest: sha256:0000\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    assert_eq!(read_status(&mut stream).await, 409);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the body was awaited"
    );

    let response = daemon
        .client
        .post(format!("{base}/team/list"))
        .bearer_auth(&token)
        .header("agentteam-catalog-digest", "sha256:0000")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "catalog_mismatch", "{body}");
    let _ = runtime.child.start_kill();
}

/// The caller's side of the digest: `agentteam exec` sends the digest of its built-in catalog on its
/// one request (a listener in the daemon's place reads what arrives).
#[tokio::test]
async fn agentteam_exec_sends_its_builtin_catalog_digest() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let (mut runtime, base, token_file) = exec_runtime(&daemon, "worker").await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = base.replace(
        daemon.base_url.trim_start_matches("http://"),
        &listener.local_addr().unwrap().to_string(),
    );
    let mut exec = tokio::process::Command::new(bin())
        .args(["exec", "team", "list", "{}"])
        .env_clear()
        .env("AGENTTEAM_EXEC_BASE_URL", &elsewhere)
        .env("AGENTTEAM_EXEC_TOKEN_FILE", &token_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (mut stream, _) = listener.accept().await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "the request ended early"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    let sent: Vec<&str> = head
        .lines()
        .filter_map(|line| line.strip_prefix("agentteam-catalog-digest: "))
        .collect();
    let expected = agentteam::contract::catalog::builtin_digest();
    assert!(
        expected.starts_with("sha256:") && expected.len() == 7 + 64,
        "{expected}"
    );
    assert_eq!(sent, [expected.to_ascii_lowercase().as_str()], "{head}");
    drop(stream);
    let _ = exec.wait().await;
    let _ = runtime.child.start_kill();
}

/// At SIGTERM every runtime's credential is refused within 1 s
/// and its directory is gone within 2 s, even while a `run` stream is busy and runtimes ignore
/// SIGTERM; the daemon exits within its drain deadline plus the kill grace, and no runtime
/// process survives.
#[tokio::test]
async fn sigterm_revokes_first_then_drains() {
    let mut daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    // One runtime streams output without pause; the others ignore SIGTERM (the kill grace ends
    // them) and leave a background child.
    let mut streaming = daemon.launch(
        "worker",
        &[],
        r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; echo $$; exec yes streaming"#,
    );
    let mut runtimes = Vec::new();
    for _ in 0..7 {
        runtimes.push(daemon.launch(
            "worker",
            &[],
            r#"trap '' TERM; sleep 1800 & echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; echo $!; wait"#,
        ));
    }
    struct Seen {
        exec_base: String,
        exec_token: String,
        mcp_url: String,
        mcp_token: String,
        dir: PathBuf,
        pid: i32,
    }
    let mut seen = Vec::new();
    for runtime in std::iter::once(&mut streaming).chain(runtimes.iter_mut()) {
        let exec_base = runtime.line().await;
        let exec_file = PathBuf::from(runtime.line().await);
        let mcp_url = runtime.line().await;
        let mcp_file = PathBuf::from(runtime.line().await);
        let pid: i32 = runtime.line().await.trim().parse().unwrap();
        seen.push(Seen {
            exec_base,
            exec_token: std::fs::read_to_string(&exec_file).unwrap(),
            mcp_url,
            mcp_token: std::fs::read_to_string(&mcp_file).unwrap(),
            dir: exec_file.parent().unwrap().to_path_buf(),
            pid,
        });
    }
    // The streaming runtime keeps its `run` stream busy while the daemon stops.
    let drain_stream = tokio::spawn(async move {
        while let Ok(Some(_)) = streaming.lines.next_line().await {}
        streaming
    });

    let client = crate::support::http_client();
    let signalled = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.child.id().unwrap() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    for runtime in &seen {
        let exec = client
            .post(format!("{}/team/list", runtime.exec_base))
            .bearer_auth(&runtime.exec_token)
            .json(&json!({}))
            .send()
            .await;
        assert!(
            exec.as_ref().map_or(true, |r| r.status() == 403),
            "an Exec call succeeded after SIGTERM"
        );
        let mcp = client
            .post(&runtime.mcp_url)
            .bearer_auth(&runtime.mcp_token)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await;
        assert!(
            mcp.as_ref().map_or(true, |r| r.status() == 401),
            "an MCP call succeeded after SIGTERM"
        );
    }
    assert!(
        signalled.elapsed() < Duration::from_secs(1),
        "refusals took {:?}",
        signalled.elapsed()
    );
    wait_for(
        "every credential directory to go",
        Duration::from_secs(2),
        || seen.iter().all(|runtime| !runtime.dir.exists()),
    )
    .await;
    assert!(
        signalled.elapsed() < Duration::from_secs(2),
        "directories took {:?}",
        signalled.elapsed()
    );
    let status = tokio::time::timeout(Duration::from_secs(13 + 2), daemon.child.wait())
        .await
        .expect("the daemon exits within its drain deadline plus the kill grace")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let _ = drain_stream.await;
    for runtime in &seen {
        assert!(
            !process_alive(runtime.pid),
            "runtime process {} survived",
            runtime.pid
        );
    }
}

/// A history cursor works only for the agent that was given it.
#[tokio::test]
async fn a_history_cursor_is_bound_to_its_caller() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    for n in 0..3 {
        server
            .admin(
                &format!("/admin/workspaces/{}/messages", w.workspace_id),
                json!({"authorHumanId": w.human_id, "channelId": w.channel_id, "content": format!("m{n}")}),
            )
            .await;
    }
    let read = |agent: &str, cursor: Option<&str>| {
        let mut input = json!({"target": format!("channel:{}", w.channel_id), "limit": 1});
        if let Some(cursor) = cursor {
            input["cursor"] = json!(cursor);
        }
        let path = format!(
            "/runtime/servers/{}/agents/{agent}/tools/message_history_read",
            w.workspace_id
        );
        let server = &server;
        let credential = w.device_credential.clone();
        async move { server.post(&path, Some(&credential), &input).await }
    };
    let (status, first) = read(&w.agent_id, None).await;
    assert_eq!(status, 200, "{first}");
    let cursor = first["data"]["nextCursor"].as_str().unwrap().to_string();
    let (status, own) = read(&w.agent_id, Some(&cursor)).await;
    assert_eq!(status, 200, "{own}");
    let (status, other) = read(&w.other_agent_id, Some(&cursor)).await;
    assert_eq!(status, 400, "{other}");
    assert_eq!(other["error"]["code"], "validation_failed");
    assert_eq!(other["error"]["details"][0]["path"], "/cursor");
}

/// The Exec route of a fresh runtime of `agent`: base URL and the token file's contents.
async fn exec_runtime(daemon: &TestDaemon, agent: &str) -> (Launched, String, PathBuf) {
    let mut runtime = daemon.launch(
        agent,
        &[],
        r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 120"#,
    );
    let base = runtime.line().await;
    let token_file = PathBuf::from(runtime.line().await);
    (runtime, base, token_file)
}

/// A 5xx carries an incident id, the daemon logs the failure under it, and the CLI
/// keeps it in what it prints.
#[tokio::test]
async fn a_server_side_failure_names_its_incident_everywhere() {
    let server_dir = tempfile::tempdir().unwrap();
    let (mut server, server_url, _) = spawn_server(server_dir.path()).await;
    let token_file = server_dir.path().join("operator.token");
    let daemon = TestDaemon::start(&[
        "--server-url",
        &server_url,
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ])
    .await;
    daemon.add_agent("remote").await;
    let (mut runtime, base, exec_token_file) = exec_runtime(&daemon, "remote").await;
    server.start_kill().unwrap();
    server.wait().await.unwrap();

    let output = exec_with(&base, &exec_token_file).await;
    assert_eq!(output.status.code(), Some(1));
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        envelope["error"]["code"], "upstream_unavailable",
        "{envelope}"
    );
    let incident = envelope["error"]["incidentId"]
        .as_str()
        .expect("an incident id")
        .to_string();
    assert!(
        incident.starts_with("inc_") && incident.len() == 20,
        "{incident}"
    );
    wait_for(
        "the incident in the daemon's log",
        Duration::from_secs(5),
        || daemon.log().contains(&incident),
    )
    .await;
    let _ = runtime.child.start_kill();
}

/// Input the schema accepts but the typed request cannot hold (an integer beyond
/// `u64`) is the caller's mistake through the daemon too: 400, never a 5xx.
#[tokio::test]
async fn unrepresentable_input_is_a_validation_error_through_the_daemon() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let (mut runtime, base, token_file) = exec_runtime(&daemon, "worker").await;
    let token = std::fs::read_to_string(token_file).unwrap();
    let response = daemon
        .client
        .post(format!("{base}/task/update"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(r#"{"taskId":"task_0123456789","title":"t","expectedRevision":18446744073709551616}"#)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "validation_failed");
    let _ = runtime.child.start_kill();
}

/// The bearer scheme is case-insensitive on every route that takes one: Exec action
/// and catalog, MCP, the daemon's admin API, and the server's runtime and operator APIs.
#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_everywhere() {
    let daemon = TestDaemon::start(&[]).await;
    let agent = daemon.add_agent("worker").await;
    let mut runtime = daemon.launch(
        "worker",
        &[],
        r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 120"#,
    );
    let base = runtime.line().await;
    let exec_token = std::fs::read_to_string(runtime.line().await).unwrap();
    let mcp_url = runtime.line().await;
    let mcp_token = std::fs::read_to_string(runtime.line().await).unwrap();
    let state = &daemon.state_dir;
    let admin_token = std::fs::read_to_string(state.join("admin.token")).unwrap();
    let operator_token = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
    let identity: Value =
        serde_json::from_slice(&std::fs::read(state.join("identity.json")).unwrap()).unwrap();
    let device = identity["deviceCredential"].as_str().unwrap().to_string();
    let workspace = identity["workspaceId"].as_str().unwrap().to_string();
    let announcement: Value =
        serde_json::from_slice(&std::fs::read(state.join("daemon.json")).unwrap()).unwrap();
    let server_url = announcement["serverUrl"].as_str().unwrap().to_string();

    for scheme in ["bearer", "BEARER", "BeArEr"] {
        let auth = |token: &str| format!("{scheme} {token}");
        let c = &daemon.client;
        let checks = [
            (
                "exec action",
                c.post(format!("{base}/team/list"))
                    .header("authorization", auth(&exec_token))
                    .json(&json!({})),
            ),
            (
                "exec catalog",
                c.get(format!("{base}/catalog"))
                    .header("authorization", auth(&exec_token)),
            ),
            (
                "mcp",
                c.post(&mcp_url)
                    .header("authorization", auth(&mcp_token))
                    .header("accept", "application/json")
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            ),
            (
                "daemon admin",
                c.get(format!("{}/api/admin/status", daemon.base_url))
                    .header("authorization", auth(&admin_token)),
            ),
            (
                "server runtime",
                c.post(format!(
                    "{server_url}/runtime/servers/{workspace}/agents/{agent}/actions/team/list"
                ))
                .header("authorization", auth(&device))
                .json(&json!({})),
            ),
            (
                "server operator",
                c.get(format!("{server_url}/admin/stats"))
                    .header("authorization", auth(&operator_token)),
            ),
        ];
        for (route, request) in checks {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200, "{route} refused `{scheme}`");
        }
    }
    let _ = runtime.child.start_kill();
}

/// `--session NAME --replace` ends the old process's authorization completely before
/// the next process generation starts; both are never valid at once.
#[tokio::test]
async fn replacing_a_session_revokes_the_old_process_before_the_new_one_starts() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let script = r#"sleep 1800 & echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo $!; wait"#;
    let mut old = daemon.launch("worker", &["--session", "review-bot"], script);
    let base = old.line().await;
    let old_token = std::fs::read_to_string(old.line().await).unwrap();
    let old_child: i32 = old.line().await.parse().unwrap();
    let catalog = |token: String| {
        let url = format!("{base}/catalog");
        let client = daemon.client.clone();
        async move {
            client
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(catalog(old_token.clone()).await, 200);
    let runs = daemon.admin_get("runs").await;
    assert_eq!(runs["runs"][0]["processGeneration"], 1, "{runs}");

    // Without `--replace` a live session is not taken over.
    let refused = daemon
        .cli(&[
            "run",
            "--agent",
            "worker",
            "--session",
            "review-bot",
            "--",
            "true",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--replace"));

    let mut new = daemon.launch("worker", &["--session", "review-bot", "--replace"], script);
    let _ = new.line().await;
    // The new process runs: by then the old token is refused and the old processes are gone.
    let new_token = std::fs::read_to_string(new.line().await).unwrap();
    assert_eq!(
        catalog(old_token).await,
        403,
        "the old generation is still valid"
    );
    assert_eq!(catalog(new_token).await, 200);
    assert!(
        !process_alive(old_child),
        "the old runtime's child survived"
    );
    let old_status = old.child.wait().await.unwrap();
    assert!(
        !old_status.success(),
        "the replaced runtime was stopped: {old_status:?}"
    );
    let runs = daemon.admin_get("runs").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["runs"][0]["session"], "review-bot");
    assert_eq!(runs["runs"][0]["processGeneration"], 2, "{runs}");
    let _ = new.child.start_kill();
}

/// A daemon started inside a runtime removes the runtime's credential variables from
/// its own environment, and says which.
#[tokio::test]
async fn a_daemon_started_in_a_runtime_scrubs_the_inherited_credential_variables() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nested.log");
    let script = format!(
        r#"exec agentteam daemon --listen 127.0.0.1:0 --state-dir {state} 2> {log}"#,
        state = dir.path().join("nested").display(),
        log = log.display()
    );
    let mut runtime = daemon.launch("worker", &[], &script);
    assert!(runtime.line().await.starts_with("listening on "));
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("removed inherited runtime credential variables"))
        .unwrap_or_else(|| panic!("no scrub line in {text}"));
    for name in [
        "AGENTTEAM_EXEC_BASE_URL",
        "AGENTTEAM_EXEC_TOKEN_FILE",
        "AGENTTEAM_MCP_URL",
        "AGENTTEAM_MCP_TOKEN_FILE",
    ] {
        assert!(line.contains(name), "{name} not scrubbed: {line}");
    }
    assert!(crate::support::secret_shapes(&text).is_empty());
    // Stop the nested daemon itself, by the PID its `daemon.json` records: it would outlive the
    // test daemon otherwise. `agentteam run` ends when its runtime does.
    let announcement: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("nested").join("daemon.json")).unwrap(),
    )
    .unwrap();
    let pid = announcement["pid"]
        .as_i64()
        .expect("the nested daemon's pid") as i32;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::TERM,
    )
    .expect("the nested daemon is running");
    runtime.child.wait().await.unwrap();
}

/// The daemon refuses conflicting idempotency selectors (header against body, or two
/// body fields) before anything reaches the server.
#[tokio::test]
async fn the_daemon_refuses_conflicting_selectors_before_dispatch() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;
    let (mut runtime, base, token_file) = exec_runtime(&daemon, "worker").await;
    let token = std::fs::read_to_string(token_file).unwrap();
    let state = &daemon.state_dir;
    let operator = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
    let announcement: Value =
        serde_json::from_slice(&std::fs::read(state.join("daemon.json")).unwrap()).unwrap();
    let stats_url = format!(
        "{}/admin/stats",
        announcement["serverUrl"].as_str().unwrap()
    );
    let server_requests = || async {
        let response = daemon
            .client
            .get(&stats_url)
            .bearer_auth(&operator)
            .send()
            .await
            .unwrap();
        response.json::<Value>().await.unwrap()["data"]["runtimeRequests"]
            .as_u64()
            .unwrap()
    };
    let before = server_requests().await;
    let create = json!({"name": "twice", "requestId": "req-aaaaaaaa"});
    for (header, body) in [
        (Some("req-bbbbbbbb"), create.clone()),
        (
            None,
            json!({"name": "twice", "requestId": "req-aaaaaaaa", "idempotencyKey": "req-cccccccc"}),
        ),
    ] {
        let mut request = daemon
            .client
            .post(format!("{base}/project/create"))
            .bearer_auth(&token)
            .json(&body);
        if let Some(key) = header {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "validation_failed", "{body}");
    }
    assert_eq!(
        server_requests().await,
        before,
        "a refused request reached the server"
    );
    let _ = runtime.child.start_kill();
}

/// A runtime's descendants end with it, whether it exits on its own or its caller
/// abandons it.
#[tokio::test]
async fn no_descendant_outlives_its_runtime() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("worker").await;

    // It exits on its own, leaving a background child behind.
    let mut exits = daemon.launch("worker", &[], "sleep 1800 & echo $!; exit 0");
    let child: i32 = exits.line().await.parse().unwrap();
    assert!(exits.child.wait().await.unwrap().success());
    assert!(
        !process_alive(child),
        "the background child outlived the runtime's exit"
    );

    // Its caller goes away.
    let mut abandoned = daemon.launch("worker", &[], "sleep 1800 & echo $!; wait");
    let child: i32 = abandoned.line().await.parse().unwrap();
    abandoned.child.start_kill().unwrap();
    let _ = abandoned.child.wait().await;
    wait_for(
        "the abandoned runtime's child to end",
        Duration::from_secs(15),
        || !process_alive(child),
    )
    .await;
}

/// `agentteam run --stdin` relays the launcher's stdin to the runtime, to its end of file; without
/// it the runtime reads an empty stdin whatever the launcher has. The daemon's stream route takes
/// a run's stdin once, only for a run launched with it, and only for a live run.
#[tokio::test]
async fn a_launchers_stdin_reaches_its_runtime_once_and_only_when_asked() {
    let daemon = TestDaemon::start(&[]).await;
    let agent = daemon.add_agent("alpha").await;
    let run = |flags: &[&str]| {
        let mut args = vec!["run", "--agent", agent.as_str()];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", "cat; echo end"]);
        let mut command = daemon.cli(&args);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command.spawn().unwrap()
    };
    for (flags, expected) in [
        (&["--stdin"][..], "hello\nworld\nend\n"),
        (&[][..], "end\n"),
    ] {
        let mut child = run(flags);
        let mut stdin = child.stdin.take().unwrap();
        // Written in two pieces, the second after the first has gone through.
        stdin.write_all(b"hello\n").await.unwrap();
        stdin.flush().await.unwrap();
        stdin.write_all(b"world\n").await.unwrap();
        drop(stdin);
        let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
            .await
            .expect("the runtime ends at its stdin's end")
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            expected,
            "{flags:?}"
        );
    }

    // The route: a run launched with `stdin` whose stream the launcher holds (its runtime echoed
    // a line through it), one without, and no run at all.
    let mut held = run(&["--stdin"]);
    let mut held_stdin = held.stdin.take().unwrap();
    held_stdin.write_all(b"first\n").await.unwrap();
    held_stdin.flush().await.unwrap();
    let mut held_stdout = tokio::io::BufReader::new(held.stdout.take().unwrap());
    let mut line = String::new();
    tokio::io::AsyncBufReadExt::read_line(&mut held_stdout, &mut line)
        .await
        .unwrap();
    assert_eq!(line, "first\n");
    let mut without = daemon.launch(&agent, &[], "echo started; exec sleep 60");
    assert_eq!(without.line().await, "started");
    let runs = daemon.admin_get("runs").await["runs"]
        .as_array()
        .cloned()
        .unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let mut refusals = Vec::new();
    for run in &runs {
        let path = format!("runs/{}/stdin", run["runId"].as_str().unwrap());
        let (status, body) = daemon.admin(reqwest::Method::POST, &path, None).await;
        refusals.push((
            status,
            body["error"]["message"].as_str().unwrap().to_string(),
        ));
    }
    assert!(
        refusals.iter().all(|(status, _)| *status == 409),
        "{refusals:?}"
    );
    assert!(
        refusals
            .iter()
            .any(|(_, m)| m.contains("already has its stdin streamed"))
            && refusals
                .iter()
                .any(|(_, m)| m.contains("was launched without `stdin`")),
        "{refusals:?}"
    );
    let (status, body) = daemon
        .admin(reqwest::Method::POST, "runs/run_nothing/stdin", None)
        .await;
    assert_eq!(status, 404, "{body}");
    // The held stream still reaches its runtime, to its end.
    held_stdin.write_all(b"late\n").await.unwrap();
    drop(held_stdin);
    let mut rest = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut held_stdout, &mut rest)
        .await
        .unwrap();
    assert_eq!(rest, "late\nend\n");
    assert!(held.wait().await.unwrap().success());
}
