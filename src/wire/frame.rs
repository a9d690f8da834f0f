//! The NDJSON frames of `POST /api/admin/runs`: one JSON object per line, `{"stdout": base64}`,
//! `{"stderr": base64}`, then `{"exit": code}`. A launch whose runtime reads the launcher's stdin
//! first says where to stream it, `{"stdinRun": run id}` (`POST /api/admin/runs/{runId}/stdin`).
//! The daemon encodes them as a runtime's output arrives; `agentteam run` decodes them, refusing a
//! line longer than [`MAX_FRAME_BYTES`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// The longest frame line a reader accepts. The daemon reads a pipe at most 16 KiB at a time,
/// so its frames stay under 22 KiB.
pub const MAX_FRAME_BYTES: usize = 64 * 1024;

/// What a running launch reports, in order, ending with `Exited`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The runtime reads the launcher's stdin: the run to stream it to.
    StdinRun(String),
    /// The exit code (128 + signal for a signalled process).
    Exited(i32),
}

/// One frame line, newline included.
pub fn encode(output: &Output) -> Vec<u8> {
    let frame = match output {
        Output::Stdout(bytes) => json!({ "stdout": STANDARD.encode(bytes) }),
        Output::Stderr(bytes) => json!({ "stderr": STANDARD.encode(bytes) }),
        Output::StdinRun(run) => json!({ "stdinRun": run }),
        Output::Exited(code) => json!({ "exit": code }),
    };
    let mut line = serde_json::to_vec(&frame).expect("a Value always serializes");
    line.push(b'\n');
    line
}

/// Parses one frame line (without its newline).
pub fn parse(line: &[u8]) -> Option<Output> {
    if line.len() > MAX_FRAME_BYTES {
        return None;
    }
    let frame: Value = serde_json::from_slice(line).ok()?;
    if let Some(code) = frame.get("exit").and_then(Value::as_i64) {
        return i32::try_from(code).ok().map(Output::Exited);
    }
    if let Some(run) = frame.get("stdinRun") {
        return run.as_str().map(|run| Output::StdinRun(run.to_string()));
    }
    let (key, make): (&str, fn(Vec<u8>) -> Output) = if frame.get("stdout").is_some() {
        ("stdout", Output::Stdout)
    } else {
        ("stderr", Output::Stderr)
    };
    STANDARD.decode(frame.get(key)?.as_str()?).ok().map(make)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversized_lines_are_refused() {
        for output in [
            Output::Stdout(b"hello\n".to_vec()),
            Output::Stderr(vec![0, 255, 10]),
            Output::StdinRun("run_1".into()),
            Output::Exited(137),
        ] {
            let line = encode(&output);
            assert_eq!(parse(&line[..line.len() - 1]), Some(output));
        }
        // A full 16 KiB pipe read fits a frame with room to spare.
        assert!(encode(&Output::Stdout(vec![7; 16 * 1024])).len() < MAX_FRAME_BYTES);
        let long = format!(r#"{{"stdout":"{}"}}"#, "A".repeat(MAX_FRAME_BYTES));
        assert_eq!(parse(long.as_bytes()), None);
        assert_eq!(parse(br#"{"exit": 99999999999}"#), None);
    }
}
