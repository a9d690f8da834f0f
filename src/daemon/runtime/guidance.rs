//! What a launch tells its runtime's model about both bridges, compiled per launch from the
//! launch's own catalog (the built-in inventory plus the extensions pinned for it), with every tool
//! named the way the launch's runtime names it.
//!
//! The text is ordered for a runtime's prompt cache: what depends only on this binary (the MCP
//! rules and tools, the memory skill, the built-in Exec index) comes first, and what the launch
//! pinned (its extensions) comes last, so a changed extension leaves the cached prefix intact.
//!
//! The memory-maintenance skill travels with `memory_search`: as an Agent Skill (`SKILL.md`)
//! where the driver loads skills per launch without hiding the user's own, otherwise inside the
//! guidance. The files live in a launch directory of their own, which never holds a token.

use std::io;
use std::path::{Path, PathBuf};

use crate::contract::catalog::{PROMPT_SUMMARY, TOOLS};
use crate::contract::extension::Definition;
use crate::contract::tool_guidance::{NAMESPACE, RuntimeNaming, ToolNamer, skill_doc_split};

/// The guidance's first line: a sentence found nowhere else a runtime puts in front of its model.
pub const HEADLINE: &str = "You are running as an AgentTeam agent, launched by `agentteam run`: two bridges reach your team's workspace from here.";
/// The guidance file in a launch's guidance directory.
pub const GUIDANCE_FILE: &str = "guidance.md";
/// The plugin directory (a Claude Code plugin; its `skills/` is also OpenCode's skill path).
pub const PLUGIN_DIR: &str = "plugin";
/// The plugin's name: Claude Code shows its skills as `agentteam:<skill>`.
pub const PLUGIN_NAME: &str = NAMESPACE;

/// One launch's compiled guidance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guidance {
    /// The whole text, stable part first.
    pub text: String,
    /// The `SKILL.md` files to deliver as skills: `(skill name, file text)`.
    pub skills: Vec<(&'static str, String)>,
}

/// Who reads the guidance: how its runtime names MCP tools, its shell tool, and the name
/// `agentteam exec` runs under without asking, where the runtime's command rules cannot approve
/// `agentteam exec` itself (`driver::EXEC_ALIAS`).
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    pub naming: RuntimeNaming,
    pub shell_tool: Option<&'static str>,
    pub exec_alias: Option<&'static str>,
}

/// The guidance for `reader` with the pinned `extensions`; `skills_apart` puts the memory skill in
/// a `SKILL.md` of its own instead of in the text.
pub fn compile(reader: Reader, extensions: &[&Definition], skills_apart: bool) -> Guidance {
    let naming = reader.naming;
    let parts = skill_doc_split(&naming);
    let mut text = format!("# AgentTeam\n\n{HEADLINE}\n\n");
    text.push_str(&format!(
        "- The `{NAMESPACE}` MCP tools: messages, memory search and knowledge retrieval.\n\
         - `agentteam exec` through your command tool{}: tasks, reviews, projects, teams, scheduled messages, approvals, the agent roster and the extensions.\n\n",
        reader
            .shell_tool
            .map(|tool| format!(" (`{tool}`)"))
            .unwrap_or_default()
    ));
    if let Some(alias) = reader.exec_alias {
        text.push_str(&format!(
            "Here, run each `agentteam exec` action that is not destructive as `{alias} <domain> <action> '<JSON>'`: the same command, which your runtime runs without asking. A destructive action (such as `task cancel`) runs only as `agentteam exec …`, which your runtime asks the user about first; `{alias}` refuses it.\n\n"
        ));
    }
    text.push_str(&parts.rules);
    text.push_str("\nTools:\n");
    text.push_str(&parts.tools);
    let mut skills = Vec::new();
    for tool in TOOLS {
        let Some(skill) = &tool.skill else { continue };
        let with = naming.model_name(tool.name);
        if skills_apart {
            text.push_str(&format!(
                "\nThe `{}` skill, loaded for this launch, says how to keep the memory that `{with}` searches: use it before you write, change or remove a memory file.\n",
                skill.name
            ));
            skills.push((skill.name, skill_file(skill.name, &with, skill.text)));
        } else {
            text.push_str(&format!(
                "\n## Skill `{}` (with `{with}`)\n\n{}\n",
                skill.name,
                skill.text.trim_end()
            ));
        }
    }
    text.push('\n');
    text.push_str(PROMPT_SUMMARY);
    if !extensions.is_empty() {
        text.push_str(
            "\n## Extensions pinned for this launch\n\n\
             Run them the same way: `agentteam exec <extension> <action> '<JSON>'`; `agentteam exec <extension> --help` lists their actions.\n\n",
        );
        for definition in extensions {
            let names: Vec<&str> = definition
                .actions
                .iter()
                .map(|a| a.action.as_str())
                .collect();
            text.push_str(&format!(
                "- `{}`: {} Actions: {}.\n",
                definition.name,
                definition.summary,
                names.join(", ")
            ));
        }
    }
    Guidance { text, skills }
}

/// A `SKILL.md`: YAML front matter (the description a runtime lists) and the skill's text.
fn skill_file(name: &str, with: &str, text: &str) -> String {
    let description = format!(
        "How to keep the AgentTeam memory directory that `{with}` searches useful across sessions. Use it before writing, changing or removing a memory file."
    );
    // A JSON string is a YAML double-quoted scalar: no colon or backtick can break the header.
    format!(
        "---\nname: {name}\ndescription: {}\n---\n\n{}\n",
        serde_json::Value::from(description),
        text.trim_end()
    )
}

/// Where one launch's guidance files are.
#[derive(Debug, Clone)]
pub struct GuideFiles {
    /// The launch's guidance directory (0700; no token in it).
    pub dir: PathBuf,
    pub guidance: PathBuf,
    /// The plugin directory, when a skill was written.
    pub plugin: Option<PathBuf>,
}

impl GuideFiles {
    /// The skills directory inside the plugin (each skill a `<name>/SKILL.md`).
    pub fn skills(&self) -> Option<PathBuf> {
        self.plugin.as_ref().map(|plugin| plugin.join("skills"))
    }
}

/// Writes `guidance` into the new private directory `dir`.
pub fn write(dir: &Path, guidance: &Guidance) -> io::Result<GuideFiles> {
    let path = dir.join(GUIDANCE_FILE);
    crate::private_file::create_new(&path, &guidance.text)?;
    let plugin = if guidance.skills.is_empty() {
        None
    } else {
        let plugin = dir.join(PLUGIN_DIR);
        let manifest_dir = plugin.join(".claude-plugin");
        crate::platform::fs::create_private_dir(&plugin)?;
        crate::platform::fs::create_private_dir(&manifest_dir)?;
        crate::platform::fs::create_private_dir(&plugin.join("skills"))?;
        let manifest = serde_json::json!({
            "name": PLUGIN_NAME,
            "description": "AgentTeam's skills for this launch",
            "version": env!("CARGO_PKG_VERSION"),
        });
        crate::private_file::create_new(
            &manifest_dir.join("plugin.json"),
            &format!("{manifest:#}\n"),
        )?;
        for (name, text) in &guidance.skills {
            let skill_dir = plugin.join("skills").join(name);
            crate::platform::fs::create_private_dir(&skill_dir)?;
            crate::private_file::create_new(&skill_dir.join("SKILL.md"), text)?;
        }
        Some(plugin)
    };
    Ok(GuideFiles {
        dir: dir.to_path_buf(),
        guidance: path,
        plugin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ToolId;

    const CLAUDE: Reader = Reader {
        naming: RuntimeNaming::Claude,
        shell_tool: Some("Bash"),
        exec_alias: None,
    };

    #[test]
    fn the_stable_part_comes_first_and_the_pinned_extensions_last() {
        let extension: Definition =
            serde_json::from_str(include_str!("../../../schema/extensions/gitea.json")).unwrap();
        let plain = compile(CLAUDE, &[], true);
        let pinned = compile(CLAUDE, &[&extension], true);
        assert!(
            pinned.text.starts_with(&plain.text),
            "the cached prefix moved"
        );
        let last = pinned.text.lines().last().unwrap();
        assert!(
            last.starts_with("- `gitea`: Gitea pull request watches"),
            "{last}"
        );
        assert!(
            last.ends_with("Actions: watch, list, get, unwatch."),
            "{last}"
        );
        assert!(
            plain
                .text
                .starts_with(&format!("# AgentTeam\n\n{HEADLINE}\n"))
        );
    }

    #[test]
    fn every_tool_is_named_once_in_the_runtimes_convention() {
        for naming in RuntimeNaming::ALL {
            let reader = Reader {
                naming,
                shell_tool: None,
                exec_alias: None,
            };
            let text = compile(reader, &[], false).text;
            for tool in TOOLS {
                let shown = format!("- `{}` (", naming.model_name(tool.name));
                assert_eq!(text.matches(&shown).count(), 1, "{naming:?} {shown}");
            }
            assert!(text.contains(PROMPT_SUMMARY));
        }
    }

    #[test]
    fn the_memory_skill_is_a_skill_file_or_part_of_the_text() {
        let skill = ToolId::MemorySearch.descriptor().skill.as_ref().unwrap();
        let apart = compile(CLAUDE, &[], true);
        assert_eq!(apart.skills.len(), 1);
        let (name, file) = &apart.skills[0];
        assert_eq!(*name, skill.name);
        assert!(file.starts_with(&format!("---\nname: {}\ndescription: \"", skill.name)));
        assert!(file.contains(skill.text.trim_end()));
        assert!(!apart.text.contains(skill.text.trim_end()));
        let inline = compile(CLAUDE, &[], false);
        assert!(inline.skills.is_empty());
        assert!(inline.text.contains(skill.text.trim_end()));
    }
}
