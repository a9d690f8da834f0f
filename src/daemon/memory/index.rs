//! The in-memory full-text index of one agent's memory directory: Markdown sections ranked with
//! BM25.
//!
//! A file is split into sections at its ATX headings (`#` to `######`, outside fenced code); the
//! text before the first heading is a section with an empty heading. A section's terms are
//! `crate::search::terms` of its lines, its heading's terms counted twice. Postings are parallel
//! arrays per term (six bytes an entry), and a section keeps no copy of its terms. A changed
//! file's old sections become tombstones (skipped by every query, and not counted in a term's
//! document frequency) and its new sections are appended; when tombstones outnumber the live
//! sections the postings are rewritten without them. Only locators leave the index: path,
//! heading, line range and score.

use std::collections::HashMap;
use std::sync::Arc;

use crate::search;

/// BM25 term-frequency saturation and length normalization.
const K1: f32 = 1.2;
const B: f32 = 0.75;
/// How many times a heading's terms count.
const HEADING_WEIGHT: u16 = 2;
/// A heading is kept to this many characters (the tool's output schema says so).
pub const MAX_HEADING_CHARS: usize = 200;
/// Tombstones are compacted away once there are this many and more than live sections.
const COMPACT_AFTER: usize = 4096;

/// A file's identity as last indexed: a different one means the file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    pub len: u64,
    pub mtime_ns: i64,
    pub ino: u64,
}

impl Stamp {
    pub fn of(metadata: &std::fs::Metadata) -> Stamp {
        let (_, ino) = crate::platform::fs::file_id(metadata);
        Stamp {
            len: metadata.len(),
            mtime_ns: crate::platform::fs::modified_ns(metadata),
            ino,
        }
    }
}

/// One section as parsed, before it is indexed.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub heading: String,
    pub line_start: u32,
    pub line_end: u32,
    /// `(term, weighted frequency)`, sorted by term.
    pub terms: Vec<(String, u16)>,
}

/// Splits Markdown `text` into sections with their weighted terms. Sections without any term
/// (blank preambles, empty headings' bodies keep their heading's terms) are left out.
pub fn parse(text: &str) -> Vec<Parsed> {
    let mut sections = Vec::new();
    let mut current: Option<(String, u32, HashMap<String, u16>)> = None;
    let mut last_line = 0u32;
    let mut fence: Option<&str> = None;
    let close = |sections: &mut Vec<Parsed>,
                 section: Option<(String, u32, HashMap<String, u16>)>,
                 end: u32| {
        if let Some((heading, start, counts)) = section
            && !counts.is_empty()
        {
            let mut terms: Vec<(String, u16)> = counts.into_iter().collect();
            terms.sort();
            sections.push(Parsed {
                heading,
                line_start: start,
                line_end: end.max(start),
                terms,
            });
        }
    };
    for (index, line) in text.lines().enumerate() {
        let number = index as u32 + 1;
        last_line = number;
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if indent < 4 {
            let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
            match (fence, marker) {
                (None, Some(marker)) => fence = Some(marker),
                (Some(open), Some(marker)) if open == marker => fence = None,
                _ => {}
            }
        }
        let heading = (fence.is_none() && indent < 4)
            .then(|| heading_text(trimmed))
            .flatten();
        match heading {
            Some(heading) => {
                close(&mut sections, current.take(), number - 1);
                let mut counts = HashMap::new();
                for term in search::terms(heading) {
                    let count: &mut u16 = counts.entry(term).or_default();
                    *count = count.saturating_add(HEADING_WEIGHT);
                }
                let heading: String = heading.chars().take(MAX_HEADING_CHARS).collect();
                current = Some((heading, number, counts));
            }
            None => {
                let (_, _, counts) =
                    current.get_or_insert_with(|| (String::new(), number, HashMap::new()));
                for term in search::terms(line) {
                    let count: &mut u16 = counts.entry(term).or_default();
                    *count = count.saturating_add(1);
                }
            }
        }
    }
    close(&mut sections, current.take(), last_line);
    sections
}

/// The text of an ATX heading line (`## Title ##` → `Title`), if `line` is one.
fn heading_text(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim();
    // A closing sequence of `#` preceded by a space is not part of the text.
    let text = match rest.trim_end_matches('#') {
        stripped
            if stripped.len() < rest.len()
                && (stripped.is_empty() || stripped.ends_with([' ', '\t'])) =>
        {
            stripped.trim_end()
        }
        _ => rest,
    };
    Some(text)
}

/// One indexed section (its terms live only in the postings).
#[derive(Debug, Clone)]
pub struct Section {
    pub path: Arc<str>,
    pub heading: Box<str>,
    pub line_start: u32,
    pub line_end: u32,
    /// Weighted term count (the BM25 document length).
    pub len: u32,
}

/// One term's postings, as parallel arrays (six bytes a posting): section ids in increasing
/// order, and the weighted frequency in each.
#[derive(Debug, Default)]
pub(super) struct Postings {
    pub(super) sections: Vec<u32>,
    pub(super) tfs: Vec<u16>,
}

/// One indexed file.
#[derive(Debug, Clone)]
pub struct FileEntry {
    pub stamp: Stamp,
    pub sections: Vec<u32>,
}

/// One search hit: a locator and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: String,
    pub heading: String,
    pub line_start: u32,
    pub line_end: u32,
    pub score: f32,
}

/// The index of one memory directory.
#[derive(Debug, Default)]
pub struct Index {
    pub(super) term_ids: HashMap<Box<str>, u32>,
    pub(super) term_text: Vec<Box<str>>,
    pub(super) postings: Vec<Postings>,
    /// `None`: a tombstone, skipped by every query until the next compaction.
    pub(super) sections: Vec<Option<Section>>,
    pub(super) files: HashMap<Arc<str>, FileEntry>,
    pub(super) live: usize,
    pub(super) total_len: u64,
}

impl Index {
    /// Indexed files.
    pub fn files(&self) -> usize {
        self.files.len()
    }

    /// Live sections.
    pub fn sections(&self) -> usize {
        self.live
    }

    pub fn stamp(&self, path: &str) -> Option<Stamp> {
        self.files.get(path).map(|file| file.stamp)
    }

    /// Every indexed path.
    pub fn paths(&self) -> impl Iterator<Item = &Arc<str>> {
        self.files.keys()
    }

    /// Replaces `path`'s sections with `parsed` (indexed under `stamp`).
    pub fn put(&mut self, path: &str, stamp: Stamp, parsed: Vec<Parsed>) {
        self.remove(path);
        let path: Arc<str> = Arc::from(path);
        let mut ids = Vec::with_capacity(parsed.len());
        for section in parsed {
            let id = self.sections.len() as u32;
            let mut len = 0u32;
            for (term, tf) in section.terms {
                let term = self.term_id(term);
                let postings = &mut self.postings[term as usize];
                postings.sections.push(id);
                postings.tfs.push(tf);
                len += u32::from(tf);
            }
            self.sections.push(Some(Section {
                path: path.clone(),
                heading: section.heading.into(),
                line_start: section.line_start,
                line_end: section.line_end,
                len,
            }));
            self.live += 1;
            self.total_len += u64::from(len);
            ids.push(id);
        }
        self.files.insert(
            path,
            FileEntry {
                stamp,
                sections: ids,
            },
        );
        self.maybe_compact();
    }

    /// Forgets `path`; its sections become tombstones.
    pub fn remove(&mut self, path: &str) -> bool {
        let Some(file) = self.files.remove(path) else {
            return false;
        };
        for id in file.sections {
            if let Some(section) = self.sections[id as usize].take() {
                self.live -= 1;
                self.total_len -= u64::from(section.len);
            }
        }
        true
    }

    pub(super) fn term_id(&mut self, term: String) -> u32 {
        if let Some(id) = self.term_ids.get(term.as_str()) {
            return *id;
        }
        let id = self.term_text.len() as u32;
        let term: Box<str> = term.into();
        self.term_ids.insert(term.clone(), id);
        self.term_text.push(term);
        self.postings.push(Postings::default());
        id
    }

    /// Drops the tombstones once they outnumber the live sections: sections are renumbered and
    /// every postings list keeps only live entries.
    fn maybe_compact(&mut self) {
        let dead = self.sections.len() - self.live;
        if dead < COMPACT_AFTER || dead <= self.live {
            return;
        }
        let mut renumbered = vec![u32::MAX; self.sections.len()];
        let mut sections = Vec::with_capacity(self.live);
        for (old, section) in std::mem::take(&mut self.sections).into_iter().enumerate() {
            if let Some(section) = section {
                renumbered[old] = sections.len() as u32;
                sections.push(Some(section));
            }
        }
        self.sections = sections;
        for postings in &mut self.postings {
            let mut kept = Postings::default();
            for (section, tf) in postings.sections.iter().zip(&postings.tfs) {
                let new = renumbered[*section as usize];
                if new != u32::MAX {
                    kept.sections.push(new);
                    kept.tfs.push(*tf);
                }
            }
            *postings = kept;
        }
        for file in self.files.values_mut() {
            for id in &mut file.sections {
                *id = renumbered[*id as usize];
            }
        }
    }

    /// The `limit` best sections for `terms` (already segmented and stemmed), best first; ties
    /// by path and line, so a result is stable.
    pub fn search(&self, terms: &[String], limit: usize) -> Vec<Hit> {
        if self.live == 0 || limit == 0 {
            return Vec::new();
        }
        let n = self.live as f32;
        let average = (self.total_len as f32 / n).max(1.0);
        let tombstones = self.sections.len() > self.live;
        // Dense accumulation: one slot per section, and the list of slots touched.
        let mut scores = vec![0f32; self.sections.len()];
        let mut touched: Vec<u32> = Vec::new();
        for term in terms {
            let Some(&id) = self.term_ids.get(term.as_str()) else {
                continue;
            };
            let postings = &self.postings[id as usize];
            // Document frequency over live sections only.
            let df = if tombstones {
                postings
                    .sections
                    .iter()
                    .filter(|s| self.sections[**s as usize].is_some())
                    .count()
            } else {
                postings.sections.len()
            } as f32;
            if df == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (section_id, tf) in postings.sections.iter().zip(&postings.tfs) {
                let Some(section) = &self.sections[*section_id as usize] else {
                    continue;
                };
                let tf = f32::from(*tf);
                let norm = K1 * (1.0 - B + B * section.len as f32 / average);
                let slot = &mut scores[*section_id as usize];
                if *slot == 0.0 {
                    touched.push(*section_id);
                }
                *slot += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(u32, f32)> = touched
            .into_iter()
            .map(|id| (id, scores[id as usize]))
            .collect();
        let order = |a: &(u32, f32), b: &(u32, f32)| {
            let (x, y) = (self.section(a.0), self.section(b.0));
            b.1.total_cmp(&a.1)
                .then_with(|| x.path.cmp(&y.path))
                .then_with(|| x.line_start.cmp(&y.line_start))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(order);
        ranked
            .into_iter()
            .map(|(id, score)| {
                let section = self.section(id);
                Hit {
                    path: section.path.to_string(),
                    heading: section.heading.to_string(),
                    line_start: section.line_start,
                    line_end: section.line_end,
                    score,
                }
            })
            .collect()
    }

    pub(super) fn section(&self, id: u32) -> &Section {
        self.sections[id as usize]
            .as_ref()
            .expect("scored sections are live")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(files: &[(&str, &str)]) -> Index {
        let mut index = Index::default();
        for (path, text) in files {
            index.put(path, Stamp::default(), parse(text));
        }
        index
    }

    fn query(index: &Index, text: &str) -> Vec<(String, String)> {
        index
            .search(&search::Query::parse(text).index_terms(), 10)
            .into_iter()
            .map(|hit| (hit.path, hit.heading))
            .collect()
    }

    #[test]
    fn sections_split_at_headings_outside_code_with_inclusive_line_ranges() {
        let text = "intro words\n\n# Deploy\nrun the script\n```\n# not a heading\n```\n## Rollback ##\nrevert it\n#hashtag\n";
        let sections = parse(text);
        let ranges: Vec<(&str, u32, u32)> = sections
            .iter()
            .map(|s| (s.heading.as_str(), s.line_start, s.line_end))
            .collect();
        assert_eq!(ranges, [("", 1, 2), ("Deploy", 3, 7), ("Rollback", 8, 10)]);
        let deploy = &sections[1].terms;
        assert!(deploy.contains(&("deploy".to_string(), 2)), "{deploy:?}");
        assert!(
            deploy.contains(&("head".to_string(), 1)),
            "code is still searchable text"
        );
        assert_eq!(parse("   \n\n"), []);
        assert_eq!(heading_text("# C# tips"), Some("C# tips"));
        assert_eq!(heading_text("####### seven"), None);
    }

    #[test]
    fn rare_terms_and_headings_rank_first_and_removed_files_vanish() {
        let mut index = index(&[
            ("a.md", "# Notes\nthe deploy went fine, the the the\n"),
            ("b.md", "# Kubernetes\nthe cluster\n"),
            ("c.md", "# Misc\nthe kubernetes the\n"),
        ]);
        assert_eq!(
            query(&index, "the kubernetes")[0],
            ("b.md".into(), "Kubernetes".into())
        );
        assert_eq!(query(&index, "deployed").len(), 1, "stemmed");
        assert!(index.remove("b.md"));
        assert_eq!(
            query(&index, "kubernetes"),
            [("c.md".into(), "Misc".into())]
        );
        assert_eq!(index.files(), 2);
        assert_eq!(index.sections(), 2);
    }

    #[test]
    fn replacing_files_many_times_compacts_and_keeps_answers_right() {
        let mut index = Index::default();
        for round in 0..(COMPACT_AFTER + 10) {
            index.put(
                "log.md",
                Stamp::default(),
                parse(&format!("# Round\nvalue{round}\n")),
            );
        }
        assert_eq!(index.sections(), 1);
        assert!(
            index.sections.len() < COMPACT_AFTER,
            "tombstones were compacted"
        );
        let last = format!("value{}", COMPACT_AFTER + 9);
        assert_eq!(query(&index, &last), [("log.md".into(), "Round".into())]);
        assert_eq!(query(&index, "value0"), []);
    }

    #[test]
    fn a_cjk_query_finds_its_section() {
        let index = index(&[
            ("zh.md", "# 部署\n部署流程需要审批\n"),
            ("en.md", "# Deploy\nthe process\n"),
        ]);
        assert_eq!(query(&index, "部署流程"), [("zh.md".into(), "部署".into())]);
    }
}
