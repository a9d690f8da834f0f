//! The descriptor catalog: `catalog.rs` (the static `ActionId`, `DOMAINS`, `ACTIONS`, help texts
//! and standalone schemas that `src/contract/catalog.rs` includes) and `catalog.json` (the same
//! index for programs, printed by `agentteam catalog --json`).

use serde_json::{Value, json};

use super::model::{Action, Model, Operation, Risk, operations};
use super::{PREAMBLE, pretty_json, rust_str, text};

/// The Rust half of the catalog. Types it names (`ActionDescriptor`, `DomainDescriptor`, `Risk`,
/// `ResultPolicy`) are hand-written in `src/contract/catalog.rs`, which includes this file.
pub fn render_rust(model: &Model) -> String {
    let mut out = format!("// {PREAMBLE}\n\n");

    out.push_str("/// Every built-in action; `ACTIONS[id as usize]` is its descriptor.\n");
    out.push_str("#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub enum ActionId {\n");
    for action in &model.actions {
        out.push_str(&format!(
            "    /// `{}`: {}.\n    {},\n",
            action.key(),
            action.summary,
            action.rust_stem()
        ));
    }
    out.push_str("}\n\n");

    out.push_str("impl ActionId {\n    /// Every action, in catalog order.\n    pub const ALL: &[ActionId] = &[\n");
    for action in &model.actions {
        out.push_str(&format!("        ActionId::{},\n", action.rust_stem()));
    }
    out.push_str("    ];\n}\n\n");

    out.push_str(
        "/// Every Exec domain, sorted by name.\npub static DOMAINS: &[DomainDescriptor] = &[\n",
    );
    for domain in &model.domains {
        out.push_str(&format!(
            "    DomainDescriptor {{ name: {}, summary: {}, owner: DomainOwner::{}, help: {} }},\n",
            rust_str(&domain.name),
            rust_str(&domain.summary),
            super::pascal_case(domain.owner.as_str()),
            rust_str(&text::domain_help(model, domain)),
        ));
    }
    out.push_str("];\n\n");

    out.push_str("/// Every built-in action, sorted by domain then action.\npub static ACTIONS: &[ActionDescriptor] = &[\n");
    for action in &model.actions {
        let option = |value: &Option<String>| {
            value
                .as_deref()
                .map(|v| format!("Some({})", rust_str(v)))
                .unwrap_or_else(|| "None".into())
        };
        let operations: Vec<String> = action
            .operations
            .iter()
            .map(|op| {
                format!(
                    "OperationDescriptor {{ name: {name}, risk: Risk::{risk}, result_policy: ResultPolicy::{policy}, hint: {hint}, next: {next}, example: {example}, retrieval: {retrieval} }}",
                    name = rust_str(&op.name),
                    risk = super::pascal_case(op.risk.as_str()),
                    policy = super::pascal_case(op.result_policy.as_str()),
                    hint = option(&op.hint),
                    next = option(&op.next),
                    example = rust_str(&serde_json::to_string(&op.example).expect("a Value always serializes")),
                    retrieval = operation_retrieval(model, action, op)
                        .map(|read| format!("Some(Retrieval {{ action: ActionId::{}, operation: Some({}) }})", action.rust_stem(), rust_str(read)))
                        .unwrap_or_else(|| "None".into()),
                )
            })
            .collect();
        out.push_str(&format!(
            "    ActionDescriptor {{ id: ActionId::{stem}, domain: {domain}, action: {name}, summary: {summary}, owner: DomainOwner::{owner}, risk: Risk::{risk}, \
             result_policy: ResultPolicy::{policy}, hint: {hint}, next: {next}, prompt_inline: {inline}, example: {example}, \
             input_type: {input_type}, output_type: {output_type}, input_properties: &[{properties}], retrieval: {retrieval}, \
             discriminator: {discriminator}, operations: &[{operations}], input_schema: {input}, output_schema: {output}, help: {help} }},\n",
            stem = action.rust_stem(),
            domain = rust_str(&action.domain),
            name = rust_str(&action.action),
            summary = rust_str(&action.summary),
            owner = super::pascal_case(action.owner.as_str()),
            risk = super::pascal_case(action.risk.as_str()),
            policy = super::pascal_case(action.result_policy.as_str()),
            hint = option(&action.hint),
            next = option(&action.next),
            inline = action.prompt_inline,
            example = rust_str(&serde_json::to_string(&action.example).expect("a Value always serializes")),
            input_type = rust_str(&action.input_type),
            output_type = rust_str(&action.output_type),
            properties = input_properties(model, &action.input_type)
                .iter()
                .map(|name| rust_str(name))
                .collect::<Vec<_>>()
                .join(", "),
            retrieval = retrieval(model, action)
                .map(|read| format!("Some(Retrieval {{ action: ActionId::{}, operation: None }})", read.rust_stem()))
                .unwrap_or_else(|| "None".into()),
            discriminator = option(&action.discriminator),
            operations = operations.join(", "),
            input = rust_str(&pretty_json(&model.standalone(&action.input_type))),
            output = rust_str(&pretty_json(&model.standalone(&action.output_type))),
            help = rust_str(&text::action_help(model, action)),
        ));
    }
    out.push_str("];\n\n");

    out.push_str(&format!(
        "/// `agentteam exec --help`.\npub const ROOT_HELP: &str = {};\n\n",
        rust_str(&text::root_help(model))
    ));
    out.push_str(&format!(
        "/// The shared error envelope schema (`agentteam exec --error-schema`).\npub const ERROR_SCHEMA: &str = {};\n",
        rust_str(&pretty_json(&model.standalone(&model.error_type)))
    ));
    out
}

/// The top-level property names of the input root `type_name`, sorted.
fn input_properties(model: &Model, type_name: &str) -> Vec<String> {
    model
        .resolve(&model.defs[type_name])
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// The read action that returns what the mutation `action` changed: `action`'s output is one
/// resource object `{"<resource>": {…}}`, and the read is the action of the same domain whose
/// whole input is the required `<resource>Id`.
fn retrieval<'a>(model: &'a Model, action: &Action) -> Option<&'a Action> {
    if action.risk == Risk::Read || !action.operations.is_empty() {
        return None;
    }
    let output = model.resolve(&model.defs[&action.output_type]);
    let properties = output.get("properties")?.as_object()?;
    let (resource, _) = properties.iter().next().filter(|_| properties.len() == 1)?;
    let selector = format!("{resource}Id");
    model.actions.iter().find(|read| {
        read.domain == action.domain
            && read.risk == Risk::Read
            && input_properties(model, &read.input_type) == [selector.clone()]
            && model.resolve(&model.defs[&read.input_type])["required"]
                == serde_json::json!([selector])
    })
}

/// The read operation of the same operation union that returns what the side effect `op`
/// changed: `op`'s output variant holds one resource `{"<resource>": {…}}` beside the
/// discriminator, and the read is the operation whose whole input (beside the discriminator) is
/// the required `<resource>Id`.
fn operation_retrieval<'a>(model: &Model, action: &'a Action, op: &Operation) -> Option<&'a str> {
    let discriminator = action.discriminator.as_deref()?;
    if !op.risk.is_mutation() {
        return None;
    }
    let outputs = operations::variants(&model.defs, &action.output_type, discriminator)?;
    let (_, output) = outputs
        .iter()
        .find(|(name, _)| name.as_deref() == Some(op.name.as_str()))?;
    let resources: Vec<&String> = output
        .get("properties")?
        .as_object()?
        .keys()
        .filter(|k| *k != discriminator)
        .collect();
    let [resource] = resources.as_slice() else {
        return None;
    };
    let selector = format!("{resource}Id");
    let inputs = operations::variants(&model.defs, &action.input_type, discriminator)?;
    action.operations.iter().find_map(|read| {
        if read.risk.is_mutation() {
            return None;
        }
        let (_, input) = inputs
            .iter()
            .find(|(name, _)| name.as_deref() == Some(read.name.as_str()))?;
        let mut fields: Vec<&String> = input.get("properties")?.as_object()?.keys().collect();
        fields.retain(|k| *k != discriminator);
        let required = input.get("required")?.as_array()?;
        (fields == [&selector] && required.iter().any(|r| r == &serde_json::json!(selector)))
            .then_some(read.name.as_str())
    })
}

/// `catalog.json`: every domain and action with its risk, result policy and example.
pub fn render_json(model: &Model) -> String {
    let domains: Vec<Value> = model
        .domains
        .iter()
        .map(|d| json!({ "domain": d.name, "summary": d.summary, "owner": d.owner.as_str() }))
        .collect();
    let actions: Vec<Value> = model
        .actions
        .iter()
        .map(|a| {
            let mut row = json!({
                "domain": a.domain,
                "action": a.action,
                "summary": a.summary,
                "risk": a.risk.as_str(),
                "resultPolicy": a.result_policy.as_str(),
                "promptInline": a.prompt_inline,
                "example": a.example,
            });
            if let Some(hint) = &a.hint {
                row["hint"] = json!(hint);
            }
            if let Some(next) = &a.next {
                row["next"] = json!(next);
            }
            if let Some(discriminator) = &a.discriminator {
                row["discriminator"] = json!(discriminator);
                row["operations"] = a
                    .operations
                    .iter()
                    .map(|op| {
                        let mut row = json!({
                            "operation": op.name,
                            "risk": op.risk.as_str(),
                            "resultPolicy": op.result_policy.as_str(),
                            "example": op.example,
                        });
                        if let Some(hint) = &op.hint {
                            row["hint"] = json!(hint);
                        }
                        if let Some(next) = &op.next {
                            row["next"] = json!(next);
                        }
                        row
                    })
                    .collect();
            }
            row
        })
        .collect();
    pretty_json(&json!({ "domains": domains, "actions": actions }))
}
