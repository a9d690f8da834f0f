//! `agentteam admin kb …`: the knowledge base as its operator fills it: sources, grants, and
//! documents from text and Markdown files (one by one, or a whole directory with a progress line
//! on stderr).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::{Value, json};

use super::http::{Peer, Session};
use super::operator::Connection;
use super::output::{Exit, count, print, usage_error};

/// Files the importer reads; everything else is skipped.
const EXTENSIONS: &[&str] = &["md", "markdown", "txt"];
/// A file larger than this is skipped (the server's request bound is 1 MiB).
const MAX_FILE_BYTES: u64 = 900 * 1024;
/// At most this many files in one import.
const MAX_FILES: usize = 100_000;

#[derive(Debug, Subcommand)]
pub enum KbCommand {
    /// Create a knowledge source in a workspace
    Source {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        name: String,
    },
    /// Grant a source to a channel (its threads and their tasks) or a team (its members' channels and dms)
    Grant {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        source: String,
        #[arg(long, conflicts_with = "team", required_unless_present = "team")]
        channel: Option<String>,
        #[arg(long)]
        team: Option<String>,
    },
    /// Add text or Markdown files to a source (a file at the same path replaces the earlier one)
    Add {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        source: String,
        /// The files; each is stored under its file name
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Add every `.md`, `.markdown` and `.txt` file under a directory, with a progress line on stderr
    Import {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        source: String,
        /// The directory; each file is stored under its path relative to it
        dir: PathBuf,
    },
}

pub fn run(command: KbCommand, json: bool) -> Exit {
    match command {
        KbCommand::Source {
            connection,
            workspace,
            name,
        } => one(
            &connection,
            &format!("/admin/workspaces/{workspace}/kb/sources"),
            json!({ "name": name }),
            json,
        ),
        KbCommand::Grant {
            connection,
            workspace,
            source,
            channel,
            team,
        } => {
            let body = match (channel, team) {
                (Some(channel), _) => json!({ "channelId": channel }),
                (None, Some(team)) => json!({ "teamId": team }),
                (None, None) => return usage_error("give `--channel` or `--team`", &[]),
            };
            one(
                &connection,
                &format!("/admin/workspaces/{workspace}/kb/sources/{source}/grants"),
                body,
                json,
            )
        }
        KbCommand::Add {
            connection,
            workspace,
            source,
            files,
        } => {
            let named: Vec<(String, PathBuf)> = files
                .into_iter()
                .map(|file| {
                    let name = file
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| file.display().to_string());
                    (name, file)
                })
                .collect();
            upload(&connection, &workspace, &source, named, false, json)
        }
        KbCommand::Import {
            connection,
            workspace,
            source,
            dir,
        } => {
            let mut files = Vec::new();
            if let Err(e) = walk(&dir, &dir, &mut files) {
                return usage_error(&format!("cannot read `{}`: {e}", dir.display()), &[]);
            }
            if files.len() > MAX_FILES {
                return usage_error(
                    &format!(
                        "`{}` holds more than {MAX_FILES} files to import",
                        dir.display()
                    ),
                    &["import its subdirectories one by one".into()],
                );
            }
            files.sort();
            upload(&connection, &workspace, &source, files, true, json)
        }
    }
}

fn one(connection: &Connection, path: &str, body: Value, json: bool) -> Exit {
    let (base, token, remote) = match connection.open() {
        Ok(opened) => opened,
        Err(exit) => return exit,
    };
    match Session::new(Peer::Server(&remote)).call(
        reqwest::Method::POST,
        &format!("{base}{path}"),
        &token,
        Some(&body),
    ) {
        Ok(data) => super::output::answer(&data, json),
        Err(exit) => exit,
    }
}

/// The importable files under `dir`, as `(path relative to root, file)`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else if kind.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            out.push((relative.to_string_lossy().into_owned(), path));
            if out.len() > MAX_FILES {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Uploads `files` one request each over one connection; a file that cannot be read (or is not
/// UTF-8, or is too large) is skipped and said so. Prints a summary (JSON with `json`).
fn upload(
    connection: &Connection,
    workspace: &str,
    source: &str,
    files: Vec<(String, PathBuf)>,
    progress: bool,
    json: bool,
) -> Exit {
    let (base, token, remote) = match connection.open() {
        Ok(opened) => opened,
        Err(exit) => return exit,
    };
    let session = Session::new(Peer::Server(&remote));
    let url = format!("{base}/admin/workspaces/{workspace}/kb/sources/{source}/documents");
    let total = files.len();
    let (mut created, mut replaced, mut skipped) = (0usize, 0usize, Vec::new());
    let at_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    for (index, (name, file)) in files.into_iter().enumerate() {
        let body = std::fs::metadata(&file)
            .map_err(|e| e.to_string())
            .and_then(|m| {
                if m.len() > MAX_FILE_BYTES {
                    Err(format!("larger than {} KiB", MAX_FILE_BYTES / 1024))
                } else {
                    std::fs::read_to_string(&file).map_err(|e| e.to_string())
                }
            });
        match body {
            Ok(body) => {
                let data = match session.call(
                    reqwest::Method::POST,
                    &url,
                    &token,
                    Some(&json!({ "path": name, "body": body })),
                ) {
                    Ok(data) => data,
                    Err(exit) => return exit,
                };
                if data["created"] == true {
                    created += 1;
                } else {
                    replaced += 1;
                }
            }
            Err(why) => {
                eprintln!("skipped {name}: {why}");
                skipped.push(name);
            }
        }
        let done = index + 1;
        if progress && (at_terminal || done % 100 == 0 || done == total) {
            let line = format!("imported {done} of {total} files");
            if at_terminal {
                eprint!("\r{line}");
                if done == total {
                    eprintln!();
                }
            } else {
                eprintln!("{line}");
            }
        }
    }
    if json {
        return print(&format!(
            "{}\n",
            json!({ "files": total, "created": created, "replaced": replaced, "skipped": skipped })
        ));
    }
    print(&format!(
        "{}: {created} new, {replaced} replaced, {} skipped\n",
        count(total as u64, "file", "files"),
        skipped.len()
    ))
}
