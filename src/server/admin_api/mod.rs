//! The operator API: enough to set up a workspace by hand or from a test. Every route requires
//! the operator token of this server start (`Authorization: Bearer ato_…`) and, on a server a
//! daemon embeds, a caller that is no process of a runtime the daemon launched
//! ([`crate::server::CallerGate`]).
//!
//! `POST /admin/workspaces`, then under `/admin/workspaces/{workspaceId}`: `humans`, `agents`,
//! `devices` (returns the device credential once), `channels`, `channels/{channelId}/threads`,
//! `channels/{channelId}/members`, `dms` (the direct conversation of two members, created once),
//! `teams`, `messages` (a human posts in a channel, dm or thread they belong to, optionally with
//! attachments), `approvals/list` (a page of the workspace's approvals),
//! `approvals/{approvalId}/decision` (a human approves or rejects; a waiting workflow step moves
//! on) and `audit/list` (a page of the workspace's audit records). Extensions: `POST /admin/extensions` publishes a definition's next version,
//! `/admin/extensions/list` lists the current ones; under a workspace, `apps` installs an
//! extension's app with its provider base URL and credential (kept server-side, never echoed),
//! `apps/{extension}/grants` allows an agent to use it, `apps/{extension}/revoke` deletes the
//! credential. Knowledge: `kb/sources` creates a source, `kb/sources/{source}/grants` grants it to
//! a channel or a team, `kb/sources/{source}/documents` adds (or replaces, by path) a document.
//! `GET /admin/stats` reads counters.
//!
//! Each handler takes an [`OperatorJson`] (the operator is authenticated, then the body is read
//! and decoded) and returns a [`Data`] or a [`Refusal`]. Request fields use the contract's types,
//! so a name, a handle or a message is checked against the same schema limits the actions use.
//!
//! The handlers live by noun: [`tenancy`], [`messages`], [`approvals`], [`audit`], [`knowledge`]
//! and [`extensions`] (extensions and their apps). This module holds the router, the operator's
//! extractors and what the handlers share: the existence check [`known`] and the refusals.

mod approvals;
mod audit;
mod extensions;
mod knowledge;
mod messages;
mod tenancy;

use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::actions::Caller;
use super::failure;
use super::state::AppState;
use super::store::{MemberKind, StoreError};
use crate::contract::error::ErrorCode;
use crate::contract::{ActionError, ActionResult};
use crate::wire::{self, Data, Refusal};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/workspaces", post(tenancy::create_workspace))
        .route("/admin/stats", get(stats))
        .route(
            "/admin/workspaces/{workspaceId}/humans",
            post(tenancy::create_human),
        )
        .route(
            "/admin/workspaces/{workspaceId}/agents",
            post(tenancy::create_agent),
        )
        .route(
            "/admin/workspaces/{workspaceId}/agents/lookup",
            post(tenancy::lookup_agents),
        )
        .route(
            "/admin/workspaces/{workspaceId}/agents/{agentId}",
            axum::routing::patch(tenancy::rename_agent),
        )
        .route(
            "/admin/workspaces/{workspaceId}/devices",
            post(tenancy::create_device),
        )
        .route(
            "/admin/workspaces/{workspaceId}/channels",
            post(tenancy::create_channel),
        )
        .route(
            "/admin/workspaces/{workspaceId}/channels/{channelId}/threads",
            post(tenancy::create_thread),
        )
        .route(
            "/admin/workspaces/{workspaceId}/channels/{channelId}/members",
            post(tenancy::add_channel_member),
        )
        .route(
            "/admin/workspaces/{workspaceId}/dms",
            post(tenancy::open_dm),
        )
        .route(
            "/admin/workspaces/{workspaceId}/teams",
            post(tenancy::create_team),
        )
        .route(
            "/admin/workspaces/{workspaceId}/messages",
            post(messages::post_message),
        )
        .route(
            "/admin/workspaces/{workspaceId}/approvals/list",
            post(approvals::list_approvals),
        )
        .route(
            "/admin/workspaces/{workspaceId}/audit/list",
            post(audit::list_audit),
        )
        .route(
            "/admin/workspaces/{workspaceId}/approvals/{approvalId}/decision",
            post(approvals::decide_approval),
        )
        .route(
            "/admin/workspaces/{workspaceId}/kb/sources",
            post(knowledge::create_kb_source),
        )
        .route(
            "/admin/workspaces/{workspaceId}/kb/sources/{sourceId}/grants",
            post(knowledge::grant_kb_source),
        )
        .route(
            "/admin/workspaces/{workspaceId}/kb/sources/{sourceId}/documents",
            post(knowledge::put_kb_document),
        )
        .route("/admin/extensions", post(extensions::publish_extension))
        .route("/admin/extensions/list", post(extensions::list_extensions))
        .route(
            "/admin/workspaces/{workspaceId}/apps",
            post(extensions::install_app),
        )
        .route(
            "/admin/workspaces/{workspaceId}/apps/{extension}/grants",
            post(extensions::grant_app),
        )
        .route(
            "/admin/workspaces/{workspaceId}/apps/{extension}/revoke",
            post(extensions::revoke_app),
        )
}

/// The operator of this server start; refused with the uniform `forbidden` otherwise.
pub struct OperatorAuth;

impl FromRequestParts<AppState> for OperatorAuth {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        match wire::bearer(&parts.headers) {
            Some(token) if state.operator.matches(token) => {}
            _ => return Err(ActionError::forbidden().into()),
        }
        // Only a caller holding the token costs the gate's reading of `/proc`.
        if let Some(gate) = state.callers.get().cloned() {
            let peer = crate::serve::peer();
            let refused = tokio::task::spawn_blocking(move || gate.refuse(peer))
                .await
                .unwrap_or_else(|_| {
                    Some(ActionError::new(
                        ErrorCode::InternalError,
                        "the check of who is calling failed",
                    ))
                });
            if let Some(refusal) = refused {
                return Err(refusal.into());
            }
        }
        super::audit::operator_verified();
        Ok(OperatorAuth)
    }
}

/// An operator request's decoded body: the operator is authenticated before the body is read.
pub struct OperatorJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for OperatorJson<T> {
    type Rejection = Refusal;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Refusal> {
        let (mut parts, body) = request.into_parts();
        OperatorAuth::from_request_parts(&mut parts, state).await?;
        let value = wire::body::read_json(&parts.headers, body, None)
            .await
            .map_err(|failure| failure.error())?;
        serde_json::from_value(value)
            .map(OperatorJson)
            .map_err(|e| {
                ActionError::new(ErrorCode::ValidationFailed, format!("invalid request: {e}"))
                    .into()
            })
    }
}

type Answer = Result<Data, Refusal>;

/// At most this many members are named in one request.
const MAX_MEMBERS: usize = 1000;

/// At most 64 characters of a caller's identifier, for a message that names it.
fn clip(id: &str) -> String {
    id.chars().take(64).collect()
}

/// Free text must say something: whitespace alone is refused.
fn not_blank(field: &str, value: &str) -> ActionResult<()> {
    if value.trim().is_empty() {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("`{field}` must not be blank"),
        ));
    }
    Ok(())
}

fn taken(what: &str, value: &str) -> ActionError {
    ActionError::new(
        ErrorCode::InvalidState,
        format!("{what} `{value}` already exists in this workspace"),
    )
}

/// The `not_found` every route answers for an id the request's workspace does not hold, naming
/// the noun and (at most 64 characters of) the id.
fn missing(noun: &str, id: &str) -> ActionError {
    ActionError::new(
        ErrorCode::NotFound,
        format!("no {noun} `{}` in this workspace", clip(id)),
    )
}

/// [`missing`] for what is not inside a workspace: a workspace itself, or an extension.
fn unknown(noun: &str, id: &str) -> ActionError {
    ActionError::new(ErrorCode::NotFound, format!("no {noun} `{}`", clip(id)))
}

/// What a route names by id and checks before it acts: how the store finds one in the request's
/// workspace, and how a refusal names it.
trait Noun {
    /// What the store knows about one that exists.
    type Found;

    /// The refusal for an `id` the store does not find.
    fn missing(id: &str) -> ActionError;

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<Self::Found>, StoreError>;
}

/// The request's workspace itself.
struct Workspace;
/// A human of the workspace.
struct Human;
/// A channel of the workspace.
struct Channel;
/// A human or an agent of the workspace; found as its [`MemberKind`].
struct Member;

impl Noun for Workspace {
    type Found = ();

    fn missing(id: &str) -> ActionError {
        unknown("workspace", id)
    }

    async fn find(state: &AppState, _: &str, id: &str) -> Result<Option<()>, StoreError> {
        Ok(state.store.workspace_exists(id).await?.then_some(()))
    }
}

impl Noun for Human {
    type Found = ();

    fn missing(id: &str) -> ActionError {
        missing("human", id)
    }

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<()>, StoreError> {
        let home = state.store.human_workspace(id).await?;
        Ok((home.as_deref() == Some(workspace_id)).then_some(()))
    }
}

impl Noun for Channel {
    type Found = ();

    fn missing(id: &str) -> ActionError {
        missing("channel", id)
    }

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<()>, StoreError> {
        let home = state.store.channel_workspace(id).await?;
        Ok((home.as_deref() == Some(workspace_id)).then_some(()))
    }
}

impl Noun for Member {
    type Found = MemberKind;

    fn missing(id: &str) -> ActionError {
        missing("human or agent", id)
    }

    async fn find(
        state: &AppState,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<MemberKind>, StoreError> {
        state.store.member_kind(workspace_id, id).await
    }
}

/// Each of `ids` (at most [`MAX_MEMBERS`]) as the store finds it in `workspace_id`; the first it
/// does not find is that noun's `not_found`.
async fn known<N: Noun>(
    state: &AppState,
    workspace_id: &str,
    ids: &[impl AsRef<str>],
) -> ActionResult<Vec<N::Found>> {
    if ids.len() > MAX_MEMBERS {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("name at most {MAX_MEMBERS} members in one request"),
        ));
    }
    let mut found = Vec::with_capacity(ids.len());
    for id in ids {
        let id = id.as_ref();
        let one = N::find(state, workspace_id, id)
            .await
            .map_err(failure::store)?
            .ok_or_else(|| N::missing(id))?;
        found.push(one);
    }
    Ok(found)
}

/// `GET /admin/stats`: counters an operator (or a test) reads.
async fn stats(State(state): State<AppState>, _: OperatorAuth) -> Answer {
    let spans = state.telemetry.counts();
    Ok(Data(json!({
        "runtimeRequests": state.dispatched(),
        "humanRequests": state.human_requests.load(std::sync::atomic::Ordering::Relaxed),
        "auditDropped": state.audit.dropped(),
        "audit": state.audit.stats(),
        "traceSpans": {
            "exported": spans.exported,
            "droppedQueueFull": spans.dropped_queue_full,
            "droppedExportFailed": spans.dropped_export_failed,
        },
    })))
}

/// The operator as a list's cursors know it: bound to `workspace_id`, never to an agent.
fn operator(state: &AppState, workspace_id: &str) -> Caller {
    Caller {
        workspace_id: workspace_id.to_string(),
        agent_id: "operator".into(),
        now_ms: state.clock.now_ms(),
    }
}
