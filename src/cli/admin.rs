//! `agentteam admin …`: the operator's side of a server — workspaces, humans, agents, device
//! credentials, channels, threads, direct conversations, teams and human messages — over the
//! server's operator API.
//!
//! Results are printed for a person on stdout, or as JSON with `--json`. A device credential is
//! a secret: it is written to a new owner-only file and never printed.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value, json};

use super::http::{self, Peer};
use super::operator::Connection;
use super::output::{Exit, usage_error};

#[derive(Debug, Subcommand)]
pub enum ExtensionCommand {
    /// Record a definition (a JSON file) as its extension's next version
    Publish {
        #[command(flatten)]
        connection: Connection,
        /// The definition, in the shape of `schema/extensions/*.json`
        #[arg(long)]
        file: PathBuf,
    },
    /// List every extension's current version and digest
    List {
        #[command(flatten)]
        connection: Connection,
    },
}

#[derive(Debug, Subcommand)]
pub enum AppCommand {
    /// Install (or reinstall) an extension's app with its provider URL and credential
    Install {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        extension: String,
        /// The provider's API root (`https://api.github.com`, `https://gitea.example/`)
        #[arg(long)]
        base_url: String,
        /// A file (owner-only) holding the provider credential; it stays on the server
        #[arg(long)]
        credential_file: PathBuf,
    },
    /// Allow an agent of the workspace to use the installed app
    Allow {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        extension: String,
        #[arg(long)]
        agent: String,
    },
    /// Revoke the app: its credential is deleted and calls are refused until it is installed again
    Revoke {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        extension: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a workspace
    Workspace {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        name: String,
    },
    /// Create a human in a workspace
    Human {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        handle: String,
        #[arg(long)]
        display_name: String,
    },
    /// Create an agent owned by a human
    Agent {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        /// The owning human's id
        #[arg(long)]
        owner: String,
        #[arg(long)]
        handle: String,
        #[arg(long)]
        display_name: String,
    },
    /// Issue a device credential for a human and write it to a new owner-only file
    Device {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        human: String,
        /// Where to write the credential (must not exist yet)
        #[arg(long)]
        credential_file: PathBuf,
    },
    /// Create a channel with members
    Channel {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        name: String,
        /// A human or agent id; repeat for more
        #[arg(long = "member")]
        members: Vec<String>,
    },
    /// Create a thread in a channel
    Thread {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        channel: String,
        #[arg(long)]
        title: String,
    },
    /// Open the direct conversation of two members (created once; prints its `dm:` target)
    Dm {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        /// A human or agent id; give exactly two
        #[arg(long = "member", num_args = 1, required = true)]
        members: Vec<String>,
    },
    /// Create a team of humans and agents
    Team {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        handle: String,
        #[arg(long)]
        display_name: String,
        /// A human or agent id; repeat for more
        #[arg(long = "member")]
        members: Vec<String>,
    },
    /// List a workspace's approvals, most recently changed first (one page)
    Approvals {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        /// Only approvals in this state
        #[arg(long, value_parser = ["pending", "approved", "rejected"])]
        status: Option<String>,
        /// Page size, 1 to 100 (default 20)
        #[arg(long)]
        limit: Option<u32>,
        /// The previous page's `nextCursor`
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Approve or reject a pending approval as a human of the workspace (once)
    Decide {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        approval: String,
        /// The deciding human's id
        #[arg(long)]
        human: String,
        #[arg(long, value_parser = ["approve", "reject"])]
        decision: String,
        #[arg(long)]
        comment: Option<String>,
    },
    /// Publish and list app-hosted extension definitions
    Extension {
        #[command(subcommand)]
        command: ExtensionCommand,
    },
    /// What happened in a workspace, newest first: runtime requests and operator actions
    Audit(super::audit::AuditArgs),
    /// The knowledge base: sources, their grants, documents
    Kb {
        #[command(subcommand)]
        command: super::kb::KbCommand,
    },
    /// Install an extension's app in a workspace, allow agents to use it, revoke it
    App {
        #[command(subcommand)]
        command: AppCommand,
    },
    /// Post a message as a human in a channel (or dm, by its id) or one of its threads
    Message {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        workspace: String,
        /// The author human's id
        #[arg(long)]
        author: String,
        #[arg(long)]
        channel: String,
        #[arg(long)]
        thread: Option<String>,
        #[arg(long)]
        content: String,
    },
}

pub fn run(command: AdminCommand, json: bool) -> Exit {
    let (connection, path, body, credential_file) = match command {
        AdminCommand::Kb { command } => return super::kb::run(command, json),
        AdminCommand::Audit(args) => return super::audit::run(args, json),
        AdminCommand::Workspace { connection, name } => (
            connection,
            "/admin/workspaces".to_string(),
            json!({"name": name}),
            None,
        ),
        AdminCommand::Human {
            connection,
            workspace,
            handle,
            display_name,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/humans"),
            json!({"handle": handle, "displayName": display_name}),
            None,
        ),
        AdminCommand::Agent {
            connection,
            workspace,
            owner,
            handle,
            display_name,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/agents"),
            json!({"ownerHumanId": owner, "handle": handle, "displayName": display_name}),
            None,
        ),
        AdminCommand::Device {
            connection,
            workspace,
            human,
            credential_file,
        } => {
            if credential_file.exists() {
                return usage_error(
                    &format!(
                        "`{}` already exists; a credential is written only to a new file",
                        credential_file.display()
                    ),
                    &[],
                );
            }
            (
                connection,
                format!("/admin/workspaces/{workspace}/devices"),
                json!({"humanId": human}),
                Some(credential_file),
            )
        }
        AdminCommand::Channel {
            connection,
            workspace,
            name,
            members,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/channels"),
            json!({"name": name, "members": members}),
            None,
        ),
        AdminCommand::Thread {
            connection,
            workspace,
            channel,
            title,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/channels/{channel}/threads"),
            json!({"title": title}),
            None,
        ),
        AdminCommand::Dm {
            connection,
            workspace,
            members,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/dms"),
            json!({"memberIds": members}),
            None,
        ),
        AdminCommand::Team {
            connection,
            workspace,
            handle,
            display_name,
            members,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/teams"),
            json!({"handle": handle, "displayName": display_name, "members": members}),
            None,
        ),
        AdminCommand::Approvals {
            connection,
            workspace,
            status,
            limit,
            cursor,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/approvals/list"),
            json!({"status": status, "limit": limit, "cursor": cursor}),
            None,
        ),
        AdminCommand::Decide {
            connection,
            workspace,
            approval,
            human,
            decision,
            comment,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/approvals/{approval}/decision"),
            json!({"humanId": human, "decision": decision, "comment": comment}),
            None,
        ),
        AdminCommand::Extension {
            command: ExtensionCommand::Publish { connection, file },
        } => {
            let definition =
                match std::fs::read(&file)
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| {
                        crate::contract::json::parse_strict(&bytes).map_err(|e| e.to_string())
                    }) {
                    Ok(definition) => definition,
                    Err(e) => {
                        return usage_error(
                            &format!("cannot read the definition `{}`: {e}", file.display()),
                            &[],
                        );
                    }
                };
            (
                connection,
                "/admin/extensions".to_string(),
                json!({ "definition": definition }),
                None,
            )
        }
        AdminCommand::Extension {
            command: ExtensionCommand::List { connection },
        } => (
            connection,
            "/admin/extensions/list".to_string(),
            json!({}),
            None,
        ),
        AdminCommand::App {
            command:
                AppCommand::Install {
                    connection,
                    workspace,
                    extension,
                    base_url,
                    credential_file,
                },
        } => {
            // Read from an owner-only file: a credential is never an argument.
            let credential = match crate::private_file::read_private(&credential_file) {
                Ok(text) => text.trim_end_matches('\n').to_string(),
                Err(e) => {
                    return usage_error(
                        &format!(
                            "cannot read the credential file `{}`: {e}",
                            credential_file.display()
                        ),
                        &[],
                    );
                }
            };
            (
                connection,
                format!("/admin/workspaces/{workspace}/apps"),
                json!({ "extension": extension, "baseUrl": base_url, "credential": credential }),
                None,
            )
        }
        AdminCommand::App {
            command:
                AppCommand::Allow {
                    connection,
                    workspace,
                    extension,
                    agent,
                },
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/apps/{extension}/grants"),
            json!({ "agentId": agent }),
            None,
        ),
        AdminCommand::App {
            command:
                AppCommand::Revoke {
                    connection,
                    workspace,
                    extension,
                },
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/apps/{extension}/revoke"),
            json!({}),
            None,
        ),
        AdminCommand::Message {
            connection,
            workspace,
            author,
            channel,
            thread,
            content,
        } => (
            connection,
            format!("/admin/workspaces/{workspace}/messages"),
            json!({"authorHumanId": author, "channelId": channel, "threadId": thread, "content": content}),
            None,
        ),
    };
    let (base, token, remote) = match connection.open() {
        Ok(opened) => opened,
        Err(exit) => return exit,
    };
    let body = strip_nulls(body);
    let url = format!("{base}{path}");
    let mut data = match http::call(
        Peer::Server(&remote),
        reqwest::Method::POST,
        &url,
        &token,
        Some(&body),
    ) {
        Ok(data) => data,
        Err(exit) => return exit,
    };
    if let Some(file) = credential_file {
        let credential = data.as_object_mut().and_then(|d| d.remove("credential"));
        let Some(credential) = credential.as_ref().and_then(Value::as_str) else {
            return usage_error("the server did not return a credential", &[]);
        };
        if let Err(e) = crate::private_file::create_new(&file, credential) {
            return usage_error(&format!("cannot write `{}`: {e}", file.display()), &[]);
        }
        data["credentialFile"] = json!(file.display().to_string());
    }
    super::output::answer(&data, json)
}

fn strip_nulls(mut body: Value) -> Value {
    if let Some(object) = body.as_object_mut() {
        object.retain(|_, v| !v.is_null());
    }
    body
}
