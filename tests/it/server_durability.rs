//! Durability: the real `agentteam server` binary is killed with SIGKILL in the middle of a stream
//! of writes; after a restart on the same SQLite file, every write it acknowledged is there.

use serde_json::{Value, json};

use crate::support::spawn_server;

async fn post(
    client: &reqwest::Client,
    url: String,
    bearer: &str,
    body: Value,
) -> reqwest::Result<(u16, Value)> {
    let response = client
        .post(url)
        .bearer_auth(bearer)
        .json(&body)
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.json().await?))
}

#[tokio::test]
async fn sigkill_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let client = crate::support::http_client();
    let (mut server, base, operator) = spawn_server(dir.path()).await;

    let admin = |path: String, body: Value| {
        let (client, base, operator) = (client.clone(), base.clone(), operator.clone());
        async move {
            let (status, body) = post(&client, format!("{base}{path}"), &operator, body)
                .await
                .unwrap();
            assert_eq!(status, 200, "{body}");
            body["data"].clone()
        }
    };
    let workspace = admin("/admin/workspaces".into(), json!({"name": "acme"})).await["workspaceId"]
        .as_str()
        .unwrap()
        .to_string();
    let human = admin(
        format!("/admin/workspaces/{workspace}/humans"),
        json!({"handle": "ada", "displayName": "Ada"}),
    )
    .await["humanId"]
        .as_str()
        .unwrap()
        .to_string();
    let agent = admin(
        format!("/admin/workspaces/{workspace}/agents"),
        json!({"ownerHumanId": human, "handle": "builder", "displayName": "B"}),
    )
    .await["agentId"]
        .as_str()
        .unwrap()
        .to_string();
    let device = admin(
        format!("/admin/workspaces/{workspace}/devices"),
        json!({"humanId": human}),
    )
    .await["credential"]
        .as_str()
        .unwrap()
        .to_string();
    let channel = admin(
        format!("/admin/workspaces/{workspace}/channels"),
        json!({"name": "general", "members": [agent]}),
    )
    .await["channelId"]
        .as_str()
        .unwrap()
        .to_string();
    let location = json!({"kind": "channel", "channelId": channel});
    let action = |name: &str| {
        format!("{base}/runtime/servers/{workspace}/agents/{agent}/actions/task/{name}")
    };

    // Four writers stream creates; the test kills the server once 200 are acknowledged.
    let (acked_tx, mut acked_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut writers = Vec::new();
    for writer in 0..4 {
        let (client, url, device, location, acked_tx) = (
            client.clone(),
            action("create"),
            device.clone(),
            location.clone(),
            acked_tx.clone(),
        );
        writers.push(tokio::spawn(async move {
            for n in 0.. {
                match post(
                    &client,
                    url.clone(),
                    &device,
                    json!({"location": location, "title": format!("w{writer} n{n}")}),
                )
                .await
                {
                    Ok((200, body)) => {
                        let _ =
                            acked_tx.send(body["data"]["task"]["id"].as_str().unwrap().to_string());
                    }
                    Ok((status, body)) => panic!("unexpected {status}: {body}"),
                    Err(_) => return,
                }
            }
        }));
    }
    drop(acked_tx);
    let mut acknowledged = Vec::new();
    while let Some(id) = acked_rx.recv().await {
        acknowledged.push(id);
        if acknowledged.len() == 200 {
            server.start_kill().unwrap();
            server.wait().await.unwrap();
        }
    }
    for writer in writers {
        writer.await.unwrap();
    }
    assert!(acknowledged.len() >= 200);

    // Restart on the same file; the device credential and every acknowledged task survived.
    let (_server, base, _) = spawn_server(dir.path()).await;
    let mut stored = std::collections::BTreeSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut input = json!({"location": location, "limit": 100});
        if let Some(cursor) = &cursor {
            input["cursor"] = json!(cursor);
        }
        let url = format!("{base}/runtime/servers/{workspace}/agents/{agent}/actions/task/list");
        let (status, body) = post(&client, url, &device, input).await.unwrap();
        assert_eq!(status, 200, "{body}");
        stored.extend(
            body["data"]["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_string()),
        );
        match body["data"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !stored.contains(*id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes were lost: {lost:?}",
        lost.len(),
        acknowledged.len()
    );
}
