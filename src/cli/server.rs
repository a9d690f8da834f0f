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
    let postgres = crate::server::store::is_postgres(&database);
    if postgres && url_has_password(&database) {
        eprintln!(
            "error: the database URL carries a password, which every user of this machine can read in the process list\n  \
             put it in a pgpass file (PGPASSFILE or ~/.pgpass, mode 0600) or in PGPASSWORD, and drop it from the URL"
        );
        return Exit::Usage;
    }
    let operator_token_file = match operator_token_file {
        Some(path) => path,
        None if postgres => {
            eprintln!(
                "error: `--operator-token-file` is required with a PostgreSQL database\n  \
                 every replica names the same file: the first to start creates the token there, the others read it"
            );
            return Exit::Usage;
        }
        None => default_token_file(&database),
    };
    runtime.block_on(async move {
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

/// Whether a `postgres://` URL has a password in its user info.
fn url_has_password(database: &str) -> bool {
    url::Url::parse(database).is_ok_and(|url| url.password().is_some())
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
