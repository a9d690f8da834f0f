//! The generated RegisterJSON adapter: `dispatch` decodes validated JSON into the action's typed
//! input, calls exactly that handler method, and encodes the typed output, which must satisfy
//! the action's output schema.
//!
//! The fixture handler implements every method of the generated trait; adding an action to
//! `schema/` stops this file compiling until it handles the new one, which is the point.

use std::sync::Mutex;

use agentteam::contract::error::ErrorCode;
use agentteam::contract::types::{
    ReviewAddInput, ReviewAddOutput, Task, TaskCancelInput, TaskCancelOutput, TaskClaimInput,
    TaskClaimOutput, TaskCompleteInput, TaskCompleteOutput, TaskCreateInput, TaskCreateOutput,
    TaskGetInput, TaskGetOutput, TaskListInput, TaskListOutput, TaskLocation, TaskResult,
    TaskStatus, TaskUpdateInput, TaskUpdateOutput,
};
use agentteam::contract::{
    ActionError, ActionHandler, ActionId, ActionResult, CompiledCatalog, DispatchError, dispatch,
};
use serde_json::{Value, json};

/// Records which method ran; answers `task get` and `task list`, refuses everything else.
#[derive(Default)]
struct Fixture {
    calls: Mutex<Vec<&'static str>>,
}

impl Fixture {
    fn record(&self, method: &'static str) {
        self.calls.lock().unwrap().push(method);
    }

    fn refuse<T>(&self, method: &'static str) -> ActionResult<T> {
        self.record(method);
        Err(ActionError::new(
            ErrorCode::NotFound,
            format!("{method} is not handled by the fixture"),
        ))
    }
}

fn task(id: agentteam::contract::types::TaskId, location: TaskLocation) -> Task {
    Task {
        assignee_agent_id: None,
        cancel_reason: None,
        created_at: "2026-11-29T10:00:00Z".parse().unwrap(),
        created_by_agent_id: Some("agt_01JD7M9XYZ".parse().unwrap()),
        description: None,
        id,
        location,
        result: None,
        revision: std::num::NonZeroU64::new(3).unwrap(),
        status: TaskStatus::Claimed,
        title: "Write the release notes".parse().unwrap(),
        updated_at: "2026-11-29T11:30:00Z".parse().unwrap(),
    }
}

impl ActionHandler for Fixture {
    type Context = &'static str;

    async fn review_add(
        &self,
        _ctx: &&'static str,
        _input: ReviewAddInput,
    ) -> ActionResult<ReviewAddOutput> {
        self.refuse("review_add")
    }
    async fn task_cancel(
        &self,
        _ctx: &&'static str,
        _input: TaskCancelInput,
    ) -> ActionResult<TaskCancelOutput> {
        self.refuse("task_cancel")
    }
    async fn task_claim(
        &self,
        _ctx: &&'static str,
        _input: TaskClaimInput,
    ) -> ActionResult<TaskClaimOutput> {
        self.refuse("task_claim")
    }
    async fn task_complete(
        &self,
        _ctx: &&'static str,
        _input: TaskCompleteInput,
    ) -> ActionResult<TaskCompleteOutput> {
        self.refuse("task_complete")
    }
    async fn task_create(
        &self,
        _ctx: &&'static str,
        _input: TaskCreateInput,
    ) -> ActionResult<TaskCreateOutput> {
        self.refuse("task_create")
    }
    async fn task_get(
        &self,
        ctx: &&'static str,
        input: TaskGetInput,
    ) -> ActionResult<TaskGetOutput> {
        self.record("task_get");
        assert_eq!(
            *ctx, "the-context",
            "the adapter passes the transport's context through"
        );
        let TaskGetInput { task_id } = input;
        Ok(TaskGetOutput(TaskResult {
            task: task(
                task_id,
                TaskLocation::Thread {
                    thread_id: "thr_01JD7M2Q8X".parse().unwrap(),
                },
            ),
        }))
    }
    async fn task_list(
        &self,
        _ctx: &&'static str,
        input: TaskListInput,
    ) -> ActionResult<TaskListOutput> {
        self.record("task_list");
        let TaskListInput {
            cursor,
            limit,
            location,
            status,
        } = input;
        assert!(cursor.is_none());
        assert_eq!(limit.map(|l| l.0.get()), Some(20));
        assert_eq!(status, Some(vec![TaskStatus::Open]));
        Ok(TaskListOutput {
            has_more: false,
            next_cursor: None,
            tasks: vec![task("task_01JD7M4B2C".parse().unwrap(), location)],
        })
    }
    async fn task_update(
        &self,
        _ctx: &&'static str,
        _input: TaskUpdateInput,
    ) -> ActionResult<TaskUpdateOutput> {
        self.refuse("task_update")
    }
}

fn run(fixture: &Fixture, id: ActionId, input: Value) -> Result<Value, DispatchError> {
    block_on(dispatch(fixture, &"the-context", id, input))
}

/// Polls a future that never waits (the fixture awaits nothing) to completion.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the fixture handler never waits"),
    }
}

#[test]
fn dispatch_calls_the_typed_method_and_encodes_a_schema_valid_output() {
    let fixture = Fixture::default();
    let catalog = CompiledCatalog::new().unwrap();
    let output = run(
        &fixture,
        ActionId::TaskGet,
        json!({"taskId": "task_01JD7M4B2C"}),
    )
    .unwrap();
    assert_eq!(output["task"]["id"], "task_01JD7M4B2C");
    assert_eq!(
        output["task"]["location"],
        json!({"kind": "thread", "threadId": "thr_01JD7M2Q8X"})
    );
    assert_eq!(
        catalog.output_violations(ActionId::TaskGet, &output),
        vec![]
    );

    let output = run(
        &fixture,
        ActionId::TaskList,
        serde_json::from_str(ActionId::TaskList.descriptor().example).unwrap(),
    )
    .unwrap();
    assert_eq!(output["hasMore"], false);
    assert!(
        output.get("nextCursor").is_none(),
        "an absent cursor is omitted, not null"
    );
    assert_eq!(
        catalog.output_violations(ActionId::TaskList, &output),
        vec![]
    );
    assert_eq!(*fixture.calls.lock().unwrap(), ["task_get", "task_list"]);
}

#[test]
fn every_action_id_reaches_its_own_method() {
    let fixture = Fixture::default();
    for id in ActionId::ALL {
        let example: Value = serde_json::from_str(id.descriptor().example).unwrap();
        let _ = run(&fixture, *id, example);
    }
    let expected: Vec<String> = ActionId::ALL
        .iter()
        .map(|id| {
            format!("{}_{}", id.descriptor().domain, id.descriptor().action).replace('-', "_")
        })
        .collect();
    assert_eq!(*fixture.calls.lock().unwrap(), expected);
}

#[test]
fn handler_errors_surface_as_typed_action_errors() {
    let fixture = Fixture::default();
    match run(
        &fixture,
        ActionId::ReviewAdd,
        serde_json::from_str(ActionId::ReviewAdd.descriptor().example).unwrap(),
    ) {
        Err(DispatchError::Action(error)) => assert_eq!(error.code, ErrorCode::NotFound),
        other => panic!("expected the handler's error, got {other:?}"),
    }
}

#[test]
fn input_that_skipped_validation_is_a_decode_error_not_a_call() {
    let fixture = Fixture::default();
    let result = run(
        &fixture,
        ActionId::TaskGet,
        json!({"taskId": "not-a-task-id"}),
    );
    assert!(
        matches!(result, Err(DispatchError::Decode(_))),
        "{result:?}"
    );
    assert!(
        fixture.calls.lock().unwrap().is_empty(),
        "no handler runs on undecodable input"
    );
}
