//! The human CLI's one request path to the daemon's admin API and a server's operator API: build
//! the request (never through a proxy), read a bounded answer, and either return the success
//! envelope's `data` or print the refusal.
//!
//! A refusal prints `error: <message>`, then `hint:` lines (the envelope's `hint`, `next` and
//! `incidentId`), and exits 2, like every other refusal of a human command (usage, configuration,
//! an unreachable peer). Exit 1 belongs to `agentteam exec`, whose action ran and failed.

use serde_json::Value;

use super::output::{Exit, usage_error};
use crate::client::http::{MAX_RESPONSE_BYTES, read_bounded};

/// Who answers a call (for the messages about it) and how it is reached.
#[derive(Debug, Clone, Copy)]
pub enum Peer<'a> {
    /// The local daemon's admin API.
    Daemon,
    /// An AgentTeam Server's operator API.
    Server(&'a crate::client::http::Remote),
}

impl<'a> Peer<'a> {
    fn name(self) -> &'static str {
        match self {
            Peer::Daemon => "daemon",
            Peer::Server(_) => "server",
        }
    }

    fn unreachable_hint(self) -> &'static str {
        match self {
            Peer::Daemon => "is `agentteam daemon` running?",
            Peer::Server(_) => "is `agentteam server` running there?",
        }
    }

    fn remote(self) -> Option<&'a crate::client::http::Remote> {
        match self {
            Peer::Daemon => None,
            Peer::Server(remote) => Some(remote),
        }
    }
}

/// Runs `future` on a current-thread runtime (the CLI makes one call at a time).
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds")
        .block_on(future)
}

/// One JSON request with a bearer; the success `data`, or the printed refusal and its exit.
pub fn call(
    peer: Peer,
    method: reqwest::Method,
    url: &str,
    bearer: &str,
    body: Option<&Value>,
) -> Result<Value, Exit> {
    Session::new(peer).call(method, url, bearer, body)
}

/// Many requests to one peer over one pooled client (an import of many documents).
pub struct Session<'a> {
    peer: Peer<'a>,
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
}

impl<'a> Session<'a> {
    pub fn new(peer: Peer<'a>) -> Session<'a> {
        Session {
            peer,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime builds"),
            http: crate::client::http::builder(peer.remote())
                .build()
                .expect("a plain HTTP client builds"),
        }
    }

    /// One request, like [`call`].
    pub fn call(
        &self,
        method: reqwest::Method,
        url: &str,
        bearer: &str,
        body: Option<&Value>,
    ) -> Result<Value, Exit> {
        let (status, bytes) = self.send(method, url, bearer, body)?;
        let envelope = self.envelope(status, &bytes)?;
        if status.is_success() && envelope["ok"] == true {
            return Ok(envelope["data"].clone());
        }
        Err(refusal(self.peer, &envelope))
    }

    /// One `GET` whose success is text rather than an envelope (the metrics); a refusal is
    /// printed as [`call`] prints it.
    pub fn text(&self, url: &str, bearer: &str) -> Result<String, Exit> {
        let (status, bytes) = self.send(reqwest::Method::GET, url, bearer, None)?;
        if status.is_success() {
            return String::from_utf8(bytes).map_err(|_| {
                usage_error(
                    &format!("the {} answered text that is not UTF-8", self.peer.name()),
                    &[],
                )
            });
        }
        Err(refusal(self.peer, &self.envelope(status, &bytes)?))
    }

    /// Sends one request and reads its bounded answer; an unreachable peer or an unread answer
    /// is printed here.
    fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        bearer: &str,
        body: Option<&Value>,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), Exit> {
        let peer = self.peer;
        let answer = self.runtime.block_on(async {
            let mut request = self.http.request(method, url).bearer_auth(bearer);
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request
                .send()
                .await
                .map_err(|e| Err(crate::client::http::why_unreachable(&e)))?;
            let status = response.status();
            let bytes = read_bounded(response, MAX_RESPONSE_BYTES)
                .await
                .map_err(Ok)?;
            Ok::<_, Result<crate::client::http::ReadError, &'static str>>((status, bytes))
        });
        answer.map_err(|failure| match failure {
            Err(why) => usage_error(
                &format!("cannot reach the {} at `{url}`: {why}", peer.name()),
                &[peer.unreachable_hint().to_string()],
            ),
            Ok(error) => usage_error(&format!("the {} answered, but {error}", peer.name()), &[]),
        })
    }

    fn envelope(&self, status: reqwest::StatusCode, bytes: &[u8]) -> Result<Value, Exit> {
        serde_json::from_slice(bytes).map_err(|_| {
            usage_error(
                &format!(
                    "the {} answered {status} without a JSON envelope",
                    self.peer.name()
                ),
                &[],
            )
        })
    }
}

/// Prints a refused call's error envelope for a person, and returns the refusal's exit.
pub fn refusal(peer: Peer, envelope: &Value) -> Exit {
    let error = &envelope["error"];
    let text = |field: &str| error[field].as_str().map(str::to_string);
    let mut hints = Vec::new();
    // Each offending value, as the envelope names it (at most its 32 details).
    for detail in error["details"].as_array().into_iter().flatten().take(32) {
        let path = detail["path"].as_str().unwrap_or("");
        let message = detail["message"].as_str().unwrap_or("");
        hints.push(if path.is_empty() {
            message.to_string()
        } else {
            format!("{path}: {message}")
        });
    }
    hints.extend(text("hint"));
    hints.extend(text("next"));
    if let Some(incident) = text("incidentId") {
        hints.push(format!(
            "the {} logged this failure as incident `{incident}`",
            peer.name()
        ));
    }
    let message =
        text("message").unwrap_or_else(|| format!("the {} refused the request", peer.name()));
    usage_error(&message, &hints)
}
