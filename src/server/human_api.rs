//! The human API: `POST /human/servers/{serverId}/actions/{action}`, one route per action of
//! `schema/human/`, what a person does in their workspace (a daemon's console and terminal
//! reader call it with the device credential the daemon holds for its person).
//!
//! Order, as on the runtime API: authenticate the device credential and bind it to the path's
//! workspace (one uniform 403, before the body is read); its human is who the request acts as →
//! bounded strict JSON body → schema validation → for a write, at most once per
//! `(human, action, requestId)` with its audit record in its transaction
//! (`runtime_call::once`) → the generated typed adapter → typed envelope.
//!
//! What a person may see is decided here, by membership, never by the request: a conversation is
//! theirs when they are a member of it, an agent's approvals and audit records when they own the
//! agent. Anything else is `not_found`, exactly as a missing one.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use base64::Engine;

use super::actions::approval::{self, Undecided};
use super::actions::{Caller, ServerActions, messages, page};
use super::state::AppState;
use super::store::Principal;
use super::{failure, runtime_call};
use crate::contract::error::ErrorCode;
use crate::contract::target::{Target, TargetKind};
use crate::contract::types as t;
use crate::contract::{
    ActionError, ActionHandler, ActionResult, DispatchError, HUMAN_ACTIONS, HumanActionId,
    HumanHandler, dispatch_human,
};
use crate::wire;
use crate::wire::idempotency::resolve_selector;

/// The route of one human action on the server.
pub fn action_path(action: &str) -> String {
    format!("/human/servers/{{serverId}}/actions/{action}")
}

/// The authenticated person of one request.
#[derive(Debug, Clone)]
pub struct Person {
    pub workspace_id: String,
    pub human_id: String,
    /// The request's time, read once.
    pub now_ms: i64,
}

impl Person {
    /// The person as the shared reads know a caller: the channel member they are. Those reads
    /// resolve every locator by this member's memberships and write nothing.
    fn member(&self) -> Caller {
        Caller {
            workspace_id: self.workspace_id.clone(),
            agent_id: self.human_id.clone(),
            now_ms: self.now_ms,
        }
    }
}

pub fn routes() -> Router<AppState> {
    let mut router = Router::new();
    for descriptor in HUMAN_ACTIONS {
        let id = descriptor.id;
        router = router.route(
            &action_path(descriptor.name),
            post(
                move |state: State<AppState>,
                      path: Path<String>,
                      headers: HeaderMap,
                      body: Body| handle(state, path, headers, body, id),
            ),
        );
    }
    router
        .route(
            "/human/servers/{serverId}/actions/{action}",
            post(unknown_action),
        )
        .route("/human/openapi.json", axum::routing::get(openapi))
}

/// `GET /human/openapi.json`: the human API's OpenAPI document, generated from `schema/human/`.
/// No credential: it describes the routes, it reads nothing.
async fn openapi() -> Response {
    wire::raw_json_response(200, crate::contract::catalog::HUMAN_OPENAPI.to_string())
}

/// Any other action path: the refusal names what was asked for.
async fn unknown_action(Path((_, action)): Path<(String, String)>) -> Response {
    wire::error_response(&ActionError::unknown_action("human", &action))
}

async fn handle(
    State(state): State<AppState>,
    Path(server_id): Path<String>,
    headers: HeaderMap,
    body: Body,
    id: HumanActionId,
) -> Response {
    match run(&state, &server_id, &headers, body, id).await {
        Ok(response) => response,
        Err(error) => wire::error_response(&error),
    }
}

async fn run(
    state: &AppState,
    server_id: &str,
    headers: &HeaderMap,
    body: Body,
    id: HumanActionId,
) -> Result<Response, ActionError> {
    let device = runtime_call::authenticate_person(state, server_id, headers).await?;
    let person = Person {
        workspace_id: device.workspace_id,
        human_id: device.human_id,
        now_ms: state.clock.now_ms(),
    };
    let input = wire::body::read_json(headers, body, None)
        .await
        .map_err(|failure| failure.error())?;
    state.catalog.validate_human_input(id, &input)?;
    let write = id.descriptor().write;
    let selector = if write {
        resolve_selector(headers, &input)?
    } else {
        None
    };
    runtime_call::once(
        state,
        Principal::Human(&person.human_id),
        person.now_ms,
        &format!("human.{}", id.descriptor().name),
        write,
        selector,
        &input,
        runtime_call::Receipt::Atomic,
        wire::render_text,
        || execute(state, &person, id, input.clone()),
    )
    .await
}

async fn execute(
    state: &AppState,
    person: &Person,
    id: HumanActionId,
    input: serde_json::Value,
) -> Result<String, ActionError> {
    dispatch_human(&HumanActions { state }, person, id, input)
        .await
        .map_err(|error| match error {
            DispatchError::Action(error) => error,
            DispatchError::Decode(cause) => {
                tracing::warn!(action = id.descriptor().name, error = %cause, "validated input does not fit the typed request");
                ActionError::unrepresentable_input()
            }
            DispatchError::NotOwned(_) => {
                failure::internal(format_args!("a human route dispatched another owner's action"))
            }
            DispatchError::Encode(cause) => failure::internal(format_args!(
                "the typed adapter of `human.{}` failed: {cause}",
                id.descriptor().name
            )),
        })
}

/// `not_found` as a person reads it.
fn missing(what: &str, id: &str) -> ActionError {
    ActionError::new(
        ErrorCode::NotFound,
        format!("no {what} `{id}` is visible to you"),
    )
}

/// The store's row, [`missing`] when there is none.
fn found<T>(
    read: Result<Option<T>, crate::server::store::StoreError>,
    what: &str,
    id: &str,
) -> ActionResult<T> {
    read.map_err(failure::store)?
        .ok_or_else(|| missing(what, id))
}

/// A person's answer built from JSON the store's rows give (checked by its type).
fn typed<T: serde::de::DeserializeOwned>(value: serde_json::Value, what: &str) -> ActionResult<T> {
    serde_json::from_value(value).map_err(|e| {
        failure::internal(format_args!(
            "a stored {what} is not its contract type: {e}"
        ))
    })
}

/// The server's human handlers, over the shared state.
pub struct HumanActions<'a> {
    pub state: &'a AppState,
}

impl HumanActions<'_> {
    /// The conversation `target` names, if the person belongs to it.
    async fn conversation(
        &self,
        person: &Person,
        target: &t::ConversationTarget,
    ) -> ActionResult<(Target, crate::server::store::Membership)> {
        let target = Target::parse_canonical(target)?;
        let at = found(
            self.state
                .store
                .conversation_for_member(&person.workspace_id, &person.human_id, &target)
                .await,
            target.kind.as_str(),
            &target.id,
        )?;
        Ok((target, at))
    }

    fn shared(&self) -> ServerActions<'_> {
        ServerActions { state: self.state }
    }
}

impl HumanHandler for HumanActions<'_> {
    type Context = Person;

    async fn me(&self, person: &Person, _: t::HumanMeInput) -> ActionResult<t::HumanMeOutput> {
        let (handle, display_name) = found(
            self.state
                .store
                .human(&person.workspace_id, &person.human_id)
                .await,
            "human",
            &person.human_id,
        )?;
        typed(
            serde_json::json!({
                "humanId": person.human_id,
                "handle": handle,
                "displayName": display_name,
                "workspaceId": person.workspace_id,
            }),
            "human",
        )
    }

    async fn agent_list(
        &self,
        person: &Person,
        input: t::HumanAgentListInput,
    ) -> ActionResult<t::HumanAgentListOutput> {
        let owned = input.owned.unwrap_or(false);
        let filter = page::Filter::new(&person.member(), "human.agent_list").with("owned", owned);
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            page::limit(input.limit),
            async |after, limit| {
                self.state
                    .store
                    .agents_for_human(
                        &person.workspace_id,
                        &person.human_id,
                        owned,
                        after.as_ref(),
                        limit,
                    )
                    .await
            },
        )
        .await?;
        Ok(t::HumanAgentListOutput {
            agents: listed
                .items
                .into_iter()
                .map(|(profile, owned)| t::HumanAgentListAgent { profile, owned })
                .collect(),
            next_cursor: listed.next_cursor,
        })
    }

    async fn conversation_list(
        &self,
        person: &Person,
        input: t::HumanConversationListInput,
    ) -> ActionResult<t::HumanConversationListOutput> {
        let filter = page::Filter::new(&person.member(), "human.conversation_list");
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            page::limit(input.limit),
            async |after, limit| {
                self.state
                    .store
                    .conversations_for_member(
                        &person.workspace_id,
                        &person.human_id,
                        after.as_ref(),
                        limit,
                    )
                    .await
            },
        )
        .await?;
        Ok(t::HumanConversationListOutput {
            conversations: listed.items,
            next_cursor: listed.next_cursor,
        })
    }

    async fn thread_list(
        &self,
        person: &Person,
        input: t::HumanThreadListInput,
    ) -> ActionResult<t::HumanThreadListOutput> {
        let (target, at) = self.conversation(person, &input.target).await?;
        if target.kind == TargetKind::Thread {
            return Err(ActionError::new(
                ErrorCode::ValidationFailed,
                "a thread has no threads: list those of its channel",
            )
            .with_next("call `thread_list` with the channel's target (`channel:chn_…`)"));
        }
        let filter = page::Filter::new(&person.member(), "human.thread_list")
            .with("target", target.to_string());
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            page::limit(input.limit),
            async |after, limit| {
                self.state
                    .store
                    .threads_for_member(&at, &person.human_id, after.as_ref(), limit)
                    .await
            },
        )
        .await?;
        Ok(t::HumanThreadListOutput {
            threads: listed.items,
            next_cursor: listed.next_cursor,
        })
    }

    async fn history_read(
        &self,
        person: &Person,
        input: t::HumanHistoryReadInput,
    ) -> ActionResult<t::HumanHistoryReadOutput> {
        let (target, at) = self.conversation(person, &input.target).await?;
        let limit = page::limit(input.limit);
        let filter = page::Filter::new(&person.member(), "human.history_read")
            .with("target", target.to_string());
        if let Some(around) = &input.around {
            if input.cursor.is_some() {
                return Err(ActionError::new(
                    ErrorCode::ValidationFailed,
                    "`around` and `cursor` are not read together",
                )
                .with_next("read around a message, then continue with the `nextCursor` it gives"));
            }
            let (page, newer_remain) = found(
                self.state
                    .store
                    .history_around(&at, &person.human_id, around, limit)
                    .await,
                "message",
                around,
            )?;
            let next_cursor = page
                .next
                .map(|position| page::next_cursor(self.state, &filter, position))
                .transpose()?;
            return Ok(t::HumanHistoryReadOutput {
                target: input.target,
                messages: page.items,
                next_cursor,
                newer_remain: Some(newer_remain),
            });
        }
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            limit,
            async |after, limit| {
                self.state
                    .store
                    .message_history(&at, &person.human_id, after.as_ref(), limit)
                    .await
            },
        )
        .await?;
        Ok(t::HumanHistoryReadOutput {
            target: input.target,
            messages: listed.items,
            next_cursor: listed.next_cursor,
            newer_remain: None,
        })
    }

    async fn read_mark(
        &self,
        person: &Person,
        input: t::HumanReadMarkInput,
    ) -> ActionResult<t::HumanReadMarkOutput> {
        let (target, at) = self.conversation(person, &input.target).await?;
        let message = found(
            self.state
                .store
                .message_for_member(&person.workspace_id, &person.human_id, &input.message_id)
                .await,
            "message",
            &input.message_id,
        )?;
        if *message.target != target.to_string() {
            return Err(missing(
                &format!("message in `{}`", *input.target),
                &input.message_id,
            ));
        }
        let conversation = target.to_string();
        let store = &self.state.store;
        store
            .mark_read(
                &person.human_id,
                &conversation,
                message.created_at.0.timestamp_millis(),
                &input.message_id,
            )
            .await
            .map_err(failure::store)?;
        let unread = store
            .unread(&person.human_id, &at, &conversation)
            .await
            .map_err(failure::store)?;
        typed(
            serde_json::json!({ "target": input.target, "unread": unread }),
            "read mark",
        )
    }

    async fn dm_open(
        &self,
        person: &Person,
        input: t::HumanDmOpenInput,
    ) -> ActionResult<t::HumanDmOpenOutput> {
        let store = &self.state.store;
        let member = found(
            store
                .member_by_handle(&person.workspace_id, &input.handle)
                .await,
            "member with handle",
            &input.handle,
        )?;
        if member == person.human_id {
            return Err(ActionError::new(
                ErrorCode::ValidationFailed,
                "a direct conversation is with someone else",
            )
            .with_next("name an agent's or another person's handle"));
        }
        let dm = store
            .open_dm(
                &person.workspace_id,
                &person.human_id,
                &member,
                person.now_ms,
            )
            .await
            .map_err(failure::store)?;
        typed(
            serde_json::json!({ "target": format!("dm:{dm}"), "name": *input.handle }),
            "direct conversation",
        )
    }

    async fn message_post(
        &self,
        person: &Person,
        input: t::HumanMessagePostInput,
    ) -> ActionResult<t::HumanMessagePostOutput> {
        let (_, at) = self.conversation(person, &input.target).await?;
        let store = &self.state.store;
        let (id, _) = store
            .post_message(
                &person.workspace_id,
                &at,
                &person.human_id,
                &input.content,
                &[],
                person.now_ms,
            )
            .await
            .map_err(failure::store)?;
        let message = store
            .message_for_member(&person.workspace_id, &person.human_id, &id)
            .await
            .map_err(failure::store)?
            .ok_or_else(|| failure::internal(format_args!("a message just posted is gone")))?;
        Ok(t::HumanMessagePostOutput { message })
    }

    async fn reaction_add(
        &self,
        person: &Person,
        input: t::HumanReactionAddInput,
    ) -> ActionResult<t::HumanReactionAddOutput> {
        let added = messages::react(
            self.state,
            &person.member(),
            t::ReactionAddInput {
                message_id: input.message_id,
                emoji: input.emoji,
            },
        )
        .await
        .map_err(as_person)?;
        Ok(t::HumanReactionAddOutput {
            message_id: added.message_id,
            reactions: added.reactions,
        })
    }

    async fn reaction_remove(
        &self,
        person: &Person,
        input: t::HumanReactionRemoveInput,
    ) -> ActionResult<t::HumanReactionRemoveOutput> {
        let removed = messages::unreact(
            self.state,
            &person.member(),
            t::ReactionRemoveInput {
                message_id: input.message_id,
                emoji: input.emoji,
            },
        )
        .await
        .map_err(as_person)?;
        Ok(t::HumanReactionRemoveOutput {
            message_id: removed.message_id,
            reactions: removed.reactions,
        })
    }

    async fn attachment_download(
        &self,
        person: &Person,
        input: t::HumanAttachmentDownloadInput,
    ) -> ActionResult<t::HumanAttachmentDownloadOutput> {
        let store = &self.state.store;
        let attachment = found(
            store
                .attachment_for_member(&person.workspace_id, &person.human_id, &input.attachment_id)
                .await,
            "attachment",
            &input.attachment_id,
        )?;
        let bytes = store
            .attachment_bytes(&input.attachment_id, 0, attachment.size)
            .await
            .map_err(failure::store)?;
        typed(
            serde_json::json!({
                "attachment": attachment,
                "contentBase64": base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
            "attachment",
        )
    }

    async fn task_list(
        &self,
        person: &Person,
        input: t::TaskListInput,
    ) -> ActionResult<t::TaskListOutput> {
        self.shared()
            .task_list(&person.member(), input)
            .await
            .map_err(as_person)
    }

    async fn task_get(
        &self,
        person: &Person,
        input: t::TaskGetInput,
    ) -> ActionResult<t::TaskGetOutput> {
        self.shared()
            .task_get(&person.member(), input)
            .await
            .map_err(as_person)
    }

    async fn review_list(
        &self,
        person: &Person,
        input: t::ReviewListInput,
    ) -> ActionResult<t::ReviewListOutput> {
        self.shared()
            .review_list(&person.member(), input)
            .await
            .map_err(as_person)
    }

    async fn project_list(
        &self,
        person: &Person,
        input: t::ProjectListInput,
    ) -> ActionResult<t::ProjectListOutput> {
        self.shared()
            .project_list(&person.member(), input)
            .await
            .map_err(as_person)
    }

    async fn scheduled_message_list(
        &self,
        person: &Person,
        input: t::ScheduledMessageListInput,
    ) -> ActionResult<t::ScheduledMessageListOutput> {
        self.shared()
            .scheduled_message_list(&person.member(), input)
            .await
            .map_err(as_person)
    }

    async fn approval_list(
        &self,
        person: &Person,
        input: t::HumanApprovalListInput,
    ) -> ActionResult<t::HumanApprovalListOutput> {
        let filter =
            page::Filter::new(&person.member(), "human.approval_list").with("status", input.status);
        let status = input.status.map(|s| s.to_string());
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            page::limit(input.limit),
            async |after, limit| {
                self.state
                    .store
                    .approvals_for_owner(
                        &person.workspace_id,
                        &person.human_id,
                        status.as_deref(),
                        after.as_ref(),
                        limit,
                    )
                    .await
            },
        )
        .await?;
        Ok(t::HumanApprovalListOutput {
            approvals: listed.items,
            next_cursor: listed.next_cursor,
        })
    }

    async fn approval_decide(
        &self,
        person: &Person,
        input: t::HumanApprovalDecideInput,
    ) -> ActionResult<t::HumanApprovalDecideOutput> {
        // Only an approval the person answers for: another person's agent's is missing.
        found(
            self.state
                .store
                .approval_for_owner(&person.workspace_id, &person.human_id, &input.approval_id)
                .await,
            "approval",
            &input.approval_id,
        )?;
        let approve = matches!(input.decision, t::HumanApprovalDecideInputDecision::Approve);
        let comment = input.comment.as_deref().map(String::as_str);
        match approval::decide(
            self.state,
            &person.workspace_id,
            &input.approval_id,
            &person.human_id,
            approve,
            comment,
        )
        .await
        {
            Ok(approval) => Ok(t::HumanApprovalDecideOutput { approval }),
            Err(Undecided::Missing) => Err(missing("approval", &input.approval_id)),
            Err(Undecided::UnknownHuman) => Err(ActionError::forbidden()),
            Err(Undecided::Refused(error)) => Err(error),
        }
    }

    async fn audit_list(
        &self,
        person: &Person,
        input: t::HumanAuditListInput,
    ) -> ActionResult<t::HumanAuditListOutput> {
        let agent_id = input.agent_id.as_ref().map(|a| a.to_string());
        let filter =
            page::Filter::new(&person.member(), "human.audit_list").with("agentId", &agent_id);
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            page::limit(input.limit),
            async |after, limit| {
                self.state
                    .store
                    .audit_for_human(
                        &person.workspace_id,
                        &person.human_id,
                        agent_id.as_deref(),
                        after.as_ref(),
                        limit,
                    )
                    .await
            },
        )
        .await?;
        let records = listed
            .items
            .iter()
            .map(|r| {
                let mut value = serde_json::json!({
                    "id": r.id,
                    "at": crate::server::store::rfc3339(r.at),
                    "family": r.family,
                    "action": r.action,
                    "outcome": r.outcome,
                    "durationUs": r.duration_us.max(0),
                });
                if let Some(agent) = &r.agent_id {
                    value["agentId"] = agent.clone().into();
                }
                if let Some(device) = &r.device_id {
                    value["deviceId"] = device.clone().into();
                }
                typed(value, "audit record")
            })
            .collect::<ActionResult<_>>()?;
        Ok(t::HumanAuditListOutput {
            records,
            next_cursor: listed.next_cursor,
        })
    }
}

/// A shared read's refusal as a person reads it: its `not_found` says "to you", not "to this
/// agent".
fn as_person(mut error: ActionError) -> ActionError {
    if error.code == ErrorCode::NotFound {
        error.message = error.message.replace("to this agent", "to you");
    }
    error
}
