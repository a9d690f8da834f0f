//! A fault-injecting HTTP proxy at the network edge, between a daemon (`--server-url`) and a real
//! `agentteam server`: every request is forwarded as it came unless a rule whose path fragment
//! the request's path contains says otherwise: answer in the server's place, close the connection
//! without an answer, or rewrite the server's answer. It injects faults into the bytes on the
//! wire; nothing of our own code is replaced. Stops when dropped.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};

/// What a rule does to a request.
#[derive(Clone)]
pub enum Fault {
    /// Answer `status` with `body` (JSON) in the server's place; the server never sees it.
    Answer(u16, String),
    /// Close the connection without answering; the server never sees it.
    Drop,
    /// Forward, then replace the server's answer body with what the function makes of it.
    Rewrite(fn(&[u8]) -> Vec<u8>),
}

struct Rule {
    path: String,
    fault: Fault,
}

pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    rules: Arc<Mutex<Vec<Rule>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on `127.0.0.1:0` in front of `backend` (`http://…`), forwarding everything.
    pub async fn start(backend: &str) -> FaultProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let rules: Arc<Mutex<Vec<Rule>>> = Arc::default();
        let forward = Arc::new(Forward {
            backend: backend.trim_end_matches('/').to_string(),
            http: agentteam::client::http::builder(None).build().unwrap(),
            rules: rules.clone(),
        });
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let forward = forward.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let forward = forward.clone();
                        async move { forward.handle(request).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FaultProxy { url, rules, task }
    }

    /// From now on, a request whose path contains `path` meets `fault` (the latest rule for a
    /// path wins).
    pub fn set(&self, path: &str, fault: Fault) {
        let mut rules = self.rules.lock().unwrap();
        rules.retain(|rule| rule.path != path);
        rules.push(Rule {
            path: path.to_string(),
            fault,
        });
    }

    /// Forward everything again.
    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Forward {
    backend: String,
    http: reqwest::Client,
    rules: Arc<Mutex<Vec<Rule>>>,
}

/// The connection is closed without an answer.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dropped by the fault proxy")
    }
}

impl std::error::Error for Dropped {}

impl Forward {
    async fn handle(
        &self,
        request: Request<hyper::body::Incoming>,
    ) -> Result<Response<Full<Bytes>>, Dropped> {
        let fault = {
            let rules = self.rules.lock().unwrap();
            rules
                .iter()
                .rev()
                .find(|rule| request.uri().path().contains(&rule.path))
                .map(|rule| rule.fault.clone())
        };
        let rewrite = match fault {
            Some(Fault::Drop) => return Err(Dropped),
            Some(Fault::Answer(status, body)) => return Ok(json(status, body.into_bytes())),
            Some(Fault::Rewrite(rewrite)) => Some(rewrite),
            None => None,
        };
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map_err(|_| Dropped)?.to_bytes();
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let mut forwarded = self
            .http
            .request(parts.method.clone(), format!("{}{path}", self.backend))
            .body(body);
        for (name, value) in &parts.headers {
            if name != hyper::header::HOST {
                forwarded = forwarded.header(name, value);
            }
        }
        let answer = forwarded.send().await.map_err(|_| Dropped)?;
        let status = answer.status().as_u16();
        let body = answer.bytes().await.map_err(|_| Dropped)?;
        let body = match rewrite {
            Some(rewrite) => rewrite(&body),
            None => body.to_vec(),
        };
        Ok(json(status, body))
    }
}

fn json(status: u16, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
