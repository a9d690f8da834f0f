//! AgentTeam: the outbound tool bridge that lets locally running agent runtimes call back into
//! their team's workspace.
//!
//! # Layout
//!
//! - [`contract`]: everything generated from `schema/` (types, the descriptor catalog, the typed
//!   handler trait) and the hand-written envelopes and validators around it. It knows nothing
//!   about transports.
//! - [`server`]: the reference AgentTeam Server (store, authorization, runtime action API).
//! - [`serve`]: the hyper accept loop every HTTP service runs on; [`wire`]: envelopes and bodies.
//! - [`cli`]: the `agentteam` command line, a thin front over the library.
//!
//! The contract pipeline is `schema/` → `build.rs` + `codegen/` → `OUT_DIR` (included here) and
//! `generated/` (the committed mirror, kept fresh by a test). ARCHITECTURE.md has the codemap.

pub mod cli;
pub mod client;
pub mod clock;
pub mod contract;
pub mod daemon;
pub mod private_file;
pub mod serve;
pub mod server;
pub mod wire;
