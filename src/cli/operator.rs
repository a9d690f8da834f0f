//! How `agentteam admin` reaches a server as its operator: a server named by its URL with its
//! operator token file, or, when neither is given, the local daemon's embedded server (the
//! daemon started first when none runs) with the operator token that server wrote into the
//! daemon's state directory.

use std::path::{Path, PathBuf};

use clap::Args;

use super::output::{Exit, usage_error};

/// Where the server is and how to prove you operate it.
#[derive(Debug, Args)]
pub struct Connection {
    /// The server's base URL: `https://HOST`, or `http://` to loopback (default: the local
    /// daemon's embedded server)
    #[arg(long, env = "AGENTTEAM_SERVER_URL", requires = "operator_token_file")]
    server_url: Option<String>,
    /// PEM certificates the server's TLS chain may end in, beside the platform's roots
    #[arg(long, value_name = "PATH", requires = "server_url")]
    server_ca_file: Option<PathBuf>,
    /// The server's operator token file, owner-only (default: the local daemon's embedded
    /// server's, in its state directory)
    #[arg(long, requires = "server_url")]
    operator_token_file: Option<PathBuf>,
    /// The local daemon's state directory, whose embedded server to use (default:
    /// `$XDG_STATE_HOME/agentteam`)
    #[arg(long, conflicts_with = "server_url")]
    state_dir: Option<PathBuf>,
    /// Fail when no daemon runs there, instead of starting one (not used with `--server-url`)
    #[arg(
        long,
        env = "AGENTTEAM_NO_START",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    no_start: bool,
}

impl Connection {
    /// The server's base URL (checked), the operator token, and how to reach the server.
    pub fn open(&self) -> Result<(String, String, crate::client::http::Remote), Exit> {
        let (server_url, token_file) = match (&self.server_url, &self.operator_token_file) {
            (Some(url), Some(file)) => {
                // A server named by its URL cannot tell one local process from another; the
                // local daemon, if one runs, knows its runtimes. (The embedded server asks its
                // daemon itself.)
                super::local::refuse_runtime(&crate::daemon::default_state_dir())?;
                (url.clone(), file.clone())
            }
            _ => {
                let daemon = super::local::daemon(&self.state_dir, self.no_start)?;
                if !daemon.server_embedded {
                    return Err(usage_error(
                        &format!(
                            "the daemon with state dir `{}` uses the server `{}`, not an embedded one",
                            daemon.state_dir.display(),
                            daemon.server_url
                        ),
                        &[
                            "name it with `--server-url` and its `--operator-token-file`"
                                .to_string(),
                        ],
                    ));
                }
                let file = daemon
                    .state_dir
                    .join(crate::daemon::EMBEDDED_OPERATOR_TOKEN_FILE);
                (daemon.server_url, file)
            }
        };
        if let Err(e) = crate::client::http::server_url(&server_url) {
            return Err(usage_error(&format!("`--server-url`: {e}"), &[]));
        }
        let remote = crate::client::http::Remote {
            proxy: None,
            proxy_auth: None,
            roots: match &self.server_ca_file {
                None => Vec::new(),
                Some(path) => crate::client::http::load_roots(path)
                    .map_err(|e| usage_error(&format!("`--server-ca-file`: {e}"), &[]))?,
            },
        };
        let token = read_operator_token(&token_file)?;
        Ok((server_url.trim_end_matches('/').to_string(), token, remote))
    }
}

/// The operator token in `path`: this user's own owner-only file, checked before it is read.
fn read_operator_token(path: &Path) -> Result<String, Exit> {
    let token = crate::private_file::read_private(path).map_err(|e| {
        usage_error(
            &format!(
                "cannot use the operator token file `{}`: {e}",
                path.display()
            ),
            &[],
        )
    })?;
    let token = token.trim();
    if token.is_empty() {
        return Err(usage_error(
            &format!("the operator token file `{}` is empty", path.display()),
            &[],
        ));
    }
    Ok(token.to_string())
}
