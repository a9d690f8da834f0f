//! Benchmark peer for `bench/mcp.sh`: an rmcp 3.11 Streamable HTTP server in stateless JSON mode
//! with one trivial tool, `echo {text}` -> `text`, mounted at `/mcp`.
//!
//! Usage: `mcp-peer PORT [BUSY_US [TEXT_BYTES]]` — binds 127.0.0.1:PORT and prints
//! `listening on 127.0.0.1:PORT`. With `BUSY_US`, each `echo` first spins that many microseconds
//! (`bench/wake_cost.sh`: what a slower answer costs beyond its own work); without it, one
//! relaxed load per call. With `TEXT_BYTES`, the text it returns is padded with `x` to that many
//! bytes (`bench/wake_cost.sh`: what an answer the size of a history page costs to send).
//! The runtime is tokio's multi-thread one with its default worker count, like the daemon's;
//! under `taskset -c 0` both get one worker. It is served the way rmcp's users serve it
//! (`axum::serve`, no header-read timeout): a throughput peer for loopback load, not a server
//! that faces idle or slow clients the way the daemon's `serve` loop must.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Microseconds each `echo` spins before it answers (0: none).
static BUSY_US: AtomicU64 = AtomicU64::new(0);

/// The least number of bytes of the text each `echo` returns (0: the text as given).
static TEXT_BYTES: AtomicU64 = AtomicU64::new(0);

#[tool_router(server_handler)]
impl Peer {
    #[tool(description = "Return the given text")]
    fn echo(&self, Parameters(EchoArgs { mut text }): Parameters<EchoArgs>) -> String {
        let busy = BUSY_US.load(Ordering::Relaxed);
        if busy > 0 {
            let started = std::time::Instant::now();
            while started.elapsed() < std::time::Duration::from_micros(busy) {
                std::hint::spin_loop();
            }
        }
        let bytes = TEXT_BYTES.load(Ordering::Relaxed) as usize;
        if text.len() < bytes {
            let pad = bytes - text.len();
            text.extend(std::iter::repeat_n('x', pad));
        }
        text
    }
}

const USAGE: &str = "usage: mcp-peer PORT [BUSY_US [TEXT_BYTES]]";

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or_else(|| {
            eprintln!("{USAGE}");
            std::process::exit(2)
        });
    for (index, setting) in [(2, &BUSY_US), (3, &TEXT_BYTES)] {
        if let Some(value) = std::env::args().nth(index) {
            let value: u64 = value.parse().unwrap_or_else(|_| {
                eprintln!("{USAGE}");
                std::process::exit(2)
            });
            setting.store(value, Ordering::Relaxed);
        }
    }
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
