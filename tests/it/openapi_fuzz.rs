//! Schemathesis against the live daemon, driven by the committed OpenAPI document: every
//! generated request, valid or not, gets a documented status, a JSON envelope that matches its
//! schema, and never a server error. (`scripts/test` installs schemathesis.)

use std::os::unix::fs::PermissionsExt;

use crate::support::{TestDaemon, repo_root};

#[tokio::test]
async fn the_exec_api_survives_schemathesis() {
    let st = crate::support::venv_tool("st");

    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("fuzz").await;
    let script =
        r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 600"#;
    let mut runtime = daemon.launch("fuzz", &[], script);
    let base = runtime.line().await;
    let token = std::fs::read_to_string(runtime.line().await).unwrap();
    let (server_id, agent_id) = {
        let rest = base.split("/servers/").nth(1).unwrap();
        let (server, agent) = rest.split_once("/agents/").unwrap();
        (server.to_string(), agent.to_string())
    };

    // The bearer goes in an owner-only config file, not on a command line.
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("schemathesis.toml");
    std::fs::write(&config, format!("headers = {{ Authorization = \"Bearer {token}\" }}\n[parameters]\n\"path.serverId\" = \"{server_id}\"\n\"path.agentId\" = \"{agent_id}\"\n")).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let output = tokio::process::Command::new(&st)
        .current_dir(work.path())
        .args(["run"])
        .arg(repo_root().join("generated/openapi.json"))
        .args(["--url", &daemon.base_url, "--max-examples", "25", "--seed", "1", "--checks"])
        .arg("not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,negative_data_rejection,unsupported_method")
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains("passed"), "{report}");
    let _ = runtime.child.start_kill();
}
