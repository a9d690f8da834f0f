//! The `agentteam` command line: a clap front over the library.
//!
//! Data goes to stdout, messages to stderr. Exit status: 0 success (and a closed stdout pipe),
//! 1 the action ran and reported a failure, 2 usage, configuration or transport error.

mod admin;
mod agent;
mod audit;
mod catalog;
mod completion;
mod daemon;
mod exec;
mod http;
mod kb;
mod local;
mod mcp;
mod operator;
mod output;
mod reader;
mod runtime_url;
mod server;
mod service;
mod status;
mod token;
pub(crate) mod transport;

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

/// A person's decision on an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Decision {
    Approve,
    Reject,
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
    /// Print the tool-use guidance for agents, as `agentteam run` hands it to a runtime: the MCP
    /// tools, the memory skill, the Exec index, then the extensions pinned for this launch
    Prompt {
        /// Name tools as this runtime shows them to its model
        #[arg(long, value_enum, default_value = "raw")]
        runtime: PromptRuntime,
    },
    /// Set up a server as its operator: workspaces, humans, agents, devices, channels, threads, teams, messages
    Admin {
        /// Print the server's answer as JSON, for a program
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Run the desktop daemon (with the embedded server unless `--server-url` is given), or
    /// stop, restart, install or uninstall it
    Daemon(daemon::DaemonCommand),
    /// Show what the local daemon runs, and the extension definitions it pinned
    Status {
        #[command(flatten)]
        state: daemon::StateDir,
        /// Print the daemon's answer as JSON
        #[arg(long)]
        json: bool,
        /// Print the daemon's Prometheus metrics (OpenMetrics text) instead
        #[arg(long, conflicts_with = "json")]
        metrics: bool,
        /// Name agents by their ids rather than their handles
        #[arg(long)]
        ids: bool,
    },
    /// List the extension definitions the local daemon pinned and the ones it left out
    Extensions {
        #[command(flatten)]
        state: daemon::StateDir,
        /// Fetch and verify the definitions again first (new launches use them)
        #[arg(long)]
        reload: bool,
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
    /// Read a conversation as your person: `#general`, `#general/<thread title>`, `@builder`, or
    /// an exact `channel:…`, `dm:…`, `thread:…`; marks it read
    Read {
        #[command(flatten)]
        state: daemon::StateDir,
        /// The conversation (with --list: a channel, to list its threads)
        #[arg(required_unless_present = "list")]
        target: Option<String>,
        /// List your conversations with their unread counts (or a channel's threads)
        #[arg(long)]
        list: bool,
        /// Messages to show (default 20, at most 100)
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100), conflicts_with = "list")]
        limit: Option<u8>,
        /// Show the messages around this one (its id)
        #[arg(long, value_name = "MESSAGE_ID", conflicts_with = "list")]
        around: Option<String>,
        /// Then show each new message as it is posted, until interrupted
        #[arg(long, conflicts_with_all = ["list", "around"])]
        follow: bool,
        /// Print the page as JSON
        #[arg(long)]
        json: bool,
    },
    /// Post a message as your person (a thread's target replies in the thread)
    Post {
        #[command(flatten)]
        state: daemon::StateDir,
        /// Where: `#general`, `#general/<thread title>`, `@builder`, or an exact target
        target: String,
        /// The message text
        text: String,
        /// Then follow the agents it wakes until each answered (printing the reply) or ended:
        /// exit 0 when every one answered
        #[arg(long)]
        wait: bool,
        /// Print the posted message as JSON (with --wait, one JSON object per line)
        #[arg(long)]
        json: bool,
    },
    /// List the approvals your agents asked you for (pending ones unless --all)
    Approvals {
        #[command(flatten)]
        state: daemon::StateDir,
        /// Every approval, decided ones too
        #[arg(long)]
        all: bool,
        /// Print the approvals as JSON
        #[arg(long)]
        json: bool,
    },
    /// Ask again for a message to an agent that was interrupted, failed or expired: it waits
    /// again for the daemon that hosts the agent
    Retry {
        #[command(flatten)]
        state: daemon::StateDir,
        /// The delivery (its id, from `agentteam read --json` or the feed)
        delivery: String,
        /// Print the delivery as JSON
        #[arg(long)]
        json: bool,
    },
    /// Approve or reject an approval one of your agents asked for
    Decide {
        #[command(flatten)]
        state: daemon::StateDir,
        /// The approval (its id, from `agentteam approvals`)
        approval: String,
        #[arg(value_enum)]
        decision: Decision,
        /// Why, shown to the agent with the decision
        #[arg(long)]
        comment: Option<String>,
        /// Print the decided approval as JSON
        #[arg(long)]
        json: bool,
    },
    /// Open the console in your browser, signed in as your person (a one-time login page)
    ///
    /// The daemon writes an owner-only page into its state directory that signs one browser in,
    /// once, within two minutes; this opens it with `$BROWSER`, else `xdg-open` (`open` on
    /// macOS), and prints its path to open by hand. No secret is put in any command's arguments.
    Open {
        #[command(flatten)]
        state: daemon::StateDir,
        /// Only print where the console and its login page are
        #[arg(long)]
        no_browser: bool,
        /// Print them as JSON
        #[arg(long)]
        json: bool,
    },
    /// Manage the local daemon's agent profiles
    Agent {
        #[command(flatten)]
        state: daemon::StateDir,
        #[command(subcommand)]
        command: agent::AgentCommand,
    },
    /// List the runtimes the local daemon runs now, with the turn each answers
    Runs {
        #[command(flatten)]
        state: daemon::StateDir,
        /// Print the runs as JSON
        #[arg(long)]
        json: bool,
        /// Name agents by their ids rather than their handles
        #[arg(long)]
        ids: bool,
    },
    /// Bind a run to the Human-initiated turn it answers now (`kb_search` and `kb_fetch` use it)
    Turn {
        #[command(flatten)]
        state: daemon::StateDir,
        /// The run (its id, from `agentteam runs`)
        run: String,
        /// The turn's target: `channel:<id>`, `dm:<id>`, `thread:<id>` or `task:<id>`
        #[arg(
            long,
            value_name = "TARGET",
            requires = "message",
            required_unless_present = "clear"
        )]
        target: Option<String>,
        /// The id of the human message that started the turn
        #[arg(long, value_name = "MESSAGE_ID", requires = "target")]
        message: Option<String>,
        /// Unbind the run's turn instead
        #[arg(long, conflicts_with_all = ["target", "message"])]
        clear: bool,
        /// Print the daemon's answer as JSON
        #[arg(long)]
        json: bool,
    },
    /// Launch a command as an agent runtime under the local daemon, relaying its output
    Run {
        #[command(flatten)]
        state: daemon::StateDir,
        #[command(flatten)]
        args: daemon::RunArgs,
    },
    /// Run the reference AgentTeam Server (the product owner behind the bridge)
    Server(server::ServerArgs),
    /// Print the line that registers shell completion (domains and actions of `exec` included):
    /// add it to the shell's startup file, e.g. `agentteam completions bash >> ~/.bashrc`
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: completion::Shell,
    },
    /// The MCP pieces a runtime's own client runs: the header helper and the stdio bridge
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// Local, read-only diagnostics of what AgentTeam costs an agent's context
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Print the man page (roff), e.g. `agentteam man | man -l -`; `agentteam man exec` prints
    /// the page of one command
    Man {
        /// The command (and subcommand) whose page to print
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// What AgentTeam costs each runtime's requests, from the runtimes' own session records
    ///
    /// Reads the session records of Claude Code, Codex, OpenCode (its SQLite database, opened
    /// read-only), Gemini CLI, Kimi Code and Copilot CLI where each keeps them (their `*_HOME`
    /// variables are honoured), and writes nothing. It names tools, sizes and ids only, never a
    /// call's arguments or a result's text.
    ///
    /// Figures:
    ///   FIXED: what AgentTeam adds to every request (its MCP tools in the runtime's wire shape,
    ///     the MCP instructions where the runtime shows them, the launch's guidance and the skill
    ///     line), times the session's requests; from the request Claude Code recorded
    ///     (transcript), else rebuilt from this binary's catalog (rebuilt). SHARE: FIXED over all
    ///     input tokens of the session.
    ///   INPUT, OUTPUT, CACHE READ, CACHE WRITE: recorded by the runtime, one per model request
    ///     (repeated records of one request counted once; INPUT is the uncached part).
    ///   CALLS: AgentTeam calls, MCP tools and `agentteam exec` through the shell tool.
    ///   RESULT: a result's tokens. CARRIED: the result's tokens times the later requests that
    ///     re-read it, until a compaction or the session's end.
    /// Tokens are counted offline with o200k_base, from the text as sent. FIXED counts each tool
    /// definition as its JSON text, which no provider bills as such (each renders a definition
    /// its own way): an estimate for every provider, OpenAI's too. RESULT is the text's own count
    /// for OpenAI models and an estimate for others. MEDIAN ERROR, per runtime: how far its
    /// counts are from the growth of recorded input each result caused.
    #[command(verbatim_doc_comment)]
    Analyze {
        /// Only these runtimes (repeatable)
        #[arg(long, value_enum)]
        runtime: Vec<crate::token::RuntimeArg>,
        /// Only the session whose id starts with this
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Only sessions active at or after this time (RFC 3339, or a date: 2026-12-01)
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only sessions active at or before this time (RFC 3339, or a date)
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Only sessions whose working directory (or record file) is under this path
        #[arg(long, value_name = "DIR")]
        path: Option<std::path::PathBuf>,
        /// The recorded usage totals only: no calls, no tokenizer
        #[arg(long)]
        totals: bool,
        /// How many of the heaviest sessions and most expensive calls to list in the table
        #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        top: u16,
        /// Print the report as JSON (a versioned envelope)
        #[arg(long)]
        json: bool,
    },
}

/// Parses the process arguments and runs the command.
pub fn main() -> ExitCode {
    completion::complete_if_asked();
    // Run as `agentteam-exec` (a launch's pre-approved name): `agentteam exec`, its own rules.
    let mut argv = std::env::args_os();
    if argv
        .next()
        .as_deref()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .is_some_and(|name| name == crate::contract::preapproval::EXEC_ALIAS)
    {
        let args: Vec<String> = argv.map(|a| a.to_string_lossy().into_owned()).collect();
        return exec::run_preapproved(&args).into();
    }
    let cli = Cli::parse();
    let exit = match cli.command {
        Command::Exec { args } => exec::run(&args),
        Command::Openapi => output::print(crate::contract::catalog::OPENAPI),
        Command::Catalog { json } => catalog::run(json),
        Command::Prompt { runtime } => {
            let extensions = catalog::launch_extensions();
            let definitions: Vec<&crate::contract::extension::Definition> =
                extensions.iter().map(|e| &e.definition).collect();
            // For pasting into a launch of the generic driver, which links no other name.
            let reader = crate::daemon::runtime::guidance::Reader {
                exec_alias: None,
                ..runtime.family().reader()
            };
            output::print(
                &crate::daemon::runtime::guidance::compile(reader, &definitions, false).text,
            )
        }
        Command::Admin { json, command } => admin::run(command, json),
        Command::Mcp { command } => mcp::run(command),
        Command::Daemon(command) => {
            // Before any thread exists: a daemon started inside another runtime drops that
            // runtime's credentials from its own environment.
            let scrubbed = crate::daemon::runtime::env::scrub_own_env();
            daemon::daemon_command(command, scrubbed)
        }
        Command::Agent { state, command } => agent::run(state, command),
        Command::Read {
            state,
            target,
            list: true,
            json,
            ..
        } => reader::list(state, target.as_deref(), json),
        Command::Read {
            state,
            target,
            limit,
            follow: true,
            json,
            ..
        } => reader::follow(state, target.as_deref().unwrap_or_default(), limit, json),
        Command::Read {
            state,
            target,
            limit,
            around,
            json,
            ..
        } => reader::read(
            state,
            target.as_deref().unwrap_or_default(),
            limit,
            around,
            json,
        ),
        Command::Post {
            state,
            target,
            text,
            wait,
            json,
        } => reader::post(state, &target, &text, wait, json),
        Command::Approvals { state, all, json } => reader::approvals(state, all, json),
        Command::Open {
            state,
            no_browser,
            json,
        } => reader::open(state, no_browser, json),
        Command::Retry {
            state,
            delivery,
            json,
        } => reader::retry(state, &delivery, json),
        Command::Decide {
            state,
            approval,
            decision,
            comment,
            json,
        } => reader::decide(
            state,
            &approval,
            decision == Decision::Approve,
            comment,
            json,
        ),
        Command::Status {
            state,
            metrics: true,
            ..
        } => status::metrics(state),
        Command::Status {
            state, json, ids, ..
        } => status::status(state, json, ids),
        Command::Extensions {
            state,
            reload,
            json,
        } => status::extensions(state, reload, json),
        Command::Runs { state, json, ids } => status::runs(state, json, ids),
        Command::Turn {
            state,
            run,
            target,
            message,
            clear: _,
            json,
        } => status::turn(state, &run, target.zip(message), json),
        Command::Run { state, args } => daemon::run_runtime(state, args),
        Command::Server(args) => server::run(args),
        Command::Completions { shell } => completion::registration(shell),
        Command::Man { command } => completion::man(&command),
        Command::Token {
            command:
                TokenCommand::Analyze {
                    runtime,
                    session,
                    since,
                    until,
                    path,
                    totals,
                    top,
                    json,
                },
        } => {
            let (since, until) = match (
                since
                    .as_deref()
                    .map(|t| token::instant(t, false))
                    .transpose(),
                until
                    .as_deref()
                    .map(|t| token::instant(t, true))
                    .transpose(),
            ) {
                (Ok(since), Ok(until)) => (since, until),
                (Err(e), _) | (_, Err(e)) => return output::usage_error(&e, &[]).into(),
            };
            let options = crate::token::Options {
                runtimes: crate::token::Options::with_runtimes(&runtime),
                session,
                since,
                until,
                // Compared by components: made absolute first (`.` is the working directory).
                path: path.map(|p| std::path::absolute(&p).unwrap_or(p)),
                totals_only: totals,
                top: usize::from(top),
            };
            token::run(&options, json)
        }
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

/// The runtimes whose guidance `agentteam prompt --runtime` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PromptRuntime {
    /// Raw tool names, as `tools/list` serves them
    Raw,
    /// Claude Code: `mcp__agentteam__<tool>`, its `Bash` tool
    Claude,
    /// Codex: `mcp__agentteam__<tool>`, its `exec_command` tool
    Codex,
    /// OpenCode: `mcp_agentteam_<tool>`, its `bash` tool
    Opencode,
    /// Kimi Code: `mcp__agentteam__<tool>`, its `Bash` tool
    Kimi,
    /// Copilot CLI: `agentteam-<tool>`, its `bash` tool
    Copilot,
    /// Gemini CLI: `mcp_agentteam_<tool>`, its `run_shell_command` tool
    Gemini,
}

impl PromptRuntime {
    fn family(self) -> crate::daemon::runtime::driver::Family {
        use crate::daemon::runtime::driver::Family;
        match self {
            PromptRuntime::Raw => Family::Generic,
            PromptRuntime::Claude => Family::Claude,
            PromptRuntime::Codex => Family::Codex,
            PromptRuntime::Opencode => Family::Opencode,
            PromptRuntime::Kimi => Family::Kimi,
            PromptRuntime::Copilot => Family::Copilot,
            PromptRuntime::Gemini => Family::Gemini,
        }
    }
}
