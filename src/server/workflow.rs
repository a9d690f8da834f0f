//! The workflow run engine: a run and its steps as one in-memory [`RunState`], and every
//! transition of the state machine as a method that either changes it or refuses with a typed
//! `invalid_state` error. No SQL: the store loads a state under the run's row lock, an action
//! drives it, and the store writes back what changed (`store/workflows/`).
//!
//! Steps run in plan order. A `task` step is `active` when reached; an agent completes, fails,
//! pauses or parks it. A paused step can still be completed; a parked one only failed. An
//! `approval` step is `waiting` when reached, on an approval created for it that a human decides:
//! approve completes it, reject fails it. Completing the last step completes the run; failing
//! any step fails it; cancelling ends it.
//!
//! The log is append-only and cut into sections at write time, each at most [`SECTION_BYTES`] of
//! serialized entries, so `run logs` returns any section whole within the result budget.

use std::collections::BTreeSet;

use serde_json::json;

use crate::contract::error::ErrorCode;
use crate::contract::types::{
    PlanStepDefinition, StepKind, WorkflowLogEvent, WorkflowRunStatus, WorkflowStepStatus,
};
use crate::contract::{ActionError, ActionResult};
use crate::server::store::{new_id, rfc3339};

/// The serialized size of the entries of one log section, at most.
pub const SECTION_BYTES: i64 = 48 * 1024;
/// The characters of step text one log entry holds; longer text continues in the next entries.
pub const LOG_CHUNK_CHARS: usize = 4000;

/// A run's row (serialized only to weigh a page of them: `Page::from_rows_within_bytes`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRecord {
    pub id: String,
    pub workspace_id: String,
    pub plan_id: String,
    pub plan_version: i64,
    pub trigger_id: String,
    /// The scheduled firing that started it (one run per firing).
    pub fire_at: Option<i64>,
    pub status: WorkflowRunStatus,
    pub current_step_key: Option<String>,
    pub started_by_agent_id: Option<String>,
    pub cancel_reason: Option<String>,
    /// Entries in the log so far; the last entry's `seq`.
    pub log_entries: i64,
    /// The section the next entry goes to, unless it does not fit.
    pub log_section: i64,
    /// The serialized bytes already in `log_section`.
    pub log_section_bytes: i64,
    pub revision: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

/// One step's row (serialized only to weigh a page of them).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepRecord {
    pub id: String,
    pub run_id: String,
    pub position: i64,
    pub key: String,
    pub title: String,
    pub kind: StepKind,
    pub instructions: Option<String>,
    pub status: WorkflowStepStatus,
    pub approval_id: Option<String>,
    pub output: Option<String>,
    pub reason: Option<String>,
    pub revision: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// An approval a step created when the run reached it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    pub id: String,
    pub title: String,
    pub details: Option<String>,
    pub requested_by_agent_id: Option<String>,
    pub step_id: String,
}

/// One log entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub seq: i64,
    pub section: i64,
    pub at: i64,
    pub event: WorkflowLogEvent,
    pub step_key: Option<String>,
    pub text: Option<String>,
}

impl LogRecord {
    /// The entry as `run logs` returns it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut entry =
            json!({ "seq": self.seq, "at": rfc3339(self.at), "event": self.event.to_string() });
        if let Some(key) = &self.step_key {
            entry["stepKey"] = json!(key);
        }
        if let Some(text) = &self.text {
            entry["text"] = json!(text);
        }
        entry
    }
}

/// A run, its steps, and what a transition added: the unit the store loads and saves.
#[derive(Debug, Clone)]
pub struct RunState {
    pub run: RunRecord,
    /// In run order.
    pub steps: Vec<StepRecord>,
    /// Created by this transition.
    pub new_approvals: Vec<NewApproval>,
    /// Appended by this transition.
    pub new_log: Vec<LogRecord>,
    /// Whether the run itself is new (inserted rather than updated).
    pub is_new: bool,
    changed_steps: BTreeSet<usize>,
    run_changed: bool,
    now: i64,
}

/// `invalid_state`: the step's or run's state forbids the operation.
fn refuse(message: String) -> ActionError {
    ActionError::new(ErrorCode::InvalidState, message)
}

fn is_final_step(status: WorkflowStepStatus) -> bool {
    matches!(
        status,
        WorkflowStepStatus::Completed | WorkflowStepStatus::Failed | WorkflowStepStatus::Cancelled
    )
}

impl RunState {
    /// A new run of `steps` (a published plan version), at its first step.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        workspace_id: &str,
        plan_id: &str,
        plan_version: i64,
        trigger_id: &str,
        fire_at: Option<i64>,
        started_by_agent_id: Option<&str>,
        steps: &[PlanStepDefinition],
        now: i64,
    ) -> RunState {
        let run_id = new_id("wfr", now);
        let run = RunRecord {
            id: run_id.clone(),
            workspace_id: workspace_id.to_string(),
            plan_id: plan_id.to_string(),
            plan_version,
            trigger_id: trigger_id.to_string(),
            fire_at,
            status: WorkflowRunStatus::Running,
            current_step_key: None,
            started_by_agent_id: started_by_agent_id.map(str::to_string),
            cancel_reason: None,
            log_entries: 0,
            log_section: 0,
            log_section_bytes: 0,
            revision: 1,
            created_at: now,
            updated_at: now,
            finished_at: None,
        };
        let steps = steps
            .iter()
            .enumerate()
            .map(|(position, step)| StepRecord {
                id: new_id("wfs", now),
                run_id: run_id.clone(),
                position: position as i64,
                key: step.key.to_string(),
                title: step.title.to_string(),
                kind: step.kind,
                instructions: step.instructions.as_ref().map(|i| i.to_string()),
                status: WorkflowStepStatus::Pending,
                approval_id: None,
                output: None,
                reason: None,
                revision: 1,
                created_at: now,
                updated_at: now,
            })
            .collect();
        let mut state = RunState {
            run,
            steps,
            new_approvals: Vec::new(),
            new_log: Vec::new(),
            is_new: true,
            changed_steps: BTreeSet::new(),
            run_changed: false,
            now,
        };
        state.log(WorkflowLogEvent::RunStarted, None, None);
        state.activate(0);
        state
    }

    /// A stored run, for a transition at `now`.
    pub fn loaded(run: RunRecord, steps: Vec<StepRecord>, now: i64) -> RunState {
        RunState {
            run,
            steps,
            new_approvals: Vec::new(),
            new_log: Vec::new(),
            is_new: false,
            changed_steps: BTreeSet::new(),
            run_changed: false,
            now,
        }
    }

    /// Whether this transition changed the run (its row is written back only then).
    pub fn run_changed(&self) -> bool {
        self.is_new || self.run_changed
    }

    /// The steps this transition changed (all of them for a new run).
    pub fn changed_steps(&self) -> impl Iterator<Item = &StepRecord> {
        self.steps
            .iter()
            .enumerate()
            .filter(|(index, _)| self.is_new || self.changed_steps.contains(index))
            .map(|(_, step)| step)
    }

    /// The index of step `step_id` of this run.
    pub fn step_index(&self, step_id: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == step_id)
    }

    /// Completes the task step `index` (active or paused) with `output`, logs `text`, and moves
    /// the run to its next step or completes it.
    pub fn complete_step(
        &mut self,
        index: usize,
        output: Option<&str>,
        text: Option<&str>,
    ) -> ActionResult<()> {
        let step = &self.steps[index];
        match step.status {
            WorkflowStepStatus::Active | WorkflowStepStatus::Paused => {}
            WorkflowStepStatus::Parked => {
                return Err(refuse(format!(
                    "step `{}` is parked: a parked step cannot be completed, only failed",
                    step.key
                ))
                .with_next("fail the step with the `fail` operation to move the run on"));
            }
            WorkflowStepStatus::Waiting => {
                return Err(refuse(format!(
                    "step `{}` waits on its approval; a human decides it",
                    step.key
                )));
            }
            other => return Err(self.not_current(index, other)),
        }
        self.set_step(index, WorkflowStepStatus::Completed, |step| {
            step.output = output.map(str::to_string);
        });
        let key = self.steps[index].key.clone();
        self.log(WorkflowLogEvent::StepCompleted, Some(&key), None);
        if let Some(text) = text {
            self.log(WorkflowLogEvent::StepLog, Some(&key), Some(text));
        }
        self.advance(index);
        Ok(())
    }

    /// Fails the run's current step `index` (active, paused, parked or waiting) for `reason`; the
    /// run fails and its remaining steps are cancelled.
    pub fn fail_step(
        &mut self,
        index: usize,
        reason: &str,
        text: Option<&str>,
    ) -> ActionResult<()> {
        let status = self.steps[index].status;
        if is_final_step(status) || status == WorkflowStepStatus::Pending {
            return Err(self.not_current(index, status));
        }
        self.set_step(index, WorkflowStepStatus::Failed, |step| {
            step.reason = Some(reason.to_string());
        });
        let key = self.steps[index].key.clone();
        self.log(WorkflowLogEvent::StepFailed, Some(&key), Some(reason));
        if let Some(text) = text {
            self.log(WorkflowLogEvent::StepLog, Some(&key), Some(text));
        }
        self.end(WorkflowRunStatus::Failed, WorkflowLogEvent::RunFailed);
        Ok(())
    }

    /// Pauses the active task step `index`.
    pub fn pause_step(&mut self, index: usize, reason: Option<&str>) -> ActionResult<()> {
        let step = &self.steps[index];
        match step.status {
            WorkflowStepStatus::Active => {}
            WorkflowStepStatus::Paused => {
                return Err(refuse(format!("step `{}` is already paused", step.key)));
            }
            WorkflowStepStatus::Parked => {
                return Err(refuse(format!(
                    "step `{}` is parked: only failing it moves the run on",
                    step.key
                )));
            }
            WorkflowStepStatus::Waiting => {
                return Err(refuse(format!(
                    "step `{}` waits on its approval and cannot be paused",
                    step.key
                )));
            }
            other => return Err(self.not_current(index, other)),
        }
        self.set_step(index, WorkflowStepStatus::Paused, |step| {
            step.reason = reason.map(str::to_string);
        });
        let key = self.steps[index].key.clone();
        self.log(WorkflowLogEvent::StepPaused, Some(&key), reason);
        Ok(())
    }

    /// Parks the active or paused task step `index`: the run waits until the step is failed.
    pub fn park_step(&mut self, index: usize, reason: Option<&str>) -> ActionResult<()> {
        let step = &self.steps[index];
        match step.status {
            WorkflowStepStatus::Active | WorkflowStepStatus::Paused => {}
            WorkflowStepStatus::Parked => {
                return Err(refuse(format!("step `{}` is already parked", step.key)));
            }
            WorkflowStepStatus::Waiting => {
                return Err(refuse(format!(
                    "step `{}` waits on its approval and cannot be parked",
                    step.key
                )));
            }
            other => return Err(self.not_current(index, other)),
        }
        self.set_step(index, WorkflowStepStatus::Parked, |step| {
            step.reason = reason.map(str::to_string);
        });
        let key = self.steps[index].key.clone();
        self.log(WorkflowLogEvent::StepParked, Some(&key), reason);
        self.set_run_status(WorkflowRunStatus::Waiting);
        Ok(())
    }

    /// Cancels a run that has not ended; its unfinished steps are cancelled.
    pub fn cancel(&mut self, reason: Option<&str>) -> ActionResult<()> {
        if self.has_ended() {
            return Err(refuse(format!(
                "run `{}` is {} and cannot be cancelled",
                self.run.id, self.run.status
            )));
        }
        self.run.cancel_reason = reason.map(str::to_string);
        self.end(WorkflowRunStatus::Cancelled, WorkflowLogEvent::RunCancelled);
        Ok(())
    }

    /// A human decided the approval `approval_id`: its waiting step completes (approved) or fails
    /// (rejected). An approval whose step no longer waits (the run ended) changes nothing here.
    pub fn approval_decided(&mut self, approval_id: &str, approved: bool, comment: Option<&str>) {
        let Some(index) = self
            .steps
            .iter()
            .position(|s| s.approval_id.as_deref() == Some(approval_id))
        else {
            return;
        };
        if self.steps[index].status != WorkflowStepStatus::Waiting || self.has_ended() {
            return;
        }
        let key = self.steps[index].key.clone();
        let decision = if approved { "approved" } else { "rejected" };
        self.log(
            WorkflowLogEvent::ApprovalDecided,
            Some(&key),
            Some(&match comment {
                Some(comment) => format!("{decision}: {comment}"),
                None => decision.to_string(),
            }),
        );
        if approved {
            self.set_step(index, WorkflowStepStatus::Completed, |step| {
                step.output = comment.map(str::to_string);
            });
            self.log(WorkflowLogEvent::StepCompleted, Some(&key), None);
            self.advance(index);
        } else {
            let reason = comment.unwrap_or("the approval was rejected").to_string();
            self.set_step(index, WorkflowStepStatus::Failed, |step| {
                step.reason = Some(reason.clone());
            });
            self.log(WorkflowLogEvent::StepFailed, Some(&key), Some(&reason));
            self.end(WorkflowRunStatus::Failed, WorkflowLogEvent::RunFailed);
        }
    }

    pub fn has_ended(&self) -> bool {
        matches!(
            self.run.status,
            WorkflowRunStatus::Completed | WorkflowRunStatus::Failed | WorkflowRunStatus::Cancelled
        )
    }

    /// Why the step at `index`, in state `status`, is not the run's current step.
    fn not_current(&self, index: usize, status: WorkflowStepStatus) -> ActionError {
        let step = &self.steps[index];
        match status {
            WorkflowStepStatus::Pending => {
                refuse(format!("the run has not reached step `{}` yet", step.key))
            }
            other => refuse(format!("step `{}` is {other}", step.key)),
        }
    }

    /// Reaches step `index`: a task becomes `active`; an approval becomes `waiting` on a new
    /// approval.
    fn activate(&mut self, index: usize) {
        let Some(step) = self.steps.get(index) else {
            return;
        };
        let key = step.key.clone();
        self.run.current_step_key = Some(key.clone());
        match step.kind {
            StepKind::Task => {
                self.set_step(index, WorkflowStepStatus::Active, |_| {});
                self.log(WorkflowLogEvent::StepStarted, Some(&key), None);
                self.set_run_status(WorkflowRunStatus::Running);
            }
            StepKind::Approval => {
                let approval = NewApproval {
                    id: new_id("apr", self.now),
                    title: step.title.clone(),
                    details: step.instructions.clone(),
                    requested_by_agent_id: self.run.started_by_agent_id.clone(),
                    step_id: step.id.clone(),
                };
                let approval_id = approval.id.clone();
                self.new_approvals.push(approval);
                self.set_step(index, WorkflowStepStatus::Waiting, |step| {
                    step.approval_id = Some(approval_id.clone());
                });
                self.log(
                    WorkflowLogEvent::StepWaiting,
                    Some(&key),
                    Some(&format!("waiting on approval {approval_id}")),
                );
                self.set_run_status(WorkflowRunStatus::Waiting);
            }
        }
    }

    /// After step `index` completed: the next step, or the run completes.
    fn advance(&mut self, index: usize) {
        if index + 1 < self.steps.len() {
            self.activate(index + 1);
        } else {
            self.end(WorkflowRunStatus::Completed, WorkflowLogEvent::RunCompleted);
        }
    }

    /// Ends the run in `status`: every unfinished step is cancelled.
    fn end(&mut self, status: WorkflowRunStatus, event: WorkflowLogEvent) {
        for index in 0..self.steps.len() {
            if !is_final_step(self.steps[index].status) {
                self.set_step(index, WorkflowStepStatus::Cancelled, |_| {});
            }
        }
        self.run.current_step_key = None;
        self.run.finished_at = Some(self.now);
        self.set_run_status(status);
        self.log(event, None, None);
    }

    fn set_step(
        &mut self,
        index: usize,
        status: WorkflowStepStatus,
        change: impl FnOnce(&mut StepRecord),
    ) {
        let now = self.now;
        let step = &mut self.steps[index];
        step.status = status;
        change(step);
        if !self.is_new && self.changed_steps.insert(index) {
            step.revision += 1;
        }
        step.updated_at = now;
        self.touch_run();
    }

    fn set_run_status(&mut self, status: WorkflowRunStatus) {
        self.run.status = status;
        self.touch_run();
    }

    /// One transition moves the run's revision once, however much it changed.
    fn touch_run(&mut self) {
        if !self.is_new && !self.run_changed {
            self.run.revision += 1;
            self.run_changed = true;
        }
        self.run.updated_at = self.now;
    }

    /// Appends an entry (a `step.log` text over [`LOG_CHUNK_CHARS`] becomes several, in order),
    /// each in the current section if it fits, else in a new one.
    fn log(&mut self, event: WorkflowLogEvent, step_key: Option<&str>, text: Option<&str>) {
        let chunks: Vec<Option<String>> = match text {
            None => vec![None],
            Some(text) if text.chars().count() <= LOG_CHUNK_CHARS => vec![Some(text.to_string())],
            Some(text) => text
                .chars()
                .collect::<Vec<_>>()
                .chunks(LOG_CHUNK_CHARS)
                .map(|chunk| Some(chunk.iter().collect()))
                .collect(),
        };
        for text in chunks {
            let mut entry = LogRecord {
                seq: self.run.log_entries + 1,
                section: self.run.log_section,
                at: self.now,
                event,
                step_key: step_key.map(str::to_string),
                text,
            };
            // The entry as it will be returned, plus the comma between entries.
            let size = serde_json::to_string(&entry.to_json())
                .expect("a Value always serializes")
                .len() as i64
                + 1;
            if self.run.log_section_bytes > 0 && self.run.log_section_bytes + size > SECTION_BYTES {
                self.run.log_section += 1;
                self.run.log_section_bytes = 0;
                entry.section = self.run.log_section;
            }
            self.run.log_section_bytes += size;
            self.run.log_entries += 1;
            self.new_log.push(entry);
        }
        self.touch_run();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(key: &str, kind: StepKind) -> PlanStepDefinition {
        PlanStepDefinition {
            key: key.parse().unwrap(),
            title: key.parse().unwrap(),
            kind,
            instructions: None,
        }
    }

    fn started(kinds: &[StepKind]) -> RunState {
        let steps: Vec<_> = kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| step(&format!("s{i}"), *kind))
            .collect();
        let state = RunState::start(
            "wsp_1",
            "wfp_1",
            1,
            "wft_1",
            None,
            Some("agt_1"),
            &steps,
            1_000,
        );
        // As the store would hand it back for the next transition.
        RunState::loaded(state.run, state.steps, 2_000)
    }

    #[test]
    fn a_run_walks_its_steps_in_order_and_completes() {
        let mut run = started(&[StepKind::Task, StepKind::Task]);
        assert_eq!(run.steps[0].status, WorkflowStepStatus::Active);
        assert_eq!(run.steps[1].status, WorkflowStepStatus::Pending);
        let error = run.complete_step(1, None, None).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidState);
        assert!(
            error.message.contains("has not reached"),
            "{}",
            error.message
        );
        run.complete_step(0, Some("done"), None).unwrap();
        assert_eq!(run.steps[1].status, WorkflowStepStatus::Active);
        assert_eq!(run.run.current_step_key.as_deref(), Some("s1"));
        run.complete_step(1, None, None).unwrap();
        assert_eq!(run.run.status, WorkflowRunStatus::Completed);
        assert_eq!(run.run.finished_at, Some(2_000));
        assert_eq!(run.changed_steps().count(), 2);
        // Each changed row moved one revision, however many times it changed.
        assert_eq!(run.steps[1].revision, 2);
        assert_eq!(run.run.revision, 2);
    }

    #[test]
    fn a_parked_step_cannot_be_completed_only_failed() {
        let mut run = started(&[StepKind::Task, StepKind::Task]);
        run.pause_step(0, Some("lunch")).unwrap();
        assert_eq!(
            run.pause_step(0, None).unwrap_err().code,
            ErrorCode::InvalidState
        );
        run.park_step(0, Some("blocked")).unwrap();
        assert_eq!(run.run.status, WorkflowRunStatus::Waiting);
        let error = run.complete_step(0, None, None).unwrap_err();
        assert!(error.message.contains("parked"), "{}", error.message);
        run.fail_step(0, "gave up", None).unwrap();
        assert_eq!(run.run.status, WorkflowRunStatus::Failed);
        assert_eq!(run.steps[1].status, WorkflowStepStatus::Cancelled);
        assert_eq!(
            run.cancel(None).unwrap_err().code,
            ErrorCode::InvalidState,
            "an ended run cannot be cancelled"
        );
    }

    #[test]
    fn an_approval_step_waits_for_its_decision() {
        let mut run = started(&[StepKind::Approval, StepKind::Task]);
        assert_eq!(run.run.status, WorkflowRunStatus::Waiting);
        let approval = run.steps[0].approval_id.clone().unwrap();
        assert!(run.complete_step(0, None, None).is_err());
        run.approval_decided(&approval, true, Some("ship it"));
        assert_eq!(run.steps[0].status, WorkflowStepStatus::Completed);
        assert_eq!(run.steps[1].status, WorkflowStepStatus::Active);
        assert_eq!(run.run.status, WorkflowRunStatus::Running);
        // A second decision of the same approval changes nothing.
        run.approval_decided(&approval, false, None);
        assert_eq!(run.run.status, WorkflowRunStatus::Running);

        let mut rejected = started(&[StepKind::Approval, StepKind::Task]);
        let approval = rejected.steps[0].approval_id.clone().unwrap();
        rejected.approval_decided(&approval, false, None);
        assert_eq!(rejected.run.status, WorkflowRunStatus::Failed);
    }

    #[test]
    fn long_step_text_is_chunked_and_sections_stay_within_their_bound() {
        let mut run = started(&[StepKind::Task]);
        let text: String = (0..60_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        run.complete_step(0, None, Some(&text)).unwrap();
        let chunks: Vec<&LogRecord> = run
            .new_log
            .iter()
            .filter(|e| e.event == WorkflowLogEvent::StepLog)
            .collect();
        assert_eq!(chunks.len(), 15);
        let joined: String = chunks.iter().map(|e| e.text.clone().unwrap()).collect();
        assert_eq!(joined, text);
        // Sequence numbers continue without gaps; every section's entries fit the bound.
        let seqs: Vec<i64> = run.new_log.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (seqs[0]..seqs[0] + seqs.len() as i64).collect::<Vec<_>>()
        );
        let mut per_section = std::collections::BTreeMap::<i64, i64>::new();
        for entry in &run.new_log {
            *per_section.entry(entry.section).or_default() +=
                serde_json::to_string(&entry.to_json()).unwrap().len() as i64 + 1;
        }
        assert!(per_section.len() > 1);
        assert!(per_section.values().all(|bytes| *bytes <= SECTION_BYTES));
    }
}
