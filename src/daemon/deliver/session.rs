//! The runtime session each delivered conversation runs in, so a later message to the agent in
//! the same conversation is the next turn of the same runtime session (its history holds the
//! turns before), where the runtime's driver resumes sessions (`driver::put_in_session`).
//!
//! One session per (agent, target), kept owner-only in `recipes/sessions.json` across restarts:
//! its id, and whether the runtime has it to resume: once a run of it ended well (exit 0), or,
//! for a runtime that names its own sessions, once its output named it. A first run that did not
//! end well (and named none) leaves no session to resume: the next one starts a new id (a runtime
//! refuses an id in use, and one it never recorded cannot be resumed). A new recipe starts every
//! conversation of its agent anew. A resumed run
//! that fails twice in a row does the same, so a session the runtime lost never holds the
//! conversation's runs failing. At most [`MAX_SESSIONS`], the least recently used go first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::daemon::runtime::driver::RuntimeSession;

/// The sessions file, in the recipes directory.
const SESSIONS_FILE: &str = "sessions.json";
/// Conversations whose sessions are kept at most.
pub const MAX_SESSIONS: usize = 4096;
/// The sessions file read at most.
const MAX_SESSIONS_FILE: u64 = 4 * 1024 * 1024;
/// Failed resumed runs in a row after which the conversation starts a new session.
const FAILURES_BEFORE_NEW: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Record {
    agent_id: String,
    target: String,
    id: String,
    known: bool,
    failures: u8,
    used: u64,
}

/// Each conversation's session by `(agent id, target)`.
type Records = BTreeMap<(String, String), Record>;

/// The conversations' runtime sessions.
pub struct Sessions {
    path: PathBuf,
    /// A use counter (for the least recently used), and the records.
    records: Mutex<(u64, Records)>,
}

impl Sessions {
    /// The sessions kept in `dir`; an unreadable file starts each conversation anew (a session
    /// is continuity, not a decision of the person's).
    pub fn new(dir: &Path) -> Sessions {
        let path = dir.join(SESSIONS_FILE);
        let records: Vec<Record> =
            match crate::private_file::read_private_limited(&path, MAX_SESSIONS_FILE) {
                Ok(text) => serde_json::from_str(&text).unwrap_or_else(|error| {
                    tracing::warn!(%error, "the delivered sessions cannot be read: each conversation starts a new one");
                    Vec::new()
                }),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(error) => {
                    tracing::warn!(%error, "the delivered sessions cannot be read: each conversation starts a new one");
                    Vec::new()
                }
            };
        let clock = records.iter().map(|r| r.used).max().unwrap_or(0);
        let records = records
            .into_iter()
            .map(|r| ((r.agent_id.clone(), r.target.clone()), r))
            .collect();
        Sessions {
            path,
            records: Mutex::new((clock, records)),
        }
    }

    /// The session the next run of `agent_id` on `target` runs in (made when there is none).
    pub fn next(&self, agent_id: &str, target: &str) -> RuntimeSession {
        let mut guard = self.records.lock().expect("not poisoned");
        let (clock, records) = &mut *guard;
        *clock += 1;
        let key = (agent_id.to_string(), target.to_string());
        let record = records.entry(key).or_insert_with(|| Record {
            agent_id: agent_id.to_string(),
            target: target.to_string(),
            id: new_id(),
            known: false,
            failures: 0,
            used: 0,
        });
        record.used = *clock;
        let session = RuntimeSession {
            id: record.id.clone(),
            known: record.known,
        };
        while records.len() > MAX_SESSIONS {
            let oldest = records
                .iter()
                .min_by_key(|(_, r)| r.used)
                .map(|(key, _)| key.clone())
                .expect("not empty");
            records.remove(&oldest);
        }
        // Kept on disk when a run of it ends: a session no run of which ended is not resumed,
        // so losing it to a crash loses nothing.
        session
    }

    /// Records how a run of `session` ended: well (`ok`, exit 0) or not, and for a runtime that
    /// names its own sessions, the id its output named (`Named::Output`).
    pub fn ended(
        &self,
        agent_id: &str,
        target: &str,
        session: &RuntimeSession,
        ok: bool,
        named: Named,
    ) {
        let mut guard = self.records.lock().expect("not poisoned");
        let records = &mut guard.1;
        let key = (agent_id.to_string(), target.to_string());
        let Some(record) = records.get_mut(&key).filter(|r| r.id == session.id) else {
            return;
        };
        match named {
            Named::Output(Some(id)) => {
                // The runtime has this session now, whatever became of the run.
                record.id = id;
                record.known = true;
            }
            Named::Output(None) if !record.known => {
                // A new session whose id the run never said: nothing to resume.
                records.remove(&key);
                self.save(records);
                return;
            }
            Named::Output(None) | Named::Given => {}
        }
        if ok {
            record.known = true;
            record.failures = 0;
        } else if !record.known {
            records.remove(&key);
        } else {
            record.failures = record.failures.saturating_add(1);
            if record.failures >= FAILURES_BEFORE_NEW {
                tracing::info!(session = %session.id, "a resumed session failed twice in a row: the conversation's next run starts a new one");
                records.remove(&key);
            }
        }
        self.save(records);
    }

    /// Forgets `agent_id`'s sessions (its recipe changed: another runtime, or another directory).
    pub fn forget_agent(&self, agent_id: &str) {
        let mut guard = self.records.lock().expect("not poisoned");
        let records = &mut guard.1;
        records.retain(|(agent, _), _| agent != agent_id);
        self.save(records);
    }

    /// Best effort: a session not kept is continuity lost, not a delivery lost.
    fn save(&self, records: &Records) {
        let all: Vec<&Record> = records.values().collect();
        let written = self
            .path
            .parent()
            .map_or(Ok(()), crate::daemon::auth::files::ensure_private_dir)
            .and_then(|()| {
                let text = serde_json::to_string(&all).map_err(std::io::Error::other)?;
                crate::private_file::replace(&self.path, &text)
            });
        if let Err(error) = written {
            tracing::warn!(%error, "the delivered sessions cannot be kept");
        }
    }
}

/// Who named a run's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// The daemon did: the id it gave.
    Given,
    /// The runtime did, in its output (the id, if the run said one).
    Output(Option<String>),
}

/// A random (version 4) UUID: the form every runtime takes a session id in.
fn new_id() -> String {
    let mut bytes: [u8; 16] = rand::rng().random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_resumed_once_a_run_of_it_ended_well_and_kept_across_restarts() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("recipes");
        let sessions = Sessions::new(&dir);
        let first = sessions.next("agt_a", "dm:1");
        assert!(!first.known);
        assert_eq!(first.id.len(), 36);
        assert_eq!(&first.id[14..15], "4");
        // A first run that failed leaves nothing to resume: a new id next time.
        sessions.ended("agt_a", "dm:1", &first, false, Named::Given);
        let second = sessions.next("agt_a", "dm:1");
        assert!(!second.known && second.id != first.id);
        sessions.ended("agt_a", "dm:1", &second, true, Named::Given);
        // Another conversation has its own.
        assert_ne!(sessions.next("agt_a", "dm:2").id, second.id);
        // Kept across a restart, and resumed.
        let again = Sessions::new(&dir);
        let third = again.next("agt_a", "dm:1");
        assert_eq!(
            third,
            RuntimeSession {
                id: second.id.clone(),
                known: true
            }
        );
        // One failed resumed run keeps it; two in a row start anew.
        again.ended("agt_a", "dm:1", &third, false, Named::Given);
        assert_eq!(again.next("agt_a", "dm:1").id, second.id);
        again.ended("agt_a", "dm:1", &third, false, Named::Given);
        let fresh = again.next("agt_a", "dm:1");
        assert!(!fresh.known && fresh.id != second.id);
        // An end of a session no longer the conversation's changes nothing.
        again.ended("agt_a", "dm:1", &third, true, Named::Given);
        assert!(!again.next("agt_a", "dm:1").known);
        // A new recipe starts its agent's conversations anew.
        let kept = again.next("agt_a", "dm:1");
        again.ended("agt_a", "dm:1", &kept, true, Named::Given);
        again.forget_agent("agt_a");
        assert!(!Sessions::new(&dir).next("agt_a", "dm:1").known);
        // Unreadable: each conversation starts anew.
        std::fs::write(dir.join(SESSIONS_FILE), "not json").unwrap();
        assert!(!Sessions::new(&dir).next("agt_a", "dm:1").known);
    }

    #[test]
    fn a_session_the_runtime_names_is_resumed_only_once_its_output_named_it() {
        let root = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(&root.path().join("recipes"));
        // A run that never said its session leaves nothing to resume, even ended well.
        let first = sessions.next("agt_a", "dm:1");
        sessions.ended("agt_a", "dm:1", &first, true, Named::Output(None));
        let second = sessions.next("agt_a", "dm:1");
        assert!(!second.known && second.id != first.id);
        // Said, it is resumed by that id, even after a run that failed.
        sessions.ended(
            "agt_a",
            "dm:1",
            &second,
            false,
            Named::Output(Some("ses_1".into())),
        );
        let third = sessions.next("agt_a", "dm:1");
        assert_eq!(
            third,
            RuntimeSession {
                id: "ses_1".into(),
                known: true
            }
        );
        // A resumed run that did not say it again keeps it.
        sessions.ended("agt_a", "dm:1", &third, true, Named::Output(None));
        assert_eq!(sessions.next("agt_a", "dm:1"), third);
    }

    #[test]
    fn at_most_max_sessions_are_kept_the_least_recently_used_go_first() {
        let root = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(&root.path().join("recipes"));
        let kept = sessions.next("agt_a", "dm:kept");
        sessions.ended("agt_a", "dm:kept", &kept, true, Named::Given);
        for i in 0..MAX_SESSIONS - 1 {
            sessions.next("agt_a", &format!("dm:{i}"));
        }
        // Full: the kept one was used longest ago, until it is used again.
        assert_eq!(
            sessions.next("agt_a", "dm:kept"),
            RuntimeSession {
                known: true,
                ..kept.clone()
            }
        );
        sessions.next("agt_a", "dm:one-more");
        let records = &sessions.records.lock().unwrap().1;
        assert_eq!(records.len(), MAX_SESSIONS);
        assert!(records.contains_key(&("agt_a".into(), "dm:kept".into())));
        assert!(!records.contains_key(&("agt_a".into(), "dm:0".into())));
    }
}
