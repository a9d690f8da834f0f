//! The OpenAPI 3.1 document of the daemon's Exec route family, emitted as plain JSON.
//!
//! `components/schemas` is the hoisted definition map itself with refs rewritten to
//! `#/components/schemas/<Name>`: raw JSON Schema 2020-12 is OpenAPI 3.1's dialect, so nothing is
//! lost (a typed OpenAPI builder would drop `const` and `$defs`).

use serde_json::{Map, Value, json};

use super::model::Model;
use super::pretty_json;

/// The Exec route family prefix; `{serverId}` and `{agentId}` bind the credential.
pub const EXEC_PREFIX: &str = "/api/internal/exec/servers/{serverId}/agents/{agentId}";

/// Error statuses every action may answer, each with the shared error envelope.
const ERROR_STATUSES: &[(&str, &str)] = &[
    (
        "400",
        "`invalid_request` or `validation_failed`: the body is not valid input for this action",
    ),
    (
        "403",
        "`forbidden`: the credential is missing, invalid, expired, revoked or bound to another route",
    ),
    ("404", "`not_found` or `unknown_action`"),
    (
        "408",
        "`request_timeout`: the body did not arrive within 5 seconds",
    ),
    (
        "409",
        "`admission_limited`, `invalid_state`, `revision_mismatch` or `idempotency_in_progress`",
    ),
    ("413", "`payload_too_large`: the body exceeds 1 MiB"),
    (
        "415",
        "`invalid_request`: the body is not `application/json`",
    ),
    (
        "422",
        "`idempotency_key_reused` or `result_budget_exceeded`",
    ),
    ("500", "`internal_error`"),
    ("502", "`upstream_failed`"),
    ("503", "`upstream_unavailable`"),
    ("504", "`upstream_timeout`"),
];

pub fn render(model: &Model) -> String {
    let mut paths = Map::new();
    for action in &model.actions {
        let input = &model.defs[&action.input_type];
        let mut responses = Map::new();
        responses.insert(
            "200".into(),
            json!({
                "description": "The action succeeded.",
                "content": { "application/json": { "schema": {
                    "type": "object",
                    "required": ["ok", "data"],
                    "properties": {
                        "ok": { "const": true },
                        "data": { "$ref": format!("#/components/schemas/{}", action.output_type) }
                    },
                    "additionalProperties": false
                }}}
            }),
        );
        for (status, _) in ERROR_STATUSES {
            responses.insert(
                (*status).into(),
                json!({ "$ref": format!("#/components/responses/Error{status}") }),
            );
        }
        let operation = json!({
            "operationId": action.key(),
            "summary": action.summary,
            "description": input.get("description").cloned().unwrap_or(Value::Null),
            "tags": [action.domain],
            "parameters": [
                { "$ref": "#/components/parameters/ServerId" },
                { "$ref": "#/components/parameters/AgentId" }
            ],
            "requestBody": {
                "required": true,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{}", action.input_type) } } }
            },
            "responses": responses,
            "security": [{ "bearerAuth": [] }],
            "x-agentteam-risk": action.risk.as_str(),
            "x-agentteam-result-policy": action.result_policy.as_str(),
        });
        let mut operation = operation;
        if operation["description"].is_null() {
            operation
                .as_object_mut()
                .expect("an object")
                .remove("description");
        }
        paths.insert(
            format!("{EXEC_PREFIX}/{}/{}", action.domain, action.action),
            json!({ "post": operation }),
        );
    }

    // Only what the Exec routes reach: MCP tool schemas are not part of this API.
    let mut reachable = std::collections::BTreeSet::new();
    let mut queue: Vec<String> = model
        .actions
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
    let schemas: Map<String, Value> = reachable
        .iter()
        .map(|name| (name.clone(), rewrite_refs(&model.defs[name])))
        .collect();
    let mut error_responses = Map::new();
    for (status, description) in ERROR_STATUSES {
        error_responses.insert(
            format!("Error{status}"),
            json!({
                "description": description,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{}", model.error_type) } } }
            }),
        );
    }
    let id_parameter = |name: &str, description: &str| {
        json!({
            "name": name,
            "in": "path",
            "required": true,
            "description": description,
            "schema": { "type": "string", "pattern": "^[a-z]{3}_[0-9A-Za-z]{8,64}$" }
        })
    };
    let tags: Vec<Value> = model
        .domains
        .iter()
        .map(|d| json!({ "name": d.name, "description": d.summary }))
        .collect();

    let document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "AgentTeam daemon Exec API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Built-in AgentTeam actions that a daemon-launched runtime calls with `agentteam exec <domain> <action>`. Every route authenticates the runtime's bearer credential and binds it to `{serverId}` and `{agentId}` before reading the body."
        },
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": error_responses,
            "parameters": {
                "ServerId": id_parameter("serverId", "The workspace the runtime's authorization is bound to."),
                "AgentId": id_parameter("agentId", "The agent the runtime's authorization is bound to.")
            },
            "securitySchemes": {
                "bearerAuth": { "type": "http", "scheme": "bearer", "description": "The signed process credential from `AGENTTEAM_EXEC_TOKEN_FILE`." }
            }
        }
    });
    pretty_json(&document)
}

fn rewrite_refs(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, child)| {
                    let child = match (key.as_str(), child.as_str()) {
                        ("$ref", Some(r)) => {
                            json!(r.replacen("#/$defs/", "#/components/schemas/", 1))
                        }
                        _ => rewrite_refs(child),
                    };
                    (key.clone(), child)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(rewrite_refs).collect()),
        other => other.clone(),
    }
}
