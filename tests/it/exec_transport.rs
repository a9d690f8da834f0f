//! The Exec transport end to end: a real daemon with its embedded server, real runtimes started
//! by `agentteam run`, the real `agentteam exec` inside them, and raw sockets where a test needs a
//! slow or unfinished request.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Launched, TestDaemon, bin};

/// A daemon, one agent and one long-running runtime whose credential the test uses directly.
struct Session {
    daemon: TestDaemon,
    agent: String,
    runtime: Launched,
    runtime_pid: i32,
    /// `AGENTTEAM_EXEC_BASE_URL` of the runtime.
    base: String,
    token_file: PathBuf,
}

impl Session {
    async fn start() -> Session {
        let daemon = TestDaemon::start(&["--rotation-tick-ms", "100"]).await;
        let agent = daemon.add_agent("worker").await;
        let (runtime, runtime_pid, base, token_file) = Session::runtime(&daemon, "worker").await;
        Session {
            daemon,
            agent,
            runtime,
            runtime_pid,
            base,
            token_file,
        }
    }

    /// Starts one more long-running runtime of `agent`; returns it, its pid, base URL and token file.
    async fn runtime(daemon: &TestDaemon, agent: &str) -> (Launched, i32, String, PathBuf) {
        let script = r#"echo "$$"; echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 120"#;
        let mut runtime = daemon.launch(agent, &[], script);
        let pid = runtime.line().await.parse().unwrap();
        let base = runtime.line().await;
        let token_file = PathBuf::from(runtime.line().await);
        (runtime, pid, base, token_file)
    }

    fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file).unwrap()
    }

    fn channel(&self) -> String {
        let identity: Value = serde_json::from_slice(
            &std::fs::read(self.daemon.state_dir.join("identity.json")).unwrap(),
        )
        .unwrap();
        identity["channelId"].as_str().unwrap().to_string()
    }

    /// `POST {base}/{domain}/{action}` with this runtime's token.
    async fn exec(&self, domain: &str, action: &str, body: &Value) -> (u16, Value) {
        let response = self
            .daemon
            .client
            .post(format!("{}/{domain}/{action}", self.base))
            .bearer_auth(self.token())
            .json(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// Waits (polling, bounded) until exactly `n` requests hold admission slots.
    async fn wait_acquired(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.status().await["acquiredRequests"].as_u64() != Some(n) {
            assert!(
                Instant::now() < deadline,
                "{n} requests were not admitted in time"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn status(&self) -> Value {
        let token = std::fs::read_to_string(self.daemon.state_dir.join("admin.token")).unwrap();
        let response = self
            .daemon
            .client
            .get(format!("{}/api/admin/status", self.daemon.base_url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        response.json::<Value>().await.unwrap()["data"].clone()
    }

    /// The embedded server's count of runtime requests that reached a handler.
    async fn server_requests(&self) -> u64 {
        let operator = std::fs::read_to_string(&self.daemon.operator_token_file).unwrap();
        let response = self
            .daemon
            .client
            .get(format!("{}/admin/stats", self.daemon.server_url))
            .bearer_auth(operator)
            .send()
            .await
            .unwrap();
        response.json::<Value>().await.unwrap()["data"]["runtimeRequests"]
            .as_u64()
            .unwrap()
    }

    /// Opens a raw connection and sends the head of a `POST` with `Content-Length: declared`
    /// and `body_prefix` of its body.
    async fn raw_post(
        &self,
        token: &str,
        path_tail: &str,
        declared: usize,
        body_prefix: &[u8],
    ) -> TcpStream {
        let (address, path) = self.raw_target(path_tail);
        raw_post(
            address,
            path,
            token.to_string(),
            declared,
            body_prefix.to_vec(),
        )
        .await
    }

    /// The daemon's address and the path of `path_tail` under this runtime's base URL.
    fn raw_target(&self, path_tail: &str) -> (String, String) {
        let address = self
            .daemon
            .base_url
            .trim_start_matches("http://")
            .to_string();
        let path = format!(
            "{}/{path_tail}",
            self.base.trim_start_matches(&self.daemon.base_url)
        );
        (address, path)
    }

    /// `count` raw requests per token, all opened concurrently (so every one is admitted well
    /// within the 5-second body deadline of the first).
    async fn raw_posts_concurrently(
        &self,
        tokens: &[String],
        count: usize,
        path_tail: &str,
    ) -> Vec<TcpStream> {
        let (address, path) = self.raw_target(path_tail);
        let mut set = tokio::task::JoinSet::new();
        for token in tokens {
            for _ in 0..count {
                set.spawn(raw_post(
                    address.clone(),
                    path.clone(),
                    token.clone(),
                    100,
                    Vec::new(),
                ));
            }
        }
        set.join_all().await
    }
}

/// Opens a raw connection and sends the head of a `POST` with `Content-Length: declared` and
/// `body_prefix` of its body.
pub(crate) async fn raw_post(
    address: String,
    path: String,
    token: String,
    declared: usize,
    body_prefix: Vec<u8>,
) -> TcpStream {
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body_prefix).await.unwrap();
    stream
}

/// Reads a whole HTTP/1.1 response head and returns its status code.
pub(crate) async fn read_status(stream: &mut TcpStream) -> u16 {
    let mut buffer = vec![0u8; 4096];
    let mut read = 0;
    loop {
        let n = tokio::time::timeout(Duration::from_secs(15), stream.read(&mut buffer[read..]))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "the connection closed without an answer");
        read += n;
        let text = String::from_utf8_lossy(&buffer[..read]);
        if let Some(line) = text.lines().next().filter(|_| text.contains("\r\n")) {
            return line.split_whitespace().nth(1).unwrap().parse().unwrap();
        }
    }
}

#[tokio::test]
async fn a_runtime_runs_the_task_lifecycle_and_adds_a_review() {
    let session = Session::start().await;
    let announcement: Value = serde_json::from_slice(
        &std::fs::read(session.daemon.state_dir.join("daemon.json")).unwrap(),
    )
    .unwrap();
    let identity: Value = serde_json::from_slice(
        &std::fs::read(session.daemon.state_dir.join("identity.json")).unwrap(),
    )
    .unwrap();
    let operator = std::fs::read_to_string(&session.daemon.operator_token_file).unwrap();
    let thread_url = format!(
        "{}/admin/workspaces/{}/channels/{}/threads",
        announcement["serverUrl"].as_str().unwrap(),
        identity["workspaceId"].as_str().unwrap(),
        session.channel()
    );
    let thread: Value = session
        .daemon
        .client
        .post(thread_url)
        .bearer_auth(operator)
        .json(&json!({"title": "release"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread_id = thread["data"]["threadId"].as_str().unwrap().to_string();

    let script = format!(
        r#"set -e
id() {{ sed -e 's/.*"id":"\([^"]*\)".*/\1/'; }}
T=$(agentteam exec task create '{{"location":{{"kind":"thread","threadId":"{thread_id}"}},"title":"Ship it","requestId":"req-ship-000001"}}' | id)
agentteam exec task claim "{{\"taskId\":\"$T\"}}"
echo "{{\"taskId\":\"$T\",\"result\":\"shipped\"}}" | agentteam exec task complete -
agentteam exec task get "{{\"taskId\":\"$T\"}}"
agentteam exec review add "{{\"threadId\":\"{thread_id}\",\"taskId\":\"$T\",\"verdict\":\"approve\",\"body\":\"ship it\"}}"
"#
    );
    let path = format!(
        "{}:{}",
        std::path::Path::new(bin()).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = session
        .daemon
        .cli(&["run", "--agent", "worker", "--", "sh", "-c", &script])
        .env("PATH", path)
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let envelopes: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let statuses: Vec<&str> = envelopes[..3]
        .iter()
        .map(|e| e["data"]["task"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["claimed", "completed", "completed"]);
    assert_eq!(envelopes[2]["data"]["task"]["result"], "shipped");
    assert_eq!(envelopes[3]["data"]["review"]["verdict"], "approve");
}

#[tokio::test]
async fn the_33rd_request_is_refused_before_its_body_and_slow_bodies_free_their_slots() {
    let session = Session::start().await;
    let token = session.token();
    let mut held = session
        .raw_posts_concurrently(std::slice::from_ref(&token), 32, "team/list")
        .await;
    session.wait_acquired(32).await;
    let started = Instant::now();
    let mut refused = session.raw_post(&token, "team/list", 100, b"").await;
    assert_eq!(read_status(&mut refused).await, 409);
    let latency = started.elapsed();
    assert!(
        latency < Duration::from_secs(1),
        "the refusal waited for the body: {latency:?}"
    );
    eprintln!("33rd request refused in {latency:?}");

    // The held requests hit the 5-second body deadline and give their slots back.
    for stream in &mut held {
        assert_eq!(read_status(stream).await, 408);
    }
    let (status, _) = session.exec("team", "list", &json!({})).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn the_1025th_request_across_authorizations_is_refused() {
    let session = Session::start().await;
    let mut runtimes = vec![(session.runtime_pid, session.token())];
    let mut children = Vec::new();
    for _ in 0..32 {
        let (child, pid, _, token_file) = Session::runtime(&session.daemon, "worker").await;
        runtimes.push((pid, std::fs::read_to_string(token_file).unwrap()));
        children.push(child);
    }
    let tokens: Vec<String> = runtimes[..32]
        .iter()
        .map(|(_, token)| token.clone())
        .collect();
    let held = session
        .raw_posts_concurrently(&tokens, 32, "team/list")
        .await;
    session.wait_acquired(1024).await;
    // The 33rd authorization has its own 32 slots free, but the store's 1024 are taken.
    let mut refused = session
        .raw_post(&runtimes[32].1, "team/list", 100, b"")
        .await;
    assert_eq!(read_status(&mut refused).await, 409);
    drop(held);
    session.wait_acquired(0).await;
    let (status, _) = session.exec("team", "list", &json!({})).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn oversized_and_slow_bodies_are_refused_and_free_their_slot() {
    let session = Session::start().await;
    let token = session.token();
    let url = format!("{}/team/list", session.base);
    let response = session
        .daemon
        .client
        .post(&url)
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(vec![b' '; 1024 * 1024 + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large");

    // One byte every half second for 6 s: the 5-second absolute deadline ends it.
    let slow = session.raw_post(&token, "team/list", 20, b"{").await;
    let started = Instant::now();
    let (mut reader, mut writer) = slow.into_split();
    let dribble = tokio::spawn(async move {
        for _ in 0..12 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut head = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(15), reader.read(&mut head))
        .await
        .expect("an answer in time")
        .unwrap();
    let elapsed = started.elapsed();
    assert!(
        String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&head[..n])
    );
    dribble.abort();
    assert!(
        elapsed >= Duration::from_millis(4500) && elapsed < Duration::from_secs(10),
        "408 after {elapsed:?}"
    );
    session.wait_acquired(0).await;
    let (status, _) = session.exec("team", "list", &json!({})).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn invalid_input_is_refused_with_its_path_and_never_forwarded() {
    let session = Session::start().await;
    let before = session.server_requests().await;
    let channel = session.channel();
    let location = json!({"kind": "channel", "channelId": channel});
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "unknown field",
            serde_json::to_vec(&json!({"location": location, "title": "x", "priority": 1}))
                .unwrap(),
            "validation_failed",
            "/priority",
        ),
        (
            "duplicate key",
            br#"{"title": "a", "title": "b"}"#.to_vec(),
            "invalid_request",
            "",
        ),
        (
            "wrong type",
            serde_json::to_vec(&json!({"location": location, "title": 7})).unwrap(),
            "validation_failed",
            "/title",
        ),
        (
            "missing required field",
            serde_json::to_vec(&json!({"location": location})).unwrap(),
            "validation_failed",
            "",
        ),
        (
            "wrong nested type",
            serde_json::to_vec(
                &json!({"location": {"kind": "channel", "channelId": 1}, "title": "x"}),
            )
            .unwrap(),
            "validation_failed",
            "/location",
        ),
        (
            "trailing bytes",
            br#"{"title": "a"} x"#.to_vec(),
            "invalid_request",
            "",
        ),
    ];
    for (name, body, code, path) in cases {
        let response = session
            .daemon
            .client
            .post(format!("{}/task/create", session.base))
            .bearer_auth(session.token())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{name}");
        let envelope: Value = response.json().await.unwrap();
        assert_eq!(envelope["error"]["code"], code, "{name}: {envelope}");
        if code == "validation_failed" {
            assert_eq!(
                envelope["error"]["details"][0]["path"], path,
                "{name}: {envelope}"
            );
        }
    }
    assert_eq!(
        session.server_requests().await,
        before,
        "an invalid request reached the server"
    );
}

#[tokio::test]
async fn results_over_64_kib_are_refused_whole_with_the_right_continuation() {
    let session = Session::start().await;
    let location = json!({"kind": "channel", "channelId": session.channel()});
    for n in 0..12 {
        let (status, body) = session.exec("task", "create", &json!({"location": location, "title": format!("big {n}"), "description": "x".repeat(8000)})).await;
        assert_eq!(status, 200, "{body}");
    }
    // A read over budget: the inventory's continuation, never a truncated page.
    let (status, body) = session
        .exec("task", "list", &json!({"location": location, "limit": 12}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("result_budget_exceeded")),
        "{body}"
    );
    assert!(
        body["error"]["next"]
            .as_str()
            .unwrap()
            .contains("nextCursor"),
        "{body}"
    );
    assert!(body.get("data").is_none());
    let (status, _) = session
        .exec("task", "list", &json!({"location": location, "limit": 5}))
        .await;
    assert_eq!(status, 200, "a smaller page fits");

    // A write after which the task could not be read back is refused before anything is
    // written, naming the field and how much of it fits; the task stays as it was, readable.
    let wide = "\u{1}".repeat(8000);
    let (_, created) = session
        .exec(
            "task",
            "create",
            &json!({"location": location, "title": "wide", "description": wide}),
        )
        .await;
    let id = created["data"]["task"]["id"].as_str().unwrap().to_string();
    let (status, _) = session.exec("task", "claim", &json!({"taskId": id})).await;
    assert_eq!(status, 200);
    let complete = json!({"taskId": id, "result": wide, "requestId": "req-wide-000001"});
    let (status, body) = session.exec("task", "complete", &complete).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("validation_failed")),
        "{body}"
    );
    assert_eq!(body["error"]["details"][0]["path"], "/result", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`task get`"),
        "{body}"
    );
    assert!(
        body["error"].get("metadata").is_none(),
        "nothing was applied: {body}"
    );
    let (status, read) = session.exec("task", "get", &json!({"taskId": id})).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["data"]["task"]["status"], "claimed");
    assert_eq!(read["data"]["task"]["revision"], 2);
}

#[tokio::test]
async fn revocation_cancels_an_in_flight_request_before_dispatch() {
    let mut session = Session::start().await;
    let token = session.token();
    let before = session.server_requests().await;
    let mut in_flight = session.raw_post(&token, "team/list", 50, b"{").await;
    session.wait_acquired(1).await;
    // The runtime exits: its authorization is revoked while the request waits for its body.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(session.runtime_pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let _ = session.runtime.child.wait().await;
    assert_eq!(read_status(&mut in_flight).await, 403);
    assert_eq!(
        session.server_requests().await,
        before,
        "the server saw a dispatch after revocation"
    );
    let (status, _) = session
        .daemon
        .catalog(&session.daemon.workspace_id(), &session.agent, Some(&token))
        .await;
    assert_eq!(status, 403);
}

/// Runs `agentteam exec team list` outside `agentteam run` with the given token file and the
/// session's base URL, plus a valid raw token in `AGENTTEAM_EXEC_TOKEN` that must be ignored.
async fn exec_with_token_file(
    session: &Session,
    token_file: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    tokio::process::Command::new(bin())
        .arg("exec")
        .args(args)
        .env("AGENTTEAM_EXEC_BASE_URL", &session.base)
        .env("AGENTTEAM_EXEC_TOKEN_FILE", token_file)
        .env("AGENTTEAM_EXEC_TOKEN", session.token())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// Whatever answers on the Exec URL's loopback port with a same-origin 307 gets one request, not
/// a second with the bearer and the body again: `agentteam exec` says it was a redirect.
#[tokio::test]
async fn exec_follows_no_redirect_and_sends_its_credential_once() {
    let session = Session::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = stream
                .write_all(
                    b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /again\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
        }
    });
    let url = url::Url::parse(&session.base).unwrap();
    let base = format!("http://127.0.0.1:{port}{}", url.path());
    let output = tokio::process::Command::new(bin())
        .args(["exec", "team", "list"])
        .env("AGENTTEAM_EXEC_BASE_URL", &base)
        .env("AGENTTEAM_EXEC_TOKEN_FILE", &session.token_file)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("307 Temporary Redirect"), "{stderr}");
    assert!(!stderr.contains(&session.token()), "{stderr}");
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "one request, no second: {heads:?}");
    assert!(
        heads[0]
            .to_ascii_lowercase()
            .contains("authorization: bearer"),
        "{heads:?}"
    );
}

#[tokio::test]
async fn an_unusable_token_file_fails_closed_without_a_request() {
    use std::os::unix::fs::PermissionsExt;
    let session = Session::start().await;
    let dir = tempfile::tempdir().unwrap();
    let private = |name: &str, contents: &[u8], mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    let good = private("good", session.token().as_bytes(), 0o600);
    let symlink = dir.path().join("symlink");
    std::os::unix::fs::symlink(&good, &symlink).unwrap();
    let cases = vec![
        ("missing", dir.path().join("missing")),
        ("empty", private("empty", b"", 0o600)),
        ("a symlink", symlink),
        (
            "mode 0644",
            private("shared", session.token().as_bytes(), 0o644),
        ),
        ("over-size", private("huge", &vec![b'a'; 5000], 0o600)),
        ("a directory", dir.path().to_path_buf()),
        (
            "invalid characters",
            private("spaces", b"not a token at all", 0o600),
        ),
    ];
    let before = session.status().await["execRequests"].as_u64().unwrap();
    for (name, path) in cases {
        let output = exec_with_token_file(&session, &path, &["team", "list"]).await;
        assert_eq!(output.status.code(), Some(2), "{name}");
        assert!(
            String::from_utf8_lossy(&output.stderr)
                .contains("credential file is missing, unreadable or invalid"),
            "{name}"
        );
        assert!(output.stdout.is_empty(), "{name}");
    }
    assert_eq!(
        session.status().await["execRequests"].as_u64().unwrap(),
        before,
        "a refused token file still sent a request"
    );

    // The good file works: the one POST goes through.
    let output = exec_with_token_file(&session, &good, &["team", "list"]).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        session.status().await["execRequests"].as_u64().unwrap(),
        before + 1
    );
    // An unreachable daemon is a transport error: exit 2, nothing on stdout.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = tokio::process::Command::new(bin())
        .args(["exec", "team", "list"])
        .env(
            "AGENTTEAM_EXEC_BASE_URL",
            format!(
                "http://127.0.0.1:{port}/api/internal/exec/servers/wsp_00000000/agents/agt_00000000"
            ),
        )
        .env("AGENTTEAM_EXEC_TOKEN_FILE", &good)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        output.stdout.is_empty()
            && String::from_utf8_lossy(&output.stderr)
                .contains("cannot reach the AgentTeam daemon")
    );
    // A local validation error names the path and never touches the network.
    let output = exec_with_token_file(&session, &good, &["task", "get", r#"{"taskId": 7}"#]).await;
    assert_eq!(output.status.code(), Some(1));
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(envelope["error"]["details"][0]["path"], "/taskId");
    assert_eq!(
        session.status().await["execRequests"].as_u64().unwrap(),
        before + 1
    );
}

/// The Exec route refuses a body not declared `application/json` with 415, like the MCP
/// route and the server, before reading it.
#[tokio::test]
async fn a_non_json_body_is_refused_with_415() {
    let session = Session::start().await;
    let response = session
        .daemon
        .client
        .post(format!("{}/team/list", session.base))
        .bearer_auth(session.token())
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_media_type", "{body}");
}
