//! The `RuntimeCatalog` of one runtime authorization (spec): the built-in descriptor catalog plus
//! the verified extension snapshot the runtime was launched with, immutable for its lifetime.
//!
//! Its JSON is what `GET …/catalog` returns: the generated `catalog.json` (every domain and
//! action with risk, result policy, continuations and example) with the snapshot's extensions
//! and the SHA-256 of the whole, which every authorization binds.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::catalog::CATALOG_JSON;

/// The built-in descriptors plus the verified extension snapshot a runtime was launched with.
#[derive(Debug)]
pub struct RuntimeCatalog {
    /// SHA-256 of `json` without its `digest` field, hex; part of every authorization's binding.
    pub digest: String,
    /// What `GET …/catalog` returns.
    pub json: Value,
}

impl RuntimeCatalog {
    /// The built-in catalog with no extensions.
    pub fn builtin() -> RuntimeCatalog {
        let mut body: Value = serde_json::from_str(CATALOG_JSON).expect("generated JSON parses");
        body["extensions"] = Value::Array(Vec::new());
        let digest = hex::encode(Sha256::digest(
            serde_json::to_vec(&body).expect("a Value serializes"),
        ));
        body["digest"] = Value::String(digest.clone());
        RuntimeCatalog { digest, json: body }
    }
}
