//! `review` actions: reviews live in a thread the agent can see, optionally about one of its
//! tasks; `open` until resolved.

use super::{Caller, not_found, page};
use crate::contract::error::ErrorCode;
use crate::contract::types::{
    ReviewAddInput, ReviewAddOutput, ReviewGetInput, ReviewGetOutput, ReviewListInput,
    ReviewListOutput, ReviewResolveInput, ReviewResolveOutput, ReviewResult,
};
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::server::actions::Found;
use crate::server::failure;
use crate::server::state::AppState;

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
        .found("thread", &thread_id)?;
    let thread_id = thread
        .thread_id
        .expect("a thread membership names its thread");
    if let Some(task_id) = &task_id
        && !state
            .store
            .task_in_thread(task_id, &thread_id)
            .await
            .map_err(failure::store)?
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
        .map_err(failure::store)?;
    Ok(ReviewAddOutput(ReviewResult { review }))
}

pub async fn get(
    state: &AppState,
    caller: &Caller,
    input: ReviewGetInput,
) -> ActionResult<ReviewGetOutput> {
    let ReviewGetInput { review_id } = input;
    let review = state
        .store
        .review_for_member(&caller.workspace_id, &caller.agent_id, &review_id)
        .await
        .found("review", &review_id)?;
    Ok(ReviewGetOutput(ReviewResult { review }))
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    input: ReviewListInput,
) -> ActionResult<ReviewListOutput> {
    let ReviewListInput {
        thread_id,
        limit,
        cursor,
    } = input;
    let thread = state
        .store
        .thread_for_member(&caller.workspace_id, &caller.agent_id, &thread_id)
        .await
        .found("thread", &thread_id)?;
    let filter = page::Filter::of(caller, ActionId::ReviewList).with("thread", thread_id.as_str());
    let thread_id = thread.thread_id.as_deref().unwrap_or_default();
    let listed = filter
        .page(state, cursor.as_ref(), limit, async |after, limit| {
            state
                .store
                .list_reviews(thread_id, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(ReviewListOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        reviews: listed.items,
    })
}

pub async fn resolve(
    state: &AppState,
    caller: &Caller,
    input: ReviewResolveInput,
) -> ActionResult<ReviewResolveOutput> {
    let ReviewResolveInput {
        review_id,
        request_id: _,
    } = input;
    let review = state
        .store
        .resolve_review(
            &caller.workspace_id,
            &caller.agent_id,
            &review_id,
            caller.now_ms,
        )
        .await
        .found("review", &review_id)?
        .ok_or_else(|| {
            ActionError::new(
                ErrorCode::InvalidState,
                format!("review `{}` is already resolved", review_id.as_str()),
            )
        })?;
    Ok(ReviewResolveOutput(ReviewResult { review }))
}
