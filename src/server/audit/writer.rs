//! The audit queue and its one writer: a bounded queue a request waits on for room, at most
//! [`WAIT`], and a task that commits what it gathered over one [`LINGER`] window (or a [`BATCH`])
//! in one transaction, counting what it committed, lost, and how late.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::{BATCH, LINGER, QUEUE, WAIT};
use crate::server::store::{AuditRecord, Store};

pub(super) fn elapsed_us(started: std::time::Instant) -> i64 {
    started.elapsed().as_micros().min(i64::MAX as u128) as i64
}

/// The queue into the audit store.
#[derive(Clone)]
pub struct Auditor {
    pub(super) queue: mpsc::Sender<AuditRecord>,
    /// Where a write's record goes at once when the queue has no room in time.
    pub(super) store: Option<Store>,
    /// Told when a batch's worth is queued: the writer then stops gathering early.
    full: Arc<Notify>,
    dropped: Arc<AtomicU64>,
    pub(super) counts: Arc<Counts>,
    stop: CancellationToken,
    writer: Arc<tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Auditor {
    /// Starts the writer task over `store`.
    pub fn start(store: Store) -> Auditor {
        #[cfg(debug_assertions)]
        if let Some(capacity) = fault::stalled_capacity() {
            return Auditor::with_queue(store, capacity, true);
        }
        Auditor::with_queue(store, QUEUE, false)
    }

    /// A queue of `capacity` and its writer; a `stalled` writer takes nothing until it is stopped
    /// (a test's fault point).
    fn with_queue(store: Store, capacity: usize, stalled: bool) -> Auditor {
        let (mut auditor, receiver) = Auditor::unstarted(capacity);
        auditor.store = Some(store.clone());
        let writer = tokio::spawn(write(
            store,
            receiver,
            auditor.full.clone(),
            Tally {
                dropped: auditor.dropped.clone(),
                counts: auditor.counts.clone(),
            },
            auditor.stop.clone(),
            stalled,
        ));
        *auditor.writer.try_lock().expect("new") = Some(writer);
        auditor
    }

    fn unstarted(capacity: usize) -> (Auditor, mpsc::Receiver<AuditRecord>) {
        let (queue, receiver) = mpsc::channel(capacity);
        let auditor = Auditor {
            queue,
            store: None,
            full: Arc::new(Notify::new()),
            dropped: Arc::new(AtomicU64::new(0)),
            counts: Arc::default(),
            stop: CancellationToken::new(),
            writer: Arc::new(tokio::sync::Mutex::new(None)),
        };
        (auditor, receiver)
    }

    /// Queues `record`, waiting for room at most [`WAIT`]; gives it back when there was none.
    pub async fn admit(&self, record: AuditRecord) -> Result<(), AuditRecord> {
        let record = match self.queue.try_send(record) {
            Ok(()) => {
                self.queued();
                return Ok(());
            }
            Err(mpsc::error::TrySendError::Closed(record)) => return Err(record),
            Err(mpsc::error::TrySendError::Full(record)) => record,
        };
        self.counts.waited.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        // The writer was told a batch is waiting: it takes one at once.
        self.full.notify_one();
        let room = tokio::time::timeout(WAIT, self.queue.reserve()).await;
        self.counts
            .wait_us
            .fetch_add(elapsed_us(started) as u64, Ordering::Relaxed);
        match room {
            Ok(Ok(permit)) => {
                permit.send(record);
                self.queued();
                Ok(())
            }
            _ => {
                self.counts.refused.fetch_add(1, Ordering::Relaxed);
                Err(record)
            }
        }
    }

    /// Counts a record just put into the queue, and wakes the writer when a batch's worth waits.
    /// Called before the request's answer leaves, so a client that has its answer finds the
    /// record counted in `queued` until it is committed.
    pub(super) fn queued(&self) {
        self.counts.admitted.fetch_add(1, Ordering::Relaxed);
        if self.queue.max_capacity() - self.queue.capacity() >= BATCH {
            self.full.notify_one();
        }
    }

    /// Writes `record` at once, beside the queue: a write's record that found no room in time.
    pub(super) async fn write_now(&self, record: AuditRecord) {
        self.counts.written_now.fetch_add(1, Ordering::Relaxed);
        let written = match &self.store {
            Some(store) => store.insert_audit(std::slice::from_ref(&record)).await,
            None => Ok(()),
        };
        if let Err(error) = written {
            tracing::error!(%error, action = %record.action, "a write's audit record cannot be written; it is lost");
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records lost since start (a failed write).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// What the queue did since start, and how many of its records are not committed yet: in
    /// the queue, or in the batch the writer is committing (the writer's lag).
    pub fn stats(&self) -> serde_json::Value {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        // The writer's counts first: a record counted done is never also counted admitted later.
        let done = read(&self.counts.appended) + read(&self.counts.discarded);
        serde_json::json!({
            "queued": read(&self.counts.admitted).saturating_sub(done),
            "waited": read(&self.counts.waited),
            "waitedMs": read(&self.counts.wait_us) / 1000,
            "refused": read(&self.counts.refused),
            "writtenAtOnce": read(&self.counts.written_now),
            "inTransaction": read(&self.counts.in_transaction),
            "recorded": read(&self.counts.appended)
                + read(&self.counts.written_now)
                + read(&self.counts.in_transaction),
            "maxLagMs": read(&self.counts.max_lag_ms),
        })
    }

    /// Writes what is queued and stops the writer (orderly shutdown).
    pub async fn close(&self) {
        self.stop.cancel();
        if let Some(writer) = self.writer.lock().await.take() {
            let _ = writer.await;
        }
    }
}

/// What the queue did since start.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Requests that found the queue full and waited for room.
    waited: AtomicU64,
    /// Their waits, in microseconds, summed.
    wait_us: AtomicU64,
    /// Requests answered with an error because their record found no room in time.
    refused: AtomicU64,
    /// Writes' records written beside the queue, having found no room in time.
    written_now: AtomicU64,
    /// Runtime mutations' records, committed in the mutation's own transaction.
    pub(super) in_transaction: AtomicU64,
    /// Records put into the queue.
    admitted: AtomicU64,
    /// Records the writer committed.
    appended: AtomicU64,
    /// Records of the queue the writer could not commit (lost, and counted in `dropped` too).
    discarded: AtomicU64,
    /// The longest a record of the queue waited, from its request's start to its commit, in
    /// milliseconds.
    max_lag_ms: AtomicU64,
}

/// What the writer counts: records lost, and those it committed with their lag.
struct Tally {
    dropped: Arc<AtomicU64>,
    counts: Arc<Counts>,
}

/// The writer: one batch at a time, until stopped; then what is still queued.
async fn write(
    store: Store,
    mut receiver: mpsc::Receiver<AuditRecord>,
    full: Arc<Notify>,
    tally: Tally,
    stop: CancellationToken,
    stalled: bool,
) {
    let mut batch = Vec::new();
    if stalled {
        stop.cancelled().await;
    }
    while gather(&mut receiver, &full, &stop, &mut batch).await {
        append(&store, &batch, &tally).await;
        batch.clear();
    }
    receiver.close();
    while let Ok(record) = receiver.try_recv() {
        batch.push(record);
        if batch.len() == BATCH {
            append(&store, &std::mem::take(&mut batch), &tally).await;
        }
    }
    append(&store, &batch, &tally).await;
}

/// The next batch into `batch`: the first record to come, and what is queued once [`LINGER`] has
/// passed since, or a batch's worth is queued, or the writer is stopped (up to [`BATCH`]).
/// `false` when stopped (or closed) before a first record came.
///
/// The writer sleeps through the window instead of taking each record as it comes: a wake-up
/// per record cost a busy server more than writing the record.
async fn gather(
    receiver: &mut mpsc::Receiver<AuditRecord>,
    full: &Notify,
    stop: &CancellationToken,
    batch: &mut Vec<AuditRecord>,
) -> bool {
    let first = tokio::select! {
        record = receiver.recv() => match record {
            Some(record) => record,
            None => return false,
        },
        () = stop.cancelled() => return false,
    };
    batch.push(first);
    tokio::select! {
        () = tokio::time::sleep(LINGER) => {}
        () = full.notified() => {}
        () = stop.cancelled() => {}
    }
    while batch.len() < BATCH {
        let Ok(record) = receiver.try_recv() else {
            break;
        };
        batch.push(record);
    }
    true
}

async fn append(store: &Store, batch: &[AuditRecord], tally: &Tally) {
    if let Err(error) = store.insert_audit(batch).await {
        tracing::warn!(%error, records = batch.len(), "cannot write audit records; they are dropped");
        tally
            .dropped
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        tally
            .counts
            .discarded
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        return;
    }
    let counts = &tally.counts;
    counts
        .appended
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    if let Some(oldest) = batch.iter().map(|record| record.at).min() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as i64);
        let lag = (now - oldest).max(0) as u64;
        counts.max_lag_ms.fetch_max(lag, Ordering::Relaxed);
    }
}

/// A test-only fault point of debug builds: `AGENTTEAM_FAULT_AUDIT_STALL=<records>` gives the
/// audit queue room for that many records and a writer that takes none of them until the server
/// stops (a writer fallen behind, at once).
#[cfg(debug_assertions)]
mod fault {
    pub fn stalled_capacity() -> Option<usize> {
        std::env::var("AGENTTEAM_FAULT_AUDIT_STALL")
            .ok()?
            .parse()
            .ok()
            .filter(|capacity| *capacity > 0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn record(n: i64) -> AuditRecord {
        AuditRecord {
            id: format!("aud_{n:08}"),
            at: n,
            workspace_id: None,
            device_id: None,
            agent_id: None,
            verified: false,
            family: "operator".into(),
            action: "GET /admin/stats".into(),
            outcome: "ok".into(),
            key_hash: None,
            duration_us: 1,
        }
    }

    /// The queue's bound at its edge: the record past it waits for room, at most [`WAIT`], and
    /// is given back (counted as refused) when none came; room made in time takes it.
    #[tokio::test(start_paused = true)]
    async fn a_full_queue_waits_for_room_then_gives_the_record_back() {
        let (auditor, mut receiver) = Auditor::unstarted(2);
        auditor.admit(record(1)).await.unwrap();
        auditor.admit(record(2)).await.unwrap();
        let start = tokio::time::Instant::now();
        let refused = auditor.admit(record(3)).await.expect_err("no room came");
        assert_eq!(refused.at, 3);
        assert_eq!(start.elapsed(), WAIT);
        assert_eq!(auditor.stats()["refused"], 1);
        assert_eq!(auditor.stats()["queued"], 2);
        // Room made while it waits takes the record.
        let waiting = tokio::spawn({
            let auditor = auditor.clone();
            async move { auditor.admit(record(4)).await }
        });
        tokio::time::sleep(WAIT / 2).await;
        assert_eq!(receiver.try_recv().unwrap().at, 1);
        waiting.await.unwrap().unwrap();
        assert_eq!(receiver.try_recv().unwrap().at, 2);
        assert_eq!(receiver.try_recv().unwrap().at, 4);
        assert_eq!(auditor.stats()["waited"], 2);
        assert_eq!(auditor.stats()["refused"], 1);
        assert_eq!(auditor.dropped(), 0);
    }

    /// A batch is what came in the window after its first record (time is paused: the window
    /// passes when nothing else can happen).
    #[tokio::test(start_paused = true)]
    async fn a_batch_is_what_the_window_gathered() {
        let (auditor, mut receiver) = Auditor::unstarted(QUEUE);
        let stop = CancellationToken::new();
        for n in 0..3 {
            auditor.admit(record(n)).await.unwrap();
        }
        let start = tokio::time::Instant::now();
        let mut batch = Vec::new();
        assert!(gather(&mut receiver, &auditor.full, &stop, &mut batch).await);
        assert_eq!(batch.len(), 3);
        assert_eq!(start.elapsed(), LINGER);
    }

    /// A batch's worth queued ends the window at once, and a batch holds at most [`BATCH`].
    #[tokio::test(start_paused = true)]
    async fn a_full_batch_does_not_wait_for_the_window() {
        let (auditor, mut receiver) = Auditor::unstarted(QUEUE);
        let stop = CancellationToken::new();
        for n in 0..=BATCH as i64 {
            auditor.admit(record(n)).await.unwrap();
        }
        let start = tokio::time::Instant::now();
        let mut batch = Vec::new();
        assert!(gather(&mut receiver, &auditor.full, &stop, &mut batch).await);
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(batch.len(), BATCH);
        assert_eq!(batch.last().unwrap().at, BATCH as i64 - 1);
        batch.clear();
        assert!(gather(&mut receiver, &auditor.full, &stop, &mut batch).await);
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].at, BATCH as i64);
    }

    /// Stopped, the writer gathers no further batch once the queue is empty.
    #[tokio::test(start_paused = true)]
    async fn a_stopped_writer_gathers_nothing_more() {
        let (auditor, mut receiver) = Auditor::unstarted(QUEUE);
        let stop = CancellationToken::new();
        stop.cancel();
        let mut batch = Vec::new();
        assert!(!gather(&mut receiver, &auditor.full, &stop, &mut batch).await);
        assert!(batch.is_empty());
    }

    /// What the writer committed is counted as recorded, with the longest any of its records
    /// waited from its request's start: every queued record, once the writer has stopped.
    #[tokio::test]
    async fn the_writer_counts_what_it_committed_and_its_lag() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        let store = Store::open(&url).await.unwrap();
        let auditor = Auditor::with_queue(store.clone(), 8, false);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        for n in 0..3 {
            auditor.admit(record(now - 5_000 + n)).await.unwrap();
        }
        auditor.close().await;
        let stats = auditor.stats();
        assert_eq!(stats["recorded"], 3, "{stats}");
        assert_eq!(stats["queued"], 0, "{stats}");
        let lag = stats["maxLagMs"].as_u64().unwrap();
        assert!((5_000..60_000).contains(&lag), "{stats}");
        assert_eq!(auditor.dropped(), 0);
    }

    /// A record counts as queued from the moment it is in the queue until the writer's commit
    /// of it is done, taken into the writer's batch included: a client reading `queued` at 0
    /// finds every record of its answered requests committed (or counted lost).
    #[tokio::test]
    async fn a_record_is_queued_until_its_commit_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
        let store = Store::open(&url).await.unwrap();
        let (auditor, mut receiver) = Auditor::unstarted(8);
        let tally = Tally {
            dropped: auditor.dropped.clone(),
            counts: auditor.counts.clone(),
        };
        auditor.admit(record(1)).await.unwrap();
        auditor.admit(record(2)).await.unwrap();
        let batch = vec![
            receiver.recv().await.unwrap(),
            receiver.recv().await.unwrap(),
        ];
        assert_eq!(auditor.stats()["queued"], 2, "taken, not committed");
        append(&store, &batch, &tally).await;
        let stats = auditor.stats();
        assert_eq!(
            (stats["queued"].as_u64(), stats["recorded"].as_u64()),
            (Some(0), Some(2))
        );
        // A batch the writer could not commit is done too: lost, and counted so.
        auditor.admit(record(3)).await.unwrap();
        let lost = vec![receiver.recv().await.unwrap()];
        store.close().await;
        append(&store, &lost, &tally).await;
        let stats = auditor.stats();
        assert_eq!(
            (stats["queued"].as_u64(), auditor.dropped()),
            (Some(0), 1),
            "{stats}"
        );
    }
}
