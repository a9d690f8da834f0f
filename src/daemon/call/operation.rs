//! What a runtime call asks for: a built-in action, an action of a pinned extension, or an MCP
//! tool, and what each of them knows about its contract and its owner.

use std::sync::Arc;

use serde_json::Value;

use crate::contract::catalog::{ActionDescriptor, find_action};
use crate::contract::error::KnowledgeStage;
use crate::contract::extension::{ExtensionAction, Pinned};
use crate::contract::kinds::Risk;
use crate::contract::preapproval::tool_is_destructive;
use crate::contract::{ActionError, RuntimeCatalog, ToolDescriptor, ToolOwner, Validators};
use crate::wire::turn::Turn;

/// One operation of the runtime's catalog.
#[derive(Debug, Clone)]
pub enum Operation {
    /// A built-in Exec action (for an operation union, the operation is the input's).
    Action(&'static ActionDescriptor),
    /// An action of an extension the runtime's catalog pinned at launch.
    Extension { pinned: Arc<Pinned>, action: String },
    /// A tool of the MCP `agentteam` namespace, with the Human-initiated turn the runtime answers
    /// now, which only the knowledge tools read.
    Tool {
        tool: &'static ToolDescriptor,
        turn: Option<Arc<Turn>>,
    },
}

impl Operation {
    /// The Exec action `domain action` of a runtime whose catalog is `catalog`: a built-in one,
    /// else an action of an extension it pinned.
    pub fn exec(
        catalog: &RuntimeCatalog,
        domain: &str,
        action: &str,
    ) -> Result<Operation, ActionError> {
        if let Some(descriptor) = find_action(domain, action) {
            return Ok(Operation::Action(descriptor));
        }
        let Some(pinned) = catalog.extension(domain) else {
            return Err(ActionError::unknown_action(domain, action)
                .with_next("run `agentteam exec --help` for the domains and actions"));
        };
        if pinned.action(action).is_none() {
            return Err(
                ActionError::unknown_action(pinned.name(), action).with_next(format!(
                    "run `agentteam exec {} --help` for its actions",
                    pinned.name()
                )),
            );
        }
        Ok(Operation::Extension {
            pinned: pinned.clone(),
            action: action.to_string(),
        })
    }

    /// `task get`, `github watch`, `message_send`: as the runtime names it.
    pub fn name(&self) -> String {
        match self {
            Operation::Action(descriptor) => format!("{} {}", descriptor.domain, descriptor.action),
            Operation::Extension { pinned, action } => format!("{} {action}", pinned.name()),
            Operation::Tool { tool, .. } => tool.name.to_string(),
        }
    }

    /// The idempotency scope of a daemon-owned mutation (`agent.create`).
    pub fn key(&self) -> String {
        match self {
            Operation::Action(descriptor) => descriptor.id.key(),
            Operation::Extension { pinned, action } => format!("{}.{action}", pinned.name()),
            Operation::Tool { tool, .. } => format!("mcp.{}", tool.name),
        }
    }

    /// Checks `input` against the operation's input contract.
    pub fn validate(&self, validators: &Validators, input: &Value) -> Result<(), ActionError> {
        match self {
            Operation::Action(descriptor) => validators.validate_input(descriptor.id, input),
            Operation::Extension { pinned, action } => pinned.validate_input(action, input),
            Operation::Tool { tool, .. } => {
                let validated = validators.validate_tool_input(tool.id, input);
                if tool.owner == ToolOwner::Knowledge {
                    validated.map_err(|error| error.at_stage(KnowledgeStage::RequestValidation))
                } else {
                    validated
                }
            }
        }
    }

    /// Whether `input` asks for a side effect (for an operation union, the input's operation).
    pub fn is_mutation(&self, input: &Value) -> bool {
        match self {
            Operation::Action(descriptor) => descriptor.effective(input).risk().is_mutation(),
            Operation::Extension { pinned, action } => pinned
                .action(action)
                .is_some_and(|declared| declared.risk.is_mutation()),
            Operation::Tool { tool, .. } => !tool.read_only,
        }
    }

    /// Whether `input` asks for a destructive effect (for an operation union, the input's
    /// operation; for an MCP tool, its `destructiveHint`).
    pub fn is_destructive(&self, input: &Value) -> bool {
        match self {
            Operation::Action(descriptor) => {
                descriptor.effective(input).risk() == Risk::Destructive
            }
            Operation::Extension { pinned, action } => pinned
                .action(action)
                .is_none_or(|declared| declared.risk == Risk::Destructive),
            Operation::Tool { tool, .. } => tool_is_destructive(tool.name),
        }
    }

    /// Whether this is a knowledge tool, whose every failure names the hop it failed at.
    pub fn is_knowledge(&self) -> bool {
        matches!(self, Operation::Tool { tool, .. } if tool.owner == ToolOwner::Knowledge)
    }

    /// The declared extension action, for an extension operation.
    pub fn extension_action(&self) -> Option<(&Pinned, &ExtensionAction)> {
        match self {
            Operation::Extension { pinned, action } => Some((
                pinned,
                pinned.action(action).expect("resolved in Operation::exec"),
            )),
            _ => None,
        }
    }
}
