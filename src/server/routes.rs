//! Every route of the server, in one table: the runtime action and tool routes, the extension
//! routes, the knowledge route, the human API and the operator API, `GET /health`, and the `not_found` fallback,
//! all behind the front middleware.

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;

use super::state::AppState;
use super::{admin_api, extensions, front, human_api, knowledge, runtime_api};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;

/// Every route of the server.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(runtime_api::routes())
        .merge(extensions::routes())
        .merge(knowledge::routes())
        .merge(admin_api::routes())
        .merge(human_api::routes())
        .route("/health", axum::routing::get(health))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            front::front,
        ))
        .with_state(state)
}

/// `GET /health`: the server answers. No credential, nothing read, not audited: what a daemon's
/// `status` probes.
async fn health() -> crate::wire::Data {
    crate::wire::Data(serde_json::json!({ "status": "ok" }))
}

/// Any path no route has: `not_found` with a 404.
async fn not_found() -> Response {
    let error = ActionError::new(ErrorCode::NotFound, "no such route");
    let mut response = crate::wire::error_response(&error);
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}
