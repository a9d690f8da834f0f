//! App-hosted extensions (spec: `agentteam exec <domain-or-extension> <action>`): definitions in
//! the descriptor shape of built-in actions, their digest, the checks every holder applies, and
//! the pinned, verified form a runtime's catalog flattens beside the built-ins.
//!
//! A definition is one JSON document: a name, a summary, the provider protocol the server's
//! extension host speaks for it, and its actions, each with risk, result policy, continuations,
//! an example and self-contained input and output schemas. Its digest is SHA-256 over its
//! canonical JSON (RFC 8785), so every holder computes the same digest from the same content
//! however the JSON was formatted on the way.
//!
//! [`check`] is the one gate: the server applies it when an operator publishes, the daemon when it
//! pins (it trusts no definition it did not check itself), and the generator for the seeds in
//! `schema/extensions/` (through the same lint and naming rules).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::budget::Rule;
use super::error::{ActionError, ErrorCode, ErrorDetail};
use super::kinds::{ResultPolicy, Risk, collides, is_name};

#[path = "../../codegen/lint.rs"]
mod lint;

/// A definition larger than this (serialized) is refused.
pub const MAX_DEFINITION_BYTES: usize = 256 * 1024;
/// At most this many actions per extension.
pub const MAX_ACTIONS: usize = 32;

/// The provider protocols the server's extension host speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Github,
    Gitea,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Github => "github",
            Provider::Gitea => "gitea",
        }
    }
}

/// One extension definition.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Definition {
    #[serde(rename = "$comment", default)]
    pub comment: Option<String>,
    pub name: String,
    /// One line, as a domain's.
    pub summary: String,
    pub provider: Provider,
    pub actions: Vec<ExtensionAction>,
}

/// One action of an extension: a built-in descriptor's fields with its schemas inline.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionAction {
    pub action: String,
    pub summary: String,
    pub risk: Risk,
    pub result_policy: ResultPolicy,
    #[serde(default)]
    pub hint: Option<String>,
    #[serde(default)]
    pub next: Option<String>,
    pub example: Value,
    /// Self-contained JSON Schema 2020-12 (only `#…` references).
    pub input: Value,
    pub output: Value,
}

/// `sha256:<hex>` of the canonical JSON (RFC 8785) of `definition`.
pub fn digest(definition: &Value) -> String {
    let canonical =
        serde_json_canonicalizer::to_vec(definition).expect("a JSON value canonicalizes");
    format!("sha256:{}", hex::encode(Sha256::digest(canonical)))
}

/// The names an extension may not take: the built-in Exec domains, and the families of the MCP
/// tools (a tool family has one transport).
pub struct Reserved<'a> {
    pub domains: &'a [&'a str],
    pub tools: &'a [&'a str],
}

impl Reserved<'static> {
    /// The built-in domains and MCP tools of this binary.
    pub fn builtin() -> Reserved<'static> {
        static NAMES: std::sync::OnceLock<(Vec<&'static str>, Vec<&'static str>)> =
            std::sync::OnceLock::new();
        let (domains, tools) = NAMES.get_or_init(|| {
            (
                super::catalog::DOMAINS.iter().map(|d| d.name).collect(),
                super::catalog::TOOLS.iter().map(|t| t.name).collect(),
            )
        });
        Reserved { domains, tools }
    }
}

/// Checks `value` as a definition: its shape, names (not reserved), one-line summaries, the
/// read/mutation result-policy rule, schema lint, that every schema compiles, and that every
/// example is valid. Returns every problem, each naming where.
pub fn check(value: &Value, reserved: &Reserved<'_>) -> Result<Definition, Vec<String>> {
    let size = serde_json::to_vec(value).map_or(usize::MAX, |b| b.len());
    if size > MAX_DEFINITION_BYTES {
        return Err(vec![format!(
            "the definition is {size} bytes, over {MAX_DEFINITION_BYTES}"
        )]);
    }
    let definition: Definition = serde_json::from_value(value.clone()).map_err(|e| {
        vec![format!(
            "the definition does not have the extension shape: {e}"
        )]
    })?;
    let mut problems = Vec::new();
    let name = &definition.name;
    if !is_name(name) {
        problems.push(format!(
            "extension name `{name}` must match ^[a-z][a-z0-9-]*$ (at most 32)"
        ));
    }
    if reserved.domains.contains(&name.as_str()) {
        problems.push(format!("extension name `{name}` is a built-in Exec domain"));
    }
    for tool in reserved.tools {
        if collides(tool, name) {
            problems.push(format!(
                "extension name `{name}` is the family of MCP tool `{tool}`: a tool family has one transport"
            ));
        }
    }
    one_line(
        &mut problems,
        "the extension's summary",
        &definition.summary,
        true,
    );
    if definition.actions.is_empty() || definition.actions.len() > MAX_ACTIONS {
        problems.push(format!("an extension has 1 to {MAX_ACTIONS} actions"));
    }
    let mut seen = Vec::new();
    for action in &definition.actions {
        let key = format!("{name} {}", action.action);
        if !is_name(&action.action) {
            problems.push(format!(
                "action name `{}` must match ^[a-z][a-z0-9-]*$",
                action.action
            ));
        }
        if seen.contains(&action.action) {
            problems.push(format!("action `{key}` is listed twice"));
        }
        seen.push(action.action.clone());
        one_line(
            &mut problems,
            &format!("the summary of `{key}`"),
            &action.summary,
            false,
        );
        match (action.risk.is_mutation(), action.result_policy) {
            (false, ResultPolicy::Mutation) => problems.push(format!(
                "`{key}` is a `read` action with a `mutation` result policy"
            )),
            (true, policy) if policy != ResultPolicy::Mutation => problems.push(format!(
                "`{key}` has side effects, so it has the `mutation` result policy, not `{}`",
                policy.as_str()
            )),
            _ => {}
        }
        if !action.risk.is_mutation()
            && (action.hint.as_deref().is_none_or(|h| h.trim().is_empty())
                || action.next.as_deref().is_none_or(|n| n.trim().is_empty()))
        {
            problems.push(format!(
                "read action `{key}` needs `hint` and `next`: the continuation for an over-budget result"
            ));
        }
        for (side, schema) in [("input", &action.input), ("output", &action.output)] {
            for problem in lint::lint_schema(schema) {
                problems.push(format!(
                    "the {side} schema of `{key}`: {}: {}",
                    problem.pointer, problem.message
                ));
            }
            if let Some(reference) = external_ref(schema) {
                problems.push(format!(
                    "the {side} schema of `{key}` refers to `{reference}`: only `#…` references are allowed"
                ));
            }
        }
        match compile(&action.input) {
            Err(e) => problems.push(format!("the input schema of `{key}` does not compile: {e}")),
            Ok(validator) => {
                if !action.example.is_object() || !validator.is_valid(&action.example) {
                    problems.push(format!(
                        "the example of `{key}` is not valid against its input schema"
                    ));
                }
            }
        }
        if let Err(e) = compile(&action.output) {
            problems.push(format!(
                "the output schema of `{key}` does not compile: {e}"
            ));
        }
    }
    if problems.is_empty() {
        Ok(definition)
    } else {
        Err(problems)
    }
}

fn one_line(problems: &mut Vec<String>, what: &str, text: &str, sentence: bool) {
    let ok = !text.trim().is_empty()
        && !text.contains('\n')
        && text.len() <= 200
        && (sentence || !text.ends_with('.'));
    if !ok {
        problems.push(format!(
            "{what} must be one line of at most 200 characters{}",
            if sentence {
                ""
            } else {
                " without a trailing period"
            }
        ));
    }
}

/// The first `$ref` in `schema` that does not point inside it.
fn external_ref(schema: &Value) -> Option<String> {
    match schema {
        Value::Object(object) => {
            if let Some(reference) = object.get("$ref").and_then(Value::as_str)
                && !reference.starts_with('#')
            {
                return Some(reference.to_string());
            }
            object.values().find_map(external_ref)
        }
        Value::Array(items) => items.iter().find_map(external_ref),
        _ => None,
    }
}

fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// A definition as the server recorded it: its content, version, digest and catalog version.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub name: String,
    pub version: u64,
    pub digest: String,
    pub catalog_version: u64,
    pub definition: Value,
}

impl Recorded {
    /// The wire form the server serves and the daemon reads.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
            "catalogVersion": self.catalog_version,
            "definition": self.definition,
        })
    }

    pub fn from_json(value: &Value) -> Option<Recorded> {
        Some(Recorded {
            name: value.get("name")?.as_str()?.to_string(),
            version: value.get("version")?.as_u64()?,
            digest: value.get("digest")?.as_str()?.to_string(),
            catalog_version: value.get("catalogVersion")?.as_u64()?,
            definition: value.get("definition")?.clone(),
        })
    }
}

/// A verified definition: its recorded digest matched its content, and it passed [`check`]. Its
/// input and output validators are compiled once.
#[derive(Debug)]
pub struct Pinned {
    pub recorded: Recorded,
    pub definition: Definition,
    inputs: BTreeMap<String, jsonschema::Validator>,
    outputs: BTreeMap<String, jsonschema::Validator>,
    /// For a mutation whose output is one resource: the read action that takes its `<name>Id`.
    retrievals: BTreeMap<String, String>,
}

/// Why a recorded definition was not pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub name: String,
    pub version: u64,
    pub reason: String,
}

impl Pinned {
    /// Pins `recorded` if its digest is the digest of its content and the definition checks.
    pub fn verify(recorded: Recorded, reserved: &Reserved<'_>) -> Result<Pinned, Rejected> {
        let reject = |reason: String| Rejected {
            name: recorded.name.chars().take(64).collect(),
            version: recorded.version,
            reason,
        };
        let computed = digest(&recorded.definition);
        if computed != recorded.digest {
            return Err(reject(format!(
                "its recorded digest `{}` is not the digest of its content `{computed}`",
                recorded.digest.chars().take(80).collect::<String>()
            )));
        }
        let definition = check(&recorded.definition, reserved)
            .map_err(|problems| reject(problems.join("; ")))?;
        if definition.name != recorded.name {
            return Err(reject(format!(
                "it is recorded as `{}` but names itself `{}`",
                recorded.name, definition.name
            )));
        }
        let (mut inputs, mut outputs) = (BTreeMap::new(), BTreeMap::new());
        for action in &definition.actions {
            inputs.insert(
                action.action.clone(),
                compile(&action.input).map_err(&reject)?,
            );
            outputs.insert(
                action.action.clone(),
                compile(&action.output).map_err(&reject)?,
            );
        }
        let retrievals = retrievals(&definition);
        Ok(Pinned {
            recorded,
            definition,
            inputs,
            outputs,
            retrievals,
        })
    }

    pub fn name(&self) -> &str {
        &self.definition.name
    }

    pub fn action(&self, name: &str) -> Option<&ExtensionAction> {
        self.definition.actions.iter().find(|a| a.action == name)
    }

    /// Checks `input` against the pinned input schema of `action`.
    pub fn validate_input(&self, action: &str, input: &Value) -> Result<(), ActionError> {
        let Some(validator) = self.inputs.get(action) else {
            return Err(ActionError::new(
                ErrorCode::UnknownAction,
                format!("unknown action: `{} {action}`", self.name()),
            ));
        };
        validation(validator, input, self.name(), action)
    }

    /// The violations of a result against the pinned output schema of `action` (an unknown
    /// action's result breaks it at the root).
    pub fn output_violations(&self, action: &str, output: &Value) -> Vec<ErrorDetail> {
        match self.outputs.get(action) {
            Some(validator) => super::validate::collect(validator, output),
            None => vec![ErrorDetail {
                path: String::new(),
                message: format!("`{} {action}` has no output schema", self.name()),
            }],
        }
    }

    /// The budget rule of `action`.
    pub fn rule<'a>(&'a self, action: &'a ExtensionAction) -> ExtensionRule<'a> {
        ExtensionRule {
            extension: self.name(),
            action,
            retrieval: self.retrievals.get(&action.action).map(String::as_str),
        }
    }

    /// The descriptor-only entry of the runtime catalog (no schemas): what `GET …/catalog`
    /// shows beside the built-ins.
    pub fn catalog_entry(&self) -> Value {
        json!({
            "name": self.name(),
            "summary": self.definition.summary,
            "version": self.recorded.version,
            "digest": self.recorded.digest,
            "catalogVersion": self.recorded.catalog_version,
            "actions": self.definition.actions.iter().map(|a| {
                let mut row = json!({
                    "domain": self.name(),
                    "action": a.action,
                    "summary": a.summary,
                    "risk": a.risk.as_str(),
                    "resultPolicy": a.result_policy.as_str(),
                    "example": a.example,
                });
                if let Some(hint) = &a.hint { row["hint"] = json!(hint); }
                if let Some(next) = &a.next { row["next"] = json!(next); }
                row
            }).collect::<Vec<_>>(),
        })
    }
}

/// For each mutation whose output is one resource `{"<r>": {…}}`: the read action whose whole
/// required input is `<r>Id`.
fn retrievals(definition: &Definition) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for action in definition.actions.iter().filter(|a| a.risk.is_mutation()) {
        let Some(properties) = action.output.get("properties").and_then(Value::as_object) else {
            continue;
        };
        let [resource] = properties.keys().collect::<Vec<_>>()[..] else {
            continue;
        };
        let selector = format!("{resource}Id");
        let read = definition.actions.iter().find(|read| {
            !read.risk.is_mutation()
                && read
                    .input
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| p.len() == 1 && p.contains_key(&selector))
                && read.input.get("required") == Some(&json!([selector]))
        });
        if let Some(read) = read {
            out.insert(action.action.clone(), read.action.clone());
        }
    }
    out
}

/// The budget rule of one extension action.
pub struct ExtensionRule<'a> {
    extension: &'a str,
    action: &'a ExtensionAction,
    retrieval: Option<&'a str>,
}

impl Rule for ExtensionRule<'_> {
    fn name(&self) -> String {
        format!("{} {}", self.extension, self.action.action)
    }

    fn is_mutation(&self) -> bool {
        self.action.risk.is_mutation()
    }

    fn hint(&self) -> Option<&str> {
        self.action.hint.as_deref()
    }

    fn next(&self) -> Option<&str> {
        self.action.next.as_deref()
    }

    fn retrieval(&self, selector: &str, id: &str) -> Option<String> {
        let read = self.retrieval?;
        let well_formed = id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        well_formed.then(|| {
            format!(
                "agentteam exec {} {read} '{}'",
                self.extension,
                json!({ selector: id })
            )
        })
    }
}

/// An extension action's validation failure, in the shape built-ins use.
fn validation(
    validator: &jsonschema::Validator,
    input: &Value,
    extension: &str,
    action: &str,
) -> Result<(), ActionError> {
    let name = format!("{extension}.{action}");
    super::validate::refuse_input(
        super::validate::collect(validator, input),
        super::validate::Invalid::Input(&name),
        || format!("run `agentteam exec {extension} {action} --help` for the input fields"),
    )
}

/// The catalog a runtime's `agentteam exec` reads for extension actions: the launch's pinned
/// extensions, schemas included (written owner-only beside the token file at activation).
pub fn cli_catalog(pinned: &[std::sync::Arc<Pinned>]) -> Value {
    json!({
        "extensions": pinned.iter().map(|p| json!({
            "name": p.name(),
            "version": p.recorded.version,
            "digest": p.recorded.digest,
            "catalogVersion": p.recorded.catalog_version,
            "definition": p.recorded.definition,
        })).collect::<Vec<_>>(),
    })
}

/// `agentteam exec <extension> --help`.
pub fn domain_help(definition: &Definition) -> String {
    let width = definition
        .actions
        .iter()
        .map(|a| a.action.len())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "{}\n\nUsage: agentteam exec {} <action> [JSON | -]\n\nActions:\n",
        definition.summary, definition.name
    );
    for action in &definition.actions {
        out.push_str(&format!(
            "  {:width$}  {:11}  {}\n",
            action.action,
            action.risk.as_str(),
            action.summary
        ));
    }
    out.push_str(&format!(
        "\nRun `agentteam exec {} <action> --help` for an action's input and an example.\n",
        definition.name
    ));
    out
}

/// `agentteam exec <extension> <action> --help`: the same layout as a built-in action's.
pub fn action_help(definition: &Definition, action: &ExtensionAction) -> String {
    let command = format!("agentteam exec {} {}", definition.name, action.action);
    let mut out = format!("{}\n\nUsage: {command} [JSON | -]\n\n", action.summary);
    let properties = action
        .input
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = action
        .input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if properties.is_empty() {
        out.push_str("Input: {} (no fields)\n\n");
    } else {
        let mut rows: Vec<(String, bool, String, String)> = properties
            .iter()
            .map(|(name, schema)| {
                let target = resolve(&action.input, schema);
                let about = schema
                    .get("description")
                    .or_else(|| target.get("description"))
                    .and_then(Value::as_str)
                    .map(|d| {
                        let end = d.find(". ").map(|i| i + 1).unwrap_or(d.len());
                        d[..end].trim().trim_end_matches('.').to_string()
                    })
                    .unwrap_or_default();
                let ty = type_label(&action.input, target, 0);
                (name.clone(), required.contains(&name.as_str()), ty, about)
            })
            .collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let name_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let type_width = rows.iter().map(|r| r.2.len()).max().unwrap_or(0);
        out.push_str("Input fields:\n");
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
    out.push_str(&format!(
        "Schemas: {command} --input-schema | --output-schema; errors: agentteam exec --error-schema\n\n"
    ));
    let example = serde_json::to_string(&action.example).expect("a Value serializes");
    out.push_str(&format!(
        "Example:\n  {command} '{}'\n",
        example.replace('\'', r"'\''")
    ));
    out
}

/// `schema` with its local `$ref`s (`#/…` into `root`) followed, at most 16 deep (a cycle stops
/// there, at the last schema reached).
fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..16 {
        let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| reference.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        else {
            break;
        };
        schema = target;
    }
    schema
}

/// A short type label, as a built-in action's help shows it: `string`, `integer`, `open|closed`,
/// `array of string`, `object`. Nested arrays are followed 8 deep (a schema may be recursive).
fn type_label(root: &Value, schema: &Value, depth: usize) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join("|");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => match schema.get("items") {
            Some(items) if depth < 8 => {
                format!(
                    "array of {}",
                    type_label(root, resolve(root, items), depth + 1)
                )
            }
            _ => "array".to_string(),
        },
        Some(kind) => kind.to_string(),
        None if schema.get("oneOf").is_some() || schema.get("anyOf").is_some() => {
            "object".to_string()
        }
        None => "any".to_string(),
    }
}

/// A standalone schema as `--input-schema` prints it.
pub fn standalone(schema: &Value) -> String {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        object
            .entry("$schema")
            .or_insert_with(|| json!("https://json-schema.org/draft/2020-12/schema"));
    }
    serde_json::to_string_pretty(&schema).expect("a Value serializes") + "\n"
}

/// An extension definition read back from the runtime's catalog file, for the CLI: not
/// re-verified (the daemon verified it and wrote the file owner-only for this launch).
#[derive(Debug, Clone)]
pub struct Known {
    pub definition: Definition,
}

/// The extensions of the catalog file `text` (see [`cli_catalog`]).
pub fn read_cli_catalog(text: &str) -> Vec<Known> {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    value
        .get("extensions")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| serde_json::from_value(e.get("definition")?.clone()).ok())
                .map(|definition| Known { definition })
                .collect()
        })
        .unwrap_or_default()
}

impl Known {
    /// Checks `input` against `action`'s input schema (compiled for this one call).
    pub fn validate_input(
        &self,
        action: &ExtensionAction,
        input: &Value,
    ) -> Result<(), ActionError> {
        let validator = compile(&action.input).map_err(|_| {
            ActionError::new(
                ErrorCode::InternalError,
                "the extension's input schema does not compile",
            )
        })?;
        validation(&validator, input, &self.definition.name, &action.action)
    }

    /// The budget rule of `action` (for the CLI's re-projection).
    pub fn rule<'a>(&'a self, action: &'a ExtensionAction) -> ExtensionRule<'a> {
        let retrieval = retrievals(&self.definition);
        ExtensionRule {
            extension: &self.definition.name,
            action,
            retrieval: retrieval.get(&action.action).and_then(|read| {
                self.definition
                    .actions
                    .iter()
                    .find(|a| &a.action == read)
                    .map(|a| a.action.as_str())
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_over_canonical_json_whatever_the_formatting() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": [1.0, "x"], "c": {"z": 2, "y": 1e2}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"c":{"y":100,"z":2},"a":[1,"x"],"b":1}"#).unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert!(digest(&a).starts_with("sha256:") && digest(&a).len() == 7 + 64);
        let c: Value =
            serde_json::from_str(r#"{"b": 2, "a": [1, "x"], "c": {"z": 2, "y": 100}}"#).unwrap();
        assert_ne!(digest(&a), digest(&c));
    }

    /// An extension action's help shows each input's type, whether it is required and its
    /// description, its `$ref`s followed, as a built-in action's help does.
    #[test]
    fn an_extension_actions_help_follows_its_refs() {
        let seed: Definition =
            serde_json::from_str(include_str!("../../schema/extensions/github.json")).unwrap();
        let watch = seed.actions.iter().find(|a| a.action == "watch").unwrap();
        let help = action_help(&seed, watch);
        let row = |name: &str| {
            help.lines()
                .find(|line| line.trim_start().starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no row for `{name}`:\n{help}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            row("repository"),
            "repository required string The repository as `owner/name`"
        );
        assert_eq!(
            row("number"),
            "number required integer The pull request's number in its repository"
        );
        assert!(row("requestId").starts_with("requestId optional string Caller-chosen"));
        assert!(!help.contains(" any "), "{help}");
        let root = json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}});
        assert_eq!(
            type_label(&root, resolve(&root, &json!({"$ref": "#/$defs/A"})), 0),
            "any"
        );
        let list = json!({"type": "array", "items": {"$ref": "#/$defs/S"}, "$defs": {"S": {"type": "string"}}});
        assert_eq!(type_label(&list, &list, 0), "array of string");
        // An array of itself ends after 8 levels, not with the stack.
        let tree = json!({"type": "array", "items": {"$ref": "#"}});
        assert!(type_label(&tree, &tree, 0).ends_with("array of array"));
    }
}
