//! `agentteam server`: run the reference AgentTeam Server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::output::{Exit, usage_error};
use crate::server::provider::ProviderConfig;
use crate::server::{AppState, ServerConfig};

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
    /// A proxy to reach providers through (`http://`, `https://`, `socks5://`, or `socks5h://`
    /// for the proxy to resolve names), never for a loopback provider; the environment's proxy
    /// variables are never used
    #[arg(long, value_name = "URL")]
    provider_proxy: Option<String>,
    /// An owner-only file holding the provider proxy's `user:password` (never in its URL)
    #[arg(long, value_name = "PATH", requires = "provider_proxy")]
    provider_proxy_credential_file: Option<PathBuf>,
    /// PEM certificates a provider's TLS chain may end in, beside the platform's roots
    #[arg(long, value_name = "PATH")]
    provider_ca_file: Option<PathBuf>,
    /// How long a person's message to an agent waits for the daemon hosting the agent to start
    /// it before it expires, in seconds
    #[arg(long, value_name = "SECS", default_value_t = (crate::server::store::DEFAULT_DELIVERY_TTL_MS / 1000) as u64,
          value_parser = clap::value_parser!(u64).range(1..=7 * 24 * 3600))]
    delivery_ttl_secs: u64,
    /// How many deliveries one person's messages may make in a minute (past them, a message is
    /// recorded but starts no agent, saying why)
    #[arg(long, value_name = "N", default_value_t = crate::server::store::DEFAULT_DELIVERIES_PER_MINUTE as u32,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    deliveries_per_minute: u32,
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
        provider_proxy_credential_file,
        provider_ca_file,
        delivery_ttl_secs,
        deliveries_per_minute,
    } = args;
    super::init_tracing();
    let open_files = crate::serve::raise_open_file_limit();
    tracing::debug!(?open_files, "open-file soft limit");
    if provider_timeout_ms == 0 {
        return usage_error("`--provider-timeout-ms` must be positive", &[]);
    }
    let remote = match crate::client::http::Remote::from_flags(
        ("--provider-proxy", provider_proxy.as_deref()),
        provider_proxy_credential_file.as_deref(),
        ("--provider-ca-file", provider_ca_file.as_deref()),
    ) {
        Ok(remote) => remote,
        Err(refusal) => return usage_error(&refusal, &[]),
    };
    let telemetry = match crate::telemetry::Settings::from_env() {
        Ok(settings) => settings,
        Err(why) => return usage_error(&why, &[]),
    };
    let provider = ProviderConfig {
        timeout: Duration::from_millis(provider_timeout_ms),
        min_refresh: Duration::from_secs(provider_refresh_secs),
        remote,
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
    if postgres && let Err(refusal) = check_postgres_url(&database) {
        return usage_error(&format!("`--database`: {refusal}"), &[PASSWORD_HINT.into()]);
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
            telemetry,
            delivery_ttl: std::time::Duration::from_secs(delivery_ttl_secs),
            deliveries_per_minute,
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
        crate::server::run(listener, state, shutdown).await;
        tracing::info!("server stopped");
        Exit::Success
    })
}

/// Where a database password goes instead of the URL.
const PASSWORD_HINT: &str = "a password goes in a pgpass file (PGPASSFILE or ~/.pgpass, mode 0600) or in PGPASSWORD, never in the URL";

/// The connection parameters a `postgres://` URL may carry in its query: none of them holds a
/// secret (`sslkey` names a key file; sqlx reads no key from the URL itself). Anything else is
/// refused by its name, since sqlx would take a `password` from the query and log any parameter it
/// does not know together with its value, and every user of the machine can read a process's
/// arguments.
const POSTGRES_QUERY_KEYS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "application_name",
    "options",
];

/// Checks a `postgres://` URL for a secret before anything reads it: no password in its user
/// info, and only [`POSTGRES_QUERY_KEYS`] (and `options[NAME]`) in its query, each key compared as
/// sqlx reads it (percent-decoded). The refusal names a key, never a value.
fn check_postgres_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|_| "it is not a valid URL".to_string())?;
    if url.fragment().is_some() {
        return Err("the URL carries a fragment (`#…`), which no connection parameter is".into());
    }
    if url.password().is_some() {
        return Err(
            "the URL carries a password, which every user of this machine can read in the process list"
                .into(),
        );
    }
    let query = url.query().unwrap_or_default();
    let raw_parts = query.split('&').filter(|part| !part.is_empty());
    for ((key, _), raw) in url.query_pairs().zip(raw_parts) {
        let allowed = POSTGRES_QUERY_KEYS.contains(&key.as_ref())
            || (key.starts_with("options[") && key.ends_with(']'));
        if allowed {
            continue;
        }
        // A key is named only when it is shaped like a parameter's name and has a value: a lone
        // word, or text with other characters, may be the secret itself.
        let named = raw.contains('=')
            && (1..=40).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.[]".contains(&b));
        return Err(if key.eq_ignore_ascii_case("password") {
            "the URL carries a password in its query (`password`), which every user of this machine can read in the process list".into()
        } else if named {
            format!(
                "the query parameter `{key}` is not accepted (accepted: {})",
                POSTGRES_QUERY_KEYS.join(", ")
            )
        } else {
            format!(
                "the query carries a part that is not a `name=value` connection parameter ({} characters, not shown)",
                raw.chars().count()
            )
        });
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_may_carry_only_secret_free_parameters() {
        for good in [
            "postgres://agentteam@db.internal:5432/agentteam",
            "postgres://agentteam@db/agentteam?sslmode=verify-full&sslrootcert=/etc/ca.pem",
            "postgres:///agentteam?host=/run/postgresql&user=agentteam&application_name=at",
            "postgres://u@h/db?sslcert=/c.pem&sslkey=/k.pem&options=-c%20search_path%3Dat",
            "postgres://u@h/db?options[statement_timeout]=5s&port=5433&dbname=x",
        ] {
            assert_eq!(check_postgres_url(good), Ok(()), "{good}");
        }
        for (bad, named) in [
            ("postgres://u:secret@h/db", "carries a password"),
            ("postgres://u@h/db?password=secret", "(`password`)"),
            ("postgres://u@h/db?PassWord=secret", "(`password`)"),
            ("postgres://u@h/db?pass%77ord=secret", "(`password`)"),
            (
                "postgres://u@h/db?sslmode=require&passfile=secret",
                "`passfile`",
            ),
            ("postgres://u@h/db?sslpassword=secret", "`sslpassword`"),
            ("postgres://u@h/db?%73ecret=secret", "`secret`"),
            ("postgres://u@h/db?sslmode=require&x+y=secret", "not shown"),
            ("postgres://u@h/db?hunter2secret", "not shown"),
            ("postgres://u@h/db?password:hunter2secret=x", "not shown"),
            ("postgres://u@h/db#secret", "fragment"),
        ] {
            let refusal = check_postgres_url(bad).unwrap_err();
            assert!(refusal.contains(named), "{bad}: {refusal}");
            let without_key = refusal.replace("`secret`", "");
            assert!(
                !without_key.contains("secret"),
                "{bad}: the value is repeated: {refusal}"
            );
        }
    }

    #[test]
    fn a_refused_key_is_named_only_when_it_is_shaped_like_a_name() {
        let long = check_postgres_url(&format!("postgres://u@h/db?{}=v", "k".repeat(100)));
        let long = long.unwrap_err();
        assert!(long.contains("102 characters, not shown"), "{long}");
        assert!(!long.contains("kkkk"), "{long}");
        let control = check_postgres_url("postgres://u@h/db?a%0Ab%1B=v").unwrap_err();
        assert!(control.contains("not shown"), "{control}");
        assert!(!control.contains('\u{1b}'), "{control}");
        let named = check_postgres_url("postgres://u@h/db?connect_timeout=5").unwrap_err();
        assert!(named.contains("`connect_timeout`"), "{named}");
    }
}
