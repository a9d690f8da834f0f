//! The generated typed handler traits and their RegisterJSON adapters: `ActionHandler` +
//! `dispatch` for Exec actions, `ServerToolHandler` + `dispatch_tool` for server-owned MCP tools.

use super::catalog::{ActionId, ToolId};
use super::error::{ActionResult, DispatchError};
use super::types;

include!(concat!(env!("OUT_DIR"), "/handlers.rs"));
