//! The JSON-RPC layer: request shape, the two protocol eras, their header rules, and the methods.
//!
//! Era (reference/mcp.md §1.7): a request whose `params._meta` names a protocol version, or whose
//! `MCP-Protocol-Version` header names 2026-07-28 or later, is *modern* (stateless: every request
//! carries its version and capabilities; `Mcp-Method`/`Mcp-Name` headers must match the body;
//! results carry `resultType`, lists `ttlMs` + `cacheScope`). Anything else is *legacy*
//! (2025-11-25 and earlier: `initialize` negotiates, `ping` answers, no session ids).

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Map, Value, json};

use super::super::auth::Authorization;
use super::super::http::DaemonState;
use super::tools;
use crate::contract::ToolId;
use crate::contract::catalog::{MCP_TOOLS_JSON, find_tool};

/// The one modern revision served.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Legacy revisions `initialize` accepts, newest first (the first is the counter-offer).
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Every method the modern era serves; anything else is 404 + -32601, before header checks.
const MODERN_METHODS: [&str; 7] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];
/// How long a client may cache a list result; the inventory changes only with the binary.
const LIST_TTL_MS: u64 = 60_000;

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The application error code of an admission refusal (HTTP 429): outside the JSON-RPC and MCP
/// reserved ranges (-32768..-32000).
pub const ADMISSION_LIMITED: i64 = -31000;

/// The longest name, method or URI echoed back in an error message.
const MAX_ECHO: usize = 64;

/// A JSON-RPC error object.
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The error response; `id` is absent when the request's id could not be read.
    pub fn respond(&self, status: StatusCode, id: Option<&Value>) -> Response {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        let mut body = json!({ "jsonrpc": "2.0", "error": error });
        if let Some(id) = id {
            body["id"] = id.clone();
        }
        (
            status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

/// One JSON-RPC request or notification.
#[derive(Debug)]
pub struct RpcRequest {
    /// Absent for a notification.
    pub id: Option<Value>,
    pub method: String,
    pub params: Map<String, Value>,
}

impl RpcRequest {
    /// The request in `message`, or the error to answer (with the id, when it could be read).
    pub fn from_value(message: Value) -> Result<RpcRequest, (RpcError, Option<Value>)> {
        let invalid = |why: &str, id: Option<Value>| (RpcError::new(-32600, why), id);
        let Value::Object(mut object) = message else {
            return Err(invalid(
                if message.is_array() {
                    "batches are not supported: send one JSON-RPC message per request"
                } else {
                    "the body must be one JSON-RPC object"
                },
                None,
            ));
        };
        let id = match object.remove("id") {
            None => None,
            Some(id @ Value::String(_)) => Some(id),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n)),
            Some(_) => return Err(invalid("`id` must be a string or an integer", None)),
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid("`jsonrpc` must be `2.0`", id));
        }
        let method = match object.remove("method") {
            Some(Value::String(method)) => method,
            // A client's response to a server request: none are ever sent, so nothing to match.
            None if id.is_some()
                && (object.contains_key("result") || object.contains_key("error")) =>
            {
                return Ok(RpcRequest {
                    id: None,
                    method: String::new(),
                    params: Map::new(),
                });
            }
            _ => return Err(invalid("`method` must be a string", id)),
        };
        let params = match object.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params,
            Some(_) => return Err(invalid("`params` must be an object", id)),
        };
        Ok(RpcRequest { id, method, params })
    }

    fn meta(&self) -> Option<&Map<String, Value>> {
        self.params.get("_meta").and_then(Value::as_object)
    }
}

/// Which protocol era a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier, with the negotiated or assumed version.
    Legacy,
    /// 2026-07-28.
    Modern,
}

type Refusal = (StatusCode, RpcError);

fn header_mismatch(message: String) -> Refusal {
    (StatusCode::BAD_REQUEST, RpcError::new(-32020, message))
}

/// A header's value with surrounding whitespace removed and `=?base64?…?=` decoded.
fn header_text(headers: &HeaderMap, name: &str) -> Result<Option<String>, Refusal> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(header_mismatch(format!("send one `{name}` header")));
    }
    let text = value
        .to_str()
        .map_err(|_| header_mismatch(format!("`{name}` must be visible ASCII")))?
        .trim();
    if let Some(encoded) = text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    {
        return base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(Some)
            .ok_or_else(|| header_mismatch(format!("`{name}` is not valid base64 UTF-8")));
    }
    Ok(Some(text.to_string()))
}

/// `text` cut to what an error message or a log line may echo.
pub fn echo(text: &str) -> String {
    text.chars().take(MAX_ECHO).collect()
}

impl Era {
    /// The request's era, after every header rule of that era holds.
    pub fn classify(headers: &HeaderMap, request: &RpcRequest) -> Result<Era, Refusal> {
        let header_version = header_text(headers, "mcp-protocol-version")?;
        let meta_version = request.meta().and_then(|m| m.get(META_VERSION));
        let modern = meta_version.is_some()
            || header_version
                .as_deref()
                .is_some_and(|v| v >= MODERN_VERSION);
        if !modern {
            if let Some(version) = &header_version
                && !LEGACY_VERSIONS.contains(&version.as_str())
            {
                return Err((
                    StatusCode::BAD_REQUEST,
                    RpcError::new(
                        -32602,
                        format!("unsupported protocol version `{}`", echo(version)),
                    )
                    .with_data(json!({ "supported": all_versions(), "requested": echo(version) })),
                ));
            }
            return Ok(Era::Legacy);
        }

        if meta_version.is_some_and(|v| !v.is_string()) {
            return Err((
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    -32602,
                    format!("`params._meta` `{META_VERSION}` must be a string"),
                ),
            ));
        }
        let meta_version = meta_version.and_then(Value::as_str);
        if let (Some(header), Some(meta)) = (&header_version, meta_version)
            && header != meta
        {
            return Err(header_mismatch(format!(
                "`MCP-Protocol-Version` `{}` does not match `_meta` protocol version `{}`",
                echo(header),
                echo(meta)
            )));
        }
        let requested = meta_version.or(header_version.as_deref()).unwrap_or("");
        if requested != MODERN_VERSION {
            return Err((
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    -32022,
                    format!("unsupported protocol version `{}`", echo(requested)),
                )
                .with_data(json!({ "supported": [MODERN_VERSION], "requested": echo(requested) })),
            ));
        }
        if header_version.is_none() {
            return Err(header_mismatch(
                "the `MCP-Protocol-Version` header is required".into(),
            ));
        }
        let capabilities_ok = request
            .meta()
            .and_then(|m| m.get(META_CAPABILITIES))
            .is_some_and(Value::is_object);
        if meta_version.is_none() || !capabilities_ok {
            return Err((
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    -32602,
                    format!("`params._meta` must carry `{META_VERSION}` and `{META_CAPABILITIES}`"),
                ),
            ));
        }
        if request.id.is_some() && !MODERN_METHODS.contains(&request.method.as_str()) {
            return Err(method_not_found(Era::Modern, &request.method));
        }
        match header_text(headers, "mcp-method")? {
            Some(method) if method == request.method => {}
            Some(method) => {
                return Err(header_mismatch(format!(
                    "`Mcp-Method` `{}` does not match the body's method",
                    echo(&method)
                )));
            }
            None => {
                return Err(header_mismatch(
                    "the `Mcp-Method` header is required".into(),
                ));
            }
        }
        let named = match request.method.as_str() {
            "tools/call" | "prompts/get" => request.params.get("name"),
            "resources/read" => request.params.get("uri"),
            _ => None,
        };
        if let Some(named) = named {
            match (header_text(headers, "mcp-name")?, named.as_str()) {
                (Some(header), Some(body)) if header == body => {}
                (None, _) => {
                    return Err(header_mismatch("the `Mcp-Name` header is required".into()));
                }
                _ => {
                    return Err(header_mismatch(
                        "`Mcp-Name` does not match the body's name".into(),
                    ));
                }
            }
        }
        Ok(Era::Modern)
    }

    /// Adds what every result of the era carries (idempotent).
    pub fn decorate(self, mut result: Value) -> Value {
        if self == Era::Modern
            && let Some(object) = result.as_object_mut()
        {
            object.insert("resultType".into(), json!("complete"));
            let meta = object
                .entry("_meta")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("_meta is an object");
            meta.insert(META_SERVER_INFO.into(), server_info());
        }
        result
    }
}

fn all_versions() -> Vec<&'static str> {
    std::iter::once(MODERN_VERSION)
        .chain(LEGACY_VERSIONS)
        .collect()
}

fn server_info() -> Value {
    json!({ "name": "agentteam", "version": env!("CARGO_PKG_VERSION") })
}

fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": false },
        "prompts": { "listChanged": false },
        "resources": { "subscribe": false, "listChanged": false },
    })
}

/// What `initialize` and `server/discover` tell a model about the namespace.
fn instructions() -> String {
    format!(
        "AgentTeam tools for this agent: messages (send to an exact target, read history, react, read attachments), memory search and knowledge retrieval. Reply with `{}` using the exact target shown on the message you answer.",
        ToolId::MessageSend.descriptor().name
    )
}

/// A list result, with the modern era's cache fields.
fn list(era: Era, key: &str, items: Value) -> Value {
    let mut result = json!({ key: items });
    if era == Era::Modern {
        result["ttlMs"] = json!(LIST_TTL_MS);
        result["cacheScope"] = json!("private");
    }
    result
}

fn method_not_found(era: Era, method: &str) -> Refusal {
    // Modern: 404 for a method the server does not implement (the transport's rule).
    let status = match era {
        Era::Modern => StatusCode::NOT_FOUND,
        Era::Legacy => StatusCode::OK,
    };
    (
        status,
        RpcError::new(-32601, format!("method not found: `{}`", echo(method))),
    )
}

fn invalid_params(message: String) -> Refusal {
    (StatusCode::OK, RpcError::new(-32602, message))
}

/// A successful result: built per request, or fixed and serialized once (the tool list).
pub enum Reply {
    Value(Value),
    /// The complete serialized `result`, already decorated for its era.
    Serialized(&'static str),
}

/// The answer to one request of `era`.
pub async fn answer(
    state: &DaemonState,
    authorization: &Authorization,
    era: Era,
    request: &RpcRequest,
) -> Result<Reply, Refusal> {
    if request.method == "tools/list" {
        if request.params.contains_key("cursor") {
            return Err(invalid_params(
                "invalid cursor: the tool list has one page".into(),
            ));
        }
        return Ok(Reply::Serialized(tool_list(era)));
    }
    respond(state, authorization, era, request)
        .await
        .map(|result| Reply::Value(era.decorate(result)))
}

async fn respond(
    state: &DaemonState,
    authorization: &Authorization,
    era: Era,
    request: &RpcRequest,
) -> Result<Value, Refusal> {
    let params = &request.params;
    match (era, request.method.as_str()) {
        (Era::Legacy, "initialize") => {
            let requested = params.get("protocolVersion").and_then(Value::as_str);
            let version = requested
                .filter(|v| LEGACY_VERSIONS.contains(v))
                .unwrap_or(LEGACY_VERSIONS[0]);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": capabilities(),
                "serverInfo": server_info(),
                "instructions": instructions(),
            }))
        }
        (Era::Legacy, "ping") => Ok(json!({})),
        (Era::Modern, "server/discover") => {
            let mut result = json!({
                "supportedVersions": [MODERN_VERSION],
                "capabilities": capabilities(),
                "instructions": instructions(),
            });
            result["ttlMs"] = json!(LIST_TTL_MS);
            result["cacheScope"] = json!("private");
            Ok(result)
        }
        (_, "tools/call") => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid_params("`params.name` must be a string".into()))?;
            let Some(tool) = find_tool(name) else {
                return Err(invalid_params(format!("unknown tool: `{}`", echo(name))));
            };
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(arguments @ Value::Object(_)) => arguments.clone(),
                Some(_) => {
                    return Err(invalid_params(
                        "`params.arguments` must be an object".into(),
                    ));
                }
            };
            Ok(tools::call(state, authorization, era, tool, arguments).await)
        }
        (_, "prompts/list") => Ok(list(era, "prompts", json!([]))),
        (_, "resources/list") => Ok(list(era, "resources", json!([]))),
        (_, "resources/templates/list") => Ok(list(era, "resourceTemplates", json!([]))),
        (_, "resources/read") => {
            let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
            Err((
                StatusCode::OK,
                RpcError::new(-32602, format!("resource not found: `{}`", echo(uri)))
                    .with_data(json!({ "uri": echo(uri) })),
            ))
        }
        (era, method) => Err(method_not_found(era, method)),
    }
}

/// The serialized `tools/list` result of `era`: the inventory never changes while the daemon
/// runs, so it is built and serialized once per era.
fn tool_list(era: Era) -> &'static str {
    static LISTS: [std::sync::OnceLock<String>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    LISTS[era as usize].get_or_init(|| {
        let tools: Value = serde_json::from_str(MCP_TOOLS_JSON).expect("generated JSON parses");
        era.decorate(list(era, "tools", tools)).to_string()
    })
}
