//! The audit trail: one record per runtime request and operator action, read back through the
//! operator API and `agentteam admin audit`, never holding an input value, content or a
//! credential; and the daemon's own log of the requests it refused.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TestDaemon, TestServer, Workspace, bin};

/// Every record of `w`, newest first, page by page through the operator API.
async fn all_records(server: &TestServer, w: &Workspace, filter: Value) -> Vec<Value> {
    let path = format!("/admin/workspaces/{}/audit/list", w.workspace_id);
    let mut found = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut body = filter.clone();
        body["limit"] = json!(7);
        if let Some(cursor) = &cursor {
            body["cursor"] = json!(cursor);
        }
        let data = server.admin(&path, body).await;
        found.extend(data["records"].as_array().unwrap().iter().cloned());
        cursor = data["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            return found;
        }
    }
}

/// The records once `done` holds for them. Polls, bounded: the writer commits in batches behind
/// the requests, by design never in their path.
async fn records_when(
    server: &TestServer,
    w: &Workspace,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = all_records(server, w, json!({})).await;
        if done(&found) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "audit records never came: {found:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn find<'a>(records: &'a [Value], family: &str, action: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["family"] == family && r["action"] == action)
        .collect()
}

#[tokio::test]
async fn server_audit_records_every_route_family_with_its_outcome_and_no_value() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (title, content, key) = ("TITLEMARKERq8z1", "CONTENTMARKERw3x7", "KEYMARKER-req-0001");

    // actions: a task created with an idempotency key; one refused credential.
    let response = server
        .client
        .post(format!(
            "{}/runtime/servers/{}/agents/{}/actions/task/create",
            server.base_url, w.workspace_id, w.agent_id
        ))
        .bearer_auth(&w.device_credential)
        .header("idempotency-key", key)
        .json(&json!({"location": {"kind": "channel", "channelId": w.channel_id}, "title": title, "requestId": key}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let (status, _) = server
        .post(
            &format!(
                "/runtime/servers/{}/agents/{}/actions/task/list",
                w.workspace_id, w.agent_id
            ),
            Some("dev_forged.credential"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 403);
    // tools: a message with content.
    let (status, body) = server
        .post(
            &format!(
                "/runtime/servers/{}/agents/{}/tools/message_send",
                w.workspace_id, w.agent_id
            ),
            Some(&w.device_credential),
            &json!({"target": format!("channel:{}", w.channel_id), "content": content}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // extensions: a call without the pinned definition's digest.
    let (status, body) = server
        .post(
            &format!(
                "/runtime/servers/{}/agents/{}/ext/github/list",
                w.workspace_id, w.agent_id
            ),
            Some(&w.device_credential),
            &json!({}),
        )
        .await;
    assert_eq!(body["error"]["code"], "extension_stale", "{status} {body}");

    let records = records_when(&server, &w, |r| {
        !find(r, "extensions", "github list").is_empty()
            && !find(r, "tools", "message_send").is_empty()
            && find(r, "actions", "task create").len() == 1
            && !find(r, "actions", "task list").is_empty()
    })
    .await;

    let created = find(&records, "actions", "task create")[0];
    assert_eq!(created["outcome"], "ok");
    assert_eq!(created["verified"], true);
    assert_eq!(created["agentId"], w.agent_id.as_str());
    assert!(
        created["deviceId"]
            .as_str()
            .is_some_and(|d| d.starts_with("dev_")),
        "{created}"
    );
    assert_eq!(
        created["keyHash"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(key.as_bytes()))
    );
    assert!(created["durationUs"].as_i64().unwrap() > 0);
    let refused = find(&records, "actions", "task list")[0];
    assert_eq!(
        (
            &refused["outcome"],
            &refused["verified"],
            &refused["deviceId"]
        ),
        (&json!("forbidden"), &json!(false), &Value::Null)
    );
    assert_eq!(find(&records, "tools", "message_send")[0]["outcome"], "ok");
    assert_eq!(
        find(&records, "extensions", "github list")[0]["outcome"],
        "extension_stale"
    );
    let human = find(&records, "operator", "POST /admin/workspaces/{id}/humans");
    assert_eq!(human.len(), 1, "{records:#?}");
    assert_eq!(
        (&human[0]["outcome"], &human[0]["verified"]),
        (&json!("ok"), &json!(true))
    );

    // Newest first, filtered by agent.
    let times: Vec<&str> = records.iter().map(|r| r["at"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|p| p[0] >= p[1]), "{times:?}");
    let of_agent = all_records(&server, &w, json!({"agentId": w.agent_id})).await;
    assert!(!of_agent.is_empty());
    assert!(of_agent.iter().all(|r| r["agentId"] == w.agent_id.as_str()));

    // No input value, content or credential is in the trail.
    let everything = serde_json::to_string(&records).unwrap();
    for secret in [
        title,
        content,
        key,
        &w.device_credential,
        &server.operator_token,
    ] {
        assert!(
            !everything.contains(secret),
            "`{secret}` reached the audit trail"
        );
    }
    let stats: Value = server
        .client
        .get(format!("{}/admin/stats", server.base_url))
        .bearer_auth(&server.operator_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stats = &stats["data"];
    assert_eq!(stats["auditDropped"], 0, "{stats}");
}

/// `agentteam admin audit` reads the same records: a table for a person, JSON for a program.
#[tokio::test]
async fn server_audit_admin_cli_prints_a_table_and_json() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (status, _) = server
        .action(
            &w,
            &w.agent_id,
            "task",
            "list",
            json!({"location": {"kind": "channel", "channelId": w.channel_id}}),
        )
        .await;
    assert_eq!(status, 200);
    records_when(&server, &w, |r| !find(r, "actions", "task list").is_empty()).await;
    let token_file = server.operator_token_file.to_str().unwrap().to_string();
    // The CLI talks to this test's server, so it runs beside the runtime, never blocking it.
    let run = |extra: &[&str]| {
        let mut command = tokio::process::Command::new(bin());
        command
            .args(["admin", "audit", "--workspace", &w.workspace_id])
            .args([
                "--server-url",
                &server.base_url,
                "--operator-token-file",
                &token_file,
            ])
            .args(extra);
        async move {
            let output = command.output().await.unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8(output.stdout).unwrap()
        }
    };
    let table = run(&["--agent", &w.agent_id]).await;
    let mut lines = table.lines();
    assert!(lines.next().unwrap().starts_with("TIME"), "{table}");
    let row = lines.next().unwrap();
    assert!(
        row.contains("actions") && row.contains("task list") && row.contains(&w.agent_id),
        "{table}"
    );
    let json: Value = serde_json::from_str(&run(&["--json", "--limit", "3"]).await).unwrap();
    let listed = json["records"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{json}");
    assert!(
        listed
            .iter()
            .all(|r| r["id"].as_str().unwrap().starts_with("aud_"))
    );
}

/// The daemon logs the runtime requests it refuses before they reach the server, with the ids the
/// route claimed marked unverified, and never the bearer.
#[tokio::test]
async fn the_daemon_logs_its_refusals_without_the_bearer() {
    let daemon = TestDaemon::start(&[]).await;
    let agent = daemon.add_agent("worker").await;
    let workspace = daemon.workspace_id();
    let forged = "atx1.FORGEDTOKENMARKERz9.sig";
    let exec = format!(
        "{}/api/internal/exec/servers/{workspace}/agents/{agent}/task/list",
        daemon.base_url
    );
    let response = daemon
        .client
        .post(&exec)
        .bearer_auth(forged)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let mcp = format!(
        "{}/api/internal/mcp/servers/{workspace}/agents/{agent}",
        daemon.base_url
    );
    let response = daemon
        .client
        .post(&mcp)
        .bearer_auth(forged)
        .header("mcp-method", "tools/call")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);

    let text = std::fs::read_to_string(daemon.state_dir.join("audit/refusals.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, family, action) in [
        (&lines[0], "exec", "task list"),
        (&lines[1], "mcp", "tools/call"),
    ] {
        assert_eq!(line["family"], family);
        assert_eq!(line["action"], action);
        assert_eq!(line["outcome"], "forbidden");
        assert_eq!(line["verified"], false);
        assert_eq!(line["agentId"], agent.as_str());
        assert_eq!(line["workspaceId"], workspace.as_str());
    }
    assert!(!text.contains("FORGEDTOKENMARKER"));
    let status = daemon.admin_get("status").await;
    assert_eq!(status["refusalsLogged"], 2, "{status}");
}

/// Retention at its edges: records older than the retention go, then the oldest beyond the count
/// bound; the newest `keep` stay, on both backends.
#[tokio::test]
async fn server_audit_retention_keeps_the_newest_within_age_and_count() {
    let server = TestServer::start().await;
    let record = |n: i64, at: i64| agentteam::server::store::AuditRecord {
        id: format!("aud_{n:010}"),
        at,
        workspace_id: Some("wsp_0123456789".into()),
        device_id: None,
        agent_id: None,
        verified: true,
        family: "operator".into(),
        action: "GET /admin/stats".into(),
        outcome: "ok".into(),
        key_hash: None,
        duration_us: 1,
    };
    let old: Vec<_> = (0..5).map(|n| record(n, 1_000 + n)).collect();
    let new: Vec<_> = (5..15).map(|n| record(n, 10_000 + n)).collect();
    let store = server.state.store();
    store.insert_audit(&old).await.unwrap();
    store.insert_audit(&new).await.unwrap();
    // Everything before 10,000 is past the age; of the rest, 6 are kept.
    assert_eq!(store.prune_audit(10_000, 6).await.unwrap(), 5 + 4);
    let left = store
        .list_audit("wsp_0123456789", None, 0, None, 100)
        .await
        .unwrap();
    let ids: Vec<&str> = left.items.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        (9..15)
            .rev()
            .map(|n| format!("aud_{n:010}"))
            .collect::<Vec<_>>()
    );
    // Nothing more to prune.
    assert_eq!(store.prune_audit(10_000, 6).await.unwrap(), 0);
}

/// `GET /health` answers without a credential and writes no audit record: the daemon's `status`
/// probes it, and a probe is not a runtime request or an operator action.
#[tokio::test]
async fn the_health_route_needs_no_credential_and_is_not_audited() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let health = server
        .client
        .get(format!("{}/health", server.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["data"]["status"], "ok");
    // An audited request after it: once its record is written, the probe's would have been too.
    let (status, _) = server
        .post(
            &format!("/admin/workspaces/{}/humans", w.workspace_id),
            Some(&server.operator_token),
            &json!({"handle": "bo", "displayName": "Bo"}),
        )
        .await;
    assert_eq!(status, 200);
    let records = records_when(&server, &w, |found| {
        found
            .iter()
            .any(|r| r["action"].as_str().is_some_and(|a| a.ends_with("/humans")))
    })
    .await;
    assert!(
        records.iter().all(|r| !r.to_string().contains("health")),
        "{records:#?}"
    );
}

/// The audit writer stalled (a fault point: its queue holds six records and it writes none): a
/// read that finds the queue full waits for room, at most the bound, then is refused with an
/// error of its own, never served unaudited; a runtime write and an operator write are answered
/// at once, each record committed in the write's own transaction. Killed then, the server has
/// lost the queued records of reads only: every write that committed has its record. On SQLite
/// here, on PostgreSQL in its pass.
#[tokio::test]
async fn server_audit_a_stalled_writer_refuses_reads_and_loses_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let database = crate::support::database_url(dir.path()).await;
    let token_file = dir.path().join("operator.token");
    let stalled = [("AGENTTEAM_FAULT_AUDIT_STALL", "6")];
    let (mut server, url, operator) = crate::support::spawn_server_in_env(
        "127.0.0.1:0",
        &database,
        &token_file,
        None,
        &[],
        &stalled,
    )
    .await;
    let client = crate::support::http_client();
    let post = |path: String, bearer: String, body: Value| {
        let request = client
            .post(format!("{url}{path}"))
            .bearer_auth(bearer)
            .json(&body);
        async move {
            let started = std::time::Instant::now();
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (status, body, started.elapsed())
        }
    };
    let data = |answer: (u16, Value, std::time::Duration)| {
        assert_eq!(answer.0, 200, "{}", answer.1);
        answer.1["data"].clone()
    };
    // Five operator writes, each record committed with its write.
    let workspace = data(
        post(
            "/admin/workspaces".into(),
            operator.clone(),
            json!({"name": "acme"}),
        )
        .await,
    )["workspaceId"]
        .as_str()
        .unwrap()
        .to_string();
    let base = format!("/admin/workspaces/{workspace}");
    let human = data(
        post(
            format!("{base}/humans"),
            operator.clone(),
            json!({"handle": "ada", "displayName": "Ada"}),
        )
        .await,
    )["humanId"]
        .as_str()
        .unwrap()
        .to_string();
    let agent = data(
        post(
            format!("{base}/agents"),
            operator.clone(),
            json!({"ownerHumanId": human, "handle": "builder", "displayName": "Builder"}),
        )
        .await,
    )["agentId"]
        .as_str()
        .unwrap()
        .to_string();
    let device = data(
        post(
            format!("{base}/devices"),
            operator.clone(),
            json!({"humanId": human}),
        )
        .await,
    )["credential"]
        .as_str()
        .unwrap()
        .to_string();
    let channel = data(
        post(
            format!("{base}/channels"),
            operator.clone(),
            json!({"name": "general", "members": [human, agent]}),
        )
        .await,
    )["channelId"]
        .as_str()
        .unwrap()
        .to_string();
    let actions = format!("/runtime/servers/{workspace}/agents/{agent}/actions/task");
    let location = json!({"kind": "channel", "channelId": channel});
    // Six reads fill the queue, and are served.
    for _ in 0..6 {
        let (status, body, took) = post(
            format!("{actions}/list"),
            device.clone(),
            json!({"location": location}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert!(took < std::time::Duration::from_millis(1900), "{took:?}");
    }
    // The next read waits for room, and is refused when none comes.
    let (status, refused, waited) = post(
        format!("{actions}/list"),
        device.clone(),
        json!({"location": location}),
    )
    .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "admission_limited", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not record this request"),
        "{refused}"
    );
    assert!(
        waited >= std::time::Duration::from_millis(1900),
        "{waited:?}"
    );
    // A runtime write, with and without a selector: answered at once, its record in its
    // transaction.
    let (status, _, took) = post(
        format!("{actions}/create"),
        device.clone(),
        json!({"location": location, "title": "natural"}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(took < std::time::Duration::from_millis(1900), "{took:?}");
    let keyed = client
        .post(format!("{url}{actions}/create"))
        .bearer_auth(&device)
        .header("idempotency-key", "\"req-keyed-1\"")
        .json(&json!({"location": location, "title": "keyed", "requestId": "req-keyed-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(keyed.status().as_u16(), 200);
    // An operator write too: answered at once, its record in its transaction.
    let (status, body, took) = post(
        format!("{base}/channels"),
        operator.clone(),
        json!({"name": "later", "members": [human]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(took < std::time::Duration::from_millis(1900), "{took:?}");

    // Killed: what was queued is lost; what was committed kept its record.
    server.start_kill().unwrap();
    server.wait().await.unwrap();
    let (_server, url, operator) =
        crate::support::spawn_server_on(&database, &token_file, None).await;
    let page: Value = client
        .post(format!("{url}{base}/audit/list"))
        .bearer_auth(&operator)
        .json(&json!({"limit": 100}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let records = page["data"]["records"].as_array().unwrap().clone();
    let kept: Vec<(String, Option<String>)> = records
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap().to_string(),
                r["keyHash"].as_str().map(str::to_string),
            )
        })
        .collect();
    let creates: Vec<_> = kept.iter().filter(|(a, _)| a == "task create").collect();
    assert_eq!(creates.len(), 2, "{records:#?}");
    assert!(
        creates.iter().any(|(_, key)| key.is_some())
            && creates.iter().any(|(_, key)| key.is_none())
    );
    let operator_writes = kept
        .iter()
        .filter(|(a, _)| a.starts_with("POST /admin/workspaces"))
        .count();
    // humans, agents, devices, two channels: the workspace's own creation is recorded without
    // a workspace.
    assert_eq!(operator_writes, 5, "{records:#?}");
    assert!(
        !kept.iter().any(|(a, _)| a == "task list"),
        "the queued reads' records were lost with the process: {records:#?}"
    );
    assert!(records.iter().all(|r| r["outcome"] == "ok"), "{records:#?}");
}

/// The database refuses every audit record (a trigger on `audit_records`, installed on the live
/// server's database): a runtime write and an operator write are each answered with an error,
/// and neither commits, since each record is written in its write's own transaction. Once the
/// database takes records again, the same writes succeed: nothing of the refused ones was kept
/// (the task list is empty, the handle is free). On SQLite here, on PostgreSQL in its pass.
#[tokio::test]
async fn server_audit_a_write_whose_record_cannot_be_written_does_not_commit() {
    let dir = tempfile::tempdir().unwrap();
    let database = crate::support::database_url(dir.path()).await;
    let token_file = dir.path().join("operator.token");
    let (_server, url, operator) =
        crate::support::spawn_server_on(&database, &token_file, None).await;
    let client = crate::support::http_client();
    let post = |path: String, bearer: &str, body: Value| {
        let request = client
            .post(format!("{url}{path}"))
            .bearer_auth(bearer)
            .json(&body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let id = |answer: (u16, Value), field: &str| {
        assert_eq!(answer.0, 200, "{}", answer.1);
        answer.1["data"][field].as_str().unwrap().to_string()
    };
    let workspace = id(
        post(
            "/admin/workspaces".into(),
            &operator,
            json!({"name": "acme"}),
        )
        .await,
        "workspaceId",
    );
    let base = format!("/admin/workspaces/{workspace}");
    let human = id(
        post(
            format!("{base}/humans"),
            &operator,
            json!({"handle": "ada", "displayName": "Ada"}),
        )
        .await,
        "humanId",
    );
    let agent = id(
        post(
            format!("{base}/agents"),
            &operator,
            json!({"ownerHumanId": human, "handle": "builder", "displayName": "Builder"}),
        )
        .await,
        "agentId",
    );
    let device = id(
        post(
            format!("{base}/devices"),
            &operator,
            json!({"humanId": human}),
        )
        .await,
        "credential",
    );
    let channel = id(
        post(
            format!("{base}/channels"),
            &operator,
            json!({"name": "general", "members": [human, agent]}),
        )
        .await,
        "channelId",
    );
    let actions = format!("/runtime/servers/{workspace}/agents/{agent}/actions/task");
    let location = json!({"kind": "channel", "channelId": channel});

    let refuse = |on: bool| {
        let database = database.clone();
        async move {
            let statements: &[&str] = match (database.starts_with("postgres"), on) {
                (true, true) => &[
                    "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$",
                    "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_records FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
                ],
                (true, false) => &[
                    "DROP TRIGGER refuse_audit ON audit_records",
                    "DROP FUNCTION refuse_audit()",
                ],
                (false, true) => &[
                    "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_records BEGIN SELECT RAISE(ABORT, 'audit refused'); END",
                ],
                (false, false) => &["DROP TRIGGER refuse_audit"],
            };
            use sqlx::Connection;
            if database.starts_with("postgres") {
                let mut connection = sqlx::PgConnection::connect(&database).await.unwrap();
                for statement in statements {
                    sqlx::raw_sql(*statement)
                        .execute(&mut connection)
                        .await
                        .unwrap();
                }
            } else {
                let mut connection = sqlx::SqliteConnection::connect(&database).await.unwrap();
                for statement in statements {
                    sqlx::raw_sql(*statement)
                        .execute(&mut connection)
                        .await
                        .unwrap();
                }
            }
        }
    };
    refuse(true).await;
    let (status, refused) = post(
        format!("{actions}/create"),
        &device,
        json!({"location": location, "title": "doomed", "requestId": "req-doomed-1"}),
    )
    .await;
    assert!(status >= 500, "{status} {refused}");
    let (status, refused) = post(
        format!("{base}/humans"),
        &operator,
        json!({"handle": "eve", "displayName": "Eve"}),
    )
    .await;
    assert!(status >= 500, "{status} {refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing of it was committed"),
        "{refused}"
    );
    refuse(false).await;

    let (status, listed) = post(
        format!("{actions}/list"),
        &device,
        json!({"location": location}),
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["data"]["tasks"], json!([]), "{listed}");
    id(
        post(
            format!("{base}/humans"),
            &operator,
            json!({"handle": "eve", "displayName": "Eve"}),
        )
        .await,
        "humanId",
    );
    let (status, created) = post(
        format!("{actions}/create"),
        &device,
        json!({"location": location, "title": "kept", "requestId": "req-doomed-1"}),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["data"]["task"]["title"], "kept", "{created}");
}
