//! The closed operation matrix (spec "Result Boundaries"): the actions whose input is a union of
//! operations, and for each, which operations are reads and which have side effects.
//!
//! It is the one place the matrix is written. The inventory row of such an action lists exactly
//! these operations, each classified as here (`inventory.rs` checks it), and its input and output
//! schemas are `oneOf` unions with one variant per operation, told apart by the discriminator
//! property's `const` ([`check_schemas`]). Everything that acts on a request (idempotency, the
//! result budget, receipts, re-projection) resolves the operation's own risk from the
//! discriminator.

use serde_json::Value;

use super::loader::Loader;
use super::{Action, INVENTORY_FILE};

/// One operation-union action of the matrix.
#[derive(Debug, Clone, Copy)]
pub struct OperationUnion {
    pub domain: &'static str,
    pub action: &'static str,
    /// The input (and output) property whose `const` names the operation.
    pub discriminator: &'static str,
    pub reads: &'static [&'static str],
    pub side_effects: &'static [&'static str],
}

/// The matrix: `workflow plan`, `trigger`, `run` and `step`.
pub const OPERATION_MATRIX: &[OperationUnion] = &[
    OperationUnion {
        domain: "workflow",
        action: "plan",
        discriminator: "operation",
        reads: &["list", "show", "version", "validate"],
        side_effects: &["create", "update", "archive", "publish"],
    },
    OperationUnion {
        domain: "workflow",
        action: "trigger",
        discriminator: "operation",
        reads: &["list", "show", "validate"],
        side_effects: &["create", "update", "enable", "disable", "archive"],
    },
    OperationUnion {
        domain: "workflow",
        action: "run",
        discriminator: "operation",
        reads: &["list", "show", "logs"],
        side_effects: &["start", "cancel"],
    },
    OperationUnion {
        domain: "workflow",
        action: "step",
        discriminator: "operation",
        reads: &["list", "get"],
        side_effects: &["complete", "fail", "pause", "park"],
    },
];

impl OperationUnion {
    /// `Some(true)` for a read, `Some(false)` for a side effect, `None` for an operation the
    /// matrix does not have.
    pub fn is_read(&self, operation: &str) -> Option<bool> {
        if self.reads.contains(&operation) {
            Some(true)
        } else if self.side_effects.contains(&operation) {
            Some(false)
        } else {
            None
        }
    }

    /// Every operation, reads first.
    pub fn all(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.reads.iter().chain(self.side_effects).copied()
    }
}

/// The matrix entry of `domain action`.
pub fn find(domain: &str, action: &str) -> Option<&'static OperationUnion> {
    OPERATION_MATRIX
        .iter()
        .find(|u| u.domain == domain && u.action == action)
}

/// The variants of an operation union's hoisted root `name`: `(operation, variant)` for each
/// `oneOf` entry, resolving `$ref`s; `None` when the root is not a `oneOf`.
pub fn variants<'a>(
    defs: &'a std::collections::BTreeMap<String, Value>,
    name: &str,
    discriminator: &str,
) -> Option<Vec<(Option<String>, &'a Value)>> {
    let root = defs.get(name)?;
    let entries = root.get("oneOf")?.as_array()?;
    Some(
        entries
            .iter()
            .map(|entry| {
                let variant = resolve(defs, entry);
                let operation = variant
                    .pointer(&format!("/properties/{discriminator}/const"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                (operation, variant)
            })
            .collect(),
    )
}

fn resolve<'a>(
    defs: &'a std::collections::BTreeMap<String, Value>,
    schema: &'a Value,
) -> &'a Value {
    let mut current = schema;
    for _ in 0..16 {
        match current
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|name| defs.get(name))
        {
            Some(target) => current = target,
            None => break,
        }
    }
    current
}

/// Each operation union's input and output roots are `oneOf` unions whose variants are told apart
/// by the discriminator's `const`, one variant per matrix operation, none more, and each variant
/// requires the discriminator.
pub(super) fn check_schemas(loader: &mut Loader<'_>, actions: &[Action]) {
    for action in actions {
        let Some(union) = find(&action.domain, &action.action) else {
            continue;
        };
        let key = action.key();
        for (side, type_name) in [
            ("input", &action.input_type),
            ("output", &action.output_type),
        ] {
            let file = format!("exec/{}/{}.{side}.json", action.domain, action.action);
            // Owned: the checks below report through `loader`, which owns `defs`.
            let found: Option<Vec<(Option<String>, Value)>> =
                variants(&loader.defs, type_name, union.discriminator).map(|found| {
                    found
                        .into_iter()
                        .map(|(operation, variant)| (operation, variant.clone()))
                        .collect()
                });
            let Some(found) = found else {
                if loader.defs.contains_key(type_name.as_str()) {
                    loader.diag(
                        &file,
                        "",
                        format!(
                            "the {side} of `{key}` must be a `oneOf` with one variant per operation"
                        ),
                    );
                }
                continue;
            };
            let mut seen = Vec::new();
            for (index, (operation, variant)) in found.iter().enumerate() {
                let pointer = format!("/oneOf/{index}");
                let Some(operation) = operation else {
                    loader.diag(
                        &file,
                        &pointer,
                        format!(
                            "every {side} variant of `{key}` names its operation with `properties.{}.const`",
                            union.discriminator
                        ),
                    );
                    continue;
                };
                if union.is_read(operation).is_none() {
                    loader.diag(
                        &file,
                        &pointer,
                        format!("the {side} of `{key}` has a variant for operation `{operation}`, which the operation matrix does not have"),
                    );
                }
                let required = variant
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|v| v == union.discriminator));
                if !required {
                    loader.diag(
                        &file,
                        &pointer,
                        format!(
                            "the {side} variant `{operation}` of `{key}` must require `{}`",
                            union.discriminator
                        ),
                    );
                }
                if seen.contains(operation) {
                    loader.diag(
                        &file,
                        &pointer,
                        format!(
                            "the {side} of `{key}` has two variants for operation `{operation}`"
                        ),
                    );
                }
                seen.push(operation.clone());
            }
            for name in union.all() {
                if !seen.iter().any(|s| s == name) {
                    loader.diag(
                        &file,
                        "",
                        format!("the {side} of `{key}` lacks a variant for operation `{name}` of the operation matrix"),
                    );
                }
            }
        }
    }
    // A matrix entry without an inventory row is a contract the build cannot keep.
    for union in OPERATION_MATRIX {
        if !actions
            .iter()
            .any(|a| a.domain == union.domain && a.action == union.action)
        {
            loader.diag(
                INVENTORY_FILE,
                "/actions",
                format!(
                    "the operation matrix has `{}.{}`, which has no inventory row",
                    union.domain, union.action
                ),
            );
        }
    }
}
