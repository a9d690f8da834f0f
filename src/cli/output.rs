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
