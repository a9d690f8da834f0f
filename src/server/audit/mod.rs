//! The audit trail: one record per runtime request and operator action (time, workspace, device,
//! agent, route family, action, outcome code, idempotency-key hash, duration), never an input
//! value, message content or credential.
//!
//! No write is served without its record. A write's record is written in the same transaction
//! as its effects, a runtime mutation's by [`write_in_transaction`] (from `runtime_call`), an
//! operator write's by the middleware, which runs the handler in that transaction
//! ([`operator_write`]): if the record cannot be written, the write does not commit. Every other
//! record (reads, refusals, an extension's call, whose effect is the provider's) is built by the
//! front middleware ([`recorded`]) after the answer and handed to a bounded queue ([`QUEUE`]
//! records). When the
//! queue is full, the request waits for room, at most [`WAIT`]; past it a read or a refusal is
//! answered with an error of its own (the server could not record it), never served unaudited,
//! and a write whose effect may already be committed has its record written at once, beside the
//! queue. The waits, the refusals and the queue's depth are in `/admin/stats`. One writer task
//! gathers records for [`LINGER`] after the first, or until [`BATCH`] are queued, and appends up
//! to [`BATCH`] in one transaction (group commit): a crash loses at most the queued records of
//! one window, none of a committed write. Retention is by age and by count
//! ([`RETENTION`], [`MAX_RECORDS`]), applied by the scheduler pass.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::store::{AuditRecord, Clock, Store, StoreError, new_id};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::wire;

mod writer;

pub use writer::Auditor;
use writer::elapsed_us;

/// Records waiting for the writer, at most.
pub const QUEUE: usize = 4096;
/// Records per write, at most.
pub const BATCH: usize = 1024;
/// How long a request waits for room in a full queue before it is refused.
pub const WAIT: Duration = Duration::from_secs(2);
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
    /// The request asks for an effect: once answered, its record may not be refused.
    mutation: bool,
    /// Its record was committed with its effects: the queue gets none.
    written: bool,
    /// The record as the middleware knows it before the handler runs, and when it started.
    template: Option<(AuditRecord, std::time::Instant)>,
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

/// Called by a runtime route whose request asks for an effect.
pub fn mutation() {
    let _ = CALLER.try_with(|caller| caller.lock().expect("not poisoned").mutation = true);
}

/// Inside a mutation's transaction, just before it commits: writes this request's record there
/// (outcome `ok`, its time so far), so that the effects and their record commit together or not
/// at all. Call [`committed`] once the transaction has. Nothing outside an audited request.
pub async fn write_in_transaction(store: &Store) -> Result<(), StoreError> {
    let record = CALLER
        .try_with(|caller| {
            let caller = caller.lock().expect("not poisoned");
            caller.template.clone().map(|(mut record, started)| {
                record.device_id = caller.device_id.clone();
                record.verified = caller.verified;
                record.duration_us = elapsed_us(started);
                record
            })
        })
        .ok()
        .flatten();
    match record {
        Some(record) => store.insert_audit(std::slice::from_ref(&record)).await,
        None => Ok(()),
    }
}

/// The transaction that [`write_in_transaction`] wrote into has committed.
pub fn committed() {
    let _ = CALLER.try_with(|caller| caller.lock().expect("not poisoned").written = true);
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
    // An operator's write is known by its method; a runtime route says so itself ([`mutation`]).
    let writes = family == "operator" && request.method() != Method::GET;
    let template = AuditRecord {
        id: new_id("aud", at),
        at,
        workspace_id,
        device_id: None,
        agent_id,
        verified: false,
        family: family.to_string(),
        action,
        outcome: "ok".into(),
        key_hash,
        duration_us: 0,
    };
    let caller = Established {
        mutation: writes,
        template: Some((template, started)),
        ..Established::default()
    };
    if writes && let Some(store) = &auditor.store {
        return Box::pin(operator_write(auditor, store, caller, request, run)).await;
    }
    let (response, established) = CALLER
        .scope(std::sync::Mutex::new(caller), async move {
            let response = run(request).await;
            let established =
                CALLER.with(|caller| std::mem::take(&mut *caller.lock().expect("not poisoned")));
            (response, established)
        })
        .await;
    if established.written {
        auditor
            .counts
            .in_transaction
            .fetch_add(1, Ordering::Relaxed);
        return response;
    }
    let (response, outcome) = outcome(response).await;
    let Some((mut record, _)) = established.template else {
        return response;
    };
    record.device_id = established.device_id;
    record.verified = established.verified;
    record.outcome = outcome;
    record.duration_us = elapsed_us(started);
    // The common case queues at once; the rest (a wait, a write) is boxed, so that every
    // request's future does not carry the store's insert and the wait in its own.
    match auditor.queue.try_send(record) {
        Ok(()) => {
            auditor.queued();
            response
        }
        Err(
            mpsc::error::TrySendError::Full(record) | mpsc::error::TrySendError::Closed(record),
        ) => Box::pin(unqueued(auditor, record, established.mutation, response)).await,
    }
}

/// An operator's write: the handler runs inside one transaction. A success commits it with the
/// request's record (its outcome and its time so far) as the transaction's last statement, so that
/// the write's effects and its record commit together or not at all; if the record cannot be
/// written, nothing commits and the answer says so. A refusal or a failure leaves nothing behind,
/// as a runtime write's does: its transaction is rolled back and its record queued as a
/// refusal's.
async fn operator_write<F: Future<Output = Response>>(
    auditor: &Auditor,
    store: &Store,
    caller: Established,
    request: Request,
    run: impl FnOnce(Request) -> F,
) -> Response {
    let answered = store
        .atomically(|| async {
            let (response, established) = CALLER
                .scope(std::sync::Mutex::new(caller), async move {
                    let response = run(request).await;
                    let established = CALLER
                        .with(|caller| std::mem::take(&mut *caller.lock().expect("not poisoned")));
                    (response, established)
                })
                .await;
            let applied = response.status().is_success();
            let (response, outcome) = outcome(response).await;
            let Some((mut record, started)) = established.template else {
                return Ok(((response, None), applied));
            };
            record.verified = established.verified;
            record.outcome = outcome;
            record.duration_us = elapsed_us(started);
            if !applied {
                return Ok(((response, Some(record)), false));
            }
            store.insert_audit(std::slice::from_ref(&record)).await?;
            Ok(((response, None), true))
        })
        .await;
    match answered {
        Ok((response, None)) => {
            auditor
                .counts
                .in_transaction
                .fetch_add(1, Ordering::Relaxed);
            response
        }
        Ok((response, Some(record))) => match auditor.queue.try_send(record) {
            Ok(()) => {
                auditor.queued();
                response
            }
            Err(
                mpsc::error::TrySendError::Full(record) | mpsc::error::TrySendError::Closed(record),
            ) => Box::pin(unqueued(auditor, record, false, response)).await,
        },
        Err(error) => wire::error_response(&super::failure::saying(
            "the server could not record this write; nothing of it was committed, and it may be sent again",
            format_args!(
                "an operator write's audit record cannot be written; the write is rolled back: {error}"
            ),
        )),
    }
}

/// A request whose record found the queue full: it waits for room ([`Auditor::admit`]); without
/// it, a write (`mutation`) has its record written at once and keeps its `response`, anything
/// else is refused.
async fn unqueued(
    auditor: &Auditor,
    record: AuditRecord,
    mutation: bool,
    response: Response,
) -> Response {
    let Err(record) = auditor.admit(record).await else {
        return response;
    };
    if mutation {
        // Its effect may be committed already: its record is written now, never refused.
        auditor.write_now(record).await;
        return response;
    }
    tracing::warn!(action = %record.action, "the audit queue had no room in time; the request is refused");
    wire::error_response(&unrecorded())
}

/// The answer to a request whose record found no room in the audit queue in time.
pub fn unrecorded() -> ActionError {
    ActionError::new(
        ErrorCode::AdmissionLimited,
        "the server could not record this request in its audit trail in time, so it did not answer it",
    )
    .with_next("retry later")
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
        ["human", "servers", _, "actions", ..] => Some("human"),
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
        ("human", [_, _, _, _, name]) => clip(name),
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
        ["runtime", "servers", workspace, ..]
        | ["admin", "workspaces", workspace, ..]
        | ["human", "servers", workspace, ..] => (id(workspace), None),
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
        assert_eq!(
            classify(
                &post,
                "/human/servers/wsp_01ABCDEFGH/actions/approval_decide"
            ),
            Some(("human", "approval_decide".into()))
        );
        assert_eq!(
            claimed_ids("/human/servers/wsp_01ABCDEFGH/actions/me"),
            (Some("wsp_01ABCDEFGH".into()), None)
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
