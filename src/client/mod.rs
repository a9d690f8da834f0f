//! The daemon's client of the server's runtime API: one forwarding rule for every call.
//!
//! [`ServerClient::forward_once`] is the one transport of a runtime call: authenticate as a
//! device, `POST` the validated input to the call's [`Route`] within the hop timeout, send the
//! idempotency selector as `Idempotency-Key` and `X-Request-ID`, and give back the server's success
//! envelope as it was written ([`ServerAnswer`]) or the contract's error it refused with
//! ([`ServerClient::forward`] is the same with the hop's whole timeout). The caller checks the
//! answer against the call's output contract before anything reaches a runtime, and decides
//! whether to send again ([`Failed`] says whether the server may have seen a request without an
//! answer).
//!
//! Failures of the hop itself are classified, never passed through: unreachable → `upstream_unavailable`,
//! too slow → `upstream_timeout`, a 5xx or an answer that is not the contract's envelope →
//! `upstream_failed`. Their messages never carry the server's internals.

mod failure;
pub mod http;

use std::borrow::Cow;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, header};
use serde_json::Value;

use crate::contract::borrowed::Borrowed;
use crate::contract::budget::{SUCCESS_CLOSE, SUCCESS_OPEN};
use crate::contract::error::ErrorCode;
use crate::contract::{ActionError, ActionId, ActionResult, ToolId};

pub use self::failure::{Failed, Transient};
use self::failure::{classify, refusal, refusal_code, reproject_error, timed_out, upstream_failed};

/// How long one call may take end to end.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Who a call is for.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The workspace (`serverId`).
    pub server_id: String,
    pub agent_id: String,
    /// The mutation's idempotency selector, sent as `Idempotency-Key` and `X-Request-ID`.
    pub idempotency_key: Option<String>,
}

/// A device's connection to one AgentTeam Server.
#[derive(Clone)]
pub struct ServerClient {
    hop: Hop,
    /// `Bearer <credential>`, made once and marked sensitive; `None` when the credential cannot
    /// be a header value (every request then fails before it leaves).
    authorization: Option<HeaderValue>,
    /// How long one request may take, from sending it to its last byte.
    hop_timeout: Duration,
}

/// How a request reaches the server. Either way it is one HTTP request and one HTTP response
/// through the server's whole router (authentication, authorization, validation, audit): the
/// in-process hop only leaves out the socket, the HTTP/1 codec on both sides and the client's
/// connection pool.
#[derive(Clone)]
enum Hop {
    /// Over HTTP to `base_url` (a remote server, a server of its own on loopback, or the embedded
    /// server's listener when the daemon is told to use it).
    Tcp {
        http: reqwest::Client,
        base_url: String,
    },
    /// Into the embedded server's router, in this process.
    InProcess(axum::Router),
}

/// One request to the server, before it takes a hop.
struct Outgoing {
    method: reqwest::Method,
    /// From the server's root, e.g. `/runtime/servers/…`.
    path: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Option<axum::body::Bytes>,
    /// The most bytes of the answer read: [`http::MAX_RESPONSE_BYTES`] but for a whole
    /// attachment's.
    bound: usize,
}

impl std::fmt::Debug for ServerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credential is a secret: never printed.
        let hop = match &self.hop {
            Hop::Tcp { base_url, .. } => base_url.as_str(),
            Hop::InProcess(_) => "in-process",
        };
        f.debug_struct("ServerClient")
            .field("hop", &hop)
            .finish_non_exhaustive()
    }
}

impl ServerClient {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7780`) acting as the device
    /// whose credential is `credential`, the way the operator said to reach it (`remote`).
    pub fn new(base_url: &str, credential: String, remote: Option<&http::Remote>) -> ServerClient {
        // Each request carries its own timeout (the hop's).
        let http = http::builder(remote)
            .build()
            .expect("a plain HTTP client builds");
        ServerClient {
            hop: Hop::Tcp {
                http,
                base_url: base_url.trim_end_matches('/').to_string(),
            },
            authorization: authorization(&credential),
            hop_timeout: CALL_TIMEOUT,
        }
    }

    /// A client that hands each request to `router` (the embedded server's, the same one its
    /// listener serves) without a socket, acting as the device whose credential is `credential`.
    pub fn in_process(router: axum::Router, credential: String) -> ServerClient {
        ServerClient {
            hop: Hop::InProcess(router),
            authorization: authorization(&credential),
            hop_timeout: CALL_TIMEOUT,
        }
    }

    /// This client with `timeout` for each request instead of [`CALL_TIMEOUT`].
    pub fn with_hop_timeout(mut self, timeout: Duration) -> ServerClient {
        self.hop_timeout = timeout;
        self
    }

    /// How long one request may take.
    pub fn hop_timeout(&self) -> Duration {
        self.hop_timeout
    }

    /// Whether requests skip the socket (`"in-process"`) or cross it (`"tcp"`).
    pub fn hop(&self) -> &'static str {
        match self.hop {
            Hop::Tcp { .. } => "tcp",
            Hop::InProcess(_) => "in-process",
        }
    }

    /// Forwards one validated call to `route` for `ctx`: the server's success envelope as it
    /// wrote it, or the contract's error it answered with.
    pub async fn forward(
        &self,
        route: &Route<'_>,
        ctx: &CallContext,
        body: Vec<u8>,
    ) -> ActionResult<ServerAnswer> {
        Ok(self
            .forward_once(route, ctx, axum::body::Bytes::from(body), self.hop_timeout)
            .await?)
    }

    /// [`Self::forward`], sent once within `timeout` (at most the hop's), saying of a request
    /// without an answer whether the server may have seen it: the call core's replay decides on
    /// that.
    pub async fn forward_once(
        &self,
        route: &Route<'_>,
        ctx: &CallContext,
        body: axum::body::Bytes,
        timeout: Duration,
    ) -> Result<ServerAnswer, Failed> {
        let (path, mut headers) = route.request(ctx)?;
        headers.push((
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ));
        // The daemon's own trace context (the hop's span), never the runtime's.
        if let Some(traceparent) = crate::telemetry::request::propagation() {
            headers.push((
                HeaderName::from_static(crate::telemetry::context::TRACEPARENT),
                traceparent,
            ));
        }
        let request = Outgoing {
            method: reqwest::Method::POST,
            path,
            headers,
            body: Some(body),
            bound: http::MAX_RESPONSE_BYTES,
        };
        // On the heap: the hop (a timeout around the embedded router, or the HTTP client) is
        // most of a call's future, which the call core's layers would otherwise each copy.
        let (status, bytes) =
            Box::pin(self.answer(ctx, request, timeout.min(self.hop_timeout))).await?;
        if !status.is_success() {
            return Err(Failed::answered(refusal(&bytes)));
        }
        String::from_utf8(bytes)
            .map(ServerAnswer)
            .map_err(|_| Failed::answered(upstream_failed("the server's answer is not JSON")))
    }

    /// The current definitions of the apps installed in workspace `server_id`, with their
    /// recorded digests (`GET /runtime/servers/{serverId}/extensions`).
    pub async fn extensions(&self, server_id: &str) -> ActionResult<Value> {
        let ctx = CallContext {
            server_id: server_id.to_string(),
            agent_id: String::new(),
            idempotency_key: None,
        };
        let request = Outgoing {
            method: reqwest::Method::GET,
            path: format!("/runtime/servers/{server_id}/extensions"),
            headers: Vec::new(),
            body: None,
            bound: http::MAX_RESPONSE_BYTES,
        };
        self.send(&ctx, request).await
    }

    /// One action of the server's human API in workspace `server_id`, as the person this device
    /// belongs to (`POST /human/servers/{serverId}/actions/{action}`): its `data`, or the
    /// server's refusal. A write's `requestId` travels in its input.
    pub async fn human(
        &self,
        server_id: &str,
        action: crate::contract::HumanActionId,
        input: &Value,
    ) -> ActionResult<Value> {
        let ctx = CallContext {
            server_id: server_id.to_string(),
            agent_id: String::new(),
            idempotency_key: None,
        };
        let body = serde_json::to_vec(input).expect("a Value always serializes");
        let request = Outgoing {
            method: reqwest::Method::POST,
            path: format!(
                "/human/servers/{server_id}/actions/{}",
                action.descriptor().name
            ),
            headers: vec![(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body: Some(axum::body::Bytes::from(body)),
            // A whole attachment, in base64, is larger than any other answer.
            bound: match action {
                crate::contract::HumanActionId::AttachmentDownload => {
                    http::MAX_ATTACHMENT_ANSWER_BYTES
                }
                _ => http::MAX_RESPONSE_BYTES,
            },
        };
        self.send(&ctx, request).await
    }

    /// Whether the server answers its unauthenticated `GET /health` (no credential is sent).
    pub async fn health(&self) -> ActionResult<()> {
        let request = Outgoing {
            method: reqwest::Method::GET,
            path: "/health".into(),
            headers: Vec::new(),
            body: None,
            bound: http::MAX_RESPONSE_BYTES,
        };
        let (status, _) = self.exchange(request, self.hop_timeout).await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(upstream_failed(&format!(
                "the server's health check answered {}",
                status.as_u16()
            )))
        }
    }

    /// The request over this client's hop within `timeout`, as it is: status and the whole
    /// (bounded) body.
    async fn exchange(
        &self,
        request: Outgoing,
        timeout: Duration,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), Failed> {
        match &self.hop {
            Hop::Tcp { http, base_url } => tcp(http, base_url, request, timeout).await,
            Hop::InProcess(router) => {
                match tokio::time::timeout(timeout, in_process(router, request)).await {
                    Ok(answer) => answer,
                    Err(_) => Err(Failed::lost(timed_out())),
                }
            }
        }
    }

    async fn send(&self, ctx: &CallContext, request: Outgoing) -> ActionResult<Value> {
        let (status, bytes) = self.answer(ctx, request, self.hop_timeout).await?;
        if !status.is_success() {
            return Err(refusal(&bytes));
        }
        let envelope: Value = serde_json::from_slice(&bytes)
            .map_err(|_| upstream_failed("the server's answer is not JSON"))?;
        let Value::Object(mut envelope) = envelope else {
            return Err(upstream_failed(
                "the server's answer is not the contract's envelope",
            ));
        };
        match envelope.get("ok").and_then(Value::as_bool) {
            Some(true) => envelope
                .remove("data")
                .ok_or_else(|| upstream_failed("the server's answer has no `data`")),
            _ => Err(upstream_failed(
                "the server's answer is not the contract's envelope",
            )),
        }
    }

    /// Sends `request` with the credential (and the idempotency key) and answers a server
    /// failure (5xx) as the contract's error; any other status comes back with its body.
    async fn answer(
        &self,
        ctx: &CallContext,
        mut request: Outgoing,
        timeout: Duration,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), Failed> {
        let authorization = self.authorization.clone().ok_or_else(|| {
            ActionError::new(
                ErrorCode::InternalError,
                "the device credential cannot be sent in a header",
            )
        })?;
        request.headers.push((header::AUTHORIZATION, authorization));
        if let Some(key) = &ctx.idempotency_key {
            let quoted = header_value(format!("\"{key}\""))?;
            request
                .headers
                .push((HeaderName::from_static("idempotency-key"), quoted));
            let plain = header_value(key.clone())?;
            request
                .headers
                .push((HeaderName::from_static("x-request-id"), plain));
        }
        let (status, bytes) = self.exchange(request, timeout).await?;
        // A gateway between the daemon and the server that has no answer of the server's to
        // give: the request may or may not have reached it.
        if matches!(status.as_u16(), 502..=504) && refusal_code(&bytes).is_none() {
            return Err(Failed::lost(
                ActionError::new(
                    ErrorCode::UpstreamUnavailable,
                    format!(
                        "the AgentTeam Server is unreachable: a gateway answered {}",
                        status.as_u16()
                    ),
                )
                .with_next("retry later"),
            ));
        }
        // A provider's failure behind an extension is the contract's own answer, not the
        // server's: it passes through like any refusal.
        if status.is_server_error()
            && let Ok(envelope) = serde_json::from_slice::<Value>(&bytes)
            && matches!(
                envelope
                    .pointer("/error/code")
                    .and_then(Value::as_str)
                    .and_then(|c| c.parse::<ErrorCode>().ok()),
                Some(ErrorCode::ProviderError | ErrorCode::ProviderTimeout)
            )
        {
            return Err(Failed::answered(reproject_error(&envelope["error"])));
        }
        if status.is_server_error() {
            // The server's incident id joins its log to ours; it is not passed on to the runtime.
            let server_incident = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/incidentId")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .filter(|id| {
                    id.len() <= 32 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                })
                .unwrap_or_default();
            tracing::error!(
                incident_id = crate::wire::observe::incident_id().unwrap_or_default(),
                server_incident_id = %server_incident,
                status = status.as_u16(),
                "the AgentTeam Server failed a request"
            );
            let mut error = upstream_failed(&format!(
                "the server failed with status {}",
                status.as_u16()
            ));
            // A knowledge failure keeps the hop the server named.
            error.stage = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| serde_json::from_value(v.pointer("/error/stage")?.clone()).ok());
            return Err(Failed::answered(error));
        }
        Ok((status, bytes))
    }
}

/// Where a forwarded call goes on the server, and what travels beside its input.
#[derive(Debug, Clone, Copy)]
pub enum Route<'a> {
    /// A built-in server-owned action: `…/actions/{domain}/{action}`.
    Action(ActionId),
    /// A server-owned MCP tool: `…/tools/{tool}`.
    Tool(ToolId),
    /// A knowledge tool, for the runtime's current Human-initiated `turn`, which travels in its
    /// own headers: the server revalidates it, it grants nothing by itself.
    Knowledge {
        tool: ToolId,
        turn: &'a crate::wire::turn::Turn,
    },
    /// An action of an installed extension, under the definition digest and catalog version the
    /// runtime was launched with.
    Extension {
        name: &'a str,
        action: &'a str,
        digest: &'a str,
        catalog_version: u64,
    },
}

impl Route<'_> {
    /// The path from the server's root, and the headers the route adds.
    fn request(&self, ctx: &CallContext) -> ActionResult<(String, Vec<(HeaderName, HeaderValue)>)> {
        // One buffer of the path's final size: this runs for every forwarded call.
        let path = |kind: &str, name: &str, action: &str| {
            let parts = [
                "/runtime/servers/",
                ctx.server_id.as_str(),
                "/agents/",
                ctx.agent_id.as_str(),
                kind,
                name,
                if action.is_empty() { "" } else { "/" },
                action,
            ];
            let mut path = String::with_capacity(parts.iter().map(|p| p.len()).sum());
            parts.iter().for_each(|part| path.push_str(part));
            path
        };
        let named = |name: &'static str, value: String| {
            Ok::<_, ActionError>((HeaderName::from_static(name), header_value(value)?))
        };
        Ok(match *self {
            Route::Action(id) => {
                let descriptor = id.descriptor();
                let path = path("/actions/", descriptor.domain, descriptor.action);
                (path, Vec::new())
            }
            Route::Tool(id) => (path("/tools/", id.descriptor().name, ""), Vec::new()),
            Route::Knowledge { tool, turn } => (
                path("/knowledge/", tool.descriptor().name, ""),
                vec![
                    named(crate::wire::turn::TARGET_HEADER, turn.target.clone())?,
                    named(crate::wire::turn::MESSAGE_HEADER, turn.message_id.clone())?,
                ],
            ),
            Route::Extension {
                name,
                action,
                digest,
                catalog_version,
            } => (
                path("/ext/", name, action),
                vec![
                    named(crate::wire::EXTENSION_DIGEST_HEADER, digest.to_string())?,
                    named(
                        crate::wire::EXTENSION_CATALOG_VERSION_HEADER,
                        catalog_version.to_string(),
                    )?,
                ],
            ),
        })
    }
}

/// `Bearer <credential>` as a header value the logs never show.
fn authorization(credential: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::try_from(format!("Bearer {credential}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// A header value the daemon made (a selector, a turn, a pin), or the failure to send it.
fn header_value(value: String) -> ActionResult<HeaderValue> {
    HeaderValue::try_from(value).map_err(|_| {
        ActionError::new(
            ErrorCode::InternalError,
            "a header of the request to the server cannot be built",
        )
    })
}

/// A server's success envelope (`2xx`), as the server wrote it.
pub struct ServerAnswer(String);

impl ServerAnswer {
    /// A success envelope's body, as it was received.
    pub fn new(body: String) -> ServerAnswer {
        ServerAnswer(body)
    }

    /// The whole body, as it was received.
    pub fn body(&self) -> &str {
        &self.0
    }

    /// The body, given back.
    pub fn into_body(self) -> String {
        self.0
    }

    /// The text where the reference server's envelope writes `data`, when the answer has that
    /// envelope's frame. Only the frame is checked: the text is `data` once it is proven to be
    /// exactly one JSON value (then the whole answer is exactly `{"data":…,"ok":true}`).
    pub fn written(&self) -> Option<&str> {
        self.written_at().map(|at| &self.0[at])
    }

    /// Where [`Self::written`] lies in [`Self::body`].
    pub fn written_at(&self) -> Option<std::ops::Range<usize>> {
        let inner = self
            .0
            .trim_end()
            .strip_prefix(SUCCESS_OPEN)?
            .strip_suffix(SUCCESS_CLOSE)?;
        let data = inner.trim();
        let start = SUCCESS_OPEN.len() + (inner.len() - inner.trim_start().len());
        Some(start..start + data.len())
    }

    /// The envelope's `data` read in place, with its JSON text: the text as the server wrote it
    /// when the envelope is exactly `{"data":…,"ok":true}` (the reference server's form), else
    /// `data` written compactly. One pass over the answer: it is proven to be one JSON object of
    /// exactly those two members before the text between them is taken for `data`.
    pub fn data(&self) -> ActionResult<(Borrowed<'_>, Cow<'_, str>)> {
        let not_envelope = || upstream_failed("the server's answer is not the contract's envelope");
        let envelope = Borrowed::parse(&self.0)
            .map_err(|_| upstream_failed("the server's answer is not JSON with distinct keys"))?;
        let Borrowed::Object(members) = envelope else {
            return Err(not_envelope());
        };
        let member = |name: &str| members.iter().position(|(key, _)| key == name);
        if !matches!(
            member("ok").map(|at| &members[at].1),
            Some(Borrowed::Bool(true))
        ) {
            return Err(not_envelope());
        }
        let Some(at) = member("data") else {
            return Err(upstream_failed("the server's answer has no `data`"));
        };
        let exact = members.len() == 2;
        let data = members.into_iter().nth(at).expect("found above").1;
        let text = match self.written() {
            Some(written) if exact => Cow::Borrowed(written),
            _ => Cow::Owned(serde_json::to_string(&data).expect("a document serializes")),
        };
        Ok((data, text))
    }
}

/// The request over HTTP: status and the whole (bounded) body.
async fn tcp(
    http: &reqwest::Client,
    base_url: &str,
    request: Outgoing,
    timeout: Duration,
) -> Result<(reqwest::StatusCode, Vec<u8>), Failed> {
    let request_bound = request.bound;
    let mut builder = http
        .request(request.method, format!("{base_url}{}", request.path))
        .timeout(timeout);
    for (name, value) in request.headers {
        builder = builder.header(name, value);
    }
    if let Some(body) = request.body {
        builder = builder.body(body);
    }
    let response = builder.send().await.map_err(classify)?;
    let status = response.status();
    match http::read_bounded(response, request_bound).await {
        Ok(bytes) => Ok((status, bytes)),
        Err(http::ReadError::TooLarge) => Err(Failed::answered(upstream_failed(
            "the server's answer is too large",
        ))),
        // The answer broke off (a reset, a timeout, fewer bytes than announced).
        Err(http::ReadError::Transport(error)) => Err(Failed::lost(classify(error).error)),
    }
}

/// The request through `router` in this process: status and the whole (bounded) body. The
/// server's router is infallible; a body that fails to read is a server failure.
async fn in_process(
    router: &axum::Router,
    request: Outgoing,
) -> Result<(reqwest::StatusCode, Vec<u8>), Failed> {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let bound = request.bound;
    let uri = axum::http::Uri::try_from(request.path).map_err(|_| {
        ActionError::new(
            ErrorCode::InternalError,
            "the request to the embedded server cannot be built",
        )
    })?;
    let mut outgoing =
        axum::http::Request::new(axum::body::Body::from(request.body.unwrap_or_default()));
    *outgoing.method_mut() = request.method;
    *outgoing.uri_mut() = uri;
    let headers = outgoing.headers_mut();
    headers.reserve(request.headers.len() + 1);
    // The server's router sees what a TCP request would carry.
    headers.insert(header::HOST, HeaderValue::from_static("in-process.invalid"));
    headers.extend(request.headers);
    let response = router
        .clone()
        .oneshot(outgoing)
        .await
        .unwrap_or_else(|never| match never {});
    let status = response.status();
    let body = http_body_util::Limited::new(response.into_body(), bound);
    match body.collect().await {
        // The server wrote one buffer: taken back as it is, not copied.
        Ok(collected) => Ok((status, Vec::from(collected.to_bytes()))),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(Failed::answered(
            upstream_failed("the server's answer is too large"),
        )),
        Err(_) => Err(Failed::lost(upstream_failed(
            "the server's answer could not be read",
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(body: &str) -> ActionResult<(Value, String, bool)> {
        let answer = ServerAnswer(body.to_string());
        let (document, text) = answer.data()?;
        let borrowed = matches!(text, Cow::Borrowed(_));
        Ok((document.to_value(), text.into_owned(), borrowed))
    }

    /// The server's envelope writer and the form the daemon slices agree: a change to one
    /// would silently send every answer down the slower path.
    #[test]
    fn the_servers_success_envelope_is_the_sliced_form() {
        let data = serde_json::json!({ "messages": [], "target": "channel:chn_x", "z": [1] });
        let (status, body) = crate::wire::render_as(&Ok(&data));
        assert_eq!(status, 200);
        let answer = ServerAnswer::new(body);
        let (document, text) = answer.data().unwrap();
        assert!(matches!(text, Cow::Borrowed(_)), "{text}");
        assert_eq!(text, serde_json::to_string(&data).unwrap());
        assert_eq!(document.to_value(), data);

        // The envelope around an adapter's text is the same bytes.
        let written = serde_json::to_string(&data).unwrap();
        assert_eq!(
            crate::wire::render_text(&Ok(written.clone())),
            (status, answer.0.clone())
        );
        let refused = Err(crate::contract::ActionError::new(
            crate::contract::error::ErrorCode::NotFound,
            "gone",
        ));
        assert_eq!(
            crate::wire::render_text(&refused),
            crate::wire::render_as::<()>(&refused.clone().map(|_: String| ()))
        );
    }

    #[test]
    fn the_reference_form_gives_its_data_text_as_written() {
        let (value, text, borrowed) =
            data("{\"data\":{\"a\":[1,2],\"s\":\"x\"},\"ok\":true}\n").unwrap();
        assert!(borrowed);
        assert_eq!(text, r#"{"a":[1,2],"s":"x"}"#);
        assert_eq!(value, serde_json::json!({ "a": [1, 2], "s": "x" }));
    }

    /// Any other form is read whole and `data` written compactly; the text always reads back to
    /// the value that was checked.
    #[test]
    fn any_other_form_gives_data_written_again() {
        for body in [
            r#"{"ok":true,"data":{"a":1}}"#,
            r#"{ "data" : {"a":1} , "ok" : true }"#,
            r#"{"data":{"a":1},"ok":true,"meta":{"ok":true}}"#,
            r#"{"data":{"a":1},"meta":0,"ok":true}"#,
            // The closing text inside `data`'s own string.
            r#"{"data":{"s":",\"ok\":true}"},"ok":true}"#,
            "{\"data\":\n{\"a\":1},\"ok\":true}",
        ] {
            let (value, text, _) = data(body).unwrap();
            assert_eq!(
                serde_json::from_str::<Value>(&text).unwrap(),
                value,
                "{body}"
            );
            assert_eq!(
                value,
                serde_json::from_str::<Value>(body).unwrap()["data"],
                "{body}"
            );
        }
    }

    #[test]
    fn a_broken_envelope_is_upstream_failed() {
        for body in [
            "",
            "not json",
            r#"{"data":{"a":1},"ok":false}"#,
            r#"{"data":{"a":1}}"#,
            r#"{"ok":true}"#,
            r#"{"data":{"a":1},"ok":true,"ok":true}"#,
            r#"{"data":{"a":1,"a":2},"ok":true}"#,
            r#"[{"data":1,"ok":true}]"#,
        ] {
            let error = data(body)
                .err()
                .unwrap_or_else(|| panic!("accepted {body}"));
            assert_eq!(error.code, ErrorCode::UpstreamFailed, "{body}");
        }
    }
}
