//! `workflow plan`: list, show, version and validate plans; create, update, archive and publish
//! them. A change to the steps goes into the draft version; publishing freezes it.

use crate::server::actions::Found;
use std::collections::BTreeMap;

use super::{check_revision, find_plan, refuse_archived_plan, refuse_problems, report};
use crate::contract::error::ErrorCode;
use crate::contract::types::{
    PlanStepDefinition, PlanVersionState, WorkflowPlan, WorkflowPlanInput, WorkflowPlanOutput,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::{Caller, page, read_name};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::PlanChange;

pub async fn plan(
    state: &AppState,
    caller: &Caller,
    input: WorkflowPlanInput,
) -> ActionResult<WorkflowPlanOutput> {
    match input {
        WorkflowPlanInput::List {
            status,
            limit,
            cursor,
        } => {
            let filter = page::Filter::of(caller, ActionId::WorkflowPlan).with("status", status);
            let status = status.map(|s| s.to_string());
            let listed = filter
                .page(state, cursor.as_ref(), limit, async |after, limit| {
                    let status = status.as_deref();
                    state
                        .store
                        .list_plans(&caller.workspace_id, status, after.as_ref(), limit)
                        .await
                })
                .await?;
            Ok(WorkflowPlanOutput::List {
                has_more: listed.has_more(),
                next_cursor: listed.next_cursor,
                plans: listed.items,
            })
        }
        WorkflowPlanInput::Show { plan_id } => {
            let plan = find_plan(state, caller, &plan_id).await?;
            let latest = state
                .store
                .plan_version(
                    &caller.workspace_id,
                    &plan_id,
                    plan.latest_version.get() as i64,
                )
                .await
                .found("workflow plan", &plan_id)?;
            Ok(WorkflowPlanOutput::Show { plan, latest })
        }
        WorkflowPlanInput::Version { plan_id, version } => {
            let found = state
                .store
                .plan_version(&caller.workspace_id, &plan_id, version.get() as i64)
                .await
                .map_err(failure::store)?;
            match found {
                Some(version) => Ok(WorkflowPlanOutput::Version { version }),
                None => {
                    let plan = find_plan(state, caller, &plan_id).await?;
                    Err(ActionError::new(
                        ErrorCode::NotFound,
                        format!(
                            "workflow plan `{}` has versions 1 to {}, not {version}",
                            plan_id.as_str(),
                            plan.latest_version
                        ),
                    ))
                }
            }
        }
        WorkflowPlanInput::Validate { steps } => {
            let problems = step_problems(&steps);
            Ok(WorkflowPlanOutput::Validate {
                valid: problems.is_empty(),
                problems: report(problems)?,
            })
        }
        WorkflowPlanInput::Create {
            name,
            description,
            steps,
            request_id: _,
        } => {
            refuse_problems(step_problems(&steps))?;
            let fields = plan_fields(
                Some(&name),
                description.as_deref().map(String::as_str),
                Some(&steps),
            );
            let plan = state
                .store
                .insert_plan(
                    &caller.workspace_id,
                    &name,
                    description.as_deref().map(String::as_str),
                    &steps,
                    &caller.agent_id,
                    caller.now_ms,
                    |plan, latest| plan_readable(plan, latest, &fields),
                )
                .await
                .map_err(failure::store)??;
            Ok(WorkflowPlanOutput::Create { plan })
        }
        WorkflowPlanInput::Update {
            plan_id,
            name,
            description,
            steps,
            expected_revision,
            request_id: _,
        } => {
            if name.is_none() && description.is_none() && steps.is_none() {
                return Err(ActionError::new(
                    ErrorCode::ValidationFailed,
                    "nothing to update: give `name`, `description` or `steps`",
                ));
            }
            if let Some(steps) = &steps {
                refuse_problems(step_problems(steps))?;
            }
            let fields = plan_fields(
                name.as_deref().map(String::as_str),
                description.as_deref().map(String::as_str),
                steps.as_ref(),
            );
            let plan = change_plan(state, caller, &plan_id, &fields, |current, _| {
                refuse_archived_plan(current, "changed")?;
                check_revision(
                    "workflow plan",
                    current.id.as_str(),
                    current.revision.get(),
                    expected_revision.map(|r| r.get()),
                )?;
                Ok(PlanChange {
                    name: name.as_ref().unwrap_or(&current.name).to_string(),
                    description: description
                        .as_ref()
                        .map(|d| d.to_string())
                        .or_else(|| current.description.as_ref().map(|d| d.to_string())),
                    status: "active".into(),
                    steps: steps.clone(),
                    publish: false,
                })
            })
            .await?;
            Ok(WorkflowPlanOutput::Update { plan })
        }
        WorkflowPlanInput::Archive {
            plan_id,
            request_id: _,
        } => {
            let plan = change_plan(state, caller, &plan_id, &[], |current, _| {
                refuse_archived_plan(current, "archived again")?;
                Ok(unchanged(current, "archived", false))
            })
            .await?;
            Ok(WorkflowPlanOutput::Archive { plan })
        }
        WorkflowPlanInput::Publish {
            plan_id,
            request_id: _,
        } => {
            let plan = change_plan(state, caller, &plan_id, &[], |current, latest| {
                refuse_archived_plan(current, "published")?;
                if latest.state == PlanVersionState::Published {
                    return Err(ActionError::new(
                        ErrorCode::InvalidState,
                        format!(
                            "version {} of workflow plan `{}` is already published",
                            latest.version,
                            current.id.as_str()
                        ),
                    )
                    .with_next("change the steps with the `update` operation to start the next draft, then publish it"));
                }
                Ok(unchanged(current, "active", true))
            })
            .await?;
            Ok(WorkflowPlanOutput::Publish { plan })
        }
    }
}

/// Changes the plan in one transaction, refusing (before anything is written) a change after
/// which `workflow plan show` could not return it; `fields` are the request's text fields it
/// stores, by JSON pointer.
async fn change_plan(
    state: &AppState,
    caller: &Caller,
    plan_id: &str,
    fields: &[(String, Option<&str>)],
    change: impl FnOnce(
        &WorkflowPlan,
        &crate::contract::types::WorkflowPlanVersion,
    ) -> ActionResult<PlanChange>,
) -> ActionResult<WorkflowPlan> {
    state
        .store
        .change_plan(
            &caller.workspace_id,
            plan_id,
            caller.now_ms,
            change,
            |plan, latest| plan_readable(plan, latest, fields),
        )
        .await
        .found("workflow plan", plan_id)?
}

/// Whether `workflow plan show` can return the plan and its latest version as they would be.
fn plan_readable(
    plan: &WorkflowPlan,
    latest: &crate::contract::types::WorkflowPlanVersion,
    fields: &[(String, Option<&str>)],
) -> ActionResult<()> {
    crate::contract::budget::readable(
        &read_name(ActionId::WorkflowPlan, Some("show")),
        &WorkflowPlanOutput::Show {
            plan: plan.clone(),
            latest: latest.clone(),
        },
        fields,
    )
}

/// The text fields a plan write stores, by their pointers in its request.
fn plan_fields<'a>(
    name: Option<&'a str>,
    description: Option<&'a str>,
    steps: Option<&'a crate::contract::types::PlanSteps>,
) -> Vec<(String, Option<&'a str>)> {
    let mut fields = vec![
        ("/name".to_string(), name),
        ("/description".to_string(), description),
    ];
    for (index, step) in steps.into_iter().flat_map(|s| s.iter()).enumerate() {
        fields.push((format!("/steps/{index}/title"), Some(step.title.as_str())));
        fields.push((
            format!("/steps/{index}/instructions"),
            step.instructions.as_deref().map(String::as_str),
        ));
    }
    fields
}

/// The plan as it is, in `status`, published or not.
fn unchanged(plan: &WorkflowPlan, status: &str, publish: bool) -> PlanChange {
    PlanChange {
        name: plan.name.to_string(),
        description: plan.description.as_ref().map(|d| d.to_string()),
        status: status.into(),
        steps: None,
        publish,
    }
}

/// What the schema cannot say about a plan's steps: each key is used once.
fn step_problems(steps: &[PlanStepDefinition]) -> Vec<(String, String)> {
    let mut first: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        if let Some(earlier) = first.insert(step.key.as_str(), index) {
            first.insert(step.key.as_str(), earlier);
            problems.push((
                format!("/steps/{index}/key"),
                format!(
                    "key `{}` is already the key of step {earlier}",
                    step.key.as_str()
                ),
            ));
        }
    }
    problems
}
