//! Loads `schema/` into one checked [`Model`]: the inventory, every action's schema pair, the
//! error envelope and the MCP tool names, with all `$defs` hoisted into one namespaced map.
//!
//! Hoisting rules (the one normal form every consumer reads):
//! - `schema/common.json` and `schema/errors/error-envelope.json` own global definition names;
//! - an action file's local `$defs/X` becomes `<Domain><Action><X>`;
//! - an action root becomes `<Domain><Action>Input` / `<Domain><Action>Output`;
//! - every `$ref` is rewritten to `#/$defs/<GlobalName>`; only `#…` and `…/common.json#…` refs are
//!   allowed, because typify cannot follow any other external reference.
//!
//! - `loader`: reading files and hoisting definitions;
//! - `inventory`: the Exec action inventory joined with its schema pairs;
//! - `operations`: the closed operation matrix of the operation-union actions, and its checks;
//! - `tools`: the MCP tool files and the result budget;
//! - `extensions`: the seed extension definitions the server's extension host serves;
//! - `human`: the actions of the server's human API (a person's, not a runtime's).
//!
//! The rules every action and tool obey alike (names, the read/mutation result policy) live here.

pub mod extensions;
mod human;
mod inventory;
mod loader;
pub mod operations;
mod tools;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value, json};

pub use super::kinds::{
    DomainOwner, MAX_MODEL_VISIBLE_NAME, MODEL_VISIBLE_PREFIXES, ResultPolicy, Risk, ToolOwner,
    collides, is_name, max_raw_tool_name,
};
use super::{Diagnostic, pascal_case};
use loader::Loader;

pub const INVENTORY_FILE: &str = "exec/agentteam-exec-action-inventory.json";
pub const COMMON_FILE: &str = "common.json";
pub const ERROR_FILE: &str = "errors/error-envelope.json";
pub const MCP_DIR: &str = "mcp";
/// The MCP result budget contract; the only file in `schema/mcp/` that is not a tool.
pub const MCP_BUDGET_FILE: &str = "mcp/result-budget.json";
/// The longest MCP tool name (the conformance suite's limit; the spec allows 128).
/// The longest raw MCP tool name: its longest model-visible form (`mcp__agentteam__<tool>`) must
/// stay within 64 characters.
pub const MAX_TOOL_NAME: usize = max_raw_tool_name();
/// The human API's actions, one file each.
pub const HUMAN_DIR: &str = "human";
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";
/// One MCP tool of the `agentteam` namespace, from `schema/mcp/<name>.json`.
#[derive(Debug, Clone)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    /// The MCP `annotations` object, `readOnlyHint` always present.
    pub annotations: Map<String, Value>,
    pub read_only: bool,
    pub owner: ToolOwner,
    pub result_policy: ResultPolicy,
    pub hint: Option<String>,
    pub next: Option<String>,
    /// A runtime skill injected with the tool: `(name, guidance text)`.
    pub skill: Option<(String, String)>,
    /// Global definition name of the arguments, e.g. `MessageSendInput`.
    pub input_type: String,
    /// Global definition name of the structured result, e.g. `MessageSendOutput`.
    pub output_type: String,
}

impl McpTool {
    /// `MessageSend`: the stem of every Rust name of this tool.
    pub fn rust_stem(&self) -> String {
        pascal_case(&self.name)
    }
}

/// One action of the server's human API, from `schema/human/<name>.json`.
#[derive(Debug, Clone)]
pub struct HumanAction {
    /// `conversation_list`: the route's last segment and the handler method's name.
    pub name: String,
    /// One line, no trailing period.
    pub summary: String,
    /// Whether it changes anything (then its input takes `requestId`).
    pub write: bool,
    /// The Exec read whose schema pair it shares, e.g. `task.list`.
    pub same_as: Option<String>,
    /// Global definition name of the input, e.g. `HumanMessagePostInput` or `TaskListInput`.
    pub input_type: String,
    pub output_type: String,
}

impl HumanAction {
    /// `ConversationList`: the stem of its Rust names.
    pub fn rust_stem(&self) -> String {
        pascal_case(&self.name)
    }
}

/// The MCP result budget contract.
#[derive(Debug, Clone)]
pub struct McpBudget {
    pub max_result_bytes: u64,
    pub description: String,
}

/// One Exec domain, in inventory order.
#[derive(Debug, Clone)]
pub struct Domain {
    pub name: String,
    pub summary: String,
    pub owner: DomainOwner,
}

/// One operation of an operation-union action (its input's discriminator names it).
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub risk: Risk,
    pub result_policy: ResultPolicy,
    pub hint: Option<String>,
    pub next: Option<String>,
    /// The operation's canonical example input, discriminator included.
    pub example: Value,
}

/// One built-in action: its inventory row joined with its hoisted schema pair.
#[derive(Debug, Clone)]
pub struct Action {
    pub domain: String,
    pub action: String,
    pub summary: String,
    /// Its domain's owner.
    pub owner: DomainOwner,
    /// For an operation union: the most severe of its operations' risks (what help and the
    /// catalog show beside the per-operation rows); everything that acts on a request resolves
    /// the operation's own.
    pub risk: Risk,
    /// For an operation union: `mutation` when any operation has side effects.
    pub result_policy: ResultPolicy,
    pub hint: Option<String>,
    pub next: Option<String>,
    pub prompt_inline: bool,
    pub example: Value,
    /// The input property that names the operation, for an operation union.
    pub discriminator: Option<String>,
    /// The operations of an operation union, in the matrix's order (reads, then side effects);
    /// empty for any other action.
    pub operations: Vec<Operation>,
    /// Global definition name of the input root, e.g. `TaskCreateInput`.
    pub input_type: String,
    /// Global definition name of the output root, e.g. `TaskCreateOutput`.
    pub output_type: String,
    /// Position of the row in the inventory (the order of prompt examples).
    pub inventory_index: usize,
}

impl Action {
    /// `task.create`: the operation id and the catalog key.
    pub fn key(&self) -> String {
        format!("{}.{}", self.domain, self.action)
    }

    /// `TaskCreate`: the stem of every Rust name of this action.
    pub fn rust_stem(&self) -> String {
        pascal_case(&self.domain) + &pascal_case(&self.action)
    }

    /// `task_create`: the handler method name.
    pub fn method_name(&self) -> String {
        format!(
            "{}_{}",
            super::snake_case(&self.domain),
            super::snake_case(&self.action)
        )
    }
}

/// The checked contract: everything the generators render.
#[derive(Debug, Clone)]
pub struct Model {
    /// Domains sorted by name.
    pub domains: Vec<Domain>,
    /// Actions sorted by `(domain, action)`.
    pub actions: Vec<Action>,
    /// Every hoisted definition, action roots included, keyed by global name; every `$ref`
    /// inside is `#/$defs/<GlobalName>`.
    pub defs: BTreeMap<String, Value>,
    /// Global name of the error envelope root.
    pub error_type: String,
    /// MCP tools sorted by name (the `tools/list` order).
    pub mcp_tools: Vec<McpTool>,
    pub mcp_budget: McpBudget,
    /// The seed extension definitions, sorted by name.
    pub extensions: Vec<extensions::Extension>,
    /// The human API's actions, sorted by name.
    pub human_actions: Vec<HumanAction>,
}

impl Model {
    /// Loads and checks `schema_dir`, collecting every problem before giving up.
    pub fn load(schema_dir: &Path) -> Result<Model, Vec<Diagnostic>> {
        let mut diags = Vec::new();
        let mut loader = Loader::new(schema_dir, &mut diags);
        let inventory = inventory::read(&mut loader);
        // Shared definitions first, so action files can reference them.
        let error_type = "ErrorEnvelope".to_string();
        if let Some(common) = loader.read_json(COMMON_FILE) {
            loader.lint(COMMON_FILE, &common);
            loader.hoist_shared(COMMON_FILE, &common);
        }
        if let Some(errors) = loader.read_json(ERROR_FILE) {
            loader.lint(ERROR_FILE, &errors);
            loader.hoist_shared(ERROR_FILE, &errors);
            loader.add_root(ERROR_FILE, &error_type, &errors, "");
        }
        let pairs = loader.scan_exec_schemas();
        let tool_names = tools::scan(&mut loader);
        let (mut domains, mut actions) = match &inventory {
            Some(inventory) => inventory::join(&mut loader, inventory, &pairs, &tool_names),
            None => (Vec::new(), Vec::new()),
        };
        operations::check_schemas(&mut loader, &actions);
        let mut tools: Vec<McpTool> = tool_names
            .iter()
            .filter_map(|stem| tools::load(&mut loader, stem))
            .collect();
        let budget = tools::load_budget(&mut loader);
        let human_names = human::scan(&mut loader);
        let mut human_actions: Vec<HumanAction> = human_names
            .iter()
            .filter_map(|stem| human::load(&mut loader, stem, &actions))
            .collect();
        let seeds = extensions::load(&mut loader, &domains, &tools);
        let defs = std::mem::take(&mut loader.defs);
        loader.check_refs(&defs);
        drop(loader);
        if !diags.is_empty() {
            return Err(diags);
        }
        domains.sort_by(|a, b| a.name.cmp(&b.name));
        actions.sort_by(|a, b| (&a.domain, &a.action).cmp(&(&b.domain, &b.action)));
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        human_actions.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Model {
            domains,
            actions,
            defs,
            error_type,
            mcp_tools: tools,
            mcp_budget: budget.expect("no diagnostics means the budget loaded"),
            extensions: seeds,
            human_actions,
        })
    }

    /// The definition behind `name`, following `$ref`-only aliases.
    pub fn resolve<'a>(&'a self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..16 {
            match schema
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
            {
                Some(name)
                    if schema.get("type").is_none() && schema.get("properties").is_none() =>
                {
                    match self.defs.get(name) {
                        Some(target) => schema = target,
                        None => return schema,
                    }
                }
                _ => return schema,
            }
        }
        schema
    }

    /// A self-contained JSON Schema for the definition `name`: the definition as the root, plus
    /// the transitive closure of what it references under `$defs`.
    pub fn standalone(&self, name: &str) -> Value {
        let mut root = self.defs[name].clone();
        let mut needed = BTreeSet::new();
        let mut queue = vec![name.to_string()];
        while let Some(current) = queue.pop() {
            let mut refs = Vec::new();
            collect_refs(&self.defs[&current], &mut refs);
            for r in refs {
                if needed.insert(r.clone()) {
                    queue.push(r);
                }
            }
        }
        let defs: Map<String, Value> = needed
            .into_iter()
            .map(|n| (n.clone(), self.defs[&n].clone()))
            .collect();
        let object = root.as_object_mut().expect("every definition is an object");
        object.insert("$schema".into(), json!(DIALECT));
        object.insert("title".into(), json!(name));
        if !defs.is_empty() {
            object.insert("$defs".into(), Value::Object(defs));
        }
        root
    }
}

/// What a result policy rule is about: an inventory row, one operation of a row, or an MCP tool.
#[derive(Debug, Clone, Copy)]
enum Subject<'a> {
    /// `domain.action`.
    Action(&'a str),
    /// `domain action operation`.
    Operation(&'a str),
    /// The tool's name.
    Tool(&'a str),
}

impl<'a> Subject<'a> {
    fn noun(self) -> &'static str {
        match self {
            Subject::Action(_) => "action",
            Subject::Operation(_) => "operation",
            Subject::Tool(_) => "tool",
        }
    }

    fn key(self) -> &'a str {
        match self {
            Subject::Action(key) | Subject::Operation(key) | Subject::Tool(key) => key,
        }
    }
}

impl std::fmt::Display for Subject<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} `{}`", self.noun(), self.key())
    }
}

/// The one read/mutation rule of actions and tools alike: a side effect has the `mutation` result
/// policy (its over-budget result is a receipt); a read never has it, and always names its
/// continuation (`hint` and `next`) for an over-budget result.
fn check_policy(
    loader: &mut Loader<'_>,
    file: &str,
    pointer: &str,
    subject: Subject<'_>,
    mutation: bool,
    policy: ResultPolicy,
    [hint, next]: [&Option<String>; 2],
) {
    let noun = subject.noun();
    match (mutation, policy) {
        (false, ResultPolicy::Mutation) => loader.diag(
            file,
            pointer,
            format!("{subject} is a `read` {noun} with a `mutation` result policy: a read-only {noun} cannot have the `mutation` result policy"),
        ),
        (true, policy) if policy != ResultPolicy::Mutation => loader.diag(
            file,
            pointer,
            format!("{subject} has side effects, so it has the `mutation` result policy, not `{}`", policy.as_str()),
        ),
        _ => {}
    }
    if !mutation {
        for (field, value) in [("hint", hint), ("next", next)] {
            if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                loader.diag(
                    file,
                    pointer,
                    format!(
                        "read {subject} needs `{field}`: the continuation for an over-budget result"
                    ),
                );
            }
        }
    }
}

/// `^[a-z][a-z0-9_]*$` of at most [`MAX_TOOL_NAME`] characters, no trailing or doubled `_`.
pub fn is_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.ends_with('_')
        && !name.contains("__")
        && name.len() <= MAX_TOOL_NAME
}

/// Every `#/$defs/<Name>` referenced anywhere inside `value`.
pub fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "$ref" {
                    if let Some(name) = child.as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
                        out.push(name.to_string());
                    }
                } else {
                    collect_refs(child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, out)),
        _ => {}
    }
}
