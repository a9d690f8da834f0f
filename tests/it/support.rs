//! Shared test plumbing: paths, running the binary, copying `schema/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `agentteam` binary cargo built for this test run.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentteam")
}

/// What a finished command printed, and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Run {
        Run {
            code: output
                .status
                .code()
                .expect("the process exited, not killed"),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }
}

/// Runs `agentteam ARGS` with no Exec variables in its environment and no stdin.
pub fn agentteam(args: &[&str]) -> Run {
    Command::new(bin())
        .args(args)
        .env_remove("AGENTTEAM_EXEC_BASE_URL")
        .env_remove("AGENTTEAM_EXEC_TOKEN_FILE")
        .stdin(Stdio::null())
        .output()
        .expect("agentteam runs")
        .into()
}

/// Copies the directory tree `from` into `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A fresh copy of `schema/` in a temp dir, returned with the dir guard.
pub fn schema_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema");
    copy_tree(&repo_root().join("schema"), &schema);
    (dir, schema)
}

/// A real server on `127.0.0.1:0` over a real SQLite file in a temp dir, served in-process by the
/// same `serve` the binary uses. Dropping it shuts the server down.
pub struct TestServer {
    pub base_url: String,
    pub operator_token: String,
    pub operator_token_file: PathBuf,
    pub state: agentteam::server::AppState,
    pub client: reqwest::Client,
    /// Holds the SQLite file and the operator token until the server is dropped.
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

/// One workspace with a human, two agents of that human, a device credential, a channel both
/// agents belong to with one thread, and a channel only the first agent belongs to.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub workspace_id: String,
    pub human_id: String,
    pub agent_id: String,
    pub other_agent_id: String,
    pub device_credential: String,
    pub channel_id: String,
    pub thread_id: String,
    pub private_channel_id: String,
    pub private_thread_id: String,
}

impl TestServer {
    pub async fn start() -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let config = agentteam::server::ServerConfig {
            database_url: format!("sqlite://{}", dir.path().join("server.db").display()),
            operator_token_file: dir.path().join("operator.token"),
        };
        let state = agentteam::server::AppState::open(&config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        assert_ne!(address.port(), 0);
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(agentteam::serve::serve(
            listener,
            agentteam::server::router(state.clone()),
            async move {
                let _ = stopped.await;
            },
        ));
        let operator_token = std::fs::read_to_string(&config.operator_token_file).unwrap();
        TestServer {
            base_url: format!("http://{address}"),
            operator_token,
            operator_token_file: config.operator_token_file.clone(),
            state,
            client: reqwest::Client::new(),
            _dir: dir,
            shutdown: Some(shutdown),
        }
    }

    /// `POST {path}` with `body` as the operator; panics unless it succeeds, returns `data`.
    pub async fn admin(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let (status, envelope) = self.post(path, Some(&self.operator_token), &body).await;
        assert_eq!(status, 200, "admin {path} failed: {envelope}");
        envelope["data"].clone()
    }

    /// `POST {path}` with an optional bearer and a JSON body; returns status and parsed body.
    pub async fn post(
        &self,
        path: &str,
        bearer: Option<&str>,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        self.post_raw(path, bearer, serde_json::to_vec(body).unwrap())
            .await
    }

    /// `POST {path}` with raw bytes as an `application/json` body.
    pub async fn post_raw(
        &self,
        path: &str,
        bearer: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, serde_json::Value) {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base_url))
            .header("content-type", "application/json")
            .body(body);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let parsed = serde_json::from_str(&text);
        (status, parsed.unwrap_or(serde_json::Value::String(text)))
    }

    /// Runs `domain action` for `agent_id` in `workspace` with the workspace's device credential.
    pub async fn action(
        &self,
        workspace: &Workspace,
        agent_id: &str,
        domain: &str,
        action: &str,
        input: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let path = format!(
            "/runtime/servers/{}/agents/{agent_id}/actions/{domain}/{action}",
            workspace.workspace_id
        );
        self.post(&path, Some(&workspace.device_credential), &input)
            .await
    }

    /// Sets up a [`Workspace`] through the operator API.
    pub async fn workspace(&self, name: &str) -> Workspace {
        let workspace_id = self
            .admin("/admin/workspaces", serde_json::json!({"name": name}))
            .await["workspaceId"]
            .as_str()
            .unwrap()
            .to_string();
        let base = format!("/admin/workspaces/{workspace_id}");
        let id = |value: serde_json::Value, key: &str| value[key].as_str().unwrap().to_string();
        let human_id = id(
            self.admin(
                &format!("{base}/humans"),
                serde_json::json!({"handle": "ada", "displayName": "Ada"}),
            )
            .await,
            "humanId",
        );
        let agent_id = id(self.admin(&format!("{base}/agents"), serde_json::json!({"ownerHumanId": human_id, "handle": "builder", "displayName": "Builder"})).await, "agentId");
        let other_agent_id = id(self.admin(&format!("{base}/agents"), serde_json::json!({"ownerHumanId": human_id, "handle": "reviewer", "displayName": "Reviewer"})).await, "agentId");
        let device_credential = id(
            self.admin(
                &format!("{base}/devices"),
                serde_json::json!({"humanId": human_id}),
            )
            .await,
            "credential",
        );
        let channel_id = id(self.admin(&format!("{base}/channels"), serde_json::json!({"name": "general", "members": [human_id, agent_id, other_agent_id]})).await, "channelId");
        let thread_id = id(
            self.admin(
                &format!("{base}/channels/{channel_id}/threads"),
                serde_json::json!({"title": "release"}),
            )
            .await,
            "threadId",
        );
        let private_channel_id = id(
            self.admin(
                &format!("{base}/channels"),
                serde_json::json!({"name": "builders", "members": [agent_id]}),
            )
            .await,
            "channelId",
        );
        let private_thread_id = id(
            self.admin(
                &format!("{base}/channels/{private_channel_id}/threads"),
                serde_json::json!({"title": "internal"}),
            )
            .await,
            "threadId",
        );
        Workspace {
            workspace_id,
            human_id,
            agent_id,
            other_agent_id,
            device_credential,
            channel_id,
            thread_id,
            private_channel_id,
            private_thread_id,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}
