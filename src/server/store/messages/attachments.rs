//! Attachments: stored with their message, read as metadata or as a byte range by a member of its
//! conversation.

use super::parse;
use crate::contract::types::AttachmentInfo;
use crate::server::store::{Columns, Store, StoreError, on_backend};

/// Attachments on one message (the `Message.attachments` bound).
pub const MAX_ATTACHMENTS: usize = 10;

/// An attachment to store with a new message.
#[derive(Debug, Clone)]
pub struct NewAttachment {
    pub name: String,
    pub media_type: String,
    pub content: Vec<u8>,
}

impl Store {
    /// An attachment's metadata, if it is on a message in a conversation `member_id` belongs to.
    pub async fn attachment_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        attachment_id: &str,
    ) -> Result<Option<AttachmentInfo>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT a.message_id, a.id, a.name, a.media_type, a.size FROM attachments a \
                 JOIN messages g ON g.id = a.message_id JOIN channels c ON c.id = g.channel_id JOIN channel_members m ON m.channel_id = c.id \
                 WHERE a.id = $1 AND c.workspace_id = $2 AND m.member_id = $3",
            )
            .bind(attachment_id)
            .bind(workspace_id)
            .bind(member_id)
            .fetch_optional(reader)
            .await?;
            row.as_ref().map(attachment_info).transpose()
        })
    }

    /// Up to `len` bytes of an attachment from `offset` (`substr` on a BLOB or BYTEA is bytes;
    /// PostgreSQL has it for `integer` arguments only).
    pub async fn attachment_bytes(
        &self,
        attachment_id: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let (bytes,): (Vec<u8>,) =
                sqlx::query_as("SELECT substr(content, CAST($2 AS INTEGER), CAST($3 AS INTEGER)) FROM attachments WHERE id = $1")
                    .bind(attachment_id)
                    .bind(offset.saturating_add(1) as i64)
                    .bind(len as i64)
                    .fetch_one(reader)
                    .await?;
            Ok(bytes)
        })
    }
}

pub(super) fn attachment_info(row: &impl Columns) -> Result<AttachmentInfo, StoreError> {
    let size: i64 = row.column(4)?;
    Ok(AttachmentInfo {
        id: parse(row.column(1)?, "attachment id")?,
        name: parse(row.column(2)?, "attachment name")?,
        media_type: parse(row.column(3)?, "media_type")?,
        size: size as u64,
    })
}
