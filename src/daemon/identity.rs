//! The daemon's identity on its server: the workspace, the human it acts for, that human's
//! `general` channel, and the device credential, made once through the operator API and kept in
//! `<state dir>/identity.json` (0600).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::DaemonError;

/// Who this daemon is on its server.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Identity {
    pub workspace_id: String,
    pub human_id: String,
    pub channel_id: String,
    /// A secret: never logged, never printed, never sent to a runtime.
    pub device_credential: String,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("workspace_id", &self.workspace_id)
            .field("human_id", &self.human_id)
            .finish_non_exhaustive()
    }
}

/// Calls the server's operator API.
#[derive(Clone)]
pub struct Operator {
    http: reqwest::Client,
    server_url: String,
    token: String,
}

impl Operator {
    pub fn new(
        server_url: &str,
        token: String,
        remote: Option<&crate::client::http::Remote>,
    ) -> Operator {
        let http = crate::client::http::builder(remote)
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("a plain HTTP client builds");
        Operator {
            http,
            server_url: server_url.trim_end_matches('/').to_string(),
            token,
        }
    }

    /// `POST path` with `body`; the success envelope's `data`, or the server's error message.
    pub async fn post(&self, path: &str, body: Value) -> Result<Value, DaemonError> {
        self.send(reqwest::Method::POST, path, body).await
    }

    /// `PATCH path` with `body`, like [`Operator::post`].
    pub async fn patch(&self, path: &str, body: Value) -> Result<Value, DaemonError> {
        self.send(reqwest::Method::PATCH, path, body).await
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> Result<Value, DaemonError> {
        let response = self
            .http
            .request(method, format!("{}{path}", self.server_url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                DaemonError::ServerUnreachable(crate::client::http::why_unreachable(&e))
            })?;
        let status = response.status();
        let bytes =
            crate::client::http::read_bounded(response, crate::client::http::MAX_RESPONSE_BYTES)
                .await
                .map_err(|e| DaemonError::ServerRefused(e.to_string()))?;
        let envelope: Value = serde_json::from_slice(&bytes)
            .map_err(|_| DaemonError::ServerRefused("the server's answer is not JSON".into()))?;
        if status.is_success() {
            Ok(envelope["data"].clone())
        } else {
            let message: String = envelope["error"]["message"]
                .as_str()
                .unwrap_or("no message")
                .chars()
                .take(300)
                .collect();
            let code = envelope["error"]["code"]
                .as_str()
                .and_then(|code| code.parse().ok());
            Err(match code {
                Some(code) => DaemonError::ServerError { code, message },
                None => DaemonError::ServerRefused(message),
            })
        }
    }
}

impl Identity {
    /// Loads `path`, or creates the workspace, human, channel and device on the server and saves
    /// them there first.
    pub async fn load_or_bootstrap(
        path: &Path,
        operator: &Operator,
    ) -> Result<Identity, DaemonError> {
        if let Ok(bytes) = std::fs::read(path) {
            return serde_json::from_slice(&bytes).map_err(|e| {
                DaemonError::State(format!("`{}` is not a valid identity: {e}", path.display()))
            });
        }
        let id = |value: Value, key: &str| {
            value[key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| DaemonError::ServerRefused(format!("no `{key}` in the answer")))
        };
        let workspace_id = id(
            operator
                .post("/admin/workspaces", json!({"name": "local"}))
                .await?,
            "workspaceId",
        )?;
        let base = format!("/admin/workspaces/{workspace_id}");
        let human_id = id(
            operator
                .post(
                    &format!("{base}/humans"),
                    json!({"handle": "me", "displayName": "Me"}),
                )
                .await?,
            "humanId",
        )?;
        let channel_id = id(
            operator
                .post(
                    &format!("{base}/channels"),
                    json!({"name": "general", "members": [human_id]}),
                )
                .await?,
            "channelId",
        )?;
        let device_credential = id(
            operator
                .post(&format!("{base}/devices"), json!({"humanId": human_id}))
                .await?,
            "credential",
        )?;
        let identity = Identity {
            workspace_id,
            human_id,
            channel_id,
            device_credential,
        };
        let text = serde_json::to_string_pretty(&identity).expect("an identity serializes");
        crate::private_file::replace(path, &text)
            .map_err(|e| DaemonError::State(format!("cannot save `{}`: {e}", path.display())))?;
        tracing::info!(workspace = %identity.workspace_id, "bootstrapped a local workspace on the server");
        Ok(identity)
    }
}
