//! The conversation a launch's MCP calls answer in: the Human-initiated turn the knowledge tools
//! are bound to, and the Codex thread that is the runtime's primary (the delegated-child gate).
//!
//! It is kept per run, beside the launch's session, never on the runtime's authorization: the
//! Exec authorization carries no launch target or conversation routing context, so nothing on
//! the Exec path can read it. Only the MCP route looks it up, by the run its authorization is
//! bound to.

use std::sync::{Arc, Mutex};

use crate::wire::turn::Turn;

/// One run's conversation context.
#[derive(Debug, Default)]
pub struct Conversation {
    /// Set at launch, replaced per delivery through the admin API.
    turn: Mutex<Option<Arc<Turn>>>,
    /// From the launcher, or from the Codex runtime's own `thread.started` event.
    primary_thread: Mutex<Option<Arc<str>>>,
}

impl Conversation {
    /// A run's context at launch.
    pub fn new(turn: Option<Turn>, primary_thread: Option<&str>) -> Conversation {
        Conversation {
            turn: Mutex::new(turn.map(Arc::new)),
            primary_thread: Mutex::new(primary_thread.map(Arc::from)),
        }
    }

    /// The current turn, if one is bound.
    pub fn turn(&self) -> Option<Arc<Turn>> {
        self.turn.lock().expect("not poisoned").clone()
    }

    /// Binds `turn` as the current one (`None` unbinds); the next knowledge call uses it.
    pub fn set_turn(&self, turn: Option<Turn>) {
        *self.turn.lock().expect("not poisoned") = turn.map(Arc::new);
    }

    /// The primary Codex thread, if known.
    pub fn primary_thread(&self) -> Option<Arc<str>> {
        self.primary_thread.lock().expect("not poisoned").clone()
    }

    /// Records the primary Codex thread unless one is known: a thread the launcher named stays.
    /// Whether it was recorded.
    pub fn name_primary_thread(&self, thread: &str) -> bool {
        let mut primary = self.primary_thread.lock().expect("not poisoned");
        if primary.is_some() {
            return false;
        }
        *primary = Some(Arc::from(thread));
        true
    }
}
