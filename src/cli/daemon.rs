//! `agentteam daemon`, and the local human side of it: `agentteam agent add|list|remove` and
//! `agentteam run`. The human commands find the daemon through `<state dir>/daemon.json` and
//! authenticate with `<state dir>/admin.token`; they never see a runtime's token.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::http::{self, Peer};
use super::output::{Exit, print, usage_error};
use crate::daemon::runtime::{LaunchOptions, Output, RuntimeConfig};
use crate::daemon::{DaemonConfig, default_runtime_dir, default_state_dir};
use crate::wire::frame;

/// Options of `agentteam daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Loopback address to listen on (port 0 picks a free port; `daemon.json` records it)
    #[arg(long, default_value = DEFAULT_LISTEN)]
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
    /// How long one request to the server may take, in milliseconds (100 to 120000); a call
    /// whose answer is lost is sent again only when that is safe, within 75 seconds in all
    #[arg(long, value_name = "MS", default_value_t = crate::client::CALL_TIMEOUT.as_millis() as u64)]
    server_timeout_ms: u64,
    /// Lifetime of each runtime token generation, in seconds
    #[arg(long, default_value_t = crate::daemon::DEFAULT_TOKEN_TTL.as_secs())]
    token_ttl_secs: u64,
    /// How often renewals are checked, in milliseconds
    #[arg(long, default_value_t = crate::daemon::DEFAULT_ROTATION_TICK.as_millis() as u64)]
    rotation_tick_ms: u64,
}

/// Where the local daemon keeps its state, and whether a command may start it.
#[derive(Debug, Args)]
pub struct StateDir {
    /// State directory of the daemon (default: `$XDG_STATE_HOME/agentteam`)
    #[arg(long, global = true)]
    pub state_dir: Option<PathBuf>,
    /// Fail when no daemon runs, instead of starting one (detached, its log in the state
    /// directory)
    #[arg(
        long,
        global = true,
        env = "AGENTTEAM_NO_START",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub no_start: bool,
}

/// `agentteam daemon`: run the daemon, or manage it.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DaemonCommand {
    #[command(subcommand)]
    action: Option<DaemonAction>,
    #[command(flatten)]
    args: DaemonArgs,
}

#[derive(Debug, clap::Subcommand)]
enum DaemonAction {
    /// Stop the running daemon: every runtime it runs loses its authorization and is stopped
    /// (asked on a terminal unless `--yes`)
    Stop {
        #[command(flatten)]
        state: StateDir,
        /// Stop it without asking, whatever runs
        #[arg(long)]
        yes: bool,
    },
    /// Stop the running daemon and start it again with the same flags (its runtimes are
    /// stopped; asked on a terminal unless `--yes`)
    Restart {
        #[command(flatten)]
        state: StateDir,
        #[arg(long)]
        yes: bool,
    },
    /// Run the daemon at login: a systemd user unit with these daemon flags (`--print` shows it)
    Install {
        #[command(flatten)]
        args: Box<DaemonArgs>,
        /// Print the file instead of installing it
        #[arg(long)]
        print: bool,
        /// The service format (default: this system's; `launchd` can only be printed here)
        #[arg(long, value_enum)]
        format: Option<super::service::Format>,
    },
    /// Stop and remove the login service of a state directory
    Uninstall {
        /// State directory of the daemon (default: `$XDG_STATE_HOME/agentteam`)
        #[arg(long)]
        state_dir: Option<PathBuf>,
        #[arg(long, value_enum)]
        format: Option<super::service::Format>,
    },
}

/// Runs `agentteam daemon [ACTION]`.
pub fn daemon_command(command: DaemonCommand, scrubbed: Vec<String>) -> Exit {
    match command.action {
        None => run_daemon(command.args, scrubbed),
        // The daemon first (what it ends said and asked), then its login service, if any: a
        // unit systemd would start again is stopped too.
        Some(DaemonAction::Stop { state, yes }) => {
            match super::local::stop(&state.state_dir, yes) {
                Ok(_) => {
                    match std::path::absolute(state.state_dir.unwrap_or_else(default_state_dir)) {
                        Ok(state_dir) => super::service::stop_unit(state_dir),
                        Err(e) => {
                            usage_error(&format!("cannot resolve the state directory: {e}"), &[])
                        }
                    }
                }
                Err(exit) => exit,
            }
        }
        Some(DaemonAction::Restart { state, yes }) => super::local::restart(&state.state_dir, yes),
        Some(DaemonAction::Install {
            args,
            print,
            format,
        }) => match service(&args) {
            Ok(service) => super::service::install(service, format, print),
            Err(exit) => exit,
        },
        Some(DaemonAction::Uninstall { state_dir, format }) => {
            let state_dir = std::path::absolute(state_dir.unwrap_or_else(default_state_dir));
            match (state_dir, std::env::current_exe()) {
                (Ok(state_dir), Ok(executable)) => super::service::uninstall(
                    super::service::Service {
                        executable,
                        flags: Vec::new(),
                        state_dir,
                    },
                    format,
                ),
                (Err(e), _) | (_, Err(e)) => usage_error(&format!("cannot resolve: {e}"), &[]),
            }
        }
    }
}

/// The login service that runs the daemon with `args`, checked as the daemon checks them.
fn service(args: &DaemonArgs) -> Result<super::service::Service, Exit> {
    args.check()?;
    let state_dir = args.state_dir()?;
    let executable = std::env::current_exe()
        .map_err(|e| usage_error(&format!("cannot find this executable: {e}"), &[]))?;
    Ok(super::service::Service {
        executable,
        flags: args.flags(&state_dir)?,
        state_dir,
    })
}

impl DaemonArgs {
    /// Checks what `agentteam daemon` refuses before it starts (a running daemon and a login
    /// service alike): positive times, a loopback listener, the server URL rule, and the proxy
    /// and CA flags (no credential in a URL); how to reach the remote server.
    fn check(&self) -> Result<crate::client::http::Remote, Exit> {
        if self.token_ttl_secs == 0 || self.rotation_tick_ms == 0 {
            return Err(usage_error(
                "`--token-ttl-secs` and `--rotation-tick-ms` must be positive",
                &[],
            ));
        }
        if !(100..=120_000).contains(&self.server_timeout_ms) {
            return Err(usage_error(
                "`--server-timeout-ms` must be between 100 and 120000",
                &[],
            ));
        }
        if !self.listen.ip().is_loopback() {
            return Err(usage_error(
                &format!(
                    "`--listen`: `{}` is not a loopback address; the daemon serves this machine only",
                    self.listen
                ),
                &[],
            ));
        }
        if let Some(url) = &self.server_url
            && let Err(e) = crate::client::http::server_url(url)
        {
            return Err(usage_error(&format!("`--server-url`: {e}"), &[]));
        }
        crate::client::http::Remote::from_flags(
            ("--server-proxy", self.server_proxy.as_deref()),
            self.server_proxy_credential_file.as_deref(),
            ("--server-ca-file", self.server_ca_file.as_deref()),
        )
        .map_err(|refusal| usage_error(&refusal, &[]))
    }

    /// The state directory, absolute.
    fn state_dir(&self) -> Result<PathBuf, Exit> {
        std::path::absolute(self.state_dir.clone().unwrap_or_else(default_state_dir))
            .map_err(|e| usage_error(&format!("cannot resolve the state directory: {e}"), &[]))
    }

    /// These flags as `agentteam daemon` takes them again (a service, a restart): the state
    /// directory and every path absolute, and only what differs from the defaults. None of them
    /// holds a secret: credentials come from the files they name.
    fn flags(&self, state_dir: &Path) -> Result<Vec<String>, Exit> {
        let absolute = |path: &Path| {
            std::path::absolute(path)
                .map(|p| p.display().to_string())
                .map_err(|e| usage_error(&format!("cannot resolve `{}`: {e}", path.display()), &[]))
        };
        let mut flags = Vec::new();
        if self.listen
            != DEFAULT_LISTEN
                .parse::<SocketAddr>()
                .expect("the default parses")
        {
            flags.extend(["--listen".to_string(), self.listen.to_string()]);
        }
        flags.extend(["--state-dir".to_string(), state_dir.display().to_string()]);
        for (flag, path) in [
            ("--runtime-dir", &self.runtime_dir),
            ("--server-ca-file", &self.server_ca_file),
            ("--operator-token-file", &self.operator_token_file),
            (
                "--server-proxy-credential-file",
                &self.server_proxy_credential_file,
            ),
        ] {
            if let Some(path) = path {
                flags.extend([flag.to_string(), absolute(path)?]);
            }
        }
        for (flag, value) in [
            ("--server-url", &self.server_url),
            ("--server-proxy", &self.server_proxy),
        ] {
            if let Some(value) = value {
                flags.extend([flag.to_string(), value.clone()]);
            }
        }
        // The hop is the embedded server's: with `--server-url` it means nothing.
        if self.embedded_hop == crate::daemon::EmbeddedHop::Tcp && self.server_url.is_none() {
            flags.extend(["--embedded-hop".to_string(), "tcp".to_string()]);
        }
        if self.server_timeout_ms != crate::client::CALL_TIMEOUT.as_millis() as u64 {
            flags.extend([
                "--server-timeout-ms".to_string(),
                self.server_timeout_ms.to_string(),
            ]);
        }
        if self.token_ttl_secs != crate::daemon::DEFAULT_TOKEN_TTL.as_secs() {
            flags.extend([
                "--token-ttl-secs".to_string(),
                self.token_ttl_secs.to_string(),
            ]);
        }
        if self.rotation_tick_ms != crate::daemon::DEFAULT_ROTATION_TICK.as_millis() as u64 {
            flags.extend([
                "--rotation-tick-ms".to_string(),
                self.rotation_tick_ms.to_string(),
            ]);
        }
        Ok(flags)
    }
}

/// `--listen`'s default: loopback, any free port.
const DEFAULT_LISTEN: &str = "127.0.0.1:0";

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
    /// The runtime's driver: it points the runtime's MCP client at the daemon, hands its model
    /// the AgentTeam guidance (and the memory skill where the runtime loads skills), and
    /// pre-approves `agentteam exec` for its shell tool where it can, all by the runtime's own
    /// per-launch flags or variables; `auto` goes by the program's name, then the agent's
    /// runtime family; `generic` sets the environment only
    #[arg(long, value_enum, default_value = "auto")]
    runtime: crate::daemon::runtime::driver::Family,
    /// Under Codex: let its sandbox reach the network (`sandbox_workspace_write.network_access`),
    /// which `agentteam exec` needs to reach the daemon; every sandboxed command gets network
    /// access with it
    #[arg(long)]
    sandbox_network: bool,
    /// The Codex thread id of the runtime's primary thread, when known: an MCP `tools/call` whose
    /// Codex turn metadata names another thread may then only call read-only tools
    #[arg(long, value_name = "THREAD_ID")]
    primary_thread: Option<String>,
    /// Relay this command's stdin to the runtime (otherwise it reads an empty one); a Codex
    /// `app-server`, which takes its protocol on stdin, always gets it
    #[arg(long)]
    stdin: bool,
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
    let state_dir = match args.state_dir() {
        Ok(dir) => dir,
        Err(exit) => return exit,
    };
    // What a restart runs again.
    let relaunch = match args.flags(&state_dir) {
        Ok(flags) => flags,
        Err(exit) => return exit,
    };
    let runtime_dir = match std::path::absolute(
        args.runtime_dir
            .clone()
            .unwrap_or_else(|| default_runtime_dir(&state_dir)),
    ) {
        Ok(dir) => dir,
        Err(e) => return usage_error(&format!("cannot resolve the runtime directory: {e}"), &[]),
    };
    let remote = match args.check() {
        Ok(remote) => remote,
        Err(exit) => return exit,
    };
    let telemetry = match crate::telemetry::Settings::from_env() {
        Ok(settings) => settings,
        Err(why) => return usage_error(&why, &[]),
    };
    let config = DaemonConfig {
        telemetry,
        listen: args.listen,
        state_dir,
        runtime_dir,
        server_url: args.server_url,
        operator_token_file: args.operator_token_file,
        embedded_hop: args.embedded_hop,
        server_timeout: Duration::from_millis(args.server_timeout_ms),
        remote,
        runtime: RuntimeConfig {
            ttl: Duration::from_secs(args.token_ttl_secs),
            tick: Duration::from_millis(args.rotation_tick_ms),
        },
        relaunch,
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

/// The daemon's base URL and admin token from its state directory (a daemon started first when
/// none runs, unless `--no-start`).
pub fn connect(state: &StateDir) -> Result<(String, String), Exit> {
    let daemon = super::local::daemon(&state.state_dir, state.no_start)?;
    Ok((
        daemon.base_url,
        super::local::admin_token(&daemon.state_dir)?,
    ))
}

/// One admin API call; the success `data` or the printed refusal and its exit status.
pub fn admin_call(
    state: &StateDir,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, Exit> {
    let (base_url, token) = connect(state)?;
    http::call(
        Peer::Daemon,
        method,
        &format!("{base_url}{path}"),
        &token,
        body.as_ref(),
    )
}

/// One admin API `GET` whose success is text (the metrics), or the printed refusal.
pub fn admin_text(state: &StateDir, path: &str) -> Result<String, Exit> {
    let (base_url, token) = connect(state)?;
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
        sandbox_network,
        stdin,
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
        sandbox_network,
        stdin,
        resume: None,
    };
    if let Err(message) = options.check() {
        return usage_error(&message, &[]);
    }
    let (base_url, token) = match connect(&state) {
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
        relay(response, &base_url, &token).await
    })
}

/// Relays the launch's frames to this process's stdout and stderr until the runtime exits; a
/// runtime that reads stdin gets this process's, streamed to the daemon beside.
async fn relay(mut response: reqwest::Response, base_url: &str, token: &str) -> Exit {
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
                Some(Output::StdinRun(run)) => stream_stdin(base_url, token, &run),
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

/// Streams this process's stdin to run `run`'s stdin (`POST /api/admin/runs/{runId}/stdin`) in the
/// background; its end is the runtime's end of file. A refusal or a lost connection is said on
/// stderr: the runtime then reads end of file.
fn stream_stdin(base_url: &str, token: &str, run: &str) {
    let request = crate::client::http::loopback_builder()
        .build()
        .expect("a plain HTTP client builds")
        .post(format!("{base_url}/api/admin/runs/{run}/stdin"))
        .bearer_auth(token)
        .body(reqwest::Body::wrap_stream(
            tokio_util::io::ReaderStream::new(tokio::io::stdin()),
        ));
    tokio::spawn(async move {
        match request.send().await {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => eprintln!(
                "agentteam: the daemon refused this command's stdin (HTTP {}): the runtime reads an empty one",
                response.status().as_u16()
            ),
            Err(_) => eprintln!(
                "agentteam: lost the connection that streams this command's stdin to the runtime"
            ),
        }
    });
}

/// Exits this process with the runtime's exit code (clamped to 0..=255).
fn exit_with(code: i32) -> Exit {
    let _ = std::io::stdout().flush();
    std::process::exit(code.clamp(0, 255));
}
