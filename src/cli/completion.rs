//! Shell completion and the man page, both from the live command tree.
//!
//! Completion is clap_complete's dynamic engine: the registered shell function calls
//! `agentteam` back with `AGENTTEAM_COMPLETE=<shell>` and the words typed so far. `exec` parses
//! its own grammar, so the tree completion sees gets an `exec` built from the catalog instead: a
//! subcommand per domain (the built-in ones and, inside a runtime, the extensions its launch
//! pinned) holding one per action, with each level's flags.

use clap::{Arg, ArgAction, Command, CommandFactory, ValueEnum};

use super::output::Exit;
use crate::contract::catalog::{DOMAINS, domain_actions};

/// The variable the registered shell function sets when it calls `agentteam` back.
pub const COMPLETE_VAR: &str = "AGENTTEAM_COMPLETE";

/// A shell `agentteam completions` registers for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}

/// Answers a completion request and exits when the shell asked for one; returns otherwise.
pub fn complete_if_asked() {
    clap_complete::CompleteEnv::with_factory(tree)
        .var(COMPLETE_VAR)
        .complete();
}

/// The line that registers completion in `shell`'s startup file.
pub fn registration(shell: Shell) -> Exit {
    let line = match shell {
        Shell::Bash => format!("source <({COMPLETE_VAR}=bash agentteam)"),
        Shell::Zsh => format!("source <({COMPLETE_VAR}=zsh agentteam)"),
        Shell::Fish => format!("{COMPLETE_VAR}=fish agentteam | source"),
        Shell::Powershell => format!(
            "$env:{COMPLETE_VAR} = \"powershell\"; agentteam | Out-String | Invoke-Expression; Remove-Item Env:\\{COMPLETE_VAR}"
        ),
    };
    super::output::print(&format!("{line}\n"))
}

/// `agentteam man [COMMAND…]`: the man page of the command tree (or of one command in it, the
/// pages the top one lists as `agentteam-<command>(1)`), as roff.
pub fn man(path: &[String]) -> Exit {
    let mut command = super::Cli::command();
    command.build();
    for name in path {
        let Some(sub) = command.find_subcommand(name).cloned() else {
            eprintln!("error: no command `{name}` (`agentteam man` lists them)");
            return Exit::Usage;
        };
        command = sub;
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .expect("rendering to memory cannot fail");
    super::output::print(&String::from_utf8_lossy(&page))
}

/// The command tree completion walks: the CLI's, with `exec` spelled out from the catalog.
fn tree() -> Command {
    super::Cli::command().mut_subcommand("exec", |parsed| {
        let mut exec = Command::new("exec")
            .about(parsed.get_about().cloned().unwrap_or_default())
            .disable_help_subcommand(true)
            .arg(flag(
                "error-schema",
                "Print the JSON Schema of every error envelope",
            ));
        for domain in DOMAINS {
            let actions = domain_actions(domain.name).map(|a| (a.action, a.summary));
            exec = exec.subcommand(domain_command(domain.name, domain.summary, actions));
        }
        for extension in super::catalog::launch_extensions() {
            let definition = &extension.definition;
            let actions = definition
                .actions
                .iter()
                .map(|a| (a.action.as_str(), a.summary.as_str()));
            exec = exec.subcommand(domain_command(
                &definition.name,
                &definition.summary,
                actions,
            ));
        }
        exec
    })
}

fn domain_command<'a>(
    name: &str,
    summary: &str,
    actions: impl Iterator<Item = (&'a str, &'a str)>,
) -> Command {
    let mut domain = Command::new(name.to_string())
        .about(summary.to_string())
        .disable_help_subcommand(true);
    for (action, summary) in actions {
        domain = domain.subcommand(
            Command::new(action.to_string())
                .about(summary.to_string())
                .arg(flag("input-schema", "Print the action's input JSON Schema"))
                .arg(flag(
                    "output-schema",
                    "Print the action's output JSON Schema",
                ))
                .arg(Arg::new("input").value_name("JSON")),
        );
    }
    domain
}

fn flag(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .help(help)
        .action(ArgAction::SetTrue)
}
