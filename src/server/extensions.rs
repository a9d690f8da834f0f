//! The extension host: the source of truth for app-hosted extension definitions, and the owner of
//! what their actions do.
//!
//! Definitions are seeded from `schema/extensions/` (version 1 of `github` and `gitea`) and
//! published by operators (`POST /admin/extensions`), both under the rules of
//! `extension_rules.rs`; each version is recorded with its digest (SHA-256 over RFC 8785
//! canonical JSON) and the catalog version its publish advanced.
//!
//! Routes (device credential; the agent bound by path like every runtime route):
//! - `GET /runtime/servers/{serverId}/extensions`: the current definitions of the apps installed
//!   in the workspace, with their recorded digests (the daemon verifies and pins them);
//! - `POST /runtime/servers/{serverId}/agents/{agentId}/ext/{extension}/{action}`: one call, with
//!   the digest and catalog version the runtime was launched with in `agentteam-extension-digest`
//!   and `agentteam-extension-catalog-version` (the daemon injects both). Every call is
//!   authorized again: the digest is still the current one (else `extension_stale`), the app is
//!   installed with a credential and the agent is allowed to use it (else `app_unauthorized`),
//!   and the input is valid against the current definition.
//!
//! The host implements pull request watches for both providers: `watch` (read the pull request
//! now and keep it), `list`, `get` (read again when the last read is older than the refresh
//! interval) and `unwatch`. The provider credential stays here: it is never in an answer, an
//! error or a log line.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::actions::{Caller, page};
use super::extension_rules::{GET, LIST, UNWATCH, WATCH};
use super::provider::{ProviderClient, ProviderFailure};
use super::state::AppState;
use super::store::Principal;
use super::store::StoreError;
use super::store::{AppAccess, WatchRecord};
use super::{failure, runtime_call};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::contract::extension::{self, Provider, Recorded, Reserved};
use crate::wire::{self, EXTENSION_CATALOG_VERSION_HEADER, EXTENSION_DIGEST_HEADER};

/// The idempotency scope and list key of `action` of extension `name`: `ext.github.watch`.
fn action_key(name: &str, action: &str) -> String {
    format!("ext.{name}.{action}")
}

/// The extension host's two runtime routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/runtime/servers/{serverId}/extensions",
            get(list_definitions),
        )
        .route(
            "/runtime/servers/{serverId}/agents/{agentId}/ext/{extension}/{action}",
            post(call),
        )
}

/// `GET …/extensions`: the installed apps' current definitions with their recorded digests.
async fn list_definitions(
    State(state): State<AppState>,
    Path(server_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let answer = async {
        runtime_call::authenticate_workspace(&state, &server_id, &headers).await?;
        let recorded = state
            .store
            .installed_extensions(&server_id)
            .await
            .map_err(failure::store)?;
        Ok(json!({ "extensions": recorded.iter().map(Recorded::to_json).collect::<Vec<_>>() }))
    };
    match answer.await {
        Ok(data) => wire::success_response(data),
        Err(error) => wire::error_response(&error),
    }
}

async fn call(
    State(state): State<AppState>,
    Path((server_id, agent_id, name, action)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = run(
        &state, &server_id, &agent_id, &name, &action, &headers, body,
    )
    .await;
    crate::telemetry::request::outcome_of(&answer);
    match answer {
        Ok(response) => response,
        Err(error) => wire::error_response(&error),
    }
}

async fn run(
    state: &AppState,
    server_id: &str,
    agent_id: &str,
    name: &str,
    action: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ActionError> {
    let caller = runtime_call::authenticate(state, server_id, agent_id, headers).await?;
    let unknown = || ActionError::unknown_action(name, action);
    let (current, provider) = state
        .store
        .current_extension(name)
        .await
        .map_err(failure::store)?
        .ok_or_else(unknown)?;
    // The runtime's pinned definition must still be the current one.
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let presented = (
        header(EXTENSION_DIGEST_HEADER),
        header(EXTENSION_CATALOG_VERSION_HEADER).and_then(|v| v.parse::<u64>().ok()),
    );
    if presented != (Some(current.digest.as_str()), Some(current.catalog_version)) {
        return Err(ActionError::new(
            ErrorCode::ExtensionStale,
            format!(
                "the `{name}` definition this runtime was launched with is no longer current (the server has version {})",
                current.version
            ),
        )
        .with_next("restart the runtime: a new launch pins the current definition"));
    }
    let pinned = verified(state, current)?;
    let declared = pinned.action(action).ok_or_else(unknown)?;
    let input = wire::body::read_json(headers, body, None)
        .await
        .map_err(|failure| failure.error())?;
    pinned.validate_input(action, &input)?;
    let selector = if declared.risk.is_mutation() {
        wire::idempotency::resolve_selector(headers, &input)?
    } else {
        None
    };
    let provider: Provider = serde_json::from_value(json!(provider))
        .map_err(|error| failure::saying("the recorded provider is unknown", error))?;
    let key = action_key(name, action);
    runtime_call::once(
        state,
        Principal::Agent(&caller.agent_id),
        caller.now_ms,
        &key,
        declared.risk.is_mutation(),
        selector,
        &input,
        runtime_call::Receipt::Separate,
        wire::render_as,
        || async {
            let data = execute(state, &caller, name, provider, action, input.clone()).await?;
            // What the runtime gets is what its pinned version promises: an answer that breaks it
            // is a defect of the host (its normalizer against this version), never shown.
            if let Some(first) = pinned.output_violations(action, &data).first() {
                tracing::error!(
                    incident_id = wire::observe::incident_id().unwrap_or_default(),
                    extension = name,
                    version = pinned.recorded.version,
                    action,
                    path = %first.path,
                    "an extension result does not match the pinned output schema"
                );
                return Err(ActionError::new(
                    ErrorCode::InternalError,
                    format!(
                        "the `{name}.{action}` result does not match version {} of its output schema",
                        pinned.recorded.version
                    ),
                ));
            }
            Ok(data)
        },
    )
    .await
}

/// The current definition, verified once per digest (the recorded digest is checked against the
/// content here too: a damaged record is refused, never served).
fn verified(
    state: &AppState,
    current: Recorded,
) -> Result<std::sync::Arc<extension::Pinned>, ActionError> {
    const CACHED: usize = 64;
    let mut cache = state.pinned.lock().expect("not poisoned");
    if let Some(pinned) = cache.get(&current.digest) {
        return Ok(pinned.clone());
    }
    let digest = current.digest.clone();
    let pinned = std::sync::Arc::new(
        extension::Pinned::verify(current, &Reserved::builtin()).map_err(|rejected| {
            failure::saying(
                "the recorded extension definition is damaged",
                format_args!(
                    "the recorded definition of `{}` does not verify: {}",
                    rejected.name, rejected.reason
                ),
            )
        })?,
    );
    if cache.len() >= CACHED {
        cache.clear();
    }
    cache.insert(digest, pinned.clone());
    Ok(pinned)
}

/// One authorized, validated call: the app's access first, then the action.
async fn execute(
    state: &AppState,
    caller: &Caller,
    name: &str,
    provider: Provider,
    action: &str,
    input: Value,
) -> Result<Value, ActionError> {
    let (base_url, credential) = match state
        .store
        .app_access(&caller.workspace_id, name, &caller.agent_id)
        .await
        .map_err(failure::store)?
    {
        AppAccess::Allowed {
            base_url,
            credential,
        } => (base_url, credential),
        AppAccess::NotInstalled => {
            return Err(unauthorized(format!(
                "the `{name}` app is not installed in this workspace"
            )));
        }
        AppAccess::Revoked => {
            return Err(unauthorized(format!(
                "the `{name}` app's credential was revoked in this workspace"
            )));
        }
        AppAccess::NotAllowed => {
            return Err(unauthorized(format!(
                "this agent is not allowed to use the `{name}` app"
            )));
        }
    };
    let app = App {
        state,
        caller,
        name,
        provider,
        base_url: &base_url,
        credential: &credential,
    };
    match action {
        WATCH => app.watch(&input).await,
        LIST => app.list(&input).await,
        GET => app.get(&input).await,
        UNWATCH => app.unwatch(&input).await,
        _ => Err(ActionError::new(
            ErrorCode::UnknownAction,
            format!("the extension host does not implement `{name} {action}`"),
        )),
    }
}

fn unauthorized(message: String) -> ActionError {
    ActionError::new(ErrorCode::AppUnauthorized, message)
        .with_next("ask the workspace's operator to install the app and allow this agent to use it")
}

/// One call's view of an installed, allowed app.
struct App<'a> {
    state: &'a AppState,
    caller: &'a Caller,
    name: &'a str,
    provider: Provider,
    base_url: &'a str,
    credential: &'a str,
}

impl App<'_> {
    async fn watch(&self, input: &Value) -> Result<Value, ActionError> {
        let repository = repository(input)?;
        let number = input
            .get("number")
            .and_then(Value::as_i64)
            .ok_or_else(|| field("number"))?;
        let state = self.read(&repository, number).await?;
        let watch = self
            .state
            .store
            .insert_watch(
                &self.caller.workspace_id,
                self.name,
                &repository,
                number,
                &state,
                &self.caller.agent_id,
                self.caller.now_ms,
            )
            .await
            .map_err(failure::store)?;
        // An existing watch of the same pull request takes the state just read.
        let watch = self.store_state(watch, &state).await?;
        Ok(json!({ "watch": watch.to_json() }))
    }

    async fn list(&self, input: &Value) -> Result<Value, ActionError> {
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(page::DEFAULT_LIMIT, |l| l.clamp(1, 100) as usize);
        let cursor = input
            .get("cursor")
            .and_then(Value::as_str)
            .map(|c| {
                c.parse::<crate::contract::types::Cursor>()
                    .map_err(|_| page::cursor_error())
            })
            .transpose()?;
        let filter = page::Filter::new(self.caller, &action_key(self.name, LIST));
        let listed = page::list(
            self.state,
            &filter,
            cursor.as_ref(),
            limit,
            async |after, limit| {
                self.state
                    .store
                    .list_watches(&self.caller.workspace_id, self.name, after.as_ref(), limit)
                    .await
            },
        )
        .await?;
        Ok(listed.into_json("watches", WatchRecord::to_json))
    }

    async fn get(&self, input: &Value) -> Result<Value, ActionError> {
        let watch = self.find(input).await?;
        let stale = self.caller.now_ms - watch.last_refreshed_at
            >= self.state.provider_config.min_refresh.as_millis() as i64;
        let watch = if stale {
            let state = self.read(&watch.repository, watch.number).await?;
            self.store_state(watch, &state).await?
        } else {
            watch
        };
        Ok(json!({ "watch": watch.to_json() }))
    }

    async fn unwatch(&self, input: &Value) -> Result<Value, ActionError> {
        let id = watch_id(input)?;
        let watch = self
            .state
            .store
            .delete_watch(&self.caller.workspace_id, self.name, &id)
            .await
            .map_err(failure::store)?
            .ok_or_else(|| not_found(&id))?;
        Ok(json!({ "watch": watch.to_json() }))
    }

    async fn find(&self, input: &Value) -> Result<WatchRecord, ActionError> {
        let id = watch_id(input)?;
        self.state
            .store
            .watch(&self.caller.workspace_id, self.name, &id)
            .await
            .map_err(failure::store)?
            .ok_or_else(|| not_found(&id))
    }

    async fn read(
        &self,
        repository: &str,
        number: i64,
    ) -> Result<super::store::PullState, ActionError> {
        self.state
            .provider
            .pull(
                self.provider,
                self.base_url,
                self.credential,
                repository,
                number,
            )
            .await
            .map_err(|failure| provider_error(self.name, repository, number, failure))
    }

    async fn store_state(
        &self,
        watch: WatchRecord,
        state: &super::store::PullState,
    ) -> Result<WatchRecord, ActionError> {
        Ok(self
            .state
            .store
            .refresh_watch(&watch.id, state, self.caller.now_ms)
            .await
            .map_err(failure::store)?
            .unwrap_or(watch))
    }
}

/// A provider failure in the closed error set: a refused credential is an authorization failure;
/// everything else is the provider API's.
fn provider_error(
    name: &str,
    repository: &str,
    number: i64,
    failure: ProviderFailure,
) -> ActionError {
    match failure {
        ProviderFailure::Unauthorized(status) => ActionError::new(
            ErrorCode::AppUnauthorized,
            format!("the provider refused the `{name}` app's credential (HTTP {status})"),
        )
        .with_next("ask the workspace's operator to renew the app's credential"),
        ProviderFailure::NotFound => ActionError::new(
            ErrorCode::NotFound,
            format!("the provider has no pull request {repository}#{number} visible to the app"),
        ),
        ProviderFailure::Timeout => ActionError::new(
            ErrorCode::ProviderTimeout,
            format!("the `{name}` provider did not answer in time"),
        )
        .with_next("retry later"),
        ProviderFailure::Failed(why) => ActionError::new(
            ErrorCode::ProviderError,
            format!("the `{name}` provider failed: {why}"),
        )
        .with_next("retry later"),
    }
}

fn field(name: &str) -> ActionError {
    ActionError::new(
        ErrorCode::ValidationFailed,
        format!("the extension host needs the input field `{name}`"),
    )
}

fn not_found(id: &str) -> ActionError {
    ActionError::new(
        ErrorCode::NotFound,
        format!("no watch `{id}` is visible to this agent"),
    )
}

fn watch_id(input: &Value) -> Result<String, ActionError> {
    input
        .get("watchId")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| field("watchId"))
}

/// `owner/name` with each part a plain path segment (never `.` or `..`, whatever a published
/// schema allows).
fn repository(input: &Value) -> Result<String, ActionError> {
    let text = input
        .get("repository")
        .and_then(Value::as_str)
        .ok_or_else(|| field("repository"))?;
    let plain = |part: &str| {
        (1..=100).contains(&part.len())
            && part != "."
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    };
    match text.split_once('/') {
        Some((owner, name)) if plain(owner) && plain(name) => Ok(text.to_string()),
        _ => Err(ActionError::new(
            ErrorCode::ValidationFailed,
            "`repository` must be `owner/name`",
        )),
    }
}

/// One background refresh at `now_ms`: claims watches read longer ago than the refresh interval
/// (each claimed by one replica only) and reads each again. Returns how many were refreshed.
pub async fn refresh_stale(state: &AppState, now_ms: i64) -> Result<usize, StoreError> {
    let interval = state.provider_config.min_refresh.as_millis() as i64;
    let claimed = state
        .store
        .claim_stale_watches(now_ms - interval, now_ms, now_ms + 5 * 60_000)
        .await?;
    let mut refreshed = 0;
    for watch in claimed {
        let read = refresh_one(state, &state.provider, &watch).await;
        match read {
            Some(pull) => {
                state.store.refresh_watch(&watch.id, &pull, now_ms).await?;
                refreshed += 1;
            }
            None => state.store.release_watch(&watch.id).await?,
        }
    }
    Ok(refreshed)
}

async fn refresh_one(
    state: &AppState,
    client: &ProviderClient,
    watch: &WatchRecord,
) -> Option<super::store::PullState> {
    let (_, provider) = state
        .store
        .current_extension(&watch.extension)
        .await
        .ok()??;
    let provider: Provider = serde_json::from_value(json!(provider)).ok()?;
    let AppAccess::Allowed {
        base_url,
        credential,
    } = app_credential(state, watch).await?
    else {
        return None;
    };
    match client
        .pull(
            provider,
            &base_url,
            &credential,
            &watch.repository,
            watch.number,
        )
        .await
    {
        Ok(pull) => Some(pull),
        Err(failure) => {
            tracing::info!(watch = %watch.id, %failure, "a watch's background refresh failed; it is retried later");
            None
        }
    }
}

/// The installation behind a watch, for a background refresh, through the grant of the agent
/// that started the watch.
async fn app_credential(state: &AppState, watch: &WatchRecord) -> Option<AppAccess> {
    let agent = watch.created_by_agent_id.as_deref().unwrap_or("");
    state
        .store
        .app_access(&watch.workspace_id, &watch.extension, agent)
        .await
        .ok()
}
