//! The project, team, review, scheduled-message and message domains over real HTTP, each with its
//! cross-workspace refusal, plus one walk of the whole catalog through the server.

use std::time::Duration;

use agentteam::contract::Validators;
use agentteam::contract::catalog::{ACTIONS, ERROR_SCHEMA};
use agentteam::contract::validate::Output;
use serde_json::{Value, json};

use crate::support::{TestServer, Workspace};

#[track_caller]
fn ok(response: (u16, Value)) -> Value {
    assert_eq!(response.0, 200, "expected success, got {}", response.1);
    response.1["data"].clone()
}

#[track_caller]
fn refused(response: (u16, Value), status: u16, code: &str) {
    assert_eq!(
        (response.0, response.1["error"]["code"].as_str()),
        (status, Some(code)),
        "{}",
        response.1
    );
}

#[tokio::test]
async fn project_lifecycle_and_workspace_scope() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let b = server.workspace("globex").await;
    let created = ok(server
        .action(
            &a,
            &a.agent_id,
            "project",
            "create",
            json!({"name": "Launch", "description": "Q4"}),
        )
        .await);
    let id = created["project"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        (
            created["project"]["status"].as_str(),
            created["project"]["revision"].as_i64()
        ),
        (Some("active"), Some(1))
    );
    // Every agent of the workspace sees it.
    assert_eq!(
        ok(server
            .action(
                &a,
                &a.other_agent_id,
                "project",
                "get",
                json!({"projectId": id})
            )
            .await)["project"],
        created["project"]
    );
    let updated = ok(server
        .action(
            &a,
            &a.agent_id,
            "project",
            "update",
            json!({"projectId": id, "name": "Launch EU", "expectedRevision": 1}),
        )
        .await);
    assert_eq!(
        (
            updated["project"]["name"].as_str(),
            updated["project"]["revision"].as_i64()
        ),
        (Some("Launch EU"), Some(2))
    );
    refused(
        server
            .action(
                &a,
                &a.agent_id,
                "project",
                "update",
                json!({"projectId": id, "name": "x", "expectedRevision": 1}),
            )
            .await,
        409,
        "revision_mismatch",
    );

    ok(server
        .action(
            &a,
            &a.agent_id,
            "project",
            "create",
            json!({"name": "Other"}),
        )
        .await);
    let archived = ok(server
        .action(
            &a,
            &a.agent_id,
            "project",
            "archive",
            json!({"projectId": id}),
        )
        .await);
    assert_eq!(archived["project"]["status"], "archived");
    refused(
        server
            .action(
                &a,
                &a.agent_id,
                "project",
                "archive",
                json!({"projectId": id}),
            )
            .await,
        409,
        "invalid_state",
    );
    refused(
        server
            .action(
                &a,
                &a.agent_id,
                "project",
                "update",
                json!({"projectId": id, "name": "again"}),
            )
            .await,
        409,
        "invalid_state",
    );
    let active = ok(server
        .action(
            &a,
            &a.agent_id,
            "project",
            "list",
            json!({"status": "active"}),
        )
        .await);
    assert_eq!(active["projects"].as_array().unwrap().len(), 1);
    let all = ok(server
        .action(&a, &a.agent_id, "project", "list", json!({}))
        .await);
    assert_eq!(all["projects"].as_array().unwrap().len(), 2);

    for (action, input) in [
        ("get", json!({"projectId": id})),
        ("update", json!({"projectId": id, "name": "x"})),
        ("archive", json!({"projectId": id})),
    ] {
        refused(
            server
                .action(&b, &b.agent_id, "project", action, input)
                .await,
            404,
            "not_found",
        );
    }
    assert_eq!(
        ok(server
            .action(&b, &b.agent_id, "project", "list", json!({}))
            .await)["projects"],
        json!([])
    );
}

#[tokio::test]
async fn teams_are_listed_by_display_name_and_scoped_to_the_workspace() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let b = server.workspace("globex").await;
    let team = |handle: &str, name: &str, members: Value| {
        let path = format!("/admin/workspaces/{}/teams", a.workspace_id);
        let body = json!({"handle": handle, "displayName": name, "members": members});
        let server = &server;
        async move {
            server.admin(&path, body).await["teamId"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let platform = team("platform", "Platform", json!([a.human_id, a.agent_id])).await;
    team("alpha", "Alpha", json!([])).await;
    team("zeta", "Platform", json!([a.other_agent_id])).await;

    let listed = ok(server
        .action(&a, &a.agent_id, "team", "list", json!({}))
        .await);
    let order: Vec<&str> = listed["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["handle"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["alpha", "platform", "zeta"],
        "displayName, then handle"
    );
    let got = ok(server
        .action(&a, &a.agent_id, "team", "get", json!({"teamId": platform}))
        .await);
    assert_eq!(got["team"]["memberCount"], 2);
    assert_eq!(
        got["members"],
        json!([{"kind": "agent", "agentId": a.agent_id}, {"kind": "human", "humanId": a.human_id}])
    );

    refused(
        server
            .action(&b, &b.agent_id, "team", "get", json!({"teamId": platform}))
            .await,
        404,
        "not_found",
    );
    assert_eq!(
        ok(server
            .action(&b, &b.agent_id, "team", "list", json!({}))
            .await)["teams"],
        json!([])
    );
}

#[tokio::test]
async fn reviews_are_listed_newest_first_and_resolved_once() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let b = server.workspace("globex").await;
    let mut ids = Vec::new();
    for (index, verdict) in ["comment", "approve", "requestChanges"].iter().enumerate() {
        server
            .state
            .clock()
            .pin(Some(1_800_000_000_000 + index as i64));
        let added = ok(server
            .action(
                &a,
                &a.agent_id,
                "review",
                "add",
                json!({"threadId": a.thread_id, "verdict": verdict, "body": format!("r{index}")}),
            )
            .await);
        ids.push(added["review"]["id"].as_str().unwrap().to_string());
    }
    let listed = ok(server
        .action(
            &a,
            &a.other_agent_id,
            "review",
            "list",
            json!({"threadId": a.thread_id}),
        )
        .await);
    let order: Vec<&str> = listed["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(order, [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()]);

    server.state.clock().pin(Some(1_800_000_000_010));
    let resolved = ok(server
        .action(
            &a,
            &a.other_agent_id,
            "review",
            "resolve",
            json!({"reviewId": ids[0]}),
        )
        .await);
    server.state.clock().pin(None);
    assert_eq!(resolved["review"]["status"], "resolved");
    refused(
        server
            .action(
                &a,
                &a.agent_id,
                "review",
                "resolve",
                json!({"reviewId": ids[0]}),
            )
            .await,
        409,
        "invalid_state",
    );
    assert_eq!(
        ok(server
            .action(
                &a,
                &a.agent_id,
                "review",
                "get",
                json!({"reviewId": ids[0]})
            )
            .await)["review"],
        resolved["review"]
    );
    // Resolving moved it to the front (most recently changed).
    let listed = ok(server
        .action(
            &a,
            &a.agent_id,
            "review",
            "list",
            json!({"threadId": a.thread_id}),
        )
        .await);
    assert_eq!(listed["reviews"][0]["id"], ids[0].as_str());

    for (action, input) in [
        ("get", json!({"reviewId": ids[1]})),
        ("resolve", json!({"reviewId": ids[1]})),
        ("list", json!({"threadId": a.thread_id})),
        (
            "add",
            json!({"threadId": a.thread_id, "verdict": "comment", "body": "x"}),
        ),
    ] {
        refused(
            server
                .action(&b, &b.agent_id, "review", action, input)
                .await,
            404,
            "not_found",
        );
    }
}

#[tokio::test]
async fn scheduled_messages_post_when_due_and_record_their_runs() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let b = server.workspace("globex").await;
    let clock = server.state.clock();
    let start = 1_800_000_000_000_i64;
    clock.pin(Some(start));
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .to_rfc3339()
    };
    let target = json!({"kind": "thread", "threadId": a.thread_id});

    let once = ok(server
        .action(
            &a,
            &a.agent_id,
            "scheduled-message",
            "create",
            json!({"target": target, "content": "once", "sendAt": at(start + 60_000)}),
        )
        .await);
    let once_id = once["scheduledMessage"]["id"].as_str().unwrap().to_string();
    let repeating = ok(server
        .action(&a, &a.agent_id, "scheduled-message", "create", json!({"target": target, "content": "every 5", "sendAt": at(start + 60_000), "repeatEveryMinutes": 5}))
        .await);
    let repeating_id = repeating["scheduledMessage"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Not due yet: nothing happens.
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_created,
        0
    );
    // Due: both become runs; the runs are pending until attempted, sorted by their due time.
    clock.pin(Some(start + 60_000));
    assert_eq!(
        server
            .state
            .store()
            .materialize_due_runs(clock.now_ms())
            .await
            .unwrap(),
        2
    );
    let pending = ok(server
        .action(
            &a,
            &a.agent_id,
            "scheduled-message",
            "runs",
            json!({"scheduledMessageId": once_id}),
        )
        .await);
    assert_eq!(pending["runs"][0]["status"], "pending");
    assert_eq!(pending["runs"][0]["attemptedAt"], "2027-01-15T08:01:00Z");
    clock.pin(Some(start + 61_000));
    let report = server.state.run_scheduler_pass().await.unwrap();
    assert_eq!((report.sent, report.failed), (2, 0));
    let membership = agentteam::server::store::Membership {
        channel_id: a.channel_id.clone(),
        thread_id: Some(a.thread_id.clone()),
    };
    assert_eq!(
        server
            .state
            .store()
            .count_messages(&membership, &a.agent_id)
            .await
            .unwrap(),
        2
    );

    let done = ok(server
        .action(
            &a,
            &a.agent_id,
            "scheduled-message",
            "get",
            json!({"scheduledMessageId": once_id}),
        )
        .await);
    assert_eq!(done["scheduledMessage"]["status"], "done");
    assert!(done["scheduledMessage"].get("nextRunAt").is_none());
    let runs = ok(server
        .action(
            &a,
            &a.agent_id,
            "scheduled-message",
            "runs",
            json!({"scheduledMessageId": once_id}),
        )
        .await);
    assert_eq!(runs["runs"][0]["status"], "sent");
    assert_eq!(runs["runs"][0]["attemptedAt"], "2027-01-15T08:01:01Z");
    assert!(
        runs["runs"][0]["messageId"]
            .as_str()
            .unwrap()
            .starts_with("msg_")
    );

    // The repeating one runs every 5 minutes until cancelled; missed occurrences collapse.
    clock.pin(Some(start + 60_000 + 5 * 60_000));
    server.state.run_scheduler_pass().await.unwrap();
    clock.pin(Some(start + 60_000 + 22 * 60_000));
    server.state.run_scheduler_pass().await.unwrap();
    let runs = ok(server
        .action(
            &a,
            &a.agent_id,
            "scheduled-message",
            "runs",
            json!({"scheduledMessageId": repeating_id}),
        )
        .await);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 3);
    let cancelled = ok(server
        .action(
            &a,
            &a.agent_id,
            "scheduled-message",
            "cancel",
            json!({"scheduledMessageId": repeating_id}),
        )
        .await);
    assert_eq!(cancelled["scheduledMessage"]["status"], "cancelled");
    refused(
        server
            .action(
                &a,
                &a.agent_id,
                "scheduled-message",
                "cancel",
                json!({"scheduledMessageId": repeating_id}),
            )
            .await,
        409,
        "invalid_state",
    );
    clock.advance(Duration::from_secs(3600));
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_created,
        0
    );

    let listed = ok(server
        .action(
            &a,
            &a.agent_id,
            "scheduled-message",
            "list",
            json!({"target": target}),
        )
        .await);
    assert_eq!(listed["scheduledMessages"].as_array().unwrap().len(), 2);
    clock.pin(None);

    for (action, input) in [
        ("get", json!({"scheduledMessageId": once_id})),
        ("cancel", json!({"scheduledMessageId": repeating_id})),
        ("runs", json!({"scheduledMessageId": once_id})),
        ("list", json!({"target": target})),
        (
            "create",
            json!({"target": target, "content": "x", "sendAt": at(start)}),
        ),
    ] {
        refused(
            server
                .action(&b, &b.agent_id, "scheduled-message", action, input)
                .await,
            404,
            "not_found",
        );
    }
    // A channel the other agent does not belong to is out of reach too.
    let private = json!({"kind": "channel", "channelId": a.private_channel_id});
    refused(
        server
            .action(
                &a,
                &a.other_agent_id,
                "scheduled-message",
                "create",
                json!({"target": private, "content": "x", "sendAt": at(start)}),
            )
            .await,
        404,
        "not_found",
    );
}

/// A tool call of `agent_id` in `workspace` straight to the server.
async fn tool(
    server: &TestServer,
    workspace: &Workspace,
    agent_id: &str,
    tool: &str,
    input: Value,
) -> Value {
    let path = format!(
        "/runtime/servers/{}/agents/{agent_id}/tools/{tool}",
        workspace.workspace_id
    );
    ok(server
        .post(&path, Some(&workspace.device_credential), &input)
        .await)
}

/// Every message of a history read in pages of two: (id, reactions, attachment names).
async fn history(
    server: &TestServer,
    workspace: &Workspace,
    target: &str,
) -> Vec<(String, Value, Vec<String>)> {
    let mut messages = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut input = json!({"target": target, "limit": 2});
        if !cursor.is_null() {
            input["cursor"] = cursor;
        }
        let page = tool(
            server,
            workspace,
            &workspace.agent_id,
            "message_history_read",
            input,
        )
        .await;
        for message in page["messages"].as_array().unwrap() {
            let names = message["attachments"].as_array().unwrap().iter();
            messages.push((
                message["id"].as_str().unwrap().to_string(),
                message["reactions"].clone(),
                names
                    .map(|a| a["name"].as_str().unwrap().to_string())
                    .collect(),
            ));
        }
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            return messages;
        }
    }
}

/// A thread's history pages through its replies alone, newest first, and an agent outside the
/// thread's channel reads it exactly as a thread that does not exist (the page's own statement
/// checks the membership, on either backend).
#[tokio::test]
async fn a_threads_history_is_its_replies_and_hidden_from_a_non_member() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let thread = format!("thread:{}", a.private_thread_id);
    let mut replies = Vec::new();
    for n in 0..5 {
        for target in [thread.clone(), format!("channel:{}", a.private_channel_id)] {
            let sent = tool(
                &server,
                &a,
                &a.agent_id,
                "message_send",
                json!({"target": target, "content": format!("message {n}")}),
            )
            .await;
            if target == thread {
                replies.push(sent["message"]["id"].as_str().unwrap().to_string());
            }
        }
    }
    replies.reverse();
    let read: Vec<String> = history(&server, &a, &thread)
        .await
        .into_iter()
        .map(|(id, ..)| id)
        .collect();
    assert_eq!(read, replies);
    let missing = "thr_00000000000000000000000000";
    let mut answers = Vec::new();
    for (agent, thread_id) in [
        (&a.other_agent_id, a.private_thread_id.as_str()),
        (&a.agent_id, missing),
    ] {
        let path = format!(
            "/runtime/servers/{}/agents/{agent}/tools/message_history_read",
            a.workspace_id
        );
        let target = format!("thread:{thread_id}");
        let answer = server
            .post(
                &path,
                Some(&a.device_credential),
                &json!({"target": target}),
            )
            .await;
        answers.push(answer.1.to_string().replace(thread_id, "ID"));
        refused(answer, 404, "not_found");
    }
    assert_eq!(answers[0], answers[1]);
}

/// A history page shows each message's own reactions (as the reader sees them) and attachments,
/// through every add, repeated add, removal and removal of nothing.
#[tokio::test]
async fn history_shows_each_messages_reactions_and_attachments() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let target = format!("channel:{}", a.channel_id);
    let mut ids = Vec::new();
    for content in ["one", "two", "three"] {
        let sent = tool(
            &server,
            &a,
            &a.agent_id,
            "message_send",
            json!({"target": target, "content": content}),
        )
        .await;
        ids.push(sent["message"]["id"].as_str().unwrap().to_string());
    }
    let posted = server
        .admin(
            &format!("/admin/workspaces/{}/messages", a.workspace_id),
            json!({"authorHumanId": a.human_id, "channelId": a.channel_id, "content": "four",
                   "attachments": [{"name": "a.txt", "mediaType": "text/plain", "text": "a"},
                                   {"name": "b.txt", "mediaType": "text/plain", "text": "b"}]}),
        )
        .await;
    ids.push(posted["messageId"].as_str().unwrap().to_string());
    let react = |agent: &str, id: &str, emoji: &str, add: bool| {
        let (agent, id, emoji) = (agent.to_string(), id.to_string(), emoji.to_string());
        let (server, a) = (&server, &a);
        async move {
            let name = if add {
                "reaction_add"
            } else {
                "reaction_remove"
            };
            tool(
                server,
                a,
                &agent,
                name,
                json!({"messageId": id, "emoji": emoji}),
            )
            .await;
        }
    };
    let expected = |reactions: [Value; 4]| -> Vec<(String, Value, Vec<String>)> {
        let mut rows: Vec<_> = ids
            .iter()
            .zip(reactions)
            .zip([
                vec![],
                vec![],
                vec![],
                vec!["a.txt".to_string(), "b.txt".to_string()],
            ])
            .map(|((id, reactions), names)| (id.clone(), reactions, names))
            .collect();
        rows.reverse();
        rows
    };
    assert_eq!(
        history(&server, &a, &target).await,
        expected([json!([]), json!([]), json!([]), json!([])])
    );

    react(&a.agent_id, &ids[0], ":+1:", true).await;
    react(&a.other_agent_id, &ids[0], ":+1:", true).await;
    react(&a.agent_id, &ids[0], ":+1:", true).await;
    react(&a.other_agent_id, &ids[2], ":tada:", true).await;
    react(&a.agent_id, &ids[3], ":eyes:", true).await;
    assert_eq!(
        history(&server, &a, &target).await,
        expected([
            json!([{"emoji": ":+1:", "count": 2, "mine": true}]),
            json!([]),
            json!([{"emoji": ":tada:", "count": 1, "mine": false}]),
            json!([{"emoji": ":eyes:", "count": 1, "mine": true}]),
        ])
    );

    react(&a.agent_id, &ids[0], ":+1:", false).await;
    react(&a.other_agent_id, &ids[0], ":+1:", false).await;
    react(&a.other_agent_id, &ids[0], ":+1:", false).await;
    react(&a.other_agent_id, &ids[2], ":tada:", false).await;
    assert_eq!(
        history(&server, &a, &target).await,
        expected([
            json!([]),
            json!([]),
            json!([]),
            json!([{"emoji": ":eyes:", "count": 1, "mine": true}])
        ])
    );
    react(&a.other_agent_id, &ids[0], ":+1:", true).await;
    assert_eq!(
        history(&server, &a, &target).await,
        expected([
            json!([{"emoji": ":+1:", "count": 1, "mine": false}]),
            json!([]),
            json!([]),
            json!([{"emoji": ":eyes:", "count": 1, "mine": true}]),
        ])
    );
}

/// One member adding and removing the same reaction at once, many times over: every call
/// succeeds (on PostgreSQL both take the message row before the reaction's, so the count trigger
/// cannot deadlock them), and the page afterwards shows exactly what is stored.
#[tokio::test]
async fn concurrent_adds_and_removes_of_one_reaction_all_succeed() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let target = format!("channel:{}", a.channel_id);
    let sent = tool(
        &server,
        &a,
        &a.agent_id,
        "message_send",
        json!({"target": target, "content": "race"}),
    )
    .await;
    let id = sent["message"]["id"].as_str().unwrap().to_string();
    let path = |name: &str| {
        format!(
            "/runtime/servers/{}/agents/{}/tools/{name}",
            a.workspace_id, a.agent_id
        )
    };
    let (add, remove) = (path("reaction_add"), path("reaction_remove"));
    let input = json!({"messageId": id, "emoji": ":+1:"});
    for _ in 0..20 {
        let (added, removed) = tokio::join!(
            server.post(&add, Some(&a.device_credential), &input),
            server.post(&remove, Some(&a.device_credential), &input),
        );
        assert_eq!((added.0, removed.0), (200, 200), "{added:?} {removed:?}");
    }
    tool(&server, &a, &a.agent_id, "reaction_remove", input.clone()).await;
    assert_eq!(
        history(&server, &a, &target).await,
        [(id.clone(), json!([]), vec![])]
    );
    tool(&server, &a, &a.agent_id, "reaction_add", input.clone()).await;
    assert_eq!(
        history(&server, &a, &target).await,
        [(
            id,
            json!([{"emoji": ":+1:", "count": 1, "mine": true}]),
            vec![]
        )]
    );
}

/// Every action's canonical example, sent to the server: the answer is a well-formed envelope
/// (output schema on success, the error schema otherwise) and never an internal error.
#[tokio::test]
async fn every_catalog_example_gets_a_well_formed_answer() {
    let server = TestServer::start().await;
    let w: Workspace = server.workspace("acme").await;
    let catalog = Validators::new().unwrap();
    let error_schema: Value = serde_json::from_str(ERROR_SCHEMA).unwrap();
    let error_validator = jsonschema::draft202012::options()
        .build(&error_schema)
        .unwrap();
    for action in ACTIONS {
        let example: Value = serde_json::from_str(action.example).unwrap();
        let (status, body) = server
            .action(&w, &w.agent_id, action.domain, action.action, example)
            .await;
        let key = format!("{}.{}", action.domain, action.action);
        assert!(status < 500, "{key}: {status} {body}");
        if status == 200 {
            assert_eq!(
                catalog.output_violations(Output::Action(action.id), &body["data"]),
                vec![],
                "{key}"
            );
        } else {
            assert!(error_validator.is_valid(&body), "{key}: {body}");
        }
    }
}
