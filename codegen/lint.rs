//! The schema style lint: the subset of JSON Schema 2020-12 that typify, jsonschema and OpenAPI
//! tooling all handle the same way.
//!
//! It walks every schema position of a file and rejects what would silently change meaning
//! downstream: keywords outside the allow-list (typify panics on `if`/`then`/`else`, external
//! refs and `allOf` with closed objects, and miscompiles `prefixItems` and `null` in `enum`), a
//! `required` name that `properties` lacks (a typo meta-validation cannot catch), and an object
//! with properties that is not closed with `additionalProperties: false`.
//!
//! It depends on `serde_json` only, so `build.rs` and the tests run the same code.

use serde_json::Value;

/// Keywords a schema node may use.
pub const ALLOWED_KEYWORDS: &[&str] = &[
    "$schema",
    "$comment",
    "$ref",
    "$defs",
    "title",
    "description",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "maxProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "oneOf",
    "default",
    "examples",
];

/// Why some notable keywords are refused, for a message that tells the author what to do.
const REFUSED: &[(&str, &str)] = &[
    (
        "if",
        "typify panics on if/then/else; split the action or use oneOf with a `kind` discriminator",
    ),
    ("then", "typify panics on if/then/else"),
    ("else", "typify panics on if/then/else"),
    (
        "allOf",
        "typify panics on allOf with closed objects; inline the properties",
    ),
    (
        "anyOf",
        "anyOf of objects is ambiguous in typify; use oneOf with a `kind` discriminator",
    ),
    ("not", "typify cannot express `not`"),
    (
        "prefixItems",
        "typify miscompiles prefixItems; use an object",
    ),
    (
        "unevaluatedProperties",
        "typify ignores it; use additionalProperties: false",
    ),
    ("unevaluatedItems", "typify ignores it"),
    ("dependentRequired", "typify ignores it"),
    ("dependentSchemas", "typify ignores it"),
    ("$dynamicRef", "typify cannot follow dynamic refs"),
    (
        "$id",
        "schemas are addressed by path; refs are rewritten at build time",
    ),
    ("patternProperties", "typify and OpenAPI tooling drop it"),
];

const TYPES: &[&str] = &[
    "object", "array", "string", "integer", "number", "boolean", "null",
];

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// JSON pointer of the offending schema node or keyword.
    pub pointer: String,
    pub message: String,
}

/// Lints a whole schema file.
pub fn lint_schema(root: &Value) -> Vec<Problem> {
    let mut problems = Vec::new();
    walk(root, "", &mut problems);
    problems
}

fn walk(node: &Value, pointer: &str, problems: &mut Vec<Problem>) {
    let mut problem = |at: String, message: String| {
        problems.push(Problem {
            pointer: at,
            message,
        })
    };
    let Some(map) = node.as_object() else {
        problem(
            pointer.to_string(),
            "a schema must be an object (boolean schemas are not used)".into(),
        );
        return;
    };

    for key in map.keys() {
        if ALLOWED_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        let why = REFUSED
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, why)| *why)
            .unwrap_or("not on the project's keyword allow-list");
        problem(
            format!("{pointer}/{}", escape(key)),
            format!("keyword `{key}` is not allowed: {why}"),
        );
    }

    if let Some(ty) = map.get("type") {
        let names: Vec<&Value> = match ty {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for name in names {
            if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                problem(format!("{pointer}/type"), format!("unknown type `{name}`"));
            }
        }
    }

    if let Some(values) = map.get("enum") {
        match values.as_array() {
            Some(items) if !items.is_empty() => {
                if items.iter().any(Value::is_null) {
                    problem(format!("{pointer}/enum"), "`null` in `enum` does not compile in typify; use `type: [\"string\", \"null\"]`".into());
                }
            }
            _ => problem(
                format!("{pointer}/enum"),
                "`enum` must be a non-empty array".into(),
            ),
        }
    }

    let properties = map.get("properties").and_then(Value::as_object);
    if let Some(required) = map.get("required") {
        match required.as_array() {
            Some(names) => {
                for name in names {
                    let known = name
                        .as_str()
                        .is_some_and(|n| properties.is_some_and(|p| p.contains_key(n)));
                    if !known {
                        problem(
                            format!("{pointer}/required"),
                            format!("required property {name} is not in `properties`"),
                        );
                    }
                }
            }
            None => problem(
                format!("{pointer}/required"),
                "`required` must be an array of names".into(),
            ),
        }
    }
    if properties.is_some() {
        if map.get("additionalProperties") != Some(&Value::Bool(false)) {
            problem(
                pointer.to_string(),
                "an object with `properties` must set `additionalProperties: false`".into(),
            );
        }
        if map.get("type").and_then(Value::as_str) != Some("object") {
            problem(
                pointer.to_string(),
                "an object with `properties` must set `type: \"object\"`".into(),
            );
        }
    }
    if let Some(name) = properties.and_then(|p| p.keys().find(|k| !is_lower_camel(k))) {
        problem(
            format!("{pointer}/properties/{}", escape(name)),
            format!("property `{name}` must be lowerCamelCase"),
        );
    }

    if map
        .get("$ref")
        .is_some_and(|reference| !reference.is_string())
    {
        problem(format!("{pointer}/$ref"), "`$ref` must be a string".into());
    }

    // Recurse into every position that holds a schema.
    for key in ["properties", "$defs"] {
        if let Some(children) = map.get(key).and_then(Value::as_object) {
            for (name, child) in children {
                walk(
                    child,
                    &format!("{pointer}/{key}/{}", escape(name)),
                    problems,
                );
            }
        }
    }
    for key in ["items"] {
        if let Some(child) = map.get(key) {
            walk(child, &format!("{pointer}/{key}"), problems);
        }
    }
    if let Some(child) = map.get("additionalProperties").filter(|v| v.is_object()) {
        walk(child, &format!("{pointer}/additionalProperties"), problems);
    }
    if let Some(variants) = map.get("oneOf") {
        match variants.as_array() {
            Some(items) if items.len() >= 2 => {
                for (index, child) in items.iter().enumerate() {
                    walk(child, &format!("{pointer}/oneOf/{index}"), problems);
                }
            }
            _ => problems.push(Problem {
                pointer: format!("{pointer}/oneOf"),
                message: "`oneOf` needs at least two schemas".into(),
            }),
        }
    }
}

/// `requestId`, `hasMore`, `mutation_applied` is refused; the spec's two snake_case metadata
/// names live in the error envelope and are allowed explicitly.
fn is_lower_camel(name: &str) -> bool {
    if matches!(name, "mutation_applied" | "mutation_receipt") {
        return true;
    }
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z')) && chars.all(|c| c.is_ascii_alphanumeric())
}

/// JSON pointer escaping (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}
