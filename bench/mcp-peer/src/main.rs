//! Benchmark peer for `bench/mcp.sh`: an rmcp 3.11 Streamable HTTP server in stateless JSON mode
//! with one trivial tool, `echo {text}` -> `text`, mounted at `/mcp`.
//!
//! Usage: `mcp-peer PORT` — binds 127.0.0.1:PORT and prints `listening on 127.0.0.1:PORT`.
//! The runtime is tokio's multi-thread one with its default worker count, like the daemon's;
//! under `taskset -c 0` both get one worker. It is served the way rmcp's users serve it
//! (`axum::serve`, no header-read timeout): a throughput peer for loopback load, not a server
//! that faces idle or slow clients the way the daemon's `serve` loop must.

use std::sync::Arc;

use axum::serve::ListenerExt;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to return.
    text: String,
}

#[derive(Clone)]
struct Peer;

#[tool_router(server_handler)]
impl Peer {
    #[tool(description = "Return the given text")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or_else(|| {
            eprintln!("usage: mcp-peer PORT");
            std::process::exit(2)
        });
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let service = StreamableHttpService::new(
        || Ok(Peer),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|error| {
            eprintln!("bind 127.0.0.1:{port}: {error}");
            std::process::exit(1)
        });
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    println!("listening on {addr}");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router)
        .await
        .expect("the server runs");
}
