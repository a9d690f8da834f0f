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

/// One human API action through the daemon's person route: its whole answer, a success or not.
pub(super) async fn human_answer(daemon: &TestDaemon, action: &str, input: Value) -> Value {
    let token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    daemon
        .client
        .post(format!("{}/api/admin/human/{action}", daemon.base_url))
        .bearer_auth(token.trim())
        .json(&input)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// One human API action through the daemon's person route, which must succeed: its data.
pub(super) async fn human(daemon: &TestDaemon, action: &str, input: Value) -> Value {
    let answer = human_answer(daemon, action, input).await;
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
            "no such delivery event in time; the daemon's log:\n{}",
            daemon.log()
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

/// When the stand-in runtime answers.
#[derive(Clone, Copy)]
pub(super) enum Wait {
    /// At once.
    No,
    /// Once a line comes on the FIFO `go` in its working directory ([`make_go`]).
    Go,
    /// Once this many runs started in its working directory: a barrier that holds only when the
    /// runs work there at once.
    Together(usize),
}

/// The stand-in runtime: keeps what it was handed on stdin (and a line in `runs.log` for each
/// start), waits as `wait` says, then answers `reply` on the target it was handed, with
/// `message_send` over MCP as a runtime does, and appends the answer's HTTP status to
/// `answered.txt`.
pub(super) fn stand_in(reply: &str, wait: Wait) -> String {
    let wait = match wait {
        Wait::No => String::new(),
        Wait::Go => "read -r _ < \"$PWD/go\"\n".to_string(),
        Wait::Together(runs) => {
            format!("while [ \"$(wc -l < \"$PWD/runs.log\")\" -lt {runs} ]; do sleep 0.05; done\n")
        }
    };
    format!(
        r#"input=$(cat)
printf '%s\n' "$input" > "$PWD/prompt.txt"
echo started >> "$PWD/runs.log"
target=$(printf '%s\n' "$input" | sed -n 's/^Target: //p')
{wait}curl -s -o /dev/null -w '%{{http_code}}\n' \
  -H "Authorization: Bearer $(cat "$AGENTTEAM_MCP_TOKEN_FILE")" \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H 'MCP-Protocol-Version: 2025-11-25' \
  -d "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"message_send\",\"arguments\":{{\"target\":\"$target\",\"content\":\"{reply}\"}}}}}}" \
  "$AGENTTEAM_MCP_URL" >> "$PWD/answered.txt"
"#
    )
}

/// The answer statuses the stand-ins in `work` appended to `answered.txt`, once there is one for
/// every start in `runs.log`: a delivery is `answered` once the reply is posted, before the
/// stand-in's `curl` has written the status of that post.
async fn answer_statuses(work: &std::path::Path) -> Vec<String> {
    let lines = |name: &str| {
        std::fs::read_to_string(work.join(name))
            .map(|text| text.lines().map(str::to_string).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    wait_for("every run's answer status", Duration::from_secs(30), || {
        lines("answered.txt").len() >= lines("runs.log").len()
    })
    .await;
    lines("answered.txt")
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
                &stand_in("on it", Wait::Go),
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
    // Kimi Code's prompt is the daemon's to give (naming the file that holds the message): a
    // recipe with its own is refused, saying why, and the recipe stays.
    let (code, _, err) = cli(
        &daemon,
        &[
            "agent",
            "recipe",
            "builder",
            "--runtime",
            "kimi",
            "--",
            "kimi",
            "-p",
            "x",
        ],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a Kimi Code recipe takes no `-p`"), "{err}");
    let (_, shown_again, _) = cli(&daemon, &["agent", "recipe", "builder", "--show"]).await;
    assert_eq!(shown_again, shown);
    let file = daemon.state_dir.join(format!("recipes/{builder}.json"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // A mention in #general: the run starts, reads the message, answers in #general.
    make_go(work.path());
    let head = human(&daemon, "events_read", json!({})).await["cursor"].clone();
    // A person following #general sees the agent answering, then answered, under the message.
    let mut follower = Launched::spawn(daemon.cli(&["read", "#general", "--follow"]));
    assert!(
        follower
            .line()
            .await
            .ends_with("(following; interrupt to stop)")
    );
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
        "@builder is the build green?\n    -> builder is answering… (session {})\n",
        started["runId"].as_str().unwrap()
    );
    assert!(read.contains(&said), "{read}");
    std::fs::write(work.path().join("go"), "go\n").unwrap();
    let answered = delivery_event(&daemon, head.clone(), |d| d["state"] == "answered").await;
    let mut followed = Vec::new();
    while !followed
        .iter()
        .any(|l: &String| l.contains("builder answered"))
    {
        followed.push(follower.line().await);
    }
    let at = |text: &str| followed.iter().position(|l| l.contains(text));
    let asked = at("@builder is the build green?").expect("the message, followed");
    let answering = at("-> builder is answering… (session dlv-").expect("answering, followed");
    let reply = at("] builder: on it").expect("the reply, followed");
    assert!(asked < answering && answering < reply, "{followed:?}");
    follower.child.kill().await.unwrap();
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
    assert_eq!(answer_statuses(work.path()).await, ["200"]);
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
        read.contains(&format!(
            "@builder once more\n    -> builder failed: the run exited with status 3 \
             (again: agentteam retry {})\n",
            failed["id"].as_str().unwrap()
        )),
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
             echo BEGIN clear\nagentteam agent recipe builder --state-dir '{state}' --clear\necho \"exit=$?\"\necho END clear\n\
             echo BEGIN pause\nagentteam agent pause --all --state-dir '{state}'\necho \"exit=$?\"\necho END pause\n\
             echo BEGIN retry\nagentteam retry {id} --state-dir '{state}'\necho \"exit=$?\"\necho END retry\n",
            id = failed["id"].as_str().unwrap(),
        ),
        &[],
    )
    .await;
    for step in ["set", "clear", "pause", "retry"] {
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

/// The daemon SIGKILLed at `point` of a delivery (its debug build's fault point), then started
/// again on the same state directory (and so, embedded, its server on the same database): the
/// delivery is started automatically at most once and reaches a final state; one the crash left
/// started is `interrupted`, and the person's retry runs it again to its answer. Returns how many
/// runs started and the HTTP status of each answer a runtime sent.
async fn a_delivery_outlives_its_daemon_killed_at(point: &str) -> (usize, Vec<String>) {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    make_go(work.path());
    let workdir = work.path().display().to_string();
    let mut first = TestDaemon::start_in_with_env(
        root.path(),
        &[],
        &[("AGENTTEAM_FAULT_KILL_DELIVERY", point)],
    )
    .await;
    first.add_agent("builder").await;
    let script = stand_in("on it", Wait::Go);
    let (code, _, err) = cli(
        &first,
        &[
            "agent",
            "recipe",
            "builder",
            "--workdir",
            &workdir,
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&first, &["post", "@builder", "are you there?"]).await;
    assert_eq!(code, 0, "{err}");
    let died = first.child.wait().await.unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(died.signal(), Some(9), "{point}: {}", first.log());

    let second = TestDaemon::start_in(root.path(), &[]).await;
    let from_start = json!(0);
    let runs = || {
        std::fs::read_to_string(work.path().join("runs.log"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let release = || std::fs::write(work.path().join("go"), "go\n").unwrap();
    if point == "claim" {
        // It never reached the server: still pending, the next daemon starts it.
        delivery_event(&second, from_start.clone(), |d| d["state"] == "started").await;
        release();
    } else {
        let interrupted =
            delivery_event(&second, from_start.clone(), |d| d["state"] == "interrupted").await;
        assert_eq!(
            interrupted["reason"], "the daemon that started it stopped",
            "{interrupted}"
        );
        if point == "spawn" {
            // The first run outlived its daemon, waiting: released, its answer is refused (its
            // credential went with the daemon that gave it). It may log its start only now.
            wait_for("the first run in the log", Duration::from_secs(30), || {
                runs() == 1
            })
            .await;
            release();
            wait_for("the first run's answer", Duration::from_secs(30), || {
                std::fs::read_to_string(work.path().join("answered.txt"))
                    .is_ok_and(|a| a.ends_with('\n'))
            })
            .await;
        } else {
            assert_eq!(runs(), 0, "a run started before the daemon died");
        }
        let id = interrupted["id"].as_str().unwrap();
        let (code, out, err) = cli(&second, &["retry", id]).await;
        assert_eq!(
            (code, out.as_str()),
            (0, format!("{id} pending\n").as_str()),
            "{err}"
        );
        let retried = delivery_event(&second, from_start.clone(), |d| {
            d["state"] == "started" && d["id"] == interrupted["id"]
        })
        .await;
        assert_eq!(retried["messageId"], interrupted["messageId"]);
        release();
    }
    let answered = delivery_event(&second, from_start, |d| d["state"] == "answered").await;
    let dm = human(
        &second,
        "history_read",
        json!({"target": answered["target"]}),
    )
    .await;
    let replies: Vec<&Value> = dm["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"] == "on it")
        .collect();
    assert_eq!(replies.len(), 1, "one reply: {dm}");
    assert_eq!(answered["replyId"], replies[0]["id"]);
    let statuses = answer_statuses(work.path()).await;
    (runs(), statuses)
}

#[tokio::test]
async fn a_daemon_killed_before_it_claims_a_delivery_leaves_it_for_the_next() {
    let (runs, statuses) = a_delivery_outlives_its_daemon_killed_at("claim").await;
    assert_eq!((runs, statuses), (1, vec!["200".to_string()]));
}

#[tokio::test]
async fn a_daemon_killed_between_the_claim_and_the_spawn_leaves_it_interrupted() {
    let (runs, statuses) = a_delivery_outlives_its_daemon_killed_at("start").await;
    assert_eq!((runs, statuses), (1, vec!["200".to_string()]));
}

#[tokio::test]
async fn a_daemon_killed_after_the_spawn_leaves_it_interrupted_and_its_run_powerless() {
    let (runs, statuses) = a_delivery_outlives_its_daemon_killed_at("spawn").await;
    assert_eq!(runs, 2, "the first run, then the retry's");
    assert_ne!(statuses[0], "200", "the orphaned run's answer is refused");
    assert_eq!(statuses[1..], ["200".to_string()]);
}

/// The state of `daemon`'s person's delivery of message `message_id`.
async fn state_of(daemon: &TestDaemon, message_id: &str) -> Value {
    let all = human(daemon, "delivery_list", json!({})).await;
    all["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["messageId"] == message_id)
        .unwrap_or_else(|| panic!("no delivery of {message_id}: {all}"))
        .clone()
}

/// `agentteam post TARGET TEXT --json`: the posted message's id.
async fn post(daemon: &TestDaemon, target: &str, text: &str) -> String {
    let (code, out, err) = cli(daemon, &["post", target, text, "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let posted: Value = serde_json::from_str(&out).unwrap();
    posted["message"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_paused_agent_and_a_busy_working_directory_make_messages_wait() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("builder").await;
    daemon.add_agent("reviewer").await;
    let (builder_dir, reviewer_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    make_go(builder_dir.path());
    // The reviewer's recipe shares its directory, and its runs answer only once two of them
    // started there.
    for (agent, dir, wait) in [
        ("builder", &builder_dir, Wait::Go),
        ("reviewer", &reviewer_dir, Wait::Together(2)),
    ] {
        let workdir = dir.path().display().to_string();
        let script = stand_in("on it", wait);
        let mut args = vec!["agent", "recipe", agent, "--workdir", &workdir];
        if matches!(wait, Wait::Together(_)) {
            args.push("--shared-workdir");
        }
        args.extend(["--", "sh", "-c", &script]);
        let (code, _, err) = cli(&daemon, &args).await;
        assert_eq!(code, 0, "{err}");
    }
    let head = human(&daemon, "events_read", json!({})).await["cursor"].clone();

    // Paused, builder's message waits; an unpaused agent's, posted after it, runs (so the
    // deliverer saw builder's first and left it).
    let (code, out, err) = cli(&daemon, &["agent", "pause", "builder"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("paused: builder"), "{out}");
    let (_, shown, _) = cli(&daemon, &["agent", "recipe", "builder", "--show"]).await;
    assert!(shown.contains("paused    yes"), "{shown}");
    let held = post(&daemon, "#general", "@builder while you are paused").await;
    let first = post(&daemon, "#general", "@reviewer one").await;
    let second = post(&daemon, "@reviewer", "two").await;
    // Both its runs work at once: each answers only once the other started.
    for message in [&first, &second] {
        delivery_event(&daemon, head.clone(), |d| {
            d["messageId"] == json!(message) && d["state"] == "answered"
        })
        .await;
    }
    assert_eq!(state_of(&daemon, &held).await["state"], "pending");

    // Resumed, it runs; a second conversation's message waits while the first run works in the
    // same directory, then runs.
    let (code, out, err) = cli(&daemon, &["agent", "resume", "builder"]).await;
    assert_eq!((code, out.as_str()), (0, "no agent is paused\n"), "{err}");
    delivery_event(&daemon, head.clone(), |d| {
        d["messageId"] == json!(held) && d["state"] == "started"
    })
    .await;
    let queued = post(&daemon, "@builder", "and in private?").await;
    let third = post(&daemon, "#general", "@reviewer three").await;
    // Its reviewer run answers at once (two of reviewer's runs started there before): an event
    // read after that shows it answered.
    delivery_event(&daemon, head.clone(), |d| {
        d["messageId"] == json!(third) && (d["state"] == "started" || d["state"] == "answered")
    })
    .await;
    assert_eq!(state_of(&daemon, &queued).await["state"], "pending");
    let runs = || {
        std::fs::read_to_string(builder_dir.path().join("runs.log"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    // `started` is recorded before the run is launched: its line in the log comes after.
    wait_for("held's run in the log", Duration::from_secs(30), || {
        runs() >= 1
    })
    .await;
    assert_eq!(runs(), 1, "one run at a time in builder's directory");
    std::fs::write(builder_dir.path().join("go"), "go\n").unwrap();
    delivery_event(&daemon, head.clone(), |d| {
        d["messageId"] == json!(held) && d["state"] == "answered"
    })
    .await;
    delivery_event(&daemon, head.clone(), |d| {
        d["messageId"] == json!(queued) && d["state"] == "started"
    })
    .await;
    std::fs::write(builder_dir.path().join("go"), "go\n").unwrap();
    delivery_event(&daemon, head.clone(), |d| {
        d["messageId"] == json!(queued) && d["state"] == "answered"
    })
    .await;
    assert_eq!(runs(), 2);

    // Every agent paused, then every one resumed (each paused by name too).
    cli(&daemon, &["agent", "pause", "reviewer"]).await;
    let (code, out, _) = cli(&daemon, &["agent", "pause", "--all"]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("every agent is paused"), "{out}");
    let (code, out, _) = cli(&daemon, &["agent", "resume", "--all"]).await;
    assert_eq!((code, out.as_str()), (0, "no agent is paused\n"));
    let (code, _, err) = cli(&daemon, &["agent", "pause"]).await;
    assert_eq!(code, 2, "an agent or --all: {err}");
}

#[tokio::test]
async fn the_servers_flags_set_the_bound_per_person_and_the_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let database = database_url(dir.path()).await;
    let token_file = dir.path().join("operator.token");
    let (_server, url, _) = spawn_server_with(
        &database,
        &token_file,
        None,
        &[
            "--deliveries-per-minute",
            "2",
            "--delivery-ttl-secs",
            "3600",
        ],
    )
    .await;
    let token = token_file.display().to_string();
    let daemon = TestDaemon::start(&["--server-url", &url, "--operator-token-file", &token]).await;
    daemon.add_agent("builder").await;
    for n in 0..2 {
        let waiting = post(&daemon, "#general", &format!("@builder {n}")).await;
        let delivery = state_of(&daemon, &waiting).await;
        assert_eq!(delivery["state"], "pending", "{delivery}");
        let at = |field: &str| {
            chrono::DateTime::parse_from_rfc3339(delivery[field].as_str().unwrap()).unwrap()
        };
        assert_eq!((at("expiresAt") - at("createdAt")).num_seconds(), 3600);
    }
    let third = post(&daemon, "#general", "@builder and a third").await;
    assert_eq!(
        state_of(&daemon, &third).await["reason"],
        "not started: your messages woke agents 2 times in the last minute"
    );
    for bad in ["0", "100001", "many"] {
        let output = std::process::Command::new(bin())
            .args(["server", "--deliveries-per-minute", bad])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad}");
    }
}

/// `agentteam admin --json <args>` on the daemon's server: the operator's answer.
pub(super) async fn operator(daemon: &TestDaemon, args: &[&str]) -> Value {
    let output = tokio::process::Command::new(crate::support::bin())
        .arg("admin")
        .arg("--json")
        .args(args)
        // The daemon's server, embedded or (in the PostgreSQL pass) `agentteam server`.
        .arg("--server-url")
        .arg(&daemon.server_url)
        .arg("--operator-token-file")
        .arg(&daemon.operator_token_file)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "admin {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn a_person_the_owner_allows_wakes_the_agent_and_one_not_allowed_starts_nothing() {
    let daemon = TestDaemon::start(&[]).await;
    let builder = daemon.add_agent("builder").await;
    let work = tempfile::tempdir().unwrap();
    let workdir = work.path().display().to_string();
    let script = stand_in("answered bob", Wait::No);
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
            &script,
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&daemon, &["agent", "wakers", "builder"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "only you, its owner, wake this agent (`--allow HANDLE` lets another person)\n"
    );

    // Bob, another person of the workspace, in a channel with the owner and the agent.
    let workspace = daemon.workspace_id();
    let me = human(&daemon, "me", json!({})).await;
    let bob = operator(
        &daemon,
        &[
            "human",
            "--workspace",
            &workspace,
            "--handle",
            "bob",
            "--display-name",
            "Bob",
        ],
    )
    .await["humanId"]
        .as_str()
        .unwrap()
        .to_string();
    let channel = operator(
        &daemon,
        &[
            "channel",
            "--workspace",
            &workspace,
            "--name",
            "with-bob",
            "--member",
            me["humanId"].as_str().unwrap(),
            "--member",
            &bob,
            "--member",
            &builder,
        ],
    )
    .await["channelId"]
        .as_str()
        .unwrap()
        .to_string();
    let bob_says = async |content: &str| {
        operator(
            &daemon,
            &[
                "message",
                "--workspace",
                &workspace,
                "--author",
                &bob,
                "--channel",
                &channel,
                "--content",
                content,
            ],
        )
        .await["messageId"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // Not allowed: the server decided in the message's transaction that it wakes nobody.
    let before = bob_says("@builder can you look, before I may?").await;
    let listed = human(&daemon, "delivery_list", json!({})).await;
    assert!(
        !listed.to_string().contains(&before),
        "a person not allowed woke the agent: {listed}"
    );

    // Allowed by the owner, from the command line: Bob's mention starts the agent's run, which
    // answers in the channel it was asked in.
    let (code, out, err) = cli(&daemon, &["agent", "wakers", "builder", "--allow", "bob"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "you, its owner, and bob wake this agent\n");
    let (code, out, err) = cli(&daemon, &["agent", "wakers", "builder", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["wakers"], json!([{"humanId": bob, "handle": "bob"}]));
    let head = human(&daemon, "events_read", json!({})).await["cursor"].clone();
    let asked = bob_says("@builder can you look, now that I may?").await;
    let answered = delivery_event(&daemon, head, |d| {
        d["messageId"] == json!(asked) && d["state"] == "answered"
    })
    .await;
    assert_eq!(answered["target"], json!(format!("channel:{channel}")));
    let prompt = std::fs::read_to_string(work.path().join("prompt.txt")).unwrap();
    assert!(prompt.contains("now that I may?"), "{prompt}");

    // A handle no person has is refused, naming it; nothing changed.
    let (code, _, err) = cli(&daemon, &["agent", "wakers", "builder", "--allow", "carol"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no person of this workspace has the handle `carol`"),
        "{err}"
    );
    let (code, out, _) = cli(
        &daemon,
        &["agent", "wakers", "builder", "--disallow", "bob"],
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.starts_with("only you, its owner"), "{out}");
}

/// A delivered run of builder that keeps the MCP token it started with in `token-at-start`, runs
/// `then` (shell), says it is ready on the FIFO `ready`, and waits on the FIFO `go` in its
/// working directory before answering `reply`. Returns once it is ready: the working directory,
/// the feed's cursor from before, the message's id and its started delivery.
async fn a_held_run(
    daemon: &TestDaemon,
    then: &str,
    reply: &str,
) -> (tempfile::TempDir, Value, String, Value) {
    daemon.add_agent("builder").await;
    let work = tempfile::tempdir().unwrap();
    make_go(work.path());
    let ready = work.path().join("ready");
    let made = std::process::Command::new("mkfifo")
        .arg(&ready)
        .status()
        .unwrap();
    assert!(made.success());
    let workdir = work.path().display().to_string();
    let script = format!(
        "cp \"$AGENTTEAM_MCP_TOKEN_FILE\" \"$PWD/token-at-start\"\n{then}\n\
         echo ready > \"$PWD/ready\"\n{}",
        stand_in(reply, Wait::Go)
    );
    let (code, _, err) = cli(
        daemon,
        &[
            "agent",
            "recipe",
            "builder",
            "--workdir",
            &workdir,
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let head = human(daemon, "events_read", json!({})).await["cursor"].clone();
    let asked = post(daemon, "@builder", "take your time").await;
    let started = delivery_event(daemon, head.clone(), |d| {
        d["messageId"] == json!(asked) && d["state"] == "started"
    })
    .await;
    // Read and written at once, the FIFO never reads as ended before the run writes its line.
    let pipe = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&ready)
        .unwrap();
    let mut reader = tokio::io::BufReader::new(pipe);
    let mut line = String::new();
    let said = tokio::io::AsyncBufReadExt::read_line(&mut reader, &mut line);
    tokio::time::timeout(Duration::from_secs(30), said)
        .await
        .unwrap_or_else(|_| panic!("the run never said it is ready: {}", daemon.log()))
        .unwrap();
    (work, head, asked, started)
}

#[tokio::test]
async fn a_credential_rotation_mid_turn_changes_nothing_for_the_delivered_run() {
    let root = tempfile::tempdir().unwrap();
    let run_dir = root.path().join("run");
    let daemon = TestDaemon::start_in(
        root.path(),
        &[
            "--runtime-dir",
            run_dir.to_str().unwrap(),
            "--token-ttl-secs",
            "2",
            "--rotation-tick-ms",
            "100",
        ],
    )
    .await;
    // The stand-in is ready once its credential was rotated (it waits for its token file to
    // change), and answers with the token the file holds then.
    let (work, head, asked, started) = a_held_run(
        &daemon,
        "while cmp -s \"$AGENTTEAM_MCP_TOKEN_FILE\" \"$PWD/token-at-start\"; do sleep 0.05; done\n\
         cp \"$AGENTTEAM_MCP_TOKEN_FILE\" \"$PWD/token-rotated\"",
        "answered after a rotation",
    )
    .await;

    // The run's credential was rotated while its turn goes on.
    let read = |name: &str| std::fs::read_to_string(work.path().join(name)).unwrap();
    let (at_start, rotated) = (read("token-at-start"), read("token-rotated"));
    assert!(!at_start.trim().is_empty() && !rotated.trim().is_empty());
    assert_ne!(at_start, rotated);
    let now: Vec<String> = crate::runtime_harness::files_named(&run_dir, "mcp-token")
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect();
    assert_eq!(now.len(), 1, "one run's token: {now:?}");
    assert!(!rotated.is_empty());
    let runs = daemon.admin_get("runs").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(
        runs["runs"][0]["processGeneration"], 1,
        "not restarted: {runs}"
    );

    // Released, the same run answers with its current credential: one start, one answer.
    std::fs::write(work.path().join("go"), "go\n").unwrap();
    let answered = delivery_event(&daemon, head, |d| {
        d["messageId"] == json!(asked) && d["state"] == "answered"
    })
    .await;
    assert_eq!(answered["runId"], started["runId"]);
    let runs_log = std::fs::read_to_string(work.path().join("runs.log")).unwrap();
    assert_eq!(runs_log.lines().count(), 1, "{runs_log}");
    assert_eq!(answer_statuses(work.path()).await, ["200"]);
}

#[tokio::test]
async fn the_persons_replace_of_a_delivered_run_revokes_it_before_the_new_process_starts() {
    let daemon = TestDaemon::start(&[]).await;
    let (work, head, asked, started) = a_held_run(&daemon, "", "never sent").await;
    let session = started["runId"].as_str().unwrap().to_string();
    let old_token = std::fs::read_to_string(work.path().join("token-at-start"))
        .unwrap()
        .trim()
        .to_string();
    assert!(!old_token.is_empty());

    // The person starts the agent anew in the delivered conversation's session, replacing it.
    let mut new = daemon.launch(
        "builder",
        &["--session", &session, "--replace"],
        r#"echo "$AGENTTEAM_MCP_URL"; exec sleep 600"#,
    );
    let mcp_url = new.line().await;
    // By the time the new process runs, the old one's credential is refused.
    let status = daemon
        .client
        .post(&mcp_url)
        .bearer_auth(&old_token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401, "the replaced run's credential still works");
    // The delivery says its run was stopped, and may be asked again.
    let failed = delivery_event(&daemon, head, |d| {
        d["messageId"] == json!(asked) && d["state"] == "failed"
    })
    .await;
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("exited with status"),
        "{failed}"
    );
    let runs = daemon.admin_get("runs").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["runs"][0]["processGeneration"], 2, "{runs}");
    let _ = new.child.start_kill();
}
