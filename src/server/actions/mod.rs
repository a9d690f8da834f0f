//! The server's implementation of the generated `ActionHandler` trait: one module per domain.
//! Every locator in a request is resolved against the caller's workspace and membership here; a
//! locator the agent cannot see is `not_found`, whether it exists elsewhere or not.

pub(crate) mod approval;
pub(crate) mod messages;
pub(crate) mod page;
mod profile;
mod project;
mod review;
mod schedule;
mod task;
mod team;
mod workflow;

pub(crate) use workflow::step_readable;

use crate::contract::catalog::Effective;
use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::contract::{
    ActionError, ActionHandler, ActionId, ActionResult, ServerToolHandler, Written,
};

use super::failure;
use super::state::AppState;
use super::store::Membership;

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

/// What a refusal calls the read `action`, from the generated catalog (`task get`), or with
/// `operation` one operation of an operation union (`workflow plan show`).
pub(crate) fn read_name(action: ActionId, operation: Option<&str>) -> String {
    let descriptor = action.descriptor();
    let found = operation.and_then(|name| descriptor.operations.iter().find(|op| op.name == name));
    debug_assert_eq!(
        found.is_some(),
        operation.is_some(),
        "`{}` has no operation {operation:?}",
        action.key()
    );
    Effective {
        descriptor,
        operation: found,
    }
    .name()
}

/// The contract's time of `ms`, as the store writes it (a time outside chrono's range is the
/// clock's defect: an internal failure).
pub(crate) fn timestamp(ms: i64) -> ActionResult<crate::contract::timestamp::Timestamp> {
    super::store::instant(ms, "now").map_err(failure::store)
}

/// A conversation locator from a request: exactly one thread or one channel.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Locator<'a> {
    Thread(&'a str),
    Channel(&'a str),
}

impl<'a> From<&'a t::TaskLocation> for Locator<'a> {
    fn from(location: &'a t::TaskLocation) -> Self {
        match location {
            t::TaskLocation::Thread { thread_id } => Locator::Thread(thread_id),
            t::TaskLocation::Channel { channel_id } => Locator::Channel(channel_id),
        }
    }
}

impl<'a> From<&'a t::MessageTarget> for Locator<'a> {
    fn from(target: &'a t::MessageTarget) -> Self {
        match target {
            t::MessageTarget::Thread { thread_id } => Locator::Thread(thread_id),
            t::MessageTarget::Channel { channel_id } => Locator::Channel(channel_id),
        }
    }
}

/// The thread or channel `locator` names, if it is in the caller's workspace and the caller is a
/// member of its channel; otherwise `not_found`, exactly as for an id that does not exist.
pub(crate) async fn resolve(
    state: &AppState,
    caller: &Caller,
    locator: Locator<'_>,
) -> ActionResult<Membership> {
    let found = match locator {
        Locator::Thread(thread_id) => {
            state
                .store
                .thread_for_member(&caller.workspace_id, &caller.agent_id, thread_id)
                .await
        }
        Locator::Channel(channel_id) => {
            state
                .store
                .channel_for_member(&caller.workspace_id, &caller.agent_id, channel_id)
                .await
        }
    };
    found.map_err(failure::store)?.ok_or_else(|| match locator {
        Locator::Thread(thread_id) => not_found("thread", thread_id),
        Locator::Channel(channel_id) => not_found("channel", channel_id),
    })
}

/// A store lookup as an action answers it: the row, [`not_found`] when there is none, an internal
/// failure when the store failed.
pub(crate) trait Found<T> {
    fn found(self, what: &str, id: &str) -> ActionResult<T>;
}

impl<T> Found<T> for Result<Option<T>, crate::server::store::StoreError> {
    fn found(self, what: &str, id: &str) -> ActionResult<T> {
        self.map_err(failure::store)?
            .ok_or_else(|| not_found(what, id))
    }
}

pub(crate) fn not_found(what: &str, id: &str) -> ActionError {
    ActionError::new(
        ErrorCode::NotFound,
        format!("no {what} `{id}` is visible to this agent"),
    )
}

impl ActionHandler for ServerActions<'_> {
    type Context = Caller;

    async fn approval_get(
        &self,
        caller: &Caller,
        input: t::ApprovalGetInput,
    ) -> ActionResult<t::ApprovalGetOutput> {
        approval::get(self.state, caller, input).await
    }
    async fn approval_list(
        &self,
        caller: &Caller,
        input: t::ApprovalListInput,
    ) -> ActionResult<t::ApprovalListOutput> {
        approval::list(self.state, caller, input).await
    }
    async fn approval_request(
        &self,
        caller: &Caller,
        input: t::ApprovalRequestInput,
    ) -> ActionResult<t::ApprovalRequestOutput> {
        approval::request(self.state, caller, input).await
    }
    async fn profile_get(
        &self,
        caller: &Caller,
        input: t::ProfileGetInput,
    ) -> ActionResult<t::ProfileGetOutput> {
        profile::get(self.state, caller, input).await
    }
    async fn profile_update(
        &self,
        caller: &Caller,
        input: t::ProfileUpdateInput,
    ) -> ActionResult<t::ProfileUpdateOutput> {
        profile::update(self.state, caller, input).await
    }
    async fn workflow_plan(
        &self,
        caller: &Caller,
        input: t::WorkflowPlanInput,
    ) -> ActionResult<t::WorkflowPlanOutput> {
        workflow::plan(self.state, caller, input).await
    }
    async fn workflow_run(
        &self,
        caller: &Caller,
        input: t::WorkflowRunInput,
    ) -> ActionResult<t::WorkflowRunOutput> {
        workflow::run(self.state, caller, input).await
    }
    async fn workflow_step(
        &self,
        caller: &Caller,
        input: t::WorkflowStepInput,
    ) -> ActionResult<t::WorkflowStepOutput> {
        workflow::step(self.state, caller, input).await
    }
    async fn workflow_trigger(
        &self,
        caller: &Caller,
        input: t::WorkflowTriggerInput,
    ) -> ActionResult<t::WorkflowTriggerOutput> {
        workflow::trigger(self.state, caller, input).await
    }
    async fn workspace_get(
        &self,
        caller: &Caller,
        input: t::WorkspaceGetInput,
    ) -> ActionResult<t::WorkspaceGetOutput> {
        profile::workspace(self.state, caller, input).await
    }

    async fn project_archive(
        &self,
        caller: &Caller,
        input: t::ProjectArchiveInput,
    ) -> ActionResult<t::ProjectArchiveOutput> {
        project::archive(self.state, caller, input).await
    }
    async fn project_create(
        &self,
        caller: &Caller,
        input: t::ProjectCreateInput,
    ) -> ActionResult<t::ProjectCreateOutput> {
        project::create(self.state, caller, input).await
    }
    async fn project_get(
        &self,
        caller: &Caller,
        input: t::ProjectGetInput,
    ) -> ActionResult<t::ProjectGetOutput> {
        project::get(self.state, caller, input).await
    }
    async fn project_list(
        &self,
        caller: &Caller,
        input: t::ProjectListInput,
    ) -> ActionResult<t::ProjectListOutput> {
        project::list(self.state, caller, input).await
    }
    async fn project_update(
        &self,
        caller: &Caller,
        input: t::ProjectUpdateInput,
    ) -> ActionResult<t::ProjectUpdateOutput> {
        project::update(self.state, caller, input).await
    }
    async fn review_add(
        &self,
        caller: &Caller,
        input: t::ReviewAddInput,
    ) -> ActionResult<t::ReviewAddOutput> {
        review::add(self.state, caller, input).await
    }
    async fn review_get(
        &self,
        caller: &Caller,
        input: t::ReviewGetInput,
    ) -> ActionResult<t::ReviewGetOutput> {
        review::get(self.state, caller, input).await
    }
    async fn review_list(
        &self,
        caller: &Caller,
        input: t::ReviewListInput,
    ) -> ActionResult<t::ReviewListOutput> {
        review::list(self.state, caller, input).await
    }
    async fn review_resolve(
        &self,
        caller: &Caller,
        input: t::ReviewResolveInput,
    ) -> ActionResult<t::ReviewResolveOutput> {
        review::resolve(self.state, caller, input).await
    }
    async fn scheduled_message_cancel(
        &self,
        caller: &Caller,
        input: t::ScheduledMessageCancelInput,
    ) -> ActionResult<t::ScheduledMessageCancelOutput> {
        schedule::cancel(self.state, caller, input).await
    }
    async fn scheduled_message_create(
        &self,
        caller: &Caller,
        input: t::ScheduledMessageCreateInput,
    ) -> ActionResult<t::ScheduledMessageCreateOutput> {
        schedule::create(self.state, caller, input).await
    }
    async fn scheduled_message_get(
        &self,
        caller: &Caller,
        input: t::ScheduledMessageGetInput,
    ) -> ActionResult<t::ScheduledMessageGetOutput> {
        schedule::get(self.state, caller, input).await
    }
    async fn scheduled_message_list(
        &self,
        caller: &Caller,
        input: t::ScheduledMessageListInput,
    ) -> ActionResult<t::ScheduledMessageListOutput> {
        schedule::list(self.state, caller, input).await
    }
    async fn scheduled_message_runs(
        &self,
        caller: &Caller,
        input: t::ScheduledMessageRunsInput,
    ) -> ActionResult<t::ScheduledMessageRunsOutput> {
        schedule::runs(self.state, caller, input).await
    }
    async fn task_cancel(
        &self,
        caller: &Caller,
        input: t::TaskCancelInput,
    ) -> ActionResult<t::TaskCancelOutput> {
        task::cancel(self.state, caller, input).await
    }
    async fn task_claim(
        &self,
        caller: &Caller,
        input: t::TaskClaimInput,
    ) -> ActionResult<t::TaskClaimOutput> {
        task::claim(self.state, caller, input).await
    }
    async fn task_complete(
        &self,
        caller: &Caller,
        input: t::TaskCompleteInput,
    ) -> ActionResult<t::TaskCompleteOutput> {
        task::complete(self.state, caller, input).await
    }
    async fn task_create(
        &self,
        caller: &Caller,
        input: t::TaskCreateInput,
    ) -> ActionResult<t::TaskCreateOutput> {
        task::create(self.state, caller, input).await
    }
    async fn task_get(
        &self,
        caller: &Caller,
        input: t::TaskGetInput,
    ) -> ActionResult<t::TaskGetOutput> {
        task::get(self.state, caller, input).await
    }
    async fn task_list(
        &self,
        caller: &Caller,
        input: t::TaskListInput,
    ) -> ActionResult<t::TaskListOutput> {
        task::list(self.state, caller, input).await
    }
    async fn task_update(
        &self,
        caller: &Caller,
        input: t::TaskUpdateInput,
    ) -> ActionResult<t::TaskUpdateOutput> {
        task::update(self.state, caller, input).await
    }
    async fn team_get(
        &self,
        caller: &Caller,
        input: t::TeamGetInput,
    ) -> ActionResult<t::TeamGetOutput> {
        team::get(self.state, caller, input).await
    }
    async fn team_list(
        &self,
        caller: &Caller,
        input: t::TeamListInput,
    ) -> ActionResult<t::TeamListOutput> {
        team::list(self.state, caller, input).await
    }
}

impl ServerToolHandler for ServerActions<'_> {
    type Context = Caller;

    async fn attachment_read(
        &self,
        caller: &Caller,
        input: t::AttachmentReadInput,
    ) -> ActionResult<Written<t::AttachmentReadOutput>> {
        messages::read_attachment(self.state, caller, input)
            .await
            .map(Written::from)
    }
    async fn message_history_read(
        &self,
        caller: &Caller,
        input: t::MessageHistoryReadInput,
    ) -> ActionResult<Written<t::MessageHistoryReadOutput>> {
        messages::history(self.state, caller, input).await
    }
    async fn message_send(
        &self,
        caller: &Caller,
        input: t::MessageSendInput,
    ) -> ActionResult<Written<t::MessageSendOutput>> {
        messages::send(self.state, caller, input)
            .await
            .map(Written::from)
    }
    async fn reaction_add(
        &self,
        caller: &Caller,
        input: t::ReactionAddInput,
    ) -> ActionResult<Written<t::ReactionAddOutput>> {
        messages::react(self.state, caller, input)
            .await
            .map(Written::from)
    }
    async fn reaction_remove(
        &self,
        caller: &Caller,
        input: t::ReactionRemoveInput,
    ) -> ActionResult<Written<t::ReactionRemoveOutput>> {
        messages::unreact(self.state, caller, input)
            .await
            .map(Written::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reads the write handlers name in their refusals exist in the catalog as they are named.
    #[test]
    fn read_names_come_from_the_catalog() {
        assert_eq!(read_name(ActionId::TaskGet, None), "task get");
        assert_eq!(read_name(ActionId::ApprovalGet, None), "approval get");
        assert_eq!(
            read_name(ActionId::WorkflowPlan, Some("show")),
            "workflow plan show"
        );
        assert_eq!(
            read_name(ActionId::WorkflowStep, Some("get")),
            "workflow step get"
        );
    }
}
