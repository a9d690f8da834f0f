//! Codex (verified with 0.171.0).
//!
//! - MCP: `-c mcp_servers.agentteam.url=…` and `-c mcp_servers.agentteam.http_headers_helper=…`
//!   (a string; a table is refused), leaving the user's own `CODEX_HOME` (login, model provider)
//!   as it is.
//! - Guidance: `-c developer_instructions=…`, a developer message after Codex's own prompt. A
//!   `developer_instructions` the user set (in their `config.toml` or with their own `-c`) is kept
//!   first and the guidance follows it.
//! - Skill: Codex has no per-launch skill root (only its home's), so the memory skill is part of
//!   the guidance.
//! - Exec: Codex runs a command in a login shell, whose profile (Debian's `/etc/profile`) resets
//!   `PATH`, losing the launch's `agentteam`: the driver passes `-c allow_login_shell=false`, so
//!   commands run in a plain shell with the launch's `PATH` (the profile files are not read for
//!   them), unless the user set `allow_login_shell` themselves, which stays and is said on stderr.
//!   Codex's `read-only` and `workspace-write` sandboxes refuse every socket `connect()`; only the
//!   user's `--sandbox-network` opt-in adds `-c sandbox_workspace_write.network_access=true`
//!   (which lets every sandboxed command reach the network, not only the daemon). Codex has no
//!   per-launch command rule, so its own approval policy governs `agentteam exec` as it governs
//!   any other command.

use std::io;
use std::path::PathBuf;

use super::{Launch, Unasked, Wiring, read_user_file, toml_string};
use crate::contract::tool_guidance::NAMESPACE;

const DEVELOPER_INSTRUCTIONS: &str = "developer_instructions";
const ALLOW_LOGIN_SHELL: &str = "allow_login_shell";

/// Codex runs what its own approval policy allows, and no per-launch rule can make it ask
/// before one command or tool: the daemon refuses a destructive call of every Codex launch.
pub(super) fn unasked() -> Unasked {
    Unasked::both(
        "Codex runs what its approval policy allows, and no rule of a launch can make it ask first",
    )
}

pub(super) fn wire(launch: &Launch) -> io::Result<Wiring> {
    let key = format!("mcp_servers.{NAMESPACE}");
    let mut args = vec![
        "-c".to_string(),
        format!("{key}.url={}", toml_string(launch.mcp_url)),
        "-c".to_string(),
        format!(
            "{key}.http_headers_helper={}",
            toml_string(&launch.header_helper())
        ),
    ];
    let mut notices = Vec::new();
    let guidance = std::fs::read_to_string(&launch.guide.guidance)?;
    let config = user_config(launch);
    let mut user_args = None;
    match override_index(launch.args, DEVELOPER_INSTRUCTIONS) {
        Some(i) => {
            // The user's own override wins over any earlier one: theirs stays first, ours after.
            let (_, value) = launch.args[i].split_once('=').expect("an override");
            let mut rewritten = launch.args.to_vec();
            rewritten[i] = format!(
                "{DEVELOPER_INSTRUCTIONS}={}",
                toml_string(&format!("{}\n\n{guidance}", override_text(value)))
            );
            user_args = Some(rewritten);
            notices.push(
                "your `-c developer_instructions` is kept; the AgentTeam guidance follows it"
                    .to_string(),
            );
        }
        None => {
            let text = match config
                .as_ref()
                .and_then(|c| c.get(DEVELOPER_INSTRUCTIONS))
                .and_then(toml::Value::as_str)
            {
                Some(theirs) => format!("{theirs}\n\n{guidance}"),
                None => guidance,
            };
            args.push("-c".into());
            args.push(format!("{DEVELOPER_INSTRUCTIONS}={}", toml_string(&text)));
        }
    }
    let user_set_login_shell = override_index(launch.args, ALLOW_LOGIN_SHELL).is_some()
        || config
            .as_ref()
            .is_some_and(|c| c.get(ALLOW_LOGIN_SHELL).is_some());
    if user_set_login_shell {
        notices.push(
            "your `allow_login_shell` setting stays: if Codex's login shell resets PATH, `agentteam` is not found by its commands".to_string(),
        );
    } else {
        args.push("-c".into());
        args.push(format!("{ALLOW_LOGIN_SHELL}=false"));
    }
    if launch.sandbox_network {
        args.push("-c".into());
        args.push("sandbox_workspace_write.network_access=true".into());
        notices.push(
            "--sandbox-network: Codex's workspace-write sandbox allows network access for this launch, for every command it runs, so `agentteam exec` can reach the daemon".to_string(),
        );
    } else if !bypasses_sandbox(launch.args) {
        notices.push(
            "under Codex's read-only or workspace-write sandbox `agentteam exec` cannot connect to the daemon; pass `--sandbox-network` to `agentteam run` (with `--sandbox workspace-write`) to allow it".to_string(),
        );
    }
    Ok(Wiring {
        args,
        user_args,
        env: Vec::new(),
        notices,
        homes: Vec::new(),
    })
}

/// The index of the user's last `-c KEY=…` (or `--config KEY=…`) argument for `key`.
fn override_index(args: &[String], key: &str) -> Option<usize> {
    let mut found = None;
    for (i, pair) in args.windows(2).enumerate() {
        if matches!(pair[0].as_str(), "-c" | "--config")
            && pair[1]
                .split_once('=')
                .is_some_and(|(name, _)| name.trim() == key)
        {
            found = Some(i + 1);
        }
    }
    found
}

/// An override's value as Codex reads it: a TOML value, else the literal text.
fn override_text(value: &str) -> String {
    match toml::from_str::<toml::Table>(&format!("v = {value}")) {
        Ok(table) => match table.get("v") {
            Some(toml::Value::String(text)) => text.clone(),
            _ => value.to_string(),
        },
        Err(_) => value.to_string(),
    }
}

/// Whether the user runs Codex without its sandbox.
fn bypasses_sandbox(args: &[String]) -> bool {
    args.windows(2).any(|pair| {
        matches!(pair[0].as_str(), "-s" | "--sandbox") && pair[1] == "danger-full-access"
    }) || args.iter().any(|a| {
        matches!(
            a.as_str(),
            "--sandbox=danger-full-access"
                | "--dangerously-bypass-approvals-and-sandbox"
                | "--yolo"
        )
    })
}

/// The user's own `config.toml` (`$CODEX_HOME`, else `~/.codex`), read-only.
fn user_config(launch: &Launch) -> Option<toml::Table> {
    let home = launch.var("CODEX_HOME").map(PathBuf::from).or_else(|| {
        launch
            .var("HOME")
            .map(|home| PathBuf::from(home).join(".codex"))
    })?;
    toml::from_str(&read_user_file(&home.join("config.toml"))?).ok()
}

/// Whether the user's Codex arguments run `codex app-server` (its subcommand, the first word that
/// is neither an option nor an option's value).
pub fn app_server(args: &[String]) -> bool {
    // Codex's root options that take a value as the next word.
    const VALUED: &[&str] = &[
        "-c",
        "--config",
        "-m",
        "--model",
        "-p",
        "--profile",
        "-s",
        "--sandbox",
        "-a",
        "--ask-for-approval",
        "-C",
        "--cd",
        "-i",
        "--image",
        "--add-dir",
        "--enable",
        "--disable",
        "--local-provider",
    ];
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if VALUED.contains(&word.as_str()) {
            words.next();
        } else if !word.starts_with('-') {
            return word == "app-server";
        }
    }
    false
}

/// A delivered conversation's session, for `codex exec` (which takes no id for a new thread): a
/// first run is left as it is and its thread id read from its `--json` output
/// ([`session_in_output`]); a known one becomes `codex exec resume ID …`, the person's options
/// kept, `--sandbox MODE` given as `-c sandbox_mode=MODE` (what `exec resume` takes instead).
/// Nothing for another subcommand, for `exec`'s own `resume`, `fork` or `review`, or for an
/// option `exec resume` has no equivalent of (a working directory, added directories, a profile,
/// a local provider): that conversation's runs are each a new session.
pub(super) fn session_args(
    args: &[String],
    session: &super::RuntimeSession,
) -> Option<Vec<String>> {
    const VALUED: &[&str] = &["-c", "--config", "-m", "--model", "-i", "--image"];
    const NOT_RESUMED: &[&str] = &[
        "-C",
        "--cd",
        "--add-dir",
        "-p",
        "--profile",
        "--oss",
        "--local-provider",
        "--approve-for-me",
        "--color",
    ];
    let exec = args.iter().position(|a| a == "exec")?;
    // Before `exec`: root options only (a value after one that takes it).
    let mut root = args[..exec].iter();
    while let Some(word) = root.next() {
        if VALUED.contains(&word.as_str()) {
            root.next();
        } else if !word.starts_with('-') {
            return None;
        }
    }
    if super::has_flag(args, NOT_RESUMED)
        || args[exec + 1..]
            .iter()
            .any(|a| matches!(a.as_str(), "resume" | "fork" | "review" | "--last"))
    {
        return None;
    }
    if !session.known {
        return Some(args.to_vec());
    }
    let mut placed = args[..=exec].to_vec();
    placed.extend(["resume".to_string(), session.id.clone()]);
    let mut words = args[exec + 1..].iter();
    while let Some(word) = words.next() {
        let mode = match word.as_str() {
            "-s" | "--sandbox" => words.next().cloned(),
            _ => word.strip_prefix("--sandbox=").map(str::to_string),
        };
        match mode {
            Some(mode) => placed.extend([
                "-c".to_string(),
                format!("sandbox_mode={}", toml_string(&mode)),
            ]),
            None => {
                placed.push(word.clone());
                if VALUED.contains(&word.as_str())
                    && let Some(value) = words.next()
                {
                    placed.push(value.clone());
                }
            }
        }
    }
    Some(placed)
}

/// The thread a line of `codex exec --json` output starts (`thread.started`).
pub(super) fn session_in_output(line: &str) -> Option<String> {
    let event: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    if event.get("type")?.as_str()? != "thread.started" {
        return None;
    }
    // A UUID (Codex's thread ids are): never a word Codex could take as an option.
    let id = event.get("thread_id")?.as_str()?;
    let groups: Vec<&str> = id.split('-').collect();
    let valid = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()));
    valid.then(|| id.to_string())
}

/// A thread a Codex runtime's own output named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A `codex exec` run's `thread.started`: its one primary thread.
    Primary(String),
    /// A thread a `codex app-server` client started (no parent thread, not a sub-agent's).
    User(String),
    /// A thread the `app-server` protocol marked delegated: a parent thread id, or a sub-agent
    /// source.
    Delegated(String),
}

/// Watches a Codex runtime's relayed stdout for the threads it names, from the runtime itself.
/// `codex exec --json`: the first `thread.started` event is the primary thread, and the watch
/// ends there (or at the first 256 lines). `codex app-server`: every `thread/started`
/// notification, and every answer that carries a `thread` (`thread/start`, `thread/resume`,
/// `thread/fork`), for the runtime's whole life; a thread is delegated only when the protocol
/// marks it so, never by the order threads appear. Bounded: a line is read up to 64 KiB (a longer
/// one, such as a resumed thread's history, is skipped).
#[derive(Debug, Default)]
pub struct ThreadWatch {
    line: Vec<u8>,
    overlong: bool,
    lines: usize,
    done: bool,
    app_server: bool,
}

const MAX_WATCHED_LINE: usize = 64 * 1024;
const MAX_WATCHED_LINES: usize = 256;

impl ThreadWatch {
    /// A watch of `codex exec --json` output.
    pub fn exec() -> ThreadWatch {
        ThreadWatch::default()
    }

    /// A watch of `codex app-server`'s protocol on stdout.
    pub fn app_server() -> ThreadWatch {
        ThreadWatch {
            app_server: true,
            ..ThreadWatch::default()
        }
    }

    /// Feeds a chunk of stdout; returns the threads it completed lines about.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Seen> {
        let mut seen = Vec::new();
        if self.done {
            return seen;
        }
        for &byte in chunk {
            if byte != b'\n' {
                if self.line.len() < MAX_WATCHED_LINE {
                    self.line.push(byte);
                } else {
                    self.overlong = true;
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let overlong = std::mem::take(&mut self.overlong);
            if overlong {
                continue;
            }
            if self.app_server {
                seen.extend(app_server_threads(&line));
                continue;
            }
            self.lines += 1;
            if let Ok(event) = serde_json::from_slice::<serde_json::Value>(&line)
                && event.get("type").and_then(|t| t.as_str()) == Some("thread.started")
                && let Some(id) = event.get("thread_id").and_then(|t| t.as_str())
                && !id.is_empty()
            {
                self.done = true;
                seen.push(Seen::Primary(id.to_string()));
                return seen;
            }
            if self.lines >= MAX_WATCHED_LINES {
                self.done = true;
                return seen;
            }
        }
        seen
    }
}

/// The threads an `app-server` line names: `thread/started`'s `params.thread` and an answer's
/// `result.thread` (user threads unless marked delegated), and the sub-agents a spawn item names
/// (`collabAgentToolCall`'s `receiverThreadIds`, `subAgentActivity`'s `agentThreadId`): Codex
/// sends no `thread/started` for a sub-agent's thread.
fn app_server_threads(line: &[u8]) -> Vec<Seen> {
    const MARKS: [&[u8]; 3] = [b"\"thread\"", b"collabAgentToolCall", b"subAgentActivity"];
    if !MARKS
        .iter()
        .any(|mark| line.windows(mark.len()).any(|w| w == *mark))
    {
        return Vec::new();
    }
    let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else {
        return Vec::new();
    };
    let id = |value: Option<&serde_json::Value>| {
        value
            .and_then(|v| v.as_str())
            .filter(|id| !id.is_empty())
            .map(str::to_string)
    };
    let thread = match message.get("method").and_then(|m| m.as_str()) {
        Some("thread/started") => message.pointer("/params/thread"),
        Some("item/started" | "item/completed") => {
            let Some(item) = message.pointer("/params/item") else {
                return Vec::new();
            };
            return match item.get("type").and_then(|t| t.as_str()) {
                Some("collabAgentToolCall") => item
                    .get("receiverThreadIds")
                    .and_then(|ids| ids.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|thread| id(Some(thread)))
                    .map(Seen::Delegated)
                    .collect(),
                Some("subAgentActivity") => id(item.get("agentThreadId"))
                    .map(Seen::Delegated)
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            };
        }
        Some(_) => None,
        None => message.pointer("/result/thread"),
    };
    let Some(thread) = thread else {
        return Vec::new();
    };
    let Some(thread_id) = id(thread.get("id")) else {
        return Vec::new();
    };
    let parent = id(thread.get("parentThreadId")).is_some();
    let subagent = match thread.get("source") {
        Some(serde_json::Value::Object(source)) => {
            source.keys().any(|k| k.eq_ignore_ascii_case("subagent"))
        }
        Some(serde_json::Value::String(source)) => source.eq_ignore_ascii_case("subagent"),
        _ => false,
    };
    vec![if parent || subagent {
        Seen::Delegated(thread_id)
    } else {
        Seen::User(thread_id)
    }]
}

#[cfg(test)]
mod tests {
    use super::super::tests::Fixture;
    use super::super::{Family, wire};
    use super::*;

    #[test]
    fn a_delivered_session_is_resumed_by_the_thread_its_output_named() {
        let args = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let mut session = super::super::RuntimeSession {
            id: "0199a-thread".into(),
            known: false,
        };
        let recipe = args(&["exec", "--json", "-s", "workspace-write", "-m", "o3", "-"]);
        assert_eq!(session_args(&recipe, &session), Some(recipe.clone()));
        session.known = true;
        assert_eq!(
            session_args(&recipe, &session),
            Some(args(&[
                "exec",
                "resume",
                "0199a-thread",
                "--json",
                "-c",
                "sandbox_mode=\"workspace-write\"",
                "-m",
                "o3",
                "-"
            ]))
        );
        assert_eq!(
            session_args(&args(&["-c", "k=v", "exec", "-"]), &session),
            Some(args(&["-c", "k=v", "exec", "resume", "0199a-thread", "-"]))
        );
        assert_eq!(
            session_args(&args(&["exec", "--sandbox=read-only", "-"]), &session),
            Some(args(&[
                "exec",
                "resume",
                "0199a-thread",
                "-c",
                "sandbox_mode=\"read-only\"",
                "-"
            ]))
        );
        for own in [
            &["exec", "resume", "--last"][..],
            &["exec", "-C", "/w", "-"],
            &["app-server"],
            &["exec", "--profile", "p"],
            &["review", "exec"],
        ] {
            assert_eq!(session_args(&args(own), &session), None, "{own:?}");
        }
        let thread = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        assert_eq!(
            session_in_output(&format!(
                r#"{{"type":"thread.started","thread_id":"{thread}"}}"#
            ))
            .as_deref(),
            Some(thread)
        );
        for line in [
            format!(r#"{{"type":"turn.started","thread_id":"{thread}"}}"#),
            r#"{"type":"thread.started","thread_id":"--last"}"#.to_string(),
            r#"{"type":"thread.started","thread_id":"0199a-b2"}"#.to_string(),
            "thread.started".to_string(),
        ] {
            assert_eq!(session_in_output(&line), None, "{line}");
        }
    }

    fn value<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
        let i = override_index(args, key)?;
        args[i].split_once('=').map(|(_, v)| v)
    }

    #[test]
    fn mcp_guidance_and_path_come_as_overrides() {
        let fixture = Fixture::new(Family::Codex);
        let wiring = wire(Family::Codex, &fixture.launch(&[])).unwrap();
        assert_eq!(
            value(&wiring.args, "mcp_servers.agentteam.url"),
            Some("\"http://127.0.0.1:7/api/internal/mcp/servers/wsp_1/agents/agt_1\"")
        );
        assert!(
            value(&wiring.args, "mcp_servers.agentteam.http_headers_helper")
                .unwrap()
                .starts_with("\"'/opt/agent team/agentteam' mcp headers")
        );
        let guidance = std::fs::read_to_string(&fixture.guide.guidance).unwrap();
        assert_eq!(
            override_text(value(&wiring.args, DEVELOPER_INSTRUCTIONS).unwrap()),
            guidance
        );
        assert_eq!(value(&wiring.args, ALLOW_LOGIN_SHELL), Some("false"));
        assert!(value(&wiring.args, "sandbox_workspace_write.network_access").is_none());
        assert!(wiring.notices[0].contains("--sandbox-network"));
        assert_eq!(wiring.user_args, None);
    }

    #[test]
    fn the_users_own_instructions_and_login_shell_stay() {
        let fixture = Fixture::new(Family::Codex);
        let guidance = std::fs::read_to_string(&fixture.guide.guidance).unwrap();
        std::fs::create_dir(fixture.home().join(".codex")).unwrap();
        std::fs::write(
            fixture.home().join(".codex/config.toml"),
            "developer_instructions = \"Mine first.\"\nallow_login_shell = true\n",
        )
        .unwrap();
        let wiring = wire(Family::Codex, &fixture.launch(&[])).unwrap();
        assert_eq!(
            override_text(value(&wiring.args, DEVELOPER_INSTRUCTIONS).unwrap()),
            format!("Mine first.\n\n{guidance}")
        );
        assert_eq!(value(&wiring.args, ALLOW_LOGIN_SHELL), None);
        assert!(wiring.notices[0].contains("allow_login_shell"));

        // An override of their own on the command line: kept in place, the guidance after it.
        let args: Vec<String> = ["exec", "-c", "developer_instructions='Argv mine.'", "hi"]
            .map(String::from)
            .to_vec();
        let wiring = wire(Family::Codex, &fixture.launch(&args)).unwrap();
        assert_eq!(value(&wiring.args, DEVELOPER_INSTRUCTIONS), None);
        let user = wiring.user_args.unwrap();
        assert_eq!(
            (user.len(), user[0].as_str(), user[3].as_str()),
            (4, "exec", "hi")
        );
        assert_eq!(
            override_text(value(&user, DEVELOPER_INSTRUCTIONS).unwrap()),
            format!("Argv mine.\n\n{guidance}")
        );
    }

    #[test]
    fn the_sandbox_opens_only_on_the_users_opt_in() {
        let fixture = Fixture::new(Family::Codex);
        let mut launch = fixture.launch(&[]);
        launch.sandbox_network = true;
        let wiring = wire(Family::Codex, &launch).unwrap();
        assert_eq!(
            value(&wiring.args, "sandbox_workspace_write.network_access"),
            Some("true")
        );
        assert!(
            wiring
                .notices
                .iter()
                .any(|n| n.starts_with("--sandbox-network"))
        );
        let args: Vec<String> = ["--sandbox", "danger-full-access"]
            .map(String::from)
            .to_vec();
        let wiring = wire(Family::Codex, &fixture.launch(&args)).unwrap();
        assert!(wiring.notices.is_empty(), "{:?}", wiring.notices);
    }

    #[test]
    fn the_primary_thread_comes_from_the_first_thread_started_event() {
        let mut watch = ThreadWatch::exec();
        assert_eq!(
            watch.feed(b"{\"type\":\"thread.started\",\"thread_id\":\"\"}\n"),
            vec![],
            "an empty id names no thread"
        );
        assert_eq!(
            watch.feed(b"{\"type\":\"turn.started\"}\nnot json\n{\"type\":\"thread.st"),
            vec![]
        );
        assert_eq!(
            watch.feed(b"arted\",\"thread_id\":\"019a-primary\"}\n"),
            vec![Seen::Primary("019a-primary".into())]
        );
        assert_eq!(
            watch.feed(b"{\"type\":\"thread.started\",\"thread_id\":\"child\"}\n"),
            vec![],
            "only the first"
        );
        let mut quiet = ThreadWatch::exec();
        for _ in 0..MAX_WATCHED_LINES {
            assert_eq!(quiet.feed(b"{}\n"), vec![]);
        }
        assert_eq!(
            quiet.feed(b"{\"type\":\"thread.started\",\"thread_id\":\"late\"}\n"),
            vec![],
            "the watch is bounded"
        );
    }

    #[test]
    fn app_server_threads_are_delegated_only_when_the_protocol_says_so() {
        let mut watch = ThreadWatch::app_server();
        let user = |id: &str| {
            format!(
                "{{\"id\":2,\"result\":{{\"thread\":{{\"id\":\"{id}\",\"parentThreadId\":null,\"source\":\"vscode\"}}}}}}\n"
            )
        };
        // Two user threads, then a sub-agent's, which appears before the second user thread's
        // notification: the order says nothing.
        let sub = "{\"method\":\"thread/started\",\"params\":{\"thread\":{\"id\":\"t3\",\"parentThreadId\":\"t1\",\"source\":{\"subAgent\":{\"thread_spawn\":{}}}}}}\n";
        let by_source = "{\"method\":\"thread/started\",\"params\":{\"thread\":{\"id\":\"t4\",\"source\":{\"subagent\":\"review\"}}}}\n";
        // Codex 0.171 announces a spawned sub-agent only in the spawn's item.
        let spawned = "{\"method\":\"item/completed\",\"params\":{\"item\":{\"type\":\"collabAgentToolCall\",\"tool\":\"spawnAgent\",\"senderThreadId\":\"t1\",\"receiverThreadIds\":[\"t6\",\"t7\"]},\"threadId\":\"t1\"}}\n";
        let activity = "{\"method\":\"item/started\",\"params\":{\"item\":{\"type\":\"subAgentActivity\",\"kind\":\"started\",\"agentThreadId\":\"t8\"},\"threadId\":\"t1\"}}\n";
        let stream = format!(
            "{}{}{sub}{by_source}{{\"method\":\"thread/status/changed\",\"params\":{{\"threadId\":\"t6\"}}}}\n{spawned}{activity}{{\"method\":\"item/started\",\"params\":{{\"item\":{{\"type\":\"agentMessage\"}},\"threadId\":\"t1\"}}}}\n",
            user("t1"),
            user("t2")
        );
        // Fed in pieces that cut lines anywhere.
        let mut seen = Vec::new();
        for piece in stream.as_bytes().chunks(7) {
            seen.extend(watch.feed(piece));
        }
        assert_eq!(
            seen,
            vec![
                Seen::User("t1".into()),
                Seen::User("t2".into()),
                Seen::Delegated("t3".into()),
                Seen::Delegated("t4".into()),
                Seen::Delegated("t6".into()),
                Seen::Delegated("t7".into()),
                Seen::Delegated("t8".into()),
            ]
        );
        // It goes on past the exec watch's line bound; an overlong line is skipped whole.
        for _ in 0..MAX_WATCHED_LINES {
            assert_eq!(watch.feed(b"{}\n"), vec![]);
        }
        let long = format!(
            "{{\"id\":9,\"result\":{{\"thread\":{{\"id\":\"t9\",\"preview\":\"{}\"}}}}}}\n",
            "x".repeat(MAX_WATCHED_LINE)
        );
        assert_eq!(watch.feed(long.as_bytes()), vec![]);
        assert_eq!(
            watch.feed(user("t5").as_bytes()),
            vec![Seen::User("t5".into())]
        );
    }

    #[test]
    fn app_server_is_the_subcommand_not_any_word() {
        let args = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert!(app_server(&args(&["app-server"])));
        assert!(app_server(&args(&[
            "-c",
            "model=\"x\"",
            "app-server",
            "--listen",
            "stdio://"
        ])));
        assert!(!app_server(&args(&["exec", "app-server"])));
        assert!(!app_server(&args(&["-m", "app-server", "exec"])));
        assert!(!app_server(&args(&[])));
    }
}
