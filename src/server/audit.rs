//! The audit trail: one record per runtime request and operator action (time, workspace, device,
//! agent, route family, action, outcome code, idempotency-key hash, duration), never an input
//! value, message content or credential.
//!
//! The front middleware ([`recorded`]) builds the record after the answer and hands it to a
//! bounded queue ([`QUEUE`] records): a full queue drops the record and counts it (`auditDropped`
//! in `/admin/stats`), so auditing never blocks a request. One writer task gathers records for
//! [`LINGER`] after the first, or until [`BATCH`] are queued, and appends up to [`BATCH`] in one
//! transaction (group commit). Retention is by age and by count ([`RETENTION`], [`MAX_RECORDS`]),
//! applied by the scheduler pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::store::{AuditRecord, Clock, Store, new_id};

/// Records waiting for the writer, at most.
pub const QUEUE: usize = 4096;
/// Records per write, at most.
pub const BATCH: usize = 1024;
/// How long the writer gathers records after the first of a batch: one commit (one fsync on
/// SQLite) per window instead of one per handful of requests.
pub const LINGER: Duration = Duration::from_millis(100);
/// How long records are kept.
pub const RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// How many records are kept, at most (the oldest go first).
pub const MAX_RECORDS: i64 = 1_000_000;
/// The largest error answer read for its code (error envelopes are small).
const MAX_ERROR_BODY: usize = 64 * 1024;

tokio::task_local! {
    /// What the handler established about the caller: the device it authenticated, or that the
    /// operator token matched.
    static CALLER: std::sync::Mutex<Established>;
}

#[derive(Debug, Default, Clone)]
struct Established {
    device_id: Option<String>,
    verified: bool,
}

/// Called by the runtime API once `device_id` authenticated for the route's workspace and agent.
pub fn device_verified(device_id: &str) {
    let _ = CALLER.try_with(|caller| {
        let mut caller = caller.lock().expect("not poisoned");
        caller.device_id = Some(device_id.to_string());
        caller.verified = true;
    });
}

/// Called by the operator API once the operator token matched.
pub fn operator_verified() {
    let _ = CALLER.try_with(|caller| caller.lock().expect("not poisoned").verified = true);
}

/// The queue into the audit store.
#[derive(Clone)]
pub struct Auditor {
    queue: mpsc::Sender<AuditRecord>,
    /// Told when a batch's worth is queued: the writer then stops gathering early.
    full: Arc<Notify>,
    dropped: Arc<AtomicU64>,
    stop: CancellationToken,
    writer: Arc<tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Auditor {
    /// Starts the writer task over `store`.
    pub fn start(store: Store) -> Auditor {
        Auditor::with_queue(store, QUEUE)
    }

    fn with_queue(store: Store, capacity: usize) -> Auditor {
        let (auditor, receiver) = Auditor::unstarted(capacity);
        let writer = tokio::spawn(write(
            store,
            receiver,
            auditor.full.clone(),
            auditor.dropped.clone(),
            auditor.stop.clone(),
        ));
        *auditor.writer.try_lock().expect("new") = Some(writer);
        auditor
    }

    fn unstarted(capacity: usize) -> (Auditor, mpsc::Receiver<AuditRecord>) {
        let (queue, receiver) = mpsc::channel(capacity);
        let auditor = Auditor {
            queue,
            full: Arc::new(Notify::new()),
            dropped: Arc::new(AtomicU64::new(0)),
            stop: CancellationToken::new(),
            writer: Arc::new(tokio::sync::Mutex::new(None)),
        };
        (auditor, receiver)
    }

    /// Queues `record`; a full queue drops it and counts it.
    pub fn record(&self, record: AuditRecord) {
        if self.queue.try_send(record).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        } else if self.queue.max_capacity() - self.queue.capacity() >= BATCH {
            self.full.notify_one();
        }
    }

    /// Records dropped since start (queue full, or a failed write).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes what is queued and stops the writer (orderly shutdown).
    pub async fn close(&self) {
        self.stop.cancel();
        if let Some(writer) = self.writer.lock().await.take() {
            let _ = writer.await;
        }
    }
}

/// The writer: one batch at a time, until stopped; then what is still queued.
async fn write(
    store: Store,
    mut receiver: mpsc::Receiver<AuditRecord>,
    full: Arc<Notify>,
    dropped: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    let mut batch = Vec::new();
    while gather(&mut receiver, &full, &stop, &mut batch).await {
        append(&store, &batch, &dropped).await;
        batch.clear();
    }
    receiver.close();
    while let Ok(record) = receiver.try_recv() {
        batch.push(record);
        if batch.len() == BATCH {
            append(&store, &std::mem::take(&mut batch), &dropped).await;
        }
    }
    append(&store, &batch, &dropped).await;
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

async fn append(store: &Store, batch: &[AuditRecord], dropped: &AtomicU64) {
    if let Err(error) = store.insert_audit(batch).await {
        tracing::warn!(%error, records = batch.len(), "cannot write audit records; they are dropped");
        dropped.fetch_add(batch.len() as u64, Ordering::Relaxed);
    }
}

/// The front middleware's part (`front.rs`): every request to a runtime or operator route is
/// recorded into `auditor`'s queue once `run` has answered it, timed by `clock`.
pub async fn recorded<F: Future<Output = Response>>(
    auditor: &Auditor,
    clock: &Clock,
    request: Request,
    run: impl FnOnce(Request) -> F,
) -> Response {
    // The path is split once, for the family, the action and the claimed ids.
    let path = request.uri().path();
    let segments = segments(path);
    let Some((family, action)) = classify_segments(request.method(), path, &segments) else {
        return run(request).await;
    };
    let (workspace_id, agent_id) = claimed_ids_of(&segments);
    let at = clock.now_ms();
    let started = std::time::Instant::now();
    let key_hash = request
        .headers()
        .get("idempotency-key")
        .map(|key| hex::encode(Sha256::digest(key.as_bytes())));
    let (response, established) = CALLER
        .scope(std::sync::Mutex::new(Established::default()), async move {
            let response = run(request).await;
            let established = CALLER.with(|caller| caller.lock().expect("not poisoned").clone());
            (response, established)
        })
        .await;
    let (response, outcome) = outcome(response).await;
    auditor.record(AuditRecord {
        id: new_id("aud", at),
        at,
        workspace_id,
        device_id: established.device_id,
        agent_id,
        verified: established.verified,
        family: family.to_string(),
        action,
        outcome,
        key_hash,
        duration_us: started.elapsed().as_micros().min(i64::MAX as u128) as i64,
    });
    response
}

/// A path's segments, after its leading slashes.
fn segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('/').split('/').collect()
}

/// The route family of a server path, in the server's own terms (`None`: not audited).
pub fn family(path: &str) -> Option<&'static str> {
    family_of(&segments(path))
}

/// [`family`] of a path's [`segments`].
fn family_of(segments: &[&str]) -> Option<&'static str> {
    match segments {
        ["runtime", "servers", _, "agents", _, "actions", ..] => Some("actions"),
        [
            "runtime",
            "servers",
            _,
            "agents",
            _,
            "tools" | "knowledge",
            ..,
        ] => Some("tools"),
        ["runtime", "servers", _, "agents", _, "ext", ..]
        | ["runtime", "servers", _, "extensions"] => Some("extensions"),
        ["admin", ..] => Some("operator"),
        _ => None,
    }
}

/// The family and action of an audited route: the action, tool or extension action, or the
/// operator route with its ids as `{id}` (what was done, not to which record).
#[cfg(test)]
fn classify(method: &Method, path: &str) -> Option<(&'static str, String)> {
    classify_segments(method, path, &segments(path))
}

/// [`classify`] of `path` split into its [`segments`].
fn classify_segments(
    method: &Method,
    path: &str,
    segments: &[&str],
) -> Option<(&'static str, String)> {
    let family = family_of(segments)?;
    let clip = |s: &str| s.chars().take(64).collect::<String>();
    let action = match (family, segments) {
        ("operator", _) => {
            let route: Vec<String> = segments
                .iter()
                .map(|s| {
                    if is_id(s) {
                        "{id}".to_string()
                    } else {
                        clip(s)
                    }
                })
                .collect();
            format!("{method} /{}", route.join("/"))
        }
        (_, [.., "extensions"]) => "definitions".into(),
        (_, [_, _, _, _, _, _, name]) => clip(name),
        (_, [_, _, _, _, _, _, first, second, ..]) => format!("{} {}", clip(first), clip(second)),
        _ => clip(path),
    };
    Some((family, action))
}

/// An opaque id segment: `<prefix>_<alphanumerics>`.
fn is_id(segment: &str) -> bool {
    segment.split_once('_').is_some_and(|(prefix, rest)| {
        (2..=4).contains(&prefix.len())
            && prefix.bytes().all(|b| b.is_ascii_lowercase())
            && !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// The workspace and agent the path names (claimed; `verified` says whether they were checked).
#[cfg(test)]
fn claimed_ids(path: &str) -> (Option<String>, Option<String>) {
    claimed_ids_of(&segments(path))
}

/// [`claimed_ids`] of a path's [`segments`].
fn claimed_ids_of(segments: &[&str]) -> (Option<String>, Option<String>) {
    let id = |s: &&str| is_id(s).then(|| s.to_string());
    match segments {
        ["runtime", "servers", workspace, "agents", agent, ..] => (id(workspace), id(agent)),
        ["runtime", "servers", workspace, ..] | ["admin", "workspaces", workspace, ..] => {
            (id(workspace), None)
        }
        _ => (None, None),
    }
}

/// `ok` for a success; otherwise the answer's error code (the answer itself is unchanged).
async fn outcome(response: Response) -> (Response, String) {
    let status = response.status();
    if status.is_success() {
        return (response, "ok".into());
    }
    let fallback = format!("http_{}", status.as_u16());
    // Only a body of known, small size is read (an error envelope); any other answer passes as is.
    let small = axum::body::HttpBody::size_hint(response.body())
        .exact()
        .is_some_and(|size| size <= MAX_ERROR_BODY as u64);
    if !small {
        return (response, fallback);
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return (Response::from_parts(parts, Body::empty()), fallback);
    };
    let code = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| {
            v.pointer("/error/code")
                .and_then(|c| c.as_str())
                .map(str::to_string)
        })
        .filter(|code| {
            code.len() <= 64 && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        })
        .unwrap_or(fallback);
    (Response::from_parts(parts, Body::from(bytes)), code)
}

#[cfg(test)]
mod tests {
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

    /// The queue's bound at its edge: the record past it is dropped and counted, never waited for.
    #[test]
    fn a_full_queue_drops_and_counts_without_blocking() {
        let (auditor, mut receiver) = Auditor::unstarted(2);
        auditor.record(record(1));
        auditor.record(record(2));
        assert_eq!(auditor.dropped(), 0);
        auditor.record(record(3));
        assert_eq!(auditor.dropped(), 1);
        assert_eq!(receiver.try_recv().unwrap().at, 1);
        auditor.record(record(4));
        assert_eq!(auditor.dropped(), 1);
        assert_eq!(receiver.try_recv().unwrap().at, 2);
        assert_eq!(receiver.try_recv().unwrap().at, 4);
    }

    /// A batch is what came in the window after its first record (time is paused: the window
    /// passes when nothing else can happen).
    #[tokio::test(start_paused = true)]
    async fn a_batch_is_what_the_window_gathered() {
        let (auditor, mut receiver) = Auditor::unstarted(QUEUE);
        let stop = CancellationToken::new();
        for n in 0..3 {
            auditor.record(record(n));
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
            auditor.record(record(n));
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

    #[test]
    fn routes_name_their_family_and_action_never_an_id() {
        let post = Method::POST;
        assert_eq!(
            classify(
                &post,
                "/runtime/servers/wsp_01ABCDEFGH/agents/agt_01ABCDEFGH/actions/task/create"
            ),
            Some(("actions", "task create".into()))
        );
        assert_eq!(
            classify(
                &post,
                "/runtime/servers/wsp_01ABCDEFGH/agents/agt_01ABCDEFGH/tools/message_send"
            ),
            Some(("tools", "message_send".into()))
        );
        assert_eq!(
            classify(
                &post,
                "/admin/workspaces/wsp_01ABCDEFGH/channels/chn_0123456789/members"
            ),
            Some((
                "operator",
                "POST /admin/workspaces/{id}/channels/{id}/members".into()
            ))
        );
        assert_eq!(classify(&post, "/elsewhere"), None);
        assert_eq!(
            claimed_ids("/runtime/servers/wsp_01ABCDEFGH/agents/agt_01ABCDEFGH/tools/x"),
            (Some("wsp_01ABCDEFGH".into()), Some("agt_01ABCDEFGH".into()))
        );
        assert_eq!(
            claimed_ids("/runtime/servers/not an id/agents/x/tools/y"),
            (None, None)
        );
    }
}
