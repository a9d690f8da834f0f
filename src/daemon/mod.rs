//! The desktop daemon: one per user and state directory, loopback only.
//!
//! It owns runtime launches and their credentials, serves the Exec and MCP route families and a
//! small admin API, and talks to an AgentTeam Server over HTTP: the one at `--server-url`, or (the
//! embedded default) a reference server it runs in-process on `<state dir>/server.db`, still
//! behind a loopback HTTP hop.
//!
//! # Layout
//!
//! - [`app`]: configuration, start-up order and shutdown; [`error`]: why it cannot start.
//! - [`routes`]: the loopback router that mounts [`exec`], [`mcp`] and [`admin`]; [`call`]: the
//!   call core both runtime bridges hand a call to (validation, selector, owner, output check).
//! - [`state`]: what every handler shares; [`access`]: verify, bind and admit a runtime request.
//! - [`auth`]: the runtime authorization store, tokens and credential files.
//! - [`runtime`]: launches, sessions, rotation and end of life; [`launch`]: a launch's checks and
//!   driver, the one path of `agentteam run` and of a delivered run.
//! - [`agents`]: local agent profiles (the daemon-owned `agent` domain); [`identity`]: the
//!   daemon's identity on its server.
//! - [`memory`]: the agents' memory directories and the index behind `memory_search`;
//!   [`extensions`]: the pinned extension definitions.
//! - [`person`]: who may act as the person or the operator (no process of a runtime).
//! - [`feed`]: the person's event feed, followed once; [`console`]: the person's pages, on a
//!   loopback listener and origin of their own; [`deliver`]: agents' launch recipes and a run
//!   started for each delivery of a hosted agent.

pub mod access;
pub mod admin;
pub mod agents;
pub mod app;
pub mod auth;
pub mod call;
pub mod console;
pub mod deliver;
pub mod error;
pub mod exec;
pub mod extensions;
pub mod feed;
pub mod identity;
pub mod launch;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod person;
pub mod refusals;
pub mod routes;
pub mod runtime;
pub mod state;

pub use app::{
    ADMIN_TOKEN_FILE, ARGS_FILE, DAEMON_FILE, DEFAULT_ROTATION_TICK, DEFAULT_TOKEN_TTL,
    DaemonConfig, EMBEDDED_OPERATOR_TOKEN_FILE, EmbeddedHop, default_runtime_dir,
    default_state_dir, run,
};
pub use error::DaemonError;
