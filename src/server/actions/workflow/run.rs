//! `workflow run`: list, show and read the logs of runs; start one from a trigger, cancel one.

use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::types::{WorkflowLogEntry, WorkflowRunInput, WorkflowRunOutput};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::actions::{Caller, page};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::{StartRefusal, run_contract, step_contract};
use crate::server::workflow::RunRecord;

pub async fn run(
    state: &AppState,
    caller: &Caller,
    input: WorkflowRunInput,
) -> ActionResult<WorkflowRunOutput> {
    match input {
        WorkflowRunInput::List {
            plan_id,
            status,
            limit,
            cursor,
        } => {
            let filter = page::Filter::of(caller, ActionId::WorkflowRun)
                .with("planId", &plan_id)
                .with("status", status);
            let status = status.map(|s| s.to_string());
            let listed = filter
                .page(state, cursor.as_ref(), limit, async |after, limit| {
                    state
                        .store
                        .list_of_plan::<RunRecord>(
                            &caller.workspace_id,
                            plan_id.as_deref().map(String::as_str),
                            status.as_deref(),
                            after.as_ref(),
                            limit,
                        )
                        .await
                })
                .await?;
            Ok(WorkflowRunOutput::List {
                has_more: listed.has_more(),
                runs: listed
                    .items
                    .iter()
                    .map(|r| run_contract(r).map_err(failure::store))
                    .collect::<ActionResult<_>>()?,
                next_cursor: listed.next_cursor,
            })
        }
        WorkflowRunInput::Show { run_id } => {
            let (run, steps) = state
                .store
                .run(&caller.workspace_id, &run_id)
                .await
                .found("workflow run", &run_id)?;
            Ok(WorkflowRunOutput::Show {
                run: run_contract(&run).map_err(failure::store)?,
                steps: steps
                    .iter()
                    .map(|s| step_contract(s).map_err(failure::store))
                    .collect::<ActionResult<_>>()?,
            })
        }
        WorkflowRunInput::Logs { run_id, section } => {
            let section = section.unwrap_or(0);
            let (entries, last) = state
                .store
                .run_log(&caller.workspace_id, &run_id, section)
                .await
                .found("workflow run", &run_id)?;
            if section > last {
                return Err(ActionError::new(
                    ErrorCode::ValidationFailed,
                    format!(
                        "the log of workflow run `{}` has sections 0 to {last}, not {section}",
                        run_id.as_str()
                    ),
                )
                .with_details(vec![ErrorDetail {
                    path: "/section".into(),
                    message: "no such section".into(),
                }]));
            }
            let entries = entries
                .iter()
                .map(|entry| {
                    serde_json::from_value::<WorkflowLogEntry>(entry.to_json())
                        .map_err(|error| failure::saying("a stored log entry is damaged", error))
                })
                .collect::<ActionResult<Vec<_>>>()?;
            let has_more = section < last;
            Ok(WorkflowRunOutput::Logs {
                run_id,
                section: section as u64,
                entries,
                has_more,
                next_section: has_more
                    .then(|| std::num::NonZeroU64::new(section as u64 + 1))
                    .flatten(),
            })
        }
        WorkflowRunInput::Start {
            trigger_id,
            request_id: _,
        } => {
            let started = state
                .store
                .start_run(
                    &caller.workspace_id,
                    &trigger_id,
                    &caller.agent_id,
                    caller.now_ms,
                )
                .await
                .found("workflow trigger", &trigger_id)?;
            let started = started.map_err(|refusal| match refusal {
                StartRefusal::Trigger(status) => ActionError::new(
                    ErrorCode::InvalidState,
                    format!(
                        "workflow trigger `{}` is {status}: only an enabled trigger starts runs",
                        trigger_id.as_str()
                    ),
                )
                .with_next("enable it with `workflow trigger` and the `enable` operation"),
                StartRefusal::PlanArchived => ActionError::new(
                    ErrorCode::InvalidState,
                    format!(
                        "the plan of workflow trigger `{}` is archived",
                        trigger_id.as_str()
                    ),
                ),
                StartRefusal::Unpublished => ActionError::new(
                    ErrorCode::InvalidState,
                    format!(
                        "the plan of workflow trigger `{}` has no published version",
                        trigger_id.as_str()
                    ),
                )
                .with_next("publish the plan with `workflow plan` and the `publish` operation"),
            })?;
            Ok(WorkflowRunOutput::Start {
                run: run_contract(&started.run).map_err(failure::store)?,
            })
        }
        WorkflowRunInput::Cancel {
            run_id,
            reason,
            request_id: _,
        } => {
            let reason = reason.map(|r| r.to_string());
            let (_, run) = state
                .store
                .change_run(&caller.workspace_id, &run_id, caller.now_ms, |run| {
                    run.cancel(reason.as_deref())
                })
                .await
                .found("workflow run", &run_id)??;
            Ok(WorkflowRunOutput::Cancel {
                run: run_contract(&run.run).map_err(failure::store)?,
            })
        }
    }
}
