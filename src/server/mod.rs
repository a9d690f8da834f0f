//! The reference AgentTeam Server: the product owner behind the bridge.
//!
//! It knows nothing of runtimes, token files or MCP. Daemons call its runtime action API as a
//! device of one human and act for that human's agents; every request is authorized here again
//! (workspace, agent ownership, and each locator's membership). An operator API sets up
//! workspaces, humans, agents, devices, channels and threads.
//!
//! - `state`: [`AppState`], what every handler shares, opened from a [`ServerConfig`] and closed.
//! - `lifecycle`: [`run`], one server's life on a listener (scheduler, router, shutdown, close).
//! - `routes`: [`router`], every route in one table, `GET /health` and the fallback.
//! - `front`: the one middleware layer around every request (audited, then observed).
//! - `scheduler`: the pass over work that comes due without a request, and its loop.
//! - `runtime_api`: the runtime action and tool routes, one per catalog action and server tool.
//! - `runtime_call`: the steps every runtime route takes (device authentication, idempotency).
//! - `snake_case_aliases`: the snake_case request field names accepted for the canonical ones.
//! - `actions`: the handlers of the catalog's server-owned actions and tools, one module a domain.
//! - `workflow`: the workflow run engine, a run's transitions without SQL.
//! - `knowledge`: the knowledge route, with Core's turn revalidation and the source grants.
//! - `extensions`: the extension host's routes and pull request watches.
//! - `extension_rules`: what a recorded extension definition must be, and the seeds.
//! - `provider`: the client of GitHub's and Gitea's pull request APIs.
//! - `admin_api`: the operator API, one module a noun.
//! - `audit`: the audit trail, its queue and its writer.
//! - `auth`: device credentials and the operator token.
//! - `cursor`: HMAC-tagged list cursors.
//! - `failure`: internal failures, logged with an incident id and answered generically.
//! - `store`: the only SQL, over SQLite or PostgreSQL.

pub(crate) mod actions;
mod admin_api;
mod audit;
mod auth;
pub mod cursor;
mod extension_rules;
mod extensions;
mod failure;
mod front;
mod human_api;
pub mod knowledge;
mod lifecycle;
pub mod provider;
mod routes;
mod runtime_api;
mod runtime_call;
mod scheduler;
mod snake_case_aliases;
mod state;
pub mod store;
pub mod workflow;

pub use auth::{DEVICE_CREDENTIAL_PREFIX, OPERATOR_TOKEN_PREFIX};
pub use lifecycle::run;
pub use routes::router;
pub use state::{AppState, CallerGate, ServerConfig, ServerError, Shared};
