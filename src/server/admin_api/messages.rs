//! A human posts a message, optionally with attachments, where they are a member.

use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::json;

use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::contract::{ActionError, ActionResult};
use crate::server::failure;
use crate::server::state::AppState;
use crate::wire::Data;
use base64::Engine;

use super::{Answer, OperatorJson, not_blank};
use crate::server::store::{MAX_ATTACHMENTS, NewAttachment};

/// The largest attachment the operator API stores.
const MAX_ATTACHMENT_BYTES: usize = 1024 * 1024;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewMessage {
    author_human_id: String,
    /// A channel or dm id.
    channel_id: String,
    #[serde(default)]
    thread_id: Option<String>,
    content: t::MessageContent,
    #[serde(default)]
    attachments: Vec<NewAttachmentBody>,
}

/// One attachment: its bytes as UTF-8 `text` or as standard `base64`, exactly one of them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewAttachmentBody {
    name: t::Name,
    media_type: t::AttachmentInfoMediaType,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
}

/// A human posts a message in a channel (or one of its threads) they belong to.
pub(super) async fn post_message(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(body): OperatorJson<NewMessage>,
) -> Answer {
    let NewMessage {
        author_human_id,
        channel_id,
        thread_id,
        content,
        attachments,
    } = body;
    not_blank("content", &content)?;
    let attachments = decode_attachments(attachments)?;
    let membership = match &thread_id {
        Some(thread_id) => {
            state
                .store
                .thread_for_member(&workspace_id, &author_human_id, thread_id)
                .await
        }
        None => {
            state
                .store
                .channel_for_member(&workspace_id, &author_human_id, &channel_id)
                .await
        }
    }
    .map_err(failure::store)?
    .filter(|m| m.channel_id == channel_id)
    .ok_or_else(|| {
        ActionError::new(
            ErrorCode::NotFound,
            "no such channel or thread with this human as a member",
        )
    })?;
    let (id, attachment_ids) = state
        .store
        .post_message(
            &workspace_id,
            &membership,
            &author_human_id,
            &content,
            &attachments,
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?;
    Ok(Data(
        json!({ "messageId": id, "attachmentIds": attachment_ids }),
    ))
}

fn decode_attachments(attachments: Vec<NewAttachmentBody>) -> ActionResult<Vec<NewAttachment>> {
    if attachments.len() > MAX_ATTACHMENTS {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("a message has at most {MAX_ATTACHMENTS} attachments"),
        ));
    }
    attachments
        .into_iter()
        .map(|a| {
            not_blank("name", &a.name)?;
            let content = match (a.text, a.base64) {
                (Some(text), None) => text.into_bytes(),
                (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|_| {
                        ActionError::new(
                            ErrorCode::ValidationFailed,
                            "`base64` is not standard base64",
                        )
                    })?,
                _ => {
                    return Err(ActionError::new(
                        ErrorCode::ValidationFailed,
                        "an attachment has exactly one of `text` and `base64`",
                    ));
                }
            };
            if content.len() > MAX_ATTACHMENT_BYTES {
                return Err(ActionError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("an attachment has at most {MAX_ATTACHMENT_BYTES} bytes"),
                ));
            }
            Ok(NewAttachment {
                name: a.name.to_string(),
                media_type: a.media_type.to_string(),
                content,
            })
        })
        .collect()
}
