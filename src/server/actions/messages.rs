//! The messages domain behind the `agentteam` MCP tools: send, read history, react, read
//! attachments. Every target and id is resolved against the caller's workspace and membership; one
//! the agent cannot read is `not_found`, exactly like one that does not exist.

use crate::server::actions::Found;
use base64::Engine;

use super::{Caller, page};
use crate::contract::error::ErrorCode;
use crate::contract::target::Target;
use crate::contract::types as t;
use crate::contract::{ActionError, ActionResult, ToolId, Written};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::{Membership, Position};

/// `attachment_read` returns this many bytes when the call names no `maxBytes`.
const DEFAULT_ATTACHMENT_RANGE: u64 = 8 * 1024;
/// The largest range one call returns (the schema's `maximum`).
const MAX_ATTACHMENT_RANGE: u64 = 16 * 1024;

/// The conversation `target` names, if the caller may read it.
async fn conversation(
    state: &AppState,
    caller: &Caller,
    target: &t::ConversationTarget,
) -> ActionResult<(Target, Membership)> {
    let target = Target::parse_canonical(target)?;
    let membership = state
        .store
        .conversation_for_member(&caller.workspace_id, &caller.agent_id, &target)
        .await
        .found(target.kind.as_str(), &target.id)?;
    Ok((target, membership))
}

pub async fn send(
    state: &AppState,
    caller: &Caller,
    input: t::MessageSendInput,
) -> ActionResult<t::MessageSendOutput> {
    let (_, at) = conversation(state, caller, &input.target).await?;
    let (id, _) = state
        .store
        .post_message(
            &caller.workspace_id,
            &at,
            &caller.agent_id,
            &input.content,
            &[],
            caller.now_ms,
        )
        .await
        .map_err(failure::store)?;
    let message = state
        .store
        .message_for_member(&caller.workspace_id, &caller.agent_id, &id)
        .await
        .map_err(failure::store)?
        .ok_or_else(|| internal_missing("a message just posted"))?;
    Ok(t::MessageSendOutput { message })
}

/// The caller's page of a conversation, written as the store reads it: the messages' text as
/// the store wrote it, then the cursor and the target.
pub async fn history(
    state: &AppState,
    caller: &Caller,
    input: t::MessageHistoryReadInput,
) -> ActionResult<Written<t::MessageHistoryReadOutput>> {
    let target = Target::parse_canonical(&input.target)?;
    let filter = page::Filter::new(caller, ToolId::MessageHistoryRead.descriptor().name)
        .with("target", target.to_string());
    let after: Option<Position> = match page::after(state, input.cursor.as_ref(), &filter) {
        Ok(after) => after,
        Err(error) => {
            // A conversation the caller cannot read is missing, whatever the cursor says.
            conversation(state, caller, &input.target).await?;
            return Err(error);
        }
    };
    let limit = input
        .limit
        .map_or(page::DEFAULT_LIMIT, |l| l.get().min(100) as usize);
    // `MessageHistoryReadOutput`'s members in the order its serializer writes them.
    let mut out = b"{\"messages\":".to_vec();
    let next = state
        .store
        .history_written_for_member(
            &caller.workspace_id,
            &caller.agent_id,
            &target,
            after.as_ref(),
            limit,
            &mut out,
        )
        .await
        .found(target.kind.as_str(), &target.id)?;
    if let Some(position) = next {
        let cursor = page::next_cursor(state, &filter, position)?;
        out.extend_from_slice(b",\"nextCursor\":");
        serde_json::to_writer(&mut out, &cursor).expect("a cursor serializes");
    }
    out.extend_from_slice(b",\"target\":");
    serde_json::to_writer(&mut out, &input.target).expect("a target serializes");
    out.push(b'}');
    let text = String::from_utf8(out).expect("serde_json writes UTF-8");
    Written::text(text).map_err(|error| {
        failure::internal(format_args!(
            "a written history page is not its typed output: {error}"
        ))
    })
}

/// The message `id`, if the caller may read it.
async fn readable_message(
    state: &AppState,
    caller: &Caller,
    id: &t::MessageId,
) -> ActionResult<t::Message> {
    state
        .store
        .message_for_member(&caller.workspace_id, &caller.agent_id, id)
        .await
        .found("message", id)
}

pub async fn react(
    state: &AppState,
    caller: &Caller,
    input: t::ReactionAddInput,
) -> ActionResult<t::ReactionAddOutput> {
    readable_message(state, caller, &input.message_id).await?;
    let added = state
        .store
        .add_reaction(
            &input.message_id,
            &caller.agent_id,
            &input.emoji,
            caller.now_ms,
        )
        .await
        .map_err(failure::store)?;
    if !added {
        return Err(ActionError::new(
            ErrorCode::InvalidState,
            format!(
                "message `{}` already carries the most distinct reactions allowed",
                *input.message_id
            ),
        )
        .with_next("react with an emoji the message already carries"));
    }
    let reactions = state
        .store
        .reactions(&input.message_id, &caller.agent_id)
        .await
        .map_err(failure::store)?;
    Ok(t::ReactionAddOutput {
        message_id: input.message_id,
        reactions,
    })
}

pub async fn unreact(
    state: &AppState,
    caller: &Caller,
    input: t::ReactionRemoveInput,
) -> ActionResult<t::ReactionRemoveOutput> {
    readable_message(state, caller, &input.message_id).await?;
    state
        .store
        .remove_reaction(
            &input.message_id,
            &caller.agent_id,
            &input.emoji,
            caller.now_ms,
        )
        .await
        .map_err(failure::store)?;
    let reactions = state
        .store
        .reactions(&input.message_id, &caller.agent_id)
        .await
        .map_err(failure::store)?;
    Ok(t::ReactionRemoveOutput {
        message_id: input.message_id,
        reactions,
    })
}

pub async fn read_attachment(
    state: &AppState,
    caller: &Caller,
    input: t::AttachmentReadInput,
) -> ActionResult<t::AttachmentReadOutput> {
    let attachment = state
        .store
        .attachment_for_member(&caller.workspace_id, &caller.agent_id, &input.attachment_id)
        .await
        .found("attachment", &input.attachment_id)?;
    let offset = input.offset.unwrap_or(0);
    if offset > attachment.size {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!(
                "`offset` `{offset}` is past the end of the attachment (`{}` bytes)",
                attachment.size
            ),
        )
        .with_next("start again from `offset` 0"));
    }
    let wanted = input.max_bytes.map_or(DEFAULT_ATTACHMENT_RANGE, |m| {
        m.get().min(MAX_ATTACHMENT_RANGE)
    });
    let mut bytes = state
        .store
        .attachment_bytes(&input.attachment_id, offset, wanted)
        .await
        .map_err(failure::store)?;
    let textual =
        attachment.media_type.starts_with("text/") || attachment.media_type.ends_with("json");
    let text = textual
        .then(|| utf8_prefix(&mut bytes))
        .flatten()
        // Text that escapes to more than its base64 would (control characters, quotes) goes as
        // base64: a full range then always fits the MCP result budget.
        .filter(|text| escaped_cost(text) <= 2 * base64_len(bytes.len()) + 4);
    let (encoding, data) = match text {
        Some(text) => (t::AttachmentReadOutputEncoding::Utf8, text),
        None => (
            t::AttachmentReadOutputEncoding::Base64,
            base64::engine::general_purpose::STANDARD.encode(&bytes),
        ),
    };
    let end = offset + bytes.len() as u64;
    Ok(t::AttachmentReadOutput {
        attachment: attachment.clone(),
        offset,
        encoding,
        data,
        next_offset: (end < attachment.size)
            .then(|| std::num::NonZeroU64::new(end))
            .flatten(),
    })
}

/// The longest valid UTF-8 prefix of `bytes` (dropping at most a split character's 3 bytes at
/// the end of the range), or `None` when the range is not text at all.
fn utf8_prefix(bytes: &mut Vec<u8>) -> Option<String> {
    let valid = match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() && bytes.len() - e.valid_up_to() < 4 => e.valid_up_to(),
        Err(_) => return None,
    };
    if valid == 0 && !bytes.is_empty() {
        return None;
    }
    bytes.truncate(valid);
    String::from_utf8(bytes.clone()).ok()
}

/// What `text` costs in an MCP result: once as a JSON string in the structured value, and again
/// inside the JSON text block that repeats it.
fn escaped_cost(text: &str) -> usize {
    let once = serde_json::to_string(text).expect("strings serialize");
    once.len()
        + serde_json::to_string(&once)
            .expect("strings serialize")
            .len()
}

fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3) * 4
}

/// A row this request wrote or read is gone before the request ends: a retry may find it.
fn internal_missing(what: &str) -> ActionError {
    failure::saying(
        "the server failed to handle this request; retry later",
        format_args!("row vanished inside one request: {what}"),
    )
}
