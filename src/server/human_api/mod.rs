//! The human API: `POST /human/servers/{serverId}/actions/{action}`, one route per action of
//! `schema/human/`, what a person does in their workspace (a daemon's console and terminal
//! reader call it with the device credential the daemon holds for its person).
//!
//! Order, as on the runtime API: authenticate the device credential and bind it to the path's
//! workspace (one uniform 403, before the body is read); its human is who the request acts as →
//! bounded strict JSON body → schema validation → for a write, at most once per
//! `(human, action, requestId)` with its audit record in its transaction
//! (`runtime_call::once`) → the generated typed adapter → typed envelope.
//!
//! What a person may see is decided here, by membership, never by the request: a conversation is
//! theirs when they are a member of it, an agent's approvals and audit records when they own the
//! agent. Anything else is `not_found`, exactly as a missing one.

mod feed;
mod handlers;
mod wakers;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;

use super::actions::{Caller, ServerActions};
use super::state::AppState;
use super::store::Principal;
use super::{failure, runtime_call};
use crate::contract::error::ErrorCode;
use crate::contract::target::Target;
use crate::contract::types as t;
use crate::contract::{
    ActionError, ActionResult, DispatchError, HUMAN_ACTIONS, HumanActionId, dispatch_human,
};
use crate::wire;
use crate::wire::idempotency::resolve_selector;

/// The route of one human action on the server.
pub fn action_path(action: &str) -> String {
    format!("/human/servers/{{serverId}}/actions/{action}")
}

/// The authenticated person of one request.
#[derive(Debug, Clone)]
pub struct Person {
    pub workspace_id: String,
    pub human_id: String,
    /// The device credential the request came with (the device that hosts agents).
    pub device_id: String,
    /// The request's time, read once.
    pub now_ms: i64,
}

impl Person {
    /// The person as the shared reads know a caller: the channel member they are. Those reads
    /// resolve every locator by this member's memberships and write nothing.
    fn member(&self) -> Caller {
        Caller {
            workspace_id: self.workspace_id.clone(),
            agent_id: self.human_id.clone(),
            now_ms: self.now_ms,
        }
    }
}

pub fn routes() -> Router<AppState> {
    let mut router = Router::new();
    for descriptor in HUMAN_ACTIONS {
        let id = descriptor.id;
        router = router.route(
            &action_path(descriptor.name),
            post(
                move |state: State<AppState>,
                      path: Path<String>,
                      headers: HeaderMap,
                      body: Body| handle(state, path, headers, body, id),
            ),
        );
    }
    router
        .route(
            "/human/servers/{serverId}/actions/{action}",
            post(unknown_action),
        )
        .route("/human/openapi.json", axum::routing::get(openapi))
}

/// `GET /human/openapi.json`: the human API's OpenAPI document, generated from `schema/human/`.
/// No credential: it describes the routes, it reads nothing.
async fn openapi() -> Response {
    wire::raw_json_response(200, crate::contract::catalog::HUMAN_OPENAPI.to_string())
}

/// Any other action path: the refusal names what was asked for.
async fn unknown_action(Path((_, action)): Path<(String, String)>) -> Response {
    wire::error_response(&ActionError::unknown_action("human", &action))
}

async fn handle(
    State(state): State<AppState>,
    Path(server_id): Path<String>,
    headers: HeaderMap,
    body: Body,
    id: HumanActionId,
) -> Response {
    match run(&state, &server_id, &headers, body, id).await {
        Ok(response) => response,
        Err(error) => wire::error_response(&error),
    }
}

async fn run(
    state: &AppState,
    server_id: &str,
    headers: &HeaderMap,
    body: Body,
    id: HumanActionId,
) -> Result<Response, ActionError> {
    let device = runtime_call::authenticate_person(state, server_id, headers).await?;
    state
        .human_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let person = Person {
        workspace_id: device.workspace_id,
        human_id: device.human_id,
        device_id: device.device_id,
        now_ms: state.clock.now_ms(),
    };
    let input = wire::body::read_json(headers, body, None)
        .await
        .map_err(|failure| failure.error())?;
    state.catalog.validate_human_input(id, &input)?;
    let write = id.descriptor().write;
    let selector = if write {
        resolve_selector(headers, &input)?
    } else {
        None
    };
    runtime_call::once(
        state,
        Principal::Human(&person.human_id),
        person.now_ms,
        &format!("human.{}", id.descriptor().name),
        write,
        selector,
        &input,
        runtime_call::Receipt::Atomic,
        wire::render_text,
        || execute(state, &person, id, input.clone()),
    )
    .await
}

async fn execute(
    state: &AppState,
    person: &Person,
    id: HumanActionId,
    input: serde_json::Value,
) -> Result<String, ActionError> {
    dispatch_human(&HumanActions { state }, person, id, input)
        .await
        .map_err(|error| match error {
            DispatchError::Action(error) => error,
            DispatchError::Decode(cause) => {
                tracing::warn!(action = id.descriptor().name, error = %cause, "validated input does not fit the typed request");
                ActionError::unrepresentable_input()
            }
            DispatchError::NotOwned(_) => {
                failure::internal(format_args!("a human route dispatched another owner's action"))
            }
            DispatchError::Encode(cause) => failure::internal(format_args!(
                "the typed adapter of `human.{}` failed: {cause}",
                id.descriptor().name
            )),
        })
}

/// `not_found` as a person reads it.
fn missing(what: &str, id: &str) -> ActionError {
    ActionError::new(
        ErrorCode::NotFound,
        format!("no {what} `{id}` is visible to you"),
    )
}

/// The store's row, [`missing`] when there is none.
fn found<T>(
    read: Result<Option<T>, crate::server::store::StoreError>,
    what: &str,
    id: &str,
) -> ActionResult<T> {
    read.map_err(failure::store)?
        .ok_or_else(|| missing(what, id))
}

/// A person's answer built from JSON the store's rows give (checked by its type).
fn typed<T: serde::de::DeserializeOwned>(value: serde_json::Value, what: &str) -> ActionResult<T> {
    serde_json::from_value(value).map_err(|e| {
        failure::internal(format_args!(
            "a stored {what} is not its contract type: {e}"
        ))
    })
}

/// The server's human handlers, over the shared state.
pub struct HumanActions<'a> {
    pub state: &'a AppState,
}

impl HumanActions<'_> {
    /// The conversation `target` names, if the person belongs to it.
    async fn conversation(
        &self,
        person: &Person,
        target: &t::ConversationTarget,
    ) -> ActionResult<(Target, crate::server::store::Membership)> {
        let target = Target::parse_canonical(target)?;
        let at = found(
            self.state
                .store
                .conversation_for_member(&person.workspace_id, &person.human_id, &target)
                .await,
            target.kind.as_str(),
            &target.id,
        )?;
        Ok((target, at))
    }

    fn shared(&self) -> ServerActions<'_> {
        ServerActions { state: self.state }
    }
}

/// A shared read's refusal as a person reads it: its `not_found` says "to you", not "to this
/// agent".
fn as_person(mut error: ActionError) -> ActionError {
    if error.code == ErrorCode::NotFound {
        error.message = error.message.replace("to this agent", "to you");
    }
    error
}
