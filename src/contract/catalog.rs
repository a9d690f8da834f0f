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
#[derive(Debug)]
pub struct ActionDescriptor {
    pub id: ActionId,
    pub domain: &'static str,
    pub action: &'static str,
    /// One line, no trailing period.
    pub summary: &'static str,
    /// Who answers this action (its domain's owner).
    pub owner: DomainOwner,
    pub risk: Risk,
    pub result_policy: ResultPolicy,
    /// Why an over-budget result was refused (required for read actions).
    pub hint: Option<&'static str>,
    /// The request to make instead of an over-budget one (required for read actions).
    pub next: Option<&'static str>,
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
    pub retrieval: Option<ActionId>,
    /// Self-contained JSON Schema 2020-12 of the input (no external `$ref`).
    pub input_schema: &'static str,
    /// Self-contained JSON Schema 2020-12 of the output.
    pub output_schema: &'static str,
    /// `agentteam exec <domain> <action> --help`.
    pub help: &'static str,
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
    /// Self-contained JSON Schema 2020-12 of the arguments.
    pub input_schema: &'static str,
    /// Self-contained JSON Schema 2020-12 of the structured result.
    pub output_schema: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

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
            let fields = [
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
            for field in fields {
                // Length-prefixed, so no two descriptor lists hash alike by shifting text.
                hash.update((field.len() as u64).to_be_bytes());
                hash.update(field.as_bytes());
            }
        }
        format!("sha256:{}", hex::encode(hash.finalize()))
    })
}
