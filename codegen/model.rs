//! Loads `schema/` into one checked [`Model`]: the inventory, every action's schema pair, the
//! error envelope and the MCP tool names, with all `$defs` hoisted into one namespaced map.
//!
//! Hoisting rules (the one normal form every consumer reads):
//! - `schema/common.json` and `schema/errors/error-envelope.json` own global definition names;
//! - an action file's local `$defs/X` becomes `<Domain><Action><X>`;
//! - an action root becomes `<Domain><Action>Input` / `<Domain><Action>Output`;
//! - every `$ref` is rewritten to `#/$defs/<GlobalName>`; only `#…` and `…/common.json#…` refs are
//!   allowed, because typify cannot follow any other external reference.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Diagnostic, lint, pascal_case};

pub const INVENTORY_FILE: &str = "exec/agentteam-exec-action-inventory.json";
pub const COMMON_FILE: &str = "common.json";
pub const ERROR_FILE: &str = "errors/error-envelope.json";
pub const MCP_DIR: &str = "mcp";
/// The MCP result budget contract; the only file in `schema/mcp/` that is not a tool.
pub const MCP_BUDGET_FILE: &str = "mcp/result-budget.json";
/// The longest MCP tool name (the conformance suite's limit; the spec allows 128).
pub const MAX_TOOL_NAME: usize = 64;
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// How risky an action is for the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Risk {
    Read,
    Write,
    Destructive,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Write => "write",
            Risk::Destructive => "destructive",
        }
    }
}

/// How an over-budget result continues (spec "Result Boundaries").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResultPolicy {
    /// A page: continue with a smaller limit and the cursor.
    Cursor,
    /// A sectioned document: continue section by section.
    Section,
    /// A read that a narrower request can shrink.
    Narrow,
    /// A read bounded by design; over budget means a more specific request.
    Bounded,
    /// A side effect: over budget returns a receipt, never a replay.
    Mutation,
}

impl ResultPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ResultPolicy::Cursor => "cursor",
            ResultPolicy::Section => "section",
            ResultPolicy::Narrow => "narrow",
            ResultPolicy::Bounded => "bounded",
            ResultPolicy::Mutation => "mutation",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InventoryFile {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    domains: Vec<DomainRow>,
    actions: Vec<ActionRow>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DomainRow {
    domain: String,
    summary: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ActionRow {
    domain: String,
    action: String,
    summary: String,
    risk: Risk,
    result_policy: ResultPolicy,
    #[serde(default)]
    hint: Option<String>,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    prompt_inline: bool,
    example: Value,
}

/// Who answers an MCP tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Owner {
    /// The AgentTeam Server's runtime API (messages, reactions, attachments).
    Server,
    /// The daemon's managed memory index.
    Memory,
    /// Knowledge retrieval: AgentTeam Core, then MeshX.
    Knowledge,
}

impl Owner {
    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Server => "server",
            Owner::Memory => "memory",
            Owner::Knowledge => "knowledge",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolFile {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    name: String,
    description: String,
    annotations: Map<String, Value>,
    owner: Owner,
    result_policy: ResultPolicy,
    #[serde(default)]
    hint: Option<String>,
    #[serde(default)]
    next: Option<String>,
    input_schema: Value,
    output_schema: Value,
    #[serde(rename = "$defs", default)]
    _defs: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BudgetFile {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    max_result_bytes: u64,
    description: String,
}

/// One MCP tool of the `agentteam` namespace, from `schema/mcp/<name>.json`.
#[derive(Debug, Clone)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    /// The MCP `annotations` object, `readOnlyHint` always present.
    pub annotations: Map<String, Value>,
    pub read_only: bool,
    pub owner: Owner,
    pub result_policy: ResultPolicy,
    pub hint: Option<String>,
    pub next: Option<String>,
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
}

/// One built-in action: its inventory row joined with its hoisted schema pair.
#[derive(Debug, Clone)]
pub struct Action {
    pub domain: String,
    pub action: String,
    pub summary: String,
    pub risk: Risk,
    pub result_policy: ResultPolicy,
    pub hint: Option<String>,
    pub next: Option<String>,
    pub prompt_inline: bool,
    pub example: Value,
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
}

impl Model {
    /// Loads and checks `schema_dir`, collecting every problem before giving up.
    pub fn load(schema_dir: &Path) -> Result<Model, Vec<Diagnostic>> {
        let mut diags = Vec::new();
        let mut loader = Loader {
            root: schema_dir,
            diags: &mut diags,
            defs: BTreeMap::new(),
            origin: BTreeMap::new(),
        };

        let inventory = loader.read_json(INVENTORY_FILE).and_then(|value| {
            serde_json::from_value::<InventoryFile>(value)
                .map_err(|e| {
                    loader.diags.push(Diagnostic::new(
                        display(INVENTORY_FILE),
                        "",
                        format!("malformed inventory: {e}"),
                    ))
                })
                .ok()
        });

        // Shared definitions first, so action files can reference them.
        if let Some(common) = loader.read_json(COMMON_FILE) {
            loader.lint(COMMON_FILE, &common);
            loader.hoist_shared(COMMON_FILE, &common);
        }
        let error_type = "ErrorEnvelope".to_string();
        if let Some(errors) = loader.read_json(ERROR_FILE) {
            loader.lint(ERROR_FILE, &errors);
            loader.hoist_shared(ERROR_FILE, &errors);
            loader.add_root(ERROR_FILE, &error_type, &errors, "");
        }

        let schema_pairs = loader.scan_exec_schemas();
        let mcp_tools = loader.scan_mcp_tools();

        let mut domains = Vec::new();
        let mut actions = Vec::new();
        if let Some(inventory) = inventory {
            let mut seen_domains = BTreeSet::new();
            for row in &inventory.domains {
                if !is_name(&row.domain) {
                    loader.diag(
                        INVENTORY_FILE,
                        "/domains",
                        format!("domain name `{}` must match ^[a-z][a-z0-9-]*$", row.domain),
                    );
                }
                if !seen_domains.insert(row.domain.clone()) {
                    loader.diag(
                        INVENTORY_FILE,
                        "/domains",
                        format!("domain `{}` is listed twice", row.domain),
                    );
                }
                domains.push(Domain {
                    name: row.domain.clone(),
                    summary: row.summary.clone(),
                });
            }

            let mut seen_actions = BTreeSet::new();
            for (index, row) in inventory.actions.iter().enumerate() {
                let pointer = format!("/actions/{index}");
                let key = format!("{}.{}", row.domain, row.action);
                if !is_name(&row.action) {
                    loader.diag(
                        INVENTORY_FILE,
                        &pointer,
                        format!("action name `{}` must match ^[a-z][a-z0-9-]*$", row.action),
                    );
                }
                if !seen_actions.insert(key.clone()) {
                    loader.diag(
                        INVENTORY_FILE,
                        &pointer,
                        format!("action `{key}` is listed twice"),
                    );
                }
                if !seen_domains.contains(&row.domain) {
                    loader.diag(
                        INVENTORY_FILE,
                        &pointer,
                        format!(
                            "action `{key}` names domain `{}`, which `domains` does not list",
                            row.domain
                        ),
                    );
                }
                check_row_policy(&mut loader, &pointer, &key, row);
                if row.summary.trim().is_empty()
                    || row.summary.ends_with('.')
                    || row.summary.contains('\n')
                {
                    loader.diag(
                        INVENTORY_FILE,
                        &pointer,
                        format!(
                            "action `{key}`: summary must be one line without a trailing period"
                        ),
                    );
                }
                if !row.example.is_object() {
                    loader.diag(
                        INVENTORY_FILE,
                        &pointer,
                        format!("action `{key}`: example must be a JSON object"),
                    );
                }

                let stem = pascal_case(&row.domain) + &pascal_case(&row.action);
                let input_type = format!("{stem}Input");
                let output_type = format!("{stem}Output");
                match schema_pairs.get(&(row.domain.clone(), row.action.clone())) {
                    Some(pair) if pair.input.is_some() && pair.output.is_some() => {
                        for (file, type_name) in [(pair.input.as_ref().unwrap(), &input_type), (pair.output.as_ref().unwrap(), &output_type)] {
                            if let Some(value) = loader.read_json(file) {
                                loader.lint(file, &value);
                                loader.hoist_local(file, &value, &stem);
                                loader.add_root(file, type_name, &value, &stem);
                            }
                        }
                    }
                    Some(pair) => {
                        let missing = if pair.input.is_none() { "input" } else { "output" };
                        loader.diag(INVENTORY_FILE, &pointer, format!("action `{key}` has no {missing} schema: add schema/exec/{}/{}.{missing}.json", row.domain, row.action));
                    }
                    None => loader.diag(
                        INVENTORY_FILE,
                        &pointer,
                        format!("action `{key}` has an inventory row but no schemas: add schema/exec/{0}/{1}.input.json and schema/exec/{0}/{1}.output.json", row.domain, row.action),
                    ),
                }
                actions.push(Action {
                    domain: row.domain.clone(),
                    action: row.action.clone(),
                    summary: row.summary.clone(),
                    risk: row.risk,
                    result_policy: row.result_policy,
                    hint: row.hint.clone(),
                    next: row.next.clone(),
                    prompt_inline: row.prompt_inline,
                    example: row.example.clone(),
                    input_type,
                    output_type,
                    inventory_index: index,
                });
            }

            for ((domain, action), pair) in &schema_pairs {
                let key = format!("{domain}.{action}");
                if !seen_actions.contains(&key) {
                    let file = pair
                        .input
                        .as_ref()
                        .or(pair.output.as_ref())
                        .expect("a pair has at least one file");
                    loader.diag(
                        file,
                        "",
                        format!("action `{key}` has schemas but no row in schema/{INVENTORY_FILE}"),
                    );
                }
            }
            for domain in &seen_domains {
                if !inventory.actions.iter().any(|row| &row.domain == domain) {
                    loader.diag(
                        INVENTORY_FILE,
                        "/domains",
                        format!("domain `{domain}` has no actions"),
                    );
                }
            }
            for tool in &mcp_tools {
                for domain in &seen_domains {
                    if collides(tool, domain) {
                        loader.diag(
                            &format!("{MCP_DIR}/{tool}.json"),
                            "",
                            format!("MCP tool `{tool}` collides with Exec domain `{domain}`: a tool family has one transport"),
                        );
                    }
                }
            }
        }

        let mut tools: Vec<McpTool> = mcp_tools
            .iter()
            .filter_map(|stem| loader.load_tool(stem))
            .collect();
        let budget = loader.load_budget();

        let defs = std::mem::take(&mut loader.defs);
        loader.check_refs(&defs);
        drop(loader);
        if !diags.is_empty() {
            return Err(diags);
        }
        domains.sort_by(|a, b| a.name.cmp(&b.name));
        actions.sort_by(|a, b| (&a.domain, &a.action).cmp(&(&b.domain, &b.action)));
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Model {
            domains,
            actions,
            defs,
            error_type,
            mcp_tools: tools,
            mcp_budget: budget.expect("no diagnostics means the budget loaded"),
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

fn check_row_policy(loader: &mut Loader<'_>, pointer: &str, key: &str, row: &ActionRow) {
    match (row.risk, row.result_policy) {
        (Risk::Read, ResultPolicy::Mutation) => {
            loader.diag(INVENTORY_FILE, pointer, format!("action `{key}` is a `read` action with a `mutation` result policy"))
        }
        (Risk::Write | Risk::Destructive, policy) if policy != ResultPolicy::Mutation => loader.diag(
            INVENTORY_FILE,
            pointer,
            format!("action `{key}` has side effects, so its result policy must be `mutation`, not `{}`", policy.as_str()),
        ),
        _ => {}
    }
    if row.risk == Risk::Read {
        for (field, value) in [("hint", &row.hint), ("next", &row.next)] {
            if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                loader.diag(INVENTORY_FILE, pointer, format!("read action `{key}` needs `{field}`: the continuation for an over-budget result"));
            }
        }
    }
}

/// Whether the MCP tool `tool` belongs to the family of the Exec domain `domain`: with `-` and `_`
/// read as one separator, the tool is the domain's name or starts with it plus a separator
/// (`scheduled_message_x` belongs to `scheduled-message`; `message_send` to `message`).
pub fn collides(tool: &str, domain: &str) -> bool {
    let family = domain.replace('-', "_");
    tool.replace('-', "_")
        .strip_prefix(&family)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
}

/// `^[a-z][a-z0-9-]*$`, no trailing or doubled hyphen.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name.len() <= 32
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

#[derive(Debug, Default)]
struct SchemaPair {
    input: Option<String>,
    output: Option<String>,
}

struct Loader<'a> {
    root: &'a Path,
    diags: &'a mut Vec<Diagnostic>,
    defs: BTreeMap<String, Value>,
    /// Which file defined each global name, for collision messages.
    origin: BTreeMap<String, String>,
}

impl Loader<'_> {
    fn diag(&mut self, file: &str, pointer: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::new(display(file), pointer, message));
    }

    fn read_json(&mut self, file: &str) -> Option<Value> {
        let path = self.root.join(file);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                self.diag(file, "", format!("cannot read: {e}"));
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(value) => Some(value),
            Err(e) => {
                self.diag(file, "", format!("not valid JSON: {e}"));
                None
            }
        }
    }

    fn lint(&mut self, file: &str, value: &Value) {
        for problem in lint::lint_schema(value) {
            self.diag(file, &problem.pointer, problem.message);
        }
    }

    /// `schema/exec/<domain>/<action>.{input,output}.json`, keyed by `(domain, action)`.
    fn scan_exec_schemas(&mut self) -> BTreeMap<(String, String), SchemaPair> {
        let mut pairs: BTreeMap<(String, String), SchemaPair> = BTreeMap::new();
        let exec = self.root.join("exec");
        for domain_entry in sorted_dir(&exec) {
            if !domain_entry.is_dir() {
                continue;
            }
            let domain = file_name(&domain_entry);
            for file in sorted_dir(&domain_entry) {
                let name = file_name(&file);
                let rel = format!("exec/{domain}/{name}");
                let (action, is_input) = if let Some(action) = name.strip_suffix(".input.json") {
                    (action, true)
                } else if let Some(action) = name.strip_suffix(".output.json") {
                    (action, false)
                } else {
                    self.diag(&rel, "", "unexpected file: action schemas are named <action>.input.json or <action>.output.json");
                    continue;
                };
                let pair = pairs
                    .entry((domain.clone(), action.to_string()))
                    .or_default();
                if is_input {
                    pair.input = Some(rel);
                } else {
                    pair.output = Some(rel);
                }
            }
        }
        pairs
    }

    /// Tool names from `schema/mcp/<tool>.json` (the file stem; the MCP generator checks the
    /// `name` field matches it).
    fn scan_mcp_tools(&mut self) -> Vec<String> {
        let budget = Path::new(MCP_BUDGET_FILE)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let mut tools = Vec::new();
        for path in sorted_dir(&self.root.join(MCP_DIR)) {
            let name = file_name(&path);
            if name == budget {
                continue;
            }
            match name.strip_suffix(".json") {
                Some(stem) if is_tool_name(stem) => tools.push(stem.to_string()),
                _ => self.diag(
                    &format!("{MCP_DIR}/{name}"),
                    "",
                    format!("unexpected file: MCP tools are named <tool>.json with a name matching ^[a-z][a-z0-9_]*$ of at most {MAX_TOOL_NAME} characters"),
                ),
            }
        }
        tools
    }

    /// Loads, checks and hoists `schema/mcp/<stem>.json`.
    fn load_tool(&mut self, stem: &str) -> Option<McpTool> {
        let file = format!("{MCP_DIR}/{stem}.json");
        let value = self.read_json(&file)?;
        let tool: ToolFile = serde_json::from_value(value.clone())
            .map_err(|e| self.diag(&file, "", format!("malformed MCP tool: {e}")))
            .ok()?;
        if tool.name != stem {
            self.diag(
                &file,
                "/name",
                format!(
                    "tool name `{}` must equal the file name `{stem}`",
                    tool.name
                ),
            );
        }
        if tool.description.trim().is_empty() {
            self.diag(
                &file,
                "/description",
                "a tool needs a description (clients show it to the model)",
            );
        }
        let read_only = match tool.annotations.get("readOnlyHint") {
            Some(Value::Bool(read_only)) => *read_only,
            _ => {
                self.diag(&file, "/annotations", "`readOnlyHint` must be stated explicitly as true or false: the delegated-child gate reads it");
                false
            }
        };
        for (key, value) in &tool.annotations {
            let ok = match key.as_str() {
                "title" => value.is_string(),
                "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint" => {
                    value.is_boolean()
                }
                _ => false,
            };
            if !ok {
                self.diag(
                    &file,
                    &format!("/annotations/{key}"),
                    format!("`{key}` is not an MCP tool annotation of the right type"),
                );
            }
        }
        match (read_only, tool.result_policy) {
            (true, ResultPolicy::Mutation) => self.diag(
                &file,
                "/resultPolicy",
                "a read-only tool cannot have the `mutation` result policy",
            ),
            (false, policy) if policy != ResultPolicy::Mutation => self.diag(
                &file,
                "/resultPolicy",
                format!(
                    "a tool with side effects has the `mutation` result policy, not `{}`",
                    policy.as_str()
                ),
            ),
            _ => {}
        }
        if read_only {
            for (field, value) in [("hint", &tool.hint), ("next", &tool.next)] {
                if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                    self.diag(&file, "", format!("read-only tool `{stem}` needs `{field}`: the continuation for an over-budget result"));
                }
            }
        }
        let stem_type = pascal_case(stem);
        let input_type = format!("{stem_type}Input");
        let output_type = format!("{stem_type}Output");
        self.hoist_local(&file, &value, &stem_type);
        for (pointer, schema, type_name) in [
            ("/inputSchema", &tool.input_schema, &input_type),
            ("/outputSchema", &tool.output_schema, &output_type),
        ] {
            if schema.get("type").and_then(Value::as_str) != Some("object") {
                self.diag(&file, pointer, "must be an object schema (`type: object`): MCP requires it for arguments, and legacy clients for structured results");
            }
            self.lint(&file, schema);
            self.add_root(&file, type_name, schema, &stem_type);
        }
        Some(McpTool {
            name: tool.name,
            description: tool.description,
            annotations: tool.annotations,
            read_only,
            owner: tool.owner,
            result_policy: tool.result_policy,
            hint: tool.hint,
            next: tool.next,
            input_type,
            output_type,
        })
    }

    fn load_budget(&mut self) -> Option<McpBudget> {
        let value = self.read_json(MCP_BUDGET_FILE)?;
        let budget: BudgetFile = serde_json::from_value(value)
            .map_err(|e| self.diag(MCP_BUDGET_FILE, "", format!("malformed result budget: {e}")))
            .ok()?;
        if !(1024..=16 * 1024 * 1024).contains(&budget.max_result_bytes) {
            self.diag(
                MCP_BUDGET_FILE,
                "/maxResultBytes",
                "must be between 1 KiB and 16 MiB",
            );
        }
        Some(McpBudget {
            max_result_bytes: budget.max_result_bytes,
            description: budget.description,
        })
    }

    fn define(&mut self, file: &str, pointer: &str, name: String, value: Value) {
        if let Some(previous) = self.origin.get(&name) {
            let message = format!("definition `{name}` collides with the one from {previous}");
            self.diag(file, pointer, message);
            return;
        }
        self.origin.insert(name.clone(), display(file));
        self.defs.insert(name, value);
    }

    /// Hoists the `$defs` of a shared file under their own names.
    fn hoist_shared(&mut self, file: &str, value: &Value) {
        self.hoist(file, value, "");
    }

    /// Hoists the `$defs` of an action file under `<stem><Name>`.
    fn hoist_local(&mut self, file: &str, value: &Value, stem: &str) {
        self.hoist(file, value, stem);
    }

    fn hoist(&mut self, file: &str, value: &Value, prefix: &str) {
        let Some(defs) = value.get("$defs").and_then(Value::as_object) else {
            return;
        };
        for (name, def) in defs {
            if pascal_case(name) != *name {
                self.diag(
                    file,
                    &format!("/$defs/{name}"),
                    format!("definition name `{name}` must be PascalCase"),
                );
            }
            let rewritten = self.rewrite(file, def, prefix);
            self.define(
                file,
                &format!("/$defs/{name}"),
                format!("{prefix}{name}"),
                rewritten,
            );
        }
    }

    /// Adds a file's root (without `$schema`, `$id` and `$defs`) as the definition `type_name`.
    fn add_root(&mut self, file: &str, type_name: &str, value: &Value, prefix: &str) {
        match value.get("$schema").and_then(Value::as_str) {
            Some(DIALECT) => {}
            _ => self.diag(
                file,
                "/$schema",
                format!("schema must declare `$schema: {DIALECT}`"),
            ),
        }
        let mut root = value.clone();
        if let Some(object) = root.as_object_mut() {
            for key in ["$schema", "$id", "$defs", "title"] {
                object.remove(key);
            }
        }
        let mut rewritten = self.rewrite_root(file, &root, prefix, type_name);
        if let Some(object) = rewritten.as_object_mut() {
            object.insert("title".into(), json!(type_name));
        }
        self.define(file, "", type_name.to_string(), rewritten);
    }

    fn rewrite(&mut self, file: &str, value: &Value, prefix: &str) -> Value {
        self.rewrite_root(file, value, prefix, "")
    }

    /// Rewrites every `$ref` in `value` to the hoisted global name.
    fn rewrite_root(&mut self, file: &str, value: &Value, prefix: &str, root_name: &str) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, child) in map {
                    if key == "$ref" {
                        let target = child.as_str().unwrap_or_default();
                        let global = self.resolve_ref(file, target, prefix, root_name);
                        out.insert(key.clone(), json!(format!("#/$defs/{global}")));
                    } else {
                        out.insert(
                            key.clone(),
                            self.rewrite_root(file, child, prefix, root_name),
                        );
                    }
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.rewrite_root(file, item, prefix, root_name))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn resolve_ref(&mut self, file: &str, target: &str, prefix: &str, root_name: &str) -> String {
        let (location, fragment) = target.split_once('#').unwrap_or((target, ""));
        let def_name = fragment.strip_prefix("/$defs/");
        if location.is_empty() {
            return match (def_name, fragment) {
                (Some(name), _) => format!("{prefix}{name}"),
                (None, "") if !root_name.is_empty() => root_name.to_string(),
                _ => {
                    self.diag(
                        file,
                        "",
                        format!("unsupported `$ref`: `{target}` (use `#/$defs/<Name>`)"),
                    );
                    String::new()
                }
            };
        }
        let resolved = normalize_path(
            &Path::new(file)
                .parent()
                .unwrap_or(Path::new(""))
                .join(location),
        );
        match (resolved.as_deref().and_then(Path::to_str), def_name) {
            (Some(COMMON_FILE), Some(name)) => name.to_string(),
            _ => {
                self.diag(file, "", format!("unsupported `$ref`: `{target}`: only local refs and refs into schema/{COMMON_FILE}#/$defs/<Name> are allowed"));
                String::new()
            }
        }
    }

    /// Every rewritten ref must name a hoisted definition.
    fn check_refs(&mut self, defs: &BTreeMap<String, Value>) {
        for (name, def) in defs {
            let mut refs = Vec::new();
            collect_refs(def, &mut refs);
            for r in refs {
                if !r.is_empty() && !defs.contains_key(&r) {
                    let file = self.origin.get(name).cloned().unwrap_or_default();
                    self.diags.push(Diagnostic::new(
                        file,
                        "",
                        format!("`$ref` to `{r}`, which no schema defines"),
                    ));
                }
            }
        }
    }
}

fn display(file: &str) -> String {
    format!("schema/{file}")
}

fn sorted_dir(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    entries.sort();
    entries
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Resolves `.` and `..` lexically: `exec/task/../../common.json` → `common.json`; `None` when the
/// path climbs out of `schema/`.
fn normalize_path(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}
