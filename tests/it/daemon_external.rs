//! The daemon against an external server (`--server-url`): it bootstraps there, forwards Exec
//! actions there, and classifies the server's disappearance without leaking its internals.

use serde_json::{Value, json};

use crate::support::{TestDaemon, spawn_server};

#[tokio::test]
async fn an_external_server_is_used_and_its_outage_is_classified() {
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

    let script =
        r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 60"#;
    let mut runtime = daemon.launch("remote", &[], script);
    let base = runtime.line().await;
    let token = std::fs::read_to_string(runtime.line().await).unwrap();
    let call = || async {
        let response = daemon
            .client
            .post(format!("{base}/project/create"))
            .bearer_auth(&token)
            .json(&json!({"name": "remote project"}))
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    let (status, body) = call().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["project"]["name"], "remote project");

    server.start_kill().unwrap();
    server.wait().await.unwrap();
    let (status, body) = call().await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("upstream_unavailable")),
        "{body}"
    );
    let text = body.to_string();
    let port = server_url.rsplit(':').next().unwrap();
    assert!(
        !text.contains(port) && !text.to_lowercase().contains("refused"),
        "internals leaked: {text}"
    );
    let _ = runtime.child.start_kill();
}
