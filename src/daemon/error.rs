//! Why the daemon could not start or reach its server.

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("another daemon is running with state dir `{0}`")]
    AlreadyRunning(String),
    #[error("state error: {0}")]
    State(String),
    #[error("the daemon's listen address must be a loopback address, not `{0}`")]
    NotLoopback(SocketAddr),
    #[error("cannot listen on `{0}`")]
    Listen(SocketAddr, #[source] std::io::Error),
    #[error("cannot start the embedded server")]
    EmbeddedServer(#[source] crate::server::ServerError),
    #[error("`--server-url` needs `--operator-token-file`")]
    MissingOperatorToken,
    /// With why, from [`crate::client::http::why_unreachable`].
    #[error("the AgentTeam Server is unreachable: {0}")]
    ServerUnreachable(&'static str),
    #[error("the AgentTeam Server refused: {0}")]
    ServerRefused(String),
    /// The server answered the request with an error envelope of this code.
    #[error("the AgentTeam Server refused: {message}")]
    ServerError {
        code: crate::contract::error::ErrorCode,
        message: String,
    },
}
