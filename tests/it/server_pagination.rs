//! Keyset pagination of `task list`: every row exactly once in `updatedAt DESC, id ASC` order for
//! random data and page sizes (with many ties on `updatedAt`), and every bad cursor refused as a
//! validation error, never as page one.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{TestServer, Workspace};

/// Creates tasks in a fresh channel at the given pinned times; returns the channel's location
/// and every task as `(updatedAt ms, id)`.
async fn seed(
    server: &TestServer,
    w: &Workspace,
    channel: &str,
    times: &[i64],
) -> (Value, Vec<(i64, String)>) {
    let channel_id = server
        .admin(
            &format!("/admin/workspaces/{}/channels", w.workspace_id),
            json!({"name": channel, "members": [w.agent_id]}),
        )
        .await["channelId"]
        .as_str()
        .unwrap()
        .to_string();
    let location = json!({"kind": "channel", "channelId": channel_id});
    let mut rows = Vec::new();
    for (index, ms) in times.iter().enumerate() {
        server.state.clock().pin(Some(*ms));
        let (status, body) = server
            .action(
                w,
                &w.agent_id,
                "task",
                "create",
                json!({"location": location, "title": format!("t{index}")}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        rows.push((
            *ms,
            body["data"]["task"]["id"].as_str().unwrap().to_string(),
        ));
    }
    server.state.clock().pin(None);
    (location, rows)
}

/// Follows `nextCursor` to the end; returns every id in page order and the number of pages.
async fn walk(
    server: &TestServer,
    w: &Workspace,
    location: &Value,
    limit: u64,
) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut input = json!({"location": location, "limit": limit});
        if let Some(cursor) = &cursor {
            input["cursor"] = json!(cursor);
        }
        let (status, body) = server.action(w, &w.agent_id, "task", "list", input).await;
        assert_eq!(status, 200, "{body}");
        let data = &body["data"];
        pages += 1;
        let tasks = data["tasks"].as_array().unwrap();
        assert!(tasks.len() as u64 <= limit);
        ids.extend(tasks.iter().map(|t| t["id"].as_str().unwrap().to_string()));
        match (data["hasMore"].as_bool().unwrap(), data.get("nextCursor")) {
            (true, Some(next)) => cursor = Some(next.as_str().unwrap().to_string()),
            (false, None) => return (ids, pages),
            other => panic!("hasMore and nextCursor disagree: {other:?}"),
        }
        assert!(pages < 1000, "pagination does not terminate");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn every_row_exactly_once_in_order(times in prop::collection::vec(0i64..6, 0..45), limit in 1u64..12) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let server = TestServer::start().await;
            let w = server.workspace("acme").await;
            let base = 1_800_000_000_000;
            let times: Vec<i64> = times.iter().map(|t| base + t).collect();
            let (location, mut rows) = seed(&server, &w, "paged", &times).await;
            rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            let expected: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
            let (ids, pages) = walk(&server, &w, &location, limit).await;
            assert_eq!(ids, expected);
            assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len(), "a row appeared twice");
            assert_eq!(pages, (expected.len() as u64).div_ceil(limit).max(1) as usize);
        });
    }
}

#[tokio::test]
async fn default_page_is_20_and_the_last_page_has_no_cursor() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (location, _) = seed(&server, &w, "many", &[1_800_000_000_000; 25]).await;
    let (status, body) = server
        .action(
            &w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": location}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["tasks"].as_array().unwrap().len(), 20);
    assert_eq!(body["data"]["hasMore"], true);
    let cursor = body["data"]["nextCursor"].as_str().unwrap();
    let (_, last) = server
        .action(
            &w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": location, "cursor": cursor}),
        )
        .await;
    assert_eq!(last["data"]["tasks"].as_array().unwrap().len(), 5);
    assert_eq!(last["data"]["hasMore"], false);
    assert!(last["data"].get("nextCursor").is_none());

    // An empty list is one final page.
    let (_, empty) = server
        .action(
            &w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": {"kind": "thread", "threadId": w.thread_id}}),
        )
        .await;
    assert_eq!(empty["data"], json!({"tasks": [], "hasMore": false}));
}

#[tokio::test]
async fn limit_above_100_is_refused() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let location = json!({"kind": "channel", "channelId": w.channel_id});
    for limit in [0, 101] {
        let (status, body) = server
            .action(
                &w,
                &w.agent_id,
                "task",
                "list",
                json!({"location": location, "limit": limit}),
            )
            .await;
        assert_eq!(
            (status, body["error"]["details"][0]["path"].as_str()),
            (400, Some("/limit")),
            "{body}"
        );
    }
    let (status, _) = server
        .action(
            &w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": location, "limit": 100}),
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn every_kind_of_bad_cursor_is_a_validation_error() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (location, _) = seed(
        &server,
        &w,
        "cursors",
        &[1_800_000_000_000, 1_800_000_000_001, 1_800_000_000_002],
    )
    .await;
    let (_, first) = server
        .action(
            &w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": location, "limit": 1}),
        )
        .await;
    let cursor = first["data"]["nextCursor"].as_str().unwrap().to_string();
    let mut tampered = cursor.clone().into_bytes();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();

    let other_location = json!({"kind": "thread", "threadId": w.thread_id});
    let cases = vec![
        (
            "malformed",
            json!({"location": location, "cursor": "not-a-cursor"}),
        ),
        (
            "tampered",
            json!({"location": location, "cursor": tampered}),
        ),
        (
            "truncated",
            json!({"location": location, "cursor": &cursor[..cursor.len() - 4]}),
        ),
        (
            "too long",
            json!({"location": location, "cursor": "A".repeat(513)}),
        ),
        (
            "non-canonical characters",
            json!({"location": location, "cursor": format!("{cursor}=")}),
        ),
        (
            "filter mismatch",
            json!({"location": location, "cursor": cursor, "status": ["claimed"]}),
        ),
        (
            "other location",
            json!({"location": other_location, "cursor": cursor}),
        ),
    ];
    for (kind, input) in cases {
        let (status, body) = server.action(&w, &w.agent_id, "task", "list", input).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("validation_failed")),
            "{kind}: {body}"
        );
        assert_eq!(body["error"]["details"][0]["path"], "/cursor", "{kind}");
    }
    // Another agent cannot continue this agent's listing either.
    let (status, body) = server
        .action(
            &w,
            &w.other_agent_id,
            "task",
            "list",
            json!({"location": location, "cursor": cursor}),
        )
        .await;
    assert!(status == 400 || status == 404, "{body}");
}
