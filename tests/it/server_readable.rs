//! Every write leaves its resource readable through its own retrieval read, within the Exec result
//! budget (64 KiB, the success envelope serialized). A write after which the read could not
//! answer is refused as a validation error naming the field and how many bytes of JSON text fit,
//! and nothing is written; exactly that many is accepted, and the read then answers exactly the
//! budget. Kinds whose fields cannot reach the budget are written at every bound, in the
//! characters JSON escapes to six bytes, and read back.
//!
//! The server's clock is pinned (at a time with milliseconds, so every timestamp has its full
//! width): the edge is exact, not a window.

use serde_json::{Value, json};

use crate::support::{TestServer, Workspace};

/// The Exec result budget.
const BUDGET: usize = 64 * 1024;
/// A pinned time whose timestamps carry milliseconds.
const NOW_MS: i64 = 1_800_000_000_123;

struct Fixture {
    server: TestServer,
    w: Workspace,
}

/// One answer: status, envelope, and the envelope's size as the Exec bridge counts it.
struct Answer {
    status: u16,
    body: Value,
    size: usize,
}

impl Fixture {
    async fn start() -> Fixture {
        let server = TestServer::start().await;
        server.state.clock().pin(Some(NOW_MS));
        let w = server.workspace("acme").await;
        Fixture { server, w }
    }

    async fn post(&self, path: &str, bearer: &str, input: &Value) -> Answer {
        let response = self
            .server
            .client
            .post(format!("{}{path}", self.server.base_url))
            .bearer_auth(bearer)
            .json(input)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        Answer {
            status,
            size: text.trim_end().len(),
            body: serde_json::from_str(&text).unwrap(),
        }
    }

    /// `domain action` as the workspace's agent, through the server's runtime API.
    async fn act(&self, domain: &str, action: &str, input: Value) -> Answer {
        let path = format!(
            "/runtime/servers/{}/agents/{}/actions/{domain}/{action}",
            self.w.workspace_id, self.w.agent_id
        );
        self.post(&path, &self.w.device_credential.clone(), &input)
            .await
    }

    /// Like [`Fixture::act`], for a write that must succeed; its `data`.
    async fn ok(&self, domain: &str, action: &str, input: Value) -> Value {
        let answer = self.act(domain, action, input).await;
        assert_eq!(answer.status, 200, "{domain} {action}: {}", answer.body);
        answer.body["data"].clone()
    }

    /// An operator decision of approval `id` with `comment`.
    async fn decide(&self, id: &str, comment: &str) -> Answer {
        let path = format!(
            "/admin/workspaces/{}/approvals/{id}/decision",
            self.w.workspace_id
        );
        let body = json!({"humanId": self.w.human_id, "decision": "approve", "comment": comment});
        self.post(&path, &self.server.operator_token.clone(), &body)
            .await
    }

    fn location(&self) -> Value {
        json!({"kind": "channel", "channelId": self.w.channel_id})
    }

    /// A published plan of `steps`, a manual trigger, and a run of it: its steps' ids, in run
    /// order.
    async fn run(&self, steps: Value) -> Vec<String> {
        let plan = self
            .ok(
                "workflow",
                "plan",
                json!({"operation": "create", "name": "p", "steps": steps}),
            )
            .await;
        let plan_id = plan["plan"]["id"].as_str().unwrap().to_string();
        self.ok(
            "workflow",
            "plan",
            json!({"operation": "publish", "planId": plan_id}),
        )
        .await;
        let trigger = self
            .ok(
                "workflow",
                "trigger",
                json!({"operation": "create", "planId": plan_id, "name": "m", "kind": "manual"}),
            )
            .await;
        let run = self
            .ok(
                "workflow",
                "run",
                json!({"operation": "start", "triggerId": trigger["trigger"]["id"]}),
            )
            .await;
        let listed = self
            .ok(
                "workflow",
                "step",
                json!({"operation": "list", "runId": run["run"]["id"]}),
            )
            .await;
        let mut steps: Vec<&Value> = listed["steps"].as_array().unwrap().iter().collect();
        steps.sort_by_key(|step| step["position"].as_i64());
        steps
            .into_iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    }
}

/// Characters JSON escapes to six bytes each (`\u0001`).
fn heavy(chars: usize) -> String {
    "\u{1}".repeat(chars)
}

/// A string whose JSON text is exactly `bytes` long (quotes aside), in at most 8,000 characters:
/// six-byte control characters and one-byte letters.
fn text_of(bytes: usize) -> String {
    let six = bytes.saturating_sub(8000).div_ceil(5);
    assert!(
        6 * six <= bytes,
        "{bytes} bytes do not fit in 8000 characters"
    );
    let text = format!("{}{}", heavy(six), "a".repeat(bytes - 6 * six));
    assert!(text.chars().count() <= 8000);
    text
}

/// The room a refusal names for its field: `at most N bytes`.
#[track_caller]
fn room(answer: &Answer, field: &str) -> usize {
    assert_eq!(answer.status, 400, "{}", answer.body);
    let error = &answer.body["error"];
    assert_eq!(error["code"], "validation_failed", "{error}");
    assert_eq!(error["details"][0]["path"], field, "{error}");
    let message = error["details"][0]["message"].as_str().unwrap();
    message
        .strip_prefix("at most ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no room in `{message}`"))
}

/// The edge of one write: with 8,000 escaped characters in `field` it is refused, naming the room
/// left; one byte more than the room is refused (nothing changes: `read` answers as before), the
/// room itself is accepted, and then `read` answers exactly the budget.
async fn edge<W, R>(field: &str, write: W, read: R)
where
    W: AsyncFn(&str) -> Answer,
    R: AsyncFn() -> Answer,
{
    let before = read().await;
    assert_eq!(before.status, 200, "{}", before.body);
    let n = room(&write(&heavy(8000)).await, field);
    assert_eq!(room(&write(&text_of(n + 1)).await, field), n);
    let unchanged = read().await;
    assert_eq!(
        unchanged.body, before.body,
        "a refused write changed the resource"
    );
    let accepted = write(&text_of(n)).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    let after = read().await;
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(
        after.size, BUDGET,
        "the accepted write reads back at the budget"
    );
}

#[tokio::test]
async fn a_task_completed_or_cancelled_past_its_read_is_refused_at_the_edge() {
    let fx = Fixture::start().await;
    for (action, field) in [("complete", "/result"), ("cancel", "/reason")] {
        let task = fx
            .ok(
                "task",
                "create",
                json!({"location": fx.location(), "title": "wide", "description": heavy(8000)}),
            )
            .await;
        let id = task["task"]["id"].as_str().unwrap().to_string();
        fx.ok("task", "claim", json!({"taskId": id})).await;
        let key = &field[1..];
        edge(
            field,
            async |text: &str| {
                fx.act("task", action, json!({"taskId": id, key: text}))
                    .await
            },
            async || fx.act("task", "get", json!({"taskId": id})).await,
        )
        .await;
    }
}

#[tokio::test]
async fn a_step_written_past_its_read_is_refused_at_the_edge() {
    let fx = Fixture::start().await;
    let step = json!([
        {"key": "big", "title": "Big", "kind": "task", "instructions": heavy(8000)},
        {"key": "next", "title": "Next", "kind": "task"},
    ]);
    for (operation, field) in [
        ("complete", "/output"),
        ("fail", "/reason"),
        ("pause", "/reason"),
        ("park", "/reason"),
    ] {
        let steps = fx.run(step.clone()).await;
        let id = steps[0].clone();
        let key = &field[1..];
        edge(
            field,
            async |text: &str| {
                fx.act(
                    "workflow",
                    "step",
                    json!({"operation": operation, "stepId": id, key: text}),
                )
                .await
            },
            async || {
                fx.act(
                    "workflow",
                    "step",
                    json!({"operation": "get", "stepId": id}),
                )
                .await
            },
        )
        .await;
    }
    // A paused step keeps its reason when it completes: the room for the output is what the
    // reason and its member leave.
    let complete = async |id: &str, output: &str| {
        fx.act(
            "workflow",
            "step",
            json!({"operation": "complete", "stepId": id, "output": output}),
        )
        .await
    };
    let fresh = fx.run(step.clone()).await;
    let whole = room(&complete(&fresh[0], &heavy(8000)).await, "/output");
    let paused = fx.run(step.clone()).await;
    let answer = fx
        .act(
            "workflow",
            "step",
            json!({"operation": "pause", "stepId": paused[0], "reason": heavy(1000)}),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let left = room(&complete(&paused[0], &heavy(8000)).await, "/output");
    assert_eq!(whole - left, 6000 + r#","reason":"""#.len());
}

#[tokio::test]
async fn a_plan_written_past_its_show_is_refused_at_the_edge() {
    let fx = Fixture::start().await;
    // Ten moderate steps, so one step's instructions are the field that decides.
    let base: Vec<Value> = (0..10)
        .map(|i| json!({"key": format!("s{i}"), "title": "Step", "kind": "task", "instructions": heavy(300)}))
        .collect();
    let with = |text: &str| {
        let mut steps = base.clone();
        steps.push(json!({"key": "last", "title": "Last", "kind": "task", "instructions": text}));
        json!(steps)
    };
    // Create: the plan never exists past the edge.
    let create = async |text: &str| {
        fx.act(
            "workflow",
            "plan",
            json!({"operation": "create", "name": "p", "steps": with(text)}),
        )
        .await
    };
    let n = room(&create(&heavy(8000)).await, "/steps/10/instructions");
    assert_eq!(
        room(&create(&text_of(n + 1)).await, "/steps/10/instructions"),
        n
    );
    let created = create(&text_of(n)).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let plan_id = created.body["data"]["plan"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = async || {
        fx.act(
            "workflow",
            "plan",
            json!({"operation": "show", "planId": plan_id}),
        )
        .await
    };
    assert_eq!(show().await.size, BUDGET);

    // Update: the description of a plan whose steps already take most of the budget.
    let smaller = fx
        .act(
            "workflow",
            "plan",
            json!({"operation": "update", "planId": plan_id, "steps": with(&heavy(5000))}),
        )
        .await;
    assert_eq!(smaller.status, 200, "{}", smaller.body);
    edge(
        "/description",
        async |text: &str| {
            fx.act(
                "workflow",
                "plan",
                json!({"operation": "update", "planId": plan_id, "description": text}),
            )
            .await
        },
        show,
    )
    .await;
}

#[tokio::test]
async fn an_approval_decided_past_its_read_is_refused_at_the_edge() {
    let fx = Fixture::start().await;
    let requested = fx
        .ok(
            "approval",
            "request",
            json!({"title": "Ship", "details": heavy(8000)}),
        )
        .await;
    let id = requested["approval"]["id"].as_str().unwrap().to_string();
    edge(
        "/comment",
        async |text: &str| fx.decide(&id, text).await,
        async || fx.act("approval", "get", json!({"approvalId": id})).await,
    )
    .await;

    // A workflow's approval: the comment lands on the step that waits for it as well.
    let steps = fx
        .run(json!([{"key": "ok", "title": "Sign off", "kind": "approval", "instructions": heavy(8000)}]))
        .await;
    let step = fx
        .ok(
            "workflow",
            "step",
            json!({"operation": "get", "stepId": steps[0]}),
        )
        .await;
    let approval = step["step"]["approvalId"].as_str().unwrap().to_string();
    let refused = fx.decide(&approval, &heavy(8000)).await;
    let n = room(&refused, "/comment");
    let accepted = fx.decide(&approval, &text_of(n)).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    for read in [
        fx.act("approval", "get", json!({"approvalId": approval}))
            .await,
        fx.act(
            "workflow",
            "step",
            json!({"operation": "get", "stepId": steps[0]}),
        )
        .await,
    ] {
        assert_eq!(read.status, 200, "{}", read.body);
        assert!(read.size <= BUDGET, "{}", read.size);
    }
}

/// The kinds whose fields cannot reach the budget, every text field at its bound in six-byte
/// characters: each write succeeds and its read answers within the budget.
#[tokio::test]
async fn every_other_kind_written_at_its_bounds_reads_back() {
    let fx = Fixture::start().await;
    let name = heavy(200);
    let long = heavy(8000);
    let mut reads: Vec<(String, Answer)> = Vec::new();

    let task = fx
        .ok(
            "task",
            "create",
            json!({"location": fx.location(), "title": name, "description": long}),
        )
        .await;
    let task_id = task["task"]["id"].as_str().unwrap().to_string();
    fx.ok(
        "task",
        "update",
        json!({"taskId": task_id, "title": name, "description": long}),
    )
    .await;
    reads.push((
        "task".into(),
        fx.act("task", "get", json!({"taskId": task_id})).await,
    ));

    let project = fx
        .ok(
            "project",
            "create",
            json!({"name": name, "description": long}),
        )
        .await;
    let project_id = project["project"]["id"].as_str().unwrap().to_string();
    fx.ok(
        "project",
        "update",
        json!({"projectId": project_id, "name": name, "description": long}),
    )
    .await;
    reads.push((
        "project".into(),
        fx.act("project", "get", json!({"projectId": project_id}))
            .await,
    ));

    let review = fx
        .ok(
            "review",
            "add",
            json!({"threadId": fx.w.thread_id, "verdict": "requestChanges", "body": long}),
        )
        .await;
    let review_id = review["review"]["id"].as_str().unwrap().to_string();
    fx.ok("review", "resolve", json!({"reviewId": review_id}))
        .await;
    reads.push((
        "review".into(),
        fx.act("review", "get", json!({"reviewId": review_id}))
            .await,
    ));

    let scheduled = fx
        .ok(
            "scheduled-message",
            "create",
            json!({"target": {"kind": "channel", "channelId": fx.w.channel_id}, "content": heavy(4000), "sendAt": "2027-02-01T00:00:00Z", "repeatEveryMinutes": 60}),
        )
        .await;
    let scheduled_id = scheduled["scheduledMessage"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    reads.push((
        "scheduled message".into(),
        fx.act(
            "scheduled-message",
            "get",
            json!({"scheduledMessageId": scheduled_id}),
        )
        .await,
    ));

    let approval = fx
        .ok(
            "approval",
            "request",
            json!({"title": name, "details": long}),
        )
        .await;
    reads.push((
        "approval".into(),
        fx.act(
            "approval",
            "get",
            json!({"approvalId": approval["approval"]["id"]}),
        )
        .await,
    ));

    fx.ok(
        "profile",
        "update",
        json!({"displayName": name, "description": long}),
    )
    .await;
    reads.push(("profile".into(), fx.act("profile", "get", json!({})).await));

    let plan = fx
        .ok(
            "workflow",
            "plan",
            json!({"operation": "create", "name": name, "steps": [{"key": "a", "title": name, "kind": "task"}]}),
        )
        .await;
    let plan_id = plan["plan"]["id"].as_str().unwrap().to_string();
    fx.ok(
        "workflow",
        "plan",
        json!({"operation": "publish", "planId": plan_id}),
    )
    .await;
    let trigger = fx
        .ok(
            "workflow",
            "trigger",
            json!({"operation": "create", "planId": plan_id, "name": name, "kind": "manual"}),
        )
        .await;
    let trigger_id = trigger["trigger"]["id"].as_str().unwrap().to_string();
    fx.ok(
        "workflow",
        "trigger",
        json!({"operation": "update", "triggerId": trigger_id, "name": name}),
    )
    .await;
    reads.push((
        "trigger".into(),
        fx.act(
            "workflow",
            "trigger",
            json!({"operation": "show", "triggerId": trigger_id}),
        )
        .await,
    ));

    // A run cancelled with the longest reason: `run show` has the narrower reads of its steps,
    // and the run itself reads back through a one-run page.
    let run = fx
        .ok(
            "workflow",
            "run",
            json!({"operation": "start", "triggerId": trigger_id}),
        )
        .await;
    let run_id = run["run"]["id"].as_str().unwrap().to_string();
    fx.ok(
        "workflow",
        "run",
        json!({"operation": "cancel", "runId": run_id, "reason": long}),
    )
    .await;
    reads.push((
        "run".into(),
        fx.act(
            "workflow",
            "run",
            json!({"operation": "list", "planId": plan_id, "limit": 1}),
        )
        .await,
    ));

    for (kind, read) in reads {
        assert_eq!(read.status, 200, "{kind}: {}", read.body);
        assert!(read.size <= BUDGET, "{kind} reads back {} bytes", read.size);
        assert!(
            read.size > 1_000,
            "{kind}: the bounds were not written ({} bytes)",
            read.size
        );
    }
}
