//! The JSON-RPC request shape: one request object, its id, its method (parsed once into
//! [`Method`]; no method string is compared after that) and params, and the error object.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::wire::jsonrpc;

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

    /// The wire name of a known method, `other` for anything else (a span names no caller text).
    pub fn name(self) -> &'static str {
        Method::NAMES
            .iter()
            .find(|(method, _)| *method == self)
            .map_or("other", |(_, name)| name)
    }

    /// The param the modern era's `Mcp-Name` header must repeat.
    pub fn named_param(self) -> Option<&'static str> {
        let name = Method::NAMES.iter().find(|(method, _)| *method == self)?.1;
        crate::wire::jsonrpc::named_param(name)
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
