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
        let mut input = json!({ "target": target });
        if let Some(limit) = limit {
            input["limit"] = json!(limit);
        }
        if let Some(around) = &around {
            input["around"] = json!(around);
        }
        let page = human(&state, "history_read", input)?;
        if let Some(newest) = page["messages"][0]["id"].as_str()
            && around.is_none()
        {
            human(
                &state,
                "read_mark",
                json!({ "target": target, "messageId": newest }),
            )?;
        }
        if json {
            return Ok(print(&format!("{page}\n")));
        }
        let names = names(&state)?;
        let mut out = format!("{target}\n");
        let messages = page["messages"].as_array().cloned().unwrap_or_default();
        if messages.is_empty() {
            out.push_str("(no messages)\n");
        }
        if page.get("nextCursor").is_some() {
            out.push_str("(older messages above: --limit reads more)\n");
        }
        for message in messages.iter().rev() {
            out.push_str(&message_text(message, &names));
        }
        Ok(print(&out))
    })();
    result.unwrap_or_else(|exit| exit)
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

/// `agentteam post TARGET TEXT [--json]`: posts as the person; a thread target replies in it.
pub fn post(state: StateDir, target: &str, text: &str, json: bool) -> Exit {
    let result = (|| {
        let target = resolve(&state, target)?;
        let posted = human(
            &state,
            "message_post",
            json!({ "target": target, "content": text }),
        )?;
        if json {
            return Ok(print(&format!("{posted}\n")));
        }
        Ok(print(&format!(
            "posted {} to {target}\n",
            posted["message"]["id"].as_str().unwrap_or("?")
        )))
    })();
    result.unwrap_or_else(|exit| exit)
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
