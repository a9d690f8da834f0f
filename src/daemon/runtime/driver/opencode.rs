//! OpenCode (verified with 1.18.33).
//!
//! Everything travels in `OPENCODE_CONFIG_CONTENT`, the configuration OpenCode merges last, over
//! the user's global, `OPENCODE_CONFIG` and project files (all of which stay in force); a value
//! the user already put in that variable is kept and ours is merged into it.
//! - MCP: `mcp.mcp_agentteam` runs the stdio bridge as a `local` server: the model sees
//!   `mcp_agentteam_<tool>`. (A `remote` entry with `{file:…}` reads the token once at load and
//!   OpenCode's local `GET /config` would show it: not used.)
//! - Guidance: `instructions: [FILE]`; OpenCode joins every source's `instructions`.
//! - Skill: `skills.paths`, which a later source replaces: the user's own paths (from the files
//!   this driver can read) are listed before ours.
//! - Exec: `permission.bash` rules `"agentteam exec <domain> <action> *": "allow"`, after the
//!   user's own (the last matching rule wins in OpenCode). A user's catch-all `bash` setting is
//!   kept as the first rule; with no `bash` setting OpenCode's default (every command allowed)
//!   stays as it is. A `permission` the driver cannot read or extend is left alone, without
//!   pre-approval, and said on stderr.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{Launch, Unasked, Wiring, parse_jsonc, read_user_file};
use crate::contract::tool_guidance::NAMESPACE;

const CONTENT: &str = "OPENCODE_CONFIG_CONTENT";

/// A delivered conversation's session: OpenCode takes no id for a new session, so a first run
/// gets nothing and its id is read from its `--format json` output ([`session_in_output`]); a
/// known one is continued with `run --session ID` (placed after `run`, at the returned index of
/// `args`). The person's own `--session`, `--continue` or `--fork` stays theirs, and a command
/// other than `run` gets nothing.
pub(super) fn session_args(
    args: &[String],
    session: &super::RuntimeSession,
) -> Option<(usize, Vec<String>)> {
    let run = args.iter().position(|a| a == "run")?;
    if args[..run].iter().any(|a| !a.starts_with('-'))
        || super::has_flag(args, &["-s", "--session", "-c", "--continue", "--fork"])
    {
        return None;
    }
    match session.known {
        true => Some((run + 1, vec!["--session".into(), session.id.clone()])),
        false => Some((run + 1, Vec::new())),
    }
}

/// The session id a line of `opencode run --format json` output carries (every line does).
pub(super) fn session_in_output(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    let id = value.get("sessionID")?.as_str()?;
    let valid = id.len() <= 128
        && id.starts_with("ses_")
        && id[4..].bytes().all(|b| b.is_ascii_alphanumeric());
    valid.then(|| id.to_string())
}

/// OpenCode runs every command and tool its permission rules do not stop: a destructive
/// `agentteam exec` asks only under the user's own catch-all `bash` rule of `ask` or `deny`, and
/// the driver sets no rule that makes an MCP tool ask.
pub(super) fn unasked(launch: &Launch) -> Unasked {
    let user = UserConfig::read(launch);
    let catch_all = match user.permission.as_ref().and_then(|p| p.get("bash")) {
        Some(Value::String(all)) => Some(all.as_str()),
        Some(Value::Object(rules)) => rules.get("*").and_then(Value::as_str),
        _ => None,
    };
    let exec = match catch_all {
        Some("ask" | "deny") if user.unreadable.is_none() => None,
        _ => Some(
            "OpenCode runs every command its permission rules allow, and yours allow this one"
                .to_string(),
        ),
    };
    Unasked {
        exec,
        mcp: Some("OpenCode calls MCP tools without asking".to_string()),
    }
}

pub(super) fn wire(launch: &Launch) -> io::Result<Wiring> {
    let mut notices = Vec::new();
    let user = UserConfig::read(launch);
    let mut ours = json!({
        "mcp": { format!("mcp_{NAMESPACE}"): {
            "type": "local",
            "command": [launch.executable.display().to_string(), "mcp", "stdio"],
            "environment": launch.bridge_env(),
            "enabled": true,
        }},
        "instructions": [launch.guide.guidance.display().to_string()],
    });
    if let Some(skills) = launch.guide.skills() {
        let mut paths = user.skill_paths.clone();
        paths.push(Value::from(skills.display().to_string()));
        ours["skills"] = json!({ "paths": paths });
    }
    match user.bash_rules(launch.preapproved) {
        Ok(Some(rules)) => ours["permission"] = json!({ "bash": rules }),
        Ok(None) => {}
        Err(why) => notices.push(format!(
            "`agentteam exec` is not pre-approved under OpenCode: {why}; it asks as your other commands do"
        )),
    }
    let content = match launch.var(CONTENT) {
        None => ours,
        Some(theirs) => match parse_jsonc(theirs) {
            Some(Value::Object(mut theirs)) => {
                merge_into(&mut theirs, ours);
                notices.push(format!(
                    "your {CONTENT} is kept; AgentTeam's settings are merged into it"
                ));
                Value::Object(theirs)
            }
            _ => {
                notices.push(format!(
                    "your {CONTENT} is not a JSON object, so it is left as it is and OpenCode is not wired for AgentTeam"
                ));
                return Ok(Wiring {
                    notices,
                    ..Wiring::default()
                });
            }
        },
    };
    Ok(Wiring {
        args: Vec::new(),
        user_args: None,
        env: vec![(CONTENT.into(), content.to_string())],
        notices,
        homes: Vec::new(),
    })
}

/// What the user's own OpenCode configuration files set that ours would replace.
#[derive(Debug, Default)]
struct UserConfig {
    /// `skills.paths` of every file, in load order.
    skill_paths: Vec<Value>,
    /// The last file's `permission` value that set one (load order).
    permission: Option<Value>,
    /// A file that exists but could not be read as JSON(C).
    unreadable: Option<PathBuf>,
}

impl UserConfig {
    /// The files OpenCode loads before our content, in its order: the global directory's
    /// `config.json`, `opencode.json`, `opencode.jsonc`, then `OPENCODE_CONFIG`, then the working
    /// directory's `opencode.json(c)` and `.opencode/opencode.json(c)`.
    fn read(launch: &Launch) -> UserConfig {
        let global = launch
            .var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| launch.var("HOME").map(|h| Path::new(h).join(".config")))
            .map(|dir| dir.join("opencode"));
        let mut files: Vec<PathBuf> = Vec::new();
        if let Some(global) = &global {
            for name in ["config.json", "opencode.json", "opencode.jsonc"] {
                files.push(global.join(name));
            }
        }
        if let Some(file) = launch.var("OPENCODE_CONFIG") {
            files.push(launch.workdir.join(file));
        }
        for dir in [
            launch.workdir.to_path_buf(),
            launch.workdir.join(".opencode"),
        ] {
            for name in ["opencode.json", "opencode.jsonc"] {
                files.push(dir.join(name));
            }
        }
        let mut user = UserConfig::default();
        for file in files {
            let Some(text) = read_user_file(&file) else {
                continue;
            };
            let Some(value) = parse_jsonc(&text) else {
                user.unreadable = Some(file);
                continue;
            };
            if let Some(paths) = value.pointer("/skills/paths").and_then(Value::as_array) {
                user.skill_paths.extend(paths.iter().cloned());
            }
            if let Some(permission) = value.get("permission") {
                user.permission = Some(merged(user.permission.take(), permission.clone()));
            }
        }
        user
    }

    /// The `permission.bash` object to merge last: our allow rules after the user's catch-all.
    /// `Ok(None)` when nothing is to be pre-approved.
    fn bash_rules(&self, prefixes: &[String]) -> Result<Option<Value>, String> {
        if prefixes.is_empty() {
            return Ok(None);
        }
        if let Some(file) = &self.unreadable {
            return Err(format!("{} could not be read as JSON", file.display()));
        }
        let mut rules = Map::new();
        match self.permission.as_ref() {
            None => {}
            Some(Value::Object(permission)) => match permission.get("bash") {
                None | Some(Value::Object(_)) => {}
                Some(Value::String(all)) => {
                    rules.insert("*".into(), Value::from(all.as_str()));
                }
                Some(_) => return Err("your `permission.bash` has an unknown form".into()),
            },
            Some(_) => return Err("your `permission` is not an object".into()),
        }
        for prefix in prefixes {
            rules.insert(format!("{prefix} *"), Value::from("allow"));
        }
        Ok(Some(Value::Object(rules)))
    }
}

/// `later` merged over `earlier`, objects key by key (OpenCode's deep merge).
fn merged(earlier: Option<Value>, later: Value) -> Value {
    match (earlier, later) {
        (Some(Value::Object(mut earlier)), Value::Object(later)) => {
            merge_into(&mut earlier, Value::Object(later));
            Value::Object(earlier)
        }
        (_, later) => later,
    }
}

/// Merges `ours` into `theirs`: objects key by key; `instructions` and `skills.paths` joined
/// (theirs first); any other value of ours in place of theirs.
fn merge_into(theirs: &mut Map<String, Value>, ours: Value) {
    let Value::Object(ours) = ours else { return };
    for (key, value) in ours {
        match (theirs.get_mut(&key), value) {
            (Some(Value::Object(mine)), Value::Object(add)) => merge_into(mine, Value::Object(add)),
            (Some(Value::Array(mine)), Value::Array(add))
                if key == "instructions" || key == "paths" =>
            {
                for item in add {
                    if !mine.contains(&item) {
                        mine.push(item);
                    }
                }
            }
            (_, value) => {
                theirs.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::Fixture;
    use super::super::{Family, wire};
    use super::*;

    #[test]
    fn a_delivered_session_is_continued_after_run_once_its_output_named_it() {
        let args = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let mut session = super::super::RuntimeSession {
            id: "ses_abc".into(),
            known: false,
        };
        let run = args(&["run", "--format", "json"]);
        assert_eq!(session_args(&run, &session), Some((1, Vec::new())));
        session.known = true;
        assert_eq!(
            session_args(&run, &session),
            Some((1, args(&["--session", "ses_abc"])))
        );
        assert_eq!(
            session_args(&args(&["--pure", "run"]), &session),
            Some((2, args(&["--session", "ses_abc"])))
        );
        for own in [
            &["run", "-c"][..],
            &["run", "--session=x"],
            &["serve"],
            &["x", "run"],
        ] {
            assert_eq!(session_args(&args(own), &session), None, "{own:?}");
        }
        assert_eq!(
            session_in_output(r#"{"type":"text","sessionID":"ses_01AbC"}"#).as_deref(),
            Some("ses_01AbC")
        );
        for line in [
            r#"{"sessionID":"other"}"#,
            r#"{"sessionID":"ses_a b"}"#,
            "ses_x",
            "",
        ] {
            assert_eq!(session_in_output(line), None, "{line}");
        }
    }

    fn content(wiring: &Wiring) -> Value {
        assert_eq!(wiring.env[0].0, CONTENT);
        serde_json::from_str(&wiring.env[0].1).unwrap()
    }

    #[test]
    fn the_bridge_guidance_skill_and_rules_merge_over_the_users_files() {
        let fixture = Fixture::new(Family::Opencode);
        let wiring = wire(Family::Opencode, &fixture.launch(&[])).unwrap();
        let config = content(&wiring);
        assert_eq!(
            config["mcp"]["mcp_agentteam"]["command"],
            json!(["/opt/agent team/agentteam", "mcp", "stdio"])
        );
        assert_eq!(
            config["instructions"],
            json!([fixture.guide.guidance.display().to_string()])
        );
        assert_eq!(
            config["skills"]["paths"],
            json!([fixture.guide.skills().unwrap().display().to_string()])
        );
        let bash = config["permission"]["bash"].as_object().unwrap();
        assert_eq!(bash["agentteam exec task create *"], "allow");
        assert!(
            !bash.contains_key("*"),
            "OpenCode's default stays the user's"
        );
        assert!(!bash.keys().any(|k| k.contains("task cancel")));
        assert!(wiring.notices.is_empty());
    }

    #[test]
    fn the_users_catch_all_skill_paths_and_own_content_are_kept() {
        let mut fixture = Fixture::new(Family::Opencode);
        let global = fixture.home().join(".config/opencode");
        std::fs::create_dir_all(&global).unwrap();
        std::fs::write(
            global.join("opencode.jsonc"),
            "{\n  // mine\n  \"permission\": {\"bash\": \"ask\"},\n  \"skills\": {\"paths\": [\"/mine/skills\",]},\n}\n",
        )
        .unwrap();
        fixture.env.push((
            CONTENT.into(),
            r#"{"model":"mine/m","instructions":["/mine.md"]}"#.into(),
        ));
        let wiring = wire(Family::Opencode, &fixture.launch(&[])).unwrap();
        let config = content(&wiring);
        assert_eq!(config["model"], "mine/m");
        assert_eq!(
            config["instructions"],
            json!(["/mine.md", fixture.guide.guidance.display().to_string()])
        );
        assert_eq!(config["skills"]["paths"][0], "/mine/skills");
        let bash = config["permission"]["bash"].as_object().unwrap();
        let keys: Vec<&String> = bash.keys().collect();
        assert_eq!((keys[0].as_str(), &bash["*"]), ("*", &json!("ask")));
        assert!(wiring.notices[0].contains("kept"));
    }

    #[test]
    fn a_permission_that_cannot_be_extended_gets_no_rule() {
        let fixture = Fixture::new(Family::Opencode);
        std::fs::write(
            fixture.dir.path().join("opencode.json"),
            r#"{"permission": "deny"}"#,
        )
        .unwrap();
        let wiring = wire(Family::Opencode, &fixture.launch(&[])).unwrap();
        assert!(content(&wiring).get("permission").is_none());
        assert!(wiring.notices[0].contains("not pre-approved"));
    }

    #[test]
    fn jsonc_comments_and_trailing_commas_are_read() {
        assert_eq!(
            parse_jsonc("{/* a */ \"a\": \"//x\", // b\n \"b\": [1, 2,],}"),
            Some(json!({"a": "//x", "b": [1, 2]}))
        );
        assert_eq!(parse_jsonc("{"), None);
    }
}
