//! Shared test plumbing: paths, running the binary, copying `schema/`, a real server
//! ([`TestServer`], in-process on port 0) and a real daemon process ([`TestDaemon`], whose log is
//! checked for secrets when it is dropped), runtimes launched through `agentteam run`
//! ([`Launched`]), and readiness polling.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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
        // A test's command never starts a daemon of its own (`daemon_lifecycle` tests that).
        .env("AGENTTEAM_NO_START", "1")
        .stdin(Stdio::null())
        .output()
        .expect("agentteam runs")
        .into()
}

/// A tool of the Python test venv `scripts/test` creates (`bin/python`, `bin/st`, …); panics
/// naming the way to get it when it is missing.
pub fn venv_tool(name: &str) -> PathBuf {
    let venv = std::env::var_os("AGENTTEAM_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/test-venv"));
    let tool = venv.join("bin").join(name);
    assert!(
        tool.exists(),
        "{} is missing: run the tests with `scripts/test`, which installs it",
        tool.display()
    );
    tool
}

/// An HTTP client as ours are built (no proxy from the environment, the TLS provider installed,
/// idle connections closed before the server's keep-alive ends).
pub fn http_client() -> reqwest::Client {
    agentteam::client::http::builder(None).build().unwrap()
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

/// The environment variable that puts the server tests on PostgreSQL (`scripts/test` sets it to
/// `postgres` for its second half).
pub const BACKEND_VAR: &str = "AGENTTEAM_TEST_BACKEND";
/// A PostgreSQL URL whose user may create databases (`scripts/test` starts a throwaway cluster and
/// sets it).
pub const PG_URL_VAR: &str = "AGENTTEAM_TEST_PG_URL";

/// Whether this run's server tests are on PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var(BACKEND_VAR).as_deref() == Ok("postgres")
}

/// The database of the server whose files live in `dir`: a SQLite file there, or (on
/// PostgreSQL) a fresh database of the test cluster. Remembered in `dir`, so a server restarted on
/// the same dir finds its data again.
pub async fn database_url(dir: &Path) -> String {
    let remembered = dir.join("database.url");
    if let Ok(url) = std::fs::read_to_string(&remembered) {
        return url;
    }
    let url = if on_postgres() {
        fresh_pg_database().await
    } else {
        format!("sqlite://{}", dir.join("server.db").display())
    };
    std::fs::write(&remembered, &url).unwrap();
    url
}

/// The test cluster's URL; a test that needs PostgreSQL fails here when there is none.
pub fn pg_url() -> String {
    std::env::var(PG_URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{PG_URL_VAR} is not set: run `scripts/test` (it starts a throwaway PostgreSQL cluster), \
             or point {PG_URL_VAR} at a database whose user may CREATE DATABASE"
        )
    })
}

/// A new, empty database in the test cluster (about 35 ms), as a URL.
pub async fn fresh_pg_database() -> String {
    use sqlx::Connection;
    let admin = pg_url();
    let mut connection = sqlx::PgConnection::connect(&admin)
        .await
        .expect("the test cluster accepts connections");
    let mut suffix = [0u8; 8];
    rand::Rng::fill(&mut rand::rng(), &mut suffix);
    let name = format!("t_{}", hex::encode(suffix));
    // A database name cannot be a bind parameter; this one is our own hex.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut connection)
        .await
        .unwrap();
    connection.close().await.unwrap();
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_path(&name);
    url.to_string()
}

/// A real server on `127.0.0.1:0` over a real database (a SQLite file in a temp dir, or a fresh
/// PostgreSQL database: [`database_url`]), served in-process by the same `serve` the binary uses.
/// Dropping it shuts the server down.
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
        let url = database_url(dir.path()).await;
        TestServer::serve(dir, url).await
    }

    /// A server over `database_url` (a replica, when others use the same database), with its
    /// operator token file in a temp dir of its own.
    pub async fn start_on(database_url: &str) -> TestServer {
        TestServer::serve(tempfile::tempdir().unwrap(), database_url.to_string()).await
    }

    async fn serve(dir: tempfile::TempDir, database_url: String) -> TestServer {
        let config = agentteam::server::ServerConfig {
            database_url,
            operator_token_file: dir.path().join("operator.token"),
            provider: agentteam::server::provider::ProviderConfig::default(),
            telemetry: None,
            delivery_ttl: std::time::Duration::from_secs(15 * 60),
            deliveries_per_minute: 60,
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
            client: http_client(),
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

/// A real `agentteam daemon` process with the embedded server, on `127.0.0.1:0`, with its own
/// state dir and its stderr (the structured log) captured in a file.
pub struct TestDaemon {
    pub base_url: String,
    pub state_dir: PathBuf,
    pub log_file: PathBuf,
    pub child: tokio::process::Child,
    pub client: reqwest::Client,
    /// The server the daemon uses (`daemon.json`'s `serverUrl`) and its operator token file.
    pub server_url: String,
    pub operator_token_file: PathBuf,
    /// The `agentteam server` process started for this daemon in the PostgreSQL pass.
    _server: Option<tokio::process::Child>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDaemon {
    /// A daemon in a fresh temp dir; `args` are extra `agentteam daemon` flags.
    pub async fn start(args: &[&str]) -> TestDaemon {
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = TestDaemon::start_in(dir.path(), args).await;
        daemon._dir = Some(dir);
        daemon
    }

    /// A daemon in a fresh temp dir with `env` added to its environment.
    pub async fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> TestDaemon {
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = TestDaemon::start_in_with_env(dir.path(), args, env).await;
        daemon._dir = Some(dir);
        daemon
    }

    /// A daemon whose state dir is `root/state` (reused across restarts) and whose log is a new
    /// file under `root`.
    pub async fn start_in(root: &Path, args: &[&str]) -> TestDaemon {
        TestDaemon::start_in_with_env(root, args, &[]).await
    }

    /// [`TestDaemon::start_in`] with `env` added to the daemon's environment.
    pub async fn start_in_with_env(root: &Path, args: &[&str], env: &[(&str, &str)]) -> TestDaemon {
        TestDaemon::start_at(&root.join("state"), root, args, env).await
    }

    /// A daemon whose state dir is `state_dir`, its log a new file under `root`.
    ///
    /// In the PostgreSQL pass ([`on_postgres`]) a daemon that names no `--server-url` does not run
    /// the embedded SQLite server: it gets `agentteam server` on a database of the test cluster
    /// (kept under `root/server`, so a restarted daemon finds its data again), and this asserts
    /// it, so no daemon test of that pass runs on SQLite unnoticed.
    pub async fn start_at(
        state_dir: &Path,
        root: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> TestDaemon {
        use tokio::io::AsyncBufReadExt;
        let state_dir = state_dir.to_path_buf();
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let flag = |args: &[String], flag: &str| {
            let at = args.iter().position(|a| a == flag)?;
            args.get(at + 1).cloned()
        };
        let mut server = None;
        if on_postgres() && flag(&args, "--server-url").is_none() {
            let dir = root.join("server");
            std::fs::create_dir_all(&dir).unwrap();
            let database = database_url(&dir).await;
            let token_file = dir.join("operator.token");
            let (child, url, _) =
                spawn_server_on(&database, &token_file, Some(&dir.join("server.log"))).await;
            args.extend([
                "--server-url".to_string(),
                url,
                "--operator-token-file".to_string(),
                token_file.display().to_string(),
            ]);
            server = Some(child);
        }
        let operator_token_file = flag(&args, "--operator-token-file")
            .map(PathBuf::from)
            .unwrap_or_else(|| state_dir.join("operator.token"));
        let log_file = root.join(format!(
            "daemon-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut child = tokio::process::Command::new(bin())
            .args(["daemon", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(&state_dir)
            .args(&args)
            .env("RUST_LOG", "agentteam=debug")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_file).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("agentteam daemon starts");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines.next_line().await.unwrap().unwrap_or_else(|| {
            panic!(
                "the daemon exited: {}",
                std::fs::read_to_string(&log_file).unwrap()
            )
        });
        let base_url = line
            .strip_prefix("listening on ")
            .expect("`listening on URL`")
            .to_string();
        let announcement: serde_json::Value =
            serde_json::from_slice(&std::fs::read(state_dir.join("daemon.json")).unwrap()).unwrap();
        if on_postgres() {
            assert_eq!(
                announcement["serverEmbedded"], false,
                "a daemon of the PostgreSQL pass runs the embedded SQLite server"
            );
        }
        TestDaemon {
            base_url,
            state_dir,
            log_file,
            child,
            client: http_client(),
            server_url: announcement["serverUrl"].as_str().unwrap().to_string(),
            operator_token_file,
            _server: server,
            _dir: None,
        }
    }

    /// `agentteam ARGS --state-dir <this daemon's>` with `env` added, as a tokio command.
    pub fn cli(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(bin());
        // `--state-dir` goes right after the subcommand, before any `--` and runtime argv.
        command
            .arg(args[0])
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(&args[1..])
            .stdin(Stdio::null())
            .kill_on_drop(true);
        // A command after this daemon stopped must not start another in its place (a runtime's
        // environment stays as the test gives it).
        if args[0] != "run" {
            command.env("AGENTTEAM_NO_START", "1");
        }
        command
    }

    /// Registers an agent; returns its id.
    pub async fn add_agent(&self, handle: &str) -> String {
        let output = self
            .cli(&["agent", "add", handle, "--json"])
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        value["agent"]["id"].as_str().unwrap().to_string()
    }

    /// Launches `agentteam run --agent AGENT -- sh -c SCRIPT` (extra `run` flags in `flags`),
    /// with its stdout lines readable.
    pub fn launch(&self, agent: &str, flags: &[&str], script: &str) -> Launched {
        let mut args = vec!["run", "--agent", agent];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        Launched::spawn(self.cli(&args))
    }

    /// `GET /api/admin/{path}` with the admin token; the success `data`.
    pub async fn admin_get(&self, path: &str) -> serde_json::Value {
        let token = std::fs::read_to_string(self.state_dir.join("admin.token")).unwrap();
        let response = self
            .client
            .get(format!("{}/api/admin/{path}", self.base_url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.json::<serde_json::Value>().await.unwrap()["data"].clone()
    }

    /// The daemon's OpenMetrics text (`GET /api/admin/metrics` with the admin token).
    pub async fn metrics(&self) -> String {
        let token = std::fs::read_to_string(self.state_dir.join("admin.token")).unwrap();
        let response = self
            .client
            .get(format!("{}/api/admin/metrics", self.base_url))
            .bearer_auth(token.trim())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    }

    /// `METHOD /api/admin/{path}` with the admin token and an optional JSON body: status and body.
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let token = std::fs::read_to_string(self.state_dir.join("admin.token")).unwrap();
        let mut request = self
            .client
            .request(method, format!("{}/api/admin/{path}", self.base_url))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap()
    }

    /// SIGTERM, then waits for a clean exit; returns the exit code.
    pub async fn stop(&mut self) -> i32 {
        let pid = self.child.id().expect("running") as i32;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        self.child.wait().await.unwrap().code().unwrap_or(-1)
    }

    /// `GET` the Exec catalog route of `(server, agent)` with `bearer`.
    pub async fn catalog(
        &self,
        server_id: &str,
        agent_id: &str,
        bearer: Option<&str>,
    ) -> (u16, bytes::Bytes) {
        let mut request = self.client.get(format!(
            "{}/api/internal/exec/servers/{server_id}/agents/{agent_id}/catalog",
            self.base_url
        ));
        if let Some(bearer) = bearer {
            request = request.header("Authorization", format!("Bearer {bearer}"));
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.bytes().await.unwrap())
    }

    /// The workspace id from the daemon's identity file.
    pub fn workspace_id(&self) -> String {
        let identity: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.state_dir.join("identity.json")).unwrap())
                .unwrap();
        identity["workspaceId"].as_str().unwrap().to_string()
    }
}

impl Drop for TestDaemon {
    /// Every daemon of the suite stops as it stops for its user (SIGTERM: every runtime it
    /// launched is stopped with it, so no test leaves a process behind), and is checked: its log
    /// holds nothing shaped like a secret.
    fn drop(&mut self) {
        terminate(&mut self.child);
        if std::thread::panicking() {
            return;
        }
        let log = std::fs::read_to_string(&self.log_file).unwrap_or_default();
        let found = secret_shapes(&log);
        assert!(
            found.is_empty(),
            "the daemon's log contains {} secret-shaped strings",
            found.len()
        );
    }
}

/// SIGTERM to `child`, then its exit awaited for at most the daemon's own shutdown bound (after
/// which `kill_on_drop` ends it).
fn terminate(child: &mut tokio::process::Child) {
    let Some(pid) = child.id() else {
        return;
    };
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else {
        return;
    };
    if rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_err() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    // A drop cannot await: the exit is polled, each look a non-blocking `waitpid`.
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A runtime started through `agentteam run`, whose printed lines the test reads.
pub struct Launched {
    /// The `agentteam run` process (its exit code is the runtime's).
    pub child: tokio::process::Child,
    pub lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Launched {
    /// Spawns an `agentteam run` command with its stdout readable by lines.
    pub fn spawn(mut command: tokio::process::Command) -> Launched {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap());
        Launched {
            child,
            lines: tokio::io::AsyncBufReadExt::lines(lines),
        }
    }

    /// The runtime's next stdout line (bounded wait). When the runtime ended instead, panics
    /// with what `agentteam run` said on stderr.
    pub async fn line(&mut self) -> String {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("the runtime printed in time")
            .unwrap();
        match line {
            Some(line) => line,
            None => {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.child.stderr.take() {
                    let _ = tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut stderr).await;
                }
                panic!("the runtime stopped printing; `agentteam run` said: {stderr}")
            }
        }
    }
}

/// A test's precondition is missing (a package, root, a name this machine resolves): under `CI`
/// the test fails here, saying what is missing, since CI must run every test; elsewhere one loud
/// line on stderr says what is skipped, and the caller skips it. Every skip in the tests goes
/// through here (`tidy::every_skip_fails_in_ci`).
#[track_caller]
pub fn missing_precondition(what: &str, skipped: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{what}: CI runs every test, and cannot run this one"
    );
    eprintln!("################ {what}: SKIPPING {skipped} ################");
}

/// Whether process `pid` still exists (a zombie counts as gone).
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the parenthesized command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Substrings of `text` shaped like a secret this project issues: runtime tokens
/// (`v1.<claims>.<43-char MAC>`), device credentials (`dev_<id>.<43-char secret>`), operator
/// tokens (`ato_<43>`) and admin tokens (`adm_<32 hex>`).
pub fn secret_shapes(text: &str) -> Vec<String> {
    let b64 = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let run =
        |s: &str, allowed: &dyn Fn(char) -> bool| s.chars().take_while(|c| allowed(*c)).count();
    let mut found = Vec::new();
    for (index, _) in text.match_indices("v1.") {
        let rest = &text[index + 3..];
        let claims = run(rest, &b64);
        if claims >= 16 && rest[claims..].starts_with('.') && run(&rest[claims + 1..], &b64) >= 43 {
            found.push(text[index..index + 3 + claims + 44].to_string());
        }
    }
    for (index, _) in text.match_indices("dev_") {
        let rest = &text[index + 4..];
        let id = run(rest, &|c| c.is_ascii_alphanumeric());
        if rest[id..].starts_with('.') && run(&rest[id + 1..], &b64) >= 43 {
            found.push(text[index..index + 4 + id + 44].to_string());
        }
    }
    for (prefix, length, allowed) in [
        ("ato_", 43, &b64 as &dyn Fn(char) -> bool),
        ("adm_", 32, &|c: char| c.is_ascii_hexdigit()),
    ] {
        for (index, _) in text.match_indices(prefix) {
            if run(&text[index + 4..], allowed) >= length {
                found.push(text[index..index + 4 + length].to_string());
            }
        }
    }
    found
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes (readiness, not a fixed sleep).
pub async fn wait_for(
    what: &str,
    timeout: std::time::Duration,
    mut condition: impl FnMut() -> bool,
) {
    let deadline = std::time::Instant::now() + timeout;
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// [`wait_for`] with a condition that is itself awaited (a request, say), every 50 ms.
pub async fn wait_until(
    what: &str,
    timeout: std::time::Duration,
    mut condition: impl AsyncFnMut() -> bool,
) {
    let deadline = std::time::Instant::now() + timeout;
    while !condition().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Starts `agentteam server` on port 0 over `dir`'s database ([`database_url`]) and waits for its
/// `listening on` line.
pub async fn spawn_server(dir: &Path) -> (tokio::process::Child, String, String) {
    let database = database_url(dir).await;
    spawn_server_on(&database, &dir.join("operator.token"), None).await
}

/// Starts `agentteam server` on port 0 over `database` with `token_file` (its log to `log`, or
/// nowhere) and waits for its `listening on` line.
pub async fn spawn_server_on(
    database: &str,
    token_file: &Path,
    log: Option<&Path>,
) -> (tokio::process::Child, String, String) {
    spawn_server_with(database, token_file, log, &[]).await
}

/// [`spawn_server_on`] with extra `agentteam server` arguments.
pub async fn spawn_server_with(
    database: &str,
    token_file: &Path,
    log: Option<&Path>,
    extra: &[&str],
) -> (tokio::process::Child, String, String) {
    spawn_server_at("127.0.0.1:0", database, token_file, log, extra).await
}

/// [`spawn_server_with`] listening on `listen` (a restarted server takes its old address back).
pub async fn spawn_server_at(
    listen: &str,
    database: &str,
    token_file: &Path,
    log: Option<&Path>,
    extra: &[&str],
) -> (tokio::process::Child, String, String) {
    spawn_server_in_env(listen, database, token_file, log, extra, &[]).await
}

/// [`spawn_server_at`] with `env` added to the server's environment (a fault point's variable).
pub async fn spawn_server_in_env(
    listen: &str,
    database: &str,
    token_file: &Path,
    log: Option<&Path>,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (tokio::process::Child, String, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(bin())
        .args(["server", "--listen", listen])
        .args(extra)
        .envs(env.iter().copied())
        .arg("--database")
        .arg(database)
        .arg("--operator-token-file")
        .arg(token_file)
        .stdout(Stdio::piped())
        .stderr(match log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        })
        .kill_on_drop(true)
        .spawn()
        .expect("agentteam server starts");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .next_line()
        .await
        .unwrap()
        .expect("the server prints its address");
    let base_url = line
        .strip_prefix("listening on ")
        .expect("`listening on URL`")
        .to_string();
    let token = std::fs::read_to_string(token_file).unwrap();
    (child, base_url, token)
}

/// A test certificate authority: its PEM file, and server certificates it issues.
pub struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    pub pem_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "agentteam test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let issuer =
            rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pem_file = dir.path().join("ca.pem");
        std::fs::write(&pem_file, issuer.pem()).unwrap();
        TestCa {
            issuer,
            pem_file,
            _dir: dir,
        }
    }

    /// A TLS server config with a certificate for `localhost`, `127.0.0.1` and `names`.
    pub fn server_config_for(&self, names: &[&str]) -> tokio_rustls::rustls::ServerConfig {
        use tokio_rustls::rustls;
        let key = rcgen::KeyPair::generate().unwrap();
        let mut subjects = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        subjects.extend(names.iter().map(|name| name.to_string()));
        let params = rcgen::CertificateParams::new(subjects).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap()
    }
}

/// A TLS terminator on `127.0.0.1:0` in front of a plain HTTP `backend` (what a load balancer
/// does for an AgentTeam Server), with a certificate from `ca`. Stops when dropped.
pub struct TlsFront {
    /// `https://localhost:PORT` (or the host it was started for).
    pub url: String,
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl TlsFront {
    pub async fn start(ca: &TestCa, backend: &str) -> TlsFront {
        TlsFront::start_named(ca, backend, "localhost", "127.0.0.1".parse().unwrap()).await
    }

    /// A front listening on `ip:0` whose certificate also names `host`, reached as
    /// `https://{host}:PORT`.
    pub async fn start_named(
        ca: &TestCa,
        backend: &str,
        host: &str,
        ip: std::net::IpAddr,
    ) -> TlsFront {
        let backend = backend
            .strip_prefix("http://")
            .expect("an http:// backend")
            .to_string();
        let acceptor =
            tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(ca.server_config_for(&[host])));
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (acceptor, backend) = (acceptor.clone(), backend.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake: nothing to relay.
                    let Ok(mut tls) = acceptor.accept(inbound).await else {
                        return;
                    };
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut outbound).await;
                });
            }
        });
        TlsFront {
            url: format!("https://{host}:{port}"),
            port,
            task,
        }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TCP relay on `127.0.0.1:0` to a plain HTTP `backend` that keeps every byte its clients
/// sent, so a test can read the requests one of our components made (headers included). Stops
/// when dropped.
pub struct Tap {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    sent: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Tap {
    pub async fn start(backend: &str) -> Tap {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let backend = backend
            .strip_prefix("http://")
            .expect("an http:// backend")
            .to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = sent.clone();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (backend, recorded) = (backend.clone(), recorded.clone());
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(&backend).await else {
                        return;
                    };
                    let (mut in_read, mut in_write) = inbound.into_split();
                    let (mut out_read, mut out_write) = outbound.into_split();
                    let upstream = async move {
                        let mut buffer = vec![0u8; 16 * 1024];
                        while let Ok(n) = in_read.read(&mut buffer).await {
                            if n == 0 {
                                break;
                            }
                            recorded.lock().unwrap().extend_from_slice(&buffer[..n]);
                            if out_write.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = out_write.shutdown().await;
                    };
                    let downstream = async move {
                        let _ = tokio::io::copy(&mut out_read, &mut in_write).await;
                        let _ = in_write.shutdown().await;
                    };
                    tokio::join!(upstream, downstream);
                });
            }
        });
        Tap { url, sent, task }
    }

    /// The head (request line and headers, lowercased) of every request sent so far.
    pub fn request_heads(&self) -> Vec<String> {
        let sent = String::from_utf8_lossy(&self.sent.lock().unwrap()).into_owned();
        let methods = ["GET ", "POST ", "PUT ", "PATCH ", "DELETE "];
        let mut heads = Vec::new();
        let mut rest = sent.as_str();
        while let Some(start) = methods
            .iter()
            .filter_map(|m| rest.find(&format!("{m}/")))
            .min()
        {
            let from = &rest[start..];
            let end = from.find("\r\n\r\n").unwrap_or(from.len());
            heads.push(from[..end].to_lowercase());
            rest = &from[end..];
        }
        heads
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The value of the OpenMetrics sample `name` (with its labels, e.g.
/// `agentteam_rotations_total{outcome="ok"}`) in `text`.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A real SOCKS5 server on loopback: Debian's `danted` (`scripts/test` installs `dante-server`),
/// without authentication, logging every connection it makes with its destination. With
/// `hosts`, it resolves names in a private `/etc/hosts` of its own (a mount namespace), so a
/// name only the proxy can resolve proves a client left the name to it (`socks5h`). Stopped
/// (by its PID) when dropped.
pub struct Dante {
    pub port: u16,
    log: PathBuf,
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

/// Where Debian's `dante-server` installs the server.
const DANTED: &str = "/usr/sbin/danted";

impl Dante {
    /// The running server, or `None` (said in one loud line) where `danted` is not installed;
    /// in CI a missing `danted` fails the test.
    pub async fn start(hosts: &[(&str, &str)]) -> Option<Dante> {
        if !Path::new(DANTED).exists() {
            missing_precondition(
                &format!("{DANTED} is missing (scripts/test installs dante-server as root)"),
                "the SOCKS5 test",
            );
            return None;
        }
        let root = rustix::process::geteuid().is_root();
        // danted cannot bind port 0: a free port is chosen here, and taken again if another
        // process won it in between.
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let log = dir.path().join("danted.log");
            let users = if root {
                "user.privileged: root\nuser.unprivileged: nobody\n"
            } else {
                ""
            };
            let config = format!(
                "logoutput: {log}\ninternal: 127.0.0.1 port = {port}\nexternal: 127.0.0.1\nsocksmethod: none\nclientmethod: none\n{users}client pass {{\n    from: 127.0.0.0/8 to: 0.0.0.0/0\n    log: error\n}}\nsocks pass {{\n    from: 127.0.0.0/8 to: 0.0.0.0/0\n    command: connect\n    log: connect error\n}}\n",
                log = log.display()
            );
            let conf = dir.path().join("danted.conf");
            std::fs::write(&conf, config).unwrap();
            let pid_file = dir.path().join("danted.pid");
            let mut command = if hosts.is_empty() {
                let mut command = tokio::process::Command::new(DANTED);
                command.arg("-f").arg(&conf).arg("-p").arg(&pid_file);
                command
            } else {
                let mut file = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
                for (name, ip) in hosts {
                    file.push_str(&format!("\n{ip} {name}\n"));
                }
                let hosts_file = dir.path().join("hosts");
                std::fs::write(&hosts_file, file).unwrap();
                // `exec` keeps one process: the child is danted itself.
                let mut command = tokio::process::Command::new("unshare");
                if !root {
                    command.args(["--user", "--map-root-user"]);
                }
                command
                    .args(["--mount", "--propagation", "private", "sh", "-c"])
                    .arg(r#"mount --bind "$0" /etc/hosts && exec "$1" -f "$2" -p "$3""#)
                    .arg(&hosts_file)
                    .arg(DANTED)
                    .arg(&conf)
                    .arg(&pid_file);
                command
            };
            let mut child = command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("danted starts");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.contains(" running") {
                    return Some(Dante {
                        port,
                        log,
                        child,
                        _dir: dir,
                    });
                }
                if let Ok(Some(_)) = child.try_wait() {
                    assert!(
                        text.contains("Address already in use"),
                        "danted exited:\n{text}"
                    );
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "danted did not start:\n{text}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
        panic!("danted lost the race for a free port five times")
    }

    /// `socks5://127.0.0.1:PORT` (or `socks5h://` with `remote_dns`).
    pub fn url(&self, remote_dns: bool) -> String {
        let scheme = if remote_dns { "socks5h" } else { "socks5" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The destination (`IP.PORT`, as danted writes it) of every connection it opened so far.
    pub fn destinations(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.contains("tcp/connect ["))
            .filter_map(|line| line.split_whitespace().last().map(str::to_string))
            .collect()
    }
}

impl Drop for Dante {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
