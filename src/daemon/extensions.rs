//! App-hosted extensions on the daemon's side: verification and pinning, and forwarding.
//!
//! At start and on reload (`POST /api/admin/extensions/reload`, `agentteam extensions --reload`)
//! the daemon fetches the workspace's installed extension definitions with their recorded digests
//! from the server, recomputes each digest over the definition's canonical JSON, and pins only
//! those that match and pass the definition rules (`contract::extension::check`: shape, names,
//! policy, lint, schemas that compile). Every other one is left out and reported, in the log and
//! in `GET /api/admin/status`. The pinned set becomes the next launches' `RuntimeCatalog`; a
//! running runtime keeps the catalog it was launched with.
//!
//! An extension call goes through the call core like a built-in's (`daemon::call`): validated
//! against the runtime's pinned descriptor, forwarded to the server's
//! `/runtime/…/ext/{extension}/{action}` with the pinned digest and catalog version, which the
//! daemon injects from the authorization (never from the request), and its answer checked against
//! the pinned output schema; the Exec route budgets it under the extension action's own policy.

use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::client::ServerClient;
use crate::contract::RuntimeCatalog;
use crate::contract::extension::{Pinned, Recorded, Rejected, Reserved};

/// One fetch's outcome: the pinned definitions (as a runtime catalog) and the rejected ones.
#[derive(Debug)]
pub struct Snapshot {
    pub catalog: Arc<RuntimeCatalog>,
    pub rejected: Vec<Rejected>,
    /// Why the last fetch failed, if it did (the previous pins stay).
    pub fetch_error: Option<String>,
}

/// The daemon's current extension snapshot.
pub struct Extensions {
    server: Arc<ServerClient>,
    server_id: String,
    current: RwLock<Arc<Snapshot>>,
    /// One reload at a time, so a burst of stale answers fetches once.
    reloading: tokio::sync::Mutex<()>,
}

impl Extensions {
    /// No extensions until the first [`Extensions::reload`].
    pub fn new(server: Arc<ServerClient>, server_id: String) -> Extensions {
        Extensions {
            server,
            server_id,
            current: RwLock::new(Arc::new(Snapshot {
                catalog: Arc::new(RuntimeCatalog::builtin()),
                rejected: Vec::new(),
                fetch_error: None,
            })),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    pub fn current(&self) -> Arc<Snapshot> {
        self.current.read().expect("not poisoned").clone()
    }

    /// Fetches, verifies and pins the installed definitions; on a failed fetch the previous pins
    /// stay and the failure is reported.
    pub async fn reload(&self) -> Arc<Snapshot> {
        let _one = self.reloading.lock().await;
        self.fetch_and_pin().await
    }

    /// [`Extensions::reload`], unless another reload replaced `seen` meanwhile (then its result
    /// stands): what a stale answer from the server calls for, however many arrive at once.
    pub async fn reload_unless_newer_than(&self, seen: &Arc<Snapshot>) -> Arc<Snapshot> {
        let _one = self.reloading.lock().await;
        let current = self.current();
        if !Arc::ptr_eq(&current, seen) {
            return current;
        }
        self.fetch_and_pin().await
    }

    async fn fetch_and_pin(&self) -> Arc<Snapshot> {
        let fetched = self.server.extensions(&self.server_id).await;
        let snapshot = match fetched {
            Ok(data) => {
                let (pinned, rejected) = verify_all(&data);
                for rejected in &rejected {
                    tracing::warn!(extension = %rejected.name, version = rejected.version, reason = %rejected.reason, "an extension definition was not pinned");
                }
                tracing::info!(
                    pinned = pinned.len(),
                    rejected = rejected.len(),
                    "extension definitions verified"
                );
                Snapshot {
                    catalog: Arc::new(RuntimeCatalog::with_extensions(pinned)),
                    rejected,
                    fetch_error: None,
                }
            }
            Err(error) => {
                tracing::warn!(error = %error.message, "cannot fetch the extension definitions; the previous ones stay pinned");
                let previous = self.current();
                Snapshot {
                    catalog: previous.catalog.clone(),
                    rejected: previous.rejected.clone(),
                    fetch_error: Some(error.message),
                }
            }
        };
        let snapshot = Arc::new(snapshot);
        *self.current.write().expect("not poisoned") = snapshot.clone();
        snapshot
    }
}

/// Pins every entry of a `GET …/extensions` answer whose digest and definition verify.
fn verify_all(data: &Value) -> (Vec<Arc<Pinned>>, Vec<Rejected>) {
    let reserved = Reserved::builtin();
    let mut pinned: Vec<Arc<Pinned>> = Vec::new();
    let mut rejected = Vec::new();
    let entries = data
        .get("extensions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for entry in entries.iter().take(64) {
        let Some(recorded) = Recorded::from_json(entry) else {
            rejected.push(Rejected {
                name: entry
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .chars()
                    .take(64)
                    .collect(),
                version: 0,
                reason: "the server's entry is not a recorded definition".into(),
            });
            continue;
        };
        if pinned.iter().any(|p| p.name() == recorded.name) {
            continue;
        }
        match Pinned::verify(recorded, &reserved) {
            Ok(verified) => pinned.push(Arc::new(verified)),
            Err(reason) => rejected.push(reason),
        }
    }
    (pinned, rejected)
}

/// The status report of a snapshot.
pub fn report(snapshot: &Snapshot) -> Value {
    json!({
        "pinned": snapshot.catalog.extensions.iter().map(|p| json!({
            "name": p.name(),
            "version": p.recorded.version,
            "digest": p.recorded.digest,
            "catalogVersion": p.recorded.catalog_version,
        })).collect::<Vec<_>>(),
        "rejected": snapshot.rejected.iter().map(|r| json!({
            "name": r.name,
            "version": r.version,
            "reason": r.reason,
        })).collect::<Vec<_>>(),
        "fetchError": snapshot.fetch_error,
    })
}
