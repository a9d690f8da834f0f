//! Exact conversation targets: `channel:chn_…`, `dm:dm_…`, `thread:thr_…`.
//!
//! A runtime is shown only the exact target of a message it should answer, and `message_send`
//! must carry it. The daemon canonicalizes the format (surrounding spaces, the kind's case, a bare
//! id whose prefix names its kind) and refuses a target that cannot name a conversation, before
//! any request leaves the machine; the server accepts only the canonical form and does the real
//! authorization. Nothing here picks a default target.

use std::fmt;

use super::error::{ActionError, ErrorCode, ErrorDetail};

/// What kind of conversation a target names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    Channel,
    Dm,
    Thread,
}

impl TargetKind {
    const ALL: [TargetKind; 3] = [TargetKind::Channel, TargetKind::Dm, TargetKind::Thread];

    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Channel => "channel",
            TargetKind::Dm => "dm",
            TargetKind::Thread => "thread",
        }
    }

    /// The prefix of this kind's ids, underscore included.
    fn id_prefix(self) -> &'static str {
        match self {
            TargetKind::Channel => "chn_",
            TargetKind::Dm => "dm_",
            TargetKind::Thread => "thr_",
        }
    }
}

/// A well-formed target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: TargetKind,
    pub id: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.id)
    }
}

impl Target {
    /// The canonical target for what a runtime sent, or why it names no conversation.
    pub fn canonicalize(raw: &str) -> Result<Target, ActionError> {
        let text = raw.trim();
        let (kind, id) = match text.split_once(':') {
            Some((kind, id)) => {
                let kind = TargetKind::ALL
                    .into_iter()
                    .find(|k| k.as_str().eq_ignore_ascii_case(kind.trim()))
                    .ok_or_else(|| {
                        refuse(format!(
                            "the kind `{}` is not `channel`, `dm` or `thread`",
                            kind.trim().chars().take(16).collect::<String>()
                        ))
                    })?;
                (kind, id.trim())
            }
            None => {
                let kind = TargetKind::ALL
                    .into_iter()
                    .find(|k| text.starts_with(k.id_prefix()))
                    .ok_or_else(|| {
                        refuse(
                            "use the exact target shown on the message, e.g. `thread:thr_…`"
                                .to_string(),
                        )
                    })?;
                (kind, text)
            }
        };
        if let Some(actual) = TargetKind::ALL
            .into_iter()
            .find(|k| *k != kind && id.starts_with(k.id_prefix()))
        {
            return Err(refuse(format!(
                "a `{}` id cannot be used with the `{}` kind: use `{}:…`",
                actual.as_str(),
                kind.as_str(),
                actual.as_str()
            )));
        }
        let body = id.strip_prefix(kind.id_prefix()).unwrap_or("");
        if !(8..=64).contains(&body.len()) || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(refuse(format!(
                "a {} id is `{}` followed by 8 to 64 letters or digits",
                kind.as_str(),
                kind.id_prefix()
            )));
        }
        Ok(Target {
            kind,
            id: id.to_string(),
        })
    }

    /// The target, only if `text` is already canonical (what the server accepts).
    pub fn parse_canonical(text: &str) -> Result<Target, ActionError> {
        let target = Target::canonicalize(text)?;
        if target.to_string() != text {
            return Err(refuse(format!("use the canonical form `{target}`")));
        }
        Ok(target)
    }
}

fn refuse(reason: String) -> ActionError {
    ActionError::new(
        ErrorCode::ValidationFailed,
        format!("`target` names no conversation: {reason}"),
    )
    .with_next("copy the exact target from the message you are answering")
    .with_details(vec![ErrorDetail {
        path: "/target".into(),
        message: reason,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms() {
        for (raw, canonical) in [
            ("thread:thr_0123456789", "thread:thr_0123456789"),
            ("  Thread : thr_0123456789 ", "thread:thr_0123456789"),
            ("thr_0123456789", "thread:thr_0123456789"),
            ("chn_ABCDEFGH", "channel:chn_ABCDEFGH"),
            ("DM:dm_abcdefgh12", "dm:dm_abcdefgh12"),
        ] {
            assert_eq!(Target::canonicalize(raw).unwrap().to_string(), canonical);
        }
        assert!(Target::parse_canonical("thread:thr_0123456789").is_ok());
        assert!(Target::parse_canonical("thr_0123456789").is_err());
    }

    #[test]
    fn refusals_name_the_reason() {
        for (raw, reason) in [
            (
                "thread:chn_0123456789",
                "a `channel` id cannot be used with the `thread` kind",
            ),
            ("room:chn_0123456789", "the kind `room` is not"),
            ("general", "use the exact target"),
            ("thread:thr_short", "8 to 64 letters or digits"),
            ("thread:thr_01234567/../x", "8 to 64 letters or digits"),
            ("", "use the exact target"),
        ] {
            let error = Target::canonicalize(raw).unwrap_err();
            assert!(error.message.contains(reason), "{raw}: {}", error.message);
            assert_eq!(error.code, ErrorCode::ValidationFailed);
        }
        let long = format!("thread:thr_{}", "a".repeat(65));
        assert!(Target::canonicalize(&long).is_err());
    }
}
