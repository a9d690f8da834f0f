//! `agentteam exec`: the help hierarchy and schema surfaces, which need no daemon, and the entry of
//! the Exec CLI transport.
//!
//! The grammar is small and fixed, so it is parsed here rather than through clap subcommands:
//! the help pages are generated text from the catalog and must print exactly as generated.
//!
//! ```text
//! agentteam exec [--help]
//! agentteam exec --error-schema
//! agentteam exec <domain> [--help]
//! agentteam exec <domain> <action> --help | --input-schema | --output-schema
//! agentteam exec <domain> <action> [JSON | -]
//! ```
//!
//! Inside a runtime, `<domain>` may also be an extension the daemon pinned for this launch: its
//! descriptors come from the launch's catalog file beside the token file, and help, schemas and
//! validation work for it exactly as for a built-in.

use super::output::{Exit, print, usage_error};
use super::runtime_url::{self, Bridge};
use super::transport;
use crate::contract::Validators;
use crate::contract::catalog::{self, ActionDescriptor, DOMAINS, ERROR_SCHEMA, ROOT_HELP};
use crate::contract::extension::{self as ext, ExtensionAction, Known};

/// The variables a daemon-launched runtime receives; without both, execution fails closed.
pub const BASE_URL_VAR: &str = "AGENTTEAM_EXEC_BASE_URL";
pub const TOKEN_FILE_VAR: &str = "AGENTTEAM_EXEC_TOKEN_FILE";

pub fn run(args: &[String]) -> Exit {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => {
            eprint!("{}", root_help(&launch_extensions()));
            usage_error(
                "missing domain",
                &["run `agentteam exec <domain> --help` to list a domain's actions".into()],
            )
        }
        ["--help" | "-h"] => print(&root_help(&launch_extensions())),
        ["--error-schema"] => print(ERROR_SCHEMA),
        [flag, ..] if flag.starts_with('-') => unknown_flag(flag, "agentteam exec --help"),
        [domain, rest @ ..] => {
            let Some(domain) = catalog::find_domain(domain) else {
                let extensions = launch_extensions();
                if let Some(extension) = extensions.iter().find(|e| e.definition.name == *domain) {
                    return extension_command(extension, rest);
                }
                let mut names: Vec<&str> = DOMAINS.iter().map(|d| d.name).collect();
                names.extend(extensions.iter().map(|e| e.definition.name.as_str()));
                return unknown_name("domain", domain, &names, "agentteam exec --help");
            };
            match rest {
                [] => {
                    eprint!("{}", domain.help);
                    usage_error(&format!("missing action for domain `{}`", domain.name), &[])
                }
                ["--help" | "-h"] => print(domain.help),
                [flag, ..] if flag.starts_with('-') => {
                    unknown_flag(flag, &format!("agentteam exec {} --help", domain.name))
                }
                [action, rest @ ..] => {
                    let Some(descriptor) = catalog::find_action(domain.name, action) else {
                        let names: Vec<&str> = catalog::domain_actions(domain.name)
                            .map(|a| a.action)
                            .collect();
                        return unknown_name(
                            &format!("action of domain `{}`", domain.name),
                            action,
                            &names,
                            &format!("agentteam exec {} --help", domain.name),
                        );
                    };
                    let help_command = format!(
                        "agentteam exec {} {} --help",
                        descriptor.domain, descriptor.action
                    );
                    match rest {
                        ["--help" | "-h"] => print(descriptor.help),
                        ["--input-schema"] => print(descriptor.input_schema),
                        ["--output-schema"] => print(descriptor.output_schema),
                        [flag] if flag.starts_with('-') && *flag != "-" => {
                            unknown_flag(flag, &help_command)
                        }
                        [] => execute(descriptor, None),
                        [input] => execute(descriptor, Some(input)),
                        [_, extra, ..] => usage_error(
                            &format!(
                                "unexpected argument `{extra}`: pass the whole input as one JSON value"
                            ),
                            &[format!("run `{help_command}`")],
                        ),
                    }
                }
            }
        }
    }
}

/// `agentteam-exec ARGS`: `agentteam exec ARGS` for the actions a runtime may run without asking
/// (`driver::preapproved_prefixes`: built-in and pinned extension actions that are not
/// destructive), and their help; any other action is refused before anything is sent, naming the
/// `agentteam exec` command that runs it (which the runtime asks the user about).
pub fn run_preapproved(args: &[String]) -> Exit {
    use crate::contract::preapproval::{EXEC_ALIAS, preapproved_prefixes};
    let [domain, action, ..] = args else {
        return run(args);
    };
    if domain.starts_with('-') || action.starts_with('-') {
        return run(args);
    }
    let extensions = launch_extensions();
    let definitions: Vec<&ext::Definition> = extensions.iter().map(|e| &e.definition).collect();
    let command = format!("agentteam exec {domain} {action}");
    if preapproved_prefixes(&definitions).contains(&command) {
        return run(args);
    }
    let known = catalog::find_action(domain, action).is_some()
        || extensions.iter().any(|e| {
            e.definition.name == *domain && e.definition.actions.iter().any(|a| a.action == *action)
        });
    if !known {
        // A name `agentteam exec` does not know either: its own refusal, with its suggestions
        // (it resolves exact names only, so nothing unlisted can run through here).
        return run(args);
    }
    usage_error(
        &format!(
            "`{EXEC_ALIAS}` runs only actions that are not destructive, and `{domain} {action}` is"
        ),
        &[format!(
            "run it as `{command} …`: your runtime asks the user before it runs"
        )],
    )
}

/// Inside a runtime, the extensions the daemon pinned for its launch (from the catalog file
/// beside its token file); elsewhere none.
fn launch_extensions() -> Vec<Known> {
    std::env::var_os(TOKEN_FILE_VAR)
        .filter(|v| !v.is_empty())
        .map(|file| transport::launch_extensions(std::path::Path::new(&file)))
        .unwrap_or_default()
}

/// `agentteam exec --help`: the generated root help, with the launch's extension domains listed
/// after the built-in ones, in the same column.
fn root_help(extensions: &[Known]) -> String {
    if extensions.is_empty() {
        return ROOT_HELP.to_string();
    }
    let lines: Vec<&str> = ROOT_HELP.lines().collect();
    let Some(start) = lines.iter().position(|line| *line == "Domains:") else {
        return ROOT_HELP.to_string();
    };
    let end = lines[start + 1..]
        .iter()
        .position(|line| line.is_empty())
        .map_or(lines.len(), |at| start + 1 + at);
    // The column the built-in summaries start in.
    let column = lines[start + 1]
        .trim_start()
        .find("  ")
        .map(|name_end| {
            let rest = &lines[start + 1][2 + name_end..];
            2 + name_end + (rest.len() - rest.trim_start().len())
        })
        .unwrap_or(20);
    let mut out: Vec<String> = lines[..end].iter().map(|l| l.to_string()).collect();
    for extension in extensions {
        let name = format!("  {}", extension.definition.name);
        let pad = column.saturating_sub(name.len()).max(2);
        out.push(format!(
            "{name}{}{} (an app-hosted extension)",
            " ".repeat(pad),
            extension.definition.summary
        ));
    }
    out.extend(lines[end..].iter().map(|l| l.to_string()));
    out.join("\n") + "\n"
}

/// `agentteam exec <extension> …`: the same grammar as a built-in domain's.
fn extension_command(extension: &Known, rest: &[&str]) -> Exit {
    let definition = &extension.definition;
    let name = definition.name.as_str();
    match rest {
        [] => {
            eprint!("{}", ext::domain_help(definition));
            usage_error(&format!("missing action for domain `{name}`"), &[])
        }
        ["--help" | "-h"] => print(&ext::domain_help(definition)),
        [flag, ..] if flag.starts_with('-') => {
            unknown_flag(flag, &format!("agentteam exec {name} --help"))
        }
        [action, rest @ ..] => {
            let Some(declared) = definition.actions.iter().find(|a| a.action == *action) else {
                let names: Vec<&str> = definition
                    .actions
                    .iter()
                    .map(|a| a.action.as_str())
                    .collect();
                return unknown_name(
                    &format!("action of domain `{name}`"),
                    action,
                    &names,
                    &format!("agentteam exec {name} --help"),
                );
            };
            let help_command = format!("agentteam exec {name} {} --help", declared.action);
            match rest {
                ["--help" | "-h"] => print(&ext::action_help(definition, declared)),
                ["--input-schema"] => print(&ext::standalone(&declared.input)),
                ["--output-schema"] => print(&ext::standalone(&declared.output)),
                [flag] if flag.starts_with('-') && *flag != "-" => {
                    unknown_flag(flag, &help_command)
                }
                [] => execute_extension(extension, declared, None),
                [input] => execute_extension(extension, declared, Some(input)),
                [_, extra, ..] => usage_error(
                    &format!(
                        "unexpected argument `{extra}`: pass the whole input as one JSON value"
                    ),
                    &[format!("run `{help_command}`")],
                ),
            }
        }
    }
}

fn execute_extension(extension: &Known, action: &ExtensionAction, input: Option<&str>) -> Exit {
    let (base_url, token) = match runtime_credentials() {
        Ok(found) => found,
        Err(exit) => return exit,
    };
    let name = format!("{} {}", extension.definition.name, action.action);
    let input = match transport::read_input_with(
        &name,
        |empty| extension.validate_input(action, empty).is_ok(),
        input,
    ) {
        Ok(input) => input,
        Err(message) => {
            return usage_error(&message, &[format!("run `agentteam exec {name} --help`")]);
        }
    };
    if let Err(error) = extension.validate_input(action, &input) {
        return print_envelope(&error.envelope(), Exit::ActionFailed);
    }
    let rule = extension.rule(action);
    match transport::post_with(
        &base_url,
        (&extension.definition.name, &action.action),
        &token,
        &input,
        &rule,
    ) {
        Ok((envelope, ok)) => print_envelope(
            &envelope,
            if ok {
                Exit::Success
            } else {
                Exit::ActionFailed
            },
        ),
        Err(message) => usage_error(&message, &[]),
    }
}

/// The daemon's Exec route and this runtime's token, from the two variables a daemon-launched
/// runtime receives; without both, execution fails closed.
fn runtime_credentials() -> Result<(String, String), Exit> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let (Some(base_url), Some(token_file)) = (var(BASE_URL_VAR), var(TOKEN_FILE_VAR)) else {
        return Err(usage_error(
            "agentteam exec runs actions only inside a runtime launched by the agentteam daemon",
            &[format!(
                "{BASE_URL_VAR} and {TOKEN_FILE_VAR} are set by `agentteam run`; help and schemas work anywhere"
            )],
        ));
    };
    // The bearer goes only to the daemon's canonical loopback route: checked before the token
    // file is read.
    let base_url = match base_url
        .to_str()
        .ok_or_else(|| "it is not valid UTF-8".to_string())
        .and_then(|text| runtime_url::parse(text, Bridge::Exec))
    {
        Ok(url) => url.url,
        Err(why) => {
            return Err(usage_error(
                &format!("{BASE_URL_VAR} is not the daemon's Exec route: {why}"),
                &["run `agentteam exec` inside a runtime launched by `agentteam run`".into()],
            ));
        }
    };
    // Exactly one read of the declared file; no fallback to any other credential source.
    let Ok(token) = transport::read_token_file(std::path::Path::new(&token_file)) else {
        return Err(usage_error(transport::TOKEN_FILE_REFUSED, &[]));
    };
    Ok((base_url, token))
}

/// Execution is registered only for daemon-launched runtimes, which receive both variables.
fn execute(descriptor: &'static ActionDescriptor, input: Option<&str>) -> Exit {
    let (base_url, token) = match runtime_credentials() {
        Ok(found) => found,
        Err(exit) => return exit,
    };
    // Only the schemas this call uses are compiled: a one-shot process should not pay for all.
    let catalog = Validators::lazy();
    let input = match transport::read_input(descriptor, &catalog, input) {
        Ok(input) => input,
        Err(message) => {
            return usage_error(
                &message,
                &[format!(
                    "run `agentteam exec {} {} --help`",
                    descriptor.domain, descriptor.action
                )],
            );
        }
    };
    // The same descriptor validates before anything is sent.
    if let Err(error) = catalog.validate_input(descriptor.id, &input) {
        return print_envelope(&error.envelope(), Exit::ActionFailed);
    }
    match transport::post(&base_url, descriptor, &token, &input, &catalog) {
        Ok((envelope, ok)) => print_envelope(
            &envelope,
            if ok {
                Exit::Success
            } else {
                Exit::ActionFailed
            },
        ),
        Err(message) => usage_error(&message, &[]),
    }
}

fn print_envelope(envelope: &serde_json::Value, exit: Exit) -> Exit {
    match print(&format!("{envelope}\n")) {
        Exit::Success => exit,
        other => other,
    }
}

fn unknown_flag(flag: &str, help_command: &str) -> Exit {
    usage_error(
        &format!("unknown option `{flag}`"),
        &[format!("run `{help_command}`")],
    )
}

/// `error: unknown domain `tsak``, a "did you mean" line, and every valid name.
fn unknown_name(what: &str, given: &str, names: &[&str], help_command: &str) -> Exit {
    let mut hints = Vec::new();
    let mut close: Vec<&&str> = names.iter().filter(|name| is_close(given, name)).collect();
    close.sort_by_key(|name| edit_distance(given, name));
    if let Some(best) = close.first() {
        hints.push(format!("did you mean `{best}`?"));
    }
    hints.push(format!("valid names: {}", names.join(", ")));
    hints.push(format!("run `{help_command}`"));
    usage_error(&format!("unknown {what}: `{given}`"), &hints)
}

fn is_close(given: &str, name: &str) -> bool {
    edit_distance(given, name) <= 2 || (given.len() >= 3 && name.starts_with(given))
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("task", "task"), 0);
        assert_eq!(edit_distance("tsak", "task"), 2);
        assert_eq!(edit_distance("tas", "task"), 1);
        assert_eq!(edit_distance("", "add"), 3);
    }
}
