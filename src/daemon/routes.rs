//! The daemon's one loopback router: the Exec and MCP route families for runtimes, and the admin
//! API for the local human CLI.
//!
//! Loopback is not a trust boundary: every request must name a loopback host (`127.0.0.1`,
//! `localhost`, `[::1]`, any port: a local proxy may forward to us) in `Host`, which a
//! DNS-rebinding page cannot, and carry no `Origin` other than the same origin (`http://` + that
//! host; a page of another site or another local port is refused), or it is refused with 403
//! before any route runs. The daemon serves no pages, so its own origin is never a foreign script.
//! Outside that, `wire::observe` gives every request its span, incident id and panic answer.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post, put};

use super::state::DaemonState;
use super::{admin, exec, mcp};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::telemetry::request::Mode;
use crate::wire;
use crate::wire::observe::{Classify, Protocol};

/// Every route of the daemon.
pub fn router(state: DaemonState) -> Router {
    Router::new()
        .route(
            "/api/internal/exec/servers/{serverId}/agents/{agentId}/catalog",
            get(exec::catalog),
        )
        .route(
            "/api/internal/exec/servers/{serverId}/agents/{agentId}/{domain}/{action}",
            post(exec::action),
        )
        .merge(mcp::route::routes())
        .route("/api/admin/status", get(admin::status))
        .route("/api/admin/metrics", get(admin::metrics))
        .route("/api/admin/person", get(admin::person))
        .route(
            "/api/admin/extensions/reload",
            post(admin::reload_extensions),
        )
        .route(
            "/api/admin/agents",
            get(admin::list_agents).post(admin::add_agent),
        )
        .route("/api/admin/agents/reload", post(admin::reload_agents))
        .route("/api/admin/deliveries/pause", post(admin::pause))
        .route(
            "/api/admin/agents/{agent}/recipe",
            get(admin::get_recipe)
                .put(admin::set_recipe)
                .delete(admin::clear_recipe),
        )
        .route(
            "/api/admin/agents/{agent}",
            get(admin::get_agent)
                .patch(admin::update_agent)
                .delete(admin::remove_agent),
        )
        .route("/api/admin/runs", get(admin::list_runs).post(admin::launch))
        .route(
            "/api/admin/runs/{runId}/turn",
            put(admin::set_turn).delete(admin::clear_turn),
        )
        .route("/api/admin/runs/{runId}/stdin", post(admin::relay_stdin))
        .route("/api/admin/human/{action}", post(admin::human))
        .route("/api/admin/feed", post(admin::feed))
        .route("/api/admin/console/login", post(admin::console_login))
        .fallback(|| async {
            wire::error_response(&ActionError::new(ErrorCode::NotFound, "no such route"))
        })
        .layer(middleware::from_fn_with_state(state.clone(), front))
        .with_state(state)
}

/// The route family and protocol of a daemon path, for the request span and panic answers.
fn classify(path: &str) -> (&'static str, Protocol) {
    if path.starts_with("/api/internal/mcp/") || path.starts_with("/mcp/") {
        ("mcp", Protocol::JsonRpc)
    } else if path.starts_with("/api/internal/exec/") {
        ("exec", Protocol::Envelope)
    } else {
        ("admin", Protocol::Envelope)
    }
}

/// `127.0.0.1`, `localhost` or `[::1]`, with or without a port.
fn is_loopback_authority(authority: &str) -> bool {
    let name = match authority.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => authority,
    };
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|loopback| name.eq_ignore_ascii_case(loopback))
}

/// Every request, outermost first: counted and timed by route family and outcome
/// (`daemon::metrics`), observed (`wire::observe`), and refused unless it is a loopback request.
/// One layer, not three: each `from_fn` layer boxes its service and its future per request.
async fn front(State(state): State<DaemonState>, request: Request, next: Next) -> Response {
    use super::metrics::RouteFamily;
    let path = request.uri().path();
    let family = if path.starts_with("/api/internal/mcp/") || path.starts_with("/mcp/") {
        RouteFamily::mcp
    } else if path.starts_with("/api/internal/exec/") {
        RouteFamily::exec
    } else if path.starts_with("/api/admin/") {
        RouteFamily::admin
    } else {
        RouteFamily::other
    };
    let started = std::time::Instant::now();
    // The bridges' calls are traced; the admin API is the human's, not a runtime call.
    let traced = matches!(family, RouteFamily::mcp | RouteFamily::exec)
        .then_some((&state.telemetry, Mode::Bridge));
    let response = wire::observe::observed(classify as Classify, traced, request, |request| {
        loopback_only(request, next)
    })
    .await;
    state
        .metrics
        .request(family, response.status().as_u16(), started.elapsed());
    response
}

/// A loopback `Host`, and no `Origin` or the same-origin one (`http://` + that host).
fn loopback_request(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or("\u{0}"));
    let Some(host) = text(header::HOST).filter(|host| is_loopback_authority(host)) else {
        return false;
    };
    text(header::ORIGIN).is_none_or(|origin| {
        origin
            .strip_prefix("http://")
            .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
    })
}

/// Refuses a request that is not a loopback one with 403, in its route's protocol: a JSON-RPC
/// error on the MCP routes (MCP asks for 403 on a foreign `Origin`), the envelope elsewhere.
async fn loopback_only(request: Request, next: Next) -> Response {
    if !loopback_request(request.headers()) {
        const WHY: &str = "requests must come from this machine's loopback, not a browser";
        return match classify(request.uri().path()).1 {
            Protocol::JsonRpc => {
                mcp::rpc::RpcError::new(crate::wire::jsonrpc::INVALID_REQUEST, WHY)
                    .respond(axum::http::StatusCode::FORBIDDEN, None)
            }
            Protocol::Envelope => {
                wire::error_response(&ActionError::new(ErrorCode::Forbidden, WHY))
            }
        };
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_authority_is_named_in_any_case_with_or_without_a_port() {
        for authority in [
            "127.0.0.1",
            "127.0.0.1:0",
            "localhost",
            "LocalHost:8080",
            "LOCALHOST",
            "[::1]",
            "[::1]:65535",
        ] {
            assert!(is_loopback_authority(authority), "{authority}");
        }
        for authority in [
            "",
            "attacker.example",
            "localhost.attacker.example",
            "127.0.0.1.attacker.example:80",
            "localhost:",
            "localhost:80x",
            "127.0.0.2",
            "[::2]:80",
            "::1",
        ] {
            assert!(!is_loopback_authority(authority), "{authority}");
        }
    }
}
