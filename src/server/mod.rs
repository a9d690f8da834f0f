//! The reference AgentTeam Server: the product owner behind the bridge.
//!
//! It knows nothing of runtimes, token files or MCP. Daemons call its runtime action API as a
//! device of one human and act for that human's agents; every request is authorized here again
//! (workspace, agent ownership, and each locator's membership). An operator API sets up
//! workspaces, humans, agents, devices, channels and threads.

pub(crate) mod actions;
mod admin_api;
mod audit;
mod auth;
pub mod cursor;
mod extensions;
mod failure;
pub mod knowledge;
pub mod provider;
mod runtime_api;
mod runtime_call;
mod snake_case_aliases;
pub mod store;
pub mod workflow;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;

use crate::contract::Validators;
use crate::contract::error::ErrorCode;
use crate::contract::validate::CompileError;
use cursor::CursorCodec;
use store::{Clock, Store, StoreError};

pub use auth::{DEVICE_CREDENTIAL_PREFIX, OPERATOR_TOKEN_PREFIX};

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
    pub provider: provider::ProviderConfig,
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
    pub(crate) operator: Arc<auth::OperatorToken>,
    pub(crate) clock: Arc<Clock>,
    /// Runtime action requests that passed authentication and reached a handler.
    pub(crate) dispatched: Arc<std::sync::atomic::AtomicU64>,
    pub(crate) provider: provider::ProviderClient,
    pub(crate) provider_config: Arc<provider::ProviderConfig>,
    /// Verified extension definitions by digest (bounded: cleared when full).
    pub(crate) pinned: Arc<
        std::sync::Mutex<
            std::collections::BTreeMap<String, Arc<crate::contract::extension::Pinned>>,
        >,
    >,
    /// The audit trail's queue.
    pub(crate) audit: audit::Auditor,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot open the database")]
    Store(#[from] StoreError),
    #[error("the built-in catalog does not compile")]
    Catalog(#[from] CompileError),
    #[error("cannot use the operator token file `{path}`")]
    OperatorToken {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl AppState {
    /// Opens the store, compiles the catalog's validators and issues this start's operator token.
    pub async fn open(config: &ServerConfig) -> Result<AppState, ServerError> {
        let store = Store::open(&config.database_url).await?;
        let catalog = Arc::new(Validators::new()?);
        let cursors = CursorCodec::new(store.secret("cursor").await?);
        let operator = if store.is_postgres() {
            auth::OperatorToken::share(&config.operator_token_file)
        } else {
            auth::OperatorToken::issue(&config.operator_token_file)
        };
        let operator = operator.map_err(|source| ServerError::OperatorToken {
            path: config.operator_token_file.display().to_string(),
            source,
        })?;
        let audit = audit::Auditor::start(store.clone());
        let state = AppState(Arc::new(Shared {
            store,
            catalog,
            cursors,
            operator: Arc::new(operator),
            clock: Arc::new(Clock::default()),
            dispatched: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            provider: provider::ProviderClient::new(&config.provider),
            provider_config: Arc::new(config.provider.clone()),
            pinned: Arc::default(),
            audit,
        }));
        extensions::seed(&state).await?;
        Ok(state)
    }

    /// The store, for orderly shutdown.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Orderly shutdown: the queued audit records written, then the store closed.
    pub async fn close(&self) {
        self.audit.close().await;
        self.store.close().await;
    }

    /// Runtime action requests that reached a handler since start.
    pub fn dispatched(&self) -> u64 {
        self.dispatched.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The clock every handler reads; tests move it forward.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// One scheduler pass at the clock's now: due scheduled messages become runs, pending runs
    /// are posted, due scheduled workflow triggers start their runs, and expired idempotency
    /// records are pruned. `agentteam server` runs it every
    /// [`SCHEDULER_TICK`]; tests call it.
    pub async fn run_scheduler_pass(&self) -> Result<store::PassReport, StoreError> {
        let now_ms = self.clock.now_ms();
        let mut report = self.store.run_due_schedules(now_ms).await?;
        report.runs_started = self.store.fire_due_triggers(now_ms).await?;
        report.watches_refreshed = extensions::refresh_stale(self, now_ms).await?;
        report.keys_pruned = self
            .store
            .prune_idempotency(now_ms - runtime_call::IDEMPOTENCY_RETENTION_MS)
            .await?;
        Ok(report)
    }

    /// Applies the audit trail's retention (age, then count); returns how many records went.
    pub async fn prune_audit(&self) -> Result<u64, StoreError> {
        let before = self.clock.now_ms() - audit::RETENTION.as_millis() as i64;
        self.store.prune_audit(before, audit::MAX_RECORDS).await
    }
}

/// How often the server's scheduler looks for due scheduled messages.
pub const SCHEDULER_TICK: std::time::Duration = std::time::Duration::from_secs(1);
/// Scheduler ticks between two audit retention passes.
const AUDIT_PRUNE_TICKS: u64 = 60;

/// Runs scheduler passes every [`SCHEDULER_TICK`] until `stop` is cancelled. A failed pass is
/// logged and retried on the next tick; pending runs survive in the store.
pub async fn run_scheduler(state: AppState, stop: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(SCHEDULER_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        // The audit trail's retention, once a minute (the count bound scans an index).
        if ticks.is_multiple_of(AUDIT_PRUNE_TICKS) {
            match state.prune_audit().await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "audit records past their retention removed"),
                Err(error) => {
                    tracing::warn!(%error, "cannot prune the audit trail; retrying later")
                }
            }
        }
        ticks += 1;
        match state.run_scheduler_pass().await {
            Ok(report)
                if report.runs_created
                    + report.sent
                    + report.failed
                    + report.runs_started
                    + report.watches_refreshed
                    > 0
                    || report.keys_pruned > 0 =>
            {
                tracing::info!(
                    runs_created = report.runs_created,
                    sent = report.sent,
                    failed = report.failed,
                    keys_pruned = report.keys_pruned,
                    workflow_runs_started = report.runs_started,
                    watches_refreshed = report.watches_refreshed,
                    "scheduler pass"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "scheduler pass failed; retrying next tick"),
        }
    }
}

/// Every route of the server.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(runtime_api::routes())
        .merge(extensions::routes())
        .merge(knowledge::routes())
        .merge(admin_api::routes())
        .route("/health", axum::routing::get(health))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), front))
        .with_state(state)
}

/// Every request: audited (`audit`), outermost so that the record sees the final answer, a
/// handler's panic included; inside it observed (`wire::observe`). One layer, not two: each
/// `from_fn` layer boxes its service and its future per request.
async fn front(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    audit::recorded(&state, request, |request| {
        crate::wire::observe::observed(classify, request, |request| next.run(request))
    })
    .await
}

/// The route family of a server path, in the server's own terms, for the request span.
fn classify(path: &str) -> (&'static str, crate::wire::observe::Protocol) {
    let family = audit::family(path).unwrap_or("other");
    (family, crate::wire::observe::Protocol::Envelope)
}

/// `GET /health`: the server answers. No credential, nothing read, not audited: what a daemon's
/// `status` probes.
async fn health() -> crate::wire::Data {
    crate::wire::Data(serde_json::json!({ "status": "ok" }))
}

async fn not_found() -> Response {
    let error = crate::contract::ActionError::new(ErrorCode::NotFound, "no such route");
    let mut response = crate::wire::error_response(&error);
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}
