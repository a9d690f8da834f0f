//! The `HumanHandler` implementation: one method per action of `schema/human/`.

use base64::Engine;

use super::{HumanActions, Person, as_person, feed, found, missing, typed, wakers};
use crate::contract::error::ErrorCode;
use crate::contract::target::TargetKind;
use crate::contract::types as t;
use crate::contract::{ActionError, ActionHandler, ActionResult, HumanHandler};
use crate::server::actions::approval::{self, Undecided};
use crate::server::actions::{messages, page};
use crate::server::failure;
use crate::server::store::DeliveryFilter;

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

    async fn workflow_run_list(
        &self,
        person: &Person,
        input: t::HumanWorkflowRunListInput,
    ) -> ActionResult<t::HumanWorkflowRunListOutput> {
        let filter = page::Filter::new(&person.member(), "human.workflow_run_list")
            .with("status", input.status);
        let status = input.status.map(|s| s.to_string());
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            page::limit(input.limit),
            async |after, limit| {
                self.state
                    .store
                    .runs_for_owner(
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
        Ok(t::HumanWorkflowRunListOutput {
            runs: listed
                .items
                .iter()
                .map(|run| crate::server::store::run_contract(run).map_err(failure::store))
                .collect::<ActionResult<_>>()?,
            next_cursor: listed.next_cursor,
        })
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

    async fn delivery_list(
        &self,
        person: &Person,
        input: t::HumanDeliveryListInput,
    ) -> ActionResult<t::HumanDeliveryListOutput> {
        let filter = page::Filter::new(&person.member(), "human.delivery_list")
            .with("agentId", &input.agent_id)
            .with("target", &input.target)
            .with("state", input.state);
        let agent = input.agent_id.as_ref().map(|a| a.to_string());
        let target = input.target.as_ref().map(|t| t.to_string());
        let state = input.state.map(|s| s.to_string());
        let listed = page::list(
            self.state,
            &filter,
            input.cursor.as_ref(),
            page::limit(input.limit),
            async |after, limit| {
                self.state
                    .store
                    .deliveries_for_person(
                        &person.workspace_id,
                        &person.human_id,
                        DeliveryFilter {
                            agent_id: agent.as_deref(),
                            target: target.as_deref(),
                            state: state.as_deref(),
                        },
                        after.as_ref(),
                        limit,
                    )
                    .await
            },
        )
        .await?;
        Ok(t::HumanDeliveryListOutput {
            deliveries: listed.items,
            next_cursor: listed.next_cursor,
        })
    }

    async fn agent_host(
        &self,
        person: &Person,
        input: t::HumanAgentHostInput,
    ) -> ActionResult<t::HumanAgentHostOutput> {
        let fence = found(
            self.state
                .store
                .host_agent(
                    &person.workspace_id,
                    &person.human_id,
                    &person.device_id,
                    &input.agent_id,
                    person.now_ms,
                )
                .await,
            "agent",
            &input.agent_id,
        )?;
        Ok(t::HumanAgentHostOutput {
            agent_id: input.agent_id,
            fence: u64::try_from(fence)
                .ok()
                .and_then(std::num::NonZeroU64::new)
                .ok_or_else(|| {
                    failure::internal(format_args!("a stored hosting fence is not positive"))
                })?,
        })
    }

    async fn agent_wakers_list(
        &self,
        person: &Person,
        input: t::HumanAgentWakersListInput,
    ) -> ActionResult<t::HumanAgentWakersListOutput> {
        wakers::list(self, person, input).await
    }

    async fn agent_wakers_set(
        &self,
        person: &Person,
        input: t::HumanAgentWakersSetInput,
    ) -> ActionResult<t::HumanAgentWakersSetOutput> {
        wakers::set(self, person, input).await
    }

    async fn delivery_start(
        &self,
        person: &Person,
        input: t::HumanDeliveryStartInput,
    ) -> ActionResult<t::HumanDeliveryStartOutput> {
        let started = self
            .state
            .store
            .start_delivery(
                &person.workspace_id,
                &person.human_id,
                crate::server::store::Host {
                    device_id: &person.device_id,
                    fence: input.fence.get() as i64,
                },
                &input.delivery_id,
                &input.run_id,
                person.now_ms,
            )
            .await;
        Ok(t::HumanDeliveryStartOutput {
            delivery: delivered(started, &input.delivery_id, "start")?,
        })
    }

    async fn delivery_finish(
        &self,
        person: &Person,
        input: t::HumanDeliveryFinishInput,
    ) -> ActionResult<t::HumanDeliveryFinishOutput> {
        let state = input.state.to_string();
        let finished = self
            .state
            .store
            .finish_delivery(
                &person.workspace_id,
                &person.human_id,
                crate::server::store::Host {
                    device_id: &person.device_id,
                    fence: input.fence.get() as i64,
                },
                &input.delivery_id,
                (&state, input.reason.as_deref().map(String::as_str)),
                person.now_ms,
            )
            .await;
        Ok(t::HumanDeliveryFinishOutput {
            delivery: delivered(finished, &input.delivery_id, "finish")?,
        })
    }

    async fn delivery_retry(
        &self,
        person: &Person,
        input: t::HumanDeliveryRetryInput,
    ) -> ActionResult<t::HumanDeliveryRetryOutput> {
        let retried = self
            .state
            .store
            .retry_delivery(
                &person.workspace_id,
                &person.human_id,
                &input.delivery_id,
                person.now_ms,
            )
            .await;
        Ok(t::HumanDeliveryRetryOutput {
            delivery: delivered(retried, &input.delivery_id, "retry")?,
        })
    }

    async fn events_read(
        &self,
        person: &Person,
        input: t::HumanEventsReadInput,
    ) -> ActionResult<t::HumanEventsReadOutput> {
        feed::read(self, person, input).await
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

/// A delivery change's answer as a person reads it.
fn delivered(
    changed: Result<
        Option<Result<t::Delivery, crate::server::store::DeliveryRefusal>>,
        crate::server::store::StoreError,
    >,
    id: &str,
    what: &str,
) -> ActionResult<t::Delivery> {
    use crate::server::store::DeliveryRefusal;
    match found(changed, "delivery", id)? {
        Ok(delivery) => Ok(delivery),
        Err(DeliveryRefusal::NotHost) => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!(
                "this device does not host the agent of delivery `{id}` with that fence: another \
                 device (or this one, since) claimed it with `agent_host`"
            ),
        )),
        Err(DeliveryRefusal::State(state)) => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!("delivery `{id}` is {state}: there is nothing to {what}"),
        )),
        Err(DeliveryRefusal::Waiting(waiting)) => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!(
                "{waiting} messages already wait for the agent in this conversation: ask again \
                 for delivery `{id}` once they are answered"
            ),
        )),
        Err(DeliveryRefusal::Expired) => Err(ActionError::new(
            ErrorCode::InvalidState,
            format!(
                "delivery `{id}` waited past its expiry: ask for it again with `delivery_retry`"
            ),
        )),
    }
}
