//! A fault-injecting HTTP proxy at the network edge, between a daemon (`--server-url`) and a real
//! `agentteam server`: every request is forwarded as it came unless a rule whose path fragment
//! the request's path contains says otherwise: answer in the server's place, close the connection
//! before or after the server answered, hold the answer, cut it short, or rewrite it. A rule is
//! one fault for every request, or a mix: each request meets each fault at its rate. It injects
//! faults into the bytes on the wire; nothing of our own code is replaced. It counts what it
//! injected, per fault. Stops when dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};

/// What a rule does to a request.
#[derive(Clone)]
pub enum Fault {
    /// Answer `status` with `body` in the server's place; the server never sees it.
    Answer(u16, String),
    /// Close the connection without answering; the server never sees the request.
    Drop,
    /// Forward, then close the connection without giving the server's answer.
    DropAnswer,
    /// Forward, then hold the server's answer this long before giving it.
    Stall(Duration),
    /// Forward, then announce the server's whole answer and send only its first half.
    Truncate,
    /// Forward, then replace the server's answer body with what the function makes of it.
    Rewrite(fn(&[u8]) -> Vec<u8>),
}

impl Fault {
    /// The fault's name in [`FaultProxy::injected`].
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Answer(..) => "answer",
            Fault::Drop => "reset before forwarding",
            Fault::DropAnswer => "reset after the answer",
            Fault::Stall(_) => "stall",
            Fault::Truncate => "truncated answer",
            Fault::Rewrite(_) => "rewrite",
        }
    }
}

struct Rule {
    path: String,
    /// Each fault with its rate; rates sum to at most 1, the rest is forwarded as it came.
    mix: Vec<(f64, Fault)>,
}

pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    rules: Arc<Mutex<Vec<Rule>>>,
    injected: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    /// Woken at each injected fault.
    met: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on `127.0.0.1:0` in front of `backend` (`http://…`), forwarding everything.
    pub async fn start(backend: &str) -> FaultProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let rules: Arc<Mutex<Vec<Rule>>> = Arc::default();
        let injected: Arc<Mutex<BTreeMap<&'static str, u64>>> = Arc::default();
        let met = Arc::new(tokio::sync::Notify::new());
        let forward = Arc::new(Forward {
            backend: backend.trim_end_matches('/').to_string(),
            http: agentteam::client::http::builder(None).build().unwrap(),
            rules: rules.clone(),
            injected: injected.clone(),
            met: met.clone(),
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
        FaultProxy {
            url,
            rules,
            injected,
            met,
            task,
        }
    }

    /// From now on, a request whose path contains `path` meets `fault` (the latest rule for a
    /// path wins).
    pub fn set(&self, path: &str, fault: Fault) {
        self.set_mix(path, vec![(1.0, fault)]);
    }

    /// From now on, each request whose path contains `path` meets each fault of `mix` at its
    /// rate, drawn for that request alone (the latest rule for a path wins).
    pub fn set_mix(&self, path: &str, mix: Vec<(f64, Fault)>) {
        assert!(mix.iter().map(|(rate, _)| rate).sum::<f64>() <= 1.0 + 1e-9);
        let mut rules = self.rules.lock().unwrap();
        rules.retain(|rule| rule.path != path);
        rules.push(Rule {
            path: path.to_string(),
            mix,
        });
    }

    /// How many requests met each fault so far.
    pub fn injected(&self) -> BTreeMap<&'static str, u64> {
        self.injected.lock().unwrap().clone()
    }

    /// Waits (30 s at most) until `fault` (by [`Fault::name`]) was injected `count` times.
    pub async fn wait_injected(&self, fault: &str, count: u64) {
        let met = async {
            loop {
                let notified = self.met.notified();
                if self.injected().get(fault).copied().unwrap_or(0) >= count {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), met)
            .await
            .unwrap_or_else(|_| panic!("`{fault}` was not injected {count} times"));
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
    injected: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    met: Arc<tokio::sync::Notify>,
}

type Body = BoxBody<Bytes, Dropped>;

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
    ) -> Result<Response<Body>, Dropped> {
        let fault = {
            let rules = self.rules.lock().unwrap();
            rules
                .iter()
                .rev()
                .find(|rule| request.uri().path().contains(&rule.path))
                .and_then(|rule| {
                    let mut draw = rand::random::<f64>();
                    rule.mix.iter().find_map(|(rate, fault)| {
                        draw -= rate;
                        (draw < 0.0).then(|| fault.clone())
                    })
                })
        };
        if let Some(fault) = &fault {
            *self
                .injected
                .lock()
                .unwrap()
                .entry(fault.name())
                .or_default() += 1;
            self.met.notify_waiters();
        }
        match fault {
            Some(Fault::Drop) => return Err(Dropped),
            Some(Fault::Answer(status, body)) => return Ok(json(status, body.into_bytes())),
            _ => {}
        }
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
        match fault {
            Some(Fault::DropAnswer) => Err(Dropped),
            Some(Fault::Stall(stall)) => {
                tokio::time::sleep(stall).await;
                Ok(json(status, body.to_vec()))
            }
            Some(Fault::Truncate) => {
                let half = body.slice(..body.len() / 2);
                let frames = futures_util::stream::iter([Ok(Frame::data(half)), Err(Dropped)]);
                let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
                *response.status_mut() = StatusCode::from_u16(status).unwrap();
                let headers = response.headers_mut();
                headers.insert(
                    hyper::header::CONTENT_TYPE,
                    "application/json".parse().unwrap(),
                );
                headers.insert(hyper::header::CONTENT_LENGTH, body.len().into());
                Ok(response)
            }
            Some(Fault::Rewrite(rewrite)) => Ok(json(status, rewrite(&body))),
            _ => Ok(json(status, body.to_vec())),
        }
    }
}

fn json(status: u16, body: Vec<u8>) -> Response<Body> {
    let full = Full::new(Bytes::from(body)).map_err(|never| match never {});
    let mut response = Response::new(BodyExt::boxed(full));
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
