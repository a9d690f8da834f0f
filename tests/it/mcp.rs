//! The MCP transport end to end: a real daemon with its embedded server, runtimes started by
//! `agentteam run` (whose environment carries the MCP URL and token file), raw JSON-RPC over HTTP
//! for the protocol's edges, and the official Python SDK client in both protocol eras.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Launched, TestDaemon, repo_root, sample};

const MODERN: &str = "2026-07-28";

/// One runtime's view of the MCP bridge.
struct Runtime {
    _launched: Launched,
    url: String,
    token_file: PathBuf,
    exec_token_file: PathBuf,
}

impl Runtime {
    async fn start(daemon: &TestDaemon, agent: &str) -> Runtime {
        let script = r#"echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 120"#;
        let mut launched = daemon.launch(agent, &[], script);
        let url = launched.line().await;
        let token_file = PathBuf::from(launched.line().await);
        let exec_token_file = PathBuf::from(launched.line().await);
        Runtime {
            _launched: launched,
            url,
            token_file,
            exec_token_file,
        }
    }

    fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file).unwrap()
    }

    /// The legacy alias of this runtime's canonical route.
    fn alias_url(&self) -> String {
        let (base, rest) = self.url.split_once("/api/internal/mcp/servers/").unwrap();
        let (server, agent) = rest.split_once("/agents/").unwrap();
        format!("{base}/mcp/agentteam/{server}/{agent}")
    }
}

/// A raw POST: `(status, headers, body as JSON or Null)`.
async fn post(
    daemon: &TestDaemon,
    url: &str,
    bearer: Option<&str>,
    headers: &[(&str, &str)],
    body: String,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = daemon
        .client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body);
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes)))
    };
    (status, headers, body)
}

/// A legacy-era request (no `_meta`, `MCP-Protocol-Version: 2025-11-25`).
async fn legacy(rt: &Runtime, daemon: &TestDaemon, method: &str, params: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let (status, _, body) = post(
        daemon,
        &rt.url,
        Some(&rt.token()),
        &[("MCP-Protocol-Version", "2025-11-25")],
        body.to_string(),
    )
    .await;
    (status, body)
}

/// A well-formed modern-era request.
async fn modern(
    rt: &Runtime,
    daemon: &TestDaemon,
    method: &str,
    mut params: Value,
) -> (u16, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
    if let Some(name) = &name {
        headers.push(("Mcp-Name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": "m-1", "method": method, "params": params});
    let (status, _, body) = post(
        daemon,
        &rt.url,
        Some(&rt.token()),
        &headers,
        body.to_string(),
    )
    .await;
    (status, body)
}

/// `tools/call` in the legacy era; returns the `CallToolResult`.
async fn call(rt: &Runtime, daemon: &TestDaemon, tool: &str, arguments: Value) -> Value {
    let (status, body) = legacy(
        rt,
        daemon,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["result"].clone()
}

/// The error envelope of a `tools/call` that must fail as an `isError` result.
async fn call_error(rt: &Runtime, daemon: &TestDaemon, tool: &str, arguments: Value) -> Value {
    tool_error(&call(rt, daemon, tool, arguments).await)
}

/// The error envelope inside an `isError` result.
fn tool_error(result: &Value) -> Value {
    assert_eq!(result["isError"], true, "{result}");
    assert!(result.get("structuredContent").is_none());
    let text = result["content"][0]["text"].as_str().unwrap();
    let envelope: Value = serde_json::from_str(text).unwrap();
    envelope["error"].clone()
}

fn channel(daemon: &TestDaemon) -> String {
    let identity: Value =
        serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
            .unwrap();
    format!("channel:{}", identity["channelId"].as_str().unwrap())
}

/// A new human who is a member of the channel `target`; returns its id.
async fn human_in(daemon: &TestDaemon, target: &str, handle: &str) -> Value {
    let human = operator(
        daemon,
        "/humans",
        json!({"handle": handle, "displayName": handle}),
    )
    .await["humanId"]
        .clone();
    let channel_id = target.trim_start_matches("channel:");
    operator(
        daemon,
        &format!("/channels/{channel_id}/members"),
        json!({"memberId": human}),
    )
    .await;
    human
}

/// `POST` to the embedded server's operator API.
async fn operator(daemon: &TestDaemon, path: &str, body: Value) -> Value {
    let token = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
    let response = daemon
        .client
        .post(format!(
            "{}/admin/workspaces/{}{path}",
            daemon.server_url,
            daemon.workspace_id()
        ))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["ok"], true, "{value}");
    value["data"].clone()
}

#[tokio::test]
async fn every_credential_failure_is_one_uniform_401() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    daemon.add_agent("beta").await;
    let alpha = Runtime::start(&daemon, "alpha").await;
    let beta = Runtime::start(&daemon, "beta").await;
    let ended = Runtime::start(&daemon, "alpha").await;
    let revoked = ended.token();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();

    // The positive control: the same request with the right credential on the right route.
    let (status, _, body) = post(
        &daemon,
        &alpha.url,
        Some(&alpha.token()),
        &[],
        request.clone(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // End the third runtime so its token is revoked.
    drop(ended);
    let revoked_gone = async {
        loop {
            let (status, _, _) =
                post(&daemon, &alpha.url, Some(&revoked), &[], request.clone()).await;
            if status == 401 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), revoked_gone)
        .await
        .expect("the ended runtime's token is revoked");

    let exec_token = std::fs::read_to_string(&alpha.exec_token_file).unwrap();
    let mut forged_scope = alpha.token();
    forged_scope.replace_range(3..4, if &forged_scope[3..4] == "A" { "B" } else { "A" });
    let other_server = alpha.url.replace("/servers/wsp_", "/servers/wsp_0");
    let cases: Vec<(&str, String, Option<String>)> = vec![
        ("no credential", alpha.url.clone(), None),
        ("not a token", alpha.url.clone(), Some("hello".into())),
        (
            "claims tampered (scope or binding)",
            alpha.url.clone(),
            Some(forged_scope),
        ),
        ("the Exec-scope token", alpha.url.clone(), Some(exec_token)),
        (
            "another agent's route",
            beta.url.clone(),
            Some(alpha.token()),
        ),
        (
            "another agent's alias route",
            beta.alias_url(),
            Some(alpha.token()),
        ),
        ("another server's route", other_server, Some(alpha.token())),
        ("a revoked token", alpha.url.clone(), Some(revoked)),
    ];
    let mut answers = Vec::new();
    for (what, url, bearer) in &cases {
        let (status, headers, body) =
            post(&daemon, url, bearer.as_deref(), &[], request.clone()).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(
            headers.get("www-authenticate").map(|v| v.to_str().unwrap()),
            Some("Bearer"),
            "{what}"
        );
        answers.push(body);
    }
    assert!(
        answers.windows(2).all(|pair| pair[0] == pair[1]),
        "every failure answers the same body: {answers:?}"
    );
    // A GET is refused by authentication before the method check.
    let get = daemon.client.get(&alpha.url).send().await.unwrap();
    assert_eq!(get.status(), 401);
}

#[tokio::test]
async fn every_runtime_and_route_sees_one_inventory() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    daemon.add_agent("beta").await;
    let alpha = Runtime::start(&daemon, "alpha").await;
    let beta = Runtime::start(&daemon, "beta").await;

    let (_, canonical) = legacy(&alpha, &daemon, "tools/list", json!({})).await;
    let tools = canonical["result"]["tools"].clone();
    let (_, modern_list) = modern(&beta, &daemon, "tools/list", json!({})).await;
    assert_eq!(
        modern_list["result"]["tools"], tools,
        "two agents, two eras"
    );
    let alias_body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).to_string();
    let (status, _, alias) = post(
        &daemon,
        &alpha.alias_url(),
        Some(&alpha.token()),
        &[],
        alias_body,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(alias["result"]["tools"], tools, "the legacy alias");

    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "attachment_read",
            "kb_fetch",
            "kb_search",
            "memory_search",
            "message_history_read",
            "message_send",
            "reaction_add",
            "reaction_remove"
        ]
    );
    for tool in tools.as_array().unwrap() {
        assert!(tool["name"].as_str().unwrap().len() <= 64);
        assert!(tool["annotations"]["readOnlyHint"].is_boolean(), "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert_eq!(tool["outputSchema"]["type"], "object");
        assert!(!tool["description"].as_str().unwrap().is_empty());
    }
    insta::assert_snapshot!(
        "mcp_tools_list",
        serde_json::to_string_pretty(&tools).unwrap()
    );
}

/// A daemon with one agent and one runtime, and that runtime's MCP bearer.
async fn mcp_fixture() -> (TestDaemon, Runtime, String) {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let token = rt.token();
    (daemon, rt, token)
}

/// Legacy: `initialize` negotiates (or counter-offers) a version and issues no session; a notification is accepted with 202; `ping` answers.
#[tokio::test]
async fn the_legacy_era_negotiates_versions_statelessly_and_answers_ping() {
    let (daemon, rt, token) = mcp_fixture().await;
    let auth = Some(token.as_str());
    let init = |version: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        .to_string()
    };
    let (status, headers, body) = post(&daemon, &rt.url, auth, &[], init("2025-06-18")).await;
    assert_eq!(status, 200);
    assert_eq!(body["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(
        body["result"]["capabilities"]["tools"]["listChanged"],
        false
    );
    assert!(
        headers.get("mcp-session-id").is_none(),
        "stateless: no session ids"
    );
    assert_eq!(headers.get("content-type").unwrap(), "application/json");
    let (_, _, body) = post(&daemon, &rt.url, auth, &[], init("1999-01-01")).await;
    assert_eq!(
        body["result"]["protocolVersion"], "2025-11-25",
        "counter-offer"
    );
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, _, body) = post(
        &daemon,
        &rt.url,
        auth,
        &[("MCP-Protocol-Version", "2025-11-25")],
        notification,
    )
    .await;
    assert_eq!((status, body), (202, Value::Null));
    let (status, body) = legacy(&rt, &daemon, "ping", json!({})).await;
    assert_eq!((status, &body["result"]), (200, &json!({})));
}

/// Legacy: an unknown `MCP-Protocol-Version` is refused; prompts and resources are empty lists; an unknown resource and an unknown method are errors.
#[tokio::test]
async fn the_legacy_era_refuses_unknown_versions_and_serves_empty_lists() {
    let (daemon, rt, token) = mcp_fixture().await;
    let auth = Some(token.as_str());
    let (status, _, body) = post(
        &daemon,
        &rt.url,
        auth,
        &[("MCP-Protocol-Version", "1999-01-01")],
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!(-32602)));
    for method in ["prompts/list", "resources/list", "resources/templates/list"] {
        let (status, body) = legacy(&rt, &daemon, method, json!({})).await;
        assert_eq!(status, 200, "{method}");
        let list = body["result"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .clone();
        assert_eq!(list, json!([]), "{method}");
    }
    let (_, body) = legacy(
        &rt,
        &daemon,
        "resources/read",
        json!({"uri": "test://nothing"}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602);
    let (_, body) = legacy(&rt, &daemon, "logging/setLevel", json!({"level": "info"})).await;
    assert_eq!(body["error"]["code"], -32601);
}

/// A body that is not one JSON-RPC 2.0 request object is a 400 with its JSON-RPC code; only POST is allowed.
#[tokio::test]
async fn malformed_bodies_batches_and_other_http_methods_are_refused() {
    let (daemon, rt, token) = mcp_fixture().await;
    let auth = Some(token.as_str());
    for (body, code) in [
        ("{not json", -32700),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, -32600),
        (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, -32600),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, -32600),
    ] {
        let (status, _, answer) = post(&daemon, &rt.url, auth, &[], body.to_string()).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (400, &json!(code)),
            "{body}"
        );
    }
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = daemon
            .client
            .request(method.clone(), &rt.url)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method}");
        assert_eq!(response.headers().get("allow").unwrap(), "POST");
    }
}

/// Modern: `server/discover` and every result carry the era's fields (`resultType`, server info, cache fields on lists).
#[tokio::test]
async fn the_modern_era_discovers_and_marks_its_results() {
    let (daemon, rt, _) = mcp_fixture().await;
    let (status, body) = modern(&rt, &daemon, "server/discover", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    assert_eq!(result["supportedVersions"], json!([MODERN]));
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "agentteam"
    );
    let (_, body) = modern(&rt, &daemon, "tools/list", json!({})).await;
    assert_eq!(body["result"]["cacheScope"], "private");
    assert!(body["result"]["ttlMs"].is_u64());
    assert_eq!(body["result"]["resultType"], "complete");
}

/// Modern: a method the era does not serve is 404 + -32601, keeping the request id.
#[tokio::test]
async fn the_modern_era_does_not_serve_legacy_methods() {
    let (daemon, rt, _) = mcp_fixture().await;
    for removed in ["initialize", "ping", "logging/setLevel", "no/such"] {
        let (status, body) = modern(&rt, &daemon, removed, json!({})).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &json!(-32601)),
            "{removed}"
        );
        assert_eq!(body["id"], "m-1", "the error keeps the request id");
    }
}

/// Modern: the version, `Mcp-Method` and `Mcp-Name` headers must be present and agree with the body.
#[tokio::test]
async fn the_modern_era_enforces_its_header_rules() {
    let (daemon, rt, token) = mcp_fixture().await;
    let auth = Some(token.as_str());
    let meta = json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}});
    let list_body =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta}})
            .to_string();
    let call_body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "kb_search", "arguments": {"query": "x"}, "_meta": meta}}).to_string();
    let future_body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}}).to_string();
    let no_capabilities_body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}}).to_string();
    /// What is wrong, the headers sent, the body, and the expected status and JSON-RPC code.
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a String, u16, i64);
    let cases: Vec<Case> = vec![
        (
            "no Mcp-Method",
            vec![("MCP-Protocol-Version", MODERN)],
            &list_body,
            400,
            -32020,
        ),
        (
            "wrong Mcp-Method",
            vec![
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
            ],
            &list_body,
            400,
            -32020,
        ),
        (
            "no version header",
            vec![("Mcp-Method", "tools/list")],
            &list_body,
            400,
            -32020,
        ),
        (
            "header and _meta disagree",
            vec![
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Mcp-Method", "tools/list"),
            ],
            &list_body,
            400,
            -32020,
        ),
        (
            "unsupported version",
            vec![
                ("MCP-Protocol-Version", "2099-01-01"),
                ("Mcp-Method", "tools/list"),
            ],
            &future_body,
            400,
            -32022,
        ),
        (
            "no Mcp-Name",
            vec![
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
            ],
            &call_body,
            400,
            -32020,
        ),
        (
            "wrong Mcp-Name",
            vec![
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "kb_fetch"),
            ],
            &call_body,
            400,
            -32020,
        ),
        (
            "no capabilities in _meta",
            vec![
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/list"),
            ],
            &no_capabilities_body,
            400,
            -32602,
        ),
    ];
    for (what, headers, body, status, code) in cases {
        let (got, _, answer) = post(&daemon, &rt.url, auth, &headers, body.clone()).await;
        assert_eq!(
            (got, &answer["error"]["code"]),
            (status, &json!(code)),
            "{what}: {answer}"
        );
    }
}

/// Modern: header names are case-insensitive, values are trimmed, and `=?base64?…?=` values are decoded.
#[tokio::test]
async fn modern_headers_are_case_insensitive_trimmed_and_may_be_base64() {
    let (daemon, rt, token) = mcp_fixture().await;
    let auth = Some(token.as_str());
    let meta = json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}});
    let call_body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "kb_search", "arguments": {"query": "x"}, "_meta": meta}}).to_string();
    let (status, _, answer) = post(
        &daemon,
        &rt.url,
        auth,
        &[
            ("mcp-protocol-version", MODERN),
            ("MCP-METHOD", " tools/call "),
            ("mcp-name", "=?base64?a2Jfc2VhcmNo?="),
        ],
        call_body.clone(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["isError"], true,
        "kb_search has no owner yet"
    );
}

/// Host and Origin: loopback and the same origin pass; anything else is 403, with or without a bearer.
#[tokio::test]
async fn foreign_hosts_and_origins_are_refused_before_authentication() {
    let (daemon, rt, token) = mcp_fixture().await;
    let auth = Some(token.as_str());
    let port = rt
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let host = format!("localhost:{port}");
    let origin = format!("http://{host}");
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    let (status, _, _) = post(
        &daemon,
        &rt.url,
        auth,
        &[("Host", &host), ("Origin", &origin)],
        ping.clone(),
    )
    .await;
    assert_eq!(status, 200, "the same origin passes");
    let other_port = format!("http://localhost:{}", port.parse::<u16>().unwrap() ^ 1);
    let refused: [&[(&str, &str)]; 5] = [
        &[("Origin", "http://evil.example.com")],
        &[("Host", "evil.example.com")],
        &[("Host", "localhost.evil.example.com")],
        &[("Host", &host), ("Origin", &other_port)],
        &[("Origin", "null")],
    ];
    for headers in refused {
        for bearer in [auth, None] {
            let (status, _, body) = post(&daemon, &rt.url, bearer, headers, ping.clone()).await;
            assert_eq!(status, 403, "{headers:?}, bearer: {}", bearer.is_some());
            // The MCP route answers in JSON-RPC, never with the Exec envelope.
            assert_eq!(body["jsonrpc"], "2.0", "{body}");
            assert_eq!(body["error"]["code"], -32600, "{body}");
            assert!(body.get("ok").is_none(), "{body}");
        }
    }
}

#[tokio::test]
async fn call_tool_is_the_only_entry_and_fails_as_results() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let target = channel(&daemon);

    // Unknown tool: a protocol error, in both eras.
    let (status, body) = legacy(
        &rt,
        &daemon,
        "tools/call",
        json!({"name": "task_create", "arguments": {}}),
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (200, &json!(-32602)));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("task_create")
    );
    let (_, body) = modern(
        &rt,
        &daemon,
        "tools/call",
        json!({"name": "nope", "arguments": {}}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602);

    // Invalid arguments: an actionable isError result naming the field.
    let error = call_error(&rt, &daemon, "message_send", json!({"target": target})).await;
    assert_eq!(error["code"], "validation_failed");
    assert!(
        error["message"].as_str().unwrap().contains("content"),
        "{error}"
    );
    // A target that cannot name a conversation is refused locally.
    let error = call_error(
        &rt,
        &daemon,
        "message_send",
        json!({"target": target.replace("channel:", "thread:"), "content": "x"}),
    )
    .await;
    assert_eq!(error["code"], "validation_failed");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("`channel` id cannot be used with the `thread` kind"),
        "{error}"
    );
    // Knowledge is bound to a Human-initiated turn, and this runtime was launched without one:
    // classified at `route_missing`. Memory answers from the (empty) memory directory.
    for (tool, arguments) in [
        ("kb_search", json!({"query": "x"})),
        ("kb_fetch", json!({"documentId": "d"})),
    ] {
        let error = call_error(&rt, &daemon, tool, arguments).await;
        assert_eq!(error["code"], "invalid_state", "{tool}");
        assert_eq!(error["stage"], "route_missing", "{tool}");
    }
    let memory = call(&rt, &daemon, "memory_search", json!({"query": "x"})).await;
    assert_eq!(memory["structuredContent"], json!({"matches": []}));

    // A send canonicalizes the target; history reads it back; reactions and attachments work.
    let sent = call(&rt, &daemon, "message_send", json!({"target": format!("  Channel: {} ", target.trim_start_matches("channel:")), "content": "hello"})).await;
    assert_eq!(sent["isError"], false, "{sent}");
    let message = sent["structuredContent"]["message"].clone();
    assert_eq!(
        message["target"],
        json!(target),
        "stored at the canonical target"
    );
    let text: Value = serde_json::from_str(sent["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, sent["structuredContent"],
        "the text block is the same JSON"
    );
    let reacted = call(
        &rt,
        &daemon,
        "reaction_add",
        json!({"messageId": message["id"], "emoji": ":+1:"}),
    )
    .await;
    assert_eq!(
        reacted["structuredContent"]["reactions"],
        json!([{"emoji": ":+1:", "count": 1, "mine": true}])
    );
    let again = call(
        &rt,
        &daemon,
        "reaction_add",
        json!({"messageId": message["id"], "emoji": ":+1:"}),
    )
    .await;
    assert_eq!(
        again["structuredContent"], reacted["structuredContent"],
        "adding twice changes nothing"
    );
    let removed = call(
        &rt,
        &daemon,
        "reaction_remove",
        json!({"messageId": message["id"], "emoji": ":+1:"}),
    )
    .await;
    assert_eq!(removed["structuredContent"]["reactions"], json!([]));

    let human = human_in(&daemon, &target, "reader").await;
    let channel_id = target.trim_start_matches("channel:");
    let body = "line one\n".repeat(1000);
    operator(
        &daemon,
        "/messages",
        json!({"authorHumanId": human, "channelId": channel_id, "content": "see attached",
        "attachments": [{"name": "notes.txt", "mediaType": "text/plain", "text": body}]}),
    )
    .await;
    let history = call(
        &rt,
        &daemon,
        "message_history_read",
        json!({"target": target, "limit": 1}),
    )
    .await;
    let attachment = history["structuredContent"]["messages"][0]["attachments"][0].clone();
    assert_eq!(attachment["size"], 9000);
    let mut offset = 0;
    let mut read = String::new();
    loop {
        let part = call(
            &rt,
            &daemon,
            "attachment_read",
            json!({"attachmentId": attachment["id"], "offset": offset, "maxBytes": 4096}),
        )
        .await;
        let part = &part["structuredContent"];
        assert_eq!(part["encoding"], "utf-8");
        read.push_str(part["data"].as_str().unwrap());
        match part.get("nextOffset") {
            Some(next) => offset = next.as_u64().unwrap(),
            None => break,
        }
    }
    assert_eq!(read, body, "the ranges reassemble the attachment");
}

#[tokio::test]
async fn an_over_budget_history_read_names_its_continuation() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let target = channel(&daemon);
    let long = "x".repeat(4000);
    for _ in 0..12 {
        let sent = call(
            &rt,
            &daemon,
            "message_send",
            json!({"target": target, "content": long}),
        )
        .await;
        assert_eq!(sent["isError"], false);
    }
    // 12 × 4000 characters, twice (structured + text): over the 64 KiB budget.
    let result = call(
        &rt,
        &daemon,
        "message_history_read",
        json!({"target": target, "limit": 12}),
    )
    .await;
    let error = tool_error(&result);
    assert_eq!(error["code"], "result_budget_exceeded");
    let (status, modern_answer) = modern(
        &rt,
        &daemon,
        "tools/call",
        json!({"name": "message_history_read", "arguments": {"target": target, "limit": 12}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(modern_answer["result"]["resultType"], "complete");
    assert_eq!(
        tool_error(&modern_answer["result"])["code"],
        "result_budget_exceeded"
    );
    assert!(
        error["next"].as_str().unwrap().contains("smaller `limit`"),
        "{error}"
    );
    assert!(
        serde_json::to_vec(&result).unwrap().len() < 2048,
        "the refusal is small, not truncated data"
    );
    // The continuation works: smaller pages, following the cursor, reach every message.
    let mut seen = 0;
    let mut cursor = None;
    loop {
        let mut arguments = json!({"target": target, "limit": 4});
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let page = call(&rt, &daemon, "message_history_read", arguments).await;
        assert_eq!(page["isError"], false);
        seen += page["structuredContent"]["messages"]
            .as_array()
            .unwrap()
            .len();
        match page["structuredContent"].get("nextCursor") {
            Some(next) => cursor = Some(next.as_str().unwrap().to_string()),
            None => break,
        }
    }
    assert_eq!(seen, 12);
}

#[tokio::test]
async fn the_server_refuses_a_thread_the_agent_cannot_read() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    // A channel the agent is not a member of, with a thread and a message.
    let human = operator(
        &daemon,
        "/humans",
        json!({"handle": "owner", "displayName": "Owner"}),
    )
    .await["humanId"]
        .clone();
    let private = operator(
        &daemon,
        "/channels",
        json!({"name": "private", "members": [human]}),
    )
    .await["channelId"]
        .as_str()
        .unwrap()
        .to_string();
    let thread = operator(
        &daemon,
        &format!("/channels/{private}/threads"),
        json!({"title": "secret"}),
    )
    .await["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let posted = operator(&daemon, "/messages", json!({"authorHumanId": human, "channelId": private, "threadId": thread, "content": "hidden",
        "attachments": [{"name": "plan.txt", "mediaType": "text/plain", "text": "secret plan"}]})).await;
    // A direct conversation between two humans, without the agent.
    let other = operator(
        &daemon,
        "/humans",
        json!({"handle": "other", "displayName": "Other"}),
    )
    .await["humanId"]
        .clone();
    let foreign_dm =
        operator(&daemon, "/dms", json!({"memberIds": [human, other]})).await["target"].clone();

    let target = format!("thread:{thread}");
    let cases = [
        (
            "message_send",
            json!({"target": target, "content": "let me in"}),
        ),
        ("message_history_read", json!({"target": target})),
        (
            "message_history_read",
            json!({"target": format!("channel:{private}")}),
        ),
        (
            "message_send",
            json!({"target": format!("channel:{private}"), "content": "x"}),
        ),
        (
            "message_send",
            json!({"target": foreign_dm, "content": "x"}),
        ),
        ("message_history_read", json!({"target": foreign_dm})),
        (
            "reaction_add",
            json!({"messageId": posted["messageId"], "emoji": "👀"}),
        ),
        (
            "reaction_remove",
            json!({"messageId": posted["messageId"], "emoji": "👀"}),
        ),
        (
            "attachment_read",
            json!({"attachmentId": posted["attachmentIds"][0]}),
        ),
    ];
    for (tool, arguments) in cases {
        let error = call_error(&rt, &daemon, tool, arguments.clone()).await;
        assert_eq!(error["code"], "not_found", "{tool} {arguments}: {error}");
    }
    // Hidden and nonexistent read the same, apart from the id the caller sent.
    let hidden = call_error(
        &rt,
        &daemon,
        "message_history_read",
        json!({"target": target}),
    )
    .await;
    let missing_thread = "thr_00000000000000000000000000";
    let missing = call_error(
        &rt,
        &daemon,
        "message_history_read",
        json!({"target": format!("thread:{missing_thread}")}),
    )
    .await;
    assert_eq!(
        hidden.to_string().replace(&thread, "ID"),
        missing.to_string().replace(missing_thread, "ID")
    );
    // A direct conversation works once the server has one with this agent.
    let agent_id = rt.url.rsplit('/').next().unwrap().to_string();
    let dm = operator(&daemon, "/dms", json!({"memberIds": [human, agent_id]})).await;
    let sent = call(
        &rt,
        &daemon,
        "message_send",
        json!({"target": dm["target"], "content": "hi"}),
    )
    .await;
    assert_eq!(sent["isError"], false, "{sent}");
    assert_eq!(sent["structuredContent"]["message"]["target"], dm["target"]);
}

#[tokio::test]
async fn the_official_python_sdk_works_in_both_eras() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let python = crate::support::venv_tool("python");
    // `auto` is what clients default to: it probes `server/discover` and settles on the modern era.
    for (mode, expected) in [("legacy", "2025-11-25"), (MODERN, MODERN), ("auto", MODERN)] {
        let output = tokio::process::Command::new(&python)
            .arg(repo_root().join("tests/it/mcp_sdk_client.py"))
            .args([
                "--url",
                &rt.url,
                "--mode",
                mode,
                "--target",
                &channel(&daemon),
            ])
            .arg("--token-file")
            .arg(&rt.token_file)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{mode}: {}{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(summary["protocolVersion"], expected, "{mode}");
        assert_eq!(summary["unknownToolCode"], -32602);
        assert!(summary["historyCount"].as_u64().unwrap() >= 1);
        assert!(!stdout.contains(&rt.token()));
    }
}

/// The daemon's admin status (`acquiredRequests`, `mcpRequests`).
async fn admin_status(daemon: &TestDaemon) -> Value {
    let token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    let response = daemon
        .client
        .get(format!("{}/api/admin/status", daemon.base_url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    response.json::<Value>().await.unwrap()["data"].clone()
}

/// 32 requests whose bodies never come hold every admission slot of `rt` (checked through the
/// daemon's status); a 33rd is refused with 429 before its body. Returns the held connections.
async fn fill_admission(daemon: &TestDaemon, rt: &Runtime) -> Vec<tokio::net::TcpStream> {
    use crate::exec_transport::{raw_post, read_status};
    let token = rt.token();
    let address = daemon.base_url.trim_start_matches("http://").to_string();
    let path = rt.url.trim_start_matches(&daemon.base_url).to_string();
    let post = || {
        raw_post(
            address.clone(),
            path.clone(),
            token.clone(),
            100,
            Vec::new(),
        )
    };
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..32 {
        set.spawn(post());
    }
    let held = set.join_all().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while admin_status(daemon).await["acquiredRequests"].as_u64() != Some(32) {
        assert!(
            std::time::Instant::now() < deadline,
            "32 requests were not admitted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(read_status(&mut post().await).await, 429);
    held
}

#[tokio::test]
async fn bodies_and_admission_are_bounded_at_their_edges() {
    use crate::exec_transport::read_status;
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let token = rt.token();

    // 1 MiB of body is read; one byte more is refused with 413.
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let padded = |total: usize| format!("{ping}{}", " ".repeat(total - ping.len()));
    let (status, _, body) = post(&daemon, &rt.url, Some(&token), &[], padded(1024 * 1024)).await;
    assert_eq!((status, &body["result"]), (200, &json!({})));
    let (status, _, body) =
        post(&daemon, &rt.url, Some(&token), &[], padded(1024 * 1024 + 1)).await;
    assert_eq!((status, &body["error"]["code"]), (413, &json!(-32600)));

    // 32 requests in flight hold every slot of this runtime; the 33rd is refused before its body.
    let mut held = fill_admission(&daemon, &rt).await;
    // The held bodies never arrive: each gets 408 at the 5-second deadline and frees its slot.
    for stream in &mut held {
        assert_eq!(read_status(stream).await, 408);
    }
    let (status, _, _) = post(&daemon, &rt.url, Some(&token), &[], ping.to_string()).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn tool_bounds_hold_at_their_edges() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let target = channel(&daemon);

    // message_history_read: `limit` 100 is accepted, 101 and 0 are not.
    let ok = call(
        &rt,
        &daemon,
        "message_history_read",
        json!({"target": target, "limit": 100}),
    )
    .await;
    assert_eq!(ok["isError"], false);
    for limit in [0, 101] {
        let error = call_error(
            &rt,
            &daemon,
            "message_history_read",
            json!({"target": target, "limit": limit}),
        )
        .await;
        assert_eq!(error["code"], "validation_failed", "limit {limit}");
    }
    // message_send: 4000 characters are accepted, 4001 are not.
    let ok = call(
        &rt,
        &daemon,
        "message_send",
        json!({"target": target, "content": "é".repeat(4000)}),
    )
    .await;
    assert_eq!(ok["isError"], false);
    let error = call_error(
        &rt,
        &daemon,
        "message_send",
        json!({"target": target, "content": "é".repeat(4001)}),
    )
    .await;
    assert_eq!(error["code"], "validation_failed");

    // A message carries at most 64 distinct reactions; a known one can still be added.
    let message = ok["structuredContent"]["message"]["id"].clone();
    for n in 0..64 {
        let added = call(
            &rt,
            &daemon,
            "reaction_add",
            json!({"messageId": message, "emoji": format!(":r{n}:")}),
        )
        .await;
        assert_eq!(added["isError"], false, "{n}: {added}");
    }
    let error = call_error(
        &rt,
        &daemon,
        "reaction_add",
        json!({"messageId": message, "emoji": ":r64:"}),
    )
    .await;
    assert_eq!(error["code"], "invalid_state");
    let again = call(
        &rt,
        &daemon,
        "reaction_add",
        json!({"messageId": message, "emoji": ":r0:"}),
    )
    .await;
    assert_eq!(
        again["structuredContent"]["reactions"]
            .as_array()
            .unwrap()
            .len(),
        64
    );

    // attachment_read: `maxBytes` 16384 is accepted, 16385 is not; binary comes back as base64;
    // an offset past the end is refused, the exact end is an empty last range.
    let human = human_in(&daemon, &target, "sender").await;
    let channel_id = target.trim_start_matches("channel:");
    let bytes: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    operator(&daemon, "/messages", json!({"authorHumanId": human, "channelId": channel_id, "content": "blob",
        "attachments": [{"name": "blob.bin", "mediaType": "application/octet-stream", "base64": encoded}]})).await;
    let history = call(
        &rt,
        &daemon,
        "message_history_read",
        json!({"target": target, "limit": 1}),
    )
    .await;
    let attachment = history["structuredContent"]["messages"][0]["attachments"][0]["id"].clone();
    let first = call(
        &rt,
        &daemon,
        "attachment_read",
        json!({"attachmentId": attachment, "maxBytes": 16384}),
    )
    .await;
    let first = &first["structuredContent"];
    assert_eq!(first["encoding"], "base64");
    assert_eq!(first["nextOffset"], 16384);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(first["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, bytes[..16384]);
    let error = call_error(
        &rt,
        &daemon,
        "attachment_read",
        json!({"attachmentId": attachment, "maxBytes": 16385}),
    )
    .await;
    assert_eq!(error["code"], "validation_failed");
    let end = call(
        &rt,
        &daemon,
        "attachment_read",
        json!({"attachmentId": attachment, "offset": 40_000}),
    )
    .await;
    assert_eq!(end["structuredContent"]["data"], "");
    assert!(end["structuredContent"].get("nextOffset").is_none());
    let error = call_error(
        &rt,
        &daemon,
        "attachment_read",
        json!({"attachmentId": attachment, "offset": 40_001}),
    )
    .await;
    assert_eq!(error["code"], "validation_failed");
}

/// The daemon reaches its embedded server in-process by default (no socket) or over
/// the server's loopback listener with `--embedded-hop tcp`; either way it is the same HTTP
/// request through the server's whole router, so a runtime sees the same answers: a write, a
/// history page, and a refusal the server decides (a channel the agent is not a member of).
/// The status names the hop each daemon uses, and a daemon started without the flag uses the one
/// `AGENTTEAM_EMBEDDED_HOP` names (`scripts/test` runs the suite once per hop), else in-process.
#[tokio::test]
async fn both_hops_to_the_embedded_server_answer_alike() {
    let default_hop = match std::env::var("AGENTTEAM_EMBEDDED_HOP") {
        Ok(hop) => hop,
        Err(_) => "in-process".to_string(),
    };
    let unflagged = TestDaemon::start(&[]).await;
    assert_eq!(admin_status(&unflagged).await["serverHop"], default_hop);

    let mut seen = Vec::new();
    for hop in ["in-process", "tcp"] {
        let daemon = TestDaemon::start(&["--embedded-hop", hop]).await;
        assert_eq!(admin_status(&daemon).await["serverHop"], hop);
        let announced: Value =
            serde_json::from_slice(&std::fs::read(daemon.state_dir.join("daemon.json")).unwrap())
                .unwrap();
        assert_eq!(announced["serverHop"], hop);
        daemon.add_agent("alpha").await;
        let rt = Runtime::start(&daemon, "alpha").await;
        let target = channel(&daemon);
        for i in 0..3 {
            let sent = call(
                &rt,
                &daemon,
                "message_send",
                json!({"target": target, "content": format!("hop message {i}")}),
            )
            .await;
            assert_ne!(sent["isError"], true, "{sent}");
        }
        let history = call(
            &rt,
            &daemon,
            "message_history_read",
            json!({"target": target, "limit": 2}),
        )
        .await;
        let page = &history["structuredContent"];
        let contents: Vec<&str> = page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(contents, ["hop message 2", "hop message 1"], "{history}");
        assert!(page["nextCursor"].is_string(), "{history}");

        // A channel of the workspace the agent does not belong to: the server refuses it.
        let elsewhere = operator(
            &daemon,
            "/channels",
            json!({"name": "elsewhere", "members": []}),
        )
        .await["channelId"]
            .as_str()
            .unwrap()
            .to_string();
        let refused = call_error(
            &rt,
            &daemon,
            "message_history_read",
            json!({"target": format!("channel:{elsewhere}")}),
        )
        .await;
        assert_eq!(refused["code"], "not_found", "{refused}");
        seen.push((contents.join("|"), refused["code"].clone()));
    }
    assert_eq!(seen[0], seen[1]);
}

/// A `tools/call` carrying Codex turn metadata (`_meta["x-codex-turn-metadata"]`).
async fn call_as(
    rt: &Runtime,
    daemon: &TestDaemon,
    tool: &str,
    arguments: Value,
    turn: Value,
) -> Value {
    let (status, body) = legacy(
        rt,
        daemon,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": {"x-codex-turn-metadata": turn}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["result"].clone()
}

/// The Codex delegated-child gate at the MCP route: a call whose turn metadata names a
/// delegated thread (`parent_thread_id`, `thread_source: "subagent"`, or, once the launcher named
/// the primary, another `thread_id`) may call read-only tools only; a tool that acts, or one the
/// inventory does not know, is refused with a message that only asks for the result to go to the
/// leader, and acts on nothing. No metadata, and the primary's own thread, act as usual.
#[tokio::test]
async fn a_delegated_codex_thread_may_only_read() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let script = r#"echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 120"#;
    let mut launched = daemon.launch("alpha", &["--primary-thread", "thr_leader"], script);
    let rt = Runtime {
        url: launched.line().await,
        token_file: PathBuf::from(launched.line().await),
        exec_token_file: PathBuf::from(launched.line().await),
        _launched: launched,
    };
    let target = channel(&daemon);
    let send = |content: &str| json!({"target": target, "content": content});
    let leader_only = |result: &Value| {
        let error = tool_error(result);
        assert_eq!(error["code"], "forbidden", "{error}");
        assert_eq!(error["message"], "return your result to the leader");
        assert_eq!(error["next"], "return your result to the leader");
    };

    let children = [
        json!({"thread_id": "thr_child", "parent_thread_id": "thr_leader", "thread_source": "subagent"}),
        json!(r#"{"thread_id":"thr_child","thread_source":"subagent"}"#),
        json!({"thread_id": "thr_other"}),
    ];
    for (i, child) in children.iter().enumerate() {
        let read = call_as(
            &rt,
            &daemon,
            "message_history_read",
            json!({"target": target}),
            child.clone(),
        )
        .await;
        assert_ne!(read["isError"], true, "a child reads: {read}");
        leader_only(
            &call_as(
                &rt,
                &daemon,
                "message_send",
                send(&format!("child {i}")),
                child.clone(),
            )
            .await,
        );
        leader_only(&call_as(&rt, &daemon, "no_such_tool", json!({}), child.clone()).await);
    }
    // The leader's own thread, and a call without metadata, act.
    let leader = call_as(
        &rt,
        &daemon,
        "message_send",
        send("from the leader"),
        json!({"thread_id": "thr_leader"}),
    )
    .await;
    assert_ne!(leader["isError"], true, "{leader}");
    let plain = call(&rt, &daemon, "message_send", send("no metadata")).await;
    assert_ne!(plain["isError"], true, "{plain}");

    let history = call(
        &rt,
        &daemon,
        "message_history_read",
        json!({"target": target, "limit": 50}),
    )
    .await;
    let contents: Vec<&str> = history["structuredContent"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(contents.contains(&"from the leader") && contents.contains(&"no metadata"));
    assert!(
        !contents.iter().any(|c| c.starts_with("child ")),
        "a refused child call acted: {contents:?}"
    );
    assert!(rt.exec_token_file.exists());
}

/// `agentteam mcp headers` prints the header object a runtime's header helper must, with the
/// token its file holds now: after a rotation it prints the new token, which the route accepts,
/// also past the first generation's expiry. A token file that is not the user's private file is
/// refused without a word of its content, and so is any route but the launch's own.
#[tokio::test]
async fn the_header_helper_prints_the_current_bearer() {
    let daemon = TestDaemon::start(&["--token-ttl-secs", "2", "--rotation-tick-ms", "100"]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let helper = || async {
        let output = tokio::process::Command::new(crate::support::bin())
            .args(["mcp", "headers", "--url", &rt.url, "--token-file"])
            .arg(&rt.token_file)
            .env_clear()
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let headers: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(headers.as_object().unwrap().len(), 1, "{headers}");
        headers["Authorization"]
            .as_str()
            .unwrap()
            .strip_prefix("Bearer ")
            .unwrap()
            .to_string()
    };
    let first = helper().await;
    assert_eq!(first, rt.token().trim());
    let list = |token: String| {
        let url = rt.url.clone();
        let client = daemon.client.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
            client
                .post(url)
                .bearer_auth(token)
                .header("MCP-Protocol-Version", "2025-11-25")
                .header("Accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(list(first.clone()).await, 200);
    // Past the first generation's lifetime (2 s), the helper's token is a newer one that works.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let rotated = loop {
        let current = helper().await;
        if current != first && list(first.clone()).await != 200 {
            break current;
        }
        assert!(std::time::Instant::now() < deadline, "no rotation seen");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(list(rotated).await, 200);
    // The renewals show in the daemon's metrics, none failed.
    let metrics = daemon.metrics().await;
    assert!(
        sample(&metrics, "agentteam_rotations_total{outcome=\"ok\"}").unwrap_or(0.0) >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "agentteam_rotations_total{outcome=\"failed\"}"),
        None
    );

    let dir = tempfile::tempdir().unwrap();
    let loose = dir.path().join("token");
    std::fs::write(&loose, rt.token()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = tokio::process::Command::new(crate::support::bin())
        .args(["mcp", "headers", "--url", &rt.url, "--token-file"])
        .arg(&loose)
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("private regular file"), "{said}");
    assert!(!said.contains(rt.token().trim()));

    // The route is checked before the file is read, as `agentteam exec` checks its own: the
    // bearer is printed only for the launch's canonical MCP route on a literal loopback address.
    let port = rt.url.split(':').nth(2).unwrap().split('/').next().unwrap();
    for wrong in [
        rt.url.replace("127.0.0.1", "localhost"),
        rt.url.replace("http://127.0.0.1", "http://192.0.2.1"),
        rt.url.replace("/api/internal/mcp/", "/api/internal/exec/"),
        format!("http://127.0.0.1:{port}/elsewhere"),
        format!("{}?x=1", rt.url),
    ] {
        let refused = tokio::process::Command::new(crate::support::bin())
            .args(["mcp", "headers", "--url", &wrong, "--token-file"])
            .arg(&rt.token_file)
            .output()
            .await
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "{wrong}");
        assert!(refused.stdout.is_empty(), "{wrong}");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(said.contains("`--url`"), "{wrong}: {said}");
    }
    // Without a route at all (Codex clears the helper's environment), nothing is printed.
    let bare = tokio::process::Command::new(crate::support::bin())
        .args(["mcp", "headers", "--token-file"])
        .arg(&rt.token_file)
        .env_clear()
        .output()
        .await
        .unwrap();
    assert_eq!(bare.status.code(), Some(2));
    assert!(bare.stdout.is_empty());
}

/// `agentteam mcp stdio` serves the official Python SDK over stdio in both eras (list,
/// calls, a protocol error), forwarding to the daemon with the token it reads from the file; the
/// SDK process never holds the token, and nothing the bridge prints carries it.
#[tokio::test]
async fn the_official_python_sdk_works_over_the_stdio_bridge_in_both_eras() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let python = crate::support::venv_tool("python");
    for (mode, expected) in [("legacy", "2025-11-25"), (MODERN, MODERN)] {
        let output = tokio::process::Command::new(&python)
            .arg(repo_root().join("tests/it/mcp_sdk_client.py"))
            .args([
                "--url",
                &rt.url,
                "--mode",
                mode,
                "--target",
                &channel(&daemon),
                "--stdio-command",
                crate::support::bin(),
            ])
            .arg("--token-file")
            .arg(&rt.token_file)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{mode}: {stderr}{stdout}");
        let summary: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(summary["protocolVersion"], expected, "{mode}");
        assert_eq!(summary["unknownToolCode"], -32602);
        assert!(summary["historyCount"].as_u64().unwrap() >= 1);
        assert!(!stdout.contains(rt.token().trim()) && !stderr.contains(rt.token().trim()));
    }
}

/// The stdio bridge forwards each line untouched, `_meta` included, so the route's
/// delegated-child gate applies to bridged calls; a notification gets no answer, a line that is
/// not JSON or is over the bound gets a JSON-RPC parse error, and the bridge ends with its input.
#[tokio::test]
async fn the_stdio_bridge_forwards_codex_metadata_and_bounds_its_lines() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let mut bridge = tokio::process::Command::new(crate::support::bin())
        .args(["mcp", "stdio"])
        .env("AGENTTEAM_MCP_URL", &rt.url)
        .env("AGENTTEAM_MCP_TOKEN_FILE", &rt.token_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(bridge.stdout.take().unwrap()).lines();
    let child_send = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "message_send",
        "arguments": {"target": channel(&daemon), "content": "from a child"},
        "_meta": {"x-codex-turn-metadata": {"thread_id": "t2", "parent_thread_id": "t1"}},
    }});
    let over = "x".repeat(agentteam::wire::MAX_BODY_BYTES + 1);
    let input = format!(
        "{child_send}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\nnot json\n{over}\n"
    );
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let mut answers = Vec::new();
    while let Some(line) =
        tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("the bridge answers in time")
            .unwrap()
    {
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    assert_eq!(bridge.wait().await.unwrap().code(), Some(0));
    assert_eq!(answers.len(), 3, "{answers:?}");
    let refused = answers.iter().find(|a| a["id"] == 1).unwrap();
    assert_eq!(
        tool_error(&refused["result"])["message"],
        "return your result to the leader"
    );
    let parse_errors = answers
        .iter()
        .filter(|a| a["id"].is_null() && a["error"]["code"] == -32700)
        .count();
    assert_eq!(parse_errors, 2, "{answers:?}");
}

/// The value of the sample `name` (with its labels, exactly as rendered) in an OpenMetrics text.
/// `agentteam status` (text and `--json`) and `GET /api/admin/metrics` show real values
/// after real traffic: a refused credential by its internal class, 32 requests holding every
/// admission slot of a runtime and the 33rd refused, the runtime with its agent, the next
/// rotation, the server probed reachable; the metrics need the admin token.
#[tokio::test]
async fn status_and_metrics_show_real_traffic() {
    use crate::exec_transport::read_status;
    let daemon = TestDaemon::start(&[]).await;
    let agent = daemon.add_agent("alpha").await;
    let rt = Runtime::start(&daemon, "alpha").await;
    let token = rt.token();
    let (status, _) = legacy(&rt, &daemon, "tools/list", json!({})).await;
    assert_eq!(status, 200);
    let (status, _, _) = post(&daemon, &rt.url, Some("not-a-token"), &[], "{}".into()).await;
    assert_eq!(status, 401);

    let mut held = fill_admission(&daemon, &rt).await;

    let json_status = daemon.cli(&["status", "--json"]).output().await.unwrap();
    assert!(json_status.status.success());
    let data: Value = serde_json::from_slice(&json_status.stdout).unwrap();
    assert_eq!(data["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(data["serverReachable"], true);
    assert_eq!(data["admission"]["requestsInFlight"], 32);
    assert_eq!(data["admission"]["maxRequestsInFlight"], 1024);
    assert_eq!(data["admission"]["runtimes"], 1);
    assert_eq!(data["admission"]["maxRuntimes"], 512);
    assert_eq!(data["cleanupDebt"], 0);
    assert_eq!(data["runtimes"][0]["agentId"], agent.as_str());
    let next = data["nextRotationInMs"].as_u64().expect("a next rotation");
    assert!(next <= 12 * 60 * 60 * 1000, "{next}");
    let text_status = daemon.cli(&["status"]).output().await.unwrap();
    let text = String::from_utf8(text_status.stdout).unwrap();
    for shown in [
        "daemon     up, version",
        "server     reachable",
        "runtimes   1 of 512; next credential rotation in ",
        "32 of 1024 admission slots in use",
        "cleanup    0 credential directories",
    ] {
        assert!(text.contains(shown), "`{shown}` missing from:\n{text}");
    }
    assert!(
        text.contains("agents     1 agent registered here"),
        "{text}"
    );
    // A person reads the agent's handle; `--ids` names it by its id.
    assert!(text.contains(" alpha ") && !text.contains(&agent), "{text}");
    let by_id = daemon.cli(&["status", "--ids"]).output().await.unwrap();
    assert!(String::from_utf8(by_id.stdout).unwrap().contains(&agent));

    let admin_token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    let url = format!("{}/api/admin/metrics", daemon.base_url);
    let scrape = daemon
        .client
        .get(&url)
        .bearer_auth(&admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(scrape.status(), 200);
    assert!(
        scrape.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let metrics = scrape.text().await.unwrap();
    assert_eq!(
        sample(&metrics, "agentteam_admission_refusals_total"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "agentteam_auth_refusals_total{class=\"malformed\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(sample(&metrics, "agentteam_requests_in_flight"), Some(32.0));
    assert_eq!(sample(&metrics, "agentteam_runtimes"), Some(1.0));
    assert_eq!(sample(&metrics, "agentteam_cleanup_debt"), Some(0.0));
    assert!(sample(&metrics, "agentteam_live_authorizations").unwrap() >= 1.0);
    assert!(
        sample(
            &metrics,
            "agentteam_requests_total{family=\"mcp\",outcome=\"ok\"}"
        )
        .unwrap()
            >= 1.0
    );
    assert!(
        sample(
            &metrics,
            "agentteam_requests_total{family=\"mcp\",outcome=\"client_error\"}"
        )
        .unwrap()
            >= 2.0
    );
    assert!(
        sample(
            &metrics,
            "agentteam_request_duration_seconds_count{family=\"mcp\",outcome=\"ok\"}"
        )
        .unwrap()
            >= 1.0
    );
    assert!(
        metrics.lines().any(
            |l| l.starts_with("agentteam_request_duration_seconds_bucket{") && l.contains("le=\"")
        ),
        "{metrics}"
    );
    assert!(!metrics.contains(token.trim()) && !metrics.contains(admin_token.trim()));
    // `agentteam status --metrics` prints the same text, finding the daemon and its admin token
    // itself: no token on a command line.
    let printed = daemon.cli(&["status", "--metrics"]).output().await.unwrap();
    assert!(printed.status.success(), "{printed:?}");
    let printed = String::from_utf8(printed.stdout).unwrap();
    assert!(printed.ends_with("# EOF\n"), "{printed}");
    assert_eq!(
        sample(&printed, "agentteam_runtimes"),
        Some(1.0),
        "{printed}"
    );
    let anonymous = daemon.client.get(&url).send().await.unwrap();
    assert!(matches!(anonymous.status().as_u16(), 401 | 403));

    for stream in &mut held {
        assert_eq!(read_status(stream).await, 408);
    }
}
