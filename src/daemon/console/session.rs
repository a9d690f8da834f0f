//! Who may use the console: one-time login codes and the sessions they open.
//!
//! `agentteam open` (the person, checked as every person's command is) has the daemon mint a
//! code that lives [`CODE_TTL`] and opens one session, once. The daemon keeps only hashes of
//! codes and session ids, so neither can be read back out of it; each session has its own CSRF
//! proof. Both are bounded: the newest [`MAX_CODES`] codes and [`MAX_SESSIONS`] sessions are
//! kept, the oldest dropped first. Sessions live in memory: a daemon restart signs every browser
//! out (`agentteam open` again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::clock::Clock;

/// How long a login code may be exchanged.
pub const CODE_TTL: Duration = Duration::from_secs(120);
/// How long a session lasts from its login, however it is used.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// Login codes kept at once (the oldest unexchanged one goes first).
pub const MAX_CODES: usize = 8;
/// Sessions kept at once (the oldest goes first).
pub const MAX_SESSIONS: usize = 32;

/// A session of the console, as its requests carry it.
#[derive(Debug, Clone)]
pub struct Session {
    /// The session's CSRF proof: every state change carries it.
    pub csrf: String,
}

impl Session {
    /// Whether `presented` is this session's CSRF proof (in constant time).
    pub fn proves(&self, presented: Option<&str>) -> bool {
        presented.is_some_and(|p| p.as_bytes().ct_eq(self.csrf.as_bytes()).into())
    }
}

struct Kept {
    session: Session,
    created_ms: i64,
    expires_ms: i64,
}

#[derive(Default)]
struct Inner {
    /// Code hash → expiry (ms).
    codes: Vec<([u8; 32], i64)>,
    /// Session id hash → the session.
    sessions: HashMap<[u8; 32], Kept>,
}

/// The console's codes and sessions.
pub struct Logins {
    clock: Arc<Clock>,
    inner: Mutex<Inner>,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

impl Logins {
    pub fn new(clock: Arc<Clock>) -> Logins {
        Logins {
            clock,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// A new one-time code, valid for [`CODE_TTL`].
    pub fn mint_code(&self) -> String {
        let code = random_secret();
        let now = self.clock.now_ms();
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.codes.retain(|(_, expires)| *expires > now);
        if inner.codes.len() >= MAX_CODES {
            inner.codes.remove(0);
        }
        inner
            .codes
            .push((digest(&code), now + CODE_TTL.as_millis() as i64));
        code
    }

    /// Exchanges `code` for a new session: its id (the cookie) and the session. A code is
    /// exchanged once; an expired, unknown or used one opens nothing.
    pub fn redeem(&self, code: &str) -> Option<(String, Session)> {
        let now = self.clock.now_ms();
        let presented = digest(code);
        let mut inner = self.inner.lock().expect("not poisoned");
        let index = inner
            .codes
            .iter()
            .position(|(hash, _)| bool::from(hash.ct_eq(&presented)))?;
        let (_, expires) = inner.codes.remove(index);
        if expires <= now {
            return None;
        }
        inner.sessions.retain(|_, kept| kept.expires_ms > now);
        if inner.sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = inner
                .sessions
                .iter()
                .min_by_key(|(_, kept)| kept.created_ms)
                .map(|(id, _)| *id)
        {
            inner.sessions.remove(&oldest);
        }
        let id = random_secret();
        let session = Session {
            csrf: random_secret(),
        };
        inner.sessions.insert(
            digest(&id),
            Kept {
                session: session.clone(),
                created_ms: now,
                expires_ms: now + SESSION_TTL.as_millis() as i64,
            },
        );
        Some((id, session))
    }

    /// The live session `id` names.
    pub fn session(&self, id: &str) -> Option<Session> {
        let now = self.clock.now_ms();
        let inner = self.inner.lock().expect("not poisoned");
        inner
            .sessions
            .get(&digest(id))
            .filter(|kept| kept.expires_ms > now)
            .map(|kept| kept.session.clone())
    }

    /// Ends session `id` (signing out).
    pub fn end(&self, id: &str) {
        self.inner
            .lock()
            .expect("not poisoned")
            .sessions
            .remove(&digest(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logins() -> (Arc<Clock>, Logins) {
        let clock = Arc::new(Clock::default());
        clock.pin(Some(1_000_000));
        (clock.clone(), Logins::new(clock))
    }

    #[test]
    fn a_code_opens_one_session_once() {
        let (_, logins) = logins();
        let code = logins.mint_code();
        let (id, session) = logins.redeem(&code).expect("a fresh code opens a session");
        assert!(
            logins.redeem(&code).is_none(),
            "a replayed code opens nothing"
        );
        assert!(logins.redeem("not-a-code").is_none());
        let found = logins.session(&id).expect("the session is live");
        assert_eq!(found.csrf, session.csrf);
        assert!(found.proves(Some(&session.csrf)));
        assert!(!found.proves(Some("forged")));
        assert!(!found.proves(None));
        assert!(
            logins.session(&session.csrf).is_none(),
            "the proof is no id"
        );
        logins.end(&id);
        assert!(logins.session(&id).is_none());
    }

    #[test]
    fn a_code_expires_at_its_ttl() {
        let (clock, logins) = logins();
        let just_in_time = logins.mint_code();
        let late = logins.mint_code();
        clock.pin(Some(1_000_000 + CODE_TTL.as_millis() as i64 - 1));
        assert!(logins.redeem(&just_in_time).is_some());
        clock.pin(Some(1_000_000 + CODE_TTL.as_millis() as i64));
        assert!(logins.redeem(&late).is_none(), "expired at its TTL");
    }

    #[test]
    fn a_session_ends_at_its_ttl() {
        let (clock, logins) = logins();
        let (id, _) = logins.redeem(&logins.mint_code()).unwrap();
        clock.pin(Some(1_000_000 + SESSION_TTL.as_millis() as i64 - 1));
        assert!(logins.session(&id).is_some());
        clock.pin(Some(1_000_000 + SESSION_TTL.as_millis() as i64));
        assert!(logins.session(&id).is_none());
    }

    #[test]
    fn codes_and_sessions_are_bounded_oldest_first() {
        let (clock, logins) = logins();
        let codes: Vec<String> = (0..=MAX_CODES).map(|_| logins.mint_code()).collect();
        assert!(logins.redeem(&codes[0]).is_none(), "the oldest code went");
        let first = logins.redeem(&codes[1]).expect("the next is kept").0;
        // Sessions: MAX_SESSIONS of them (one opened above), then one more drops the oldest.
        let mut ids = Vec::new();
        for i in 1..MAX_SESSIONS {
            clock.pin(Some(1_000_000 + i as i64));
            ids.push(logins.redeem(&logins.mint_code()).unwrap().0);
        }
        assert!(ids.iter().all(|id| logins.session(id).is_some()));
        clock.pin(Some(1_000_000 + MAX_SESSIONS as i64));
        let newest = logins.redeem(&logins.mint_code()).unwrap().0;
        assert!(logins.session(&newest).is_some());
        assert!(logins.session(&first).is_none(), "the oldest session went");
        assert!(logins.session(&ids[0]).is_some(), "only the oldest went");
        assert_eq!(
            logins.inner.lock().unwrap().sessions.len(),
            MAX_SESSIONS,
            "bounded"
        );
    }
}
