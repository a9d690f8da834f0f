//! The MCP half of the contract: `mcp_tools.json` (the `tools/list` inventory, served as is), the
//! `ToolId` catalog appended to `catalog.rs`, and the typed `ServerToolHandler` trait appended to
//! `handlers.rs` for the tools whose owner is the AgentTeam Server.
//!
//! The inventory is one fixed document: every runtime on every route sees the same tools in the
//! same order (sorted by name), so `tools/list` never varies by session or agent.

use serde_json::{Map, Value, json};

use super::model::{McpTool, Model, ToolOwner};
use super::{pascal_case, pretty_json, rust_str};

/// The tool's schema as `tools/list` shows it: self-contained, without the generator's `title`.
fn wire_schema(model: &Model, type_name: &str) -> Value {
    let mut schema = model.standalone(type_name);
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
    }
    schema
}

/// One `Tool` object of `tools/list`.
fn wire_tool(model: &Model, tool: &McpTool) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), json!(tool.name));
    if let Some(title) = tool.annotations.get("title") {
        out.insert("title".into(), title.clone());
    }
    out.insert("description".into(), json!(tool.description));
    out.insert("inputSchema".into(), wire_schema(model, &tool.input_type));
    out.insert("outputSchema".into(), wire_schema(model, &tool.output_type));
    out.insert(
        "annotations".into(),
        Value::Object(tool.annotations.clone()),
    );
    Value::Object(out)
}

/// `mcp_tools.json`: the `tools` array of every `tools/list` result.
pub fn render_inventory(model: &Model) -> String {
    let tools: Vec<Value> = model
        .mcp_tools
        .iter()
        .map(|t| wire_tool(model, t))
        .collect();
    pretty_json(&Value::Array(tools))
}

/// The MCP part of `catalog.rs`: `ToolId`, `TOOLS` and the result budget.
pub fn render_catalog(model: &Model) -> String {
    let mut out = String::new();
    out.push_str("/// Every MCP tool of the `agentteam` namespace; `TOOLS[id as usize]` is its descriptor.\n");
    out.push_str(
        "#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub enum ToolId {\n",
    );
    for tool in &model.mcp_tools {
        out.push_str(&format!(
            "    /// `{}`.\n    {},\n",
            tool.name,
            tool.rust_stem()
        ));
    }
    out.push_str("}\n\n");
    out.push_str("/// Every MCP tool, sorted by name (the `tools/list` order).\npub static TOOLS: &[ToolDescriptor] = &[\n");
    for tool in &model.mcp_tools {
        let option = |value: &Option<String>| {
            value
                .as_deref()
                .map(|v| format!("Some({})", rust_str(v)))
                .unwrap_or_else(|| "None".into())
        };
        out.push_str(&format!(
            "    ToolDescriptor {{ id: ToolId::{stem}, name: {name}, description: {description}, read_only: {read_only}, \
             owner: ToolOwner::{owner}, result_policy: ResultPolicy::{policy}, hint: {hint}, next: {next}, skill: {skill}, \
             input_schema: {input}, output_schema: {output} }},\n",
            stem = tool.rust_stem(),
            name = rust_str(&tool.name),
            description = rust_str(&tool.description),
            read_only = tool.read_only,
            owner = pascal_case(tool.owner.as_str()),
            policy = pascal_case(tool.result_policy.as_str()),
            hint = option(&tool.hint),
            next = option(&tool.next),
            skill = tool
                .skill
                .as_ref()
                .map(|(name, text)| format!("Some(Skill {{ name: {}, text: {} }})", rust_str(name), rust_str(text)))
                .unwrap_or_else(|| "None".into()),
            input = rust_str(&pretty_json(&wire_schema(model, &tool.input_type))),
            output = rust_str(&pretty_json(&wire_schema(model, &tool.output_type))),
        ));
    }
    out.push_str("];\n\n");
    out.push_str(&format!(
        "/// The most bytes one serialized `tools/call` result may have (`schema/mcp/result-budget.json`):\n\
         /// {}\n\
         pub const MCP_RESULT_BUDGET_BYTES: usize = {};\n",
        model.mcp_budget.description,
        model.mcp_budget.max_result_bytes
    ));
    out
}

/// The MCP part of `handlers.rs`: the server's typed tool trait and its JSON adapter.
pub fn render_handlers(model: &Model) -> String {
    let served: Vec<&McpTool> = model
        .mcp_tools
        .iter()
        .filter(|t| t.owner == ToolOwner::Server)
        .collect();
    let mut out = String::new();
    out.push_str(
        "/// The typed handler of every MCP tool the AgentTeam Server owns: one method per tool.\n\
         pub trait ServerToolHandler: Send + Sync {\n\
         \x20   /// What the transport hands to every call: the authorized caller.\n\
         \x20   type Context: Send + Sync;\n",
    );
    for tool in &served {
        out.push_str(&format!(
            "    /// `{name}`.\n    fn {name}(&self, ctx: &Self::Context, input: types::{input}) -> impl ::std::future::Future<Output = ActionResult<Written<types::{output}>>> + Send;\n",
            name = tool.name,
            input = tool.input_type,
            output = tool.output_type,
        ));
    }
    out.push_str("}\n\n");
    out.push_str(
        "/// Decodes validated arguments into the tool's typed input, calls its handler method, and\n\
         /// encodes the typed result straight to JSON text (or takes the text its owner wrote);\n\
         /// `None` for a tool the server does not own. Each tool's future is boxed on its own, as `dispatch`'s are.\n\
         pub async fn dispatch_tool<H: ServerToolHandler>(handler: &H, ctx: &H::Context, id: ToolId, input: ::serde_json::Value) -> Option<Result<String, DispatchError>> {\n\
         \x20   Some(match id {\n",
    );
    for tool in &served {
        out.push_str(&format!(
            "        ToolId::{stem} => ::std::boxed::Box::pin(async {{\n\
             \x20           let input: types::{input} = ::serde_json::from_value(input).map_err(DispatchError::Decode)?;\n\
             \x20           let output = handler.{name}(ctx, input).await.map_err(DispatchError::Action)?;\n\
             \x20           output.into_text().map_err(DispatchError::Encode)\n\
             \x20       }}).await,\n",
            stem = tool.rust_stem(),
            input = tool.input_type,
            name = tool.name,
        ));
    }
    let others: Vec<String> = model
        .mcp_tools
        .iter()
        .filter(|t| t.owner != ToolOwner::Server)
        .map(|t| format!("ToolId::{}", t.rust_stem()))
        .collect();
    if !others.is_empty() {
        out.push_str(&format!("        {} => return None,\n", others.join(" | ")));
    }
    out.push_str("    })\n}\n");
    out
}
