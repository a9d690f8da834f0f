//! The `agentteam` command line: a clap front over the library.
//!
//! Data goes to stdout, messages to stderr. Exit status: 0 success (and a closed stdout pipe),
//! 1 the action ran and reported a failure, 2 usage, configuration or transport error.

mod admin;
mod agent;
mod catalog;
mod daemon;
mod exec;
mod http;
mod output;
mod runtime_url;
mod server;
mod transport;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use output::Exit;

/// AgentTeam: the outbound tool bridge between local agent runtimes and their team's workspace.
#[derive(Debug, Parser)]
#[command(name = "agentteam", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a built-in action from inside a daemon-launched runtime (`agentteam exec --help`)
    #[command(disable_help_flag = true)]
    Exec {
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Print the OpenAPI 3.1 document of the Exec route family
    Openapi,
    /// List every built-in action with its risk and result policy
    Catalog {
        /// Print the catalog as JSON
        #[arg(long)]
        json: bool,
    },
    /// Print the tool-use guidance for agents: the Exec summary and the MCP tool guidance
    Prompt {
        /// Show MCP tool names as this runtime shows them to its model
        #[arg(long, value_enum, default_value = "raw")]
        runtime: PromptRuntime,
    },
    /// Set up a server as its operator: workspaces, humans, agents, devices, channels, threads, teams, messages
    Admin {
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Run the desktop daemon (with the embedded server unless `--server-url` is given)
    Daemon(daemon::DaemonArgs),
    /// Manage the local daemon's agent profiles
    Agent {
        #[command(flatten)]
        state: daemon::StateDir,
        #[command(subcommand)]
        command: agent::AgentCommand,
    },
    /// Launch a command as an agent runtime under the local daemon, relaying its output
    Run {
        #[command(flatten)]
        state: daemon::StateDir,
        #[command(flatten)]
        args: daemon::RunArgs,
    },
    /// Run the reference AgentTeam Server (the product owner behind the bridge)
    Server {
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
    },
}

/// Parses the process arguments and runs the command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let exit = match cli.command {
        Command::Exec { args } => exec::run(&args),
        Command::Openapi => output::print(crate::contract::catalog::OPENAPI),
        Command::Catalog { json } => catalog::run(json),
        Command::Prompt { runtime } => output::print(&format!(
            "{}\n{}",
            crate::contract::catalog::PROMPT_SUMMARY,
            crate::contract::skill::skill_doc(&runtime.naming())
        )),
        Command::Admin { command } => admin::run(command),
        Command::Daemon(args) => {
            // Before any thread exists: a daemon started inside another runtime drops that
            // runtime's credentials from its own environment.
            let scrubbed = crate::daemon::runtime::env::scrub_own_env();
            daemon::run_daemon(args, scrubbed)
        }
        Command::Agent { state, command } => agent::run(state, command),
        Command::Run { state, args } => daemon::run_runtime(state, args),
        Command::Server {
            listen,
            database,
            operator_token_file,
        } => server::run(listen, database, operator_token_file),
    };
    exit.into()
}

/// Structured logs to stderr; `RUST_LOG` overrides the default `agentteam=info`.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("agentteam=info"));
    // Colours only for a person at a terminal; a log file gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

/// Prints an error and its `caused by:` chain to stderr.
fn report(error: &dyn std::error::Error) -> Exit {
    eprintln!("error: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        eprintln!("  caused by: {cause}");
        source = cause.source();
    }
    Exit::Usage
}

/// The runtime naming conventions `agentteam prompt --runtime` knows.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PromptRuntime {
    /// Raw tool names, as `tools/list` serves them
    Raw,
    /// Claude Code and Codex: `mcp__agentteam__<tool>`
    Claude,
    /// OpenCode: `mcp_agentteam_<tool>`
    Opencode,
}

impl PromptRuntime {
    fn naming(self) -> crate::contract::skill::RuntimeNaming {
        use crate::contract::skill::RuntimeNaming;
        match self {
            PromptRuntime::Raw => RuntimeNaming::Raw,
            PromptRuntime::Claude => RuntimeNaming::Claude,
            PromptRuntime::Opencode => RuntimeNaming::Opencode,
        }
    }
}
