//! The server's human API over real HTTP: what a person reads and answers, decided by their
//! memberships and the agents they own; pages and cursors at their bounds; writes at most once
//! per `requestId`. Each test runs on SQLite and, in the PostgreSQL pass, on PostgreSQL.

use serde_json::{Value, json};

use crate::support::{TestServer, Workspace};

/// `POST` the human action `action` with `credential` on `workspace`'s path.
async fn human(
    server: &TestServer,
    workspace_id: &str,
    credential: &str,
    action: &str,
    input: Value,
) -> (u16, Value) {
    let path = format!("/human/servers/{workspace_id}/actions/{action}");
    server.post(&path, Some(credential), &input).await
}

/// Ada's request (the workspace helper's person) that must succeed; its `data`.
async fn ada(server: &TestServer, w: &Workspace, action: &str, input: Value) -> Value {
    let (status, body) = human(server, &w.workspace_id, &w.device_credential, action, input).await;
    assert_eq!(status, 200, "{action} failed: {body}");
    body["data"].clone()
}

#[track_caller]
fn refused(response: (u16, Value), status: u16, code: &str) -> Value {
    assert_eq!(
        (response.0, response.1["error"]["code"].as_str()),
        (status, Some(code)),
        "{}",
        response.1
    );
    response.1
}

/// The texts of a history page's messages, in its order.
fn texts_of(page: &Value) -> Vec<&str> {
    page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect()
}

/// The agent `agent_id` posts `content` to `target` through its MCP tool route.
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

/// A second person of `w`'s workspace, with a device and an agent of their own in `general`.
struct Bob {
    device: String,
    agent_id: String,
}

async fn bob(server: &TestServer, w: &Workspace) -> Bob {
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
    let agent_id = server
        .admin(
            &format!("{base}/agents"),
            json!({"ownerHumanId": human, "handle": "scout", "displayName": "Scout"}),
        )
        .await["agentId"]
        .as_str()
        .unwrap()
        .to_string();
    let device = server
        .admin(&format!("{base}/devices"), json!({"humanId": human}))
        .await["credential"]
        .as_str()
        .unwrap()
        .to_string();
    Bob { device, agent_id }
}

#[tokio::test]
async fn server_human_a_person_reads_and_answers_what_an_agent_posted() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let thread = format!("thread:{}", w.thread_id);
    let asked = agent_posts(&server, &w, &w.agent_id, &thread, "ready to ship?").await;

    let me = ada(&server, &w, "me", json!({})).await;
    assert_eq!(
        (me["handle"].as_str(), me["humanId"].as_str()),
        (Some("ada"), Some(w.human_id.as_str()))
    );

    // The channel is listed; its thread carries the agent's message as unread.
    let list = ada(&server, &w, "conversation_list", json!({})).await;
    let names: Vec<&str> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["general"], "only what ada belongs to: {list}");
    let threads = ada(
        &server,
        &w,
        "thread_list",
        json!({"target": format!("channel:{}", w.channel_id)}),
    )
    .await;
    assert_eq!(threads["threads"][0]["target"], json!(thread));
    assert_eq!(threads["threads"][0]["name"], json!("release"));
    assert_eq!(threads["threads"][0]["unread"], json!(1));
    let history = ada(&server, &w, "history_read", json!({"target": thread})).await;
    assert_eq!(history["messages"][0]["content"], json!("ready to ship?"));
    assert_eq!(history["messages"][0]["authorId"], json!(w.agent_id));

    // Ada answers in the thread, once per requestId.
    let answer = json!({"target": thread, "content": "yes, ship it", "requestId": "reply-0000001"});
    let first = ada(&server, &w, "message_post", answer.clone()).await;
    assert_eq!(first["message"]["authorId"], json!(w.human_id));
    let again = ada(&server, &w, "message_post", answer.clone()).await;
    assert_eq!(again, first, "a repeat replays the first answer");
    let mut other = answer.clone();
    other["content"] = json!("no, wait");
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "message_post",
            other,
        )
        .await,
        422,
        "idempotency_key_reused",
    );
    // The agent reads the answer where it asked; the person's own message is not unread to her.
    let (status, seen) = server
        .post(
            &format!(
                "/runtime/servers/{}/agents/{}/tools/message_history_read",
                w.workspace_id, w.agent_id
            ),
            Some(&w.device_credential),
            &json!({"target": thread}),
        )
        .await;
    assert_eq!(status, 200, "{seen}");
    let contents: Vec<&str> = seen["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["yes, ship it", "ready to ship?"], "posted once");

    // Reactions, and the read mark that clears the unread count.
    let reacted = ada(
        &server,
        &w,
        "reaction_add",
        json!({"messageId": asked, "emoji": "👍"}),
    )
    .await;
    assert_eq!(
        reacted["reactions"],
        json!([{"emoji": "👍", "count": 1, "mine": true}])
    );
    let marked = ada(
        &server,
        &w,
        "read_mark",
        json!({"target": thread, "messageId": asked}),
    )
    .await;
    assert_eq!(marked["unread"], json!(0));
    let threads = ada(
        &server,
        &w,
        "thread_list",
        json!({"target": format!("channel:{}", w.channel_id)}),
    )
    .await;
    assert_eq!(threads["threads"][0]["unread"], json!(0));
    agent_posts(&server, &w, &w.other_agent_id, &thread, "shipped").await;
    let threads = ada(
        &server,
        &w,
        "thread_list",
        json!({"target": format!("channel:{}", w.channel_id)}),
    )
    .await;
    assert_eq!(
        threads["threads"][0]["unread"],
        json!(1),
        "newer than the mark"
    );
    // A mark never moves back.
    ada(
        &server,
        &w,
        "read_mark",
        json!({"target": thread, "messageId": asked}),
    )
    .await;
    let removed = ada(
        &server,
        &w,
        "reaction_remove",
        json!({"messageId": asked, "emoji": "👍"}),
    )
    .await;
    assert_eq!(removed["reactions"], json!([]));
    // A message of another conversation is not this one's to mark.
    let channel_message = agent_posts(
        &server,
        &w,
        &w.agent_id,
        &format!("channel:{}", w.channel_id),
        "top level",
    )
    .await;
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "read_mark",
            json!({"target": thread, "messageId": channel_message}),
        )
        .await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn server_human_membership_decides_what_a_person_sees() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let elsewhere = server.workspace("globex").await;
    // Ada is no member of `builders`: its channel, its thread, its messages are missing to her,
    // exactly as another workspace's.
    let private = format!("channel:{}", w.private_channel_id);
    let hidden = agent_posts(&server, &w, &w.agent_id, &private, "between agents").await;
    let foreign = format!("channel:{}", elsewhere.channel_id);
    for target in [
        &private,
        &format!("thread:{}", w.private_thread_id),
        &foreign,
    ] {
        let body = refused(
            human(
                &server,
                &w.workspace_id,
                &w.device_credential,
                "history_read",
                json!({"target": target}),
            )
            .await,
            404,
            "not_found",
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("visible to you"),
            "{body}"
        );
        refused(
            human(
                &server,
                &w.workspace_id,
                &w.device_credential,
                "message_post",
                json!({"target": target, "content": "hi"}),
            )
            .await,
            404,
            "not_found",
        );
    }
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "reaction_add",
            json!({"messageId": hidden, "emoji": "👍"}),
        )
        .await,
        404,
        "not_found",
    );
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "task_list",
            json!({"location": {"kind": "thread", "threadId": w.private_thread_id}}),
        )
        .await,
        404,
        "not_found",
    );
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "thread_list",
            json!({"target": private}),
        )
        .await,
        404,
        "not_found",
    );
    // A credential of another workspace, none, or a runtime's workspace path: one uniform 403.
    refused(
        human(
            &server,
            &w.workspace_id,
            &elsewhere.device_credential,
            "me",
            json!({}),
        )
        .await,
        403,
        "forbidden",
    );
    let (status, body) = server
        .post(
            &format!("/human/servers/{}/actions/me", w.workspace_id),
            None,
            &json!({}),
        )
        .await;
    refused((status, body), 403, "forbidden");
    refused(
        human(
            &server,
            &w.workspace_id,
            "dev_0123456789.not-the-secret",
            "me",
            json!({}),
        )
        .await,
        403,
        "forbidden",
    );
    // What the body says never picks the person: an unknown field is refused.
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "me",
            json!({"humanId": elsewhere.human_id}),
        )
        .await,
        400,
        "validation_failed",
    );
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "no_such_action",
            json!({}),
        )
        .await,
        404,
        "unknown_action",
    );
    // The shared reads answer as they answer an agent, on the conversations she belongs to.
    let tasks = ada(
        &server,
        &w,
        "task_list",
        json!({"location": {"kind": "thread", "threadId": w.thread_id}}),
    )
    .await;
    assert_eq!(tasks["tasks"], json!([]));
    let projects = ada(&server, &w, "project_list", json!({})).await;
    assert_eq!(projects["projects"], json!([]));
    // Agents: the workspace's, with which are hers.
    let bob = bob(&server, &w).await;
    let agents = ada(&server, &w, "agent_list", json!({})).await;
    let seen: Vec<(String, bool)> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["profile"]["handle"].as_str().unwrap().to_string(),
                a["owned"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("builder".to_string(), true),
            ("reviewer".to_string(), true),
            ("scout".to_string(), false)
        ]
    );
    let owned = ada(
        &server,
        &w,
        "agent_list",
        json!({"owned": true, "limit": 1}),
    )
    .await;
    assert_eq!(owned["agents"][0]["profile"]["handle"], json!("builder"));
    let rest = ada(
        &server,
        &w,
        "agent_list",
        json!({"owned": true, "cursor": owned["nextCursor"]}),
    )
    .await;
    assert_eq!(rest["agents"].as_array().unwrap().len(), 1);
    assert!(rest.get("nextCursor").is_none(), "{rest}");
    // A direct conversation by handle: with an agent (the same one each time), never oneself,
    // never a handle the workspace does not have.
    let dm = ada(&server, &w, "dm_open", json!({"handle": "scout"})).await;
    assert!(dm["target"].as_str().unwrap().starts_with("dm:dm_"), "{dm}");
    assert_eq!(
        ada(&server, &w, "dm_open", json!({"handle": "scout"})).await,
        dm
    );
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "dm_open",
            json!({"handle": "ada"}),
        )
        .await,
        400,
        "validation_failed",
    );
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "dm_open",
            json!({"handle": "nobody"}),
        )
        .await,
        404,
        "not_found",
    );
    // Bob's device reads as Bob: not a member of `general`.
    refused(
        human(
            &server,
            &w.workspace_id,
            &bob.device,
            "history_read",
            json!({"target": format!("channel:{}", w.channel_id)}),
        )
        .await,
        404,
        "not_found",
    );
    let _ = bob.agent_id;
}

#[tokio::test]
async fn server_human_a_person_decides_the_approvals_of_their_agents_once() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let bob = bob(&server, &w).await;
    let request = |agent: String, credential: String, title: &'static str| {
        let server = &server;
        let w = &w;
        async move {
            let path = format!(
                "/runtime/servers/{}/agents/{agent}/actions/approval/request",
                w.workspace_id
            );
            let (status, body) = server
                .post(&path, Some(&credential), &json!({"title": title}))
                .await;
            assert_eq!(status, 200, "{body}");
            body["data"]["approval"]["id"].as_str().unwrap().to_string()
        }
    };
    let mine = request(
        w.agent_id.clone(),
        w.device_credential.clone(),
        "deploy to prod",
    )
    .await;
    let theirs = request(
        bob.agent_id.clone(),
        bob.device.clone(),
        "delete the bucket",
    )
    .await;

    let listed = ada(&server, &w, "approval_list", json!({"status": "pending"})).await;
    let ids: Vec<&str> = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()], "only what her agents asked");
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "approval_decide",
            json!({"approvalId": theirs, "decision": "approve"}),
        )
        .await,
        404,
        "not_found",
    );
    let decide = json!({"approvalId": mine, "decision": "approve", "comment": "go", "requestId": "decide-000001"});
    let decided = ada(&server, &w, "approval_decide", decide.clone()).await;
    assert_eq!(decided["approval"]["status"], json!("approved"));
    assert_eq!(decided["approval"]["decidedByHumanId"], json!(w.human_id));
    assert_eq!(
        ada(&server, &w, "approval_decide", decide).await,
        decided,
        "replayed, not decided twice"
    );
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "approval_decide",
            json!({"approvalId": mine, "decision": "reject"}),
        )
        .await,
        409,
        "invalid_state",
    );
    // The agent reads the decision.
    let (status, got) = server
        .action(
            &w,
            &w.agent_id,
            "approval",
            "get",
            json!({"approvalId": mine}),
        )
        .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["data"]["approval"]["comment"], json!("go"));
    // Bob's approval is still his to decide.
    let (status, body) = human(
        &server,
        &w.workspace_id,
        &bob.device,
        "approval_decide",
        json!({"approvalId": theirs, "decision": "reject"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The audit: her agents' and her devices' records, never Bob's agent's.
    let mut records = Vec::new();
    let mut cursor: Option<Value> = None;
    loop {
        let mut input = json!({"limit": 2});
        if let Some(cursor) = &cursor {
            input["cursor"] = cursor.clone();
        }
        let page = ada(&server, &w, "audit_list", input).await;
        records.extend(page["records"].as_array().unwrap().iter().cloned());
        match page.get("nextCursor") {
            Some(next) => cursor = Some(next.clone()),
            None => break,
        }
    }
    assert!(
        records
            .iter()
            .any(|r| r["agentId"] == json!(w.agent_id) && r["action"] == json!("approval request")),
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["family"] == json!("human") && r["action"] == json!("approval_decide")),
        "{records:?}"
    );
    assert!(
        records.iter().all(|r| r["agentId"] != json!(bob.agent_id)),
        "{records:?}"
    );
    let only_bobs = ada(&server, &w, "audit_list", json!({"agentId": bob.agent_id})).await;
    assert_eq!(only_bobs["records"], json!([]));
}

#[tokio::test]
async fn server_human_pages_cursors_and_unread_counts_hold_at_their_bounds() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let thread = format!("thread:{}", w.thread_id);
    let mut ids = Vec::new();
    for n in 0..45 {
        ids.push(agent_posts(&server, &w, &w.agent_id, &thread, &format!("m{n}")).await);
    }
    let mut seen = Vec::new();
    let mut input = json!({"target": thread, "limit": 20});
    let mut pages = 0;
    loop {
        let page = ada(&server, &w, "history_read", input.clone()).await;
        pages += 1;
        seen.extend(
            page["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["content"].as_str().unwrap().to_string()),
        );
        match page.get("nextCursor") {
            Some(next) => input["cursor"] = next.clone(),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..45).rev().map(|n| format!("m{n}")).collect();
    assert_eq!(seen, expected, "every message once, newest first");
    // A cursor is bound to its target; limits are bounded at both ends.
    let first = ada(
        &server,
        &w,
        "history_read",
        json!({"target": thread, "limit": 1}),
    )
    .await;
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "history_read",
            json!({"target": format!("channel:{}", w.channel_id), "cursor": first["nextCursor"]}),
        )
        .await,
        400,
        "validation_failed",
    );
    for limit in [0, 101] {
        refused(
            human(
                &server,
                &w.workspace_id,
                &w.device_credential,
                "history_read",
                json!({"target": thread, "limit": limit}),
            )
            .await,
            400,
            "validation_failed",
        );
    }
    ada(
        &server,
        &w,
        "history_read",
        json!({"target": thread, "limit": 100}),
    )
    .await;
    // Around a message: half the page newer, the message, the rest older.
    let around = ada(
        &server,
        &w,
        "history_read",
        json!({"target": thread, "around": ids[10], "limit": 10}),
    )
    .await;
    let contents: Vec<&str> = texts_of(&around);
    assert_eq!(
        contents,
        [
            "m15", "m14", "m13", "m12", "m11", "m10", "m9", "m8", "m7", "m6"
        ]
    );
    assert_eq!(around["newerRemain"], json!(true));
    let older = ada(
        &server,
        &w,
        "history_read",
        json!({"target": thread, "cursor": around["nextCursor"], "limit": 3}),
    )
    .await;
    let contents: Vec<&str> = texts_of(&older);
    assert_eq!(
        contents,
        ["m5", "m4", "m3"],
        "the around page's cursor continues older"
    );
    let newest = ada(
        &server,
        &w,
        "history_read",
        json!({"target": thread, "around": ids[44], "limit": 4}),
    )
    .await;
    assert_eq!(newest["newerRemain"], json!(false));
    assert_eq!(newest["messages"][0]["content"], json!("m44"));
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "history_read",
            json!({"target": thread, "around": ids[0], "cursor": first["nextCursor"]}),
        )
        .await,
        400,
        "validation_failed",
    );

    // The unread count stops at its bound.
    let store = server.state.store();
    let at = agentteam::server::store::Membership {
        channel_id: w.channel_id.clone(),
        thread_id: None,
    };
    let cap = agentteam::server::store::MAX_UNREAD;
    let mut channel_ids = Vec::new();
    for n in 0..cap {
        let (id, _) = store
            .post_message(
                &w.workspace_id,
                &at,
                &w.agent_id,
                &format!("c{n}"),
                &[],
                1_000 + n,
            )
            .await
            .unwrap();
        channel_ids.push(id);
    }
    let unread = |list: &Value| list["conversations"][0]["unread"].as_i64().unwrap();
    assert_eq!(
        unread(&ada(&server, &w, "conversation_list", json!({})).await),
        cap
    );
    // Around a message of the channel (whose thread holds other messages): the channel's alone.
    let around = ada(
        &server,
        &w,
        "history_read",
        json!({"target": format!("channel:{}", w.channel_id), "around": channel_ids[500], "limit": 6}),
    )
    .await;
    let contents: Vec<&str> = texts_of(&around);
    assert_eq!(contents, ["c503", "c502", "c501", "c500", "c499", "c498"]);
    assert_eq!(around["newerRemain"], json!(true));
    store
        .post_message(
            &w.workspace_id,
            &at,
            &w.agent_id,
            "one more",
            &[],
            1_000 + cap,
        )
        .await
        .unwrap();
    assert_eq!(
        unread(&ada(&server, &w, "conversation_list", json!({})).await),
        cap,
        "at least 1000"
    );
}

/// Ada's `events_read` from `after`.
async fn feed(server: &TestServer, w: &Workspace, input: Value) -> Value {
    ada(server, w, "events_read", input).await
}

fn kinds(page: &Value) -> Vec<String> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn server_human_the_feed_shows_what_the_person_may_see_once_and_in_order() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let bob = bob(&server, &w).await;
    let start = feed(&server, &w, json!({})).await;
    assert_eq!(
        (start["events"].clone(), start["resync"].clone()),
        (json!([]), json!(false)),
        "no backlog: {start}"
    );
    let thread = format!("thread:{}", w.thread_id);

    agent_posts(&server, &w, &w.agent_id, &thread, "in the thread").await;
    agent_posts(
        &server,
        &w,
        &w.agent_id,
        &format!("channel:{}", w.private_channel_id),
        "not for ada",
    )
    .await;
    let (status, _) = server
        .action(
            &w,
            &w.agent_id,
            "approval",
            "request",
            json!({"title": "mine"}),
        )
        .await;
    assert_eq!(status, 200);
    let path = format!(
        "/runtime/servers/{}/agents/{}/actions/approval/request",
        w.workspace_id, bob.agent_id
    );
    let (status, _) = server
        .post(&path, Some(&bob.device), &json!({"title": "bob's"}))
        .await;
    assert_eq!(status, 200);
    let (status, task) = server
        .action(
            &w,
            &w.agent_id,
            "task",
            "create",
            json!({"location": {"kind": "thread", "threadId": w.thread_id}, "title": "ship"}),
        )
        .await;
    assert_eq!(status, 200, "{task}");

    let page = feed(&server, &w, json!({"after": start["cursor"]})).await;
    assert_eq!(kinds(&page), ["message", "approval", "task"], "{page}");
    let events = page["events"].as_array().unwrap();
    assert_eq!(events[0]["target"], json!(thread));
    assert_eq!(events[0]["message"]["content"], json!("in the thread"));
    assert_eq!(events[1]["approval"]["title"], json!("mine"));
    assert_eq!(events[2]["taskId"], task["data"]["task"]["id"]);
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // Nothing repeats past the cursor, though the events ada may not see came after hers.
    let again = feed(&server, &w, json!({"after": page["cursor"]})).await;
    assert_eq!(again["events"], json!([]));
    assert_eq!(again["cursor"], page["cursor"]);

    // A reaction and a decision are changes too; a page stops at its limit and the next goes on.
    let message = events[0]["message"]["id"].as_str().unwrap();
    ada(
        &server,
        &w,
        "reaction_add",
        json!({"messageId": message, "emoji": "🚀"}),
    )
    .await;
    let approval = events[1]["approval"]["id"].as_str().unwrap();
    ada(
        &server,
        &w,
        "approval_decide",
        json!({"approvalId": approval, "decision": "approve"}),
    )
    .await;
    agent_posts(&server, &w, &w.agent_id, &thread, "third").await;
    let first = feed(&server, &w, json!({"after": page["cursor"], "limit": 2})).await;
    assert_eq!(kinds(&first), ["reaction", "approval"]);
    assert_eq!(
        first["events"][0]["message"]["reactions"][0]["emoji"],
        json!("🚀")
    );
    assert_eq!(first["events"][1]["approval"]["status"], json!("approved"));
    let rest = feed(&server, &w, json!({"after": first["cursor"], "limit": 2})).await;
    assert_eq!(kinds(&rest), ["message"]);
    // A scheduled message, posted by the scheduler, is a message like any other.
    let now = chrono::DateTime::from_timestamp_millis(server.state.clock().now_ms()).unwrap();
    let (status, body) = server
        .action(
            &w,
            &w.agent_id,
            "scheduled-message",
            "create",
            json!({"target": {"kind": "thread", "threadId": w.thread_id}, "content": "on schedule", "sendAt": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.state.run_scheduler_pass().await.unwrap().sent, 1);
    let scheduled = feed(&server, &w, json!({"after": rest["cursor"]})).await;
    assert_eq!(
        scheduled["events"][0]["message"]["content"],
        json!("on schedule"),
        "{scheduled}"
    );
    let rest = scheduled;

    // A waiting read answers with the next change, whichever comes first.
    let waiting = {
        let (base, credential, workspace) = (
            server.base_url.clone(),
            w.device_credential.clone(),
            w.workspace_id.clone(),
        );
        let client = server.client.clone();
        let after = rest["cursor"].clone();
        tokio::spawn(async move {
            client
                .post(format!(
                    "{base}/human/servers/{workspace}/actions/events_read"
                ))
                .bearer_auth(credential)
                .json(&json!({"after": after, "waitMs": 20000}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    agent_posts(&server, &w, &w.other_agent_id, &thread, "live").await;
    let woke = waiting.await.unwrap();
    assert_eq!(
        woke["data"]["events"][0]["message"]["content"],
        json!("live"),
        "{woke}"
    );

    // Past the retention: resync, from the head.
    let head = woke["data"]["cursor"].clone();
    let pruned = server.state.store().prune_events(i64::MAX).await.unwrap();
    assert!(pruned >= 8, "{pruned}");
    agent_posts(&server, &w, &w.agent_id, &thread, "after the prune").await;
    let lost = feed(&server, &w, json!({"after": start["cursor"]})).await;
    assert_eq!(
        (lost["resync"].clone(), lost["events"].clone()),
        (json!(true), json!([])),
        "{lost}"
    );
    assert!(lost["cursor"].as_i64().unwrap() > head.as_i64().unwrap());
    let kept = feed(&server, &w, json!({"after": head})).await;
    assert_eq!(
        kinds(&kept),
        ["message"],
        "the event after the head is kept: {kept}"
    );
    let future = feed(&server, &w, json!({"after": 1_000_000})).await;
    assert_eq!(
        future["resync"],
        json!(true),
        "a cursor past the head is another feed's"
    );
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "events_read",
            json!({"waitMs": 25001}),
        )
        .await,
        400,
        "validation_failed",
    );
}

#[tokio::test]
async fn server_human_the_feed_resumes_across_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut process, base, operator) = crate::support::spawn_server(dir.path()).await;
    let client = crate::support::http_client();
    let call = |base: String, bearer: String, path: String, body: Value| {
        let client = client.clone();
        async move {
            let response = client
                .post(format!("{base}{path}"))
                .bearer_auth(bearer)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()["data"].clone()
        }
    };
    let workspace = call(
        base.clone(),
        operator.clone(),
        "/admin/workspaces".into(),
        json!({"name": "acme"}),
    )
    .await["workspaceId"]
        .as_str()
        .unwrap()
        .to_string();
    let admin = format!("/admin/workspaces/{workspace}");
    let human_id = call(
        base.clone(),
        operator.clone(),
        format!("{admin}/humans"),
        json!({"handle": "ada", "displayName": "Ada"}),
    )
    .await["humanId"]
        .as_str()
        .unwrap()
        .to_string();
    let agent = call(
        base.clone(),
        operator.clone(),
        format!("{admin}/agents"),
        json!({"ownerHumanId": human_id, "handle": "builder", "displayName": "B"}),
    )
    .await["agentId"]
        .as_str()
        .unwrap()
        .to_string();
    let device = call(
        base.clone(),
        operator.clone(),
        format!("{admin}/devices"),
        json!({"humanId": human_id}),
    )
    .await["credential"]
        .as_str()
        .unwrap()
        .to_string();
    let channel = call(
        base.clone(),
        operator.clone(),
        format!("{admin}/channels"),
        json!({"name": "general", "members": [human_id, agent]}),
    )
    .await["channelId"]
        .as_str()
        .unwrap()
        .to_string();
    let events = format!("/human/servers/{workspace}/actions/events_read");
    let send = format!("/runtime/servers/{workspace}/agents/{agent}/tools/message_send");
    let target = format!("channel:{channel}");

    let cursor =
        call(base.clone(), device.clone(), events.clone(), json!({})).await["cursor"].clone();
    call(
        base.clone(),
        device.clone(),
        send.clone(),
        json!({"target": target, "content": "before"}),
    )
    .await;
    process.start_kill().unwrap();
    process.wait().await.unwrap();

    let (_process, base, _) = crate::support::spawn_server(dir.path()).await;
    call(
        base.clone(),
        device.clone(),
        send.clone(),
        json!({"target": target, "content": "after"}),
    )
    .await;
    let page = call(
        base.clone(),
        device.clone(),
        events.clone(),
        json!({"after": cursor}),
    )
    .await;
    let contents: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        ["before", "after"],
        "the cursor resumes across the restart: {page}"
    );
    let again = call(base, device, events, json!({"after": page["cursor"]})).await;
    assert_eq!(again["events"], json!([]));
}

/// Writers racing (on PostgreSQL, transactions committing in any order) while a reader follows
/// the feed: the reader sees every message exactly once.
#[tokio::test]
async fn server_human_a_reader_following_racing_writers_misses_nothing_and_repeats_nothing() {
    let server = std::sync::Arc::new(TestServer::start().await);
    let w = std::sync::Arc::new(server.workspace("acme").await);
    let start = feed(&server, &w, json!({})).await["cursor"].clone();
    const WRITERS: usize = 8;
    const EACH: usize = 25;
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let (server, w) = (server.clone(), w.clone());
        writers.push(tokio::spawn(async move {
            let thread = format!("thread:{}", w.thread_id);
            for n in 0..EACH {
                agent_posts(&server, &w, &w.agent_id, &thread, &format!("w{writer}-{n}")).await;
            }
        }));
    }
    let mut seen = Vec::new();
    let mut cursor = start;
    let mut writers_done = false;
    while seen.len() < WRITERS * EACH {
        let page = feed(&server, &w, json!({"after": cursor, "waitMs": 2000})).await;
        assert_eq!(page["resync"], json!(false));
        for event in page["events"].as_array().unwrap() {
            seen.push(event["message"]["content"].as_str().unwrap().to_string());
        }
        cursor = page["cursor"].clone();
        if !writers_done && writers.iter().all(|w| w.is_finished()) {
            writers_done = true;
        } else if writers_done && page["events"].as_array().unwrap().is_empty() {
            break;
        }
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let distinct: std::collections::BTreeSet<&String> = seen.iter().collect();
    assert_eq!(
        (seen.len(), distinct.len()),
        (WRITERS * EACH, WRITERS * EACH),
        "every message once"
    );
    for writer in 0..WRITERS {
        let mine: Vec<&String> = seen
            .iter()
            .filter(|s| s.starts_with(&format!("w{writer}-")))
            .collect();
        let expected: Vec<String> = (0..EACH).map(|n| format!("w{writer}-{n}")).collect();
        assert_eq!(
            mine,
            expected.iter().collect::<Vec<_>>(),
            "each writer's in its order"
        );
    }
}

/// A published one-step plan with a manual trigger, started by `agent` (with `credential`): the
/// run's id.
async fn run_started_by(
    server: &TestServer,
    w: &Workspace,
    agent: &str,
    credential: &str,
) -> String {
    let call = |action: &'static str, input: Value| {
        let path = format!(
            "/runtime/servers/{}/agents/{agent}/actions/workflow/{action}",
            w.workspace_id
        );
        async move {
            let (status, body) = server.post(&path, Some(credential), &input).await;
            assert_eq!(status, 200, "{body}");
            body["data"].clone()
        }
    };
    let plan = call("plan", json!({"operation": "create", "name": "Release", "steps": [{"key": "build", "title": "Build", "kind": "task"}]})).await;
    let plan_id = plan["plan"]["id"].clone();
    call("plan", json!({"operation": "publish", "planId": plan_id})).await;
    let trigger = call(
        "trigger",
        json!({"operation": "create", "planId": plan_id, "name": "manual", "kind": "manual"}),
    )
    .await;
    let run = call(
        "run",
        json!({"operation": "start", "triggerId": trigger["trigger"]["id"]}),
    )
    .await;
    run["run"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn server_human_a_person_reads_the_workflow_runs_their_agents_started() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let bob = bob(&server, &w).await;
    let mine = run_started_by(&server, &w, &w.agent_id, &w.device_credential).await;
    let also_mine = run_started_by(&server, &w, &w.other_agent_id, &w.device_credential).await;
    run_started_by(&server, &w, &bob.agent_id, &bob.device).await;
    let first = ada(&server, &w, "workflow_run_list", json!({"limit": 1})).await;
    let rest = ada(
        &server,
        &w,
        "workflow_run_list",
        json!({"limit": 1, "cursor": first["nextCursor"]}),
    )
    .await;
    assert!(rest.get("nextCursor").is_none(), "{rest}");
    let mut ids = vec![
        first["runs"][0]["id"].as_str().unwrap(),
        rest["runs"][0]["id"].as_str().unwrap(),
    ];
    ids.sort();
    let mut expected = vec![mine.as_str(), also_mine.as_str()];
    expected.sort();
    assert_eq!(ids, expected, "her agents' runs, not Bob's");
    let done = ada(
        &server,
        &w,
        "workflow_run_list",
        json!({"status": "completed"}),
    )
    .await;
    assert_eq!(done["runs"], json!([]));
    // The cursor is bound to its filter.
    refused(
        human(
            &server,
            &w.workspace_id,
            &w.device_credential,
            "workflow_run_list",
            json!({"status": "running", "cursor": first["nextCursor"]}),
        )
        .await,
        400,
        "validation_failed",
    );
}

/// A page of large items ends early and its cursor continues: a message's text, an approval's
/// details and an event's message are bounded in characters, and written as JSON a control
/// character takes six bytes. A full page of them would pass the 1 MiB the daemon reads of an
/// answer; every page here stays under it, and the pages together hold everything once.
#[tokio::test]
async fn server_human_a_page_of_large_items_ends_early_and_continues() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let general = format!("channel:{}", w.channel_id);
    let start = feed(&server, &w, json!({})).await["cursor"].clone();
    const MESSAGES: usize = 30;
    const APPROVALS: usize = 25;
    let mut ids = Vec::new();
    for n in 0..MESSAGES {
        let content = format!("{}{n:02}", "\u{1}".repeat(3998));
        ids.push(agent_posts(&server, &w, &w.agent_id, &general, &content).await);
    }
    let path = format!(
        "/runtime/servers/{}/agents/{}/actions/approval/request",
        w.workspace_id, w.agent_id
    );
    for n in 0..APPROVALS {
        let details = "\u{1}".repeat(8000);
        let (status, body) = server
            .post(
                &path,
                Some(&w.device_credential),
                &json!({"title": format!("a{n:02}"), "details": details}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    const READ_BOUND: usize = 1024 * 1024;

    // Every page of `action` (its items under `name`, each item's key `key`), 100 asked each time.
    let walk = async |action: &str, name: &str, mut input: Value, next: &str| {
        let mut pages = Vec::new();
        loop {
            input["limit"] = json!(100);
            let data = ada(&server, &w, action, input.clone()).await;
            let written = serde_json::to_string(&data).unwrap().len();
            assert!(written < READ_BOUND, "{action}: a page of {written} bytes");
            let items = data[name].as_array().unwrap().clone();
            let more = match next {
                "nextCursor" => data.get("nextCursor").filter(|c| !c.is_null()).cloned(),
                _ => (!items.is_empty()).then(|| data[next].clone()),
            };
            pages.push(items);
            let Some(more) = more else { break pages };
            input[if next == "nextCursor" {
                "cursor"
            } else {
                "after"
            }] = more;
        }
    };

    let pages = walk(
        "history_read",
        "messages",
        json!({"target": general}),
        "nextCursor",
    )
    .await;
    assert!(
        pages.len() > 1 && pages[0].len() < MESSAGES,
        "one page held them all"
    );
    let contents: Vec<String> = pages
        .iter()
        .flatten()
        .map(|m| m["content"].as_str().unwrap().chars().skip(3998).collect())
        .collect();
    let expected: Vec<String> = (0..MESSAGES).rev().map(|n| format!("{n:02}")).collect();
    assert_eq!(contents, expected, "every message once, newest first");

    // The agent's own read of the conversation ends where the person's does.
    let history = format!(
        "/runtime/servers/{}/agents/{}/tools/message_history_read",
        w.workspace_id, w.agent_id
    );
    let mut input = json!({"target": general, "limit": 100});
    let mut agent_pages = Vec::new();
    loop {
        let (status, body) = server
            .post(&history, Some(&w.device_credential), &input)
            .await;
        assert_eq!(status, 200, "{body}");
        let written = serde_json::to_string(&body).unwrap().len();
        assert!(written < READ_BOUND, "an agent's page of {written} bytes");
        agent_pages.push(body["data"]["messages"].as_array().unwrap().len());
        match body["data"].get("nextCursor") {
            Some(cursor) if !cursor.is_null() => input["cursor"] = cursor.clone(),
            _ => break,
        }
    }
    let person_pages: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(agent_pages, person_pages);

    // A page around a message holds the message, with as many newer as older ones about it
    // (up to 50 newer asked), and its cursor continues with the older ones.
    let around = ada(
        &server,
        &w,
        "history_read",
        json!({"target": general, "around": ids[15], "limit": 100}),
    )
    .await;
    assert!(serde_json::to_string(&around).unwrap().len() < READ_BOUND);
    let numbers = |page: &Value| -> Vec<usize> {
        page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let n: String = m["content"].as_str().unwrap().chars().skip(3998).collect();
                n.parse().unwrap()
            })
            .collect()
    };
    let kept = numbers(&around);
    let newer = kept.iter().filter(|&&n| n > 15).count();
    let older = kept.iter().filter(|&&n| n < 15).count();
    assert!(
        kept.contains(&15) && kept.len() < MESSAGES && newer.abs_diff(older) <= 1,
        "{kept:?}"
    );
    let expected: Vec<usize> = (15 - older..=15 + newer).rev().collect();
    assert_eq!(kept, expected, "the nearest ones, newest first");
    assert_eq!(around["newerRemain"], json!(true));
    let rest = ada(
        &server,
        &w,
        "history_read",
        json!({"target": general, "cursor": around["nextCursor"], "limit": 100}),
    )
    .await;
    let expected: Vec<usize> = (0..15 - older).rev().collect();
    assert_eq!(numbers(&rest), expected, "the cursor continues older");

    let pages = walk("approval_list", "approvals", json!({}), "nextCursor").await;
    assert!(
        pages.len() > 1 && pages[0].len() < APPROVALS,
        "one page held them all"
    );
    let titles: Vec<&str> = pages
        .iter()
        .flatten()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..APPROVALS).rev().map(|n| format!("a{n:02}")).collect();
    assert_eq!(titles, expected, "every approval once, newest first");

    let pages = walk("events_read", "events", json!({"after": start}), "cursor").await;
    assert!(
        pages[0].len() < MESSAGES + APPROVALS,
        "one page held them all"
    );
    let seen: Vec<String> = pages
        .iter()
        .flatten()
        .map(|e| match e["kind"].as_str().unwrap() {
            "message" => e["message"]["content"]
                .as_str()
                .unwrap()
                .chars()
                .skip(3998)
                .collect(),
            "approval" => e["approval"]["title"].as_str().unwrap().to_string(),
            other => other.to_string(),
        })
        .collect();
    let expected: Vec<String> = (0..MESSAGES)
        .map(|n| format!("{n:02}"))
        .chain((0..APPROVALS).map(|n| format!("a{n:02}")))
        .collect();
    assert_eq!(seen, expected, "every event once, in order");
}
