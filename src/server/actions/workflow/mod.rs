//! `workflow` actions: `plan`, `trigger`, `run` and `step`, each a closed union of operations
//! (`operation` picks one; the catalog knows which are reads and which have side effects).
//!
//! Workflows are workspace-wide, like projects: every agent of the workspace sees and drives them.
//! Plans are versioned step definitions: steps go into a draft version, publishing freezes it,
//! and a change after a publish starts the next draft. Triggers start runs of the published
//! version (`run start`, or the scheduler for a scheduled trigger). A run's steps move through the
//! engine in `server/workflow.rs`; every refused transition is `invalid_state`.
//!
//! One module per action: [`plan`], [`trigger`], [`run`], [`step`]; this one holds what more than
//! one of them checks (a visible plan, an archived plan, a revision, a definition's problems) and
//! [`step_readable`], which the operator's approval decision uses too.

mod plan;
mod run;
mod step;
mod trigger;

pub use plan::plan;
pub use run::run;
pub use step::step;
pub use trigger::trigger;

use super::{Caller, read_name};
use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::types::{
    ValidationReport, WorkflowPlan, WorkflowPlanStatus, WorkflowStepOutput,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::step_contract;

async fn find_plan(state: &AppState, caller: &Caller, plan_id: &str) -> ActionResult<WorkflowPlan> {
    state
        .store
        .plan(&caller.workspace_id, plan_id)
        .await
        .found("workflow plan", plan_id)
}

/// Whether `workflow step get` can return the step as it would be.
pub(crate) fn step_readable(
    step: &crate::server::workflow::StepRecord,
    fields: &[(String, Option<&str>)],
) -> ActionResult<()> {
    crate::contract::budget::readable(
        &read_name(ActionId::WorkflowStep, Some("get")),
        &WorkflowStepOutput::Get {
            step: step_contract(step).map_err(failure::store)?,
        },
        fields,
    )
}

fn refuse_archived_plan(plan: &WorkflowPlan, verb: &str) -> ActionResult<()> {
    match plan.status {
        WorkflowPlanStatus::Archived => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!(
                "workflow plan `{}` is archived and cannot be {verb}",
                plan.id.as_str()
            ),
        )),
        WorkflowPlanStatus::Active => Ok(()),
    }
}

fn check_revision(what: &str, id: &str, current: u64, expected: Option<u64>) -> ActionResult<()> {
    match expected {
        Some(expected) if expected != current => Err(ActionError::new(
            ErrorCode::RevisionMismatch,
            format!("{what} `{id}` is at revision {current}, not {expected}"),
        )
        .with_next("read it again and reapply the change")),
        _ => Ok(()),
    }
}

/// Problems as a validation report (bounded by the schema's 32).
fn report(problems: Vec<(String, String)>) -> ActionResult<ValidationReport> {
    let problems: Vec<serde_json::Value> = problems
        .into_iter()
        .take(32)
        .map(|(path, message)| serde_json::json!({ "path": path, "message": message }))
        .collect();
    serde_json::from_value(serde_json::Value::Array(problems)).map_err(|error| {
        failure::saying("the server could not report the validation problems", error)
    })
}

/// A definition with problems is a validation failure naming each.
fn refuse_problems(problems: Vec<(String, String)>) -> ActionResult<()> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(ActionError::new(
        ErrorCode::ValidationFailed,
        format!("{} problem(s) in the definition", problems.len()),
    )
    .with_details(
        problems
            .into_iter()
            .take(32)
            .map(|(path, message)| ErrorDetail { path, message })
            .collect(),
    ))
}
