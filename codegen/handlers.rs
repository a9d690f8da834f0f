//! The typed handler contract: `handlers.rs`, with one handler trait per domain owner (one method
//! per action, typed input and output) and its dispatcher, the RegisterJSON adapter that turns
//! `(ActionId, validated JSON)` into one typed call.
//!
//! - `ActionHandler` + `dispatch`: the actions of server-owned domains (the reference server
//!   implements it; the daemon's `ServerClient` implements it over HTTP);
//! - `DaemonActionHandler` + `dispatch_daemon`: the actions of daemon-owned domains (the daemon's
//!   local owners implement it).
//!
//! Adding an action to `schema/` adds a trait method, so every implementation stops compiling
//! until it handles the new action: the compiler enforces the contract, naming the missing method.

use super::PREAMBLE;
use super::model::{Action, DomainOwner, Model};

/// Renders `handlers.rs`; `src/contract/handlers.rs` includes it with `types`, `ActionId`,
/// `ActionResult` and `DispatchError` in scope.
pub fn render(model: &Model) -> String {
    let mut out = format!("// {PREAMBLE}\n\n");
    let owned = |owner: DomainOwner| -> Vec<&Action> {
        model.actions.iter().filter(|a| a.owner == owner).collect()
    };
    render_trait(
        &mut out,
        "ActionHandler",
        "The typed handler of every action of a server-owned domain: one method per inventory row.",
        &owned(DomainOwner::Server),
    );
    render_dispatch(
        &mut out,
        "dispatch",
        "ActionHandler",
        &owned(DomainOwner::Server),
    );
    render_trait(
        &mut out,
        "DaemonActionHandler",
        "The typed handler of every action of a daemon-owned domain: one method per inventory row.",
        &owned(DomainOwner::Daemon),
    );
    render_dispatch(
        &mut out,
        "dispatch_daemon",
        "DaemonActionHandler",
        &owned(DomainOwner::Daemon),
    );
    out
}

fn render_trait(out: &mut String, name: &str, doc: &str, actions: &[&Action]) {
    out.push_str(&format!(
        "/// {doc}\n\
         ///\n\
         /// Implementations receive input that already passed the descriptor's JSON Schema, so the\n\
         /// typed value is the whole validated request.\n\
         pub trait {name}: Send + Sync {{\n\
         \x20   /// What the transport hands to every call: the authorized caller and request metadata.\n\
         \x20   type Context: Send + Sync;\n"
    ));
    for action in actions {
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
}

fn render_dispatch(out: &mut String, function: &str, handler: &str, actions: &[&Action]) {
    out.push_str(&format!(
        "/// Decodes validated JSON into the action's typed input, calls its `{handler}` method, and\n\
         /// encodes the typed output straight to JSON text (no `Value` tree in between). An action of another owner is `DispatchError::NotOwned`.\n\
         /// Each action's future is boxed on its own: inline, every call's future would be as large as the largest action's,\n\
         /// and it is moved (copied whole) on its way into the router's box.\n\
         pub async fn {function}<H: {handler}>(handler: &H, ctx: &H::Context, id: ActionId, input: ::serde_json::Value) -> Result<Box<::serde_json::value::RawValue>, DispatchError> {{\n\
         \x20   #[allow(unreachable_patterns, unused_variables)]\n\
         \x20   match id {{\n"
    ));
    for action in actions {
        out.push_str(&format!(
            "        ActionId::{stem} => ::std::boxed::Box::pin(async {{\n\
             \x20           let input: types::{input} = ::serde_json::from_value(input).map_err(DispatchError::Decode)?;\n\
             \x20           let output = handler.{method}(ctx, input).await.map_err(DispatchError::Action)?;\n\
             \x20           ::serde_json::value::to_raw_value(&output).map_err(DispatchError::Encode)\n\
             \x20       }}).await,\n",
            stem = action.rust_stem(),
            input = action.input_type,
            method = action.method_name(),
        ));
    }
    out.push_str("        other => Err(DispatchError::NotOwned(other)),\n    }\n}\n\n");
}
