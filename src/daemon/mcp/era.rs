//! The two protocol eras (reference/mcp.md §1.7) and their header rules.
//!
//! A request whose `params._meta` names a protocol version, or whose `MCP-Protocol-Version` header
//! names 2026-07-28 or later, is *modern* (stateless: every request carries its version and
//! capabilities; `Mcp-Method`/`Mcp-Name` headers must match the body; results carry
//! `resultType`, lists `ttlMs` + `cacheScope`). Anything else is *legacy* (2025-11-25 and
//! earlier: `initialize` negotiates, `ping` answers, no session ids).

use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use serde_json::{Value, json};

use super::rpc::{Method, RpcError, RpcRequest, echo};
use crate::wire::jsonrpc;

/// The one modern revision served.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Legacy revisions `initialize` accepts, newest first (the first is the counter-offer).
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Which protocol era a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier, with the negotiated or assumed version.
    Legacy,
    /// 2026-07-28.
    Modern,
}

/// A refusal before any method runs: the HTTP status and the JSON-RPC error.
pub type Refusal = (StatusCode, RpcError);

fn header_mismatch(message: String) -> Refusal {
    (
        StatusCode::BAD_REQUEST,
        RpcError::new(jsonrpc::HEADER_MISMATCH, message),
    )
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

/// Every version the route serves, newest first.
pub fn all_versions() -> Vec<&'static str> {
    std::iter::once(MODERN_VERSION)
        .chain(LEGACY_VERSIONS)
        .collect()
}

/// The server's name and version, as every era reports it.
pub fn server_info() -> Value {
    json!({ "name": "agentteam", "version": env!("CARGO_PKG_VERSION") })
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
                        jsonrpc::INVALID_PARAMS,
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
                    jsonrpc::INVALID_PARAMS,
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
                    jsonrpc::UNSUPPORTED_VERSION,
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
                    jsonrpc::INVALID_PARAMS,
                    format!("`params._meta` must carry `{META_VERSION}` and `{META_CAPABILITIES}`"),
                ),
            ));
        }
        if request.id.is_some() && !Era::Modern.serves(request.method) {
            return Err(method_not_found(Era::Modern, request));
        }
        match header_text(headers, "mcp-method")? {
            Some(method) if method == request.method_name => {}
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
        if let Some(named) = request
            .method
            .named_param()
            .and_then(|p| request.params.get(p))
        {
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

    /// Whether this era serves `method` (a modern request for anything else is 404 + -32601,
    /// before its header checks).
    pub fn serves(self, method: Method) -> bool {
        match method {
            Method::Initialize | Method::Ping => self == Era::Legacy,
            Method::ServerDiscover => self == Era::Modern,
            Method::ToolsList
            | Method::ToolsCall
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
            | Method::ResourcesRead => true,
            Method::PromptsGet | Method::Other => false,
        }
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
