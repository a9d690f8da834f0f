//! The owner of the daemon-owned `agent` domain: the generated `DaemonActionHandler` for
//! runtimes (`agentteam exec agent …`, non-secret fields only), and the same operations for the
//! human CLI through the admin API, which may also set secrets and the filesystem policy.
//!
//! The agent's existence and public profile (handle, display name) belong to the server: create
//! registers it there (a member of the human's channel), a handle change renames it there, and
//! reload (also run at start) drops every profile the server no longer knows.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use super::cursor::{CursorCodec, CursorProblem};
use super::profile::{
    MAX_ALLOWED_PATHS, MAX_HEADERS, MAX_SECRET_BYTES, Profile, Secrets, split_base_url,
};
use super::store::{ListFilter, LoadReport, ProfileError, ProfileStore, Stored};
use crate::clock::Clock;
use crate::contract::error::{ErrorCode, ErrorDetail};
use crate::contract::types as t;
use crate::contract::{ActionError, ActionResult, DaemonActionHandler};
use crate::daemon::error::DaemonError;
use crate::daemon::identity::{Identity, Operator};
use crate::daemon::runtime::Dispatcher;

/// How many agents one server lookup names.
const LOOKUP_BATCH: usize = 1000;
/// A page of `agent list` when the request names no limit.
const DEFAULT_LIMIT: usize = 20;

/// Who calls a daemon-owned action: the runtime's binding.
#[derive(Debug, Clone)]
pub struct DaemonCaller {
    pub server_id: String,
    pub agent_id: String,
}

/// What the human CLI may set besides the contract's fields: secrets and the filesystem policy.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HumanSettings {
    /// Replaces the API key.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Replaces every custom header (`name`, `value`).
    #[serde(default)]
    pub headers: Option<Vec<(String, String)>>,
    /// A base URL that may carry user info, a query or a fragment (kept as a secret; the
    /// profile shows only its scheme, host, port and path).
    #[serde(default)]
    pub base_url: Option<String>,
    /// Replaces the filesystem policy's allowed paths (absolute).
    #[serde(default)]
    pub allowed_paths: Option<Vec<PathBuf>>,
    /// Removes these: `apiKey`, `headers`, `allowedPaths`.
    #[serde(default)]
    pub clear: Vec<String>,
}

impl HumanSettings {
    fn touches_secrets(&self) -> bool {
        self.api_key.is_some()
            || self.headers.is_some()
            || self.base_url.is_some()
            || self.clear.iter().any(|f| f == "apiKey" || f == "headers")
    }
}

/// The `agent` domain's owner.
pub struct AgentOwner {
    pub store: ProfileStore,
    cursors: CursorCodec,
    operator: Operator,
    identity: Arc<Identity>,
    dispatcher: Arc<Dispatcher>,
    clock: Arc<Clock>,
}

impl std::fmt::Debug for AgentOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOwner")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

fn invalid(field: &str, message: impl Into<String>) -> ActionError {
    let message = message.into();
    ActionError::new(ErrorCode::ValidationFailed, message.clone()).with_details(vec![ErrorDetail {
        path: format!("/{field}"),
        message,
    }])
}

impl From<ProfileError> for ActionError {
    fn from(error: ProfileError) -> ActionError {
        match error {
            ProfileError::NotFound(id) => ActionError::new(
                ErrorCode::NotFound,
                format!(
                    "no agent profile `{}`",
                    id.chars().take(68).collect::<String>()
                ),
            ),
            ProfileError::RevisionMismatch { current } => ActionError::new(
                ErrorCode::RevisionMismatch,
                format!("the profile is at revision {current}"),
            )
            .with_next("read it again with `agent get` and retry with its revision"),
            ProfileError::HandleTaken(handle) => ActionError::new(
                ErrorCode::InvalidState,
                format!("handle `{handle}` is taken"),
            ),
            ProfileError::Full | ProfileError::TooMany => {
                ActionError::new(ErrorCode::InvalidState, error.to_string())
            }
            ProfileError::Io(cause) => {
                tracing::error!(incident_id = crate::wire::observe::incident_id().unwrap_or_default(), error = %cause, "the profile store failed");
                ActionError::new(ErrorCode::InternalError, "the profile store failed")
            }
        }
    }
}

fn upstream(error: DaemonError) -> ActionError {
    match error {
        DaemonError::ServerError { code, message } => ActionError::new(code, message),
        DaemonError::ServerUnreachable(_) => {
            ActionError::new(ErrorCode::UpstreamUnavailable, error.to_string())
        }
        other => ActionError::new(ErrorCode::UpstreamFailed, other.to_string()),
    }
}

impl AgentOwner {
    pub fn new(
        store: ProfileStore,
        operator: Operator,
        identity: Arc<Identity>,
        dispatcher: Arc<Dispatcher>,
        clock: Arc<Clock>,
    ) -> AgentOwner {
        AgentOwner {
            store,
            cursors: CursorCodec::default(),
            operator,
            identity,
            dispatcher,
            clock,
        }
    }

    /// The safe projection of `stored`, for the answer of `operation` (`agent get`); a profile
    /// the contract's types cannot hold is refused as an answer off its contract, and logged.
    fn project(&self, operation: &str, stored: &Stored) -> ActionResult<t::AgentProfile> {
        stored
            .profile
            .projection(
                &stored.secrets,
                self.dispatcher.live_sessions(&stored.profile.agent_id),
            )
            .map_err(|why| {
                let incident_id = crate::wire::observe::incident_id().unwrap_or_default();
                tracing::error!(%incident_id, %operation, agent = %stored.profile.agent_id, %why, "the owner's answer does not match the output contract");
                ActionError::owner_off_contract(operation)
            })
    }

    fn workspace_path(&self) -> String {
        format!("/admin/workspaces/{}", self.identity.workspace_id)
    }

    /// Drops every profile the server no longer knows and refreshes the public view of the rest.
    /// Returns how many profiles were removed.
    pub async fn clean_orphans(&self) -> Result<usize, ActionError> {
        let ids = self.store.ids();
        let mut known = HashSet::new();
        for batch in ids.chunks(LOOKUP_BATCH) {
            let answer = self
                .operator
                .post(
                    &format!("{}/agents/lookup", self.workspace_path()),
                    json!({ "agentIds": batch }),
                )
                .await
                .map_err(upstream)?;
            for agent in answer["agents"].as_array().into_iter().flatten() {
                let (Some(id), Some(name)) =
                    (agent["agentId"].as_str(), agent["displayName"].as_str())
                else {
                    continue;
                };
                self.store
                    .refresh_public(id, name, agent["description"].as_str())?;
                known.insert(id.to_string());
            }
        }
        Ok(self.store.retain_known(&known)?)
    }

    /// Reloads the store from disk, then cleans orphans.
    pub async fn reload(&self) -> Result<LoadReport, ActionError> {
        let mut report = self.store.reload()?;
        let orphans = self.clean_orphans().await?;
        report.removed += orphans;
        report.loaded -= orphans.min(report.loaded);
        Ok(report)
    }

    /// A page of profiles.
    pub fn list(&self, input: t::AgentListInput) -> ActionResult<t::AgentListOutput> {
        let filter = ListFilter {
            runtime_family: input.runtime_family.map(|f| f.to_string()),
            provider: input.provider.map(|p| p.to_string()),
        };
        let limit = input.limit.map_or(DEFAULT_LIMIT, |l| l.0.get() as usize);
        let revision = self.store.revision();
        let after = match &input.cursor {
            None => None,
            Some(cursor) => Some(
                self.cursors
                    .decode(cursor, &filter, revision, |anchor| {
                        self.store.get(anchor).map(|s| s.profile.handle)
                    })
                    .map_err(cursor_error)?,
            ),
        };
        let (page, more, read_at) = self.store.page(&filter, after.as_deref(), limit);
        let next_cursor = match (more, page.last()) {
            (true, Some(last)) => Some(
                self.cursors
                    .encode(
                        read_at,
                        &last.profile.agent_id,
                        &last.profile.handle,
                        &filter,
                    )
                    .parse()
                    .map_err(|_| {
                        ActionError::new(
                            ErrorCode::InternalError,
                            "the daemon could not continue this list",
                        )
                    })?,
            ),
            _ => None,
        };
        Ok(t::AgentListOutput {
            agents: page
                .iter()
                .map(|stored| self.project("agent list", stored))
                .collect::<ActionResult<_>>()?,
            has_more: next_cursor.is_some(),
            next_cursor,
        })
    }

    /// One profile by agent id or handle.
    pub fn get(&self, id_or_handle: &str) -> ActionResult<t::AgentProfile> {
        let stored = self
            .store
            .find(id_or_handle)
            .ok_or_else(|| ProfileError::NotFound(id_or_handle.to_string()))?;
        self.project("agent get", &stored)
    }

    /// Registers the agent on the server (in the human's channel), then stores its profile.
    pub async fn create(
        &self,
        input: t::AgentCreateInput,
        human: HumanSettings,
    ) -> ActionResult<t::AgentProfile> {
        let handle = input.handle.to_string();
        if self.store.find(&handle).is_some() {
            return Err(ProfileError::HandleTaken(handle).into());
        }
        if self.store.len() >= super::store::MAX_PROFILES {
            return Err(ProfileError::Full.into());
        }
        let now = self.clock.now_ms();
        let mut profile = Profile {
            agent_id: String::new(),
            handle: handle.clone(),
            runtime_family: input
                .runtime_family
                .map_or_else(|| "generic".to_string(), |f| f.to_string()),
            provider: input.provider.map(|p| p.to_string()),
            model: input.model.map(|m| m.to_string()),
            base_url: input
                .base_url
                .as_ref()
                .map(|u| shown_base_url(u))
                .transpose()?,
            knowledge_source_ids: input
                .knowledge_source_ids
                .iter()
                .flatten()
                .map(|id| id.as_str().to_string())
                .collect(),
            allowed_paths: Vec::new(),
            // The agent's own `profile update` is the only writer of its public profile.
            display_name: handle.clone(),
            description: None,
            revision: 1,
            created_at_ms: now,
            updated_at_ms: now,
        };
        let mut secrets = Secrets::default();
        apply_human(&mut profile, Some(&mut secrets), human)?;
        let base = self.workspace_path();
        let created = self
            .operator
            .post(
                &format!("{base}/agents"),
                json!({"ownerHumanId": self.identity.human_id, "handle": handle, "displayName": profile.display_name}),
            )
            .await
            .map_err(upstream)?;
        profile.agent_id = created_agent_id(&created).ok_or_else(|| {
            ActionError::new(
                ErrorCode::UpstreamFailed,
                "the server's answer names no valid `agentId`",
            )
        })?;
        self.operator
            .post(
                &format!("{base}/channels/{}/members", self.identity.channel_id),
                json!({"memberId": profile.agent_id}),
            )
            .await
            .map_err(upstream)?;
        let stored = self.store.insert(profile, secrets)?;
        self.project("agent create", &stored)
    }

    /// Changes a profile's contract fields (and, from the human CLI, its secrets and policy).
    pub async fn update(
        &self,
        input: t::AgentUpdateInput,
        human: HumanSettings,
    ) -> ActionResult<t::AgentProfile> {
        let agent_id = input.agent_id.to_string();
        let current = self
            .store
            .get(&agent_id)
            .ok_or_else(|| ProfileError::NotFound(agent_id.clone()))?;
        if let Some(handle) = &input.handle
            && **handle != current.profile.handle
        {
            if self.store.find(handle).is_some() {
                return Err(ProfileError::HandleTaken(handle.to_string()).into());
            }
            self.operator
                .patch(
                    &format!("{}/agents/{agent_id}", self.workspace_path()),
                    json!({ "handle": handle.to_string() }),
                )
                .await
                .map_err(upstream)?;
        }
        let edit_secrets = human.touches_secrets();
        let stored = self.store.update(
            &agent_id,
            input.expected_revision.map(|r| r.get()),
            self.clock.now_ms(),
            edit_secrets,
            |profile: &mut Profile, secrets: Option<&mut Secrets>| -> ActionResult<()> {
                for field in input.clear.iter().flatten() {
                    match field {
                        t::AgentUpdateInputClearItem::Provider => profile.provider = None,
                        t::AgentUpdateInputClearItem::Model => profile.model = None,
                        t::AgentUpdateInputClearItem::BaseUrl => profile.base_url = None,
                        t::AgentUpdateInputClearItem::KnowledgeSourceIds => {
                            profile.knowledge_source_ids.clear()
                        }
                    }
                }
                if let Some(handle) = &input.handle {
                    profile.handle = handle.to_string();
                }
                if let Some(family) = &input.runtime_family {
                    profile.runtime_family = family.to_string();
                }
                if let Some(provider) = &input.provider {
                    profile.provider = Some(provider.to_string());
                }
                if let Some(model) = &input.model {
                    profile.model = Some(model.to_string());
                }
                if let Some(base_url) = &input.base_url {
                    profile.base_url = Some(shown_base_url(base_url)?);
                }
                if let Some(ids) = &input.knowledge_source_ids {
                    profile.knowledge_source_ids =
                        ids.iter().map(|id| id.as_str().to_string()).collect();
                }
                apply_human(profile, secrets, human)
            },
        )?;
        self.project("agent update", &stored)
    }

    /// Deletes a local profile and its secrets (the agent stays on the server).
    pub fn delete(&self, agent_id: &str, expected: Option<u64>) -> ActionResult<Profile> {
        Ok(self.store.remove(agent_id, expected)?)
    }
}

/// Applies the human CLI's secrets and policy to a profile being created or updated.
fn apply_human(
    profile: &mut Profile,
    secrets: Option<&mut Secrets>,
    human: HumanSettings,
) -> ActionResult<()> {
    for field in &human.clear {
        match field.as_str() {
            "allowedPaths" => profile.allowed_paths.clear(),
            "apiKey" | "headers" => {}
            other => {
                return Err(invalid(
                    "clear",
                    format!(
                        "`{}` is not a setting to clear",
                        other.chars().take(32).collect::<String>()
                    ),
                ));
            }
        }
    }
    if let Some(paths) = human.allowed_paths {
        if paths.len() > MAX_ALLOWED_PATHS || paths.iter().any(|p| !p.is_absolute()) {
            return Err(invalid(
                "allowedPaths",
                format!("give at most {MAX_ALLOWED_PATHS} absolute paths"),
            ));
        }
        profile.allowed_paths = paths;
    }
    let Some(secrets) = secrets else {
        return Ok(());
    };
    for field in &human.clear {
        match field.as_str() {
            "apiKey" => secrets.api_key = None,
            "headers" => secrets.headers.clear(),
            _ => {}
        }
    }
    if let Some(key) = human.api_key {
        let key = key.trim_end_matches(['\r', '\n']).to_string();
        if key.is_empty() || key.len() > MAX_SECRET_BYTES || key.chars().any(char::is_control) {
            return Err(invalid(
                "apiKey",
                format!("an API key is 1 to {MAX_SECRET_BYTES} bytes without control characters"),
            ));
        }
        secrets.api_key = Some(key);
    }
    if let Some(headers) = human.headers {
        if headers.len() > MAX_HEADERS {
            return Err(invalid("headers", format!("at most {MAX_HEADERS} headers")));
        }
        let mut normalized = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            let name = name.trim().to_ascii_lowercase();
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+.^_`|~-".contains(&b);
            if name.is_empty() || name.len() > 64 || !name.bytes().all(token) {
                return Err(invalid(
                    "headers",
                    "a header name is 1 to 64 token characters",
                ));
            }
            if value.len() > MAX_SECRET_BYTES
                || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
            {
                return Err(invalid(
                    "headers",
                    format!("a header value is at most {MAX_SECRET_BYTES} bytes on one line"),
                ));
            }
            if normalized
                .iter()
                .any(|(n, _): &(String, String)| *n == name)
            {
                return Err(invalid("headers", "each header name once"));
            }
            normalized.push((name, value.trim().to_string()));
        }
        secrets.headers = normalized;
    }
    if let Some(full) = human.base_url {
        let (shown, secret) = split_base_url(full.trim())
            .ok_or_else(|| invalid("baseUrl", "the base URL must be an `http(s)://` URL"))?;
        if shown.len() > 512 {
            return Err(invalid("baseUrl", "the base URL is at most 512 characters"));
        }
        profile.base_url = Some(shown);
        secrets.base_url = secret;
    }
    Ok(())
}

/// A contract base URL, parsed: its shown form, refused when it is not a URL or would carry a
/// secret part (the schema already refuses those; this is the owner's own check).
fn shown_base_url(text: &str) -> ActionResult<String> {
    match split_base_url(text) {
        Some((shown, None)) => Ok(shown),
        _ => Err(invalid(
            "baseUrl",
            "the base URL must be an `http(s)://` URL without user info, query or fragment",
        )),
    }
}

/// The `agentId` of the server's answer to an agent creation, if it is a well-formed id.
pub fn created_agent_id(created: &serde_json::Value) -> Option<String> {
    created["agentId"]
        .as_str()
        .filter(|id| {
            id.strip_prefix("agt_").is_some_and(|rest| {
                (8..=64).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            })
        })
        .map(str::to_string)
}

fn cursor_error(problem: CursorProblem) -> ActionError {
    ActionError::new(
        ErrorCode::ValidationFailed,
        format!("`cursor` is not valid: {}", problem.reason()),
    )
    .with_next("repeat the request without `cursor` to start from the first page")
    .with_details(vec![ErrorDetail {
        path: "/cursor".into(),
        message: problem.reason().into(),
    }])
}

impl DaemonActionHandler for AgentOwner {
    type Context = DaemonCaller;

    async fn agent_create(
        &self,
        _: &DaemonCaller,
        input: t::AgentCreateInput,
    ) -> ActionResult<t::AgentCreateOutput> {
        let agent = self.create(input, HumanSettings::default()).await?;
        Ok(t::AgentCreateOutput { agent })
    }

    async fn agent_delete(
        &self,
        _: &DaemonCaller,
        input: t::AgentDeleteInput,
    ) -> ActionResult<t::AgentDeleteOutput> {
        let removed = self.delete(&input.agent_id, input.expected_revision.map(|r| r.get()))?;
        Ok(serde_json::from_value(json!({
            "agent": { "id": removed.agent_id, "handle": removed.handle, "revision": removed.revision }
        }))
        .expect("a deleted profile fits the contract"))
    }

    async fn agent_get(
        &self,
        _: &DaemonCaller,
        input: t::AgentGetInput,
    ) -> ActionResult<t::AgentGetOutput> {
        Ok(t::AgentGetOutput {
            agent: self.get(&input.agent_id)?,
        })
    }

    async fn agent_list(
        &self,
        _: &DaemonCaller,
        input: t::AgentListInput,
    ) -> ActionResult<t::AgentListOutput> {
        self.list(input)
    }

    async fn agent_reload(
        &self,
        _: &DaemonCaller,
        _: t::AgentReloadInput,
    ) -> ActionResult<t::AgentReloadOutput> {
        let report = self.reload().await?;
        Ok(t::AgentReloadOutput {
            loaded: report.loaded as u64,
            removed: report.removed as u64,
        })
    }

    async fn agent_update(
        &self,
        _: &DaemonCaller,
        input: t::AgentUpdateInput,
    ) -> ActionResult<t::AgentUpdateOutput> {
        let agent = self.update(input, HumanSettings::default()).await?;
        Ok(t::AgentUpdateOutput { agent })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::created_agent_id;

    /// An answer without a usable `agentId` never becomes a local profile.
    #[test]
    fn an_answer_without_a_valid_agent_id_is_refused() {
        assert_eq!(
            created_agent_id(&json!({"agentId": "agt_0123456789"})).as_deref(),
            Some("agt_0123456789")
        );
        for answer in [
            json!({}),
            json!({"agentId": ""}),
            json!({"agentId": 7}),
            json!({"agentId": "agt_"}),
            json!({"agentId": "hum_0123456789"}),
            json!({"agentId": "agt_01234567/../x"}),
        ] {
            assert_eq!(created_agent_id(&answer), None, "{answer}");
        }
    }
}
