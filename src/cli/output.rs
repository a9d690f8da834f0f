//! Writing to stdout and stderr, and the exit status contract.

use std::io::{self, Write};
use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exit status 0.
    Success,
    /// Exit status 1: the action ran and reported a failure.
    ActionFailed,
    /// Exit status 2: usage, configuration or transport error.
    Usage,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        match exit {
            Exit::Success => ExitCode::SUCCESS,
            Exit::ActionFailed => ExitCode::from(1),
            Exit::Usage => ExitCode::from(2),
        }
    }
}

/// Writes `text` to stdout. A reader that closed the pipe early (`| head`) is not an error.
pub fn print(text: &str) -> Exit {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Exit::Success,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Exit::Success,
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            Exit::Usage
        }
    }
}

/// Prints `error: <message>` and any `hint:` lines to stderr, and returns the usage exit.
pub fn usage_error(message: &str, hints: &[String]) -> Exit {
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "error: {message}");
    for hint in hints {
        let _ = writeln!(stderr, "hint: {hint}");
    }
    Exit::Usage
}

/// `text` safe to show on a terminal: control characters (which can move the cursor or rewrite
/// what is shown) and the bidirectional overrides (which reorder it) escaped as `\u{…}`. Text a
/// model or a server wrote reaches a person's terminal only through here.
pub fn printable(text: &str) -> String {
    if !text.chars().any(unprintable) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if unprintable(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Rows under a heading, each column as wide as its widest cell (counted in characters), two
/// spaces apart; the last column is not padded. Every cell is shown [`printable`].
pub fn table(headings: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = headings.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (index, cell) in cells.enumerate() {
            if index > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            let pad = widths[index].saturating_sub(cell.chars().count());
            text.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headings.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// `1 agent`, `2 agents`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Prints a command's answer: as JSON for a program (`--json`), else for a person ([`human`]).
pub fn answer(data: &serde_json::Value, json: bool) -> Exit {
    if json {
        print(&format!("{data}\n"))
    } else {
        print(&human(data))
    }
}

/// A JSON answer for a person: an object's fields one per line with their names aligned, a
/// nested object indented under its name, a list of scalars on one line, a list of objects as a
/// table of their scalar fields. `--json` prints the answer itself instead.
pub fn human(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_human(value, 0, &mut out);
    out
}

fn write_human(value: &serde_json::Value, indent: usize, out: &mut String) {
    use serde_json::Value;
    let pad = " ".repeat(indent);
    match value {
        Value::Object(fields) => {
            let width = fields.keys().map(|k| k.chars().count()).max().unwrap_or(0);
            for (name, field) in fields {
                match field {
                    Value::Object(inner) if !inner.is_empty() => {
                        out.push_str(&format!("{pad}{name}:\n"));
                        write_human(field, indent + 2, out);
                    }
                    Value::Array(items) if items.iter().any(Value::is_object) => {
                        out.push_str(&format!("{pad}{name}:\n"));
                        write_human(field, indent + 2, out);
                    }
                    _ => out.push_str(&format!("{pad}{name:width$}  {}\n", scalar(field))),
                }
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            let mut headings: Vec<&str> = Vec::new();
            for item in items {
                for (name, field) in item.as_object().into_iter().flatten() {
                    if !field.is_object() && !headings.contains(&name.as_str()) {
                        headings.push(name);
                    }
                }
            }
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|item| headings.iter().map(|h| scalar(&item[*h])).collect())
                .collect();
            for line in table(&headings, &rows).lines() {
                out.push_str(&format!("{pad}{line}\n"));
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

/// A scalar (or a list of them) as a person reads it: text unquoted, nothing as `-`.
fn scalar(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "-".into(),
        Value::String(text) => printable(text),
        Value::Array(items) if items.is_empty() => "-".into(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Object(fields) if fields.is_empty() => "-".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_table_aligns_its_columns_to_the_widest_cell() {
        let text = table(
            &["RUN", "AGENT"],
            &[
                vec![
                    "run_0123456789abcdefghijklmnopqrstuv".into(),
                    "builder".into(),
                ],
                vec!["run_1".into(), "reviewer-with-a-long-handle".into()],
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        let column = lines[1].find("builder").unwrap();
        assert_eq!(lines[0].find("AGENT"), Some(column), "{text}");
        assert_eq!(lines[2].find("reviewer"), Some(column), "{text}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{text}");
    }

    #[test]
    fn text_from_elsewhere_cannot_drive_the_terminal() {
        assert_eq!(printable("plain café"), "plain café");
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("ok\u{202e}txt.exe"), "ok\\u{202e}txt.exe");
        assert_eq!(printable("line\nbreak"), "line\\u{a}break");
        let shown = human(&json!({"title": "\u{1b}]0;owned\u{7}"}));
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{shown:?}"
        );
        let cells = table(&["T"], &[vec!["\u{1b}[31m".into()]]);
        assert!(!cells.contains('\u{1b}'), "{cells:?}");
    }

    #[test]
    fn counts_are_singular_only_for_one() {
        assert_eq!(count(0, "agent", "agents"), "0 agents");
        assert_eq!(count(1, "agent", "agents"), "1 agent");
        assert_eq!(count(2, "agent", "agents"), "2 agents");
    }

    #[test]
    fn an_answer_reads_as_aligned_fields_and_tables() {
        let text = human(&json!({
            "sourceId": "kbs_1",
            "name": "handbook",
            "grants": [{"channelId": "chn_1"}, {"teamId": "tem_2"}],
            "tags": ["a", "b"],
            "owner": {"id": "hum_1"},
            "cursor": null,
        }));
        assert_eq!(
            text,
            "cursor    -\ngrants:\n  channelId  teamId\n  chn_1      -\n  -          tem_2\nname      handbook\nowner:\n  id  hum_1\nsourceId  kbs_1\ntags      a, b\n"
        );
    }
}
