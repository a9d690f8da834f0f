//! `agentteam server`: run the reference AgentTeam Server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::output::Exit;
use crate::server::provider::ProviderConfig;
use crate::server::{AppState, ServerConfig, router};

/// Options of `agentteam server`.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1:7780")]
    listen: SocketAddr,
    /// Database URL: `sqlite:///PATH/server.db`, or `postgres://USER@HOST:PORT/DB` for
    /// replicas (its password comes from PGPASSFILE, ~/.pgpass or PGPASSWORD, never the URL)
    #[arg(long)]
    database: String,
    /// The operator token file: SQLite writes a fresh token there at every start (default:
    /// `operator.token` beside the database); PostgreSQL replicas share it (required)
    #[arg(long)]
    operator_token_file: Option<PathBuf>,
    /// How long one request to an extension's provider may take, in milliseconds
    #[arg(long, default_value_t = 10_000)]
    provider_timeout_ms: u64,
    /// Read a watched pull request again when its last read is older than this, in seconds
    #[arg(long, default_value_t = 60)]
    provider_refresh_secs: u64,
    /// A proxy to reach providers through (the environment's proxy variables are never used)
    #[arg(long, value_name = "URL")]
    provider_proxy: Option<String>,
    /// PEM certificates a provider's TLS chain may end in, beside the platform's roots
    #[arg(long, value_name = "PATH")]
    provider_ca_file: Option<PathBuf>,
}

/// Starts the server, prints `listening on http://ADDR` on stdout once it accepts connections,
/// and serves until SIGINT or SIGTERM.
pub fn run(args: ServerArgs) -> Exit {
    let ServerArgs {
        listen,
        database,
        operator_token_file,
        provider_timeout_ms,
        provider_refresh_secs,
        provider_proxy,
        provider_ca_file,
    } = args;
    super::init_tracing();
    let open_files = crate::serve::raise_open_file_limit();
    tracing::debug!(?open_files, "open-file soft limit");
    if provider_timeout_ms == 0 {
        return super::output::usage_error("`--provider-timeout-ms` must be positive", &[]);
    }
    let proxy = match provider_proxy.as_deref().map(reqwest::Url::parse) {
        None => None,
        Some(Ok(url)) if matches!(url.scheme(), "http" | "https" | "socks5") => Some(url),
        Some(_) => {
            return super::output::usage_error(
                "`--provider-proxy` must be an `http://`, `https://` or `socks5://` URL",
                &[],
            );
        }
    };
    let roots = match &provider_ca_file {
        None => Vec::new(),
        Some(path) => match crate::client::http::load_roots(path) {
            Ok(roots) => roots,
            Err(e) => {
                return super::output::usage_error(&format!("`--provider-ca-file`: {e}"), &[]);
            }
        },
    };
    let provider = ProviderConfig {
        timeout: Duration::from_millis(provider_timeout_ms),
        min_refresh: Duration::from_secs(provider_refresh_secs),
        remote: crate::client::http::Remote { proxy, roots },
    };
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
        let config = ServerConfig {
            database_url: database,
            operator_token_file,
            provider,
        };
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
        state.close().await;
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
