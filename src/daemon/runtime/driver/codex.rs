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

use super::{Launch, Wiring, read_user_file, toml_string};
use crate::contract::tool_guidance::NAMESPACE;

const DEVELOPER_INSTRUCTIONS: &str = "developer_instructions";
const ALLOW_LOGIN_SHELL: &str = "allow_login_shell";

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

/// Watches a Codex runtime's relayed `codex exec --json` output for its `thread.started` event:
/// the primary thread's id, from the runtime itself. Bounded: a line is read up to 64 KiB, and
/// the watch ends at the first id (or at the first 256 lines).
#[derive(Debug, Default)]
pub struct ThreadWatch {
    line: Vec<u8>,
    lines: usize,
    done: bool,
}

const MAX_WATCHED_LINE: usize = 64 * 1024;
const MAX_WATCHED_LINES: usize = 256;

impl ThreadWatch {
    /// Feeds a chunk of stdout; returns the primary thread id once it appears.
    pub fn feed(&mut self, chunk: &[u8]) -> Option<String> {
        if self.done {
            return None;
        }
        for &byte in chunk {
            if byte != b'\n' {
                if self.line.len() < MAX_WATCHED_LINE {
                    self.line.push(byte);
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            self.lines += 1;
            if let Ok(event) = serde_json::from_slice::<serde_json::Value>(&line)
                && event.get("type").and_then(|t| t.as_str()) == Some("thread.started")
                && let Some(id) = event.get("thread_id").and_then(|t| t.as_str())
            {
                self.done = true;
                return Some(id.to_string());
            }
            if self.lines >= MAX_WATCHED_LINES {
                self.done = true;
                return None;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::Fixture;
    use super::super::{Family, wire};
    use super::*;

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
        let mut watch = ThreadWatch::default();
        assert_eq!(
            watch.feed(b"{\"type\":\"turn.started\"}\nnot json\n{\"type\":\"thread.st"),
            None
        );
        assert_eq!(
            watch.feed(b"arted\",\"thread_id\":\"019a-primary\"}\n"),
            Some("019a-primary".into())
        );
        assert_eq!(
            watch.feed(b"{\"type\":\"thread.started\",\"thread_id\":\"child\"}\n"),
            None,
            "only the first"
        );
        let mut quiet = ThreadWatch::default();
        for _ in 0..MAX_WATCHED_LINES {
            assert_eq!(quiet.feed(b"{}\n"), None);
        }
        assert_eq!(
            quiet.feed(b"{\"type\":\"thread.started\",\"thread_id\":\"late\"}\n"),
            None,
            "the watch is bounded"
        );
    }
}
