//! The console's own state: its name and address, its logins, its live-stream permits and what
//! its pages reuse. Kept apart from the routes so the daemon's shared state can hold it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::session::{self, Logins};
use crate::clock::Clock;

/// Where the console's name and last port are kept, in the state directory.
pub const CONSOLE_FILE: &str = "console.json";
/// The owner-only login page `agentteam open` has the daemon write, in the state directory.
pub const LOGIN_FILE: &str = "console-login.html";
/// Live-update streams served at once (a browser shares one between its tabs).
pub const MAX_LIVE_STREAMS: usize = 16;

/// The console's own state, shared by the daemon's admin API (which mints login codes) and the
/// console's routes.
pub struct Console {
    /// `<name>.localhost:<port>`: the one `Host` the console answers.
    pub authority: String,
    /// `http://` + [`Console::authority`]: the one `Origin` it accepts.
    pub origin: String,
    pub logins: Logins,
    pub(super) login_file: PathBuf,
    pub(super) live: Arc<tokio::sync::Semaphore>,
    /// Ends the live streams at shutdown, so the listener drains at once.
    pub stop: CancellationToken,
    /// Who wrote what: handles by agent or human id, refreshed at most every few seconds.
    pub(super) names: Mutex<Option<(i64, Arc<Names>)>>,
    /// The last cost report and when it was read (it reads every session record).
    pub(super) costs: tokio::sync::Mutex<Option<(i64, Arc<crate::token::Report>)>>,
}

/// `console.json`: the console's per-install name and the port it last listened on.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    name: String,
    port: u16,
}

/// Binds the console's listener on loopback: the port it had before when it is free, else any.
/// Its name is made once per state directory and kept.
pub async fn bind(
    state_dir: &Path,
    clock: Arc<Clock>,
) -> std::io::Result<(tokio::net::TcpListener, Console)> {
    let file = state_dir.join(CONSOLE_FILE);
    let kept: Option<Kept> = std::fs::read(&file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .filter(|kept: &Kept| is_console_name(&kept.name));
    let name = kept.as_ref().map_or_else(
        || {
            format!(
                "{}.localhost",
                crate::daemon::auth::files::random_name("at-")
            )
            .to_lowercase()
        },
        |kept| kept.name.clone(),
    );
    let listener = match kept.as_ref().filter(|kept| kept.port != 0) {
        Some(kept) => match tokio::net::TcpListener::bind(("127.0.0.1", kept.port)).await {
            Ok(listener) => listener,
            Err(_) => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
        },
        None => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
    };
    let port = listener.local_addr()?.port();
    crate::private_file::replace(
        &file,
        &format!(
            "{}\n",
            json!({ "name": name, "port": port, "url": format!("http://{name}:{port}/") })
        ),
    )?;
    let authority = format!("{name}:{port}");
    let console = Console {
        origin: format!("http://{authority}"),
        authority,
        logins: Logins::new(clock),
        login_file: state_dir.join(LOGIN_FILE),
        live: Arc::new(tokio::sync::Semaphore::new(MAX_LIVE_STREAMS)),
        stop: CancellationToken::new(),
        names: Mutex::new(None),
        costs: tokio::sync::Mutex::new(None),
    };
    Ok((listener, console))
}

/// A name this daemon made: `at-` and letters and digits, under `.localhost`.
fn is_console_name(name: &str) -> bool {
    name.strip_suffix(".localhost")
        .and_then(|label| label.strip_prefix("at-"))
        .is_some_and(|rest| {
            (8..=60).contains(&rest.len())
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

impl Console {
    /// A new login: a one-time code written into the owner-only login page that posts it.
    /// Returns the page's path; the code itself is never returned.
    pub fn new_login(&self) -> std::io::Result<PathBuf> {
        let code = self.logins.mint_code();
        let page = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"referrer\" content=\"no-referrer\">\
             <title>Open the AgentTeam console</title></head>\n<body>\
             <form method=\"post\" action=\"{origin}/login\">\
             <input type=\"hidden\" name=\"code\" value=\"{code}\">\
             <p>This page signs this browser in to the AgentTeam console once, within {minutes} \
             minutes of <code>agentteam open</code>.</p>\
             <button type=\"submit\">Open the AgentTeam console</button></form>\
             <script>document.forms[0].submit()</script></body></html>\n",
            origin = self.origin,
            minutes = session::CODE_TTL.as_secs() / 60,
        );
        crate::private_file::replace(&self.login_file, &page)?;
        Ok(self.login_file.clone())
    }
}

/// Who wrote what: a handle for each agent and for the person.
pub struct Names {
    pub(super) by_id: HashMap<String, String>,
    /// The person's own human id.
    pub me: String,
    /// Every agent's handle (for `@` completion), and which the person owns.
    pub(super) agents: Vec<(String, String, bool)>,
}

impl Names {
    pub fn new(
        by_id: HashMap<String, String>,
        me: String,
        agents: Vec<(String, String, bool)>,
    ) -> Names {
        Names { by_id, me, agents }
    }

    pub fn of(&self, id: &str) -> String {
        self.by_id
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }
}
