//! Shell completion fed by the catalog, in a real bash, and the man page from the command tree.

use std::process::{Command, Stdio};

use agentteam::contract::catalog::{DOMAINS, domain_actions};

use crate::support::{bin, repo_root};

/// What bash offers for the words `line` when the cursor ends the last one: the registered
/// function is called the way bash calls it (`$1` the command, `$2` the current word, `$3` the
/// previous one, `COMP_WORDS`/`COMP_CWORD` set).
fn bash_complete(line: &[&str]) -> Vec<String> {
    let bin_dir = std::path::Path::new(bin()).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let quoted: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        r#"source <(AGENTTEAM_COMPLETE=bash agentteam) || exit 3
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
_clap_complete_agentteam agentteam "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        words = quoted.join(" ")
    );
    let output = Command::new("bash")
        .args(["--noprofile", "--norc", "-c", &script])
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut offered: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    offered.sort();
    offered
}

#[test]
fn bash_completes_exec_domains_and_actions_from_the_catalog() {
    let mut domains: Vec<String> = DOMAINS
        .iter()
        .filter(|d| d.name.starts_with('t'))
        .map(|d| d.name.to_string())
        .collect();
    domains.sort();
    assert_eq!(domains, ["task", "team"]);
    assert_eq!(bash_complete(&["agentteam", "exec", "t"]), domains);
    assert_eq!(bash_complete(&["agentteam", "exec", "ta"]), ["task"]);

    let mut actions: Vec<String> = domain_actions("task")
        .filter(|a| a.action.starts_with('c'))
        .map(|a| a.action.to_string())
        .collect();
    actions.sort();
    assert!(actions.len() >= 3, "{actions:?}");
    assert_eq!(bash_complete(&["agentteam", "exec", "task", "c"]), actions);

    // An action's flags, `exec`'s own, and the rest of the command tree.
    assert_eq!(
        bash_complete(&["agentteam", "exec", "task", "create", "--in"]),
        ["--input-schema"]
    );
    assert_eq!(
        bash_complete(&["agentteam", "exec", "--err"]),
        ["--error-schema"]
    );
    assert_eq!(bash_complete(&["agentteam", "compl"]), ["completions"]);
    assert_eq!(bash_complete(&["agentteam", "completions", "f"]), ["fish"]);
}

/// `agentteam completions SHELL` prints the line that registers the shell's completion, and the
/// script that line loads is that shell's.
#[test]
fn every_shell_has_its_registration() {
    for (shell, line, marker) in [
        (
            "bash",
            "source <(AGENTTEAM_COMPLETE=bash agentteam)",
            "complete -o nospace",
        ),
        (
            "zsh",
            "source <(AGENTTEAM_COMPLETE=zsh agentteam)",
            "#compdef agentteam",
        ),
        (
            "fish",
            "AGENTTEAM_COMPLETE=fish agentteam | source",
            "complete --keep-order",
        ),
        (
            "powershell",
            "$env:AGENTTEAM_COMPLETE = \"powershell\"; agentteam | Out-String | Invoke-Expression; Remove-Item Env:\\AGENTTEAM_COMPLETE",
            "Register-ArgumentCompleter",
        ),
    ] {
        let printed = Command::new(bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(printed.status.success());
        assert_eq!(
            String::from_utf8(printed.stdout).unwrap(),
            format!("{line}\n")
        );
        let script = Command::new(bin())
            .env("AGENTTEAM_COMPLETE", shell)
            .output()
            .unwrap();
        assert!(script.status.success(), "{shell}");
        let script = String::from_utf8(script.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
    }
}

/// `agentteam man` renders with `man -l`, names the commands, and `generated/agentteam.1` is
/// exactly it (rewritten on a developer's machine when stale, like the rest of `generated/`).
#[test]
fn the_man_page_renders_and_its_mirror_is_fresh() {
    let page = Command::new(bin()).arg("man").output().unwrap();
    assert!(page.status.success());
    let roff = String::from_utf8(page.stdout).unwrap();
    let rendered = Command::new("man")
        .args(["-l", "-"])
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`man` is needed to render the page (Debian: man-db): {e}"))
        .unwrap();
    use std::io::Write;
    rendered
        .stdin
        .as_ref()
        .unwrap()
        .write_all(roff.as_bytes())
        .unwrap();
    let rendered = rendered.wait_with_output().unwrap();
    assert!(rendered.status.success());
    let text = String::from_utf8_lossy(&rendered.stdout);
    for word in ["agentteam", "exec", "completions", "daemon", "SUBCOMMANDS"] {
        assert!(
            text.contains(word),
            "`{word}` not in the rendered page:\n{text}"
        );
    }

    // The pages the top one lists are one command away.
    let exec = Command::new(bin()).args(["man", "exec"]).output().unwrap();
    assert!(exec.status.success());
    assert!(
        String::from_utf8(exec.stdout)
            .unwrap()
            .contains(".TH agentteam-exec 1")
    );
    let unknown = Command::new(bin()).args(["man", "nope"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8(unknown.stderr)
            .unwrap()
            .contains("no command `nope`")
    );

    let mirror = repo_root().join("generated/agentteam.1");
    if std::fs::read_to_string(&mirror).ok().as_deref() == Some(roff.as_str()) {
        return;
    }
    if std::env::var_os("CI").is_some() {
        panic!("generated/agentteam.1 is stale; run `cargo test` locally and commit it");
    }
    std::fs::write(&mirror, &roff).unwrap();
    panic!("generated/agentteam.1 was stale and has been refreshed; review and commit it");
}
