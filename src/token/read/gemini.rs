//! Gemini CLI: `tmp/<project>/chats/session-*.jsonl`, where the last record of an id wins.

use std::path::Path;

use serde_json::Value;

use crate::daemon::runtime::driver::Family;
use crate::token::session::{Builder, Session, Usage};

use super::{json_lines, stem, str_of, u};

/// One Gemini CLI message, as the last record of its id left it.
struct GeminiMessage {
    id: String,
    time: String,
    usage: Option<Usage>,
    model: Option<String>,
    /// `(record id, name, command, result text)`.
    calls: Vec<(String, String, Option<String>, String)>,
}

pub(super) fn read(path: &Path, tokenize: bool) -> std::io::Result<Session> {
    let mut b = Builder::new(Family::Gemini, stem(path), path.to_path_buf(), tokenize);
    let mut messages: Vec<GeminiMessage> = Vec::new();
    let mut first = true;
    json_lines(path, &mut b, |b, v| {
        if std::mem::take(&mut first) && v.get("sessionId").is_some() {
            b.set_id(str_of(&v, "sessionId"));
            return;
        }
        if let Some(set) = v.get("$set") {
            if let Some(list) = set.get("messages").and_then(Value::as_array) {
                messages.clear();
                for m in list {
                    gemini_message(m, &mut messages);
                }
            }
            return;
        }
        if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
            let at = messages.iter().position(|m| m.id == to).unwrap_or(0);
            messages.truncate(at);
            return;
        }
        match str_of(&v, "type") {
            "user" | "gemini" | "info" | "error" | "warning" => gemini_message(&v, &mut messages),
            _ => b.unknown += 1,
        }
    })?;
    for m in messages {
        b.time(&m.time);
        if let Some(model) = m.model {
            b.model = Some(model);
        }
        if let Some(usage) = m.usage {
            b.request(None, usage);
        }
        for (id, name, command, _) in &m.calls {
            b.call(id, name, command.as_deref());
        }
        for (id, _, _, text) in &m.calls {
            b.result(id, text);
        }
    }
    Ok(b.finish())
}

fn gemini_message(v: &Value, messages: &mut Vec<GeminiMessage>) {
    let id = str_of(v, "id").to_string();
    let tokens = &v["tokens"];
    let usage = tokens.is_object().then(|| {
        let cached = u(tokens, "/cached");
        Usage {
            input: u(tokens, "/input")
                .saturating_sub(cached)
                .saturating_add(u(tokens, "/tool")),
            output: u(tokens, "/output").saturating_add(u(tokens, "/thoughts")),
            cache_read: cached,
            cache_write: 0,
        }
    });
    let calls = v["toolCalls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|call| {
            let result: Vec<String> = call["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|part| part["functionResponse"]["response"].to_string())
                .collect();
            (
                str_of(call, "id").to_string(),
                str_of(call, "name").to_string(),
                call["args"]
                    .get("command")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                result.join(""),
            )
        })
        .collect();
    let message = GeminiMessage {
        time: str_of(v, "timestamp").to_string(),
        usage,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        calls,
        id: id.clone(),
    };
    match messages.iter_mut().find(|m| !id.is_empty() && m.id == id) {
        Some(old) => *old = message,
        None => messages.push(message),
    }
}
