//! Deliveries through a broken network and a server restart: a daemon (`--server-url`) behind a
//! fault-injecting proxy in front of a real `agentteam server` on SQLite or PostgreSQL. The feed's
//! long polls are cut mid-answer, the deliverer's records (start, finish, the pass's lists, the
//! message it reads) are lost before or after the server applied them, and the server is killed
//! with SIGKILL and started again on the same database in the middle of a load of deliveries.
//! Every delivery is started once, none twice, and each reaches its answer.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::deliveries::{human, human_answer};
use crate::fault_proxy::{Fault, FaultProxy};
use crate::support::{TestDaemon, database_url, spawn_server_at, spawn_server_on, wait_for};

/// Agents, each with a direct conversation of its own, and the messages each is sent.
const AGENTS: usize = 3;
const MESSAGES_EACH: usize = 8;

/// A runtime that appends the message it was handed to `runs.log` in its working directory, then
/// answers it on its target with `message_send` (with a `requestId` of the message's, as a careful
/// runtime does), and appends the answer's HTTP status and body to `answered.txt`.
const STAND_IN: &str = r#"input=$(cat)
message=$(printf '%s\n' "$input" | sed -n 's/^Message: //p')
target=$(printf '%s\n' "$input" | sed -n 's/^Target: //p')
echo "$message" >> "$PWD/runs.log"
curl -s -w ' %{http_code}\n' \
  -H "Authorization: Bearer $(cat "$AGENTTEAM_MCP_TOKEN_FILE")" \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H 'MCP-Protocol-Version: 2025-11-25' \
  -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"message_send\",\"arguments\":{\"target\":\"$target\",\"content\":\"answer to $message\",\"requestId\":\"reply-$message\"}}}" \
  "$AGENTTEAM_MCP_URL" >> "$PWD/answered.txt"
"#;

/// Every delivery of the daemon's person, by id.
async fn deliveries(daemon: &TestDaemon) -> BTreeMap<String, Value> {
    human(daemon, "delivery_list", json!({"limit": 100})).await["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["id"].as_str().unwrap().to_string(), d.clone()))
        .collect()
}

/// One human API action through the daemon, whose way to the server may be broken: its data,
/// or `None` when the daemon could not get the server's answer.
async fn through_faults(daemon: &TestDaemon, action: &str, input: Value) -> Option<Value> {
    let answer = human_answer(daemon, action, input).await;
    (answer["ok"] == true).then(|| answer["data"].clone())
}

/// Waits (two minutes at most) until `count` deliveries are answered, reading through the faults.
async fn until_answered(daemon: &TestDaemon, count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut cursor = None;
    loop {
        let list = through_faults(daemon, "delivery_list", json!({"limit": 100})).await;
        let done = list.as_ref().map(|page| {
            page["deliveries"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["state"] == "answered")
                .count()
        });
        if done.is_some_and(|done| done >= count) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{count} deliveries were not answered in time: {list:#?}\nthe daemon's log:\n{}",
            daemon.log()
        );
        // Until the next change in the person's feed (or a few seconds); a read the faults cut
        // is read again after a pause.
        let read = match cursor {
            None => through_faults(daemon, "events_read", json!({})).await,
            Some(after) => {
                through_faults(
                    daemon,
                    "events_read",
                    json!({"after": after, "waitMs": 3000}),
                )
                .await
            }
        };
        match read {
            Some(page) => cursor = page["cursor"].as_i64().or(cursor),
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn deliveries_outlive_a_cut_feed_lost_records_and_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let database = database_url(dir.path()).await;
    let token_file = dir.path().join("operator.token");
    let server_log = dir.path().join("server.log");
    let (mut server, url, _) = spawn_server_on(&database, &token_file, Some(&server_log)).await;
    let proxy = FaultProxy::start(&url).await;
    let mut daemon = TestDaemon::start(&[
        "--server-url",
        &proxy.url,
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ])
    .await;

    let mut conversations = Vec::new();
    let mut workdirs = Vec::new();
    for n in 0..AGENTS {
        let handle = format!("agent{n}");
        daemon.add_agent(&handle).await;
        let work = dir.path().join(format!("work{n}"));
        std::fs::create_dir_all(&work).unwrap();
        let set = daemon
            .cli(&["agent", "recipe", &handle, "--workdir"])
            .arg(&work)
            .args(["--", "sh", "-c", STAND_IN])
            .output()
            .await
            .unwrap();
        assert!(
            set.status.success(),
            "{}",
            String::from_utf8_lossy(&set.stderr)
        );
        let dm = human(&daemon, "dm_open", json!({"handle": handle})).await["target"]
            .as_str()
            .unwrap()
            .to_string();
        conversations.push(dm);
        workdirs.push(work);
    }

    // From now on the network between the daemon and the server breaks: the feed's long polls
    // are cut in the middle of their answer or lost; the deliverer's writes are lost before the
    // server saw them or after it applied them; its reads are cut.
    proxy.set_mix(
        "/actions/events_read",
        vec![(0.2, Fault::Truncate), (0.2, Fault::DropAnswer)],
    );
    for write in ["/actions/delivery_start", "/actions/delivery_finish"] {
        proxy.set_mix(write, vec![(0.2, Fault::DropAnswer), (0.2, Fault::Drop)]);
    }
    for read in ["/actions/delivery_list", "/actions/history_read"] {
        proxy.set_mix(read, vec![(0.2, Fault::Truncate)]);
    }

    // The person writes to each agent, and the deliveries run while the network breaks.
    let mut sent = Vec::new();
    for n in 0..MESSAGES_EACH {
        for dm in &conversations {
            let output = daemon
                .cli(&["post", dm, &format!("message {n}"), "--json"])
                .output()
                .await
                .unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let posted: Value = serde_json::from_slice(&output.stdout).unwrap();
            sent.push(posted["message"]["id"].as_str().unwrap().to_string());
        }
    }
    let total = AGENTS * MESSAGES_EACH;

    // Half of them through, the server is killed and started again on its database, at its
    // address, while the rest are pending, starting or running.
    until_answered(&daemon, total / 2).await;
    server.start_kill().unwrap();
    server.wait().await.unwrap();
    let listen = url.trim_start_matches("http://");
    let (_server, _, _) = spawn_server_at(listen, &database, &token_file, None, &[]).await;

    until_answered(&daemon, total).await;
    // What the test reads from now on, whole.
    let injected = proxy.injected();
    proxy.clear();

    // Each message was started once, by one run, and none twice.
    let mut runs: Vec<String> = workdirs
        .iter()
        .flat_map(|work| lines(&work.join("runs.log")))
        .collect();
    runs.sort();
    let mut expected = sent.clone();
    expected.sort();
    assert_eq!(runs, expected, "one run per message, none twice");
    // Each delivery answered by its one reply, in its conversation.
    let all = deliveries(&daemon).await;
    assert_eq!(all.len(), total, "{all:#?}");
    for dm in &conversations {
        let history = human(&daemon, "history_read", json!({"target": dm, "limit": 50})).await;
        let messages = history["messages"].as_array().unwrap();
        for delivery in all.values().filter(|d| d["target"] == json!(dm)) {
            let message = delivery["messageId"].as_str().unwrap();
            let replies: Vec<&Value> = messages
                .iter()
                .filter(|m| m["content"] == json!(format!("answer to {message}")))
                .collect();
            assert_eq!(replies.len(), 1, "one reply to {message}: {history}");
            assert_eq!(delivery["replyId"], replies[0]["id"], "{delivery}");
        }
    }
    // The faults happened: the feed was cut, and records were lost both ways.
    for fault in [
        "truncated answer",
        "reset after the answer",
        "reset before forwarding",
    ] {
        assert!(
            injected.get(fault).copied().unwrap_or(0) > 0,
            "{fault}: {injected:?}"
        );
    }
    wait_for("nothing runs", Duration::from_secs(30), || {
        workdirs
            .iter()
            .map(|work| lines(&work.join("answered.txt")).len())
            .sum::<usize>()
            == total
    })
    .await;
    // Stopped here, while the proxy (on this test's runtime) still forwards: the daemon's stop
    // waits for what it has in flight to the server.
    daemon.stop().await;
}
