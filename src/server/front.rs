//! The server's front middleware, one layer around every request: audited (`audit.rs`) outermost,
//! so that the record sees the final answer, a handler's panic included; observed
//! (`wire::observe`) inside it.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::audit;
use super::state::AppState;
use crate::telemetry::request::Mode;
use crate::wire::observe::{self, Protocol};

/// Every request, audited then observed. One layer, not two: each `from_fn` layer boxes its
/// service and its future per request.
pub async fn front(State(state): State<AppState>, request: Request, next: Next) -> Response {
    audit::recorded(&state.audit, &state.clock, request, |request| {
        // Every family is traced but the unaudited `other` (`GET /health`, unknown paths).
        let traced = (state.telemetry.is_on() && audit::family(request.uri().path()).is_some())
            .then_some((&state.telemetry, Mode::Server));
        observe::observed(classify, traced, request, |request| next.run(request))
    })
    .await
}

/// The route family of a server path, in the server's own terms, for the request span.
fn classify(path: &str) -> (&'static str, Protocol) {
    let family = audit::family(path).unwrap_or("other");
    (family, Protocol::Envelope)
}
