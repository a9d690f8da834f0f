//! The MCP routes and the HTTP pipeline of one request.
//!
//! `POST /api/internal/mcp/servers/{serverId}/agents/{agentId}` and its legacy alias
//! `/mcp/agentteam/{serverId}/{agentId}` run the same pipeline:
//! 1. Host/Origin (the router's loopback layer, 403);
//! 2. authentication and route binding ([`authenticate`], the handler's first step, before the
//!    method or any header but the bearer is looked at): an MCP-scope bearer whose server and
//!    agent match the path, or one uniform 401 with `WWW-Authenticate: Bearer`; nothing after it
//!    re-reads the token;
//! 3. the handler: POST only (405), admission (429, before the body), a client that accepts JSON
//!    (406), the body (`wire::body`: 415 / 413 / 408 / 400), one JSON-RPC object (400
//!    -32700 / -32600), the era (`era`), then the method (`protocol`).

use crate::telemetry;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::json;

use super::era::Era;
use super::protocol::{self, Reply};
use super::rpc::{RpcError, RpcRequest};
use crate::daemon::access;
use crate::daemon::auth::{Authorization, Scope};
use crate::daemon::state::DaemonState;
use crate::wire;
use crate::wire::body::BodyFailure;
use crate::wire::jsonrpc;

/// The canonical route and the legacy alias; both serve the same handler and inventory.
pub const ROUTES: [&str; 2] = [
    "/api/internal/mcp/servers/{serverId}/agents/{agentId}",
    "/mcp/agentteam/{serverId}/{agentId}",
];

pub fn routes() -> Router<DaemonState> {
    let mut router = Router::new();
    for route in ROUTES {
        router = router.route(route, any(endpoint));
    }
    router
}

/// The one answer to every refused credential: missing, malformed, forged, expired, revoked,
/// another scope (Exec, token analysis), or bound to another server or agent.
fn unauthorized() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"jsonrpc": "2.0", "error": {"code": jsonrpc::INVALID_REQUEST, "message": "unauthorized"}})
            .to_string(),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Authenticates the bearer and binds it to the route, before anything else of the request is
/// looked at: the verified authorization, or `None` for the uniform 401 (the refusal recorded).
fn authenticate(
    state: &DaemonState,
    request: &Request,
    started: std::time::Instant,
) -> Option<Arc<Authorization>> {
    state
        .counters
        .mcp_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (server_id, agent_id) = route_binding(request.uri().path())?;
    let verified = access::verify(
        &state.authorizations,
        wire::bearer(request.headers()),
        server_id,
        agent_id,
        Scope::Mcp,
    );
    verified
        .inspect_err(|denied| {
            record_refusal(
                state,
                denied,
                (server_id, agent_id),
                request.headers(),
                started,
            );
        })
        .ok()
}

/// Records a refused MCP request in the daemon's refusal log (the method from `Mcp-Method`,
/// which a refused request's body is never read for).
fn record_refusal(
    state: &DaemonState,
    denied: &access::Denied,
    (server_id, agent_id): (&str, &str),
    headers: &axum::http::HeaderMap,
    started: std::time::Instant,
) {
    let method = headers
        .get("mcp-method")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("request");
    state.refusals.denied(
        denied,
        "mcp",
        method,
        (server_id, agent_id),
        headers,
        started,
    );
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
    let started = std::time::Instant::now();
    let Some(authorization) = authenticate(&state, &request, started) else {
        return unauthorized();
    };
    if request.method() != Method::POST {
        let mut response = (StatusCode::METHOD_NOT_ALLOWED, "").into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    let admitted = access::admit(&state.authorizations, &authorization);
    let Ok(admission) = admitted.inspect_err(|denied| {
        let binding = route_binding(request.uri().path()).unwrap_or_default();
        record_refusal(&state, denied, binding, request.headers(), started);
    }) else {
        let mut response = RpcError::new(
            jsonrpc::ADMISSION_LIMITED,
            access::admission_limited().message,
        )
        .respond(StatusCode::TOO_MANY_REQUESTS, None);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    let (parts, body) = request.into_parts();
    if !accepts_json(&parts.headers) {
        return RpcError::new(
            jsonrpc::INVALID_REQUEST,
            "the client must accept `application/json`",
        )
        .respond(StatusCode::NOT_ACCEPTABLE, None);
    }
    let message =
        match wire::body::read_json(&parts.headers, body, Some(&authorization.cancel)).await {
            Ok(message) => message,
            Err(BodyFailure::Revoked) => return unauthorized(),
            Err(failure) => {
                return RpcError::new(failure.rpc_code(), failure.message())
                    .respond(failure.status(), None);
            }
        };
    let request = match RpcRequest::from_value(message) {
        Ok(request) => request,
        Err((error, id)) => return error.respond(StatusCode::BAD_REQUEST, id.as_ref()),
    };
    tracing::Span::current().record("rpc_method", super::rpc::echo(&request.method_name));
    if telemetry::request::is_traced() {
        telemetry::request::rename(format!("mcp {}", request.method.name()));
        telemetry::request::set([opentelemetry::KeyValue::new(
            "rpc.method",
            request.method.name(),
        )]);
        // MCP's own place for trace context, in either era: a link, never the parent.
        if let Some(serde_json::Value::String(sent)) = request
            .meta()
            .and_then(|meta| meta.get(telemetry::context::TRACEPARENT))
        {
            telemetry::request::link_sent(sent, telemetry::request::Source::McpMeta);
        }
    }
    let era = match Era::classify(&parts.headers, &request) {
        Ok(era) => era,
        Err((status, error)) => return error.respond(status, request.id.as_ref()),
    };
    let Some(id) = request.id.clone() else {
        // A notification (or, in the legacy era, a response): accepted, nothing to answer.
        return StatusCode::ACCEPTED.into_response();
    };
    let admission = access::Slot::new(admission);
    let answer = protocol::answer(&state, &authorization, &admission, era, &request).await;
    if authorization.is_revoked() {
        return unauthorized();
    }
    // The body sent as three pieces, the framing around the result as it was written (hyper
    // writes them with one `writev`): the result is not copied again.
    let framed = |result: Bytes| {
        let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#);
        let body = Pieces::new([Bytes::from(head), result, Bytes::from_static(b"}")]);
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::new(body),
        )
            .into_response()
    };
    match answer {
        Ok(Reply::Value(result)) => {
            json_response(json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string())
        }
        Ok(Reply::Serialized(result)) => framed(Bytes::from_static(result.as_bytes())),
        Ok(Reply::Owned(result)) => framed(Bytes::from(result)),
        Err((status, error)) => error.respond(status, Some(&id)),
    }
}

/// A body of a few pieces, each sent as it is, with its exact length known up front (a
/// `Content-Length`, not chunks).
struct Pieces<const N: usize> {
    pieces: [Bytes; N],
    next: usize,
    remaining: u64,
}

impl<const N: usize> Pieces<N> {
    fn new(pieces: [Bytes; N]) -> Pieces<N> {
        let remaining = pieces.iter().map(|piece| piece.len() as u64).sum();
        Pieces {
            pieces,
            next: 0,
            remaining,
        }
    }
}

impl<const N: usize> hyper::body::Body for Pieces<N> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        while this.next < N {
            let piece = std::mem::take(&mut this.pieces[this.next]);
            this.next += 1;
            if !piece.is_empty() {
                this.remaining -= piece.len() as u64;
                return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(piece))));
            }
        }
        std::task::Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.remaining)
    }
}

/// A client that states what it accepts must accept JSON.
fn accepts_json(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT).iter().all(|value| {
        value.to_str().unwrap_or("").split(',').any(|range| {
            let range = range.split(';').next().unwrap_or("").trim();
            matches!(range, "application/json" | "application/*" | "*/*")
        })
    })
}

fn json_response(body: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::{Bytes, DaemonState, Pieces, Request, State, endpoint, route_binding};

    /// An MCP request's handler future stays small: a call's owner (the hop, the server's
    /// answer) lives on the heap, not in the future every request builds and moves.
    #[test]
    fn the_handler_future_of_every_mcp_request_stays_small() {
        let size = crate::wire::future_size(|a: (State<DaemonState>, Request)| endpoint(a.0, a.1));
        assert!(size <= 2048, "the MCP handler's future is {size} bytes");
    }

    /// The pieces come out in order, whole, an empty one skipped, under an exact length that
    /// counts down to the end.
    #[tokio::test]
    async fn a_body_of_pieces_is_their_concatenation_of_exact_length() {
        use http_body_util::BodyExt;
        use hyper::body::Body as _;
        let mut body = Pieces::new([
            Bytes::from(r#"{"id":1,"result":"#.to_string()),
            Bytes::new(),
            Bytes::from(r#"{"a":"b"}"#.to_string()),
            Bytes::from_static(b"}"),
        ]);
        assert_eq!(body.size_hint().exact(), Some(27));
        assert!(!body.is_end_stream());
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame.unwrap().into_data().unwrap());
            assert_eq!(
                body.size_hint().exact(),
                Some(27 - frames.iter().map(Bytes::len).sum::<usize>() as u64)
            );
        }
        assert_eq!(frames.len(), 3, "the empty piece is no frame");
        assert_eq!(frames.concat(), br#"{"id":1,"result":{"a":"b"}}"#);
        assert!(body.is_end_stream());
        let empty = Pieces::new([Bytes::new()]);
        assert!(empty.is_end_stream());
        assert_eq!(empty.collect().await.unwrap().to_bytes(), Bytes::new());
    }

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
