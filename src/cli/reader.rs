//! The terminal reader: `agentteam read`, `post`, `approvals` and `decide`, as the daemon's person.
//! Each is one or a few actions of the server's human API, which the local daemon calls with the
//! device credential it holds for its person (`POST /api/admin/human/{action}`); the daemon refuses
//! a caller that descends from a runtime it launched. Text for a person (everything an agent
//! wrote shown only through [`printable`]), `--json` for a program.
//!
//! A target is named as a person names it: `#general` (a channel), `#general/release` (the thread
//! titled `release` in it), `@builder` (the direct conversation with the agent, or else the
//! person, of that handle; opened on first use), or exactly: `channel:chn_…`, `dm:dm_…`,
//! `thread:thr_…`.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::daemon::{StateDir, admin_call};
use super::output::{Exit, print, printable, table, usage_error};
use crate::contract::delivery;

/// Pages a name lookup reads at most (100 conversations each).
const MAX_LOOKUP_PAGES: usize = 50;

/// One human API action through the local daemon.
fn human(state: &StateDir, action: &str, input: Value) -> Result<Value, Exit> {
    admin_call(
        state,
        reqwest::Method::POST,
        &format!("/api/admin/human/{action}"),
        Some(input),
    )
}

/// Every item of a listed page under `field`, following `nextCursor`, at most
/// [`MAX_LOOKUP_PAGES`] pages.
fn all(state: &StateDir, action: &str, mut input: Value, field: &str) -> Result<Vec<Value>, Exit> {
    let mut items = Vec::new();
    input["limit"] = json!(100);
    for _ in 0..MAX_LOOKUP_PAGES {
        let page = human(state, action, input.clone())?;
        items.extend(page[field].as_array().cloned().unwrap_or_default());
        match page.get("nextCursor") {
            Some(cursor) => input["cursor"] = cursor.clone(),
            None => break,
        }
    }
    Ok(items)
}

/// The exact target `name` stands for.
fn resolve(state: &StateDir, name: &str) -> Result<String, Exit> {
    if ["channel:", "dm:", "thread:"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
    {
        return Ok(name.to_string());
    }
    if let Some(handle) = name.strip_prefix('@') {
        let opened = human(state, "dm_open", json!({ "handle": handle }))?;
        return Ok(opened["target"].as_str().unwrap_or_default().to_string());
    }
    let Some(path) = name.strip_prefix('#') else {
        return Err(usage_error(
            &format!("`{}` names no conversation", printable(name)),
            &["name a channel `#general`, a thread `#general/<title>`, a direct conversation `@builder`, or an exact target `channel:…`, `dm:…`, `thread:…`".into()],
        ));
    };
    let (channel, thread) = match path.split_once('/') {
        Some((channel, thread)) => (channel, Some(thread)),
        None => (path, None),
    };
    let conversations = all(state, "conversation_list", json!({}), "conversations")?;
    let Some(found) = conversations.iter().find(|c| {
        c["name"].as_str() == Some(channel)
            && c["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("channel:"))
    }) else {
        return Err(usage_error(
            &format!("you belong to no channel named #{}", printable(channel)),
            &["`agentteam read --list` shows your conversations".into()],
        ));
    };
    let channel_target = found["target"].as_str().unwrap_or_default().to_string();
    let Some(title) = thread else {
        return Ok(channel_target);
    };
    let threads = all(
        state,
        "thread_list",
        json!({ "target": channel_target }),
        "threads",
    )?;
    let matching: Vec<&Value> = threads
        .iter()
        .filter(|t| t["name"].as_str() == Some(title))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one["target"].as_str().unwrap_or_default().to_string()),
        [] => Err(usage_error(
            &format!(
                "#{} has no thread titled `{}`",
                printable(channel),
                printable(title)
            ),
            &[format!(
                "`agentteam read --list '#{}'` shows its threads",
                printable(channel)
            )],
        )),
        several => Err(usage_error(
            &format!(
                "#{} has {} threads titled `{}`",
                printable(channel),
                several.len(),
                printable(title)
            ),
            &several
                .iter()
                .map(|t| format!("name one exactly: {}", t["target"].as_str().unwrap_or("?")))
                .collect::<Vec<_>>(),
        )),
    }
}

/// Handles of the workspace's agents and of the person, by id, for showing who wrote what.
fn names(state: &StateDir) -> Result<HashMap<String, String>, Exit> {
    let mut names: HashMap<String, String> = all(state, "agent_list", json!({}), "agents")?
        .iter()
        .filter_map(|a| {
            Some((
                a["profile"]["agentId"].as_str()?.to_string(),
                a["profile"]["handle"].as_str()?.to_string(),
            ))
        })
        .collect();
    let me = human(state, "me", json!({}))?;
    if let (Some(id), Some(handle)) = (me["humanId"].as_str(), me["handle"].as_str()) {
        names.insert(id.to_string(), format!("{handle} (you)"));
    }
    Ok(names)
}

/// One message as a person reads it: time, author, text, then reactions and attachments.
fn message_text(message: &Value, names: &HashMap<String, String>) -> String {
    let author = message["authorId"].as_str().unwrap_or("?");
    let author = names.get(author).map_or(author, String::as_str);
    let at = message["createdAt"].as_str().unwrap_or("?");
    let at = at.get(..16).unwrap_or(at).replace('T', " ");
    let content = printable(message["content"].as_str().unwrap_or_default().trim_end())
        .replace("\\u{a}", "\n    ");
    let mut out = format!("[{at}] {}: {content}\n", printable(author));
    let reactions: Vec<String> = message["reactions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} {}",
                printable(r["emoji"].as_str().unwrap_or("?")),
                r["count"].as_u64().unwrap_or(0)
            )
        })
        .collect();
    if !reactions.is_empty() {
        out.push_str(&format!("    {}\n", reactions.join("  ")));
    }
    for attachment in message["attachments"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "    attachment {} ({}, {} bytes): {}\n",
            printable(attachment["name"].as_str().unwrap_or("?")),
            printable(attachment["mediaType"].as_str().unwrap_or("?")),
            attachment["size"].as_u64().unwrap_or(0),
            attachment["id"].as_str().unwrap_or("?"),
        ));
    }
    out
}

/// What became of a person's message to an agent, as a person reads it under that message.
fn delivery_text(delivery: &Value, names: &HashMap<String, String>) -> String {
    let agent = delivery["agentId"].as_str().unwrap_or("?");
    let agent = names.get(agent).map_or(agent, String::as_str);
    let said = printable(&delivery::said(delivery, agent));
    match delivery["state"].as_str() {
        Some("interrupted" | "failed" | "expired") => format!(
            "    -> {said} (again: agentteam retry {})\n",
            printable(delivery["id"].as_str().unwrap_or("?"))
        ),
        _ => format!("    -> {said}\n"),
    }
}

/// The deliveries answered on `target` (of the person's agents), newest first: one page.
fn deliveries_on(state: &StateDir, target: &str) -> Result<Vec<Value>, Exit> {
    let listed = human(
        state,
        "delivery_list",
        json!({ "target": target, "limit": 100 }),
    )?;
    Ok(listed["deliveries"].as_array().cloned().unwrap_or_default())
}

/// `agentteam read TARGET [--limit N] [--around MESSAGE] [--json]`: the newest page of a
/// conversation, oldest first as a chat reads, marked read up to its newest message.
pub fn read(
    state: StateDir,
    target: &str,
    limit: Option<u8>,
    around: Option<String>,
    json: bool,
) -> Exit {
    let result = (|| {
        let target = resolve(&state, target)?;
        let mut page = page_of(&state, &target, limit, around.as_deref())?;
        let messages = page["messages"].as_array().cloned().unwrap_or_default();
        // What became of the page's messages to agents, under each message.
        let deliveries: Vec<Value> = deliveries_on(&state, &target)?
            .into_iter()
            .filter(|d| messages.iter().any(|m| m["id"] == d["messageId"]))
            .collect();
        if json {
            page["deliveries"] = json!(deliveries);
            return Ok(print(&format!("{page}\n")));
        }
        let names = names(&state)?;
        let mut out = format!("{target}\n");
        if messages.is_empty() {
            out.push_str("(no messages)\n");
        }
        if page.get("nextCursor").is_some() {
            out.push_str("(older messages above: --limit reads more)\n");
        }
        for message in messages.iter().rev() {
            out.push_str(&message_text(message, &names));
            for delivery in deliveries.iter().rev() {
                if delivery["messageId"] == message["id"] {
                    out.push_str(&delivery_text(delivery, &names));
                }
            }
        }
        Ok(print(&out))
    })();
    result.unwrap_or_else(|exit| exit)
}

/// How long one wait of `--follow` lasts (the daemon's feed answers at the first change).
const FOLLOW_WAIT_MS: u64 = 25_000;
/// Message ids `--follow` remembers having shown (it forgets the oldest past this).
const MAX_SHOWN: usize = 10_000;
/// How long `--follow` tries to reach a daemon that stopped answering before it gives up.
const RECONNECT_TRIES: u32 = 30;

/// Writes `text` to stdout; `false` once the reader closed it (`| head`), or it failed.
fn emit(text: &str) -> bool {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_ok()
}

/// `agentteam read TARGET --follow [--limit N] [--json]`: the newest page, then each new
/// message of the conversation as it is posted, until interrupted; with `--json` one JSON object
/// per line (the page, then each event of the conversation). Follows the daemon's shared feed by
/// its cursor: when the daemon restarts, the reader reconnects and goes on from its cursor,
/// missing nothing and repeating nothing.
pub fn follow(state: StateDir, target: &str, limit: Option<u8>, json: bool) -> Exit {
    let result = (|| {
        let target = resolve(&state, target)?;
        // The cursor first, then the page: a message posted in between is in both, and shown once.
        let mut cursor = human_feed(&state, json!({}))?["cursor"].clone();
        let names = if json { HashMap::new() } else { names(&state)? };
        let mut shown: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        let page = page_of(&state, &target, limit, None)?;
        if json {
            if !emit(&format!("{page}\n")) {
                return Ok(Exit::Success);
            }
        } else if !emit(&format!("{target} (following; interrupt to stop)\n")) {
            return Ok(Exit::Success);
        }
        let messages = page["messages"].as_array().cloned().unwrap_or_default();
        for message in messages.iter().rev() {
            remember(&mut shown, message);
            if !json && !emit(&message_text(message, &names)) {
                return Ok(Exit::Success);
            }
        }
        loop {
            let page = follow_feed(&state, &cursor)?;
            if page["resync"].as_bool() == Some(true) {
                // Changes were missed past the feed's retention: the newest page again, its
                // unseen messages shown.
                let again = page_of(&state, &target, limit, None)?;
                for message in again["messages"].as_array().into_iter().flatten().rev() {
                    if !seen(&shown, message) {
                        remember(&mut shown, message);
                        let text = if json {
                            format!("{message}\n")
                        } else {
                            message_text(message, &names)
                        };
                        if !emit(&text) {
                            return Ok(Exit::Success);
                        }
                    }
                }
            }
            for event in page["events"].as_array().into_iter().flatten() {
                // A delivery's event names its conversation in the delivery.
                let at = event["target"]
                    .as_str()
                    .or(event["delivery"]["target"].as_str());
                if at != Some(target.as_str()) {
                    continue;
                }
                let message = &event["message"];
                let text = match event["kind"].as_str() {
                    Some("message") if !seen(&shown, message) => {
                        remember(&mut shown, message);
                        if let Some(id) = message["id"].as_str() {
                            human(
                                &state,
                                "read_mark",
                                json!({ "target": target, "messageId": id }),
                            )?;
                        }
                        if json {
                            format!("{event}\n")
                        } else {
                            message_text(message, &names)
                        }
                    }
                    Some("delivery") if json => format!("{event}\n"),
                    Some("delivery") => delivery_text(&event["delivery"], &names),
                    Some("reaction") | Some("task") if json => format!("{event}\n"),
                    _ => continue,
                };
                if !emit(&text) {
                    return Ok(Exit::Success);
                }
            }
            cursor = page["cursor"].clone();
        }
    })();
    result.unwrap_or_else(|exit| exit)
}

/// The newest page of `target`, marked read; or the page around a message, left unmarked.
fn page_of(
    state: &StateDir,
    target: &str,
    limit: Option<u8>,
    around: Option<&str>,
) -> Result<Value, Exit> {
    let mut input = json!({ "target": target });
    if let Some(limit) = limit {
        input["limit"] = json!(limit);
    }
    if let Some(around) = around {
        input["around"] = json!(around);
    }
    let page = human(state, "history_read", input)?;
    if let Some(newest) = page["messages"][0]["id"].as_str()
        && around.is_none()
    {
        human(
            state,
            "read_mark",
            json!({ "target": target, "messageId": newest }),
        )?;
    }
    Ok(page)
}

fn seen(shown: &std::collections::VecDeque<String>, message: &Value) -> bool {
    message["id"]
        .as_str()
        .is_some_and(|id| shown.iter().any(|s| s == id))
}

fn remember(shown: &mut std::collections::VecDeque<String>, message: &Value) {
    if let Some(id) = message["id"].as_str() {
        if shown.len() == MAX_SHOWN {
            shown.pop_front();
        }
        shown.push_back(id.to_string());
    }
}

/// One read of the daemon's feed.
fn human_feed(state: &StateDir, input: Value) -> Result<Value, Exit> {
    admin_call(state, reqwest::Method::POST, "/api/admin/feed", Some(input))
}

/// The next page of the feed after `cursor`, waiting for a change; a daemon that stopped
/// answering (restarting) is tried again, a second apart, before the reader gives up.
fn follow_feed(state: &StateDir, cursor: &Value) -> Result<Value, Exit> {
    let input = json!({ "after": cursor, "waitMs": FOLLOW_WAIT_MS });
    let mut tries = 0;
    loop {
        let (base_url, token) = match super::daemon::connect(&StateDir {
            state_dir: state.state_dir.clone(),
            no_start: true,
        }) {
            Ok(found) => found,
            Err(exit) if tries < RECONNECT_TRIES => {
                let _ = exit;
                tries += 1;
                std::thread::sleep(std::time::Duration::from_secs(1));
                continue;
            }
            Err(exit) => return Err(exit),
        };
        match super::http::call(
            super::http::Peer::Daemon,
            reqwest::Method::POST,
            &format!("{base_url}/api/admin/feed"),
            &token,
            Some(&input),
        ) {
            Ok(page) => return Ok(page),
            Err(exit) if tries < RECONNECT_TRIES => {
                let _ = exit;
                tries += 1;
                eprintln!("the daemon does not answer; trying again");
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            Err(exit) => return Err(exit),
        }
    }
}

/// `agentteam read --list [#channel] [--json]`: the person's conversations with unread counts, or
/// a channel's threads.
pub fn list(state: StateDir, channel: Option<&str>, json: bool) -> Exit {
    let result = (|| {
        let (items, heading) = match channel {
            Some(channel) => {
                let target = resolve(&state, channel)?;
                let threads = all(
                    &state,
                    "thread_list",
                    json!({ "target": target }),
                    "threads",
                )?;
                (threads, "THREAD")
            }
            None => (
                all(&state, "conversation_list", json!({}), "conversations")?,
                "CONVERSATION",
            ),
        };
        if json {
            return Ok(print(&format!("{}\n", Value::Array(items))));
        }
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|c| {
                let target = c["target"].as_str().unwrap_or("?");
                let name = c["name"].as_str().unwrap_or("?");
                let shown = match target.split_once(':') {
                    Some(("channel", _)) => format!("#{name}"),
                    Some(("dm", _)) => format!("@{name}"),
                    _ => name.to_string(),
                };
                let unread = c["unread"].as_u64().unwrap_or(0);
                vec![
                    shown,
                    match unread {
                        0 => String::new(),
                        n if n >= crate::server::store::MAX_UNREAD as u64 => format!("{n}+ unread"),
                        n => format!("{n} unread"),
                    },
                    target.to_string(),
                ]
            })
            .collect();
        Ok(print(&table(&[heading, "UNREAD", "TARGET"], &rows)))
    })();
    result.unwrap_or_else(|exit| exit)
}

/// `agentteam post TARGET TEXT [--wait] [--json]`: posts as the person. With `--wait`, then
/// follows what became of the agents the message woke, one line each as it changes, and each
/// agent's reply, until every one reached a final state: exit 0 when every one answered, 1 when
/// one did not.
pub fn post(state: StateDir, target: &str, text: &str, wait: bool, json: bool) -> Exit {
    let result = (|| {
        let target = resolve(&state, target)?;
        // The feed's cursor before the post: no change of what it wakes is missed.
        let cursor = if wait {
            Some(human_feed(&state, json!({}))?["cursor"].clone())
        } else {
            None
        };
        let posted = human(
            &state,
            "message_post",
            json!({ "target": target, "content": text }),
        )?;
        let id = posted["message"]["id"].as_str().unwrap_or("?").to_string();
        let said = if json {
            format!("{posted}\n")
        } else {
            format!("posted {id} to {target}\n")
        };
        if !emit(&said) {
            return Ok(Exit::Success);
        }
        match cursor {
            Some(cursor) => wait_for_answers(&state, &target, &id, cursor, json),
            None => Ok(Exit::Success),
        }
    })();
    result.unwrap_or_else(|exit| exit)
}

/// `post --wait`: the deliveries of message `id` as they change, and the replies, until each is
/// final.
fn wait_for_answers(
    state: &StateDir,
    target: &str,
    id: &str,
    mut cursor: Value,
    json: bool,
) -> Result<Exit, Exit> {
    let names = if json { HashMap::new() } else { names(state)? };
    // Delivery id → the state last shown, and when the delivery took it.
    let mut shown: HashMap<String, (String, String)> = HashMap::new();
    let mut changed: Vec<Value> = deliveries_on(state, target)?
        .into_iter()
        .filter(|d| d["messageId"] == json!(id))
        .collect();
    if changed.is_empty() {
        let said = if json {
            "{\"deliveries\":[]}\n".to_string()
        } else {
            "    (it wakes none of your agents)\n".to_string()
        };
        emit(&said);
        return Ok(Exit::Success);
    }
    let mut answered_all = true;
    loop {
        for delivery in changed.drain(..) {
            let (Some(delivery_id), Some(now)) =
                (delivery["id"].as_str(), delivery["state"].as_str())
            else {
                continue;
            };
            // Each state once, none older than one shown; a delivery's first final state counts.
            let at = delivery["updatedAt"].as_str().unwrap_or_default();
            if shown
                .get(delivery_id)
                .is_some_and(|(was, was_at)| !delivery::is_news(was, was_at, now, at))
            {
                continue;
            }
            shown.insert(delivery_id.to_string(), (now.to_string(), at.to_string()));
            let mut text = if json {
                format!("{}\n", json!({ "delivery": delivery }))
            } else {
                delivery_text(&delivery, &names)
            };
            if now == "answered" {
                if let Some(reply) = delivery["replyId"].as_str() {
                    let page = human(
                        state,
                        "history_read",
                        json!({ "target": delivery["target"], "around": reply, "limit": 1 }),
                    )?;
                    if let Some(message) = page["messages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|m| m["id"] == json!(reply))
                    {
                        text.push_str(&if json {
                            format!("{}\n", json!({ "reply": message }))
                        } else {
                            message_text(message, &names)
                        });
                    }
                }
            } else if delivery::is_final(now) {
                answered_all = false;
            }
            if !emit(&text) {
                return Ok(Exit::Success);
            }
        }
        if shown.values().all(|(state, _)| delivery::is_final(state)) {
            return Ok(if answered_all {
                Exit::Success
            } else {
                Exit::ActionFailed
            });
        }
        let page = follow_feed(state, &cursor)?;
        if page["resync"].as_bool() == Some(true) {
            // Changes were missed past the feed's retention: the deliveries as they are now.
            changed.extend(
                deliveries_on(state, target)?
                    .into_iter()
                    .filter(|d| d["messageId"] == json!(id)),
            );
        }
        changed.extend(
            page["events"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["kind"] == "delivery" && e["delivery"]["messageId"] == json!(id))
                .map(|e| e["delivery"].clone()),
        );
        cursor = page["cursor"].clone();
    }
}

/// `agentteam approvals [--all] [--json]`: the approvals the person answers for (their agents'),
/// pending ones unless `--all`.
pub fn approvals(state: StateDir, every: bool, json: bool) -> Exit {
    let result = (|| {
        let input = if every {
            json!({})
        } else {
            json!({ "status": "pending" })
        };
        let approvals = all(&state, "approval_list", input, "approvals")?;
        if json {
            return Ok(print(&format!("{}\n", Value::Array(approvals))));
        }
        if approvals.is_empty() {
            return Ok(print(if every {
                "no approvals\n"
            } else {
                "no pending approvals\n"
            }));
        }
        let names = names(&state)?;
        let rows: Vec<Vec<String>> = approvals
            .iter()
            .map(|a| {
                let asker = a["requestedByAgentId"].as_str().unwrap_or("a workflow");
                vec![
                    a["id"].as_str().unwrap_or("?").to_string(),
                    a["status"].as_str().unwrap_or("?").to_string(),
                    names
                        .get(asker)
                        .cloned()
                        .unwrap_or_else(|| asker.to_string()),
                    a["title"].as_str().unwrap_or("?").to_string(),
                ]
            })
            .collect();
        let mut out = table(&["APPROVAL", "STATUS", "ASKED BY", "TITLE"], &rows);
        if !every {
            out.push_str(
                "decide one: agentteam decide <APPROVAL> approve|reject [--comment TEXT]\n",
            );
        }
        Ok(print(&out))
    })();
    result.unwrap_or_else(|exit| exit)
}

/// `agentteam decide APPROVAL approve|reject [--comment TEXT] [--json]`.
pub fn decide(
    state: StateDir,
    approval: &str,
    approve: bool,
    comment: Option<String>,
    json: bool,
) -> Exit {
    let mut input = json!({
        "approvalId": approval,
        "decision": if approve { "approve" } else { "reject" },
    });
    if let Some(comment) = comment {
        input["comment"] = json!(comment);
    }
    let decided = match human(&state, "approval_decide", input) {
        Ok(decided) => decided,
        Err(exit) => return exit,
    };
    if json {
        return print(&format!("{decided}\n"));
    }
    print(&format!(
        "{} {}\n",
        decided["approval"]["id"].as_str().unwrap_or(approval),
        decided["approval"]["status"].as_str().unwrap_or("?"),
    ))
}

/// `agentteam retry DELIVERY [--json]`: a delivery that did not reach its agent's answer is
/// pending again.
pub fn retry(state: StateDir, delivery: &str, json: bool) -> Exit {
    let retried = match human(&state, "delivery_retry", json!({ "deliveryId": delivery })) {
        Ok(retried) => retried,
        Err(exit) => return exit,
    };
    if json {
        return print(&format!("{retried}\n"));
    }
    print(&format!(
        "{} {}\n",
        printable(retried["delivery"]["id"].as_str().unwrap_or(delivery)),
        printable(retried["delivery"]["state"].as_str().unwrap_or("?")),
    ))
}

/// `agentteam open [--no-browser] [--json]`: a one-time login page for the console (owner-only,
/// in the state directory), opened in the person's browser; its path and the console's address
/// printed either way. The page holds the code; no command line ever does.
pub fn open(state: StateDir, no_browser: bool, json: bool) -> Exit {
    let opened = match admin_call(
        &state,
        reqwest::Method::POST,
        "/api/admin/console/login",
        Some(json!({})),
    ) {
        Ok(opened) => opened,
        Err(exit) => return exit,
    };
    let file = opened["loginFile"].as_str().unwrap_or_default();
    let url = opened["url"].as_str().unwrap_or_default();
    let launched = if no_browser {
        None
    } else {
        Some(launch_browser(std::path::Path::new(file)))
    };
    if json {
        let mut shown = opened.clone();
        if let Some(launched) = &launched {
            shown["browser"] = json!(launched.as_ref().ok());
        }
        return print(&format!("{shown}\n"));
    }
    let minutes = opened["expiresInSeconds"].as_u64().unwrap_or(120) / 60;
    let mut out = format!(
        "The console: {url}\nTo sign in, open this page in your browser (it works once, within \
         {minutes} minutes):\n  file://{file}\n"
    );
    match launched {
        Some(Ok(program)) => out.push_str(&format!("Opened it with {program}.\n")),
        Some(Err(why)) => out.push_str(&format!("Could not open a browser ({why}).\n")),
        None => {}
    }
    print(&out)
}

/// Opens `page` with `$BROWSER` (its first command that starts), else the desktop's opener.
/// Returns the program that took it.
fn launch_browser(page: &std::path::Path) -> Result<String, String> {
    let mut programs: Vec<String> = std::env::var("BROWSER")
        .unwrap_or_default()
        .split(':')
        .filter(|p| !p.trim().is_empty())
        .map(str::to_string)
        .collect();
    programs.push(if cfg!(target_os = "macos") {
        "open".into()
    } else {
        "xdg-open".into()
    });
    for program in &programs {
        let mut command = std::process::Command::new(program);
        let started = crate::platform::process::child_keeps_huge_pages(&mut command)
            .arg(page)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if started.is_ok() {
            return Ok(program.clone());
        }
    }
    Err(format!("none of {} could start", programs.join(", ")))
}
