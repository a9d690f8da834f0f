//! `agentteam agent add|list|get|update|remove|reload`: the human side of the local agent
//! profiles, through the daemon's admin API (the same store `agentteam exec agent …` uses).
//!
//! Secrets never come from a flag (argv is visible to every process of the machine): the API
//! key, the custom headers and a base URL carrying user info, a query or a fragment are read from
//! a file or from stdin (`-`). Output is the safe projection: secrets are never printed.

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value, json};

use super::daemon::{StateDir, admin_call};
use super::output::{Exit, count, print, table, usage_error};

/// The longest secret file read (an API key, a header file, a base URL).
const MAX_SECRET_FILE: u64 = 64 * 1024;

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Register an agent on the server (a member of your general channel, its display name the
    /// handle until the agent changes it with `profile update`) and in this daemon
    Add {
        /// The agent's handle (`^[a-z][a-z0-9-]{0,31}$`)
        handle: String,
        #[command(flatten)]
        settings: Settings,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// List this daemon's agents
    List {
        /// Print JSON (every page's profiles)
        #[arg(long)]
        json: bool,
        /// Only agents of this runtime family
        #[arg(long, value_enum)]
        runtime_family: Option<RuntimeFamily>,
        /// Only agents of this provider
        #[arg(long)]
        provider: Option<String>,
    },
    /// Show one agent (by id or handle)
    Get {
        agent: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Change an agent's settings (by id or handle)
    Update {
        agent: String,
        /// A new handle (renamed on the server too)
        #[arg(long)]
        handle: Option<String>,
        #[command(flatten)]
        settings: Settings,
        /// Remove a setting
        #[arg(long, value_enum, value_name = "SETTING")]
        clear: Vec<Clear>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Remove an agent's local profile and secrets (by id or handle); it stays on the server
    Remove {
        agent: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Set, show or clear the agent's launch recipe: what this daemon runs when a person's
    /// message wakes the agent (by id or handle)
    ///
    /// `agentteam agent recipe builder -- claude -p` runs Claude Code in the current directory;
    /// the person's message and the target to answer on come on its stdin (for Kimi Code, whose
    /// prompt is only an argument, in an owner-only file its `-p` names). `PATH`, `HOME` and
    /// each variable named with `--env` are copied from this shell now and kept owner-only in
    /// the state directory; only their names are ever shown.
    Recipe {
        agent: String,
        /// The runtime family whose driver wires the launch (default: from the program's name)
        #[arg(long, value_enum, default_value = "auto")]
        runtime: crate::daemon::runtime::driver::Family,
        /// The runtime's working directory (default: the current one)
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Also copy this variable of this shell into the runtime's environment (repeatable)
        #[arg(long = "env", value_name = "NAME")]
        env: Vec<String>,
        /// Let runs of this recipe work in the directory at once (by default a delivered run
        /// waits while another works in it)
        #[arg(long)]
        shared_workdir: bool,
        /// Show the recipe instead of setting it
        #[arg(long, conflicts_with_all = ["clear", "command"])]
        show: bool,
        /// Remove the recipe: deliveries to the agent are no longer started here
        #[arg(long, conflicts_with = "command")]
        clear: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
        /// The program and its arguments
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Pause an agent (or every agent): messages to it wait, and expire in time, instead of
    /// starting its recipe here; its live runs go on
    Pause {
        /// The agent (id or handle)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        agent: Option<String>,
        /// Every agent
        #[arg(long)]
        all: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused agent (or every agent): messages waiting for it start its recipe again
    Resume {
        /// The agent (id or handle)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        agent: Option<String>,
        /// Every agent, each paused by name too
        #[arg(long)]
        all: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Show who besides you may wake an agent you own (whose messages start its runs), or
    /// change it: `agentteam agent wakers builder --allow bob`
    Wakers {
        /// The agent (id or handle)
        agent: String,
        /// Let this person of the workspace wake the agent (a handle; repeatable)
        #[arg(long, value_name = "HANDLE")]
        allow: Vec<String>,
        /// No longer let this person wake the agent (a handle; repeatable)
        #[arg(long, value_name = "HANDLE")]
        disallow: Vec<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Reload the profiles from disk and drop those the server no longer knows
    Reload {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}

/// The settings `add` and `update` take.
#[derive(Debug, Args)]
pub struct Settings {
    /// The runtime the agent runs in
    #[arg(long, value_enum)]
    runtime_family: Option<RuntimeFamily>,
    /// The model provider, e.g. `anthropic`
    #[arg(long)]
    provider: Option<String>,
    /// The model
    #[arg(long)]
    model: Option<String>,
    /// The provider's base URL, without user info, query or fragment (use `--base-url-file` for one with them)
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// A file (or `-` for stdin) holding a base URL that carries user info, a query or a fragment
    #[arg(long, value_name = "PATH|-", conflicts_with = "base_url")]
    base_url_file: Option<PathBuf>,
    /// A file (or `-` for stdin) holding the API key
    #[arg(long, value_name = "PATH|-")]
    api_key_file: Option<PathBuf>,
    /// A file (or `-` for stdin) of custom headers, one `Name: value` per line
    #[arg(long, value_name = "PATH|-")]
    header_file: Option<PathBuf>,
    /// A path the runtime may use (repeat for each; replaces the filesystem policy)
    #[arg(long, value_name = "PATH")]
    allow_path: Vec<PathBuf>,
    /// A knowledge source the agent prefers (repeat for each; a preference, not a grant)
    #[arg(long, value_name = "ID")]
    knowledge_source: Vec<String>,
}

/// `claude`, `codex`, `opencode` or `generic`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RuntimeFamily {
    Claude,
    Codex,
    Opencode,
    Generic,
}

impl RuntimeFamily {
    fn as_str(self) -> &'static str {
        match self {
            RuntimeFamily::Claude => "claude",
            RuntimeFamily::Codex => "codex",
            RuntimeFamily::Opencode => "opencode",
            RuntimeFamily::Generic => "generic",
        }
    }
}

/// A setting `update --clear` removes.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Clear {
    Provider,
    Model,
    BaseUrl,
    KnowledgeSources,
    ApiKey,
    Headers,
    AllowedPaths,
}

pub fn run(state: StateDir, command: AgentCommand) -> Exit {
    // Each command's answer, whether it was asked for as JSON, and its text for a person.
    let (result, json, for_person): (_, bool, fn(&Value) -> String) = match command {
        AgentCommand::Add {
            handle,
            settings,
            json,
        } => (
            change(&state, None, settings, &[], |agent| {
                agent.insert("handle".into(), json!(handle));
            }),
            json,
            |data| describe(&data["agent"]),
        ),
        AgentCommand::Update {
            agent,
            handle,
            settings,
            clear,
            json,
        } => (
            change(&state, Some(&agent), settings, &clear, |change| {
                if let Some(handle) = handle {
                    change.insert("handle".into(), json!(handle));
                }
            }),
            json,
            |data| describe(&data["agent"]),
        ),
        AgentCommand::List {
            json,
            runtime_family,
            provider,
        } => return list(&state, json, runtime_family, provider),
        AgentCommand::Get { agent, json } => (
            admin_call(
                &state,
                reqwest::Method::GET,
                &format!("/api/admin/agents/{}", path_segment(&agent)),
                None,
            ),
            json,
            |data| describe(&data["agent"]),
        ),
        AgentCommand::Remove { agent, json } => (
            admin_call(
                &state,
                reqwest::Method::DELETE,
                &format!("/api/admin/agents/{}", path_segment(&agent)),
                None,
            ),
            json,
            |data| {
                format!(
                    "removed the local profile of {} ({}); the agent stays on the server\n",
                    data["removed"]["handle"].as_str().unwrap_or("?"),
                    data["removed"]["id"].as_str().unwrap_or("?"),
                )
            },
        ),
        AgentCommand::Recipe {
            agent,
            runtime,
            workdir,
            env,
            shared_workdir,
            show,
            clear,
            json,
            command,
        } => (
            recipe(
                &state,
                &agent,
                (runtime, workdir, shared_workdir),
                &env,
                (show, clear),
                command,
            ),
            json,
            |data| match data.get("removed") {
                Some(removed) if removed == &json!(true) => "recipe removed\n".to_string(),
                Some(_) => "there was no recipe\n".to_string(),
                None => match &data["recipe"] {
                    Value::Null => "no recipe: a message to this agent starts nothing\n".into(),
                    recipe => format!(
                        "runtime   {}\nworkdir   {}{}\ncommand   {}\nenv       {}\npaused    {}\n",
                        recipe["runtime"].as_str().unwrap_or("auto"),
                        recipe["workdir"].as_str().unwrap_or("?"),
                        if recipe["sharedWorkdir"] == json!(true) {
                            " (shared by its runs)"
                        } else {
                            ""
                        },
                        recipe["argv"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(" "),
                        recipe["envNames"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(" "),
                        if data["paused"] == json!(true) {
                            "yes: its messages wait (`agentteam agent resume`)"
                        } else {
                            "no"
                        },
                    ),
                },
            },
        ),
        AgentCommand::Pause { agent, all, json } => (
            pause(&state, agent.as_deref(), all, true),
            json,
            paused_text,
        ),
        AgentCommand::Resume { agent, all, json } => (
            pause(&state, agent.as_deref(), all, false),
            json,
            paused_text,
        ),
        AgentCommand::Wakers {
            agent,
            allow,
            disallow,
            json,
        } => (wakers(&state, &agent, &allow, &disallow), json, wakers_text),
        AgentCommand::Reload { json } => (
            admin_call(
                &state,
                reqwest::Method::POST,
                "/api/admin/agents/reload",
                Some(json!({})),
            ),
            json,
            |data| {
                let number = |field: &str| data[field].as_u64().unwrap_or(0);
                format!(
                    "loaded {}; removed {} the server no longer knows\n",
                    count(number("loaded"), "profile", "profiles"),
                    count(number("removed"), "profile", "profiles"),
                )
            },
        ),
    };
    match result {
        Ok(data) if json => print(&format!("{data}\n")),
        Ok(data) => print(&for_person(&data)),
        Err(exit) => exit,
    }
}

/// `agent add` (no `agent`) or `agent update AGENT`.
fn change(
    state: &StateDir,
    agent: Option<&str>,
    settings: Settings,
    clear: &[Clear],
    fields: impl FnOnce(&mut Map<String, Value>),
) -> Result<Value, Exit> {
    let Settings {
        runtime_family,
        provider,
        model,
        base_url,
        base_url_file,
        api_key_file,
        header_file,
        allow_path,
        knowledge_source,
    } = settings;
    let stdin_readers = [&base_url_file, &api_key_file, &header_file]
        .iter()
        .filter(|f| f.as_deref() == Some(Path::new("-")))
        .count();
    if stdin_readers > 1 {
        return Err(usage_error(
            "only one setting can be read from stdin (`-`)",
            &[],
        ));
    }
    let mut contract = Map::new();
    fields(&mut contract);
    if let Some(family) = runtime_family {
        contract.insert("runtimeFamily".into(), json!(family.as_str()));
    }
    for (name, value) in [("provider", provider), ("model", model)] {
        if let Some(value) = value {
            contract.insert(name.into(), json!(value));
        }
    }
    if let Some(url) = base_url {
        if url.contains('@') || url.contains('?') || url.contains('#') {
            return Err(usage_error(
                "`--base-url` must not carry user info, a query or a fragment: they are secrets",
                &["put the whole URL in a file and pass `--base-url-file PATH` (or `-` for stdin)".into()],
            ));
        }
        contract.insert("baseUrl".into(), json!(url.trim_end_matches('/')));
    }
    if !knowledge_source.is_empty() {
        contract.insert("knowledgeSourceIds".into(), json!(knowledge_source));
    }
    let mut human = Map::new();
    if let Some(file) = base_url_file {
        human.insert("baseUrl".into(), json!(read_secret(&file)?.trim()));
    }
    if let Some(file) = api_key_file {
        human.insert("apiKey".into(), json!(read_secret(&file)?.trim()));
    }
    if let Some(file) = header_file {
        human.insert("headers".into(), parse_headers(&read_secret(&file)?)?);
    }
    if !allow_path.is_empty() {
        let absolute: Result<Vec<PathBuf>, _> =
            allow_path.iter().map(std::path::absolute).collect();
        let absolute = absolute
            .map_err(|e| usage_error(&format!("cannot resolve an allowed path: {e}"), &[]))?;
        human.insert("allowedPaths".into(), json!(absolute));
    }
    let mut contract_clear = Vec::new();
    let mut human_clear = Vec::new();
    for field in clear {
        match field {
            Clear::Provider => contract_clear.push("provider"),
            Clear::Model => contract_clear.push("model"),
            Clear::BaseUrl => contract_clear.push("baseUrl"),
            Clear::KnowledgeSources => contract_clear.push("knowledgeSourceIds"),
            Clear::ApiKey => human_clear.push("apiKey"),
            Clear::Headers => human_clear.push("headers"),
            Clear::AllowedPaths => human_clear.push("allowedPaths"),
        }
    }
    if !contract_clear.is_empty() {
        contract.insert("clear".into(), json!(contract_clear));
    }
    if !human_clear.is_empty() {
        human.insert("clear".into(), json!(human_clear));
    }
    let body = json!({ "agent": contract, "settings": human });
    match agent {
        None => admin_call(
            state,
            reqwest::Method::POST,
            "/api/admin/agents",
            Some(body),
        ),
        Some(agent) => admin_call(
            state,
            reqwest::Method::PATCH,
            &format!("/api/admin/agents/{}", path_segment(agent)),
            Some(body),
        ),
    }
}

/// Reads a secret from `path` (`-`: stdin), bounded.
fn read_secret(path: &Path) -> Result<String, Exit> {
    let mut text = String::new();
    let read = if path == Path::new("-") {
        std::io::stdin()
            .take(MAX_SECRET_FILE + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_SECRET_FILE + 1).read_to_string(&mut text))
    };
    match read {
        Ok(n) if n as u64 > MAX_SECRET_FILE => Err(usage_error(
            &format!("`{}` is over {MAX_SECRET_FILE} bytes", path.display()),
            &[],
        )),
        Ok(_) => Ok(text),
        Err(e) => Err(usage_error(
            &format!("cannot read `{}`: {e}", path.display()),
            &[],
        )),
    }
}

/// `Name: value` lines (blank lines and `#` comments skipped) as `[[name, value], …]`.
fn parse_headers(text: &str) -> Result<Value, Exit> {
    let mut headers = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(usage_error(
                &format!("header file line {}: expected `Name: value`", number + 1),
                &[],
            ));
        };
        headers.push(json!([name.trim(), value.trim()]));
    }
    Ok(Value::Array(headers))
}

/// Every page of `agent list`, printed as a table or as one JSON array.
fn list(
    state: &StateDir,
    json: bool,
    runtime_family: Option<RuntimeFamily>,
    provider: Option<String>,
) -> Exit {
    let mut query = vec!["limit=100".to_string()];
    if let Some(family) = runtime_family {
        query.push(format!("runtimeFamily={}", family.as_str()));
    }
    if let Some(provider) = provider {
        query.push(format!("provider={}", path_segment(&provider)));
    }
    let mut agents = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut parameters = query.clone();
        if let Some(cursor) = &cursor {
            parameters.push(format!("cursor={cursor}"));
        }
        let page = match admin_call(
            state,
            reqwest::Method::GET,
            &format!("/api/admin/agents?{}", parameters.join("&")),
            None,
        ) {
            Ok(page) => page,
            Err(exit) => return exit,
        };
        agents.extend(page["agents"].as_array().cloned().unwrap_or_default());
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    if json {
        return print(&format!("{}\n", json!({ "agents": agents })));
    }
    if agents.is_empty() {
        return print("no agent is registered here; add one with `agentteam agent add HANDLE`\n");
    }
    let text = |agent: &Value, field: &str| agent[field].as_str().unwrap_or("-").to_string();
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|agent| {
            vec![
                text(agent, "handle"),
                text(agent, "id"),
                text(agent, "runtimeFamily"),
                text(agent, "displayName"),
            ]
        })
        .collect();
    print(&table(&["HANDLE", "ID", "RUNTIME", "DISPLAY NAME"], &rows))
}

/// A profile for a person.
fn describe(agent: &Value) -> String {
    let text = |field: &str| super::output::printable(agent[field].as_str().unwrap_or("-"));
    let headers: Vec<&str> = agent["headerNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    format!(
        "id:                 {}\nhandle:             {}\ndisplay name:       {}\nruntime family:     {}\nprovider:           {}\nmodel:              {}\nbase URL:           {}\nAPI key:            {}\nheaders:            {}\nknowledge sources:  {}\nallowed paths:      {}\nlive sessions:      {}\nrevision:           {}\n",
        text("id"),
        text("handle"),
        text("displayName"),
        text("runtimeFamily"),
        text("provider"),
        text("model"),
        text("baseUrl"),
        if agent["apiKeyConfigured"] == true {
            "configured"
        } else {
            "none"
        },
        if headers.is_empty() {
            "-".to_string()
        } else {
            headers.join(", ")
        },
        agent["knowledgeSourceCount"],
        agent["filesystemPolicy"]["allowedPathCount"],
        agent["liveSessions"],
        agent["revision"],
    )
}

/// `text` safe as one URL path segment or query value.
fn path_segment(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `agent wakers AGENT [--allow H]… [--disallow H]…`: who besides its owner may wake the agent
/// after the change, as the server's human API answers.
fn wakers(
    state: &StateDir,
    agent: &str,
    allow: &[String],
    disallow: &[String],
) -> Result<Value, Exit> {
    let shown = admin_call(
        state,
        reqwest::Method::GET,
        &format!("/api/admin/agents/{}", path_segment(agent)),
        None,
    )?;
    let agent_id = shown["agent"]["id"].clone();
    let (action, input) = if allow.is_empty() && disallow.is_empty() {
        ("agent_wakers_list", json!({ "agentId": agent_id }))
    } else {
        (
            "agent_wakers_set",
            json!({ "agentId": agent_id, "allow": allow, "disallow": disallow }),
        )
    };
    admin_call(
        state,
        reqwest::Method::POST,
        &format!("/api/admin/human/{action}"),
        Some(input),
    )
}

/// Who may wake an agent, for a person.
fn wakers_text(data: &Value) -> String {
    let handles: Vec<&str> = data["wakers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["handle"].as_str())
        .collect();
    if handles.is_empty() {
        "only you, its owner, wake this agent (`--allow HANDLE` lets another person)\n".into()
    } else {
        format!(
            "you, its owner, and {} wake this agent\n",
            handles.join(", ")
        )
    }
}

/// `agent pause|resume AGENT|--all`: what is paused after it.
fn pause(state: &StateDir, agent: Option<&str>, all: bool, hold: bool) -> Result<Value, Exit> {
    let agent = if all { None } else { agent };
    admin_call(
        state,
        reqwest::Method::POST,
        "/api/admin/deliveries/pause",
        Some(json!({ "agent": agent, "paused": hold })),
    )
}

/// What is paused, for a person.
fn paused_text(data: &Value) -> String {
    let handles: Vec<&str> = data["paused"]["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["handle"].as_str())
        .collect();
    if data["paused"]["all"] == json!(true) {
        "every agent is paused: messages to them wait (`agentteam agent resume --all`)\n".into()
    } else if handles.is_empty() {
        "no agent is paused\n".into()
    } else {
        format!(
            "paused: {} (their messages wait; `agentteam agent resume AGENT`)\n",
            handles.join(", ")
        )
    }
}

/// `agent recipe AGENT [--show | --clear | -- COMMAND…]`.
fn recipe(
    state: &StateDir,
    agent: &str,
    (runtime, workdir, shared_workdir): (
        crate::daemon::runtime::driver::Family,
        Option<PathBuf>,
        bool,
    ),
    names: &[String],
    (show, clear): (bool, bool),
    command: Vec<String>,
) -> Result<Value, Exit> {
    let path = format!("/api/admin/agents/{}/recipe", path_segment(agent));
    if show {
        return admin_call(state, reqwest::Method::GET, &path, None);
    }
    if clear {
        return admin_call(state, reqwest::Method::DELETE, &path, None);
    }
    if command.is_empty() {
        return Err(usage_error(
            "give the program to run after `--`, or `--show` or `--clear`",
            &["agentteam agent recipe builder -- claude -p".to_string()],
        ));
    }
    let workdir = match workdir {
        Some(dir) => std::path::absolute(dir),
        None => std::env::current_dir(),
    }
    .map_err(|e| usage_error(&format!("cannot tell the working directory: {e}"), &[]))?;
    let mut env = Vec::new();
    for name in ["PATH", "HOME"]
        .iter()
        .map(|n| n.to_string())
        .chain(names.iter().cloned())
    {
        if env.iter().any(|(n, _): &(String, String)| *n == name) {
            continue;
        }
        match std::env::var(&name) {
            Ok(value) => env.push((name, value)),
            Err(_) if names.contains(&name) => {
                return Err(usage_error(
                    &format!("`{name}` is not set in this shell"),
                    &[],
                ));
            }
            Err(_) => {}
        }
    }
    let body = json!({
        "runtime": runtime,
        "workdir": workdir,
        "argv": command,
        "env": env,
        "sharedWorkdir": shared_workdir,
    });
    admin_call(state, reqwest::Method::PUT, &path, Some(body))
}
