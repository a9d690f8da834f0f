//! The one way our HTTP clients are built and read, for every client that carries a credential
//! (the CLI's admin and Exec calls, the daemon's `ServerClient` and operator client).
//!
//! None of them follows the user's proxy environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` in
//! any case): a proxy would receive the bearer. A loopback peer is always reached directly; a
//! remote AgentTeam Server goes through a proxy only when the operator named one on the command
//! line (`agentteam daemon --server-proxy`). Every answer is read under a size bound.

use std::time::Duration;

/// The largest answer body any of our clients reads (the result budgets are far below it).
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// A proxy the operator named explicitly for a remote server.
#[derive(Debug, Clone)]
pub struct ExplicitProxy(pub reqwest::Url);

/// A client builder that uses no proxy from the environment: `explicit` (never for loopback
/// hosts) or none at all.
pub fn builder(explicit: Option<&ExplicitProxy>) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(crate::serve::CLIENT_IDLE_TIMEOUT);
    match explicit {
        None => builder,
        Some(ExplicitProxy(url)) => match reqwest::Proxy::all(url.clone()) {
            Ok(proxy) => builder
                .proxy(proxy.no_proxy(reqwest::NoProxy::from_string("127.0.0.1,localhost,::1"))),
            // A URL that parsed cannot fail here; fail closed to a direct connection anyway.
            Err(_) => builder,
        },
    }
}

/// A client with no proxy and the given overall timeout.
pub fn direct(timeout: Duration) -> reqwest::Client {
    builder(None)
        .timeout(timeout)
        .build()
        .expect("a plain HTTP client builds")
}

/// Why an answer was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("the answer exceeds {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    #[error("the connection failed while reading the answer")]
    Transport(#[source] reqwest::Error),
}

impl ReadError {
    /// True when the read timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, ReadError::Transport(e) if e.is_timeout())
    }
}

/// The whole body of `response`, refusing one over `limit` bytes without reading past it.
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ReadError> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
