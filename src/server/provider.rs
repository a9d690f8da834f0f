//! The extension host's client of the providers' REST APIs: one pull request of GitHub
//! (`GET {base}/repos/{owner}/{repo}/pulls/{n}`) or Gitea (`GET {base}/api/v1/repos/…/pulls/{n}`),
//! read with the installation's credential and normalized to the extension's watch state.
//!
//! The client speaks HTTPS through rustls (the platform's roots plus any the operator names) and
//! refuses plain `http` except to a loopback host; it uses a proxy only when the operator
//! configured one, never the environment's. Answers are read under the 1 MiB bound and within the
//! configured timeout. Every failure is classified: the provider refused the credential
//! (401/403), the pull request does not exist (404), the provider failed or answered something
//! that is not a pull request, or it did not answer in time. No message carries the credential.

use std::time::Duration;

use serde::Deserialize;

use super::store::PullState;
use crate::client::http::{self, MAX_RESPONSE_BYTES, Remote};
use crate::contract::extension::Provider;

/// How the server reaches providers (`agentteam server --provider-*`).
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// One request's whole time.
    pub timeout: Duration,
    /// A watch is read again from the provider when its last read is older than this.
    pub min_refresh: Duration,
    /// An explicit proxy and extra trust roots.
    pub remote: Remote,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            timeout: Duration::from_secs(10),
            min_refresh: Duration::from_secs(60),
            remote: Remote::default(),
        }
    }
}

/// Why a provider read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderFailure {
    /// 401 or 403: the provider refused the installation's credential.
    #[error("the provider refused the app's credential (HTTP {0})")]
    Unauthorized(u16),
    #[error("the provider has no such pull request")]
    NotFound,
    #[error("the provider failed: {0}")]
    Failed(String),
    #[error("the provider did not answer in time")]
    Timeout,
}

/// The client: one per server, its connections pooled.
#[derive(Clone)]
pub struct ProviderClient {
    http: reqwest::Client,
}

impl ProviderClient {
    pub fn new(config: &ProviderConfig) -> ProviderClient {
        let http = http::builder(Some(&config.remote))
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a plain HTTP client builds");
        ProviderClient { http }
    }

    /// Reads pull request `number` of `repository` (`owner/name`) from the provider at `base_url`.
    pub async fn pull(
        &self,
        provider: Provider,
        base_url: &str,
        credential: &str,
        repository: &str,
        number: i64,
    ) -> Result<PullState, ProviderFailure> {
        let base = base_url.trim_end_matches('/');
        let (url, authorization) = match provider {
            Provider::Github => (
                format!("{base}/repos/{repository}/pulls/{number}"),
                format!("Bearer {credential}"),
            ),
            Provider::Gitea => (
                format!("{base}/api/v1/repos/{repository}/pulls/{number}"),
                format!("token {credential}"),
            ),
        };
        let response = self
            .http
            .get(url)
            .header(reqwest::header::AUTHORIZATION, authorization)
            .header(reqwest::header::ACCEPT, "application/json")
            .header(reqwest::header::USER_AGENT, "agentteam")
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let body = http::read_bounded(response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| match e {
                http::ReadError::TooLarge => {
                    ProviderFailure::Failed("its answer exceeds 1 MiB".into())
                }
                http::ReadError::Transport(e) => transport(e),
            })?;
        match status.as_u16() {
            200 => normalize(&body),
            401 | 403 => Err(ProviderFailure::Unauthorized(status.as_u16())),
            404 => Err(ProviderFailure::NotFound),
            other => Err(ProviderFailure::Failed(format!("it answered HTTP {other}"))),
        }
    }
}

fn transport(error: reqwest::Error) -> ProviderFailure {
    if error.is_timeout() {
        ProviderFailure::Timeout
    } else {
        ProviderFailure::Failed(http::why_unreachable(&error).to_string())
    }
}

/// The fields both providers' pull request objects share.
#[derive(Deserialize)]
struct Pull {
    title: String,
    state: String,
    #[serde(default)]
    merged: bool,
    head: Head,
    html_url: String,
    #[serde(default)]
    updated_at: Option<String>,
}

#[derive(Deserialize)]
struct Head {
    sha: String,
}

/// The provider's pull request as the watch's state: the title kept to 256 characters; an answer
/// without these fields, or with a state, sha or URL out of shape, is a provider failure.
fn normalize(body: &[u8]) -> Result<PullState, ProviderFailure> {
    let malformed = || ProviderFailure::Failed("its answer is not a pull request".into());
    let pull: Pull = serde_json::from_slice(body).map_err(|_| malformed())?;
    let state = match (pull.state.as_str(), pull.merged) {
        (_, true) => "merged",
        ("open", false) => "open",
        ("closed", false) => "closed",
        _ => return Err(malformed()),
    };
    let sha_ok = (7..=64).contains(&pull.head.sha.len())
        && pull
            .head
            .sha
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !sha_ok || pull.html_url.len() > 2048 || !pull.html_url.starts_with("http") {
        return Err(malformed());
    }
    let updated_at = pull
        .updated_at
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_millis());
    Ok(PullState {
        title: pull.title.chars().take(256).collect(),
        state: state.to_string(),
        head_sha: pull.head.sha,
        url: pull.html_url,
        updated_at,
    })
}

/// Checks a provider base URL: `https://`, or `http://` to loopback; no user info, query or
/// fragment (a credential never travels in a URL).
pub fn check_base_url(text: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(text).map_err(|_| format!("`{text}` is not a URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("the provider URL must not carry user info".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("the provider URL must not carry a query or fragment".into());
    }
    match url.scheme() {
        "https" => {}
        "http" if http::is_loopback(&url) => {}
        "http" => {
            return Err(format!(
                "`{text}` is plain http to a host that is not loopback; the app's credential would cross the network in clear text: use https://"
            ));
        }
        _ => return Err(format!("`{text}` must be an `https://` URL")),
    }
    Ok(text.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_request_is_normalized_and_anything_else_is_a_provider_failure() {
        let pull = |state: &str, merged: bool, sha: &str| {
            serde_json::to_vec(&serde_json::json!({
                "title": "t".repeat(300), "state": state, "merged": merged,
                "head": {"sha": sha}, "html_url": "https://example.test/pr/1",
                "updated_at": "2026-11-30T10:00:00Z", "extra": {"ignored": true}
            }))
            .unwrap()
        };
        let open = normalize(&pull("open", false, "0123abcd")).unwrap();
        assert_eq!(
            (open.state.as_str(), open.title.chars().count()),
            ("open", 256)
        );
        assert_eq!(open.updated_at, Some(1_796_032_800_000));
        assert_eq!(
            normalize(&pull("closed", true, "0123abcd")).unwrap().state,
            "merged"
        );
        assert_eq!(
            normalize(&pull("closed", false, "0123abcd")).unwrap().state,
            "closed"
        );
        for bad in [
            pull("draft", false, "0123abcd"),
            pull("open", false, "NOT-A-SHA"),
            b"{}".to_vec(),
            b"not json".to_vec(),
        ] {
            assert!(matches!(normalize(&bad), Err(ProviderFailure::Failed(_))));
        }
    }

    #[test]
    fn base_urls_are_https_or_loopback_without_user_info() {
        assert_eq!(
            check_base_url("https://api.github.com/").unwrap(),
            "https://api.github.com"
        );
        assert!(check_base_url("http://127.0.0.1:3000").is_ok());
        assert!(
            check_base_url("http://git.example.com")
                .unwrap_err()
                .contains("plain http")
        );
        assert!(check_base_url("https://user:pw@git.example.com").is_err());
        assert!(check_base_url("ftp://git.example.com").is_err());
    }
}
