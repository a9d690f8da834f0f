//! Workflows, approvals, workspace and profile over real HTTP (on whichever backend the run is
//! on): a whole workflow driven through `agentteam exec` from a runtime with the approval decided
//! through `agentteam admin`, run logs over 64 KiB read back by section without loss, every
//! invalid transition refused with a typed error, a side effect over the result budget answered
//! with a receipt and replayed, scheduled triggers firing once, keyset pages, cross-workspace
//! refusal, and the agent's own profile.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Launched, TestDaemon, TestServer, Workspace, agentteam, bin, spawn_server};

/// `data` of a success, or a panic naming the answer.
#[track_caller]
fn ok((status, body): (u16, Value)) -> Value {
    assert_eq!(status, 200, "{body}");
    body["data"].clone()
}

/// The error of a refusal with `status` and `code`.
#[track_caller]
fn refused((status, body): (u16, Value), expected: u16, code: &str) -> Value {
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (expected, Some(code)),
        "{body}"
    );
    body["error"].clone()
}

async fn act(server: &TestServer, w: &Workspace, action: &str, input: Value) -> (u16, Value) {
    let (domain, action) = action.split_once(' ').unwrap();
    server.action(w, &w.agent_id, domain, action, input).await
}

fn steps(kinds: &[(&str, &str)]) -> Value {
    Value::Array(
        kinds
            .iter()
            .map(|(key, kind)| json!({"key": key, "title": format!("Step {key}"), "kind": kind}))
            .collect(),
    )
}

/// A published plan of `steps` and an enabled manual trigger: `(plan id, trigger id)`.
async fn published(server: &TestServer, w: &Workspace, steps: Value) -> (String, String) {
    let plan = ok(act(
        server,
        w,
        "workflow plan",
        json!({"operation": "create", "name": "Release", "steps": steps}),
    )
    .await);
    let plan_id = plan["plan"]["id"].as_str().unwrap().to_string();
    ok(act(
        server,
        w,
        "workflow plan",
        json!({"operation": "publish", "planId": plan_id}),
    )
    .await);
    let trigger = ok(act(
        server,
        w,
        "workflow trigger",
        json!({"operation": "create", "planId": plan_id, "name": "manual", "kind": "manual"}),
    )
    .await);
    (
        plan_id,
        trigger["trigger"]["id"].as_str().unwrap().to_string(),
    )
}

/// Starts a run through `trigger`; returns `(run id, its steps)`.
async fn start(server: &TestServer, w: &Workspace, trigger: &str) -> (String, Vec<Value>) {
    let run = ok(act(
        server,
        w,
        "workflow run",
        json!({"operation": "start", "triggerId": trigger}),
    )
    .await);
    let run_id = run["run"]["id"].as_str().unwrap().to_string();
    let shown = ok(act(
        server,
        w,
        "workflow run",
        json!({"operation": "show", "runId": run_id}),
    )
    .await);
    (run_id, shown["steps"].as_array().unwrap().clone())
}

fn id(value: &Value) -> String {
    value["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn invalid_transitions_are_each_refused_with_a_typed_error() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (plan_id, trigger_id) = published(
        &server,
        &w,
        steps(&[("build", "task"), ("check", "approval"), ("ship", "task")]),
    )
    .await;

    // Publishing an unchanged published version, and an archived plan.
    let error = refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "publish", "planId": plan_id}),
        )
        .await,
        409,
        "invalid_state",
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("already published"),
        "{error}"
    );

    // A parked step cannot be completed; a pending one has not been reached.
    let (run_id, run_steps) = start(&server, &w, &trigger_id).await;
    let (build, check) = (id(&run_steps[0]), id(&run_steps[1]));
    let error = refused(
        act(
            &server,
            &w,
            "workflow step",
            json!({"operation": "complete", "stepId": check}),
        )
        .await,
        409,
        "invalid_state",
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("has not reached"),
        "{error}"
    );
    let parked = ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "park", "stepId": build, "reason": "blocked"}),
    )
    .await);
    assert_eq!(parked["step"]["status"], "parked");
    let run = ok(act(
        &server,
        &w,
        "workflow run",
        json!({"operation": "show", "runId": run_id}),
    )
    .await);
    assert_eq!(run["run"]["status"], "waiting");
    let error = refused(
        act(
            &server,
            &w,
            "workflow step",
            json!({"operation": "complete", "stepId": build}),
        )
        .await,
        409,
        "invalid_state",
    );
    assert!(
        error["message"].as_str().unwrap().contains("parked"),
        "{error}"
    );
    refused(
        act(
            &server,
            &w,
            "workflow step",
            json!({"operation": "pause", "stepId": build}),
        )
        .await,
        409,
        "invalid_state",
    );
    ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "fail", "stepId": build, "reason": "gave up"}),
    )
    .await);
    let run = ok(act(
        &server,
        &w,
        "workflow run",
        json!({"operation": "show", "runId": run_id}),
    )
    .await);
    assert_eq!(run["run"]["status"], "failed");
    assert_eq!(run["steps"][2]["status"], "cancelled");
    refused(
        act(
            &server,
            &w,
            "workflow run",
            json!({"operation": "cancel", "runId": run_id}),
        )
        .await,
        409,
        "invalid_state",
    );

    // A disabled trigger starts no run; enabling it twice is refused too.
    ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "disable", "triggerId": trigger_id}),
    )
    .await);
    let error = refused(
        act(
            &server,
            &w,
            "workflow run",
            json!({"operation": "start", "triggerId": trigger_id}),
        )
        .await,
        409,
        "invalid_state",
    );
    assert!(
        error["message"].as_str().unwrap().contains("disabled"),
        "{error}"
    );
    ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "enable", "triggerId": trigger_id}),
    )
    .await);
    refused(
        act(
            &server,
            &w,
            "workflow trigger",
            json!({"operation": "enable", "triggerId": trigger_id}),
        )
        .await,
        409,
        "invalid_state",
    );

    // An approval is decided once.
    let (_, run_steps) = start(&server, &w, &trigger_id).await;
    ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "complete", "stepId": id(&run_steps[0])}),
    )
    .await);
    let waiting = ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "get", "stepId": id(&run_steps[1])}),
    )
    .await);
    assert_eq!(waiting["step"]["status"], "waiting");
    let approval = waiting["step"]["approvalId"].as_str().unwrap().to_string();
    refused(
        act(
            &server,
            &w,
            "workflow step",
            json!({"operation": "complete", "stepId": id(&run_steps[1])}),
        )
        .await,
        409,
        "invalid_state",
    );
    let decide = |decision: &'static str| {
        let (server, w, approval) = (&server, &w, approval.clone());
        async move {
            server
                .post(
                    &format!(
                        "/admin/workspaces/{}/approvals/{approval}/decision",
                        w.workspace_id
                    ),
                    Some(&server.operator_token),
                    &json!({"humanId": w.human_id, "decision": decision}),
                )
                .await
        }
    };
    ok(decide("approve").await);
    let error = refused(decide("reject").await, 409, "invalid_state");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("already decided: approved"),
        "{error}"
    );

    // An archived plan cannot be published or changed, and starts no runs.
    ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "archive", "planId": plan_id}),
    )
    .await);
    let error = refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "publish", "planId": plan_id}),
        )
        .await,
        409,
        "invalid_state",
    );
    assert!(
        error["message"].as_str().unwrap().contains("archived"),
        "{error}"
    );
    refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "update", "planId": plan_id, "name": "x"}),
        )
        .await,
        409,
        "invalid_state",
    );
    refused(
        act(
            &server,
            &w,
            "workflow run",
            json!({"operation": "start", "triggerId": trigger_id}),
        )
        .await,
        409,
        "invalid_state",
    );
}

#[tokio::test]
async fn plans_are_versioned_and_publishing_freezes_a_version() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let created = ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "create", "name": "Release", "steps": steps(&[("a", "task")])}),
    )
    .await);
    let plan_id = id(&created["plan"]);
    assert_eq!(
        (
            created["plan"]["latestVersion"].as_u64(),
            created["plan"].get("publishedVersion")
        ),
        (Some(1), None)
    );
    // Before a publish, changes go into the draft.
    ok(act(&server, &w, "workflow plan", json!({"operation": "update", "planId": plan_id, "steps": steps(&[("a", "task"), ("b", "task")])})).await);
    let published = ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "publish", "planId": plan_id}),
    )
    .await);
    assert_eq!(
        (
            published["plan"]["latestVersion"].as_u64(),
            published["plan"]["publishedVersion"].as_u64()
        ),
        (Some(1), Some(1))
    );
    // After it, a change starts version 2; version 1 stays as published.
    let updated = ok(act(&server, &w, "workflow plan", json!({"operation": "update", "planId": plan_id, "steps": steps(&[("c", "task")]), "expectedRevision": 3})).await);
    assert_eq!(
        (
            updated["plan"]["latestVersion"].as_u64(),
            updated["plan"]["publishedVersion"].as_u64()
        ),
        (Some(2), Some(1))
    );
    let one = ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "version", "planId": plan_id, "version": 1}),
    )
    .await);
    assert_eq!(
        (
            one["version"]["state"].as_str(),
            one["version"]["steps"].as_array().unwrap().len()
        ),
        (Some("published"), 2)
    );
    let shown = ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "show", "planId": plan_id}),
    )
    .await);
    assert_eq!(
        (
            shown["latest"]["version"].as_u64(),
            shown["latest"]["state"].as_str()
        ),
        (Some(2), Some("draft"))
    );
    refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "version", "planId": plan_id, "version": 3}),
        )
        .await,
        404,
        "not_found",
    );
    // A stale revision, nothing to change, and a duplicated step key are refused.
    refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "update", "planId": plan_id, "name": "x", "expectedRevision": 1}),
        )
        .await,
        409,
        "revision_mismatch",
    );
    refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "update", "planId": plan_id}),
        )
        .await,
        400,
        "validation_failed",
    );
    let error = refused(act(&server, &w, "workflow plan", json!({"operation": "create", "name": "dup", "steps": steps(&[("a", "task"), ("a", "approval")])})).await, 400, "validation_failed");
    assert_eq!(error["details"][0]["path"], "/steps/1/key");
    let report = ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "validate", "steps": steps(&[("a", "task"), ("a", "task")])}),
    )
    .await);
    assert_eq!(report["valid"], false);
    assert_eq!(report["problems"][0]["path"], "/steps/1/key");
    let report = ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "validate", "steps": steps(&[("a", "task")])}),
    )
    .await);
    assert_eq!(
        report,
        json!({"operation": "validate", "valid": true, "problems": []})
    );
    // A new run uses the published version, not the newer draft.
    let trigger = ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "create", "planId": plan_id, "name": "m", "kind": "manual"}),
    )
    .await);
    let (_, run_steps) = start(&server, &w, &id(&trigger["trigger"])).await;
    let keys: Vec<&str> = run_steps
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["a", "b"]);
}

#[tokio::test]
async fn a_scheduled_trigger_fires_once_per_due_time_through_the_scheduler() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (plan_id, _) = published(&server, &w, steps(&[("a", "task")])).await;
    let now = server.state.clock().now_ms();
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    // Validation names each problem before anything is stored.
    let report = ok(act(&server, &w, "workflow trigger", json!({"operation": "validate", "planId": plan_id, "kind": "scheduled", "startAt": at(now - 1000)})).await);
    assert_eq!(
        report["problems"][0],
        json!({"path": "/startAt", "message": "`startAt` must be in the future"})
    );
    let report = ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "validate", "planId": plan_id, "kind": "manual", "everyMinutes": 5}),
    )
    .await);
    assert_eq!(report["problems"][0]["path"], "/everyMinutes");
    refused(
        act(
            &server,
            &w,
            "workflow trigger",
            json!({"operation": "create", "planId": plan_id, "name": "n", "kind": "scheduled"}),
        )
        .await,
        400,
        "validation_failed",
    );

    let trigger = ok(act(&server, &w, "workflow trigger", json!({"operation": "create", "planId": plan_id, "name": "every 5", "kind": "scheduled", "startAt": at(now + 60_000), "everyMinutes": 5})).await);
    let trigger_id = id(&trigger["trigger"]);
    let runs = || async {
        ok(act(
            &server,
            &w,
            "workflow run",
            json!({"operation": "list", "planId": plan_id}),
        )
        .await)["runs"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_started,
        0
    );
    server.state.clock().advance(Duration::from_secs(61));
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_started,
        1
    );
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_started,
        0,
        "a due time fires once"
    );
    assert_eq!(runs().await, 1);
    let shown = ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "show", "triggerId": trigger_id}),
    )
    .await);
    assert_eq!(shown["trigger"]["nextFireAt"], at(now + 60_000 + 300_000));
    // Disabled, it does not fire; enabled again, the missed firings collapse into one.
    ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "disable", "triggerId": trigger_id}),
    )
    .await);
    server.state.clock().advance(Duration::from_secs(16 * 60));
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_started,
        0
    );
    ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "enable", "triggerId": trigger_id}),
    )
    .await);
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_started,
        1
    );
    assert_eq!(
        server
            .state
            .run_scheduler_pass()
            .await
            .unwrap()
            .runs_started,
        0
    );
    assert_eq!(runs().await, 2);
    let listed = ok(act(
        &server,
        &w,
        "workflow run",
        json!({"operation": "list", "planId": plan_id}),
    )
    .await);
    assert!(
        listed["runs"][0].get("startedByAgentId").is_none(),
        "the schedule started it"
    );
}

/// Pages `action` with `input` to the end, checking the order key; returns ids in page order.
async fn page_all(
    server: &TestServer,
    w: &Workspace,
    action: &str,
    input: Value,
    field: &str,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut request = input.clone();
        request["limit"] = json!(7);
        if let Some(cursor) = &cursor {
            request["cursor"] = json!(cursor);
        }
        let data = ok(act(server, w, action, request).await);
        for item in data[field].as_array().unwrap() {
            ids.push(id(item));
            keys.push((item["updatedAt"].as_str().unwrap().to_string(), id(item)));
        }
        match (data["hasMore"].as_bool().unwrap(), data.get("nextCursor")) {
            (true, Some(next)) => cursor = Some(next.as_str().unwrap().to_string()),
            (false, None) => break,
            other => panic!("hasMore and nextCursor disagree: {other:?}"),
        }
    }
    let mut sorted = keys.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(keys, sorted, "{action}: updatedAt DESC, id DESC");
    ids
}

#[tokio::test]
async fn lists_page_by_update_newest_first_with_cursors_bound_to_operation_and_filter() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    // Many ties on `updatedAt`: the clock is pinned for the setup.
    server.state.clock().pin(Some(1_800_000_000_000));
    let mut plans = BTreeSet::new();
    let mut trigger_id = String::new();
    for i in 0..16 {
        let plan = ok(act(&server, &w, "workflow plan", json!({"operation": "create", "name": format!("p{i}"), "steps": steps(&[("a", "task"), ("b", "task")])})).await);
        plans.insert(id(&plan["plan"]));
        if i < 3 {
            ok(act(
                &server,
                &w,
                "workflow plan",
                json!({"operation": "archive", "planId": id(&plan["plan"])}),
            )
            .await);
        }
        if i == 5 {
            ok(act(
                &server,
                &w,
                "workflow plan",
                json!({"operation": "publish", "planId": id(&plan["plan"])}),
            )
            .await);
            let trigger = ok(act(&server, &w, "workflow trigger", json!({"operation": "create", "planId": id(&plan["plan"]), "name": "m", "kind": "manual"})).await);
            trigger_id = id(&trigger["trigger"]);
        }
        ok(act(
            &server,
            &w,
            "approval request",
            json!({"title": format!("a{i}")}),
        )
        .await);
    }
    for _ in 0..9 {
        start(&server, &w, &trigger_id).await;
    }
    server.state.clock().pin(None);

    let all = page_all(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "list"}),
        "plans",
    )
    .await;
    assert_eq!(all.iter().cloned().collect::<BTreeSet<_>>(), plans);
    assert_eq!(all.len(), 16);
    let archived = page_all(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "list", "status": "archived"}),
        "plans",
    )
    .await;
    assert_eq!(archived.len(), 3);
    assert_eq!(
        page_all(
            &server,
            &w,
            "workflow trigger",
            json!({"operation": "list"}),
            "triggers"
        )
        .await
        .len(),
        1
    );
    let runs = page_all(
        &server,
        &w,
        "workflow run",
        json!({"operation": "list", "status": "running"}),
        "runs",
    )
    .await;
    assert_eq!(runs.len(), 9);
    let step_ids = page_all(
        &server,
        &w,
        "workflow step",
        json!({"operation": "list", "runId": runs[0]}),
        "steps",
    )
    .await;
    assert_eq!(step_ids.len(), 2);
    assert_eq!(
        page_all(&server, &w, "approval list", json!({}), "approvals")
            .await
            .len(),
        16
    );
    assert_eq!(
        page_all(
            &server,
            &w,
            "approval list",
            json!({"status": "approved"}),
            "approvals"
        )
        .await
        .len(),
        0
    );

    // A cursor is valid only for its operation and filter.
    let first = ok(act(
        &server,
        &w,
        "workflow plan",
        json!({"operation": "list", "limit": 2}),
    )
    .await);
    let cursor = first["nextCursor"].as_str().unwrap();
    refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "list", "status": "active", "cursor": cursor}),
        )
        .await,
        400,
        "validation_failed",
    );
    refused(
        act(
            &server,
            &w,
            "workflow run",
            json!({"operation": "list", "cursor": cursor}),
        )
        .await,
        400,
        "validation_failed",
    );
    refused(
        act(&server, &w, "approval list", json!({"cursor": cursor})).await,
        400,
        "validation_failed",
    );
    // The schema bounds every page at 100.
    refused(
        act(
            &server,
            &w,
            "workflow plan",
            json!({"operation": "list", "limit": 101}),
        )
        .await,
        400,
        "validation_failed",
    );
}

#[tokio::test]
async fn another_workspaces_workflows_and_approvals_are_not_found() {
    let server = TestServer::start().await;
    let a = server.workspace("acme").await;
    let b = server.workspace("other").await;
    let (plan_id, trigger_id) = published(&server, &a, steps(&[("gate", "approval")])).await;
    let (run_id, run_steps) = start(&server, &a, &trigger_id).await;
    let step_id = id(&run_steps[0]);
    let approval_id = run_steps[0]["approvalId"].as_str().unwrap().to_string();
    let calls = [
        (
            "workflow plan",
            json!({"operation": "show", "planId": plan_id}),
        ),
        (
            "workflow plan",
            json!({"operation": "version", "planId": plan_id, "version": 1}),
        ),
        (
            "workflow plan",
            json!({"operation": "publish", "planId": plan_id}),
        ),
        (
            "workflow plan",
            json!({"operation": "archive", "planId": plan_id}),
        ),
        (
            "workflow trigger",
            json!({"operation": "show", "triggerId": trigger_id}),
        ),
        (
            "workflow trigger",
            json!({"operation": "disable", "triggerId": trigger_id}),
        ),
        (
            "workflow trigger",
            json!({"operation": "create", "planId": plan_id, "name": "x", "kind": "manual"}),
        ),
        (
            "workflow run",
            json!({"operation": "start", "triggerId": trigger_id}),
        ),
        (
            "workflow run",
            json!({"operation": "show", "runId": run_id}),
        ),
        (
            "workflow run",
            json!({"operation": "logs", "runId": run_id}),
        ),
        (
            "workflow run",
            json!({"operation": "cancel", "runId": run_id}),
        ),
        (
            "workflow step",
            json!({"operation": "list", "runId": run_id}),
        ),
        (
            "workflow step",
            json!({"operation": "get", "stepId": step_id}),
        ),
        (
            "workflow step",
            json!({"operation": "fail", "stepId": step_id, "reason": "x"}),
        ),
        ("approval get", json!({"approvalId": approval_id})),
    ];
    for (action, input) in calls {
        refused(
            act(&server, &b, action, input.clone()).await,
            404,
            "not_found",
        );
    }
    let report = ok(act(
        &server,
        &b,
        "workflow trigger",
        json!({"operation": "validate", "planId": plan_id, "kind": "manual"}),
    )
    .await);
    assert_eq!(report["problems"][0]["path"], "/planId");
    for (action, field) in [
        ("workflow plan", "plans"),
        ("workflow run", "runs"),
        ("workflow trigger", "triggers"),
    ] {
        assert_eq!(
            ok(act(&server, &b, action, json!({"operation": "list"})).await)[field],
            json!([])
        );
    }
    assert_eq!(
        ok(act(&server, &b, "approval list", json!({})).await)["approvals"],
        json!([])
    );
    // Nor can the operator decide it in the other workspace.
    let (status, body) = server
        .post(
            &format!(
                "/admin/workspaces/{}/approvals/{approval_id}/decision",
                b.workspace_id
            ),
            Some(&server.operator_token),
            &json!({"humanId": b.human_id, "decision": "approve"}),
        )
        .await;
    refused((status, body), 404, "not_found");
    // A human of another workspace cannot decide it either.
    let (status, body) = server
        .post(
            &format!(
                "/admin/workspaces/{}/approvals/{approval_id}/decision",
                a.workspace_id
            ),
            Some(&server.operator_token),
            &json!({"humanId": b.human_id, "decision": "approve"}),
        )
        .await;
    refused((status, body), 404, "not_found");
    // Still untouched in its own workspace.
    let run = ok(act(
        &server,
        &a,
        "workflow run",
        json!({"operation": "show", "runId": run_id}),
    )
    .await);
    assert_eq!(run["run"]["status"], "waiting");
}

#[tokio::test]
async fn side_effects_replay_with_their_request_id_and_an_approval_is_requested_once() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let create = json!({"operation": "create", "name": "Once", "steps": steps(&[("a", "task")]), "requestId": "req-plan-once-001"});
    let first = act(&server, &w, "workflow plan", create.clone()).await;
    let again = act(&server, &w, "workflow plan", create).await;
    assert_eq!(first, again);
    let listed = ok(act(&server, &w, "workflow plan", json!({"operation": "list"})).await);
    assert_eq!(listed["plans"].as_array().unwrap().len(), 1);
    // The same key on another operation of the same action is another payload.
    let (status, body) = act(&server, &w, "workflow plan", json!({"operation": "publish", "planId": id(&ok(first)["plan"]), "requestId": "req-plan-once-001"})).await;
    refused((status, body), 422, "idempotency_key_reused");

    let request =
        json!({"title": "Ship it", "details": "all green", "requestId": "req-approval-0001"});
    let one = ok(act(&server, &w, "approval request", request.clone()).await);
    let two = ok(act(&server, &w, "approval request", request).await);
    assert_eq!(one, two);
    assert_eq!(one["approval"]["status"], "pending");
    assert_eq!(one["approval"]["requestedByAgentId"], w.agent_id.as_str());
    let got = ok(act(
        &server,
        &w,
        "approval get",
        json!({"approvalId": id(&one["approval"])}),
    )
    .await);
    assert_eq!(got, one);
}

#[tokio::test]
async fn workspace_get_and_the_agents_own_profile() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let workspace = ok(act(&server, &w, "workspace get", json!({})).await);
    assert_eq!(workspace["workspace"]["id"], w.workspace_id.as_str());
    assert_eq!(workspace["workspace"]["name"], "acme");
    let profile = ok(act(&server, &w, "profile get", json!({})).await);
    assert_eq!(
        (
            profile["profile"]["agentId"].as_str(),
            profile["profile"]["displayName"].as_str(),
            profile["profile"]["status"].as_str(),
            profile["profile"]["revision"].as_u64()
        ),
        (
            Some(w.agent_id.as_str()),
            Some("Builder"),
            Some("available"),
            Some(1)
        )
    );
    let updated = ok(act(&server, &w, "profile update", json!({"displayName": "Release Builder", "description": "I ship releases.", "status": "busy", "expectedRevision": 1})).await);
    assert_eq!(
        (
            updated["profile"]["displayName"].as_str(),
            updated["profile"]["description"].as_str(),
            updated["profile"]["status"].as_str(),
            updated["profile"]["revision"].as_u64()
        ),
        (
            Some("Release Builder"),
            Some("I ship releases."),
            Some("busy"),
            Some(2)
        )
    );
    refused(
        act(
            &server,
            &w,
            "profile update",
            json!({"status": "away", "expectedRevision": 1}),
        )
        .await,
        409,
        "revision_mismatch",
    );
    refused(
        act(&server, &w, "profile update", json!({})).await,
        400,
        "validation_failed",
    );
    // Another agent's profile is its own: the second agent still has its name.
    let other = ok(server
        .action(&w, &w.other_agent_id, "profile", "get", json!({}))
        .await);
    assert_eq!(other["profile"]["displayName"], "Reviewer");
    // The new display name is what the workspace sees.
    let lookup = server
        .admin(
            &format!("/admin/workspaces/{}/agents/lookup", w.workspace_id),
            json!({"agentIds": [w.agent_id]}),
        )
        .await;
    assert!(lookup.to_string().contains("Release Builder"), "{lookup}");
}

// ---------------------------------------------------------------------------------------------
// Through the daemon and `agentteam exec`, against a server process.

/// A server process, a daemon using it, one agent and a runtime whose credentials the test acts
/// with (as the runtime would).
struct Flow {
    _server: tokio::process::Child,
    server_url: String,
    token_file: std::path::PathBuf,
    daemon: TestDaemon,
    _runtime: Launched,
    base: String,
    exec_token_file: String,
    workspace_id: String,
    human_id: String,
    _dir: tempfile::TempDir,
}

impl Flow {
    async fn start() -> Flow {
        let dir = tempfile::tempdir().unwrap();
        let (server, server_url, _) = spawn_server(dir.path()).await;
        let token_file = dir.path().join("operator.token");
        let daemon = TestDaemon::start(&[
            "--server-url",
            &server_url,
            "--operator-token-file",
            token_file.to_str().unwrap(),
        ])
        .await;
        daemon.add_agent("builder").await;
        let mut runtime = daemon.launch(
            "builder",
            &[],
            r#"echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 300"#,
        );
        let base = runtime.line().await;
        let exec_token_file = runtime.line().await;
        let identity: Value =
            serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
                .unwrap();
        Flow {
            _server: server,
            server_url,
            token_file,
            workspace_id: identity["workspaceId"].as_str().unwrap().to_string(),
            human_id: identity["humanId"].as_str().unwrap().to_string(),
            daemon,
            _runtime: runtime,
            base,
            exec_token_file,
            _dir: dir,
        }
    }

    /// `agentteam exec <domain> <action> '<input>'` with the runtime's variables: exit code and
    /// the printed envelope.
    async fn exec(&self, domain: &str, action: &str, input: &Value) -> (i32, Value) {
        let output = tokio::process::Command::new(bin())
            .args(["exec", domain, action, &input.to_string()])
            .env("AGENTTEAM_EXEC_BASE_URL", &self.base)
            .env("AGENTTEAM_EXEC_TOKEN_FILE", &self.exec_token_file)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        let envelope = serde_json::from_str(&stdout).unwrap_or_else(|_| {
            panic!(
                "not one envelope: {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (output.status.code().unwrap(), envelope)
    }

    /// The same request over the runtime's Exec route, for many calls.
    async fn post(&self, domain: &str, action: &str, input: &Value) -> (u16, String) {
        let token = std::fs::read_to_string(&self.exec_token_file).unwrap();
        let response = self
            .daemon
            .client
            .post(format!("{}/{domain}/{action}", self.base))
            .bearer_auth(token)
            .json(input)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }
}

#[track_caller]
fn data_of((code, envelope): (i32, Value)) -> Value {
    assert_eq!((code, &envelope["ok"]), (0, &json!(true)), "{envelope}");
    envelope["data"].clone()
}

#[tokio::test]
async fn a_workflow_runs_to_completion_through_agentteam_exec_with_a_human_approval() {
    let flow = Flow::start().await;
    let plan = data_of(flow.exec("workflow", "plan", &json!({
        "operation": "create", "name": "Release 1.4", "requestId": "req-e2e-plan-01",
        "steps": [
            {"key": "build", "title": "Build", "kind": "task", "instructions": "Build the release"},
            {"key": "sign-off", "title": "Sign-off", "kind": "approval", "instructions": "Approve the notes"},
            {"key": "ship", "title": "Ship", "kind": "task"}
        ]
    })).await);
    let plan_id = id(&plan["plan"]);
    let published = data_of(
        flow.exec(
            "workflow",
            "plan",
            &json!({"operation": "publish", "planId": plan_id}),
        )
        .await,
    );
    assert_eq!(published["plan"]["publishedVersion"], 1);
    let trigger = data_of(flow.exec("workflow", "trigger", &json!({"operation": "create", "planId": plan_id, "name": "On demand", "kind": "manual"})).await);
    let run = data_of(flow.exec("workflow", "run", &json!({"operation": "start", "triggerId": id(&trigger["trigger"]), "requestId": "req-e2e-run-001"})).await);
    let run_id = id(&run["run"]);
    assert_eq!(
        (
            run["run"]["status"].as_str(),
            run["run"]["currentStepKey"].as_str()
        ),
        (Some("running"), Some("build"))
    );

    let shown = data_of(
        flow.exec(
            "workflow",
            "run",
            &json!({"operation": "show", "runId": run_id}),
        )
        .await,
    );
    let step = |key: &str| {
        shown["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let completed = data_of(flow.exec("workflow", "step", &json!({"operation": "complete", "stepId": step("build"), "output": "built 1.4.0", "log": "cargo build --release: ok"})).await);
    assert_eq!(completed["step"]["status"], "completed");

    // The approval step waits on an approval a human decides through `agentteam admin`.
    let waiting = data_of(
        flow.exec(
            "workflow",
            "step",
            &json!({"operation": "get", "stepId": step("sign-off")}),
        )
        .await,
    );
    assert_eq!(waiting["step"]["status"], "waiting");
    let approval_id = waiting["step"]["approvalId"].as_str().unwrap().to_string();
    let approval = data_of(
        flow.exec("approval", "get", &json!({"approvalId": approval_id}))
            .await,
    );
    assert_eq!(
        (
            approval["approval"]["status"].as_str(),
            approval["approval"]["runId"].as_str()
        ),
        (Some("pending"), Some(run_id.as_str()))
    );
    // An agent cannot complete it itself: exit 1 with the typed error.
    let (code, refusal) = flow
        .exec(
            "workflow",
            "step",
            &json!({"operation": "complete", "stepId": step("sign-off")}),
        )
        .await;
    assert_eq!(
        (code, refusal["error"]["code"].as_str()),
        (1, Some("invalid_state")),
        "{refusal}"
    );
    let pending = agentteam(&[
        "admin",
        "approvals",
        "--server-url",
        &flow.server_url,
        "--operator-token-file",
        flow.token_file.to_str().unwrap(),
        "--workspace",
        &flow.workspace_id,
        "--status",
        "pending",
    ]);
    assert_eq!(pending.code, 0, "{}", pending.stderr);
    assert!(pending.stdout.contains(&approval_id), "{}", pending.stdout);
    let decided = agentteam(&[
        "admin",
        "--json",
        "decide",
        "--server-url",
        &flow.server_url,
        "--operator-token-file",
        flow.token_file.to_str().unwrap(),
        "--workspace",
        &flow.workspace_id,
        "--approval",
        &approval_id,
        "--human",
        &flow.human_id,
        "--decision",
        "approve",
        "--comment",
        "ship it",
    ]);
    assert_eq!(decided.code, 0, "{}", decided.stderr);
    let decided: Value = serde_json::from_str(&decided.stdout).unwrap();
    assert_eq!(decided["approval"]["status"], "approved");

    let shown_again = data_of(
        flow.exec(
            "workflow",
            "run",
            &json!({"operation": "show", "runId": run_id}),
        )
        .await,
    );
    assert_eq!(
        (
            shown_again["run"]["status"].as_str(),
            shown_again["run"]["currentStepKey"].as_str()
        ),
        (Some("running"), Some("ship"))
    );
    data_of(
        flow.exec(
            "workflow",
            "step",
            &json!({"operation": "complete", "stepId": step("ship")}),
        )
        .await,
    );
    let finished = data_of(
        flow.exec(
            "workflow",
            "run",
            &json!({"operation": "show", "runId": run_id}),
        )
        .await,
    );
    assert_eq!(finished["run"]["status"], "completed");
    assert!(finished["run"].get("finishedAt").is_some());
    let statuses: Vec<&str> = finished["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "completed", "completed"]);

    // The log tells the story in order.
    let logs = data_of(
        flow.exec(
            "workflow",
            "run",
            &json!({"operation": "logs", "runId": run_id}),
        )
        .await,
    );
    assert_eq!(logs["hasMore"], false);
    let events: Vec<&str> = logs["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "run.started",
            "step.started",
            "step.completed",
            "step.log",
            "step.waiting",
            "approval.decided",
            "step.completed",
            "step.started",
            "step.completed",
            "run.completed",
        ]
    );
    // A run of the trigger again: the start replays by its request id, it does not start twice.
    let replay = data_of(flow.exec("workflow", "run", &json!({"operation": "start", "triggerId": id(&trigger["trigger"]), "requestId": "req-e2e-run-001"})).await);
    assert_eq!(id(&replay["run"]), run_id);
}

#[tokio::test]
async fn run_logs_over_64_kib_continue_by_section_without_loss() {
    let flow = Flow::start().await;
    let keys: Vec<String> = (0..6).map(|i| format!("s{i}")).collect();
    let plan_steps: Vec<Value> = keys
        .iter()
        .map(|k| json!({"key": k, "title": k, "kind": "task"}))
        .collect();
    let (_, plan) = flow
        .post(
            "workflow",
            "plan",
            &json!({"operation": "create", "name": "Long", "steps": plan_steps}),
        )
        .await;
    let plan_id = serde_json::from_str::<Value>(&plan).unwrap()["data"]["plan"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    flow.post(
        "workflow",
        "plan",
        &json!({"operation": "publish", "planId": plan_id}),
    )
    .await;
    let (_, trigger) = flow
        .post(
            "workflow",
            "trigger",
            &json!({"operation": "create", "planId": plan_id, "name": "m", "kind": "manual"}),
        )
        .await;
    let trigger_id = serde_json::from_str::<Value>(&trigger).unwrap()["data"]["trigger"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, run) = flow
        .post(
            "workflow",
            "run",
            &json!({"operation": "start", "triggerId": trigger_id}),
        )
        .await;
    let run_id = serde_json::from_str::<Value>(&run).unwrap()["data"]["run"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, shown) = flow
        .post(
            "workflow",
            "run",
            &json!({"operation": "show", "runId": run_id}),
        )
        .await;
    let shown: Value = serde_json::from_str(&shown).unwrap();

    // Each step logs 15,000 characters: quotes, backslashes, newlines and non-ASCII that JSON
    // escapes or encodes in several bytes, so the sections' byte accounting is exercised.
    let mut written = Vec::new();
    for (index, step) in shown["data"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let text: String = (0..15_000)
            .map(|i| ['a', '"', '\\', '\n', 'é', '字', '\u{1}', 'z'][(i * 7 + index) % 8])
            .collect();
        let (status, body) = flow
            .post(
                "workflow",
                "step",
                &json!({"operation": "complete", "stepId": step["id"], "log": text}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        written.push(text);
    }
    let total: usize = written
        .iter()
        .map(|t| serde_json::to_string(t).unwrap().len())
        .sum();
    assert!(
        total > 64 * 1024,
        "the log is over the budget: {total} bytes"
    );

    let mut entries = Vec::new();
    let mut section = 0;
    loop {
        let (status, body) = flow
            .post(
                "workflow",
                "run",
                &json!({"operation": "logs", "runId": run_id, "section": section}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert!(
            body.len() <= 64 * 1024 + 1,
            "a section fits the result budget: {}",
            body.len()
        );
        let data = serde_json::from_str::<Value>(&body).unwrap()["data"].clone();
        assert_eq!(data["section"], section);
        entries.extend(data["entries"].as_array().unwrap().clone());
        match data.get("nextSection") {
            Some(next) => {
                assert_eq!(data["hasMore"], true);
                section = next.as_u64().unwrap();
            }
            None => {
                assert_eq!(data["hasMore"], false);
                break;
            }
        }
    }
    assert!(section >= 2, "the log spans several sections");
    // No entry lost or repeated, and each step's text comes back byte for byte.
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=entries.len() as u64).collect::<Vec<_>>());
    for (key, text) in keys.iter().zip(&written) {
        let read: String = entries
            .iter()
            .filter(|e| e["event"] == "step.log" && e["stepKey"] == key.as_str())
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(read.as_bytes(), text.as_bytes(), "step {key}");
    }
    // A section past the end is a validation error, not an empty page.
    let (status, body) = flow
        .post(
            "workflow",
            "run",
            &json!({"operation": "logs", "runId": run_id, "section": section + 1}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_step_write_the_step_could_not_be_read_after_is_refused() {
    let flow = Flow::start().await;
    // Control characters serialize as six bytes each: 8,000 of them in the step's instructions
    // and 8,000 in its output would make the completed step about 96 KB of JSON.
    let heavy = "\u{1}".repeat(8000);
    let (status, plan) = flow
        .post(
            "workflow",
            "plan",
            &json!({"operation": "create", "name": "Heavy", "steps": [
                {"key": "big", "title": "Big", "kind": "task", "instructions": heavy},
                {"key": "next", "title": "Next", "kind": "task"}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{plan}");
    let plan_id = serde_json::from_str::<Value>(&plan).unwrap()["data"]["plan"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    flow.post(
        "workflow",
        "plan",
        &json!({"operation": "publish", "planId": plan_id}),
    )
    .await;
    let (_, trigger) = flow
        .post(
            "workflow",
            "trigger",
            &json!({"operation": "create", "planId": plan_id, "name": "m", "kind": "manual"}),
        )
        .await;
    let trigger_id = serde_json::from_str::<Value>(&trigger).unwrap()["data"]["trigger"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, run) = flow
        .post(
            "workflow",
            "run",
            &json!({"operation": "start", "triggerId": trigger_id}),
        )
        .await;
    let run_id = serde_json::from_str::<Value>(&run).unwrap()["data"]["run"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, steps) = flow
        .post(
            "workflow",
            "step",
            &json!({"operation": "list", "runId": run_id}),
        )
        .await;
    let steps: Value = serde_json::from_str(&steps).unwrap();
    let big = steps["data"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "big")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    let complete = json!({"operation": "complete", "stepId": big, "output": heavy, "requestId": "req-heavy-00001"});
    let (code, envelope) = flow.exec("workflow", "step", &complete).await;
    assert_eq!(code, 1, "{envelope}");
    let error = &envelope["error"];
    assert_eq!(error["code"], "validation_failed", "{error}");
    assert_eq!(error["details"][0]["path"], "/output", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("`workflow step get`"),
        "{error}"
    );
    assert!(
        error.get("metadata").is_none(),
        "nothing was applied: {error}"
    );
    // Nothing moved: the step is still the run's current one, and readable.
    let (code, read) = flow
        .exec(
            "workflow",
            "step",
            &json!({"operation": "get", "stepId": big}),
        )
        .await;
    assert_eq!(code, 0, "{read}");
    assert_eq!(read["data"]["step"]["revision"], 1, "{read}");
    assert!(read["data"]["step"].get("output").is_none(), "{read}");
    let (_, shown) = flow
        .post(
            "workflow",
            "run",
            &json!({"operation": "logs", "runId": run_id}),
        )
        .await;
    let completions = serde_json::from_str::<Value>(&shown).unwrap()["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "step.completed")
        .count();
    assert_eq!(completions, 0);
}

/// The operations the other tests only refuse, each succeeding and saying so: a step paused and
/// resumed, a run cancelled, a trigger renamed and archived, an approval rejected by a human
/// (failing its run).
#[tokio::test]
async fn pause_cancel_trigger_update_archive_and_a_rejection_each_take_effect() {
    let server = TestServer::start().await;
    let w = server.workspace("acme").await;
    let (_, trigger_id) = published(
        &server,
        &w,
        steps(&[("build", "task"), ("check", "approval"), ("ship", "task")]),
    )
    .await;

    // Pause, then complete, the first step; cancel the run at the approval.
    let (run_id, run_steps) = start(&server, &w, &trigger_id).await;
    let build = id(&run_steps[0]);
    let paused = ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "pause", "stepId": build}),
    )
    .await);
    assert_eq!(paused["step"]["status"], "paused");
    ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "complete", "stepId": build}),
    )
    .await);
    let cancelled = ok(act(
        &server,
        &w,
        "workflow run",
        json!({"operation": "cancel", "runId": run_id}),
    )
    .await);
    assert_eq!(cancelled["run"]["status"], "cancelled", "{cancelled}");
    let shown = ok(act(
        &server,
        &w,
        "workflow run",
        json!({"operation": "show", "runId": run_id}),
    )
    .await);
    assert_eq!(shown["run"]["status"], "cancelled");
    let statuses: Vec<&str> = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "cancelled", "cancelled"]);

    // A human rejects the next run's approval: the run fails.
    let (run_id, run_steps) = start(&server, &w, &trigger_id).await;
    ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "complete", "stepId": id(&run_steps[0])}),
    )
    .await);
    let waiting = ok(act(
        &server,
        &w,
        "workflow step",
        json!({"operation": "get", "stepId": id(&run_steps[1])}),
    )
    .await);
    let approval = waiting["step"]["approvalId"].as_str().unwrap().to_string();
    ok(server
        .post(
            &format!(
                "/admin/workspaces/{}/approvals/{approval}/decision",
                w.workspace_id
            ),
            Some(&server.operator_token),
            &json!({"humanId": w.human_id, "decision": "reject"}),
        )
        .await);
    let decided = ok(act(&server, &w, "approval get", json!({"approvalId": approval})).await);
    assert_eq!(decided["approval"]["status"], "rejected", "{decided}");
    let shown = ok(act(
        &server,
        &w,
        "workflow run",
        json!({"operation": "show", "runId": run_id}),
    )
    .await);
    assert_eq!(shown["run"]["status"], "failed", "{shown}");

    // Rename the trigger, then archive it: it starts nothing more, and archiving is final.
    let renamed = ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "update", "triggerId": trigger_id, "name": "nightly"}),
    )
    .await);
    assert_eq!(renamed["trigger"]["name"], "nightly");
    let archived = ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "archive", "triggerId": trigger_id}),
    )
    .await);
    assert_eq!(archived["trigger"]["status"], "archived");
    let shown = ok(act(
        &server,
        &w,
        "workflow trigger",
        json!({"operation": "show", "triggerId": trigger_id}),
    )
    .await);
    assert_eq!(
        (
            shown["trigger"]["name"].as_str(),
            shown["trigger"]["status"].as_str()
        ),
        (Some("nightly"), Some("archived"))
    );
    refused(
        act(
            &server,
            &w,
            "workflow run",
            json!({"operation": "start", "triggerId": trigger_id}),
        )
        .await,
        409,
        "invalid_state",
    );
    refused(
        act(
            &server,
            &w,
            "workflow trigger",
            json!({"operation": "update", "triggerId": trigger_id, "name": "again"}),
        )
        .await,
        409,
        "invalid_state",
    );
}
