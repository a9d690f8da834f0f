//! The typed handler contract: `handlers.rs`, with the `ActionHandler` trait (one method per
//! action, typed input and output) and `dispatch`, the RegisterJSON adapter that turns
//! `(ActionId, validated JSON)` into one typed call.
//!
//! Adding an action to `schema/` adds a trait method, so every implementation stops compiling
//! until it handles the new action: the compiler enforces the contract.

use super::PREAMBLE;
use super::model::Model;

/// Renders `handlers.rs`; `src/contract/handlers.rs` includes it with `types`, `ActionId`,
/// `ActionResult` and `DispatchError` in scope.
pub fn render(model: &Model) -> String {
    let mut out = format!("// {PREAMBLE}\n\n");
    out.push_str(
        "/// The typed handler of every built-in action: one method per inventory row.\n\
         ///\n\
         /// Implementations receive input that already passed the descriptor's JSON Schema, so the\n\
         /// typed value is the whole validated request.\n\
         pub trait ActionHandler: Send + Sync {\n\
         \x20   /// What the transport hands to every call: the authorized caller and request metadata.\n\
         \x20   type Context: Send + Sync;\n",
    );
    for action in &model.actions {
        out.push_str(&format!(
            "    /// `{key}`: {summary}.\n    fn {method}(&self, ctx: &Self::Context, input: types::{input}) -> impl ::std::future::Future<Output = ActionResult<types::{output}>> + Send;\n",
            key = action.key(),
            summary = action.summary,
            method = action.method_name(),
            input = action.input_type,
            output = action.output_type,
        ));
    }
    out.push_str("}\n\n");

    out.push_str(
        "/// Decodes validated JSON into the action's typed input, calls its handler method, and encodes\n\
         /// the typed output.\n\
         pub async fn dispatch<H: ActionHandler>(handler: &H, ctx: &H::Context, id: ActionId, input: ::serde_json::Value) -> Result<::serde_json::Value, DispatchError> {\n\
         \x20   match id {\n",
    );
    for action in &model.actions {
        out.push_str(&format!(
            "        ActionId::{stem} => {{\n\
             \x20           let input: types::{input} = ::serde_json::from_value(input).map_err(DispatchError::Decode)?;\n\
             \x20           let output = handler.{method}(ctx, input).await.map_err(DispatchError::Action)?;\n\
             \x20           ::serde_json::to_value(output).map_err(DispatchError::Encode)\n\
             \x20       }}\n",
            stem = action.rust_stem(),
            input = action.input_type,
            method = action.method_name(),
        ));
    }
    out.push_str("    }\n}\n");
    out
}
