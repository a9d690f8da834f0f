//! The daemon against an external server (`--server-url`): it bootstraps there, forwards Exec
//! actions there, and classifies the server's disappearance without leaking its internals.

use serde_json::{Value, json};

use crate::support::{TestCa, TestDaemon, TlsFront, agentteam, bin, spawn_server};

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
    let status_now = daemon.admin_get("status").await;
    assert_eq!(status_now["serverReachable"], true, "{status_now}");
    assert_eq!(status_now["serverHop"], "tcp");

    server.start_kill().unwrap();
    server.wait().await.unwrap();
    // The status probes the server now: gone is unreachable, within the probe's bound.
    assert_eq!(daemon.admin_get("status").await["serverReachable"], false);
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

#[tokio::test]
async fn an_https_server_is_reached_through_the_named_ca_and_an_unknown_one_is_refused() {
    let server_dir = tempfile::tempdir().unwrap();
    let (_server, server_url, _) = spawn_server(server_dir.path()).await;
    let token_file = server_dir.path().join("operator.token");
    let ca = TestCa::new();
    let front = TlsFront::start(&ca, &server_url).await;

    // Without the CA, the daemon does not start, and says why.
    let state = tempfile::tempdir().unwrap();
    let refused = tokio::process::Command::new(bin())
        .args(["daemon", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path().join("state"))
        .args(["--server-url", &front.url, "--operator-token-file"])
        .arg(&token_file)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("its TLS certificate is not trusted"),
        "{stderr}"
    );
    // The operator CLI too.
    let admin = |ca_file: Option<&std::path::Path>| {
        let mut command = tokio::process::Command::new(bin());
        command
            .args([
                "admin",
                "--json",
                "workspace",
                "--name",
                "tls",
                "--server-url",
                &front.url,
            ])
            .arg("--operator-token-file")
            .arg(&token_file)
            .stdin(std::process::Stdio::null());
        if let Some(ca_file) = ca_file {
            command.arg("--server-ca-file").arg(ca_file);
        }
        command.output()
    };
    let refused = admin(None).await.unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("its TLS certificate is not trusted"),
        "{stderr}"
    );
    let created = admin(Some(&ca.pem_file)).await.unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let created: Value = serde_json::from_slice(&created.stdout).unwrap();
    assert!(created["workspaceId"].as_str().unwrap().starts_with("wsp_"));

    // With it, the daemon bootstraps over TLS and forwards actions there.
    let daemon = TestDaemon::start(&[
        "--server-url",
        &front.url,
        "--server-ca-file",
        ca.pem_file.to_str().unwrap(),
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
    let response = daemon
        .client
        .post(format!("{base}/project/create"))
        .bearer_auth(&token)
        .json(&json!({"name": "over tls"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["data"]["project"]["name"], "over tls");
    let _ = runtime.child.start_kill();
}

#[test]
fn plain_http_to_a_host_that_is_not_loopback_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("operator.token");
    std::fs::write(&token, "ato_x").unwrap();
    let daemon = agentteam(&[
        "daemon",
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
        "--server-url",
        "http://192.0.2.10:7780",
        "--operator-token-file",
        token.to_str().unwrap(),
    ]);
    let admin = agentteam(&[
        "admin",
        "workspace",
        "--name",
        "x",
        "--server-url",
        "http://agentteam.example:7780",
        "--operator-token-file",
        token.to_str().unwrap(),
    ]);
    for run in [daemon, admin] {
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("plain http to a host that is not loopback"),
            "{}",
            run.stderr
        );
    }
    // Loopback stays plain http, and a URL with user info is refused whatever its scheme.
    let run = agentteam(&[
        "admin",
        "workspace",
        "--name",
        "x",
        "--server-url",
        "https://ops:pw@agentteam.example",
        "--operator-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("must not carry user info"),
        "{}",
        run.stderr
    );
}
