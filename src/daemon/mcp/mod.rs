//! The MCP route family: JSON-RPC over Streamable HTTP, stateless, both protocol eras on one
//! endpoint.
//!
//! - [`route`]: the routes, authentication and route binding, and the HTTP pipeline of a request;
//! - [`era`]: which protocol era a request speaks and that era's header rules;
//! - [`rpc`]: the JSON-RPC request shape, the typed methods and the error object;
//! - [`protocol`]: each method's answer;
//! - [`tools`]: `CallTool`, the only execution entry, and the MCP result budget;
//! - [`conversation`]: the turn and primary thread a run's MCP calls answer in.
//!
//! There are no sessions: a legacy `initialize` is answered and forgotten, and nothing a request
//! does depends on an earlier one.

pub mod conversation;
pub mod era;
pub mod protocol;
pub mod route;
pub mod rpc;
pub mod tools;
