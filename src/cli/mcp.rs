//! `agentteam mcp headers` and `agentteam mcp stdio`: what a runtime's own MCP client runs to reach
//! the daemon's MCP route with the launch's credential, which never enters the runtime's argv,
//! environment values or configuration.
//!
//! `headers` is the header helper Claude Code (`headersHelper`) and Codex
//! (`http_headers_helper`) run: it prints `{"Authorization":"Bearer …"}`, reading the token file
//! at every call, so a rotated token is picked up on the runtime's next reconnect or 401. Codex
//! runs it with a cleared environment, so the route and the file come as arguments.
//!
//! `stdio` is an MCP server on stdin/stdout (newline-delimited JSON-RPC, both protocol eras) for
//! runtimes that only speak stdio: each message is one `POST` to the daemon's MCP route with the
//! token read from the file for that request. It forwards the body untouched (`_meta` included,
//! so the route's delegated-child gate sees Codex's turn metadata) and adds the headers the HTTP
//! transport asks of a client: the protocol version (from the request's `_meta` in the
//! 2026-07-28 era, else the one `initialize` negotiated) and, in the 2026-07-28 era,
//! `Mcp-Method` and `Mcp-Name`. Answers go to stdout one per line, in the order they complete;
//! a notification's `202` writes nothing. A failure of the hop itself becomes a JSON-RPC error
//! for the request's id, with a message that names no URL, header or token.
//!
//! Both check the route and the token file the way `agentteam exec` does: the URL must be the
//! canonical MCP route on a literal loopback address, checked before the token file is read; the
//! file must be this user's private regular file, opened without following a link.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Subcommand;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::output::{Exit, usage_error};
use super::runtime_url::{self, Bridge};
use super::transport::read_token_file;
use crate::wire::jsonrpc;

/// The longest line (one JSON-RPC message) the bridge reads; the daemon's MCP body bound.
pub const MAX_LINE_BYTES: usize = crate::wire::MAX_BODY_BYTES;
/// Requests forwarded at once; reading stdin waits beyond this.
pub const MAX_IN_FLIGHT: usize = 32;
/// How long one forwarded request may take.
const HOP_TIMEOUT: Duration = Duration::from_secs(300);
/// The 2026-07-28 era's `_meta` key for the protocol version.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// `agentteam mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Print the HTTP headers of the daemon's MCP route as one JSON object, reading the token
    /// file now (the header helper of Claude Code and Codex); the route is checked first
    Headers {
        /// The daemon's MCP route of this launch, which the headers are for
        #[arg(long, value_name = "URL", env = "AGENTTEAM_MCP_URL")]
        url: String,
        /// The launch's MCP token file
        #[arg(long, value_name = "PATH", env = "AGENTTEAM_MCP_TOKEN_FILE")]
        token_file: PathBuf,
    },
    /// Serve MCP on stdin/stdout (newline-delimited JSON-RPC), forwarding every message to the
    /// daemon's MCP route with the launch's credential, read from its file per request
    Stdio {
        /// The daemon's MCP route of this launch
        #[arg(long, value_name = "URL", env = "AGENTTEAM_MCP_URL")]
        url: String,
        /// The launch's MCP token file
        #[arg(long, value_name = "PATH", env = "AGENTTEAM_MCP_TOKEN_FILE")]
        token_file: PathBuf,
    },
}

pub fn run(command: McpCommand) -> Exit {
    match command {
        McpCommand::Headers { url, token_file } => headers(&url, &token_file),
        McpCommand::Stdio { url, token_file } => stdio(&url, token_file),
    }
}

const TOKEN_FILE_REFUSED: &str =
    "the token file is missing, unreadable, or not this user's private regular file";

fn headers(url: &str, token_file: &Path) -> Exit {
    // The bearer is printed only for the launch's canonical loopback MCP route.
    if let Err(why) = runtime_url::parse(url, Bridge::Mcp) {
        return usage_error(&format!("`--url`: {why}"), &[]);
    }
    let Ok(token) = read_token_file(token_file) else {
        return usage_error(TOKEN_FILE_REFUSED, &[]);
    };
    let object = json!({ "Authorization": format!("Bearer {token}") });
    super::output::print(&format!("{object}\n"))
}

fn stdio(url: &str, token_file: PathBuf) -> Exit {
    let route = match runtime_url::parse(url, Bridge::Mcp) {
        Ok(route) => route,
        Err(why) => return usage_error(&format!("`AGENTTEAM_MCP_URL`: {why}"), &[]),
    };
    // The file is checked once up front, so a wrong path fails at start; every request reads it
    // again (rotation).
    if read_token_file(&token_file).is_err() {
        return usage_error(TOKEN_FILE_REFUSED, &[]);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return usage_error(&format!("cannot start: {e}"), &[]),
    };
    let bridge = Arc::new(Stdio {
        http: crate::client::http::direct(HOP_TIMEOUT),
        url: route.url,
        token_file,
        negotiated: Mutex::new(None),
    });
    match runtime.block_on(bridge.serve()) {
        Ok(()) => Exit::Success,
        Err(e) => {
            eprintln!("agentteam mcp stdio: {e}");
            Exit::Usage
        }
    }
}

struct Stdio {
    http: reqwest::Client,
    url: String,
    token_file: PathBuf,
    /// The version `initialize` negotiated (the legacy era sends it as a header afterwards).
    negotiated: Mutex<Option<String>>,
}

impl Stdio {
    /// Reads stdin to its end, forwarding each line; returns when every answer is written.
    async fn serve(self: Arc<Self>) -> std::io::Result<()> {
        let (answers, mut written) = tokio::sync::mpsc::channel::<String>(MAX_IN_FLIGHT);
        let writer = tokio::spawn(async move {
            let mut stdout = tokio::io::stdout();
            while let Some(line) = written.recv().await {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await?;
            }
            Ok::<(), std::io::Error>(())
        });
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
        let mut tasks = tokio::task::JoinSet::new();
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        loop {
            let line = match read_line(&mut stdin).await? {
                Line::End => break,
                Line::TooLong => {
                    let error = rpc_error(
                        &Value::Null,
                        jsonrpc::PARSE_ERROR,
                        &format!("a message is at most {MAX_LINE_BYTES} bytes"),
                    );
                    let _ = answers.send(error).await;
                    continue;
                }
                Line::Text(line) if line.trim().is_empty() => continue,
                Line::Text(line) => line,
            };
            let permit = slots.clone().acquire_owned().await.expect("never closed");
            let bridge = self.clone();
            let answers = answers.clone();
            tasks.spawn(async move {
                if let Some(answer) = bridge.forward(line).await {
                    let _ = answers.send(answer).await;
                }
                drop(permit);
            });
            // Finished tasks are collected as we go, so the set stays bounded.
            while tasks.try_join_next().is_some() {}
        }
        while tasks.join_next().await.is_some() {}
        drop(answers);
        writer.await.unwrap_or(Ok(()))
    }

    /// One message to the daemon; the line to write back, if any.
    async fn forward(&self, line: String) -> Option<String> {
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(_) => {
                return Some(rpc_error(
                    &Value::Null,
                    jsonrpc::PARSE_ERROR,
                    "the message is not JSON",
                ));
            }
        };
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str);
        let Ok(token) = read_token_file(&self.token_file) else {
            return id.map(|id| rpc_error(&id, jsonrpc::INTERNAL_ERROR, TOKEN_FILE_REFUSED));
        };
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        let meta_version = message
            .pointer("/params/_meta")
            .and_then(|meta| meta.get(META_VERSION))
            .and_then(Value::as_str);
        match meta_version {
            Some(version) => {
                request = request.header("mcp-protocol-version", version);
                if let Some(method) = method {
                    request = request.header("mcp-method", header_value(method));
                    if let Some(named) = jsonrpc::named_param(method)
                        .and_then(|param| message.pointer(&format!("/params/{param}")))
                        .and_then(Value::as_str)
                    {
                        request = request.header("mcp-name", header_value(named));
                    }
                }
            }
            None => {
                let negotiated = self.negotiated.lock().expect("not poisoned").clone();
                if let Some(version) = negotiated.filter(|_| method != Some("initialize")) {
                    request = request.header("mcp-protocol-version", version);
                }
            }
        }
        let answer = request.body(line).send().await;
        let response = match answer {
            Ok(response) => response,
            Err(error) => {
                let why = crate::client::http::why_unreachable(&error);
                return id.map(|id| {
                    rpc_error(
                        &id,
                        jsonrpc::INTERNAL_ERROR,
                        &format!("the agentteam daemon is unreachable: {why}"),
                    )
                });
            }
        };
        let status = response.status();
        let body =
            crate::client::http::read_bounded(response, crate::client::http::MAX_RESPONSE_BYTES)
                .await
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        let Some(body) = body else {
            if status == reqwest::StatusCode::ACCEPTED {
                return None;
            }
            return id.map(|id| {
                rpc_error(
                    &id,
                    jsonrpc::INTERNAL_ERROR,
                    &format!(
                        "the agentteam daemon answered HTTP {} without a JSON-RPC message",
                        status.as_u16()
                    ),
                )
            });
        };
        if method == Some("initialize")
            && let Some(version) = body
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
        {
            *self.negotiated.lock().expect("not poisoned") = Some(version.to_string());
        }
        // A message is one line: the compact form never holds a raw newline.
        Some(body.to_string())
    }
}

/// A header value for `text`: itself when it is visible ASCII, else the transport's base64 form.
fn header_value(text: &str) -> String {
    if text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') && text.trim() == text {
        text.to_string()
    } else {
        use base64::Engine;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    }
}

fn rpc_error(id: &Value, code: i64, message: &str) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }).to_string()
}

enum Line {
    Text(String),
    TooLong,
    End,
}

/// The next line of `input`, without its newline, read under [`MAX_LINE_BYTES`]: a longer one is
/// skipped to its end and reported; bytes that are not UTF-8 are replaced (the daemon refuses
/// the message as JSON).
async fn read_line(input: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Text(String::from_utf8_lossy(&line).into_owned()),
            });
        }
        let (chunk, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(end) => (&buffer[..end], Some(end + 1)),
            None => (buffer, None),
        };
        if !too_long && line.len() + chunk.len() <= MAX_LINE_BYTES {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let consumed = done.unwrap_or(buffer.len());
        input.consume(consumed);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Text(String::from_utf8_lossy(&line).into_owned())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_under_their_bound_and_an_oversized_one_is_skipped() {
        let at_edge = "x".repeat(MAX_LINE_BYTES);
        let over = "y".repeat(MAX_LINE_BYTES + 1);
        let input = format!("{at_edge}\n{over}\nnext\nlast");
        let mut reader = tokio::io::BufReader::with_capacity(4096, input.as_bytes());
        let mut seen = Vec::new();
        loop {
            match read_line(&mut reader).await.unwrap() {
                Line::End => break,
                Line::TooLong => seen.push("too long".to_string()),
                Line::Text(text) => seen.push(format!("{} bytes", text.len())),
            }
        }
        assert_eq!(
            seen,
            [
                format!("{MAX_LINE_BYTES} bytes"),
                "too long".into(),
                "4 bytes".into(),
                "4 bytes".into()
            ]
        );
    }

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_value("message_send"), "message_send");
        assert_eq!(header_value("é"), "=?base64?w6k=?=");
        assert_eq!(header_value(" x"), "=?base64?IHg=?=");
    }
}
