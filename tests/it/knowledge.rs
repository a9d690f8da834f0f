//! Knowledge and memory through the daemon: a runtime's current turn (set at launch, replaced and
//! cleared by `agentteam turn`, listed by `agentteam runs`), forwarded only with `kb_search` and
//! `kb_fetch` and never with an Exec request; each failure with its stage; the memory directory
//! and `memory_search` (locators only, fresh writes, a damaged index, a missing directory); and
//! the official Python SDK client over both tools.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::support::{Launched, Tap, TestDaemon, repo_root, spawn_server};

/// One runtime's MCP endpoint and what it printed at start.
struct Runtime {
    launched: Launched,
    url: String,
    token_file: PathBuf,
    memory_dir: PathBuf,
}

impl Runtime {
    /// Launches a runtime of `agent` with `flags`; it prints its MCP URL, token file and memory
    /// directory, then runs `then` (by default, it waits).
    async fn start(daemon: &TestDaemon, agent: &str, flags: &[&str], then: &str) -> Runtime {
        let script = format!(
            r#"echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; echo "$AGENTTEAM_MEMORY_DIR"; {then}"#
        );
        let mut launched = daemon.launch(agent, flags, &script);
        let url = launched.line().await;
        let token_file = PathBuf::from(launched.line().await);
        let memory_dir = PathBuf::from(launched.line().await);
        Runtime {
            launched,
            url,
            token_file,
            memory_dir,
        }
    }

    /// `tools/call` of `tool`; the `CallToolResult`.
    async fn call(&self, daemon: &TestDaemon, tool: &str, arguments: Value) -> Value {
        let token = std::fs::read_to_string(&self.token_file).unwrap();
        let response = daemon
            .client
            .post(&self.url)
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.json::<Value>().await.unwrap()["result"].clone()
    }

    /// The structured result of a call that must succeed.
    async fn ok(&self, daemon: &TestDaemon, tool: &str, arguments: Value) -> Value {
        let result = self.call(daemon, tool, arguments).await;
        assert_eq!(result["isError"], false, "{tool}: {result}");
        result["structuredContent"].clone()
    }

    /// The error envelope of a call that must fail as an `isError` result.
    async fn error(&self, daemon: &TestDaemon, tool: &str, arguments: Value) -> Value {
        let result = self.call(daemon, tool, arguments).await;
        assert_eq!(result["isError"], true, "{tool}: {result}");
        assert!(result.get("structuredContent").is_none());
        let envelope: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        envelope["error"].clone()
    }
}

/// `POST` to the daemon's server's operator API for the daemon's workspace; the `data`.
async fn operator(daemon: &TestDaemon, path: &str, body: Value) -> Value {
    let token = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
    let response = daemon
        .client
        .post(format!(
            "{}/admin/workspaces/{}{path}",
            daemon.server_url,
            daemon.workspace_id()
        ))
        .bearer_auth(token.trim())
        .json(&body)
        .send()
        .await
        .unwrap();
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["ok"], true, "{value}");
    value["data"].clone()
}

/// The daemon's channel, a thread in it, a knowledge source granted to the channel with two
/// documents, and a human's message in the channel and in the thread.
struct Conversation {
    channel: String,
    thread: String,
    in_channel: String,
    in_thread: String,
}

async fn conversation(daemon: &TestDaemon) -> Conversation {
    let identity: Value =
        serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
            .unwrap();
    let channel_id = identity["channelId"].as_str().unwrap().to_string();
    let human = operator(
        daemon,
        "/humans",
        json!({"handle": "asker", "displayName": "Asker"}),
    )
    .await["humanId"]
        .clone();
    operator(
        daemon,
        &format!("/channels/{channel_id}/members"),
        json!({"memberId": human}),
    )
    .await;
    let thread = operator(
        daemon,
        &format!("/channels/{channel_id}/threads"),
        json!({"title": "incident"}),
    )
    .await["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let source = operator(daemon, "/kb/sources", json!({"name": "runbooks"})).await["sourceId"]
        .as_str()
        .unwrap()
        .to_string();
    operator(
        daemon,
        &format!("/kb/sources/{source}/grants"),
        json!({"channelId": channel_id}),
    )
    .await;
    operator(daemon, &format!("/kb/sources/{source}/documents"), json!({"path": "failover.md", "body": "# Failover\nPromote the standby replica, then repoint the pooler."})).await;
    operator(daemon, &format!("/kb/sources/{source}/documents"), json!({"path": "backups.md", "body": "# Backups\nNightly base backups and continuous archiving."})).await;
    let say = |thread: Option<String>| {
        let mut body = json!({"authorHumanId": human, "channelId": channel_id, "content": "how do we fail over?"});
        if let Some(thread) = thread {
            body["threadId"] = json!(thread);
        }
        body
    };
    let in_channel = operator(daemon, "/messages", say(None)).await["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    let in_thread = operator(daemon, "/messages", say(Some(thread.clone()))).await["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    Conversation {
        channel: format!("channel:{channel_id}"),
        thread: format!("thread:{thread}"),
        in_channel,
        in_thread,
    }
}

async fn cli(daemon: &TestDaemon, args: &[&str]) -> (i32, String, String) {
    let output = daemon.cli(args).output().await.unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// A turn set at launch is what `kb_search` and `kb_fetch` use; `agentteam turn` replaces and
/// clears it (then the call stops at `route_missing`); `agentteam runs` shows it.
#[tokio::test]
async fn a_runtime_searches_knowledge_in_the_turn_it_answers() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let talk = conversation(&daemon).await;
    let rt = Runtime::start(
        &daemon,
        "alpha",
        &[
            "--turn-target",
            &talk.channel,
            "--turn-message",
            &talk.in_channel,
        ],
        "exec sleep 120",
    )
    .await;

    let found = rt
        .ok(&daemon, "kb_search", json!({"query": "replica failover"}))
        .await;
    let first = &found["documents"][0];
    assert_eq!(first["title"], "Failover", "{found}");
    assert!(
        first["snippet"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("replica"),
        "{found}"
    );
    let fetched = rt
        .ok(
            &daemon,
            "kb_fetch",
            json!({"documentId": first["documentId"]}),
        )
        .await;
    assert_eq!(
        fetched["content"],
        "# Failover\nPromote the standby replica, then repoint the pooler."
    );
    assert_eq!(fetched["section"], 0);

    // `agentteam runs` lists the run with its turn, as text and as JSON.
    let (code, text, stderr) = cli(&daemon, &["runs"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        text.contains(&format!("{} (message {})", talk.channel, talk.in_channel)),
        "{text}"
    );
    let (code, listed, _) = cli(&daemon, &["runs", "--json"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let run = listed["runs"][0].clone();
    assert_eq!(
        run["turn"],
        json!({"target": talk.channel, "messageId": talk.in_channel})
    );
    let run_id = run["runId"].as_str().unwrap().to_string();

    // Cleared: a classified refusal at `route_missing` that says what is missing.
    let (code, text, stderr) = cli(&daemon, &["turn", &run_id, "--clear"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(text, format!("run {run_id} now answers no turn\n"));
    for (tool, arguments) in [
        ("kb_search", json!({"query": "replica"})),
        ("kb_fetch", json!({"documentId": first["documentId"]})),
    ] {
        let error = rt.error(&daemon, tool, arguments).await;
        assert_eq!(
            (error["code"].as_str(), error["stage"].as_str()),
            (Some("invalid_state"), Some("route_missing")),
            "{error}"
        );
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("Human-initiated turn"),
            "{error}"
        );
    }
    // Malformed arguments are the request's fault, at `request_validation`, before the turn.
    let error = rt
        .error(&daemon, "kb_search", json!({"query": "x", "limit": 99}))
        .await;
    assert_eq!(
        (error["code"].as_str(), error["stage"].as_str()),
        (Some("validation_failed"), Some("request_validation")),
        "{error}"
    );

    // Replaced by the next delivery: a turn in the thread.
    let (code, text, stderr) = cli(
        &daemon,
        &[
            "turn",
            &run_id,
            "--target",
            &talk.thread,
            "--message",
            &talk.in_thread,
            "--json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["run"]["turn"]["target"], talk.thread);
    let found = rt
        .ok(&daemon, "kb_search", json!({"query": "backups"}))
        .await;
    assert_eq!(found["documents"][0]["title"], "Backups");
    // A turn whose message is not in its target is refused by the server at its stage.
    cli(
        &daemon,
        &[
            "turn",
            &run_id,
            "--target",
            &talk.thread,
            "--message",
            &talk.in_channel,
        ],
    )
    .await;
    let error = rt
        .error(&daemon, "kb_search", json!({"query": "backups"}))
        .await;
    assert_eq!(
        (error["code"].as_str(), error["stage"].as_str()),
        (Some("not_found"), Some("target_scope_resolution")),
        "{error}"
    );

    // Bad input to the commands: usage errors and a classified refusal.
    // The daemon's refusals exit 2, like every admin refusal.
    let (code, _, stderr) = cli(
        &daemon,
        &[
            "turn",
            "run_nope",
            "--target",
            &talk.thread,
            "--message",
            &talk.in_thread,
        ],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no live run"), "{stderr}");
    let (code, _, stderr) = cli(
        &daemon,
        &["turn", &run_id, "--target", "room:1", "--message", "m"],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("a turn is a target"), "{stderr}");
    let (code, _, _) = cli(&daemon, &["turn", &run_id]).await;
    assert_eq!(code, 2, "neither a turn nor --clear");
    let (code, _, stderr) = cli(
        &daemon,
        &[
            "run",
            "--agent",
            "alpha",
            "--turn-target",
            "room:x",
            "--turn-message",
            "m",
            "--",
            "true",
        ],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("a turn is a target"), "{stderr}");
    let (code, _, _) = cli(
        &daemon,
        &[
            "run",
            "--agent",
            "alpha",
            "--turn-target",
            &talk.channel,
            "--",
            "true",
        ],
    )
    .await;
    assert_eq!(code, 2, "a target needs its message");
    drop(rt);
}

/// Every hop of a knowledge call that fails names its stage, at the network edge between the
/// daemon and a real server (`fault_proxy`): a server that does not serve the knowledge route is
/// `route_missing`; no usable answer from AgentTeam Core (the connection dropped, an answer that
/// is not the contract's) is `core_unreachable`, never `route_missing`; the knowledge owner's
/// refusal is `upstream`. (No turn, malformed arguments and a refused target are in
/// `a_runtime_searches_knowledge_in_the_turn_it_answers`.)
#[tokio::test]
async fn the_hop_that_fails_names_its_stage() {
    let server_dir = tempfile::tempdir().unwrap();
    let (_server, server_url, _) = spawn_server(server_dir.path()).await;
    let proxy = FaultProxy::start(&server_url).await;
    let (daemon, _talk, rt) = behind(server_dir.path(), &proxy.url, "exec sleep 120").await;
    let found = rt
        .ok(&daemon, "kb_search", json!({"query": "replica"}))
        .await;
    let document = found["documents"][0]["documentId"]
        .as_str()
        .unwrap()
        .to_string();
    let stage = |error: &Value| error["stage"].as_str().map(str::to_string);

    // The owner refuses: a document that is not there.
    let unknown = format!("{}0", &document[..document.len() - 1]);
    let unknown = if unknown == document {
        format!("{}1", &document[..document.len() - 1])
    } else {
        unknown
    };
    let error = rt
        .error(&daemon, "kb_fetch", json!({"documentId": unknown}))
        .await;
    assert_eq!(stage(&error).as_deref(), Some("upstream"), "{error}");

    // A server without the knowledge route answers its own `no such route`.
    proxy.set(
        "/knowledge/",
        Fault::Answer(
            404,
            json!({"ok": false, "error": {"code": "not_found", "message": "no such route"}})
                .to_string(),
        ),
    );
    let error = rt
        .error(&daemon, "kb_search", json!({"query": "replica"}))
        .await;
    assert_eq!(stage(&error).as_deref(), Some("route_missing"), "{error}");

    // No usable answer from Core: the connection closed, or bytes that are not the envelope.
    proxy.set("/knowledge/", Fault::Drop);
    let error = rt
        .error(&daemon, "kb_search", json!({"query": "replica"}))
        .await;
    assert_eq!(
        stage(&error).as_deref(),
        Some("core_unreachable"),
        "{error}"
    );
    assert_eq!(error["code"], "upstream_unavailable", "{error}");
    proxy.set(
        "/knowledge/",
        Fault::Rewrite(|_| b"<html>bad gateway</html>".to_vec()),
    );
    let error = rt
        .error(&daemon, "kb_fetch", json!({"documentId": document}))
        .await;
    assert_eq!(
        stage(&error).as_deref(),
        Some("core_unreachable"),
        "{error}"
    );

    // The hop mended, the same call answers again.
    proxy.clear();
    rt.ok(&daemon, "kb_fetch", json!({"documentId": document}))
        .await;
}

/// A daemon on the `agentteam server` of `server_dir` reached at `front` (a tap or a proxy in
/// front of it), an agent of a conversation, and its runtime answering the conversation's turn
/// and then running `then`.
async fn behind(server_dir: &Path, front: &str, then: &str) -> (TestDaemon, Conversation, Runtime) {
    let token_file = server_dir.join("operator.token");
    let daemon = TestDaemon::start(&[
        "--server-url",
        front,
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ])
    .await;
    daemon.add_agent("alpha").await;
    let talk = conversation(&daemon).await;
    let rt = Runtime::start(
        &daemon,
        "alpha",
        &[
            "--turn-target",
            &talk.channel,
            "--turn-message",
            &talk.in_channel,
        ],
        then,
    )
    .await;
    (daemon, talk, rt)
}

/// The turn travels only on the knowledge route: the server's side of the wire shows it on every
/// `kb_search`, and on no Exec action and no other tool.
#[tokio::test]
async fn exec_requests_never_carry_the_turn() {
    let server_dir = tempfile::tempdir().unwrap();
    let (_server, server_url, _) = spawn_server(server_dir.path()).await;
    let tap = Tap::start(&server_url).await;
    let (daemon, talk, rt) = behind(
        server_dir.path(),
        &tap.url,
        r#"agentteam exec team list '{}' >/dev/null; echo "exec=$?"; exec sleep 120"#,
    )
    .await;
    let mut launched = rt.launched;
    assert_eq!(launched.line().await, "exec=0");
    let rt = Runtime { launched, ..rt };
    rt.ok(&daemon, "kb_search", json!({"query": "replica"}))
        .await;
    rt.ok(
        &daemon,
        "message_history_read",
        json!({"target": talk.channel, "limit": 1}),
    )
    .await;

    let heads = tap.request_heads();
    let knowledge: Vec<&String> = heads.iter().filter(|h| h.contains("/knowledge/")).collect();
    let others: Vec<&String> = heads
        .iter()
        .filter(|h| h.starts_with("post /runtime/") && !h.contains("/knowledge/"))
        .collect();
    assert_eq!(knowledge.len(), 1, "{heads:#?}");
    assert!(
        knowledge[0].contains(&format!(
            "agentteam-turn-target: {}",
            talk.channel.to_lowercase()
        )),
        "{}",
        knowledge[0]
    );
    assert!(knowledge[0].contains(&format!(
        "agentteam-turn-message: {}",
        talk.in_channel.to_lowercase()
    )));
    assert!(
        others.iter().any(|h| h.contains("/actions/team/list")),
        "the Exec action went through the tap: {heads:#?}"
    );
    assert!(
        others
            .iter()
            .any(|h| h.contains("/tools/message_history_read")),
        "{heads:#?}"
    );
    for head in &others {
        assert!(!head.contains("agentteam-turn"), "a turn header on {head}");
        assert!(
            !head.contains(&talk.in_channel.to_lowercase()),
            "the turn's message id on {head}"
        );
    }
}

/// The memory contract's freshness bound: a write completed this long before a call is in the
/// call's answer.
const FRESHNESS: Duration = Duration::from_secs(1);

/// Calls `memory_search` with `query` until `seen` holds of its matches, and returns them. A call
/// that starts once [`FRESHNESS`] has passed since `written` and still does not see the write
/// fails the test: the bound is measured, not slept through.
async fn search_until(
    rt: &Runtime,
    daemon: &TestDaemon,
    query: Value,
    written: Instant,
    seen: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let started = Instant::now();
        let found = rt.ok(daemon, "memory_search", query.clone()).await;
        if seen(&found["matches"]) {
            return found;
        }
        assert!(
            started.duration_since(written) < FRESHNESS,
            "a call {:?} after the write does not see it: {found}",
            started.duration_since(written)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `memory_search` over the agent's memory directory: locators only, a write completed 1 s
/// before a call is in its answer, edits and removals too; a removed or corrupted index is a
/// classified result and the next call recovers; a missing directory is classified and comes
/// back when it is recreated; an inherited memory variable never reaches the runtime.
#[tokio::test]
async fn memory_search_finds_fresh_writes_as_locators_and_survives_a_damaged_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = TestDaemon::start_in(dir.path(), &[]).await;
    let agent = daemon.add_agent("keeper").await;
    let mut command = daemon.cli(&["run", "--agent", "keeper", "--", "sh", "-c", r#"echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; echo "$AGENTTEAM_MEMORY_DIR"; env | grep -i '^agentteam_memory' | sort; echo end; exec sleep 120"#]);
    command
        .env("AGENTTEAM_MEMORY_DIR", "/tmp/inherited-memory")
        .env("agentteam_memory_extra", "x");
    let mut launched = Launched::spawn(command);
    let url = launched.line().await;
    let token_file = PathBuf::from(launched.line().await);
    let memory = PathBuf::from(launched.line().await);
    let mut env = Vec::new();
    loop {
        let line = launched.line().await;
        if line == "end" {
            break;
        }
        env.push(line);
    }
    assert_eq!(
        env,
        [format!("AGENTTEAM_MEMORY_DIR={}", memory.display())],
        "only the daemon's own"
    );
    assert_eq!(memory, daemon.state_dir.join("memory").join(&agent));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&memory).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let rt = Runtime {
        launched,
        url,
        token_file,
        memory_dir: memory.clone(),
    };

    // An empty directory: no matches.
    assert_eq!(
        rt.ok(&daemon, "memory_search", json!({"query": "anything"}))
            .await,
        json!({"matches": []})
    );

    let files = [
        (
            "deploy-process.md",
            "# Deploy process\nThe canary stage holds for thirty minutes before promotion.\n\n## Rollback\nRevert the release tag and redeploy the previous artifact.\n",
        ),
        (
            "people/ada.md",
            "# Ada\nAda owns the billing reconciliation job and prefers written handoffs.\n",
        ),
        ("notes.txt", "canary notes in a text file are not memory\n"),
    ];
    for (path, text) in files {
        write(&memory, path, text);
    }
    let found = search_until(
        &rt,
        &daemon,
        json!({"query": "canary promotion"}),
        Instant::now(),
        |matches| matches[0]["path"] == "deploy-process.md",
    )
    .await;
    assert_eq!(
        found["matches"][0],
        json!({"path": "deploy-process.md", "heading": "Deploy process", "lineStart": 1, "lineEnd": 3, "score": found["matches"][0]["score"]}),
        "{found}"
    );
    assert_eq!(
        found["matches"].as_array().unwrap().len(),
        1,
        "the .txt file is not indexed: {found}"
    );
    let found = rt
        .ok(
            &daemon,
            "memory_search",
            json!({"query": "rollback redeploying"}),
        )
        .await;
    assert_eq!(found["matches"][0]["heading"], "Rollback");
    assert_eq!(
        (
            found["matches"][0]["lineStart"].as_u64(),
            found["matches"][0]["lineEnd"].as_u64()
        ),
        (Some(4), Some(5))
    );
    let found = rt
        .ok(
            &daemon,
            "memory_search",
            json!({"query": "billing handoffs"}),
        )
        .await;
    assert_eq!(found["matches"][0]["path"], "people/ada.md");
    // Locators only: no line of any file appears in what the model sees.
    let everything = rt
        .call(
            &daemon,
            "memory_search",
            json!({"query": "the canary ada billing rollback release notes", "limit": 50}),
        )
        .await
        .to_string();
    for (_, text) in files {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                !everything.contains(line),
                "file content reached the result: {line}"
            );
        }
    }

    // An edit and a removal, each 1 s before the call.
    write(
        &memory,
        "people/ada.md",
        "# Ada\nAda now runs the payroll export.\n",
    );
    std::fs::remove_file(memory.join("deploy-process.md")).unwrap();
    let written = Instant::now();
    search_until(&rt, &daemon, json!({"query": "canary"}), written, |m| {
        *m == json!([])
    })
    .await;
    search_until(&rt, &daemon, json!({"query": "payroll"}), written, |m| {
        m[0]["path"] == "people/ada.md"
    })
    .await;
    assert_eq!(
        rt.ok(&daemon, "memory_search", json!({"query": "reconciliation"}))
            .await["matches"],
        json!([])
    );
    assert_eq!(
        rt.ok(&daemon, "memory_search", json!({"query": "payroll"}))
            .await["matches"][0]["path"],
        "people/ada.md"
    );

    // The index's snapshot removed, then corrupted: a classified result naming the fallback,
    // then recovery on the next call.
    let snapshot = daemon
        .state_dir
        .join("memory-index")
        .join(format!("{agent}.idx"));
    assert!(snapshot.exists(), "the built index was written");
    for damage in ["remove", "corrupt"] {
        match damage {
            "remove" => std::fs::remove_file(&snapshot).unwrap(),
            _ => std::fs::write(&snapshot, b"not an index at all").unwrap(),
        }
        let error = rt
            .error(&daemon, "memory_search", json!({"query": "payroll"}))
            .await;
        assert_eq!(error["code"], "upstream_unavailable", "{damage}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains("rebuilt"),
            "{damage}: {error}"
        );
        assert!(
            error["next"]
                .as_str()
                .unwrap()
                .contains("read the Markdown files"),
            "{damage}: {error}"
        );
        let found = rt
            .ok(&daemon, "memory_search", json!({"query": "payroll"}))
            .await;
        assert_eq!(
            found["matches"][0]["path"], "people/ada.md",
            "{damage}: recovered"
        );
    }

    // The directory removed: classified, with the way back; recreated, it is searched again.
    std::fs::remove_dir_all(&memory).unwrap();
    let error = rt
        .error(&daemon, "memory_search", json!({"query": "payroll"}))
        .await;
    assert_eq!(error["code"], "upstream_unavailable");
    assert!(error["next"].as_str().unwrap().contains("mkdir"), "{error}");
    write(
        &memory,
        "fresh.md",
        "# Fresh\nrecreated directories are watched again\n",
    );
    search_until(
        &rt,
        &daemon,
        json!({"query": "recreated"}),
        Instant::now(),
        |m| m[0]["path"] == "fresh.md",
    )
    .await;
    drop(rt);

    // A restart over a corrupted snapshot rebuilds from the files: the first call answers.
    assert_eq!(daemon.stop().await, 0);
    std::fs::write(&snapshot, b"garbage").unwrap();
    let daemon = TestDaemon::start_in(dir.path(), &[]).await;
    let rt = Runtime::start(&daemon, "keeper", &[], "exec sleep 120").await;
    assert_eq!(rt.memory_dir, memory);
    assert_eq!(
        std::fs::metadata(&memory).unwrap().permissions().mode() & 0o777,
        0o700,
        "the directory recreated under the umask is owner-only again"
    );
    assert_eq!(
        rt.ok(&daemon, "memory_search", json!({"query": "recreated"}))
            .await["matches"][0]["path"],
        "fresh.md"
    );
    assert!(
        daemon.log().contains("ignoring the memory index snapshot"),
        "the corruption was logged"
    );
    let status = daemon.admin_get("status").await;
    assert_eq!(status["memory"]["files"], 1, "{status}");
}

/// The official Python SDK client: `kb_search` then `kb_fetch` of the first hit, and
/// `memory_search`.
#[tokio::test]
async fn the_python_sdk_searches_knowledge_and_memory() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let talk = conversation(&daemon).await;
    let rt = Runtime::start(
        &daemon,
        "alpha",
        &[
            "--turn-target",
            &talk.channel,
            "--turn-message",
            &talk.in_channel,
        ],
        "exec sleep 120",
    )
    .await;
    write(
        &rt.memory_dir,
        "incidents.md",
        "# Incidents\n\n## Pooler outage\nThe pooler ran out of connections.\n",
    );
    search_until(
        &rt,
        &daemon,
        json!({"query": "pooler connections"}),
        Instant::now(),
        |m| m[0]["path"] == "incidents.md",
    )
    .await;
    let output = tokio::process::Command::new(crate::support::venv_tool("python"))
        .arg(repo_root().join("tests/it/mcp_sdk_client.py"))
        .args([
            "--url",
            &rt.url,
            "--mode",
            "auto",
            "--target",
            &talk.channel,
        ])
        .args([
            "--kb-query",
            "standby replica",
            "--memory-query",
            "pooler connections",
        ])
        .arg("--token-file")
        .arg(&rt.token_file)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["kbTitle"], "Failover");
    assert!(
        summary["kbContent"]
            .as_str()
            .unwrap()
            .contains("Promote the standby replica")
    );
    assert_eq!(
        summary["memoryMatches"][0],
        json!({"path": "incidents.md", "heading": "Pooler outage", "lineStart": 3, "lineEnd": 4, "score": summary["memoryMatches"][0]["score"]})
    );
}
