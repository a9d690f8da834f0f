//! Each method's answer, by the typed [`Method`] the request was parsed into.

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::era::{Era, LEGACY_VERSIONS, MODERN_VERSION, Refusal, method_not_found, server_info};
use super::rpc::{Method, RpcError, RpcRequest, echo};
use super::tools;
use crate::contract::catalog::{MCP_TOOLS_JSON, find_tool};
use crate::contract::gate;
use crate::daemon::access::Slot;
use crate::daemon::auth::Authorization;
use crate::daemon::state::DaemonState;
use crate::wire::jsonrpc;

/// How long a client may cache a list result; the inventory changes only with the binary.
const LIST_TTL_MS: u64 = 60_000;
fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": false },
        "prompts": { "listChanged": false },
        "resources": { "subscribe": false, "listChanged": false },
    })
}

/// What `initialize` and `server/discover` tell a model about the namespace (the same text for
/// every call, made once).
fn instructions() -> &'static str {
    static TEXT: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(crate::contract::tool_guidance::mcp_instructions);
    &TEXT
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
    /// A tool call's serialized `result`, decorated and measured against the result budget.
    Owned(String),
}

/// The answer to one request of `era`.
pub async fn answer(
    state: &DaemonState,
    authorization: &Authorization,
    admission: &Slot,
    era: Era,
    request: &RpcRequest,
) -> Result<Reply, Refusal> {
    if !era.serves(request.method) {
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
            // The delegated-child gate comes first: a child learns nothing but "return your
            // result", whatever it asked for.
            let conversation = state.dispatcher.conversation(&authorization.binding.run_id);
            let thread = gate::classify(params.get("_meta"), |thread| {
                conversation
                    .as_ref()
                    .map_or(gate::Known::Unknown, |c| c.known(thread))
            });
            if let Err(refused) = gate::admit(thread, name, gate::served_annotations()) {
                tracing::info!(tool = %echo(name), "a delegated thread's call of a tool that acts was refused");
                return Ok(Reply::Owned(tools::refused(era, &refused)));
            }
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
            let turn = conversation.and_then(|c| c.turn());
            return Ok(Reply::Owned(
                tools::call(state, authorization, admission, era, tool, turn, arguments).await,
            ));
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
