//! Runtime launches and the lifetime of their credentials.
//!
//! A launch (a "lease") takes one of [`MAX_LEASES`] dispatcher slots, creates one logical
//! authorization, publishes its first token generation in a fresh private directory (with a
//! private `bin/agentteam` that is the daemon's own executable), and only then starts the process
//! in its own process group, with nothing but paths and URLs in its environment. While the process
//! runs, a wall-clock tick renews the token at half its lifetime (±10% jitter); a failed renewal
//! keeps the current file and retries with capped backoff.
//!
//! Every launch belongs to a session (named by the caller, or random). A launch that names a
//! live session with `replace` ends the old process's lease first, completely, and then starts the
//! next process generation of the same session: the two are never valid at once.
//!
//! End of life — the process exits, its caller abandons it, it is replaced, or the daemon shuts
//! down: renewal stops, the authorization is revoked (first), the directory is removed, every
//! process of the group is stopped (TERM, then KILL after a grace), and in-flight requests drain.
//! A directory that cannot be removed is retried with capped backoff while the slot is held, so
//! cleanup debt stays bounded and visible. Only then is the slot released.

pub mod driver;
pub mod env;

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::auth::files::{self, MCP_TOKEN_FILE, TOKEN_FILE};
use super::auth::{Authorization, Binding, RuntimeAuthorizationStore, Scope};
use super::extensions::Extensions;
use super::mcp::conversation::Conversation;
use super::memory::Memory;
use crate::clock::Clock;
pub use crate::wire::frame::Output;
use crate::wire::turn::Turn;

/// Active leases + pre-publication activations + leases still retrying cleanup.
pub const MAX_LEASES: usize = 512;
/// The longest primary thread id a launch may name (Codex's are UUIDs).
pub const MAX_THREAD_ID_LEN: usize = 128;
/// How long a revoked authorization's requests may take to drain.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);
/// How long output may keep flowing after the runtime's processes ended (a process that left the
/// group may hold the pipes open).
const OUTPUT_GRACE: Duration = Duration::from_secs(2);
/// How long a runtime's process group gets to exit after SIGTERM before it is killed.
pub const KILL_GRACE: Duration = Duration::from_secs(3);
/// The private bin directory inside a launch's credential directory.
pub const BIN_DIR: &str = "bin";
/// At most this many argv entries and environment entries in one launch.
pub const MAX_ARGV: usize = 1024;
pub const MAX_ENV_ENTRIES: usize = 4096;
/// A session name: what `agentteam run --session` accepts.
pub const MAX_SESSION_LEN: usize = 64;

/// Timing of credential maintenance.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    /// Lifetime of each token generation (12 hours by default).
    pub ttl: Duration,
    /// How often the wall clock is checked for a due renewal.
    pub tick: Duration,
}

/// What `agentteam run` asks the daemon to launch: the one typed form of a launch, sent by the CLI,
/// read by the admin API and carried to the dispatcher. Each launch option is a field here.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LaunchOptions {
    /// The agent (id or handle) the runtime acts as.
    pub agent: String,
    /// The runtime's working directory (absolute).
    pub workdir: PathBuf,
    /// The runtime command and its arguments.
    pub argv: Vec<String>,
    /// The launching shell's environment; daemon-owned variables are removed from it.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// The session this process belongs to; a random one when absent.
    #[serde(default)]
    pub session: Option<String>,
    /// Replace the session's live process instead of refusing the launch.
    #[serde(default)]
    pub replace: bool,
    /// The Human-initiated turn the runtime starts on (the knowledge tools need one); replaced
    /// per delivery through `PUT /api/admin/runs/{runId}/turn`.
    #[serde(default)]
    pub turn: Option<Turn>,
    /// The Codex thread id of the runtime's primary thread, when the launcher knows it: a
    /// `tools/call` whose turn metadata names another thread is a delegated child's.
    #[serde(default)]
    pub primary_thread: Option<String>,
    /// The runtime family whose MCP configuration the driver writes (`driver::Family`).
    #[serde(default)]
    pub runtime: driver::Family,
}

impl LaunchOptions {
    /// The request's own bounds, checked before anything is started.
    pub fn check(&self) -> Result<(), String> {
        if self.argv.is_empty() || self.argv.len() > MAX_ARGV {
            return Err(format!("give 1 to {MAX_ARGV} arguments"));
        }
        if self.env.len() > MAX_ENV_ENTRIES {
            return Err(format!("at most {MAX_ENV_ENTRIES} environment entries"));
        }
        if let Some(session) = &self.session
            && !is_session_name(session)
        {
            return Err(format!(
                "a session name is 1 to {MAX_SESSION_LEN} of `A-Za-z0-9._-`"
            ));
        }
        if self.replace && self.session.is_none() {
            return Err("`replace` needs a `session` to replace".into());
        }
        if !self.workdir.is_absolute() {
            return Err("the working directory must be an absolute path".into());
        }
        if let Some(turn) = &self.turn {
            turn.check()?;
        }
        if let Some(thread) = &self.primary_thread
            && !((1..=MAX_THREAD_ID_LEN).contains(&thread.len())
                && thread.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(format!(
                "the primary thread id must be 1 to {MAX_THREAD_ID_LEN} visible ASCII characters"
            ));
        }
        Ok(())
    }
}

fn is_session_name(name: &str) -> bool {
    (1..=MAX_SESSION_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A launch the daemon resolved: which server and agent it binds, and what to run.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub server_id: String,
    pub agent_id: String,
    pub options: LaunchOptions,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "too many runtimes: {MAX_LEASES} are active or still cleaning up; wait for one to exit"
    )]
    TooManyRuntimes,
    #[error("session `{0}` already has a live runtime; pass `--replace` to replace it")]
    SessionRunning(String),
    #[error("session `{0}` is being launched or replaced by another request")]
    SessionBusy(String),
    #[error("cannot prepare the runtime's credential")]
    Credential(#[source] io::Error),
    #[error("cannot prepare the agent's memory directory")]
    Memory(#[source] io::Error),
    #[error("cannot start `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

/// One live launch, as `GET /api/admin/runs` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInfo {
    pub run_id: String,
    pub agent_id: String,
    pub session: String,
    pub process_generation: u64,
    pub pid: u32,
    pub started_at_ms: i64,
    /// The turn the runtime answers now, if one is bound.
    pub turn: Option<Turn>,
}

/// A session's state in the dispatcher.
enum Session {
    /// A launch of this session is being prepared (or is replacing the previous process).
    Launching,
    /// The session's process runs under this lease.
    Live(Live),
}

/// A session whose process runs: what its launch started.
struct Live {
    info: RunInfo,
    /// The run's turn and primary thread, for its MCP calls.
    conversation: Arc<Conversation>,
    /// Asks the lease to end (replacement).
    stop: CancellationToken,
    /// Becomes `true` once the lease has ended completely and released its slot.
    ended: watch::Receiver<bool>,
}

/// Owns every launch of this daemon.
pub struct Dispatcher {
    store: Arc<RuntimeAuthorizationStore>,
    admission: Arc<Semaphore>,
    instance_dir: PathBuf,
    daemon_base_url: String,
    /// The daemon's own executable, linked as `agentteam` into every launch's bin directory.
    executable: PathBuf,
    /// The agents' memory directories (one goes into each launch's environment).
    memory: Arc<Memory>,
    /// The pinned extensions: their current snapshot's catalog (built-ins plus the pinned
    /// extensions) is what a new launch binds.
    extensions: Arc<Extensions>,
    config: RuntimeConfig,
    clock: Arc<Clock>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Every session with a launch in progress or a live process, by `(agent id, session)`
    /// (ordered, so one agent's sessions are one range).
    sessions: Mutex<BTreeMap<(String, String), Session>>,
    /// How many agents' live sessions were looked up (`agent list` resolves only its page's).
    pub session_lookups: std::sync::atomic::AtomicU64,
    /// Credential directories whose removal failed and is being retried now.
    pub cleanup_debt: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("leases", &self.leases())
            .finish_non_exhaustive()
    }
}

/// What every launch is given besides its credentials.
pub struct Provides {
    /// The daemon's own executable, linked as `agentteam` into the launch's bin directory.
    pub executable: PathBuf,
    /// The agents' memory directories.
    pub memory: Arc<Memory>,
    /// The pinned extensions, whose current catalog a launch binds.
    pub extensions: Arc<Extensions>,
}

impl Dispatcher {
    pub fn new(
        store: Arc<RuntimeAuthorizationStore>,
        instance_dir: PathBuf,
        daemon_base_url: String,
        provides: Provides,
        config: RuntimeConfig,
        clock: Arc<Clock>,
    ) -> Self {
        let Provides {
            executable,
            memory,
            extensions,
        } = provides;
        Dispatcher {
            store,
            admission: Arc::new(Semaphore::new(MAX_LEASES)),
            instance_dir,
            daemon_base_url,
            executable,
            memory,
            extensions,
            config,
            clock,
            tracker: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            sessions: Mutex::new(BTreeMap::new()),
            session_lookups: Default::default(),
            cleanup_debt: Default::default(),
        }
    }

    /// Leases in any phase (active, activating, or cleaning up).
    pub fn leases(&self) -> usize {
        MAX_LEASES - self.admission.available_permits()
    }

    /// How many runtimes of `agent_id` run now (one range of the session map).
    pub fn live_sessions(&self, agent_id: &str) -> usize {
        self.session_lookups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sessions = self.sessions.lock().expect("not poisoned");
        sessions
            .range((agent_id.to_string(), String::new())..)
            .take_while(|((agent, _), _)| agent == agent_id)
            .filter(|(_, session)| matches!(session, Session::Live(_)))
            .count()
    }

    /// Every live launch, oldest first.
    pub fn runs(&self) -> Vec<RunInfo> {
        let sessions = self.sessions.lock().expect("not poisoned");
        let mut runs: Vec<RunInfo> = sessions
            .values()
            .filter_map(|session| match session {
                Session::Live(live) => Some(RunInfo {
                    turn: live.conversation.turn().map(|turn| (*turn).clone()),
                    ..live.info.clone()
                }),
                Session::Launching => None,
            })
            .collect();
        runs.sort_by(|a, b| (a.started_at_ms, &a.run_id).cmp(&(b.started_at_ms, &b.run_id)));
        runs
    }

    /// The conversation context of live run `run_id`, for its MCP calls.
    pub fn conversation(&self, run_id: &str) -> Option<Arc<Conversation>> {
        let sessions = self.sessions.lock().expect("not poisoned");
        sessions.values().find_map(|session| match session {
            Session::Live(live) if live.info.run_id == run_id => Some(live.conversation.clone()),
            _ => None,
        })
    }

    /// Binds `turn` (or none) as the current turn of live run `run_id`; its next knowledge call
    /// uses it. `None` when no live run has that id.
    pub fn set_turn(&self, run_id: &str, turn: Option<Turn>) -> Option<RunInfo> {
        let sessions = self.sessions.lock().expect("not poisoned");
        sessions.values().find_map(|session| match session {
            Session::Live(live) if live.info.run_id == run_id => {
                live.conversation.set_turn(turn.clone());
                Some(RunInfo {
                    turn: turn.clone(),
                    ..live.info.clone()
                })
            }
            _ => None,
        })
    }

    /// The Exec base URL of an agent: the canonical process authorization root.
    pub fn exec_base_url(&self, server_id: &str, agent_id: &str) -> String {
        format!(
            "{}/api/internal/exec/servers/{server_id}/agents/{agent_id}",
            self.daemon_base_url
        )
    }

    /// Starts `request` as a runtime and returns its output stream. Dropping the receiver aborts
    /// the runtime.
    pub async fn launch(
        self: &Arc<Self>,
        request: LaunchRequest,
    ) -> Result<mpsc::Receiver<Output>, LaunchError> {
        if self.shutdown.is_cancelled() {
            return Err(LaunchError::ShuttingDown);
        }
        let named = request.options.session.clone();
        let session = named.clone().unwrap_or_else(|| files::random_name("ses"));
        let key = (request.agent_id.clone(), session.clone());
        let previous = self.reserve(&key, request.options.replace)?;
        // From here on the session is reserved: every failure must release it.
        let result = async {
            let generation = match previous {
                Some((generation, stop, ended)) => {
                    self.end_replaced(stop, ended).await;
                    generation + 1
                }
                None => 1,
            };
            if self.shutdown.is_cancelled() {
                return Err(LaunchError::ShuttingDown);
            }
            self.start(request, session, generation).await
        }
        .await;
        match result {
            Ok((receiver, live)) => {
                self.sessions
                    .lock()
                    .expect("not poisoned")
                    .insert(key, Session::Live(live));
                Ok(receiver)
            }
            Err(error) => {
                self.sessions.lock().expect("not poisoned").remove(&key);
                Err(error)
            }
        }
    }

    /// Reserves `key` for a launch; with `replace`, takes over a live session and returns what
    /// ends it.
    #[allow(clippy::type_complexity)]
    fn reserve(
        &self,
        key: &(String, String),
        replace: bool,
    ) -> Result<Option<(u64, CancellationToken, watch::Receiver<bool>)>, LaunchError> {
        let mut sessions = self.sessions.lock().expect("not poisoned");
        match sessions.get(key) {
            None => {
                sessions.insert(key.clone(), Session::Launching);
                Ok(None)
            }
            Some(Session::Launching) => Err(LaunchError::SessionBusy(key.1.clone())),
            Some(Session::Live(_)) if !replace => Err(LaunchError::SessionRunning(key.1.clone())),
            Some(Session::Live(_)) => match sessions.insert(key.clone(), Session::Launching) {
                Some(Session::Live(live)) => {
                    Ok(Some((live.info.process_generation, live.stop, live.ended)))
                }
                _ => Err(LaunchError::SessionBusy(key.1.clone())),
            },
        }
    }

    /// Ends the replaced process's lease and waits until it released everything, its slot
    /// included (bounded: the lease's own end of life is bounded).
    async fn end_replaced(&self, stop: CancellationToken, mut ended: watch::Receiver<bool>) {
        stop.cancel();
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// Activation and start of one process generation of `session`.
    #[allow(clippy::type_complexity)]
    async fn start(
        self: &Arc<Self>,
        request: LaunchRequest,
        session: String,
        generation: u64,
    ) -> Result<(mpsc::Receiver<Output>, Live), LaunchError> {
        let permit = self
            .admission
            .clone()
            .try_acquire_owned()
            .map_err(|_| LaunchError::TooManyRuntimes)?;
        let LaunchRequest {
            server_id,
            agent_id,
            options,
        } = request;
        // The snapshot taken at activation is the runtime's for its whole life.
        let catalog = self.extensions.current().catalog.clone();
        let binding = Binding {
            server_id: server_id.clone(),
            agent_id: agent_id.clone(),
            session_id: session.clone(),
            run_id: files::random_name("run"),
            workdir: options.workdir.display().to_string(),
            process_generation: generation,
            catalog_digest: catalog.digest.clone(),
        };
        let authorization = self.store.create(binding, catalog.clone());
        let conversation = Arc::new(Conversation::new(
            options.turn.clone(),
            options.primary_thread.as_deref(),
        ));
        let memory_dir = match self.memory.directory(&agent_id) {
            Ok(dir) => dir,
            Err(e) => {
                self.abort(&authorization, None, permit).await;
                return Err(LaunchError::Memory(e));
            }
        };

        // Pre-publication activation: directory, first generation, files, the canonical binary.
        // Any failure aborts the launch with the same end-of-life path a running process takes.
        let dir = match files::create_private_dir(&self.instance_dir, "authz-") {
            Ok(dir) => dir,
            Err(e) => {
                self.abort(&authorization, None, permit).await;
                return Err(LaunchError::Credential(e));
            }
        };
        let mcp_url = format!(
            "{}/api/internal/mcp/servers/{server_id}/agents/{agent_id}",
            self.daemon_base_url
        );
        let activated = publish_generation(&self.store, &authorization, &dir).and_then(|issued| {
            crate::private_file::create_new(&dir.join(files::CATALOG_FILE), &catalog.cli_file)?;
            link_executable(&dir, &self.executable)?;
            let wiring = driver::wire(
                options.runtime,
                &dir,
                &self.executable,
                &mcp_url,
                &dir.join(MCP_TOKEN_FILE),
            )?;
            Ok((issued, wiring))
        });
        let (issued, wiring) = match activated {
            Ok(activated) => activated,
            Err(e) => {
                self.abort(&authorization, Some(dir), permit).await;
                return Err(LaunchError::Credential(e));
            }
        };
        let fresh = env::LaunchVariables {
            exec_base_url: self.exec_base_url(&server_id, &agent_id),
            exec_token_file: dir.join(TOKEN_FILE).display().to_string(),
            mcp_url,
            mcp_token_file: dir.join(MCP_TOKEN_FILE).display().to_string(),
            bin_dir: dir.join(BIN_DIR).display().to_string(),
            memory_dir: memory_dir.display().to_string(),
        };
        let mut env = env::runtime_env(options.env, &fresh);
        env.extend(wiring.env);
        let program = options.argv.first().cloned().unwrap_or_default();
        let spawned = tokio::process::Command::new(&program)
            .args(&wiring.args)
            .args(&options.argv[1..])
            .current_dir(&options.workdir)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so the whole runtime (a shell's commands, a runtime's tool
            // processes and MCP servers) is signalled at its end, not just its first process.
            .process_group(0)
            .kill_on_drop(true)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(source) => {
                self.abort(&authorization, Some(dir), permit).await;
                return Err(LaunchError::Spawn { program, source });
            }
        };
        let pid = child.id().unwrap_or(0);
        tracing::info!(authorization = %authorization.id, agent = %agent_id, pid, generation, "runtime started");

        let (sender, receiver) = mpsc::channel(64);
        let client_gone = CancellationToken::new();
        // A Codex runtime names its primary thread in its own `thread.started` event; a thread
        // the launcher named stays.
        let watch: Option<Watch> = (options.runtime == driver::Family::Codex).then(|| {
            let conversation = conversation.clone();
            let authorization = authorization.id.clone();
            let mut threads = driver::ThreadWatch::default();
            Box::new(move |chunk: &[u8]| {
                if let Some(thread) = threads.feed(chunk)
                    && conversation.name_primary_thread(&thread)
                {
                    tracing::info!(%authorization, "the Codex runtime named its primary thread");
                }
            }) as Watch
        });
        let stdout = forward(
            child.stdout.take().expect("piped"),
            sender.clone(),
            Output::Stdout,
            client_gone.clone(),
            watch,
        );
        let stderr = forward(
            child.stderr.take().expect("piped"),
            sender.clone(),
            Output::Stderr,
            client_gone.clone(),
            None,
        );
        let info = RunInfo {
            run_id: authorization.binding.run_id.clone(),
            agent_id: agent_id.clone(),
            session: session.clone(),
            process_generation: generation,
            pid,
            started_at_ms: self.clock.now_ms(),
            turn: None,
        };
        let stop = CancellationToken::new();
        let (ended_sender, ended) = watch::channel(false);
        let lease = Lease {
            dispatcher: self.clone(),
            authorization: authorization.clone(),
            dir,
            renew_at_ms: self.renewal_time(issued.expires_at_ms),
            permit,
            key: (agent_id, session),
            generation,
        };
        authorization.set_next_renewal_ms(lease.renew_at_ms);
        self.tracker.spawn(lease.run(
            child,
            Ends {
                client_gone,
                replaced: stop.clone(),
            },
            sender,
            [stdout, stderr],
            ended_sender,
        ));
        let live = Live {
            info,
            conversation,
            stop,
            ended,
        };
        Ok((receiver, live))
    }

    /// Revokes every authorization at once and tells every lease to end: the first step of a
    /// shutdown, taken before the HTTP drain so nothing stays valid while connections close.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
        self.store.revoke_all();
    }

    /// Stops every runtime, revokes every authorization and waits for cleanup (bounded).
    pub async fn shutdown(&self) {
        self.begin_shutdown();
        self.tracker.close();
        if tokio::time::timeout(
            DRAIN_DEADLINE + KILL_GRACE + SHUTDOWN_CLEANUP + Duration::from_secs(2),
            self.tracker.wait(),
        )
        .await
        .is_err()
        {
            tracing::warn!(
                "runtime cleanup did not finish before the shutdown deadline; the next daemon removes what is left"
            );
        }
    }

    /// Ends an activation that never started a process.
    async fn abort(
        &self,
        authorization: &Authorization,
        dir: Option<PathBuf>,
        permit: OwnedSemaphorePermit,
    ) {
        self.store.revoke(authorization);
        if let Some(dir) = dir {
            cleanup_dir(&dir, &self.shutdown, &self.cleanup_debt).await;
        }
        self.store.drain(authorization, DRAIN_DEADLINE).await;
        drop(permit);
    }

    /// Half the lifetime after issue, ±10% of the lifetime.
    fn renewal_time(&self, expires_at_ms: i64) -> i64 {
        let ttl = self.config.ttl.as_millis() as i64;
        let issued = expires_at_ms - ttl;
        let jitter = rand::rng().random_range(-ttl / 10..=ttl / 10);
        issued + ttl / 2 + jitter
    }

    /// Backoff after a failed renewal: from min(10 s, TTL/8), doubling, capped at min(5 min, TTL/2).
    fn backoff(&self, failures: u32) -> Duration {
        let base = Duration::from_secs(10).min(self.config.ttl / 8);
        let cap = Duration::from_secs(300).min(self.config.ttl / 2);
        base.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
            .min(cap)
    }
}

/// `dir/bin/agentteam` → the daemon's executable: the runtime's `agentteam` is the daemon's own.
fn link_executable(dir: &Path, executable: &Path) -> io::Result<()> {
    let bin = dir.join(BIN_DIR);
    std::fs::DirBuilder::new().mode(0o700).create(&bin)?;
    std::os::unix::fs::symlink(executable, bin.join("agentteam"))
}

/// What, besides the process's own exit, ends a lease.
struct Ends {
    /// The caller of `agentteam run` went away.
    client_gone: CancellationToken,
    /// A launch replaces this session's process.
    replaced: CancellationToken,
}

/// One running launch.
struct Lease {
    dispatcher: Arc<Dispatcher>,
    authorization: Arc<Authorization>,
    dir: PathBuf,
    renew_at_ms: i64,
    permit: OwnedSemaphorePermit,
    key: (String, String),
    generation: u64,
}

impl Lease {
    async fn run(
        mut self,
        mut child: Child,
        ends: Ends,
        watch: mpsc::Sender<Output>,
        forwarders: [tokio::task::JoinHandle<()>; 2],
        ended: watch::Sender<bool>,
    ) {
        let dispatcher = self.dispatcher.clone();
        let group = child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
        let mut ticker = tokio::time::interval(dispatcher.config.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failures = 0;
        let exited = loop {
            tokio::select! {
                status = child.wait() => break Some(status),
                _ = ticker.tick() => {
                    // A caller that went away without output pending is noticed here.
                    if watch.is_closed() {
                        ends.client_gone.cancel();
                    }
                    if dispatcher.clock.now_ms() >= self.renew_at_ms {
                        failures = self.renew(failures);
                    }
                }
                () = ends.client_gone.cancelled() => {
                    tracing::info!(authorization = %self.authorization.id, "launch abandoned by its caller; stopping the runtime");
                    break None;
                }
                () = ends.replaced.cancelled() => {
                    tracing::info!(authorization = %self.authorization.id, "runtime replaced; stopping it");
                    break None;
                }
                () = dispatcher.shutdown.cancelled() => break None,
            }
        };
        // End of life: revocation first, then the files, then the processes, then the drain.
        dispatcher.store.revoke(&self.authorization);
        let removed = files::remove_dir(&self.dir).is_ok();
        let status = match exited {
            Some(status) => {
                // The first process is gone; whatever it left in its group goes too.
                if let Some(group) = group {
                    let _ = stop_group(group, None).await;
                }
                status
            }
            None => match group {
                Some(group) => stop_group(group, Some(&mut child)).await,
                None => child.wait().await,
            },
        };
        if !removed {
            cleanup_dir(&self.dir, &dispatcher.shutdown, &dispatcher.cleanup_debt).await;
        }
        dispatcher
            .store
            .drain(&self.authorization, DRAIN_DEADLINE)
            .await;
        let code = match &status {
            Ok(status) => status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            Err(_) => 128,
        };
        tracing::info!(authorization = %self.authorization.id, code, "runtime ended; credential revoked and removed");
        // The exit frame goes after everything the runtime printed; a process that left the group
        // holding the pipes gets a short grace, not the lease.
        for mut forwarder in forwarders {
            if tokio::time::timeout(OUTPUT_GRACE, &mut forwarder)
                .await
                .is_err()
            {
                forwarder.abort();
            }
        }
        let _ = watch.send(Output::Exited(code)).await;
        drop(self.permit);
        {
            let mut sessions = dispatcher.sessions.lock().expect("not poisoned");
            let ours = matches!(
                sessions.get(&self.key),
                Some(Session::Live(live)) if live.info.process_generation == self.generation
            );
            if ours {
                sessions.remove(&self.key);
            }
        }
        let _ = ended.send(true);
    }

    /// Issues and publishes a new generation; on failure keeps the current one and backs off.
    /// Returns the new consecutive failure count.
    fn renew(&mut self, failures: u32) -> u32 {
        let dispatcher = &self.dispatcher;
        if self.authorization.is_revoked() {
            return failures;
        }
        match publish_generation(&dispatcher.store, &self.authorization, &self.dir) {
            Ok(issued) => {
                self.renew_at_ms = dispatcher.renewal_time(issued.expires_at_ms);
                self.authorization.set_next_renewal_ms(self.renew_at_ms);
                dispatcher.store.metrics().rotated(true);
                tracing::debug!(authorization = %self.authorization.id, generation = issued.generation, "credential rotated");
                0
            }
            Err(error) => {
                let failures = failures + 1;
                let wait = dispatcher.backoff(failures);
                self.renew_at_ms = dispatcher.clock.now_ms() + wait.as_millis() as i64;
                self.authorization.set_next_renewal_ms(self.renew_at_ms);
                dispatcher.store.metrics().rotated(false);
                tracing::warn!(authorization = %self.authorization.id, error = %error, error_kind = ?error.kind(), retry_in_ms = wait.as_millis() as u64, "credential rotation failed; the current generation stays");
                failures
            }
        }
    }
}

/// Whether any process of `group` is still running. A zombie does not count: an orphan's zombie
/// waits for whatever reaps orphans here, which may be slow, and a zombie cannot act. Read from
/// `/proc` where there is one; elsewhere a zombie counts.
fn group_alive(group: rustix::process::Pid) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return rustix::process::test_kill_process_group(group).is_ok();
    };
    let wanted = group.as_raw_nonzero().get().to_string();
    entries.filter_map(Result::ok).any(|entry| {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`: the command may hold anything, so parse after its `)`.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace())
            .into_iter()
            .flatten();
        let state = fields.next();
        let pgrp = fields.nth(1);
        pgrp == Some(wanted.as_str()) && state != Some("Z")
    })
}

/// Stops every process of `group`: SIGTERM, then SIGKILL once [`KILL_GRACE`] passed with any of
/// them left. With the group's first process still running (`leader`), it is reaped and its
/// status returned; otherwise the status is that of an already reaped process.
async fn stop_group(
    group: rustix::process::Pid,
    leader: Option<&mut Child>,
) -> io::Result<std::process::ExitStatus> {
    use rustix::process::{Signal, kill_process_group};
    let alive = || group_alive(group);
    if !alive() {
        return match leader {
            Some(child) => child.wait().await,
            None => Ok(std::process::ExitStatus::from_raw(0)),
        };
    }
    let _ = kill_process_group(group, Signal::TERM);
    let deadline = tokio::time::Instant::now() + KILL_GRACE;
    let mut status = None;
    if let Some(child) = leader {
        if let Ok(reaped) = tokio::time::timeout_at(deadline, child.wait()).await {
            status = Some(reaped);
        }
        // Members other than the leader get the rest of the grace.
        while alive() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if alive() {
            let _ = kill_process_group(group, Signal::KILL);
        }
        return match status {
            Some(status) => status,
            None => child.wait().await,
        };
    }
    while alive() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    if alive() {
        let _ = kill_process_group(group, Signal::KILL);
    }
    Ok(std::process::ExitStatus::from_raw(0))
}

/// Issues a new Exec and MCP generation and publishes both files, if `dir` is still a private
/// directory of this user: a directory whose mode was loosened, whose owner changed or that was
/// replaced by another user's gets no new token (the current generation stays until it expires).
fn publish_generation(
    store: &RuntimeAuthorizationStore,
    authorization: &Authorization,
    dir: &std::path::Path,
) -> io::Result<super::auth::Issued> {
    files::check_private_dir(dir)?;
    publish_generation_with(store, authorization, dir, files::publish)
}

/// [`publish_generation`] with the file writer injected (tests make it fail after the rename).
///
/// A generation is withdrawn only if its file does not hold it, so a runtime never holds a
/// withdrawn token: publication is decided by what the file holds after the attempt, not by the
/// writer's result, because a writer can fail *after* its rename (the directory `fsync`), when
/// the new token is already what every reader sees.
fn publish_generation_with(
    store: &RuntimeAuthorizationStore,
    authorization: &Authorization,
    dir: &std::path::Path,
    publish: impl Fn(&std::path::Path, &str, &str) -> io::Result<()>,
) -> io::Result<super::auth::Issued> {
    let revoked = || io::Error::other("the authorization was revoked");
    let exec = store
        .issue(authorization, Scope::Exec)
        .ok_or_else(revoked)?;
    let Some(mcp) = store.issue(authorization, Scope::Mcp) else {
        store.withdraw(authorization, exec.generation);
        return Err(revoked());
    };
    let holds = |name: &str, token: &str| {
        std::fs::read_to_string(dir.join(name)).is_ok_and(|text| text == token)
    };
    let mut failure = None;
    for (name, issued) in [(TOKEN_FILE, &exec), (MCP_TOKEN_FILE, &mcp)] {
        if failure.is_some() {
            // An earlier file failed: this generation was never written.
            store.withdraw(authorization, issued.generation);
            continue;
        }
        if let Err(error) = publish(dir, name, &issued.token) {
            if holds(name, &issued.token) {
                tracing::warn!(error_kind = ?error.kind(), "a credential file was replaced but not synced; the new generation is live");
            } else {
                store.withdraw(authorization, issued.generation);
                failure = Some(error);
            }
        }
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(exec),
    }
}

/// How long a strong shutdown keeps retrying a credential directory it could not remove, well
/// inside the bound `Dispatcher::shutdown` waits for every lease.
const SHUTDOWN_CLEANUP: Duration = Duration::from_secs(3);
/// The pause between those retries.
const SHUTDOWN_RETRY: Duration = Duration::from_millis(100);

/// Removes `dir`, retrying with capped exponential backoff (250 ms doubling to 60 s, full
/// jitter) until it succeeds. Once the daemon shuts down, the retries come every
/// [`SHUTDOWN_RETRY`] for at most [`SHUTDOWN_CLEANUP`]; a directory still there then is left for
/// the next daemon, which removes it before it serves, and said so. While it retries, the
/// directory counts in `debt`.
async fn cleanup_dir(
    dir: &std::path::Path,
    shutdown: &CancellationToken,
    debt: &std::sync::atomic::AtomicUsize,
) {
    use std::sync::atomic::Ordering;
    /// Takes the directory off the debt however the retries end.
    struct Owed<'a>(&'a std::sync::atomic::AtomicUsize);
    impl Drop for Owed<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let mut owed = None;
    let mut attempt: u32 = 0;
    let mut give_up_at: Option<tokio::time::Instant> = None;
    loop {
        let error = match files::remove_dir(dir) {
            Ok(()) => return,
            Err(error) => error,
        };
        if owed.is_none() {
            debt.fetch_add(1, Ordering::Relaxed);
            owed = Some(Owed(debt));
        }
        attempt += 1;
        tracing::warn!(error_kind = ?error.kind(), attempt, "credential cleanup failed; retrying");
        let stopping = shutdown.is_cancelled();
        let wait = if stopping {
            let deadline =
                *give_up_at.get_or_insert_with(|| tokio::time::Instant::now() + SHUTDOWN_CLEANUP);
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    attempts = attempt,
                    "a credential directory could not be removed before shutdown; the next daemon removes it before it serves"
                );
                return;
            }
            SHUTDOWN_RETRY
        } else {
            let cap = Duration::from_millis(250)
                .saturating_mul(2u32.saturating_pow(attempt.min(16)))
                .min(Duration::from_secs(60));
            Duration::from_millis(rand::rng().random_range(0..=cap.as_millis() as u64))
        };
        // A shutdown that begins during a long backoff retries at once, then at its own pace.
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled(), if !stopping => {}
        }
    }
}

/// Sees each chunk a runtime writes before it is relayed.
type Watch = Box<dyn FnMut(&[u8]) + Send>;

/// Forwards one pipe as `Output` frames; a gone receiver means the caller abandoned the launch.
fn forward(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    sender: mpsc::Sender<Output>,
    frame: fn(Vec<u8>) -> Output,
    client_gone: CancellationToken,
    mut watch: Option<Watch>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if let Some(watch) = watch.as_mut() {
                        watch(&buffer[..n]);
                    }
                    if sender.send(frame(buffer[..n].to_vec())).await.is_err() {
                        client_gone.cancel();
                        return;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory with mode 0700, like every directory the daemon writes secrets in.
    fn private_tempdir() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap()
    }

    fn store_and_authorization() -> (RuntimeAuthorizationStore, Arc<Authorization>) {
        let store = RuntimeAuthorizationStore::new(
            Arc::new(Clock::default()),
            Duration::from_secs(600),
            Arc::default(),
        );
        let binding = Binding {
            server_id: "wsp_1".into(),
            agent_id: "agt_1".into(),
            session_id: "ses".into(),
            run_id: "run".into(),
            workdir: "/w".into(),
            process_generation: 1,
            catalog_digest: "d".into(),
        };
        let authorization = store.create(
            binding,
            Arc::new(crate::daemon::auth::RuntimeCatalog::builtin()),
        );
        (store, authorization)
    }

    fn live(store: &RuntimeAuthorizationStore, token: &str, scope: Scope) -> bool {
        store.verify(Some(token), "wsp_1", "agt_1", scope).is_ok()
    }

    /// The directory `fsync` after the rename failed, so the writer reported an
    /// error, but the file already holds the new token: withdrawing it would revoke the credential
    /// the runtime is now using.
    #[test]
    fn a_write_that_fails_after_its_rename_keeps_the_new_generation_live() {
        let (store, authorization) = store_and_authorization();
        let dir = private_tempdir();
        let fails_after_rename = |dir: &std::path::Path, name: &str, token: &str| {
            files::publish(dir, name, token)?;
            Err(io::Error::other("fsync of the directory failed"))
        };
        publish_generation_with(&store, &authorization, dir.path(), fails_after_rename)
            .expect("both files hold their new tokens, so the generation is published");
        let exec = std::fs::read_to_string(dir.path().join(TOKEN_FILE)).unwrap();
        let mcp = std::fs::read_to_string(dir.path().join(MCP_TOKEN_FILE)).unwrap();
        assert!(live(&store, &exec, Scope::Exec) && live(&store, &mcp, Scope::Mcp));
    }

    /// A write that never reached the file withdraws the new generation and leaves the current one.
    #[test]
    fn a_write_that_fails_before_its_rename_keeps_the_current_generation() {
        let (store, authorization) = store_and_authorization();
        let dir = private_tempdir();
        publish_generation(&store, &authorization, dir.path()).unwrap();
        let current = std::fs::read_to_string(dir.path().join(TOKEN_FILE)).unwrap();
        let issued_before = authorization.issued();
        let error = publish_generation_with(&store, &authorization, dir.path(), |_, _, _| {
            Err(io::Error::other("no space left on device"))
        })
        .unwrap_err();
        assert_eq!(error.to_string(), "no space left on device");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(TOKEN_FILE)).unwrap(),
            current
        );
        assert!(live(&store, &current, Scope::Exec));
        assert_eq!(
            authorization.issued(),
            issued_before,
            "the failed generations were withdrawn"
        );
    }

    /// The renewal instant falls within 40–60% of the lifetime, over many draws.
    #[test]
    fn renewal_falls_between_40_and_60_percent_of_the_lifetime() {
        let (store, _) = store_and_authorization();
        let ttl = Duration::from_secs(12 * 60 * 60);
        let state = tempfile::tempdir().unwrap();
        let dispatcher = Dispatcher::new(
            Arc::new(store),
            std::env::temp_dir(),
            "http://127.0.0.1:1".into(),
            Provides {
                executable: PathBuf::from("/bin/true"),
                memory: Arc::new(Memory::open(state.path()).unwrap()),
                extensions: Arc::new(Extensions::new(
                    Arc::new(crate::client::ServerClient::new(
                        "http://127.0.0.1:1",
                        String::new(),
                        None,
                    )),
                    "wsp_00000000".into(),
                )),
            },
            RuntimeConfig {
                ttl,
                tick: Duration::from_secs(5),
            },
            Arc::new(Clock::default()),
        );
        let issued_at = 1_000_000_000_i64;
        let ttl_ms = ttl.as_millis() as i64;
        let (mut lowest, mut highest) = (i64::MAX, i64::MIN);
        for _ in 0..10_000 {
            let at = dispatcher.renewal_time(issued_at + ttl_ms) - issued_at;
            assert!(
                (ttl_ms * 4 / 10..=ttl_ms * 6 / 10).contains(&at),
                "renewal at {at} ms of {ttl_ms}"
            );
            lowest = lowest.min(at);
            highest = highest.max(at);
        }
        // The jitter is real: the draws spread over most of the window.
        assert!(lowest < ttl_ms * 42 / 100 && highest > ttl_ms * 58 / 100);
    }
}
