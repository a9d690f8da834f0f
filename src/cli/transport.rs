//! The client half of the Exec CLI transport: the token file read, the input, the one `POST`,
//! and the strict re-projection of the answer.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::http::{MAX_RESPONSE_BYTES, read_bounded};
use crate::contract::catalog::{ActionDescriptor, builtin_digest};
use crate::contract::json::parse_strict;
use crate::contract::{Validators, budget};
use crate::platform::fs::{PrivateOpen, is_owner_only};
use crate::wire::CATALOG_DIGEST_HEADER;
use crate::wire::MAX_BODY_BYTES;

/// The one message for every unusable credential file, whatever is wrong with it.
pub const TOKEN_FILE_REFUSED: &str = "the runtime credential file is missing, unreadable or invalid; agentteam exec does not fall back to any other credential";
/// A token file larger than this is refused.
pub const MAX_TOKEN_FILE_BYTES: u64 = 4096;
/// The launch's catalog file is read up to this size (64 definitions of at most 256 KiB).
pub const MAX_CATALOG_FILE_BYTES: u64 = 17 * 1024 * 1024;

/// The extensions the daemon pinned for this launch, from the catalog file beside the token
/// file (owner-only, written at activation); none outside a runtime or if it is unusable.
pub fn launch_extensions(token_file: &Path) -> Vec<crate::contract::extension::Known> {
    let Some(path) = token_file.parent().map(|dir| dir.join("catalog.json")) else {
        return Vec::new();
    };
    let read = || -> Option<String> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .no_follow()
            .open(&path)
            .ok()?;
        let metadata = file.metadata().ok()?;
        let private = metadata.is_file() && is_owner_only(&metadata);
        if !private {
            return None;
        }
        let mut text = String::new();
        file.by_ref()
            .take(MAX_CATALOG_FILE_BYTES)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    };
    read()
        .map(|text| crate::contract::extension::read_cli_catalog(&text))
        .unwrap_or_default()
}

/// Why the token file was refused (never shown: the caller prints one fixed message).
#[derive(Debug)]
pub struct TokenFileRefused;

/// Opens `path` without following a symlink, checks it is a regular file of this user with no
/// group/other bits and at most 4 KiB, and returns its one token.
pub fn read_token_file(path: &Path) -> Result<String, TokenFileRefused> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .no_follow()
        .open(path)
        .map_err(|_| TokenFileRefused)?;
    let metadata = file.metadata().map_err(|_| TokenFileRefused)?;
    if !metadata.is_file() || !is_owner_only(&metadata) || metadata.len() > MAX_TOKEN_FILE_BYTES {
        return Err(TokenFileRefused);
    }
    let mut bytes = Vec::new();
    file.by_ref()
        .take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| TokenFileRefused)?;
    token_from_bytes(&bytes)
}

/// The one token in a token file's `bytes` (at most [`MAX_TOKEN_FILE_BYTES`] in all): one run of
/// `[A-Za-z0-9._-]`, optionally followed by one newline, and nothing else.
pub fn token_from_bytes(bytes: &[u8]) -> Result<String, TokenFileRefused> {
    let token = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let well_formed = !token.is_empty()
        && bytes.len() as u64 <= MAX_TOKEN_FILE_BYTES
        && token
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if well_formed {
        Ok(String::from_utf8(token.to_vec()).expect("ASCII is UTF-8"))
    } else {
        Err(TokenFileRefused)
    }
}

/// The action's input: inline JSON, `-` for stdin, or `{}` when omitted and the schema accepts it.
pub fn read_input(
    descriptor: &ActionDescriptor,
    catalog: &Validators,
    input: Option<&str>,
) -> Result<Value, String> {
    read_input_with(
        &format!("{} {}", descriptor.domain, descriptor.action),
        |empty| catalog.validate_input(descriptor.id, empty).is_ok(),
        input,
    )
}

/// [`read_input`] for any action `name` (`github watch`), `accepts` saying whether `{}` is valid.
pub fn read_input_with(
    name: &str,
    accepts: impl Fn(&Value) -> bool,
    input: Option<&str>,
) -> Result<Value, String> {
    let text = match input {
        Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(MAX_BODY_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read the input from stdin: {e}"))?;
            if bytes.len() > MAX_BODY_BYTES {
                return Err(format!("the input exceeds {MAX_BODY_BYTES} bytes"));
            }
            bytes
        }
        Some(inline) => inline.as_bytes().to_vec(),
        None => {
            let empty = json!({});
            return if accepts(&empty) {
                Ok(empty)
            } else {
                Err(format!(
                    "`{name}` needs an input: pass one JSON value, or `-` to read it from stdin"
                ))
            };
        }
    };
    parse_strict(&text).map_err(|e| format!("the input is not one JSON value: {e}"))
}

/// What a command run inside a sandbox that refuses sockets is told.
pub const SANDBOX_REFUSED: &str = "the connection to the AgentTeam daemon was refused by this process's sandbox (connect: permission denied), so no action ran: the runtime's sandbox blocks network sockets. Under Codex, start it with `agentteam run --sandbox-network … -- codex --sandbox workspace-write …` (which lets its sandboxed commands reach the network), or run the command outside the sandbox";

/// Why the daemon could not be reached: a sandbox's refusal (`EPERM`/`EACCES` from `connect`)
/// said as such, a redirect by its status, anything else as unreachable.
fn unreachable(error: &reqwest::Error) -> String {
    if error.is_redirect() {
        return format!(
            "cannot reach the AgentTeam daemon: {}",
            crate::client::http::why_unreachable(error)
        );
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::PermissionDenied
        {
            return SANDBOX_REFUSED.to_string();
        }
        source = cause.source();
    }
    "cannot reach the AgentTeam daemon".to_string()
}

/// Sends the one request; returns the (re-projected) envelope and whether it is a success, or a
/// transport error message.
pub fn post(
    base_url: &str,
    descriptor: &'static ActionDescriptor,
    token: &str,
    input: &Value,
    catalog: &Validators,
) -> Result<(Value, bool), String> {
    post_with(
        base_url,
        (descriptor.domain, descriptor.action),
        token,
        input,
        &budget::Builtin {
            catalog,
            descriptor: descriptor.effective(input),
        },
    )
}

/// [`post`] for any action (an extension's too), re-projecting a refusal under `rule`.
pub fn post_with(
    base_url: &str,
    (domain, action): (&str, &str),
    token: &str,
    input: &Value,
    rule: &impl budget::Rule,
) -> Result<(Value, bool), String> {
    let url = format!("{}/{domain}/{action}", base_url.trim_end_matches('/'));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the client: {e}"))?;
    let answer = runtime.block_on(async {
        let client = crate::client::http::direct(Duration::from_secs(120));
        let mut request = client
            .post(url)
            .bearer_auth(token)
            .header(CATALOG_DIGEST_HEADER, builtin_digest());
        // A command line's trace context (`TRACEPARENT`, the convention of command-line tools),
        // passed on only when well formed; the daemon links it to its own trace.
        if let Some(context) = std::env::var("TRACEPARENT")
            .ok()
            .and_then(|text| crate::telemetry::context::parse(&text))
        {
            request = request.header(
                crate::telemetry::context::TRACEPARENT,
                crate::telemetry::context::format(&context),
            );
        }
        let response = request
            .json(input)
            .send()
            .await
            .map_err(|e| unreachable(&e))?;
        let status = response.status();
        let bytes = read_bounded(response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| format!("the AgentTeam daemon answered, but {e}"))?;
        Ok::<_, String>((status, bytes))
    });
    let (status, bytes) = answer?;
    let envelope: Value = serde_json::from_slice(&bytes)
        .map_err(|_| format!("the daemon answered {status} without a JSON envelope"))?;
    match envelope.get("ok").and_then(Value::as_bool) {
        Some(true) if status.is_success() => Ok((envelope, true)),
        Some(false) if !status.is_success() => Ok((budget::reproject_with(envelope, rule), false)),
        _ => Err(format!(
            "the daemon answered {status} with an unexpected body"
        )),
    }
}
