//! The console's conversation pages and the forms they post, and what every page shares. Each
//! page is one or a few calls of the server's human API as the daemon's person (membership is
//! the server's to check), rendered whole: a browser with scripts off reads every page and posts
//! every form.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Extension, Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{Value, json};

use super::html::{self, Nav, escape, url_part};
use super::markdown;
use super::session::Session;
use super::site::Names;
use super::{CsrfForm, refusal};
use crate::contract::HumanActionId as H;
use crate::daemon::state::DaemonState;

/// Messages on one page of a conversation.
const PAGE: u8 = 50;
/// How long the names of who wrote what are reused before they are read again.
const NAMES_FOR_MS: i64 = 5_000;
/// Pages of agents read for names (100 each).
const MAX_AGENT_PAGES: usize = 10;

/// One human API call as the daemon's person; a refusal page when it fails.
pub(super) async fn call(state: &DaemonState, action: H, input: Value) -> Result<Value, Response> {
    state
        .server_client
        .human(&state.identity.workspace_id, action, &input)
        .await
        .map_err(|error| {
            let status = crate::wire::status_for(error.code);
            refusal(status, "Not possible", &error.message)
        })
}

/// A request id for one write of a form: the same form posted twice is one change.
pub(super) fn request_id() -> String {
    crate::daemon::auth::files::random_name("con-")
}

/// The names, read at most every few seconds.
pub(super) async fn names(state: &DaemonState) -> Result<Arc<Names>, Response> {
    let now = state.clock.now_ms();
    if let Some((at, names)) = state.console.names.lock().expect("not poisoned").as_ref()
        && now - at < NAMES_FOR_MS
    {
        return Ok(names.clone());
    }
    let me = call(state, H::Me, json!({})).await?;
    let mut by_id = HashMap::new();
    let mut agents = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_AGENT_PAGES {
        let mut input = json!({ "limit": 100 });
        if let Some(cursor) = &cursor {
            input["cursor"] = json!(cursor);
        }
        let page = call(state, H::AgentList, input).await?;
        for agent in page["agents"].as_array().into_iter().flatten() {
            let (Some(id), Some(handle)) = (
                agent["profile"]["agentId"].as_str(),
                agent["profile"]["handle"].as_str(),
            ) else {
                continue;
            };
            by_id.insert(id.to_string(), handle.to_string());
            agents.push((
                id.to_string(),
                handle.to_string(),
                agent["owned"].as_bool().unwrap_or(false),
            ));
        }
        cursor = page["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    let me_id = me["humanId"].as_str().unwrap_or_default().to_string();
    if let Some(handle) = me["handle"].as_str() {
        by_id.insert(me_id.clone(), format!("{handle} (you)"));
    }
    let names = Arc::new(Names::new(by_id, me_id, agents));
    *state.console.names.lock().expect("not poisoned") = Some((now, names.clone()));
    Ok(names)
}

pub(super) fn page(title: &str, nav: Nav, session: &Session, body: &str) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html::page(title, nav, &session.csrf, body),
    )
        .into_response()
}

/// A conversation's target as a person reads it.
fn shown_name(target: &str, name: &str) -> String {
    if target.starts_with("channel:") {
        format!("#{name}")
    } else if target.starts_with("dm:") {
        format!("@{name}")
    } else {
        name.to_string()
    }
}

#[derive(serde::Deserialize)]
pub struct Paged {
    cursor: Option<String>,
}

/// `GET /`: the person's channels and direct conversations, with unread counts.
pub async fn conversations(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
    Query(query): Query<Paged>,
) -> Response {
    let mut input = json!({ "limit": 100 });
    if let Some(cursor) = &query.cursor {
        input["cursor"] = json!(cursor);
    }
    let list = match call(&state, H::ConversationList, input).await {
        Ok(list) => list,
        Err(refused) => return refused,
    };
    let names = match names(&state).await {
        Ok(names) => names,
        Err(refused) => return refused,
    };
    let mut body = String::from("<ul class=\"conversations\">");
    for conversation in list["conversations"].as_array().into_iter().flatten() {
        let target = conversation["target"].as_str().unwrap_or_default();
        let name = conversation["name"].as_str().unwrap_or_default();
        let unread = conversation["unread"].as_i64().unwrap_or(0);
        let _ = write!(
            body,
            "<li data-target=\"{t}\"><a href=\"/c/{u}\">{n}</a> <span class=\"unread\" data-unread=\"{unread}\">{badge}</span>{last}</li>",
            t = escape(target),
            u = url_part(target),
            n = escape(&shown_name(target, name)),
            badge = if unread > 0 {
                format!("{unread} unread")
            } else {
                String::new()
            },
            last = conversation["lastMessageAt"]
                .as_str()
                .map(|at| format!(" <span class=\"when\">last {}</span>", html::time(at)))
                .unwrap_or_default(),
        );
    }
    body.push_str("</ul>");
    if let Some(next) = list["nextCursor"].as_str() {
        let _ = write!(
            body,
            "<p><a href=\"/?cursor={}\">More conversations</a></p>",
            url_part(next)
        );
    }
    // A direct conversation with any agent, opened (or found) by handle.
    if names.agents.is_empty() {
        body.push_str(
            "<h2>Write to an agent</h2><p class=\"empty\">No agent yet: add one with \
             <code>agentteam agent add NAME</code>.</p>",
        );
        return page("Conversations", Nav::Conversations, &session, &body);
    }
    let _ = write!(
        body,
        "<h2>Write to an agent</h2><form method=\"post\" action=\"/dm\" class=\"inline\">{}\
         <input type=\"hidden\" name=\"requestId\" value=\"{}\">\
         <label for=\"dm-handle\">Agent</label> <select id=\"dm-handle\" name=\"handle\">",
        html::csrf_field(&session.csrf),
        request_id()
    );
    for (_, handle, _) in &names.agents {
        let _ = write!(body, "<option value=\"{0}\">@{0}</option>", escape(handle));
    }
    body.push_str("</select> <button type=\"submit\">Open the conversation</button></form>");
    page("Conversations", Nav::Conversations, &session, &body)
}

/// `POST /dm` with `handle`: opens the direct conversation with that agent and goes there.
pub async fn dm(State(state): State<DaemonState>, form: CsrfForm) -> Response {
    let mut input = json!({ "handle": form.field("handle").unwrap_or_default() });
    if let Some(id) = form.field("requestId") {
        input["requestId"] = json!(id);
    }
    match call(&state, H::DmOpen, input).await {
        Ok(opened) => see_other(&format!(
            "/c/{}",
            url_part(opened["target"].as_str().unwrap_or_default())
        )),
        Err(refused) => refused,
    }
}

pub(super) fn see_other(location: &str) -> Response {
    Redirect::to(location).into_response()
}

/// What became of a person's message to an agent, under that message (a live region: the
/// stream replaces it as the delivery changes); one that did not reach an answer has a button
/// that asks for it again.
pub fn delivery_html(delivery: &Value, names: &Names, csrf: &str) -> String {
    let agent = names.of(delivery["agentId"].as_str().unwrap_or_default());
    let id = delivery["id"].as_str().unwrap_or_default();
    let state = delivery["state"].as_str().unwrap_or_default();
    let retry = if matches!(state, "interrupted" | "failed" | "expired") {
        format!(
            " <form class=\"inline\" method=\"post\" action=\"/c/{t}/retry\">{csrf}\
             <input type=\"hidden\" name=\"deliveryId\" value=\"{id}\">\
             <input type=\"hidden\" name=\"messageId\" value=\"{m}\">\
             <input type=\"hidden\" name=\"requestId\" value=\"{r}\">\
             <button type=\"submit\" aria-label=\"Ask {agent} again\">Ask again</button></form>",
            t = url_part(delivery["target"].as_str().unwrap_or_default()),
            csrf = html::csrf_field(csrf),
            id = escape(id),
            // One per state the delivery is shown in: a second click on the same button asks
            // once, and a later failure's button asks anew.
            r = escape(&format!(
                "retry-{id}-{}",
                delivery["updatedAt"].as_str().unwrap_or_default()
            )),
            m = escape(delivery["messageId"].as_str().unwrap_or_default()),
            agent = escape(&agent),
        )
    } else {
        String::new()
    };
    format!(
        "<div id=\"d-{id}\" class=\"delivery\" data-state=\"{state}\" role=\"status\">{said}{retry}</div>",
        id = escape(id),
        state = escape(state),
        said = escape(&crate::contract::delivery::said(delivery, &agent)),
    )
}

/// `POST /c/{target}/retry` with `deliveryId`: the person asks again for a delivery that did
/// not reach an answer, then back to the message.
pub async fn retry(
    State(state): State<DaemonState>,
    Path(target): Path<String>,
    form: CsrfForm,
) -> Response {
    let input = json!({
        "deliveryId": form.field("deliveryId").unwrap_or_default(),
        "requestId": form.field("requestId").map_or_else(request_id, str::to_string),
    });
    match call(&state, H::DeliveryRetry, input).await {
        Ok(_) => see_other(&format!(
            "/c/{}#m-{}",
            url_part(&target),
            url_part(form.field("messageId").unwrap_or_default())
        )),
        Err(refused) => refused,
    }
}

/// One message, as the conversation page and the live stream show it, with what became of it
/// for the agents it woke (`deliveries`, any order).
pub fn message_html(message: &Value, deliveries: &[Value], names: &Names, csrf: &str) -> String {
    let id = message["id"].as_str().unwrap_or_default();
    let target = message["target"].as_str().unwrap_or_default();
    let author = message["authorId"].as_str().unwrap_or_default();
    let mine = author == names.me;
    let mut out = format!(
        "<li id=\"m-{id}\" class=\"message{mine}\" data-id=\"{id}\" data-author=\"{author_id}\">\
         <p class=\"meta\"><strong class=\"author\">{author}</strong> {at}</p>\
         <div class=\"text\">{text}</div>",
        id = escape(id),
        mine = if mine { " mine" } else { "" },
        author_id = escape(author),
        author = escape(&names.of(author)),
        at = html::time(message["createdAt"].as_str().unwrap_or_default()),
        text = markdown::render(message["content"].as_str().unwrap_or_default()),
    );
    let attachments = message["attachments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !attachments.is_empty() {
        out.push_str("<ul class=\"attachments\" aria-label=\"Attachments\">");
        for attachment in &attachments {
            let _ = write!(
                out,
                "<li><a href=\"/attachments/{u}\" download>{name}</a> <span class=\"when\">({kind}, {size})</span></li>",
                u = url_part(attachment["id"].as_str().unwrap_or_default()),
                name = escape(attachment["name"].as_str().unwrap_or("attachment")),
                kind = escape(attachment["mediaType"].as_str().unwrap_or_default()),
                size = html::size(attachment["size"].as_u64().unwrap_or(0)),
            );
        }
        out.push_str("</ul>");
    }
    for delivery in deliveries
        .iter()
        .filter(|d| d["messageId"] == message["id"])
    {
        out.push_str(&delivery_html(delivery, names, csrf));
    }
    let reactions = message["reactions"].as_array().cloned().unwrap_or_default();
    let _ = write!(out, "<ul class=\"reactions\" aria-label=\"Reactions\">");
    let react = |emoji: &str, mine: bool, label: &str| {
        format!(
            "<li><form method=\"post\" action=\"/c/{t}/react\">{csrf}\
             <input type=\"hidden\" name=\"messageId\" value=\"{id}\">\
             <input type=\"hidden\" name=\"emoji\" value=\"{e}\">\
             <input type=\"hidden\" name=\"op\" value=\"{op}\">\
             <input type=\"hidden\" name=\"requestId\" value=\"{r}\">\
             <button type=\"submit\" aria-pressed=\"{mine}\" aria-label=\"{aria}\">{label}</button></form></li>",
            t = url_part(target),
            csrf = html::csrf_field(csrf),
            id = escape(id),
            e = escape(emoji),
            op = if mine { "remove" } else { "add" },
            r = request_id(),
            aria = escape(&format!(
                "{} {emoji}{}",
                if mine { "Remove your" } else { "React with" },
                if label != emoji {
                    format!(" ({label})")
                } else {
                    String::new()
                }
            )),
            label = escape(label),
        )
    };
    let mut has_thumbs = false;
    for reaction in &reactions {
        let emoji = reaction["emoji"].as_str().unwrap_or_default();
        has_thumbs |= emoji == "👍";
        let count = reaction["count"].as_i64().unwrap_or(0);
        out.push_str(&react(
            emoji,
            reaction["mine"].as_bool().unwrap_or(false),
            &format!("{emoji} {count}"),
        ));
    }
    if !has_thumbs {
        out.push_str(&react("👍", false, "👍"));
    }
    out.push_str("</ul></li>");
    out
}

#[derive(serde::Deserialize)]
pub struct HistoryQuery {
    cursor: Option<String>,
    around: Option<String>,
}

/// The name a conversation goes by in the person's list (a thread by its kind).
async fn conversation_name(state: &DaemonState, target: &str) -> String {
    if target.starts_with("thread:") {
        return "Thread".into();
    }
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_AGENT_PAGES {
        let mut input = json!({ "limit": 100 });
        if let Some(cursor) = &cursor {
            input["cursor"] = json!(cursor);
        }
        let Ok(list) = call(state, H::ConversationList, input).await else {
            break;
        };
        if let Some(found) = list["conversations"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["target"] == json!(target))
        {
            return shown_name(target, found["name"].as_str().unwrap_or(target));
        }
        cursor = list["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    target.to_string()
}

/// `GET /c/{target}`: a conversation's newest page (or an older one, or the page around a
/// message), its threads, and the composer; reading the newest page marks it read.
pub async fn conversation(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
    Path(target): Path<String>,
    Query(query): Query<HistoryQuery>,
) -> Response {
    let mut input = json!({ "target": target, "limit": PAGE });
    if let Some(cursor) = &query.cursor {
        input["cursor"] = json!(cursor);
    }
    if let Some(around) = &query.around {
        input["around"] = json!(around);
    }
    // The feed's head before the page is read: the page's stream starts there, so a change
    // between this render and the stream's start is not missed.
    let head = state
        .feed
        .read(None, std::time::Duration::ZERO, 1)
        .await
        .ok()
        .and_then(|page| page["cursor"].as_i64());
    let history = match call(&state, H::HistoryRead, input).await {
        Ok(history) => history,
        Err(refused) => return refused,
    };
    let names = match names(&state).await {
        Ok(names) => names,
        Err(refused) => return refused,
    };
    let title = conversation_name(&state, &target).await;
    let messages = history["messages"].as_array().cloned().unwrap_or_default();
    let newest_page = query.cursor.is_none() && query.around.is_none();
    if newest_page && let Some(newest) = messages.first().and_then(|m| m["id"].as_str()) {
        // Best effort: a page that fails to mark itself read still shows.
        let _ = call(
            &state,
            H::ReadMark,
            json!({ "target": target, "messageId": newest, "requestId": request_id() }),
        )
        .await;
    }
    let mut body = format!(
        "<p class=\"links\"><a href=\"/c/{u}/work\">Tasks and reviews</a></p>",
        u = url_part(&target)
    );
    if let Some(next) = history["nextCursor"].as_str() {
        let _ = write!(
            body,
            "<p><a href=\"/c/{}?cursor={}\">Older messages</a></p>",
            url_part(&target),
            url_part(next)
        );
    }
    let _ = write!(
        body,
        "<ol id=\"messages\" class=\"messages\" data-target=\"{t}\" data-live=\"{live}\" data-cursor=\"{c}\" aria-label=\"Messages\">",
        t = escape(&target),
        live = newest_page,
        c = head.map(|c| c.to_string()).unwrap_or_default(),
    );
    // What became of the page's messages to the person's agents (best effort: a page shows
    // without them).
    let deliveries = call(
        &state,
        H::DeliveryList,
        json!({ "target": target, "limit": 100 }),
    )
    .await
    .ok()
    .and_then(|listed| listed["deliveries"].as_array().cloned())
    .unwrap_or_default();
    for message in messages.iter().rev() {
        body.push_str(&message_html(message, &deliveries, &names, &session.csrf));
    }
    body.push_str("</ol>");
    if messages.is_empty() {
        body.push_str("<p class=\"empty\">No messages yet.</p>");
    }
    if !newest_page {
        let _ = write!(
            body,
            "<p><a href=\"/c/{}\">Newest messages</a></p>",
            url_part(&target)
        );
    }
    let handles: Vec<&str> = names.agents.iter().map(|(_, h, _)| h.as_str()).collect();
    let _ = write!(
        body,
        "<form id=\"composer\" class=\"composer\" method=\"post\" action=\"/c/{u}/post\">{csrf}\
         <input type=\"hidden\" name=\"requestId\" value=\"{r}\">\
         <label for=\"content\">Message</label>\
         <textarea id=\"content\" name=\"content\" required maxlength=\"4000\" rows=\"3\" \
         data-handles=\"{handles}\" aria-describedby=\"composer-help\"></textarea>\
         <p id=\"composer-help\" class=\"help\">Markdown. Type @ and a name to mention an agent.</p>\
         <ul id=\"mentions\" role=\"listbox\" aria-label=\"Agents to mention\" hidden></ul>\
         <button type=\"submit\">Post</button></form>",
        u = url_part(&target),
        csrf = html::csrf_field(&session.csrf),
        r = request_id(),
        handles = escape(&handles.join(" ")),
    );
    if !target.starts_with("thread:") {
        let threads = call(
            &state,
            H::ThreadList,
            json!({ "target": target, "limit": 20 }),
        )
        .await
        .unwrap_or_else(|_| json!({}));
        let threads = threads["threads"].as_array().cloned().unwrap_or_default();
        if !threads.is_empty() {
            body.push_str("<h2>Threads</h2><ul class=\"conversations\">");
            for thread in &threads {
                let t = thread["target"].as_str().unwrap_or_default();
                let unread = thread["unread"].as_i64().unwrap_or(0);
                let _ = write!(
                    body,
                    "<li data-target=\"{t}\"><a href=\"/c/{u}\">{n}</a> <span class=\"unread\" data-unread=\"{unread}\">{badge}</span></li>",
                    t = escape(t),
                    u = url_part(t),
                    n = escape(thread["name"].as_str().unwrap_or("thread")),
                    badge = if unread > 0 {
                        format!("{unread} unread")
                    } else {
                        String::new()
                    },
                );
            }
            body.push_str("</ul>");
        }
    }
    page(&title, Nav::Conversations, &session, &body)
}

/// `POST /c/{target}/post` with `content`: the person's message, then back to the conversation.
pub async fn post(
    State(state): State<DaemonState>,
    Path(target): Path<String>,
    form: CsrfForm,
) -> Response {
    let mut input =
        json!({ "target": target, "content": form.field("content").unwrap_or_default() });
    if let Some(id) = form.field("requestId") {
        input["requestId"] = json!(id);
    }
    match call(&state, H::MessagePost, input).await {
        Ok(posted) => see_other(&format!(
            "/c/{}#m-{}",
            url_part(&target),
            url_part(posted["message"]["id"].as_str().unwrap_or_default())
        )),
        Err(refused) => refused,
    }
}

/// `POST /c/{target}/react` with `messageId`, `emoji` and `op` (`add` or `remove`).
pub async fn react(
    State(state): State<DaemonState>,
    Path(target): Path<String>,
    form: CsrfForm,
) -> Response {
    let action = match form.field("op") {
        Some("remove") => H::ReactionRemove,
        _ => H::ReactionAdd,
    };
    let message = form.field("messageId").unwrap_or_default().to_string();
    let mut input =
        json!({ "messageId": message, "emoji": form.field("emoji").unwrap_or_default() });
    if let Some(id) = form.field("requestId") {
        input["requestId"] = json!(id);
    }
    match call(&state, action, input).await {
        Ok(_) => see_other(&format!(
            "/c/{}#m-{}",
            url_part(&target),
            url_part(&message)
        )),
        Err(refused) => refused,
    }
}

/// `GET /c/{target}/work`: the tasks of a channel or thread, and a thread's reviews.
pub async fn work(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
    Path(target): Path<String>,
) -> Response {
    let names = match names(&state).await {
        Ok(names) => names,
        Err(refused) => return refused,
    };
    let title = format!(
        "Tasks and reviews of {}",
        conversation_name(&state, &target).await
    );
    let mut body = format!(
        "<p class=\"links\"><a href=\"/c/{}\">Back to the conversation</a></p>",
        url_part(&target)
    );
    let location = if let Some(channel) = target.strip_prefix("channel:") {
        Some(json!({ "kind": "channel", "channelId": channel }))
    } else {
        target
            .strip_prefix("thread:")
            .map(|thread| json!({ "kind": "thread", "threadId": thread }))
    };
    let Some(location) = location else {
        body.push_str("<p>A direct conversation has no tasks or reviews.</p>");
        return page(&title, Nav::Conversations, &session, &body);
    };
    let tasks = match call(
        &state,
        H::TaskList,
        json!({ "location": location, "limit": 100 }),
    )
    .await
    {
        Ok(tasks) => tasks,
        Err(refused) => return refused,
    };
    body.push_str("<h2>Tasks</h2>");
    let tasks = tasks["tasks"].as_array().cloned().unwrap_or_default();
    if tasks.is_empty() {
        body.push_str("<p class=\"empty\">No tasks.</p>");
    } else {
        body.push_str(
            "<table><thead><tr><th scope=\"col\">Task</th><th scope=\"col\">Status</th>\
             <th scope=\"col\">Assignee</th><th scope=\"col\">Changed</th></tr></thead><tbody>",
        );
        for task in &tasks {
            let _ = write!(
                body,
                "<tr id=\"t-{id}\"><td><strong>{title}</strong>{desc}</td><td>{status}</td><td>{who}</td><td>{at}</td></tr>",
                id = escape(task["id"].as_str().unwrap_or_default()),
                title = escape(task["title"].as_str().unwrap_or_default()),
                desc = task["description"]
                    .as_str()
                    .map(|d| format!("<div class=\"text\">{}</div>", markdown::render(d)))
                    .unwrap_or_default(),
                status = escape(task["status"].as_str().unwrap_or_default()),
                who = task["assigneeAgentId"]
                    .as_str()
                    .map(|a| escape(&names.of(a)))
                    .unwrap_or_else(|| "nobody".into()),
                at = html::time(task["updatedAt"].as_str().unwrap_or_default()),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("<h2>Reviews</h2>");
    if let Some(thread) = target.strip_prefix("thread:") {
        let reviews = match call(
            &state,
            H::ReviewList,
            json!({ "threadId": thread, "limit": 100 }),
        )
        .await
        {
            Ok(reviews) => reviews,
            Err(refused) => return refused,
        };
        let reviews = reviews["reviews"].as_array().cloned().unwrap_or_default();
        if reviews.is_empty() {
            body.push_str("<p class=\"empty\">No reviews.</p>");
        }
        for review in &reviews {
            let _ = write!(
                body,
                "<article class=\"card\"><h3>{verdict} by {who}</h3><p class=\"meta\">{status}, {at}</p><div class=\"text\">{text}</div></article>",
                verdict = escape(review["verdict"].as_str().unwrap_or_default()),
                who = escape(
                    &review["authorAgentId"]
                        .as_str()
                        .map(|a| names.of(a))
                        .unwrap_or_else(|| "someone".into())
                ),
                status = escape(review["status"].as_str().unwrap_or_default()),
                at = html::time(review["updatedAt"].as_str().unwrap_or_default()),
                text = markdown::render(review["body"].as_str().unwrap_or_default()),
            );
        }
    } else {
        body.push_str("<p>Reviews are left in threads: open one of the channel's threads.</p>");
    }
    page(&title, Nav::Conversations, &session, &body)
}
