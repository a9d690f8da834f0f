//! Every server answer is checked against its output contract before it reaches a runtime, on
//! both bridges: a fault proxy at the network edge between the daemon and a real `agentteam
//! server` rewrites answers off their contract, and the runtime gets `upstream_failed` under an
//! incident id the daemon logged, never the answer; a mutation's refusal says the change may
//! already have been applied and how to check. The same answers, mended, pass again.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::support::{Launched, TestDaemon, bin, spawn_server};

/// What no contract allows, so the test can tell it never reached the runtime.
const MARK: &str = "OFFCONTRACTMARK";

/// A daemon behind a fault proxy in front of a real server, an agent, and a long-running
/// runtime whose Exec and MCP credentials the test uses as the runtime would.
struct Behind {
    _server: tokio::process::Child,
    proxy: FaultProxy,
    daemon: TestDaemon,
    _runtime: Launched,
    exec_base: String,
    exec_token_file: PathBuf,
    mcp_url: String,
    mcp_token_file: PathBuf,
    channel: String,
    _dir: tempfile::TempDir,
}

impl Behind {
    async fn start() -> Behind {
        let dir = tempfile::tempdir().unwrap();
        let (server, server_url, _) = spawn_server(dir.path()).await;
        let proxy = FaultProxy::start(&server_url).await;
        let token_file = dir.path().join("operator.token");
        let daemon = TestDaemon::start(&[
            "--server-url",
            &proxy.url,
            "--operator-token-file",
            token_file.to_str().unwrap(),
        ])
        .await;
        daemon.add_agent("alpha").await;
        let script = r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 120"#;
        let mut runtime = daemon.launch("alpha", &[], script);
        let exec_base = runtime.line().await;
        let exec_token_file = PathBuf::from(runtime.line().await);
        let mcp_url = runtime.line().await;
        let mcp_token_file = PathBuf::from(runtime.line().await);
        let identity: Value =
            serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
                .unwrap();
        let channel = identity["channelId"].as_str().unwrap().to_string();
        Behind {
            _server: server,
            proxy,
            daemon,
            _runtime: runtime,
            exec_base,
            exec_token_file,
            mcp_url,
            mcp_token_file,
            channel,
            _dir: dir,
        }
    }

    /// `agentteam exec domain action input` as the runtime's shell runs it: exit code, stdout,
    /// stderr.
    async fn exec(&self, domain: &str, action: &str, input: &Value) -> (i32, String, String) {
        let output = tokio::process::Command::new(bin())
            .args(["exec", domain, action, &input.to_string()])
            .env_clear()
            .env("AGENTTEAM_EXEC_BASE_URL", &self.exec_base)
            .env("AGENTTEAM_EXEC_TOKEN_FILE", &self.exec_token_file)
            .output()
            .await
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The error envelope of an Exec call that fails, as `agentteam exec` prints it.
    async fn exec_error(&self, domain: &str, action: &str, input: &Value) -> Value {
        let (code, stdout, stderr) = self.exec(domain, action, input).await;
        assert_ne!(code, 0, "{stdout}");
        assert!(
            !stdout.contains(MARK) && !stderr.contains(MARK),
            "the off-contract answer reached the runtime: {stdout}{stderr}"
        );
        let envelope: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|_| panic!("an error envelope on stdout: {stdout}{stderr}"));
        envelope["error"].clone()
    }

    /// `tools/call` of `tool`: the `CallToolResult`.
    async fn call(&self, tool: &str, arguments: Value) -> Value {
        let token = std::fs::read_to_string(&self.mcp_token_file).unwrap();
        let response = self
            .daemon
            .client
            .post(&self.mcp_url)
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert!(
            !text.contains(MARK),
            "the off-contract answer reached the runtime: {text}"
        );
        serde_json::from_str::<Value>(&text).unwrap()["result"].clone()
    }

    /// The error envelope of a tool call that fails as an `isError` result.
    async fn tool_error(&self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).await;
        assert_eq!(result["isError"], true, "{tool}: {result}");
        let envelope: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        envelope["error"].clone()
    }

    /// The daemon logged the refused answer under `incident`.
    fn logged(&self, incident: &str) {
        let log = self.daemon.log();
        let line = log
            .lines()
            .find(|line| line.contains(incident) && line.contains("output contract"))
            .unwrap_or_else(|| panic!("no log line for {incident}:\n{log}"));
        assert!(!line.contains(MARK), "{line}");
    }
}

/// `data` of a success envelope with one more member inside its resource: off the schema, which
/// allows no unknown field.
fn with_extra_field(body: &[u8]) -> Vec<u8> {
    let mut envelope: Value = serde_json::from_slice(body).unwrap();
    let data = envelope["data"].as_object_mut().unwrap();
    let first = data.keys().next().unwrap().clone();
    match &mut data[&first] {
        Value::Object(resource) => {
            resource.insert(MARK.into(), json!(MARK));
        }
        Value::Array(items) => items.push(json!({ MARK: MARK })),
        other => *other = json!(MARK),
    }
    serde_json::to_vec(&envelope).unwrap()
}

/// The reference server's own envelope, with `data`'s first id broken: the text is checked as
/// written (the fast path), and refused there.
fn with_broken_id(body: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(body.to_vec()).unwrap();
    let at = text.find(r#""id":""#).unwrap() + r#""id":""#.len();
    format!("{}{MARK}-{}", &text[..at], &text[at..]).into_bytes()
}

#[tokio::test]
async fn an_exec_answer_off_its_contract_is_refused_and_logged() {
    let behind = Behind::start().await;
    let location = json!({"kind": "channel", "channelId": behind.channel});
    let (code, created, stderr) = behind
        .exec(
            "task",
            "create",
            &json!({"location": location, "title": "checked"}),
        )
        .await;
    assert_eq!(code, 0, "{stderr}");
    let task: Value = serde_json::from_str(&created).unwrap();
    let task_id = task["data"]["task"]["id"].as_str().unwrap().to_string();
    let get = json!({ "taskId": task_id });

    for rewrite in [with_extra_field as fn(&[u8]) -> Vec<u8>, with_broken_id] {
        behind
            .proxy
            .set("/actions/task/get", Fault::Rewrite(rewrite));
        let error = behind.exec_error("task", "get", &get).await;
        assert_eq!(error["code"], "upstream_failed", "{error}");
        let incident = error["incidentId"]
            .as_str()
            .expect("a 5xx names its incident");
        behind.logged(incident);
        assert!(
            error.get("metadata").is_none(),
            "a read applied nothing: {error}"
        );
    }

    // A mutation: refused, said to be maybe applied, with the read that settles it.
    behind
        .proxy
        .set("/actions/task/update", Fault::Rewrite(with_extra_field));
    let update = json!({ "taskId": task_id, "title": "renamed", "requestId": "req-offcontract-1" });
    let error = behind.exec_error("task", "update", &update).await;
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert_eq!(error["metadata"]["mutation_applied"], true, "{error}");
    let next = error["next"].as_str().unwrap();
    assert!(next.contains("may already have been applied"), "{next}");
    assert!(
        next.contains(&format!(
            "agentteam exec task get '{{\"taskId\":\"{task_id}\"}}'"
        )),
        "{next}"
    );
    assert!(next.contains("req-offcontract-1"), "{next}");
    behind.logged(error["incidentId"].as_str().unwrap());

    // It was applied: the read it names shows it, once the hop is mended.
    behind.proxy.clear();
    let (code, read, stderr) = behind.exec("task", "get", &get).await;
    assert_eq!(code, 0, "{stderr}");
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["data"]["task"]["title"], "renamed");
}

#[tokio::test]
async fn an_mcp_answer_off_its_contract_is_refused_and_logged() {
    let behind = Behind::start().await;
    let target = format!("channel:{}", behind.channel);
    let history = json!({ "target": target, "limit": 5 });
    let sent = behind
        .call(
            "message_send",
            json!({ "target": target, "content": "hello" }),
        )
        .await;
    assert_eq!(sent["isError"], false, "{sent}");

    for rewrite in [with_extra_field as fn(&[u8]) -> Vec<u8>, with_broken_id] {
        behind
            .proxy
            .set("/tools/message_history_read", Fault::Rewrite(rewrite));
        let error = behind
            .tool_error("message_history_read", history.clone())
            .await;
        assert_eq!(error["code"], "upstream_failed", "{error}");
        assert!(error.get("metadata").is_none(), "{error}");
    }
    let log = behind.daemon.log();
    assert!(
        log.lines()
            .filter(|line| line.contains("output contract") && line.contains("message_history_read"))
            .count()
            >= 2,
        "{log}"
    );

    behind
        .proxy
        .set("/tools/message_send", Fault::Rewrite(with_extra_field));
    let error = behind
        .tool_error(
            "message_send",
            json!({ "target": target, "content": "again", "requestId": "req-offcontract-2" }),
        )
        .await;
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert_eq!(error["metadata"]["mutation_applied"], true, "{error}");
    let next = error["next"].as_str().unwrap();
    assert!(next.contains("may already have been applied"), "{next}");
    assert!(
        next.contains(&format!("`message_history_read` of `{target}`")),
        "{next}"
    );

    // Mended, the history shows the message the refused answer was about.
    behind.proxy.clear();
    let result = behind.call("message_history_read", history).await;
    assert_eq!(result["isError"], false, "{result}");
    let contents: Vec<&str> = result["structuredContent"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(contents.contains(&"again"), "{contents:?}");
}
