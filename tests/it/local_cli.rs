//! The person's local commands against a real daemon (`agent`, `runs`, `status`, `admin` without
//! a server URL): readable, aligned text by default, agents named by their handles, and the
//! program form with `--json`, the same way in every command.

use serde_json::Value;

use crate::support::{TestDaemon, agentteam};

async fn run_cli(daemon: &TestDaemon, args: &[&str]) -> (i32, String, String) {
    let output = daemon.cli(args).output().await.unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// Every cell of `line` starts where its heading does in `heading`.
#[track_caller]
fn assert_aligned(heading: &str, line: &str, cells: &[&str]) {
    for cell in cells {
        // A cell starts the line or follows the two spaces between columns.
        let at = if line.starts_with(cell) {
            0
        } else {
            line.find(&format!("  {cell}"))
                .map(|at| at + 2)
                .unwrap_or_else(|| panic!("`{cell}` missing from `{line}`"))
        };
        let column = heading[..at.min(heading.len())]
            .rfind("  ")
            .map_or(0, |spaces| spaces + 2);
        assert!(
            heading[column..].starts_with(|c: char| c.is_ascii_uppercase()),
            "`{cell}` at {at} is under no heading:\n{heading}\n{line}"
        );
        assert_eq!(column, at, "`{cell}` is not aligned:\n{heading}\n{line}");
    }
}

#[tokio::test]
async fn agent_add_prints_the_profile_for_a_person_and_json_for_a_program() {
    let daemon = TestDaemon::start(&[]).await;
    let (code, text, stderr) = run_cli(&daemon, &["agent", "add", "builder"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        serde_json::from_str::<Value>(&text).is_err(),
        "a person gets text, not JSON: {text}"
    );
    assert!(text.contains("handle:             builder\n"), "{text}");
    let (code, json, _) = run_cli(&daemon, &["agent", "add", "reviewer", "--json"]).await;
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["agent"]["handle"], "reviewer");
    let reviewer = json["agent"]["id"].as_str().unwrap().to_string();

    // The list: a table under headings, handle first.
    let (code, list, _) = run_cli(&daemon, &["agent", "list"]).await;
    assert_eq!(code, 0);
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines[0].starts_with("HANDLE"), "{list}");
    let row = lines.iter().find(|l| l.starts_with("reviewer")).unwrap();
    assert_aligned(lines[0], row, &[&reviewer]);

    // Removal and reload say what they did, or answer JSON.
    let (code, removed, _) = run_cli(&daemon, &["agent", "remove", "reviewer"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        removed,
        format!(
            "removed the local profile of reviewer ({reviewer}); the agent stays on the server\n"
        )
    );
    let (code, reloaded, _) = run_cli(&daemon, &["agent", "reload", "--json"]).await;
    assert_eq!(code, 0);
    let reloaded: Value = serde_json::from_str(&reloaded).unwrap();
    assert_eq!(reloaded["loaded"], 1, "{reloaded}");
    let (_, reloaded, _) = run_cli(&daemon, &["agent", "reload"]).await;
    assert_eq!(
        reloaded,
        "loaded 1 profile; removed 0 profiles the server no longer knows\n"
    );
}

#[tokio::test]
async fn runs_are_aligned_and_name_agents_by_handle() {
    let daemon = TestDaemon::start(&[]).await;
    let agent = daemon.add_agent("agent-with-a-long-handle-of-32ch").await;
    let mut runtime = daemon.launch(
        "agent-with-a-long-handle-of-32ch",
        &["--session", "s"],
        "echo up; exec sleep 60",
    );
    assert_eq!(runtime.line().await, "up");
    let (code, text, stderr) = run_cli(&daemon, &["runs"]).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let (_, json, _) = run_cli(&daemon, &["runs", "--json"]).await;
    let json: Value = serde_json::from_str(&json).unwrap();
    let run = &json["runs"][0];
    assert_eq!(run["agentHandle"], "agent-with-a-long-handle-of-32ch");
    assert_eq!(run["agentId"], agent.as_str());
    let run_id = run["runId"].as_str().unwrap();
    let pid = run["pid"].to_string();
    assert_aligned(
        lines[0],
        lines[1],
        &[
            run_id,
            "agent-with-a-long-handle-of-32ch",
            "s",
            &pid,
            "no turn",
        ],
    );
    assert!(
        !text.contains(&agent),
        "the id is shown only when asked:\n{text}"
    );
    let (_, by_id, _) = run_cli(&daemon, &["runs", "--ids"]).await;
    assert!(by_id.contains(&agent), "{by_id}");
    let _ = runtime.child.start_kill();
}

/// After `agentteam daemon`, `agentteam admin` reaches the embedded server with the operator
/// token in the daemon's state directory, found as `agentteam status` finds the daemon.
#[tokio::test]
async fn admin_uses_the_local_daemons_embedded_server() {
    let root = tempfile::tempdir().unwrap();
    // The default state directory (`$XDG_STATE_HOME/agentteam`), and `--state-dir`.
    let state = root.path().join("agentteam");
    let daemon = TestDaemon::start_at(&state, root.path(), &[], &[]).await;
    let workspace = daemon.workspace_id();
    let by_default = tokio::process::Command::new(crate::support::bin())
        .args([
            "admin",
            "kb",
            "source",
            "--workspace",
            &workspace,
            "--name",
            "handbook",
            "--json",
        ])
        .env("XDG_STATE_HOME", root.path())
        .output()
        .await
        .unwrap();
    assert!(
        by_default.status.success(),
        "{}",
        String::from_utf8_lossy(&by_default.stderr)
    );
    let source: Value = serde_json::from_slice(&by_default.stdout).unwrap();
    assert!(source["sourceId"].as_str().unwrap().starts_with("kbs_"));
    let named = agentteam(&[
        "admin",
        "kb",
        "source",
        "--state-dir",
        state.to_str().unwrap(),
        "--workspace",
        &workspace,
        "--name",
        "runbooks",
    ]);
    assert_eq!(named.code, 0, "{}", named.stderr);
    assert!(named.stdout.starts_with("name "), "{}", named.stdout);

    // The token file is checked before it is read: a file others may read is refused.
    let token = state.join("operator.token");
    let mode =
        |bits| std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(bits));
    let workspace_here = || {
        agentteam(&[
            "admin",
            "workspace",
            "--name",
            "x",
            "--state-dir",
            state.to_str().unwrap(),
        ])
    };
    mode(0o640).unwrap();
    let loose = workspace_here();
    assert_eq!(loose.code, 2);
    assert!(loose.stderr.contains("mode 640"), "{}", loose.stderr);
    mode(0o600).unwrap();
    if !rustix::process::geteuid().is_root() {
        crate::support::missing_precondition(
            "not root, so the token cannot be given to another user",
            "the another-user case of the token ownership check",
        );
    } else {
        let (uid, gid) = (65534, 65534);
        std::os::unix::fs::chown(&token, Some(uid), Some(gid)).unwrap();
        let foreign = workspace_here();
        assert_eq!(foreign.code, 2);
        assert!(
            foreign.stderr.contains("belongs to user 65534"),
            "{}",
            foreign.stderr
        );
        std::os::unix::fs::chown(&token, Some(0), Some(0)).unwrap();
    }
    assert!(!named.stderr.contains("ato_") && !loose.stderr.contains("ato_"));

    // No daemon there, and none to be started: said so, with the way out.
    let empty = root.path().join("nothing");
    let none = agentteam(&[
        "admin",
        "workspace",
        "--name",
        "x",
        "--no-start",
        "--state-dir",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(none.code, 2);
    assert!(
        none.stderr.contains(&format!(
            "no daemon is running with state dir `{}`",
            empty.display()
        )),
        "{}",
        none.stderr
    );
    assert!(none.stderr.contains("agentteam daemon"), "{}", none.stderr);
}
