//! Local agent profiles: the daemon-owned `agent` domain.
//!
//! - `profile`: what a profile stores, what is secret, and the safe projection a model sees;
//! - `store`: the owner-only files under `<state dir>/agents/`, the collection revision;
//! - `cursor`: the `a2` cursors of `agent list`;
//! - `owner`: the `DaemonActionHandler` for runtimes and the same operations for the human CLI.

pub mod cursor;
pub mod owner;
pub mod profile;
pub mod store;
