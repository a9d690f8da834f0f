//! The daemon-owned `agent` domain end to end: the safe projection never carries a
//! secret anywhere a model, a log or another process could see it; `a2` cursors are refused
//! whenever the collection or the query changed; a page copies only what it returns.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::support::{Launched, TestDaemon, bin, secret_shapes};

/// A runtime's Exec route: its base URL and token.
struct Exec {
    _runtime: Launched,
    base: String,
    token_file: PathBuf,
}

impl Exec {
    async fn start(daemon: &TestDaemon, agent: &str) -> Exec {
        let mut runtime = daemon.launch(
            agent,
            &[],
            r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 600"#,
        );
        let base = runtime.line().await;
        let token_file = PathBuf::from(runtime.line().await);
        Exec {
            _runtime: runtime,
            base,
            token_file,
        }
    }

    /// `POST {base}/agent/{action}`.
    async fn call(&self, daemon: &TestDaemon, action: &str, input: Value) -> (u16, Value) {
        let response = daemon
            .client
            .post(format!("{}/agent/{action}", self.base))
            .bearer_auth(std::fs::read_to_string(&self.token_file).unwrap())
            .json(&input)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// `agentteam exec agent ACTION -` with `input` on stdin, as a runtime runs it.
    async fn cli(&self, action: &str, input: &Value) -> String {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new(bin())
            .args(["exec", "agent", action, "-"])
            .env("AGENTTEAM_EXEC_BASE_URL", &self.base)
            .env("AGENTTEAM_EXEC_TOKEN_FILE", &self.token_file)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.to_string().as_bytes()).await.unwrap();
        drop(stdin);
        let output = child.wait_with_output().await.unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr)
    }
}

/// Samples every process's argv while it runs, until stopped.
struct ArgvSampler {
    seen: Arc<Mutex<BTreeSet<String>>>,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ArgvSampler {
    fn start() -> ArgvSampler {
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let stop = tokio_util::sync::CancellationToken::new();
        let (sink, done) = (seen.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !done.is_cancelled() {
                for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    if let Ok(argv) = std::fs::read(entry.path().join("cmdline")) {
                        let argv = String::from_utf8_lossy(&argv).replace('\0', " ");
                        sink.lock().unwrap().insert(argv);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        ArgvSampler { seen, stop, task }
    }

    async fn finish(self) -> BTreeSet<String> {
        self.stop.cancel();
        let _ = self.task.await;
        Arc::try_unwrap(self.seen).unwrap().into_inner().unwrap()
    }
}

fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The marker test: a profile whose API key, header values, base URL user info, query and
/// fragment, knowledge source ids and allowed paths are unique markers. No `agent` action's
/// output, `prompt`, `catalog`, argv of any process while the test runs, or the daemon's log
/// carries any of them.
#[tokio::test]
async fn no_secret_of_a_profile_reaches_a_model_a_log_or_argv() {
    let sampler = ArgvSampler::start();
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("caller").await;
    let dir = tempfile::tempdir().unwrap();
    let markers = [
        "sk-KEYMARKERq7w2",
        "HEADERVALUEMARKERz9x1",
        "USERINFOMARKERp3k8",
        "QUERYMARKERm4n6",
        "FRAGMENTMARKERr5t2",
        "kbs_SOURCEMARKERa1b2c3",
        "PATHMARKERj8h4",
        "sk-STDINMARKERc6v3",
    ];
    let key_file = dir.path().join("key");
    write_private(&key_file, &format!("{}\n", markers[0]));
    let header_file = dir.path().join("headers");
    write_private(
        &header_file,
        &format!("# team headers\nX-Team-Auth: {}\n", markers[1]),
    );
    let url_file = dir.path().join("url");
    write_private(
        &url_file,
        &format!(
            "https://ada:{}@llm.example.com:8443/v1?key={}#{}\n",
            markers[2], markers[3], markers[4]
        ),
    );
    let output = daemon
        .cli(&[
            "agent",
            "add",
            "marked",
            "--runtime-family",
            "codex",
            "--provider",
            "openai",
            "--model",
            "gpt-5",
            "--json",
            "--api-key-file",
        ])
        .arg(&key_file)
        .arg("--header-file")
        .arg(&header_file)
        .arg("--base-url-file")
        .arg(&url_file)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let added: Value = serde_json::from_slice(&output.stdout).unwrap();
    let marked = added["agent"]["id"].as_str().unwrap().to_string();
    // Knowledge sources and the filesystem policy go through the admin API body, not argv.
    let (status, body) = daemon
        .admin(
            Method::PATCH,
            &format!("agents/{marked}"),
            Some(json!({
                "agent": { "knowledgeSourceIds": [markers[5]] },
                "settings": { "allowedPaths": [format!("/srv/{}", markers[6])] }
            })),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // A secret may come from stdin (`-`): it replaces the key, and only the secret file has it.
    let mut update = daemon
        .cli(&["agent", "update", "marked", "--api-key-file", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = update.stdin.take().unwrap();
    stdin
        .write_all(format!("{}\n", markers[7]).as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let updated = update.wait_with_output().await.unwrap();
    assert!(
        updated.status.success(),
        "{}",
        String::from_utf8_lossy(&updated.stderr)
    );
    let secret_file = daemon
        .state_dir
        .join("agents")
        .join(&marked)
        .join("secrets.json");
    let stored = std::fs::read_to_string(&secret_file).unwrap();
    assert!(stored.contains(markers[7]) && !stored.contains(markers[0]));

    let exec = Exec::start(&daemon, "caller").await;
    let mut seen = vec![
        body.to_string(),
        added.to_string(),
        String::from_utf8_lossy(&updated.stdout).into_owned(),
    ];
    seen.push(exec.cli("list", &json!({})).await);
    seen.push(exec.cli("get", &json!({"agentId": marked})).await);
    seen.push(
        exec.cli("update", &json!({"agentId": marked, "model": "gpt-5-mini"}))
            .await,
    );
    let listed: Value = serde_json::from_str(&seen[3]).unwrap();
    let profile = listed["data"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == marked.as_str())
        .unwrap()
        .clone();
    // What may be said is said: the key is configured, the header is named, the counts are right.
    assert_eq!(profile["apiKeyConfigured"], true);
    assert_eq!(profile["headerNames"], json!(["x-team-auth"]));
    assert_eq!(profile["baseUrl"], "https://llm.example.com:8443/v1");
    assert_eq!(profile["knowledgeSourceCount"], 1);
    assert_eq!(profile["filesystemPolicy"]["allowedPathCount"], 1);
    for args in [vec!["prompt"], vec!["catalog"], vec!["catalog", "--json"]] {
        let output = daemon.cli(&args).output().await.unwrap();
        seen.push(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let output = daemon
        .cli(&["agent", "get", "marked"])
        .output()
        .await
        .unwrap();
    seen.push(String::from_utf8_lossy(&output.stdout).into_owned());
    // A model cannot set a secret: the Exec input has no field for one, and a base URL with user
    // info is refused; neither refusal echoes the value.
    for input in [
        json!({"handle": "keyed", "apiKey": markers[0]}),
        json!({"handle": "keyed", "baseUrl": format!("https://ada:{}@llm.example.com/v1", markers[2])}),
        json!({"agentId": marked, "baseUrl": format!("https://llm.example.com/v1?key={}", markers[3])}),
    ] {
        let action = if input.get("agentId").is_some() {
            "update"
        } else {
            "create"
        };
        let (status, body) = exec.call(&daemon, action, input).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (400, &json!("validation_failed")),
            "{body}"
        );
        seen.push(body.to_string());
    }
    seen.push(
        exec.cli("create", &json!({"handle": "second", "model": "gpt-5"}))
            .await,
    );
    seen.push(exec.cli("reload", &json!({})).await);
    let (_, deleted) = exec
        .call(&daemon, "delete", json!({"agentId": marked}))
        .await;
    seen.push(deleted.to_string());
    let argv = sampler.finish().await;
    seen.extend(argv);
    seen.push(daemon.log());
    for marker in markers {
        for text in &seen {
            assert!(!text.contains(marker), "`{marker}` leaked into: {text}");
        }
    }
    // The secrets were stored: the secret file holds them, owner-only.
    assert!(secret_shapes(&daemon.log()).is_empty());
}

/// Creates `count` agents through the admin API; returns their ids, sorted.
async fn create_agents(
    daemon: &TestDaemon,
    prefix: &str,
    count: usize,
    family: &str,
) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..count {
        let (status, body) = daemon
            .admin(
                Method::POST,
                "agents",
                Some(json!({"agent": {"handle": format!("{prefix}{n}"), "runtimeFamily": family}})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        ids.push(body["data"]["agent"]["id"].as_str().unwrap().to_string());
    }
    ids.sort();
    ids
}

/// One page of `agent list` through the Exec route.
async fn page(daemon: &TestDaemon, exec: &Exec, input: Value) -> (u16, Value) {
    exec.call(daemon, "list", input).await
}

#[track_caller]
fn refused(answer: &(u16, Value), reason: &str) {
    assert_eq!(answer.0, 400, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], "validation_failed");
    assert_eq!(answer.1["error"]["details"][0]["path"], "/cursor");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(reason),
        "expected `{reason}` in `{message}`"
    );
}

/// Every way a cursor goes stale is a typed validation failure, never page one: a create, an
/// update, a delete, a reload, an orphan cleanup; the anchor deleted or renamed; another filter;
/// a tampered token.
#[tokio::test]
async fn every_stale_or_foreign_cursor_is_refused() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("caller").await;
    let exec = Exec::start(&daemon, "caller").await;
    let ids = create_agents(&daemon, "worker", 8, "codex").await;
    let filter = json!({"runtimeFamily": "codex", "limit": 2});
    let cursor =
        |answer: &(u16, Value)| answer.1["data"]["nextCursor"].as_str().unwrap().to_string();
    let fresh = || async {
        let first = page(&daemon, &exec, filter.clone()).await;
        assert_eq!(first.0, 200, "{}", first.1);
        cursor(&first)
    };
    let next = |cursor: String| {
        let mut input = filter.clone();
        input["cursor"] = json!(cursor);
        page(&daemon, &exec, input)
    };

    // Unchanged data: the cursor continues.
    let c = fresh().await;
    let second = next(c).await;
    assert_eq!(second.0, 200);
    assert_eq!(second.1["data"]["agents"][0]["id"], ids[2].as_str());

    // A create.
    let c = fresh().await;
    create_agents(&daemon, "late", 1, "generic").await;
    refused(&next(c).await, "changed since");
    // An update of a profile that is not the anchor.
    let c = fresh().await;
    let (status, body) = exec
        .call(
            &daemon,
            "update",
            json!({"agentId": ids[3], "model": "gpt-5"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    refused(&next(c).await, "changed since");
    // A delete of a profile that is not the anchor.
    let c = fresh().await;
    let (status, _) = exec
        .call(&daemon, "delete", json!({"agentId": ids[3]}))
        .await;
    assert_eq!(status, 200);
    refused(&next(c).await, "changed since");
    // A reload.
    let c = fresh().await;
    let (status, _) = exec.call(&daemon, "reload", json!({})).await;
    assert_eq!(status, 200);
    refused(&next(c).await, "changed since");
    // The anchor renamed.
    let c = fresh().await;
    let (status, body) = exec
        .call(
            &daemon,
            "update",
            json!({"agentId": ids[1], "handle": "renamed-anchor"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    refused(&next(c).await, "renamed");
    // The anchor deleted.
    let c = fresh().await;
    let (status, _) = exec
        .call(&daemon, "delete", json!({"agentId": ids[1]}))
        .await;
    assert_eq!(status, 200);
    refused(&next(c).await, "deleted");
    // Another filter.
    let c = fresh().await;
    refused(
        &page(&daemon, &exec, json!({"limit": 2, "cursor": c})).await,
        "other filters",
    );
    // A tampered token.
    let c = fresh().await;
    let mut tampered: Vec<char> = c.chars().collect();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == 'A' { 'B' } else { 'A' };
    refused(&next(tampered.into_iter().collect()).await, "altered");
    // A token of another kind.
    refused(
        &next("a2notacursor".into()).await,
        "not an `agent list` cursor",
    );

    // Orphan cleanup: a profile whose secret file is gone is dropped at reload.
    let extra = create_agents(&daemon, "orphan", 2, "codex").await;
    let c = fresh().await;
    std::fs::remove_file(
        daemon
            .state_dir
            .join("agents")
            .join(&extra[0])
            .join("secrets.json"),
    )
    .unwrap();
    let (status, body) = exec.call(&daemon, "reload", json!({})).await;
    assert_eq!(
        (status, &body["data"]["removed"]),
        (200, &json!(1)),
        "{body}"
    );
    refused(&next(c).await, "changed since");
    // ...and so is one the server no longer knows (a profile for an agent it never had).
    let stranger = daemon.state_dir.join("agents/agt_0000000000stranger");
    crate::support::copy_tree(&daemon.state_dir.join("agents").join(&extra[1]), &stranger);
    let profile = stranger.join("profile.json");
    let text = std::fs::read_to_string(&profile)
        .unwrap()
        .replace(&extra[1], "agt_0000000000stranger")
        .replace("orphan1", "stranger");
    std::fs::write(&profile, text).unwrap();
    let (status, body) = exec.call(&daemon, "reload", json!({})).await;
    assert_eq!(
        (status, &body["data"]["removed"]),
        (200, &json!(1)),
        "{body}"
    );
    assert!(!stranger.exists());
}

/// Follows `nextCursor` to the end; every id in page order.
async fn walk(daemon: &TestDaemon, exec: &Exec, limit: u64) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let mut input = json!({"limit": limit});
        if let Some(cursor) = &cursor {
            input["cursor"] = json!(cursor);
        }
        let (status, body) = page(daemon, exec, input).await;
        assert_eq!(status, 200, "{body}");
        let data = &body["data"];
        let agents = data["agents"].as_array().unwrap();
        assert!(agents.len() as u64 <= limit);
        ids.extend(agents.iter().map(|a| a["id"].as_str().unwrap().to_string()));
        match (data["hasMore"].as_bool().unwrap(), data.get("nextCursor")) {
            (true, Some(next)) => cursor = Some(next.as_str().unwrap().to_string()),
            (false, None) => return ids,
            other => panic!("hasMore and nextCursor disagree: {other:?}"),
        }
    }
    panic!("the list does not end");
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// Unchanged data pages through every profile exactly once, in agent id order.
    #[test]
    fn unchanged_profiles_page_exactly_once(count in 0usize..25, limit in 1u64..8) {
        block_on(async {
            let daemon = TestDaemon::start(&[]).await;
            let caller = daemon.add_agent("caller").await;
            let exec = Exec::start(&daemon, "caller").await;
            let mut expected = create_agents(&daemon, "agent", count, "generic").await;
            expected.push(caller);
            expected.sort();
            let walked = walk(&daemon, &exec, limit).await;
            assert_eq!(walked, expected);
        });
    }
}

/// `agent list` at the store's bound: with 10,000 profiles a page of 20 copies at most 21
/// profiles and resolves at most 20 sessions (the daemon's counters say so), on the first page
/// and the last.
#[tokio::test]
async fn a_page_copies_only_what_it_returns_at_ten_thousand_profiles() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("caller").await;
    let exec = Exec::start(&daemon, "caller").await;
    let total = 10_000 - 1;
    seed_profiles(&daemon, total).await;
    let (status, body) = exec.call(&daemon, "reload", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["loaded"], 10_000, "{body}");

    let counters = || async {
        let status = daemon.admin_get("status").await;
        (
            status["profilesCopied"].as_u64().unwrap(),
            status["sessionsResolved"].as_u64().unwrap(),
        )
    };
    let before = counters().await;
    let (status, first) = page(&daemon, &exec, json!({"limit": 20})).await;
    assert_eq!(status, 200);
    let after = counters().await;
    assert!(after.0 - before.0 <= 21, "copied {}", after.0 - before.0);
    assert!(after.1 - before.1 <= 20, "resolved {}", after.1 - before.1);
    assert_eq!(first["data"]["agents"].as_array().unwrap().len(), 20);

    // Walk to the last page; it costs the same.
    let mut cursor = first["data"]["nextCursor"].as_str().unwrap().to_string();
    let mut pages = 1;
    loop {
        let before = counters().await;
        let (status, body) = page(&daemon, &exec, json!({"limit": 20, "cursor": cursor})).await;
        assert_eq!(status, 200, "{body}");
        let after = counters().await;
        assert!(after.0 - before.0 <= 21 && after.1 - before.1 <= 20);
        pages += 1;
        match body["data"]["nextCursor"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => break,
        }
    }
    assert_eq!(pages, 500);

    // The default page is 20.
    let (status, body) = page(&daemon, &exec, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["agents"].as_array().unwrap().len(), 20);

    // The bound at its edge: the 10,001st profile is refused, by `agent create` and by a reload
    // that finds one more on disk; the store keeps its 10,000.
    let (status, body) = exec
        .call(&daemon, "create", json!({"handle": "one-too-many"}))
        .await;
    assert_eq!(body["error"]["code"], "invalid_state", "{status} {body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("10000 agent profiles"), "{message}");
    seed_profiles_named(&daemon, "over", 1).await;
    let (status, body) = exec.call(&daemon, "reload", json!({})).await;
    assert_eq!(body["error"]["code"], "invalid_state", "{status} {body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("more than 10000"), "{message}");
    assert_eq!(daemon.admin_get("status").await["agents"], 10_000);
}

/// Registers `count` agents on the embedded server (operator API, 16 at a time) and writes their
/// profiles in the store's documented layout, as a daemon would have left them.
pub(crate) async fn seed_profiles(daemon: &TestDaemon, count: usize) {
    seed_profiles_named(daemon, "bulk", count).await
}

/// [`seed_profiles`] with handles `{prefix}00000`, `{prefix}00001`, ….
async fn seed_profiles_named(daemon: &TestDaemon, prefix: &str, count: usize) {
    let state = &daemon.state_dir;
    let identity: Value =
        serde_json::from_slice(&std::fs::read(state.join("identity.json")).unwrap()).unwrap();
    let server = daemon.server_url.clone();
    let operator = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
    let workspace = identity["workspaceId"].as_str().unwrap().to_string();
    let human = identity["humanId"].as_str().unwrap().to_string();
    let agents_dir = state.join("agents");
    let semaphore = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..count {
        let (client, server, operator, workspace, human, dir, permit) = (
            daemon.client.clone(),
            server.clone(),
            operator.clone(),
            workspace.clone(),
            human.clone(),
            agents_dir.clone(),
            semaphore.clone().acquire_owned().await.unwrap(),
        );
        let handle = format!("{prefix}{n:05}");
        tasks.spawn(async move {
            let response = client
                .post(format!("{server}/admin/workspaces/{workspace}/agents"))
                .bearer_auth(&operator)
                .json(&json!({"ownerHumanId": human, "handle": handle, "displayName": handle}))
                .send()
                .await
                .unwrap();
            let body: Value = response.json().await.unwrap();
            let id = body["data"]["agentId"].as_str().unwrap().to_string();
            let profile_dir = dir.join(&id);
            std::fs::create_dir_all(&profile_dir).unwrap();
            std::fs::write(profile_dir.join("secrets.json"), "{}\n").unwrap();
            let profile = json!({
                "agentId": id, "handle": handle, "runtimeFamily": "generic", "provider": null,
                "model": null, "baseUrl": null, "knowledgeSourceIds": [], "allowedPaths": [],
                "displayName": handle, "description": null, "revision": 1,
                "createdAtMs": 1_800_000_000_000_i64, "updatedAtMs": 1_800_000_000_000_i64
            });
            std::fs::write(profile_dir.join("profile.json"), profile.to_string()).unwrap();
            drop(permit);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// The server has no route for a daemon-owned action: the daemon answers them itself.
#[tokio::test]
async fn the_server_does_not_serve_the_daemons_domain() {
    let server = crate::support::TestServer::start().await;
    let w = server.workspace("acme").await;
    let (status, body) = server
        .action(&w, &w.agent_id, "agent", "list", json!({}))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("unknown_action")),
        "{body}"
    );
}

/// The human CLI manages the same profiles: update, clear a secret, list as a table and as JSON,
/// reload, remove; a secret never comes from a flag.
#[tokio::test]
async fn the_human_cli_manages_the_same_profiles() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("builder").await;
    let run = |args: &[&str]| {
        let mut command = daemon.cli(args);
        async move {
            let output = command.output().await.unwrap();
            (
                output.status.code().unwrap(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    write_private(&key, "sk-human\n");
    let (code, _, stderr) = run(&[
        "agent",
        "update",
        "builder",
        "--model",
        "claude-sonnet-4-5",
        "--runtime-family",
        "claude",
        "--api-key-file",
        key.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let (code, out, _) = run(&["agent", "get", "builder"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("model:              claude-sonnet-4-5"),
        "{out}"
    );
    assert!(out.contains("API key:            configured"), "{out}");
    let (_, out, _) = run(&["agent", "update", "builder", "--clear", "api-key", "--json"]).await;
    let updated: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(updated["agent"]["apiKeyConfigured"], false);
    assert_eq!(updated["agent"]["revision"], 3);
    // A base URL with a secret part is refused on the command line.
    let (code, _, stderr) = run(&[
        "agent",
        "update",
        "builder",
        "--base-url",
        "https://u:p@example.com",
    ])
    .await;
    assert_eq!(code, 2);
    assert!(stderr.contains("--base-url-file"), "{stderr}");
    let (_, table, _) = run(&["agent", "list", "--runtime-family", "claude"]).await;
    assert_eq!(table.lines().count(), 2, "a heading and one agent: {table}");
    assert!(
        table.contains("builder") && table.contains("claude"),
        "{table}"
    );
    let (_, json_list, _) = run(&["agent", "list", "--json"]).await;
    let listed: Value = serde_json::from_str(&json_list).unwrap();
    assert_eq!(listed["agents"].as_array().unwrap().len(), 1);
    let (code, out, _) = run(&["agent", "reload", "--json"]).await;
    assert_eq!(
        (
            code,
            serde_json::from_str::<Value>(&out).unwrap()["loaded"].clone()
        ),
        (0, json!(1))
    );
    let (code, _, _) = run(&["agent", "remove", "builder"]).await;
    assert_eq!(code, 0);
    let (code, _, stderr) = run(&["agent", "get", "builder"]).await;
    assert_eq!(code, 2, "{stderr}");
}

/// A profile edited by hand so that its projection is off the output contract (more allowed
/// paths than the contract counts; a runtime family the contract does not name) is refused as a
/// server's off-contract answer is: `upstream_failed`, an incident id, and a log line under it.
#[tokio::test]
async fn a_hand_edited_profile_off_the_contract_is_refused_and_logged() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("reader").await;
    let exec = Exec::start(&daemon, "reader").await;
    for (handle, edit) in [
        (
            "paths",
            (|profile: &mut Value| {
                profile["allowedPaths"] = (0..257).map(|n| format!("/p/{n}")).collect();
            }) as fn(&mut Value),
        ),
        ("family", |profile: &mut Value| {
            profile["runtimeFamily"] = json!("Not A Family");
        }),
    ] {
        let id = daemon.add_agent(handle).await;
        let file = daemon
            .state_dir
            .join("agents")
            .join(&id)
            .join("profile.json");
        let mut profile: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        edit(&mut profile);
        write_private(&file, &profile.to_string());
        let (status, _) = exec.call(&daemon, "reload", json!({})).await;
        assert_eq!(status, 200, "{handle}");

        let (status, body) = exec.call(&daemon, "get", json!({"agentId": id})).await;
        assert!(status >= 500, "{handle}: {status} {body}");
        let error = &body["error"];
        assert_eq!(error["code"], "upstream_failed", "{handle}: {error}");
        assert_eq!(
            error["message"],
            "the owner of `agent get` answered with a result off its output contract",
            "{handle}"
        );
        let incident = error["incidentId"]
            .as_str()
            .expect("a 5xx names its incident");
        let log = daemon.log();
        assert!(
            log.lines()
                .any(|line| line.contains(incident) && line.contains("output contract")),
            "no log line for {incident}:\n{log}"
        );
        // Fixed by hand again, the same profile is answered.
        let mut profile: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        profile["allowedPaths"] = json!([]);
        profile["runtimeFamily"] = json!("generic");
        write_private(&file, &profile.to_string());
        exec.call(&daemon, "reload", json!({})).await;
        let (status, body) = exec.call(&daemon, "get", json!({"agentId": id})).await;
        assert_eq!(status, 200, "{handle}: {body}");
    }
}
