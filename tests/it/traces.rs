//! OpenTelemetry traces, exported to a real OTLP/HTTP receiver the test starts
//! (`otlp_receiver.py`, which decodes every export with the official proto definitions): one
//! trace per call on each bridge, the daemon's spans and the server's nested through the hop, the
//! runtime's context a link and never a parent, no secret or input value in any exported byte,
//! and a failure findable from its incident id, its span or its log line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::support::{Launched, TestDaemon, bin, secret_shapes, spawn_server_in_env, venv_tool};

/// What a runtime put in its input, which no span may carry.
const MARK: &str = "TRACEINPUTMARK";
/// The collector's credentials, from the environment and from the headers file.
const ENV_SECRET: &str = "collector-env-s3cret";
const FILE_SECRET: &str = "collector-file-s3cret";
/// The runtime's own trace contexts.
const EXEC_PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const MCP_PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const MODERN_META: &str = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01";
const MODERN_HEADER: &str = "00-6bf92f3577b34da6a3ce929d0e0e4736-20f067aa0ba902b7-00";
const REFUSED_PARENT: &str = "00-11111111111111111111111111111111-2222222222222222-01";
const UNTRUSTED_PARENT: &str = "00-33333333333333333333333333333333-4444444444444444-01";
const MALFORMED: &str = "00-MALFORMEDTRACEPARENT-b7ad6b7169203331-01";

/// The receiver: its URL and the file it writes.
struct Receiver {
    _child: tokio::process::Child,
    url: String,
    out: PathBuf,
}

impl Receiver {
    async fn start(dir: &Path, mode: &str) -> Receiver {
        use tokio::io::AsyncBufReadExt;
        let out = dir.join(format!("otlp-{mode}.jsonl"));
        let mut child = tokio::process::Command::new(venv_tool("python"))
            .arg(crate::support::repo_root().join("tests/it/otlp_receiver.py"))
            .args(["--out", out.to_str().unwrap(), "--mode", mode])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the receiver starts");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines.next_line().await.unwrap().expect("`listening PORT`");
        let port = line.strip_prefix("listening ").unwrap().to_string();
        Receiver {
            _child: child,
            url: format!("http://127.0.0.1:{port}"),
            out,
        }
    }

    /// Every export request received, as the receiver decoded it.
    fn exports(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn spans(&self) -> Vec<Span> {
        self.exports().iter().flat_map(Span::all).collect()
    }
}

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    trace: String,
    id: String,
    parent: String,
    name: String,
    kind: String,
    attributes: BTreeMap<String, String>,
    links: Vec<(String, String, BTreeMap<String, String>)>,
    error: bool,
}

fn attributes(list: &Value) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for kv in list.as_array().into_iter().flatten() {
        let value = &kv["value"];
        let text = ["string_value", "int_value", "bool_value", "double_value"]
            .iter()
            .find_map(|kind| value.get(*kind))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .unwrap_or_default();
        map.insert(kv["key"].as_str().unwrap().to_string(), text);
    }
    map
}

impl Span {
    fn all(export: &Value) -> Vec<Span> {
        let mut spans = Vec::new();
        for resource in export["request"]["resource_spans"].as_array().unwrap() {
            let service = attributes(&resource["resource"]["attributes"])["service.name"].clone();
            for scope in resource["scope_spans"].as_array().unwrap() {
                for span in scope["spans"].as_array().unwrap() {
                    let text = |key: &str| span[key].as_str().unwrap_or("").to_string();
                    spans.push(Span {
                        service: service.clone(),
                        trace: text("trace_id"),
                        id: text("span_id"),
                        parent: text("parent_span_id"),
                        name: text("name"),
                        kind: text("kind"),
                        attributes: attributes(&span["attributes"]),
                        links: span["links"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|link| {
                                (
                                    link["trace_id"].as_str().unwrap().to_string(),
                                    link["span_id"].as_str().unwrap().to_string(),
                                    attributes(&link["attributes"]),
                                )
                            })
                            .collect(),
                        error: span["status"]["code"] == "STATUS_CODE_ERROR",
                    });
                }
            }
        }
        spans
    }

    fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

/// The spans of `trace`, and the one whose parent is `parent` and whose service and name are
/// these.
fn child<'a>(spans: &'a [Span], parent: &Span, service: &str, name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| {
            s.trace == parent.trace
                && s.parent == parent.id
                && s.service == service
                && s.name == name
        })
        .unwrap_or_else(|| {
            panic!(
                "no `{name}` span of {service} under {parent:?}; the trace: {:#?}",
                spans
                    .iter()
                    .filter(|s| s.trace == parent.trace)
                    .collect::<Vec<_>>()
            )
        })
}

/// The trace from `root` down through the hop to the server's action and a store call: every
/// span nested under the one before, in one trace.
fn assert_nested(spans: &[Span], root: &Span, operation: &str) {
    assert_eq!(root.parent, "", "the call starts its own trace: {root:?}");
    assert_eq!(root.kind, "SPAN_KIND_SERVER");
    let hop = child(spans, root, "agentteam-daemon", "hop");
    assert_eq!(hop.kind, "SPAN_KIND_CLIENT");
    assert_eq!(hop.attr("agentteam.attempt"), "1");
    let server = child(spans, hop, "agentteam-server", operation);
    assert_eq!(server.attr("agentteam.outcome"), "ok", "{server:?}");
    assert_eq!(
        server.attr("agentteam.agent_id"),
        root.attr("agentteam.agent_id")
    );
    let action = child(spans, server, "agentteam-server", "action");
    assert!(
        spans
            .iter()
            .any(|s| s.parent == action.id && s.attr("db.system.name") == "sqlite"),
        "a store call under the action: {:#?}",
        spans
            .iter()
            .filter(|s| s.trace == root.trace)
            .collect::<Vec<_>>()
    );
}

/// A launched runtime's bridges, used as the runtime would.
struct Runtime {
    _launched: Launched,
    exec_base: String,
    exec_token_file: PathBuf,
    mcp_url: String,
    mcp_token_file: PathBuf,
}

impl Runtime {
    async fn launch(daemon: &TestDaemon) -> Runtime {
        daemon.add_agent("alpha").await;
        let script = r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; echo "${OTEL_EXPORTER_OTLP_HEADERS-unset} ${OTEL_EXPORTER_OTLP_ENDPOINT-unset}"; exec sleep 120"#;
        let mut launched = daemon.launch("alpha", &[], script);
        let exec_base = launched.line().await;
        let exec_token_file = PathBuf::from(launched.line().await);
        let mcp_url = launched.line().await;
        let mcp_token_file = PathBuf::from(launched.line().await);
        // The collector's credential stays with the daemon; where it is, is the user's to share.
        let otel = launched.line().await;
        assert!(otel.starts_with("unset "), "{otel}");
        Runtime {
            exec_base,
            exec_token_file,
            mcp_url,
            mcp_token_file,
            _launched: launched,
        }
    }

    async fn exec(&self, args: &[&str], traceparent: Option<&str>) -> (i32, Value) {
        let mut command = tokio::process::Command::new(bin());
        command
            .arg("exec")
            .args(args)
            .env_clear()
            .env("AGENTTEAM_EXEC_BASE_URL", &self.exec_base)
            .env("AGENTTEAM_EXEC_TOKEN_FILE", &self.exec_token_file);
        if let Some(traceparent) = traceparent {
            command.env("TRACEPARENT", traceparent);
        }
        let output = command.output().await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        (
            output.status.code().unwrap_or(-1),
            serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        )
    }

    async fn mcp(&self, client: &reqwest::Client, token: &str, body: Value) -> reqwest::Response {
        client
            .post(&self.mcp_url)
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&body)
            .send()
            .await
            .unwrap()
    }
}

fn channel(daemon: &TestDaemon) -> String {
    let identity: Value =
        serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
            .unwrap();
    identity["channelId"].as_str().unwrap().to_string()
}

/// The export variables of a process whose spans go to `receiver`, its headers from the
/// environment and from an owner-only file in `dir`.
fn exporting(receiver: &Receiver, dir: &Path) -> Vec<(String, String)> {
    let file = dir.join("collector.headers");
    std::fs::write(
        &file,
        format!("# the collector's tenant\nx-tenant={FILE_SECRET}\n"),
    )
    .unwrap();
    let owner_only = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&file, owner_only).unwrap();
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), receiver.url.clone()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS".into(),
            format!("authorization=Bearer%20{ENV_SECRET}"),
        ),
        (
            "AGENTTEAM_OTEL_HEADERS_FILE".into(),
            file.display().to_string(),
        ),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "20".into()),
        // The exporter follows no proxy of the environment (nothing listens there).
        ("HTTP_PROXY".into(), "http://127.0.0.1:9".into()),
        ("http_proxy".into(), "http://127.0.0.1:9".into()),
        ("ALL_PROXY".into(), "http://127.0.0.1:9".into()),
    ]
}

fn borrowed(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Nothing secret and nothing the runtime sent, in any byte the collector received.
fn assert_clean(receiver: &Receiver, secrets: &[&str]) {
    let exports = receiver.exports();
    assert!(!exports.is_empty());
    for export in &exports {
        use base64::Engine;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(export["raw"].as_str().unwrap())
            .unwrap();
        let raw = String::from_utf8_lossy(&raw);
        let decoded = export["request"].to_string();
        for text in [raw.as_ref(), decoded.as_str()] {
            assert_eq!(secret_shapes(text), Vec::<String>::new());
            for secret in secrets {
                assert!(!text.contains(secret), "`{secret}` was exported");
            }
        }
        // The collector's credentials went where they belong: its request headers.
        assert_eq!(
            export["headers"]["authorization"],
            format!("Bearer {ENV_SECRET}")
        );
        assert_eq!(export["headers"]["x-tenant"], FILE_SECRET);
        assert_eq!(export["path"], "/v1/traces");
    }
}

#[tokio::test]
async fn a_call_on_each_bridge_is_one_trace_from_the_bridge_to_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), "ok").await;
    let env = exporting(&receiver, dir.path());
    let mut daemon = TestDaemon::start_with_env(&[], &borrowed(&env)).await;
    let runtime = Runtime::launch(&daemon).await;
    let location = json!({"kind": "channel", "channelId": channel(&daemon)});

    // Exec, with the command line's trace context.
    let create = json!({"location": location, "title": format!("{MARK} exec")}).to_string();
    let (code, created) = runtime
        .exec(&["task", "create", &create], Some(EXEC_PARENT))
        .await;
    assert_eq!(code, 0, "{created}");
    let task_id = created["data"]["task"]["id"].as_str().unwrap().to_string();
    // A malformed context is ignored: no link, never repeated.
    let get = json!({ "taskId": task_id }).to_string();
    let (code, _) = runtime.exec(&["task", "get", &get], Some(MALFORMED)).await;
    assert_eq!(code, 0);

    // MCP, with the context in `_meta`.
    let token = std::fs::read_to_string(&runtime.mcp_token_file).unwrap();
    let target = format!("channel:{}", channel(&daemon));
    let sent = runtime
        .mcp(
            &daemon.client,
            &token,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "message_send",
                "arguments": {"target": target, "content": format!("{MARK} mcp")},
                "_meta": {"traceparent": MCP_PARENT, "tracestate": format!("k={MARK}"), "baggage": format!("b={MARK}")},
            }}),
        )
        .await;
    assert_eq!(sent.status(), 200);
    let result: Value = sent.json().await.unwrap();
    assert_eq!(result["result"]["isError"], false, "{result}");

    // The modern era carries `_meta` too; its headers may carry a context as well.
    let modern = daemon
        .client
        .post(&runtime.mcp_url)
        .bearer_auth(&token)
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "message_history_read")
        .header("traceparent", MODERN_HEADER)
        .json(
            &json!({"jsonrpc": "2.0", "id": "m-1", "method": "tools/call", "params": {
                "name": "message_history_read",
                "arguments": {"target": target},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "traceparent": MODERN_META,
                },
            }}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(modern.status(), 200);
    let result: Value = modern.json().await.unwrap();
    assert_eq!(result["result"]["isError"], false, "{result}");

    // A refused request's context is linked, and marked as not verified.
    let refused = daemon
        .client
        .post(&runtime.mcp_url)
        .bearer_auth("v1.not-a-token")
        .header("traceparent", REFUSED_PARENT)
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    // The server trusts a hop's context only from a verified device.
    let untrusted = daemon
        .client
        .post(format!(
            "{}/runtime/servers/wsp_1/agents/agt_1/actions/task/get",
            daemon.server_url
        ))
        .bearer_auth("dev_1.not-a-credential")
        .header("traceparent", UNTRUSTED_PARENT)
        .json(&json!({ "taskId": task_id }))
        .send()
        .await
        .unwrap();
    assert_eq!(untrusted.status(), 403);

    // The daemon exports what is queued when it stops (and removes the runtime's tokens).
    let exec_token = std::fs::read_to_string(&runtime.exec_token_file).unwrap();
    assert_eq!(daemon.stop().await, 0);
    let spans = receiver.spans();

    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.service == "agentteam-daemon" && s.parent.is_empty())
        .collect();
    let root = |name: &str| {
        roots
            .iter()
            .find(|s| s.name == name)
            .copied()
            .unwrap_or_else(|| panic!("no `{name}` call span: {roots:#?}"))
    };

    let exec = root("task.create");
    assert_eq!(exec.attr("agentteam.route_family"), "exec");
    assert_eq!(exec.attr("agentteam.outcome"), "ok");
    assert_eq!(exec.attr("agentteam.result_budget"), "within");
    assert_eq!(exec.attr("http.response.status_code"), "200");
    assert!(
        exec.attr("agentteam.agent_id").starts_with("agt_"),
        "{exec:?}"
    );
    assert!(exec.attr("agentteam.run_id").starts_with("run"), "{exec:?}");
    assert!(!exec.trace.is_empty() && exec.trace != EXEC_PARENT[3..35]);
    assert_eq!(
        exec.links,
        vec![(
            EXEC_PARENT[3..35].to_string(),
            EXEC_PARENT[36..52].to_string(),
            BTreeMap::from([
                ("agentteam.link.source".to_string(), "header".to_string()),
                ("agentteam.link.verified".to_string(), "true".to_string()),
            ])
        )]
    );
    assert_nested(&spans, exec, "task.create");
    let get = root("task.get");
    assert!(get.links.is_empty(), "{get:?}");
    assert_nested(&spans, get, "task.get");

    let mcp = root("mcp.message_send");
    assert_eq!(mcp.attr("agentteam.route_family"), "mcp");
    assert_eq!(mcp.attr("rpc.method"), "tools/call");
    assert_eq!(mcp.attr("agentteam.outcome"), "ok");
    assert_eq!(mcp.links.len(), 1, "{mcp:?}");
    assert_eq!(mcp.links[0].0, &MCP_PARENT[3..35]);
    assert_eq!(mcp.links[0].2["agentteam.link.source"], "mcp_meta");
    assert_nested(&spans, mcp, "mcp.message_send");

    let modern = root("mcp.message_history_read");
    let mut linked: Vec<(&str, &str, &str)> = modern
        .links
        .iter()
        .map(|(trace, _, attributes)| {
            (
                trace.as_str(),
                attributes["agentteam.link.source"].as_str(),
                attributes["agentteam.link.verified"].as_str(),
            )
        })
        .collect();
    linked.sort();
    assert_eq!(
        linked,
        [
            (&MODERN_META[3..35], "mcp_meta", "true"),
            (&MODERN_HEADER[3..35], "header", "true"),
        ]
    );
    assert_nested(&spans, modern, "mcp.message_history_read");

    let refused = roots
        .iter()
        .find(|s| s.attr("http.response.status_code") == "401")
        .expect("the refused request's span");
    assert_eq!(refused.links.len(), 1, "{refused:?}");
    assert_eq!(refused.links[0].0, &REFUSED_PARENT[3..35]);
    assert_eq!(refused.links[0].2["agentteam.link.verified"], "false");
    assert_eq!(refused.attr("agentteam.agent_id"), "");

    let forbidden = spans
        .iter()
        .find(|s| s.service == "agentteam-server" && s.attr("http.response.status_code") == "403")
        .expect("the refused hop's span");
    assert_eq!(forbidden.parent, "", "an unverified context is no parent");
    assert_ne!(forbidden.trace, &UNTRUSTED_PARENT[3..35]);
    assert!(forbidden.links.is_empty());
    // Its credential's lookup ran before the server knew the span's parent: a child all the same.
    assert!(
        spans
            .iter()
            .any(|s| s.parent == forbidden.id && s.attr("db.system.name") == "sqlite"),
        "the credential's store call under the refused span: {spans:#?}"
    );

    let malformed_part = &MALFORMED[3..24];
    assert_clean(
        &receiver,
        &[
            MARK,
            ENV_SECRET,
            FILE_SECRET,
            &token,
            &exec_token,
            malformed_part,
            "tracestate",
            "baggage",
        ],
    );
}

#[tokio::test]
async fn a_failed_call_is_found_from_its_incident_its_span_and_its_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), "ok").await;
    let env = exporting(&receiver, dir.path());
    let database = crate::support::database_url(dir.path()).await;
    let token_file = dir.path().join("operator.token");
    let (_server, server_url, _) = spawn_server_in_env(
        "127.0.0.1:0",
        &database,
        &token_file,
        None,
        &[],
        &borrowed(&env),
    )
    .await;
    let proxy = FaultProxy::start(&server_url).await;
    let mut daemon = TestDaemon::start_with_env(
        &[
            "--server-url",
            &proxy.url,
            "--operator-token-file",
            token_file.to_str().unwrap(),
        ],
        &borrowed(&env),
    )
    .await;
    let runtime = Runtime::launch(&daemon).await;
    let location = json!({"kind": "channel", "channelId": channel(&daemon)});
    let create = json!({"location": location, "title": "checked"}).to_string();
    let (code, created) = runtime.exec(&["task", "create", &create], None).await;
    assert_eq!(code, 0, "{created}");
    let task_id = created["data"]["task"]["id"].as_str().unwrap().to_string();

    proxy.set(
        "/actions/task/get",
        Fault::Rewrite(|body| {
            let mut envelope: Value = serde_json::from_slice(body).unwrap();
            envelope["data"]["task"]["offContract"] = json!(true);
            serde_json::to_vec(&envelope).unwrap()
        }),
    );
    let get = json!({ "taskId": task_id }).to_string();
    let (code, failed) = runtime.exec(&["task", "get", &get], None).await;
    assert_ne!(code, 0);
    assert_eq!(failed["error"]["code"], "upstream_failed", "{failed}");
    let incident = failed["error"]["incidentId"].as_str().unwrap().to_string();
    assert_eq!(daemon.stop().await, 0);

    // The incident names the span; the span's trace names the log line; the log line names the
    // incident.
    let spans = receiver.spans();
    let span = spans
        .iter()
        .find(|s| s.attr("agentteam.incident_id") == incident)
        .unwrap_or_else(|| panic!("no span of {incident}: {spans:#?}"));
    assert_eq!(span.service, "agentteam-daemon");
    assert_eq!(span.name, "task.get");
    assert_eq!(span.attr("agentteam.outcome"), "upstream_failed");
    assert_eq!(span.attr("http.response.status_code"), "502");
    assert!(span.error);
    // The server answered its part well: its span is in the same trace, over TCP. The server
    // runs on and exports on its own schedule: its span may come after the daemon's.
    crate::support::wait_for(
        "the server's span of the call",
        std::time::Duration::from_secs(30),
        || {
            receiver.spans().iter().any(|s| {
                s.trace == span.trace && s.service == "agentteam-server" && s.name == "task.get"
            })
        },
    )
    .await;
    let all = receiver.spans();
    let hop = child(&all, span, "agentteam-daemon", "hop");
    let server = child(&all, hop, "agentteam-server", "task.get");
    assert_eq!(server.attr("agentteam.outcome"), "ok");
    let log = daemon.log();
    let line = log
        .lines()
        .find(|line| line.contains(&incident) && line.contains("output contract"))
        .unwrap_or_else(|| panic!("no log line of {incident}:\n{log}"));
    assert!(
        line.contains(&format!("trace_id={}", span.trace)),
        "the log line carries the trace id: {line}"
    );
}

/// Reads a daemon metric's value (0 when it is not there yet).
async fn metric(daemon: &TestDaemon, name: &str) -> f64 {
    crate::support::sample(&daemon.metrics().await, name).unwrap_or(0.0)
}

#[tokio::test]
async fn a_collector_that_stalls_or_is_down_fails_no_call_and_what_it_loses_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["stall", "down"] {
        let receiver = Receiver::start(dir.path(), "stall").await;
        let mut env = exporting(&receiver, dir.path());
        if mode == "down" {
            // A port nothing listens on: the receiver's, once it is gone.
            drop(receiver);
        }
        env.extend([
            ("OTEL_BSP_MAX_QUEUE_SIZE".to_string(), "4".to_string()),
            (
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE".to_string(),
                "2".to_string(),
            ),
            (
                "OTEL_EXPORTER_OTLP_TIMEOUT".to_string(),
                EXPORT_DEADLINE.as_millis().to_string(),
            ),
        ]);
        let mut daemon = TestDaemon::start_with_env(&[], &borrowed(&env)).await;
        let runtime = Runtime::launch(&daemon).await;
        let location = json!({"kind": "channel", "channelId": channel(&daemon)});
        let read = json!({ "location": location }).to_string();
        for _ in 0..10 {
            let (code, answer) = runtime.exec(&["task", "list", &read], None).await;
            assert_eq!(code, 0, "{mode}: {answer}");
        }
        let lost = match mode {
            // The one export in flight holds the queue's room: the rest is dropped, counted.
            "stall" => r#"agentteam_trace_spans_dropped_total{reason="queue_full"}"#,
            _ => r#"agentteam_trace_spans_dropped_total{reason="export_failed"}"#,
        };
        let mut seen = 0.0;
        for _ in 0..250 {
            seen = metric(&daemon, lost).await;
            if seen > 0.0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(seen > 0.0, "{mode}: {}", daemon.metrics().await);
        assert_eq!(
            metric(&daemon, "agentteam_trace_spans_exported_total").await,
            0.0,
            "{mode}"
        );
        // A stop waits for the stalled export no longer than its deadline (and the half second
        // it adds) allows, and exits; the rest of the stop is bounded by `STOP_SLACK`.
        let stopping = std::time::Instant::now();
        assert_eq!(daemon.stop().await, 0, "{mode}");
        let took = stopping.elapsed();
        assert!(
            took < EXPORT_DEADLINE + std::time::Duration::from_millis(500) + STOP_SLACK,
            "{mode}: the stop took {took:?}"
        );
    }
}

/// One export's deadline in the stalled-collector test: a stop waits for it, and no longer.
const EXPORT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(4);
/// What the rest of a daemon's stop may take on a loaded machine (its runtime stopped, its
/// server closed): under [`EXPORT_DEADLINE`], so a stop that went on to export the queued
/// batches, one stalled deadline each, would exceed the bound.
const STOP_SLACK: std::time::Duration = std::time::Duration::from_secs(3);

#[test]
fn a_collector_setting_that_would_leak_is_refused_at_start_naming_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    for (name, value, says) in [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://collector.example:4318/?key=s3cret",
            "plain http",
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "http/protobuf"),
    ] {
        let state = dir.path().join("state").display().to_string();
        let database = format!("sqlite://{}/server.db", dir.path().display());
        for command in [
            vec!["daemon", "--listen", "127.0.0.1:0", "--state-dir", &state],
            vec!["server", "--listen", "127.0.0.1:0", "--database", &database],
        ] {
            let output = std::process::Command::new(bin())
                .args(&command)
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
                .env(name, value)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{command:?}: {stderr}");
            assert!(stderr.contains(name) && stderr.contains(says), "{stderr}");
            assert!(!stderr.contains("s3cret"), "{stderr}");
        }
    }
}
