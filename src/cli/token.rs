//! `agentteam token analyze`: the report for a person (a table, the heaviest first) or for a
//! program (`--json`), and progress on a terminal. The analysis is `crate::token`.

use std::io::{IsTerminal, Write};

use crate::token::{
    EstimateCheck, Options, Report, ToolTotal, analyze, count, envelope, fixed, read,
};

use super::output::{Exit, table};

fn n(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(value: f64) -> String {
    format!("{:.1}%", value * 100.0)
}

/// A runtime's median error and its samples, `-22.6% (12)`; `-` when none was measured.
fn median_error(check: Option<&EstimateCheck>) -> String {
    match check {
        Some(EstimateCheck {
            samples,
            median_error: Some(median),
            ..
        }) => format!("{} ({})", percent(*median), n(*samples)),
        _ => "-".to_string(),
    }
}

/// The report for a person: the heaviest items first, the `top` heaviest sessions (`--json` has
/// them all), and the totals.
fn render(report: &Report, totals_only: bool, top: usize) -> String {
    let mut out = String::new();
    if !totals_only {
        out.push_str("AgentTeam's fixed cost per request (rebuilt from this binary's catalog; no extension pinned; o200k_base tokens of the JSON text as sent: an estimate for every provider)\n\n");
        let mut fixed = report.fixed.clone();
        fixed.sort_by_key(|f| std::cmp::Reverse(f.tokens));
        let rows: Vec<Vec<String>> = fixed
            .iter()
            .map(|f| {
                let of = |kind: fixed::ItemKind| -> u64 {
                    f.items
                        .iter()
                        .filter(|i| i.kind == kind)
                        .map(|i| i.tokens)
                        .sum()
                };
                vec![
                    f.runtime.to_string(),
                    n(of(fixed::ItemKind::Tool)),
                    n(of(fixed::ItemKind::Instructions)),
                    n(of(fixed::ItemKind::Guidance)),
                    n(of(fixed::ItemKind::Skill)),
                    n(f.tokens),
                    n(f.bytes),
                    median_error(report.estimates_by_runtime.get(f.runtime)),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "RUNTIME",
                "TOOLS",
                "INSTRUCTIONS",
                "GUIDANCE",
                "SKILL",
                "TOKENS",
                "BYTES",
                "MEDIAN ERROR",
            ],
            &rows,
        ));
        out.push_str("MEDIAN ERROR: how far this runtime's o200k_base counts are from what its provider recorded: the median of count / growth - 1 over the results that alone grew the recorded input between two requests (how many, in brackets). Measured on results: no record gives a definition's cost apart.\n\n");
    }
    out.push_str(&format!(
        "Sessions: {} ({} requests) in {} files\n\n",
        n(report.totals.sessions),
        n(report.totals.requests),
        n(report.files)
    ));
    if !report.sessions.is_empty() {
        let rows: Vec<Vec<String>> = report
            .sessions
            .iter()
            .take(top.max(1))
            .map(|row| {
                let s = &row.session;
                let mut cells = vec![
                    s.runtime.to_string(),
                    s.id.chars().take(36).collect(),
                    n(s.requests),
                    n(s.usage.input),
                    n(s.usage.output),
                    n(s.usage.cache_read),
                    n(s.usage.cache_write),
                ];
                if !totals_only {
                    cells.extend([
                        format!("{} ({})", n(row.fixed_tokens), row.fixed_source),
                        percent(row.fixed_share),
                        n(s.calls.len() as u64),
                        n(row.carried_tokens),
                    ]);
                }
                cells
            })
            .collect();
        let mut headings = vec![
            "RUNTIME",
            "SESSION",
            "REQUESTS",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
        ];
        if !totals_only {
            headings.extend(["FIXED", "SHARE", "CALLS", "CARRIED"]);
        }
        out.push_str(&table(&headings, &rows));
        let more = report.sessions.len().saturating_sub(rows.len());
        if more > 0 {
            out.push_str(&format!(
                "… and {} more {} (--top N shows more; --json lists them all)\n",
                n(more as u64),
                if more == 1 { "session" } else { "sessions" }
            ));
        }
        let t = &report.totals;
        out.push_str(&format!(
            "All: input {}, output {}, cache read {}, cache write {}",
            n(t.usage.input),
            n(t.usage.output),
            n(t.usage.cache_read),
            n(t.usage.cache_write)
        ));
        if !totals_only {
            out.push_str(&format!(
                "; AgentTeam's fixed cost {}, {} calls carried {} tokens",
                n(t.fixed_tokens),
                n(t.calls),
                n(t.carried_tokens)
            ));
        }
        out.push_str(".\n\n");
    }
    if !totals_only && !report.tools.is_empty() {
        let mut tools: Vec<(&String, &ToolTotal)> = report.tools.iter().collect();
        tools.sort_by_key(|t| std::cmp::Reverse(t.1.carried_tokens));
        let rows: Vec<Vec<String>> = tools
            .iter()
            .map(|(name, t)| {
                vec![
                    name.to_string(),
                    n(t.calls),
                    n(t.result_bytes),
                    n(t.result_tokens),
                    n(t.carried_tokens),
                ]
            })
            .collect();
        out.push_str("AgentTeam calls, per tool\n\n");
        out.push_str(&table(
            &["TOOL", "CALLS", "RESULT BYTES", "RESULT TOKENS", "CARRIED"],
            &rows,
        ));
        out.push('\n');
        let rows: Vec<Vec<String>> = report
            .top_calls
            .iter()
            .map(|t| {
                vec![
                    t.call.bridge.label(),
                    t.runtime.to_string(),
                    t.session.chars().take(36).collect(),
                    t.call.id.chars().take(40).collect(),
                    n(t.call.result_tokens),
                    n(t.call.carried_by),
                    n(t.call.carried_tokens),
                ]
            })
            .collect();
        out.push_str("The most expensive calls\n\n");
        out.push_str(&table(
            &[
                "TOOL",
                "RUNTIME",
                "SESSION",
                "CALL",
                "RESULT",
                "CARRIED BY",
                "CARRIED",
            ],
            &rows,
        ));
        out.push('\n');
    }
    let e = &report.estimates;
    if let (Some(median), Some(abs)) = (e.median_error, e.median_abs_error) {
        out.push_str(&format!(
            "Counts against recorded input growth, every runtime: {} samples, median error {} (median absolute {}).\n",
            n(e.samples),
            percent(median),
            percent(abs)
        ));
    }
    if totals_only {
        out.push_str("Usage is recorded by each runtime.\n");
    } else {
        out.push_str(&format!(
            "Usage is recorded by each runtime. Fixed costs: {}. Result tokens: o200k_base counts of the result's text, the text's own count for OpenAI models, an estimate otherwise ({}).\n",
            count::JSON_TEXT_RULE,
            count::ESTIMATE_RULE
        ));
    }
    if report.malformed_lines > 0 || report.unknown_records > 0 || !report.unreadable.is_empty() {
        out.push_str(&format!(
            "Skipped: {} malformed lines, {} records of unknown types, {} unreadable files.\n",
            n(report.malformed_lines),
            n(report.unknown_records),
            report.unreadable.len()
        ));
    }
    out
}

/// Runs the command: the report on stdout, progress on a terminal's stderr.
pub fn run(options: &Options, json: bool) -> Exit {
    let roots = read::Roots::from_env();
    let terminal = std::io::stderr().is_terminal();
    let report = analyze(options, &roots, |done, all| {
        if terminal && all > 0 {
            let mut err = std::io::stderr();
            let _ = write!(err, "\ragentteam token analyze: {done}/{all} files");
            if done == all {
                let _ = writeln!(err);
            }
        }
    });
    for file in &report.unreadable {
        eprintln!(
            "agentteam token analyze: skipped {}",
            super::output::printable(file)
        );
    }
    if json {
        // Streamed: a report of many sessions is never held as text too.
        let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
        let written = serde_json::to_writer_pretty(&mut stdout, &envelope(&report))
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(stdout))
            .and_then(|()| stdout.flush());
        match written {
            Ok(()) => Exit::Success,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Success,
            Err(e) => {
                eprintln!("error: cannot write to stdout: {e}");
                Exit::Usage
            }
        }
    } else {
        super::output::print(&render(&report, options.totals_only, options.top))
    }
}

/// A `--since` or `--until` value as the records spell times (UTC, RFC 3339): a date alone is its
/// day's start, or with `end` its day's last millisecond.
pub fn instant(text: &str, end: bool) -> Result<String, String> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at
            .to_utc()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    if let Ok(day) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let time = if end { "23:59:59.999" } else { "00:00:00.000" };
        return Ok(format!("{day}T{time}Z"));
    }
    Err(format!(
        "not a time: {text:?} (give an RFC 3339 time, 2026-12-01T10:00:00Z, or a date, 2026-12-01)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::runtime::driver::Family;

    #[test]
    fn the_fixed_cost_is_labelled_an_estimate_and_each_runtimes_median_error_is_printed() {
        let roots = read::Roots {
            home: std::path::PathBuf::from("/nonexistent"),
            env: Default::default(),
        };
        let options = Options {
            runtimes: vec![Family::Claude, Family::Codex],
            top: 3,
            ..Options::default()
        };
        let mut report = analyze(&options, &roots, |_, _| {});
        report.estimates_by_runtime.insert(
            "claude",
            EstimateCheck {
                samples: 12,
                median_error: Some(-0.226),
                median_abs_error: Some(0.255),
            },
        );
        let text = render(&report, false, 10);
        assert!(
            text.contains(
                "o200k_base tokens of the JSON text as sent: an estimate for every provider"
            ),
            "{text}"
        );
        assert!(text.contains(count::JSON_TEXT_RULE), "{text}");
        assert!(!text.contains("exact for OpenAI"), "{text}");
        let row = |runtime: &str| {
            text.lines()
                .find(|l| l.split_whitespace().next() == Some(runtime))
                .unwrap_or_else(|| panic!("no {runtime} row: {text}"))
                .to_string()
        };
        assert!(text.contains("MEDIAN ERROR"), "{text}");
        assert!(row("claude").ends_with("  -22.6% (12)"), "{text}");
        // Codex's counts were not measured: no sample, no figure.
        assert!(row("codex").ends_with("  -"), "{text}");

        let json = serde_json::to_value(envelope(&report)).unwrap();
        assert_eq!(
            json["data"]["estimatesByRuntime"]["claude"]["medianError"],
            -0.226
        );
        assert_eq!(json["data"]["fixed"][0]["method"], "json_text");
        assert_eq!(json["methods"]["json_text"], count::JSON_TEXT_RULE);
    }

    #[test]
    fn times_are_read_as_the_records_spell_them() {
        assert_eq!(
            instant("2026-12-01T12:00:00+02:00", false).unwrap(),
            "2026-12-01T10:00:00.000Z"
        );
        assert_eq!(
            instant("2026-12-01", false).unwrap(),
            "2026-12-01T00:00:00.000Z"
        );
        assert_eq!(
            instant("2026-12-01", true).unwrap(),
            "2026-12-01T23:59:59.999Z"
        );
        assert!(
            instant("yesterday", false)
                .unwrap_err()
                .contains("not a time")
        );
    }
}
