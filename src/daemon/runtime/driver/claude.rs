//! Claude Code (verified with 2.1.332).
//!
//! - MCP: `--mcp-config FILE`, merged with the user's own servers (no `--strict-mcp-config`); the
//!   entry is `{"type":"http","url":…,"headersHelper":CMD,"alwaysLoad":true}` (without
//!   `alwaysLoad` the tools were deferred behind its tool search, absent from the model's first
//!   request).
//! - Guidance: `--append-system-prompt-file`, the last block of the system prompt, after the
//!   user's own. A resumed conversation keeps the system prompt it recorded on its first request
//!   (`--system-prompt-snapshot`, on by default): said on stderr.
//! - Skill: `--plugin-dir`, a plugin for this session only, beside the user's own skills; the
//!   model sees `agentteam:memory-maintenance`.
//! - Exec: `--allowedTools=Bash(agentteam exec <domain> <action> *),…`, added to the user's own
//!   permission rules; every other command keeps asking as the user has it.

use std::io;

use serde_json::json;

use super::{Launch, Unasked, Wiring, has_flag, option_value};
use crate::contract::preapproval::preapproved_tools;
use crate::contract::tool_guidance::NAMESPACE;

/// A delivered conversation's session: `--session-id ID` starts it (an id in use is refused),
/// `--resume ID` continues it. The person's own `--resume`, `--continue` or `--session-id` stays
/// theirs.
pub(super) fn session_args(
    args: &[String],
    session: &super::RuntimeSession,
) -> Option<Vec<String>> {
    let own = [
        "-c",
        "--continue",
        "-r",
        "--resume",
        "--session-id",
        "--fork-session",
    ];
    super::id_then_resume(args, &own, session)
}

/// Claude Code asks before a tool its rules do not allow, unless the user turned its checks off.
pub(super) fn unasked(args: &[String]) -> Unasked {
    let bypassed = has_flag(args, &["--dangerously-skip-permissions"])
        || option_value(args, &["--permission-mode"]) == Some("bypassPermissions");
    match bypassed {
        true => Unasked::both("Claude Code runs with its permission checks bypassed"),
        false => Unasked::default(),
    }
}

/// The Claude Code configuration file in the credential directory.
pub const CONFIG: &str = "claude-mcp.json";

pub(super) fn wire(launch: &Launch) -> io::Result<Wiring> {
    let config = json!({ "mcpServers": { NAMESPACE: {
        "type": "http",
        "url": launch.mcp_url,
        "headersHelper": launch.header_helper(),
        "alwaysLoad": true,
    }}});
    let path = launch.dir.join(CONFIG);
    crate::private_file::create_new(&path, &format!("{config:#}\n"))?;
    let mut args = vec![
        "--mcp-config".to_string(),
        path.display().to_string(),
        "--append-system-prompt-file".to_string(),
        launch.guide.guidance.display().to_string(),
    ];
    if let Some(plugin) = &launch.guide.plugin {
        args.push("--plugin-dir".into());
        args.push(plugin.display().to_string());
    }
    // The Exec prefixes and the MCP tools that are not destructive; a destructive one asks (or,
    // headless, is denied as "requires approval").
    let rules: Vec<String> = launch
        .preapproved
        .iter()
        .map(|prefix| format!("Bash({prefix} *)"))
        .chain(
            preapproved_tools()
                .into_iter()
                .map(|tool| format!("mcp__{NAMESPACE}__{tool}")),
        )
        .collect();
    // One `=` argument: a variadic option given apart would take the user's next words too.
    args.push(format!("--allowedTools={}", rules.join(",")));
    let mut notices = Vec::new();
    let resumes = launch.args.iter().any(|a| {
        matches!(a.as_str(), "-c" | "--continue" | "-r" | "--resume") || a.starts_with("--resume=")
    });
    if resumes {
        notices.push(
            "a resumed Claude Code conversation keeps the system prompt it recorded: this launch's AgentTeam guidance reaches it only with `--system-prompt-snapshot off`".to_string(),
        );
    }
    Ok(Wiring {
        args,
        user_args: None,
        env: Vec::new(),
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
    fn a_delivered_session_starts_by_its_id_then_resumes_and_the_persons_choice_stays() {
        let args = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let new = super::super::RuntimeSession {
            id: "4f24bd16-af53-4e91-92fe-ac989815b14e".into(),
            known: false,
        };
        let known = super::super::RuntimeSession {
            known: true,
            ..new.clone()
        };
        assert_eq!(
            session_args(&args(&["-p"]), &new),
            Some(args(&["--session-id", &new.id]))
        );
        assert_eq!(
            session_args(&args(&["-p"]), &known),
            Some(args(&["--resume", &new.id]))
        );
        for own in [
            &["-c"][..],
            &["--resume", "x"],
            &["--resume=x"],
            &["--session-id", "y"],
        ] {
            assert_eq!(session_args(&args(own), &known), None, "{own:?}");
        }
    }

    #[test]
    fn the_mcp_entry_guidance_skill_and_bash_rules_are_added_to_the_users_setup() {
        let fixture = Fixture::new(Family::Claude);
        let wiring = wire(Family::Claude, &fixture.launch(&[])).unwrap();
        let file: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture.dir.path().join(CONFIG)).unwrap(),
        )
        .unwrap();
        let entry = &file["mcpServers"]["agentteam"];
        assert_eq!(entry["type"], "http");
        assert_eq!(entry["alwaysLoad"], true);
        assert_eq!(
            entry["headersHelper"],
            "'/opt/agent team/agentteam' mcp headers --url http://127.0.0.1:7/api/internal/mcp/servers/wsp_1/agents/agt_1 --token-file /run/t/mcp-token"
        );
        assert!(
            !wiring.args.iter().any(|a| a == "--strict-mcp-config"),
            "the user's own MCP servers stay"
        );
        let after = |flag: &str| {
            let i = wiring.args.iter().position(|a| a == flag).unwrap();
            wiring.args[i + 1].clone()
        };
        assert_eq!(
            after("--append-system-prompt-file"),
            fixture.guide.guidance.display().to_string()
        );
        assert_eq!(
            after("--plugin-dir"),
            fixture.guide.plugin.as_ref().unwrap().display().to_string()
        );
        let rules = wiring.args.last().unwrap();
        assert!(rules.starts_with("--allowedTools=Bash(agentteam exec "));
        assert!(rules.contains("Bash(agentteam exec task create *)"));
        assert!(!rules.contains("task cancel"), "a destructive action asks");
        assert!(rules.contains(",mcp__agentteam__message_send"), "{rules}");
        assert!(rules.contains(",mcp__agentteam__message_history_read"));
        assert!(
            !rules.contains("reaction_remove"),
            "a destructive tool asks"
        );
        assert!(wiring.notices.is_empty());
    }

    #[test]
    fn claude_code_asks_before_a_destructive_call_unless_its_checks_are_bypassed() {
        let words = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(unasked(&words(&["-p", "hi"])), Unasked::default());
        assert_eq!(
            unasked(&words(&["--permission-mode", "acceptEdits"])),
            Unasked::default()
        );
        for bypass in [
            &["--dangerously-skip-permissions"][..],
            &["--permission-mode", "bypassPermissions"],
            &["--permission-mode=bypassPermissions"],
        ] {
            let unasked = unasked(&words(bypass));
            assert!(
                unasked.exec.is_some() && unasked.mcp.is_some(),
                "{bypass:?}"
            );
        }
    }

    #[test]
    fn a_resumed_conversation_is_told_about() {
        let fixture = Fixture::new(Family::Claude);
        let args = vec!["--resume".to_string(), "abc".to_string()];
        let wiring = wire(Family::Claude, &fixture.launch(&args)).unwrap();
        assert!(wiring.notices[0].contains("--system-prompt-snapshot off"));
    }
}
