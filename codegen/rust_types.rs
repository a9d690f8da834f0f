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

    let mut settings = TypeSpaceSettings::default();
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
    Ok(prettyplease::unparse(&file))
}
