//! The descriptor catalog (the spec's `DefaultDescriptorCatalog()`): every built-in action's
//! name, summary, risk, result policy, continuation guidance, example, standalone schemas and
//! help text, generated from `schema/`.
//!
//! It is descriptor-only: no handlers and no execution hooks. CLI help, schema printing,
//! validation, OpenAPI and the prompt summary all read it; nothing else spells an action.

pub use super::kinds::{DomainOwner, ResultPolicy, Risk, ToolOwner};

/// One Exec domain.
#[derive(Debug)]
pub struct DomainDescriptor {
    pub name: &'static str,
    pub summary: &'static str,
    /// Who answers the domain's actions.
    pub owner: DomainOwner,
    /// `agentteam exec <domain> --help`.
    pub help: &'static str,
}

/// One built-in action, as the inventory row and its schema pair describe it.
///
/// Its risk, result policy and continuations are private: an operation union (a `workflow`
/// action) has them per operation, so whatever acts on a request reads them through
/// [`ActionDescriptor::effective`], which resolves the operation the input names.
#[derive(Debug)]
pub struct ActionDescriptor {
    pub id: ActionId,
    pub domain: &'static str,
    pub action: &'static str,
    /// One line, no trailing period.
    pub summary: &'static str,
    /// Who answers this action (its domain's owner).
    pub owner: DomainOwner,
    /// For an operation union: the most severe of its operations'.
    risk: Risk,
    /// For an operation union: `mutation` when any operation has side effects.
    result_policy: ResultPolicy,
    /// Why an over-budget result was refused (required for read actions).
    hint: Option<&'static str>,
    /// The request to make instead of an over-budget one (required for read actions).
    next: Option<&'static str>,
    /// Whether the prompt summary shows the example inline.
    pub prompt_inline: bool,
    /// The canonical example input, compact JSON.
    pub example: &'static str,
    /// Global schema name of the input, e.g. `TaskCreateInput`.
    pub input_type: &'static str,
    /// Global schema name of the output, e.g. `TaskCreateOutput`.
    pub output_type: &'static str,
    /// The input schema's top-level property names, sorted.
    pub input_properties: &'static [&'static str],
    /// For a mutation whose output is one resource: the read action that returns that resource
    /// by its `<resource>Id` (a receipt's retrieval path).
    retrieval: Option<Retrieval>,
    /// For an operation union: the input property that names the operation.
    pub discriminator: Option<&'static str>,
    /// For an operation union: its operations, reads first; empty otherwise.
    pub operations: &'static [OperationDescriptor],
    /// Self-contained JSON Schema 2020-12 of the input (no external `$ref`).
    pub input_schema: &'static str,
    /// Self-contained JSON Schema 2020-12 of the output.
    pub output_schema: &'static str,
    /// `agentteam exec <domain> <action> --help`.
    pub help: &'static str,
}

/// One operation of an operation-union action.
#[derive(Debug)]
pub struct OperationDescriptor {
    pub name: &'static str,
    pub risk: Risk,
    pub result_policy: ResultPolicy,
    pub hint: Option<&'static str>,
    pub next: Option<&'static str>,
    /// The operation's canonical example input, compact JSON.
    pub example: &'static str,
    retrieval: Option<Retrieval>,
}

/// Guidance for the model that comes with a tool (`memory-maintenance` with `memory_search`).
#[derive(Debug)]
pub struct Skill {
    pub name: &'static str,
    pub text: &'static str,
}

/// The read that returns what a mutation changed: an action, and for an operation union the read
/// operation, called with the resource's `<resource>Id`.
#[derive(Debug, Clone, Copy)]
pub struct Retrieval {
    pub action: ActionId,
    pub operation: Option<&'static str>,
}

/// What one request asks of an action: the action, and for an operation union the operation its
/// discriminator names. Every rule that depends on risk reads it from here.
#[derive(Debug, Clone, Copy)]
pub struct Effective {
    pub descriptor: &'static ActionDescriptor,
    /// `None` for an ordinary action (and for an operation union whose input names no known
    /// operation, which validation refuses first; the action's most severe risk applies).
    pub operation: Option<&'static OperationDescriptor>,
}

impl Effective {
    pub fn risk(self) -> Risk {
        self.operation.map_or(self.descriptor.risk, |op| op.risk)
    }

    pub fn result_policy(self) -> ResultPolicy {
        self.operation
            .map_or(self.descriptor.result_policy, |op| op.result_policy)
    }

    pub fn hint(self) -> Option<&'static str> {
        self.operation.map_or(self.descriptor.hint, |op| op.hint)
    }

    pub fn next(self) -> Option<&'static str> {
        self.operation.map_or(self.descriptor.next, |op| op.next)
    }

    pub fn retrieval(self) -> Option<Retrieval> {
        match self.operation {
            Some(op) => op.retrieval,
            None if self.descriptor.operations.is_empty() => self.descriptor.retrieval,
            None => None,
        }
    }

    /// `task create`, or `workflow plan publish` for an operation.
    pub fn name(self) -> String {
        match self.operation {
            Some(op) => format!(
                "{} {} {}",
                self.descriptor.domain, self.descriptor.action, op.name
            ),
            None => format!("{} {}", self.descriptor.domain, self.descriptor.action),
        }
    }
}

/// One MCP tool, as `schema/mcp/<name>.json` describes it.
#[derive(Debug)]
pub struct ToolDescriptor {
    pub id: ToolId,
    /// The raw tool name, e.g. `message_send`.
    pub name: &'static str,
    pub description: &'static str,
    /// `annotations.readOnlyHint`, always stated in the schema.
    pub read_only: bool,
    pub owner: ToolOwner,
    pub result_policy: ResultPolicy,
    /// Why an over-budget result was refused (required for read-only tools).
    pub hint: Option<&'static str>,
    /// The call to make instead of an over-budget one (required for read-only tools).
    pub next: Option<&'static str>,
    /// A runtime skill injected together with the tool.
    pub skill: Option<Skill>,
    /// Self-contained JSON Schema 2020-12 of the arguments.
    pub input_schema: &'static str,
    /// Self-contained JSON Schema 2020-12 of the structured result.
    pub output_schema: &'static str,
}

/// One action of the server's human API, as `schema/human/<name>.json` describes it.
#[derive(Debug)]
pub struct HumanActionDescriptor {
    pub id: HumanActionId,
    /// `message_post`: the route's last segment.
    pub name: &'static str,
    /// One line, no trailing period.
    pub summary: &'static str,
    /// Whether it changes anything (then its input takes `requestId`).
    pub write: bool,
    /// The Exec read whose schema pair it shares, e.g. `task.list`.
    pub same_as: Option<&'static str>,
    /// Self-contained JSON Schema 2020-12 of the input.
    pub input_schema: &'static str,
    /// Self-contained JSON Schema 2020-12 of the output.
    pub output_schema: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

impl HumanActionId {
    /// The descriptor of this action.
    pub fn descriptor(self) -> &'static HumanActionDescriptor {
        &HUMAN_ACTIONS[self as usize]
    }
}

/// The human action called `name` (exact).
pub fn find_human(name: &str) -> Option<&'static HumanActionDescriptor> {
    HUMAN_ACTIONS.iter().find(|a| a.name == name)
}

/// The OpenAPI 3.1 document of the server's human API.
pub const HUMAN_OPENAPI: &str = include_str!(concat!(env!("OUT_DIR"), "/human_openapi.json"));

/// The `tools` array of every `tools/list` result, in order.
pub const MCP_TOOLS_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/mcp_tools.json"));

impl ToolId {
    /// The descriptor of this tool.
    pub fn descriptor(self) -> &'static ToolDescriptor {
        &TOOLS[self as usize]
    }
}

/// The MCP tool called `name` (exact, case-sensitive).
pub fn find_tool(name: &str) -> Option<&'static ToolDescriptor> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The OpenAPI 3.1 document of the Exec route family.
pub const OPENAPI: &str = include_str!(concat!(env!("OUT_DIR"), "/openapi.json"));
/// The Dispatcher prompt summary.
pub const PROMPT_SUMMARY: &str = include_str!(concat!(env!("OUT_DIR"), "/prompt.md"));
/// Every domain and action with risk, policy and example, for programs.
pub const CATALOG_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/catalog.json"));

impl ActionDescriptor {
    /// What `input` asks of this action: for an operation union, the operation its discriminator
    /// names.
    pub fn effective(&'static self, input: &serde_json::Value) -> Effective {
        let operation = self.discriminator.and_then(|field| {
            let name = input.get(field)?.as_str()?;
            self.operations.iter().find(|op| op.name == name)
        });
        Effective {
            descriptor: self,
            operation,
        }
    }

    /// This action as a whole, for an ordinary action; for an operation union, its most severe
    /// operation (listings and help).
    pub fn as_whole(&'static self) -> Effective {
        Effective {
            descriptor: self,
            operation: None,
        }
    }

    /// Each operation of an operation union as an [`Effective`]; an ordinary action once.
    pub fn each_operation(&'static self) -> Vec<Effective> {
        if self.operations.is_empty() {
            return vec![self.as_whole()];
        }
        self.operations
            .iter()
            .map(|op| Effective {
                descriptor: self,
                operation: Some(op),
            })
            .collect()
    }
}

impl ActionId {
    /// The descriptor of this action.
    pub fn descriptor(self) -> &'static ActionDescriptor {
        &ACTIONS[self as usize]
    }

    /// `task.create`.
    pub fn key(self) -> String {
        let d = self.descriptor();
        format!("{}.{}", d.domain, d.action)
    }
}

/// The domain called `name`.
pub fn find_domain(name: &str) -> Option<&'static DomainDescriptor> {
    DOMAINS.iter().find(|d| d.name == name)
}

/// The action `domain action`.
pub fn find_action(domain: &str, action: &str) -> Option<&'static ActionDescriptor> {
    ACTIONS
        .iter()
        .find(|a| a.domain == domain && a.action == action)
}

/// The actions of `domain`, in catalog order.
pub fn domain_actions(domain: &str) -> impl Iterator<Item = &'static ActionDescriptor> {
    ACTIONS.iter().filter(move |a| a.domain == domain)
}

/// `sha256:<hex>` over every built-in descriptor (names, summary, risk, result policy,
/// continuations, example, input and output schemas): two binaries agree on it exactly when
/// they validate, help and forward every built-in action the same way.
pub fn builtin_digest() -> &'static str {
    static DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIGEST.get_or_init(|| {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for action in ACTIONS {
            let mut fields = vec![
                action.domain,
                action.action,
                action.summary,
                action.risk.as_str(),
                action.result_policy.as_str(),
                action.hint.unwrap_or(""),
                action.next.unwrap_or(""),
                action.example,
                action.input_schema,
                action.output_schema,
            ];
            for op in action.operations {
                fields.extend([
                    op.name,
                    op.risk.as_str(),
                    op.result_policy.as_str(),
                    op.hint.unwrap_or(""),
                    op.next.unwrap_or(""),
                    op.example,
                ]);
            }
            for field in fields {
                // Length-prefixed, so no two descriptor lists hash alike by shifting text.
                hash.update((field.len() as u64).to_be_bytes());
                hash.update(field.as_bytes());
            }
        }
        format!("sha256:{}", hex::encode(hash.finalize()))
    })
}
