//! The typed client of the server's runtime action API, used by the daemon.
//!
//! `ServerClient` implements the generated `ActionHandler` trait (the per-action binding is
//! generated into `client.rs`); `call` is the one transport: authenticate as a device, `POST` the
//! typed input to the action's route, forward the idempotency selector as `Idempotency-Key` and
//! `X-Request-ID`, and turn the answer back into a typed output or a typed `ActionError`.
//!
//! Failures of the hop itself are classified, never passed through: unreachable → `upstream_unavailable`,
//! too slow → `upstream_timeout`, a 5xx or an answer that is not the contract's envelope →
//! `upstream_failed`. Their messages never carry the server's internals.

pub mod http;

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::{ActionError, ActionHandler, ActionId, ActionResult, ToolId, types};

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
    http: reqwest::Client,
    base_url: String,
    credential: String,
}

impl std::fmt::Debug for ServerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credential is a secret: never printed.
        f.debug_struct("ServerClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl ServerClient {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7780`) acting as the device
    /// whose credential is `credential`, the way the operator said to reach it (`remote`).
    pub fn new(base_url: &str, credential: String, remote: Option<&http::Remote>) -> ServerClient {
        let http = http::builder(remote)
            .timeout(CALL_TIMEOUT)
            .build()
            .expect("a plain HTTP client builds");
        ServerClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            credential,
        }
    }

    /// Calls `id` with `input` and decodes the typed output.
    pub async fn call<I: Serialize + Sync, O: DeserializeOwned>(
        &self,
        ctx: &CallContext,
        id: ActionId,
        input: &I,
    ) -> ActionResult<O> {
        let data = self.call_json(ctx, id, input).await?;
        serde_json::from_value(data).map_err(|_| {
            upstream_failed("the server's answer does not match the action's output type")
        })
    }

    /// Calls `id` with `input` and returns the success envelope's `data` as JSON.
    pub async fn call_json<I: Serialize + Sync>(
        &self,
        ctx: &CallContext,
        id: ActionId,
        input: &I,
    ) -> ActionResult<Value> {
        let descriptor = id.descriptor();
        let url = format!(
            "{}/runtime/servers/{}/agents/{}/actions/{}/{}",
            self.base_url, ctx.server_id, ctx.agent_id, descriptor.domain, descriptor.action
        );
        self.post(ctx, url, input).await
    }

    /// Calls the server-owned MCP tool `id` with validated `arguments` and returns its
    /// structured result.
    pub async fn call_tool_json(
        &self,
        ctx: &CallContext,
        id: ToolId,
        arguments: &Value,
    ) -> ActionResult<Value> {
        let url = format!(
            "{}/runtime/servers/{}/agents/{}/tools/{}",
            self.base_url,
            ctx.server_id,
            ctx.agent_id,
            id.descriptor().name
        );
        self.post(ctx, url, arguments).await
    }

    /// Calls knowledge tool `tool` (`kb_search` or `kb_fetch`) for the runtime's current `turn`,
    /// which travels in its own headers: the server revalidates it, it grants nothing by itself.
    pub async fn call_knowledge(
        &self,
        ctx: &CallContext,
        tool: &str,
        arguments: &Value,
        turn: &crate::wire::turn::Turn,
    ) -> ActionResult<Value> {
        let url = format!(
            "{}/runtime/servers/{}/agents/{}/knowledge/{tool}",
            self.base_url, ctx.server_id, ctx.agent_id
        );
        let request = self
            .http
            .post(url)
            .header(crate::wire::turn::TARGET_HEADER, &turn.target)
            .header(crate::wire::turn::MESSAGE_HEADER, &turn.message_id);
        self.send(ctx, request.json(arguments)).await
    }

    /// Calls action `action` of the extension `name` with `input`, under the definition digest
    /// and catalog version the runtime was launched with.
    pub async fn call_extension(
        &self,
        ctx: &CallContext,
        name: &str,
        action: &str,
        input: &Value,
        pin: (&str, u64),
    ) -> ActionResult<Value> {
        let url = format!(
            "{}/runtime/servers/{}/agents/{}/ext/{name}/{action}",
            self.base_url, ctx.server_id, ctx.agent_id
        );
        let (digest, catalog_version) = pin;
        let request = self
            .http
            .post(url)
            .header(crate::wire::EXTENSION_DIGEST_HEADER, digest)
            .header(
                crate::wire::EXTENSION_CATALOG_VERSION_HEADER,
                catalog_version.to_string(),
            );
        self.send(ctx, request.json(input)).await
    }

    /// The current definitions of the apps installed in workspace `server_id`, with their
    /// recorded digests (`GET /runtime/servers/{serverId}/extensions`).
    pub async fn extensions(&self, server_id: &str) -> ActionResult<Value> {
        let url = format!("{}/runtime/servers/{server_id}/extensions", self.base_url);
        let ctx = CallContext {
            server_id: server_id.to_string(),
            agent_id: String::new(),
            idempotency_key: None,
        };
        self.send(&ctx, self.http.get(url)).await
    }

    async fn post<I: Serialize + Sync>(
        &self,
        ctx: &CallContext,
        url: String,
        input: &I,
    ) -> ActionResult<Value> {
        self.send(ctx, self.http.post(url).json(input)).await
    }

    async fn send(
        &self,
        ctx: &CallContext,
        request: reqwest::RequestBuilder,
    ) -> ActionResult<Value> {
        let mut request = request.bearer_auth(&self.credential);
        if let Some(key) = &ctx.idempotency_key {
            request = request
                .header("Idempotency-Key", format!("\"{key}\""))
                .header("X-Request-ID", key);
        }
        let response = request.send().await.map_err(classify)?;
        let status = response.status();
        let bytes = match http::read_bounded(response, http::MAX_RESPONSE_BYTES).await {
            Ok(bytes) => bytes,
            Err(http::ReadError::TooLarge) => {
                return Err(upstream_failed("the server's answer is too large"));
            }
            Err(http::ReadError::Transport(error)) => return Err(classify(error)),
        };
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
            return Err(reproject_error(&envelope["error"]));
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
            return Err(error);
        }
        let envelope: Value = serde_json::from_slice(&bytes)
            .map_err(|_| upstream_failed("the server's answer is not JSON"))?;
        match (
            status.is_success(),
            envelope.get("ok").and_then(Value::as_bool),
        ) {
            (true, Some(true)) => envelope
                .get("data")
                .cloned()
                .ok_or_else(|| upstream_failed("the server's answer has no `data`")),
            (false, Some(false)) => Err(reproject_error(&envelope["error"])),
            _ => Err(upstream_failed(
                "the server's answer is not the contract's envelope",
            )),
        }
    }
}

/// Rebuilds an `ActionError` from only the contract's fields; anything else is dropped.
fn reproject_error(error: &Value) -> ActionError {
    let Some(code) = error
        .get("code")
        .and_then(Value::as_str)
        .and_then(|c| c.parse::<ErrorCode>().ok())
    else {
        return upstream_failed("the server answered with an unknown error code");
    };
    let text = |field: &str| {
        error
            .get(field)
            .and_then(Value::as_str)
            .map(|s| s.chars().take(1024).collect::<String>())
    };
    let mut projected = ActionError::new(code, text("message").unwrap_or_default());
    projected.stage = error
        .get("stage")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok());
    projected.hint = text("hint");
    projected.next = text("next");
    projected.details = error
        .get("details")
        .and_then(Value::as_array)
        .map(|details| {
            details
                .iter()
                .take(crate::contract::validate::MAX_DETAILS)
                .filter_map(|d| {
                    Some(ErrorDetail {
                        path: d.get("path")?.as_str()?.chars().take(512).collect(),
                        message: d.get("message")?.as_str()?.chars().take(512).collect(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    projected
}

fn classify(error: reqwest::Error) -> ActionError {
    if error.is_timeout() {
        ActionError::new(
            ErrorCode::UpstreamTimeout,
            "the AgentTeam Server did not answer in time",
        )
        .with_next("retry later")
    } else {
        ActionError::new(
            ErrorCode::UpstreamUnavailable,
            format!(
                "the AgentTeam Server is unreachable: {}",
                http::why_unreachable(&error)
            ),
        )
        .with_next("retry later")
    }
}

fn upstream_failed(message: &str) -> ActionError {
    ActionError::new(ErrorCode::UpstreamFailed, message)
}

include!(concat!(env!("OUT_DIR"), "/client.rs"));
