//! `review` actions: reviews live in a thread the agent can see, optionally about one of its tasks.

use super::{Caller, internal, not_found};
use crate::contract::ActionResult;
use crate::contract::types::{ReviewAddInput, ReviewAddOutput};
use crate::server::AppState;

pub async fn add(
    state: &AppState,
    caller: &Caller,
    input: ReviewAddInput,
) -> ActionResult<ReviewAddOutput> {
    let ReviewAddInput {
        thread_id,
        task_id,
        verdict,
        body,
        request_id: _,
    } = input;
    let thread = state
        .store
        .thread_for_member(&caller.workspace_id, &caller.agent_id, &thread_id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found("thread", &thread_id))?;
    let thread_id = thread
        .thread_id
        .expect("a thread membership names its thread");
    if let Some(task_id) = &task_id
        && !state
            .store
            .task_in_thread(task_id, &thread_id)
            .await
            .map_err(internal)?
    {
        return Err(not_found("task in this thread", task_id));
    }
    let review = state
        .store
        .insert_review(
            &thread_id,
            task_id.as_deref().map(String::as_str),
            &caller.agent_id,
            verdict,
            &body,
            caller.now_ms,
        )
        .await
        .map_err(internal)?;
    Ok(ReviewAddOutput { review })
}
