//! Runtime drivers: how `agentteam run --runtime X` points a runtime's own MCP client at the
//! daemon's MCP route, in the runtime's own configuration format, with no hand-editing.
//!
//! Every generated file lives in the launch's private credential directory (0700, its files
//! 0600) and goes with it. The bearer is never written into a configuration, an argument or an
//! environment value: the configurations name the header helper (`agentteam mcp headers --url
//! ROUTE --token-file PATH`, which checks the route before it reads the file) or the
//! stdio bridge (`agentteam mcp stdio`) by the daemon's own executable's absolute path (Codex runs
//! a helper with a cleared environment, so a `PATH` lookup would fail), with the MCP token file's
//! path, and the helper or bridge reads the file at every use (rotation needs no restart).
//!
//! Verified against the pinned versions (ARCHITECTURE.md names them):
//! - Claude Code: `--mcp-config FILE --strict-mcp-config`; the entry is
//!   `{"type":"http","url":…,"headersHelper":CMD,"alwaysLoad":true}` (without `alwaysLoad` the
//!   tools were deferred behind its tool search, absent from the model's first request).
//! - Codex: `-c mcp_servers.agentteam.url=…` and `-c mcp_servers.agentteam.http_headers_helper=…`
//!   (a string; a table is refused), leaving the user's own `CODEX_HOME` (login, model provider)
//!   as it is.
//! - OpenCode: `OPENCODE_CONFIG=FILE` (merged with the user's own configuration), whose
//!   `mcp.mcp_agentteam` entry runs the stdio bridge as a `local` server: the model sees
//!   `mcp_agentteam_<tool>`. (A `remote` entry with `{file:…}` reads the token once at load and
//!   OpenCode's local `GET /config` would show it: not used.)
//! - generic: the environment only.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;

/// The runtime families `agentteam run --runtime` wires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// The environment only (`AGENTTEAM_MCP_URL`, `AGENTTEAM_MCP_TOKEN_FILE`, …)
    #[default]
    Generic,
    /// Claude Code: `--mcp-config` with a header helper
    Claude,
    /// Codex: `-c mcp_servers.agentteam.*` overrides with a header helper
    Codex,
    /// OpenCode: `OPENCODE_CONFIG` with the stdio bridge
    Opencode,
}

/// The Claude Code configuration file in the credential directory.
pub const CLAUDE_CONFIG: &str = "claude-mcp.json";
/// The OpenCode configuration file in the credential directory.
pub const OPENCODE_CONFIG: &str = "opencode.json";

/// How a launch's command line and environment change to reach the daemon.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Wiring {
    /// Inserted right after the program (before the user's own arguments).
    pub args: Vec<String>,
    /// Added to the runtime's environment (paths only).
    pub env: Vec<(String, String)>,
}

/// Writes `family`'s configuration into the credential directory `dir` and says how to point the
/// runtime at it. `executable` is the daemon's own (absolute); `mcp_url` the launch's MCP route;
/// `token_file` its MCP token file.
pub fn wire(
    family: Family,
    dir: &Path,
    executable: &Path,
    mcp_url: &str,
    token_file: &Path,
) -> io::Result<Wiring> {
    let exe = executable.display().to_string();
    let token = token_file.display().to_string();
    let helper = [
        exe.as_str(),
        "mcp",
        "headers",
        "--url",
        mcp_url,
        "--token-file",
        &token,
    ]
    .iter()
    .map(|word| shell_word(word))
    .collect::<Vec<_>>()
    .join(" ");
    match family {
        Family::Generic => Ok(Wiring::default()),
        Family::Claude => {
            let config = json!({ "mcpServers": { crate::contract::tool_guidance::NAMESPACE: {
                "type": "http",
                "url": mcp_url,
                "headersHelper": helper,
                "alwaysLoad": true,
            }}});
            let path = dir.join(CLAUDE_CONFIG);
            crate::private_file::create_new(&path, &format!("{config:#}\n"))?;
            Ok(Wiring {
                args: vec![
                    "--mcp-config".into(),
                    path.display().to_string(),
                    "--strict-mcp-config".into(),
                ],
                env: Vec::new(),
            })
        }
        Family::Codex => {
            let key = format!("mcp_servers.{}", crate::contract::tool_guidance::NAMESPACE);
            Ok(Wiring {
                args: vec![
                    "-c".into(),
                    format!("{key}.url={}", toml_string(mcp_url)),
                    "-c".into(),
                    format!("{key}.http_headers_helper={}", toml_string(&helper)),
                ],
                env: Vec::new(),
            })
        }
        Family::Opencode => {
            let config = json!({
                "$schema": "https://opencode.ai/config.json",
                "mcp": { format!("mcp_{}", crate::contract::tool_guidance::NAMESPACE): {
                    "type": "local",
                    "command": [exe, "mcp", "stdio"],
                    "environment": {
                        "AGENTTEAM_MCP_URL": mcp_url,
                        "AGENTTEAM_MCP_TOKEN_FILE": token,
                    },
                    "enabled": true,
                }},
            });
            let path = dir.join(OPENCODE_CONFIG);
            crate::private_file::create_new(&path, &format!("{config:#}\n"))?;
            Ok(Wiring {
                args: Vec::new(),
                env: vec![("OPENCODE_CONFIG".into(), path.display().to_string())],
            })
        }
    }
}

/// `word` as one shell word: as it is when it needs no quoting, else single-quoted.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-=:@%+,".contains(&b))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A TOML basic string (JSON's escaping is TOML's for every character JSON escapes).
fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
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
    use super::*;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/usr/bin/agentteam"), "/usr/bin/agentteam");
        assert_eq!(shell_word("/a b/agentteam"), "'/a b/agentteam'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
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

    #[test]
    fn each_family_writes_its_own_format_and_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let exe = Path::new("/opt/agent team/agentteam");
        let token = dir.path().join("mcp-token");
        let url = "http://127.0.0.1:7/api/internal/mcp/servers/wsp_1/agents/agt_1";
        assert_eq!(
            wire(Family::Generic, dir.path(), exe, url, &token).unwrap(),
            Wiring::default()
        );
        let claude = wire(Family::Claude, dir.path(), exe, url, &token).unwrap();
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(CLAUDE_CONFIG)).unwrap())
                .unwrap();
        let entry = &file["mcpServers"]["agentteam"];
        assert_eq!(entry["type"], "http");
        assert_eq!(entry["alwaysLoad"], true);
        assert_eq!(
            entry["headersHelper"],
            format!(
                "'/opt/agent team/agentteam' mcp headers --url {url} --token-file {}",
                token.display()
            )
        );
        assert_eq!(claude.args[0], "--mcp-config");
        let codex = wire(Family::Codex, dir.path(), exe, url, &token).unwrap();
        assert_eq!(
            codex.args[1],
            format!("mcp_servers.agentteam.url=\"{url}\"")
        );
        assert!(codex.args[3].starts_with(
            "mcp_servers.agentteam.http_headers_helper=\"'/opt/agent team/agentteam' mcp headers"
        ));
        let opencode = wire(Family::Opencode, dir.path(), exe, url, &token).unwrap();
        assert_eq!(opencode.env[0].0, "OPENCODE_CONFIG");
        let file: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(OPENCODE_CONFIG)).unwrap(),
        )
        .unwrap();
        assert_eq!(
            file["mcp"]["mcp_agentteam"]["command"],
            json!(["/opt/agent team/agentteam", "mcp", "stdio"])
        );
    }
}
