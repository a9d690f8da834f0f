//! The generated typed handler traits and their RegisterJSON adapters: `ActionHandler` +
//! `dispatch` for Exec actions, `ServerToolHandler` + `dispatch_tool` for server-owned MCP tools.
//!
//! A server tool's handler answers with a [`Written`] result: its typed output, or the JSON text
//! of one that the owner wrote directly (a page of messages written from its rows, without the
//! typed values in between).

use super::catalog::{ActionId, ToolId};
use super::error::{ActionResult, DispatchError};
use super::types;

include!(concat!(env!("OUT_DIR"), "/handlers.rs"));

/// A server tool's result as its handler hands it to the adapter.
#[derive(Debug)]
pub enum Written<T> {
    /// The typed output, serialized by the adapter.
    Typed(T),
    /// The JSON text serializing a `T` gives, written by the owner (built only by
    /// [`Written::text`]).
    Text(String, ::std::marker::PhantomData<T>),
}

impl<T> From<T> for Written<T> {
    fn from(typed: T) -> Written<T> {
        Written::Typed(typed)
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
        Ok(Written::Text(text, ::std::marker::PhantomData))
    }

    /// The result as JSON text.
    pub fn into_text(self) -> Result<String, ::serde_json::Error> {
        match self {
            Written::Typed(typed) => ::serde_json::to_string(&typed),
            Written::Text(text, _) => Ok(text),
        }
    }
}
