//! How `agentteam admin` reaches a server as its operator: the server's URL, extra trust roots,
//! and the operator token file.

use std::path::PathBuf;

use clap::Args;

use super::output::{Exit, usage_error};

/// Where the server is and how to prove you operate it.
#[derive(Debug, Args)]
pub struct Connection {
    /// The server's base URL: `https://HOST`, or `http://` to loopback
    #[arg(
        long,
        env = "AGENTTEAM_SERVER_URL",
        default_value = "http://127.0.0.1:7780"
    )]
    server_url: String,
    /// PEM certificates the server's TLS chain may end in, beside the platform's roots
    #[arg(long, value_name = "PATH")]
    server_ca_file: Option<PathBuf>,
    /// The operator token file the server wrote at start
    #[arg(long)]
    operator_token_file: PathBuf,
}

impl Connection {
    /// The server's base URL (checked), the operator token, and how to reach the server.
    pub fn open(&self) -> Result<(String, String, crate::client::http::Remote), Exit> {
        if let Err(e) = crate::client::http::server_url(&self.server_url) {
            return Err(usage_error(&format!("`--server-url`: {e}"), &[]));
        }
        let remote = crate::client::http::Remote {
            proxy: None,
            roots: match &self.server_ca_file {
                None => Vec::new(),
                Some(path) => crate::client::http::load_roots(path)
                    .map_err(|e| usage_error(&format!("`--server-ca-file`: {e}"), &[]))?,
            },
        };
        let token = std::fs::read_to_string(&self.operator_token_file).map_err(|e| {
            usage_error(
                &format!(
                    "cannot read the operator token file `{}`: {e}",
                    self.operator_token_file.display()
                ),
                &[],
            )
        })?;
        Ok((
            self.server_url.trim_end_matches('/').to_string(),
            token.trim().to_string(),
            remote,
        ))
    }
}
