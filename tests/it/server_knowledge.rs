//! Knowledge retrieval on the server: AgentTeam Core's revalidation of the turn for every rule
//! and target type (each refusal with its stage), the knowledge owner's source grants, ranking on
//! a corpus a substring matcher gets wrong, `kb_fetch` sections, and `agentteam admin kb`. Runs
//! on SQLite and again on PostgreSQL (`scripts/test`), so both engines are held to the same
//! answers.

use serde_json::{Value, json};

use crate::support::{TestServer, Workspace, bin};

/// A call of the knowledge route with the workspace's device credential, for `agent`, with an
/// optional turn `(target, message id)`.
async fn kb(
    server: &TestServer,
    ws: &Workspace,
    agent: &str,
    tool: &str,
    turn: Option<(&str, &str)>,
    input: Value,
) -> (u16, Value) {
    let mut request = server
        .client
        .post(format!(
            "{}/runtime/servers/{}/agents/{agent}/knowledge/{tool}",
            server.base_url, ws.workspace_id
        ))
        .bearer_auth(&ws.device_credential)
        .json(&input);
    if let Some((target, message)) = turn {
        request = request
            .header("agentteam-turn-target", target)
            .header("agentteam-turn-message", message);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// A message posted by the workspace's human; returns its id.
async fn human_says(
    server: &TestServer,
    ws: &Workspace,
    channel: &str,
    thread: Option<&str>,
) -> String {
    let mut body =
        json!({"authorHumanId": ws.human_id, "channelId": channel, "content": "what do we know?"});
    if let Some(thread) = thread {
        body["threadId"] = json!(thread);
    }
    let data = server
        .admin(
            &format!("/admin/workspaces/{}/messages", ws.workspace_id),
            body,
        )
        .await;
    data["messageId"].as_str().unwrap().to_string()
}

/// A message sent by `agent` to `target`; returns its id.
async fn agent_says(server: &TestServer, ws: &Workspace, agent: &str, target: &str) -> String {
    let (status, body) = server
        .post(
            &format!(
                "/runtime/servers/{}/agents/{agent}/tools/message_send",
                ws.workspace_id
            ),
            Some(&ws.device_credential),
            &json!({"target": target, "content": "an agent speaking"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["message"]["id"].as_str().unwrap().to_string()
}

async fn task_in(server: &TestServer, ws: &Workspace, location: Value) -> String {
    let (status, body) = server
        .action(
            ws,
            &ws.agent_id,
            "task",
            "create",
            json!({"location": location, "title": "look it up"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["task"]["id"].as_str().unwrap().to_string()
}

async fn source(server: &TestServer, ws: &Workspace, name: &str) -> String {
    server
        .admin(
            &format!("/admin/workspaces/{}/kb/sources", ws.workspace_id),
            json!({"name": name}),
        )
        .await["sourceId"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn grant(server: &TestServer, ws: &Workspace, source: &str, grantee: Value) {
    server
        .admin(
            &format!(
                "/admin/workspaces/{}/kb/sources/{source}/grants",
                ws.workspace_id
            ),
            grantee,
        )
        .await;
}

async fn document(
    server: &TestServer,
    ws: &Workspace,
    source: &str,
    path: &str,
    body: &str,
) -> String {
    server
        .admin(
            &format!(
                "/admin/workspaces/{}/kb/sources/{source}/documents",
                ws.workspace_id
            ),
            json!({"path": path, "body": body}),
        )
        .await["documentId"]
        .as_str()
        .unwrap()
        .to_string()
}

#[track_caller]
fn refused(answer: &(u16, Value), code: &str, stage: &str, case: &str) {
    let (status, body) = answer;
    assert_eq!(body["ok"], false, "{case}: {body}");
    assert_eq!(body["error"]["code"], code, "{case}: {body}");
    assert_eq!(body["error"]["stage"], stage, "{case}: {body}");
    assert!(
        (400..500).contains(status),
        "{case}: a client's refusal, not {status}"
    );
}

#[track_caller]
fn titles(answer: &(u16, Value)) -> Vec<String> {
    assert_eq!(answer.0, 200, "{}", answer.1);
    answer.1["data"]["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["title"].as_str().unwrap().to_string())
        .collect()
}

/// Every revalidation rule, for each of the four target types, refused at
/// `target_scope_resolution`; the well-formed turn of each type passes.
#[tokio::test]
async fn server_knowledge_core_revalidates_every_rule_for_every_target_type() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let other = server.workspace("globex").await;
    let handbook = source(&server, &ws, "handbook").await;
    grant(&server, &ws, &handbook, json!({"channelId": ws.channel_id})).await;
    document(
        &server,
        &ws,
        &handbook,
        "deploy.md",
        "# Deploy\nThe deploy runbook.",
    )
    .await;
    // dm and private channel sources, so a passing turn finds something in each.
    let dm = server
        .admin(
            &format!("/admin/workspaces/{}/dms", ws.workspace_id),
            json!({"memberIds": [ws.human_id, ws.agent_id]}),
        )
        .await["dmId"]
        .as_str()
        .unwrap()
        .to_string();
    let team = server
        .admin(
            &format!("/admin/workspaces/{}/teams", ws.workspace_id),
            json!({"handle": "humans", "displayName": "Humans", "members": [ws.human_id]}),
        )
        .await["teamId"]
        .as_str()
        .unwrap()
        .to_string();
    grant(&server, &ws, &handbook, json!({"teamId": team})).await;
    // The human joins the private channel to speak there; the second agent is not a member.
    server
        .admin(
            &format!(
                "/admin/workspaces/{}/channels/{}/members",
                ws.workspace_id, ws.private_channel_id
            ),
            json!({"memberId": ws.human_id}),
        )
        .await;

    let thread_task = task_in(
        &server,
        &ws,
        json!({"kind": "thread", "threadId": ws.thread_id}),
    )
    .await;
    let channel_task = task_in(
        &server,
        &ws,
        json!({"kind": "channel", "channelId": ws.channel_id}),
    )
    .await;
    let private_task = task_in(
        &server,
        &ws,
        json!({"kind": "thread", "threadId": ws.private_thread_id}),
    )
    .await;

    let in_channel = human_says(&server, &ws, &ws.channel_id, None).await;
    let in_thread = human_says(&server, &ws, &ws.channel_id, Some(&ws.thread_id)).await;
    let in_dm = human_says(&server, &ws, &dm, None).await;
    let in_private = human_says(&server, &ws, &ws.private_channel_id, None).await;
    let in_private_thread = human_says(
        &server,
        &ws,
        &ws.private_channel_id,
        Some(&ws.private_thread_id),
    )
    .await;
    let agent_in_channel = agent_says(
        &server,
        &ws,
        &ws.agent_id,
        &format!("channel:{}", ws.channel_id),
    )
    .await;
    let agent_in_thread = agent_says(
        &server,
        &ws,
        &ws.agent_id,
        &format!("thread:{}", ws.thread_id),
    )
    .await;
    let agent_in_dm = agent_says(&server, &ws, &ws.agent_id, &format!("dm:{dm}")).await;

    // The other workspace's conversations, with human messages of their own.
    let other_dm = server
        .admin(
            &format!("/admin/workspaces/{}/dms", other.workspace_id),
            json!({"memberIds": [other.human_id, other.agent_id]}),
        )
        .await["dmId"]
        .as_str()
        .unwrap()
        .to_string();
    let other_task = task_in(
        &server,
        &other,
        json!({"kind": "thread", "threadId": other.thread_id}),
    )
    .await;
    let other_in_channel = human_says(&server, &other, &other.channel_id, None).await;
    let other_in_thread =
        human_says(&server, &other, &other.channel_id, Some(&other.thread_id)).await;
    let other_in_dm = human_says(&server, &other, &other_dm, None).await;

    let search = json!({"query": "deploy"});
    let agent = ws.agent_id.as_str();
    let reviewer = ws.other_agent_id.as_str();
    let channel = format!("channel:{}", ws.channel_id);
    let thread = format!("thread:{}", ws.thread_id);
    let dm_target = format!("dm:{dm}");
    let task = format!("task:{thread_task}");

    // The four well-formed turns pass and find the granted document.
    for (target, message) in [
        (&channel, &in_channel),
        (&thread, &in_thread),
        (&dm_target, &in_dm),
        (&task, &in_thread),
    ] {
        let answer = kb(
            &server,
            &ws,
            agent,
            "kb_search",
            Some((target, message)),
            search.clone(),
        )
        .await;
        assert_eq!(titles(&answer), ["Deploy"], "{target}");
    }

    type Case<'a> = (&'a str, String, &'a str, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        // Wrong workspace: the target and its message belong to another workspace.
        (
            "channel in another workspace",
            format!("channel:{}", other.channel_id),
            &other_in_channel,
            agent,
            "not_found",
        ),
        (
            "thread in another workspace",
            format!("thread:{}", other.thread_id),
            &other_in_thread,
            agent,
            "not_found",
        ),
        (
            "dm in another workspace",
            format!("dm:{other_dm}"),
            &other_in_dm,
            agent,
            "not_found",
        ),
        (
            "task in another workspace",
            format!("task:{other_task}"),
            &other_in_thread,
            agent,
            "not_found",
        ),
        // Scope type mismatch: the id names another kind of conversation.
        (
            "a dm named as a channel",
            format!("channel:{dm}"),
            &in_dm,
            agent,
            "invalid_state",
        ),
        (
            "a channel named as a dm",
            format!("dm:{}", ws.channel_id),
            &in_channel,
            agent,
            "invalid_state",
        ),
        (
            "a channel named as a thread",
            format!("thread:{}", ws.channel_id),
            &in_channel,
            agent,
            "not_found",
        ),
        (
            "a thread named as a task",
            format!("task:{}", ws.thread_id),
            &in_thread,
            agent,
            "not_found",
        ),
        // The message is not in the target.
        (
            "a thread's message for its channel",
            channel.clone(),
            &in_thread,
            agent,
            "not_found",
        ),
        (
            "a channel's message for its thread",
            thread.clone(),
            &in_channel,
            agent,
            "not_found",
        ),
        (
            "a channel's message for a dm",
            dm_target.clone(),
            &in_channel,
            agent,
            "not_found",
        ),
        (
            "a channel's message for a task in a thread",
            task.clone(),
            &in_channel,
            agent,
            "not_found",
        ),
        // The message was written by an agent.
        (
            "an agent's message in a channel",
            channel.clone(),
            &agent_in_channel,
            agent,
            "invalid_state",
        ),
        (
            "an agent's message in a thread",
            thread.clone(),
            &agent_in_thread,
            agent,
            "invalid_state",
        ),
        (
            "an agent's message in a dm",
            dm_target.clone(),
            &agent_in_dm,
            agent,
            "invalid_state",
        ),
        (
            "an agent's message in a task's thread",
            task.clone(),
            &agent_in_thread,
            agent,
            "invalid_state",
        ),
        // The agent cannot read the target.
        (
            "a channel the agent is not in",
            format!("channel:{}", ws.private_channel_id),
            &in_private,
            reviewer,
            "not_found",
        ),
        (
            "a thread the agent cannot read",
            format!("thread:{}", ws.private_thread_id),
            &in_private_thread,
            reviewer,
            "not_found",
        ),
        (
            "a dm the agent is not in",
            dm_target.clone(),
            &in_dm,
            reviewer,
            "not_found",
        ),
        (
            "a task the agent cannot read",
            format!("task:{private_task}"),
            &in_private_thread,
            reviewer,
            "not_found",
        ),
        // A task without a thread has no conversation to bind the turn to.
        (
            "a task without a thread",
            format!("task:{channel_task}"),
            &in_channel,
            agent,
            "invalid_state",
        ),
    ];
    for (case, target, message, caller, code) in cases {
        for tool in ["kb_search", "kb_fetch"] {
            let input = if tool == "kb_search" {
                search.clone()
            } else {
                json!({"documentId": "doc_x"})
            };
            let answer = kb(&server, &ws, caller, tool, Some((&target, message)), input).await;
            refused(
                &answer,
                code,
                "target_scope_resolution",
                &format!("{tool}: {case}"),
            );
            let text = answer.1.to_string();
            assert!(
                !text.contains("Deploy"),
                "{case}: nothing of the knowledge base leaks: {text}"
            );
        }
    }
    // The same ids in another workspace's words: one answer, so another workspace's ids are
    // not confirmed.
    let foreign = kb(
        &server,
        &ws,
        agent,
        "kb_search",
        Some((&format!("channel:{}", other.channel_id), &other_in_channel)),
        search.clone(),
    )
    .await;
    let missing = kb(
        &server,
        &ws,
        agent,
        "kb_search",
        Some(("channel:chn_nowhere", &other_in_channel)),
        search.clone(),
    )
    .await;
    assert_eq!(
        foreign.1["error"]["message"]
            .as_str()
            .unwrap()
            .replace(&other.channel_id, "X"),
        missing.1["error"]["message"]
            .as_str()
            .unwrap()
            .replace("chn_nowhere", "X")
    );
}

/// The stages before Core: no turn (`route_missing`), a malformed turn or malformed arguments
/// (`request_validation`); and a bad credential never reaches the knowledge owner.
#[tokio::test]
async fn server_knowledge_names_the_hop_of_every_failure() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let message = human_says(&server, &ws, &ws.channel_id, None).await;
    let channel = format!("channel:{}", ws.channel_id);
    let agent = ws.agent_id.as_str();

    refused(
        &kb(
            &server,
            &ws,
            agent,
            "kb_search",
            None,
            json!({"query": "x"}),
        )
        .await,
        "invalid_state",
        "route_missing",
        "no turn",
    );
    for (target, message_id) in [
        ("room:x", message.as_str()),
        ("channel:", message.as_str()),
        (channel.as_str(), "a b"),
    ] {
        refused(
            &kb(
                &server,
                &ws,
                agent,
                "kb_search",
                Some((target, message_id)),
                json!({"query": "x"}),
            )
            .await,
            "validation_failed",
            "request_validation",
            target,
        );
    }
    for input in [
        json!({}),
        json!({"query": ""}),
        json!({"query": "x", "limit": 0}),
        json!({"query": "x", "extra": 1}),
    ] {
        refused(
            &kb(
                &server,
                &ws,
                agent,
                "kb_search",
                Some((&channel, &message)),
                input.clone(),
            )
            .await,
            "validation_failed",
            "request_validation",
            &input.to_string(),
        );
    }
    refused(
        &kb(
            &server,
            &ws,
            agent,
            "kb_fetch",
            Some((&channel, &message)),
            json!({"documentId": "d", "section": -1}),
        )
        .await,
        "validation_failed",
        "request_validation",
        "negative section",
    );
    refused(
        &kb(
            &server,
            &ws,
            agent,
            "kb_list",
            Some((&channel, &message)),
            json!({}),
        )
        .await,
        "unknown_action",
        "route_missing",
        "no such tool",
    );

    // A wrong credential: refused before anything is read, with the route's stage.
    let mut bad = ws.clone();
    bad.device_credential = "dev_wrong".into();
    let answer = kb(
        &server,
        &bad,
        agent,
        "kb_search",
        Some((&channel, &message)),
        json!({"query": "x"}),
    )
    .await;
    refused(&answer, "forbidden", "route_missing", "bad credential");
}

/// A source Core would allow stays invisible without the knowledge owner's grant: search,
/// fetch by id, and the grant rules (a channel grant covers its threads and their tasks; a team
/// grant covers its members' channels and dms).
#[tokio::test]
async fn server_knowledge_a_source_without_a_grant_is_invisible() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let public = source(&server, &ws, "public").await;
    let private = source(&server, &ws, "private").await;
    let team_source = source(&server, &ws, "team notes").await;
    grant(&server, &ws, &public, json!({"channelId": ws.channel_id})).await;
    grant(
        &server,
        &ws,
        &private,
        json!({"channelId": ws.private_channel_id}),
    )
    .await;
    document(
        &server,
        &ws,
        &public,
        "pub.md",
        "# Public\nzebra crossing rules",
    )
    .await;
    let secret = document(
        &server,
        &ws,
        &private,
        "sec.md",
        "# Secret\nzebra migration plan",
    )
    .await;
    let team_doc = document(
        &server,
        &ws,
        &team_source,
        "team.md",
        "# Team\nzebra team rota",
    )
    .await;

    let agent = ws.agent_id.as_str();
    let in_channel = human_says(&server, &ws, &ws.channel_id, None).await;
    let in_thread = human_says(&server, &ws, &ws.channel_id, Some(&ws.thread_id)).await;
    let task = task_in(
        &server,
        &ws,
        json!({"kind": "thread", "threadId": ws.thread_id}),
    )
    .await;
    let channel = format!("channel:{}", ws.channel_id);
    let query = json!({"query": "zebra"});

    for (target, message) in [
        (channel.clone(), &in_channel),
        (format!("thread:{}", ws.thread_id), &in_thread),
        (format!("task:{task}"), &in_thread),
    ] {
        let answer = kb(
            &server,
            &ws,
            agent,
            "kb_search",
            Some((&target, message)),
            query.clone(),
        )
        .await;
        assert_eq!(
            titles(&answer),
            ["Public"],
            "{target}: the channel grant covers it, nothing else"
        );
    }
    let fetched = kb(
        &server,
        &ws,
        agent,
        "kb_fetch",
        Some((&channel, &in_channel)),
        json!({"documentId": secret}),
    )
    .await;
    refused(
        &fetched,
        "not_found",
        "upstream",
        "fetching an ungranted document",
    );

    // A team grant: the team's member (the human) is in the channel, so it is covered.
    let team = server
        .admin(
            &format!("/admin/workspaces/{}/teams", ws.workspace_id),
            json!({"handle": "ops", "displayName": "Ops", "members": [ws.human_id]}),
        )
        .await["teamId"]
        .as_str()
        .unwrap()
        .to_string();
    grant(&server, &ws, &team_source, json!({"teamId": team})).await;
    let mut found = titles(
        &kb(
            &server,
            &ws,
            agent,
            "kb_search",
            Some((&channel, &in_channel)),
            query.clone(),
        )
        .await,
    );
    found.sort();
    assert_eq!(found, ["Public", "Team"]);
    let fetched = kb(
        &server,
        &ws,
        agent,
        "kb_fetch",
        Some((&channel, &in_channel)),
        json!({"documentId": team_doc}),
    )
    .await;
    assert_eq!(fetched.1["data"]["title"], "Team", "{}", fetched.1);
    // In the private channel (where no team member is) only its own source shows.
    let speaker = server
        .admin(
            &format!("/admin/workspaces/{}/humans", ws.workspace_id),
            json!({"handle": "bo", "displayName": "Bo"}),
        )
        .await["humanId"]
        .as_str()
        .unwrap()
        .to_string();
    server
        .admin(
            &format!(
                "/admin/workspaces/{}/channels/{}/members",
                ws.workspace_id, ws.private_channel_id
            ),
            json!({"memberId": speaker}),
        )
        .await;
    let bo = server
        .admin(
            &format!("/admin/workspaces/{}/messages", ws.workspace_id),
            json!({"authorHumanId": speaker, "channelId": ws.private_channel_id, "content": "zebra?"}),
        )
        .await["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    let private_target = format!("channel:{}", ws.private_channel_id);
    assert_eq!(
        titles(
            &kb(
                &server,
                &ws,
                agent,
                "kb_search",
                Some((&private_target, &bo)),
                query.clone()
            )
            .await
        ),
        ["Secret"]
    );
}

/// The corpus: each query is one a substring matcher ranks wrongly (or cannot answer).
const CORPUS: &[(&str, &str)] = &[
    (
        "services.md",
        "# Services\nEvery service has an owner. The service catalog lists each service, and a service without an owner is retired. Service levels are reviewed monthly.",
    ),
    (
        "zeppelin.md",
        "# Project Zeppelin\nZeppelin is the new billing service.",
    ),
    (
        "release.md",
        "# Release notes\nWe deployed the billing rollback tooling last week; deployments now pause on errors.",
    ),
    (
        "deploying.md",
        "# Glossary\nA deployer is a person. See also: the deploy tool, the rollout dashboard.",
    ),
    (
        "postgres-tuning.md",
        "# Tuning\npostgres memory, postgres vacuum and postgres connection limits.",
    ),
    (
        "replicas.md",
        "# Read copies\nA replica lags; a replica can be promoted; each replica needs monitoring.",
    ),
    (
        "failover.md",
        "# Failover\nWhen the postgres primary fails, a replica takes over.",
    ),
    ("zh-search.md", "# 搜索\n知识库搜索使用全文索引，查询很快。"),
    (
        "zh-other.md",
        "# 其他\n全文翻译和索引卡片是两件不同的事，全文很长，索引很短。",
    ),
];

/// Ranking on both engines: a rare term beats a frequent one, an inflected form finds its stem,
/// the document with both terms of a two-term query wins, and a CJK query finds its phrase; the
/// expected document ranks first and its snippet shows the query's terms.
/// A readiness gap is classified, with what to do instead: no source granted to the turn's
/// conversation, or a query with no searchable term. A real search that matches nothing stays a
/// plain empty success.
#[tokio::test]
async fn server_knowledge_a_readiness_gap_is_classified_not_an_empty_result() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let agent = ws.agent_id.as_str();
    let message = human_says(&server, &ws, &ws.channel_id, None).await;
    let channel = format!("channel:{}", ws.channel_id);
    let turn = Some((channel.as_str(), message.as_str()));

    let ungranted = kb(
        &server,
        &ws,
        agent,
        "kb_search",
        turn,
        json!({"query": "zebra"}),
    )
    .await;
    refused(&ungranted, "not_found", "upstream", "no source granted");
    let next = ungranted.1["error"]["next"].as_str().unwrap_or_default();
    assert!(next.contains("message_history_read"), "{ungranted:?}");

    let source = source(&server, &ws, "public").await;
    grant(&server, &ws, &source, json!({"channelId": ws.channel_id})).await;
    document(&server, &ws, &source, "pub.md", "# Public\nzebra crossing").await;
    for query in ["?!", "-- ...", "   "] {
        let answer = kb(
            &server,
            &ws,
            agent,
            "kb_search",
            turn,
            json!({"query": query}),
        )
        .await;
        refused(&answer, "validation_failed", "request_validation", query);
        let next = answer.1["error"]["next"].as_str().unwrap_or_default();
        assert!(next.contains("kb_search"), "{answer:?}");
    }
    let nothing = kb(
        &server,
        &ws,
        agent,
        "kb_search",
        turn,
        json!({"query": "walrus"}),
    )
    .await;
    assert_eq!(
        titles(&nothing),
        Vec::<String>::new(),
        "searched, found nothing"
    );
    let found = kb(
        &server,
        &ws,
        agent,
        "kb_search",
        turn,
        json!({"query": "zebra"}),
    )
    .await;
    assert_eq!(titles(&found), ["Public"]);
}

#[tokio::test]
async fn server_knowledge_ranks_what_a_substring_matcher_gets_wrong() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let handbook = source(&server, &ws, "handbook").await;
    grant(&server, &ws, &handbook, json!({"channelId": ws.channel_id})).await;
    for (path, body) in CORPUS {
        document(&server, &ws, &handbook, path, body).await;
    }
    let message = human_says(&server, &ws, &ws.channel_id, None).await;
    let channel = format!("channel:{}", ws.channel_id);
    for (query, first, shown) in [
        ("zeppelin service", "Project Zeppelin", "zeppelin"),
        ("deploying rollbacks", "Release notes", "deploy"),
        ("postgres replica", "Failover", "replica"),
        ("全文索引", "搜索", "全文索引"),
    ] {
        let answer = kb(
            &server,
            &ws,
            &ws.agent_id,
            "kb_search",
            Some((&channel, &message)),
            json!({"query": query}),
        )
        .await;
        assert_eq!(answer.0, 200, "{}", answer.1);
        let documents = answer.1["data"]["documents"].as_array().unwrap().clone();
        assert_eq!(documents[0]["title"], first, "{query}: {documents:#?}");
        let snippet = documents[0]["snippet"].as_str().unwrap().to_lowercase();
        assert!(
            snippet.contains(shown),
            "{query}: the snippet shows the match: {snippet}"
        );
        assert!(
            snippet.contains('['),
            "{query}: the match is marked: {snippet}"
        );
        let scores: Vec<f64> = documents
            .iter()
            .map(|d| d["score"].as_f64().unwrap())
            .collect();
        assert!(
            scores.windows(2).all(|w| w[0] >= w[1]),
            "{query}: best first: {scores:?}"
        );
        // Stable ids: the same query answers the same documents.
        let again = kb(
            &server,
            &ws,
            &ws.agent_id,
            "kb_search",
            Some((&channel, &message)),
            json!({"query": query}),
        )
        .await;
        assert_eq!(again.1["data"], answer.1["data"], "{query}");
    }
    // `limit` bounds the answer; FTS5 syntax in a query is only words, found nowhere here.
    let limited = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_search",
        Some((&channel, &message)),
        json!({"query": "service postgres replica", "limit": 2}),
    )
    .await;
    assert_eq!(titles(&limited).len(), 2);
    let nothing = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_search",
        Some((&channel, &message)),
        json!({"query": "?!*\" OR NEAR("}),
    )
    .await;
    assert_eq!(titles(&nothing), Vec::<String>::new());
}

/// A word in most documents still answers (the document with it in the title first), and beside
/// a rarer word it only fills the answer after the documents with the rarer one.
#[tokio::test]
async fn server_knowledge_common_words_rank_below_informative_ones() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let handbook = source(&server, &ws, "handbook").await;
    grant(&server, &ws, &handbook, json!({"channelId": ws.channel_id})).await;
    document(
        &server,
        &ws,
        &handbook,
        "overview.md",
        "# Platform overview\nWhere everything runs.",
    )
    .await;
    for n in 0..5 {
        document(
            &server,
            &ws,
            &handbook,
            &format!("p{n}.md"),
            &format!("# Note {n}\nThe platform team note number {n}."),
        )
        .await;
    }
    document(
        &server,
        &ws,
        &handbook,
        "k1.md",
        "# Streams\nThe platform runs kafka for events.",
    )
    .await;
    document(
        &server,
        &ws,
        &handbook,
        "k2.md",
        "# Brokers\nKafka brokers are patched monthly.",
    )
    .await;
    let message = human_says(&server, &ws, &ws.channel_id, None).await;
    let channel = format!("channel:{}", ws.channel_id);
    let search = |query: &str, limit: u64| {
        kb(
            &server,
            &ws,
            &ws.agent_id,
            "kb_search",
            Some((&channel, &message)),
            json!({"query": query, "limit": limit}),
        )
    };
    let found = titles(&search("platform", 10).await);
    assert_eq!(found.len(), 7, "{found:?}");
    assert_eq!(found[0], "Platform overview", "{found:?}");
    let answer = search("platform kafka", 3).await;
    let found = titles(&answer);
    let mut top: Vec<&str> = found[..2].iter().map(String::as_str).collect();
    top.sort();
    assert_eq!(top, ["Brokers", "Streams"], "{found:?}");
    assert_eq!(found.len(), 3, "filled with a common-word match: {found:?}");
    // The fill is unranked: it scores 0, below every ranked hit, never above one.
    let scores: Vec<f64> = answer.1["data"]["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["score"].as_f64().unwrap())
        .collect();
    assert!(scores[0] >= scores[1] && scores[1] > 0.0, "{scores:?}");
    assert_eq!(scores[2], 0.0, "{scores:?}");
}

/// `kb_fetch` returns bounded sections with a continuation that reassemble the document; a
/// section past the end is refused at `upstream`; a document re-added at the same path replaces
/// the first (same id, new text).
#[tokio::test]
async fn server_knowledge_fetch_reads_a_document_in_bounded_sections() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let handbook = source(&server, &ws, "handbook").await;
    grant(&server, &ws, &handbook, json!({"channelId": ws.channel_id})).await;
    // Multi-byte text across section edges: sections are cut on characters.
    let body = format!("# Long\n{}", "知识 runbook line é\n".repeat(1500));
    let id = document(&server, &ws, &handbook, "long.md", &body).await;
    let message = human_says(&server, &ws, &ws.channel_id, None).await;
    let channel = format!("channel:{}", ws.channel_id);
    let mut read = String::new();
    let mut section = 0;
    let mut sections = 0;
    loop {
        let answer = kb(
            &server,
            &ws,
            &ws.agent_id,
            "kb_fetch",
            Some((&channel, &message)),
            json!({"documentId": id, "section": section}),
        )
        .await;
        assert_eq!(answer.0, 200, "{}", answer.1);
        let data = &answer.1["data"];
        assert_eq!(data["title"], "Long");
        assert!(data["content"].as_str().unwrap().chars().count() <= 8000);
        read.push_str(data["content"].as_str().unwrap());
        sections += 1;
        match data.get("nextSection") {
            Some(next) => section = next.as_u64().unwrap(),
            None => break,
        }
    }
    assert_eq!(read, body, "the sections reassemble the document");
    assert_eq!(sections, body.chars().count().div_ceil(8000));
    let past = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_fetch",
        Some((&channel, &message)),
        json!({"documentId": id, "section": sections}),
    )
    .await;
    refused(
        &past,
        "validation_failed",
        "upstream",
        "a section past the end",
    );

    let replaced = document(&server, &ws, &handbook, "long.md", "# Short\nnow short").await;
    assert_eq!(replaced, id, "the same path keeps its document id");
    let answer = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_fetch",
        Some((&channel, &message)),
        json!({"documentId": id}),
    )
    .await;
    assert_eq!(answer.1["data"]["content"], "# Short\nnow short");
    assert!(answer.1["data"].get("nextSection").is_none());
    let found = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_search",
        Some((&channel, &message)),
        json!({"query": "runbook"}),
    )
    .await;
    assert_eq!(
        titles(&found),
        Vec::<String>::new(),
        "the old text is gone from the index"
    );
}

async fn admin_kb(server: &TestServer, args: &[&str]) -> (i32, Value, String) {
    let output = tokio::process::Command::new(bin())
        .args(["admin", "--json", "kb"])
        .args(args)
        .arg("--server-url")
        .arg(&server.base_url)
        .arg("--operator-token-file")
        .arg(&server.operator_token_file)
        .output()
        .await
        .unwrap();
    (
        output.status.code().unwrap(),
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// `agentteam admin kb`: a source, a grant, files one by one and a directory import with its
/// progress on stderr; skipped files are named; the documents are searchable.
#[tokio::test]
async fn server_knowledge_admin_cli_fills_a_source_from_files() {
    let server = TestServer::start().await;
    let ws = server.workspace("acme").await;
    let (code, created, stderr) = admin_kb(
        &server,
        &["source", "--workspace", &ws.workspace_id, "--name", "docs"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let source = created["sourceId"].as_str().unwrap().to_string();
    let (code, _, stderr) = admin_kb(
        &server,
        &[
            "grant",
            "--workspace",
            &ws.workspace_id,
            "--source",
            &source,
            "--channel",
            &ws.channel_id,
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("docs");
    std::fs::create_dir_all(tree.join("guides")).unwrap();
    for n in 0..120 {
        std::fs::write(
            tree.join("guides").join(format!("guide-{n:03}.md")),
            format!("# Guide {n}\nquokka guide number {n}\n"),
        )
        .unwrap();
    }
    std::fs::write(tree.join("notes.txt"), "plain text about wombats").unwrap();
    std::fs::write(tree.join("image.png"), [0u8, 1, 2]).unwrap();
    std::fs::write(tree.join("latin1.md"), [0xe9u8, 0x20, 0x41]).unwrap();
    let (code, summary, stderr) = admin_kb(
        &server,
        &[
            "import",
            "--workspace",
            &ws.workspace_id,
            "--source",
            &source,
            tree.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["files"], 122, "{summary}");
    assert_eq!(summary["created"], 121, "{summary}");
    assert_eq!(summary["skipped"], json!(["latin1.md"]), "{summary}");
    assert!(stderr.contains("imported 100 of 122 files"), "{stderr}");
    assert!(stderr.contains("imported 122 of 122 files"), "{stderr}");
    assert!(stderr.contains("skipped latin1.md"), "{stderr}");

    // Adding one file again replaces it.
    let single = dir.path().join("notes.txt");
    std::fs::write(&single, "# Notes\nplain text about capybaras").unwrap();
    let (code, summary, stderr) = admin_kb(
        &server,
        &[
            "add",
            "--workspace",
            &ws.workspace_id,
            "--source",
            &source,
            single.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        (summary["created"].as_u64(), summary["replaced"].as_u64()),
        (Some(0), Some(1)),
        "{summary}"
    );

    let message = human_says(&server, &ws, &ws.channel_id, None).await;
    let channel = format!("channel:{}", ws.channel_id);
    let found = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_search",
        Some((&channel, &message)),
        json!({"query": "guide 42 quokka", "limit": 3}),
    )
    .await;
    assert_eq!(titles(&found)[0], "Guide 42");
    let found = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_search",
        Some((&channel, &message)),
        json!({"query": "capybaras"}),
    )
    .await;
    assert_eq!(titles(&found), ["Notes"]);
    let found = kb(
        &server,
        &ws,
        &ws.agent_id,
        "kb_search",
        Some((&channel, &message)),
        json!({"query": "wombats"}),
    )
    .await;
    assert_eq!(titles(&found), Vec::<String>::new());

    // Usage errors: a missing directory and an unknown source.
    let (code, _, stderr) = admin_kb(
        &server,
        &[
            "import",
            "--workspace",
            &ws.workspace_id,
            "--source",
            &source,
            "/nonexistent/dir",
        ],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = admin_kb(
        &server,
        &[
            "add",
            "--workspace",
            &ws.workspace_id,
            "--source",
            "src_nope",
            single.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no knowledge source `src_nope`"),
        "{stderr}"
    );
}
