//! One local agent profile: what is stored, what is secret, and what a model may see.
//!
//! A profile lives in `<state dir>/agents/<agent id>/`: `profile.json` (no secret in it) and
//! `secrets.json` (the API key, the custom headers' values, and the base URL when it carries user
//! info, a query or a fragment), both owner-only. Only [`Profile::projection`] leaves the daemon
//! for a model: it says whether an API key is configured and names the headers, but never carries
//! a secret, the base URL's user info, query or fragment, knowledge source ids, or the
//! filesystem policy's paths (only their count).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::contract::types as t;

/// At most this many custom headers per profile.
pub const MAX_HEADERS: usize = 32;
/// At most this many allowed paths in a filesystem policy.
pub const MAX_ALLOWED_PATHS: usize = 256;
/// At most this many preferred knowledge sources.
pub const MAX_KNOWLEDGE_SOURCES: usize = 64;
/// The longest API key or header value stored.
pub const MAX_SECRET_BYTES: usize = 4096;

/// A profile as stored in `profile.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    pub agent_id: String,
    pub handle: String,
    /// `claude`, `codex`, `opencode` or `generic`.
    pub runtime_family: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The base URL without user info, query or fragment (a fuller one is in the secrets).
    pub base_url: Option<String>,
    /// A preference, never a grant.
    pub knowledge_source_ids: Vec<String>,
    /// The filesystem policy: paths the runtime may use.
    pub allowed_paths: Vec<PathBuf>,
    /// The agent's public profile on the server, read-only here.
    pub display_name: String,
    pub description: Option<String>,
    /// Increments with every change; starts at 1.
    pub revision: u64,
    /// Epoch milliseconds.
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A profile's secrets as stored in `secrets.json`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Secrets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// `(name, value)`, names normalized to lowercase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// The full base URL, when it carries user info, a query or a fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("api_key", &self.api_key.as_ref().map(|_| "<secret>"))
            .field("header_names", &self.summary().header_names)
            .finish_non_exhaustive()
    }
}

/// What may be said about a profile's secrets: whether an API key is set, and the header names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretSummary {
    pub api_key: bool,
    pub header_names: Vec<String>,
}

impl Secrets {
    pub fn summary(&self) -> SecretSummary {
        SecretSummary {
            api_key: self.api_key.is_some(),
            header_names: self.headers.iter().map(|(name, _)| name.clone()).collect(),
        }
    }
}

impl Profile {
    /// The safe projection (`AgentProfile` in the contract) with `live_sessions` runtimes.
    pub fn projection(
        &self,
        secrets: &SecretSummary,
        live_sessions: usize,
    ) -> Result<t::AgentProfile, serde_json::Error> {
        let mut value = json!({
            "id": self.agent_id,
            "handle": self.handle,
            "runtimeFamily": self.runtime_family,
            "apiKeyConfigured": secrets.api_key,
            "headerNames": secrets.header_names,
            "knowledgeSourceCount": self.knowledge_source_ids.len(),
            "filesystemPolicy": { "allowedPathCount": self.allowed_paths.len() },
            "displayName": self.display_name,
            "liveSessions": live_sessions,
            "revision": self.revision,
            "createdAt": rfc3339(self.created_at_ms),
            "updatedAt": rfc3339(self.updated_at_ms),
        });
        for (field, present) in [
            ("provider", &self.provider),
            ("model", &self.model),
            ("baseUrl", &self.base_url),
            ("description", &self.description),
        ] {
            if let Some(present) = present {
                value[field] = json!(present);
            }
        }
        // A profile edited by hand can hold what the contract's types refuse (a handle off its
        // pattern): an error for the owner to refuse, never a panic.
        serde_json::from_value(value)
    }
}

/// Epoch milliseconds as RFC 3339 UTC.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Splits a base URL into what may be shown (`scheme://host[:port][/path]`) and, when it carries
/// user info, a query or a fragment, the whole URL as a secret. `None` when it is not an
/// `http(s)` URL with a host.
pub fn split_base_url(text: &str) -> Option<(String, Option<String>)> {
    let url = url::Url::parse(text).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return None;
    }
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    let shown = shown.to_string();
    let shown = shown.strip_suffix('/').unwrap_or(&shown).to_string();
    let secret = (url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some())
    .then(|| text.to_string());
    Some((shown, secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_keeps_only_what_may_be_shown() {
        assert_eq!(
            split_base_url("https://api.example.com/v1"),
            Some(("https://api.example.com/v1".into(), None))
        );
        let (shown, secret) =
            split_base_url("https://user:pw@api.example.com:8443/v1?key=k#frag").unwrap();
        assert_eq!(shown, "https://api.example.com:8443/v1");
        assert_eq!(
            secret.as_deref(),
            Some("https://user:pw@api.example.com:8443/v1?key=k#frag")
        );
        assert_eq!(split_base_url("ftp://example.com"), None);
        assert_eq!(split_base_url("not a url"), None);
    }

    #[test]
    fn secrets_never_reach_a_debug_print() {
        let secrets = Secrets {
            api_key: Some("sk-marker".into()),
            headers: vec![("x-team".into(), "value-marker".into())],
            base_url: Some("https://u:marker@h".into()),
        };
        let printed = format!("{secrets:?}");
        assert!(!printed.contains("marker"), "{printed}");
        assert!(printed.contains("x-team"));
    }
}
