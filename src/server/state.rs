//! What every request handler shares: [`AppState`], one `Arc` over the store, the compiled
//! catalog, the cursor codec, the operator token, the one clock, the provider client, the pinned
//! extension definitions, the audit queue and the server's telemetry; how it is opened from a [`ServerConfig`] and
//! closed.

use std::path::PathBuf;
use std::sync::Arc;

use super::audit::{self, Auditor};
use super::auth::OperatorToken;
use super::cursor::CursorCodec;
use super::extension_rules;
use super::provider::{ProviderClient, ProviderConfig};
use super::store::{Clock, Store, StoreError};
use crate::contract::Validators;
use crate::telemetry::{Component, Telemetry};

/// How the server is started.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `sqlite://PATH` or `postgres://…`.
    pub database_url: String,
    /// The operator token's file (0600). On SQLite a fresh token is written at every start (the
    /// previous one stops working); on PostgreSQL the replicas share it: the first creates it,
    /// the others read it.
    pub operator_token_file: PathBuf,
    /// How the extension host reaches providers.
    pub provider: ProviderConfig,
    /// Where the server's spans go (`None`: tracing off).
    pub telemetry: Option<crate::telemetry::Settings>,
    /// How long a delivery waits for the daemon hosting its agent before it expires.
    pub delivery_ttl: std::time::Duration,
    /// How many deliveries one person's messages may make in a minute.
    pub deliveries_per_minute: u32,
}

/// Everything a request handler needs: one `Arc`, so each extractor's and middleware layer's
/// copy is one reference count.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The fields of [`AppState`].
pub struct Shared {
    pub(crate) store: Store,
    pub(crate) catalog: Arc<Validators>,
    pub(crate) cursors: CursorCodec,
    pub(crate) operator: Arc<OperatorToken>,
    /// The server's one clock: every handler, the audit trail and the scheduler read it.
    pub(crate) clock: Arc<Clock>,
    /// Runtime action requests that passed authentication and reached a handler.
    pub(crate) dispatched: Arc<std::sync::atomic::AtomicU64>,
    /// Human API requests that passed authentication (a daemon's event feed is most of them).
    pub(crate) human_requests: Arc<std::sync::atomic::AtomicU64>,
    pub(crate) provider: ProviderClient,
    pub(crate) provider_config: Arc<ProviderConfig>,
    /// Verified extension definitions by digest (bounded: cleared when full).
    pub(crate) pinned: Arc<
        std::sync::Mutex<
            std::collections::BTreeMap<String, Arc<crate::contract::extension::Pinned>>,
        >,
    >,
    /// The audit trail's queue.
    pub(crate) audit: Auditor,
    /// The server's spans (off unless a collector is named).
    pub(crate) telemetry: Telemetry,
    /// Who may act as the operator beyond holding its token: set by a daemon that embeds this
    /// server; a standalone server has none.
    pub(crate) callers: std::sync::OnceLock<Arc<dyn CallerGate>>,
}

/// Tells whether the process at a connection's other end may act as the operator. A server a
/// daemon embeds asks the daemon, which knows the runtimes it launched; a standalone server
/// cannot tell one local process from another and has no gate.
pub trait CallerGate: Send + Sync {
    /// Why the caller at `peer` may not act as the operator, if it may not. It reads `/proc`:
    /// call it off the async workers.
    fn refuse(&self, peer: Option<crate::serve::Peer>) -> Option<crate::contract::ActionError>;
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot open the database")]
    Store(#[from] StoreError),
    #[error("cannot use the operator token file `{path}`")]
    OperatorToken {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot export traces: {0}")]
    Telemetry(String),
}

impl AppState {
    /// Opens the store, readies the catalog's validators, issues this start's operator token,
    /// starts the audit writer and records the seed extension definitions.
    pub async fn open(config: &ServerConfig) -> Result<AppState, ServerError> {
        let store = Store::open(&config.database_url).await?;
        store.set_delivery_ttl(config.delivery_ttl);
        store.set_deliveries_per_minute(config.deliveries_per_minute);
        // Each schema is compiled on its first use: compiled all at once they hold tens of MiB
        // (a JSON Schema `pattern` is a regex automaton each) that most servers never read. The
        // test suite compiles every one of them.
        let catalog = Arc::new(Validators::lazy());
        let cursors = CursorCodec::new(store.secret("cursor").await?);
        let operator = if store.is_postgres() {
            OperatorToken::share(&config.operator_token_file)
        } else {
            OperatorToken::issue(&config.operator_token_file)
        };
        let operator = operator.map_err(|source| ServerError::OperatorToken {
            path: config.operator_token_file.display().to_string(),
            source,
        })?;
        let telemetry = Telemetry::start(config.telemetry.as_ref(), Component::Server)
            .map_err(ServerError::Telemetry)?;
        let audit = audit::Auditor::start(store.clone());
        let state = AppState(Arc::new(Shared {
            store,
            catalog,
            cursors,
            operator: Arc::new(operator),
            clock: Arc::new(Clock::default()),
            dispatched: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            human_requests: Arc::default(),
            provider: ProviderClient::new(&config.provider),
            provider_config: Arc::new(config.provider.clone()),
            pinned: Arc::default(),
            audit,
            telemetry,
            callers: std::sync::OnceLock::new(),
        }));
        extension_rules::seed(&state.store, &state.clock).await?;
        Ok(state)
    }

    /// From now on, every operator request also passes `gate` (set once; a second is ignored).
    pub fn guard_callers(&self, gate: Arc<dyn CallerGate>) {
        let _ = self.callers.set(gate);
    }

    /// The store, for orderly shutdown.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Orderly shutdown: the queued audit records written, then the store closed.
    pub async fn close(&self) {
        self.audit.close().await;
        self.store.close().await;
        self.telemetry.shutdown().await;
    }

    /// Runtime action requests that reached a handler since start.
    pub fn dispatched(&self) -> u64 {
        self.dispatched.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The clock every handler reads; tests move it forward.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }
}
