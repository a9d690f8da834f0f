//! Workflows: plans and their versions, triggers, runs with their steps and logs, and the
//! scheduler's firing of scheduled triggers.
//!
//! A run is loaded and saved whole (`load_run!`/`save_run!`, one transaction, the run's row locked
//! first on PostgreSQL) around a transition of the engine (`server/workflow.rs`), which decides
//! everything without SQL. Plans and triggers follow the read-decide-write pattern of the other
//! domains, their row locked on PostgreSQL.
//!
//! One module per table family: [`plans`] (plans and versions), [`triggers`], [`runs`] (runs, their
//! logs, the scheduler's firing, approval decisions) and [`steps`]; this one holds the row helpers
//! they share.

mod plans;
mod runs;
mod steps;
mod triggers;

pub use plans::PlanChange;
pub use runs::{DecideRefusal, StartRefusal, run_contract};
pub use steps::step_contract;
pub use triggers::{TriggerChange, TriggerRecord};

use serde_json::Value;

use super::{Position, StoreError};

/// A contract value from a row built as JSON: the contract's own checks decide if it is intact.
fn decode<T: serde::de::DeserializeOwned>(
    value: Value,
    what: &'static str,
) -> Result<T, StoreError> {
    serde_json::from_value(value).map_err(|_| StoreError::Corrupt { column: what })
}

fn parse_enum<T: std::str::FromStr>(text: String, what: &'static str) -> Result<T, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt { column: what })
}

/// Inserts `value` under `key` when it is `Some`.
fn put(object: &mut Value, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        object[key] = value;
    }
}

/// `(i64::MAX, U+10FFFF)` is above every row: one descending keyset query serves the first page
/// and the next.
fn upper_bound(after: Option<&Position>) -> (i64, String) {
    match after {
        Some(p) => (p.at_ms, p.id.clone()),
        None => (i64::MAX, "\u{10FFFF}".to_string()),
    }
}
