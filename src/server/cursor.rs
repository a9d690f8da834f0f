//! Opaque, tamper-evident page cursors.
//!
//! ```text
//! raw    = 0x01 | SHA-256(canonical filter) [32] | position (compact JSON) | tag [16]
//! tag    = HMAC-SHA256(server key, "cursor/v1\0" | everything before the tag) [..16]
//! cursor = base64url without padding (canonical: decoding then encoding gives the input back)
//! ```
//!
//! The filter binding makes a cursor valid only for the request that produced it (the same
//! normalized filter, caller and list); the MAC makes it unforgeable; the position is the whole
//! keyset boundary. Every failure is one [`CursorError`], which the caller reports as a validation
//! error, never as page one.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const VERSION: u8 = 1;
const TAG_LEN: usize = 16;
const HASH_LEN: usize = 32;
/// The contract's `Cursor.maxLength`: room for the largest keyset boundary of any list (a team's
/// 200-character display name of characters JSON escapes to six bytes each); a test checks it
/// against the schemas.
pub const MAX_CURSOR_LEN: usize = 2048;
const DOMAIN: &[u8] = b"cursor/v1\0";

/// Why a cursor was refused; deliberately one undifferentiated kind for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "`cursor` is not a cursor this list issued for these filters; start again without `cursor`"
)]
pub struct CursorError;

/// Encodes and checks cursors with one server key.
#[derive(Clone)]
pub struct CursorCodec {
    key: Vec<u8>,
}

impl CursorCodec {
    pub fn new(key: Vec<u8>) -> Self {
        CursorCodec { key }
    }

    /// A cursor for `position` under `filter` (the normalized filter, including the list's name
    /// and the caller's scope).
    pub fn encode(&self, filter: &Value, position: &Value) -> String {
        let mut raw = vec![VERSION];
        raw.extend_from_slice(&filter_hash(filter));
        raw.extend_from_slice(&serde_json::to_vec(position).expect("a Value always serializes"));
        let tag = self.tag(&raw);
        raw.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The position inside `cursor`, if this codec issued it for exactly `filter`.
    pub fn decode(&self, cursor: &str, filter: &Value) -> Result<Value, CursorError> {
        if cursor.is_empty() || cursor.len() > MAX_CURSOR_LEN {
            return Err(CursorError);
        }
        let raw = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| CursorError)?;
        if URL_SAFE_NO_PAD.encode(&raw) != cursor
            || raw.len() < 1 + HASH_LEN + 1 + TAG_LEN
            || raw[0] != VERSION
        {
            return Err(CursorError);
        }
        let (body, tag) = raw.split_at(raw.len() - TAG_LEN);
        if !bool::from(self.tag(body).ct_eq(tag)) {
            return Err(CursorError);
        }
        if body[1..1 + HASH_LEN] != filter_hash(filter) {
            return Err(CursorError);
        }
        serde_json::from_slice(&body[1 + HASH_LEN..]).map_err(|_| CursorError)
    }

    fn tag(&self, body: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(DOMAIN);
        mac.update(body);
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&full[..TAG_LEN]);
        tag
    }
}

fn filter_hash(filter: &Value) -> [u8; HASH_LEN] {
    // serde_json maps are sorted, so equal filters serialize to equal bytes.
    Sha256::digest(serde_json::to_vec(filter).expect("a Value always serializes")).into()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn codec() -> CursorCodec {
        CursorCodec::new(vec![7; 32])
    }

    proptest! {
        #[test]
        fn round_trips(ms in any::<i64>(), id in "[a-z]{3}_[0-9A-Z]{8,40}", scope in "[a-z]{1,12}") {
            let filter = json!({"list": "task", "scope": scope});
            let position = json!([ms, id]);
            let cursor = codec().encode(&filter, &position);
            prop_assert!(cursor.len() <= MAX_CURSOR_LEN);
            prop_assert_eq!(codec().decode(&cursor, &filter), Ok(position));
            prop_assert_eq!(codec().decode(&cursor, &json!({"list": "task", "scope": format!("{scope}x")})), Err(CursorError));
        }

        #[test]
        fn any_single_character_change_is_refused(ms in any::<i64>(), index in any::<prop::sample::Index>(), replacement in "[A-Za-z0-9_-]") {
            let filter = json!({"list": "task"});
            let cursor = codec().encode(&filter, &json!([ms, "task_0123456789"]));
            let at = index.index(cursor.len());
            let mut mutated = cursor.clone();
            mutated.replace_range(at..at + 1, &replacement);
            prop_assume!(mutated != cursor);
            prop_assert_eq!(codec().decode(&mutated, &filter), Err(CursorError));
        }

        #[test]
        fn arbitrary_strings_never_panic(input in ".{0,2100}") {
            let _ = codec().decode(&input, &json!({}));
        }
    }

    #[test]
    fn another_key_or_padding_is_refused() {
        let filter = json!({"list": "task"});
        let cursor = codec().encode(&filter, &json!([1, "task_0123456789"]));
        assert_eq!(
            CursorCodec::new(vec![8; 32]).decode(&cursor, &filter),
            Err(CursorError)
        );
        assert_eq!(
            codec().decode(&format!("{cursor}="), &filter),
            Err(CursorError)
        );
        assert_eq!(
            codec().decode(&"A".repeat(MAX_CURSOR_LEN + 1), &filter),
            Err(CursorError)
        );
    }
}
