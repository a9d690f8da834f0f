//! Runtime drivers: how `agentteam run` points a runtime at both bridges, in the runtime's own
//! configuration format, with no hand-editing: its own MCP client at the daemon's MCP route, the
//! launch's compiled guidance (`guidance.rs`) and memory skill where its model reads them, and a
//! pre-approval of `agentteam exec` for its own shell tool.
//!
//! The rules every driver keeps:
//! - The user's setup keeps working: no user setting is removed or overridden, guidance goes after
//!   the user's own instructions, and nothing is written into the user's files (a user file is
//!   only ever read, to keep what it sets).
//! - Nothing wider than asked: pre-approval names `agentteam exec <domain> <action>` prefixes from
//!   the launch's catalog, never a destructive action, never another command.
//! - The bearer is never written into a configuration, an argument or an environment value: the
//!   configurations name the header helper (`agentteam mcp headers --url ROUTE --token-file PATH`,
//!   which checks the route before it reads the file) or the stdio bridge (`agentteam mcp stdio`)
//!   by the daemon's own executable's absolute path (Codex runs a helper with a cleared
//!   environment, so a `PATH` lookup would fail), and the helper or bridge reads the file at every
//!   use (rotation needs no restart).
//! - What a driver did that a user should know goes into `Wiring::notices`, which `agentteam run`
//!   prints on stderr (its stdout is the runtime's).
//!
//! Generated files live in the launch's private directories and go with them. Per family
//! (verified against the pinned versions ARCHITECTURE.md names): `claude.rs`, `codex.rs`,
//! `opencode.rs`, `kimi.rs`, `copilot.rs`, `gemini.rs`; generic gets the environment only.

mod claude;
mod codex;
mod copilot;
mod gemini;
mod kimi;
mod opencode;
mod private_home;

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use codex::{Seen, ThreadWatch, app_server as codex_app_server};
pub use kimi::{
    check_program as check_kimi, recipe_refusal as kimi_recipe_refusal,
    turn_prompt as kimi_turn_prompt,
};

use super::guidance::GuideFiles;
pub use crate::contract::preapproval::{EXEC_ALIAS, Unasked, preapproved_prefixes};
use crate::contract::tool_guidance::RuntimeNaming;
pub use private_home::PrivateHome;

/// The runtime families `agentteam run --runtime` wires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Chosen from the program's name (`claude`, `codex`, `opencode`, `kimi`, `copilot`,
    /// `gemini`), else from the agent profile's runtime family, else generic
    Auto,
    /// The environment only (`AGENTTEAM_MCP_URL`, `AGENTTEAM_MCP_TOKEN_FILE`, …)
    #[default]
    Generic,
    /// Claude Code: `--mcp-config` with a header helper, the guidance, the skill, `Bash` rules
    Claude,
    /// Codex: `-c` overrides (MCP with a header helper, `developer_instructions`)
    Codex,
    /// OpenCode: `OPENCODE_CONFIG_CONTENT` (the stdio bridge, instructions, skills, `bash` rules)
    Opencode,
    /// Kimi Code: a private `KIMI_CODE_HOME` linking the user's (the stdio bridge, `AGENTS.md`)
    Kimi,
    /// Copilot CLI: `--additional-mcp-config` (the stdio bridge), instructions and skill
    Copilot,
    /// Gemini CLI: a private `GEMINI_CLI_HOME` linking the user's (the stdio bridge, `GEMINI.md`,
    /// `run_shell_command` rules)
    Gemini,
}

impl Family {
    /// The family `Auto` stands for, for `program` and an agent profile's runtime family, and
    /// how it was chosen; any other family is itself.
    pub fn resolve(self, program: &str, profile: &str) -> (Family, &'static str) {
        if self != Family::Auto {
            return (self, "as asked");
        }
        let name = Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        let by_name = |name: &str| match name {
            "claude" => Some(Family::Claude),
            "codex" => Some(Family::Codex),
            "opencode" => Some(Family::Opencode),
            "kimi" => Some(Family::Kimi),
            "copilot" => Some(Family::Copilot),
            "gemini" => Some(Family::Gemini),
            _ => None,
        };
        if let Some(family) = by_name(name) {
            (family, "from the program's name")
        } else if let Some(family) = by_name(profile) {
            (family, "from the agent's runtime family")
        } else {
            (Family::Generic, "no driver knows the program")
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Auto => "auto",
            Family::Generic => "generic",
            Family::Claude => "claude",
            Family::Codex => "codex",
            Family::Opencode => "opencode",
            Family::Kimi => "kimi",
            Family::Copilot => "copilot",
            Family::Gemini => "gemini",
        }
    }

    /// How this runtime names MCP tools to its model.
    pub fn naming(self) -> RuntimeNaming {
        match self {
            Family::Claude | Family::Codex => RuntimeNaming::Claude,
            Family::Opencode => RuntimeNaming::Opencode,
            Family::Kimi => RuntimeNaming::Kimi,
            Family::Copilot => RuntimeNaming::Copilot,
            Family::Gemini => RuntimeNaming::Gemini,
            Family::Auto | Family::Generic => RuntimeNaming::Raw,
        }
    }

    /// The runtime's own shell tool, as its model sees it.
    pub fn shell_tool(self) -> Option<&'static str> {
        match self {
            Family::Claude | Family::Kimi => Some("Bash"),
            Family::Codex => Some("exec_command"),
            Family::Opencode | Family::Copilot => Some("bash"),
            Family::Gemini => Some("run_shell_command"),
            Family::Auto | Family::Generic => None,
        }
    }

    /// Whether the driver hands the runtime skills of its own for one launch, beside the user's.
    pub fn loads_skills(self) -> bool {
        matches!(self, Family::Claude | Family::Opencode | Family::Copilot)
    }

    /// The name `agentteam exec` also runs under in this runtime's launches, pre-approved where
    /// `agentteam exec` itself cannot be: Copilot CLI approves a command by its first word only.
    pub fn exec_alias(self) -> Option<&'static str> {
        (self == Family::Copilot).then_some(EXEC_ALIAS)
    }

    /// Who reads this runtime's guidance.
    pub fn reader(self) -> super::guidance::Reader {
        super::guidance::Reader {
            naming: self.naming(),
            shell_tool: self.shell_tool(),
            exec_alias: self.exec_alias(),
        }
    }
}

/// What the driver of one launch works with.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    /// The launch's credential directory (0700): generated configurations go here.
    pub dir: &'a Path,
    /// The launch's guidance files (a directory with no token in it).
    pub guide: &'a GuideFiles,
    /// The daemon's own executable (absolute).
    pub executable: &'a Path,
    /// The launch's MCP route.
    pub mcp_url: &'a str,
    /// Its MCP token file.
    pub token_file: &'a Path,
    /// The user's own arguments to the runtime (after the program).
    pub args: &'a [String],
    /// The launching shell's environment (the user's `HOME`, their configuration variables).
    pub env: &'a [(String, String)],
    /// The working directory.
    pub workdir: &'a Path,
    /// `agentteam exec` command prefixes that may run without asking.
    pub preapproved: &'a [String],
    /// The user asked for Codex's sandbox to allow network access (`--sandbox-network`).
    pub sandbox_network: bool,
}

impl Launch<'_> {
    /// The launching environment's value of `name`.
    fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The environment the stdio bridge (`agentteam mcp stdio`) reads: the MCP route and its
    /// token file's path, never the token.
    fn bridge_env(&self) -> serde_json::Value {
        serde_json::json!({
            "AGENTTEAM_MCP_URL": self.mcp_url,
            "AGENTTEAM_MCP_TOKEN_FILE": self.token_file.display().to_string(),
        })
    }

    /// An `mcpServers` entry that runs the stdio bridge, in the `{command, args, env}` form Kimi
    /// Code, Gemini CLI and Copilot CLI take, with `extra`, the runtime's own fields, added.
    fn stdio_bridge(&self, extra: serde_json::Value) -> serde_json::Value {
        let mut entry = serde_json::json!({
            "command": self.executable.display().to_string(),
            "args": ["mcp", "stdio"],
            "env": self.bridge_env(),
        });
        if let (Some(entry), serde_json::Value::Object(extra)) = (entry.as_object_mut(), extra) {
            entry.extend(extra);
        }
        entry
    }

    /// The helper command a runtime runs for the MCP route's headers, as one shell string.
    fn header_helper(&self) -> String {
        let exe = self.executable.display().to_string();
        let token = self.token_file.display().to_string();
        [
            exe.as_str(),
            "mcp",
            "headers",
            "--url",
            self.mcp_url,
            "--token-file",
            &token,
        ]
        .iter()
        .map(|word| shell_word(word))
        .collect::<Vec<_>>()
        .join(" ")
    }
}

/// How a launch's command line and environment change to reach the daemon.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Wiring {
    /// Inserted right after the program (before the user's own arguments).
    pub args: Vec<String>,
    /// The user's own arguments, when the driver appended to one of them (Codex's
    /// `developer_instructions`); `None` keeps them as they are.
    pub user_args: Option<Vec<String>>,
    /// Added to the runtime's environment (no secret).
    pub env: Vec<(String, String)>,
    /// What the driver did that the user should know, one line each, for stderr.
    pub notices: Vec<String>,
    /// Homes of the runtime's made private for the launch: what the runtime wrote there itself
    /// goes back to the user's at its end.
    pub homes: Vec<PrivateHome>,
}

/// Whether `args` (the user's own arguments) hold one of `flags`, alone or as `flag=value`.
fn has_flag(args: &[String], flags: &[&str]) -> bool {
    args.iter().any(|arg| {
        flags.iter().any(|flag| {
            arg == flag
                || arg
                    .strip_prefix(flag)
                    .is_some_and(|rest| rest.starts_with('='))
        })
    })
}

/// The value of the option `name` in `args` (`name VALUE` or `name=VALUE`), the last one given.
fn option_value<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut found = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        for name in names {
            if word == name {
                found = words.clone().next().map(String::as_str);
            } else if let Some(value) = word
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
            {
                found = Some(value);
            }
        }
    }
    found
}

impl Wiring {
    /// Nothing wired, and why (for stderr): the runtime starts with the environment only.
    fn not_wired(why: impl Into<String>) -> Wiring {
        Wiring {
            notices: vec![why.into()],
            ..Wiring::default()
        }
    }
}

/// Writes `family`'s configuration for `launch` and says how to point the runtime at it.
pub fn wire(family: Family, launch: &Launch) -> io::Result<Wiring> {
    match family {
        Family::Auto | Family::Generic => Ok(Wiring::default()),
        Family::Claude => claude::wire(launch),
        Family::Codex => codex::wire(launch),
        Family::Opencode => opencode::wire(launch),
        Family::Kimi => kimi::wire(launch),
        Family::Copilot => copilot::wire(launch),
        Family::Gemini => gemini::wire(launch),
    }
}

/// A runtime session of a delivered conversation: its id, and whether a run of it ended well
/// before (so the runtime has it to resume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSession {
    pub id: String,
    pub known: bool,
}

/// Puts a run of `family` (its command `argv`, the program first) in `session`: a new session
/// with that id, or the known one resumed; what it did, for stderr. `None` where the driver does
/// not resume that runtime's sessions, or where the person's arguments already choose a session
/// (theirs stays).
pub fn put_in_session(
    family: Family,
    argv: &mut Vec<String>,
    session: &RuntimeSession,
) -> Option<String> {
    let args = argv.get(1..).unwrap_or_default();
    let prefixed = |words: Vec<String>| words.into_iter().chain(args.iter().cloned()).collect();
    let placed: Vec<String> = match family {
        Family::Claude => prefixed(claude::session_args(args, session)?),
        Family::Gemini => prefixed(gemini::session_args(args, session)?),
        Family::Copilot => prefixed(copilot::session_args(args, session)?),
        Family::Opencode => {
            let (at, words) = opencode::session_args(args, session)?;
            let mut placed = args.to_vec();
            placed.splice(at..at, words);
            placed
        }
        Family::Codex => codex::session_args(args, session)?,
        Family::Kimi => prefixed(kimi::session_args(args, session)?),
        _ => return None,
    };
    let said = if names_its_sessions_always(family) && !session.known {
        "this run starts a new session, whose id its output names".to_string()
    } else if session.known {
        format!("this run resumes the conversation's session {}", session.id)
    } else {
        format!("this run starts the conversation's session {}", session.id)
    };
    argv.truncate(1);
    argv.extend(placed);
    Some(said)
}

/// A new session by `--session-id ID`, a known one by `--resume ID` (Claude Code's and Gemini
/// CLI's flags); nothing where the person's own arguments hold one of `own`.
fn id_then_resume(args: &[String], own: &[&str], session: &RuntimeSession) -> Option<Vec<String>> {
    if has_flag(args, own) {
        return None;
    }
    let flag = if session.known {
        "--resume"
    } else {
        "--session-id"
    };
    Some(vec![flag.to_string(), session.id.clone()])
}

/// Whether `family` names a new session itself (the driver cannot choose its id).
fn names_its_sessions_always(family: Family) -> bool {
    matches!(family, Family::Opencode | Family::Codex | Family::Kimi)
}

/// Whether `family` run as `argv` (the program first) names its own session in a JSON output,
/// so the deliverer reads the id there ([`session_in_output`]): OpenCode's `--format json` and
/// Codex's `--json` on their first line, Kimi Code's `--output-format stream-json` on a line of
/// its own after the turn ([`session_on_first_line`]). Without it the output is the model's
/// text, never read.
pub fn names_its_sessions(family: Family, argv: &[String]) -> bool {
    let args = argv.get(1..).unwrap_or_default();
    match family {
        Family::Opencode => option_value(args, &["--format"]) == Some("json"),
        Family::Codex => has_flag(args, &["--json"]),
        Family::Kimi => option_value(args, &["--output-format"]) == Some("stream-json"),
        _ => false,
    }
}

/// Whether only the first line of `family`'s output may name its session: the runtime's own
/// event, before anything the model wrote. Kimi Code names it last, in an object of its own.
pub fn session_on_first_line(family: Family) -> bool {
    family != Family::Kimi
}

/// The runtime session a line of `family`'s output names, where it names its own sessions.
pub fn session_in_output(family: Family, line: &str) -> Option<String> {
    match family {
        Family::Opencode => opencode::session_in_output(line),
        Family::Codex => codex::session_in_output(line),
        Family::Kimi => kimi::session_in_output(line),
        _ => None,
    }
}

/// Where `family`, launched as `launch` says, would run a destructive AgentTeam call without
/// asking its person (the daemon refuses those calls of the launch). A generic program runs what
/// its author wrote: nothing is refused for it.
pub fn unasked(family: Family, launch: &Launch) -> Unasked {
    match family {
        Family::Auto | Family::Generic => Unasked::default(),
        Family::Claude => claude::unasked(launch.args),
        Family::Codex => codex::unasked(),
        Family::Opencode => opencode::unasked(launch),
        Family::Kimi => kimi::unasked(launch.args),
        Family::Copilot => copilot::unasked(launch.args),
        Family::Gemini => gemini::unasked(launch.args),
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

/// JSON with comments and trailing commas, as OpenCode and Gemini CLI read their files.
fn parse_jsonc(text: &str) -> Option<serde_json::Value> {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            plain.push(c);
            match c {
                '\\' => plain.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                plain.push(c);
            }
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        plain.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            (',', _) => {
                // A trailing comma: the next visible character closes the object or array.
                let next = chars.clone().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}' | ']')) {
                    plain.push(c);
                }
            }
            _ => plain.push(c),
        }
    }
    serde_json::from_str(&plain).ok()
}

/// The text of a user's configuration file, when it exists and is small enough to be one
/// (read-only; a file that cannot be read is the same as none).
fn read_user_file(path: &Path) -> Option<String> {
    const MAX_USER_CONFIG: u64 = 1024 * 1024;
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_USER_CONFIG {
        return None;
    }
    std::io::read_to_string(file).ok()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::daemon::runtime::guidance;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/usr/bin/agentteam"), "/usr/bin/agentteam");
        assert_eq!(shell_word("/a b/agentteam"), "'/a b/agentteam'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn auto_goes_by_the_program_then_the_profile() {
        let auto = |program, profile| Family::Auto.resolve(program, profile).0;
        assert_eq!(
            auto("/opt/x/node_modules/.bin/claude", "codex"),
            Family::Claude
        );
        assert_eq!(auto("codex", "generic"), Family::Codex);
        assert_eq!(auto("opencode", "generic"), Family::Opencode);
        assert_eq!(auto("/home/u/.npm/bin/kimi", "generic"), Family::Kimi);
        assert_eq!(auto("copilot", "generic"), Family::Copilot);
        assert_eq!(auto("/usr/local/bin/gemini", "generic"), Family::Gemini);
        assert_eq!(auto("/usr/bin/env", "opencode"), Family::Opencode);
        assert_eq!(auto("sh", "generic"), Family::Generic);
        assert_eq!(auto("claude-wrapper", "other"), Family::Generic);
        assert_eq!(
            Family::Generic.resolve("claude", "claude").0,
            Family::Generic,
            "generic opts out"
        );
    }

    /// A launch in a fresh directory, with the user's `HOME` there too.
    pub(crate) struct Fixture {
        pub dir: tempfile::TempDir,
        pub guide: GuideFiles,
        pub env: Vec<(String, String)>,
        pub preapproved: Vec<String>,
    }

    impl Fixture {
        pub fn new(family: Family) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("guide")).unwrap();
            std::fs::create_dir(dir.path().join("home")).unwrap();
            let compiled = guidance::compile(family.reader(), &[], family.loads_skills());
            let guide = guidance::write(&dir.path().join("guide"), &compiled).unwrap();
            let env = vec![(
                "HOME".to_string(),
                dir.path().join("home").display().to_string(),
            )];
            Fixture {
                dir,
                guide,
                env,
                preapproved: preapproved_prefixes(&[]),
            }
        }

        pub fn home(&self) -> std::path::PathBuf {
            self.dir.path().join("home")
        }

        pub fn launch<'a>(&'a self, args: &'a [String]) -> Launch<'a> {
            Launch {
                dir: self.dir.path(),
                guide: &self.guide,
                executable: Path::new("/opt/agent team/agentteam"),
                mcp_url: "http://127.0.0.1:7/api/internal/mcp/servers/wsp_1/agents/agt_1",
                token_file: Path::new("/run/t/mcp-token"),
                args,
                env: &self.env,
                workdir: self.dir.path(),
                preapproved: &self.preapproved,
                sandbox_network: false,
            }
        }
    }

    /// The one rule for all six, as each runtime is launched: where it asks its person before a
    /// destructive call (`asks`), and where the daemon refuses one instead, per bridge.
    #[test]
    fn every_runtime_follows_the_one_rule_of_what_runs_unasked() {
        let asks = |family: Family, args: &[&str], user: Option<serde_json::Value>| {
            let fixture = Fixture::new(family);
            if let Some(config) = user {
                let dir = fixture.home().join(".config/opencode");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
            }
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let unasked = unasked(family, &fixture.launch(&args));
            (unasked.exec.is_none(), unasked.mcp.is_none())
        };
        // (family, the user's arguments, the user's OpenCode configuration, (exec asks, mcp asks))
        type Case<'a> = (
            Family,
            &'a [&'a str],
            Option<serde_json::Value>,
            (bool, bool),
        );
        let cases: &[Case] = &[
            (Family::Generic, &[], None, (true, true)),
            (Family::Claude, &["-p", "x"], None, (true, true)),
            (
                Family::Claude,
                &["--dangerously-skip-permissions"],
                None,
                (false, false),
            ),
            (Family::Codex, &["exec", "x"], None, (false, false)),
            (Family::Codex, &[], None, (false, false)),
            (Family::Opencode, &["run", "x"], None, (false, false)),
            (
                Family::Opencode,
                &["run", "x"],
                Some(serde_json::json!({"permission": {"bash": "ask"}})),
                (true, false),
            ),
            (
                Family::Opencode,
                &["run", "x"],
                Some(serde_json::json!({"permission": {"bash": {"*": "deny"}}})),
                (true, false),
            ),
            (Family::Kimi, &["-p", "x"], None, (false, false)),
            (Family::Kimi, &["--yolo"], None, (false, false)),
            (Family::Kimi, &[], None, (true, true)),
            (Family::Copilot, &["-p", "x"], None, (true, true)),
            (
                Family::Copilot,
                &["--allow-all-tools"],
                None,
                (false, false),
            ),
            (Family::Gemini, &["-p", "x"], None, (true, false)),
            (
                Family::Gemini,
                &["--approval-mode=yolo"],
                None,
                (false, false),
            ),
            (Family::Gemini, &["-y"], None, (false, false)),
        ];
        for (family, args, user, expected) in cases {
            assert_eq!(
                asks(*family, args, user.clone()),
                *expected,
                "{family:?} {args:?} {user:?}: (exec asks, mcp asks)"
            );
        }
    }

    #[test]
    fn generic_is_wired_by_the_environment_only() {
        let fixture = Fixture::new(Family::Generic);
        assert_eq!(
            wire(Family::Generic, &fixture.launch(&[])).unwrap(),
            Wiring::default()
        );
    }
}
