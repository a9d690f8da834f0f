//! `a2` cursors of `agent list` (spec: "Bounded non-Workflow collection reads").
//!
//! ```text
//! payload = {"e": revision epoch, "c": revision counter, "a": anchor agent id,
//!            "h": anchor handle, "f": hex(SHA-256(normalized filter))[..32]}
//! cursor  = "a2" + base64url(payload JSON | HMAC-SHA256(key, "a2\0" | payload JSON)[..16])
//! ```
//!
//! A cursor is valid only for the query that produced it and only while the collection is exactly
//! as it was: a stale revision, a deleted or renamed anchor, another filter, a malformed or
//! tampered token is each a typed validation failure, never page one. The key is random at every
//! daemon start (a restart also starts a new revision epoch).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::store::{ListFilter, Revision};

const PREFIX: &str = "a2";
const TAG_LEN: usize = 16;
/// The contract's `AgentCursor.maxLength`.
pub const MAX_CURSOR_LEN: usize = 512;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    e: u64,
    c: u64,
    a: String,
    h: String,
    f: String,
}

/// Why a cursor was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorProblem {
    Malformed,
    Tampered,
    FilterChanged,
    AnchorDeleted,
    AnchorRenamed,
    Stale,
}

impl CursorProblem {
    /// What the refusal says.
    pub fn reason(self) -> &'static str {
        match self {
            CursorProblem::Malformed => "the cursor is not an `agent list` cursor",
            CursorProblem::Tampered => "the cursor was altered",
            CursorProblem::FilterChanged => "the cursor was issued for other filters",
            CursorProblem::AnchorDeleted => "the profile the cursor continues after was deleted",
            CursorProblem::AnchorRenamed => "the profile the cursor continues after was renamed",
            CursorProblem::Stale => "the profiles changed since the cursor was issued",
        }
    }
}

/// Encodes and checks `a2` cursors with one key.
pub struct CursorCodec {
    key: [u8; 32],
}

impl Default for CursorCodec {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::rng().fill(&mut key);
        CursorCodec { key }
    }
}

impl std::fmt::Debug for CursorCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorCodec { key: <secret> }")
    }
}

fn filter_hash(filter: &ListFilter) -> String {
    let normalized = serde_json::json!({
        "runtimeFamily": filter.runtime_family,
        "provider": filter.provider,
    });
    hex::encode(&Sha256::digest(normalized.to_string().as_bytes())[..16])
}

impl CursorCodec {
    /// The cursor after the profile `anchor_id` (`anchor_handle`) at `revision` under `filter`.
    pub fn encode(
        &self,
        revision: Revision,
        anchor_id: &str,
        anchor_handle: &str,
        filter: &ListFilter,
    ) -> String {
        let payload = serde_json::to_vec(&Payload {
            e: revision.epoch,
            c: revision.counter,
            a: anchor_id.to_string(),
            h: anchor_handle.to_string(),
            f: filter_hash(filter),
        })
        .expect("a payload serializes");
        let mut raw = payload.clone();
        raw.extend_from_slice(&self.tag(&payload));
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw))
    }

    /// The anchor agent id of `cursor`, if it is valid now: `revision` is the store's, and
    /// `anchor_handle` answers the anchor's current handle (`None` when it was deleted).
    pub fn decode(
        &self,
        cursor: &str,
        filter: &ListFilter,
        revision: Revision,
        anchor_handle: impl FnOnce(&str) -> Option<String>,
    ) -> Result<String, CursorProblem> {
        if cursor.len() > MAX_CURSOR_LEN {
            return Err(CursorProblem::Malformed);
        }
        let encoded = cursor
            .strip_prefix(PREFIX)
            .ok_or(CursorProblem::Malformed)?;
        let raw = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| CursorProblem::Malformed)?;
        if URL_SAFE_NO_PAD.encode(&raw) != encoded || raw.len() <= TAG_LEN {
            return Err(CursorProblem::Malformed);
        }
        let (payload, tag) = raw.split_at(raw.len() - TAG_LEN);
        if !bool::from(self.tag(payload).ct_eq(tag)) {
            return Err(CursorProblem::Tampered);
        }
        let payload: Payload =
            serde_json::from_slice(payload).map_err(|_| CursorProblem::Malformed)?;
        if payload.f != filter_hash(filter) {
            return Err(CursorProblem::FilterChanged);
        }
        match anchor_handle(&payload.a) {
            None => return Err(CursorProblem::AnchorDeleted),
            Some(handle) if handle != payload.h => return Err(CursorProblem::AnchorRenamed),
            Some(_) => {}
        }
        if (payload.e, payload.c) != (revision.epoch, revision.counter) {
            return Err(CursorProblem::Stale);
        }
        Ok(payload.a)
    }

    fn tag(&self, payload: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(b"a2\0");
        mac.update(payload);
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&full[..TAG_LEN]);
        tag
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const REVISION: Revision = Revision {
        epoch: 7,
        counter: 3,
    };

    fn filter() -> ListFilter {
        ListFilter {
            runtime_family: Some("codex".into()),
            provider: None,
        }
    }

    #[test]
    fn each_problem_is_told_apart() {
        let codec = CursorCodec::default();
        let cursor = codec.encode(REVISION, "agt_0123456789", "builder", &filter());
        let handle = |h: &'static str| move |_: &str| Some(h.to_string());
        assert_eq!(
            codec.decode(&cursor, &filter(), REVISION, handle("builder")),
            Ok("agt_0123456789".into())
        );
        let later = Revision {
            counter: 4,
            ..REVISION
        };
        assert_eq!(
            codec.decode(&cursor, &filter(), later, handle("builder")),
            Err(CursorProblem::Stale)
        );
        assert_eq!(
            codec.decode(&cursor, &filter(), REVISION, |_| None),
            Err(CursorProblem::AnchorDeleted)
        );
        assert_eq!(
            codec.decode(&cursor, &filter(), REVISION, handle("renamed")),
            Err(CursorProblem::AnchorRenamed)
        );
        assert_eq!(
            codec.decode(&cursor, &ListFilter::default(), REVISION, handle("builder")),
            Err(CursorProblem::FilterChanged)
        );
        assert_eq!(
            CursorCodec::default().decode(&cursor, &filter(), REVISION, handle("builder")),
            Err(CursorProblem::Tampered)
        );
        for malformed in ["", "a2", "b2AAAA", "a2!!!", &format!("{cursor}=")] {
            assert_eq!(
                codec.decode(malformed, &filter(), REVISION, handle("builder")),
                Err(CursorProblem::Malformed),
                "{malformed}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_single_character_change_is_refused(index in any::<prop::sample::Index>(), replacement in "[A-Za-z0-9_-]") {
            let codec = CursorCodec::default();
            let cursor = codec.encode(REVISION, "agt_0123456789", "builder", &filter());
            let at = 2 + index.index(cursor.len() - 2);
            let mut mutated = cursor.clone();
            mutated.replace_range(at..at + 1, &replacement);
            prop_assume!(mutated != cursor);
            prop_assert!(codec.decode(&mutated, &filter(), REVISION, |_| Some("builder".into())).is_err());
        }

        #[test]
        fn arbitrary_strings_never_panic(input in ".{0,600}") {
            let _ = CursorCodec::default().decode(&input, &filter(), REVISION, |_| Some("x".into()));
        }
    }
}
