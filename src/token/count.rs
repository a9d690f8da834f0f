//! Counting tokens offline, and saying how each count was made.
//!
//! OpenAI's `o200k_base` encoding ships inside the binary (`tiktoken-rs`), so a count needs no
//! network. Every count is of a text as the runtime sent or recorded it, never of what the
//! provider made of it:
//!
//! - A result's text: `o200k_base` is the encoding of OpenAI's current models, so for those the
//!   count is the text's own (the few tokens the provider frames a message with are not in it);
//!   Anthropic, Google and Moonshot publish no tokenizer for theirs, so for those models the
//!   same count is an estimate, labelled as one.
//! - The fixed cost: a tool definition is counted as its JSON text, but no provider bills that
//!   text. Each renders a definition into its prompt in its own form (and may add a tool-use
//!   preamble of its own), so the fixed cost is an estimate for every provider, OpenAI's too
//!   (`Method::JsonText`).
//!
//! How far the counts are from what a runtime's provider recorded is measured per runtime: each
//! result's count against the growth of recorded input it caused (`crate::token::EstimateCheck`).

use std::sync::OnceLock;

use serde::Serialize;

/// How a figure was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Written by the runtime itself (the provider's own usage figures).
    Recorded,
    /// Counted with the model's own encoding (`o200k_base`, an OpenAI model).
    Counted,
    /// Counted with `o200k_base` for a model whose tokenizer is not public.
    Estimated,
    /// Counted with `o200k_base` from the JSON text of the tool definitions and the texts as
    /// sent: an estimate for every provider, which bills a definition as it renders it.
    JsonText,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Recorded => "recorded",
            Method::Counted => "counted",
            Method::Estimated => "estimated",
            Method::JsonText => "json_text",
        }
    }
}

/// What an `Estimated` figure is: said once in the help, the table's footer and the JSON.
pub const ESTIMATE_RULE: &str = "o200k_base token count; the model's own tokenizer is not public";

/// What a `JsonText` figure (a fixed cost) is: said in the table's footer and the JSON.
pub const JSON_TEXT_RULE: &str = "o200k_base token count of the tool definitions' JSON text and the texts as sent; an estimate for every provider, which bills a definition as it renders it";

/// Whether `o200k_base` is `model`'s own encoding: OpenAI's GPT-4o, GPT-4.1, GPT-5, the o-series
/// and Codex models.
pub fn exact_for(model: &str) -> bool {
    let model = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    [
        "gpt-4o",
        "gpt-4.1",
        "gpt-5",
        "o1",
        "o3",
        "o4",
        "codex",
        "chatgpt-4o",
    ]
    .iter()
    .any(|prefix| model.starts_with(prefix))
}

/// How a count for `model` is labelled.
pub fn method_for(model: Option<&str>) -> Method {
    match model {
        Some(model) if exact_for(model) => Method::Counted,
        _ => Method::Estimated,
    }
}

fn encoding() -> &'static tiktoken_rs::CoreBPE {
    static BPE: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("the embedded o200k_base table loads"))
}

/// The `o200k_base` token count of `text` (special tokens read as text).
pub fn tokens(text: &str) -> u64 {
    encoding().encode_ordinary(text).len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_openais_published_examples() {
        // tiktoken's own documented counts for o200k_base.
        assert_eq!(tokens("hello world"), 2);
        assert_eq!(tokens(""), 0);
        assert_eq!(tokens("tiktoken is great!"), 6);
    }

    #[test]
    fn only_openai_models_are_counted_exactly() {
        assert_eq!(method_for(Some("gpt-5.1-codex")), Method::Counted);
        assert_eq!(method_for(Some("openai/gpt-4.1")), Method::Counted);
        assert_eq!(method_for(Some("claude-sonnet-4-5")), Method::Estimated);
        assert_eq!(method_for(Some("gemini-3-flash")), Method::Estimated);
        assert_eq!(method_for(None), Method::Estimated);
    }
}
