//! The generated typed client against a real server: typed calls, typed errors, idempotency
//! forwarding, and the classification of an unreachable server.

use agentteam::client::{CallContext, ServerClient};
use agentteam::contract::ActionHandler;
use agentteam::contract::error::ErrorCode;
use agentteam::contract::types::{TaskCreateInput, TaskGetInput, TaskLocation};

use crate::support::TestServer;

fn create_input(thread_id: &str, title: &str, request_id: Option<&str>) -> TaskCreateInput {
    TaskCreateInput {
        location: TaskLocation::Thread {
            thread_id: thread_id.parse().unwrap(),
        },
        title: title.parse().unwrap(),
        description: None,
        request_id: request_id.map(|r| r.parse().unwrap()),
    }
}

#[tokio::test]
async fn typed_calls_round_trip_and_errors_stay_typed() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let client = ServerClient::new(&server.base_url, w.device_credential.clone(), None);
    let ctx = CallContext {
        server_id: w.workspace_id.clone(),
        agent_id: w.agent_id.clone(),
        idempotency_key: None,
    };

    let created = client
        .task_create(&ctx, create_input(&w.thread_id, "typed", None))
        .await
        .unwrap();
    let fetched = client
        .task_get(
            &ctx,
            TaskGetInput {
                task_id: created.0.task.id.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(fetched.0.task, created.0.task);

    let missing = client
        .task_get(
            &ctx,
            TaskGetInput {
                task_id: "task_00000000000000".parse().unwrap(),
            },
        )
        .await
        .unwrap_err();
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
    let first = client
        .task_create(
            &ctx,
            create_input(&w.thread_id, "once", Some("req-client-0001")),
        )
        .await
        .unwrap();
    let again = client
        .task_create(
            &ctx,
            create_input(&w.thread_id, "once", Some("req-client-0001")),
        )
        .await
        .unwrap();
    assert_eq!(first, again);
    // The header alone carries the key too: another payload under it is refused.
    let mismatch = client
        .task_create(&ctx, create_input(&w.thread_id, "other", None))
        .await
        .unwrap_err();
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
        .task_get(
            &ctx,
            TaskGetInput {
                task_id: "task_00000000000000".parse().unwrap(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::UpstreamUnavailable);
    assert!(
        !error.message.contains("127.0.0.1"),
        "internals stay out of the message: {}",
        error.message
    );
}
