//! Server-side credentials: device credentials (a daemon acting as a device of one human) and the
//! operator token of the admin API.
//!
//! A device credential is `<deviceId>.<secret>`; only SHA-256 of the secret is stored and the
//! comparison is constant-time. Every failure is the same `forbidden` error, whatever its cause.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::store::{DeviceIdentity, Store, StoreError};

/// Device credentials start with the device id, whose prefix is this.
pub const DEVICE_CREDENTIAL_PREFIX: &str = "dev_";
/// Operator tokens start with this.
pub const OPERATOR_TOKEN_PREFIX: &str = "ato_";

/// 32 random bytes, base64url.
pub fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The device behind `credential` and whether it may act as `agent_id` (its human owns that agent
/// in the device's workspace), or `None` for any kind of failure.
pub async fn authenticate_device(
    store: &Store,
    credential: &str,
    agent_id: &str,
) -> Result<Option<(DeviceIdentity, bool)>, StoreError> {
    let Some((device_id, secret)) = credential.split_once('.') else {
        return Ok(None);
    };
    if !device_id.starts_with(DEVICE_CREDENTIAL_PREFIX) || device_id.len() > 64 || secret.is_empty()
    {
        return Ok(None);
    }
    let Some((identity, stored_hash, owns_agent)) = store.device(device_id, agent_id).await? else {
        return Ok(None);
    };
    let matches: bool = hash_secret(secret)
        .as_slice()
        .ct_eq(stored_hash.as_slice())
        .into();
    Ok(matches.then_some((identity, owns_agent)))
}

/// The operator token of this server start, held as a hash.
pub struct OperatorToken {
    hash: [u8; 32],
}

impl OperatorToken {
    /// Issues a fresh token and writes it to `path` (mode 0600, replaced atomically).
    pub fn issue(path: &Path) -> std::io::Result<OperatorToken> {
        let token = format!("{OPERATOR_TOKEN_PREFIX}{}", random_secret());
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        crate::private_file::replace(path, &token)?;
        Ok(OperatorToken {
            hash: hash_secret(&token),
        })
    }

    /// The token several replicas share through `path`: the first to start creates it (0600),
    /// every other reads it, none replaces it. The file must hold one operator token and be
    /// owner-only; an operator may also write it beforehand.
    pub fn share(path: &Path) -> std::io::Result<OperatorToken> {
        let fresh = format!("{OPERATOR_TOKEN_PREFIX}{}", random_secret());
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let (token, _created) = crate::private_file::create_or_read(path, &fresh)?;
        let token = token.trim_end_matches('\n');
        let well_formed = token.len() <= 256
            && token
                .strip_prefix(OPERATOR_TOKEN_PREFIX)
                .is_some_and(|rest| {
                    rest.len() >= 32
                        && rest
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                });
        if !well_formed {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "it does not hold one operator token (`{OPERATOR_TOKEN_PREFIX}` and at least 32 base64url characters)"
                ),
            ));
        }
        Ok(OperatorToken {
            hash: hash_secret(token),
        })
    }

    pub fn matches(&self, presented: &str) -> bool {
        hash_secret(presented).ct_eq(&self.hash).into()
    }
}
