//! The dispatcher: every session of this daemon, its admission slots, and activation, the steps
//! that start one process generation of a session (authorization, credential directory, first
//! token generation, wiring, spawn) before its lease (`lease.rs`) takes over.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::lease::{Ends, Lease, SHUTDOWN_CLEANUP, cleanup_dir, publish_generation};
use super::process::{Watch, forward, link_executable, spawn};
use super::{
    BIN_DIR, DRAIN_DEADLINE, KILL_GRACE, LaunchError, LaunchRequest, MAX_LEASES, Output, RunInfo,
    RuntimeConfig, driver, env, guidance,
};
use crate::clock::Clock;
use crate::contract::extension::Definition;
use crate::daemon::auth::files::{self, MCP_TOKEN_FILE, TOKEN_FILE};
use crate::daemon::auth::{Authorization, Binding, RuntimeAuthorizationStore};
use crate::daemon::extensions::Extensions;
use crate::daemon::mcp::conversation::Conversation;
use crate::daemon::memory::Memory;
use crate::wire::turn::Turn;

/// A session's state in the dispatcher.
enum Session {
    /// A launch of this session is being prepared (or is replacing the previous process).
    Launching,
    /// The session's process runs under this lease.
    Live(Box<Live>),
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
    /// The runtime's stdin, until the launcher's stream takes it (a launch with `stdin` only).
    stdin: Option<Box<Mutex<Option<tokio::process::ChildStdin>>>>,
}

/// Why a launcher's stdin cannot be streamed to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinRefusal {
    /// No live run has that id.
    NoSuchRun,
    /// The run was launched without `stdin`: its stdin is empty.
    NotRelayed,
    /// Another stream already took it.
    Taken,
}

/// Owns every launch of this daemon.
pub struct Dispatcher {
    pub(super) store: Arc<RuntimeAuthorizationStore>,
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
    pub(super) config: RuntimeConfig,
    pub(super) clock: Arc<Clock>,
    tracker: TaskTracker,
    pub(super) shutdown: CancellationToken,
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

    /// Takes the stdin of live run `run_id`, once: the launcher's stream writes into it until the
    /// run's lease ends (the receiver turns `true`).
    pub fn take_stdin(
        &self,
        run_id: &str,
    ) -> Result<(tokio::process::ChildStdin, watch::Receiver<bool>), StdinRefusal> {
        let sessions = self.sessions.lock().expect("not poisoned");
        let live = sessions
            .values()
            .find_map(|session| match session {
                Session::Live(live) if live.info.run_id == run_id => Some(live),
                _ => None,
            })
            .ok_or(StdinRefusal::NoSuchRun)?;
        let slot = live.stdin.as_ref().ok_or(StdinRefusal::NotRelayed)?;
        let stdin = slot
            .lock()
            .expect("not poisoned")
            .take()
            .ok_or(StdinRefusal::Taken)?;
        Ok((stdin, live.ended.clone()))
    }

    /// Asks live run `run_id` to end (its person stopped it): its process is stopped and its
    /// authorization revoked as at any end of a lease. The receiver turns `true` once it has
    /// ended; `None` when no live run has that id.
    pub fn stop(&self, run_id: &str) -> Option<watch::Receiver<bool>> {
        let sessions = self.sessions.lock().expect("not poisoned");
        sessions.values().find_map(|session| match session {
            Session::Live(live) if live.info.run_id == run_id => {
                live.stop.cancel();
                Some(live.ended.clone())
            }
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
                    .insert(key, Session::Live(Box::new(live)));
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
            env: inherited,
            notices,
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
                self.abort(&authorization, Vec::new(), permit).await;
                return Err(LaunchError::Memory(e));
            }
        };

        // Pre-publication activation: directories, first generation, files, the canonical binary.
        // Any failure aborts the launch with the same end-of-life path a running process takes.
        // The guidance has a directory of its own: a runtime may be pointed at it, and it holds
        // no token.
        let mut made = Vec::new();
        for prefix in ["authz-", "guide-"] {
            match files::create_private_dir(&self.instance_dir, prefix) {
                Ok(dir) => made.push(dir),
                Err(e) => {
                    self.abort(&authorization, made, permit).await;
                    return Err(LaunchError::Credential(e));
                }
            }
        }
        let guide_dir = made.pop().expect("made");
        let dir = made.pop().expect("made");
        let mcp_url = format!(
            "{}/api/internal/mcp/servers/{server_id}/agents/{agent_id}",
            self.daemon_base_url
        );
        let family = options.runtime;
        let extensions: Vec<&Definition> =
            catalog.extensions.iter().map(|p| &p.definition).collect();
        let preapproved = driver::preapproved_prefixes(&extensions);
        let activated = publish_generation(&self.store, &authorization, &dir).and_then(|issued| {
            crate::private_file::create_new(&dir.join(files::CATALOG_FILE), &catalog.cli_file)?;
            link_executable(&dir, &self.executable, family.exec_alias())?;
            let compiled = guidance::compile(family.reader(), &extensions, family.loads_skills());
            let guide = guidance::write(&guide_dir, &compiled)?;
            let launch = driver::Launch {
                dir: &dir,
                guide: &guide,
                executable: &self.executable,
                mcp_url: &mcp_url,
                token_file: &dir.join(MCP_TOKEN_FILE),
                args: &options.argv[1..],
                env: inherited.vars(),
                workdir: &options.workdir,
                preapproved: &preapproved,
                sandbox_network: options.sandbox_network,
            };
            authorization.set_unasked(driver::unasked(family, &launch));
            let wiring = driver::wire(family, &launch)?;
            Ok((issued, wiring))
        });
        let (issued, wiring) = match activated {
            Ok(activated) => activated,
            Err(e) => {
                self.abort(&authorization, vec![dir, guide_dir], permit)
                    .await;
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
        let mut env = env::runtime_env(inherited, &fresh);
        env.extend(wiring.env);
        let program = options.argv.first().cloned().unwrap_or_default();
        let user_args = wiring
            .user_args
            .unwrap_or_else(|| options.argv[1..].to_vec());
        let spawned = spawn(
            &program,
            wiring.args.iter().chain(&user_args),
            &options.workdir,
            &env,
            options.stdin,
        );
        let mut child = match spawned {
            Ok(child) => child,
            Err(source) => {
                self.abort(&authorization, vec![dir, guide_dir], permit)
                    .await;
                return Err(LaunchError::Spawn { program, source });
            }
        };
        let pid = child.id().unwrap_or(0);
        tracing::info!(authorization = %authorization.id, agent = %agent_id, pid, generation, "runtime started");

        let (sender, receiver) = mpsc::channel(64);
        // What the daemon and the driver have to say comes first, on the launcher's stderr.
        let notices: String = notices
            .iter()
            .chain(&wiring.notices)
            .map(|line| format!("agentteam: {line}\n"))
            .collect();
        if !notices.is_empty() {
            let _ = sender.try_send(Output::Stderr(notices.into_bytes()));
        }
        // The launcher streams its stdin to this run: it learns where before any output.
        let stdin = child.stdin.take().map(|stdin| {
            let _ = sender.try_send(Output::StdinRun(authorization.binding.run_id.clone()));
            Box::new(Mutex::new(Some(stdin)))
        });
        let client_gone = CancellationToken::new();
        // A Codex runtime names its threads in its own output: `codex exec` its primary thread
        // (a thread the launcher named stays), `codex app-server` each thread its client starts
        // and each one the protocol marks delegated.
        let watch: Option<Watch> = (options.runtime == driver::Family::Codex).then(|| {
            let conversation = conversation.clone();
            let authorization = authorization.id.clone();
            let mut threads = if driver::codex_app_server(&options.argv[1..]) {
                driver::ThreadWatch::app_server()
            } else {
                driver::ThreadWatch::exec()
            };
            Box::new(move |chunk: &[u8]| {
                for seen in threads.feed(chunk) {
                    match seen {
                        driver::Seen::Primary(thread) => {
                            if conversation.name_primary_thread(&thread) {
                                tracing::info!(%authorization, "the Codex runtime named its primary thread");
                            }
                        }
                        driver::Seen::User(thread) => {
                            if conversation.user_thread(&thread) {
                                tracing::info!(%authorization, "the Codex app-server started a user thread");
                            }
                        }
                        driver::Seen::Delegated(thread) => {
                            if conversation.delegated_thread(&thread) {
                                tracing::info!(%authorization, "the Codex app-server started a delegated thread");
                            }
                        }
                    }
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
            runtime: family,
            program: std::path::Path::new(&program)
                .file_name()
                .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned()),
        };
        let stop = CancellationToken::new();
        let (ended_sender, ended) = watch::channel(false);
        let lease = Lease {
            dispatcher: self.clone(),
            authorization: authorization.clone(),
            dir,
            guide: guide_dir,
            homes: wiring.homes,
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
            stdin,
        };
        Ok((receiver, live))
    }

    /// Takes `key` out of the session map as the lease of its process `generation` releases it;
    /// a session a newer generation took over (a replacement) stays.
    pub(super) fn ended(&self, key: &(String, String), generation: u64) {
        let mut sessions = self.sessions.lock().expect("not poisoned");
        let ours = matches!(
            sessions.get(key),
            Some(Session::Live(live)) if live.info.process_generation == generation
        );
        if ours {
            sessions.remove(key);
        }
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
        dirs: Vec<PathBuf>,
        permit: OwnedSemaphorePermit,
    ) {
        self.store.revoke(authorization);
        for dir in dirs {
            cleanup_dir(&dir, &self.shutdown, &self.cleanup_debt).await;
        }
        self.store.drain(authorization, DRAIN_DEADLINE).await;
        drop(permit);
    }

    /// Half the lifetime after issue, ±10% of the lifetime.
    pub(super) fn renewal_time(&self, expires_at_ms: i64) -> i64 {
        let ttl = self.config.ttl.as_millis() as i64;
        let issued = expires_at_ms - ttl;
        let jitter = rand::rng().random_range(-ttl / 10..=ttl / 10);
        issued + ttl / 2 + jitter
    }

    /// Backoff after a failed renewal: from min(10 s, TTL/8), doubling, capped at min(5 min, TTL/2).
    pub(super) fn backoff(&self, failures: u32) -> Duration {
        let base = Duration::from_secs(10).min(self.config.ttl / 8);
        let cap = Duration::from_secs(300).min(self.config.ttl / 2);
        base.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
            .min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The renewal instant falls within 40–60% of the lifetime, over many draws.
    #[test]
    fn renewal_falls_between_40_and_60_percent_of_the_lifetime() {
        let store = RuntimeAuthorizationStore::new(
            Arc::new(Clock::default()),
            Duration::from_secs(600),
            Arc::default(),
        );
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
