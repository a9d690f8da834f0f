//! The OpenAPI 3.1 document of the daemon's Exec route family.
//!
//! Its skeleton (info, tags, paths, operations, parameters, responses, security scheme) is built
//! with utoipa's typed OpenAPI model; the request and response schemas are then spliced into
//! `components/schemas` as raw JSON: the hoisted definition map itself with refs rewritten to
//! `#/components/schemas/<Name>`. Raw JSON Schema 2020-12 is OpenAPI 3.1's dialect, so nothing is
//! lost (utoipa's typed `Schema` would drop `const` and `$defs`).

use serde_json::{Map, Value, json};
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Ref, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApiBuilder, PathsBuilder, Required,
};

use super::model::{Action, Model};
use super::pretty_json;

/// The Exec route family prefix; `{serverId}` and `{agentId}` bind the credential.
pub const EXEC_PREFIX: &str = "/api/internal/exec/servers/{serverId}/agents/{agentId}";

/// The name of the bearer security scheme.
const BEARER: &str = "bearerAuth";

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
        "`admission_limited`, `invalid_state`, `revision_mismatch`, `idempotency_in_progress` or `catalog_mismatch`",
    ),
    ("413", "`payload_too_large`: the body exceeds 1 MiB"),
    (
        "415",
        "`unsupported_media_type`: the body is not `application/json`",
    ),
    (
        "422",
        "`idempotency_key_reused` or `result_budget_exceeded`",
    ),
    ("500", "`internal_error`, with its `incidentId`"),
    ("502", "`upstream_failed` or `outcome_unknown`"),
    ("503", "`upstream_unavailable`"),
    ("504", "`upstream_timeout`"),
];

/// The components name of an action's success envelope schema.
fn success_schema(action: &Action) -> String {
    format!("{}Success", action.rust_stem())
}

fn json_content(schema: &str) -> utoipa::openapi::Content {
    ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(schema)))
        .build()
}

/// A path parameter holding a prefixed id.
fn id_parameter(name: &str, description: &str) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[a-z]{3}_[0-9A-Za-z]{8,64}$")),
        ))
        .build()
}

fn operation(model: &Model, action: &Action) -> utoipa::openapi::path::Operation {
    let input = &model.defs[&action.input_type];
    let mut builder = OperationBuilder::new()
        .operation_id(Some(action.key()))
        .summary(Some(action.summary.clone()))
        .description(input.get("description").and_then(Value::as_str))
        .tag(action.domain.clone())
        .parameter(id_parameter(
            "serverId",
            "The workspace the runtime's authorization is bound to.",
        ))
        .parameter(id_parameter(
            "agentId",
            "The agent the runtime's authorization is bound to.",
        ))
        .request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content("application/json", json_content(&action.input_type))
                .build(),
        ))
        .response(
            "200",
            ResponseBuilder::new()
                .description("The action succeeded.")
                .content("application/json", json_content(&success_schema(action))),
        );
    for (status, _) in ERROR_STATUSES {
        builder = builder.response(
            *status,
            Ref::new(format!("#/components/responses/Error{status}")),
        );
    }
    builder
        .security(SecurityRequirement::new(BEARER, Vec::<String>::new()))
        .extensions(Some(extensions(action)))
        .build()
}

/// `x-agentteam-risk` and `x-agentteam-result-policy`; for an operation union (whose row values
/// are the most severe of its operations), also `x-agentteam-operations`: each operation's own.
fn extensions(action: &Action) -> Extensions {
    let mut values: Vec<(&str, serde_json::Value)> = vec![
        ("x-agentteam-risk", action.risk.as_str().into()),
        (
            "x-agentteam-result-policy",
            action.result_policy.as_str().into(),
        ),
    ];
    if let Some(discriminator) = &action.discriminator {
        values.push((
            "x-agentteam-operations",
            serde_json::json!({
                "discriminator": discriminator,
                "operations": action.operations.iter().map(|op| serde_json::json!({
                    "operation": op.name,
                    "risk": op.risk.as_str(),
                    "resultPolicy": op.result_policy.as_str(),
                })).collect::<Vec<_>>(),
            }),
        ));
    }
    Extensions::from_iter(values)
}

pub fn render(model: &Model) -> String {
    let mut paths = PathsBuilder::new();
    for action in &model.actions {
        paths = paths.path(
            format!("{EXEC_PREFIX}/{}/{}", action.domain, action.action),
            PathItem::new(HttpMethod::Post, operation(model, action)),
        );
    }
    let mut components = ComponentsBuilder::new().security_scheme(
        BEARER,
        SecurityScheme::Http(
            Http::builder()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The signed process credential from `AGENTTEAM_EXEC_TOKEN_FILE`.",
                ))
                .build(),
        ),
    );
    for (status, description) in ERROR_STATUSES {
        components = components.response(
            format!("Error{status}"),
            ResponseBuilder::new()
                .description(*description)
                .content("application/json", json_content(&model.error_type)),
        );
    }
    let document = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("AgentTeam daemon Exec API")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Built-in AgentTeam actions that a daemon-launched runtime calls with `agentteam exec <domain> <action>`. Every route authenticates the runtime's bearer credential and binds it to `{serverId}` and `{agentId}` before reading the body.",
                ))
                .build(),
        )
        .tags(Some(model.domains.iter().map(|domain| {
            TagBuilder::new()
                .name(domain.name.clone())
                .description(Some(domain.summary.clone()))
                .build()
        })))
        .paths(paths)
        .components(Some(components.build()))
        .build();
    let mut document = serde_json::to_value(&document).expect("an OpenAPI document serializes");
    document["components"]["schemas"] = Value::Object(schemas(model));
    pretty_json(&document)
}

/// Every definition the Exec routes reach (MCP tool schemas are not part of this API), plus each
/// action's success envelope.
fn schemas(model: &Model) -> Map<String, Value> {
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
    let mut schemas: Map<String, Value> = reachable
        .iter()
        .map(|name| (name.clone(), rewrite_refs(&model.defs[name])))
        .collect();
    for action in &model.actions {
        schemas.insert(
            success_schema(action),
            json!({
                "description": format!("The success envelope of `{}`.", action.key()),
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
    schemas
}

/// `value` with every `#/$defs/` reference pointing into `#/components/schemas/`.
pub fn rewrite_refs(value: &Value) -> Value {
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
