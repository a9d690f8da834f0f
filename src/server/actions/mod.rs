//! The server's implementation of the generated `ActionHandler` trait: one module per domain.
//! Every locator in a request is resolved against the caller's workspace and membership here; a
//! locator the agent cannot see is `not_found`, whether it exists elsewhere or not.

mod review;
mod task;

use crate::contract::error::ErrorCode;
use crate::contract::types::{
    ReviewAddInput, ReviewAddOutput, TaskCancelInput, TaskCancelOutput, TaskClaimInput,
    TaskClaimOutput, TaskCompleteInput, TaskCompleteOutput, TaskCreateInput, TaskCreateOutput,
    TaskGetInput, TaskGetOutput, TaskListInput, TaskListOutput, TaskUpdateInput, TaskUpdateOutput,
};
use crate::contract::{ActionError, ActionHandler, ActionResult};

use super::AppState;
use super::store::StoreError;

/// The authenticated caller of one request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub workspace_id: String,
    pub agent_id: String,
    /// The request's time, read once so every row it writes agrees.
    pub now_ms: i64,
}

/// The server's handlers, over the shared state.
pub struct ServerActions<'a> {
    pub state: &'a AppState,
}

/// A store failure becomes a generic error; its cause goes to the log only.
pub fn internal(error: StoreError) -> ActionError {
    tracing::error!(error = %error, cause = ?std::error::Error::source(&error), "store failure");
    ActionError::new(
        ErrorCode::InternalError,
        "the server failed to handle this request; retry later",
    )
}

pub(crate) fn not_found(what: &str, id: &str) -> ActionError {
    ActionError::new(
        ErrorCode::NotFound,
        format!("no {what} `{id}` is visible to this agent"),
    )
}

impl ActionHandler for ServerActions<'_> {
    type Context = Caller;

    async fn review_add(
        &self,
        caller: &Caller,
        input: ReviewAddInput,
    ) -> ActionResult<ReviewAddOutput> {
        review::add(self.state, caller, input).await
    }
    async fn task_cancel(
        &self,
        caller: &Caller,
        input: TaskCancelInput,
    ) -> ActionResult<TaskCancelOutput> {
        task::cancel(self.state, caller, input).await
    }
    async fn task_claim(
        &self,
        caller: &Caller,
        input: TaskClaimInput,
    ) -> ActionResult<TaskClaimOutput> {
        task::claim(self.state, caller, input).await
    }
    async fn task_complete(
        &self,
        caller: &Caller,
        input: TaskCompleteInput,
    ) -> ActionResult<TaskCompleteOutput> {
        task::complete(self.state, caller, input).await
    }
    async fn task_create(
        &self,
        caller: &Caller,
        input: TaskCreateInput,
    ) -> ActionResult<TaskCreateOutput> {
        task::create(self.state, caller, input).await
    }
    async fn task_get(&self, caller: &Caller, input: TaskGetInput) -> ActionResult<TaskGetOutput> {
        task::get(self.state, caller, input).await
    }
    async fn task_list(
        &self,
        caller: &Caller,
        input: TaskListInput,
    ) -> ActionResult<TaskListOutput> {
        task::list(self.state, caller, input).await
    }
    async fn task_update(
        &self,
        caller: &Caller,
        input: TaskUpdateInput,
    ) -> ActionResult<TaskUpdateOutput> {
        task::update(self.state, caller, input).await
    }
}
