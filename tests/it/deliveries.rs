//! Deliveries on a real daemon: a person's message starts the addressed agent's runtime (a
//! stand-in program, as its launch recipe says), which reads the message on stdin and answers
//! with `message_send` where it was asked; the delivery is answered, failed or left alone as
//! it should be; the recipe is the person's alone, its environment's values never shown.

use std::time::Duration;

use serde_json::{Value, json};

use super::person::{run_script, section};
use super::support::*;

/// `agentteam ARGS` against the daemon: exit code, stdout, stderr.
async fn cli(daemon: &TestDaemon, args: &[&str]) -> (i32, String, String) {
    let output = daemon.cli(args).output().await.unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// One human API action through the daemon's person route.
async fn human(daemon: &TestDaemon, action: &str, input: Value) -> Value {
    let token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    let answer: Value = daemon
        .client
        .post(format!("{}/api/admin/human/{action}", daemon.base_url))
        .bearer_auth(token.trim())
        .json(&input)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["ok"], true, "{action}: {answer}");
    answer["data"].clone()
}

/// Waits on the person's feed (from `after`) for a delivery event satisfying `wanted`; the
/// delivery. Event-driven: each read waits for the next change.
async fn delivery_event(
    daemon: &TestDaemon,
    mut after: Value,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no such delivery event in time"
        );
        let page = human(
            daemon,
            "events_read",
            json!({"after": after, "waitMs": 5000}),
        )
        .await;
        for event in page["events"].as_array().unwrap() {
            if event["kind"] == "delivery" && wanted(&event["delivery"]) {
                return event["delivery"].clone();
            }
        }
        after = page["cursor"].clone();
    }
}

/// The stand-in runtime: keeps what it was handed on stdin, waits for a line on the FIFO `go`
/// in its working directory when `wait` is set, then answers `reply` on the target it was
/// handed, with `message_send` over MCP as a runtime does.
pub(super) fn stand_in(reply: &str, wait: bool) -> String {
    let wait = if wait {
        "read -r _ < \"$PWD/go\"\n"
    } else {
        ""
    };
    format!(
        r#"input=$(cat)
printf '%s\n' "$input" > "$PWD/prompt.txt"
target=$(printf '%s\n' "$input" | sed -n 's/^Target: //p')
{wait}curl -s -o /dev/null -w '%{{http_code}}' \
  -H "Authorization: Bearer $(cat "$AGENTTEAM_MCP_TOKEN_FILE")" \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H 'MCP-Protocol-Version: 2025-11-25' \
  -d "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"message_send\",\"arguments\":{{\"target\":\"$target\",\"content\":\"{reply}\"}}}}}}" \
  "$AGENTTEAM_MCP_URL" > "$PWD/answered.txt"
"#
    )
}

/// A FIFO named `go` in `dir`, on which a waiting stand-in is released.
pub(super) fn make_go(dir: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("go"))
        .status()
        .unwrap();
    assert!(made.success());
}

#[tokio::test]
async fn a_persons_message_starts_the_agents_run_and_the_reply_lands_where_it_was_asked() {
    let daemon = TestDaemon::start(&[]).await;
    let builder = daemon.add_agent("builder").await;
    daemon.add_agent("reviewer").await;
    let work = tempfile::tempdir().unwrap();
    let workdir = work.path().display().to_string();

    // The recipe, set by the person; its environment's values stay private.
    let (code, out, err) = {
        let output = daemon
            .cli(&[
                "agent",
                "recipe",
                "builder",
                "--workdir",
                &workdir,
                "--env",
                "RECIPE_SECRET",
                "--json",
                "--",
                "sh",
                "-c",
                &stand_in("on it", true),
            ])
            .env("RECIPE_SECRET", "sk-recipe-never-shown")
            .output()
            .await
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    };
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["recipe"]["argv"][0], "sh");
    assert!(
        shown["recipe"]["envNames"]
            .as_array()
            .unwrap()
            .contains(&json!("RECIPE_SECRET"))
    );
    let (code, shown, err) = cli(&daemon, &["agent", "recipe", "builder", "--show"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains("RECIPE_SECRET") && shown.contains("sh -c"),
        "{shown}"
    );
    assert!(!shown.contains("sk-recipe-never-shown"), "{shown}");
    let file = daemon.state_dir.join(format!("recipes/{builder}.json"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // A mention in #general: the run starts, reads the message, answers in #general.
    make_go(work.path());
    let head = human(&daemon, "events_read", json!({})).await["cursor"].clone();
    let (code, _, err) = cli(
        &daemon,
        &["post", "#general", "@builder is the build green?"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    // While it runs, the reader says so under the message.
    let started = delivery_event(&daemon, head.clone(), |d| d["state"] == "started").await;
    let (code, read, err) = cli(&daemon, &["read", "#general"]).await;
    assert_eq!(code, 0, "{err}");
    let said = format!(
        "@builder is the build green?\n    -> builder is answering… (run {})\n",
        started["runId"].as_str().unwrap()
    );
    assert!(read.contains(&said), "{read}");
    std::fs::write(work.path().join("go"), "go\n").unwrap();
    let answered = delivery_event(&daemon, head.clone(), |d| d["state"] == "answered").await;
    let general = answered["target"].as_str().unwrap().to_string();
    assert!(general.starts_with("channel:"), "{answered}");
    let page = human(
        &daemon,
        "history_read",
        json!({"target": general, "limit": 2}),
    )
    .await;
    assert_eq!(page["messages"][0]["content"], "on it");
    assert_eq!(page["messages"][0]["authorId"], json!(builder));
    assert_eq!(answered["replyId"], page["messages"][0]["id"]);
    assert_eq!(
        answered["runId"].as_str().map(|r| r.starts_with("dlv-")),
        Some(true)
    );
    let prompt = std::fs::read_to_string(work.path().join("prompt.txt")).unwrap();
    assert!(prompt.contains("@builder is the build green?"), "{prompt}");
    assert!(prompt.contains(&format!("Target: {general}")), "{prompt}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("answered.txt")).unwrap(),
        "200"
    );
    let (_, read, _) = cli(&daemon, &["read", "#general"]).await;
    assert!(
        read.contains("@builder is the build green?\n    -> builder answered\n"),
        "{read}"
    );
    let (_, read, _) = cli(&daemon, &["read", "#general", "--json"]).await;
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["deliveries"][0]["id"], answered["id"], "{read}");
    std::fs::remove_file(work.path().join("go")).unwrap();

    // In a direct conversation: the reply lands there, not in #general.
    // `post --wait` follows it to the reply.
    let (code, out, err) = cli(&daemon, &["post", "@builder", "and the deploy?", "--wait"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("posted msg_"), "{out}");
    assert!(out.contains("    -> builder answered\n["), "{out}");
    assert!(out.ends_with("] builder: on it\n"), "{out}");
    let direct = delivery_event(&daemon, head.clone(), |d| {
        d["state"] == "answered" && d["target"].as_str().unwrap_or("").starts_with("dm:")
    })
    .await;
    let dm = human(
        &daemon,
        "history_read",
        json!({"target": direct["target"], "limit": 1}),
    )
    .await;
    assert_eq!(dm["messages"][0]["content"], "on it");
    assert_eq!(direct["replyId"], dm["messages"][0]["id"]);

    // An agent without a recipe: its delivery waits (pending), nothing runs for it.
    let (code, _, err) = cli(&daemon, &["post", "#general", "@reviewer a look?"]).await;
    assert_eq!(code, 0, "{err}");
    let waiting = human(&daemon, "delivery_list", json!({"state": "pending"})).await;
    assert_eq!(
        waiting["deliveries"].as_array().unwrap().len(),
        1,
        "{waiting}"
    );
    assert_ne!(waiting["deliveries"][0]["agentId"], json!(builder));

    // A recipe whose program fails: the delivery fails, and says how.
    let (code, _, err) = cli(
        &daemon,
        &[
            "agent",
            "recipe",
            "builder",
            "--workdir",
            &workdir,
            "--",
            "sh",
            "-c",
            "cat >/dev/null; exit 3",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(
        &daemon,
        &["post", "#general", "@builder once more", "--wait", "--json"],
    )
    .await;
    assert_eq!(code, 1, "a run that did not answer: {err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines[0]["message"]["id"].is_string(), "{out}");
    let last = &lines.last().unwrap()["delivery"];
    assert_eq!(
        (last["state"].as_str(), last["reason"].as_str()),
        (Some("failed"), Some("the run exited with status 3")),
        "{out}"
    );
    // A message that names no agent wakes none: `--wait` says so and is done.
    let (code, out, _) = cli(&daemon, &["post", "#general", "hello all", "--wait"]).await;
    assert_eq!(code, 0);
    assert!(
        out.ends_with("\n    (it wakes none of your agents)\n"),
        "{out}"
    );
    let failed = delivery_event(&daemon, head, |d| d["state"] == "failed").await;
    assert_eq!(failed["reason"], "the run exited with status 3");
    let (_, read, _) = cli(&daemon, &["read", "#general"]).await;
    assert!(
        read.contains("@builder once more\n    -> builder failed: the run exited with status 3\n"),
        "{read}"
    );
    assert!(
        read.contains("@reviewer a look?\n    -> reviewer: waiting for the daemon that hosts it\n"),
        "{read}"
    );

    // The recipe is the person's: from inside a runtime, setting or clearing it is refused.
    let state = daemon.state_dir.display().to_string();
    let output = run_script(
        &daemon,
        &builder,
        &format!(
            "echo BEGIN set\nagentteam agent recipe builder --state-dir '{state}' -- sh -c true\necho \"exit=$?\"\necho END set\n\
             echo BEGIN clear\nagentteam agent recipe builder --state-dir '{state}' --clear\necho \"exit=$?\"\necho END clear\n"
        ),
        &[],
    )
    .await;
    for step in ["set", "clear"] {
        let said = section(&output, step);
        assert!(
            said.contains("a runtime may not act as its person"),
            "{output}"
        );
        assert!(!said.contains("exit=0"), "{output}");
    }
    let (code, shown, _) = cli(&daemon, &["agent", "recipe", "builder", "--show", "--json"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&shown).unwrap()["recipe"]["argv"][2],
        "cat >/dev/null; exit 3"
    );
    let (code, out, _) = cli(&daemon, &["agent", "recipe", "builder", "--clear"]).await;
    assert_eq!((code, out.as_str()), (0, "recipe removed\n"));
    assert!(!file.exists());
    assert!(
        !daemon.log().contains("sk-recipe-never-shown"),
        "the daemon never logs a recipe's values"
    );
}
