//! The `RuntimeCatalog` of one runtime authorization (spec): the built-in descriptor catalog plus
//! the verified extension snapshot the runtime was launched with, immutable for its lifetime.
//!
//! Its JSON is what `GET …/catalog` returns: the generated `catalog.json` (every domain and
//! action with risk, result policy, continuations and example) with the snapshot's extensions
//! (descriptor-only entries, each with its pinned digest and catalog version) and the SHA-256 of
//! the whole, which every authorization binds. `cli_file` is what the launch's `agentteam exec`
//! reads for extension help, schemas and validation (written owner-only beside the token file).

use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::catalog::CATALOG_JSON;
use super::extension::{Pinned, cli_catalog};

/// The built-in descriptors plus the verified extension snapshot a runtime was launched with.
#[derive(Debug)]
pub struct RuntimeCatalog {
    /// SHA-256 of `json` without its `digest` field, hex; part of every authorization's binding.
    pub digest: String,
    /// What `GET …/catalog` returns.
    pub json: Value,
    /// The pinned extensions, by name.
    pub extensions: Vec<Arc<Pinned>>,
    /// The launch's catalog file for `agentteam exec` (extensions with their schemas).
    pub cli_file: String,
}

impl RuntimeCatalog {
    /// The built-in catalog with no extensions.
    pub fn builtin() -> RuntimeCatalog {
        RuntimeCatalog::with_extensions(Vec::new())
    }

    /// The built-in catalog flattened with `extensions` (sorted by name).
    pub fn with_extensions(mut extensions: Vec<Arc<Pinned>>) -> RuntimeCatalog {
        extensions.sort_by(|a, b| a.name().cmp(b.name()));
        let mut body: Value = serde_json::from_str(CATALOG_JSON).expect("generated JSON parses");
        body["extensions"] = Value::Array(extensions.iter().map(|p| p.catalog_entry()).collect());
        let digest = hex::encode(Sha256::digest(
            serde_json::to_vec(&body).expect("a Value serializes"),
        ));
        body["digest"] = Value::String(digest.clone());
        let cli_file =
            serde_json::to_string(&cli_catalog(&extensions)).expect("a Value serializes");
        RuntimeCatalog {
            digest,
            json: body,
            extensions,
            cli_file,
        }
    }

    /// The pinned extension called `name`.
    pub fn extension(&self, name: &str) -> Option<&Arc<Pinned>> {
        self.extensions.iter().find(|p| p.name() == name)
    }
}
