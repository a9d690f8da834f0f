//! The generated typed handler traits and their RegisterJSON adapters: `ActionHandler` +
//! `dispatch` for Exec actions, `ServerToolHandler` + `dispatch_tool` for server-owned MCP tools.
//!
//! A server tool's handler answers with a [`Written`] result: its typed output, or the JSON text
//! of one that the owner wrote directly (a page of messages written from its rows, without the
//! typed values in between).

use super::catalog::{ActionId, HumanActionId, ToolId};
use super::error::{ActionError, ActionResult, DispatchError, ErrorCode};
use super::types;

include!(concat!(env!("OUT_DIR"), "/handlers.rs"));

/// A server tool's result as its handler hands it to the adapter: its typed output, or the JSON
/// text of one (built only by [`Written::text`]).
#[derive(Debug)]
pub struct Written<T>(Form<T>);

#[derive(Debug)]
enum Form<T> {
    /// The typed output, serialized by the adapter.
    Typed(T),
    /// The JSON text serializing a `T` gives, written by the owner.
    Text(String),
}

impl<T> From<T> for Written<T> {
    fn from(typed: T) -> Written<T> {
        Written(Form::Typed(typed))
    }
}

impl<T: ::serde::Serialize + ::serde::de::DeserializeOwned> Written<T> {
    /// `text`, which must be byte for byte what serializing a `T` gives: the owner's promise.
    /// Debug builds (every test) hold it: the text is read back as a `T`, whose own checks run,
    /// and written again, and the two texts must be equal.
    pub fn text(text: String) -> Result<Written<T>, ::serde_json::Error> {
        if cfg!(debug_assertions) {
            let typed: T = ::serde_json::from_str(&text)?;
            let again = ::serde_json::to_string(&typed)?;
            assert_eq!(
                again, text,
                "a written result differs from its typed serialization"
            );
        }
        Ok(Written(Form::Text(text)))
    }

    /// The result as JSON text.
    pub fn into_text(self) -> Result<String, ::serde_json::Error> {
        match self.0 {
            Form::Typed(typed) => ::serde_json::to_string(&typed),
            Form::Text(text) => Ok(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Written;
    use crate::contract::types::Reaction;

    const REACTION: &str = r#"{"count":2,"emoji":"👍","mine":true}"#;

    #[test]
    fn a_written_text_is_sent_as_written_and_equals_the_typed_form() {
        let typed: Reaction = serde_json::from_str(REACTION).unwrap();
        let written = Written::<Reaction>::text(REACTION.to_string()).unwrap();
        assert_eq!(written.into_text().unwrap(), REACTION);
        assert_eq!(Written::from(typed).into_text().unwrap(), REACTION);
    }

    #[test]
    fn a_text_the_type_refuses_is_an_error() {
        // The emoji's pattern refuses a space.
        let refused = r#"{"count":2,"emoji":"a b","mine":true}"#;
        assert!(Written::<Reaction>::text(refused.to_string()).is_err());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "differs from its typed serialization")]
    fn a_text_in_another_form_than_the_typed_one_panics_in_debug_builds() {
        // The same value, members in another order.
        let reordered = r#"{"mine":true,"count":2,"emoji":"👍"}"#;
        let _ = Written::<Reaction>::text(reordered.to_string());
    }
}
