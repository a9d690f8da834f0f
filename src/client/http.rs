//! The one way our HTTP clients are built and read, for every client that carries a credential
//! (the CLI's admin and Exec calls, the daemon's `ServerClient` and operator client).
//!
//! None of them follows the user's proxy environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` in
//! any case): a proxy would receive the bearer. A loopback peer is always reached directly; a
//! remote AgentTeam Server goes through a proxy only when the operator named one on the command
//! line (`agentteam daemon --server-proxy`). None follows a redirect: one would resend the
//! credential and the body. Every answer is read under a size bound.
//!
//! A remote server is reached over `https://` (rustls with the ring provider; the platform's
//! roots plus any the operator names with `--server-ca-file`). Plain `http://` is for loopback
//! only: the device credential and the operator token must not cross a network in clear text.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Once;
use std::time::Duration;

/// The largest answer body any of our clients reads (the result budgets are far below it).
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// The most bytes of the human API's whole-attachment answer: an attachment of 1 MiB (the most
/// one may hold) is 1,398,104 characters of base64, with room for the rest of the answer.
pub const MAX_ATTACHMENT_ANSWER_BYTES: usize = 2 * 1024 * 1024;

/// How the operator said to reach a remote server: a proxy and extra trust roots, both named on
/// the command line (never taken from the environment).
#[derive(Debug, Clone, Default)]
pub struct Remote {
    /// An `http://`, `https://`, `socks5://` (names resolved here) or `socks5h://` (names resolved
    /// by the proxy) URL without user info ([`proxy_url`]).
    pub proxy: Option<reqwest::Url>,
    /// The proxy's user name and password, from an owner-only file ([`ProxyAuth::read`]).
    pub proxy_auth: Option<ProxyAuth>,
    /// Certificates a server's chain may end in, beside the platform's roots.
    pub roots: Vec<reqwest::Certificate>,
}

impl Remote {
    /// How to reach a remote peer, from the command line's flags `{proxy_flag}` (its URL,
    /// [`proxy_url`]), `{proxy_flag}-credential-file` ([`ProxyAuth::read`]) and `ca_flag` (a PEM
    /// bundle, [`load_roots`]); the refusal names the flag.
    pub fn from_flags(
        (proxy_flag, proxy): (&str, Option<&str>),
        credential_file: Option<&Path>,
        (ca_flag, ca_file): (&str, Option<&Path>),
    ) -> Result<Remote, String> {
        let proxy = proxy.map(|url| proxy_url(proxy_flag, url)).transpose()?;
        let proxy_auth = credential_file
            .map(ProxyAuth::read)
            .transpose()
            .map_err(|e| format!("`{proxy_flag}-credential-file`: {e}"))?;
        let roots = match ca_file {
            None => Vec::new(),
            Some(path) => load_roots(path).map_err(|e| format!("`{ca_flag}`: {e}"))?,
        };
        Ok(Remote {
            proxy,
            proxy_auth,
            roots,
        })
    }
}

/// A proxy's user name and password (basic authentication for an HTTP proxy, the
/// username/password method for SOCKS5). Its `Debug` shows neither.
#[derive(Clone)]
pub struct ProxyAuth {
    user: String,
    password: String,
}

impl std::fmt::Debug for ProxyAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyAuth(..)")
    }
}

impl ProxyAuth {
    /// `user:password` on one line of `path`, this user's own owner-only file: a proxy password
    /// never travels on a command line, which every user of the machine can read.
    pub fn read(path: &Path) -> Result<ProxyAuth, String> {
        let text = crate::private_file::read_private(path)
            .map_err(|e| format!("cannot use `{}`: {e}", path.display()))?;
        let line = text.strip_suffix('\n').unwrap_or(&text);
        match line.split_once(':') {
            Some((user, password)) if !user.is_empty() && !line.contains('\n') => Ok(ProxyAuth {
                user: user.to_string(),
                password: password.to_string(),
            }),
            _ => Err(format!(
                "`{}` must hold one line `user:password`",
                path.display()
            )),
        }
    }
}

/// Checks a proxy URL named with `flag`: `http://`, `https://`, `socks5://` or `socks5h://`, with
/// a host and without user info (its password would be in the process list; it goes in a
/// `{flag}-credential-file`), query or fragment. The refusal never repeats the URL.
pub fn proxy_url(flag: &str, text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|_| format!("`{flag}` is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https" | "socks5" | "socks5h") {
        return Err(format!(
            "`{flag}` must be an `http://`, `https://`, `socks5://` or `socks5h://` URL"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "`{flag}` must not carry user info: every user of this machine can read a process's arguments; put `user:password` in an owner-only file and name it with `{flag}-credential-file`"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{flag}` must not carry a query or fragment"));
    }
    if url.host().is_none() {
        return Err(format!("`{flag}` has no host"));
    }
    Ok(url)
}

/// Checks an AgentTeam Server base URL: `https://` to any host, `http://` to a loopback host
/// only, no user info, query or fragment. The error says what is wrong.
pub fn server_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|_| format!("`{text}` is not a URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("the server URL must not carry user info".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("the server URL must not carry a query or fragment".into());
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(format!(
            "`{text}` is plain http to a host that is not loopback; the credentials would cross the network in clear text: use https://"
        )),
        _ => Err(format!(
            "`{text}` must be an `https://` URL (or `http://` to loopback)"
        )),
    }
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The PEM certificates in `path` (at least one), for [`Remote::roots`].
pub fn load_roots(path: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("cannot read the CA file `{}`: {e}", path.display()))?;
    let roots = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|_| format!("`{}` is not a PEM certificate bundle", path.display()))?;
    if roots.is_empty() {
        return Err(format!("`{}` holds no PEM certificate", path.display()));
    }
    Ok(roots)
}

/// A client builder that uses no proxy from the environment: the remote's explicit proxy (never
/// for loopback hosts) or none at all, and the remote's extra roots.
pub fn builder(remote: Option<&Remote>) -> reqwest::ClientBuilder {
    static PROVIDER: Once = Once::new();
    // reqwest is built without a bundled crypto provider; ring is the process's one.
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        // Every client built here carries a credential (a bearer, a device key, the operator
        // token): following a redirect would send it, and the body, again to wherever the
        // answer points. A redirect is a transport failure that names its status.
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let refused = RedirectRefused(attempt.status().as_u16());
            attempt.error(refused)
        }))
        .pool_idle_timeout(crate::serve::CLIENT_IDLE_TIMEOUT);
    let Some(remote) = remote else { return builder };
    if !remote.roots.is_empty() {
        builder = builder.tls_certs_merge(remote.roots.iter().cloned());
    }
    match remote
        .proxy
        .as_ref()
        .map(|url| reqwest::Proxy::all(url.clone()))
    {
        Some(Ok(mut proxy)) => {
            if let Some(auth) = &remote.proxy_auth {
                proxy = proxy.basic_auth(&auth.user, &auth.password);
            }
            // Every loopback address and name is reached directly, never through the proxy.
            builder.proxy(proxy.no_proxy(reqwest::NoProxy::from_string(LOOPBACK_HOSTS)))
        }
        // A URL that parsed cannot fail here; fail closed to a direct connection anyway.
        Some(Err(_)) | None => builder,
    }
}

/// The hosts a named proxy is never used for: what [`is_loopback`] calls loopback.
const LOOPBACK_HOSTS: &str = "127.0.0.0/8,::1,localhost";

/// A builder for a client of the local daemon only (plain `http://` to loopback): no proxy, and no
/// TLS trust roots, since it never speaks TLS (loading the platform's roots opens many files,
/// which would slow every `agentteam exec`'s start; BENCHMARKS.md has the measurements).
pub fn loopback_builder() -> reqwest::ClientBuilder {
    builder(None).tls_certs_only(Vec::<reqwest::Certificate>::new())
}

/// A client of the local daemon ([`loopback_builder`]) with the given overall timeout.
pub fn direct(timeout: Duration) -> reqwest::Client {
    loopback_builder()
        .timeout(timeout)
        .build()
        .expect("a plain HTTP client builds")
}

/// A redirect the client refused to follow, by its status.
#[derive(Debug, Clone, Copy)]
pub struct RedirectRefused(pub u16);

impl RedirectRefused {
    /// What a person reads: the status, and that it was not followed.
    pub fn why(self) -> &'static str {
        // The statuses reqwest hands a redirect policy.
        match self.0 {
            301 => {
                "it answered with a redirect (301 Moved Permanently), which a client carrying a credential never follows"
            }
            302 => {
                "it answered with a redirect (302 Found), which a client carrying a credential never follows"
            }
            303 => {
                "it answered with a redirect (303 See Other), which a client carrying a credential never follows"
            }
            307 => {
                "it answered with a redirect (307 Temporary Redirect), which a client carrying a credential never follows"
            }
            308 => {
                "it answered with a redirect (308 Permanent Redirect), which a client carrying a credential never follows"
            }
            _ => "it answered with a redirect, which a client carrying a credential never follows",
        }
    }
}

impl std::fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.why())
    }
}

impl std::error::Error for RedirectRefused {}

/// Why a request to a server failed before any answer, in words safe to show anyone (no URL,
/// no header, no body).
pub fn why_unreachable(error: &reqwest::Error) -> &'static str {
    if error.is_timeout() {
        return "it did not answer in time";
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(mut cause) = source {
        if let Some(redirect) = cause.downcast_ref::<RedirectRefused>() {
            return redirect.why();
        }
        // An `io::Error` wrapping another error reports that error's source, not the error
        // (and the connector wraps one `io::Error` in another).
        while let Some(inner) = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            cause = inner;
        }
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return match tls {
                rustls::Error::InvalidCertificate(_) => {
                    "its TLS certificate is not trusted (name it with `--server-ca-file`) or does not match its name"
                }
                _ => "the TLS handshake failed",
            };
        }
        source = cause.source();
    }
    if error.is_connect() {
        "the connection failed"
    } else {
        "the request failed"
    }
}

/// Why an answer was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("the answer exceeds {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    #[error("the connection failed while reading the answer")]
    Transport(#[source] reqwest::Error),
}

impl ReadError {
    /// True when the read timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, ReadError::Transport(e) if e.is_timeout())
    }
}

/// The whole body of `response`, refusing one over `limit` bytes without reading past it.
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ReadError> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback listener that answers every request with `status` and a `Location` on the
    /// same origin, and counts the requests it read.
    async fn redirector(
        status: &'static str,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/first", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap_or(0) == 1
                {
                    head.push(byte[0]);
                }
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = format!(
                    "HTTP/1.1 {status}\r\nLocation: /again\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        (url, seen)
    }

    #[tokio::test]
    async fn a_client_that_carries_a_credential_follows_no_redirect() {
        for (status, code) in [
            ("301 Moved Permanently", "301"),
            ("302 Found", "302"),
            ("303 See Other", "303"),
            ("307 Temporary Redirect", "307"),
            ("308 Permanent Redirect", "308"),
        ] {
            let (url, seen) = redirector(status).await;
            let client = builder(None).build().unwrap();
            let error = client
                .post(&url)
                .bearer_auth("a-bearer")
                .body("{}")
                .send()
                .await
                .expect_err("a redirect is refused");
            assert!(error.is_redirect(), "{error:?}");
            let why = why_unreachable(&error);
            assert!(why.contains(code), "{why}");
            assert!(why.contains("never follows"), "{why}");
            assert_eq!(
                seen.load(std::sync::atomic::Ordering::SeqCst),
                1,
                "{status}"
            );
        }
    }

    #[test]
    fn a_proxy_url_carries_no_secret_and_names_a_known_scheme() {
        for good in [
            "http://proxy.internal:3128",
            "https://proxy.internal",
            "socks5://127.0.0.1:1080",
            "socks5h://socks.internal:1080",
        ] {
            assert!(proxy_url("--server-proxy", good).is_ok(), "{good}");
        }
        for (bad, said) in [
            (
                "socks5://ops:hunter2@127.0.0.1:1080",
                "must not carry user info",
            ),
            ("http://ops@proxy:3128", "must not carry user info"),
            ("http://proxy:3128/?token=hunter2", "query or fragment"),
            ("socks4://proxy:1080", "must be an `http://`"),
            ("hunter2", "is not a URL"),
        ] {
            let refusal = proxy_url("--server-proxy", bad).unwrap_err();
            assert!(refusal.contains(said), "{bad}: {refusal}");
            assert!(
                !refusal.contains("hunter2"),
                "{bad}: the URL is repeated: {refusal}"
            );
        }
        let refusal = proxy_url("--provider-proxy", "http://u:p@x").unwrap_err();
        assert!(
            refusal.contains("`--provider-proxy-credential-file`"),
            "{refusal}"
        );
    }

    #[test]
    fn a_proxy_credential_comes_from_one_line_of_an_owner_only_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("proxy.credential");
        let write = |text: &str, mode: u32| {
            std::fs::write(&file, text).unwrap();
            crate::platform::fs::set_mode(&file, mode).unwrap();
        };
        write("ops:pa:ss word\n", 0o600);
        let auth = ProxyAuth::read(&file).unwrap();
        assert_eq!(
            (auth.user.as_str(), auth.password.as_str()),
            ("ops", "pa:ss word")
        );
        assert_eq!(format!("{auth:?}"), "ProxyAuth(..)");
        write("ops:secret\n", 0o644);
        assert!(ProxyAuth::read(&file).unwrap_err().contains("mode 644"));
        for malformed in ["no-colon\n", ":password\n", "a:b\nc:d\n"] {
            write(malformed, 0o600);
            let refusal = ProxyAuth::read(&file).unwrap_err();
            assert!(
                refusal.contains("one line `user:password`"),
                "{malformed:?}: {refusal}"
            );
            assert!(!refusal.contains("password\n"), "{refusal}");
        }
    }
}
