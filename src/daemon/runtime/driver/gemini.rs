//! Gemini CLI (verified with 0.61.0).
//!
//! Gemini reads its settings, its global `GEMINI.md` and its policies only from its home
//! (`$GEMINI_CLI_HOME`, else `~`, then `.gemini/`), and has no flag that adds to them: `--policy`
//! and the `policyPaths` setting *replace* the user's policy folder. So a launch gets a private
//! `GEMINI_CLI_HOME` in its guidance directory whose `.gemini/` links every entry of the user's
//! own (their trusted folders, login, history, chats: a link, never a copy, so the runtime's own
//! writes land where they would without `agentteam`), and holds of its own:
//! - `settings.json`: the user's settings (comments allowed, as Gemini allows them), plus
//!   `mcpServers.agentteam` running the stdio bridge (Gemini has no header helper) with
//!   `trust: true` on that entry alone (a headless Gemini offers no untrusted server's tools);
//!   the model sees `mcp_agentteam_<tool>`.
//! - the global context file (`GEMINI.md`, or the first name the user's `context.fileName`
//!   gives): the user's own text, then the guidance, which also carries the memory skill (Gemini
//!   loads skills only from its home, and a headless Gemini offers `activate_skill` only under a
//!   policy that allows it, which the driver does not add).
//! - `policies/`: a link to each of the user's policy files, plus `agentteam-exec-preapproval.toml`
//!   (`POLICY_FILE`), one `run_shell_command` allow rule per pre-approved
//!   `agentteam exec <domain> <action>` prefix, at the lowest priority, so a rule of the user's
//!   decides first. Gemini splits a chained command and checks each part. Where the user replaced
//!   the folder (their own `--policy`, or `policyPaths`), the rule file is added beside theirs the
//!   same way.
//!
//! The driver never trusts a folder for the user (no `--skip-trust`, no
//! `GEMINI_CLI_TRUST_WORKSPACE`): in a folder the user's `trustedFolders.json` does not trust, a
//! headless Gemini refuses to start, and stderr says so first.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{
    Launch, PrivateHome, Unasked, Wiring, has_flag, option_value, parse_jsonc, read_user_file,
};
use crate::contract::tool_guidance::NAMESPACE;

/// The private home's directory name in the guidance directory.
pub const HOME_DIR: &str = "gemini-home";
const DOT: &str = ".gemini";
const SETTINGS: &str = "settings.json";
const POLICIES: &str = "policies";
const TRUSTED_FOLDERS: &str = "trustedFolders.json";
/// Gemini's default global context file.
const CONTEXT_FILE: &str = "GEMINI.md";
/// The rule file the driver adds (a name a user's own policy file is unlikely to have: theirs of
/// that name would not be linked).
pub const POLICY_FILE: &str = "agentteam-exec-preapproval.toml";
/// Made in the user's `.gemini` when missing: where Gemini writes its chats and history.
const WRITTEN: [&str; 2] = ["tmp", "history"];
/// What else `GEMINI_CLI_HOME` relocates beside `.gemini`: linked from the user's home.
const BESIDE: [&str; 2] = [".agents", ".env"];

/// A delivered conversation's session: `--session-id ID` starts it, `--resume ID` continues it
/// (Gemini looks it up among the working folder's chats). The person's own `--resume`,
/// `--session-id` or `--session-file` stays theirs.
pub(super) fn session_args(
    args: &[String],
    session: &super::RuntimeSession,
) -> Option<Vec<String>> {
    super::id_then_resume(
        args,
        &["-r", "--resume", "--session-id", "--session-file"],
        session,
    )
}

/// Gemini CLI asks before a shell command no policy allows (headless: it does not offer it),
/// unless in yolo mode; the tools of the `agentteam` server are trusted (a headless Gemini offers
/// no other server's), so it calls every one of them without asking.
pub(super) fn unasked(args: &[String]) -> Unasked {
    let trusted = "Gemini CLI calls every tool of a trusted MCP server without asking".to_string();
    let yolo = has_flag(args, &["-y", "--yolo"])
        || option_value(args, &["--approval-mode"]) == Some("yolo");
    Unasked {
        exec: yolo.then(|| "Gemini CLI runs every command without asking in yolo mode".to_string()),
        mcp: Some(trusted),
    }
}

pub(super) fn wire(launch: &Launch) -> io::Result<Wiring> {
    let Some(user_root) = launch
        .var("GEMINI_CLI_HOME")
        .or_else(|| launch.var("HOME"))
        .map(PathBuf::from)
    else {
        return Ok(Wiring::not_wired(
            "Gemini CLI is not wired: neither GEMINI_CLI_HOME nor HOME is set",
        ));
    };
    let user_dot = user_root.join(DOT);
    let settings = match read_user_file(&user_dot.join(SETTINGS)) {
        None => Some(Map::new()),
        Some(text) if text.trim().is_empty() => Some(Map::new()),
        Some(text) => match parse_jsonc(&text) {
            Some(Value::Object(settings)) => Some(settings),
            _ => None,
        },
    };
    let Some(mut settings) = settings else {
        return Ok(Wiring::not_wired(format!(
            "Gemini CLI is not wired: {} is not settings this driver can extend",
            user_dot.join(SETTINGS).display()
        )));
    };
    let servers = settings
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(servers) = servers.as_object_mut() else {
        return Ok(Wiring::not_wired(format!(
            "Gemini CLI is not wired: `mcpServers` in {} is not an object",
            user_dot.join(SETTINGS).display()
        )));
    };
    servers.insert(
        NAMESPACE.into(),
        launch.stdio_bridge(json!({ "trust": true })),
    );
    // The user's home as Gemini would make it on its first run, so its chats land there.
    for dir in WRITTEN {
        if !user_dot.join(dir).is_dir() {
            crate::platform::fs::create_private_dirs(&user_dot.join(dir))?;
        }
    }
    let root = launch.guide.dir.join(HOME_DIR);
    crate::platform::fs::create_private_dir(&root)?;
    for name in BESIDE {
        if std::fs::symlink_metadata(user_root.join(name)).is_ok() {
            crate::platform::fs::symlink(&user_root.join(name), &root.join(name))?;
        }
    }
    let context = context_file(&settings);
    // The user's policy folder is Gemini's unless they replaced it (their own `--policy`, or
    // `policyPaths`): then the rule file goes beside their paths instead.
    let user_replaced_folder = launch
        .args
        .iter()
        .any(|a| a == "--policy" || a.starts_with("--policy="));
    let policy_paths = settings.get("policyPaths").is_some_and(Value::is_array);
    let own_folder = !launch.preapproved.is_empty() && !user_replaced_folder && !policy_paths;
    let mut ours = vec![SETTINGS, context.as_str()];
    if own_folder {
        ours.push(POLICIES);
    }
    let private = PrivateHome::link(&user_dot, &root.join(DOT), &ours)?;
    let dot = private.ours.clone();

    let mut notices = Vec::new();
    if let Some(allowed) = settings
        .get("mcp")
        .and_then(|mcp| mcp.get("allowed"))
        .and_then(Value::as_array)
        && !allowed.iter().any(|name| name.as_str() == Some(NAMESPACE))
    {
        notices.push(format!(
            "your Gemini `mcp.allowed` does not list `{NAMESPACE}`: its MCP tools stay off, as you set"
        ));
    }

    // The pre-approval: beside the user's own rules, never in their place.
    let mut args = Vec::new();
    let rules = policy(launch.preapproved);
    if !launch.preapproved.is_empty() {
        if user_replaced_folder {
            let file = root.join(POLICY_FILE);
            crate::private_file::create_new(&file, &rules)?;
            args.push("--policy".into());
            args.push(file.display().to_string());
        } else if let Some(paths) = settings
            .get_mut("policyPaths")
            .and_then(Value::as_array_mut)
        {
            let file = root.join(POLICY_FILE);
            crate::private_file::create_new(&file, &rules)?;
            paths.push(Value::from(file.display().to_string()));
        } else {
            debug_assert!(own_folder);
            // Gemini does not write there: nothing to give back.
            let policies = PrivateHome::link(
                &user_dot.join(POLICIES),
                &dot.join(POLICIES),
                &[POLICY_FILE],
            )?;
            crate::private_file::create_new(&policies.ours.join(POLICY_FILE), &rules)?;
        }
    }
    let trusted = trusted(launch, &user_dot, &settings);
    crate::private_file::create_new(
        &dot.join(SETTINGS),
        &format!("{:#}\n", Value::Object(settings)),
    )?;
    let guidance = std::fs::read_to_string(&launch.guide.guidance)?;
    let text = match read_user_file(&user_dot.join(&context)) {
        Some(theirs) if !theirs.trim().is_empty() => {
            format!("{}\n\n{guidance}", theirs.trim_end())
        }
        _ => guidance,
    };
    crate::private_file::create_new(&dot.join(&context), &text)?;

    if !trusted {
        notices.push(format!(
            "Gemini CLI does not trust {}: a headless Gemini refuses to start there. agentteam trusts no folder for you: trust it in Gemini itself",
            launch.workdir.display()
        ));
    }
    Ok(Wiring {
        args,
        user_args: None,
        env: vec![("GEMINI_CLI_HOME".into(), root.display().to_string())],
        notices,
        homes: vec![private],
    })
}

/// The rule file: one `run_shell_command` allow rule per `agentteam exec` prefix, at the lowest
/// priority.
fn policy(prefixes: &[String]) -> String {
    let mut text = String::from(
        "# Written by agentteam for one launch: `agentteam exec` actions that are not destructive.\n",
    );
    for prefix in prefixes {
        text.push_str(&format!(
            "\n[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = {}\ndecision = \"allow\"\npriority = 1\n",
            super::toml_string(prefix)
        ));
    }
    text
}

/// The global context file Gemini reads: the first name of the user's `context.fileName`, else
/// `GEMINI.md`.
fn context_file(settings: &Map<String, Value>) -> String {
    let named = settings
        .get("context")
        .and_then(|c| c.get("fileName"))
        .and_then(|name| match name {
            Value::String(name) => Some(name.as_str()),
            Value::Array(names) => names.first().and_then(Value::as_str),
            _ => None,
        })
        .filter(|name| !name.is_empty() && !name.contains('/') && *name != SETTINGS);
    named.unwrap_or(CONTEXT_FILE).to_string()
}

/// Whether Gemini trusts the launch's working directory, as it decides: the check is on unless
/// the user's settings turn it off; `GEMINI_CLI_TRUST_WORKSPACE` decides when set; otherwise the
/// longest rule of the trusted-folders file whose folder holds the directory (`TRUST_PARENT`:
/// the rule's parent), and no rule is untrusted.
fn trusted(launch: &Launch, user_dot: &Path, settings: &Map<String, Value>) -> bool {
    let enabled = settings
        .get("security")
        .and_then(|s| s.get("folderTrust"))
        .and_then(|f| f.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if !enabled {
        return true;
    }
    match launch.var("GEMINI_CLI_TRUST_WORKSPACE") {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    let file = launch
        .var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| user_dot.join(TRUSTED_FOLDERS));
    let Some(rules) = read_user_file(&file).and_then(|text| parse_jsonc(&text)) else {
        return false;
    };
    let workdir = std::fs::canonicalize(launch.workdir).unwrap_or(launch.workdir.to_path_buf());
    let mut best: Option<(usize, bool)> = None;
    for (path, rule) in rules.as_object().into_iter().flatten() {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
        let (folder, trust) = match rule.as_str() {
            Some("TRUST_FOLDER") => (path.clone(), true),
            Some("TRUST_PARENT") => (path.parent().unwrap_or(&path).to_path_buf(), true),
            Some("DO_NOT_TRUST") => (path.clone(), false),
            _ => continue,
        };
        let length = path.as_os_str().len();
        if workdir.starts_with(&folder) && best.is_none_or(|(longest, _)| length > longest) {
            best = Some((length, trust));
        }
    }
    best.is_some_and(|(_, trust)| trust)
}

#[cfg(test)]
mod tests {
    use super::super::tests::Fixture;
    use super::super::{Family, wire};
    use super::*;

    #[test]
    fn a_private_home_links_the_users_and_adds_the_bridge_guidance_and_rules() {
        let fixture = Fixture::new(Family::Gemini);
        let user_dot = fixture.home().join(DOT);
        std::fs::create_dir_all(user_dot.join(POLICIES)).unwrap();
        std::fs::write(
            user_dot.join(SETTINGS),
            "{\n // mine\n \"mcpServers\": {\"mine\": {\"command\": \"x\"}},\n \"model\": {\"name\": \"m\"}\n}",
        )
        .unwrap();
        std::fs::write(user_dot.join(CONTEXT_FILE), "My own rules.\n").unwrap();
        std::fs::write(user_dot.join(POLICIES).join("mine.toml"), "# mine\n").unwrap();
        let workdir = fixture.dir.path().display().to_string();
        std::fs::write(
            user_dot.join(TRUSTED_FOLDERS),
            json!({ workdir: "TRUST_FOLDER" }).to_string(),
        )
        .unwrap();
        std::fs::write(user_dot.join("oauth_creds.json"), "{}").unwrap();
        let wiring = wire(Family::Gemini, &fixture.launch(&[])).unwrap();
        assert!(wiring.notices.is_empty(), "{:?}", wiring.notices);
        assert!(wiring.args.is_empty());
        let root = fixture.guide.dir.join(HOME_DIR);
        assert_eq!(
            wiring.env,
            vec![("GEMINI_CLI_HOME".to_string(), root.display().to_string())]
        );
        let dot = root.join(DOT);
        let settings: Value =
            serde_json::from_str(&std::fs::read_to_string(dot.join(SETTINGS)).unwrap()).unwrap();
        assert_eq!(settings["model"]["name"], "m");
        assert_eq!(settings["mcpServers"]["mine"]["command"], "x");
        let ours = &settings["mcpServers"]["agentteam"];
        assert_eq!(ours["args"], json!(["mcp", "stdio"]));
        assert_eq!(ours["trust"], true);
        assert!(settings["mcpServers"]["mine"].get("trust").is_none());
        let context = std::fs::read_to_string(dot.join(CONTEXT_FILE)).unwrap();
        assert!(context.starts_with("My own rules.\n\n"));
        assert!(context.contains(crate::daemon::runtime::guidance::HEADLINE));
        assert!(
            context.contains("memory-maintenance"),
            "the skill rides in the guidance"
        );
        // The user's files are linked, never copied; theirs stay as they were.
        assert!(dot.join("oauth_creds.json").is_symlink());
        assert!(dot.join(TRUSTED_FOLDERS).is_symlink());
        assert!(dot.join(POLICIES).join("mine.toml").is_symlink());
        assert!(dot.join("tmp").is_symlink() && user_dot.join("tmp").is_dir());
        assert_eq!(
            std::fs::read_to_string(user_dot.join(CONTEXT_FILE)).unwrap(),
            "My own rules.\n"
        );
        let rules: toml::Value =
            toml::from_str(&std::fs::read_to_string(dot.join(POLICIES).join(POLICY_FILE)).unwrap())
                .unwrap();
        let rules = rules["rule"].as_array().unwrap();
        assert_eq!(rules.len(), fixture.preapproved.len());
        assert!(
            rules
                .iter()
                .any(|r| r["commandPrefix"].as_str() == Some("agentteam exec task create"))
        );
        assert!(
            !rules
                .iter()
                .any(|r| r["commandPrefix"].as_str() == Some("agentteam exec task cancel"))
        );
        assert!(rules.iter().all(|r| r["priority"].as_integer() == Some(1)
            && r["toolName"].as_str() == Some("run_shell_command")
            && r["decision"].as_str() == Some("allow")));
    }

    #[test]
    fn the_users_own_policy_paths_get_the_rule_file_beside_theirs() {
        let fixture = Fixture::new(Family::Gemini);
        let args = vec!["--policy".to_string(), "/mine/rules.toml".to_string()];
        let wiring = wire(Family::Gemini, &fixture.launch(&args)).unwrap();
        let file = fixture.guide.dir.join(HOME_DIR).join(POLICY_FILE);
        assert_eq!(
            wiring.args,
            vec!["--policy".to_string(), file.display().to_string()]
        );
        assert!(
            !fixture
                .guide
                .dir
                .join(HOME_DIR)
                .join(DOT)
                .join(POLICIES)
                .exists()
        );

        let fixture = Fixture::new(Family::Gemini);
        let user_dot = fixture.home().join(DOT);
        std::fs::create_dir_all(&user_dot).unwrap();
        std::fs::write(user_dot.join(SETTINGS), r#"{"policyPaths": ["/mine"]}"#).unwrap();
        let wiring = wire(Family::Gemini, &fixture.launch(&[])).unwrap();
        assert!(wiring.args.is_empty());
        let dot = fixture.guide.dir.join(HOME_DIR).join(DOT);
        let settings: Value =
            serde_json::from_str(&std::fs::read_to_string(dot.join(SETTINGS)).unwrap()).unwrap();
        assert_eq!(
            settings["policyPaths"],
            json!(["/mine", fixture.guide.dir.join(HOME_DIR).join(POLICY_FILE)])
        );
    }

    #[test]
    fn trust_is_read_as_gemini_reads_it_and_never_granted() {
        let fixture = Fixture::new(Family::Gemini);
        let user_dot = fixture.home().join(DOT);
        std::fs::create_dir_all(&user_dot).unwrap();
        let work = fixture.dir.path().join("work");
        std::fs::create_dir_all(work.join("inner")).unwrap();
        let mut launch = fixture.launch(&[]);
        let inner = work.join("inner");
        launch.workdir = &inner;
        let settings = Map::new();
        let write = |rules: Value| {
            std::fs::write(user_dot.join(TRUSTED_FOLDERS), rules.to_string()).unwrap()
        };
        assert!(
            !trusted(&launch, &user_dot, &settings),
            "no file: untrusted"
        );
        write(json!({ work.display().to_string(): "TRUST_FOLDER" }));
        assert!(
            trusted(&launch, &user_dot, &settings),
            "an ancestor trusted"
        );
        write(json!({ work.display().to_string(): "TRUST_FOLDER",
                      inner.display().to_string(): "DO_NOT_TRUST" }));
        assert!(
            !trusted(&launch, &user_dot, &settings),
            "the longest rule wins"
        );
        write(json!({ inner.join("x").display().to_string(): "TRUST_PARENT" }));
        assert!(trusted(&launch, &user_dot, &settings), "a child's parent");
        write(json!({ work.display().to_string(): "trust_folder" }));
        assert!(
            !trusted(&launch, &user_dot, &settings),
            "not a rule Gemini knows"
        );
        let off: Map<String, Value> =
            serde_json::from_value(json!({"security": {"folderTrust": {"enabled": false}}}))
                .unwrap();
        assert!(trusted(&launch, &user_dot, &off), "the check is off");
        // Untrusted: the launch is wired all the same, and stderr says so.
        std::fs::remove_file(user_dot.join(TRUSTED_FOLDERS)).unwrap();
        let wiring = wire(Family::Gemini, &launch).unwrap();
        assert!(
            wiring.notices.iter().any(|n| n.contains("does not trust")),
            "{:?}",
            wiring.notices
        );
        assert!(!wiring.args.iter().any(|a| a.contains("trust")));
        assert!(!wiring.env.iter().any(|(k, _)| k.contains("TRUST")));
    }
}
