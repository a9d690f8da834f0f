//! Signed bearer tokens: `v1.<base64url(claims)>.<base64url(HMAC-SHA256(key, "v1." + claims))>`.
//!
//! The key is 32 random bytes made at daemon start and held only in memory, so a crashed
//! daemon's tokens die with it. The MAC is checked (in constant time) before the claims are
//! parsed. A token proves only that this daemon issued it; whether it is still live is the
//! authorization store's registry's answer.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Tokens longer than this are refused before any work.
pub const MAX_TOKEN_LEN: usize = 512;

/// What a token may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// The Exec route family.
    Exec,
    /// The MCP route family.
    Mcp,
    /// The token-analysis diagnostic; never valid on the Exec or MCP routes.
    TokenAnalysis,
}

/// The signed claims of one token generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The logical authorization.
    #[serde(rename = "a")]
    pub authorization: String,
    /// The generation within it.
    #[serde(rename = "g")]
    pub generation: u32,
    /// Expiry, epoch milliseconds.
    #[serde(rename = "e")]
    pub expires_at_ms: i64,
    #[serde(rename = "s")]
    pub scope: Scope,
}

/// Why a token did not verify (kept for rate-limited diagnostics only, never sent to a caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    Shape,
    BadMac,
}

/// Signs and verifies tokens with this daemon start's key.
pub struct TokenCodec {
    /// HMAC-SHA256 with the key absorbed (its inner and outer pads hashed once, not per token).
    keyed: Hmac<Sha256>,
}

impl Default for TokenCodec {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::rng().fill(&mut key);
        let keyed = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
        TokenCodec { keyed }
    }
}

impl std::fmt::Debug for TokenCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCodec { key: <secret> }")
    }
}

impl TokenCodec {
    pub fn sign(&self, claims: &Claims) -> String {
        let head = format!(
            "v1.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims serialize"))
        );
        let mut mac = self.mac();
        mac.update(head.as_bytes());
        format!(
            "{head}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        )
    }

    pub fn verify(&self, token: &str) -> Result<Claims, Malformed> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(Malformed::Shape);
        }
        let (head, signature) = token.rsplit_once('.').ok_or(Malformed::Shape)?;
        let body = head.strip_prefix("v1.").ok_or(Malformed::Shape)?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| Malformed::Shape)?;
        let mut mac = self.mac();
        mac.update(head.as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| Malformed::BadMac)?;
        let claims = URL_SAFE_NO_PAD.decode(body).map_err(|_| Malformed::Shape)?;
        serde_json::from_slice(&claims).map_err(|_| Malformed::Shape)
    }

    fn mac(&self) -> Hmac<Sha256> {
        self.keyed.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            authorization: "az1".into(),
            generation: 2,
            expires_at_ms: 99,
            scope: Scope::Exec,
        }
    }

    #[test]
    fn round_trips_and_refuses_tampering_and_foreign_keys() {
        let codec = TokenCodec::default();
        let token = codec.sign(&claims());
        assert!(token.len() < MAX_TOKEN_LEN);
        assert_eq!(codec.verify(&token), Ok(claims()));
        let mut forged = claims();
        forged.scope = Scope::Mcp;
        let (_, signature) = token.rsplit_once('.').unwrap();
        let swapped = format!(
            "v1.{}.{signature}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap())
        );
        assert_eq!(codec.verify(&swapped), Err(Malformed::BadMac));
        assert_eq!(TokenCodec::default().verify(&token), Err(Malformed::BadMac));
        assert_eq!(codec.verify("v2.x.y"), Err(Malformed::Shape));
        assert_eq!(codec.verify(&"a".repeat(600)), Err(Malformed::Shape));
    }

    #[test]
    fn a_validly_signed_token_with_an_unknown_scope_is_refused() {
        let codec = TokenCodec::default();
        let head = format!(
            "v1.{}",
            URL_SAFE_NO_PAD.encode(br#"{"a":"az1","g":1,"e":99,"s":"admin"}"#)
        );
        let mut mac = codec.mac();
        mac.update(head.as_bytes());
        let token = format!(
            "{head}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        );
        assert_eq!(codec.verify(&token), Err(Malformed::Shape));
    }
}
