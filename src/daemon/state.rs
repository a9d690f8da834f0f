//! What every daemon handler shares: one cheap-to-clone [`DaemonState`], built once at start.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::agents::owner::AgentOwner;
use super::auth::RuntimeAuthorizationStore;
use super::identity::{Identity, Operator};
use super::runtime::Dispatcher;
use crate::client::ServerClient;
use crate::clock::Clock;
use crate::contract::Validators;

/// Everything the daemon's handlers share: one `Arc`, so the copy every extractor and
/// middleware layer takes is one reference count, not a dozen (BENCHMARKS.md).
#[derive(Clone)]
pub struct DaemonState(Arc<Shared>);

impl DaemonState {
    pub fn new(shared: Shared) -> DaemonState {
        DaemonState(Arc::new(shared))
    }
}

impl std::ops::Deref for DaemonState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The fields of [`DaemonState`].
pub struct Shared {
    pub dispatcher: Arc<Dispatcher>,
    /// The runtime authorizations (every token check goes here).
    pub authorizations: Arc<RuntimeAuthorizationStore>,
    /// The daemon-owned `agent` domain (local profiles).
    pub agents: Arc<AgentOwner>,
    /// Replay records of the daemon-owned mutations.
    pub replays: Arc<super::call::replay::ReplayCache>,
    /// Selectors of mutations answered outcome-unknown, until the server answers one.
    pub unsettled: Arc<super::call::transient::Unsettled>,
    pub identity: Arc<Identity>,
    /// The server's operator API, for the human's own setup calls.
    pub operator: Operator,
    /// SHA-256 of this start's admin token.
    pub admin_hash: [u8; 32],
    /// The typed client of the server's runtime action API, acting as this daemon's device.
    pub server_client: Arc<ServerClient>,
    /// The one subscription to the person's event feed, shared by local readers.
    pub feed: Arc<super::feed::Feed>,
    /// The agents' launch recipes and the deliveries this daemon runs.
    pub deliverer: Arc<super::deliver::recipe::Deliverer>,
    /// The console's name, login codes and sessions.
    pub console: Arc<super::console::site::Console>,
    /// The verified, pinned extension definitions new launches bind.
    pub extensions: Arc<super::extensions::Extensions>,
    /// The agents' memory directories and their indexes (`memory_search`).
    pub memory: Arc<super::memory::Memory>,
    /// Every action's and tool's compiled schemas.
    pub validators: Arc<Validators>,
    /// The daemon's spans (off unless a collector is named).
    pub telemetry: crate::telemetry::Telemetry,
    /// The clock every expiry and retention decision reads; tests move it.
    pub clock: Arc<Clock>,
    /// The daemon's metrics (`GET /api/admin/metrics`).
    pub metrics: Arc<super::metrics::Metrics>,
    pub counters: Arc<Counters>,
    /// The runtime requests refused before they reached the server (`refusals.rs`).
    pub refusals: Arc<super::refusals::RefusalLog>,
    /// The executable this daemon runs, as it was at start.
    pub binary: Binary,
}

/// The daemon's executable at start: its path and the file it was then (device, inode, size and
/// modification time), so `status` can tell when the path holds another binary (an upgrade that
/// waits for a restart).
#[derive(Debug, Clone)]
pub struct Binary {
    pub path: std::path::PathBuf,
    identity: Option<((u64, u64), u64, i64)>,
}

impl Binary {
    pub fn at_start(path: std::path::PathBuf) -> Binary {
        let identity = Binary::identity(&path);
        Binary { path, identity }
    }

    fn identity(path: &std::path::Path) -> Option<((u64, u64), u64, i64)> {
        let m = std::fs::metadata(path).ok()?;
        Some((
            crate::platform::fs::file_id(&m),
            m.len(),
            crate::platform::fs::modified_ns(&m),
        ))
    }

    /// Whether the path now holds another file (or none) than the one this daemon started from.
    pub fn replaced(&self) -> bool {
        self.identity.is_none() || Binary::identity(&self.path) != self.identity
    }
}

/// Request counters shown by `GET /api/admin/status` (tests use them to prove a request never
/// reached a route).
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests that reached the Exec action route.
    pub exec_requests: AtomicU64,
    /// Requests that reached the MCP routes (before authentication).
    pub mcp_requests: AtomicU64,
}
