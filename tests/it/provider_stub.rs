//! A small stand-in for GitHub's and Gitea's pull request endpoints on loopback (no real
//! provider is reachable from the tests): `GET /repos/{owner}/{repo}/pulls/{n}` and
//! `GET /api/v1/repos/{owner}/{repo}/pulls/{n}`, each checking its provider's authorization
//! scheme against one token. The test sets pull requests and a failure mode, and reads back what
//! the stub was sent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// How the stub answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Every answer is this status with an error body.
    Status(u16),
    /// 200 with a body that is not a pull request.
    Malformed,
    /// Waits this long before answering.
    Slow(Duration),
}

#[derive(Default)]
struct Inner {
    /// `owner/repo#n` → the pull request object.
    pulls: BTreeMap<String, Value>,
    mode: Option<Mode>,
    /// Every `Authorization` header received, in order.
    authorizations: Vec<String>,
}

/// A running stub; stops when dropped.
pub struct ProviderStub {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    token: String,
}

impl ProviderStub {
    pub async fn start(token: &str) -> ProviderStub {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let shared = Shared {
            inner: inner.clone(),
            token: token.to_string(),
        };
        let app = Router::new()
            .route(
                "/repos/{owner}/{repo}/pulls/{number}",
                get(|state: State<Shared>, path, headers| pull(state, path, headers, "Bearer")),
            )
            .route(
                "/api/v1/repos/{owner}/{repo}/pulls/{number}",
                get(|state: State<Shared>, path, headers| pull(state, path, headers, "token")),
            )
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ProviderStub { url, inner, task }
    }

    /// Sets pull request `repository#number` (open, its head at `sha`, titled `title`).
    pub fn set_pull(
        &self,
        repository: &str,
        number: u64,
        title: &str,
        state: &str,
        merged: bool,
        sha: &str,
    ) {
        self.inner.lock().unwrap().pulls.insert(
            format!("{repository}#{number}"),
            json!({
                "number": number,
                "title": title,
                "state": state,
                "merged": merged,
                "head": {"sha": sha, "ref": "feature"},
                "html_url": format!("https://provider.test/{repository}/pull/{number}"),
                "updated_at": "2026-11-30T09:00:00Z",
                "user": {"login": "someone"},
            }),
        );
    }

    pub fn set_mode(&self, mode: Mode) {
        self.inner.lock().unwrap().mode = Some(mode);
    }

    /// Every `Authorization` header the stub received.
    pub fn authorizations(&self) -> Vec<String> {
        self.inner.lock().unwrap().authorizations.clone()
    }
}

impl Drop for ProviderStub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pull(
    State(shared): State<Shared>,
    Path((owner, repo, number)): Path<(String, String, String)>,
    headers: HeaderMap,
    scheme: &'static str,
) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let (mode, found) = {
        let mut inner = shared.inner.lock().unwrap();
        inner.authorizations.push(authorization.clone());
        (
            inner.mode.unwrap_or(Mode::Normal),
            inner
                .pulls
                .get(&format!("{owner}/{repo}#{number}"))
                .cloned(),
        )
    };
    if authorization != format!("{scheme} {}", shared.token) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"message": "Bad credentials"})),
        )
            .into_response();
    }
    match mode {
        Mode::Status(status) => (
            StatusCode::from_u16(status).unwrap(),
            axum::Json(json!({"message": "stub failure"})),
        )
            .into_response(),
        Mode::Malformed => axum::Json(json!({"unexpected": true})).into_response(),
        Mode::Slow(delay) => {
            tokio::time::sleep(delay).await;
            axum::Json(found.unwrap_or(Value::Null)).into_response()
        }
        Mode::Normal => match found {
            Some(pull) => axum::Json(pull).into_response(),
            None => (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"message": "Not Found"})),
            )
                .into_response(),
        },
    }
}
