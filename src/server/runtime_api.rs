//! The runtime action API: `POST /runtime/servers/{serverId}/agents/{agentId}/actions/{domain}/{action}`,
//! one route per catalog action, and `POST /runtime/servers/{serverId}/agents/{agentId}/tools/{tool}`,
//! one route per MCP tool the server owns (the daemon's MCP bridge forwards to it).
//!
//! Order: authenticate the device credential and bind the path (`runtime_call`: one uniform 403,
//! before the body is read) → bounded strict JSON body → snake_case aliases
//! (`snake_case_aliases.rs`) → schema validation → idempotency (`runtime_call::once`) → the
//! generated typed adapter → typed envelope. Any other action path is `unknown_action`.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;

use super::actions::{Caller, ServerActions};
use super::state::AppState;
use super::store::Principal;
use super::{failure, runtime_call, snake_case_aliases};
use crate::contract::catalog::ACTIONS;
use crate::contract::{
    ActionError, ActionId, DispatchError, DomainOwner, TOOLS, ToolId, ToolOwner, dispatch,
    dispatch_tool,
};
use crate::telemetry::request::{self, Starts};
use crate::wire;
use crate::wire::idempotency::resolve_selector;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

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

/// Any other action path: the refusal names what was asked for, cut short.
async fn unknown_action(
    Path((_, _, domain, action)): Path<(String, String, String, String)>,
) -> Response {
    wire::error_response(&ActionError::unknown_action(&domain, &action))
}

async fn handle(
    State(state): State<AppState>,
    Path((server_id, agent_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
    op: Operation,
) -> Response {
    let traced = request::is_traced();
    if traced {
        request::rename(op.key());
    }
    match run(&state, &server_id, &agent_id, &headers, body, op).await {
        Ok(response) => {
            if traced {
                request::outcome("ok");
            }
            response
        }
        Err(error) => {
            if traced {
                request::outcome(&error.code.to_string());
            }
            wire::error_response(&error)
        }
    }
}

async fn run(
    state: &AppState,
    server_id: &str,
    agent_id: &str,
    headers: &HeaderMap,
    body: Body,
    op: Operation,
) -> Result<Response, ActionError> {
    let caller = runtime_call::authenticate(state, server_id, agent_id, headers).await?;
    let mut input = wire::body::read_json(headers, body, None)
        .await
        .map_err(|failure| failure.error())?;
    match op {
        Operation::Action(id) => {
            snake_case_aliases::canonicalize(id, &mut input)?;
            state.catalog.validate_input(id, &input)?;
        }
        Operation::Tool(id) => state.catalog.validate_tool_input(id, &input)?,
    }
    let mutation = op.is_mutation(&input);
    let selector = if mutation {
        resolve_selector(headers, &input)?
    } else {
        None
    };
    runtime_call::once(
        state,
        Principal::Agent(&caller.agent_id),
        caller.now_ms,
        &op.key(),
        mutation,
        selector,
        &input,
        runtime_call::Receipt::Atomic,
        wire::render_text,
        || execute(state, &caller, op, input.clone()),
    )
    .await
}

/// The generated typed adapter, with its internal failures made generic: the output's JSON text.
async fn execute(
    state: &AppState,
    caller: &Caller,
    op: Operation,
    input: serde_json::Value,
) -> Result<String, ActionError> {
    let _action = request::child("action", SpanKind::Internal, Starts::Request, || {
        vec![KeyValue::new("agentteam.operation", op.key())]
    });
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
        DispatchError::NotOwned(id) => failure::internal(format_args!(
            "a route dispatched `{}`, an action of another owner",
            id.key()
        )),
        DispatchError::Encode(cause) => failure::internal(format_args!(
            "the typed adapter of `{}` failed on validated data: {cause}",
            op.key()
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime API's handler future stays small: the store's rare large futures (a keyed
    /// call's transaction, PostgreSQL's) live on the heap, not in every request's.
    #[test]
    fn the_handler_future_of_every_runtime_request_stays_small() {
        type Arguments = (
            State<AppState>,
            Path<(String, String)>,
            HeaderMap,
            Body,
            Operation,
        );
        let size = wire::future_size(|a: Arguments| handle(a.0, a.1, a.2, a.3, a.4));
        assert!(size <= 2048, "the runtime handler's future is {size} bytes");
    }
}
