//! The outermost layer of every HTTP service (the daemon's routes, the server's runtime and
//! operator APIs): one span per request, one completion event, an incident id on every 5xx, and a
//! panic in a handler turned into an answer in the route's own protocol instead of a dropped
//! connection.
//!
//! An incident id (`inc_` + 16 hex) names one failed request in the log and in its answer: a 5xx
//! error envelope carries it as `error.incidentId` (a JSON-RPC error as `error.data.incidentId`),
//! and every log line about the failure carries it as `incident_id`. Code that logs an internal
//! cause while handling a request takes the id from [`incident_id`], so the cause and the
//! completion event join on it; the id is made only when a request fails.
//!
//! Never a header or a body in the log: tokens stay out of it.

use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use futures_util::future::Either;
use rand::Rng;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::telemetry::Telemetry;
use crate::telemetry::request::{Mode, Trace};
use opentelemetry::KeyValue;

tokio::task_local! {
    /// The current request's incident id, made on first use.
    static INCIDENT: OnceLock<String>;
}

/// The protocol a route family answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The `{"ok":…}` envelope (Exec, the admin API, the server).
    Envelope,
    /// JSON-RPC (the MCP routes).
    JsonRpc,
}

/// Names a request's route family (a log field) and its protocol, from its path.
pub type Classify = fn(&str) -> (&'static str, Protocol);

/// The incident id of the request being handled (made now if it has none), or `None` outside a
/// request.
pub fn incident_id() -> Option<String> {
    INCIDENT
        .try_with(|cell| cell.get_or_init(new_incident_id).clone())
        .ok()
}

/// An internal failure of the process `who` (`daemon`, `server`): its `cause` logged under the
/// request's incident id, the answer without it.
pub fn internal(who: &str, cause: &dyn std::fmt::Display) -> ActionError {
    tracing::error!(
        incident_id = incident_id().unwrap_or_default(),
        %cause,
        "internal failure"
    );
    ActionError::new(
        ErrorCode::InternalError,
        format!("the {who} failed to handle this request"),
    )
}

fn new_incident_id() -> String {
    format!("inc_{:016x}", rand::rng().random::<u64>())
}

/// The largest 5xx body this layer rewrites to add the incident id (error answers are small).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The middleware: `axum::middleware::from_fn_with_state(classify, observe)`.
pub async fn observe(State(classify): State<Classify>, request: Request, next: Next) -> Response {
    observed(classify, None, request, |request| next.run(request)).await
}

/// What [`observe`] does around `run`, for a middleware that does more around the same request
/// in one layer (each `from_fn` layer boxes its service and its future again per request).
/// With `traced`, the request is also a span of that telemetry ([`crate::telemetry::request`]),
/// and its log span carries the trace id.
pub async fn observed<F: Future<Output = Response>>(
    classify: Classify,
    traced: Option<(&Telemetry, Mode)>,
    request: Request,
    run: impl FnOnce(Request) -> F,
) -> Response {
    install_panic_hook();
    let path = request.uri().path();
    let (family, protocol) = classify(path);
    let trace = traced.filter(|(telemetry, _)| telemetry.is_on());
    // Traced: every log line of the request carries its trace id, at the default level too, from
    // a span of that one field around the request's own.
    let trace_span = match trace {
        Some(_) => tracing::info_span!("trace", trace_id = tracing::field::Empty),
        None => tracing::Span::none(),
    };
    let span = trace_span.in_scope(|| {
        tracing::debug_span!(
            "request",
            family,
            method = %request.method(),
            path = %path.chars().take(256).collect::<String>(),
            rpc_method = tracing::field::Empty,
        )
    });
    let trace =
        trace.and_then(|(telemetry, mode)| begin(telemetry, mode, family, &request, &trace_span));
    let spans = Spans {
        trace: trace_span,
        request: span,
        traced: trace.is_some(),
    };
    // Each arm makes its own future, so the two never hold storage at once (made before the
    // `match`, the request's future was carried twice in every request's, traced or not).
    match trace {
        None => handled(spans, family, protocol, request, run).await,
        Some(trace) => {
            trace
                .scope(handled(spans, family, protocol, request, run))
                .await
        }
    }
}

/// A request's log spans: its trace's (none when untraced) and its own.
struct Spans {
    trace: tracing::Span,
    request: tracing::Span,
    traced: bool,
}

/// The request run under its incident id and its log spans; a panic becomes an answer, a 5xx
/// gets the incident id, and the request's span (if traced) its outcome.
async fn handled<F: Future<Output = Response>>(
    spans: Spans,
    family: &'static str,
    protocol: Protocol,
    request: Request,
    run: impl FnOnce(Request) -> F,
) -> Response {
    let started = std::time::Instant::now();
    let Spans {
        trace: trace_span,
        request: span,
        traced,
    } = spans;
    INCIDENT
        .scope(OnceLock::new(), async move {
            // The trace's log span is entered only when there is one: a layer less on every poll.
            let run = run(request).instrument(span.clone());
            let run = match traced {
                true => Either::Left(run.instrument(trace_span.clone())),
                false => Either::Right(run),
            };
            let outcome = AssertUnwindSafe(run).catch_unwind().await;
            let response = match outcome {
                Ok(response) => response,
                Err(_) => {
                    // The panic hook logged the message and location with this incident id.
                    in_both(&trace_span, &span, || {
                        tracing::error!(
                            family,
                            incident_id = incident_id().unwrap_or_default(),
                            "handler panicked; answering with an internal error"
                        )
                    });
                    panicked(protocol)
                }
            };
            let response = if response.status().is_server_error() {
                // Boxed: the rare path's future (the body read back) would otherwise be carried,
                // and copied, inside every request's.
                Box::pin(
                    with_incident(response, protocol)
                        .instrument(span.clone())
                        .instrument(trace_span.clone()),
                )
                .await
            } else {
                response
            };
            in_both(&trace_span, &span, || {
                tracing::debug!(
                    status = response.status().as_u16(),
                    elapsed_us = started.elapsed().as_micros() as u64,
                    "request finished"
                )
            });
            if traced {
                let incident = INCIDENT.try_with(|cell| cell.get().cloned()).ok().flatten();
                crate::telemetry::request::finish(response.status().as_u16(), incident.as_deref());
            }
            response
        })
        .await
}

/// The trace of a request when its telemetry is on: out of line, so the untraced path does not
/// carry the code that makes spans.
#[cold]
#[inline(never)]
fn begin(
    telemetry: &Telemetry,
    mode: Mode,
    family: &'static str,
    request: &Request,
    log: &tracing::Span,
) -> Option<Trace> {
    let attributes = vec![
        KeyValue::new("agentteam.route_family", family),
        KeyValue::new("http.request.method", method_name(request.method())),
    ];
    Trace::begin(telemetry, mode, family, attributes, request.headers(), log)
}

/// Runs `log` inside `outer` and `inner`, as the request's own events are.
fn in_both(outer: &tracing::Span, inner: &tracing::Span, log: impl FnOnce()) {
    outer.in_scope(|| inner.in_scope(log))
}

/// A request method as a span names it: a standard one, or `_OTHER` (OpenTelemetry's word), so a
/// caller's own text never reaches a span.
fn method_name(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "_OTHER",
    }
}

/// The answer to a request whose handler panicked.
fn panicked(protocol: Protocol) -> Response {
    match protocol {
        Protocol::Envelope => super::error_response(&ActionError::new(
            ErrorCode::InternalError,
            "the request failed on a defect; it was logged",
        )),
        Protocol::JsonRpc => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": { "code": super::jsonrpc::INTERNAL_ERROR, "message": "internal error" },
            })
            .to_string(),
        )
            .into_response(),
    }
}

/// Adds the request's incident id to a 5xx JSON answer and logs the failure under it.
async fn with_incident(response: Response, protocol: Protocol) -> Response {
    let incident = incident_id().unwrap_or_else(new_incident_id);
    let (mut parts, body) = response.into_parts();
    let status = parts.status.as_u16();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        tracing::error!(incident_id = %incident, status, "request failed");
        return Response::from_parts(parts, Body::empty());
    };
    let mut value: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(_) => {
            tracing::error!(incident_id = %incident, status, "request failed");
            return Response::from_parts(parts, Body::from(bytes));
        }
    };
    let code = value
        .pointer("/error/code")
        .map(ToString::to_string)
        .unwrap_or_default();
    tracing::error!(incident_id = %incident, status, %code, "request failed");
    let slot = match protocol {
        Protocol::Envelope => value.pointer_mut("/error"),
        Protocol::JsonRpc => value.pointer_mut("/error").map(|error| {
            let data = &mut error["data"];
            if !data.is_object() {
                *data = json!({});
            }
            data
        }),
    };
    if let Some(Value::Object(object)) = slot {
        object.insert("incidentId".into(), json!(incident));
    }
    let mut text = serde_json::to_string(&value).expect("a Value always serializes");
    if bytes.ends_with(b"\n") {
        text.push('\n');
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(text))
}

/// Logs every panic once, with its location and the request's incident id, before unwinding.
fn install_panic_hook() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let location = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            match INCIDENT.try_with(|cell| cell.get_or_init(new_incident_id).clone()) {
                Ok(incident) => {
                    tracing::error!(incident_id = %incident, %location, panic = %message, "panic in a request handler")
                }
                Err(_) => previous(info),
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::post;
    use tower::ServiceExt;

    use super::*;

    fn classify(path: &str) -> (&'static str, Protocol) {
        if path.starts_with("/mcp") {
            ("mcp", Protocol::JsonRpc)
        } else {
            ("exec", Protocol::Envelope)
        }
    }

    async fn boom() -> Response {
        panic!("a defect in a handler")
    }

    async fn store_failure() -> Response {
        super::super::error_response(&ActionError::new(
            ErrorCode::InternalError,
            "the store failed",
        ))
    }

    fn app() -> Router {
        Router::new()
            .route("/exec", post(boom))
            .route("/mcp", post(boom))
            .route("/fails", post(store_failure))
            .layer(axum::middleware::from_fn_with_state(
                classify as Classify,
                observe,
            ))
    }

    async fn call(path: &str) -> (StatusCode, Value) {
        let response = app()
            .oneshot(Request::post(path).body(Body::empty()).unwrap())
            .await
            .expect("the layer always answers");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    fn is_incident(value: &Value) -> bool {
        value.as_str().is_some_and(|id| {
            id.len() == 20
                && id.starts_with("inc_")
                && id[4..].bytes().all(|b| b.is_ascii_hexdigit())
        })
    }

    /// A panic becomes an answer in the route's protocol, not a dropped connection, and every 5xx
    /// names its incident.
    #[tokio::test]
    async fn a_panicking_handler_answers_in_its_routes_protocol_with_an_incident_id() {
        let (status, body) = call("/exec").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["ok"], false);
        assert_eq!(body["error"]["code"], "internal_error");
        assert!(is_incident(&body["error"]["incidentId"]), "{body}");

        let (status, body) = call("/mcp").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"]["code"], -32603);
        assert!(is_incident(&body["error"]["data"]["incidentId"]), "{body}");

        let (status, body) = call("/fails").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(is_incident(&body["error"]["incidentId"]), "{body}");
    }

    #[tokio::test]
    async fn the_incident_id_is_the_same_for_the_whole_request_and_absent_outside_one() {
        assert_eq!(incident_id(), None);
        let ids = INCIDENT
            .scope(OnceLock::new(), async { (incident_id(), incident_id()) })
            .await;
        assert!(ids.0.is_some() && ids.0 == ids.1);
    }
}
