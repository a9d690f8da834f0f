//! The terminal reader against a real daemon and its embedded server: a person lists, reads,
//! answers and decides what their agents did with `agentteam read`, `post`, `approvals` and
//! `decide`; what an agent wrote reaches the terminal escaped; inside a runtime each is refused.

use serde_json::{Value, json};

use super::person::{run_script, section};
use super::support::*;

const REFUSED: &str = "a runtime may not act as its person or as the operator";

/// The daemon's identity: workspace, human, general channel, device credential.
pub(crate) fn identity(daemon: &TestDaemon) -> Value {
    serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap()).unwrap()
}

/// The agent `agent` calls `route` (`tools/message_send`, `actions/approval/request`) on the
/// server as a runtime does, with the daemon's device credential; the answer's `data`.
pub(crate) async fn as_agent(daemon: &TestDaemon, agent: &str, route: &str, input: Value) -> Value {
    let id = identity(daemon);
    let url = format!(
        "{}/runtime/servers/{}/agents/{agent}/{route}",
        daemon.server_url,
        id["workspaceId"].as_str().unwrap()
    );
    let response = daemon
        .client
        .post(url)
        .bearer_auth(id["deviceCredential"].as_str().unwrap())
        .json(&input)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.unwrap()["data"].clone()
}

/// `agentteam ARGS` against the daemon: exit code, stdout, stderr.
async fn cli(daemon: &TestDaemon, args: &[&str]) -> (i32, String, String) {
    let output = daemon.cli(args).output().await.unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test]
async fn the_person_reads_answers_and_decides_in_the_terminal() {
    let daemon = TestDaemon::start(&[]).await;
    let builder = daemon.add_agent("builder").await;
    let general = format!(
        "channel:{}",
        identity(&daemon)["channelId"].as_str().unwrap()
    );
    as_agent(
        &daemon,
        &builder,
        "tools/message_send",
        json!({"target": general, "content": "ready to ship?"}),
    )
    .await;

    let (code, out, err) = cli(&daemon, &["read", "--list"]).await;
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("#general"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("1 unread"), "{out}");

    let (code, out, err) = cli(&daemon, &["read", "#general"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("builder: ready to ship?"), "{out}");
    let (_, out, _) = cli(&daemon, &["read", "--list"]).await;
    let row = out
        .lines()
        .find(|l| l.starts_with("#general"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(!row.contains("unread"), "reading marks it read: {out}");

    // An answer as the person lands where the agent reads.
    let (code, out, err) = cli(&daemon, &["post", "#general", "yes, ship it"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("posted msg_"), "{out}");
    let seen = as_agent(
        &daemon,
        &builder,
        "tools/message_history_read",
        json!({"target": general}),
    )
    .await;
    assert_eq!(seen["messages"][0]["content"], json!("yes, ship it"));
    assert_eq!(
        seen["messages"][0]["authorId"],
        identity(&daemon)["humanId"]
    );

    // A direct conversation by handle, opened on first use.
    let (code, _, err) = cli(&daemon, &["post", "@builder", "a word in private"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&daemon, &["read", "@builder", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(page["messages"][0]["content"], json!("a word in private"));
    assert!(
        page["target"].as_str().unwrap().starts_with("dm:dm_"),
        "{page}"
    );

    // What an agent writes cannot drive the terminal.
    as_agent(
        &daemon,
        &builder,
        "tools/message_send",
        json!({"target": general, "content": "\u{1b}[2Jwiped \u{202e}gnp.exe"}),
    )
    .await;
    let (_, out, _) = cli(&daemon, &["read", "#general", "--limit", "1"]).await;
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "{out:?}"
    );
    assert!(out.contains("\\u{1b}[2Jwiped"), "{out}");

    // Approvals: the agent asks, the person decides, the agent reads the decision.
    let asked = as_agent(
        &daemon,
        &builder,
        "actions/approval/request",
        json!({"title": "Deploy to production"}),
    )
    .await;
    let approval = asked["approval"]["id"].as_str().unwrap();
    let (code, out, err) = cli(&daemon, &["approvals"]).await;
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with(approval))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.contains("pending") && row.contains("builder") && row.contains("Deploy to production"),
        "{row}"
    );
    let (code, out, err) = cli(&daemon, &["decide", approval, "approve", "--comment", "go"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("{approval} approved\n"));
    let got = as_agent(
        &daemon,
        &builder,
        "actions/approval/get",
        json!({"approvalId": approval}),
    )
    .await;
    assert_eq!(got["approval"]["status"], json!("approved"));
    assert_eq!(got["approval"]["comment"], json!("go"));
    let (code, _, err) = cli(&daemon, &["decide", approval, "reject"]).await;
    assert_eq!(
        code, 2,
        "decided once, refused as every admin refusal is: {err}"
    );
    assert!(err.contains("already decided"), "{err}");
    let (_, out, _) = cli(&daemon, &["approvals"]).await;
    assert_eq!(out, "no pending approvals\n");

    // Names that name nothing say so.
    let (code, _, err) = cli(&daemon, &["read", "#nope"]).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("you belong to no channel named #nope"),
        "{err}"
    );
    let (code, _, err) = cli(&daemon, &["read", "#general/no-such-thread"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("has no thread titled"), "{err}");
}

#[tokio::test]
async fn a_runtime_cannot_read_post_or_decide_as_its_person() {
    let daemon = TestDaemon::start(&[]).await;
    let builder = daemon.add_agent("builder").await;
    let asked = as_agent(
        &daemon,
        &builder,
        "actions/approval/request",
        json!({"title": "Deploy"}),
    )
    .await;
    let approval = asked["approval"]["id"].as_str().unwrap();
    let state = daemon.state_dir.display().to_string();
    let script = format!(
        r#"for command in "read #general" "read --list" "post #general hello" "approvals" "decide {approval} approve"; do
echo "BEGIN $command"
agentteam $command --state-dir '{state}'
echo "exit=$?"
echo "END $command"
done
"#
    );
    let output = run_script(&daemon, "builder", &script, &[]).await;
    for command in [
        "read #general",
        "read --list",
        "post #general hello",
        "approvals",
        &format!("decide {approval} approve"),
    ] {
        let part = section(&output, command);
        assert!(part.contains(REFUSED), "{command}: {part}");
        assert!(!part.contains("exit=0"), "{command}: {part}");
    }
    let got = as_agent(
        &daemon,
        &builder,
        "actions/approval/get",
        json!({"approvalId": approval}),
    )
    .await;
    assert_eq!(got["approval"]["status"], json!("pending"));
    let history = as_agent(
        &daemon,
        &builder,
        "tools/message_history_read",
        json!({"target": format!("channel:{}", identity(&daemon)["channelId"].as_str().unwrap())}),
    )
    .await;
    assert_eq!(history["messages"], json!([]), "nothing was posted");
}

/// `agentteam read --follow` prints each new message of the conversation once, in order, and
/// goes on from its cursor across a restart of the daemon (and its embedded server).
#[tokio::test]
async fn the_reader_follows_a_conversation_live_across_a_daemon_restart() {
    let root = tempfile::tempdir().unwrap();
    let mut daemon = TestDaemon::start_in(root.path(), &[]).await;
    let builder = daemon.add_agent("builder").await;
    let general = format!(
        "channel:{}",
        identity(&daemon)["channelId"].as_str().unwrap()
    );
    post(&daemon, &builder, &general, "one").await;
    let mut follower = Launched::spawn(daemon.cli(&["read", "#general", "--follow", "--json"]));
    let page: Value = serde_json::from_str(&follower.line().await).unwrap();
    assert_eq!(page["messages"][0]["content"], json!("one"), "{page}");

    post(&daemon, &builder, &general, "two").await;
    let event: Value = serde_json::from_str(&follower.line().await).unwrap();
    assert_eq!(
        (event["kind"].as_str(), event["message"]["content"].as_str()),
        (Some("message"), Some("two")),
        "{event}"
    );
    // A message elsewhere is not this conversation's.
    let (code, _, err) = cli(&daemon, &["post", "@builder", "elsewhere"]).await;
    assert_eq!(code, 0, "{err}");
    post(&daemon, &builder, &general, "three").await;
    let event: Value = serde_json::from_str(&follower.line().await).unwrap();
    assert_eq!(event["message"]["content"], json!("three"), "{event}");

    assert_eq!(daemon.stop().await, 0);
    let daemon = TestDaemon::start_in(root.path(), &[]).await;
    post(&daemon, &builder, &general, "four").await;
    post(&daemon, &builder, &general, "five").await;
    for expected in ["four", "five"] {
        let event: Value = serde_json::from_str(&follower.line().await).unwrap();
        assert_eq!(
            event["message"]["content"],
            json!(expected),
            "nothing missed, nothing repeated: {event}"
        );
    }
    follower.child.kill().await.unwrap();

    // The daemon's feed answers a cursor from before it started from the server itself.
    let token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    let old: Value = daemon
        .client
        .post(format!("{}/api/admin/feed", daemon.base_url))
        .bearer_auth(token.trim())
        .json(&json!({"after": 0}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let contents: Vec<&str> = old["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"]["content"].as_str())
        .collect();
    assert_eq!(
        contents,
        ["one", "two", "elsewhere", "three", "four", "five"],
        "{old}"
    );
}

async fn post(daemon: &TestDaemon, agent: &str, target: &str, content: &str) -> Value {
    as_agent(
        daemon,
        agent,
        "tools/message_send",
        json!({"target": target, "content": content}),
    )
    .await
}
