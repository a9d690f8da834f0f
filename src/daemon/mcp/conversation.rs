//! The conversation a launch's MCP calls answer in: the Human-initiated turn the knowledge tools
//! are bound to, and the Codex threads the delegated-child gate tells apart: the runtime's primary
//! thread (a `codex exec` run has one; every other thread is delegated), or a `codex app-server`
//! client's own threads and the delegated ones its protocol marked.
//!
//! It is kept per run, beside the launch's session, never on the runtime's authorization: the
//! Exec authorization carries no launch target or conversation routing context, so nothing on
//! the Exec path can read it. Only the MCP route looks it up, by the run its authorization is
//! bound to.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::contract::gate::Known;
use crate::wire::turn::Turn;

/// How many user threads, and how many delegated ones, a run remembers (the oldest go first).
pub const MAX_KNOWN_THREADS: usize = 1024;

/// One run's conversation context.
#[derive(Debug, Default)]
pub struct Conversation {
    /// Set at launch, replaced per delivery through the admin API.
    turn: Mutex<Option<Arc<Turn>>>,
    threads: Mutex<Threads>,
}

#[derive(Debug, Default)]
struct Threads {
    /// From the launcher, or from a `codex exec` runtime's own `thread.started` event.
    primary: Option<Arc<str>>,
    /// A Codex `app-server` client's own threads, newest last.
    users: VecDeque<Arc<str>>,
    /// The threads its protocol marked delegated (a parent thread, a sub-agent source).
    children: VecDeque<Arc<str>>,
}

/// Appends `thread` to `list` unless it is there, dropping the oldest past the bound.
fn remember(list: &mut VecDeque<Arc<str>>, thread: &str) -> bool {
    if list.iter().any(|known| &**known == thread) {
        return false;
    }
    if list.len() == MAX_KNOWN_THREADS {
        list.pop_front();
    }
    list.push_back(Arc::from(thread));
    true
}

impl Conversation {
    /// A run's context at launch.
    pub fn new(turn: Option<Turn>, primary_thread: Option<&str>) -> Conversation {
        Conversation {
            turn: Mutex::new(turn.map(Arc::new)),
            threads: Mutex::new(Threads {
                primary: primary_thread.map(Arc::from),
                ..Threads::default()
            }),
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

    /// Records the primary Codex thread unless one is known: a thread the launcher named stays.
    /// Whether it was recorded.
    pub fn name_primary_thread(&self, thread: &str) -> bool {
        let mut threads = self.threads.lock().expect("not poisoned");
        if threads.primary.is_some() {
            return false;
        }
        threads.primary = Some(Arc::from(thread));
        true
    }

    /// Records a thread a Codex `app-server` client started itself. Whether it was new.
    pub fn user_thread(&self, thread: &str) -> bool {
        remember(
            &mut self.threads.lock().expect("not poisoned").users,
            thread,
        )
    }

    /// Records a thread the Codex `app-server` protocol marked delegated. Whether it was new.
    pub fn delegated_thread(&self, thread: &str) -> bool {
        remember(
            &mut self.threads.lock().expect("not poisoned").children,
            thread,
        )
    }

    /// What the run knows of `thread`: a marked delegated thread is a child; the primary and a
    /// user's thread are primary; with one primary and no user threads (`codex exec`), any other
    /// thread is a child; otherwise nothing is known.
    pub fn known(&self, thread: &str) -> Known {
        let threads = self.threads.lock().expect("not poisoned");
        let is = |list: &VecDeque<Arc<str>>| list.iter().any(|known| &**known == thread);
        if is(&threads.children) {
            Known::Child
        } else if threads.primary.as_deref() == Some(thread) || is(&threads.users) {
            Known::Primary
        } else if threads.primary.is_some() && threads.users.is_empty() {
            Known::Child
        } else {
            Known::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_has_one_primary_and_app_server_knows_each_thread() {
        let exec = Conversation::new(None, None);
        assert_eq!(exec.known("t1"), Known::Unknown);
        assert!(exec.name_primary_thread("t1"));
        assert!(!exec.name_primary_thread("t2"), "the first stays");
        assert_eq!(exec.known("t1"), Known::Primary);
        assert_eq!(exec.known("t2"), Known::Child);

        let app = Conversation::new(None, None);
        assert!(app.user_thread("u1"));
        assert!(app.user_thread("u2"));
        assert!(!app.user_thread("u1"));
        assert!(app.delegated_thread("s1"));
        assert_eq!(app.known("u1"), Known::Primary);
        assert_eq!(app.known("u2"), Known::Primary);
        assert_eq!(app.known("s1"), Known::Child);
        assert_eq!(app.known("never-seen"), Known::Unknown);
    }

    #[test]
    fn known_threads_are_bounded_oldest_first() {
        let app = Conversation::new(None, None);
        for i in 0..=MAX_KNOWN_THREADS {
            app.delegated_thread(&format!("s{i}"));
        }
        assert_eq!(app.known("s0"), Known::Unknown, "the oldest went");
        assert_eq!(app.known("s1"), Known::Child);
        assert_eq!(app.known(&format!("s{MAX_KNOWN_THREADS}")), Known::Child);
        assert_eq!(
            app.threads.lock().unwrap().children.len(),
            MAX_KNOWN_THREADS
        );
    }
}
