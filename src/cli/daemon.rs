//! `agentteam daemon`, and the local human side of it: `agentteam agent add|list|remove` and
//! `agentteam run`. The human commands find the daemon through `<state dir>/daemon.json` and
//! authenticate with `<state dir>/admin.token`; they never see a runtime's token.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::http::{self, Peer};
use super::output::{Exit, print, usage_error};
use crate::daemon::runtime::{LaunchOptions, Output, RuntimeConfig};
use crate::daemon::{
    ADMIN_TOKEN_FILE, DAEMON_FILE, DaemonConfig, default_runtime_dir, default_state_dir,
};
use crate::wire::frame;

/// Options of `agentteam daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Loopback address to listen on (port 0 picks a free port; `daemon.json` records it)
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// State directory (default: `$XDG_STATE_HOME/agentteam`)
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Base directory of runtime credential files (default: `$XDG_RUNTIME_DIR/agentteam`, else `<state dir>/run`)
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// An AgentTeam Server to use instead of the embedded one: `https://HOST`, or `http://` to loopback
    #[arg(long)]
    server_url: Option<String>,
    /// PEM certificates `--server-url`'s TLS chain may end in, beside the platform's roots
    #[arg(long, value_name = "PATH", requires = "server_url")]
    server_ca_file: Option<PathBuf>,
    /// The operator token file of `--server-url`
    #[arg(long)]
    operator_token_file: Option<PathBuf>,
    /// A proxy to reach `--server-url` through (`http://`, `https://`, `socks5://`, or
    /// `socks5h://` for the proxy to resolve the name), never for a loopback server; proxy
    /// variables of the environment are never used
    #[arg(long, value_name = "URL", requires = "server_url")]
    server_proxy: Option<String>,
    /// An owner-only file holding the proxy's `user:password` (never in the proxy URL)
    #[arg(long, value_name = "PATH", requires = "server_proxy")]
    server_proxy_credential_file: Option<PathBuf>,
    /// How runtime calls reach the embedded server: `in-process` (its router, no socket) or
    /// `tcp` (its loopback listener, the HTTP client a `--server-url` daemon uses); ignored with
    /// `--server-url`
    #[arg(
        long,
        value_enum,
        env = "AGENTTEAM_EMBEDDED_HOP",
        default_value = "in-process"
    )]
    embedded_hop: crate::daemon::EmbeddedHop,
    /// Lifetime of each runtime token generation, in seconds
    #[arg(long, default_value_t = crate::daemon::DEFAULT_TOKEN_TTL.as_secs())]
    token_ttl_secs: u64,
    /// How often renewals are checked, in milliseconds
    #[arg(long, default_value_t = crate::daemon::DEFAULT_ROTATION_TICK.as_millis() as u64)]
    rotation_tick_ms: u64,
}

/// Where the local daemon keeps its state.
#[derive(Debug, Args)]
pub struct StateDir {
    /// State directory of the daemon (default: `$XDG_STATE_HOME/agentteam`)
    #[arg(long, global = true)]
    pub state_dir: Option<PathBuf>,
}

/// Options of `agentteam run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The agent (id or handle) the runtime acts as
    #[arg(long)]
    agent: String,
    /// Working directory of the runtime (default: the current directory)
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// The session this runtime belongs to (default: a new one); one live process per session
    #[arg(long, value_name = "NAME")]
    session: Option<String>,
    /// Replace the session's live runtime: it is stopped and its credential revoked first
    #[arg(long, requires = "session")]
    replace: bool,
    /// The Human-initiated turn the runtime starts on: its target (`channel:<id>`, `dm:<id>`,
    /// `thread:<id>` or `task:<id>`); `kb_search` and `kb_fetch` need one
    #[arg(long, value_name = "TARGET", requires = "turn_message")]
    turn_target: Option<String>,
    /// The id of the human message that started that turn
    #[arg(long, value_name = "MESSAGE_ID", requires = "turn_target")]
    turn_message: Option<String>,
    /// The runtime family: its MCP configuration is written for it (in the launch's private
    /// directory, removed with it) and passed with its own flag or variable
    #[arg(long, value_enum, default_value = "generic")]
    runtime: crate::daemon::runtime::driver::Family,
    /// The Codex thread id of the runtime's primary thread, when known: an MCP `tools/call` whose
    /// Codex turn metadata names another thread may then only call read-only tools
    #[arg(long, value_name = "THREAD_ID")]
    primary_thread: Option<String>,
    /// The runtime command and its arguments
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Runs the daemon; `scrubbed` names the daemon-owned variables `main` removed from this
/// process's environment (inherited from a runtime the daemon was started in).
pub fn run_daemon(args: DaemonArgs, scrubbed: Vec<String>) -> Exit {
    super::init_tracing();
    let open_files = crate::serve::raise_open_file_limit();
    tracing::debug!(?open_files, "open-file soft limit");
    if !scrubbed.is_empty() {
        tracing::info!(variables = ?scrubbed, "removed inherited runtime credential variables from the daemon's environment");
    }
    // Absolute, so every path a runtime gets (token files, configurations, helpers) stays valid
    // from its own working directory and from the helpers its runtime starts elsewhere.
    let state_dir = match std::path::absolute(args.state_dir.unwrap_or_else(default_state_dir)) {
        Ok(dir) => dir,
        Err(e) => return usage_error(&format!("cannot resolve the state directory: {e}"), &[]),
    };
    let runtime_dir = match std::path::absolute(
        args.runtime_dir
            .unwrap_or_else(|| default_runtime_dir(&state_dir)),
    ) {
        Ok(dir) => dir,
        Err(e) => return usage_error(&format!("cannot resolve the runtime directory: {e}"), &[]),
    };
    if args.token_ttl_secs == 0 || args.rotation_tick_ms == 0 {
        return usage_error(
            "`--token-ttl-secs` and `--rotation-tick-ms` must be positive",
            &[],
        );
    }
    let proxy = match args
        .server_proxy
        .as_deref()
        .map(|url| crate::client::http::proxy_url("--server-proxy", url))
    {
        None => None,
        Some(Ok(url)) => Some(url),
        Some(Err(refusal)) => return usage_error(&refusal, &[]),
    };
    let proxy_auth = match args
        .server_proxy_credential_file
        .as_deref()
        .map(crate::client::http::ProxyAuth::read)
    {
        None => None,
        Some(Ok(auth)) => Some(auth),
        Some(Err(e)) => return usage_error(&format!("`--server-proxy-credential-file`: {e}"), &[]),
    };
    if let Some(url) = &args.server_url
        && let Err(e) = crate::client::http::server_url(url)
    {
        return usage_error(&format!("`--server-url`: {e}"), &[]);
    }
    let roots = match &args.server_ca_file {
        None => Vec::new(),
        Some(path) => match crate::client::http::load_roots(path) {
            Ok(roots) => roots,
            Err(e) => return usage_error(&format!("`--server-ca-file`: {e}"), &[]),
        },
    };
    let config = DaemonConfig {
        listen: args.listen,
        state_dir,
        runtime_dir,
        server_url: args.server_url,
        operator_token_file: args.operator_token_file,
        embedded_hop: args.embedded_hop,
        remote: crate::client::http::Remote {
            proxy,
            proxy_auth,
            roots,
        },
        runtime: RuntimeConfig {
            ttl: Duration::from_secs(args.token_ttl_secs),
            tick: Duration::from_millis(args.rotation_tick_ms),
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the async runtime starts");
    let ready = |base_url: &str| {
        let _ = print(&format!("listening on {base_url}\n"));
    };
    // The signal handlers are installed inside the runtime, before the daemon announces itself.
    match runtime.block_on(async {
        crate::daemon::run(config, crate::serve::shutdown_signal(), ready).await
    }) {
        Ok(()) => Exit::Success,
        Err(error) => super::report(&error),
    }
}

/// What `daemon.json` says of the running daemon.
#[derive(Debug)]
pub struct Announcement {
    /// The state directory it was read from.
    pub state_dir: PathBuf,
    /// The daemon's loopback base URL.
    pub base_url: String,
    /// The server it uses: its embedded one's loopback listener, or `--server-url`.
    pub server_url: String,
    /// Whether that server is the embedded one (its operator token is in the state directory).
    pub server_embedded: bool,
}

/// The local daemon's announcement in `state_dir` (default: the default state directory), or the
/// printed refusal when no daemon is running there.
pub fn announcement(state_dir: &Option<PathBuf>) -> Result<Announcement, Exit> {
    let dir = state_dir.clone().unwrap_or_else(default_state_dir);
    let not_running = || {
        usage_error(
            &format!("no daemon is running with state dir `{}`", dir.display()),
            &["start it with `agentteam daemon`".to_string()],
        )
    };
    let announcement: Value = std::fs::read(dir.join(DAEMON_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(not_running)?;
    let text = |field: &str| {
        announcement[field]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| usage_error(&format!("`{DAEMON_FILE}` has no `{field}`"), &[]))
    };
    Ok(Announcement {
        base_url: text("baseUrl")?,
        server_url: text("serverUrl")?,
        server_embedded: announcement["serverEmbedded"].as_bool() == Some(true),
        state_dir: dir,
    })
}

/// The daemon's base URL and admin token from its state directory.
fn connect(state_dir: &Option<PathBuf>) -> Result<(String, String), Exit> {
    let daemon = announcement(state_dir)?;
    let token_file = daemon.state_dir.join(ADMIN_TOKEN_FILE);
    let token = crate::private_file::read_private(&token_file).map_err(|e| {
        usage_error(
            &format!("cannot read `{}`: {e}", token_file.display()),
            &["start the daemon with `agentteam daemon`".to_string()],
        )
    })?;
    Ok((daemon.base_url, token.trim().to_string()))
}

/// One admin API call; the success `data` or the printed refusal and its exit status.
pub fn admin_call(
    state_dir: &Option<PathBuf>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, Exit> {
    let (base_url, token) = connect(state_dir)?;
    http::call(
        Peer::Daemon,
        method,
        &format!("{base_url}{path}"),
        &token,
        body.as_ref(),
    )
}

/// One admin API `GET` whose success is text (the metrics), or the printed refusal.
pub fn admin_text(state_dir: &Option<PathBuf>, path: &str) -> Result<String, Exit> {
    let (base_url, token) = connect(state_dir)?;
    http::Session::new(Peer::Daemon).text(&format!("{base_url}{path}"), &token)
}

/// `agentteam run`: the daemon launches the command; this process relays its output and exits
/// with its exit code.
pub fn run_runtime(state: StateDir, args: RunArgs) -> Exit {
    let RunArgs {
        agent,
        workdir,
        session,
        replace,
        turn_target,
        turn_message,
        primary_thread,
        runtime,
        command,
    } = args;
    let turn = match (turn_target, turn_message) {
        (Some(target), Some(message)) => match crate::wire::turn::Turn::new(&target, &message) {
            Ok(turn) => Some(turn),
            Err(message) => return usage_error(&message, &[]),
        },
        _ => None,
    };
    let workdir = match workdir
        .map(Ok)
        .unwrap_or_else(std::env::current_dir)
        .and_then(|dir| std::path::absolute(&dir))
    {
        Ok(dir) => dir,
        Err(e) => return usage_error(&format!("cannot resolve the working directory: {e}"), &[]),
    };
    // The launching shell's environment; the daemon removes every daemon-owned variable from it.
    // A variable that is not UTF-8 cannot travel as JSON: it is left out, and said so.
    let mut env = Vec::new();
    for (name, value) in std::env::vars_os() {
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => env.push((name, value)),
            (Ok(name), Err(_)) => {
                eprintln!("warning: `{name}` is not valid UTF-8; the runtime will not get it")
            }
            (Err(_), _) => eprintln!(
                "warning: a variable whose name is not valid UTF-8 is left out of the runtime's environment"
            ),
        }
    }
    let options = LaunchOptions {
        agent,
        workdir,
        argv: command,
        env,
        session,
        replace,
        turn,
        primary_thread,
        runtime,
    };
    if let Err(message) = options.check() {
        return usage_error(&message, &[]);
    }
    let (base_url, token) = match connect(&state.state_dir) {
        Ok(connection) => connection,
        Err(exit) => return exit,
    };
    http::block_on(async move {
        let response = crate::client::http::loopback_builder()
            .build()
            .expect("a plain HTTP client builds")
            .post(format!("{base_url}/api/admin/runs"))
            .bearer_auth(&token)
            .json(&options)
            .send()
            .await;
        let response = match response {
            Ok(response) => response,
            Err(_) => return usage_error(&format!("cannot reach the daemon at `{base_url}`"), &[]),
        };
        if !response.status().is_success() {
            let envelope: Value = crate::client::http::read_bounded(
                response,
                crate::client::http::MAX_RESPONSE_BYTES,
            )
            .await
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
            return http::refusal(Peer::Daemon, &envelope);
        }
        relay(response).await
    })
}

async fn relay(mut response: reqwest::Response) -> Exit {
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                return usage_error(
                    "the daemon closed the stream before the runtime exited",
                    &[],
                );
            }
            Err(_) => return usage_error("lost the connection to the daemon", &[]),
        };
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            match frame::parse(&line[..line.len() - 1]) {
                Some(Output::Stdout(bytes)) => {
                    let _ = std::io::stdout()
                        .write_all(&bytes)
                        .and_then(|()| std::io::stdout().flush());
                }
                Some(Output::Stderr(bytes)) => {
                    let _ = std::io::stderr().write_all(&bytes);
                }
                Some(Output::Exited(code)) => return exit_with(code),
                None => return usage_error("the daemon sent an unreadable frame", &[]),
            }
        }
        if pending.len() > frame::MAX_FRAME_BYTES {
            return usage_error(
                &format!(
                    "the daemon sent a frame over {} bytes",
                    frame::MAX_FRAME_BYTES
                ),
                &[],
            );
        }
    }
}

/// Exits this process with the runtime's exit code (clamped to 0..=255).
fn exit_with(code: i32) -> Exit {
    let _ = std::io::stdout().flush();
    std::process::exit(code.clamp(0, 255));
}
