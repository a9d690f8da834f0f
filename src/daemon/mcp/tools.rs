//! `CallTool`, the only execution entry of the `agentteam` namespace, and the MCP result budget.
//!
//! A call: validate the arguments against the tool's schema and canonicalize an exact `target`
//! (failures are `isError` results, so the model can fix its call) → the tool's owner: the
//! server's runtime API; the daemon's memory index (`memory_search`); or the server's knowledge
//! route with the run's current turn (`kb_search`, `kb_fetch`: every failure names its
//! `KnowledgeStage`, and without a current turn the call stops at `route_missing`) → normalize:
//! the structured result must match the tool's output schema → one `structuredContent` value plus
//! its JSON text → the result budget: a result over `MCP_RESULT_BUDGET_BYTES` serialized is
//! replaced by a `result_budget_exceeded` error result carrying the tool's continuation, never
//! truncated.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::era::Era;
use crate::client::{CallContext, ToolAnswer};
use crate::contract::catalog::MCP_RESULT_BUDGET_BYTES;
use crate::contract::error::{ErrorCode, KnowledgeStage};
use crate::contract::target::Target;
use crate::contract::{ActionError, ToolDescriptor, ToolOwner, ValidationDetail, Validators};
use crate::daemon::auth::Authorization;
use crate::daemon::state::DaemonState;
use crate::wire::idempotency::resolve_selector;

/// Runs one validated-by-name tool call and returns its `CallToolResult`, decorated for `era`
/// and serialized: the budget measures exactly what is sent, and the result is serialized once.
pub async fn call(
    state: &DaemonState,
    authorization: &Authorization,
    era: Era,
    tool: &'static ToolDescriptor,
    arguments: Value,
) -> String {
    let applied = !tool.read_only;
    match run(state, authorization, era, tool, arguments).await {
        Ok(sent) => fit(tool, era, sent, applied),
        Err(error) => budgeted(tool, era, failure(&error), false),
    }
}

/// What an owner answered: a value it built, or the envelope a server wrote.
enum Answer {
    Value(Value),
    Text(ToolAnswer),
}

/// The owner's structured result, checked against the tool's output schema, as the serialized
/// success result of `era`.
async fn run(
    state: &DaemonState,
    authorization: &Authorization,
    era: Era,
    tool: &'static ToolDescriptor,
    arguments: Value,
) -> Result<String, ActionError> {
    let knowledge = tool.owner == ToolOwner::Knowledge;
    let at = |stage: KnowledgeStage| {
        move |error: ActionError| {
            if knowledge && error.stage.is_none() {
                error.at_stage(stage)
            } else {
                error
            }
        }
    };
    let answer = owner(state, authorization, tool, arguments)
        .await
        .map_err(at(KnowledgeStage::RouteMissing))?;
    let (violations, text) = match &answer {
        Answer::Value(data) => (
            state.validators.tool_output_violations(tool.id, data),
            Cow::Owned(compact(data)),
        ),
        Answer::Text(answer) => checked(&state.validators, tool, answer)?,
    };
    if let Some(first) = violations.first() {
        tracing::error!(tool = tool.name, path = %first.path, "the owner's result does not match the tool's output schema");
        return Err(at(KnowledgeStage::Upstream)(after_apply(
            tool,
            ActionError::new(
                ErrorCode::UpstreamFailed,
                format!(
                    "the owner of `{}` answered with a malformed result",
                    tool.name
                ),
            ),
        )));
    }
    Ok(success_sent(era, &text))
}

/// A server's answer checked where it lies: the violations of its `data` against the tool's
/// output schema, and the text to send, `data` as the server wrote it unless it holds whitespace
/// the text block would have to escape. A text the tool's [`Shape`](crate::contract::shape)
/// accepts needs no tree; any other is read into one, and its violations are found there.
fn checked<'a>(
    validators: &Validators,
    tool: &ToolDescriptor,
    answer: &'a ToolAnswer,
) -> Result<(Vec<ValidationDetail>, Cow<'a, str>), ActionError> {
    // The fast path: the output schema checked as the text is read, nothing built.
    if let Some(written) = answer.written()
        && validators.tool_output_conforms(tool.id, written) == Some(true)
        && !has_control_byte(written.as_bytes())
    {
        return Ok((Vec::new(), Cow::Borrowed(written)));
    }
    let (document, written) = answer.data()?;
    let violations = validators.tool_output_violations_in_place(tool.id, &document);
    let text = if has_control_byte(written.as_bytes()) {
        Cow::Owned(serde_json::to_string(&document).expect("a document always serializes"))
    } else {
        written
    };
    Ok((violations, text))
}

/// Whether `text` holds a byte below a space: in JSON, whitespace other than spaces. Chunks
/// without an early exit inside them, so the compiler compares many bytes at once (it runs over
/// every history page; BENCHMARKS.md).
fn has_control_byte(text: &[u8]) -> bool {
    text.chunks(64)
        .any(|chunk| chunk.iter().fold(false, |seen, &b| seen | (b < b' ')))
}

/// Validates the call and asks the tool's owner. A knowledge failure without a stage of its own
/// was refused before the server's knowledge route: the caller marks it `route_missing`.
async fn owner(
    state: &DaemonState,
    authorization: &Authorization,
    tool: &'static ToolDescriptor,
    mut arguments: Value,
) -> Result<Answer, ActionError> {
    let validated = state.validators.validate_tool_input(tool.id, &arguments);
    if tool.owner == ToolOwner::Knowledge {
        validated.map_err(|error| error.at_stage(KnowledgeStage::RequestValidation))?;
    } else {
        validated?;
    }
    // The exact-target rule: canonical format and local boundary checks here, authorization on
    // the server.
    if let Some(raw) = arguments.get("target").and_then(Value::as_str) {
        let target = Target::canonicalize(raw)?;
        arguments["target"] = json!(target.to_string());
    }
    let idempotency_key = if tool.read_only {
        None
    } else {
        resolve_selector(&Default::default(), &arguments)?
    };
    let ctx = CallContext {
        server_id: authorization.binding.server_id.clone(),
        agent_id: authorization.binding.agent_id.clone(),
        idempotency_key,
    };
    let cancel = authorization.cancel.clone();
    let revoked = || {
        ActionError::new(
            ErrorCode::Forbidden,
            "this runtime's credential was revoked",
        )
    };
    match tool.owner {
        ToolOwner::Server => tokio::select! {
            data = state.server_client.call_tool(&ctx, tool.id, &arguments) => data.map(Answer::Text),
            () = cancel.cancelled() => Err(revoked()),
        },
        ToolOwner::Memory => {
            let query = arguments["query"].as_str().unwrap_or_default();
            let limit = arguments.get("limit").and_then(Value::as_u64).unwrap_or(10) as usize;
            state
                .memory
                .search(&ctx.agent_id, query, limit)
                .await
                .map(Answer::Value)
        }
        ToolOwner::Knowledge => {
            let turn = authorization.turn().ok_or_else(|| {
                ActionError::new(
                    ErrorCode::InvalidState,
                    "knowledge retrieval is bound to a Human-initiated turn, and this runtime is answering none",
                )
                .with_next("continue without knowledge retrieval; it is available while you answer a human's message")
                .at_stage(KnowledgeStage::RouteMissing)
            })?;
            tokio::select! {
                data = state.server_client.call_knowledge(&ctx, tool.name, &arguments, &turn) => {
                    data.map(Answer::Value).map_err(core_unreachable)
                }
                () = cancel.cancelled() => Err(revoked()),
            }
        }
    }
}

/// A knowledge call that got no usable answer from AgentTeam Core (the hop failed or timed out,
/// Core failed without naming a hop, or the answer was not the contract's) fails at
/// `core_unreachable`; a refusal Core answered
/// keeps its own stage, or none (then the caller marks it `route_missing`).
fn core_unreachable(error: ActionError) -> ActionError {
    let transport = matches!(
        error.code,
        ErrorCode::UpstreamUnavailable | ErrorCode::UpstreamTimeout | ErrorCode::UpstreamFailed
    );
    if error.stage.is_none() && transport {
        error.at_stage(KnowledgeStage::CoreUnreachable)
    } else {
        error
    }
}

/// A failure found after the owner answered: a tool with side effects has already acted, and
/// says so, so the model does not repeat it.
fn after_apply(tool: &ToolDescriptor, mut error: ActionError) -> ActionError {
    if !tool.read_only {
        error.metadata = Some(Box::new(json!({ "mutation_applied": true })));
        error = error.with_next(format!(
            "the `{}` call took effect; do not repeat it",
            tool.name
        ));
    }
    error
}

/// A success: the structured value and the same JSON as text.
fn success(structured: Value) -> Value {
    let text = compact(&structured);
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": structured,
        "isError": false,
    })
}

/// What [`success`] decorated for `era` serializes to, byte for byte, for the structured value
/// whose JSON text is `text` (no byte below a space): that text is both `structuredContent` and
/// the text block, written once each (a page of messages was serialized twice, and its text
/// escaped inside the second pass).
fn success_sent(era: Era, text: &str) -> String {
    let template = match era {
        Era::Legacy => &*LEGACY_SUCCESS,
        Era::Modern => &*MODERN_SUCCESS,
    };
    let [before_text, before_structured, after] = &template.0;
    // Room for the text quoted with a backslash before every fourth byte, so the common page
    // is written without growing.
    let mut sent = String::with_capacity(
        before_text.len()
            + 2 * text.len()
            + text.len() / 4
            + 2
            + before_structured.len()
            + after.len(),
    );
    sent.push_str(before_text);
    quote_compact(&mut sent, text);
    sent.push_str(before_structured);
    sent.push_str(text);
    sent.push_str(after);
    sent
}

/// Appends `text`, JSON with no byte below a space, to `out` as a JSON string: what
/// `serde_json::to_string(text)` gives. Such JSON holds no control character (inside its strings
/// they are escaped, and its whitespace, if any, is spaces), so only `"` and `\` need a
/// backslash.
///
/// Eight bytes at a time: a word without either is copied whole, and a word with some is copied
/// byte by byte, a backslash written before each byte and kept only before those two. A page's
/// text has a quote every few bytes, so a search for the next one (memchr, 2.6 µs for a page of
/// 20 messages) cost more than this pass (1.7 µs).
fn quote_compact(out: &mut String, text: &str) {
    let mut bytes = std::mem::take(out).into_bytes();
    let base = bytes.len();
    // At most a backslash per byte, and the two quotes.
    bytes.resize(base + 2 * text.len() + 2, 0);
    let room = &mut bytes[base..];
    let mut at = 0;
    room[at] = b'"';
    at += 1;
    let mut words = text.as_bytes().chunks_exact(8);
    for word in &mut words {
        let marks = quote_or_backslash(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        if marks == 0 {
            room[at..at + 8].copy_from_slice(word);
            at += 8;
            continue;
        }
        for (i, &byte) in word.iter().enumerate() {
            room[at] = b'\\';
            at += ((marks >> (8 * i + 7)) & 1) as usize;
            room[at] = byte;
            at += 1;
        }
    }
    for &byte in words.remainder() {
        room[at] = b'\\';
        at += usize::from(byte == b'"' || byte == b'\\');
        room[at] = byte;
        at += 1;
    }
    room[at] = b'"';
    at += 1;
    bytes.truncate(base + at);
    // Only ASCII backslashes were added, each before an ASCII byte: still UTF-8.
    *out = String::from_utf8(bytes).expect("quoting keeps UTF-8");
}

/// The high bit of each byte of `word` (little-endian) that is `"` or `\`, and no other bit.
fn quote_or_backslash(word: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    // A byte of `x` is zero exactly when its high bit here is set (no borrow between bytes: the
    // addition never carries past a byte's high bit).
    let zero = |x: u64| !((x & !HIGH).wrapping_add(!HIGH) | x) & HIGH;
    zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\')))
}

/// A decorated success result cut around its two holes: the text block's string and the
/// structured value.
struct SuccessTemplate([String; 3]);

impl SuccessTemplate {
    fn new(era: Era) -> SuccessTemplate {
        const TEXT: &str = "\u{1}text";
        const STRUCTURED: &str = "\u{1}structured";
        let mut result = success(json!(STRUCTURED));
        result["content"][0]["text"] = json!(TEXT);
        let whole = compact(&era.decorate(result));
        let quoted = |s: &str| serde_json::to_string(s).expect("a string serializes");
        let structured = format!("\"structuredContent\":{}", quoted(STRUCTURED));
        let (before_text, rest) = whole.split_once(&quoted(TEXT)).expect("the text hole");
        let (middle, after) = rest.split_once(&structured).expect("the structured hole");
        SuccessTemplate([
            before_text.to_string(),
            format!("{middle}\"structuredContent\":"),
            after.to_string(),
        ])
    }
}

static LEGACY_SUCCESS: std::sync::LazyLock<SuccessTemplate> =
    std::sync::LazyLock::new(|| SuccessTemplate::new(Era::Legacy));
static MODERN_SUCCESS: std::sync::LazyLock<SuccessTemplate> =
    std::sync::LazyLock::new(|| SuccessTemplate::new(Era::Modern));

/// A refusal before any owner was asked (the delegated-child gate), as a sent tool error.
pub fn refused(era: Era, error: &ActionError) -> String {
    compact(&era.decorate(failure(error)))
}

/// A tool error: the error envelope as text, so a model reads code, message, hint and next.
fn failure(error: &ActionError) -> Value {
    json!({
        "content": [{ "type": "text", "text": error.envelope().to_string() }],
        "isError": true,
    })
}

/// The serialized result itself when it fits the budget; otherwise the classified refusal.
fn budgeted(tool: &ToolDescriptor, era: Era, result: Value, applied: bool) -> String {
    fit(tool, era, compact(&era.decorate(result)), applied)
}

/// `sent` when it fits the budget; otherwise the classified refusal.
fn fit(tool: &ToolDescriptor, era: Era, sent: String, applied: bool) -> String {
    let size = sent.len();
    if size <= MCP_RESULT_BUDGET_BYTES {
        return sent;
    }
    let mut error = ActionError::new(
        ErrorCode::ResultBudgetExceeded,
        format!(
            "the result of `{}` is {size} bytes, over the {MCP_RESULT_BUDGET_BYTES}-byte result budget",
            tool.name
        ),
    );
    if let Some(hint) = tool.hint {
        error = error.with_hint(hint);
    }
    if let Some(next) = tool.next {
        error = error.with_next(next);
    }
    if applied {
        error.metadata = Some(Box::new(json!({ "mutation_applied": true })));
    }
    compact(&era.decorate(failure(&error)))
}

/// `value` as compact JSON text, written straight into a `String` (`Value`'s `Display` goes
/// through the formatting machinery: measurably slower on a page of messages).
fn compact(value: &Value) -> String {
    serde_json::to_string(value).expect("a Value always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::catalog::find_tool;

    fn envelope(sent: &str) -> Value {
        let result: Value = serde_json::from_str(sent).unwrap();
        assert_eq!(result["isError"], true);
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
    }

    #[test]
    fn a_result_at_the_budget_passes_whole_and_one_byte_more_is_refused() {
        let tool = find_tool("message_history_read").unwrap();
        // Grow a string until the serialized result is exactly the budget.
        let sized = |n: usize| success(json!({ "messages": [], "target": "x".repeat(n) }));
        let sent = |n: usize| Era::Modern.decorate(sized(n)).to_string();
        let base = sent(0).len();
        // Each character appears twice: in `structuredContent` and in the text block.
        let fits = (MCP_RESULT_BUDGET_BYTES - base) / 2;
        let size = sent(fits).len();
        assert!(size <= MCP_RESULT_BUDGET_BYTES && size + 2 > MCP_RESULT_BUDGET_BYTES);
        // Measured as sent: the modern era's fields count.
        assert_eq!(budgeted(tool, Era::Modern, sized(fits), false), sent(fits));
        assert_eq!(
            budgeted(tool, Era::Legacy, sized(fits), false),
            sized(fits).to_string(),
            "the legacy era adds nothing"
        );

        let over = envelope(&budgeted(tool, Era::Modern, sized(fits + 1), false));
        assert_eq!(over["error"]["code"], "result_budget_exceeded");
        assert_eq!(over["error"]["next"], tool.next.unwrap());
        assert_eq!(over["error"]["hint"], tool.hint.unwrap());
        assert!(
            over["error"].get("metadata").is_none(),
            "a read applied nothing"
        );
    }

    /// The once-serialized success is exactly what the decorated `Value` serializes to, in both
    /// eras, with text that needs escaping and a structured value holding the template's markers.
    #[test]
    fn a_success_serialized_once_is_the_decorated_value_byte_for_byte() {
        let values = [
            json!({ "messages": [{ "content": "quote \" backslash \\ newline \n \u{1} é 😀" }] }),
            json!({ "target": "\"structuredContent\":\"\\u0001text\"", "n": 1.5, "ok": null }),
            json!({}),
        ];
        for era in [Era::Legacy, Era::Modern] {
            for value in &values {
                assert_eq!(
                    success_sent(era, &compact(value)),
                    compact(&era.decorate(success(value.clone()))),
                    "{era:?}"
                );
            }
        }
    }

    /// A history page as the reference server writes its envelope, with `message` as its only
    /// message.
    fn page(message: &str) -> String {
        format!(
            r#"{{"data":{{"messages":[{message}],"target":"channel:chn_0123456789"}},"ok":true}}"#
        )
    }

    const MESSAGE: &str = r#"{"attachments":[],"authorId":"agt_0123456789","content":"hi","createdAt":"2026-12-01T02:03:04.005Z","id":"msg_0123456789","reactions":[],"target":"channel:chn_0123456789"}"#;

    #[test]
    fn a_servers_answer_is_checked_in_place_and_sent_as_written() {
        let validators = Validators::lazy();
        let tool = find_tool("message_history_read").unwrap();
        let body = page(MESSAGE);
        let answer = ToolAnswer::new(body.clone());
        let (violations, text) = checked(&validators, tool, &answer).unwrap();
        assert!(violations.is_empty(), "{violations:?}");
        assert!(matches!(text, Cow::Borrowed(_)), "sent without a copy");
        assert_eq!(
            text,
            body[r#"{"data":"#.len()..body.len() - r#","ok":true}"#.len()]
        );

        // Whitespace the text block would escape: the same value, written compactly.
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&body).unwrap()).unwrap();
        let answer = ToolAnswer::new(pretty);
        let (violations, text) = checked(&validators, tool, &answer).unwrap();
        assert!(violations.is_empty(), "{violations:?}");
        assert!(!has_control_byte(text.as_bytes()));
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            serde_json::from_str::<Value>(&body).unwrap()["data"]
        );
    }

    /// What the output schema refuses is found whatever the envelope's form: a result that
    /// breaks it never reaches a runtime.
    #[test]
    fn a_servers_answer_that_breaks_the_output_schema_is_found() {
        let validators = Validators::lazy();
        let tool = find_tool("message_history_read").unwrap();
        let broken = [
            (MESSAGE.replace("msg_0123456789", "msg_x"), "/messages/0/id"),
            (
                MESSAGE.replace(r#""content":"hi""#, r#""content":"""#),
                "/messages/0/content",
            ),
            (MESSAGE.replace(r#""reactions":[],"#, ""), "/messages/0"),
            (
                MESSAGE.replace(r#""reactions":[]"#, r#""reactions":[],"extra":1"#),
                "/messages/0/extra",
            ),
            (
                MESSAGE.replace("2026-12-01T02:03:04.005Z", "yesterday"),
                "/messages/0/createdAt",
            ),
        ];
        for (message, path) in broken {
            for body in [
                page(&message),
                page(&message).replace(r#""data":"#, r#""data": "#),
            ] {
                let (violations, _) =
                    checked(&validators, tool, &ToolAnswer::new(body.clone())).unwrap();
                assert!(
                    violations.iter().any(|v| v.path == path),
                    "{body}: {violations:?}"
                );
            }
        }
    }

    #[test]
    fn a_control_byte_is_found_anywhere_in_a_chunk() {
        assert!(!has_control_byte(b""));
        for len in [1, 63, 64, 65, 200] {
            let mut text = vec![b' '; len];
            assert!(!has_control_byte(&text), "{len}");
            for at in [0, len / 2, len - 1] {
                text[at] = b'\n';
                assert!(has_control_byte(&text), "{len} {at}");
                text[at] = 0x1f;
                assert!(has_control_byte(&text), "{len} {at}");
                text[at] = 0x7f;
                assert!(!has_control_byte(&text), "{len} {at}");
                text[at] = b' ';
            }
        }
    }

    #[test]
    fn compact_json_is_quoted_as_serde_json_quotes_it() {
        let values = [
            json!({ "a": "quote \" backslash \\ controls \n\t\u{1}\u{1f} del \u{7f} é 😀 \u{2028}" }),
            json!(["\\\"", "", 1, null, { "": "\\" }]),
            json!("\""),
        ];
        let mut texts: Vec<String> = values.iter().map(compact).collect();
        // Each of the two bytes, alone and in runs, at every place in and across the 8-byte
        // words, beside bytes that are neither (one of them `"` + 1 and `\` ± 1, and UTF-8).
        for len in 0..=24 {
            for at in 0..len {
                for (mark, other) in [("\"", "#"), ("\\", "]"), ("\"", "\u{e9}"), ("\\", "[")] {
                    let mut text: Vec<&str> = vec![other; len];
                    text[at] = mark;
                    texts.push(text.concat());
                    text[at..].fill(mark);
                    texts.push(text.concat());
                }
            }
        }
        for text in &texts {
            let mut quoted = String::from("before");
            quote_compact(&mut quoted, text);
            assert_eq!(
                quoted,
                format!("before{}", serde_json::to_string(text).unwrap()),
                "{text:?}"
            );
        }
        for byte in 0..=u8::MAX {
            let word = u64::from_le_bytes([b'a', byte, b'a', b'a', b'a', b'a', b'a', byte]);
            let expected = if byte == b'"' || byte == b'\\' {
                0x8000_0000_0000_8000
            } else {
                0
            };
            assert_eq!(quote_or_backslash(word), expected, "{byte}");
        }
    }

    #[test]
    fn an_over_budget_mutation_says_it_was_applied() {
        let tool = find_tool("message_send").unwrap();
        let huge = success(json!({ "text": "x".repeat(MCP_RESULT_BUDGET_BYTES) }));
        let refused = envelope(&budgeted(tool, Era::Legacy, huge, true));
        assert_eq!(refused["error"]["code"], "result_budget_exceeded");
        assert_eq!(refused["error"]["metadata"]["mutation_applied"], true);
    }

    #[test]
    fn a_failure_after_the_owner_answered_marks_a_mutation_applied() {
        let failed = || ActionError::new(ErrorCode::UpstreamFailed, "malformed");
        let send = after_apply(find_tool("message_send").unwrap(), failed());
        assert_eq!(
            send.metadata.as_deref(),
            Some(&json!({ "mutation_applied": true }))
        );
        assert!(send.next.unwrap().contains("do not repeat it"));
        let read = after_apply(find_tool("message_history_read").unwrap(), failed());
        assert!(read.metadata.is_none());
    }
}
