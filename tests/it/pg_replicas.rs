//! The server tier on PostgreSQL with several stateless `agentteam server` replicas behind one
//! database: migrations applied once when replicas start together, one shared operator token,
//! idempotency exactly once across replicas, cursors that page on any replica, scheduled messages
//! delivered exactly once, and no acknowledged write lost when a replica is SIGKILLed. Also the
//! schema guard: the PostgreSQL schema has the same tables, columns and indexes as SQLite's.
//!
//! Every test here needs the test cluster (`AGENTTEAM_TEST_PG_URL`, set by `scripts/test`).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentteam::server::store::{Membership, NewSchedule, SCHEMA_VERSION, Store};
use futures_util::StreamExt;
use serde_json::{Value, json};
use sqlx::Connection;

use crate::support::{
    TestServer, Workspace, agentteam, fresh_pg_database, http_client, spawn_server_on,
};

/// Running `agentteam server` processes over one database and one operator token file.
struct Replicas {
    children: Vec<tokio::process::Child>,
    urls: Vec<String>,
    logs: Vec<PathBuf>,
    /// Holds the logs until the test ends.
    _dir: tempfile::TempDir,
}

/// Starts `count` replicas at once over `database`, sharing `token_file`.
async fn start_replicas(database: &str, token_file: &Path, count: usize) -> Replicas {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<PathBuf> = (0..count)
        .map(|i| dir.path().join(format!("replica-{i}.log")))
        .collect();
    let started = futures_util::future::join_all(
        logs.iter()
            .map(|log| spawn_server_on(database, token_file, Some(log))),
    )
    .await;
    let mut children = Vec::new();
    let mut urls = Vec::new();
    for (child, url, _) in started {
        children.push(child);
        urls.push(url);
    }
    Replicas {
        children,
        urls,
        logs,
        _dir: dir,
    }
}

async fn connect(database: &str) -> sqlx::PgConnection {
    sqlx::PgConnection::connect(database).await.unwrap()
}

/// `POST` `domain action` for the workspace's agent to the replica at `base`; status and raw body.
async fn act(
    client: &reqwest::Client,
    base: &str,
    w: &Workspace,
    domain: &str,
    action: &str,
    input: &Value,
) -> reqwest::Result<(u16, String)> {
    let response = client
        .post(format!(
            "{base}/runtime/servers/{}/agents/{}/actions/{domain}/{action}",
            w.workspace_id, w.agent_id
        ))
        .bearer_auth(&w.device_credential)
        .json(input)
        .send()
        .await?;
    Ok((response.status().as_u16(), response.text().await?))
}

fn data(body: &str) -> Value {
    serde_json::from_str::<Value>(body).unwrap()["data"].clone()
}

#[tokio::test]
async fn three_replicas_starting_at_once_migrate_once_and_share_one_operator_token() {
    let database = fresh_pg_database().await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("secrets/operator.token");
    let replicas = start_replicas(&database, &token_file, 3).await;

    // Each migration ran exactly once, up to this binary's version.
    let mut db = connect(&database).await;
    let versions: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT version, COUNT(*) FROM schema_migrations GROUP BY version ORDER BY version",
    )
    .fetch_all(&mut db)
    .await
    .unwrap();
    let expected: Vec<(i64, i64)> = (1..=SCHEMA_VERSION as i64).map(|v| (v, 1)).collect();
    assert_eq!(versions, expected);

    // One token, owner-only, accepted by every replica.
    let token = std::fs::read_to_string(&token_file).unwrap();
    assert!(token.starts_with("ato_"));
    assert_eq!(
        std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::read_dir(token_file.parent().unwrap())
            .unwrap()
            .count(),
        1
    );
    let client = http_client();
    for url in &replicas.urls {
        let response = client
            .post(format!("{url}/admin/workspaces"))
            .bearer_auth(&token)
            .json(&json!({"name": "acme"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{url}");
    }
    // A restart reads the same token; it never replaces it.
    let (_again, _, reread) = spawn_server_on(&database, &token_file, None).await;
    assert_eq!(reread, token);
}

#[tokio::test]
async fn the_shared_token_file_must_be_owner_only_and_hold_a_token() {
    let database = fresh_pg_database().await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("operator.token");
    let start = |file: &Path| {
        agentteam(&[
            "server",
            "--listen",
            "127.0.0.1:0",
            "--database",
            &database,
            "--operator-token-file",
            file.to_str().unwrap(),
        ])
    };
    std::fs::write(&token_file, format!("ato_{}", "A".repeat(43))).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = start(&token_file);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("must be 0600"), "{}", run.stderr);
    assert!(!run.stderr.contains(&"A".repeat(43)), "{}", run.stderr);

    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&token_file, "not a token").unwrap();
    let run = start(&token_file);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("does not hold one operator token"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("not a token"), "{}", run.stderr);
}

#[tokio::test]
async fn a_schema_newer_than_the_binary_is_refused_on_postgres() {
    let database = fresh_pg_database().await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("operator.token");
    let (mut first, _, _) = spawn_server_on(&database, &token_file, None).await;
    first.kill().await.unwrap();
    let mut db = connect(&database).await;
    sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)")
        .bind(SCHEMA_VERSION as i64 + 1)
        .execute(&mut db)
        .await
        .unwrap();
    let run = agentteam(&[
        "server",
        "--listen",
        "127.0.0.1:0",
        "--database",
        &database,
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "database is at schema version {}, newer than this binary's {SCHEMA_VERSION}",
            SCHEMA_VERSION + 1
        )),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn forty_concurrent_requests_with_one_key_apply_once_across_replicas() {
    let database = fresh_pg_database().await;
    let server = TestServer::start_on(&database).await;
    let w = server.workspace("acme").await;
    let replicas = start_replicas(&database, &server.operator_token_file, 3).await;
    let client = http_client();
    let input = json!({
        "location": {"kind": "thread", "threadId": w.thread_id},
        "title": "exactly once",
        "requestId": "req-replicas-0001",
    });
    let answers = futures_util::future::join_all(
        (0..40).map(|i| act(&client, &replicas.urls[i % 3], &w, "task", "create", &input)),
    )
    .await;
    let mut applied = BTreeSet::new();
    let mut in_progress = 0;
    for answer in answers {
        match answer.unwrap() {
            (200, body) => {
                applied.insert(body);
            }
            (409, body) => {
                assert!(body.contains("idempotency_in_progress"), "{body}");
                in_progress += 1;
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    // Every 200 is the one applied request or a byte-identical replay of it.
    assert_eq!(applied.len(), 1, "{applied:?}");
    let first = applied.into_iter().next().unwrap();
    assert!(in_progress < 40);
    // A retry after completion replays, on every replica.
    for url in &replicas.urls {
        let (status, body) = act(&client, url, &w, "task", "create", &input)
            .await
            .unwrap();
        assert_eq!((status, &body), (200, &first));
    }
    let (_, listed) = act(
        &client,
        &replicas.urls[0],
        &w,
        "task",
        "list",
        &json!({"location": {"kind": "thread", "threadId": w.thread_id}, "limit": 100}),
    )
    .await
    .unwrap();
    assert_eq!(data(&listed)["tasks"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_cursor_minted_on_one_replica_pages_on_the_others() {
    let database = fresh_pg_database().await;
    let server = TestServer::start_on(&database).await;
    let w = server.workspace("acme").await;
    let replicas = start_replicas(&database, &server.operator_token_file, 3).await;
    let client = http_client();
    let mut created = BTreeSet::new();
    for i in 0..5 {
        let (status, body) = act(
            &client,
            &replicas.urls[i % 3],
            &w,
            "task",
            "create",
            &json!({"location": {"kind": "thread", "threadId": w.thread_id}, "title": format!("t{i}")}),
        )
        .await
        .unwrap();
        assert_eq!(status, 200, "{body}");
        created.insert(data(&body)["task"]["id"].as_str().unwrap().to_string());
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for (page, url) in replicas.urls.iter().enumerate() {
        let mut input =
            json!({"location": {"kind": "thread", "threadId": w.thread_id}, "limit": 2});
        if let Some(cursor) = &cursor {
            input["cursor"] = json!(cursor);
        }
        let (status, body) = act(&client, url, &w, "task", "list", &input).await.unwrap();
        assert_eq!(status, 200, "page {page} on {url}: {body}");
        let data = data(&body);
        for task in data["tasks"].as_array().unwrap() {
            seen.push(task["id"].as_str().unwrap().to_string());
        }
        cursor = data["nextCursor"].as_str().map(str::to_string);
        assert_eq!(data["hasMore"], page < 2, "page {page}: {body}");
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), created);
}

#[tokio::test]
async fn two_thousand_due_scheduled_messages_are_each_delivered_exactly_once() {
    const COUNT: usize = 2_000;
    let database = fresh_pg_database().await;
    let server = TestServer::start_on(&database).await;
    let w = server.workspace("acme").await;
    // All due at once: stored through the store as the create action stores them, due a second
    // ago (the action itself only takes future times). This server runs no scheduler.
    let store: &Store = server.state.store();
    let now = server.state.clock().now_ms();
    let target = Membership {
        channel_id: w.channel_id.clone(),
        thread_id: None,
    };
    futures_util::stream::iter(0..COUNT)
        .map(|i| {
            let (target, w) = (&target, &w);
            async move {
                let content = format!("due-{i:04}");
                store
                    .insert_schedule(
                        &w.workspace_id,
                        target,
                        NewSchedule {
                            content: &content,
                            send_at_ms: now - 1_000,
                            repeat_every_minutes: None,
                        },
                        &w.agent_id,
                        now - 2_000,
                    )
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;

    // Three binary replicas run their scheduler every second; beside them, this process is a
    // fourth replica running four passes back to back at once, so passes overlap all the time.
    let replicas = start_replicas(&database, &server.operator_token_file, 3).await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loops: Vec<_> = (0..4)
        .map(|_| {
            let (state, done) = (server.state.clone(), done.clone());
            tokio::spawn(async move {
                let mut sent = 0;
                while !done.load(Ordering::SeqCst) {
                    sent += state.run_scheduler_pass().await.unwrap().sent;
                }
                sent
            })
        })
        .collect();
    let mut db = connect(&database).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (settled,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM scheduled_runs WHERE status <> 'pending'")
                .fetch_one(&mut db)
                .await
                .unwrap();
        let (open,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM scheduled_messages WHERE status = 'scheduled'")
                .fetch_one(&mut db)
                .await
                .unwrap();
        if settled as usize >= COUNT && open == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{settled} of {COUNT} runs settled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done.store(true, Ordering::SeqCst);
    let mut in_process_senders = 0;
    for sent in futures_util::future::join_all(loops).await {
        in_process_senders += usize::from(sent.unwrap() > 0);
    }

    let (messages, distinct): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT content) FROM messages WHERE channel_id = $1 AND content LIKE 'due-%'",
    )
    .bind(&w.channel_id)
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert_eq!((messages, distinct), (COUNT as i64, COUNT as i64));
    let runs: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, COUNT(*) FROM scheduled_runs GROUP BY status ORDER BY status",
    )
    .fetch_all(&mut db)
    .await
    .unwrap();
    assert_eq!(runs, vec![("sent".to_string(), COUNT as i64)]);
    let (most_runs,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM scheduled_runs GROUP BY scheduled_message_id) AS per",
    )
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert_eq!(most_runs, 1);
    let (open,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM scheduled_messages WHERE status <> 'done'")
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(open, 0);

    // The passes did compete: more than one of them posted some of the messages.
    let binary_senders = replicas
        .logs
        .iter()
        .filter(|log| {
            let text = std::fs::read_to_string(log).unwrap();
            text.lines().any(|line| {
                line.split_whitespace()
                    .any(|field| field.strip_prefix("sent=").is_some_and(|n| n != "0"))
            })
        })
        .count();
    assert!(
        binary_senders + in_process_senders >= 2,
        "only {binary_senders} + {in_process_senders} pass loops posted messages"
    );
}

#[tokio::test]
async fn sigkill_of_one_replica_loses_no_acknowledged_write() {
    let database = fresh_pg_database().await;
    let server = TestServer::start_on(&database).await;
    let w = server.workspace("acme").await;
    let replicas = start_replicas(&database, &server.operator_token_file, 3).await;
    let urls = replicas.urls.clone();
    let victim = Arc::new(tokio::sync::Mutex::new(replicas.children)); // index 1 is killed
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let client = http_client();

    const WRITERS: usize = 4;
    const PER_WRITER: usize = 60;
    const KILL_AFTER: usize = 60;
    let writers = (0..WRITERS).map(|writer| {
        let (client, urls, w) = (client.clone(), urls.clone(), w.clone());
        let (acknowledged, victim) = (acknowledged.clone(), victim.clone());
        tokio::spawn(async move {
            let mut acked: BTreeMap<String, String> = BTreeMap::new();
            let mut failed = 0;
            for i in 0..PER_WRITER {
                let title = format!("w{writer}-{i:03}");
                let input = json!({"location": {"kind": "thread", "threadId": w.thread_id}, "title": title});
                match act(&client, &urls[(writer + i) % 3], &w, "task", "create", &input).await {
                    Ok((200, body)) => {
                        acked.insert(data(&body)["task"]["id"].as_str().unwrap().to_string(), title);
                        if acknowledged.fetch_add(1, Ordering::SeqCst) + 1 == KILL_AFTER {
                            victim.lock().await[1].start_kill().unwrap();
                        }
                    }
                    // The killed replica's requests fail; they were never acknowledged.
                    Ok((status, body)) => panic!("{status}: {body}"),
                    Err(_) => failed += 1,
                }
            }
            (acked, failed)
        })
    });
    let mut acked = BTreeMap::new();
    let mut failed = 0;
    for result in futures_util::future::join_all(writers).await {
        let (writer_acked, writer_failed) = result.unwrap();
        acked.extend(writer_acked);
        failed += writer_failed;
    }
    let status = victim.lock().await[1].wait().await.unwrap();
    assert!(!status.success(), "replica 1 was killed");
    assert!(failed > 0, "some writes went to the killed replica");
    assert!(acked.len() > KILL_AFTER, "writes went on after the kill");

    // Every acknowledged write is there, read through a surviving replica.
    for (id, title) in &acked {
        let (status, body) = act(&client, &urls[2], &w, "task", "get", &json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(status, 200, "{id}: {body}");
        assert_eq!(data(&body)["task"]["title"], title.as_str());
    }
}

#[tokio::test]
async fn the_postgres_schema_matches_sqlites_table_for_table() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite_url = format!("sqlite://{}", dir.path().join("server.db").display());
    let pg_url = fresh_pg_database().await;
    Store::open(&sqlite_url).await.unwrap().close().await;
    Store::open(&pg_url).await.unwrap().close().await;

    let mut sqlite = sqlx::SqliteConnection::connect(&sqlite_url).await.unwrap();
    let sqlite_columns: Vec<(String, String, String, bool)> = sqlx::query_as(
        "SELECT m.name, p.name, lower(p.type), p.\"notnull\" OR p.pk FROM sqlite_master m JOIN pragma_table_info(m.name) p \
         WHERE m.type = 'table' ORDER BY m.name, p.cid",
    )
    .fetch_all(&mut sqlite)
    .await
    .unwrap();
    let sqlite_indexes: Vec<(String,)> = sqlx::query_as(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex_%' ORDER BY name",
    )
    .fetch_all(&mut sqlite)
    .await
    .unwrap();

    let mut pg = connect(&pg_url).await;
    let pg_columns: Vec<(String, String, String, bool)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'NO' FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY table_name, ordinal_position",
    )
    .fetch_all(&mut pg)
    .await
    .unwrap();
    let pg_indexes: Vec<(String,)> = sqlx::query_as(
        "SELECT indexname::text FROM pg_indexes i WHERE schemaname = 'public' \
         AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname) ORDER BY indexname",
    )
    .fetch_all(&mut pg)
    .await
    .unwrap();
    // Every PostgreSQL text column sorts by bytes, as SQLite's do.
    let not_c: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns WHERE table_schema = 'public' \
         AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C'",
    )
    .fetch_all(&mut pg)
    .await
    .unwrap();
    assert_eq!(not_c, vec![]);

    let as_pg = |(table, column, kind, required): (String, String, String, bool)| {
        let kind = match (kind.as_str(), table.as_str(), column.as_str()) {
            ("blob", _, _) => "bytea".to_string(),
            // SQLite's rowid alias, which FTS5's external content needs, is `INTEGER`.
            ("integer", "kb_documents", "seq") => "bigint".to_string(),
            (other, _, _) => other.to_string(),
        };
        (table, column, kind, required)
    };
    // Each engine's own full-text machinery, and nothing else, differs: FTS5's virtual table and
    // its shadow tables on SQLite; the generated `tsvector`, its GIN index and the lexeme
    // document frequencies on PostgreSQL.
    let sqlite_columns: Vec<_> = sqlite_columns
        .into_iter()
        .filter(|(table, ..)| table != "kb_fts" && !table.starts_with("kb_fts_"))
        .map(as_pg)
        .collect();
    let pg_columns: Vec<_> = pg_columns
        .into_iter()
        .filter(|(table, column, ..)| {
            table != "kb_lexeme_df"
                && !(table == "kb_documents" && (column == "tsv" || column == "title_tsv"))
        })
        .collect();
    let pg_indexes: Vec<_> = pg_indexes
        .into_iter()
        .filter(|(index,)| index != "kb_documents_tsv" && index != "kb_documents_title")
        .collect();
    assert!(!sqlite_columns.is_empty());
    assert_eq!(pg_columns, sqlite_columns);
    assert!(!sqlite_indexes.is_empty());
    assert_eq!(pg_indexes, sqlite_indexes);
}

#[tokio::test]
async fn scheduled_workflow_triggers_due_at_once_each_start_one_run_across_replicas() {
    const TRIGGERS: usize = 300;
    let database = fresh_pg_database().await;
    let first = TestServer::start_on(&database).await;
    let second = TestServer::start_on(&database).await;
    let w = first.workspace("acme").await;
    let store: &Store = first.state.store();
    let now = first.state.clock().now_ms();
    let steps: agentteam::contract::types::PlanSteps =
        serde_json::from_value(json!([{"key": "a", "title": "A", "kind": "task"}])).unwrap();
    let plan = store
        .insert_plan(
            &w.workspace_id,
            "nightly",
            None,
            &steps,
            &w.agent_id,
            now,
            |_, _| Ok::<_, ()>(()),
        )
        .await
        .unwrap()
        .unwrap();
    store
        .change_plan(
            &w.workspace_id,
            plan.id.as_str(),
            now,
            |current, _| {
                Ok::<_, ()>(agentteam::server::store::PlanChange {
                    name: current.name.to_string(),
                    description: None,
                    status: "active".into(),
                    steps: None,
                    publish: true,
                })
            },
            |_, _| Ok(()),
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // All due a second ago, once each.
    futures_util::stream::iter(0..TRIGGERS)
        .map(|i| {
            let (w, plan) = (&w, &plan);
            async move {
                store
                    .insert_trigger(
                        &w.workspace_id,
                        plan.id.as_str(),
                        &agentteam::server::store::TriggerChange {
                            name: format!("t{i}"),
                            status: "enabled".into(),
                            start_at: Some(now - 1_000),
                            every_minutes: None,
                            next_fire_at: Some(now - 1_000),
                        },
                        "scheduled",
                        &w.agent_id,
                        now - 2_000,
                    )
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;

    // Two replicas (two pools), three passes each at once, until nothing is due.
    let mut db = connect(&database).await;
    let passes: Vec<_> = [&first, &second]
        .into_iter()
        .flat_map(|server| (0..3).map(move |_| server.state.clone()))
        .map(|state| {
            tokio::spawn(async move {
                let mut started = 0;
                for _ in 0..50 {
                    started += state.run_scheduler_pass().await.unwrap().runs_started;
                }
                started
            })
        })
        .collect();
    let mut started = 0;
    let mut passes_that_started = 0;
    for pass in futures_util::future::join_all(passes).await {
        let count = pass.unwrap();
        started += count;
        passes_that_started += usize::from(count > 0);
    }
    let (runs, distinct): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT trigger_id) FROM workflow_runs")
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!((runs, distinct), (TRIGGERS as i64, TRIGGERS as i64));
    assert_eq!(started, TRIGGERS);
    assert!(passes_that_started >= 2, "the passes competed");
    let (left,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM workflow_triggers WHERE next_fire_at IS NOT NULL")
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(left, 0);
}
