//! Text segmentation shared by the two full-text owners: the server's knowledge base (FTS5 or
//! `tsvector`) and the daemon's memory index.
//!
//! Words are runs of alphanumeric characters, lowercased. A run of CJK characters has no spaces
//! to split on, and both engines would keep it whole (`知识库搜索` is one token), so it is indexed
//! and queried as its overlapping bigrams (`知识 识库 库搜 搜索`; a one-character run as itself):
//! a query's run then matches wherever its bigrams occur in order.
//!
//! The knowledge base's engines stem English words themselves (FTS5's `porter` tokenizer,
//! PostgreSQL's `english` configuration); the memory index stems them here, with the Snowball
//! English stemmer, so `deploying` finds `deploy` in both.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

/// At most this many terms of a query are used.
pub const MAX_QUERY_TERMS: usize = 32;

/// Han, kana and Hangul: scripts written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FA1F) // CJK extensions B and beyond
}

/// The overlapping bigrams of one CJK run (the run itself when it is one character).
pub fn bigrams(run: &str) -> Vec<String> {
    let chars: Vec<char> = run.chars().collect();
    if chars.len() < 2 {
        return vec![run.to_string()];
    }
    chars.windows(2).map(|w| w.iter().collect()).collect()
}

/// The maximal CJK runs of `text`, in order.
pub fn cjk_runs(text: &str) -> Vec<String> {
    let mut runs = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if is_cjk(c) {
            current.push(c);
        } else if !current.is_empty() {
            runs.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

/// The indexed CJK column of a document: every run's bigrams, space-separated (runs separated by
/// a newline, so no phrase spans two runs).
pub fn cjk_column(text: &str) -> String {
    cjk_runs(text)
        .iter()
        .map(|run| bigrams(run).join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lowercased non-CJK words of `text`.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() || is_cjk(c))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A query split for the engines: its words and its CJK runs, at most [`MAX_QUERY_TERMS`] in all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    pub words: Vec<String>,
    pub cjk: Vec<String>,
}

impl Query {
    pub fn parse(text: &str) -> Query {
        let mut words = words(text);
        words.dedup();
        words.truncate(MAX_QUERY_TERMS);
        let mut cjk = cjk_runs(text);
        cjk.truncate(MAX_QUERY_TERMS.saturating_sub(words.len()));
        Query { words, cjk }
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.cjk.is_empty()
    }

    /// An FTS5 `MATCH` expression: any word (in `title` or `body`) or any CJK run, restricted
    /// to the source tokens given ([`fts5_expression`]). `None` when there is nothing to match.
    pub fn fts5(&self, source_tokens: &[String]) -> Option<String> {
        fts5_expression(&self.words, &self.cjk, "title body", Some(source_tokens))
    }

    /// The terms the in-memory index looks up: the stemmed words, and each CJK run's bigrams.
    pub fn index_terms(&self) -> Vec<String> {
        let mut terms: Vec<String> = self.words.iter().map(|w| stem(w)).collect();
        for run in &self.cjk {
            terms.extend(bigrams(run));
        }
        terms.sort();
        terms.dedup();
        terms
    }
}

/// An FTS5 `MATCH` expression: any of `words` in the `columns` given (`"title body"`, `"title"`)
/// or any CJK run (as a phrase of its bigrams in `cjk`), and, with `source_tokens`, in one of
/// those sources. Every term is quoted, so no user text is FTS5 syntax. `None` when there is
/// nothing to match, or no source to match in.
pub fn fts5_expression(
    words: &[String],
    cjk: &[String],
    columns: &str,
    source_tokens: Option<&[String]>,
) -> Option<String> {
    if (words.is_empty() && cjk.is_empty()) || source_tokens.is_some_and(<[String]>::is_empty) {
        return None;
    }
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut alternatives = Vec::new();
    if !words.is_empty() {
        let words: Vec<String> = words.iter().map(|w| quote(w)).collect();
        alternatives.push(format!("{{{columns}}} : ({})", words.join(" OR ")));
    }
    for run in cjk {
        alternatives.push(format!("cjk : {}", quote(&bigrams(run).join(" "))));
    }
    let matched = format!("({})", alternatives.join(" OR "));
    Some(match source_tokens {
        Some(tokens) => {
            let sources: Vec<String> = tokens.iter().map(|s| quote(s)).collect();
            format!("{matched} AND src_tok : ({})", sources.join(" OR "))
        }
        None => matched,
    })
}

static ENGLISH: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The Snowball English stem of a lowercased word (`deploying` → `deploy`).
pub fn stem(word: &str) -> String {
    ENGLISH.stem(word).into_owned()
}

/// Every indexed term of `text` (stemmed words and CJK bigrams), for the in-memory index.
pub fn terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = words(text).iter().map(|w| stem(w)).collect();
    for run in cjk_runs(text) {
        out.extend(bigrams(&run));
    }
    out
}

/// About `width` characters of `text` around the first occurrence of `needle`, with `needle`
/// in [brackets] and `…` where the text was cut.
pub fn snippet_around(text: &str, needle: &str, width: usize) -> Option<String> {
    let at = text.find(needle)?;
    let before: Vec<char> = text[..at].chars().collect();
    let after: Vec<char> = text[at + needle.len()..].chars().collect();
    let side = width.saturating_sub(needle.chars().count()) / 2;
    let start = before.len().saturating_sub(side);
    let end = after.len().min(side);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&before[start..]);
    out.push('[');
    out.push_str(needle);
    out.push(']');
    out.extend(&after[..end]);
    if end < after.len() {
        out.push('…');
    }
    Some(out.replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_cjk_runs_are_split_and_bigrammed() {
        assert_eq!(
            words("Rotating the signing-keys, v2!"),
            ["rotating", "the", "signing", "keys", "v2"]
        );
        assert_eq!(
            cjk_runs("知识库搜索使用全文索引。数据库 ok"),
            ["知识库搜索使用全文索引", "数据库"]
        );
        assert_eq!(bigrams("知识库"), ["知识", "识库"]);
        assert_eq!(bigrams("字"), ["字"]);
        assert_eq!(cjk_column("用 知识库"), "用\n知识 识库");
        let query = Query::parse("deploy 知识库 \"quoted\" AND near(x)");
        assert_eq!(query.words, ["deploy", "quoted", "and", "near", "x"]);
        assert_eq!(query.cjk, ["知识库"]);
    }

    #[test]
    fn the_fts5_expression_quotes_every_term_and_needs_a_source() {
        let query = Query::parse(r#"c++ "x col:value"#);
        assert_eq!(
            query.fts5(&["srca".into(), "srcb".into()]).unwrap(),
            r#"({title body} : ("c" OR "x" OR "col" OR "value")) AND src_tok : ("srca" OR "srcb")"#
        );
        assert_eq!(query.fts5(&[]), None);
        assert_eq!(Query::parse("  ...  ").fts5(&["s".into()]), None);
        assert_eq!(
            Query::parse("索引").fts5(&["s".into()]).unwrap(),
            r#"(cjk : "索引") AND src_tok : ("s")"#
        );
        assert_eq!(
            fts5_expression(&["the".into()], &[], "title", None).unwrap(),
            r#"({title} : ("the"))"#
        );
    }

    #[test]
    fn the_memory_terms_are_stemmed_like_the_query_terms() {
        assert_eq!(
            terms("Deploying deployed deploys"),
            ["deploy", "deploy", "deploy"]
        );
        assert_eq!(
            Query::parse("deployment 部署流程").index_terms(),
            ["deploy", "流程", "署流", "部署"]
        );
    }

    #[test]
    fn a_snippet_brackets_the_needle_and_cuts_on_characters() {
        let text = "前面的文字很长很长。知识库搜索使用全文索引。后面还有更多文字内容";
        let snippet = snippet_around(text, "全文索引", 16).unwrap();
        assert!(snippet.contains("[全文索引]"), "{snippet}");
        assert!(
            snippet.starts_with('…') && snippet.ends_with('…'),
            "{snippet}"
        );
        assert_eq!(snippet_around("abc", "zz", 10), None);
    }
}
