//! `workflow` actions: `plan`, `trigger`, `run` and `step`, each a closed union of operations
//! (`operation` picks one; the catalog knows which are reads and which have side effects).
//!
//! Workflows are workspace-wide, like projects: every agent of the workspace sees and drives them.
//! Plans are versioned step definitions: steps go into a draft version, publishing freezes it,
//! and a change after a publish starts the next draft. Triggers start runs of the published
//! version (`run start`, or the scheduler for a scheduled trigger). A run's steps move through the
//! engine in `server/workflow.rs`; every refused transition is `invalid_state`.

use std::collections::BTreeMap;

use super::{Caller, not_found, page};
use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::types::{
    PlanStepDefinition, PlanVersionState, TriggerKind, TriggerStatus, ValidationReport,
    WorkflowLogEntry, WorkflowPlan, WorkflowPlanInput, WorkflowPlanOutput, WorkflowPlanStatus,
    WorkflowRunInput, WorkflowRunOutput, WorkflowStepInput, WorkflowStepOutput,
    WorkflowTriggerInput, WorkflowTriggerOutput,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::{
    PlanChange, StartRefusal, TriggerChange, TriggerRecord, run_contract, step_contract,
};

// ---------------------------------------------------------------------------------------------
// plan

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
            let listed = page::list(
                state,
                &filter,
                cursor.as_ref(),
                page::limit(limit),
                async |after, limit| {
                    let status = status.as_deref();
                    state
                        .store
                        .list_plans(&caller.workspace_id, status, after.as_ref(), limit)
                        .await
                },
            )
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
                .map_err(failure::store)?
                .ok_or_else(|| not_found("workflow plan", &plan_id))?;
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

async fn find_plan(state: &AppState, caller: &Caller, plan_id: &str) -> ActionResult<WorkflowPlan> {
    state
        .store
        .plan(&caller.workspace_id, plan_id)
        .await
        .map_err(failure::store)?
        .ok_or_else(|| not_found("workflow plan", plan_id))
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
        .map_err(failure::store)?
        .ok_or_else(|| not_found("workflow plan", plan_id))?
}

/// Whether `workflow step get` can return the step as it would be.
pub(crate) fn step_readable(
    step: &super::super::workflow::StepRecord,
    fields: &[(String, Option<&str>)],
) -> ActionResult<()> {
    crate::contract::budget::readable(
        "workflow step get",
        &WorkflowStepOutput::Get {
            step: step_contract(step).map_err(failure::store)?,
        },
        fields,
    )
}

/// Whether `workflow plan show` can return the plan and its latest version as they would be.
fn plan_readable(
    plan: &WorkflowPlan,
    latest: &crate::contract::types::WorkflowPlanVersion,
    fields: &[(String, Option<&str>)],
) -> ActionResult<()> {
    crate::contract::budget::readable(
        "workflow plan show",
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

// ---------------------------------------------------------------------------------------------
// trigger

/// A trigger definition as given, before it is checked.
struct Definition<'a> {
    kind: TriggerKind,
    start_at: Option<&'a crate::contract::types::Timestamp>,
    every_minutes: Option<i64>,
}

/// What `create` (and `validate`) refuses in a trigger definition for `plan`.
fn trigger_problems(
    plan: Option<&WorkflowPlan>,
    plan_id: &str,
    definition: &Definition<'_>,
    now_ms: i64,
) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    match plan {
        None => problems.push((
            "/planId".to_string(),
            format!("no workflow plan `{plan_id}` is visible to this agent"),
        )),
        Some(plan) if plan.status == WorkflowPlanStatus::Archived => problems.push((
            "/planId".to_string(),
            format!("workflow plan `{plan_id}` is archived"),
        )),
        Some(_) => {}
    }
    problems.extend(schedule_problems(definition, now_ms));
    problems
}

fn schedule_problems(definition: &Definition<'_>, now_ms: i64) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    match definition.kind {
        TriggerKind::Manual => {
            for (field, given) in [
                ("startAt", definition.start_at.is_some()),
                ("everyMinutes", definition.every_minutes.is_some()),
            ] {
                if given {
                    problems.push((
                        format!("/{field}"),
                        format!("a manual trigger has no `{field}`"),
                    ));
                }
            }
        }
        TriggerKind::Scheduled => match definition.start_at {
            None => problems.push((
                "/startAt".to_string(),
                "a scheduled trigger needs `startAt`".to_string(),
            )),
            Some(at) if at.timestamp_millis() <= now_ms => problems.push((
                "/startAt".to_string(),
                "`startAt` must be in the future".to_string(),
            )),
            Some(_) => {}
        },
    }
    problems
}

pub async fn trigger(
    state: &AppState,
    caller: &Caller,
    input: WorkflowTriggerInput,
) -> ActionResult<WorkflowTriggerOutput> {
    match input {
        WorkflowTriggerInput::List {
            plan_id,
            status,
            limit,
            cursor,
        } => {
            let filter = page::Filter::of(caller, ActionId::WorkflowTrigger)
                .with("planId", &plan_id)
                .with("status", status);
            let status = status.map(|s| s.to_string());
            let listed = page::list(
                state,
                &filter,
                cursor.as_ref(),
                page::limit(limit),
                async |after, limit| {
                    state
                        .store
                        .list_triggers(
                            &caller.workspace_id,
                            plan_id.as_deref().map(String::as_str),
                            status.as_deref(),
                            after.as_ref(),
                            limit,
                        )
                        .await
                },
            )
            .await?;
            Ok(WorkflowTriggerOutput::List {
                has_more: listed.has_more(),
                triggers: contracts(&listed.items)?,
                next_cursor: listed.next_cursor,
            })
        }
        WorkflowTriggerInput::Show { trigger_id } => {
            let trigger = state
                .store
                .trigger(&caller.workspace_id, &trigger_id)
                .await
                .map_err(failure::store)?
                .ok_or_else(|| not_found("workflow trigger", &trigger_id))?;
            Ok(WorkflowTriggerOutput::Show {
                trigger: trigger.to_contract().map_err(failure::store)?,
            })
        }
        WorkflowTriggerInput::Validate {
            plan_id,
            kind,
            start_at,
            every_minutes,
        } => {
            let plan = state
                .store
                .plan(&caller.workspace_id, &plan_id)
                .await
                .map_err(failure::store)?;
            let definition = Definition {
                kind,
                start_at: start_at.as_ref(),
                every_minutes: every_minutes.map(|m| m.0),
            };
            let problems = trigger_problems(plan.as_ref(), &plan_id, &definition, caller.now_ms);
            Ok(WorkflowTriggerOutput::Validate {
                valid: problems.is_empty(),
                problems: report(problems)?,
            })
        }
        WorkflowTriggerInput::Create {
            plan_id,
            name,
            kind,
            start_at,
            every_minutes,
            request_id: _,
        } => {
            let plan = find_plan(state, caller, &plan_id).await?;
            refuse_archived_plan(&plan, "given a trigger")?;
            let definition = Definition {
                kind,
                start_at: start_at.as_ref(),
                every_minutes: every_minutes.map(|m| m.0),
            };
            refuse_problems(schedule_problems(&definition, caller.now_ms))?;
            let every_minutes = definition.every_minutes;
            let start_at = start_at.map(|at| at.timestamp_millis());
            let created = state
                .store
                .insert_trigger(
                    &caller.workspace_id,
                    &plan_id,
                    &TriggerChange {
                        name: name.to_string(),
                        status: "enabled".into(),
                        start_at,
                        every_minutes,
                        next_fire_at: start_at,
                    },
                    &kind.to_string(),
                    &caller.agent_id,
                    caller.now_ms,
                )
                .await
                .map_err(failure::store)?;
            Ok(WorkflowTriggerOutput::Create {
                trigger: created.to_contract().map_err(failure::store)?,
            })
        }
        WorkflowTriggerInput::Update {
            trigger_id,
            name,
            start_at,
            every_minutes,
            expected_revision,
            request_id: _,
        } => {
            if name.is_none() && start_at.is_none() && every_minutes.is_none() {
                return Err(ActionError::new(
                    ErrorCode::ValidationFailed,
                    "nothing to update: give `name`, `startAt` or `everyMinutes`",
                ));
            }
            let now_ms = caller.now_ms;
            let changed = change_trigger(state, caller, &trigger_id, |current| {
                refuse_archived_trigger(current, "changed")?;
                check_revision(
                    "workflow trigger",
                    &current.id,
                    current.revision as u64,
                    expected_revision.map(|r| r.get()),
                )?;
                let kind: TriggerKind = current
                    .kind
                    .parse()
                    .map_err(|error| failure::saying("a stored trigger is damaged", error))?;
                let schedule_given = start_at.is_some() || every_minutes.is_some();
                if kind == TriggerKind::Manual && schedule_given {
                    refuse_problems(schedule_problems(
                        &Definition {
                            kind,
                            start_at: start_at.as_ref(),
                            every_minutes: every_minutes.as_ref().map(|m| m.0),
                        },
                        now_ms,
                    ))?;
                }
                if let Some(at) = &start_at
                    && at.timestamp_millis() <= now_ms
                {
                    refuse_problems(vec![(
                        "/startAt".into(),
                        "`startAt` must be in the future".into(),
                    )])?;
                }
                let new_start = start_at.map(|at| at.timestamp_millis());
                Ok(TriggerChange {
                    name: name
                        .as_ref()
                        .map_or_else(|| current.name.clone(), |n| n.to_string()),
                    status: current.status.clone(),
                    start_at: new_start.or(current.start_at),
                    every_minutes: every_minutes.map(|m| m.0).or(current.every_minutes),
                    next_fire_at: new_start.or(current.next_fire_at),
                })
            })
            .await?;
            Ok(WorkflowTriggerOutput::Update { trigger: changed })
        }
        WorkflowTriggerInput::Enable {
            trigger_id,
            request_id: _,
        } => {
            let changed = change_trigger(state, caller, &trigger_id, |current| {
                set_trigger_status(current, TriggerStatus::Disabled, "enabled")
            })
            .await?;
            Ok(WorkflowTriggerOutput::Enable { trigger: changed })
        }
        WorkflowTriggerInput::Disable {
            trigger_id,
            request_id: _,
        } => {
            let changed = change_trigger(state, caller, &trigger_id, |current| {
                set_trigger_status(current, TriggerStatus::Enabled, "disabled")
            })
            .await?;
            Ok(WorkflowTriggerOutput::Disable { trigger: changed })
        }
        WorkflowTriggerInput::Archive {
            trigger_id,
            request_id: _,
        } => {
            let changed = change_trigger(state, caller, &trigger_id, |current| {
                refuse_archived_trigger(current, "archived again")?;
                Ok(TriggerChange {
                    name: current.name.clone(),
                    status: "archived".into(),
                    start_at: current.start_at,
                    every_minutes: current.every_minutes,
                    next_fire_at: None,
                })
            })
            .await?;
            Ok(WorkflowTriggerOutput::Archive { trigger: changed })
        }
    }
}

fn contracts(
    triggers: &[TriggerRecord],
) -> ActionResult<Vec<crate::contract::types::WorkflowTrigger>> {
    triggers
        .iter()
        .map(|t| t.to_contract().map_err(failure::store))
        .collect()
}

async fn change_trigger(
    state: &AppState,
    caller: &Caller,
    trigger_id: &str,
    change: impl FnOnce(&TriggerRecord) -> ActionResult<TriggerChange>,
) -> ActionResult<crate::contract::types::WorkflowTrigger> {
    let changed = state
        .store
        .change_trigger(&caller.workspace_id, trigger_id, caller.now_ms, change)
        .await
        .map_err(failure::store)?
        .ok_or_else(|| not_found("workflow trigger", trigger_id))??;
    changed.to_contract().map_err(failure::store)
}

fn refuse_archived_trigger(trigger: &TriggerRecord, verb: &str) -> ActionResult<()> {
    if trigger.status == "archived" {
        return Err(ActionError::new(
            ErrorCode::InvalidState,
            format!(
                "workflow trigger `{}` is archived and cannot be {verb}",
                trigger.id
            ),
        ));
    }
    Ok(())
}

/// `from` → the other of enabled/disabled, named `to`.
fn set_trigger_status(
    current: &TriggerRecord,
    from: TriggerStatus,
    to: &str,
) -> ActionResult<TriggerChange> {
    refuse_archived_trigger(current, to)?;
    if current.status != from.to_string() {
        return Err(ActionError::new(
            ErrorCode::InvalidState,
            format!("workflow trigger `{}` is already {to}", current.id),
        ));
    }
    Ok(TriggerChange {
        name: current.name.clone(),
        status: to.into(),
        start_at: current.start_at,
        every_minutes: current.every_minutes,
        next_fire_at: current.next_fire_at,
    })
}

// ---------------------------------------------------------------------------------------------
// run

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
            let listed = page::list(
                state,
                &filter,
                cursor.as_ref(),
                page::limit(limit),
                async |after, limit| {
                    state
                        .store
                        .list_workflow_runs(
                            &caller.workspace_id,
                            plan_id.as_deref().map(String::as_str),
                            status.as_deref(),
                            after.as_ref(),
                            limit,
                        )
                        .await
                },
            )
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
                .map_err(failure::store)?
                .ok_or_else(|| not_found("workflow run", &run_id))?;
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
                .map_err(failure::store)?
                .ok_or_else(|| not_found("workflow run", &run_id))?;
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
                .map_err(failure::store)?
                .ok_or_else(|| not_found("workflow trigger", &trigger_id))?;
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
                .map_err(failure::store)?
                .ok_or_else(|| not_found("workflow run", &run_id))??;
            Ok(WorkflowRunOutput::Cancel {
                run: run_contract(&run.run).map_err(failure::store)?,
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// step

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
            let listed = page::list(
                state,
                &filter,
                cursor.as_ref(),
                page::limit(limit),
                async |after, limit| {
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
                        .map_err(failure::store)?
                        .ok_or_else(|| not_found("workflow run", &run_id))
                },
            )
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
                .map_err(failure::store)?
                .ok_or_else(|| not_found("workflow step", &step_id))?;
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
        .map_err(failure::store)?
        .ok_or_else(|| not_found("workflow step", &step_id))?;
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
        .map_err(failure::store)?
        .ok_or_else(|| not_found("workflow step", &step_id))??;
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
