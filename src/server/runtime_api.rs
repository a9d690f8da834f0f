//! The runtime action API: `POST /runtime/servers/{serverId}/agents/{agentId}/actions/{domain}/{action}`,
//! one route per catalog action, and `POST /runtime/servers/{serverId}/agents/{agentId}/tools/{tool}`,
//! one route per MCP tool the server owns (the daemon's MCP bridge forwards to it).
//!
//! Order: authenticate the device credential and bind the path (one uniform 403, before the body
//! is read) → bounded strict JSON body → legacy aliases → schema validation → idempotency → the
//! generated typed adapter → typed envelope.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;

use sha2::{Digest, Sha256};

use super::actions::{Caller, ServerActions, internal};
use super::store::Claim;
use super::{AppState, auth, legacy};
use crate::contract::catalog::ACTIONS;
use crate::contract::error::ErrorCode;
use crate::contract::{
    ActionError, ActionId, DispatchError, DomainOwner, TOOLS, ToolId, ToolOwner, dispatch,
    dispatch_tool,
};
use crate::wire;
use crate::wire::idempotency::resolve_selector;

/// The route of one action on the server.
pub fn action_path(domain: &str, action: &str) -> String {
    format!("/runtime/servers/{{serverId}}/agents/{{agentId}}/actions/{domain}/{action}")
}

/// The route of one server-owned MCP tool on the server.
pub fn tool_path(tool: &str) -> String {
    format!("/runtime/servers/{{serverId}}/agents/{{agentId}}/tools/{tool}")
}

/// What one runtime request asks the server to do.
#[derive(Debug, Clone, Copy)]
enum Operation {
    Action(ActionId),
    Tool(ToolId),
}

impl Operation {
    /// The idempotency scope and log name: `task.create`, `mcp.message_send`.
    fn key(self) -> String {
        match self {
            Operation::Action(id) => id.key(),
            Operation::Tool(id) => format!("mcp.{}", id.descriptor().name),
        }
    }

    /// Whether `input` asks for a side effect (per operation, for an operation union).
    fn is_mutation(self, input: &serde_json::Value) -> bool {
        match self {
            Operation::Action(id) => id.descriptor().effective(input).risk().is_mutation(),
            Operation::Tool(id) => !id.descriptor().read_only,
        }
    }
}

pub fn routes() -> Router<AppState> {
    let mut router = Router::new();
    for descriptor in ACTIONS.iter().filter(|a| a.owner == DomainOwner::Server) {
        let op = Operation::Action(descriptor.id);
        router = router.route(
            &action_path(descriptor.domain, descriptor.action),
            post(
                move |state: State<AppState>,
                      path: Path<(String, String)>,
                      headers: HeaderMap,
                      body: Body| handle(state, path, headers, body, op),
            ),
        );
    }
    for tool in TOOLS.iter().filter(|t| t.owner == ToolOwner::Server) {
        let op = Operation::Tool(tool.id);
        router = router.route(
            &tool_path(tool.name),
            post(
                move |state: State<AppState>,
                      path: Path<(String, String)>,
                      headers: HeaderMap,
                      body: Body| handle(state, path, headers, body, op),
            ),
        );
    }
    router.route(
        "/runtime/servers/{serverId}/agents/{agentId}/actions/{domain}/{action}",
        post(unknown_action),
    )
}

async fn unknown_action(
    Path((_, _, domain, action)): Path<(String, String, String, String)>,
) -> Response {
    let shown = |s: &str| s.chars().take(32).collect::<String>();
    wire::error_response(&ActionError::new(
        ErrorCode::UnknownAction,
        format!("unknown action: `{} {}`", shown(&domain), shown(&action)),
    ))
}

/// The uniform authentication failure: identical for every cause.
pub fn forbidden() -> ActionError {
    ActionError::new(ErrorCode::Forbidden, "forbidden")
}

async fn handle(
    State(state): State<AppState>,
    Path((server_id, agent_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
    op: Operation,
) -> Response {
    match run(&state, &server_id, &agent_id, &headers, body, op).await {
        Ok(response) => response,
        Err(error) => wire::error_response(&error),
    }
}

/// Idempotency records are kept at least this long (then a reused key is a new request).
pub const IDEMPOTENCY_RETENTION_MS: i64 = 24 * 60 * 60 * 1000;

async fn run(
    state: &AppState,
    server_id: &str,
    agent_id: &str,
    headers: &HeaderMap,
    body: Body,
    op: Operation,
) -> Result<Response, ActionError> {
    let caller = authenticate(state, server_id, agent_id, headers).await?;
    let mut input = wire::body::read_json(headers, body, None)
        .await
        .map_err(|failure| failure.error())?;
    match op {
        Operation::Action(id) => {
            legacy::canonicalize(id, &mut input)?;
            state.catalog.validate_input(id, &input)?;
        }
        Operation::Tool(id) => state.catalog.validate_tool_input(id, &input)?,
    }
    let selector = if op.is_mutation(&input) {
        resolve_selector(headers, &input)?
    } else {
        None
    };
    once(
        state,
        &caller,
        &op.key(),
        selector,
        &input,
        wire::render_text,
        || execute(state, &caller, op, input.clone()),
    )
    .await
}

/// The caller of a runtime route: the device credential authenticated and bound to the path's
/// workspace and agent (its human owns the agent), with one uniform 403 for every failure, before
/// the body is read. Counts the request as dispatched.
pub(super) async fn authenticate(
    state: &AppState,
    server_id: &str,
    agent_id: &str,
    headers: &HeaderMap,
) -> Result<Caller, ActionError> {
    let credential = wire::bearer(headers).ok_or_else(forbidden)?;
    let (device, owns_agent) = auth::authenticate_device(&state.store, credential, agent_id)
        .await
        .map_err(internal)?
        .ok_or_else(forbidden)?;
    if device.workspace_id != server_id || !owns_agent {
        return Err(forbidden());
    }
    super::audit::device_verified(&device.device_id);
    state
        .dispatched
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Caller {
        workspace_id: server_id.to_string(),
        agent_id: agent_id.to_string(),
        now_ms: state.clock.now_ms(),
    })
}

/// Runs `execute` and answers with its envelope, written by `render`; with an idempotency
/// `selector`, at most once per `(agent, action, selector)`: a repeat replays the first answer,
/// another payload is `idempotency_key_reused`, a repeat while the first runs is
/// `idempotency_in_progress`.
pub(super) async fn once<F, Fut, T>(
    state: &AppState,
    caller: &Caller,
    action: &str,
    selector: Option<String>,
    input: &serde_json::Value,
    render: fn(&Result<T, ActionError>) -> (u16, String),
    execute: F,
) -> Result<Response, ActionError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, ActionError>>,
{
    let Some(key) = selector else {
        let (status, body) = render(&execute().await);
        return Ok(wire::raw_json_response(status, body));
    };
    // The selector is scoped by agent and action; the fingerprint is the canonical input.
    let fingerprint = Sha256::digest(serde_json::to_vec(input).expect("a Value always serializes"));
    let claim = state
        .store
        .claim_idempotent(
            &caller.agent_id,
            action,
            &key,
            &fingerprint,
            caller.now_ms,
            caller.now_ms - IDEMPOTENCY_RETENTION_MS,
        )
        .await
        .map_err(internal)?;
    match claim {
        Claim::Acquired => {
            let (status, body) = render(&execute().await);
            state
                .store
                .finish_idempotent(&caller.agent_id, action, &key, status, &body)
                .await
                .map_err(internal)?;
            Ok(wire::raw_json_response(status, body))
        }
        Claim::Done { status, response } => Ok(wire::raw_json_response(status, response)),
        Claim::Mismatch => Err(ActionError::new(
            ErrorCode::IdempotencyKeyReused,
            format!("`{key}` was already used with another payload for `{action}`"),
        )
        .with_next("use a new `requestId` for a different request")),
        Claim::InProgress => Err(ActionError::new(
            ErrorCode::IdempotencyInProgress,
            format!("the first request with `{key}` for `{action}` has not finished"),
        )
        .with_next("retry the same request later; it will replay the first result")),
    }
}

/// The generated typed adapter, with its internal failures made generic: the output's JSON text.
async fn execute(
    state: &AppState,
    caller: &Caller,
    op: Operation,
    input: serde_json::Value,
) -> Result<String, ActionError> {
    let handler = ServerActions { state };
    let result = match op {
        Operation::Action(id) => dispatch(&handler, caller, id, input)
            .await
            .map(|raw| Box::<str>::from(raw).into_string()),
        Operation::Tool(id) => dispatch_tool(&handler, caller, id, input)
            .await
            .expect("only server-owned tools have routes"),
    };
    result.map_err(|error| match error {
        DispatchError::Action(error) => error,
        // A value the schema accepts but the typed request cannot hold: the caller's input.
        DispatchError::Decode(cause) => {
            tracing::warn!(action = %op.key(), error = %cause, "validated input does not fit the typed request");
            ActionError::unrepresentable_input()
        }
        DispatchError::NotOwned(id) => {
            tracing::error!(incident_id = crate::wire::observe::incident_id().unwrap_or_default(), action = %id.key(), "a route dispatched an action of another owner");
            ActionError::new(ErrorCode::InternalError, "the server failed to handle this request")
        }
        DispatchError::Encode(cause) => {
            tracing::error!(incident_id = crate::wire::observe::incident_id().unwrap_or_default(), action = %op.key(), error = %cause, "typed adapter failed on validated data");
            ActionError::new(ErrorCode::InternalError, "the server failed to handle this request")
        }
    })
}
