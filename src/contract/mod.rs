//! The contract: everything generated from `schema/` (types, descriptor catalog, handler trait)
//! plus the hand-written descriptor types, envelopes and validators around it.
//!
//! Nothing in this module knows about HTTP, JSON-RPC or the CLI.

pub mod borrowed;
pub mod budget;
pub mod catalog;
pub mod delivery;
pub mod error;
pub mod extension;
pub mod gate;
pub mod handlers;
pub mod ids;
pub mod json;
pub mod kinds;
pub mod native_checks;
pub mod preapproval;
pub mod runtime_catalog;
pub mod selector;
pub mod shape;
pub mod target;
pub mod timestamp;
pub mod tool_guidance;
pub mod types;
pub mod validate;

pub use catalog::{
    ACTIONS, ActionDescriptor, ActionId, DOMAINS, DomainDescriptor, DomainOwner, Effective,
    HUMAN_ACTIONS, HumanActionDescriptor, HumanActionId, OperationDescriptor, ResultPolicy,
    Retrieval, Risk, TOOLS, ToolDescriptor, ToolId, ToolOwner,
};
pub use error::{ActionError, ActionResult, DispatchError};
pub use handlers::{
    ActionHandler, DaemonActionHandler, HumanClient, HumanHandler, HumanTransport,
    ServerToolHandler, Written, dispatch, dispatch_daemon, dispatch_human, dispatch_tool,
};
pub use runtime_catalog::RuntimeCatalog;
pub use validate::{ValidationDetail, Validators};
