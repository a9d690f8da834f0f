//! Deliveries on the server, over real HTTP: which person's message wakes which agent (decided in
//! the message's transaction), who sees them, the hosting fence, a start at most once (eight
//! racing), the bound of what waits under racing messages and racing retries, an answer recorded
//! from the agent's own post, a thread's continuation until `/end`,
//! and expiry. Each test runs on SQLite and, in the PostgreSQL pass, on PostgreSQL.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestServer, Workspace};

/// `POST` the human action `action` with `credential`; status and body.
async fn human(
    server: &TestServer,
    w: &Workspace,
    credential: &str,
    action: &str,
    input: Value,
) -> (u16, Value) {
    let path = format!("/human/servers/{}/actions/{action}", w.workspace_id);
    server.post(&path, Some(credential), &input).await
}

/// Ada's request that must succeed; its `data`.
async fn ada(server: &TestServer, w: &Workspace, action: &str, input: Value) -> Value {
    let (status, body) = human(server, w, &w.device_credential, action, input).await;
    assert_eq!(status, 200, "{action} failed: {body}");
    body["data"].clone()
}

/// Ada posts `content` to `target`; the message id.
async fn ada_posts(server: &TestServer, w: &Workspace, target: &str, content: &str) -> String {
    let posted = ada(
        server,
        w,
        "message_post",
        json!({"target": target, "content": content}),
    )
    .await;
    posted["message"]["id"].as_str().unwrap().to_string()
}

/// The agent posts `content` to `target` through its MCP tool route; the message id.
async fn agent_posts(
    server: &TestServer,
    w: &Workspace,
    agent_id: &str,
    target: &str,
    content: &str,
) -> String {
    let path = format!(
        "/runtime/servers/{}/agents/{agent_id}/tools/message_send",
        w.workspace_id
    );
    let (status, body) = server
        .post(
            &path,
            Some(&w.device_credential),
            &json!({"target": target, "content": content}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["message"]["id"].as_str().unwrap().to_string()
}

/// Ada's deliveries, newest first, as `(agent, target, message, state)`.
async fn deliveries(server: &TestServer, w: &Workspace) -> Vec<Value> {
    ada(server, w, "delivery_list", json!({"limit": 100})).await["deliveries"]
        .as_array()
        .unwrap()
        .clone()
}

/// The delivery of `message` to `agent`, as Ada's list shows it.
async fn delivery_of(server: &TestServer, w: &Workspace, message: &str, agent: &str) -> Value {
    deliveries(server, w)
        .await
        .into_iter()
        .find(|d| d["messageId"] == json!(message) && d["agentId"] == json!(agent))
        .unwrap_or_else(|| panic!("no delivery of {message} to {agent}"))
}

/// A second person in `w`'s `general` channel, with a device.
async fn bob(server: &TestServer, w: &Workspace) -> (String, String) {
    let base = format!("/admin/workspaces/{}", w.workspace_id);
    let human = server
        .admin(
            &format!("{base}/humans"),
            json!({"handle": "bob", "displayName": "Bob"}),
        )
        .await["humanId"]
        .as_str()
        .unwrap()
        .to_string();
    server
        .admin(
            &format!("{base}/channels/{}/members", w.channel_id),
            json!({"memberId": human}),
        )
        .await;
    let device = server
        .admin(&format!("{base}/devices"), json!({"humanId": human}))
        .await["credential"]
        .as_str()
        .unwrap()
        .to_string();
    (human, device)
}

#[tokio::test]
async fn server_deliveries_a_persons_message_wakes_the_agents_it_addresses() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let general = format!("channel:{}", w.channel_id);
    let thread = format!("thread:{}", w.thread_id);
    let head = ada(&server, &w, "events_read", json!({})).await["cursor"].clone();

    ada_posts(&server, &w, &general, "good morning, everyone").await;
    assert!(deliveries(&server, &w).await.is_empty(), "no one addressed");
    let mention = ada_posts(&server, &w, &general, "@builder can you look?").await;
    let both = ada_posts(&server, &w, &thread, "@reviewer and @builder: thoughts?").await;
    // An agent's message wakes no agent.
    agent_posts(&server, &w, &w.agent_id, &general, "@reviewer your turn").await;
    // A direct conversation wakes the agent without a mention.
    let dm = ada(&server, &w, "dm_open", json!({"handle": "builder"})).await["target"]
        .as_str()
        .unwrap()
        .to_string();
    let direct = ada_posts(&server, &w, &dm, "a word in private").await;
    // Another person of the workspace wakes none of Ada's agents.
    let (_, bob_device) = bob(&server, &w).await;
    let (status, body) = human(
        &server,
        &w,
        &bob_device,
        "message_post",
        json!({"target": general, "content": "@builder, from bob"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let listed = deliveries(&server, &w).await;
    let shown: Vec<(&str, &str, &str, &str)> = listed
        .iter()
        .map(|d| {
            (
                d["messageId"].as_str().unwrap(),
                d["agentId"].as_str().unwrap(),
                d["target"].as_str().unwrap(),
                d["state"].as_str().unwrap(),
            )
        })
        .collect();
    let mut expected = vec![
        (direct.as_str(), w.agent_id.as_str(), dm.as_str(), "pending"),
        (
            both.as_str(),
            w.agent_id.as_str(),
            thread.as_str(),
            "pending",
        ),
        (
            both.as_str(),
            w.other_agent_id.as_str(),
            thread.as_str(),
            "pending",
        ),
        (
            mention.as_str(),
            w.agent_id.as_str(),
            general.as_str(),
            "pending",
        ),
    ];
    let mut got = shown.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "{listed:?}");
    assert_eq!(shown[0].0, direct, "newest first");

    // Bob sees none of them, in his list or his feed.
    let (status, body) = human(&server, &w, &bob_device, "delivery_list", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["deliveries"], json!([]));
    let (_, body) = human(
        &server,
        &w,
        &bob_device,
        "events_read",
        json!({"after": head}),
    )
    .await;
    assert!(
        body["data"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["kind"] != json!("delivery")),
        "{body}"
    );
    // Ada's feed carries each, with the delivery as it is.
    let feed = ada(&server, &w, "events_read", json!({"after": head})).await;
    let delivered: Vec<&Value> = feed["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == json!("delivery"))
        .collect();
    assert_eq!(delivered.len(), 4, "{feed}");
    assert!(
        delivered
            .iter()
            .all(|e| e["delivery"]["state"] == "pending")
    );
    assert!(delivered.iter().all(|e| e.get("target").is_none()));

    // Started, the channel's and the direct conversation's are each answered by the agent's
    // post there, and only there.
    let fence =
        ada(&server, &w, "agent_host", json!({"agentId": w.agent_id})).await["fence"].clone();
    for (message, run) in [(&mention, "run_channel"), (&direct, "run_dm")] {
        let id = delivery_of(&server, &w, message, &w.agent_id).await["id"].clone();
        ada(
            &server,
            &w,
            "delivery_start",
            json!({"deliveryId": id, "fence": fence, "runId": run}),
        )
        .await;
    }
    let in_dm = agent_posts(&server, &w, &w.agent_id, &dm, "in private: yes").await;
    assert_eq!(
        delivery_of(&server, &w, &direct, &w.agent_id).await["replyId"],
        json!(in_dm)
    );
    assert_eq!(
        delivery_of(&server, &w, &mention, &w.agent_id).await["state"],
        "started"
    );
    let in_general = agent_posts(&server, &w, &w.agent_id, &general, "looking").await;
    let answered = delivery_of(&server, &w, &mention, &w.agent_id).await;
    assert_eq!(
        (answered["state"].as_str(), answered["replyId"].as_str()),
        (Some("answered"), Some(in_general.as_str()))
    );
    assert_eq!(
        delivery_of(&server, &w, &both, &w.agent_id).await["state"],
        "pending",
        "not started, not answered"
    );
}

#[tokio::test]
async fn server_deliveries_start_at_most_once_under_the_host_fence() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let thread = format!("thread:{}", w.thread_id);
    let asked = ada_posts(&server, &w, &thread, "@builder ship it?").await;
    let delivery = delivery_of(&server, &w, &asked, &w.agent_id).await;
    let id = delivery["id"].as_str().unwrap().to_string();

    // Hosting: each claim a new fence; another person cannot host Ada's agent.
    let first = ada(&server, &w, "agent_host", json!({"agentId": w.agent_id})).await;
    assert_eq!(first["fence"], 1);
    let second = ada(&server, &w, "agent_host", json!({"agentId": w.agent_id})).await;
    assert_eq!(second["fence"], 2);
    let (_, bob_device) = bob(&server, &w).await;
    let (status, body) = human(
        &server,
        &w,
        &bob_device,
        "agent_host",
        json!({"agentId": w.agent_id}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );

    // A stale fence starts nothing; Bob cannot even see the delivery.
    let start = |fence: u64, request: &str| json!({"deliveryId": id, "fence": fence, "runId": "run_console_1", "requestId": request});
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "delivery_start",
        start(1, "req-start-stale"),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("invalid_state")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not host"),
        "{body}"
    );
    let (status, _) = human(
        &server,
        &w,
        &bob_device,
        "delivery_start",
        start(2, "req-start-bob-1"),
    )
    .await;
    assert_eq!(status, 404);

    // Eight racing starts with the current fence: exactly one starts it.
    let racing = (0..8).map(|i| {
        let input = start(2, &format!("req-start-race-{i}"));
        let (server, w) = (&server, &w);
        async move { human(server, w, &w.device_credential, "delivery_start", input).await }
    });
    let answers = futures_util::future::join_all(racing).await;
    let started: Vec<&(u16, Value)> = answers.iter().filter(|(s, _)| *s == 200).collect();
    assert_eq!(started.len(), 1, "{answers:?}");
    assert!(
        answers
            .iter()
            .filter(|(s, _)| *s != 200)
            .all(|(s, b)| *s == 409 && b["error"]["code"] == "invalid_state"),
        "{answers:?}"
    );
    let started = &started[0].1["data"]["delivery"];
    assert_eq!(started["state"], "started");
    assert_eq!(started["runId"], "run_console_1");
    // The winner's request again is the same answer (its requestId), not a second start.
    let winner = answers.iter().position(|(s, _)| *s == 200).unwrap();
    let replay = human(
        &server,
        &w,
        &w.device_credential,
        "delivery_start",
        start(2, &format!("req-start-race-{winner}")),
    )
    .await;
    assert_eq!(replay.0, 200);
    assert_eq!(replay.1["data"]["delivery"], *started);

    // The agent's reply in the target answers it; a later finish leaves it answered.
    agent_posts(&server, &w, &w.other_agent_id, &thread, "not me").await;
    assert_eq!(
        delivery_of(&server, &w, &asked, &w.agent_id).await["state"],
        "started"
    );
    let reply = agent_posts(&server, &w, &w.agent_id, &thread, "shipped").await;
    let answered = delivery_of(&server, &w, &asked, &w.agent_id).await;
    assert_eq!(
        (answered["state"].as_str(), answered["replyId"].as_str()),
        (Some("answered"), Some(reply.as_str()))
    );
    let finished = ada(
        &server,
        &w,
        "delivery_finish",
        json!({"deliveryId": id, "fence": 2, "state": "ended", "reason": "exit 0"}),
    )
    .await;
    assert_eq!(finished["delivery"]["state"], "answered");

    // Interrupted, then asked again: pending, and started again once.
    let again = ada_posts(&server, &w, &thread, "one more thing").await;
    let second = delivery_of(&server, &w, &again, &w.agent_id).await;
    let second_id = second["id"].as_str().unwrap();
    assert_eq!(
        second["state"], "pending",
        "the thread continues with builder"
    );
    let input = |state: &str| json!({"deliveryId": second_id, "fence": 2, "runId": "run_console_2", "state": state});
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "delivery_finish",
        json!({"deliveryId": second_id, "fence": 2, "state": "failed"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("invalid_state")),
        "a pending one is not finished: {body}"
    );
    let mut start_second = input("started");
    start_second.as_object_mut().unwrap().remove("state");
    ada(&server, &w, "delivery_start", start_second.clone()).await;
    let interrupted = ada(
        &server,
        &w,
        "delivery_finish",
        json!({"deliveryId": second_id, "fence": 2, "state": "interrupted", "reason": "the daemon stopped"}),
    )
    .await;
    assert_eq!(
        (
            interrupted["delivery"]["state"].as_str(),
            interrupted["delivery"]["reason"].as_str()
        ),
        (Some("interrupted"), Some("the daemon stopped"))
    );
    let retried = ada(
        &server,
        &w,
        "delivery_retry",
        json!({"deliveryId": second_id}),
    )
    .await;
    assert_eq!(retried["delivery"]["state"], "pending");
    assert!(retried["delivery"].get("runId").is_none());
    start_second["requestId"] = json!("req-start-second-again");
    let restarted = ada(&server, &w, "delivery_start", start_second).await;
    assert_eq!(restarted["delivery"]["state"], "started");
    let (status, _) = human(
        &server,
        &w,
        &w.device_credential,
        "delivery_retry",
        json!({"deliveryId": second_id}),
    )
    .await;
    assert_eq!(status, 409, "a started delivery is not asked again");
}

#[tokio::test]
async fn server_deliveries_a_thread_continues_with_its_agents_until_end() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let thread = format!("thread:{}", w.thread_id);
    let count =
        |all: &Vec<Value>, agent: &str| all.iter().filter(|d| d["agentId"] == json!(agent)).count();

    ada_posts(&server, &w, &thread, "just thinking aloud").await;
    assert!(
        deliveries(&server, &w).await.is_empty(),
        "nobody answered here yet"
    );
    ada_posts(&server, &w, &thread, "@builder what do you think?").await;
    agent_posts(&server, &w, &w.agent_id, &thread, "looks fine").await;
    ada_posts(&server, &w, &thread, "and the tests?").await;
    let all = deliveries(&server, &w).await;
    assert_eq!(
        (count(&all, &w.agent_id), count(&all, &w.other_agent_id)),
        (2, 0),
        "builder answered, so it continues"
    );
    // `/end` alone wakes nobody, and ends the continuation.
    ada_posts(&server, &w, &thread, "/end").await;
    ada_posts(&server, &w, &thread, "thanks").await;
    let all = deliveries(&server, &w).await;
    assert_eq!(count(&all, &w.agent_id), 2);
    // A mention starts it again, as an answer after it does.
    ada_posts(&server, &w, &thread, "@builder one last thing").await;
    agent_posts(&server, &w, &w.agent_id, &thread, "noted").await;
    let all = deliveries(&server, &w).await;
    assert_eq!(count(&all, &w.agent_id), 3);
    // A message that names another agent is for that agent alone, even where builder answered.
    ada_posts(&server, &w, &thread, "@reviewer your turn").await;
    let all = deliveries(&server, &w).await;
    assert_eq!(
        (count(&all, &w.agent_id), count(&all, &w.other_agent_id)),
        (3, 1)
    );
    // And a message naming nobody goes on with builder.
    ada_posts(&server, &w, &thread, "anything else?").await;
    assert_eq!(count(&deliveries(&server, &w).await, &w.agent_id), 4);
}

#[tokio::test]
async fn server_deliveries_a_delivery_no_daemon_starts_expires() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let general = format!("channel:{}", w.channel_id);
    let asked = ada_posts(&server, &w, &general, "@builder are you there?").await;
    let pending = delivery_of(&server, &w, &asked, &w.agent_id).await;
    let expires =
        chrono::DateTime::parse_from_rfc3339(pending["expiresAt"].as_str().unwrap()).unwrap();
    let created =
        chrono::DateTime::parse_from_rfc3339(pending["createdAt"].as_str().unwrap()).unwrap();
    assert_eq!((expires - created).num_minutes(), 15, "the default expiry");

    // One second before its expiry it still waits; at it, the scheduler's pass expires it.
    server
        .state
        .clock()
        .advance(Duration::from_secs(15 * 60 - 1));
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .deliveries_expired,
        0
    );
    let fence =
        ada(&server, &w, "agent_host", json!({"agentId": w.agent_id})).await["fence"].clone();
    server.state.clock().advance(Duration::from_secs(1));
    let id = pending["id"].as_str().unwrap();
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "delivery_start",
        json!({"deliveryId": id, "fence": fence, "runId": "run_late"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("invalid_state")),
        "{body}"
    );
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .deliveries_expired,
        1
    );
    let expired = delivery_of(&server, &w, &asked, &w.agent_id).await;
    assert_eq!(
        (expired["state"].as_str(), expired["reason"].as_str()),
        (Some("expired"), Some("no daemon started it in time"))
    );
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .deliveries_expired,
        0
    );
    // The person may ask for it again.
    let retried = ada(&server, &w, "delivery_retry", json!({"deliveryId": id})).await;
    assert_eq!(retried["delivery"]["state"], "pending");
}

#[tokio::test]
async fn server_deliveries_past_their_bounds_are_refused_saying_why() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let general = format!("channel:{}", w.channel_id);
    let thread = format!("thread:{}", w.thread_id);

    // Twenty wait for builder in #general; the next is recorded, refused, and says why.
    for n in 0..20 {
        ada_posts(&server, &w, &general, &format!("@builder {n}")).await;
    }
    let twentieth = deliveries(&server, &w).await;
    assert!(twentieth.iter().all(|d| d["state"] == "pending"));
    let over = ada_posts(&server, &w, &general, "@builder one too many").await;
    let refused = delivery_of(&server, &w, &over, &w.agent_id).await;
    assert_eq!(
        (refused["state"].as_str(), refused["reason"].as_str()),
        (
            Some("failed"),
            Some("not started: 20 messages already wait for @builder in this conversation")
        ),
        "{refused}"
    );
    // Another conversation is a queue of its own.
    let elsewhere = ada_posts(&server, &w, &thread, "@builder here then").await;
    assert_eq!(
        delivery_of(&server, &w, &elsewhere, &w.agent_id).await["state"],
        "pending"
    );

    // Sixty deliveries of one sender in a minute (22 so far), then no more until it passes.
    for n in 0..18 {
        ada_posts(&server, &w, &thread, &format!("@builder @reviewer {n}")).await;
    }
    for nth in ["fifty-ninth", "sixtieth"] {
        let posted = ada_posts(&server, &w, &general, &format!("@reviewer the {nth}")).await;
        assert_eq!(
            delivery_of(&server, &w, &posted, &w.other_agent_id).await["state"],
            "pending",
            "the {nth}"
        );
    }
    let past = ada_posts(&server, &w, &general, "@reviewer past the minute's").await;
    let refused = delivery_of(&server, &w, &past, &w.other_agent_id).await;
    assert_eq!(
        refused["reason"], "not started: your messages woke agents 60 times in the last minute",
        "{refused}"
    );
    server.state.clock().advance(Duration::from_secs(61));
    let later = ada_posts(&server, &w, &general, "@reviewer a minute on").await;
    assert_eq!(
        delivery_of(&server, &w, &later, &w.other_agent_id).await["state"],
        "pending"
    );
    // A refused one can be asked for again, as a failed one can.
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "delivery_retry",
        json!({"deliveryId": refused["id"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["delivery"]["state"], "pending");
    // The bound of what waits holds for a retry: builder's #general queue is full.
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "delivery_retry",
        json!({"deliveryId": delivery_of(&server, &w, &over, &w.agent_id).await["id"]}),
    )
    .await;
    assert_eq!(body["error"]["code"], "invalid_state", "{status} {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("20 messages already wait for the agent in this conversation"),
        "{body}"
    );
}

#[tokio::test]
async fn server_deliveries_the_owner_lets_other_people_wake_an_agent_and_takes_it_back() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let general = format!("channel:{}", w.channel_id);
    let (bob_id, bob_device) = bob(&server, &w).await;
    let bob_posts = |content: &'static str| {
        let (server, w, bob_device, general) = (&server, &w, &bob_device, &general);
        async move {
            let (status, body) = human(
                server,
                w,
                bob_device,
                "message_post",
                json!({"target": general, "content": content}),
            )
            .await;
            assert_eq!(status, 200, "{body}");
            body["data"]["message"]["id"].as_str().unwrap().to_string()
        }
    };
    let bobs = async |input: Value| {
        let (status, body) = human(&server, &w, &bob_device, "delivery_list", input).await;
        assert_eq!(status, 200, "{body}");
        body["data"]["deliveries"].as_array().unwrap().clone()
    };

    // By default only the owner wakes the agent.
    let listed = ada(
        &server,
        &w,
        "agent_wakers_list",
        json!({"agentId": w.agent_id}),
    )
    .await;
    assert_eq!(listed, json!({"agentId": w.agent_id, "wakers": []}));
    bob_posts("@builder, before I may").await;
    assert!(deliveries(&server, &w).await.is_empty());

    // Allowed, Bob's mention wakes it: the owner and Bob each see the delivery, in the list and
    // in the feed; the other agent is not Bob's to wake.
    let allowed = ada(
        &server,
        &w,
        "agent_wakers_set",
        json!({"agentId": w.agent_id, "allow": ["bob", "ada"]}),
    )
    .await;
    let bob_waker = json!([{"humanId": bob_id, "handle": "bob"}]);
    assert_eq!(allowed["wakers"], bob_waker, "the owner always wakes it");
    let listed = ada(
        &server,
        &w,
        "agent_wakers_list",
        json!({"agentId": w.agent_id}),
    )
    .await;
    assert_eq!(listed["wakers"], bob_waker);
    let (_, head) = human(&server, &w, &bob_device, "events_read", json!({})).await;
    let asked = bob_posts("@builder and @reviewer, now I may").await;
    let delivered = delivery_of(&server, &w, &asked, &w.agent_id).await;
    assert_eq!(delivered["state"], "pending");
    assert_eq!(
        deliveries(&server, &w).await.len(),
        1,
        "reviewer: not Bob's"
    );
    let seen = bobs(json!({})).await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["id"], delivered["id"]);
    let (_, feed) = human(
        &server,
        &w,
        &bob_device,
        "events_read",
        json!({"after": head["data"]["cursor"]}),
    )
    .await;
    let events: Vec<&Value> = feed["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == json!("delivery"))
        .collect();
    assert_eq!(events.len(), 1, "{feed}");
    assert_eq!(events[0]["delivery"]["id"], delivered["id"]);
    // Started and failed on the owner's device, Bob may ask for it again.
    let fence =
        ada(&server, &w, "agent_host", json!({"agentId": w.agent_id})).await["fence"].clone();
    let fail = async || {
        ada(
            &server,
            &w,
            "delivery_start",
            json!({"deliveryId": delivered["id"], "fence": fence, "runId": "run_bob"}),
        )
        .await;
        ada(
            &server,
            &w,
            "delivery_finish",
            json!({"deliveryId": delivered["id"], "fence": fence, "state": "failed", "reason": "stopped"}),
        )
        .await;
    };
    fail().await;
    let bob_retries = async || {
        human(
            &server,
            &w,
            &bob_device,
            "delivery_retry",
            json!({"deliveryId": delivered["id"]}),
        )
        .await
    };
    let (status, body) = bob_retries().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["delivery"]["state"], "pending");
    fail().await;

    // Bob may not host the agent, nor see or change who wakes it.
    for (action, input) in [
        ("agent_host", json!({"agentId": w.agent_id})),
        ("agent_wakers_list", json!({"agentId": w.agent_id})),
        (
            "agent_wakers_set",
            json!({"agentId": w.agent_id, "allow": ["bob"]}),
        ),
    ] {
        let (status, body) = human(&server, &w, &bob_device, action, input).await;
        assert_eq!(status, 404, "{action}: {body}");
    }

    // Refused, changing nothing: a handle no person has, one both allowed and disallowed.
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "agent_wakers_set",
        json!({"agentId": w.agent_id, "allow": ["carol"], "disallow": ["bob"]}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`carol`"),
        "{body}"
    );
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "agent_wakers_set",
        json!({"agentId": w.agent_id, "allow": ["bob"], "disallow": ["bob"]}),
    )
    .await;
    assert_eq!(
        body["error"]["code"], "validation_failed",
        "{status} {body}"
    );
    let listed = ada(
        &server,
        &w,
        "agent_wakers_list",
        json!({"agentId": w.agent_id}),
    )
    .await;
    assert_eq!(listed["wakers"], bob_waker);

    // Taken back, Bob's mention wakes nothing again; what it woke before stays his to see.
    let taken = ada(
        &server,
        &w,
        "agent_wakers_set",
        json!({"agentId": w.agent_id, "disallow": ["bob"]}),
    )
    .await;
    assert_eq!(taken["wakers"], json!([]));
    bob_posts("@builder, after").await;
    assert_eq!(deliveries(&server, &w).await.len(), 1);
    assert_eq!(bobs(json!({})).await.len(), 1);
    // Nor may he ask again for what his earlier message woke.
    let (status, body) = bob_retries().await;
    assert_eq!(status, 404, "{body}");

    // At most 32 besides the owner: the 32nd is allowed, the 33rd refused, saying so.
    let base = format!("/admin/workspaces/{}", w.workspace_id);
    let mut handles = Vec::new();
    for i in 0..33 {
        let handle = format!("person-{i}");
        server
            .admin(
                &format!("{base}/humans"),
                json!({"handle": handle, "displayName": handle}),
            )
            .await;
        handles.push(handle);
    }
    let full = ada(
        &server,
        &w,
        "agent_wakers_set",
        json!({"agentId": w.agent_id, "allow": handles[..32]}),
    )
    .await;
    assert_eq!(full["wakers"].as_array().unwrap().len(), 32);
    let (status, body) = human(
        &server,
        &w,
        &w.device_credential,
        "agent_wakers_set",
        json!({"agentId": w.agent_id, "allow": [&handles[32]]}),
    )
    .await;
    assert_eq!(body["error"]["code"], "invalid_state", "{status} {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 32"),
        "{body}"
    );
    let listed = ada(
        &server,
        &w,
        "agent_wakers_list",
        json!({"agentId": w.agent_id}),
    )
    .await;
    assert_eq!(listed["wakers"].as_array().unwrap().len(), 32);
    // One out, one in: within the bound again.
    let swapped = ada(
        &server,
        &w,
        "agent_wakers_set",
        json!({"agentId": w.agent_id, "allow": [&handles[32]], "disallow": [&handles[0]]}),
    )
    .await;
    let now: Vec<&str> = swapped["wakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["handle"].as_str().unwrap())
        .collect();
    assert_eq!(now.len(), 32);
    assert!(now.contains(&"person-32") && !now.contains(&"person-0"));
}

/// Retries racing each other and new messages for the last places of a conversation's queue: as
/// many wait as there are places, the rest are refused, never more than the bound waiting.
#[tokio::test]
async fn server_deliveries_racing_retries_keep_the_bound_of_what_waits() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let general = format!("channel:{}", w.channel_id);
    let mut pending = Vec::new();
    for n in 0..20 {
        let posted = ada_posts(&server, &w, &general, &format!("@builder {n}")).await;
        pending.push(delivery_of(&server, &w, &posted, &w.agent_id).await["id"].clone());
    }
    let mut refused = Vec::new();
    for n in 0..6 {
        let posted = ada_posts(&server, &w, &general, &format!("@builder over {n}")).await;
        let delivery = delivery_of(&server, &w, &posted, &w.agent_id).await;
        assert_eq!(delivery["state"], "failed", "{delivery}");
        refused.push(delivery["id"].clone());
    }
    // Three leave the queue (started by the agent's host): three places free.
    let fence =
        ada(&server, &w, "agent_host", json!({"agentId": w.agent_id})).await["fence"].clone();
    for (n, id) in pending.iter().take(3).enumerate() {
        ada(
            &server,
            &w,
            "delivery_start",
            json!({"deliveryId": id, "fence": fence, "runId": format!("run_{n}"), "requestId": format!("req-start-{n}")}),
        )
        .await;
    }
    let racing = refused.iter().enumerate().map(|(n, id)| {
        let input = json!({"deliveryId": id, "requestId": format!("req-retry-{n}")});
        let (server, w) = (&server, &w);
        async move { human(server, w, &w.device_credential, "delivery_retry", input).await }
    });
    let posting = (0..3).map(|n| {
        let (server, w, general) = (&server, &w, &general);
        async move { ada_posts(server, w, general, &format!("@builder racing {n}")).await }
    });
    let (answers, posted) = tokio::join!(
        futures_util::future::join_all(racing),
        futures_util::future::join_all(posting)
    );
    let retried = answers.iter().filter(|(status, _)| *status == 200).count();
    let mut posted_waiting = 0;
    for message in &posted {
        posted_waiting +=
            usize::from(delivery_of(&server, &w, message, &w.agent_id).await["state"] == "pending");
    }
    assert_eq!(retried + posted_waiting, 3, "{answers:?}");
    assert!(
        answers
            .iter()
            .filter(|(status, _)| *status != 200)
            .all(|(status, body)| *status == 409 && body["error"]["code"] == "invalid_state"),
        "{answers:?}"
    );
    let waiting = deliveries(&server, &w)
        .await
        .iter()
        .filter(|d| d["state"] == "pending" && d["agentId"] == json!(w.agent_id))
        .count();
    assert_eq!(waiting, 20);
}

/// Messages racing into one conversation: twenty wait for the agent, every other one is
/// recorded refused, whatever order their transactions run in (each counts what waits after its
/// workspace's event head, which the others wait for).
#[tokio::test]
async fn server_deliveries_racing_messages_keep_the_bound_of_what_waits() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let general = format!("channel:{}", w.channel_id);
    let racing = (0..26).map(|n| {
        let (server, w, general) = (&server, &w, &general);
        async move { ada_posts(server, w, general, &format!("@builder at once {n}")).await }
    });
    futures_util::future::join_all(racing).await;
    let all = deliveries(&server, &w).await;
    let count = |state: &str| all.iter().filter(|d| d["state"] == state).count();
    assert_eq!((count("pending"), count("failed")), (20, 6), "{all:?}");
}
