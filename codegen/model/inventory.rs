//! The Exec half of `schema/`: the action inventory joined with each action's schema pair.
//!
//! Checks, each in its own function: domain rows, action rows (names, policy, summary,
//! example; an operation union's rows against the operation matrix), the join with
//! `schema/exec/<domain>/<action>.{input,output}.json` both ways, and the one-transport rule
//! against MCP tool families.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::loader::{Loader, SchemaPair};
use super::{
    Action, Domain, DomainOwner, INVENTORY_FILE, MCP_DIR, Operation, ResultPolicy, Risk, Subject,
    check_policy, collides, is_name, operations,
};
use crate::codegen::pascal_case;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct InventoryFile {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    domains: Vec<DomainRow>,
    actions: Vec<ActionRow>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct DomainRow {
    domain: String,
    summary: String,
    owner: DomainOwner,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ActionRow {
    domain: String,
    action: String,
    summary: String,
    /// Absent on an operation union: each operation states its own.
    #[serde(default)]
    risk: Option<Risk>,
    #[serde(default)]
    result_policy: Option<ResultPolicy>,
    #[serde(default)]
    hint: Option<String>,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    prompt_inline: bool,
    example: Value,
    /// An operation union: the input property naming the operation, and one row per operation.
    #[serde(default)]
    discriminator: Option<String>,
    #[serde(default)]
    operations: Option<Vec<OperationRow>>,
}

/// One operation of an operation-union action.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct OperationRow {
    operation: String,
    risk: Risk,
    result_policy: ResultPolicy,
    #[serde(default)]
    hint: Option<String>,
    #[serde(default)]
    next: Option<String>,
    example: Value,
}

/// Reads the inventory file.
pub(super) fn read(loader: &mut Loader<'_>) -> Option<InventoryFile> {
    let value = loader.read_json(INVENTORY_FILE)?;
    serde_json::from_value::<InventoryFile>(value)
        .map_err(|e| loader.diag(INVENTORY_FILE, "", format!("malformed inventory: {e}")))
        .ok()
}

/// Checks the inventory and joins each row with its schema pair (hoisting the schemas).
pub(super) fn join(
    loader: &mut Loader<'_>,
    inventory: &InventoryFile,
    pairs: &BTreeMap<(String, String), SchemaPair>,
    tools: &[String],
) -> (Vec<Domain>, Vec<Action>) {
    let domains = check_domains(loader, inventory);
    let names: BTreeSet<String> = domains.iter().map(|d| d.name.clone()).collect();
    let mut actions = Vec::new();
    for (index, row) in inventory.actions.iter().enumerate() {
        let owner = domains
            .iter()
            .find(|d| d.name == row.domain)
            .map_or(DomainOwner::Server, |d| d.owner);
        actions.push(join_row(loader, index, row, owner, &names, pairs));
    }
    check_rows_unique(loader, inventory);
    check_unlisted_pairs(loader, &actions, pairs);
    check_empty_domains(loader, inventory, &names);
    check_collisions(loader, tools, &names);
    (domains, actions)
}

fn check_domains(loader: &mut Loader<'_>, inventory: &InventoryFile) -> Vec<Domain> {
    let mut seen = BTreeSet::new();
    let mut domains = Vec::new();
    for row in &inventory.domains {
        if !is_name(&row.domain) {
            loader.diag(
                INVENTORY_FILE,
                "/domains",
                format!("domain name `{}` must match ^[a-z][a-z0-9-]*$", row.domain),
            );
        }
        if !seen.insert(row.domain.clone()) {
            loader.diag(
                INVENTORY_FILE,
                "/domains",
                format!("domain `{}` is listed twice", row.domain),
            );
        }
        domains.push(Domain {
            name: row.domain.clone(),
            summary: row.summary.clone(),
            owner: row.owner,
        });
    }
    domains
}

fn check_rows_unique(loader: &mut Loader<'_>, inventory: &InventoryFile) {
    let mut seen = BTreeSet::new();
    for (index, row) in inventory.actions.iter().enumerate() {
        let key = format!("{}.{}", row.domain, row.action);
        if !seen.insert(key.clone()) {
            loader.diag(
                INVENTORY_FILE,
                &format!("/actions/{index}"),
                format!("action `{key}` is listed twice"),
            );
        }
    }
}

/// One row's own checks, then its schema pair.
fn join_row(
    loader: &mut Loader<'_>,
    index: usize,
    row: &ActionRow,
    owner: DomainOwner,
    domains: &BTreeSet<String>,
    pairs: &BTreeMap<(String, String), SchemaPair>,
) -> Action {
    let pointer = format!("/actions/{index}");
    let key = format!("{}.{}", row.domain, row.action);
    if !is_name(&row.action) {
        loader.diag(
            INVENTORY_FILE,
            &pointer,
            format!("action name `{}` must match ^[a-z][a-z0-9-]*$", row.action),
        );
    }
    if !domains.contains(&row.domain) {
        loader.diag(
            INVENTORY_FILE,
            &pointer,
            format!(
                "action `{key}` names domain `{}`, which `domains` does not list",
                row.domain
            ),
        );
    }
    let (risk, result_policy, operations) = row_policy(loader, &pointer, &key, row);
    if row.summary.trim().is_empty() || row.summary.ends_with('.') || row.summary.contains('\n') {
        loader.diag(
            INVENTORY_FILE,
            &pointer,
            format!("action `{key}`: summary must be one line without a trailing period"),
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
    match pairs.get(&(row.domain.clone(), row.action.clone())) {
        Some(SchemaPair {
            input: Some(input),
            output: Some(output),
        }) => {
            for (file, type_name) in [(input, &input_type), (output, &output_type)] {
                if let Some(value) = loader.read_json(file) {
                    loader.lint(file, &value);
                    loader.hoist_local(file, &value, &stem);
                    loader.add_root(file, type_name, &value, &stem);
                }
            }
        }
        Some(pair) => {
            let missing = if pair.input.is_none() { "input" } else { "output" };
            loader.diag(
                INVENTORY_FILE,
                &pointer,
                format!(
                    "action `{key}` has no {missing} schema: add schema/exec/{}/{}.{missing}.json",
                    row.domain, row.action
                ),
            );
        }
        None => loader.diag(
            INVENTORY_FILE,
            &pointer,
            format!(
                "action `{key}` has an inventory row but no schemas: add schema/exec/{0}/{1}.input.json and schema/exec/{0}/{1}.output.json",
                row.domain, row.action
            ),
        ),
    }
    Action {
        domain: row.domain.clone(),
        action: row.action.clone(),
        summary: row.summary.clone(),
        owner,
        risk,
        result_policy,
        hint: row.hint.clone(),
        next: row.next.clone(),
        prompt_inline: row.prompt_inline,
        example: row.example.clone(),
        discriminator: row.discriminator.clone(),
        operations,
        input_type,
        output_type,
        inventory_index: index,
    }
}

/// A row's risk and result policy: its own, or (for an operation union) each operation's, checked
/// against the operation matrix. Returns the row-level summary and the operations.
fn row_policy(
    loader: &mut Loader<'_>,
    pointer: &str,
    key: &str,
    row: &ActionRow,
) -> (Risk, ResultPolicy, Vec<Operation>) {
    let union = operations::find(&row.domain, &row.action);
    let Some(rows) = &row.operations else {
        if union.is_some() {
            loader.diag(
                INVENTORY_FILE,
                pointer,
                format!("action `{key}` is in the operation matrix: its row needs `discriminator` and one `operations` row per operation"),
            );
        }
        if row.discriminator.is_some() {
            loader.diag(
                INVENTORY_FILE,
                pointer,
                format!("action `{key}` has a `discriminator` but no `operations`"),
            );
        }
        let (Some(risk), Some(policy)) = (row.risk, row.result_policy) else {
            loader.diag(
                INVENTORY_FILE,
                pointer,
                format!("action `{key}` needs `risk` and `resultPolicy`"),
            );
            return (Risk::Read, ResultPolicy::Bounded, Vec::new());
        };
        check_policy(
            loader,
            INVENTORY_FILE,
            pointer,
            Subject::Action(key),
            risk.is_mutation(),
            policy,
            [&row.hint, &row.next],
        );
        return (risk, policy, Vec::new());
    };
    if row.risk.is_some() || row.result_policy.is_some() || row.hint.is_some() || row.next.is_some()
    {
        loader.diag(
            INVENTORY_FILE,
            pointer,
            format!("action `{key}` is an operation union: `risk`, `resultPolicy`, `hint` and `next` belong to each operation, not the row"),
        );
    }
    let Some(union) = union else {
        loader.diag(
            INVENTORY_FILE,
            pointer,
            format!(
                "action `{key}` lists operations, but the operation matrix has no entry for it"
            ),
        );
        return (Risk::Read, ResultPolicy::Bounded, Vec::new());
    };
    if row.discriminator.as_deref() != Some(union.discriminator) {
        loader.diag(
            INVENTORY_FILE,
            pointer,
            format!(
                "action `{key}`: `discriminator` must be `{}`",
                union.discriminator
            ),
        );
    }
    let mut operations = Vec::new();
    for (index, op) in rows.iter().enumerate() {
        let op_pointer = format!("{pointer}/operations/{index}");
        let op_key = format!("{} {} {}", row.domain, row.action, op.operation);
        match union.is_read(&op.operation) {
            None => loader.diag(
                INVENTORY_FILE,
                &op_pointer,
                format!(
                    "action `{key}` lists operation `{}`, which the operation matrix does not have",
                    op.operation
                ),
            ),
            Some(read) if read == op.risk.is_mutation() => loader.diag(
                INVENTORY_FILE,
                &op_pointer,
                format!(
                    "operation `{op_key}` is {} in the operation matrix, but its row says `{}`",
                    if read { "a read" } else { "a side effect" },
                    op.risk.as_str()
                ),
            ),
            Some(_) => {}
        }
        check_policy(
            loader,
            INVENTORY_FILE,
            &op_pointer,
            Subject::Operation(&op_key),
            op.risk.is_mutation(),
            op.result_policy,
            [&op.hint, &op.next],
        );
        if op.example.get(union.discriminator).and_then(Value::as_str)
            != Some(op.operation.as_str())
        {
            loader.diag(
                INVENTORY_FILE,
                &op_pointer,
                format!(
                    "operation `{op_key}`: its example must be an object whose `{}` is `{}`",
                    union.discriminator, op.operation
                ),
            );
        }
        if operations
            .iter()
            .any(|o: &Operation| o.name == op.operation)
        {
            loader.diag(
                INVENTORY_FILE,
                &op_pointer,
                format!("operation `{op_key}` is listed twice"),
            );
        }
        operations.push(Operation {
            name: op.operation.clone(),
            risk: op.risk,
            result_policy: op.result_policy,
            hint: op.hint.clone(),
            next: op.next.clone(),
            example: op.example.clone(),
        });
    }
    for name in union.all() {
        if !rows.iter().any(|op| op.operation == name) {
            loader.diag(
                INVENTORY_FILE,
                pointer,
                format!("action `{key}` lacks operation `{name}` of the operation matrix"),
            );
        }
    }
    // The matrix's order: reads, then side effects.
    operations.sort_by_key(|op| union.all().position(|name| name == op.name));
    let risk = operations
        .iter()
        .map(|op| op.risk)
        .max()
        .unwrap_or(Risk::Read);
    let policy = if risk.is_mutation() {
        ResultPolicy::Mutation
    } else {
        operations
            .first()
            .map_or(ResultPolicy::Bounded, |op| op.result_policy)
    };
    (risk, policy, operations)
}

/// A schema pair without an inventory row.
fn check_unlisted_pairs(
    loader: &mut Loader<'_>,
    actions: &[Action],
    pairs: &BTreeMap<(String, String), SchemaPair>,
) {
    for ((domain, action), pair) in pairs {
        if !actions
            .iter()
            .any(|a| &a.domain == domain && &a.action == action)
        {
            let file = pair
                .input
                .as_ref()
                .or(pair.output.as_ref())
                .expect("a pair has at least one file");
            loader.diag(
                file,
                "",
                format!(
                    "action `{domain}.{action}` has schemas but no row in schema/{INVENTORY_FILE}"
                ),
            );
        }
    }
}

fn check_empty_domains(
    loader: &mut Loader<'_>,
    inventory: &InventoryFile,
    domains: &BTreeSet<String>,
) {
    for domain in domains {
        if !inventory.actions.iter().any(|row| &row.domain == domain) {
            loader.diag(
                INVENTORY_FILE,
                "/domains",
                format!("domain `{domain}` has no actions"),
            );
        }
    }
}

/// A tool family has one transport: no MCP tool is in an Exec domain's family.
fn check_collisions(loader: &mut Loader<'_>, tools: &[String], domains: &BTreeSet<String>) {
    for tool in tools {
        for domain in domains {
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
