//! AgentTeam: the outbound tool bridge that lets locally running agent runtimes call back into
//! their team's workspace.
//!
//! # Layout
//!
//! - [`contract`]: everything generated from `schema/` (types, the descriptor catalog, the typed
//!   handler traits, the result budget) and the hand-written envelopes and validators around it.
//!   It knows nothing about transports.
//! - [`daemon`]: the per-user loopback daemon: runtime launches and credentials, the Exec and MCP
//!   route families, the local admin API.
//! - [`server`]: the reference AgentTeam Server (store, authorization, runtime and operator APIs).
//! - [`client`]: the daemon's typed client of the server, and the one way every client of ours is
//!   built (no proxy from the environment, bounded answers).
//! - [`wire`]: what every HTTP service shares: envelopes, bodies, bearer, idempotency selectors,
//!   the request span and incident ids, the `run` frame codec; [`serve`]: the hyper accept loop.
//! - [`cli`]: the `agentteam` command line, a thin front over the library.
//! - [`telemetry`]: OpenTelemetry traces of every runtime call, in the daemon and the server,
//!   exported over OTLP when the standard `OTEL_*` variables name a collector.
//! - [`token`]: `agentteam token analyze`, the local read-only diagnostic of what AgentTeam costs
//!   an agent's context, from the runtimes' own session records.
//! - [`clock`]: the injected wall clock; [`private_file`]: the one writer of owner-only files;
//!   [`search`]: the text segmentation both full-text owners share (words, CJK bigrams).
//!
//! The contract pipeline is `schema/` → `build.rs` + `codegen/` → `OUT_DIR` (included here) and
//! `generated/` (the committed mirror, kept fresh by a test). ARCHITECTURE.md has the codemap.
//!
//! # Platforms
//!
//! Linux only: credential files rely on Unix owner-only modes and ownership, runtimes on process
//! groups, signals and `/proc`, the state directory on `flock`, and the spec's Windows DACL for
//! token files is not implemented. A build for any other target stops here, saying so.

#[cfg(not(target_os = "linux"))]
compile_error!(
    "agentteam supports Linux only: its credential files rely on Unix owner-only modes and \
     ownership, its runtimes on process groups, signals and /proc, and the spec's Windows DACL \
     for token files is not implemented"
);

pub mod cli;
pub mod client;
pub mod clock;
pub mod contract;
pub mod daemon;
#[doc(hidden)]
pub mod fuzzing;
/// The one seam to the operating system: every Unix-only call the crate makes is made there.
pub mod platform;
pub mod private_file;
pub mod search;
pub mod serve;
pub mod server;
pub mod telemetry;
pub mod token;
pub mod wire;
