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
//!
//! Here: the limits and the typed launch (options, request, errors, run info). `dispatcher.rs`
//! holds the sessions and activation, `lease.rs` a running launch's credential rotation and end
//! of life, `process.rs` the process group and its output; `driver/`, `guidance.rs` and `env.rs`
//! what a launch is wired with and told.

pub mod driver;
pub mod env;
pub mod guidance;

mod dispatcher;
mod lease;
mod process;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::wire::frame::Output;
use crate::wire::turn::Turn;
pub use dispatcher::{Dispatcher, Provides, StdinRefusal};

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
    /// The runtime family whose driver wires the launch (`driver::Family`; `auto` is resolved
    /// by the daemon).
    #[serde(default)]
    pub runtime: driver::Family,
    /// Let Codex's sandbox reach the network, so `agentteam exec` can reach the daemon.
    #[serde(default)]
    pub sandbox_network: bool,
    /// The runtime reads the launcher's stdin (streamed to `POST /api/admin/runs/{runId}/stdin`)
    /// instead of an empty one. A Codex `app-server` always does: its protocol comes on stdin.
    #[serde(default)]
    pub stdin: bool,
    /// The runtime session of a delivered conversation, which the driver puts the run in (a
    /// new one, or the one it resumes); the deliverer's alone, never taken from a request.
    #[serde(skip)]
    pub resume: Option<driver::RuntimeSession>,
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

/// A launch the daemon resolved: which server and agent it binds, and what to run (its
/// `runtime` never `auto`).
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub server_id: String,
    pub agent_id: String,
    /// The launch, its `env` moved to [`LaunchRequest::env`].
    pub options: LaunchOptions,
    /// The launcher's environment, stripped: what every process of the launch starts from.
    pub env: env::ChildEnv,
    /// Lines for the launcher's stderr, before the runtime's own output.
    pub notices: Vec<String>,
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
    /// The family whose driver wired the launch.
    pub runtime: driver::Family,
    /// The program the launch ran (its name, no directory).
    pub program: String,
}
