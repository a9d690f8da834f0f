//! Idempotent mutations on the server: replay, payload mismatch, an in-flight duplicate,
//! selector disagreement, scope, and retention.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use agentteam::server::store::Claim;

use crate::support::{TestServer, Workspace};

async fn count_tasks(server: &TestServer, w: &Workspace) -> usize {
    let (status, body) = server
        .action(
            w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": {"kind": "thread", "threadId": w.thread_id}, "limit": 100}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["tasks"].as_array().unwrap().len()
}

/// `POST` a runtime action with extra headers; returns status and the raw body text.
async fn post_with_headers(
    server: &TestServer,
    w: &Workspace,
    action: &str,
    input: &Value,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut request = server
        .client
        .post(format!(
            "{}/runtime/servers/{}/agents/{}/actions/task/{action}",
            server.base_url, w.workspace_id, w.agent_id
        ))
        .bearer_auth(&w.device_credential)
        .json(input);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn create_input(w: &Workspace, title: &str, request_id: &str) -> Value {
    json!({"location": {"kind": "thread", "threadId": w.thread_id}, "title": title, "requestId": request_id})
}

#[tokio::test]
async fn a_repeated_create_replays_the_first_response_and_creates_one_row() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let input = create_input(&w, "once", "req-create-0001");
    let first = post_with_headers(&server, &w, "create", &input, &[]).await;
    let second = post_with_headers(
        &server,
        &w,
        "create",
        &input,
        &[
            ("Idempotency-Key", "\"req-create-0001\""),
            ("X-Request-ID", "req-create-0001"),
        ],
    )
    .await;
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(first, second, "the replay is byte-identical");
    assert_eq!(count_tasks(&server, &w).await, 1);

    // A header-only selector is the same key.
    let without_body_key =
        json!({"location": {"kind": "thread", "threadId": w.thread_id}, "title": "header only"});
    let a = post_with_headers(
        &server,
        &w,
        "create",
        &without_body_key,
        &[("Idempotency-Key", "req-header-0001")],
    )
    .await;
    let b = post_with_headers(
        &server,
        &w,
        "create",
        &without_body_key,
        &[("Idempotency-Key", "req-header-0001")],
    )
    .await;
    assert_eq!(a, b);
    assert_eq!(count_tasks(&server, &w).await, 2);
}

#[tokio::test]
async fn the_same_key_with_another_payload_is_refused() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (status, _) = post_with_headers(
        &server,
        &w,
        "create",
        &create_input(&w, "first", "req-mismatch-01"),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = post_with_headers(
        &server,
        &w,
        "create",
        &create_input(&w, "second", "req-mismatch-01"),
        &[],
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("idempotency_key_reused"));
    assert_eq!(count_tasks(&server, &w).await, 1);
}

#[tokio::test]
async fn a_duplicate_while_the_first_is_running_is_a_conflict() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let input = create_input(&w, "in flight", "req-inflight-01");
    // The first request has claimed the key and not finished yet.
    let fingerprint = Sha256::digest(serde_json::to_vec(&input).unwrap());
    let now = server.state.clock().now_ms();
    let claim = server
        .state
        .store()
        .claim_idempotent(
            agentteam::server::store::Principal::Agent(&w.agent_id),
            "task.create",
            "req-inflight-01",
            &fingerprint,
            now,
            0,
        )
        .await
        .unwrap();
    assert_eq!(claim, Claim::Acquired);
    let (status, body) = post_with_headers(&server, &w, "create", &input, &[]).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("idempotency_in_progress"));
    assert_eq!(count_tasks(&server, &w).await, 0);
}

#[tokio::test]
async fn a_claim_abandoned_past_its_lease_is_taken_over_once() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let input = create_input(&w, "orphaned", "req-orphan-0001");
    // A process claimed the key and died before finishing it.
    let fingerprint = Sha256::digest(serde_json::to_vec(&input).unwrap());
    let store = server.state.store();
    let claim = |now: i64| {
        store.claim_idempotent(
            agentteam::server::store::Principal::Agent(&w.agent_id),
            "task.create",
            "req-orphan-0001",
            &fingerprint,
            now,
            0,
        )
    };
    let now = server.state.clock().now_ms();
    assert_eq!(claim(now).await.unwrap(), Claim::Acquired);
    // Within the lease the key is still in progress.
    let lease = agentteam::server::store::RUNNING_LEASE_MS;
    assert_eq!(claim(now + lease - 1).await.unwrap(), Claim::InProgress);
    // Past it, a retry takes the key over and runs once; the next one replays it.
    server
        .state
        .clock()
        .advance(Duration::from_millis(lease as u64));
    let (status, first) = post_with_headers(&server, &w, "create", &input, &[]).await;
    assert_eq!(status, 200, "{first}");
    let (status, again) = post_with_headers(&server, &w, "create", &input, &[]).await;
    assert_eq!((status, again), (200, first));
    assert_eq!(count_tasks(&server, &w).await, 1);
}

#[tokio::test]
async fn the_scheduler_pass_prunes_expired_keys_in_bounded_batches() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let store = server.state.store();
    let now = server.state.clock().now_ms();
    let max = agentteam::server::store::MAX_PRUNED_PER_PASS as usize;
    for i in 0..max + 5 {
        let claim = store
            .claim_idempotent(
                agentteam::server::store::Principal::Agent(&w.agent_id),
                "task.create",
                &format!("req-old-{i:06}"),
                b"f",
                now,
                0,
            )
            .await
            .unwrap();
        assert_eq!(claim, Claim::Acquired);
    }
    assert_eq!(
        server.state.run_scheduler_pass().await.unwrap().keys_pruned,
        0
    );
    server
        .state
        .clock()
        .advance(Duration::from_secs(24 * 3600 + 1));
    assert_eq!(
        server.state.run_scheduler_pass().await.unwrap().keys_pruned,
        max as u64
    );
    assert_eq!(
        server.state.run_scheduler_pass().await.unwrap().keys_pruned,
        5
    );
    assert_eq!(
        server.state.run_scheduler_pass().await.unwrap().keys_pruned,
        0
    );
}

#[tokio::test]
async fn disagreeing_duplicate_or_malformed_selectors_apply_nothing() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let input = create_input(&w, "never", "req-body-00001");
    let long = "a".repeat(129);
    type Case<'a> = (&'a str, Value, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (
            "header disagrees with body",
            input.clone(),
            vec![("Idempotency-Key", "req-other-00001")],
        ),
        (
            "two headers disagree",
            json!({"location": {"kind": "thread", "threadId": w.thread_id}, "title": "x"}),
            vec![
                ("Idempotency-Key", "req-one-000001"),
                ("X-Request-ID", "req-two-000002"),
            ],
        ),
        (
            "malformed header",
            input.clone(),
            vec![("X-Request-ID", "bad key!")],
        ),
        (
            "oversized header",
            json!({"location": {"kind": "thread", "threadId": w.thread_id}, "title": "x"}),
            vec![("Idempotency-Key", long.as_str())],
        ),
    ];
    for (name, input, headers) in cases {
        let (status, body) = post_with_headers(&server, &w, "create", &input, &headers).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert!(body.contains("validation_failed"), "{name}: {body}");
    }
    // A malformed body selector is refused by the schema, before anything else.
    let (status, _) =
        post_with_headers(&server, &w, "create", &create_input(&w, "x", "short"), &[]).await;
    assert_eq!(status, 400);
    assert_eq!(count_tasks(&server, &w).await, 0);
}

#[tokio::test]
async fn keys_are_scoped_by_agent_and_action_and_expire_after_24_hours() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (status, created) = post_with_headers(
        &server,
        &w,
        "create",
        &create_input(&w, "scoped", "req-scoped-0001"),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    let task_id = serde_json::from_str::<Value>(&created).unwrap()["data"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Same key, another action: an independent request.
    let (status, body) = post_with_headers(
        &server,
        &w,
        "claim",
        &json!({"taskId": task_id, "requestId": "req-scoped-0001"}),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Same key, another agent: an independent request.
    let (status, body) = server
        .action(
            &w,
            &w.other_agent_id,
            "task",
            "create",
            create_input(&w, "scoped", "req-scoped-0001"),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(count_tasks(&server, &w).await, 2);

    // Within 24 hours the key replays; after, it is a new request.
    server.state.clock().advance(Duration::from_secs(23 * 3600));
    let (_, replay) = post_with_headers(
        &server,
        &w,
        "create",
        &create_input(&w, "scoped", "req-scoped-0001"),
        &[],
    )
    .await;
    assert_eq!(replay, created);
    server.state.clock().advance(Duration::from_secs(3600 + 1));
    let (status, fresh) = post_with_headers(
        &server,
        &w,
        "create",
        &create_input(&w, "scoped", "req-scoped-0001"),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_ne!(fresh, created);
    assert_eq!(count_tasks(&server, &w).await, 3);
}

#[tokio::test]
async fn an_action_error_leaves_the_key_free_and_the_repeat_runs_anew() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (_, created) = post_with_headers(
        &server,
        &w,
        "create",
        &create_input(&w, "to cancel", "req-err-000001"),
        &[],
    )
    .await;
    let task_id = serde_json::from_str::<Value>(&created).unwrap()["data"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let complete = json!({"taskId": task_id, "requestId": "req-err-000002"});
    let first = post_with_headers(&server, &w, "complete", &complete, &[]).await;
    assert_eq!(first.0, 409, "{}", first.1);
    // Nothing was applied, so nothing was recorded: once the task is claimed, the same request
    // with the same key runs and succeeds, and its success is the key's answer from then on.
    let (status, _) = server
        .action(&w, &w.agent_id, "task", "claim", json!({"taskId": task_id}))
        .await;
    assert_eq!(status, 200);
    let second = post_with_headers(&server, &w, "complete", &complete, &[]).await;
    assert_eq!(second.0, 200, "{}", second.1);
    assert_eq!(
        post_with_headers(&server, &w, "complete", &complete, &[]).await,
        second
    );
}
