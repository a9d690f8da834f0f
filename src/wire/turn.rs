//! The Human-initiated turn a runtime is answering: the target (`channel:…`, `dm:…`, `thread:…`
//! or `task:…`) and the id of the human message that started it.
//!
//! The daemon holds one current turn per launch (set at launch, replaced per delivery through its
//! admin API) and forwards it, on the knowledge route only, in two headers; the server revalidates
//! it on every call. It is never part of the Exec binding, never a default locator, and never a
//! grant by itself.

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};

/// The headers that carry a turn from the daemon to the server's knowledge route.
pub const TARGET_HEADER: &str = "agentteam-turn-target";
pub const MESSAGE_HEADER: &str = "agentteam-turn-message";

/// One turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Turn {
    /// `channel:<id>`, `dm:<id>`, `thread:<id>` or `task:<id>`.
    pub target: String,
    /// The human message that started the turn.
    pub message_id: String,
}

impl Turn {
    /// A turn whose target has one of the four types and bounded ids.
    pub fn new(target: &str, message_id: &str) -> Result<Turn, String> {
        let turn = Turn {
            target: target.to_string(),
            message_id: message_id.to_string(),
        };
        turn.check()?;
        Ok(turn)
    }

    /// The target's type and id, if well formed.
    pub fn parts(&self) -> Option<(&str, &str)> {
        let (kind, key) = self.target.split_once(':')?;
        (matches!(kind, "channel" | "dm" | "thread" | "task")
            && is_id(key)
            && is_id(&self.message_id))
        .then_some((kind, key))
    }

    pub fn check(&self) -> Result<(), String> {
        self.parts().map(|_| ()).ok_or_else(|| {
            "a turn is a target `channel:<id>`, `dm:<id>`, `thread:<id>` or `task:<id>` and a message id".to_string()
        })
    }

    /// The turn in `headers`: `Ok(None)` when absent, `Err` when present but malformed (one
    /// header without the other included).
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Turn>, MalformedTurn> {
        let header = |name: &str| {
            headers
                .get(name)
                .map(|v| v.to_str().map_err(|_| MalformedTurn))
        };
        match (header(TARGET_HEADER), header(MESSAGE_HEADER)) {
            (None, None) => Ok(None),
            (Some(Ok(target)), Some(Ok(message))) => Turn::new(target, message)
                .map(Some)
                .map_err(|_| MalformedTurn),
            _ => Err(MalformedTurn),
        }
    }
}

/// Turn headers that do not make a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedTurn;

fn is_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_four_target_types_with_bounded_ids_make_a_turn() {
        assert_eq!(
            Turn::new("thread:thr_1", "msg_1").unwrap().parts(),
            Some(("thread", "thr_1"))
        );
        for bad in [
            ("room:x", "msg_1"),
            ("thread:", "msg_1"),
            ("thread:a b", "msg_1"),
            ("task:t", ""),
        ] {
            assert!(Turn::new(bad.0, bad.1).is_err(), "{bad:?}");
        }
    }
}
