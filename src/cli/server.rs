//! `agentteam server`: run the reference AgentTeam Server.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::output::Exit;
use crate::server::{AppState, ServerConfig, router};

/// Starts the server, prints `listening on http://ADDR` on stdout once it accepts connections,
/// and serves until SIGINT or SIGTERM.
pub fn run(listen: SocketAddr, database: String, operator_token_file: Option<PathBuf>) -> Exit {
    super::init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Usage;
        }
    };
    runtime.block_on(async move {
        let operator_token_file = operator_token_file.unwrap_or_else(|| default_token_file(&database));
        let config = ServerConfig { database_url: database, operator_token_file };
        let state = match AppState::open(&config).await {
            Ok(state) => state,
            Err(e) => return super::report(&e),
        };
        let listener = match tokio::net::TcpListener::bind(listen).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("error: cannot listen on `{listen}`: {e}");
                return Exit::Usage;
            }
        };
        let address = listener.local_addr().expect("a bound listener has an address");
        tracing::info!(%address, operator_token_file = %config.operator_token_file.display(), "server listening");
        // Handlers first, announcement second: a signal right after it is a clean shutdown.
        let shutdown = crate::serve::shutdown_signal();
        let printed = super::output::print(&format!("listening on http://{address}\n"));
        if printed != Exit::Success {
            return printed;
        }
        let stop = tokio_util::sync::CancellationToken::new();
        let scheduler = tokio::spawn(crate::server::run_scheduler(state.clone(), stop.clone()));
        crate::serve::serve(listener, router(state.clone()), shutdown).await;
        stop.cancel();
        let _ = scheduler.await;
        state.store().close().await;
        tracing::info!("server stopped");
        Exit::Success
    })
}

/// `operator.token` beside the SQLite file.
fn default_token_file(database: &str) -> PathBuf {
    let path = database
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or(path);
    PathBuf::from(path)
        .parent()
        .map(|dir| dir.join("operator.token"))
        .unwrap_or_else(|| PathBuf::from("operator.token"))
}
