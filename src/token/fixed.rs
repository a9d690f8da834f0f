//! What AgentTeam adds to every model request a launched runtime sends: its MCP tools as that
//! runtime presents them, the MCP instructions where the runtime shows them, the launch's
//! guidance, and the skill listing line. Rebuilt from this binary's own catalog, in each
//! runtime's wire shape (checked against what real runtimes sent, in the runtime tests).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::contract::catalog::MCP_TOOLS_JSON;
use crate::contract::tool_guidance::{NAMESPACE, ToolNamer, mcp_instructions};
use crate::daemon::runtime::driver::Family;
use crate::daemon::runtime::guidance;

use super::count;

/// The runtimes whose fixed cost and sessions are known.
pub const RUNTIMES: [Family; 6] = [
    Family::Claude,
    Family::Codex,
    Family::Opencode,
    Family::Gemini,
    Family::Kimi,
    Family::Copilot,
];

/// The upper bound of AgentTeam's fixed cost per request, in `o200k_base` tokens, for any
/// runtime. Raising it is a reviewed decision: the inventory and the guidance ride on every
/// request of every agent.
pub const FIXED_COST_BOUND: u64 = 4_500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// One MCP tool's definition, as the runtime sends it.
    Tool,
    /// The MCP server's `instructions`, where the runtime shows them to its model.
    Instructions,
    /// The launch's guidance (both bridges, the Exec index).
    Guidance,
    /// The runtime's listing line of the memory skill.
    Skill,
}

/// One piece of the fixed cost: what is sent, byte for byte.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    pub kind: ItemKind,
    /// A tool's model-visible name, or the item's own name.
    pub name: String,
    #[serde(skip)]
    pub text: String,
    pub bytes: u64,
    pub tokens: u64,
}

impl Item {
    fn new(kind: ItemKind, name: impl Into<String>, text: String) -> Item {
        Item {
            kind,
            name: name.into(),
            bytes: text.len() as u64,
            tokens: count::tokens(&text),
            text,
        }
    }
}

/// A runtime's fixed cost per request.
#[derive(Debug, Clone, Serialize)]
pub struct Fixed {
    pub runtime: &'static str,
    pub items: Vec<Item>,
    pub bytes: u64,
    pub tokens: u64,
    /// `json_text`: each item counted as its text, a tool as its JSON; an estimate for every
    /// provider, which bills a definition as it renders it.
    pub method: count::Method,
}

/// The fixed cost `family` adds to each request of a launch with no extension pinned (each
/// pinned extension adds one line to the guidance).
pub fn fixed(family: Family) -> Fixed {
    let mut items: Vec<Item> = tool_definitions(family)
        .into_iter()
        .map(|(name, value)| Item::new(ItemKind::Tool, name, value.to_string()))
        .collect();
    if shows_instructions(family) {
        let text = mcp_instructions();
        let text = if family == Family::Opencode {
            // OpenCode wraps each server's instructions in a block, every line indented.
            let indented: Vec<String> = text.lines().map(|l| format!("    {l}")).collect();
            format!(
                "<mcp_instructions>\n  <server name=\"mcp_{NAMESPACE}\">\n{}\n  </server>\n</mcp_instructions>",
                indented.join("\n")
            )
        } else {
            text
        };
        items.push(Item::new(ItemKind::Instructions, "MCP instructions", text));
    }
    let compiled = guidance::compile(family.reader(), &[], family.loads_skills());
    items.push(Item::new(ItemKind::Guidance, "guidance", compiled.text));
    if let Some(line) = skill_listing(family) {
        items.push(Item::new(ItemKind::Skill, "memory-maintenance skill", line));
    }
    let bytes = items.iter().map(|i| i.bytes).sum();
    let tokens = items.iter().map(|i| i.tokens).sum();
    Fixed {
        runtime: family.as_str(),
        items,
        bytes,
        tokens,
        method: count::Method::JsonText,
    }
}

/// Whether the runtime puts a server's MCP `instructions` in front of its model: Kimi Code never
/// does, Copilot CLI only for allow-listed servers.
pub fn shows_instructions(family: Family) -> bool {
    matches!(
        family,
        Family::Claude | Family::Codex | Family::Opencode | Family::Gemini
    )
}

/// A launch's skill file as OpenCode lists it (the daemon's runtime directory, its instance and
/// the launch's guidance directory).
pub const OPENCODE_SKILL_LOCATION: &str = "/run/user/1000/agentteam/instance-00000000000000000000000000000000/guide-00000000000000000000000000000000/plugin/skills/memory-maintenance/SKILL.md";

/// The runtime's listing of the memory skill, where the skill is delivered apart from the
/// guidance (`Family::loads_skills`).
fn skill_listing(family: Family) -> Option<String> {
    let compiled = guidance::compile(family.reader(), &[], true);
    let (name, file) = compiled.skills.first()?;
    let description: String = file
        .lines()
        .find_map(|l| l.strip_prefix("description: "))
        .and_then(|d| serde_json::from_str(d).ok())?;
    match family {
        Family::Claude => Some(format!("- {}:{name}: {description}", guidance::PLUGIN_NAME)),
        Family::Copilot => Some(format!(
            "<skill>\n  <name>{name}</name>\n  <description>{description}</description>\n  <location>project</location>\n</skill>"
        )),
        // The location is the launch's own guidance directory: a typical one is counted.
        Family::Opencode => Some(format!(
            "  <skill>\n    <name>{name}</name>\n    <description>{description}</description>\n    <location>{OPENCODE_SKILL_LOCATION}</location>\n  </skill>"
        )),
        _ => None,
    }
}

/// The served inventory, parsed.
fn served() -> Vec<Value> {
    serde_json::from_str(MCP_TOOLS_JSON).expect("the generated tool inventory parses")
}

/// Each AgentTeam tool as `family` sends it to its model: `(model-visible name, definition)`.
pub fn tool_definitions(family: Family) -> Vec<(String, Value)> {
    let naming = family.naming();
    served()
        .into_iter()
        .map(|tool| {
            let raw = tool["name"].as_str().unwrap_or_default().to_string();
            let description = tool["description"].clone();
            let schema = tool["inputSchema"].clone();
            let visible = naming.model_name(&raw);
            let function = |schema: Value| {
                json!({"type": "function", "function": {
                    "name": visible, "description": description, "parameters": schema}})
            };
            let definition = match family {
                Family::Claude => json!({
                    "name": visible, "description": description,
                    "input_schema": map_strings(schema, &|s| s.replace('\u{2026}', "...")),
                }),
                Family::Codex => {
                    let mut schema = schema;
                    walk_schema(&mut schema, &mut |node| {
                        for key in ["$schema", "minLength", "maxLength", "pattern", "minimum", "maximum"] {
                            node.remove(key);
                        }
                    });
                    json!({"type": "function", "name": raw, "description": description,
                           "strict": false, "parameters": schema})
                }
                Family::Opencode => function(schema),
                Family::Gemini => {
                    let mut schema = schema;
                    schema["properties"]["wait_for_previous"] = json!({
                        "type": "boolean",
                        "description": "Set to true to wait for all previously requested tools in this turn to complete before starting. Set to false (or omit) to run in parallel. Use true when this tool depends on the output of previous tools."
                    });
                    json!({"name": visible, "description": description,
                           "parametersJsonSchema": schema})
                }
                Family::Kimi => function(inline_refs(schema)),
                Family::Copilot => {
                    let mut schema = schema;
                    walk_schema(&mut schema, &mut constraints_into_description);
                    function(schema)
                }
                Family::Auto | Family::Generic => tool,
            };
            (visible, definition)
        })
        .collect()
}

/// The Codex namespace entry that carries the tools: its name and its description (the MCP
/// instructions).
pub fn codex_namespace() -> (String, String) {
    (format!("mcp__{NAMESPACE}"), mcp_instructions())
}

/// `value` with `f` applied to every string in it.
fn map_strings(value: Value, f: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(s) => Value::String(f(&s)),
        Value::Array(items) => items.into_iter().map(|v| map_strings(v, f)).collect(),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, map_strings(v, f)))
                .collect(),
        ),
        other => other,
    }
}

/// Calls `f` on every schema node of `schema`, following the keywords that hold schemas (never a
/// property's name).
fn walk_schema(schema: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    let Value::Object(node) = schema else { return };
    f(node);
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(children)) = node.get_mut(key) {
            for child in children.values_mut() {
                walk_schema(child, f);
            }
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "contains",
        "propertyNames",
    ] {
        if let Some(child) = node.get_mut(key) {
            walk_schema(child, f);
        }
    }
    for key in ["oneOf", "anyOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = node.get_mut(key) {
            for child in children {
                walk_schema(child, f);
            }
        }
    }
}

/// Copilot CLI moves validation keywords into the node's description: `"\n\n{minLength: 1,
/// maxLength: 160}"`.
fn constraints_into_description(node: &mut Map<String, Value>) {
    let mut moved = Vec::new();
    for key in ["minLength", "maxLength", "pattern", "minimum", "maximum"] {
        if let Some(value) = node.remove(key) {
            moved.push(format!("{key}: {value}"));
        }
    }
    if moved.is_empty() {
        return;
    }
    let suffix = format!("{{{}}}", moved.join(", "));
    let description = match node.get("description").and_then(Value::as_str) {
        Some(text) => format!("{text}\n\n{suffix}"),
        None => suffix,
    };
    node.insert("description".into(), Value::String(description));
}

/// Kimi Code inlines every local `$ref` (the referring node's own keys win) and drops `$defs`.
fn inline_refs(mut schema: Value) -> Value {
    let defs = schema
        .as_object_mut()
        .and_then(|root| root.remove("$defs"))
        .unwrap_or(Value::Null);
    fn inline(value: Value, defs: &Value, depth: usize) -> Value {
        match value {
            Value::Object(mut node) => {
                if depth < 32
                    && let Some(Value::String(target)) = node.get("$ref").cloned()
                    && let Some(name) = target.strip_prefix("#/$defs/")
                    && let Some(Value::Object(def)) = defs.get(name)
                {
                    node.remove("$ref");
                    for (key, value) in def {
                        node.entry(key.clone()).or_insert_with(|| value.clone());
                    }
                }
                Value::Object(
                    node.into_iter()
                        .map(|(k, v)| (k, inline(v, defs, depth + 1)))
                        .collect(),
                )
            }
            Value::Array(items) => items
                .into_iter()
                .map(|v| inline(v, defs, depth + 1))
                .collect(),
            other => other,
        }
    }
    inline(schema, &defs, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_runtimes_fixed_cost_stays_within_its_bound() {
        for family in RUNTIMES {
            let fixed = fixed(family);
            assert!(
                fixed.tokens <= FIXED_COST_BOUND,
                "{}: {} tokens per request, over the bound of {FIXED_COST_BOUND}",
                family.as_str(),
                fixed.tokens
            );
            assert!(
                fixed.tokens > 1_000,
                "{}: {}",
                family.as_str(),
                fixed.tokens
            );
            assert_eq!(
                fixed
                    .items
                    .iter()
                    .filter(|i| i.kind == ItemKind::Tool)
                    .count(),
                crate::contract::catalog::TOOLS.len()
            );
        }
    }

    #[test]
    fn copilot_moves_constraints_into_descriptions() {
        let mut schema = json!({"type": "object", "properties": {
            "pattern": {"type": "string", "minLength": 1, "maxLength": 9, "pattern": "^a$"},
            "n": {"type": "integer", "minimum": 0}}});
        walk_schema(&mut schema, &mut constraints_into_description);
        assert_eq!(
            schema["properties"]["pattern"]["description"],
            "{minLength: 1, maxLength: 9, pattern: \"^a$\"}"
        );
        assert_eq!(
            schema["properties"]["n"],
            json!({"type": "integer", "description": "{minimum: 0}"})
        );
    }

    #[test]
    fn kimi_inlines_references_and_the_referrers_keys_win() {
        let schema = json!({"$defs": {"T": {"type": "string", "description": "def"}},
            "properties": {"a": {"$ref": "#/$defs/T", "description": "own"}, "b": {"$ref": "#/$defs/T"}}});
        let inlined = inline_refs(schema);
        assert_eq!(
            inlined["properties"]["a"],
            json!({"type": "string", "description": "own"})
        );
        assert_eq!(
            inlined["properties"]["b"],
            json!({"type": "string", "description": "def"})
        );
        assert!(inlined.get("$defs").is_none());
    }
}
