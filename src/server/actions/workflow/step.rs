//! `workflow step`: list and get a run's steps, and move the current one on (complete, fail,
//! pause, park) through the engine's transitions.

use super::step_readable;
use crate::contract::types::{WorkflowStepInput, WorkflowStepOutput};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::actions::{Caller, not_found, page};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::step_contract;

/// A step transition: which one, and its arguments.
enum Transition {
    Complete {
        output: Option<String>,
        log: Option<String>,
    },
    Fail {
        reason: String,
        log: Option<String>,
    },
    Pause {
        reason: Option<String>,
    },
    Park {
        reason: Option<String>,
    },
}

pub async fn step(
    state: &AppState,
    caller: &Caller,
    input: WorkflowStepInput,
) -> ActionResult<WorkflowStepOutput> {
    let (step_id, transition) = match input {
        WorkflowStepInput::List {
            run_id,
            status,
            limit,
            cursor,
        } => {
            let filter = page::Filter::of(caller, ActionId::WorkflowStep)
                .with("runId", &run_id)
                .with("status", status);
            let status = status.map(|s| s.to_string());
            let listed = filter
                .page(state, cursor.as_ref(), limit, async |after, limit| {
                    state
                        .store
                        .list_steps(
                            &caller.workspace_id,
                            &run_id,
                            status.as_deref(),
                            after.as_ref(),
                            limit,
                        )
                        .await
                        .found("workflow run", &run_id)
                })
                .await?;
            return Ok(WorkflowStepOutput::List {
                has_more: listed.has_more(),
                steps: listed
                    .items
                    .iter()
                    .map(|s| step_contract(s).map_err(failure::store))
                    .collect::<ActionResult<_>>()?,
                next_cursor: listed.next_cursor,
            });
        }
        WorkflowStepInput::Get { step_id } => {
            let step = state
                .store
                .step(&caller.workspace_id, &step_id)
                .await
                .found("workflow step", &step_id)?;
            return Ok(WorkflowStepOutput::Get {
                step: step_contract(&step).map_err(failure::store)?,
            });
        }
        WorkflowStepInput::Complete {
            step_id,
            output,
            log,
            request_id: _,
        } => (
            step_id,
            Transition::Complete {
                output: output.map(|o| o.to_string()),
                log: log.map(|l| l.to_string()),
            },
        ),
        WorkflowStepInput::Fail {
            step_id,
            reason,
            log,
            request_id: _,
        } => (
            step_id,
            Transition::Fail {
                reason: reason.to_string(),
                log: log.map(|l| l.to_string()),
            },
        ),
        WorkflowStepInput::Pause {
            step_id,
            reason,
            request_id: _,
        } => (
            step_id,
            Transition::Pause {
                reason: reason.map(|r| r.to_string()),
            },
        ),
        WorkflowStepInput::Park {
            step_id,
            reason,
            request_id: _,
        } => (
            step_id,
            Transition::Park {
                reason: reason.map(|r| r.to_string()),
            },
        ),
    };
    let found = state
        .store
        .step(&caller.workspace_id, &step_id)
        .await
        .found("workflow step", &step_id)?;
    let (index, run) = state
        .store
        .change_run(&caller.workspace_id, &found.run_id, caller.now_ms, |run| {
            let index = run
                .step_index(&step_id)
                .ok_or_else(|| not_found("workflow step", &step_id))?;
            let field = match &transition {
                Transition::Complete { output, log } => {
                    run.complete_step(index, output.as_deref(), log.as_deref())?;
                    ("/output", output.as_deref())
                }
                Transition::Fail { reason, log } => {
                    run.fail_step(index, reason, log.as_deref())?;
                    ("/reason", Some(reason.as_str()))
                }
                Transition::Pause { reason } => {
                    run.pause_step(index, reason.as_deref())?;
                    ("/reason", reason.as_deref())
                }
                Transition::Park { reason } => {
                    run.park_step(index, reason.as_deref())?;
                    ("/reason", reason.as_deref())
                }
            };
            // Nothing is written unless `step get` can then return the step.
            step_readable(&run.steps[index], &[(field.0.to_string(), field.1)])?;
            Ok::<_, ActionError>(index)
        })
        .await
        .found("workflow step", &step_id)??;
    let step = step_contract(&run.steps[index]).map_err(failure::store)?;
    Ok(answer_of(&transition, step))
}

/// A transition's answer: the changed step under the operation's name.
fn answer_of(
    transition: &Transition,
    step: crate::contract::types::WorkflowStep,
) -> WorkflowStepOutput {
    match transition {
        Transition::Complete { .. } => WorkflowStepOutput::Complete { step },
        Transition::Fail { .. } => WorkflowStepOutput::Fail { step },
        Transition::Pause { .. } => WorkflowStepOutput::Pause { step },
        Transition::Park { .. } => WorkflowStepOutput::Park { step },
    }
}
