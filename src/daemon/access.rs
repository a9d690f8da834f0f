//! Who may use a runtime route: the credential is verified and bound to the route's server and
//! agent, then the request takes its admission slots (32 per authorization, 1024 in all), before
//! anything reads its body. One place for both, one message for each refusal.

use opentelemetry::KeyValue;

use crate::telemetry::request;
use std::sync::Arc;

use super::auth::{Admission, Authorization, RuntimeAuthorizationStore, Scope};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;

/// Why a runtime request was turned away before its body.
#[derive(Debug)]
pub enum Denied {
    /// Any refused credential: missing, malformed, forged, expired, revoked, another scope or
    /// another route. The caller sees one uniform answer.
    Credential,
    /// The authorization or the daemon has too many requests in flight.
    Admission,
}

impl Denied {
    /// The refusal as an error envelope.
    pub fn error(&self) -> ActionError {
        match self {
            Denied::Credential => ActionError::forbidden(),
            Denied::Admission => admission_limited(),
        }
    }
}

/// The refusal of a request over an admission limit.
pub fn admission_limited() -> ActionError {
    ActionError::new(
        ErrorCode::AdmissionLimited,
        "too many requests in flight for this runtime; retry shortly",
    )
}

/// Verifies `bearer` for `scope` on the route of `server_id`/`agent_id`. A traced request learns
/// who called (the binding's ids) or that it was refused.
pub fn verify(
    store: &RuntimeAuthorizationStore,
    bearer: Option<&str>,
    server_id: &str,
    agent_id: &str,
    scope: Scope,
) -> Result<Arc<Authorization>, Denied> {
    let verified = store
        .verify(bearer, server_id, agent_id, scope)
        .map_err(|_| Denied::Credential);
    if request::is_traced() {
        match &verified {
            Ok(authorization) => {
                let binding = &authorization.binding;
                request::authenticated();
                request::set([
                    KeyValue::new("agentteam.server_id", binding.server_id.clone()),
                    KeyValue::new("agentteam.agent_id", binding.agent_id.clone()),
                    KeyValue::new("agentteam.run_id", binding.run_id.clone()),
                ]);
            }
            Err(denied) => request::outcome(&denied.error().code.to_string()),
        }
    }
    verified
}

/// Takes the request's admission slots, without waiting.
pub fn admit(
    store: &RuntimeAuthorizationStore,
    authorization: &Authorization,
) -> Result<Admission, Denied> {
    let admitted = store.admit(authorization).ok_or(Denied::Admission);
    if admitted.is_err() && request::is_traced() {
        request::outcome(&Denied::Admission.error().code.to_string());
    }
    admitted
}

/// [`verify`], then [`admit`].
pub fn verify_and_admit(
    store: &RuntimeAuthorizationStore,
    bearer: Option<&str>,
    server_id: &str,
    agent_id: &str,
    scope: Scope,
) -> Result<(Arc<Authorization>, Admission), Denied> {
    let authorization = verify(store, bearer, server_id, agent_id, scope)?;
    let admission = admit(store, &authorization)?;
    Ok((authorization, admission))
}

/// The admission of one request, which the call may give back while it waits (a replay's
/// backoff) and must take again, without waiting, before it goes on.
#[derive(Debug)]
pub struct Slot {
    held: std::sync::Mutex<Option<Admission>>,
}

impl Slot {
    pub fn new(admission: Admission) -> Slot {
        Slot {
            held: std::sync::Mutex::new(Some(admission)),
        }
    }

    /// Gives the admission back; the request holds no slot until [`Slot::retake`].
    pub fn release(&self) {
        drop(self.held.lock().expect("no panic holds it").take());
    }

    /// Takes the request's slots again, unless the limits are reached: `false` then, and the
    /// request holds none.
    pub fn retake(&self, store: &RuntimeAuthorizationStore, authorization: &Authorization) -> bool {
        let mut held = self.held.lock().expect("no panic holds it");
        if held.is_none() {
            *held = store.admit(authorization);
        }
        held.is_some()
    }

    /// Whether the request holds its slots now.
    pub fn is_held(&self) -> bool {
        self.held.lock().expect("no panic holds it").is_some()
    }
}
