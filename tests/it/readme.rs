//! The README's quick start, run as a newcomer runs it: the commands of its `sh` block, in order,
//! with the test build of `agentteam`, in a fresh home (so every default path is the test's own).
//! Only what a reader must replace is replaced: the placeholders `wsp_…`, `chn_…` and `kbs_…` with
//! the ids the earlier commands printed, `claude ...` with a shell command standing in for the
//! runtime, the browser `agentteam open` starts with `true`, and `cargo run --release --` with
//! the built binary. If the README and the code part, this fails.

use std::path::Path;
use std::process::Stdio;

use crate::support::{bin, repo_root};

/// The commands of the first `sh` block under `## Quick start`, without their comments.
fn quick_start() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = readme
        .split("\n## Quick start\n")
        .nth(1)
        .expect("the README has a `## Quick start` section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the quick start has an `sh` block");
    block
        .lines()
        .map(|line| match line.find("  #") {
            Some(comment) => line[..comment].trim_end(),
            None => line.trim_end(),
        })
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

/// The value of `name` in a command's output for a person (`name  value`).
fn field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|line| {
            let (key, value) = line.split_once(char::is_whitespace)?;
            (key == name).then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no `{name}` in:\n{text}"))
}

#[tokio::test]
async fn the_readme_quick_start_runs_as_written() {
    let commands = quick_start();
    assert!(commands.len() >= 8, "{commands:?}");
    let home = tempfile::tempdir().unwrap();
    let env = |command: &mut tokio::process::Command, path: &str| {
        command
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", path)
            .env("XDG_STATE_HOME", home.path().join("state"))
            .env("XDG_RUNTIME_DIR", home.path().join("run"))
            // `agentteam open`'s browser: one that takes the page and shows nothing.
            .env("BROWSER", "true")
            .current_dir(home.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
    };
    std::fs::create_dir(home.path().join("run")).unwrap();
    std::fs::create_dir(home.path().join("handbook")).unwrap();
    std::fs::write(
        home.path().join("handbook/failover.md"),
        "# Failover\nPromote the standby replica.\n",
    )
    .unwrap();
    std::fs::write(home.path().join("notes.md"), "# Notes\nOn-call rota.\n").unwrap();
    let system_path = std::env::var("PATH").unwrap_or_default();
    let built = Path::new(bin()).parent().unwrap().display().to_string();

    // The daemon, as the first command starts it (the built binary for `cargo run --release --`).
    let first = &commands[0];
    let daemon_args = first
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("the quick start begins with the daemon: {first}"));
    assert_eq!(daemon_args, "daemon");
    let mut daemon = tokio::process::Command::new(bin());
    env(&mut daemon, &system_path);
    let mut daemon = daemon
        .arg(daemon_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(daemon.stdout.take().unwrap()));
    let listening = lines
        .next_line()
        .await
        .unwrap()
        .expect("the daemon announces itself");
    assert!(
        listening.starts_with("listening on http://127.0.0.1:"),
        "{listening}"
    );

    // `export PATH=…target/release…`: the test build's directory plays that part.
    let export = &commands[1];
    assert!(
        export.starts_with("export PATH=") && export.contains("target/release"),
        "the second command puts the built agentteam on PATH: {export}"
    );
    let path = format!("{built}:{system_path}");

    // The ids a reader copies from `agentteam status`, once it has run.
    let mut workspace: Option<String> = None;
    let mut channel: Option<String> = None;
    let mut source = None;
    let mut ran = Vec::new();
    for line in &commands[2..] {
        assert!(
            line.starts_with("agentteam "),
            "every other command is agentteam's: {line}"
        );
        let mut line = line.replace("claude ...", "sh -c 'agentteam exec --help'");
        if line.starts_with("agentteam agent recipe ") {
            // The runtime a message starts: a stand-in that answers where it was asked.
            let stand_in = home.path().join("answers.sh");
            std::fs::write(
                &stand_in,
                super::deliveries::stand_in("green", super::deliveries::Wait::No),
            )
            .unwrap();
            line = line.replace("claude -p", &format!("sh {}", stand_in.display()));
        }
        for (placeholder, id) in [("wsp_…", &workspace), ("chn_…", &channel)] {
            if line.contains(placeholder) {
                let id = id.as_ref().unwrap_or_else(|| {
                    panic!("`{placeholder}` before `agentteam status` showed it: {line}")
                });
                line = line.replace(placeholder, id);
            }
        }
        if line.contains("kbs_…") {
            let source: &String = source
                .as_ref()
                .unwrap_or_else(|| panic!("`kbs_…` before a source was made: {line}"));
            line = line.replace("kbs_…", source);
        }
        assert!(
            !line.contains('…'),
            "a placeholder the test cannot fill: {line}"
        );
        let mut command = tokio::process::Command::new("sh");
        env(&mut command, &path);
        let output = command.args(["-c", &line]).output().await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "`{line}` failed:\n{stderr}{stdout}"
        );
        if line.starts_with("agentteam admin kb source") {
            source = Some(field(&stdout, "sourceId"));
        }
        if line.starts_with("agentteam run ") {
            assert!(
                stdout.contains("agentteam exec <domain> <action>") && stdout.contains("task"),
                "the runtime's `agentteam exec --help`: {stdout}"
            );
        }
        if line == "agentteam status" {
            // `workspace  wsp_… (your channel chn_…)`.
            let shown = field(&stdout, "workspace");
            let words: Vec<&str> = shown.split_whitespace().collect();
            assert!(words.len() == 4 && words[0].starts_with("wsp_"), "{stdout}");
            workspace = Some(words[0].to_string());
            channel = Some(words[3].trim_end_matches(')').to_string());
        }
        if line.starts_with("agentteam post ") && line.contains("--wait") {
            assert!(
                stdout.contains("    -> builder answered\n")
                    && stdout.ends_with("] builder: green\n"),
                "the agent's reply, where it was asked: {stdout}"
            );
        }
        if line.starts_with("agentteam admin kb import") {
            assert!(stdout.starts_with("1 file: 1 new"), "{stdout}");
        }
        ran.push(
            line.split_whitespace()
                .take(4)
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    for expected in [
        "agentteam agent add builder",
        "agentteam run --agent builder",
        "agentteam status",
        "agentteam agent recipe builder",
        "agentteam post @builder",
        "agentteam admin kb source",
        "agentteam admin kb grant",
        "agentteam admin kb import",
        "agentteam admin kb add",
    ] {
        assert!(
            ran.iter().any(|r| r.starts_with(expected)),
            "the quick start no longer runs `{expected}`: {ran:?}"
        );
    }
    let _ = daemon.start_kill();
    let _ = daemon.wait().await;
}
