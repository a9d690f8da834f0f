//! The server's internal failures: each cause logged once under the request's incident id
//! (`wire::observe::internal`), the answer without it. A handler never says what broke inside;
//! the log says it, and the incident id joins the two.

use std::fmt;

use super::store::StoreError;
use crate::contract::ActionError;

/// An internal failure: `cause` logged, the answer "the server failed to handle this request".
pub fn internal(cause: impl fmt::Display) -> ActionError {
    crate::wire::observe::internal("server", &cause)
}

/// An internal failure answered with `message`, the site's own words for what failed (a damaged
/// record, a list that cannot continue); `cause` is logged.
pub fn saying(message: &str, cause: impl fmt::Display) -> ActionError {
    ActionError {
        message: message.to_string(),
        ..internal(cause)
    }
}

/// A store failure: the error and its sources logged, the answer saying that a retry may help.
pub fn store(error: StoreError) -> ActionError {
    saying(
        "the server failed to handle this request; retry later",
        Chain(&error),
    )
}

/// An error and each of its sources, `: `-separated.
struct Chain<'a>(&'a dyn std::error::Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}
