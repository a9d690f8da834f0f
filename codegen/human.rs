//! The human half of the contract: the `HumanActionId` catalog appended to `catalog.rs`, the
//! typed `HumanHandler` trait (the server implements it) and the typed `HumanClient` (the daemon
//! and the terminal reader call through it) appended to `handlers.rs`, and `human_openapi.json`,
//! the OpenAPI document of the server's human API.

use serde_json::{Map, Value, json};

use super::model::{HumanAction, Model};
use super::{pretty_json, rust_str};

/// The human API's route of one action; `{serverId}` is the workspace the device credential
/// belongs to.
pub const HUMAN_PREFIX: &str = "/human/servers/{serverId}/actions";

/// The human part of `catalog.rs`: `HumanActionId` and `HUMAN_ACTIONS`.
pub fn render_catalog(model: &Model) -> String {
    let mut out = String::new();
    out.push_str("/// Every action of the server's human API; `HUMAN_ACTIONS[id as usize]` is its descriptor.\n");
    out.push_str(
        "#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub enum HumanActionId {\n",
    );
    for action in &model.human_actions {
        out.push_str(&format!(
            "    /// `{}`: {}.\n    {},\n",
            action.name,
            action.summary,
            action.rust_stem()
        ));
    }
    out.push_str("}\n\n");
    out.push_str("/// Every human action, sorted by name.\npub static HUMAN_ACTIONS: &[HumanActionDescriptor] = &[\n");
    for action in &model.human_actions {
        out.push_str(&format!(
            "    HumanActionDescriptor {{ id: HumanActionId::{stem}, name: {name}, summary: {summary}, write: {write}, same_as: {same_as}, \
             input_schema: {input}, output_schema: {output} }},\n",
            stem = action.rust_stem(),
            name = rust_str(&action.name),
            summary = rust_str(&action.summary),
            write = action.write,
            same_as = action
                .same_as
                .as_deref()
                .map(|s| format!("Some({})", rust_str(s)))
                .unwrap_or_else(|| "None".into()),
            input = rust_str(&pretty_json(&model.standalone(&action.input_type))),
            output = rust_str(&pretty_json(&model.standalone(&action.output_type))),
        ));
    }
    out.push_str("];\n");
    out
}

/// The human part of `handlers.rs`: the server's trait, its adapter, and the typed client.
pub fn render_handlers(model: &Model) -> String {
    let actions = &model.human_actions;
    let mut out = String::new();
    out.push_str(
        "/// The typed handler of every human API action: one method per `schema/human/` file.\n\
         pub trait HumanHandler: Send + Sync {\n\
         \x20   /// What the transport hands to every call: the authorized person.\n\
         \x20   type Context: Send + Sync;\n",
    );
    for action in actions {
        out.push_str(&format!(
            "    /// `{name}`: {summary}.\n    fn {name}(&self, ctx: &Self::Context, input: types::{input}) -> impl ::std::future::Future<Output = ActionResult<types::{output}>> + Send;\n",
            name = action.name,
            summary = action.summary,
            input = action.input_type,
            output = action.output_type,
        ));
    }
    out.push_str("}\n\n");
    out.push_str(
        "/// Decodes validated JSON into the action's typed input, calls its `HumanHandler` method and\n\
         /// encodes the typed output to JSON text. Each action's future is boxed on its own.\n\
         pub async fn dispatch_human<H: HumanHandler>(handler: &H, ctx: &H::Context, id: HumanActionId, input: ::serde_json::Value) -> Result<String, DispatchError> {\n\
         \x20   match id {\n",
    );
    for action in actions {
        out.push_str(&format!(
            "        HumanActionId::{stem} => ::std::boxed::Box::pin(async {{\n\
             \x20           let input: types::{input} = ::serde_json::from_value(input).map_err(DispatchError::Decode)?;\n\
             \x20           let output = handler.{name}(ctx, input).await.map_err(DispatchError::Action)?;\n\
             \x20           ::serde_json::to_string(&output).map_err(DispatchError::Encode)\n\
             \x20       }}).await,\n",
            stem = action.rust_stem(),
            input = action.input_type,
            name = action.name,
        ));
    }
    out.push_str("    }\n}\n\n");
    out.push_str(
        "/// How a [`HumanClient`] reaches the human API: one call, the action's validated input as JSON\n\
         /// in, its `data` as JSON out, or the action's refusal.\n\
         pub trait HumanTransport: Send + Sync {\n\
         \x20   fn call(&self, id: HumanActionId, input: ::serde_json::Value) -> impl ::std::future::Future<Output = ActionResult<::serde_json::Value>> + Send;\n\
         }\n\n\
         /// The typed client of the human API: one method per action, over any [`HumanTransport`].\n\
         pub struct HumanClient<T>(pub T);\n\n\
         impl<T: HumanTransport> HumanClient<T> {\n",
    );
    for action in actions {
        out.push_str(&format!(
            "    /// `{name}`: {summary}.\n\
             \x20   pub async fn {name}(&self, input: &types::{input}) -> ActionResult<types::{output}> {{\n\
             \x20       let input = ::serde_json::to_value(input).map_err(|e| ActionError::new(ErrorCode::ValidationFailed, e.to_string()))?;\n\
             \x20       let data = self.0.call(HumanActionId::{stem}, input).await?;\n\
             \x20       ::serde_json::from_value(data).map_err(|e| ActionError::new(ErrorCode::InternalError, format!(\"the server's answer to `{name}` is not its contract: {{e}}\")))\n\
             \x20   }}\n",
            name = action.name,
            summary = action.summary,
            input = action.input_type,
            output = action.output_type,
            stem = action.rust_stem(),
        ));
    }
    out.push_str("}\n");
    out
}

/// `human_openapi.json`: the OpenAPI 3.1 document of the server's human API.
pub fn render_openapi(model: &Model) -> String {
    let mut paths = Map::new();
    for action in &model.human_actions {
        paths.insert(
            format!("{HUMAN_PREFIX}/{}", action.name),
            json!({ "post": operation(action) }),
        );
    }
    let mut reachable = std::collections::BTreeSet::new();
    let mut queue: Vec<String> = model
        .human_actions
        .iter()
        .flat_map(|a| [a.input_type.clone(), a.output_type.clone()])
        .chain([model.error_type.clone()])
        .collect();
    while let Some(name) = queue.pop() {
        if reachable.insert(name.clone()) {
            let mut refs = Vec::new();
            super::model::collect_refs(&model.defs[&name], &mut refs);
            queue.extend(refs);
        }
    }
    let mut schemas: Map<String, Value> = reachable
        .iter()
        .map(|name| {
            (
                name.clone(),
                super::openapi::rewrite_refs(&model.defs[name]),
            )
        })
        .collect();
    for action in &model.human_actions {
        schemas.insert(
            success_schema(action),
            json!({
                "description": format!("The success envelope of `{}`.", action.name),
                "type": "object",
                "required": ["ok", "data"],
                "properties": {
                    "ok": { "const": true },
                    "data": { "$ref": format!("#/components/schemas/{}", action.output_type) }
                },
                "additionalProperties": false
            }),
        );
    }
    let document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "AgentTeam Server human API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "What a person does in their workspace: read and answer conversations, read tasks, reviews, projects, scheduled messages and workflow runs, decide approvals, read the audit of their agents. Every route authenticates a device credential of the person and binds it to `{serverId}`; what the person may see follows their memberships, never the request's say-so.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A device credential (`dev_….<secret>`) of the person, as `agentteam admin device` issues it.",
                }
            },
            "responses": {
                "Error": {
                    "description": "The action was refused: `forbidden`, `not_found`, `validation_failed`, `invalid_state`, `idempotency_key_reused`, …",
                    "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{}", model.error_type) } } }
                }
            }
        }
    });
    pretty_json(&document)
}

fn success_schema(action: &HumanAction) -> String {
    format!("Human{}Success", action.rust_stem())
}

fn operation(action: &HumanAction) -> Value {
    let mut op = json!({
        "operationId": format!("human.{}", action.name),
        "summary": action.summary,
        "parameters": [{
            "name": "serverId",
            "in": "path",
            "required": true,
            "description": "The workspace the device credential belongs to.",
            "schema": { "type": "string", "pattern": "^[a-z]{3}_[0-9A-Za-z]{8,64}$" }
        }],
        "requestBody": {
            "required": true,
            "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{}", action.input_type) } } }
        },
        "responses": {
            "200": {
                "description": "The action succeeded.",
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{}", success_schema(action)) } } }
            },
            "default": { "$ref": "#/components/responses/Error" }
        },
        "security": [{ "bearerAuth": [] }],
        "x-agentteam-write": action.write,
    });
    if let Some(same_as) = &action.same_as {
        op["x-agentteam-same-as"] = json!(same_as);
    }
    op
}
