//! Keyset pagination of every list: each returns every row exactly once in its documented order
//! for random data and page sizes (with many ties on the sort keys), and every bad cursor is
//! refused as a validation error, never as page one.

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
    walk_list(
        server,
        w,
        "task",
        "list",
        json!({"location": location}),
        "tasks",
        "id",
        limit,
    )
    .await
}

/// Pages through `domain action` with `input` plus `limit`/`cursor`, collecting `item[key]`
/// from `data[field]`, checking `hasMore`/`nextCursor` agree on every page.
#[allow(clippy::too_many_arguments)]
async fn walk_list(
    server: &TestServer,
    w: &Workspace,
    domain: &str,
    action: &str,
    input: Value,
    field: &str,
    key: &str,
    limit: u64,
) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut request = input.clone();
        request["limit"] = json!(limit);
        if let Some(cursor) = &cursor {
            request["cursor"] = json!(cursor);
        }
        let (status, body) = server.action(w, &w.agent_id, domain, action, request).await;
        assert_eq!(status, 200, "{body}");
        let data = &body["data"];
        pages += 1;
        let items = data[field].as_array().unwrap();
        assert!(items.len() as u64 <= limit);
        ids.extend(items.iter().map(|t| t[key].as_str().unwrap().to_string()));
        match (data["hasMore"].as_bool().unwrap(), data.get("nextCursor")) {
            (true, Some(next)) => cursor = Some(next.as_str().unwrap().to_string()),
            (false, None) => return (ids, pages),
            other => panic!("hasMore and nextCursor disagree: {other:?}"),
        }
        assert!(pages < 1000, "pagination does not terminate");
    }
}

/// Checks a walk against the expected order: every row once, in order, in the right page count.
#[track_caller]
fn check_walk(walked: (Vec<String>, usize), expected: &[String], limit: u64) {
    let (ids, pages) = walked;
    assert_eq!(ids, expected);
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        ids.len(),
        "a row appeared twice"
    );
    assert_eq!(
        pages,
        (expected.len() as u64).div_ceil(limit).max(1) as usize
    );
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

const BASE_MS: i64 = 1_800_000_000_000;

/// How many display names [`display_names`] offers.
const DISPLAY_NAMES: usize = 10;

/// Team display names that sort by bytes, not by what a person reads: ASCII, CJK, emoji, a
/// combining mark, right-to-left script, control characters, and two of the schema's longest
/// (200 characters of 4-byte emoji, 200 control characters that JSON escapes to 6 bytes each).
fn display_names() -> [String; DISPLAY_NAMES] {
    [
        "Beta".into(),
        "Alpha".into(),
        "Gamma".into(),
        "東京チーム".into(),
        "🚀 launch".into(),
        "e\u{301}quipe".into(),
        "فريق التطوير".into(),
        "ctl\u{1}\u{7}\u{1b}".into(),
        "😀".repeat(200),
        "\u{1}".repeat(200),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn task_list_every_row_exactly_once_in_order(times in prop::collection::vec(0i64..6, 0..45), limit in 1u64..12) {
        block_on(async {
            let server = TestServer::start().await;
            let w = server.workspace("acme").await;
            let times: Vec<i64> = times.iter().map(|t| BASE_MS + t).collect();
            let (location, mut rows) = seed(&server, &w, "paged", &times).await;
            // updatedAt DESC, id ASC.
            rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            let expected: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
            check_walk(walk(&server, &w, &location, limit).await, &expected, limit);
        });
    }

    #[test]
    fn project_list_every_row_exactly_once_in_order(times in prop::collection::vec(0i64..5, 0..40), limit in 1u64..10) {
        block_on(async {
            let server = TestServer::start().await;
            let w = server.workspace("acme").await;
            let mut rows = Vec::new();
            for (index, t) in times.iter().enumerate() {
                server.state.clock().pin(Some(BASE_MS + t));
                let (_, body) = server.action(&w, &w.agent_id, "project", "create", json!({"name": format!("p{index}")})).await;
                rows.push((BASE_MS + t, body["data"]["project"]["id"].as_str().unwrap().to_string()));
            }
            server.state.clock().pin(None);
            // updatedAt DESC, id ASC.
            rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            let expected: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
            check_walk(walk_list(&server, &w, "project", "list", json!({}), "projects", "id", limit).await, &expected, limit);
        });
    }

    #[test]
    fn team_list_every_row_exactly_once_in_order(names in prop::collection::vec(0usize..DISPLAY_NAMES, 0..30), limit in 1u64..8) {
        block_on(async {
            let server = TestServer::start().await;
            let w = server.workspace("acme").await;
            let mut rows = Vec::new();
            for (index, name) in names.iter().enumerate() {
                // Few display names, so ties fall through to handle; handles descend vs creation order.
                let display = display_names()[*name].clone();
                let handle = format!("t{:03}", 999 - index);
                let data = server.admin(&format!("/admin/workspaces/{}/teams", w.workspace_id), json!({"handle": handle, "displayName": display})).await;
                rows.push((display, handle, data["teamId"].as_str().unwrap().to_string()));
            }
            // displayName, handle, teamId ascending.
            rows.sort();
            let expected: Vec<String> = rows.into_iter().map(|(_, _, id)| id).collect();
            check_walk(walk_list(&server, &w, "team", "list", json!({}), "teams", "teamId", limit).await, &expected, limit);
        });
    }

    #[test]
    fn review_list_every_row_exactly_once_in_order(times in prop::collection::vec(0i64..5, 0..40), limit in 1u64..10) {
        block_on(async {
            let server = TestServer::start().await;
            let w = server.workspace("acme").await;
            let mut rows = Vec::new();
            for (index, t) in times.iter().enumerate() {
                server.state.clock().pin(Some(BASE_MS + t));
                let input = json!({"threadId": w.thread_id, "verdict": "comment", "body": format!("r{index}")});
                let (_, body) = server.action(&w, &w.agent_id, "review", "add", input).await;
                rows.push((BASE_MS + t, body["data"]["review"]["id"].as_str().unwrap().to_string()));
            }
            server.state.clock().pin(None);
            // updatedAt DESC, id DESC.
            rows.sort_by(|a, b| b.cmp(a));
            let expected: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
            check_walk(walk_list(&server, &w, "review", "list", json!({"threadId": w.thread_id}), "reviews", "id", limit).await, &expected, limit);
        });
    }

    #[test]
    fn scheduled_message_list_every_row_exactly_once_in_order(times in prop::collection::vec(0i64..5, 0..40), limit in 1u64..10) {
        block_on(async {
            let server = TestServer::start().await;
            let w = server.workspace("acme").await;
            let target = json!({"kind": "channel", "channelId": w.channel_id});
            let mut rows = Vec::new();
            for (index, t) in times.iter().enumerate() {
                server.state.clock().pin(Some(BASE_MS + t));
                let input = json!({"target": target, "content": format!("m{index}"), "sendAt": "2030-01-01T00:00:00Z"});
                let (_, body) = server.action(&w, &w.agent_id, "scheduled-message", "create", input).await;
                rows.push((BASE_MS + t, body["data"]["scheduledMessage"]["id"].as_str().unwrap().to_string()));
            }
            server.state.clock().pin(None);
            // createdAt DESC, id DESC.
            rows.sort_by(|a, b| b.cmp(a));
            let expected: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
            check_walk(walk_list(&server, &w, "scheduled-message", "list", json!({"target": target}), "scheduledMessages", "id", limit).await, &expected, limit);
        });
    }

    /// Runs mix pending rows (sorted by when they became due) and attempted rows (by when they
    /// were attempted), with ties between the two.
    #[test]
    fn scheduled_message_runs_every_row_exactly_once_in_order(attempts in prop::collection::vec(prop::option::of(0i64..2), 0..25), limit in 1u64..8) {
        block_on(async {
            let server = TestServer::start().await;
            let w = server.workspace("acme").await;
            let store = server.state.store();
            let step = 5 * 60_000;
            server.state.clock().pin(Some(BASE_MS));
            let send_at = chrono::DateTime::from_timestamp_millis(BASE_MS + step).unwrap().to_rfc3339();
            let input = json!({"target": {"kind": "channel", "channelId": w.channel_id}, "content": "tick", "sendAt": send_at, "repeatEveryMinutes": 5});
            let (_, body) = server.action(&w, &w.agent_id, "scheduled-message", "create", input).await;
            let schedule_id = body["data"]["scheduledMessage"]["id"].as_str().unwrap().to_string();
            for (k, attempt) in attempts.iter().enumerate() {
                let due = BASE_MS + step * (k as i64 + 1);
                store.materialize_due_runs(due).await.unwrap();
                // Attempted one step later ties with the next run's due time.
                if let Some(delay) = attempt {
                    store.attempt_pending_runs(due + delay * step).await.unwrap();
                }
            }
            server.state.clock().pin(None);
            let (_, all) = server.action(&w, &w.agent_id, "scheduled-message", "runs", json!({"scheduledMessageId": schedule_id, "limit": 100})).await;
            let mut rows: Vec<(String, String)> = all["data"]["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r["attemptedAt"].as_str().unwrap().parse::<chrono::DateTime<chrono::Utc>>().unwrap().to_rfc3339(), r["id"].as_str().unwrap().to_string()))
                .collect();
            assert_eq!(rows.len(), attempts.len());
            // Effective attemptedAt DESC, id DESC, sorted here independently of the server.
            rows.sort_by(|a, b| b.cmp(a));
            let expected: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
            check_walk(walk_list(&server, &w, "scheduled-message", "runs", json!({"scheduledMessageId": schedule_id}), "runs", "id", limit).await, &expected, limit);
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

/// A cursor carries the complete keyset boundary, so `Cursor.maxLength` must hold
/// the largest boundary any list can have. Computed from the schemas: a free-text position
/// component of `n` characters serializes to at most `2 + 6n` bytes (a control character
/// JSON-escapes to `\u00XX`), an id or handle (ASCII by pattern) to `2 + n`, an `i64` to 20; the raw
/// cursor adds a version byte, a 32-byte filter hash and a
/// 16-byte tag, and is base64url without padding.
#[test]
fn cursor_max_length_holds_the_largest_keyset_boundary() {
    let common: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::repo_root().join("schema/common.json")).unwrap(),
    )
    .unwrap();
    let max_length = |def: &str| common["$defs"][def]["maxLength"].as_u64().unwrap() as usize;
    // Ids and handles have ASCII-only patterns (one byte each, never escaped); free text has none.
    let string = |def: &str| {
        let per_char = if common["$defs"][def].get("pattern").is_some() {
            1
        } else {
            6
        };
        2 + per_char * max_length(def)
    };
    let time = 20;
    // The components of each list's position, in the order the server encodes them.
    let lists: Vec<(&str, Vec<usize>)> = vec![
        (
            "team.list",
            vec![string("Name"), string("Handle"), string("TeamId")],
        ),
        ("task.list", vec![time, string("TaskId")]),
        ("project.list", vec![time, string("ProjectId")]),
        ("review.list", vec![time, string("ReviewId")]),
        (
            "scheduled-message.list",
            vec![time, string("ScheduledMessageId")],
        ),
        (
            "scheduled-message.runs",
            vec![time, string("ScheduledRunId")],
        ),
        ("approval.list", vec![time, string("ApprovalId")]),
        ("workflow.plan list", vec![time, string("WorkflowPlanId")]),
        (
            "workflow.trigger list",
            vec![time, string("WorkflowTriggerId")],
        ),
        ("workflow.run list", vec![time, string("WorkflowRunId")]),
        ("workflow.step list", vec![time, string("WorkflowStepId")]),
        ("message_history_read", vec![time, string("MessageId")]),
    ];
    // Every list the contract has is in the table: an input (or operation) with a `Cursor`.
    let mut with_cursor = vec!["message_history_read".to_string()];
    let exec = crate::support::repo_root().join("schema/exec");
    for domain in std::fs::read_dir(&exec).unwrap() {
        let domain = domain.unwrap().path();
        if !domain.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&domain).unwrap() {
            let file = file.unwrap().path();
            let name = file.file_name().unwrap().to_str().unwrap().to_string();
            let Some(action) = name.strip_suffix(".input.json") else {
                continue;
            };
            let list = format!("{}.{action}", domain.file_name().unwrap().to_str().unwrap());
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            let is_cursor = |variant: &Value| {
                variant["properties"]["cursor"]["$ref"]
                    .as_str()
                    .is_some_and(|r| r.ends_with("/Cursor"))
            };
            if is_cursor(&schema) {
                with_cursor.push(list.clone());
            }
            for variant in schema["oneOf"].as_array().into_iter().flatten() {
                if is_cursor(variant) {
                    let operation = variant["properties"]["operation"]["const"]
                        .as_str()
                        .unwrap();
                    with_cursor.push(format!("{list} {operation}"));
                }
            }
        }
    }
    with_cursor.sort();
    let mut tabled: Vec<String> = lists.iter().map(|(list, _)| list.to_string()).collect();
    tabled.sort();
    assert_eq!(
        tabled, with_cursor,
        "every list with a `Cursor` has its row here"
    );
    let cursor_max = max_length("Cursor");
    assert_eq!(cursor_max, agentteam::server::cursor::MAX_CURSOR_LEN);
    for (list, components) in lists {
        let position = 2 + components.len() - 1 + components.iter().sum::<usize>();
        let raw = 1 + 32 + position + 16;
        let encoded = (raw * 4).div_ceil(3);
        assert!(
            encoded <= cursor_max,
            "{list}: a worst-case cursor is {encoded} characters, over `Cursor.maxLength` {cursor_max}"
        );
    }
}

/// The worst case above, end to end: teams whose display names are the schema's longest, of
/// 4-byte characters and of escaped control characters, page with cursors the contract accepts.
#[tokio::test]
async fn teams_with_the_longest_names_page_without_a_server_error() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let mut expected = Vec::new();
    for (index, display) in ["😀".repeat(200), "\u{1}".repeat(200), "東".repeat(200)]
        .iter()
        .enumerate()
    {
        let data = server
            .admin(
                &format!("/admin/workspaces/{}/teams", w.workspace_id),
                json!({"handle": format!("{}{}", "t".repeat(31), index), "displayName": display}),
            )
            .await;
        expected.push((
            display.clone(),
            data["teamId"].as_str().unwrap().to_string(),
        ));
    }
    expected.sort();
    let expected: Vec<String> = expected.into_iter().map(|(_, id)| id).collect();
    check_walk(
        walk_list(&server, &w, "team", "list", json!({}), "teams", "teamId", 1).await,
        &expected,
        1,
    );
}
