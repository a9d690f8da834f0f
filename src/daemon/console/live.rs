//! `GET /live`: the person's changes as server-sent events, from the daemon's one feed
//! subscription (`daemon::feed`), each rendered as the page shows it.
//!
//! One stream per browser, not per tab: `console.js` lets one tab hold it (a Web Lock) and pass
//! every event to the others (a BroadcastChannel), since a browser opens at most six HTTP/1.1
//! connections to a host and a stream per tab would hang the seventh. The daemon serves at most
//! [`super::MAX_LIVE_STREAMS`] at once. Each event's `id` is the feed's cursor: a reconnecting
//! `EventSource` sends it back as `Last-Event-ID` and misses nothing the feed still keeps.
//!
//! A stream lives no longer than its session: before each batch is sent, the session is looked
//! up again, and a session signed out, expired or pushed out by newer ones ends the stream with
//! nothing more sent.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::pages::{delivery_html, message_html, names};
use super::refusal;
use super::session::Session;
use crate::daemon::state::DaemonState;

/// How long one read of the feed waits for a change.
const WAIT: Duration = Duration::from_secs(25);
/// How long a stream waits after the feed failed before it reads again.
const RETRY: Duration = Duration::from_secs(2);
/// Characters of a message shown in a notification.
const NOTIFY_CHARS: usize = 140;

struct Follow {
    state: DaemonState,
    /// The session's id, as its cookie carries it: looked up before each batch.
    session_id: String,
    csrf: String,
    cursor: Option<i64>,
    /// Sent `ready` (the first event, once the cursor is known).
    greeted: bool,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

#[derive(serde::Deserialize)]
pub struct After {
    /// The cursor a tab taking the stream over from another had last seen.
    after: Option<i64>,
}

pub async fn stream(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
    Query(query): Query<After>,
    headers: HeaderMap,
) -> Response {
    let Ok(permit) = state.console.live.clone().try_acquire_owned() else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many live streams",
            "Close some console windows; each browser needs one.",
        );
    };
    let cursor = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .or(query.after)
        .filter(|c| *c >= 0);
    let Some(session_id) = super::session_id(&headers) else {
        // `with_session` found the session by this cookie; without it there is none.
        return refusal(
            StatusCode::UNAUTHORIZED,
            "Signed out",
            "Run `agentteam open` to sign in again.",
        );
    };
    let stop = state.console.stop.clone();
    let follow = Follow {
        state,
        session_id,
        csrf: session.csrf,
        cursor,
        greeted: false,
        _permit: permit,
    };
    let events = futures_util::stream::unfold(follow, |mut follow| async move {
        let batch = next_batch(&mut follow).await;
        // Looked up after the batch was read (a read waits up to `WAIT`), right before it is
        // sent.
        let live = follow
            .state
            .console
            .logins
            .session(&follow.session_id)
            .is_some();
        live.then(|| (futures_util::stream::iter(batch), follow))
    })
    .flatten()
    .take_until(async move { stop.cancelled().await });
    Sse::new(events.map(Ok::<Event, Infallible>))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The next events to send: `ready` first (with the cursor the stream starts from), then the
/// feed's changes as they come.
async fn next_batch(follow: &mut Follow) -> Vec<Event> {
    let feed = &follow.state.feed;
    let Some(after) = follow.cursor else {
        // From now: the feed's head.
        return match feed.read(None, Duration::ZERO, 1).await {
            Ok(page) => {
                let cursor = page["cursor"].as_i64().unwrap_or(0);
                follow.cursor = Some(cursor);
                follow.greeted = true;
                vec![ready(cursor)]
            }
            Err(error) => offline(&error).await,
        };
    };
    if !follow.greeted {
        follow.greeted = true;
        return vec![ready(after)];
    }
    let page = match feed.read(Some(after), WAIT, 100).await {
        Ok(page) => page,
        Err(error) => return offline(&error).await,
    };
    let cursor = page["cursor"].as_i64().unwrap_or(after);
    let mut out = Vec::new();
    if page["resync"] == json!(true) {
        out.push(Event::default().event("resync").data("{}"));
    }
    let events = page["events"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // A message, a reaction or a delivery is shown with its names: without them the cursor
    // stays where it is and the page is read again, rather than passed over.
    let names = if events
        .iter()
        .any(|e| e["kind"] != "approval" && e["kind"] != "task")
    {
        match names(&follow.state).await {
            Ok(names) => Some(names),
            Err(_) => {
                tracing::debug!("the console's live stream could not read the names it shows");
                return pause_offline().await;
            }
        }
    } else {
        None
    };
    for event in events {
        if let Some(shown) = shown(event, names.as_deref(), &follow.csrf) {
            out.push(
                Event::default()
                    .event("change")
                    .id(event["seq"].as_i64().unwrap_or(cursor).to_string())
                    .data(shown.to_string()),
            );
        }
    }
    follow.cursor = Some(cursor);
    if !out.is_empty() || cursor != after {
        // The page's cursor, past what the person may not see: a reconnect resumes there.
        out.push(
            Event::default()
                .event("cursor")
                .id(cursor.to_string())
                .data("{}"),
        );
    }
    out
}

fn ready(cursor: i64) -> Event {
    Event::default()
        .event("ready")
        .id(cursor.to_string())
        .data(json!({ "cursor": cursor }).to_string())
}

/// The feed failed: the page is told, and the stream reads again after a pause.
async fn offline(error: &crate::contract::ActionError) -> Vec<Event> {
    tracing::debug!(error = %error.message, "the console's live stream could not read the feed");
    pause_offline().await
}

/// A read failed: the page is told, and the stream reads again from the same cursor after a
/// pause.
async fn pause_offline() -> Vec<Event> {
    tokio::time::sleep(RETRY).await;
    vec![Event::default().event("offline").data("{}")]
}

/// One feed event as the console's pages take it.
fn shown(event: &Value, names: Option<&super::site::Names>, csrf: &str) -> Option<Value> {
    let kind = event["kind"].as_str()?;
    let seq = event["seq"].as_i64()?;
    match kind {
        "message" | "reaction" => {
            let message = &event["message"];
            let names = names?;
            let author = message["authorId"].as_str().unwrap_or_default();
            let text: String = message["content"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(NOTIFY_CHARS)
                .collect();
            Some(json!({
                "seq": seq,
                "kind": kind,
                "target": event["target"],
                "id": message["id"],
                "mine": author == names.me,
                "html": message_html(message, &[], names, csrf),
                "title": format!("{} wrote", names.of(author)),
                "body": text,
            }))
        }
        "approval" => {
            let approval = &event["approval"];
            Some(json!({
                "seq": seq,
                "kind": kind,
                "id": approval["id"],
                "status": approval["status"],
                "title": "An approval waits for you",
                "body": approval["title"],
            }))
        }
        "delivery" => {
            let delivery = &event["delivery"];
            Some(json!({
                "seq": seq,
                "kind": kind,
                "target": delivery["target"],
                "id": delivery["id"],
                "messageId": delivery["messageId"],
                "html": delivery_html(delivery, names?, csrf),
            }))
        }
        "task" => Some(json!({
            "seq": seq,
            "kind": kind,
            "target": event["target"],
            "id": event["taskId"],
        })),
        _ => None,
    }
}
