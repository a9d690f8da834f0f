//! Kimi Code (`@moonshot-ai/kimi-code`, verified with 2.1.0).
//!
//! Kimi Code reads its MCP servers and its global `AGENTS.md` only from its home
//! (`$KIMI_CODE_HOME`, else `~/.kimi-code`), and has no flag for either. So a launch gets a
//! private home in its guidance directory that links every entry of the user's own home (their
//! `config.toml`, their login, their skills, their sessions: a link, never a copy), so that the
//! runtime's own writes land where they would without `agentteam`, and holds two files of its
//! own:
//! - `mcp.json`: the user's own servers, plus `agentteam` running the stdio bridge (Kimi Code has
//!   no header helper); the model sees `mcp__agentteam__<tool>`.
//! - `AGENTS.md`: the user's own global instructions, then the guidance. Kimi Code does not pass
//!   MCP `instructions` to its model, so the guidance carries the MCP rules, and the memory skill
//!   too: `--skills-dir` would replace the user's skill discovery.
//! - Exec: `kimi -p` runs its `Bash` tool in its auto permission mode; the driver adds no rule.
//!
//! The Python `kimi-cli` 1.52 is a stub that prints a notice and exits 0 doing nothing (and with
//! no arguments runs a remote install script): a `kimi` whose `--version` is not Kimi Code's is
//! refused before anything starts ([`check_program`]).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Launch, PrivateHome, Unasked, Wiring, has_flag, read_user_file};
use crate::contract::tool_guidance::NAMESPACE;
use crate::daemon::runtime::env::ChildEnv;

/// The private home's directory name in the guidance directory.
pub const HOME_DIR: &str = "kimi-home";
const MCP_FILE: &str = "mcp.json";
const AGENTS_FILE: &str = "AGENTS.md";
/// Made in the user's home when missing: where Kimi Code writes its sessions.
const SESSIONS: &str = "sessions";

/// Kimi Code's print mode (`-p`) and its approval flags run every tool without asking, and it has
/// no rule that makes one tool ask; interactive, it asks before a tool.
pub(super) fn unasked(args: &[String]) -> Unasked {
    let unattended = has_flag(
        args,
        &[
            "-p",
            "--prompt",
            "--print",
            "-y",
            "--yes",
            "--yolo",
            "--auto-approve",
            "--afk",
        ],
    );
    match unattended {
        true => Unasked::both("Kimi Code runs every tool without asking in print mode"),
        false => Unasked::default(),
    }
}

pub(super) fn wire(launch: &Launch) -> io::Result<Wiring> {
    let Some(user_home) = launch
        .var("KIMI_CODE_HOME")
        .map(PathBuf::from)
        .or_else(|| launch.var("HOME").map(|h| Path::new(h).join(".kimi-code")))
    else {
        return Ok(Wiring::not_wired(
            "Kimi Code is not wired: neither KIMI_CODE_HOME nor HOME is set",
        ));
    };
    let user_mcp = match read_user_file(&user_home.join(MCP_FILE)) {
        None => Some(serde_json::Map::new()),
        Some(text) if text.trim().is_empty() => Some(serde_json::Map::new()),
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(mut file)) => match file.remove("mcpServers") {
                None => Some(serde_json::Map::new()),
                Some(Value::Object(servers)) => Some(servers),
                Some(_) => None,
            },
            _ => None,
        },
    };
    let Some(mut servers) = user_mcp else {
        return Ok(Wiring::not_wired(format!(
            "Kimi Code is not wired: {} is not an MCP configuration this driver can extend",
            user_home.join(MCP_FILE).display()
        )));
    };
    // The user's home, as Kimi Code would make it on its first run, so its sessions land there.
    if !user_home.join(SESSIONS).is_dir() {
        crate::platform::fs::create_private_dirs(&user_home.join(SESSIONS))?;
    }
    let private = PrivateHome::link(
        &user_home,
        &launch.guide.dir.join(HOME_DIR),
        &[MCP_FILE, AGENTS_FILE],
    )?;
    let home = private.ours.clone();
    servers.insert(NAMESPACE.into(), launch.stdio_bridge(json!({})));
    let mcp = json!({ "mcpServers": servers });
    crate::private_file::create_new(&home.join(MCP_FILE), &format!("{mcp:#}\n"))?;
    let guidance = std::fs::read_to_string(&launch.guide.guidance)?;
    let agents = match read_user_file(&user_home.join(AGENTS_FILE)) {
        Some(theirs) if !theirs.trim().is_empty() => {
            format!("{}\n\n{guidance}", theirs.trim_end())
        }
        _ => guidance,
    };
    crate::private_file::create_new(&home.join(AGENTS_FILE), &agents)?;
    Ok(Wiring {
        args: Vec::new(),
        user_args: None,
        env: vec![("KIMI_CODE_HOME".into(), home.display().to_string())],
        notices: Vec::new(),
        homes: vec![private],
    })
}

/// What a delivered run's `-p` says: Kimi Code takes its prompt only as an argument, which any
/// process of the machine may read, so the prompt names the owner-only file that holds the
/// person's message and the target to answer, never the message itself.
pub fn turn_prompt(file: &Path) -> String {
    format!(
        "A person wrote to you in AgentTeam. Their message, and the exact target to answer it \
         on, are in the file {}: read that file with your Read tool first, then do what it says.",
        file.display()
    )
}

/// Why a recipe's arguments cannot run a delivered turn: the daemon gives `-p` itself, and Kimi
/// Code refuses an approval mode beside it.
pub fn recipe_refusal(args: &[String]) -> Option<String> {
    if has_flag(args, &["-p", "--prompt"]) {
        return Some(
            "a Kimi Code recipe takes no `-p`: the daemon gives each delivered run its own, naming \
             the owner-only file that holds the person's message"
                .into(),
        );
    }
    if has_flag(args, &["-y", "--yolo", "--auto", "--plan"]) {
        return Some(
            "Kimi Code refuses `--yolo`, `--auto` and `--plan` beside `-p`, and a delivered run \
             is a `-p` run"
                .into(),
        );
    }
    None
}

/// A delivered run in the conversation's session: a known one resumed with `--session ID`; a new
/// one is named by Kimi Code itself (its `stream-json` output's `session.resume_hint`), so nothing
/// is added. `None` where the person's arguments choose a session or an agent (Kimi Code binds an
/// agent at a session's creation and refuses one beside a resume).
pub(super) fn session_args(
    args: &[String],
    session: &super::RuntimeSession,
) -> Option<Vec<String>> {
    if has_flag(
        args,
        &[
            "-S",
            "--session",
            "-r",
            "--resume",
            "-c",
            "--continue",
            "-C",
            "--agent",
            "--agent-file",
        ],
    ) {
        return None;
    }
    match session.known {
        true => Some(vec!["--session".into(), session.id.clone()]),
        false => Some(Vec::new()),
    }
}

/// The session a line of Kimi Code's `stream-json` output names: its own top-level
/// `{"role":"meta","type":"session.resume_hint","session_id":…}`, written after the turn. Every
/// line of that output is one JSON object Kimi Code wrote, what the model said only ever inside
/// its strings, so no line the model wrote is such an object.
pub(super) fn session_in_output(line: &str) -> Option<String> {
    let value: Value = serde_json::from_str(line.trim()).ok()?;
    if value.get("role")?.as_str()? != "meta"
        || value.get("type")?.as_str()? != "session.resume_hint"
    {
        return None;
    }
    let id = value.get("session_id")?.as_str()?;
    let valid = id.len() <= 128
        && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    valid.then(|| id.to_string())
}

/// How long `kimi --version` may take.
const VERSION_DEADLINE: Duration = Duration::from_secs(10);

/// Refuses a `kimi` that is not Kimi Code: Kimi Code answers `--version` with its bare version,
/// 2 or later; the Python `kimi-cli` answers with a notice (or an older version) and would do
/// nothing. `env` (the launcher's, stripped: never the new launch's credential paths) and
/// `workdir` are the launch's.
pub async fn check_program(program: &str, env: &ChildEnv, workdir: &Path) -> Result<(), String> {
    let mut command = env.command(program);
    command
        .arg("--version")
        .current_dir(workdir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(VERSION_DEADLINE, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(format!("cannot run `{program} --version`: {e}")),
        Err(_) => return Err(format!("`{program} --version` did not answer in time")),
    };
    let answer = String::from_utf8_lossy(&output.stdout);
    let answer = answer.trim();
    if output.status.success() && is_kimi_code_version(answer) {
        return Ok(());
    }
    let shown: String = answer.chars().take(120).collect();
    Err(format!(
        "`{program}` is not Kimi Code (its `--version` said `{shown}`): the Python kimi-cli no longer runs an agent; install Kimi Code (npm `@moonshot-ai/kimi-code`), or pass `--runtime generic` to run this program without a driver"
    ))
}

/// `2.1.0`: a bare version whose major number is 2 or more.
fn is_kimi_code_version(text: &str) -> bool {
    let mut parts = text.split('.');
    let major = parts.next().and_then(|m| m.parse::<u32>().ok());
    major.is_some_and(|m| m >= 2)
        && parts.count() >= 1
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::super::tests::Fixture;
    use super::super::{Family, wire};
    use super::*;

    fn words(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    /// A delivered run: its `-p` names the file, never holds the message; the person's own
    /// prompt or approval mode is refused; a known session is resumed by id, and the person's
    /// own session or agent stays theirs.
    #[test]
    fn a_delivered_turn_names_its_file_and_resumes_the_conversations_session() {
        let prompt = turn_prompt(Path::new("/state/recipes/turns/dlv_1/message.md"));
        assert!(
            prompt.contains("/state/recipes/turns/dlv_1/message.md"),
            "{prompt}"
        );
        for refused in [
            &["-p", "hi"][..],
            &["--prompt=hi"],
            &["--yolo"],
            &["--auto"],
            &["--plan"],
        ] {
            assert!(recipe_refusal(&words(refused)).is_some(), "{refused:?}");
        }
        assert_eq!(
            recipe_refusal(&words(&["--output-format", "stream-json"])),
            None
        );
        let known = super::super::RuntimeSession {
            id: "4f1c-session".into(),
            known: true,
        };
        let new = super::super::RuntimeSession {
            known: false,
            ..known.clone()
        };
        assert_eq!(
            session_args(&words(&["--output-format", "stream-json"]), &known),
            Some(words(&["--session", "4f1c-session"]))
        );
        assert_eq!(session_args(&[], &new), Some(Vec::new()));
        for theirs in [
            &["-c"][..],
            &["--session", "x"],
            &["-r", "x"],
            &["--agent", "a"],
        ] {
            assert_eq!(session_args(&words(theirs), &known), None, "{theirs:?}");
        }
    }

    /// Only Kimi Code's own resume hint names a session, and only an id that is one plain word.
    #[test]
    fn the_session_is_read_from_kimi_codes_own_hint() {
        let hint = |id: &str| {
            json!({"role": "meta", "type": "session.resume_hint", "session_id": id,
                   "command": format!("kimi -r {id}")})
            .to_string()
        };
        assert_eq!(
            session_in_output(&hint("a1b2-c3_d4")).as_deref(),
            Some("a1b2-c3_d4")
        );
        for bad in ["--yolo", "", "a b", "../x", &"x".repeat(129)] {
            assert_eq!(session_in_output(&hint(bad)), None, "{bad:?}");
        }
        // What the model says is inside an object of another role, or a string.
        let said = json!({"role": "assistant", "content": hint("forged")}).to_string();
        assert_eq!(session_in_output(&said), None);
        assert_eq!(session_in_output("not json"), None);
    }

    #[test]
    fn a_private_home_links_the_users_and_adds_the_bridge_and_guidance() {
        let fixture = Fixture::new(Family::Kimi);
        let user = fixture.home().join(".kimi-code");
        std::fs::create_dir_all(user.join("skills")).unwrap();
        std::fs::write(user.join("config.toml"), "default_model = \"mine\"\n").unwrap();
        std::fs::write(user.join(AGENTS_FILE), "Mine first.\n").unwrap();
        std::fs::write(
            user.join(MCP_FILE),
            r#"{"mcpServers": {"mine": {"command": "mine"}}}"#,
        )
        .unwrap();
        let before = std::fs::read(user.join(MCP_FILE)).unwrap();
        let wiring = wire(Family::Kimi, &fixture.launch(&[])).unwrap();
        let home = fixture.guide.dir.join(HOME_DIR);
        assert_eq!(
            wiring.env,
            vec![("KIMI_CODE_HOME".to_string(), home.display().to_string())]
        );
        for linked in ["config.toml", "skills", SESSIONS] {
            assert_eq!(
                std::fs::read_link(home.join(linked)).unwrap(),
                user.join(linked),
                "{linked}"
            );
        }
        let mcp: Value =
            serde_json::from_str(&std::fs::read_to_string(home.join(MCP_FILE)).unwrap()).unwrap();
        assert_eq!(mcp["mcpServers"]["mine"]["command"], "mine");
        assert_eq!(
            mcp["mcpServers"]["agentteam"]["args"],
            json!(["mcp", "stdio"])
        );
        let agents = std::fs::read_to_string(home.join(AGENTS_FILE)).unwrap();
        let guidance = std::fs::read_to_string(&fixture.guide.guidance).unwrap();
        assert_eq!(agents, format!("Mine first.\n\n{guidance}"));
        assert_eq!(std::fs::read(user.join(MCP_FILE)).unwrap(), before);
        assert!(wiring.notices.is_empty());
    }

    #[test]
    fn an_mcp_file_it_cannot_extend_is_left_alone() {
        let fixture = Fixture::new(Family::Kimi);
        let user = fixture.home().join(".kimi-code");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join(MCP_FILE), "[1]").unwrap();
        let wiring = wire(Family::Kimi, &fixture.launch(&[])).unwrap();
        assert!(wiring.env.is_empty());
        assert!(wiring.notices[0].contains("not wired"));
    }

    #[test]
    fn only_kimi_codes_version_passes() {
        assert!(is_kimi_code_version("2.1.0"));
        assert!(is_kimi_code_version("10.0.0-beta.1"));
        assert!(!is_kimi_code_version("1.52.0"));
        assert!(!is_kimi_code_version(
            "kimi-cli is no longer maintained. Please use the new Kimi Code CLI."
        ));
        assert!(!is_kimi_code_version(""));
        assert!(!is_kimi_code_version("2"));
    }
}
