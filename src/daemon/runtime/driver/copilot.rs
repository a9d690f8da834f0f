//! GitHub Copilot CLI (verified with 1.0.102).
//!
//! - MCP: `--additional-mcp-config @FILE`, which augments the user's own
//!   `~/.copilot/mcp-config.json` for the session; the entry runs the stdio bridge (Copilot has
//!   no header helper) and the model sees `agentteam-<tool>`. Copilot shows a server's
//!   `instructions` only under `--allow-all-mcp-server-instructions`, which admits every server's:
//!   never passed, so the guidance carries the MCP rules.
//! - Guidance: `COPILOT_CUSTOM_INSTRUCTIONS_DIRS`, whose `.github/instructions/*.instructions.md`
//!   Copilot loads beside the repository's and the user's own; a value the user set is kept and
//!   the guidance directory added after it.
//! - Skill: `--add-dir` of the same directory, whose `.github/skills` Copilot loads as trusted
//!   configuration beside the user's skills (the directory holds no token).
//! - Exec: Copilot 1.0.102 matches an allow rule `shell(…)` against a command's identifiers: its
//!   first word, plus a subcommand only for programs it knows (`git push`, `gh pr`). So
//!   `shell(agentteam exec task create:*)`, `shell(agentteam exec:*)` and `shell(agentteam exec)`
//!   approve nothing, and `shell(agentteam)` approves `agentteam run`, `agentteam admin` and
//!   destructive actions too. Its deny rules match a command's text, so `agentteam:*` less
//!   denied prefixes would be a deny-list that extra spaces, quotes or a variable get past. So
//!   the launch's bin directory also links the daemon's executable as `agentteam-exec`
//!   (`EXEC_ALIAS`), which runs only the actions that are not destructive and refuses the rest,
//!   and `--allow-tool=shell(agentteam-exec)` approves that one word; the guidance tells the
//!   model to use it. `agentteam exec`, `agentteam run` and everything else ask as the user's
//!   other commands do.

use std::io;

use serde_json::json;

use super::{Launch, Unasked, Wiring, has_flag};
use crate::contract::preapproval::preapproved_tools;
use crate::contract::tool_guidance::NAMESPACE;

/// The MCP configuration file in the credential directory.
pub const CONFIG: &str = "copilot-mcp.json";
/// The directory in the guidance directory Copilot is pointed at.
pub const DIR: &str = "copilot";
const INSTRUCTIONS_DIRS: &str = "COPILOT_CUSTOM_INSTRUCTIONS_DIRS";
/// Said on stderr at every Copilot launch that pre-approves anything.
const ALIAS_NOTICE: &str = "Copilot CLI approves a command by its first word, so `agentteam exec` actions that are not destructive are pre-approved as `agentteam-exec <domain> <action>` (which runs nothing else); `agentteam exec` itself asks as your other commands do";

/// A delivered conversation's session: `--session-id ID` sets the id of a new session and
/// resumes an existing one. The person's own `--resume`, `--continue` or `--session-id` stays
/// theirs.
pub(super) fn session_args(
    args: &[String],
    session: &super::RuntimeSession,
) -> Option<Vec<String>> {
    if has_flag(args, &["-r", "--resume", "--continue", "--session-id"]) {
        return None;
    }
    Some(vec!["--session-id".to_string(), session.id.clone()])
}

/// Copilot asks before a tool its rules do not allow, unless the user allowed every tool.
pub(super) fn unasked(args: &[String]) -> Unasked {
    match has_flag(args, &["--allow-all-tools", "--allow-all", "--yolo"]) {
        true => Unasked::both("Copilot CLI runs with every tool allowed"),
        false => Unasked::default(),
    }
}

pub(super) fn wire(launch: &Launch) -> io::Result<Wiring> {
    let bridge = launch.stdio_bridge(json!({ "type": "local", "tools": ["*"] }));
    let config = json!({ "mcpServers": { NAMESPACE: bridge } });
    let path = launch.dir.join(CONFIG);
    crate::private_file::create_new(&path, &format!("{config:#}\n"))?;

    let root = launch.guide.dir.join(DIR);
    let instructions = root.join(".github").join("instructions");
    crate::platform::fs::create_private_dirs(&instructions)?;
    let guidance = std::fs::read_to_string(&launch.guide.guidance)?;
    crate::private_file::create_new(
        &instructions.join("agentteam.instructions.md"),
        &format!("---\napplyTo: \"**\"\n---\n\n{guidance}"),
    )?;
    let mut args = vec![
        "--additional-mcp-config".to_string(),
        format!("@{}", path.display()),
    ];
    if let Some(skills) = launch.guide.skills() {
        let ours = root.join(".github").join("skills");
        crate::platform::fs::create_private_dirs(&ours)?;
        for entry in std::fs::read_dir(&skills)? {
            let entry = entry?;
            let target = ours.join(entry.file_name());
            crate::platform::fs::create_private_dir(&target)?;
            let text = std::fs::read_to_string(entry.path().join("SKILL.md"))?;
            crate::private_file::create_new(&target.join("SKILL.md"), &text)?;
        }
        args.push("--add-dir".into());
        args.push(root.display().to_string());
    }
    let mut notices = Vec::new();
    if !launch.preapproved.is_empty() {
        // One `=` argument: a variadic option given apart would take the user's next words too.
        args.push(format!("--allow-tool=shell({})", super::EXEC_ALIAS));
        notices.push(ALIAS_NOTICE.to_string());
    }
    // Each MCP tool that is not destructive, as Copilot names a server's tool (`server(tool)`);
    // a destructive one asks (or, headless, is denied).
    for tool in preapproved_tools() {
        args.push(format!("--allow-tool={NAMESPACE}({tool})"));
    }
    let dirs = match launch.var(INSTRUCTIONS_DIRS).filter(|v| !v.is_empty()) {
        Some(theirs) => format!("{theirs},{}", root.display()),
        None => root.display().to_string(),
    };
    Ok(Wiring {
        args,
        user_args: None,
        env: vec![(INSTRUCTIONS_DIRS.into(), dirs)],
        notices,
        homes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::Fixture;
    use super::super::{Family, wire};
    use super::*;

    #[test]
    fn the_bridge_guidance_skill_and_the_alias_rule_are_added() {
        let mut fixture = Fixture::new(Family::Copilot);
        fixture
            .env
            .push((INSTRUCTIONS_DIRS.into(), "/mine/instructions".into()));
        let wiring = wire(Family::Copilot, &fixture.launch(&[])).unwrap();
        let config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture.dir.path().join(CONFIG)).unwrap(),
        )
        .unwrap();
        assert_eq!(
            config["mcpServers"]["agentteam"]["args"],
            json!(["mcp", "stdio"])
        );
        assert_eq!(
            wiring.args[1],
            format!("@{}", fixture.dir.path().join(CONFIG).display())
        );
        let root = fixture.guide.dir.join(DIR);
        assert_eq!(
            wiring.env[0].1,
            format!("/mine/instructions,{}", root.display())
        );
        let instructions =
            std::fs::read_to_string(root.join(".github/instructions/agentteam.instructions.md"))
                .unwrap();
        assert!(instructions.contains(crate::daemon::runtime::guidance::HEADLINE));
        assert!(
            root.join(".github/skills/memory-maintenance/SKILL.md")
                .is_file()
        );
        assert!(wiring.args.contains(&"--add-dir".to_string()));
        // No rule of Copilot's can approve `agentteam exec` alone: the one word approved is the
        // alias that runs nothing else, and that is said.
        let rules: Vec<&String> = wiring
            .args
            .iter()
            .filter(|a| a.starts_with("--allow") || a.starts_with("--deny") || a.contains("shell("))
            .filter(|a| !a.starts_with("--allow-tool=agentteam("))
            .collect();
        assert_eq!(rules, vec!["--allow-tool=shell(agentteam-exec)"]);
        // The MCP tools that are not destructive, one rule each.
        assert!(
            wiring
                .args
                .contains(&"--allow-tool=agentteam(message_send)".to_string())
        );
        assert!(!wiring.args.iter().any(|a| a.contains("reaction_remove")));
        let words = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(unasked(&words(&["-p", "hi"])), Unasked::default());
        assert!(unasked(&words(&["--allow-all-tools"])).exec.is_some());
        assert!(unasked(&words(&["--yolo"])).mcp.is_some());
        assert_eq!(wiring.notices, vec![ALIAS_NOTICE.to_string()]);
        assert!(instructions.contains("`agentteam-exec <domain> <action>"));
    }
}
