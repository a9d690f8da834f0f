//! Assembly of the daemon: its configuration, its start-up order, and its shutdown.
//!
//! Start-up order matters: scrub the daemon-owned environment (in `main`), take the state
//! directory's lock, remove stale credential directories of crashed instances, and only then
//! start the server, the listener and any runtime. Shutdown is strong: every authorization is
//! revoked at the signal, before connections drain.

use crate::telemetry::Component;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::agents::owner::AgentOwner;
use super::agents::store::ProfileStore;
use super::auth::RuntimeAuthorizationStore;
use super::auth::files::{Instance, ensure_private_dir};
use super::error::DaemonError;
use super::identity::{Identity, Operator};
use super::runtime::{Dispatcher, RuntimeConfig};
use super::state::{Counters, DaemonState};
use super::{auth, routes};
use crate::clock::Clock;

/// Default lifetime of a token generation.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// Default wall-clock check interval for renewals.
pub const DEFAULT_ROTATION_TICK: Duration = Duration::from_secs(5);

/// `daemon.json`: how the local CLI finds the daemon.
pub const DAEMON_FILE: &str = "daemon.json";
/// The admin token the local CLI presents (0600, new at every start).
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// The embedded server's operator token (0600, new at every start), which `agentteam admin`
/// uses when it names no server.
pub const EMBEDDED_OPERATOR_TOKEN_FILE: &str = "operator.token";
/// The flags the state directory's last daemon was started with (0600, kept after it stops): a
/// command that starts the daemon on demand, or `daemon restart`, starts it with them.
pub const ARGS_FILE: &str = "daemon.args";

/// How the daemon is started.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub listen: SocketAddr,
    pub state_dir: PathBuf,
    /// Where per-instance credential directories live.
    pub runtime_dir: PathBuf,
    /// An external server; `None` runs the reference server in-process.
    pub server_url: Option<String>,
    /// The external server's operator token file (required with `server_url`).
    pub operator_token_file: Option<PathBuf>,
    /// How runtime calls reach the embedded server (not used with `server_url`).
    pub embedded_hop: EmbeddedHop,
    /// How long one request to the server may take.
    pub server_timeout: std::time::Duration,
    /// The proxy (never used for a loopback server) and extra trust roots to reach `server_url`
    /// with, both named by the operator, never taken from the environment.
    pub remote: crate::client::http::Remote,
    pub runtime: RuntimeConfig,
    /// Where spans go (`None`: tracing off), for the daemon and its embedded server.
    pub telemetry: Option<crate::telemetry::Settings>,
    /// The `agentteam daemon` flags that start this daemon again (`daemon.args`, which an
    /// on-demand start and `agentteam daemon restart` run): none holds a secret.
    pub relaunch: Vec<String>,
}

/// How the daemon's runtime calls reach the embedded server. Both are one HTTP request through
/// the server's whole router; `Tcp` adds the socket and the HTTP/1 codec, as with `--server-url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EmbeddedHop {
    InProcess,
    Tcp,
}

/// The embedded server while it runs: its state (the in-process hop routes to it), the task
/// serving it (`server::run`, which closes the state once it stops) and what stops it.
struct Embedded {
    stop: tokio_util::sync::CancellationToken,
    serving: tokio::task::JoinHandle<()>,
    state: crate::server::AppState,
}

/// The default state directory: `$XDG_STATE_HOME/agentteam` or `~/.local/state/agentteam`.
pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("agentteam");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/state/agentteam")
}

/// The default credential base: `$XDG_RUNTIME_DIR/agentteam`, else `<state dir>/run`.
pub fn default_runtime_dir(state_dir: &Path) -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("agentteam"),
        None => state_dir.join("run"),
    }
}

/// How long a new daemon waits for the embedded database of the one it replaces: that one lets go
/// of the state directory's lock before its process, and the database's with it, has ended.
const EMBEDDED_HANDOVER: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens the embedded server. This daemon holds the state directory's lock, so a database that
/// is in use is the previous daemon's, still ending (`agentteam daemon restart` starts the next
/// one as soon as the lock is free): it is waited for, within [`EMBEDDED_HANDOVER`].
async fn open_embedded(
    config: &crate::server::ServerConfig,
) -> Result<crate::server::AppState, DaemonError> {
    let deadline = tokio::time::Instant::now() + EMBEDDED_HANDOVER;
    let mut said = false;
    loop {
        match crate::server::AppState::open(config).await {
            Err(crate::server::ServerError::Store(crate::server::store::StoreError::InUse(_)))
                if tokio::time::Instant::now() < deadline =>
            {
                if !std::mem::replace(&mut said, true) {
                    tracing::info!(
                        "the embedded database is still in use (by the daemon this one replaces, while it ends, or by another agentteam server): waiting for it"
                    );
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            opened => return opened.map_err(DaemonError::EmbeddedServer),
        }
    }
}

/// Runs the daemon until `shutdown` completes, then stops every runtime, revokes and removes
/// every credential, and stops the embedded server. `ready` gets the base URL once the daemon
/// accepts requests (after stale credentials are gone and `daemon.json` is written).
pub async fn run(
    config: DaemonConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(&str),
) -> Result<(), DaemonError> {
    if !config.listen.ip().is_loopback() {
        return Err(DaemonError::NotLoopback(config.listen));
    }
    let state_err = |what: &str, e: std::io::Error| DaemonError::State(format!("{what}: {e}"));
    ensure_private_dir(&config.state_dir)
        .map_err(|e| state_err("cannot prepare the state dir", e))?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(config.state_dir.join("daemon.lock"))
        .map_err(|e| state_err("cannot open the lock", e))?;
    // A command asking whether a daemon runs holds the lock shared for an instant
    // (`agentteam`'s on-demand start): a lock still taken after a second is another daemon's.
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while lock.try_lock().is_err() {
        if std::time::Instant::now() >= deadline {
            return Err(DaemonError::AlreadyRunning(
                config.state_dir.display().to_string(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Stale credential directories of a crashed daemon go before anything starts.
    let (instance, removed) = Instance::start(&config.runtime_dir)
        .map_err(|e| state_err("cannot prepare the credential directory", e))?;
    if removed > 0 {
        tracing::info!(
            removed,
            "removed credential directories of a previous daemon"
        );
    }

    let clock = Arc::new(Clock::default());
    let telemetry =
        crate::telemetry::Telemetry::start(config.telemetry.as_ref(), Component::Daemon)
            .map_err(|why| DaemonError::State(format!("cannot export traces: {why}")))?;
    if telemetry.is_on() {
        tracing::info!("exporting traces over OTLP");
    }
    let callers = super::person::Callers::new();
    let (server_url, operator_token, embedded) = match &config.server_url {
        Some(url) => {
            let file = config
                .operator_token_file
                .as_ref()
                .ok_or(DaemonError::MissingOperatorToken)?;
            let token = std::fs::read_to_string(file)
                .map_err(|e| state_err("cannot read the operator token file", e))?;
            (url.clone(), token.trim().to_string(), None)
        }
        None => {
            let server_config = crate::server::ServerConfig {
                database_url: format!("sqlite://{}", config.state_dir.join("server.db").display()),
                operator_token_file: config.state_dir.join(EMBEDDED_OPERATOR_TOKEN_FILE),
                provider: crate::server::provider::ProviderConfig::default(),
                telemetry: config.telemetry.clone(),
                delivery_ttl: std::time::Duration::from_millis(
                    crate::server::store::DEFAULT_DELIVERY_TTL_MS as u64,
                ),
                deliveries_per_minute: crate::server::store::DEFAULT_DELIVERIES_PER_MINUTE as u32,
            };
            let state = open_embedded(&server_config).await?;
            // Its operator is never a process of a runtime this daemon launches.
            state.guard_callers(callers.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| DaemonError::Listen(config.listen, e))?;
            let url = format!("http://{}", listener.local_addr().expect("bound"));
            let stop = tokio_util::sync::CancellationToken::new();
            let serve_stop = stop.clone();
            let serving = tokio::spawn(crate::server::run(listener, state.clone(), async move {
                serve_stop.cancelled().await
            }));
            let token = std::fs::read_to_string(&server_config.operator_token_file)
                .map_err(|e| state_err("cannot read the embedded operator token", e))?;
            tracing::info!(server = %url, "embedded server started");
            (
                url,
                token,
                Some(Embedded {
                    stop,
                    serving,
                    state,
                }),
            )
        }
    };
    let remote = Some(&config.remote).filter(|_| embedded.is_none());
    let operator = Operator::new(&server_url, operator_token, remote);
    let identity =
        Identity::load_or_bootstrap(&config.state_dir.join("identity.json"), &operator).await?;
    let identity_credential = identity.device_credential.clone();
    let (profiles, loaded) = ProfileStore::open(&config.state_dir, &clock)
        .map_err(|e| state_err("cannot open the agent profiles", std::io::Error::other(e)))?;
    if loaded.removed > 0 {
        tracing::info!(
            removed = loaded.removed,
            "removed incomplete agent profiles"
        );
    }

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| DaemonError::Listen(config.listen, e))?;
    let address = listener.local_addr().expect("bound");
    let base_url = format!("http://{address}");
    let admin_token = auth::files::random_name("adm_");
    crate::private_file::replace(&config.state_dir.join(ADMIN_TOKEN_FILE), &admin_token)
        .map_err(|e| state_err("cannot write the admin token", e))?;
    let metrics = Arc::new(super::metrics::Metrics::new());
    let store = Arc::new(RuntimeAuthorizationStore::new(
        clock.clone(),
        config.runtime.ttl,
        metrics.clone(),
    ));
    let executable = std::env::current_exe()
        .map_err(|e| state_err("cannot find the daemon's own executable", e))?;
    let binary = super::state::Binary::at_start(executable.clone());
    let memory = Arc::new(
        super::memory::Memory::open(&config.state_dir)
            .map_err(|e| state_err("cannot prepare the memory directories", e))?,
    );
    let server_client = Arc::new(
        match &embedded {
            Some(embedded) if config.embedded_hop == EmbeddedHop::InProcess => {
                crate::client::ServerClient::in_process(
                    crate::server::router(embedded.state.clone()),
                    identity_credential,
                )
            }
            _ => crate::client::ServerClient::new(&server_url, identity_credential, remote),
        }
        .with_hop_timeout(config.server_timeout),
    );
    let server_hop = server_client.hop();
    tracing::info!(hop = server_hop, "runtime calls reach the server");
    // The extension snapshot new launches bind: fetched, verified and pinned before the first.
    let extensions = Arc::new(super::extensions::Extensions::new(
        server_client.clone(),
        identity.workspace_id.clone(),
    ));
    extensions.reload().await;
    let dispatcher = Arc::new(Dispatcher::new(
        store.clone(),
        instance.dir.clone(),
        base_url.clone(),
        super::runtime::Provides {
            executable,
            memory: memory.clone(),
            extensions: extensions.clone(),
        },
        config.runtime,
        clock.clone(),
    ));
    callers.bind(&dispatcher);
    let identity = Arc::new(identity);
    let agents = Arc::new(AgentOwner::new(
        profiles,
        operator.clone(),
        identity.clone(),
        dispatcher.clone(),
        clock.clone(),
    ));
    // Orphan cleanup at start: a profile the server no longer knows goes. An unreachable server
    // leaves the profiles as they are until `agent reload`.
    match agents.clean_orphans().await {
        Ok(0) => {}
        Ok(removed) => tracing::info!(removed, "removed agent profiles the server no longer knows"),
        Err(error) => tracing::warn!(%error, "cannot check the agent profiles against the server"),
    }
    // Every local agent's memory index starts building now, one at a time, so the first
    // `memory_search` of a runtime finds it ready.
    for agent_id in agents.store.ids() {
        if let Err(error) = memory.directory(&agent_id) {
            tracing::warn!(agent = %agent_id, %error, "cannot prepare the agent's memory directory");
        }
    }
    let memory_stop = tokio_util::sync::CancellationToken::new();
    let maintenance = tokio::spawn(memory.clone().maintain(memory_stop.clone()));
    // The console's own listener and origin: its name is kept in the state directory.
    let (console_listener, console) = super::console::bind(&config.state_dir, clock.clone())
        .await
        .map_err(|e| state_err("cannot start the console", e))?;
    let console = Arc::new(console);
    let feed = super::feed::Feed::new(server_client.clone(), identity.workspace_id.clone());
    let feed_stop = tokio_util::sync::CancellationToken::new();
    let following = tokio::spawn(feed.clone().follow(feed_stop.clone()));
    let state = DaemonState::new(super::state::Shared {
        dispatcher: dispatcher.clone(),
        authorizations: store,
        agents,
        replays: Arc::new(super::call::replay::ReplayCache::default()),
        unsettled: Arc::default(),
        identity,
        operator,
        admin_hash: Sha256::digest(admin_token.as_bytes()).into(),
        server_client,
        feed,
        console: console.clone(),
        deliverer: Arc::new(super::deliver::Deliverer::new(&config.state_dir)),
        extensions,
        memory,
        // Compiled on first use, as the server's are.
        validators: Arc::new(crate::contract::Validators::lazy()),
        clock: clock.clone(),
        telemetry: telemetry.clone(),
        metrics,
        counters: Arc::new(Counters::default()),
        refusals: Arc::new(
            super::refusals::RefusalLog::open(&config.state_dir)
                .map_err(|e| state_err("cannot open the refusal log", e))?,
        ),
        binary,
    });
    let daemon_file = config.state_dir.join(DAEMON_FILE);
    let announcement = json!({
        "baseUrl": base_url,
        "pid": std::process::id(),
        "serverUrl": server_url,
        "serverHop": server_hop,
        "serverEmbedded": embedded.is_some(),
        "consoleUrl": super::console::url(&console),
    });
    crate::private_file::replace(
        &config.state_dir.join(ARGS_FILE),
        &format!("{}\n", json!(config.relaunch)),
    )
    .map_err(|e| state_err("cannot write daemon.args", e))?;
    crate::private_file::replace(&daemon_file, &format!("{announcement}\n"))
        .map_err(|e| state_err("cannot write daemon.json", e))?;
    tracing::info!(%base_url, state_dir = %config.state_dir.display(), "daemon listening");
    ready(&base_url);

    // Strong shutdown: at the signal every authorization is revoked and every runtime told to end
    // at once; only then do connections drain (a runtime's `run` stream ends with its lease).
    let revoking = dispatcher.clone();
    let shutdown = async move {
        shutdown.await;
        tracing::info!("daemon stopping: revoking credentials and stopping runtimes");
        revoking.begin_shutdown();
    };
    let deliver_stop = tokio_util::sync::CancellationToken::new();
    let delivering = tokio::spawn(super::deliver::run(state.clone(), deliver_stop.clone()));
    tracing::info!(
        console = %super::console::describe(
            console_listener.local_addr().expect("bound"),
            &console
        ),
        "console listening (open it with `agentteam open`)"
    );
    let console_stop = console.stop.clone();
    let console_serving = tokio::spawn(crate::serve::serve(
        console_listener,
        super::console::router(state.clone()),
        async move { console_stop.cancelled().await },
    ));
    let ending = console.stop.clone();
    let shutdown = async move {
        shutdown.await;
        ending.cancel();
    };
    crate::serve::serve(listener, routes::router(state), shutdown).await;
    let _ = console_serving.await;
    deliver_stop.cancel();
    let _ = delivering.await;
    dispatcher.shutdown().await;
    feed_stop.cancel();
    let _ = following.await;
    // The memory indexes' last changes go to their snapshots.
    memory_stop.cancel();
    let _ = maintenance.await;
    let _ = std::fs::remove_file(&daemon_file);
    if let Err(error) = auth::files::remove_dir(&instance.dir) {
        let left = std::fs::read_dir(&instance.dir).map_or(0, |entries| entries.count());
        tracing::warn!(
            left,
            error_kind = ?error.kind(),
            dir = %instance.dir.display(),
            "credential directories are left after shutdown; the next daemon removes them before it serves"
        );
    }
    // The embedded server's stop (its audit queue, its store, its own last spans) and the
    // daemon's last spans run at once: a stop waits for one collector deadline, not one each.
    let embedded_stopped = async {
        if let Some(embedded) = embedded {
            embedded.stop.cancel();
            let _ = embedded.serving.await;
        }
    };
    tokio::join!(embedded_stopped, telemetry.shutdown());
    drop(lock);
    tracing::info!("daemon stopped");
    Ok(())
}
