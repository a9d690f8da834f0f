//! The MCP route family: JSON-RPC over Streamable HTTP, stateless, both protocol eras on one
//! endpoint.
//!
//! `POST /api/internal/mcp/servers/{serverId}/agents/{agentId}` and its legacy alias
//! `/mcp/agentteam/{serverId}/{agentId}` run the same pipeline:
//! 1. Host/Origin (the router's loopback layer, 403);
//! 2. authentication and route binding (`authenticate`, a route layer): an MCP-scope bearer whose
//!    server and agent match the path, or one uniform 401 with `WWW-Authenticate: Bearer`; the
//!    verified authorization goes into the request's extensions and nothing after it re-reads the
//!    token;
//! 3. the handler: POST only (405), admission (429, before the body), the body (1 MiB / 5 s), one
//!    JSON-RPC object (400 -32700 / -32600), the era (`protocol`), then the method;
//! 4. `tools/call` through `tools::call`, the only execution entry, whose result passes the MCP
//!    result budget before it is serialized once.
//!
//! There are no sessions: a legacy `initialize` is answered and forgotten, and nothing a request
//! does depends on an earlier one.

pub mod protocol;
pub mod tools;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};

use super::auth::{Authorization, Scope};
use super::http::{BodyFailure, DaemonState, read_runtime_body};
use crate::contract::json::parse_strict;
use crate::wire;
use protocol::{Era, Reply, RpcError, RpcRequest};

/// The canonical route and the legacy alias; both serve the same handler and inventory.
pub const ROUTES: [&str; 2] = [
    "/api/internal/mcp/servers/{serverId}/agents/{agentId}",
    "/mcp/agentteam/{serverId}/{agentId}",
];

pub fn routes(state: DaemonState) -> Router<DaemonState> {
    let mut router = Router::new();
    for route in ROUTES {
        router = router.route(route, any(endpoint));
    }
    router.route_layer(middleware::from_fn_with_state(state, authenticate))
}

/// The one answer to every refused credential: missing, malformed, forged, expired, revoked,
/// another scope (Exec, token analysis), or bound to another server or agent.
fn unauthorized() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"unauthorized"}}"#,
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Authenticates the bearer and binds it to the route before any handler is chosen.
async fn authenticate(
    State(state): State<DaemonState>,
    mut request: Request,
    next: Next,
) -> Response {
    state
        .counters
        .mcp_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some((server_id, agent_id)) = route_binding(request.uri().path()) else {
        return unauthorized();
    };
    let Ok(authorization) = state.store.verify(
        wire::bearer(request.headers()),
        server_id,
        agent_id,
        Scope::Mcp,
    ) else {
        return unauthorized();
    };
    request.extensions_mut().insert(authorization);
    next.run(request).await
}

/// `(serverId, agentId)` of either route form.
fn route_binding(path: &str) -> Option<(&str, &str)> {
    let rest = path
        .strip_prefix("/api/internal/mcp/servers/")
        .map(|rest| rest.split_once("/agents/"))
        .unwrap_or_else(|| {
            path.strip_prefix("/mcp/agentteam/")
                .and_then(|rest| rest.split_once('/'))
        })?;
    (!rest.0.is_empty() && !rest.1.is_empty() && !rest.1.contains('/')).then_some(rest)
}

async fn endpoint(State(state): State<DaemonState>, request: Request) -> Response {
    let authorization = request
        .extensions()
        .get::<Arc<Authorization>>()
        .cloned()
        .expect("the authenticate layer runs first");
    if request.method() != Method::POST {
        let mut response = (StatusCode::METHOD_NOT_ALLOWED, "").into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    let Some(_admission) = state.store.admit(&authorization) else {
        let mut response = RpcError::new(
            protocol::ADMISSION_LIMITED,
            "too many requests in flight for this runtime; retry shortly",
        )
        .respond(StatusCode::TOO_MANY_REQUESTS, None);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    let (parts, body) = request.into_parts();
    if let Some(refusal) = check_media_types(&parts.headers) {
        return refusal;
    }
    let cancel = authorization.cancel.clone();
    let bytes = match read_runtime_body(body, &cancel).await {
        Ok(bytes) => bytes,
        Err(BodyFailure::Revoked) => return unauthorized(),
        Err(BodyFailure::TooLarge) => {
            return RpcError::new(
                -32600,
                format!("the body exceeds {} bytes", wire::MAX_BODY_BYTES),
            )
            .respond(StatusCode::PAYLOAD_TOO_LARGE, None);
        }
        Err(BodyFailure::Timeout) => {
            return RpcError::new(-32600, "the body did not arrive in time")
                .respond(StatusCode::REQUEST_TIMEOUT, None);
        }
        Err(BodyFailure::Unreadable) => {
            return RpcError::new(-32700, "the body could not be read")
                .respond(StatusCode::BAD_REQUEST, None);
        }
    };
    let message = match parse_strict(&bytes) {
        Ok(message) => message,
        Err(e) => {
            return RpcError::new(-32700, format!("parse error: {e}"))
                .respond(StatusCode::BAD_REQUEST, None);
        }
    };
    let request = match RpcRequest::from_value(message) {
        Ok(request) => request,
        Err((error, id)) => return error.respond(StatusCode::BAD_REQUEST, id.as_ref()),
    };
    tracing::Span::current().record("rpc_method", protocol::echo(&request.method));
    let era = match Era::classify(&parts.headers, &request) {
        Ok(era) => era,
        Err((status, error)) => return error.respond(status, request.id.as_ref()),
    };
    let Some(id) = request.id.clone() else {
        // A notification (or, in the legacy era, a response): accepted, nothing to answer.
        return StatusCode::ACCEPTED.into_response();
    };
    let answer = protocol::answer(&state, &authorization, era, &request).await;
    if authorization.is_revoked() {
        return unauthorized();
    }
    match answer {
        Ok(Reply::Value(result)) => respond_json(
            StatusCode::OK,
            &json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        ),
        Ok(Reply::Serialized(result)) => {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response()
        }
        Err((status, error)) => error.respond(status, Some(&id)),
    }
}

/// A request must be JSON, and a client that states what it accepts must accept JSON.
fn check_media_types(headers: &HeaderMap) -> Option<Response> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence != "application/json" {
        return Some(
            RpcError::new(-32600, "the body must be `application/json`")
                .respond(StatusCode::UNSUPPORTED_MEDIA_TYPE, None),
        );
    }
    let accepts_json = headers.get_all(header::ACCEPT).iter().all(|value| {
        value.to_str().unwrap_or("").split(',').any(|range| {
            let range = range.split(';').next().unwrap_or("").trim();
            matches!(range, "application/json" | "application/*" | "*/*")
        })
    });
    if !accepts_json {
        return Some(
            RpcError::new(-32600, "the client must accept `application/json`")
                .respond(StatusCode::NOT_ACCEPTABLE, None),
        );
    }
    None
}

fn respond_json(status: StatusCode, value: &Value) -> Response {
    let body = serde_json::to_string(value).expect("a Value always serializes");
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::route_binding;

    #[test]
    fn both_route_forms_bind_the_same_pair() {
        assert_eq!(
            route_binding("/api/internal/mcp/servers/wsp_1/agents/agt_2"),
            Some(("wsp_1", "agt_2"))
        );
        assert_eq!(
            route_binding("/mcp/agentteam/wsp_1/agt_2"),
            Some(("wsp_1", "agt_2"))
        );
        assert_eq!(route_binding("/mcp/agentteam/wsp_1/agt_2/x"), None);
        assert_eq!(route_binding("/api/internal/mcp/servers//agents/a"), None);
    }
}
