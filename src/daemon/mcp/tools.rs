//! `CallTool`, the only execution entry of the `agentteam` namespace, and the MCP result budget.
//!
//! A call goes through the call core (`daemon::call`: validation, the exact `target`, the
//! selector, the tool's owner, the output check; failures are `isError` results, so the model can
//! fix its call); what is MCP's is here: one `structuredContent` value plus its JSON text,
//! decorated for the era, and the result budget: a result over `MCP_RESULT_BUDGET_BYTES`
//! serialized is replaced by a `result_budget_exceeded` error result carrying the tool's
//! continuation, never truncated.

use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::era::Era;
use crate::contract::catalog::MCP_RESULT_BUDGET_BYTES;
use crate::contract::error::ErrorCode;
use crate::contract::{ActionError, ToolDescriptor};
use crate::daemon::access::Slot;
use crate::daemon::auth::Authorization;
use crate::daemon::call::{self, Call, Operation};
use crate::daemon::state::DaemonState;

/// Runs one tool call named in `tools/call`, in the run's current `turn`, and returns its
/// `CallToolResult`, decorated for `era` and serialized: the budget measures exactly what is
/// sent, and the result is serialized once.
pub async fn call(
    state: &DaemonState,
    authorization: &Authorization,
    admission: &Slot,
    era: Era,
    tool: &'static ToolDescriptor,
    turn: Option<std::sync::Arc<crate::wire::turn::Turn>>,
    arguments: Value,
) -> String {
    let operation = Operation::Tool { tool, turn };
    let call = Call {
        authorization,
        operation: &operation,
        input: arguments,
        // MCP carries its selector in the arguments only.
        selectors: &HeaderMap::new(),
        admission,
    };
    let answer = call::run(state, call).await;
    crate::telemetry::request::outcome_of(&answer);
    match answer {
        Ok(answer) => fit(
            tool,
            era,
            success_sent(era, answer.data.text()),
            answer.mutation,
        ),
        Err(error) => budgeted(tool, era, failure(&error), false),
    }
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
/// text has a quote every few bytes, so a search for the next one (memchr) restarts every few
/// bytes and measured slower than this single pass (BENCHMARKS.md has the figures).
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
    crate::telemetry::request::budget(size <= MCP_RESULT_BUDGET_BYTES);
    if size <= MCP_RESULT_BUDGET_BYTES {
        return sent;
    }
    crate::telemetry::request::outcome(ErrorCode::ResultBudgetExceeded.to_string().as_str());
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
}
