//! The typify step: every hoisted definition becomes one Rust type, generated from one synthetic
//! root so a shared definition (`Task`, `TaskId`) is one type everywhere.
//!
//! Only `build.rs` includes this module: it needs typify, schemars 0.8, syn 3 and prettyplease,
//! which are build dependencies.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Value, json};
use typify::{TypeSpace, TypeSpaceSettings};

use crate::codegen::{Diagnostic, Model};

/// Renders `types.rs` (formatted, without the preamble).
pub fn render(model: &Model) -> Result<String, Diagnostic> {
    let defs: serde_json::Map<String, Value> = model
        .defs
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let root: schemars::schema::RootSchema = serde_json::from_value(json!({ "$defs": defs }))
        .map_err(|e| {
            Diagnostic::new(
                "schema/",
                "",
                format!("hoisted definitions are not a schemars root: {e}"),
            )
        })?;

    let ids = id_types(model);
    let mut settings = TypeSpaceSettings::default();
    // Each id pattern is checked by its bytes, not by `regress` (src/contract/ids.rs): the type
    // is defined by the `id_types!` call appended below, in the same module.
    for id in &ids {
        settings.with_replacement(
            &id.name,
            &id.name,
            [typify::TypeSpaceImpl::FromStr].into_iter(),
        );
    }
    settings
        .with_struct_builder(false)
        .with_derive("PartialEq".to_string())
        // The same chrono value, written by a faster `Serialize` (src/contract/timestamp.rs).
        .with_replacement(
            "Timestamp",
            "super::timestamp::Timestamp",
            [
                typify::TypeSpaceImpl::FromStr,
                typify::TypeSpaceImpl::Display,
            ]
            .into_iter(),
        );
    // typify panics on some unsupported constructs; the lint rejects those first, and this turns
    // anything it missed into a build error instead of a backtrace.
    let tokens = catch_unwind(AssertUnwindSafe(|| {
        let mut space = TypeSpace::new(&settings);
        space.add_root_schema(root).map(|_| {
            (
                space.to_stream(),
                space.uses_chrono(),
                space.uses_regress(),
                space.uses_uuid(),
            )
        })
    }))
    .map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Diagnostic::new("schema/", "", format!("typify panicked: {message}"))
    })?
    .map_err(|e| Diagnostic::new("schema/", "", format!("typify rejected the schemas: {e}")))?;
    let (stream, _chrono, _regress, uuid) = tokens;
    if uuid {
        return Err(Diagnostic::new(
            "schema/",
            "",
            "`format: uuid` needs the uuid crate, which the project does not use; use a `pattern`",
        ));
    }
    let file: syn::File = syn::parse2(stream)
        .map_err(|e| Diagnostic::new("schema/", "", format!("typify emitted invalid Rust: {e}")))?;
    let mut rendered = prettyplease::unparse(&file);
    rendered.push_str("super::ids::id_types! {\n");
    for id in &ids {
        rendered.push_str(&format!(
            "    {} = ({}, {}, {}, {}, {});\n",
            id.name,
            crate::codegen::rust_str(&id.prefix),
            id.min,
            id.max,
            id.max_length,
            crate::codegen::rust_str(&id.description),
        ));
    }
    rendered.push_str("}\n");
    Ok(rendered)
}

/// A definition whose pattern is `^<prefix>[0-9A-Za-z]{<min>,<max>}$`.
struct IdType {
    name: String,
    prefix: String,
    min: usize,
    max: usize,
    max_length: u64,
    description: String,
}

/// The definitions `src/contract/ids.rs` types: a string with exactly such a pattern, a
/// `maxLength`, and nothing else but a description (any other keyword stays typify's).
fn id_types(model: &Model) -> Vec<IdType> {
    model
        .defs
        .iter()
        .filter_map(|(name, def)| {
            let def = def.as_object()?;
            let known = ["type", "pattern", "maxLength", "description"];
            if def.keys().any(|key| !known.contains(&key.as_str())) || def.get("type")? != "string"
            {
                return None;
            }
            let pattern = def.get("pattern")?.as_str()?;
            let (prefix, bounds) = pattern.strip_prefix('^')?.split_once("[0-9A-Za-z]{")?;
            let (min, max) = bounds.strip_suffix("}$")?.split_once(',')?;
            let prefix_ok = prefix.strip_suffix('_').is_some_and(|stem| {
                !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_lowercase())
            });
            let (min, max) = (min.parse().ok()?, max.parse().ok()?);
            let max_length = def.get("maxLength")?.as_u64()?;
            (prefix_ok && min <= max).then(|| IdType {
                name: crate::codegen::pascal_case(name),
                prefix: prefix.to_string(),
                min,
                max,
                max_length,
                description: def
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            })
        })
        .collect()
}
