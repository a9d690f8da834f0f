//! `agentteam admin …` against a real server: an operator sets up a whole workspace from the
//! command line, and the device credential lands in an owner-only file, never on stdout.

use serde_json::{Value, json};

use crate::support::{TestServer, bin};

async fn admin(server: &TestServer, args: &[&str]) -> (i32, Value, String) {
    let output = tokio::process::Command::new(bin())
        .args(["admin", "--json"])
        .args(args)
        .arg("--server-url")
        .arg(&server.base_url)
        .arg("--operator-token-file")
        .arg(&server.operator_token_file)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        output.status.code().unwrap(),
        value,
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[track_caller]
fn id(result: (i32, Value, String), key: &str) -> String {
    assert_eq!(result.0, 0, "{}", result.2);
    result.1[key]
        .as_str()
        .unwrap_or_else(|| panic!("no `{key}` in {}", result.1))
        .to_string()
}

#[tokio::test]
async fn an_operator_sets_up_a_workspace_from_the_command_line() {
    let server = TestServer::start().await;
    let workspace = id(
        admin(&server, &["workspace", "--name", "acme"]).await,
        "workspaceId",
    );
    let human = id(
        admin(
            &server,
            &[
                "human",
                "--workspace",
                &workspace,
                "--handle",
                "ada",
                "--display-name",
                "Ada",
            ],
        )
        .await,
        "humanId",
    );
    let agent = id(
        admin(
            &server,
            &[
                "agent",
                "--workspace",
                &workspace,
                "--owner",
                &human,
                "--handle",
                "bot",
                "--display-name",
                "Bot",
            ],
        )
        .await,
        "agentId",
    );
    let credential_file = server
        .operator_token_file
        .with_file_name("device.credential");
    let credential_path = credential_file.to_str().unwrap();
    let (code, device, stderr) = admin(
        &server,
        &[
            "device",
            "--workspace",
            &workspace,
            "--human",
            &human,
            "--credential-file",
            credential_path,
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        device.get("credential").is_none(),
        "the credential is never printed: {device}"
    );
    let credential = std::fs::read_to_string(&credential_file).unwrap();
    assert!(credential.starts_with(device["deviceId"].as_str().unwrap()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&credential_file)
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }
    let channel = id(
        admin(
            &server,
            &[
                "channel",
                "--workspace",
                &workspace,
                "--name",
                "general",
                "--member",
                &human,
                "--member",
                &agent,
            ],
        )
        .await,
        "channelId",
    );
    let thread = id(
        admin(
            &server,
            &[
                "thread",
                "--workspace",
                &workspace,
                "--channel",
                &channel,
                "--title",
                "release",
            ],
        )
        .await,
        "threadId",
    );
    // A direct conversation is created once: opening it again returns the same one.
    let dm = id(
        admin(
            &server,
            &[
                "dm",
                "--workspace",
                &workspace,
                "--member",
                &human,
                "--member",
                &agent,
            ],
        )
        .await,
        "dmId",
    );
    let again = id(
        admin(
            &server,
            &[
                "dm",
                "--workspace",
                &workspace,
                "--member",
                &agent,
                "--member",
                &human,
            ],
        )
        .await,
        "dmId",
    );
    assert_eq!(dm, again);
    assert!(dm.starts_with("dm_"));
    let (code, _, stderr) = admin(
        &server,
        &[
            "dm",
            "--workspace",
            &workspace,
            "--member",
            &human,
            "--member",
            &human,
        ],
    )
    .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("two different members"), "{stderr}");
    id(
        admin(
            &server,
            &[
                "team",
                "--workspace",
                &workspace,
                "--handle",
                "core",
                "--display-name",
                "Core",
                "--member",
                &agent,
            ],
        )
        .await,
        "teamId",
    );
    id(
        admin(
            &server,
            &[
                "message",
                "--workspace",
                &workspace,
                "--author",
                &human,
                "--channel",
                &channel,
                "--thread",
                &thread,
                "--content",
                "please ship",
            ],
        )
        .await,
        "messageId",
    );

    // The device credential works for the agent on the runtime API.
    let path = format!("/runtime/servers/{workspace}/agents/{agent}/actions/task/create");
    let (status, body) = server
        .post(
            &path,
            Some(&credential),
            &json!({"location": {"kind": "thread", "threadId": thread}, "title": "ship"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // A refused request exits 2 with the server's message, like every refusal of a human command
    // (one exit-status contract: exit 1 is `agentteam exec`'s failed action); an existing
    // credential file is kept.
    let (code, _, stderr) = admin(
        &server,
        &[
            "human",
            "--workspace",
            &workspace,
            "--handle",
            "ada",
            "--display-name",
            "Again",
        ],
    )
    .await;
    assert_eq!(code, 2);
    assert!(stderr.contains("already exists"), "{stderr}");
    let (code, _, stderr) = admin(
        &server,
        &[
            "device",
            "--workspace",
            &workspace,
            "--human",
            &human,
            "--credential-file",
            credential_path,
        ],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&credential_file).unwrap(),
        credential
    );
}

/// Every human command answers a refusal the same way: `error:` and `hint:` lines on
/// stderr, exit 2 (here the daemon's admin API refusing a second agent with the same handle).
#[tokio::test]
async fn a_refused_daemon_command_exits_2_with_its_message() {
    let daemon = crate::support::TestDaemon::start(&[]).await;
    daemon.add_agent("twin").await;
    let output = daemon
        .cli(&["agent", "add", "twin"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: handle `twin` is taken"),
        "{stderr}"
    );
    let output = daemon
        .cli(&["agent", "remove", "nobody"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no agent profile `nobody`"));
}
