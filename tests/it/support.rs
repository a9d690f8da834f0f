//! Shared test plumbing: paths, running the binary, copying `schema/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `agentteam` binary cargo built for this test run.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentteam")
}

/// What a finished command printed, and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Run {
        Run {
            code: output
                .status
                .code()
                .expect("the process exited, not killed"),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }
}

/// Runs `agentteam ARGS` with no Exec variables in its environment and no stdin.
pub fn agentteam(args: &[&str]) -> Run {
    Command::new(bin())
        .args(args)
        .env_remove("AGENTTEAM_EXEC_BASE_URL")
        .env_remove("AGENTTEAM_EXEC_TOKEN_FILE")
        .stdin(Stdio::null())
        .output()
        .expect("agentteam runs")
        .into()
}

/// Copies the directory tree `from` into `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A fresh copy of `schema/` in a temp dir, returned with the dir guard.
pub fn schema_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema");
    copy_tree(&repo_root().join("schema"), &schema);
    (dir, schema)
}
