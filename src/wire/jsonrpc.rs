//! JSON-RPC 2.0 and MCP error codes, named once.

/// The body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid request object (or a transport rule refused it).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The method's params are invalid (also: an unknown tool, an unsupported legacy version).
pub const INVALID_PARAMS: i64 = -32602;
/// A defect on the server's side.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2026-07-28: a header disagrees with the body or is missing.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the requested protocol version is not served.
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// Our application code for an admission refusal (HTTP 429): outside the JSON-RPC and MCP
/// reserved range (-32768..-32000).
pub const ADMISSION_LIMITED: i64 = -31000;

/// MCP 2026-07-28: the param of `method` its `Mcp-Name` header repeats (`tools/call` and
/// `prompts/get` name one, `resources/read` reads a `uri`).
pub fn named_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}
