//! The console: the person's pages in a browser, on a loopback listener of the daemon's own.
//!
//! Its own listener gives it its own origin: the MCP and Exec routes keep serving no page (a
//! browser request there is refused as before), and the console accepts no bearer. It answers
//! only at `http://<name>.localhost:<port>`, where `<name>` is random per state directory
//! (`console.json`): browsers resolve every `*.localhost` name to loopback, and a cookie set here
//! is host-only, so a server on another loopback name (another user's, an agent's dev server on
//! `127.0.0.1:3000`) is never sent it; a page can name this host only by knowing it. A cookie is
//! not bound to a port: a browser sent to this name on another port would send it there, so a
//! link in agent text to a loopback name is shown as its text only (`markdown`).
//!
//! Every request is checked before any route ([`front`]): the exact `Host` (port included: a
//! DNS-rebinding page carries its own name), no `Origin` but the console's own (the login form
//! of `agentteam open`'s owner-only file comes from `file:`, `Origin: null`, and carries the
//! code instead), and a session cookie (HttpOnly, SameSite=Strict) everywhere but the login and
//! the page assets. A state change also carries the session's CSRF proof ([`CsrfForm`]). The
//! console holds no credential a page could read: it calls the server's human API through the
//! daemon's server client, as the daemon's person, and never sends a token, a device credential
//! or a runtime's credential to a page, a URL or a script.

mod html;
mod live;
mod markdown;
mod oversight;
mod pages;
pub mod session;
pub mod site;

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::state::DaemonState;
use session::Session;
pub use site::{CONSOLE_FILE, Console, LOGIN_FILE, MAX_LIVE_STREAMS, bind};

/// The session cookie's name.
pub const COOKIE: &str = "agentteam_console";
/// The largest form body a console page posts.
const MAX_FORM: usize = 64 * 1024;

const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");

/// Every page's policy: nothing but this origin's own script, style and connections; no frame,
/// no plugin, no form to elsewhere.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// Every route of the console.
pub fn router(state: DaemonState) -> Router {
    Router::new()
        .route("/", get(pages::conversations))
        .route("/dm", post(pages::dm))
        .route("/c/{target}", get(pages::conversation))
        .route("/c/{target}/post", post(pages::post))
        .route("/c/{target}/react", post(pages::react))
        .route("/c/{target}/retry", post(pages::retry))
        .route("/c/{target}/work", get(pages::work))
        .route("/approvals", get(oversight::approvals))
        .route("/approvals/{approvalId}/decide", post(oversight::decide))
        .route("/runtimes", get(oversight::runtimes))
        .route("/runtimes/{runId}/stop", post(oversight::stop))
        .route("/audit", get(oversight::audit))
        .route("/costs", get(oversight::costs))
        .route("/attachments/{attachmentId}", get(oversight::attachment))
        .route("/live", get(live::stream))
        .route("/login", post(login))
        .route("/logout", post(logout))
        .route("/static/console.js", get(script))
        .route("/static/console.css", get(style))
        .fallback(|| async {
            refusal(
                StatusCode::NOT_FOUND,
                "Not found",
                "The console has no such page.",
            )
        })
        .layer(middleware::from_fn_with_state(state.clone(), front))
        .with_state(state)
}

/// A plain page with a status: a refusal or an error, no script, no form.
fn refusal(status: StatusCode, title: &str, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html::plain(title, &[why]),
    )
        .into_response()
}

/// The headers every answer carries.
fn secure(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_SECURITY_POLICY, PAGE_POLICY);
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    // Not `no-referrer`: under it a browser sends `Origin: null` with the console's own forms,
    // which the origin check must refuse. Another origin gets no referrer either way.
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(headers, header::CACHE_CONTROL, "no-store");
    headers.insert(
        header::HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

/// The session cookie's value, when the request carries exactly one.
fn session_id(headers: &HeaderMap) -> Option<String> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string());
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Every request, before any route: the exact `Host`, only the console's own `Origin`, and a
/// session (but for the login and the assets); every answer gets the console's headers.
async fn front(State(state): State<DaemonState>, mut request: Request, next: Next) -> Response {
    let console = &state.console;
    let headers = request.headers();
    let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or("\u{0}"));
    let host_ok = text(header::HOST).is_some_and(|h| h.eq_ignore_ascii_case(&console.authority));
    let path = request.uri().path().to_string();
    let login = path == "/login" && request.method() == Method::POST;
    let mut response = if !host_ok {
        refusal(
            StatusCode::MISDIRECTED_REQUEST,
            "Wrong address",
            // The console's name is not told: a rebinding page would read it here.
            "This is not the AgentTeam console's address. Run `agentteam open` to open it.",
        )
    } else if let Some(origin) = text(header::ORIGIN)
        && origin != console.origin
        && !(login && origin == "null")
    {
        refusal(
            StatusCode::FORBIDDEN,
            "Refused",
            "A page of another origin may not use the AgentTeam console.",
        )
    } else if request.method() != Method::GET && request.method() != Method::HEAD && !login {
        // A state change must say where it comes from (every browser sends `Origin` on a POST).
        if text(header::ORIGIN).is_none() {
            refusal(
                StatusCode::FORBIDDEN,
                "Refused",
                "A change must come from a console page.",
            )
        } else {
            with_session(&state, &mut request, next).await
        }
    } else if login || path.starts_with("/static/") {
        next.run(request).await
    } else {
        with_session(&state, &mut request, next).await
    };
    secure(response.headers_mut());
    response
}

/// Runs the route with the request's session in its extensions, or answers that there is none.
async fn with_session(state: &DaemonState, request: &mut Request, next: Next) -> Response {
    let Some(session) =
        session_id(request.headers()).and_then(|id| state.console.logins.session(&id))
    else {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "Signed out",
            "This browser is not signed in to the AgentTeam console (or the daemon restarted). \
             Run `agentteam open` in a terminal to sign in.",
        );
    };
    request.extensions_mut().insert(session);
    let request = std::mem::replace(request, Request::new(Body::empty()));
    next.run(request).await
}

/// A form posted by a console page: its fields, read only once its CSRF proof matched the
/// session's.
pub struct CsrfForm {
    pub session: Session,
    pub fields: std::collections::HashMap<String, String>,
}

impl CsrfForm {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

impl FromRequest<DaemonState> for CsrfForm {
    type Rejection = Response;

    async fn from_request(request: Request, _: &DaemonState) -> Result<Self, Response> {
        let session = request
            .extensions()
            .get::<Session>()
            .cloned()
            .ok_or_else(|| refusal(StatusCode::UNAUTHORIZED, "Signed out", "No session."))?;
        let bytes = axum::body::to_bytes(request.into_body(), MAX_FORM)
            .await
            .map_err(|_| {
                refusal(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "Too large",
                    "That form is larger than the console takes.",
                )
            })?;
        let fields: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(&bytes).into_owned().collect();
        if !session.proves(fields.get("csrf").map(String::as_str)) {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                "Refused",
                "This form's proof does not match this browser's session: reload the page and \
                 try again.",
            ));
        }
        Ok(CsrfForm { session, fields })
    }
}

/// `POST /login` with `code`: the one-time code of `agentteam open`'s login page, exchanged for a
/// session. The answer sets the cookie and moves on from the console's own page: a strict cookie
/// is not sent on a navigation another site (the `file:` page) started.
async fn login(State(state): State<DaemonState>, body: axum::body::Bytes) -> Response {
    let code = url::form_urlencoded::parse(&body)
        .find(|(name, _)| name == "code")
        .map(|(_, value)| value.into_owned());
    let redeemed = code
        .as_deref()
        .and_then(|code| state.console.logins.redeem(code));
    let (Some(code), Some((id, _))) = (code, redeemed) else {
        return refusal(
            StatusCode::FORBIDDEN,
            "This login has expired",
            "A login page opens the console once, within two minutes. Run `agentteam open` \
             again for a new one.",
        );
    };
    // The used code goes with its page; a newer page (`agentteam open` again) stays.
    let login_file = &state.console.login_file;
    if std::fs::read_to_string(login_file).is_ok_and(|page| page.contains(&code)) {
        let _ = std::fs::remove_file(login_file);
    }
    let cookie = format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        session::SESSION_TTL.as_secs()
    );
    let page = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
                <meta http-equiv=\"refresh\" content=\"0;url=/\">\
                <title>Signed in · AgentTeam</title><link rel=\"stylesheet\" href=\"/static/console.css\">\
                </head>\n<body><main id=\"main\"><h1>Signed in</h1>\
                <p><a href=\"/\">Open the console</a></p></main></body></html>\n";
    (
        [
            (header::SET_COOKIE, cookie),
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
        ],
        page,
    )
        .into_response()
}

/// `POST /logout`: ends this browser's session.
async fn logout(State(state): State<DaemonState>, request: Request) -> Response {
    let id = session_id(request.headers());
    let form = match CsrfForm::from_request(request, &state).await {
        Ok(form) => form,
        Err(refused) => return refused,
    };
    drop(form);
    if let Some(id) = id {
        state.console.logins.end(&id);
    }
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
        )],
        refusal(
            StatusCode::OK,
            "Signed out",
            "Run `agentteam open` to sign in again.",
        ),
    )
        .into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// The admin API's answer to `agentteam open`: where the console is and the login page to open.
pub fn opened(state: &DaemonState) -> std::io::Result<Value> {
    let file = state.console.new_login()?;
    Ok(json!({
        "url": format!("{}/", state.console.origin),
        "loginFile": file.display().to_string(),
        "expiresInSeconds": session::CODE_TTL.as_secs(),
    }))
}

/// The console's address, for `daemon.json`.
pub fn url(console: &Console) -> String {
    format!("{}/", console.origin)
}

/// The address the console listens on, for the log.
pub fn describe(address: SocketAddr, console: &Console) -> String {
    format!("{} (listening on {address})", url(console))
}
