//! Human and model text rendered from the model: the `agentteam exec` help hierarchy (root,
//! domain, action) and the Dispatcher prompt summary.
//!
//! Every word here comes from `schema/` (summaries, descriptions, examples); the fixed sentences
//! describe the transport, which is the same for every action.

use serde_json::Value;

use super::model::{Action, Domain, Model, operations};

/// The usage line every help page shares.
const INPUT_FORMS: &str = "[JSON | -]";

/// `agentteam exec --help`.
pub fn root_help(model: &Model) -> String {
    let width = model
        .domains
        .iter()
        .map(|d| d.name.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    out.push_str(
        "Run a built-in AgentTeam action through the daemon that launched this runtime\n\n",
    );
    out.push_str(&format!(
        "Usage: agentteam exec <domain> <action> {INPUT_FORMS}\n"
    ));
    out.push_str(
        "       agentteam exec <domain> <action> --help | --input-schema | --output-schema\n",
    );
    out.push_str("       agentteam exec --error-schema\n\n");
    out.push_str("Domains:\n");
    for domain in &model.domains {
        out.push_str(&format!("  {:width$}  {}\n", domain.name, domain.summary));
    }
    out.push_str("\nInput: one JSON value inline, or `-` to read it from stdin; an action whose input accepts `{}` may omit it.\n");
    out.push_str("Output: one JSON envelope on stdout, {\"ok\":true,\"data\":...} or {\"ok\":false,\"error\":{...}}.\n");
    out.push_str(
        "Exit status: 0 success, 1 the action reported an error, 2 usage or transport error.\n\n",
    );
    out.push_str("Run `agentteam exec <domain> --help` to list a domain's actions.\n");
    out
}

/// `agentteam exec <domain> --help`.
pub fn domain_help(model: &Model, domain: &Domain) -> String {
    let actions: Vec<&Action> = model
        .actions
        .iter()
        .filter(|a| a.domain == domain.name)
        .collect();
    let width = actions.iter().map(|a| a.action.len()).max().unwrap_or(0);
    let mut out = String::new();
    out.push_str(&format!("{}\n\n", domain.summary));
    out.push_str(&format!(
        "Usage: agentteam exec {} <action> {INPUT_FORMS}\n\n",
        domain.name
    ));
    out.push_str("Actions:\n");
    for action in actions {
        if action.operations.is_empty() {
            out.push_str(&format!(
                "  {:width$}  {:11}  {}\n",
                action.action,
                action.risk.as_str(),
                action.summary
            ));
            continue;
        }
        out.push_str(&format!(
            "  {:width$}  {:11}  {}\n",
            action.action, "operations", action.summary
        ));
        let names = |read: bool| {
            action
                .operations
                .iter()
                .filter(|op| op.risk.is_mutation() != read)
                .map(|op| op.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "  {:width$}  {:11}  reads: {}; side effects: {}\n",
            "",
            "",
            names(true),
            names(false)
        ));
    }
    out.push_str(&format!(
        "\nRun `agentteam exec {} <action> --help` for an action's input and an example.\n",
        domain.name
    ));
    out
}

/// `agentteam exec <domain> <action> --help`: concise usage, the input fields and one canonical
/// example (for an operation union: each operation's risk, policy and fields).
pub fn action_help(model: &Model, action: &Action) -> String {
    if !action.operations.is_empty() {
        return operations_help(model, action);
    }
    let command = format!("agentteam exec {} {}", action.domain, action.action);
    let mut out = String::new();
    out.push_str(&format!("{}\n\n", action.summary));
    out.push_str(&format!("Usage: {command} {INPUT_FORMS}\n\n"));

    let input = model.resolve(&model.defs[&action.input_type]);
    let rows = field_rows(model, input);
    if rows.is_empty() {
        out.push_str("Input: {} (no fields)\n\n");
    } else {
        out.push_str("Input fields:\n");
        let name_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let type_width = rows.iter().map(|r| r.2.len()).max().unwrap_or(0);
        for (name, required, ty, about) in &rows {
            let flag = if *required { "required" } else { "optional" };
            let row = format!("  {name:name_width$}  {flag}  {ty:type_width$}  {about}");
            out.push_str(row.trim_end());
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "Risk: {}; over-budget results: {}\n",
        action.risk.as_str(),
        action.result_policy.as_str()
    ));
    out.push_str(&format!("Schemas: {command} --input-schema | --output-schema; errors: agentteam exec --error-schema\n\n"));
    out.push_str("Example:\n");
    out.push_str(&format!("  {}\n", example_command(action)));
    out
}

/// The help of an operation union: one row per operation with its risk, policy and fields, then
/// the action's one canonical example (the spec's help shows one per action).
fn operations_help(model: &Model, action: &Action) -> String {
    let command = format!("agentteam exec {} {}", action.domain, action.action);
    let discriminator = action.discriminator.as_deref().unwrap_or("operation");
    let variants =
        operations::variants(&model.defs, &action.input_type, discriminator).unwrap_or_default();
    let mut out = String::new();
    out.push_str(&format!("{}\n\n", action.summary));
    out.push_str(&format!("Usage: {command} {INPUT_FORMS}\n\n"));
    out.push_str(&format!("Operations (chosen by `{discriminator}`):\n"));
    let name_width = action
        .operations
        .iter()
        .map(|op| op.name.len())
        .max()
        .unwrap_or(0);
    for op in &action.operations {
        let fields = variants
            .iter()
            .find(|(name, _)| name.as_deref() == Some(op.name.as_str()))
            .map(|(_, variant)| {
                let rows = field_rows(model, variant);
                let list = |required: bool| {
                    rows.iter()
                        .filter(|row| row.1 == required && row.0 != discriminator)
                        .map(|row| row.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let (required, optional) = (list(true), list(false));
                match (required.is_empty(), optional.is_empty()) {
                    (true, true) => "no fields".to_string(),
                    (false, true) => format!("required: {required}"),
                    (true, false) => format!("optional: {optional}"),
                    (false, false) => format!("required: {required}; optional: {optional}"),
                }
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "  {:name_width$}  {:11}  {:8}  {fields}\n",
            op.name,
            op.risk.as_str(),
            op.result_policy.as_str()
        ));
    }
    out.push('\n');
    out.push_str(&format!(
        "Schemas: {command} --input-schema | --output-schema; errors: agentteam exec --error-schema\n\n"
    ));
    out.push_str("Example:\n");
    out.push_str(&format!("  {}\n", example_command(action)));
    out
}

/// The canonical example as a shell command line.
pub fn example_command(action: &Action) -> String {
    command_line(action, &action.example)
}

fn command_line(action: &Action, example: &Value) -> String {
    let json = serde_json::to_string(example).expect("a Value always serializes");
    format!(
        "agentteam exec {} {} {}",
        action.domain,
        action.action,
        shell_quote(&json)
    )
}

/// The Dispatcher prompt summary: a mixed index that points to the help hierarchy instead of
/// listing every action's input, with the canonical examples of `promptInline` rows inline.
pub fn prompt_summary(model: &Model) -> String {
    let mut out = String::new();
    out.push_str("## AgentTeam Exec\n\n");
    out.push_str("Built-in AgentTeam actions run through your command tool as `agentteam exec <domain> <action> '<JSON>'` (or `-` to pass the JSON on stdin).\n");
    out.push_str("Each call prints one JSON envelope: `{\"ok\":true,\"data\":...}` or `{\"ok\":false,\"error\":{\"code\",\"message\",\"hint\",\"next\"}}`; follow `next` when it is present.\n");
    out.push_str("Locators are explicit: copy ids from the messages you were sent and from earlier results; nothing is filled in for you.\n\n");
    out.push_str("Find the action and its input through help instead of guessing:\n");
    out.push_str("- `agentteam exec --help` lists the domains;\n");
    out.push_str("- `agentteam exec <domain> --help` lists a domain's actions;\n");
    out.push_str("- `agentteam exec <domain> <action> --help` shows the input fields and one example; `--input-schema` prints the full schema.\n\n");
    out.push_str("Domains:\n");
    for domain in &model.domains {
        let names: Vec<&str> = model
            .actions
            .iter()
            .filter(|a| a.domain == domain.name)
            .map(|a| a.action.as_str())
            .collect();
        out.push_str(&format!(
            "- `{}`: {} Actions: {}.\n",
            domain.name,
            domain.summary,
            names.join(", ")
        ));
    }
    // Inline examples follow the inventory's row order, which tells the lifecycle's story.
    let mut inline: Vec<&Action> = model.actions.iter().filter(|a| a.prompt_inline).collect();
    inline.sort_by_key(|a| a.inventory_index);
    let mut current_domain = "";
    for action in inline {
        if action.domain != current_domain {
            current_domain = &action.domain;
            out.push_str(&format!("\nCommon `{current_domain}` calls:\n\n"));
        }
        out.push_str(&format!("    {}\n", example_command(action)));
    }
    out
}

/// One row per top-level input property: name, required, type, first sentence of its description.
fn field_rows(model: &Model, input: &Value) -> Vec<(String, bool, String, String)> {
    let Some(properties) = input.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut rows: Vec<(String, bool, String, String)> = properties
        .iter()
        .map(|(name, schema)| {
            let target = model.resolve(schema);
            let about = schema
                .get("description")
                .or_else(|| target.get("description"))
                .and_then(Value::as_str)
                .map(first_sentence)
                .unwrap_or_default();
            (
                name.clone(),
                required.contains(&name.as_str()),
                type_label(model, target),
                about,
            )
        })
        .collect();
    // Required fields first, then alphabetical: the order a reader fills them in.
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    rows
}

/// A short type label: `string`, `integer`, `open|claimed`, `array of open|claimed`, `object`.
fn type_label(model: &Model, schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect::<Vec<_>>()
            .join("|");
    }
    if schema.get("oneOf").is_some() {
        let kinds: Vec<String> = schema["oneOf"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|variant| {
                model
                    .resolve(variant)
                    .pointer("/properties/kind/const")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        return if kinds.is_empty() {
            "object".to_string()
        } else {
            format!("object, kind {}", kinds.join("|"))
        };
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => {
            let items = schema
                .get("items")
                .map(|i| model.resolve(i))
                .map(|i| type_label(model, i))
                .unwrap_or_else(|| "any".into());
            format!("array of {items}")
        }
        Some(ty) => ty.to_string(),
        None => "any".to_string(),
    }
}

/// The first sentence of a description: up to the first `. ` or the end, without the period.
fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map(|i| i + 1).unwrap_or(text.len());
    text[..end].trim().trim_end_matches('.').to_string()
}

/// POSIX single-quoting.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
