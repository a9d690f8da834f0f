//! `workflow trigger`: the manual and scheduled starters of a plan's runs, listed, validated,
//! created, changed, enabled, disabled and archived.

use super::{check_revision, find_plan, refuse_archived_plan, refuse_problems, report};
use crate::contract::error::ErrorCode;
use crate::contract::types::{
    TriggerKind, TriggerStatus, WorkflowPlan, WorkflowPlanStatus, WorkflowTriggerInput,
    WorkflowTriggerOutput,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::actions::{Caller, page};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::{TriggerChange, TriggerRecord};

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
            let listed = filter
                .page(state, cursor.as_ref(), limit, async |after, limit| {
                    state
                        .store
                        .list_of_plan::<TriggerRecord>(
                            &caller.workspace_id,
                            plan_id.as_deref().map(String::as_str),
                            status.as_deref(),
                            after.as_ref(),
                            limit,
                        )
                        .await
                })
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
                .found("workflow trigger", &trigger_id)?;
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
        .found("workflow trigger", trigger_id)??;
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
