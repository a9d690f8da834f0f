//! App-hosted extensions end to end: a server process (on whichever backend the run is on) with
//! the `github` and `gitea` extensions, a provider stub on loopback, a daemon that verifies and
//! pins the definitions, and runtimes that call `agentteam exec github|gitea …`. Also: pins that
//! survive a publish (and the restart error), a tampered definition left out and reported, each
//! failure class against the stub, a provider over TLS with a test CA, the publish rules, and the
//! installation credential never reaching anything a model, a person or a log sees.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::provider_stub::{Mode, ProviderStub};
use crate::support::{
    Launched, Run, TestCa, TestDaemon, TlsFront, agentteam, bin, database_url, spawn_server_with,
};

/// The credential the operator installs: a marker that must never leave the server (except to
/// the provider).
const MARKER: &str = "ghp_MARKERmarker0123456789credentialZZ";

/// A server process with provider settings, a daemon using it, and the operator's CLI.
struct Host {
    _server: tokio::process::Child,
    server_url: String,
    token_file: PathBuf,
    server_log: PathBuf,
    database: String,
    daemon: TestDaemon,
    workspace_id: String,
    dir: tempfile::TempDir,
}

impl Host {
    async fn start(extra: &[&str]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let database = database_url(dir.path()).await;
        let token_file = dir.path().join("operator.token");
        let server_log = dir.path().join("server.log");
        let (server, server_url, _) =
            spawn_server_with(&database, &token_file, Some(&server_log), extra).await;
        let daemon = TestDaemon::start(&[
            "--server-url",
            &server_url,
            "--operator-token-file",
            token_file.to_str().unwrap(),
        ])
        .await;
        let identity: Value =
            serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
                .unwrap();
        Host {
            _server: server,
            server_url,
            token_file,
            server_log,
            database,
            daemon,
            workspace_id: identity["workspaceId"].as_str().unwrap().to_string(),
            dir,
        }
    }

    /// `agentteam admin ARGS` against this server.
    fn admin(&self, args: &[&str]) -> Run {
        let mut all = vec!["admin", "--json"];
        all.extend_from_slice(args);
        all.extend_from_slice(&[
            "--server-url",
            &self.server_url,
            "--operator-token-file",
            self.token_file.to_str().unwrap(),
        ]);
        agentteam(&all)
    }

    #[track_caller]
    fn admin_ok(&self, args: &[&str]) -> Value {
        let run = self.admin(args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str(&run.stdout).unwrap()
    }

    /// Installs `extension`'s app with the stub as provider and the marker credential.
    fn install(&self, extension: &str, base_url: &str) {
        let credential = self.dir.path().join(format!("{extension}.credential"));
        std::fs::write(&credential, MARKER).unwrap();
        std::fs::set_permissions(
            &credential,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let installed = self.admin_ok(&[
            "app",
            "install",
            "--workspace",
            &self.workspace_id,
            "--extension",
            extension,
            "--base-url",
            base_url,
            "--credential-file",
            credential.to_str().unwrap(),
        ]);
        assert_eq!(installed["status"], "installed");
        assert!(!installed.to_string().contains(MARKER));
    }

    fn allow(&self, extension: &str, agent: &str) {
        self.admin_ok(&[
            "app",
            "allow",
            "--workspace",
            &self.workspace_id,
            "--extension",
            extension,
            "--agent",
            agent,
        ]);
    }

    /// `agentteam extensions --reload --json` on the daemon.
    async fn reload(&self) -> Value {
        let output = self
            .daemon
            .cli(&["extensions", "--reload", "--json"])
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// A runtime of `agent` that stays up; the test acts as it.
    async fn runtime(&self, agent: &str) -> Runtime {
        let mut launched = self.daemon.launch(
            agent,
            &[],
            r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 300"#,
        );
        let base = launched.line().await;
        let token_file = launched.line().await;
        Runtime {
            _launched: launched,
            base,
            token_file,
        }
    }
}

struct Runtime {
    _launched: Launched,
    base: String,
    token_file: String,
}

impl Runtime {
    /// `agentteam ARGS` with this runtime's variables: exit code, stdout, stderr.
    async fn agentteam(&self, args: &[&str]) -> (i32, String, String) {
        let output = tokio::process::Command::new(bin())
            .args(args)
            .env("AGENTTEAM_EXEC_BASE_URL", &self.base)
            .env("AGENTTEAM_EXEC_TOKEN_FILE", &self.token_file)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        (
            output.status.code().unwrap(),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    }

    /// `agentteam exec DOMAIN ACTION 'INPUT'`: exit code and the printed envelope.
    async fn exec(&self, domain: &str, action: &str, input: Value) -> (i32, Value) {
        let (code, stdout, stderr) = self
            .agentteam(&["exec", domain, action, &input.to_string()])
            .await;
        let envelope = serde_json::from_str(&stdout)
            .unwrap_or_else(|_| panic!("not an envelope: {stdout}\n{stderr}"));
        (code, envelope)
    }

    async fn ok(&self, domain: &str, action: &str, input: Value) -> Value {
        let (code, envelope) = self.exec(domain, action, input).await;
        assert_eq!(code, 0, "{envelope}");
        envelope["data"].clone()
    }

    async fn refused(&self, domain: &str, action: &str, input: Value, expected: &str) -> Value {
        let (code, envelope) = self.exec(domain, action, input).await;
        assert_eq!(
            (code, envelope["error"]["code"].as_str()),
            (1, Some(expected)),
            "{envelope}"
        );
        envelope["error"].clone()
    }
}

/// A host with a stub, both apps installed for one agent, the definitions reloaded, and a runtime.
async fn ready(extra: &[&str]) -> (Host, ProviderStub, Runtime, String) {
    let stub = ProviderStub::start(MARKER).await;
    let host = Host::start(extra).await;
    let agent = host.daemon.add_agent("watcher").await;
    host.install("github", &stub.url);
    host.install("gitea", &stub.url);
    host.allow("github", &agent);
    host.allow("gitea", &agent);
    let report = host.reload().await;
    let pinned: Vec<&str> = report["pinned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pinned, ["gitea", "github"]);
    let runtime = host.runtime("watcher").await;
    (host, stub, runtime, agent)
}

#[tokio::test]
async fn github_and_gitea_watches_work_end_to_end_from_a_runtime() {
    let (host, stub, runtime, _) = ready(&["--provider-refresh-secs", "0"]).await;
    stub.set_pull(
        "octo-org/release-tools",
        42,
        "Release 1.4",
        "open",
        false,
        "0a1b2c3d4e5f",
    );
    stub.set_pull(
        "infra/deploy",
        7,
        "Pin images",
        "open",
        false,
        "abcdef1234567",
    );

    // Help and schemas from inside the runtime, for both; root help lists both domains beside
    // the built-in ones.
    let (code, root, _) = runtime.agentteam(&["exec", "--help"]).await;
    assert_eq!(code, 0);
    let column = |name: &str| {
        let line = root
            .lines()
            .find(|line| line.starts_with(&format!("  {name} ")))
            .unwrap_or_else(|| panic!("`{name}` is not listed:\n{root}"));
        line.len() - line[2 + name.len()..].trim_start().len()
    };
    assert_eq!(column("github"), column("task"), "{root}");
    assert_eq!(column("gitea"), column("task"), "{root}");
    for extension in ["github", "gitea"] {
        let (code, help, _) = runtime.agentteam(&["exec", extension, "--help"]).await;
        assert_eq!(code, 0);
        assert!(help.contains("watch") && help.contains("unwatch"), "{help}");
        let (code, help, _) = runtime
            .agentteam(&["exec", extension, "watch", "--help"])
            .await;
        assert_eq!(code, 0, "{help}");
        assert!(
            help.contains("repository  required")
                && help.contains("Risk: write; over-budget results: mutation"),
            "{help}"
        );
        assert_eq!(
            help.matches(&format!("agentteam exec {extension} watch '"))
                .count(),
            1,
            "{help}"
        );
        let (code, schema, _) = runtime
            .agentteam(&["exec", extension, "watch", "--input-schema"])
            .await;
        assert_eq!(code, 0);
        let schema: Value = serde_json::from_str(&schema).unwrap();
        assert_eq!(schema["required"], json!(["repository", "number"]));
        let (code, _, _) = runtime
            .agentteam(&["exec", extension, "get", "--output-schema"])
            .await;
        assert_eq!(code, 0);
    }
    // The same input checks as a built-in, before any request: exit 1 with the typed error.
    let error = runtime
        .refused(
            "github",
            "watch",
            json!({"repository": "not a repo", "number": 1}),
            "validation_failed",
        )
        .await;
    assert_eq!(error["details"][0]["path"], "/repository");

    let watched = runtime.ok("github", "watch", json!({"repository": "octo-org/release-tools", "number": 42, "requestId": "req-watch-000001"})).await;
    let watch = &watched["watch"];
    assert_eq!(
        (
            watch["title"].as_str(),
            watch["state"].as_str(),
            watch["headSha"].as_str()
        ),
        (Some("Release 1.4"), Some("open"), Some("0a1b2c3d4e5f"))
    );
    let watch_id = watch["id"].as_str().unwrap().to_string();
    // The same request id replays; the same pull request again is the same watch.
    let replay = runtime.ok("github", "watch", json!({"repository": "octo-org/release-tools", "number": 42, "requestId": "req-watch-000001"})).await;
    assert_eq!(replay, watched);
    let listed = runtime.ok("github", "list", json!({})).await;
    assert_eq!(listed["watches"].as_array().unwrap().len(), 1);
    assert_eq!(listed["watches"][0]["id"], watch_id.as_str());

    // The provider moves on: `get` reads it again.
    stub.set_pull(
        "octo-org/release-tools",
        42,
        "Release 1.4",
        "closed",
        true,
        "ffff0000aaaa",
    );
    let got = runtime
        .ok("github", "get", json!({"watchId": watch_id}))
        .await;
    assert_eq!(
        (
            got["watch"]["state"].as_str(),
            got["watch"]["headSha"].as_str(),
            got["watch"]["revision"].as_u64()
        ),
        (Some("merged"), Some("ffff0000aaaa"), Some(2))
    );
    let listed = runtime.ok("github", "list", json!({})).await;
    assert_eq!(
        listed["watches"][0]["state"], "merged",
        "the list shows the refreshed state"
    );

    // Gitea, through its own API path and authorization scheme.
    let gitea = runtime
        .ok(
            "gitea",
            "watch",
            json!({"repository": "infra/deploy", "number": 7}),
        )
        .await;
    assert_eq!(gitea["watch"]["title"], "Pin images");
    let gitea_id = gitea["watch"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        runtime.ok("gitea", "list", json!({})).await["watches"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "each extension lists its own watches"
    );
    let removed = runtime
        .ok(
            "gitea",
            "unwatch",
            json!({"watchId": gitea_id, "requestId": "req-unwatch-00001"}),
        )
        .await;
    assert_eq!(removed["watch"]["id"], gitea_id.as_str());
    assert_eq!(
        runtime.ok("gitea", "list", json!({})).await["watches"],
        json!([])
    );
    runtime
        .refused("gitea", "get", json!({"watchId": gitea_id}), "not_found")
        .await;
    let authorizations = stub.authorizations();
    assert!(
        authorizations.contains(&format!("Bearer {MARKER}"))
            && authorizations.contains(&format!("token {MARKER}"))
    );

    // The runtime's catalog, `agentteam catalog` and the prompt show them like built-ins.
    let catalog = host
        .daemon
        .client
        .get(format!("{}/catalog", runtime.base))
        .bearer_auth(std::fs::read_to_string(&runtime.token_file).unwrap())
        .send()
        .await
        .unwrap();
    let catalog: Value = catalog.json().await.unwrap();
    let names: Vec<&str> = catalog["data"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gitea", "github"]);
    assert!(
        catalog["data"]["extensions"][1]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let (_, table, _) = runtime.agentteam(&["catalog"]).await;
    assert!(
        table.lines().any(|l| l
            .split_whitespace()
            .take(4)
            .eq(["github", "watch", "write", "mutation"])),
        "{table}"
    );
    let (_, as_json, _) = runtime.agentteam(&["catalog", "--json"]).await;
    let as_json: Value = serde_json::from_str(&as_json).unwrap();
    assert!(
        as_json["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["domain"] == "gitea" && a["action"] == "unwatch")
    );
    let (_, prompt, _) = runtime.agentteam(&["prompt"]).await;
    assert!(
        prompt.contains("- `github`: GitHub pull request watches"),
        "{prompt}"
    );
    // Outside a runtime, no extension is known.
    let outside = agentteam(&["exec", "github", "--help"]);
    assert_eq!(outside.code, 2);
    assert!(
        outside.stderr.contains("unknown domain"),
        "{}",
        outside.stderr
    );
}

#[tokio::test]
async fn a_running_runtime_keeps_its_pinned_definition_until_it_restarts() {
    let (host, stub, before, _) = ready(&[]).await;
    stub.set_pull("octo-org/release-tools", 1, "One", "open", false, "1111111");
    before.ok("github", "list", json!({})).await;

    // The operator publishes version 2 of `github`.
    let mut definition: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::repo_root().join("schema/extensions/github.json"))
            .unwrap(),
    )
    .unwrap();
    definition["summary"] = json!("GitHub pull request watches, version two.");
    let file = host.dir.path().join("github-v2.json");
    std::fs::write(&file, serde_json::to_string_pretty(&definition).unwrap()).unwrap();
    let published = host.admin_ok(&["extension", "publish", "--file", file.to_str().unwrap()]);
    assert_eq!(published["version"], 2);
    let listed = host.admin_ok(&["extension", "list"]);
    assert!(
        listed["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "github" && e["digest"] == published["digest"])
    );

    // The running runtime's next call is refused with the restart error; its catalog is as it was.
    let error = before
        .refused("github", "list", json!({}), "extension_stale")
        .await;
    assert!(
        error["next"]
            .as_str()
            .unwrap()
            .contains("restart the runtime"),
        "{error}"
    );
    let (_, help, _) = before.agentteam(&["exec", "github", "--help"]).await;
    assert!(
        help.starts_with("GitHub pull request watches: watch"),
        "{help}"
    );
    // Its other extension is untouched.
    before.ok("gitea", "list", json!({})).await;

    // The stale answer made the daemon pin version 2 (no operator reload): a new launch sees it
    // and works.
    let after = host.runtime("watcher").await;
    let (_, help, _) = after.agentteam(&["exec", "github", "--help"]).await;
    assert!(
        help.starts_with("GitHub pull request watches, version two."),
        "{help}"
    );
    after
        .ok(
            "github",
            "watch",
            json!({"repository": "octo-org/release-tools", "number": 1}),
        )
        .await;
    before
        .refused(
            "github",
            "watch",
            json!({"repository": "octo-org/release-tools", "number": 1}),
            "extension_stale",
        )
        .await;

    // Version 3 promises a field the host's answer does not have: the runtime that pinned it
    // gets a classified failure (the server's 500, with its incident logged), never an answer its
    // schema does not describe.
    definition["summary"] = json!("GitHub pull request watches, version three.");
    let list = definition["actions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|a| a["action"] == "list")
        .unwrap();
    list["output"]["required"]
        .as_array_mut()
        .unwrap()
        .push(json!("generation"));
    list["output"]["properties"]["generation"] = json!({"type": "integer"});
    let file = host.dir.path().join("github-v3.json");
    std::fs::write(&file, serde_json::to_string_pretty(&definition).unwrap()).unwrap();
    let published = host.admin_ok(&["extension", "publish", "--file", file.to_str().unwrap()]);
    assert_eq!(published["version"], 3);
    after
        .refused("github", "list", json!({}), "extension_stale")
        .await;
    let third = host.runtime("watcher").await;
    let error = third
        .refused("github", "list", json!({}), "upstream_failed")
        .await;
    let incident = error["incidentId"].as_str().unwrap();
    let daemon_log = host.daemon.log();
    let server_incident = daemon_log
        .lines()
        .find(|line| line.contains(incident) && line.contains("server_incident_id="))
        .and_then(|line| line.split("server_incident_id=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no server incident joined to {incident}: {daemon_log}"))
        .to_string();
    let server_log = std::fs::read_to_string(&host.server_log).unwrap();
    assert!(
        server_log
            .lines()
            .any(|line| line.contains(&server_incident)
                && line.contains("does not match the pinned output schema")
                && line.contains("version=3")),
        "{server_log}"
    );
}

#[tokio::test]
async fn a_definition_whose_digest_does_not_match_is_left_out_and_reported() {
    let (host, _stub, before, _) = ready(&[]).await;
    // The record is damaged: its content no longer hashes to its recorded digest.
    let tampered = {
        let mut definition: Value = serde_json::from_str(
            &std::fs::read_to_string(
                crate::support::repo_root().join("schema/extensions/gitea.json"),
            )
            .unwrap(),
        )
        .unwrap();
        definition["summary"] = json!("Gitea pull request watches, quietly changed.");
        definition.to_string()
    };
    tamper(&host.database, &tampered).await;

    let report = host.reload().await;
    let pinned: Vec<&str> = report["pinned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pinned, ["github"]);
    let rejected = &report["rejected"][0];
    assert_eq!(rejected["name"], "gitea");
    assert!(
        rejected["reason"]
            .as_str()
            .unwrap()
            .contains("is not the digest of its content"),
        "{rejected}"
    );
    // Reported by `agentteam status` and in the daemon's log.
    let status = host.daemon.cli(&["status"]).output().await.unwrap();
    let status = String::from_utf8(status.stdout).unwrap();
    assert!(
        status.contains("not pinned gitea version 1: its recorded digest"),
        "{status}"
    );
    let log = std::fs::read_to_string(&host.daemon.log_file).unwrap();
    assert!(
        log.contains("an extension definition was not pinned") && log.contains("gitea"),
        "{log}"
    );

    // A new runtime's catalog does not have it; the earlier runtime keeps what it was shown, and
    // the server refuses the damaged definition rather than serving it (a server-side failure).
    let after = host.runtime("watcher").await;
    let (code, _, stderr) = after.agentteam(&["exec", "gitea", "list", "{}"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("unknown domain: `gitea`"), "{stderr}");
    let (_, table, _) = after.agentteam(&["catalog"]).await;
    assert!(!table.contains("gitea"), "{table}");
    before
        .refused("gitea", "list", json!({}), "upstream_failed")
        .await;
}

/// Replaces the recorded content of `gitea`'s current version, leaving its digest.
async fn tamper(database: &str, definition: &str) {
    use sqlx::Connection;
    let statement = "UPDATE extension_versions SET definition = $1 WHERE name = 'gitea'";
    if database.starts_with("sqlite:") {
        let mut db = sqlx::SqliteConnection::connect(database).await.unwrap();
        sqlx::query(statement)
            .bind(definition)
            .execute(&mut db)
            .await
            .unwrap();
    } else {
        let mut db = sqlx::PgConnection::connect(database).await.unwrap();
        sqlx::query(statement)
            .bind(definition)
            .execute(&mut db)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn authorization_failures_and_provider_failures_are_distinct_classes() {
    let (host, stub, runtime, agent) = ready(&[
        "--provider-timeout-ms",
        "500",
        "--provider-refresh-secs",
        "0",
    ])
    .await;
    stub.set_pull("o/r", 1, "t", "open", false, "1234567");
    let watch = |number: u64| json!({"repository": "o/r", "number": number});

    // Provider API failures.
    runtime
        .refused("github", "watch", watch(404), "not_found")
        .await;
    stub.set_mode(Mode::Status(500));
    let error = runtime
        .refused("github", "watch", watch(1), "provider_error")
        .await;
    assert!(
        error["message"].as_str().unwrap().contains("HTTP 500"),
        "{error}"
    );
    stub.set_mode(Mode::Malformed);
    let error = runtime
        .refused("github", "watch", watch(1), "provider_error")
        .await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("not a pull request"),
        "{error}"
    );
    stub.set_mode(Mode::Slow(Duration::from_secs(3)));
    runtime
        .refused("github", "watch", watch(1), "provider_timeout")
        .await;

    // Authorization failures: the provider refuses the credential, the agent is not allowed, the
    // app is not installed, the credential was revoked.
    for status in [401, 403] {
        stub.set_mode(Mode::Status(status));
        let error = runtime
            .refused("github", "watch", watch(1), "app_unauthorized")
            .await;
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains(&format!("HTTP {status}")),
            "{error}"
        );
    }
    stub.set_mode(Mode::Normal);
    runtime.ok("github", "watch", watch(1)).await;
    let other = host.daemon.add_agent("stranger").await;
    let stranger = host.runtime("stranger").await;
    let error = stranger
        .refused("github", "list", json!({}), "app_unauthorized")
        .await;
    assert!(
        error["message"].as_str().unwrap().contains("not allowed"),
        "{error}"
    );
    host.admin_ok(&[
        "app",
        "revoke",
        "--workspace",
        &host.workspace_id,
        "--extension",
        "gitea",
    ]);
    let error = runtime
        .refused("gitea", "list", json!({}), "app_unauthorized")
        .await;
    assert!(
        error["message"].as_str().unwrap().contains("revoked"),
        "{error}"
    );
    // An app never installed in the workspace: another workspace's agent has none.
    let (status, body) = unauthorized_elsewhere(&host).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("app_unauthorized")),
        "{body}"
    );
    let _ = (agent, other);
    // Nothing leaked the credential on the way.
    assert!(
        !std::fs::read_to_string(&host.server_log)
            .unwrap()
            .contains(MARKER)
    );
}

/// A call to `github list` by an agent of a fresh workspace where the app is not installed,
/// straight to the server's extension route (the daemon has no runtime there).
async fn unauthorized_elsewhere(host: &Host) -> (u16, Value) {
    let workspace = host.admin_ok(&["workspace", "--name", "elsewhere"]);
    let ws = workspace["workspaceId"].as_str().unwrap().to_string();
    let human = host.admin_ok(&[
        "human",
        "--workspace",
        &ws,
        "--handle",
        "eve",
        "--display-name",
        "Eve",
    ]);
    let human = human["humanId"].as_str().unwrap().to_string();
    let agent = host.admin_ok(&[
        "agent",
        "--workspace",
        &ws,
        "--owner",
        &human,
        "--handle",
        "eva",
        "--display-name",
        "Eva",
    ]);
    let agent = agent["agentId"].as_str().unwrap().to_string();
    let credential_file = host.dir.path().join("eve.credential");
    host.admin_ok(&[
        "device",
        "--workspace",
        &ws,
        "--human",
        &human,
        "--credential-file",
        credential_file.to_str().unwrap(),
    ]);
    let credential = std::fs::read_to_string(&credential_file).unwrap();
    let listed = host.admin_ok(&["extension", "list"]);
    let github = listed["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "github")
        .unwrap()
        .clone();
    let response = crate::support::http_client()
        .post(format!(
            "{}/runtime/servers/{ws}/agents/{agent}/ext/github/list",
            host.server_url
        ))
        .bearer_auth(credential.trim())
        .header(
            "agentteam-extension-digest",
            github["digest"].as_str().unwrap(),
        )
        .header(
            "agentteam-extension-catalog-version",
            github["catalogVersion"].to_string(),
        )
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// `--provider-proxy socks5h://…`: the server reaches a provider whose name only the proxy can
/// resolve, through a real SOCKS5 server, and nothing else goes through it.
#[tokio::test]
async fn a_provider_is_reached_through_a_socks5h_proxy() {
    let Some(dante) = crate::support::Dante::start(&[("provider.test", "127.0.0.1")]).await else {
        return;
    };
    let ca = TestCa::new();
    let stub = ProviderStub::start(MARKER).await;
    let front = TlsFront::start_named(
        &ca,
        &stub.url,
        "provider.test",
        "127.0.0.1".parse().unwrap(),
    )
    .await;
    stub.set_pull("o/r", 7, "Through SOCKS", "open", false, "7777777");
    let proxy = dante.url(true);
    let host = Host::start(&[
        "--provider-ca-file",
        ca.pem_file.to_str().unwrap(),
        "--provider-proxy",
        &proxy,
    ])
    .await;
    let agent = host.daemon.add_agent("watcher").await;
    host.install("github", &front.url);
    host.allow("github", &agent);
    host.reload().await;
    let runtime = host.runtime("watcher").await;
    let watched = runtime
        .ok("github", "watch", json!({"repository": "o/r", "number": 7}))
        .await;
    assert_eq!(watched["watch"]["title"], "Through SOCKS");
    let through = dante.destinations();
    assert!(
        !through.is_empty(),
        "the provider was not reached through the proxy"
    );
    assert!(
        through
            .iter()
            .all(|d| *d == format!("127.0.0.1.{}", front.port)),
        "{through:?}"
    );
}

#[tokio::test]
async fn a_provider_over_tls_is_reached_through_the_operators_ca() {
    let ca = TestCa::new();
    let stub = ProviderStub::start(MARKER).await;
    let front = TlsFront::start(&ca, &stub.url).await;
    stub.set_pull("o/r", 5, "Over TLS", "open", false, "5555555");
    let host = Host::start(&["--provider-ca-file", ca.pem_file.to_str().unwrap()]).await;
    let agent = host.daemon.add_agent("watcher").await;
    host.install("github", &front.url);
    host.allow("github", &agent);
    host.reload().await;
    let runtime = host.runtime("watcher").await;
    let watched = runtime
        .ok("github", "watch", json!({"repository": "o/r", "number": 5}))
        .await;
    assert_eq!(watched["watch"]["title"], "Over TLS");

    // A server that does not trust the CA refuses the provider, as a provider failure.
    let untrusting = Host::start(&[]).await;
    let agent = untrusting.daemon.add_agent("watcher").await;
    untrusting.install("github", &front.url);
    untrusting.allow("github", &agent);
    untrusting.reload().await;
    let runtime = untrusting.runtime("watcher").await;
    let error = runtime
        .refused(
            "github",
            "watch",
            json!({"repository": "o/r", "number": 5}),
            "provider_error",
        )
        .await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("TLS certificate is not trusted"),
        "{error}"
    );
    // Plain http to a host that is not loopback is refused at install.
    let credential = untrusting.dir.path().join("x.credential");
    std::fs::write(&credential, "secret-token").unwrap();
    std::fs::set_permissions(
        &credential,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let run = untrusting.admin(&[
        "app",
        "install",
        "--workspace",
        &untrusting.workspace_id,
        "--extension",
        "gitea",
        "--base-url",
        "http://gitea.example.com",
        "--credential-file",
        credential.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("plain http"), "{}", run.stderr);
}

#[tokio::test]
async fn publishing_keeps_the_definition_rules() {
    let host = Host::start(&[]).await;
    let seed: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::repo_root().join("schema/extensions/github.json"))
            .unwrap(),
    )
    .unwrap();
    let publish = |definition: &Value, name: &str| {
        let file = host.dir.path().join(format!("{name}.json"));
        std::fs::write(&file, definition.to_string()).unwrap();
        host.admin(&["extension", "publish", "--file", file.to_str().unwrap()])
    };
    let refused = |definition: Value, name: &str, expected: &str| {
        let run = publish(&definition, name);
        assert_eq!(run.code, 2, "{name}: {}", run.stdout);
        assert!(run.stderr.contains(expected), "{name}: {}", run.stderr);
    };
    let named = |name: &str| {
        let mut d = seed.clone();
        d["name"] = json!(name);
        d
    };
    refused(named("task"), "domain", "is a built-in Exec domain");
    refused(
        named("message"),
        "tool",
        "is the family of MCP tool `message_send`",
    );
    refused(named("Bad_Name"), "pattern", "must match");
    let mut read_with_receipt = seed.clone();
    read_with_receipt["actions"][1]["resultPolicy"] = json!("mutation");
    refused(
        read_with_receipt,
        "policy",
        "`github list` is a `read` action with a `mutation` result policy",
    );
    let mut unknown_action = seed.clone();
    unknown_action["actions"][0]["action"] = json!("merge");
    refused(unknown_action, "host", "the extension host implements");
    let mut lint = seed.clone();
    lint["actions"][0]["input"]["allOf"] = json!([]);
    refused(lint, "lint", "allOf");
    // The seed's recorded digest is the digest of its canonical JSON, however it is formatted.
    let listed = host.admin_ok(&["extension", "list"]);
    let github = listed["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "github")
        .unwrap();
    assert_eq!(
        github["digest"],
        agentteam::contract::extension::digest(&seed).as_str()
    );
    assert_eq!(github["version"], 1);
}

#[tokio::test]
async fn the_installation_credential_never_reaches_anything_shown() {
    let (host, stub, runtime, _) = ready(&["--provider-refresh-secs", "0"]).await;
    stub.set_pull("o/r", 9, "Marker", "open", false, "9999999");
    let mut seen = String::new();
    for (domain, action, input) in [
        (
            "github",
            "watch",
            json!({"repository": "o/r", "number": 9, "requestId": "req-marker-00001"}),
        ),
        ("github", "list", json!({})),
        (
            "github",
            "watch",
            json!({"repository": "o/r", "number": 404}),
        ),
        ("gitea", "list", json!({})),
    ] {
        let (_, stdout, stderr) = runtime
            .agentteam(&["exec", domain, action, &input.to_string()])
            .await;
        seen.push_str(&stdout);
        seen.push_str(&stderr);
    }
    stub.set_mode(Mode::Status(401));
    let (_, stdout, stderr) = runtime
        .agentteam(&[
            "exec",
            "github",
            "get",
            &json!({"watchId": "prw_00000000000000000000000000"}).to_string(),
        ])
        .await;
    seen.push_str(&stdout);
    seen.push_str(&stderr);
    for args in [
        vec!["catalog"],
        vec!["catalog", "--json"],
        vec!["prompt"],
        vec!["exec", "github", "--help"],
        vec!["exec", "github", "watch", "--input-schema"],
    ] {
        let (_, stdout, _) = runtime.agentteam(&args).await;
        seen.push_str(&stdout);
    }
    let token = std::fs::read_to_string(&runtime.token_file).unwrap();
    let catalog = host
        .daemon
        .client
        .get(format!("{}/catalog", runtime.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    seen.push_str(&catalog.text().await.unwrap());
    for args in [["status", "--json"], ["extensions", "--json"]] {
        let output = host.daemon.cli(&args).output().await.unwrap();
        seen.push_str(&String::from_utf8_lossy(&output.stdout));
    }
    seen.push_str(&host.admin(&["extension", "list"]).stdout);
    let catalog_file = Path::new(&runtime.token_file)
        .parent()
        .unwrap()
        .join("catalog.json");
    seen.push_str(&std::fs::read_to_string(catalog_file).unwrap());
    seen.push_str(&std::fs::read_to_string(&host.daemon.log_file).unwrap());
    seen.push_str(&std::fs::read_to_string(&host.server_log).unwrap());
    assert!(seen.contains("Marker"), "the calls did run");
    assert!(!seen.contains(MARKER), "the installation credential leaked");
    assert!(
        !seen.contains("MARKERmarker"),
        "part of the installation credential leaked"
    );
    // It did reach the provider, and only there.
    assert!(stub.authorizations().iter().any(|a| a.ends_with(MARKER)));
}

#[tokio::test]
async fn watches_are_read_again_only_after_the_interval_on_get_and_in_the_scheduler_pass() {
    let stub = ProviderStub::start(MARKER).await;
    stub.set_pull("o/r", 3, "Three", "open", false, "3333333");
    let server = crate::support::TestServer::start().await;
    let w = server.workspace("acme").await;
    server
        .admin(
            &format!("/admin/workspaces/{}/apps", w.workspace_id),
            json!({"extension": "github", "baseUrl": stub.url, "credential": MARKER}),
        )
        .await;
    server
        .admin(
            &format!("/admin/workspaces/{}/apps/github/grants", w.workspace_id),
            json!({"agentId": w.agent_id}),
        )
        .await;
    let listed = server.admin("/admin/extensions/list", json!({})).await;
    let github = listed["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "github")
        .unwrap()
        .clone();
    let call = |action: &'static str, input: Value| {
        let (server, w, github) = (&server, &w, github.clone());
        async move {
            let response = server
                .client
                .post(format!(
                    "{}/runtime/servers/{}/agents/{}/ext/github/{action}",
                    server.base_url, w.workspace_id, w.agent_id
                ))
                .bearer_auth(&w.device_credential)
                .header(
                    "agentteam-extension-digest",
                    github["digest"].as_str().unwrap(),
                )
                .header(
                    "agentteam-extension-catalog-version",
                    github["catalogVersion"].to_string(),
                )
                .json(&input)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()["data"].clone()
        }
    };
    let reads = || stub.authorizations().len();
    let watched = call("watch", json!({"repository": "o/r", "number": 3})).await;
    let id = watched["watch"]["id"].as_str().unwrap().to_string();
    assert_eq!(reads(), 1);
    call("get", json!({"watchId": id})).await;
    assert_eq!(reads(), 1, "a fresh watch is not read again");
    server.state.clock().advance(Duration::from_secs(61));
    stub.set_pull("o/r", 3, "Three", "closed", false, "3333333");
    let got = call("get", json!({"watchId": id})).await;
    assert_eq!(
        (reads(), got["watch"]["state"].as_str()),
        (2, Some("closed"))
    );

    // The scheduler pass reads stale watches in the background, each once.
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .watches_refreshed,
        0
    );
    server.state.clock().advance(Duration::from_secs(61));
    stub.set_pull("o/r", 3, "Three", "closed", true, "3333333");
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .watches_refreshed,
        1
    );
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .watches_refreshed,
        0
    );
    assert_eq!(reads(), 3);
    let listed = call("list", json!({})).await;
    assert_eq!(listed["watches"][0]["state"], "merged");
}
