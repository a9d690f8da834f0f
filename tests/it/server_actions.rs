//! The reference server's runtime action API over real HTTP and a real SQLite file: the task
//! lifecycle, reviews, the authorization of every locator, and the request pipeline's refusals.

use serde_json::{Value, json};

use crate::support::{TestServer, Workspace};

fn thread(workspace: &Workspace) -> Value {
    json!({"kind": "thread", "threadId": workspace.thread_id})
}

#[track_caller]
fn ok(response: (u16, Value)) -> Value {
    assert_eq!(response.0, 200, "expected success, got {}", response.1);
    assert_eq!(response.1["ok"], true);
    response.1["data"].clone()
}

#[track_caller]
fn refused(response: (u16, Value), status: u16, code: &str) -> Value {
    assert_eq!(
        (response.0, response.1["error"]["code"].as_str()),
        (status, Some(code)),
        "{}",
        response.1
    );
    assert_eq!(response.1["ok"], false);
    response.1["error"].clone()
}

async fn create_task(server: &TestServer, workspace: &Workspace, title: &str) -> String {
    let data = ok(server
        .action(
            workspace,
            &workspace.agent_id,
            "task",
            "create",
            json!({"location": thread(workspace), "title": title}),
        )
        .await);
    data["task"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn task_lifecycle_create_claim_complete_get() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let created = ok(server
        .action(
            &w,
            &w.agent_id,
            "task",
            "create",
            json!({"location": thread(&w), "title": "Ship it", "description": "all of it"}),
        )
        .await);
    let task = &created["task"];
    assert_eq!(
        (task["status"].as_str(), task["revision"].as_i64()),
        (Some("open"), Some(1))
    );
    assert_eq!(task["location"], thread(&w));
    assert_eq!(task["createdByAgentId"], w.agent_id);
    let id = task["id"].as_str().unwrap();

    let claimed = ok(server
        .action(&w, &w.agent_id, "task", "claim", json!({"taskId": id}))
        .await);
    assert_eq!(
        (
            claimed["task"]["status"].as_str(),
            claimed["task"]["assigneeAgentId"].as_str()
        ),
        (Some("claimed"), Some(w.agent_id.as_str()))
    );
    refused(
        server
            .action(
                &w,
                &w.other_agent_id,
                "task",
                "complete",
                json!({"taskId": id}),
            )
            .await,
        409,
        "invalid_state",
    );
    let done = ok(server
        .action(
            &w,
            &w.agent_id,
            "task",
            "complete",
            json!({"taskId": id, "result": "shipped"}),
        )
        .await);
    assert_eq!(
        (
            done["task"]["status"].as_str(),
            done["task"]["revision"].as_i64()
        ),
        (Some("completed"), Some(3))
    );

    let read = ok(server
        .action(&w, &w.other_agent_id, "task", "get", json!({"taskId": id}))
        .await);
    assert_eq!(read["task"], done["task"]);
    for action in ["complete", "cancel", "claim"] {
        refused(
            server
                .action(&w, &w.agent_id, "task", action, json!({"taskId": id}))
                .await,
            409,
            "invalid_state",
        );
    }
}

#[tokio::test]
async fn a_cancelled_task_cannot_be_completed_and_open_tasks_must_be_claimed_first() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let open = create_task(&server, &w, "open one").await;
    let error = refused(
        server
            .action(&w, &w.agent_id, "task", "complete", json!({"taskId": open}))
            .await,
        409,
        "invalid_state",
    );
    assert!(error["message"].as_str().unwrap().contains("claim it"));

    let cancelled = create_task(&server, &w, "to cancel").await;
    ok(server
        .action(
            &w,
            &w.agent_id,
            "task",
            "claim",
            json!({"taskId": cancelled}),
        )
        .await);
    let data = ok(server
        .action(
            &w,
            &w.agent_id,
            "task",
            "cancel",
            json!({"taskId": cancelled, "reason": "duplicate"}),
        )
        .await);
    assert_eq!(
        (
            data["task"]["status"].as_str(),
            data["task"]["cancelReason"].as_str()
        ),
        (Some("cancelled"), Some("duplicate"))
    );
    let error = refused(
        server
            .action(
                &w,
                &w.agent_id,
                "task",
                "complete",
                json!({"taskId": cancelled}),
            )
            .await,
        409,
        "invalid_state",
    );
    assert!(error["message"].as_str().unwrap().contains("cancelled"));
}

#[tokio::test]
async fn update_checks_the_expected_revision() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let id = create_task(&server, &w, "first title").await;
    let updated = ok(server
        .action(
            &w,
            &w.agent_id,
            "task",
            "update",
            json!({"taskId": id, "title": "second title", "expectedRevision": 1}),
        )
        .await);
    assert_eq!(
        (
            updated["task"]["title"].as_str(),
            updated["task"]["revision"].as_i64()
        ),
        (Some("second title"), Some(2))
    );
    refused(
        server
            .action(
                &w,
                &w.agent_id,
                "task",
                "update",
                json!({"taskId": id, "title": "third", "expectedRevision": 1}),
            )
            .await,
        409,
        "revision_mismatch",
    );
    refused(
        server
            .action(&w, &w.agent_id, "task", "update", json!({"taskId": id}))
            .await,
        400,
        "validation_failed",
    );
}

#[tokio::test]
async fn review_add_lives_in_a_visible_thread_and_names_only_its_tasks() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let task_id = create_task(&server, &w, "reviewed").await;
    let review = ok(server.action(&w, &w.other_agent_id, "review", "add", json!({"threadId": w.thread_id, "taskId": task_id, "verdict": "requestChanges", "body": "needs a test"})).await);
    assert_eq!(review["review"]["status"], "open");
    assert_eq!(review["review"]["authorAgentId"], w.other_agent_id);
    assert_eq!(review["review"]["taskId"], task_id.as_str());

    // A task of another thread is not "in this thread".
    let elsewhere = ok(server.action(&w, &w.agent_id, "task", "create", json!({"location": {"kind": "thread", "threadId": w.private_thread_id}, "title": "private"})).await);
    let elsewhere_id = elsewhere["task"]["id"].as_str().unwrap();
    refused(server.action(&w, &w.agent_id, "review", "add", json!({"threadId": w.thread_id, "taskId": elsewhere_id, "verdict": "comment", "body": "x"})).await, 404, "not_found");
    // The other agent is not a member of the private thread's channel.
    refused(
        server
            .action(
                &w,
                &w.other_agent_id,
                "review",
                "add",
                json!({"threadId": w.private_thread_id, "verdict": "approve", "body": "x"}),
            )
            .await,
        404,
        "not_found",
    );
}

/// Locators of another workspace, or of a channel the agent is not in, are invisible: the same
/// `not_found` as an id that does not exist, for every task and review action.
#[tokio::test]
async fn locators_outside_the_agents_reach_are_refused_in_every_domain() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let b = server.workspace("globex").await;
    let a_task = create_task(&server, &a, "acme task").await;
    let private = ok(server.action(&a, &a.agent_id, "task", "create", json!({"location": {"kind": "channel", "channelId": a.private_channel_id}, "title": "private"})).await);
    let private_task = private["task"]["id"].as_str().unwrap().to_string();

    let cases: Vec<(&Workspace, &str, &str, &str, Value)> = vec![
        // Workspace B's agent naming workspace A's locators.
        (
            &b,
            b.agent_id.as_str(),
            "task",
            "get",
            json!({"taskId": a_task}),
        ),
        (
            &b,
            b.agent_id.as_str(),
            "task",
            "claim",
            json!({"taskId": a_task}),
        ),
        (
            &b,
            b.agent_id.as_str(),
            "task",
            "complete",
            json!({"taskId": a_task}),
        ),
        (
            &b,
            b.agent_id.as_str(),
            "task",
            "cancel",
            json!({"taskId": a_task}),
        ),
        (
            &b,
            b.agent_id.as_str(),
            "task",
            "update",
            json!({"taskId": a_task, "title": "x"}),
        ),
        (
            &b,
            b.agent_id.as_str(),
            "task",
            "create",
            json!({"location": thread(&a), "title": "x"}),
        ),
        (
            &b,
            b.agent_id.as_str(),
            "task",
            "list",
            json!({"location": thread(&a)}),
        ),
        (
            &b,
            b.agent_id.as_str(),
            "review",
            "add",
            json!({"threadId": a.thread_id, "verdict": "comment", "body": "x"}),
        ),
        // Workspace A's other agent naming a channel it is not a member of.
        (
            &a,
            a.other_agent_id.as_str(),
            "task",
            "get",
            json!({"taskId": private_task}),
        ),
        (
            &a,
            a.other_agent_id.as_str(),
            "task",
            "cancel",
            json!({"taskId": private_task}),
        ),
        (
            &a,
            a.other_agent_id.as_str(),
            "task",
            "list",
            json!({"location": {"kind": "channel", "channelId": a.private_channel_id}}),
        ),
        (
            &a,
            a.other_agent_id.as_str(),
            "task",
            "create",
            json!({"location": {"kind": "thread", "threadId": a.private_thread_id}, "title": "x"}),
        ),
        // Ids that exist nowhere look exactly the same.
        (
            &a,
            a.agent_id.as_str(),
            "task",
            "get",
            json!({"taskId": "task_00000000000000"}),
        ),
    ];
    for (workspace, agent, domain, action, input) in cases {
        refused(
            server
                .action(workspace, agent, domain, action, input.clone())
                .await,
            404,
            "not_found",
        );
    }
    // Nothing changed in workspace A.
    let still = ok(server
        .action(&a, &a.agent_id, "task", "get", json!({"taskId": a_task}))
        .await);
    assert_eq!(
        (
            still["task"]["status"].as_str(),
            still["task"]["revision"].as_i64()
        ),
        (Some("open"), Some(1))
    );
}

/// A device acts only for agents its human owns in its own workspace; every authentication
/// failure is the same bytes.
#[tokio::test]
async fn authentication_failures_are_one_uniform_forbidden() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let b = server.workspace("globex").await;
    let path = |workspace: &str, agent: &str| {
        format!("/runtime/servers/{workspace}/agents/{agent}/actions/task/get")
    };
    let input = json!({"taskId": "task_00000000000000"});
    let (device_id, _) = a.device_credential.split_once('.').unwrap();
    let revoked = {
        let credential = server
            .admin(
                &format!("/admin/workspaces/{}/devices", a.workspace_id),
                json!({"humanId": a.human_id}),
            )
            .await["credential"]
            .as_str()
            .unwrap()
            .to_string();
        let id = credential.split_once('.').unwrap().0.to_string();
        // Authenticated once before the revocation (on SQLite the answer is now cached), then
        // refused at the very next request after it.
        let (status, body) = server
            .post(
                &path(&a.workspace_id, &a.agent_id),
                Some(&credential),
                &input,
            )
            .await;
        assert_eq!(status, 404, "the live device was not authenticated: {body}");
        assert!(server.state.store().revoke_device(&id, 0).await.unwrap());
        credential
    };
    let cases: Vec<(String, Option<String>)> = vec![
        (path(&a.workspace_id, &a.agent_id), None),
        (
            path(&a.workspace_id, &a.agent_id),
            Some("not-a-credential".into()),
        ),
        (
            path(&a.workspace_id, &a.agent_id),
            Some(format!("{device_id}.wrong-secret")),
        ),
        (path(&a.workspace_id, &a.agent_id), Some(revoked)),
        (
            path(&a.workspace_id, &a.agent_id),
            Some(server.operator_token.clone()),
        ),
        (
            path(&a.workspace_id, &b.agent_id),
            Some(a.device_credential.clone()),
        ),
        (
            path(&b.workspace_id, &b.agent_id),
            Some(a.device_credential.clone()),
        ),
    ];
    let mut bodies = Vec::new();
    for (path, bearer) in cases {
        let response = server
            .client
            .post(format!("{}{path}", server.base_url))
            .json(&input);
        let response = match bearer {
            Some(bearer) => response.bearer_auth(bearer),
            None => response,
        }
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 403, "{path}");
        bodies.push(response.bytes().await.unwrap());
    }
    assert!(
        bodies.windows(2).all(|pair| pair[0] == pair[1]),
        "403 bodies differ: {bodies:?}"
    );
}

#[tokio::test]
async fn the_request_pipeline_refuses_bad_bodies_with_typed_errors() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let path = format!(
        "/runtime/servers/{}/agents/{}/actions/task/get",
        w.workspace_id, w.agent_id
    );
    let credential = Some(w.device_credential.as_str());

    let error = refused(
        server
            .post(
                &path,
                credential,
                &json!({"taskId": "task_00000000000000", "extra": 1}),
            )
            .await,
        400,
        "validation_failed",
    );
    assert_eq!(error["details"][0]["path"], "/extra");
    let error = refused(
        server.post(&path, credential, &json!({"taskId": 7})).await,
        400,
        "validation_failed",
    );
    assert_eq!(error["details"][0]["path"], "/taskId");
    refused(
        server.post(&path, credential, &json!({})).await,
        400,
        "validation_failed",
    );
    let error = refused(
        server
            .post_raw(
                &path,
                credential,
                br#"{"taskId": "task_00000000000000", "taskId": "task_11111111111111"}"#.to_vec(),
            )
            .await,
        400,
        "invalid_request",
    );
    assert!(error["message"].as_str().unwrap().contains("duplicate key"));
    refused(
        server
            .post_raw(
                &path,
                credential,
                br#"{"taskId": "task_00000000000000"} []"#.to_vec(),
            )
            .await,
        400,
        "invalid_request",
    );
    refused(
        server
            .post_raw(&path, credential, vec![b' '; 1024 * 1024 + 1])
            .await,
        413,
        "payload_too_large",
    );
    // U+0000 is valid JSON that no field means (and PostgreSQL cannot store): a client error on
    // every backend, never a 500, and nothing is written.
    let create = format!(
        "/runtime/servers/{}/agents/{}/actions/task/create",
        w.workspace_id, w.agent_id
    );
    let body = format!(
        r#"{{"location": {{"kind": "thread", "threadId": "{}"}}, "title": "a\u0000b"}}"#,
        w.thread_id
    );
    let error = refused(
        server
            .post_raw(&create, credential, body.into_bytes())
            .await,
        400,
        "invalid_request",
    );
    assert!(error["message"].as_str().unwrap().contains("U+0000"));
    let listed = ok(server
        .action(
            &w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": {"kind": "thread", "threadId": w.thread_id}}),
        )
        .await);
    assert_eq!(listed["tasks"], json!([]));
    let unknown = format!(
        "/runtime/servers/{}/agents/{}/actions/task/explode",
        w.workspace_id, w.agent_id
    );
    refused(
        server.post(&unknown, credential, &json!({})).await,
        404,
        "unknown_action",
    );
}

#[tokio::test]
async fn legacy_snake_case_aliases_are_accepted_but_never_beside_their_canonical_name() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let id = create_task(&server, &w, "aliased").await;
    let data = ok(server
        .action(&w, &w.agent_id, "task", "get", json!({"task_id": id}))
        .await);
    assert_eq!(data["task"]["id"], id.as_str());
    assert!(
        !data.to_string().contains("task_id\""),
        "responses are canonical only"
    );
    refused(
        server
            .action(
                &w,
                &w.agent_id,
                "task",
                "get",
                json!({"task_id": id, "taskId": id}),
            )
            .await,
        400,
        "validation_failed",
    );
}
