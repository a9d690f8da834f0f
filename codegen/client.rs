//! The typed client of the server's runtime action API: `client.rs`, an `ActionHandler` impl for
//! `ServerClient` whose every method forwards its typed input to the matching server route.
//!
//! The transport (`ServerClient::call`) is hand-written in `src/client/`; this file only binds
//! each action to it, so the daemon reaches every server action through the same typed trait the
//! server implements.

use super::PREAMBLE;
use super::model::Model;

/// Renders `client.rs`; `src/client/mod.rs` includes it with `types`, `ActionId`, `ActionResult`,
/// `ActionHandler`, `CallContext` and `ServerClient` in scope.
pub fn render(model: &Model) -> String {
    let mut out = format!("// {PREAMBLE}\n\n");
    out.push_str("impl ActionHandler for ServerClient {\n    type Context = CallContext;\n\n");
    for action in model
        .actions
        .iter()
        .filter(|a| a.owner == super::model::DomainOwner::Server)
    {
        out.push_str(&format!(
            "    async fn {method}(&self, ctx: &CallContext, input: types::{input}) -> ActionResult<types::{output}> {{\n        self.call(ctx, ActionId::{stem}, &input).await\n    }}\n",
            method = action.method_name(),
            input = action.input_type,
            output = action.output_type,
            stem = action.rust_stem(),
        ));
    }
    out.push_str("}\n");
    out
}
