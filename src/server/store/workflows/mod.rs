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

use super::shape::{Query, Resource};
use super::{Page, Position, Store, StoreError, here};

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

/// What is listed by plan: runs and triggers.
pub(crate) trait OfPlan: Resource + serde::Serialize {}

impl Store {
    /// The workspace's runs or triggers, `updatedAt DESC, id DESC`: one plan's when `plan_id` is
    /// given, optionally in one status.
    pub(crate) async fn list_of_plan<R: OfPlan>(
        &self,
        workspace_id: &str,
        plan_id: Option<&str>,
        status: Option<&str>,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<R>, StoreError> {
        let alias = R::ALIAS;
        let query = Query::select::<R>(&format!("WHERE {alias}.workspace_id = $1"))
            .bind(workspace_id)
            .and_some(&format!("{alias}.plan_id"), plan_id)
            .and_some(&format!("{alias}.status"), status)
            .newest::<R>(after, limit);
        self.page(here!(), query, limit).await
    }
}
