//! The daemon's one subscription to its person's event feed, shared by every local reader.
//!
//! One task follows the server's `events_read` (a long poll of up to 25 s, resumed by its cursor,
//! through the daemon's one server client: the same proxy, TLS and hop rules as every server
//! call) and keeps the newest [`BUFFER`] events in memory. A local reader (`agentteam read
//! --follow`, the console) asks [`Feed::read`] for what follows its cursor: from the buffer when
//! the cursor is within what the daemon followed, waiting for the next event when there is none
//! yet; a cursor from before that (the daemon restarted, or the reader was away for longer than
//! the buffer holds) is answered by the server itself, which keeps events for days. So any number
//! of readers cost the server one subscription, and a reader that comes back misses nothing and
//! repeats nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::client::ServerClient;
use crate::contract::{ActionResult, HumanActionId};

/// Events the daemon keeps for its local readers.
pub const BUFFER: usize = 4096;
/// How long one upstream read waits for a change.
const UPSTREAM_WAIT_MS: u64 = 25_000;
/// The longest pause between two upstream attempts after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// After a page that was not full, how long the daemon lets changes gather before it reads again:
/// a busy workspace costs the server at most a read this often, not one per change.
const GATHER: Duration = Duration::from_millis(50);
/// Events one local read answers at most.
const MAX_READ: usize = 100;

/// What the daemon followed of the feed.
#[derive(Default)]
struct Followed {
    /// Where the daemon started following: events after it are in the buffer (unless evicted).
    since: Option<i64>,
    /// The server's cursor after the last upstream read.
    head: i64,
    /// The newest events, oldest first, each with its `seq`.
    events: VecDeque<(i64, Value)>,
    /// The `seq` of the newest event the buffer let go: a reader before it asks the server.
    evicted: i64,
}

/// The shared subscription.
pub struct Feed {
    followed: Mutex<Followed>,
    /// The head, for readers waiting on a change.
    changed: watch::Sender<i64>,
    client: Arc<ServerClient>,
    workspace_id: String,
}

impl Feed {
    pub fn new(client: Arc<ServerClient>, workspace_id: String) -> Arc<Feed> {
        Arc::new(Feed {
            followed: Mutex::default(),
            changed: watch::channel(0).0,
            client,
            workspace_id,
        })
    }

    /// Follows the server's feed until `stop`: one long poll after another, pausing after a
    /// failure (1 s, doubling to 30 s), starting over at the server's head after a resync.
    pub async fn follow(self: Arc<Feed>, stop: tokio_util::sync::CancellationToken) {
        let mut backoff = Duration::from_secs(1);
        loop {
            let after = {
                let followed = self.followed.lock().expect("not poisoned");
                followed.since.map(|_| followed.head)
            };
            let mut input = json!({ "waitMs": UPSTREAM_WAIT_MS, "limit": MAX_READ });
            if let Some(after) = after {
                input["after"] = json!(after);
            }
            let page = tokio::select! {
                page = self.client.human(&self.workspace_id, HumanActionId::EventsRead, &input) => page,
                () = stop.cancelled() => return,
            };
            match page {
                Ok(page) => {
                    backoff = Duration::from_secs(1);
                    let busy = page["events"]
                        .as_array()
                        .is_some_and(|events| !events.is_empty() && events.len() < MAX_READ);
                    self.take(page);
                    if busy {
                        tokio::select! {
                            () = tokio::time::sleep(GATHER) => {}
                            () = stop.cancelled() => return,
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(code = %error.code, error = %error.message, "the event feed failed; following again later");
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = stop.cancelled() => return,
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Takes one upstream page into the buffer.
    fn take(&self, page: Value) {
        let cursor = page["cursor"].as_i64().unwrap_or(0);
        let mut followed = self.followed.lock().expect("not poisoned");
        if followed.since.is_none() || page["resync"].as_bool() == Some(true) {
            // A first read, or the server no longer has what followed our cursor: readers
            // older than this point are answered by the server (which says resync). The head
            // starts over there too (a server whose feed began again is behind the old one).
            followed.events.clear();
            followed.since = Some(cursor);
            followed.evicted = 0;
            followed.head = cursor;
        }
        for event in page["events"].as_array().into_iter().flatten() {
            if let Some(seq) = event["seq"].as_i64() {
                if followed.events.len() == BUFFER
                    && let Some((gone, _)) = followed.events.pop_front()
                {
                    followed.evicted = gone;
                }
                followed.events.push_back((seq, event.clone()));
            }
        }
        followed.head = cursor.max(followed.head);
        let head = followed.head;
        drop(followed);
        self.changed.send_replace(head);
    }

    /// The events after `after` (none, from the head, without one), waiting up to `wait` for one;
    /// `limit` at most. The answer has `events_read`'s shape.
    pub async fn read(
        &self,
        after: Option<i64>,
        wait: Duration,
        limit: usize,
    ) -> ActionResult<Value> {
        let limit = limit.clamp(1, MAX_READ);
        let Some(after) = after else {
            return self.ask_server(None, limit).await;
        };
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let ahead = match self.buffered(after, limit) {
                Some(Buffered::Page(page)) => return Ok(page),
                Some(Buffered::Nothing) => false,
                // The reader got its cursor from the server, past what the daemon has followed
                // yet: the daemon catches up before it answers, rather than sending the reader
                // to the server again at once.
                Some(Buffered::Ahead) => true,
                None => return self.ask_server(Some(after), limit).await,
            };
            // Nothing after the cursor yet: wait for the next change, or the deadline.
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                _ if ahead => return self.ask_server(Some(after), limit).await,
                _ => return Ok(json!({ "events": [], "cursor": after, "resync": false })),
            }
        }
    }

    /// What the buffer answers for `after`: a page, nothing yet, a cursor past the daemon's head,
    /// or `None` when the cursor is before what the buffer holds.
    fn buffered(&self, after: i64, limit: usize) -> Option<Buffered> {
        let followed = self.followed.lock().expect("not poisoned");
        let since = followed.since?;
        if after < since || after < followed.evicted {
            return None;
        }
        if after > followed.head {
            return Some(Buffered::Ahead);
        }
        let events: Vec<Value> = followed
            .events
            .iter()
            .filter(|(seq, _)| *seq > after)
            .take(limit)
            .map(|(_, event)| event.clone())
            .collect();
        if events.is_empty() {
            return Some(match after == followed.head {
                true => Buffered::Nothing,
                // Only events this person may not see came after it: the cursor moves past them.
                false => Buffered::Page(
                    json!({ "events": [], "cursor": followed.head, "resync": false }),
                ),
            });
        }
        let cursor = match events.len() == limit {
            true => events
                .last()
                .and_then(|e| e["seq"].as_i64())
                .unwrap_or(after),
            false => followed.head,
        };
        Some(Buffered::Page(
            json!({ "events": events, "cursor": cursor, "resync": false }),
        ))
    }

    /// The server's own answer, without waiting.
    async fn ask_server(&self, after: Option<i64>, limit: usize) -> ActionResult<Value> {
        let mut input = json!({ "limit": limit });
        if let Some(after) = after {
            input["after"] = json!(after);
        }
        self.client
            .human(&self.workspace_id, HumanActionId::EventsRead, &input)
            .await
    }
}

enum Buffered {
    Page(Value),
    Nothing,
    Ahead,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed() -> Arc<Feed> {
        // Never called: these tests read and fill the buffer only.
        let client = ServerClient::new("http://127.0.0.1:9", "dev_x.y".into(), None);
        Feed::new(Arc::new(client), "wsp_1".into())
    }

    fn page(seqs: &[i64], cursor: i64) -> Value {
        let events: Vec<Value> = seqs
            .iter()
            .map(|seq| json!({ "seq": seq, "kind": "message" }))
            .collect();
        json!({ "events": events, "cursor": cursor, "resync": false })
    }

    fn seqs(answer: Option<Buffered>) -> Option<(Vec<i64>, i64)> {
        match answer {
            Some(Buffered::Page(page)) => Some((
                page["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["seq"].as_i64().unwrap())
                    .collect(),
                page["cursor"].as_i64().unwrap(),
            )),
            _ => None,
        }
    }

    #[test]
    fn the_buffer_answers_what_follows_a_cursor_it_covers_and_no_other() {
        let feed = feed();
        assert!(
            feed.buffered(0, 100).is_none(),
            "nothing followed yet: the server answers"
        );
        feed.take(page(&[], 5));
        assert!(matches!(feed.buffered(5, 100), Some(Buffered::Nothing)));
        assert!(
            feed.buffered(4, 100).is_none(),
            "before the daemon followed: the server"
        );
        assert!(matches!(feed.buffered(7, 100), Some(Buffered::Ahead)));
        // Events 7 and 9 were this person's not to see: the cursor passes them.
        feed.take(page(&[6, 8], 9));
        assert_eq!(seqs(feed.buffered(5, 100)), Some((vec![6, 8], 9)));
        assert_eq!(
            seqs(feed.buffered(5, 1)),
            Some((vec![6], 6)),
            "a full page stops at its last"
        );
        assert_eq!(seqs(feed.buffered(8, 100)), Some((vec![], 9)));
        assert!(matches!(feed.buffered(9, 100), Some(Buffered::Nothing)));
    }

    #[test]
    fn an_evicted_cursor_and_a_resync_send_the_reader_to_the_server() {
        let feed = feed();
        feed.take(page(&[], 0));
        let all: Vec<i64> = (1..=BUFFER as i64 + 2).collect();
        feed.take(page(&all, BUFFER as i64 + 2));
        assert!(
            feed.buffered(1, 100).is_none(),
            "events 1 and 2 were let go"
        );
        assert_eq!(seqs(feed.buffered(2, 1)), Some((vec![3], 3)));
        // The server's feed began again: its head is behind the old one.
        feed.take(json!({ "events": [], "cursor": 2, "resync": true }));
        assert!(feed.buffered(1, 100).is_none());
        assert!(matches!(feed.buffered(2, 100), Some(Buffered::Nothing)));
        assert!(matches!(feed.buffered(50, 100), Some(Buffered::Ahead)));
    }
}
