//! Bounded transient replay: when a forwarded call is sent again.
//!
//! A send whose answer never came ([`Transient`]) is sent again only when a repeat cannot apply
//! anything twice: a read, or a mutation with its selector, which the server's receipt answers
//! without applying it again. A mutation without one (a natural-key mutation) is sent once. A
//! repeat that finds the first send still running on the server (`idempotency_in_progress`)
//! waits for it like a lost answer.
//!
//! Bounded three ways: at most [`MAX_SENDS`] sends; every send and wait within [`REPLAY_WINDOW`]
//! of the first, well inside `agentteam exec`'s own 120-second deadline; and a wait that would
//! end past the window is not started. Each wait is drawn at random from the upper half of a
//! doubling step (from [`FIRST_BACKOFF`]), so that the callers of one failure do not come back
//! together.
//!
//! When the sends run out, the call answers what it knows: a read, or a mutation none of whose
//! sends reached the server, the last failure; a mutation any of whose sends may have reached it,
//! that its outcome is unknown. A selector answered unknown is an ambiguous receipt
//! ([`Unsettled`]) until the server answers a request with it.

use std::time::{Duration, Instant};

use crate::client::{Failed, Transient};
use crate::contract::error::ErrorCode;

/// Sends of one call at most, the first included.
pub const MAX_SENDS: u32 = 5;
/// The step of the first wait; each next one doubles.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Every send of one call ends within this of the first.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(75);
/// No send is started with less than this left of the window.
const LEAST_SEND: Duration = Duration::from_millis(50);

/// What the call does after a send without the answer it wanted.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Answer the send's failure as it is.
    Answer,
    /// Answer that the mutation's outcome is unknown.
    Unknown,
    /// Wait this long, then send again.
    Again(Duration),
}

/// The sends of one forwarded call.
#[derive(Debug)]
pub struct Replay {
    kind: Kind,
    sends: u32,
    /// Whether a send may have reached the server.
    maybe_applied: bool,
    started: Instant,
    hop_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    /// A mutation with its selector.
    Receipted,
    /// A mutation without one.
    NaturalKey,
}

impl Replay {
    /// The sends of a call (a `mutation` or a read, with or without a `selector`) over a hop
    /// whose requests each take at most `hop_timeout`.
    pub fn new(mutation: bool, selector: bool, hop_timeout: Duration) -> Replay {
        let kind = match (mutation, selector) {
            (false, _) => Kind::Read,
            (true, true) => Kind::Receipted,
            (true, false) => Kind::NaturalKey,
        };
        Replay {
            kind,
            sends: 0,
            maybe_applied: false,
            started: Instant::now(),
            hop_timeout,
        }
    }

    /// The timeout of the next send: the hop's, within what is left of the window.
    pub fn attempt_timeout(&self) -> Duration {
        let left = REPLAY_WINDOW.saturating_sub(self.started.elapsed());
        self.hop_timeout.min(left).max(LEAST_SEND)
    }

    /// Whether a send so far may have reached the server.
    pub fn may_have_applied(&self) -> bool {
        self.maybe_applied
    }

    /// What to do after a send that failed with `failed`.
    pub fn after(&mut self, failed: &Failed) -> Next {
        self.sends += 1;
        let transient = match failed.transient {
            Some(transient) => transient,
            // The first send still runs on the server: its answer is not lost yet.
            None if self.sends > 1 && failed.error.code == ErrorCode::IdempotencyInProgress => {
                Transient::AnswerLost
            }
            None => return Next::Answer,
        };
        self.maybe_applied |= transient == Transient::AnswerLost;
        let exhausted = || match self.kind {
            Kind::Read => Next::Answer,
            Kind::Receipted | Kind::NaturalKey if self.maybe_applied => Next::Unknown,
            Kind::Receipted | Kind::NaturalKey => Next::Answer,
        };
        if self.kind == Kind::NaturalKey || self.sends >= MAX_SENDS {
            return exhausted();
        }
        let step = FIRST_BACKOFF * 2u32.pow(self.sends - 1);
        let wait = step / 2 + step.mul_f64(rand::random::<f64>() / 2.0);
        let left = REPLAY_WINDOW.saturating_sub(self.started.elapsed());
        if wait + LEAST_SEND > left {
            return exhausted();
        }
        Next::Again(wait)
    }
}

/// Unsettled receipts the daemon keeps at most; past it the oldest is forgotten (the server
/// still refuses a reused selector itself).
pub const MAX_UNSETTLED: usize = 4096;

/// The selectors of mutations whose outcome the daemon answered unknown, with the fingerprint
/// of the request each was sent with: an ambiguous receipt until an answer of the server's
/// settles it. A request with one of these selectors and another payload cannot be matched to
/// that receipt and is refused before it is sent; one with the same payload is the repeat that
/// settles it.
#[derive(Debug, Default)]
pub struct Unsettled {
    records: std::sync::Mutex<Records>,
}

/// `(agent, operation key, selector)`.
type Key = (String, String, String);

#[derive(Debug, Default)]
struct Records {
    fingerprints: std::collections::HashMap<Key, [u8; 32]>,
    /// Oldest first.
    order: std::collections::VecDeque<Key>,
}

impl Unsettled {
    /// Whether a request with `key` and `fingerprint` may be sent: not when an unsettled receipt
    /// holds `key` for another payload.
    pub fn matches(&self, key: (&str, &str, &str), fingerprint: &[u8; 32]) -> bool {
        let records = self.records.lock().expect("no panic holds it");
        records
            .fingerprints
            .get(&owned(key))
            .is_none_or(|held| held == fingerprint)
    }

    /// `key`'s outcome is unknown after a request with `fingerprint`.
    pub fn hold(&self, key: (&str, &str, &str), fingerprint: [u8; 32]) {
        let mut records = self.records.lock().expect("no panic holds it");
        let key = owned(key);
        if records
            .fingerprints
            .insert(key.clone(), fingerprint)
            .is_none()
        {
            records.order.push_back(key);
        }
        while records.order.len() > MAX_UNSETTLED {
            let oldest = records.order.pop_front().expect("longer than the bound");
            records.fingerprints.remove(&oldest);
        }
    }

    /// The server answered a request with `key`: its receipt is settled.
    pub fn settle(&self, key: (&str, &str, &str)) {
        let mut records = self.records.lock().expect("no panic holds it");
        let key = owned(key);
        if records.fingerprints.remove(&key).is_some() {
            records.order.retain(|held| *held != key);
        }
    }

    /// Receipts held now.
    pub fn len(&self) -> usize {
        self.records.lock().expect("no panic holds it").order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn owned((agent, operation, selector): (&str, &str, &str)) -> Key {
    (
        agent.to_string(),
        operation.to_string(),
        selector.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ActionError;

    #[test]
    fn an_unsettled_receipt_refuses_another_payload_until_it_is_settled_and_is_bounded() {
        let unsettled = Unsettled::default();
        let key = ("agt_a", "task.create", "req-000001");
        unsettled.hold(key, [1; 32]);
        assert!(unsettled.matches(key, &[1; 32]));
        assert!(!unsettled.matches(key, &[2; 32]));
        assert!(unsettled.matches(("agt_b", "task.create", "req-000001"), &[2; 32]));
        unsettled.settle(key);
        assert!(unsettled.matches(key, &[2; 32]));
        assert!(unsettled.is_empty());
        // At the bound, the oldest goes first.
        let selectors: Vec<String> = (0..=MAX_UNSETTLED).map(|n| format!("req-{n:06}")).collect();
        for selector in &selectors {
            unsettled.hold(("agt_a", "task.create", selector), [1; 32]);
        }
        assert_eq!(unsettled.len(), MAX_UNSETTLED);
        assert!(unsettled.matches(("agt_a", "task.create", &selectors[0]), &[2; 32]));
        assert!(!unsettled.matches(("agt_a", "task.create", &selectors[1]), &[2; 32]));
    }

    fn failed(transient: Option<Transient>, code: ErrorCode) -> Failed {
        Failed {
            error: ActionError::new(code, "x"),
            transient,
        }
    }

    const LOST: Option<Transient> = Some(Transient::AnswerLost);
    const NOT_SENT: Option<Transient> = Some(Transient::NotSent);

    fn hop() -> Duration {
        Duration::from_secs(30)
    }

    #[test]
    fn a_receipted_mutation_is_sent_at_most_max_sends_times_then_its_outcome_is_unknown() {
        let mut replay = Replay::new(true, true, hop());
        let lost = failed(LOST, ErrorCode::UpstreamUnavailable);
        let mut waits = Vec::new();
        loop {
            match replay.after(&lost) {
                Next::Again(wait) => waits.push(wait),
                other => {
                    assert_eq!(other, Next::Unknown);
                    break;
                }
            }
        }
        assert_eq!(waits.len() as u32, MAX_SENDS - 1);
        // Each wait is in the upper half of its doubling step.
        for (n, wait) in waits.iter().enumerate() {
            let step = FIRST_BACKOFF * 2u32.pow(n as u32);
            assert!(*wait >= step / 2 && *wait <= step, "wait {n}: {wait:?}");
        }
    }

    #[test]
    fn a_natural_key_mutation_is_never_sent_again() {
        let mut replay = Replay::new(true, false, hop());
        assert_eq!(
            replay.after(&failed(LOST, ErrorCode::UpstreamTimeout)),
            Next::Unknown
        );
        // Never sent: nothing was applied, and the failure says so as it is.
        let mut replay = Replay::new(true, false, hop());
        assert_eq!(
            replay.after(&failed(NOT_SENT, ErrorCode::UpstreamUnavailable)),
            Next::Answer
        );
    }

    #[test]
    fn a_read_is_sent_again_and_answers_its_last_failure_when_the_sends_run_out() {
        let mut replay = Replay::new(false, false, hop());
        let lost = failed(LOST, ErrorCode::UpstreamUnavailable);
        for _ in 1..MAX_SENDS {
            assert!(matches!(replay.after(&lost), Next::Again(_)));
        }
        assert_eq!(replay.after(&lost), Next::Answer);
    }

    #[test]
    fn a_mutation_none_of_whose_sends_left_answers_its_failure_and_one_that_may_have_is_unknown() {
        let not_sent = failed(NOT_SENT, ErrorCode::UpstreamUnavailable);
        let mut replay = Replay::new(true, true, hop());
        for _ in 1..MAX_SENDS {
            assert!(matches!(replay.after(&not_sent), Next::Again(_)));
        }
        assert_eq!(replay.after(&not_sent), Next::Answer);
        // One lost answer among refused connections: the first send may have been applied.
        let mut replay = Replay::new(true, true, hop());
        assert!(matches!(
            replay.after(&failed(LOST, ErrorCode::UpstreamTimeout)),
            Next::Again(_)
        ));
        for _ in 2..MAX_SENDS {
            assert!(matches!(replay.after(&not_sent), Next::Again(_)));
        }
        assert_eq!(replay.after(&not_sent), Next::Unknown);
    }

    #[test]
    fn the_servers_own_answer_is_never_sent_again_but_a_repeat_in_progress_waits() {
        let mut replay = Replay::new(true, true, hop());
        assert_eq!(
            replay.after(&failed(None, ErrorCode::IdempotencyInProgress)),
            Next::Answer,
            "on the first send, another request of the runtime's own holds the selector"
        );
        let mut replay = Replay::new(true, true, hop());
        assert!(matches!(
            replay.after(&failed(LOST, ErrorCode::UpstreamTimeout)),
            Next::Again(_)
        ));
        assert!(matches!(
            replay.after(&failed(None, ErrorCode::IdempotencyInProgress)),
            Next::Again(_)
        ));
        assert_eq!(
            replay.after(&failed(None, ErrorCode::ValidationFailed)),
            Next::Answer
        );
    }

    #[test]
    fn every_send_ends_within_the_window() {
        let replay = Replay::new(true, true, Duration::from_secs(300));
        let timeout = replay.attempt_timeout();
        assert!(timeout <= REPLAY_WINDOW && timeout > REPLAY_WINDOW - Duration::from_secs(1));
        let replay = Replay::new(true, true, Duration::from_millis(300));
        assert_eq!(replay.attempt_timeout(), Duration::from_millis(300));
    }
}
