//! Fuzz targets: every parser that reads bytes a client, a runtime or the wire controls, each as a
//! function of `&[u8]` that panics when a property breaks (a panic in the parser itself counts
//! the same).
//!
//! `fuzz/` wraps each one in a libFuzzer binary (`scripts/fuzz` builds and runs them); the test
//! below replays every committed seed and every past crash through the same functions, so a crash
//! that was found once is a regression test from then on.
//!
//! The properties go beyond "does not panic": a parser that accepts must accept exactly what its
//! contract says, an encoder's output must decode back to what went in, any altered byte of a
//! signed value must be refused, and no refusal may echo more than a bounded part of the input.

use std::sync::LazyLock;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::contract::ActionId;
use crate::contract::borrowed::Borrowed;
use crate::contract::budget::{self, Builtin, Rule};
use crate::contract::error::ErrorCode;
use crate::contract::json::parse_strict;
use crate::contract::target::Target as ReplyTarget;
use crate::contract::validate::{MAX_DETAILS, Output, Validators};
use crate::daemon::agents::cursor::CursorCodec as AgentCursorCodec;
use crate::daemon::agents::store::{ListFilter, Revision};
use crate::daemon::auth::token::{Claims, Scope, TokenCodec};
use crate::daemon::mcp::era::Era;
use crate::daemon::mcp::rpc::RpcRequest;
use crate::server::cursor::CursorCodec as ServerCursorCodec;

/// One fuzz target: bytes in, a panic when a property breaks.
pub type Target = fn(&[u8]);

/// Every target, by the name its binary and its corpus directories carry.
pub const TARGETS: &[(&str, Target)] = &[
    ("strict_json", strict_json),
    ("jsonrpc_classify", jsonrpc_classify),
    ("server_cursor", server_cursor),
    ("agent_cursor", agent_cursor),
    ("token_codec", token_codec),
    ("token_file", token_file),
    ("target", target),
    ("receipt", receipt),
    ("output", output),
    ("codex_threads", codex_threads),
    ("transcripts", transcripts),
];

/// The longest refusal message any target may produce, whatever the input's size: refusals name
/// a position or a bounded echo, never the input.
const MAX_REFUSAL_MESSAGE: usize = 512;

/// The strict decoder accepts a subset of what serde_json accepts, gives the same value (with a
/// whole float stored as the integer JSON Schema takes it for), never holds U+0000, and what it
/// gives re-encodes to something it accepts again.
pub fn strict_json(data: &[u8]) {
    match parse_strict(data) {
        Ok(value) => {
            let lenient: Value =
                serde_json::from_slice(data).expect("strict accepted what serde_json refuses");
            assert_eq!(
                value,
                whole_floats_as_integers(lenient),
                "strict and serde_json read different values"
            );
            assert!(!holds_nul(&value), "a U+0000 got through");
            let again = parse_strict(value.to_string().as_bytes())
                .expect("a strict value re-encodes to a body strict refuses");
            if !holds_float(&value) {
                assert_eq!(again, value, "re-encoding changed the value");
            }
        }
        Err(error) => assert!(error.to_string().len() <= MAX_REFUSAL_MESSAGE),
    }
}

/// The MCP route's request path up to its answer: body, request shape, then the era's header
/// rules. Input: header lines (`name: value`), a blank line, the body. Every refusal is a 4xx with
/// a bounded message.
pub fn jsonrpc_classify(data: &[u8]) {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (&[][..], data),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = line[colon + 1..].trim_ascii();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    let Ok(message) = parse_strict(body) else {
        return;
    };
    let request = match RpcRequest::from_value(message) {
        Ok(request) => request,
        Err((error, id)) => {
            assert!(error.message.len() <= MAX_REFUSAL_MESSAGE);
            if let Some(id) = id {
                assert!(
                    id.is_string() || id.is_i64() || id.is_u64(),
                    "echoed id {id}"
                );
            }
            return;
        }
    };
    match Era::classify(&headers, &request) {
        Ok(era) => {
            era.serves(request.method);
        }
        Err((status, error)) => {
            assert!(
                status.is_client_error(),
                "a header refusal answered {status}"
            );
            assert!(error.code < 0, "JSON-RPC error codes are negative");
            assert!(
                error.message.len() <= MAX_REFUSAL_MESSAGE,
                "a refusal echoed {} bytes",
                error.message.len()
            );
            if let Some(data) = &error.data {
                assert!(data.to_string().len() <= 4 * MAX_REFUSAL_MESSAGE);
            }
        }
    }
}

/// Server page cursors: arbitrary text never decodes; an issued cursor decodes to its position
/// under its own filter only (so it fits `Cursor.maxLength`); changing any one character refuses
/// it.
pub fn server_cursor(data: &[u8]) {
    let codec = ServerCursorCodec::new(b"fuzz-server-cursor-key".to_vec());
    let (filter, position) = two_values(data);
    let text = String::from_utf8_lossy(data);
    assert!(codec.decode(&text, &filter).is_err(), "forged a cursor");

    let cursor = codec.encode(&filter, &position);
    assert_eq!(codec.decode(&cursor, &filter).ok(), Some(position));
    assert!(codec.decode(&cursor, &json!({"other": filter})).is_err());
    for altered in altered(&cursor, data) {
        assert!(
            codec.decode(&altered, &filter).is_err(),
            "an altered cursor decoded"
        );
    }
}

/// `a2` cursors of `agent list`: the same, with the revision and the anchor's handle checked, and
/// every cursor issued for a legal anchor (`agt_` + 8–64 letters or digits, a handle of up to 32)
/// short enough to be accepted back.
pub fn agent_cursor(data: &[u8]) {
    static CODEC: LazyLock<AgentCursorCodec> = LazyLock::new(AgentCursorCodec::default);
    const ID: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const HANDLE: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-";
    let byte = |i: usize| usize::from(data.get(i % data.len().max(1)).copied().unwrap_or(0));
    let anchor: String = "agt_"
        .chars()
        .chain((0..8 + byte(0) % 57).map(|i| char::from(ID[byte(i + 2) % ID.len()])))
        .collect();
    let handle: String = (0..1 + byte(1) % 32)
        .map(|i| char::from(HANDLE[byte(i + 3) % if i == 0 { 26 } else { HANDLE.len() }]))
        .collect();
    let (anchor, handle) = (anchor.as_str(), handle.as_str());
    let revision = Revision {
        epoch: word(data, 0),
        counter: word(data, 8),
    };
    let text = String::from_utf8_lossy(data);
    let filter = ListFilter {
        runtime_family: data.len().is_multiple_of(3).then(|| text.to_string()),
        provider: data.len().is_multiple_of(2).then(|| handle.to_string()),
    };
    let current = |_: &str| Some(handle.to_string());
    assert!(
        CODEC.decode(&text, &filter, revision, current).is_err(),
        "forged a cursor"
    );

    let cursor = CODEC.encode(revision, anchor, handle, &filter);
    assert_eq!(
        CODEC.decode(&cursor, &filter, revision, current),
        Ok(anchor.to_string())
    );
    let later = Revision {
        counter: revision.counter.wrapping_add(1),
        ..revision
    };
    assert!(CODEC.decode(&cursor, &filter, later, current).is_err());
    assert!(CODEC.decode(&cursor, &filter, revision, |_| None).is_err());
    for altered in altered(&cursor, data) {
        assert!(
            CODEC.decode(&altered, &filter, revision, current).is_err(),
            "an altered cursor decoded"
        );
    }
}

/// Bearer tokens: arbitrary text never verifies; a signed token verifies to its claims; changing
/// any one character refuses it.
pub fn token_codec(data: &[u8]) {
    static CODEC: LazyLock<TokenCodec> = LazyLock::new(TokenCodec::default);
    let text = String::from_utf8_lossy(data);
    assert!(CODEC.verify(&text).is_err(), "forged a token");

    let claims = Claims {
        authorization: text.chars().take(40).collect(),
        generation: word(data, 0) as u32,
        expires_at_ms: word(data, 4) as i64,
        scope: [Scope::Exec, Scope::Mcp, Scope::TokenAnalysis][data.len() % 3],
    };
    let token = CODEC.sign(&claims);
    assert_eq!(CODEC.verify(&token).ok(), Some(claims));
    for altered in altered(&token, data) {
        assert!(CODEC.verify(&altered).is_err(), "an altered token verified");
    }
}

/// The Exec token-file reader: it takes exactly one well-formed token with an optional final
/// newline, and reading the same bytes from a private file gives the same answer.
pub fn token_file(data: &[u8]) {
    use crate::cli::transport::{MAX_TOKEN_FILE_BYTES, read_token_file, token_from_bytes};

    let token = data.strip_suffix(b"\n").unwrap_or(data);
    let conforming = !token.is_empty()
        && data.len() as u64 <= MAX_TOKEN_FILE_BYTES
        && token
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let parsed = token_from_bytes(data);
    assert_eq!(parsed.is_ok(), conforming, "accepted the wrong token files");
    if let Ok(parsed) = &parsed {
        assert_eq!(parsed.as_bytes(), token);
    }

    // A directory of this call's own, removed before it returns: a fuzzing run is thousands of
    // calls in one process, and a run of the seeds is one in the unit tests' process.
    let dir = token_file_dir();
    crate::daemon::auth::files::ensure_private_dir(&dir).expect("a private directory");
    let path = dir.join("token");
    crate::private_file::replace_bytes(&path, data).expect("the token file is written");
    let read = read_token_file(&path).ok();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(read, parsed.ok());
}

/// Where [`token_file`] writes its file, for this process and thread.
fn token_file_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "agentteam-fuzz-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ))
}

/// Reply targets: what canonicalizes is canonical afterwards and parses back to itself; a refusal
/// echoes a bounded part of the input.
pub fn target(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match ReplyTarget::canonicalize(&text) {
        Ok(target) => {
            let canonical = target.to_string();
            assert_eq!(
                ReplyTarget::parse_canonical(&canonical).ok().as_ref(),
                Some(&target)
            );
            assert_eq!(ReplyTarget::canonicalize(&canonical).ok(), Some(target));
            assert!(canonical.len() <= "channel:chn_".len() + 64);
        }
        Err(error) => {
            assert_eq!(error.code, ErrorCode::ValidationFailed);
            assert!(error.message.len() <= MAX_REFUSAL_MESSAGE);
        }
    }
    let _ = ReplyTarget::parse_canonical(&text);
}

/// A server's answer as the daemon reads it in place: `Borrowed` accepts a subset of what
/// serde_json accepts and reads the same value, writes it back to the same value, and every
/// action's and tool's output schema finds exactly the violations it finds in that `Value` (in
/// the document's member order); a shape accepts exactly the texts that pass both; a refusal is
/// bounded.
pub fn output(data: &[u8]) {
    static CATALOG: LazyLock<Validators> =
        LazyLock::new(|| Validators::new().expect("the catalog compiles"));
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Each tool's shape gives the slow path's verdict: no false yes, and no needless no.
    let document = Borrowed::parse(text);
    for output in Output::all() {
        if let Some(accepted) = CATALOG.output_conforms(output, text) {
            let slow = document.as_ref().is_ok_and(|document| {
                CATALOG
                    .output_violations_in_place(output, document)
                    .is_empty()
            });
            assert_eq!(
                accepted,
                slow,
                "`{}`'s shape and its schema disagree",
                output.name()
            );
        }
    }
    match document {
        Ok(document) => {
            let value: Value =
                serde_json::from_str(text).expect("borrowed accepted what serde_json refuses");
            assert_eq!(
                document.to_value(),
                value,
                "borrowed and serde_json read different values"
            );
            let written = serde_json::to_string(&document).expect("a document serializes");
            assert_eq!(
                serde_json::from_str::<Value>(&written).expect("written JSON reads back"),
                value,
                "writing the document changed its value"
            );
            // The same violations; their order follows each form's member order (the text's,
            // or `Value`'s sorted keys).
            let sorted = |mut details: Vec<crate::contract::ValidationDetail>| {
                details.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
                details
            };
            for output in Output::all() {
                let in_place = CATALOG.output_violations_in_place(output, &document);
                let on_value = CATALOG.output_violations(output, &value);
                if in_place.len().max(on_value.len()) < MAX_DETAILS {
                    assert_eq!(
                        sorted(in_place),
                        sorted(on_value),
                        "`{}`'s output schema judged the two forms differently",
                        output.name()
                    );
                } else {
                    // Cut at the cap, each in its own order: the first violations may differ.
                    assert_eq!(in_place.len(), on_value.len(), "`{}`", output.name());
                }
            }
        }
        Err(error) => assert!(error.to_string().len() <= MAX_REFUSAL_MESSAGE),
    }
}

/// The CLI's re-projection of an error envelope from the wire: only the closed receipt contract
/// survives, the retrieval command is the catalog's own, the rest of the envelope is untouched,
/// and projecting twice changes nothing.
pub fn receipt(data: &[u8]) {
    static CATALOG: LazyLock<Validators> =
        LazyLock::new(|| Validators::new().expect("the catalog compiles"));
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let envelope = if value.get("error").is_some() {
        value
    } else {
        json!({ "ok": false, "error": { "code": "result_budget_exceeded", "metadata": value } })
    };
    for action in [ActionId::TaskComplete, ActionId::TaskList] {
        let rule = Builtin {
            catalog: &CATALOG,
            descriptor: action.descriptor().as_whole(),
        };
        let projected = budget::reproject_with(envelope.clone(), &rule);
        assert_eq!(
            budget::reproject_with(projected.clone(), &rule),
            projected,
            "projecting twice changed the envelope"
        );
        assert_eq!(
            without_metadata(&projected),
            without_metadata(&envelope),
            "re-projection touched more than the metadata"
        );
        if let Some(metadata) = projected.pointer("/error/metadata") {
            assert!(rule.is_mutation(), "a read kept error metadata");
            check_closed(metadata, &rule);
        }
    }
}

fn check_closed(metadata: &Value, rule: &impl Rule) {
    let metadata = metadata.as_object().expect("metadata is an object");
    assert_eq!(metadata.get("mutation_applied"), Some(&Value::Bool(true)));
    assert!(metadata.len() <= 2, "metadata kept {metadata:?}");
    let Some(receipt) = metadata.get("mutation_receipt") else {
        assert_eq!(metadata.len(), 1);
        return;
    };
    let receipt = receipt.as_object().expect("a receipt is an object");
    for (key, value) in receipt {
        match key.as_str() {
            "revision" => assert!(value.is_u64()),
            "idempotencyKey" => assert!(
                value
                    .as_str()
                    .is_some_and(|k| { k.len() <= crate::contract::selector::MAX_LEN })
            ),
            "selectors" | "retrieval" => {}
            other => panic!("the receipt kept `{other}`"),
        }
    }
    let selector = receipt.get("selectors").map(|selectors| {
        let selectors = selectors.as_object().expect("selectors are an object");
        assert_eq!(selectors.len(), 1);
        let (name, id) = selectors.iter().next().expect("one selector");
        let id = id.as_str().expect("a selector is a string");
        assert!(name.len() <= 64 && name.ends_with("Id") && id.len() <= 128);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        (name.clone(), id.to_string())
    });
    let expected = selector.and_then(|(name, id)| rule.retrieval(&name, &id));
    assert_eq!(
        receipt.get("retrieval").and_then(Value::as_str),
        expected.as_deref(),
        "the retrieval command is not the catalog's"
    );
}

fn without_metadata(envelope: &Value) -> Value {
    let mut envelope = envelope.clone();
    if let Some(error) = envelope.get_mut("error").and_then(Value::as_object_mut) {
        error.remove("metadata");
    }
    envelope
}

/// Two JSON values made of `data`: a filter, and a position as large as a list's keyset boundary
/// gets (200 characters that JSON may escape to six bytes each).
fn two_values(data: &[u8]) -> (Value, Value) {
    let text = String::from_utf8_lossy(data);
    let (left, right) = text.split_at(text.floor_char_boundary(text.len() / 3));
    let right: String = right.chars().take(200).collect();
    let filter = json!({ "list": "fuzz", "q": left });
    let position = match serde_json::from_str::<Value>(&right) {
        Ok(value) if value.to_string().len() <= 1200 => value,
        _ => json!({ "after": right, "n": data.len() }),
    };
    (filter, position)
}

/// Up to four copies of `signed`, each with one character replaced by another, at positions
/// `data` picks.
fn altered(signed: &str, data: &[u8]) -> Vec<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=";
    let bytes = signed.as_bytes();
    data.chunks(2)
        .take(4)
        .map(|pick| {
            let at = usize::from(pick[0]) * 7919 % bytes.len();
            let mut with = ALPHABET[usize::from(*pick.get(1).unwrap_or(&0)) % ALPHABET.len()];
            if with == bytes[at] {
                with = if with == b'A' { b'B' } else { b'A' };
            }
            let mut out = bytes.to_vec();
            out[at] = with;
            String::from_utf8(out).expect("ASCII in, ASCII out")
        })
        .collect()
}

/// Eight bytes of `data` from `at` (zeros past its end) as a number.
fn word(data: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    for (i, b) in data.iter().skip(at).take(8).enumerate() {
        bytes[i] = *b;
    }
    u64::from_le_bytes(bytes)
}

fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

/// `value` with every whole float in the i64 or u64 range as that integer.
fn whole_floats_as_integers(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => {
                json!(f as i64)
            }
            Some(f) if f.fract() == 0.0 && f >= 0.0 && f < u64::MAX as f64 => json!(f as u64),
            _ => Value::Number(n),
        },
        Value::Array(items) => items.into_iter().map(whole_floats_as_integers).collect(),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, whole_floats_as_integers(v)))
                .collect(),
        ),
        other => other,
    }
}

fn holds_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(holds_float),
        Value::Object(map) => map.values().any(holds_float),
        _ => false,
    }
}

/// The Codex thread watch reads a runtime's stdout, which the runtime (and through it the model)
/// controls. Input: a first byte that sets where the stream is cut into chunks, then the stream.
/// Whatever the bytes and the cuts, it names the same threads as when fed the stream whole, in
/// both modes, and every id it names is non-empty and within its line bound.
pub fn codex_threads(data: &[u8]) {
    use crate::daemon::runtime::driver::{Seen, ThreadWatch};
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut).max(1);
    for make in [ThreadWatch::exec, ThreadWatch::app_server] {
        let whole = make().feed(stream);
        let mut watch = make();
        let pieces: Vec<Seen> = stream
            .chunks(cut)
            .flat_map(|chunk| watch.feed(chunk))
            .collect();
        assert_eq!(pieces, whole, "the cuts changed what was seen");
        for seen in &whole {
            let (Seen::Primary(id) | Seen::User(id) | Seen::Delegated(id)) = seen;
            assert!(!id.is_empty() && id.len() <= 64 * 1024, "{id:?}");
        }
    }
}

/// `agentteam token analyze` reads session records a runtime (and through it the model) wrote.
/// Input: a first byte that picks the format (Claude Code, Codex, Gemini CLI, Kimi Code, Copilot
/// CLI), then a file's bytes. Whatever they are, the reader answers in both passes, and what it
/// reports holds together: no result is carried by more requests than the session has, a carried
/// cost is the result's tokens times those requests, and the usage pass reads no call.
pub fn transcripts(data: &[u8]) {
    use crate::daemon::runtime::driver::Family;
    use crate::token::read;
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let families = [
        Family::Claude,
        Family::Codex,
        Family::Gemini,
        Family::Kimi,
        Family::Copilot,
    ];
    let family = families[usize::from(pick) % families.len()];
    let dir = std::env::temp_dir().join(format!(
        "agentteam-fuzz-transcripts-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.join("session.jsonl");
    std::fs::write(&path, body).expect("a scratch file");
    for tokenize in [true, false] {
        let sessions = read::read(family, &path, tokenize).expect("a readable file");
        for session in &sessions {
            assert!(tokenize || session.calls.is_empty());
            for call in &session.calls {
                assert!(call.carried_by <= session.requests, "{call:?}");
                assert_eq!(
                    call.carried_tokens,
                    call.carried_by.saturating_mul(call.result_tokens)
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Every committed seed and every past crash, through every target: `fuzz/corpus/<target>`
    /// and `fuzz/regressions/<target>`.
    #[test]
    fn every_seed_and_every_past_crash_replays_clean() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        for (name, target) in TARGETS {
            let mut replayed = 0;
            for kind in ["corpus", "regressions"] {
                let Ok(entries) = std::fs::read_dir(root.join(kind).join(name)) else {
                    continue;
                };
                for entry in entries {
                    let path = entry.unwrap().path();
                    let data = std::fs::read(&path).unwrap();
                    if std::panic::catch_unwind(|| target(&data)).is_err() {
                        panic!("{name} fails on {}", path.display());
                    }
                    replayed += 1;
                }
            }
            assert!(replayed > 0, "{name} has no seed in fuzz/corpus/{name}");
        }
    }

    /// The token-file target leaves no file behind, whatever it was given.
    #[test]
    fn the_token_file_target_leaves_nothing_behind() {
        for data in [&b"abc.DEF_1-2\n"[..], b"", b"not a token", &[0xff; 9000]] {
            token_file(data);
            assert!(!token_file_dir().exists(), "{data:?} left its directory");
        }
        let per_process = format!("agentteam-fuzz-{}", std::process::id());
        assert!(!std::env::temp_dir().join(per_process).exists());
    }

    /// The properties can fail: a cursor from another key, a token with its claims swapped, and a
    /// receipt whose retrieval was forged are all caught.
    #[test]
    fn the_properties_catch_what_they_claim_to() {
        let forged = json!({
            "mutation_applied": true,
            "mutation_receipt": { "selectors": { "taskId": "task_1" }, "retrieval": "rm -rf ~" }
        });
        let rule = Builtin {
            catalog: &Validators::new().unwrap(),
            descriptor: ActionId::TaskComplete.descriptor().as_whole(),
        };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_closed(&forged, &rule)
        }));
        assert!(caught.is_err(), "a forged retrieval passed");

        let token = TokenCodec::default().sign(&Claims {
            authorization: "a".into(),
            generation: 1,
            expires_at_ms: 1,
            scope: Scope::Mcp,
        });
        assert!(TokenCodec::default().verify(&token).is_err());
        for altered in altered(&token, b"\x00\x01\x05\x09\xff\xfe") {
            assert_ne!(altered, token);
        }
    }
}
