//! The daemon's one forwarding rule against a real server: the answer as the server wrote it, the
//! contract's errors, idempotency forwarding, and the classification of an unreachable server.

use agentteam::client::{CallContext, Route, ServerClient};
use agentteam::contract::ActionId;
use agentteam::contract::error::ErrorCode;
use serde_json::{Value, json};

use crate::support::TestServer;

fn data(answer: &agentteam::client::ServerAnswer) -> Value {
    let envelope: Value = serde_json::from_str(answer.body()).unwrap();
    assert_eq!(envelope["ok"], true, "{envelope}");
    envelope["data"].clone()
}

fn body(value: Value) -> Vec<u8> {
    serde_json::to_vec(&value).unwrap()
}

#[tokio::test]
async fn a_forwarded_call_answers_as_the_server_wrote_it_and_errors_keep_their_code() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let client = ServerClient::new(&server.base_url, w.device_credential.clone(), None);
    let ctx = CallContext {
        server_id: w.workspace_id.clone(),
        agent_id: w.agent_id.clone(),
        idempotency_key: None,
    };
    let create = json!({
        "location": { "kind": "thread", "threadId": w.thread_id },
        "title": "forwarded",
    });
    let created = client
        .forward(&Route::Action(ActionId::TaskCreate), &ctx, body(create))
        .await
        .unwrap();
    let task = data(&created)["task"].clone();
    assert_eq!(task["title"], "forwarded");
    // The reference server's envelope is the frame the daemon checks in place.
    assert!(created.written().is_some(), "{}", created.body());

    let fetched = client
        .forward(
            &Route::Action(ActionId::TaskGet),
            &ctx,
            body(json!({ "taskId": task["id"] })),
        )
        .await
        .unwrap();
    assert_eq!(data(&fetched)["task"], task);

    let missing = client
        .forward(
            &Route::Action(ActionId::TaskGet),
            &ctx,
            body(json!({ "taskId": "task_00000000000000" })),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(missing.code, ErrorCode::NotFound);
    // The credential never shows in the client's debug output.
    assert!(!format!("{client:?}").contains(&w.device_credential));
}

#[tokio::test]
async fn the_idempotency_key_is_forwarded_as_headers() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let client = ServerClient::new(&server.base_url, w.device_credential.clone(), None);
    let ctx = CallContext {
        server_id: w.workspace_id.clone(),
        agent_id: w.agent_id.clone(),
        idempotency_key: Some("req-client-0001".into()),
    };
    let create = |title: &str, request_id: Option<&str>| {
        let mut input = json!({
            "location": { "kind": "thread", "threadId": w.thread_id },
            "title": title,
        });
        if let Some(request_id) = request_id {
            input["requestId"] = json!(request_id);
        }
        body(input)
    };
    let route = Route::Action(ActionId::TaskCreate);
    let first = client
        .forward(&route, &ctx, create("once", Some("req-client-0001")))
        .await
        .unwrap();
    let again = client
        .forward(&route, &ctx, create("once", Some("req-client-0001")))
        .await
        .unwrap();
    assert_eq!(first.body(), again.body(), "the repeat is the first answer");
    // The header alone carries the key too: another payload under it is refused.
    let mismatch = client
        .forward(&route, &ctx, create("other", None))
        .await
        .err()
        .unwrap();
    assert_eq!(mismatch.code, ErrorCode::IdempotencyKeyReused);
}

#[tokio::test]
async fn an_unreachable_server_is_classified() {
    // Bind and drop a listener to get a port with nothing behind it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = ServerClient::new(&format!("http://127.0.0.1:{port}"), "dev_x.y".into(), None);
    let ctx = CallContext {
        server_id: "wsp_00000000".into(),
        agent_id: "agt_00000000".into(),
        idempotency_key: None,
    };
    let error = client
        .forward(
            &Route::Action(ActionId::TaskGet),
            &ctx,
            body(json!({ "taskId": "task_00000000000000" })),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(error.code, ErrorCode::UpstreamUnavailable);
    assert!(
        !error.message.contains("127.0.0.1"),
        "internals stay out of the message: {}",
        error.message
    );
}
