//! Gemini CLI: `tmp/<project>/chats/session-*.jsonl`, where the last record of an id wins.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::daemon::runtime::driver::Family;
use crate::token::session::{Builder, Session, Usage, classify};

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
    let mut messages = Messages::default();
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
                    messages.put(gemini_message(m, b.tokenizes()));
                }
            }
            return;
        }
        if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
            messages.rewind(to);
            return;
        }
        match str_of(&v, "type") {
            "user" | "gemini" | "info" | "error" | "warning" => {
                messages.put(gemini_message(&v, b.tokenizes()))
            }
            _ => b.unknown += 1,
        }
    })?;
    for m in messages.list {
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

/// A session's messages as Gemini's loader keeps them: by id, the last record of an id replacing
/// the earlier one in its place.
#[derive(Default)]
struct Messages {
    list: Vec<GeminiMessage>,
    at: HashMap<String, usize>,
}

impl Messages {
    fn put(&mut self, message: GeminiMessage) {
        match self.at.get(&message.id).filter(|_| !message.id.is_empty()) {
            Some(&at) => self.list[at] = message,
            None => {
                self.at.insert(message.id.clone(), self.list.len());
                self.list.push(message);
            }
        }
    }

    /// `$rewindTo`: the message and everything after it go (all of them for an unknown id).
    fn rewind(&mut self, id: &str) {
        let at = self.at.get(id).copied().unwrap_or(0);
        for gone in self.list.drain(at..) {
            self.at.remove(&gone.id);
        }
    }

    fn clear(&mut self) {
        self.list.clear();
        self.at.clear();
    }
}

/// One message record; only an AgentTeam call's result text is kept (and none in the usage pass).
fn gemini_message(v: &Value, tokenize: bool) -> GeminiMessage {
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
            let name = str_of(call, "name");
            let command = call["args"].get("command").and_then(Value::as_str);
            let ours = tokenize && classify(Family::Gemini, name, command).is_some();
            let result: String = if ours {
                call["result"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|part| part["functionResponse"]["response"].to_string())
                    .collect()
            } else {
                String::new()
            };
            (
                str_of(call, "id").to_string(),
                name.to_string(),
                command.map(str::to_string),
                result,
            )
        })
        .collect();
    GeminiMessage {
        time: str_of(v, "timestamp").to_string(),
        usage,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        calls,
        id,
    }
}
