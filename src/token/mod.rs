//! `agentteam token analyze`: what AgentTeam costs an agent's context, per runtime and per call,
//! from the runtimes' own session records.
//!
//! A local, read-only diagnostic for the person who runs agents: not an Exec action, not an MCP
//! tool, never in a runtime's prompt. It reads local files only and writes none of them.
//!
//! - `fixed`: what AgentTeam adds to every request, per runtime, rebuilt from this binary's
//!   catalog in each runtime's wire shape (`fixed.rs`).
//! - `read`: the six runtimes' records, streamed (`lines.rs` bounds every line).
//! - `session`: one session's requests, AgentTeam calls and carried costs.
//! - `count`: offline token counts, and the label of how each figure was obtained.

pub mod count;
pub mod fixed;
mod lines;
pub mod read;
pub mod session;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::daemon::runtime::driver::Family;

use count::Method;
use session::{Session, Usage};

/// The JSON report's version: a program reads `schemaVersion` before anything else.
pub const SCHEMA_VERSION: u32 = 1;

/// The runtimes `token analyze` reads, by the names `agentteam run --runtime` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeArg {
    Claude,
    Codex,
    Opencode,
    Gemini,
    Kimi,
    Copilot,
}

impl RuntimeArg {
    fn family(self) -> Family {
        match self {
            RuntimeArg::Claude => Family::Claude,
            RuntimeArg::Codex => Family::Codex,
            RuntimeArg::Opencode => Family::Opencode,
            RuntimeArg::Gemini => Family::Gemini,
            RuntimeArg::Kimi => Family::Kimi,
            RuntimeArg::Copilot => Family::Copilot,
        }
    }
}

/// What to analyse.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub runtimes: Vec<Family>,
    pub session: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub path: Option<PathBuf>,
    /// Recorded usage only: no calls, no tokenizer.
    pub totals_only: bool,
    pub top: usize,
}

impl Options {
    pub fn with_runtimes(runtimes: &[RuntimeArg]) -> Vec<Family> {
        if runtimes.is_empty() {
            fixed::RUNTIMES.to_vec()
        } else {
            // Each once, in the order given.
            let mut families: Vec<Family> = Vec::new();
            for family in runtimes.iter().map(|r| r.family()) {
                if !families.contains(&family) {
                    families.push(family);
                }
            }
            families
        }
    }

    fn keeps(&self, session: &Session) -> bool {
        if let Some(id) = &self.session
            && !session.id.starts_with(id.as_str())
        {
            return false;
        }
        if let Some(since) = &self.since
            && session
                .ended
                .as_deref()
                .is_some_and(|end| end < since.as_str())
        {
            return false;
        }
        if let Some(until) = &self.until
            && session
                .started
                .as_deref()
                .is_some_and(|start| start > until.as_str())
        {
            return false;
        }
        if let Some(path) = &self.path {
            let under_cwd = session
                .cwd
                .as_deref()
                .is_some_and(|cwd| std::path::Path::new(cwd).starts_with(path));
            if !under_cwd && !session.path.starts_with(path) {
                return false;
            }
        }
        true
    }
}

/// One session's row in the report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    #[serde(flatten)]
    pub session: Session,
    /// AgentTeam's fixed cost per request, and where the figure came from: `transcript` (the
    /// request the runtime recorded), `rebuilt` (this binary's catalog), or why none is counted.
    pub fixed_per_request: u64,
    pub fixed_source: &'static str,
    /// Always `json_text`: counted from the JSON text as sent, an estimate for every provider.
    pub fixed_method: Method,
    /// The fixed cost times the requests.
    pub fixed_tokens: u64,
    /// `fixed_tokens` over every input token the session's requests carried.
    pub fixed_share: f64,
    pub call_tokens: u64,
    pub carried_tokens: u64,
}

/// The calls of one AgentTeam tool, over every session.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolTotal {
    pub calls: u64,
    pub result_bytes: u64,
    pub result_tokens: u64,
    pub carried_tokens: u64,
}

/// How far the counts were off, against the growth of recorded input the results caused.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EstimateCheck {
    pub samples: u64,
    /// The median of `estimate / recorded growth - 1`.
    pub median_error: Option<f64>,
    /// The median of its absolute value.
    pub median_abs_error: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub fixed: Vec<fixed::Fixed>,
    pub sessions: Vec<SessionRow>,
    pub tools: BTreeMap<String, ToolTotal>,
    pub top_calls: Vec<TopCall>,
    pub totals: Totals,
    /// The check over every runtime's results.
    pub estimates: EstimateCheck,
    /// The check per runtime: how far `o200k_base` counts are from what that runtime's provider
    /// recorded. Only runtimes with a session read are listed.
    pub estimates_by_runtime: BTreeMap<&'static str, EstimateCheck>,
    pub files: u64,
    pub unreadable: Vec<String>,
    pub malformed_lines: u64,
    pub unknown_records: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopCall {
    pub runtime: &'static str,
    pub session: String,
    pub call: session::Call,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub sessions: u64,
    pub requests: u64,
    pub usage: Usage,
    pub fixed_tokens: u64,
    pub calls: u64,
    pub call_tokens: u64,
    pub carried_tokens: u64,
}

/// Reads what `options` selects, telling `progress` of each file read. Files are read by up to
/// as many threads as the machine has cores (at most 8); the report is the same whatever their
/// order.
pub fn analyze(
    options: &Options,
    roots: &read::Roots,
    mut progress: impl FnMut(usize, usize),
) -> Report {
    // The usage-totals pass loads no tokenizer: it has no fixed cost to count.
    let fixed: Vec<fixed::Fixed> = if options.totals_only {
        Vec::new()
    } else {
        options.runtimes.iter().map(|f| fixed::fixed(*f)).collect()
    };
    // Each file once, however it was reached (a linked directory, a variable naming the default).
    let mut seen = std::collections::HashSet::new();
    let files: Vec<(Family, PathBuf)> = options
        .runtimes
        .iter()
        .flat_map(|f| roots.files(*f).into_iter().map(move |p| (*f, p)))
        .filter(|(_, p)| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())))
        .collect();
    let mut report = Report {
        fixed,
        sessions: Vec::new(),
        tools: BTreeMap::new(),
        top_calls: Vec::new(),
        totals: Totals::default(),
        estimates: EstimateCheck::default(),
        estimates_by_runtime: BTreeMap::new(),
        files: files.len() as u64,
        unreadable: Vec::new(),
        malformed_lines: 0,
        unknown_records: 0,
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
        .min(files.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (sender, results) = std::sync::mpsc::channel();
    let mut read: Vec<Option<std::io::Result<Vec<Session>>>> = Vec::new();
    read.resize_with(files.len(), || None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let sender = sender.clone();
            let (files, next) = (&files, &next);
            scope.spawn(move || {
                loop {
                    let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((family, path)) = files.get(at) else {
                        break;
                    };
                    let sessions = read::read(*family, path, !options.totals_only);
                    if sender.send((at, sessions)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        progress(0, files.len());
        for (done, (at, sessions)) in results.iter().enumerate() {
            read[at] = Some(sessions);
            progress(done + 1, files.len());
        }
    });
    let mut errors: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for ((family, path), sessions) in files.iter().zip(read) {
        let sessions = match sessions {
            Some(Ok(sessions)) => sessions,
            Some(Err(error)) => {
                report
                    .unreadable
                    .push(format!("{}: {error}", path.display()));
                continue;
            }
            None => continue,
        };
        for mut session in sessions {
            if !options.keeps(&session) {
                continue;
            }
            if options.totals_only {
                session.calls.clear();
            }
            report.malformed_lines += session.malformed_lines;
            report.unknown_records += session.unknown_records;
            errors
                .entry(session.runtime)
                .or_default()
                .extend(session.estimate_errors.iter().copied());
            let rebuilt = report
                .fixed
                .iter()
                .find(|f| f.runtime == family.as_str())
                .map_or(0, |f| f.tokens);
            let (per_request, source) = match session.recorded_fixed {
                _ if options.totals_only => (0, "not counted"),
                _ if !session.agentteam => (0, "no AgentTeam launch"),
                Some((_, tokens)) => (tokens, "transcript"),
                None => (rebuilt, "rebuilt"),
            };
            let fixed_tokens = per_request.saturating_mul(session.requests);
            let context = session.usage.context();
            let row = SessionRow {
                fixed_per_request: per_request,
                fixed_source: source,
                fixed_method: Method::JsonText,
                fixed_tokens,
                fixed_share: if context == 0 {
                    0.0
                } else {
                    fixed_tokens as f64 / context as f64
                },
                call_tokens: session.calls.iter().map(|c| c.result_tokens).sum(),
                carried_tokens: session
                    .calls
                    .iter()
                    .fold(0u64, |sum, c| sum.saturating_add(c.carried_tokens)),
                session,
            };
            let totals = &mut report.totals;
            totals.sessions += 1;
            totals.requests += row.session.requests;
            totals.usage.add(&row.session.usage);
            totals.fixed_tokens = totals.fixed_tokens.saturating_add(row.fixed_tokens);
            totals.calls += row.session.calls.len() as u64;
            totals.call_tokens += row.call_tokens;
            totals.carried_tokens = totals.carried_tokens.saturating_add(row.carried_tokens);
            for call in &row.session.calls {
                let tool = report.tools.entry(call.bridge.label()).or_default();
                tool.calls += 1;
                tool.result_bytes += call.result_bytes;
                tool.result_tokens += call.result_tokens;
                tool.carried_tokens = tool.carried_tokens.saturating_add(call.carried_tokens);
                report.top_calls.push(TopCall {
                    runtime: row.session.runtime,
                    session: row.session.id.clone(),
                    call: call.clone(),
                });
                // Bounded: only the heaviest `top` calls are kept.
                if report.top_calls.len() > options.top.max(1).saturating_mul(4) {
                    trim_top(&mut report.top_calls, options.top);
                }
            }
            report.sessions.push(row);
        }
    }
    trim_top(&mut report.top_calls, options.top);
    report.sessions.sort_by(|a, b| {
        (b.fixed_tokens + b.carried_tokens, &a.session.id)
            .cmp(&(a.fixed_tokens + a.carried_tokens, &b.session.id))
    });
    report.estimates = check(errors.values().flatten().copied().collect());
    report.estimates_by_runtime = errors
        .into_iter()
        .map(|(runtime, errors)| (runtime, check(errors)))
        .collect();
    report
}

fn trim_top(calls: &mut Vec<TopCall>, top: usize) {
    calls.sort_by(|a, b| {
        (b.call.carried_tokens, b.call.result_tokens)
            .cmp(&(a.call.carried_tokens, a.call.result_tokens))
    });
    calls.truncate(top);
}

fn check(mut errors: Vec<f64>) -> EstimateCheck {
    errors.retain(|e| e.is_finite());
    if errors.is_empty() {
        return EstimateCheck::default();
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let mut absolute: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    EstimateCheck {
        samples: errors.len() as u64,
        median_error: Some(median(&mut errors)),
        median_abs_error: Some(median(&mut absolute)),
    }
}

/// The JSON a program reads: a versioned envelope, written as it is serialized.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope<'a> {
    pub schema_version: u32,
    pub report: &'static str,
    pub methods: BTreeMap<&'static str, &'static str>,
    pub data: &'a Report,
}

pub fn envelope(report: &Report) -> Envelope<'_> {
    Envelope {
        schema_version: SCHEMA_VERSION,
        report: "token-analyze",
        methods: BTreeMap::from([
            (
                "recorded",
                "written by the runtime (the provider's usage figures)",
            ),
            (
                "counted",
                "o200k_base, the model's own encoding, over the text alone",
            ),
            ("estimated", count::ESTIMATE_RULE),
            ("json_text", count::JSON_TEXT_RULE),
        ]),
        data: report,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Separately governed: nothing a runtime is shown names the diagnostic.
    #[test]
    fn no_runtime_is_told_of_token_analysis() {
        let shown = [
            crate::contract::catalog::MCP_TOOLS_JSON.to_string(),
            crate::contract::catalog::PROMPT_SUMMARY.to_string(),
            crate::contract::tool_guidance::mcp_instructions(),
        ];
        for family in fixed::RUNTIMES {
            let guidance =
                crate::daemon::runtime::guidance::compile(family.reader(), &[], false).text;
            for text in shown.iter().chain([&guidance]) {
                assert!(!text.contains("token analyze"), "{}", family.as_str());
            }
        }
    }

    #[test]
    fn filters_select_by_id_time_and_place() {
        let mut session =
            session::Builder::new(Family::Codex, "abc", PathBuf::from("/data/x.jsonl"), false);
        session.time("2026-12-01T10:00:00Z");
        session.cwd = Some("/home/dev/project".into());
        let session = session.finish();
        let keeps = |options: Options| options.keeps(&session);
        let with = |f: fn(&mut Options)| {
            let mut options = Options::default();
            f(&mut options);
            options
        };
        assert!(keeps(Options::default()));
        assert!(keeps(with(|o| o.session = Some("ab".into()))));
        assert!(!keeps(with(|o| o.session = Some("b".into()))));
        assert!(keeps(with(|o| o.since = Some("2026-12-01".into()))));
        assert!(!keeps(with(|o| o.since = Some("2026-12-02".into()))));
        assert!(!keeps(with(
            |o| o.until = Some("2026-11-30T23:59:59Z".into())
        )));
        assert!(keeps(with(|o| o.path = Some("/home/dev".into()))));
        assert!(keeps(with(|o| o.path = Some("/data".into()))));
        assert!(!keeps(with(|o| o.path = Some("/home/other".into()))));
    }

    #[test]
    fn nothing_to_read_is_an_empty_report_and_totals_load_no_tokenizer() {
        let roots = read::Roots {
            home: PathBuf::from("/nonexistent"),
            env: Default::default(),
        };
        let mut options = Options {
            runtimes: fixed::RUNTIMES.to_vec(),
            top: 3,
            ..Options::default()
        };
        let report = analyze(&options, &roots, |_, _| {});
        assert_eq!((report.files, report.sessions.len()), (0, 0));
        assert_eq!(report.fixed.len(), 6);
        options.totals_only = true;
        assert!(analyze(&options, &roots, |_, _| {}).fixed.is_empty());
    }
}
