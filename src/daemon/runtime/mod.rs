//! Runtime launches and the lifetime of their credentials.
//!
//! A launch (a "lease") takes one of [`MAX_LEASES`] dispatcher slots, creates one logical
//! authorization, publishes its first token generation in a fresh private directory, and only
//! then starts the process, with nothing but the token file's path and the Exec base URL in its
//! environment. While the process runs, a wall-clock tick renews the token at half its lifetime
//! (±10% jitter); a failed renewal keeps the current file and retries with capped backoff.
//!
//! When the process exits, is aborted, or the daemon shuts down: renewal stops, the authorization
//! is revoked (first), the directory is removed (retried with capped backoff while the slot is
//! held, so cleanup debt stays bounded and visible), and in-flight requests drain. Only then is
//! the slot released.

pub mod env;

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::auth::files::{self, MCP_TOKEN_FILE, TOKEN_FILE};
use super::auth::{Authorization, Binding, RuntimeAuthorizationStore, RuntimeCatalog, Scope};
use crate::clock::Clock;

/// Active leases + pre-publication activations + leases still retrying cleanup.
pub const MAX_LEASES: usize = 512;
/// How long a revoked authorization's requests may take to drain.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);
/// How long output may keep flowing after the runtime exited (a background child it started may
/// hold the pipes open).
const OUTPUT_GRACE: Duration = Duration::from_secs(2);
/// How long a runtime gets to exit after SIGTERM at daemon shutdown.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// Timing of credential maintenance.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    /// Lifetime of each token generation (12 hours by default).
    pub ttl: Duration,
    /// How often the wall clock is checked for a due renewal.
    pub tick: Duration,
}

/// What a caller asks to run.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub server_id: String,
    pub agent_id: String,
    pub workdir: PathBuf,
    pub argv: Vec<String>,
    /// The launching shell's environment; daemon-owned variables are removed from it.
    pub env: Vec<(String, String)>,
}

/// What a running launch reports, in order, ending with `Exited`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The exit code (128 + signal for a signalled process).
    Exited(i32),
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "too many runtimes: {MAX_LEASES} are active or still cleaning up; wait for one to exit"
    )]
    TooManyRuntimes,
    #[error("cannot prepare the runtime's credential")]
    Credential(#[source] io::Error),
    #[error("cannot start `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

/// Owns every launch of this daemon.
#[derive(Debug)]
pub struct Dispatcher {
    store: Arc<RuntimeAuthorizationStore>,
    admission: Arc<Semaphore>,
    instance_dir: PathBuf,
    daemon_base_url: String,
    catalog: Arc<RuntimeCatalog>,
    config: RuntimeConfig,
    clock: Arc<Clock>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Dispatcher {
    pub fn new(
        store: Arc<RuntimeAuthorizationStore>,
        instance_dir: PathBuf,
        daemon_base_url: String,
        config: RuntimeConfig,
        clock: Arc<Clock>,
    ) -> Self {
        Dispatcher {
            store,
            admission: Arc::new(Semaphore::new(MAX_LEASES)),
            instance_dir,
            daemon_base_url,
            catalog: Arc::new(RuntimeCatalog::builtin()),
            config,
            clock,
            tracker: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        }
    }

    /// Leases in any phase (active, activating, or cleaning up).
    pub fn leases(&self) -> usize {
        MAX_LEASES - self.admission.available_permits()
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
        let permit = self
            .admission
            .clone()
            .try_acquire_owned()
            .map_err(|_| LaunchError::TooManyRuntimes)?;
        let binding = Binding {
            server_id: request.server_id.clone(),
            agent_id: request.agent_id.clone(),
            session_id: files::random_name("ses"),
            run_id: files::random_name("run"),
            workdir: request.workdir.display().to_string(),
            process_generation: 1,
            catalog_digest: self.catalog.digest.clone(),
        };
        let authorization = self.store.create(binding, self.catalog.clone());

        // Pre-publication activation: directory, first generation, file. Any failure aborts the
        // launch with the same end-of-life path a running process takes.
        let dir = match files::create_private_dir(&self.instance_dir, "authz-") {
            Ok(dir) => dir,
            Err(e) => {
                self.abort(&authorization, None, permit).await;
                return Err(LaunchError::Credential(e));
            }
        };
        let issued = match publish_generation(&self.store, &authorization, &dir) {
            Ok(issued) => issued,
            Err(e) => {
                self.abort(&authorization, Some(dir), permit).await;
                return Err(LaunchError::Credential(e));
            }
        };
        let fresh = env::LaunchVariables {
            exec_base_url: self.exec_base_url(&request.server_id, &request.agent_id),
            exec_token_file: dir.join(TOKEN_FILE).display().to_string(),
            mcp_url: format!(
                "{}/api/internal/mcp/servers/{}/agents/{}",
                self.daemon_base_url, request.server_id, request.agent_id
            ),
            mcp_token_file: dir.join(MCP_TOKEN_FILE).display().to_string(),
        };
        let env = env::runtime_env(request.env, &fresh);
        let program = request.argv.first().cloned().unwrap_or_default();
        let spawned = tokio::process::Command::new(&program)
            .args(&request.argv[1..])
            .current_dir(&request.workdir)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(source) => {
                self.abort(&authorization, Some(dir), permit).await;
                return Err(LaunchError::Spawn { program, source });
            }
        };
        tracing::info!(authorization = %authorization.id, agent = %request.agent_id, pid = child.id(), "runtime started");

        let (sender, receiver) = mpsc::channel(64);
        let client_gone = CancellationToken::new();
        let stdout = forward(
            child.stdout.take().expect("piped"),
            sender.clone(),
            Output::Stdout,
            client_gone.clone(),
        );
        let stderr = forward(
            child.stderr.take().expect("piped"),
            sender.clone(),
            Output::Stderr,
            client_gone.clone(),
        );
        let lease = Lease {
            dispatcher: self.clone(),
            authorization,
            dir,
            renew_at_ms: self.renewal_time(issued.expires_at_ms),
            permit,
        };
        self.tracker
            .spawn(lease.run(child, client_gone, sender, [stdout, stderr]));
        Ok(receiver)
    }

    /// Stops every runtime, revokes every authorization and waits for cleanup (bounded).
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.store.revoke_all();
        self.tracker.close();
        if tokio::time::timeout(
            DRAIN_DEADLINE + KILL_GRACE + Duration::from_secs(2),
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
            cleanup_dir(&dir, &self.shutdown).await;
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

/// One running launch.
struct Lease {
    dispatcher: Arc<Dispatcher>,
    authorization: Arc<Authorization>,
    dir: PathBuf,
    renew_at_ms: i64,
    permit: OwnedSemaphorePermit,
}

impl Lease {
    async fn run(
        mut self,
        mut child: Child,
        client_gone: CancellationToken,
        watch: mpsc::Sender<Output>,
        forwarders: [tokio::task::JoinHandle<()>; 2],
    ) {
        let dispatcher = self.dispatcher.clone();
        let mut ticker = tokio::time::interval(dispatcher.config.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failures = 0;
        let mut stopping = false;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                _ = ticker.tick() => {
                    // A caller that went away without output pending is noticed here.
                    if watch.is_closed() {
                        client_gone.cancel();
                    }
                    if dispatcher.clock.now_ms() >= self.renew_at_ms {
                        failures = self.renew(failures);
                    }
                }
                () = client_gone.cancelled(), if !stopping => {
                    tracing::info!(authorization = %self.authorization.id, "launch abandoned by its caller; stopping the runtime");
                    stopping = true;
                    let _ = child.start_kill();
                }
                () = dispatcher.shutdown.cancelled(), if !stopping => {
                    stopping = true;
                    terminate(&mut child).await;
                }
            }
        };
        let code = match &status {
            Ok(status) => status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            Err(_) => 128,
        };
        // End of life: revocation first, then the file, then the drain.
        dispatcher.store.revoke(&self.authorization);
        cleanup_dir(&self.dir, &dispatcher.shutdown).await;
        dispatcher
            .store
            .drain(&self.authorization, DRAIN_DEADLINE)
            .await;
        tracing::info!(authorization = %self.authorization.id, code, "runtime exited; credential revoked and removed");
        // The exit frame goes after everything the runtime printed; a background process it left
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
                tracing::debug!(authorization = %self.authorization.id, generation = issued.generation, "credential rotated");
                0
            }
            Err(error) => {
                let failures = failures + 1;
                let wait = dispatcher.backoff(failures);
                self.renew_at_ms = dispatcher.clock.now_ms() + wait.as_millis() as i64;
                tracing::warn!(authorization = %self.authorization.id, error_kind = ?error.kind(), retry_in_ms = wait.as_millis() as u64, "credential rotation failed; the current generation stays");
                failures
            }
        }
    }
}

/// Issues a new Exec and MCP generation and publishes both files. A generation is withdrawn only
/// if its own file was not replaced, so a runtime never holds a withdrawn token (a rename is the
/// only write a reader can see).
fn publish_generation(
    store: &RuntimeAuthorizationStore,
    authorization: &Authorization,
    dir: &std::path::Path,
) -> io::Result<super::auth::Issued> {
    let revoked = || io::Error::other("the authorization was revoked");
    let exec = store
        .issue(authorization, Scope::Exec)
        .ok_or_else(revoked)?;
    let Some(mcp) = store.issue(authorization, Scope::Mcp) else {
        store.withdraw(authorization, exec.generation);
        return Err(revoked());
    };
    if let Err(error) = files::publish(dir, TOKEN_FILE, &exec.token) {
        store.withdraw(authorization, exec.generation);
        store.withdraw(authorization, mcp.generation);
        return Err(error);
    }
    if let Err(error) = files::publish(dir, MCP_TOKEN_FILE, &mcp.token) {
        store.withdraw(authorization, mcp.generation);
        return Err(error);
    }
    Ok(exec)
}

/// SIGTERM, then SIGKILL after a grace period.
async fn terminate(child: &mut Child) {
    if let Some(pid) = child
        .id()
        .and_then(|pid| rustix::process::Pid::from_raw(pid as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    if tokio::time::timeout(KILL_GRACE, child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
    }
}

/// Removes `dir`, retrying with capped exponential backoff (250 ms doubling to 60 s, full
/// jitter) until it succeeds or the daemon shuts down (the next daemon then removes it).
async fn cleanup_dir(dir: &std::path::Path, shutdown: &CancellationToken) {
    let mut attempt: u32 = 0;
    loop {
        match files::remove_dir(dir) {
            Ok(()) => return,
            Err(error) => {
                attempt += 1;
                let cap = Duration::from_millis(250)
                    .saturating_mul(2u32.saturating_pow(attempt.min(16)))
                    .min(Duration::from_secs(60));
                let wait =
                    Duration::from_millis(rand::rng().random_range(0..=cap.as_millis() as u64));
                tracing::warn!(error_kind = ?error.kind(), attempt, "credential cleanup failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = shutdown.cancelled() => return,
                }
            }
        }
    }
}

/// Forwards one pipe as `Output` frames; a gone receiver means the caller abandoned the launch.
fn forward(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    sender: mpsc::Sender<Output>,
    frame: fn(Vec<u8>) -> Output,
    client_gone: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if sender.send(frame(buffer[..n].to_vec())).await.is_err() {
                        client_gone.cancel();
                        return;
                    }
                }
            }
        }
    })
}
