//! The JSON-RPC layer: the request shape, the methods (parsed once into [`Method`]; no method
//! string is compared after that), and each method's answer.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::era::{Era, LEGACY_VERSIONS, MODERN_VERSION, Refusal, server_info};
use super::tools;
use crate::contract::ToolId;
use crate::contract::catalog::{MCP_TOOLS_JSON, find_tool};
use crate::daemon::auth::Authorization;
use crate::daemon::state::DaemonState;
use crate::wire::jsonrpc;

/// How long a client may cache a list result; the inventory changes only with the binary.
const LIST_TTL_MS: u64 = 60_000;
/// The longest name, method or URI echoed back in an error message.
const MAX_ECHO: usize = 64;

/// `text` cut to what an error message or a log line may echo.
pub fn echo(text: &str) -> String {
    text.chars().take(MAX_ECHO).collect()
}

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

    pub fn with_data(mut self, data: Value) -> Self {
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

/// Every method the route knows, parsed once from the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Initialize,
    Ping,
    ServerDiscover,
    ToolsList,
    ToolsCall,
    PromptsList,
    PromptsGet,
    ResourcesList,
    ResourcesTemplatesList,
    ResourcesRead,
    /// Anything else (a notification, or an unknown method).
    Other,
}

impl Method {
    /// Every known method with its wire name.
    const NAMES: [(Method, &'static str); 10] = [
        (Method::Initialize, "initialize"),
        (Method::Ping, "ping"),
        (Method::ServerDiscover, "server/discover"),
        (Method::ToolsList, "tools/list"),
        (Method::ToolsCall, "tools/call"),
        (Method::PromptsList, "prompts/list"),
        (Method::PromptsGet, "prompts/get"),
        (Method::ResourcesList, "resources/list"),
        (Method::ResourcesTemplatesList, "resources/templates/list"),
        (Method::ResourcesRead, "resources/read"),
    ];

    /// The one comparison of a method string.
    pub fn parse(name: &str) -> Method {
        Method::NAMES
            .iter()
            .find(|(_, wire)| *wire == name)
            .map_or(Method::Other, |(method, _)| *method)
    }

    /// Whether `era` serves this method (a modern request for anything else is 404 + -32601,
    /// before its header checks).
    pub fn served_in(self, era: Era) -> bool {
        match self {
            Method::Initialize | Method::Ping => era == Era::Legacy,
            Method::ServerDiscover => era == Era::Modern,
            Method::ToolsList
            | Method::ToolsCall
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
            | Method::ResourcesRead => true,
            Method::PromptsGet | Method::Other => false,
        }
    }

    /// The param the modern era's `Mcp-Name` header must repeat.
    pub fn named_param(self) -> Option<&'static str> {
        match self {
            Method::ToolsCall | Method::PromptsGet => Some("name"),
            Method::ResourcesRead => Some("uri"),
            _ => None,
        }
    }
}

/// One JSON-RPC request or notification.
#[derive(Debug)]
pub struct RpcRequest {
    /// Absent for a notification.
    pub id: Option<Value>,
    pub method: Method,
    /// The method as sent (for the `Mcp-Method` header rule and for echoing).
    pub method_name: String,
    pub params: Map<String, Value>,
}

impl RpcRequest {
    /// The request in `message`, or the error to answer (with the id, when it could be read).
    pub fn from_value(message: Value) -> Result<RpcRequest, (RpcError, Option<Value>)> {
        let invalid =
            |why: &str, id: Option<Value>| (RpcError::new(jsonrpc::INVALID_REQUEST, why), id);
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
        let method_name = match object.remove("method") {
            Some(Value::String(method)) => method,
            // A client's response to a server request: none are ever sent, so nothing to match.
            None if id.is_some()
                && (object.contains_key("result") || object.contains_key("error")) =>
            {
                return Ok(RpcRequest {
                    id: None,
                    method: Method::Other,
                    method_name: String::new(),
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
        Ok(RpcRequest {
            id,
            method: Method::parse(&method_name),
            method_name,
            params,
        })
    }

    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.params.get("_meta").and_then(Value::as_object)
    }
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

/// The refusal of a method `era` does not serve: 404 in the modern era (the transport's rule),
/// a JSON-RPC error in a 200 in the legacy one.
pub fn method_not_found(era: Era, request: &RpcRequest) -> Refusal {
    let status = match era {
        Era::Modern => StatusCode::NOT_FOUND,
        Era::Legacy => StatusCode::OK,
    };
    (
        status,
        RpcError::new(
            jsonrpc::METHOD_NOT_FOUND,
            format!("method not found: `{}`", echo(&request.method_name)),
        ),
    )
}

fn invalid_params(message: String) -> Refusal {
    (
        StatusCode::OK,
        RpcError::new(jsonrpc::INVALID_PARAMS, message),
    )
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
    if !request.method.served_in(era) {
        return Err(method_not_found(era, request));
    }
    let params = &request.params;
    let result = match request.method {
        Method::ToolsList => {
            if params.contains_key("cursor") {
                return Err(invalid_params(
                    "invalid cursor: the tool list has one page".into(),
                ));
            }
            return Ok(Reply::Serialized(tool_list(era)));
        }
        Method::Initialize => {
            let requested = params.get("protocolVersion").and_then(Value::as_str);
            let version = requested
                .filter(|v| LEGACY_VERSIONS.contains(v))
                .unwrap_or(LEGACY_VERSIONS[0]);
            json!({
                "protocolVersion": version,
                "capabilities": capabilities(),
                "serverInfo": server_info(),
                "instructions": instructions(),
            })
        }
        Method::Ping => json!({}),
        Method::ServerDiscover => {
            let mut result = json!({
                "supportedVersions": [MODERN_VERSION],
                "capabilities": capabilities(),
                "instructions": instructions(),
            });
            result["ttlMs"] = json!(LIST_TTL_MS);
            result["cacheScope"] = json!("private");
            result
        }
        Method::ToolsCall => {
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
            tools::call(state, authorization, era, tool, arguments).await
        }
        Method::PromptsList => list(era, "prompts", json!([])),
        Method::ResourcesList => list(era, "resources", json!([])),
        Method::ResourcesTemplatesList => list(era, "resourceTemplates", json!([])),
        Method::ResourcesRead => {
            let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
            return Err((
                StatusCode::OK,
                RpcError::new(
                    jsonrpc::INVALID_PARAMS,
                    format!("resource not found: `{}`", echo(uri)),
                )
                .with_data(json!({ "uri": echo(uri) })),
            ));
        }
        Method::PromptsGet | Method::Other => return Err(method_not_found(era, request)),
    };
    Ok(Reply::Value(era.decorate(result)))
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
