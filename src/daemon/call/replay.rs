//! Idempotent replay of the daemon-owned mutations (the `agent` domain): the first request with a
//! selector runs; a repeat with the same payload replays its recorded answer, one with another
//! payload is `idempotency_key_reused`, one while the first still runs `idempotency_in_progress`
//! — the server's rules, kept in memory here (bounded: at most [`MAX_ENTRIES`] records, each at
//! least [`RETENTION_MS`] unless the bound forces the oldest finished one out). A claim whose
//! request never finished (its runtime's credential was revoked while it ran) is released, so
//! the key does not stay in progress.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// At most this many records.
pub const MAX_ENTRIES: usize = 4096;
/// How long a record is kept.
pub const RETENTION_MS: i64 = 24 * 60 * 60 * 1000;

/// `(caller agent, action key, selector)`.
type Key = (String, String, String);

/// A finished request's answer, replayed as it was.
pub type Outcome = Result<super::check::Data, crate::contract::ActionError>;

#[derive(Debug, Clone)]
enum Entry {
    Running {
        fingerprint: [u8; 32],
    },
    Done {
        fingerprint: [u8; 32],
        outcome: Outcome,
    },
}

/// What a request with a selector may do.
#[derive(Debug, Clone)]
pub enum Claim {
    /// Run it, then [`ReplayCache::finish`] (or [`ReplayCache::release`]).
    Acquired,
    /// Answer this, recorded from the first request.
    Done(Outcome),
    /// The selector was used with another payload.
    Mismatch,
    /// The first request with this selector is still running.
    InProgress,
}

#[derive(Debug, Default)]
struct Records {
    entries: HashMap<Key, (Entry, i64)>,
    /// Insertion order, for expiry and the bound.
    order: VecDeque<Key>,
}

/// The daemon's replay records.
#[derive(Debug, Default)]
pub struct ReplayCache {
    records: Mutex<Records>,
}

impl ReplayCache {
    pub fn claim(&self, key: (&str, &str, &str), fingerprint: [u8; 32], now_ms: i64) -> Claim {
        let mut records = self.records.lock().expect("not poisoned");
        records.expire(now_ms);
        let key = (key.0.to_string(), key.1.to_string(), key.2.to_string());
        match records.entries.get(&key) {
            Some((Entry::Running { fingerprint: f }, _)) if *f == fingerprint => Claim::InProgress,
            Some((
                Entry::Done {
                    fingerprint: f,
                    outcome,
                },
                _,
            )) if *f == fingerprint => Claim::Done(outcome.clone()),
            Some(_) => Claim::Mismatch,
            None => {
                records.make_room();
                records
                    .entries
                    .insert(key.clone(), (Entry::Running { fingerprint }, now_ms));
                records.order.push_back(key);
                Claim::Acquired
            }
        }
    }

    /// Records the answer of an acquired request.
    pub fn finish(&self, key: (&str, &str, &str), outcome: &Outcome) {
        let mut records = self.records.lock().expect("not poisoned");
        let key = (key.0.to_string(), key.1.to_string(), key.2.to_string());
        if let Some((entry, _)) = records.entries.get_mut(&key)
            && let Entry::Running { fingerprint } = entry
        {
            *entry = Entry::Done {
                fingerprint: *fingerprint,
                outcome: outcome.clone(),
            };
        }
    }

    /// Forgets an acquired request that will not finish: the next one with its key runs.
    pub fn release(&self, key: (&str, &str, &str)) {
        let mut records = self.records.lock().expect("not poisoned");
        let key = (key.0.to_string(), key.1.to_string(), key.2.to_string());
        if let Some((Entry::Running { .. }, _)) = records.entries.get(&key) {
            records.entries.remove(&key);
        }
    }

    pub fn len(&self) -> usize {
        self.records.lock().expect("not poisoned").entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Records {
    fn expire(&mut self, now_ms: i64) {
        while let Some(key) = self.order.front() {
            match self.entries.get(key) {
                Some((Entry::Done { .. }, at)) if now_ms - at >= RETENTION_MS => {
                    self.entries.remove(key);
                    self.order.pop_front();
                }
                None => {
                    self.order.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Drops the oldest finished records until one more fits.
    fn make_room(&mut self) {
        while self.entries.len() >= MAX_ENTRIES {
            let Some(position) = self.order.iter().position(|key| {
                matches!(self.entries.get(key), Some((Entry::Done { .. }, _)) | None)
            }) else {
                return;
            };
            let key = self.order.remove(position).expect("a position in range");
            self.entries.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: (&str, &str, &str) = ("agt_1", "agent.create", "req-00000001");

    #[test]
    fn a_repeat_replays_and_another_payload_is_refused() {
        let cache = ReplayCache::default();
        assert!(matches!(cache.claim(KEY, [1; 32], 0), Claim::Acquired));
        assert!(matches!(cache.claim(KEY, [1; 32], 1), Claim::InProgress));
        cache.finish(KEY, &Ok(super::super::check::Data::owned("{}".into())));
        assert!(matches!(
            cache.claim(KEY, [1; 32], 2),
            Claim::Done(Ok(data)) if data.text() == "{}"
        ));
        assert!(matches!(cache.claim(KEY, [2; 32], 3), Claim::Mismatch));
        // After the retention a key is new again.
        assert!(matches!(
            cache.claim(KEY, [2; 32], RETENTION_MS + 2),
            Claim::Acquired
        ));
    }

    #[test]
    fn the_cache_is_bounded_at_its_edge() {
        let cache = ReplayCache::default();
        let done: Outcome = Ok(super::super::check::Data::owned("{}".into()));
        for n in 0..MAX_ENTRIES {
            let key = format!("req-{n:08}");
            assert!(matches!(
                cache.claim(("a", "x", &key), [0; 32], 0),
                Claim::Acquired
            ));
            cache.finish(("a", "x", &key), &done);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert!(matches!(
            cache.claim(("a", "x", "req-overflow"), [0; 32], 1),
            Claim::Acquired
        ));
        assert_eq!(
            cache.len(),
            MAX_ENTRIES,
            "the oldest finished record made room"
        );
        assert!(
            matches!(
                cache.claim(("a", "x", "req-00000000"), [0; 32], 1),
                Claim::Acquired
            ),
            "the evicted one is new again"
        );
    }

    #[test]
    fn a_released_claim_runs_again_and_a_finished_one_is_kept() {
        let cache = ReplayCache::default();
        assert!(matches!(cache.claim(KEY, [1; 32], 0), Claim::Acquired));
        cache.release(KEY);
        assert!(matches!(cache.claim(KEY, [1; 32], 1), Claim::Acquired));
        cache.finish(
            KEY,
            &Err(crate::contract::ActionError::new(
                crate::contract::error::ErrorCode::NotFound,
                "gone",
            )),
        );
        cache.release(KEY);
        assert!(matches!(
            cache.claim(KEY, [1; 32], 2),
            Claim::Done(Err(error)) if error.message == "gone"
        ));
    }
}
