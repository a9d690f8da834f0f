//! The daemon's `RuntimeAuthorizationStore`: one logical authorization per runtime process,
//! short-lived signed token generations of it, and the one place that decides whether a bearer
//! token may act on a route.
//!
//! An authorization binds the server, agent, session, run, workdir, process generation and the
//! immutable `RuntimeCatalog` snapshot (by digest). Each generation has its own expiry;
//! issuing a new one never extends an old one. Revocation marks the authorization revoked,
//! cancels its in-flight requests and forgets every generation at once; the record stays (and
//! keeps counting its acquired requests) until they drain.
//!
//! Every verification failure is one uniform answer for the caller; the class (malformed, bad
//! signature, expired, revoked or inactive, scope or path mismatch) goes only to rate-limited
//! diagnostics, which never see token material.

pub mod files;
pub mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
pub use crate::contract::RuntimeCatalog;
use crate::daemon::metrics::Metrics;
pub use token::Scope;
use token::{Claims, Malformed, TokenCodec};

/// Requests one authorization may have acquired at once.
pub const PER_AUTHORIZATION_REQUESTS: usize = 32;
/// Requests the whole store may have acquired at once.
pub const GLOBAL_REQUESTS: usize = 1024;

/// What one authorization is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub server_id: String,
    pub agent_id: String,
    pub session_id: String,
    pub run_id: String,
    pub workdir: String,
    /// Increments each time the same session's runtime process is replaced.
    pub process_generation: u64,
    pub catalog_digest: String,
}

/// One logical authorization of one runtime process.
#[derive(Debug)]
pub struct Authorization {
    pub id: String,
    pub binding: Binding,
    pub catalog: Arc<RuntimeCatalog>,
    /// Cancelled at revocation: every in-flight request of this authorization stops.
    pub cancel: CancellationToken,
    inflight: Arc<Semaphore>,
    state: Mutex<Generations>,
    /// When the running lease renews this authorization's credential next (ms; 0: not yet set).
    next_renewal_ms: std::sync::atomic::AtomicI64,
    /// Where the runtime would run a destructive call without asking its person, set once when
    /// the driver wires the launch, before the runtime starts.
    unasked: std::sync::OnceLock<crate::contract::preapproval::Unasked>,
}

#[derive(Debug, Default)]
struct Generations {
    revoked: bool,
    next: u32,
    /// Every issued, unexpired, not withdrawn generation.
    live: Vec<LiveGeneration>,
}

/// One generation a token may still carry.
#[derive(Debug, Clone, Copy)]
struct LiveGeneration {
    generation: u32,
    scope: Scope,
    /// Epoch milliseconds.
    expires_at_ms: i64,
}

impl Authorization {
    /// Records where the launch's runtime would run a destructive call unasked (once).
    pub fn set_unasked(&self, unasked: crate::contract::preapproval::Unasked) {
        let _ = self.unasked.set(unasked);
    }

    /// Where the runtime would run a destructive call without asking its person; nowhere when
    /// the launch never said (a generic program, a test's authorization).
    pub fn unasked(&self) -> Option<&crate::contract::preapproval::Unasked> {
        self.unasked.get()
    }

    pub fn is_revoked(&self) -> bool {
        self.state.lock().expect("not poisoned").revoked
    }

    /// Records when the credential is renewed next.
    pub fn set_next_renewal_ms(&self, at_ms: i64) {
        self.next_renewal_ms
            .store(at_ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many generations of every scope are live (issued, unexpired, not withdrawn).
    pub fn issued(&self) -> usize {
        self.state.lock().expect("not poisoned").live.len()
    }

    /// Requests of this authorization currently holding an admission permit.
    pub fn acquired(&self) -> usize {
        PER_AUTHORIZATION_REQUESTS - self.inflight.available_permits()
    }
}

/// Why a bearer did not admit a request. Never shown to the caller (who sees one `forbidden`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    Missing,
    Malformed,
    BadSignature,
    Expired,
    RevokedOrInactive,
    /// A token of another scope (Exec on MCP, MCP on Exec, token analysis anywhere).
    ScopeMismatch,
    /// A live token of the right scope, presented on another server's or agent's route.
    BindingMismatch,
}

impl AuthFailure {
    /// The diagnostic class.
    pub fn class(self) -> &'static str {
        match self {
            AuthFailure::Missing => "missing",
            AuthFailure::Malformed => "malformed",
            AuthFailure::BadSignature => "bad-signature",
            AuthFailure::Expired => "expired",
            AuthFailure::RevokedOrInactive => "revoked-inactive",
            AuthFailure::ScopeMismatch => "scope-mismatch",
            AuthFailure::BindingMismatch => "binding-mismatch",
        }
    }
}

/// A newly issued generation.
pub struct Issued {
    /// A secret: never logged, so `Debug` leaves it out.
    pub token: String,
    pub generation: u32,
    pub expires_at_ms: i64,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("token", &"<secret>")
            .field("generation", &self.generation)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

/// Both admission permits of one request; dropping it releases them.
#[derive(Debug)]
pub struct Admission {
    _authorization: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

/// The daemon's registry of live authorizations and the signer of their tokens.
#[derive(Debug)]
pub struct RuntimeAuthorizationStore {
    codec: TokenCodec,
    clock: Arc<Clock>,
    /// Where refused credentials and admissions are counted.
    metrics: Arc<Metrics>,
    /// The lifetime of each generation.
    pub ttl: Duration,
    records: Mutex<HashMap<String, Arc<Authorization>>>,
    global: Arc<Semaphore>,
    diagnostics: Diagnostics,
}

impl RuntimeAuthorizationStore {
    pub fn new(clock: Arc<Clock>, ttl: Duration, metrics: Arc<Metrics>) -> Self {
        RuntimeAuthorizationStore {
            codec: TokenCodec::default(),
            clock,
            metrics,
            ttl,
            records: Mutex::new(HashMap::new()),
            global: Arc::new(Semaphore::new(GLOBAL_REQUESTS)),
            diagnostics: Diagnostics::default(),
        }
    }

    /// Registers a new logical authorization (no generation yet).
    pub fn create(&self, binding: Binding, catalog: Arc<RuntimeCatalog>) -> Arc<Authorization> {
        let authorization = Arc::new(Authorization {
            id: files::random_name("az"),
            binding,
            catalog,
            cancel: CancellationToken::new(),
            inflight: Arc::new(Semaphore::new(PER_AUTHORIZATION_REQUESTS)),
            state: Mutex::new(Generations::default()),
            next_renewal_ms: std::sync::atomic::AtomicI64::new(0),
            unasked: std::sync::OnceLock::new(),
        });
        self.records
            .lock()
            .expect("not poisoned")
            .insert(authorization.id.clone(), authorization.clone());
        authorization
    }

    /// Issues a new generation of `authorization` for `scope`, expiring one TTL from now. Older
    /// generations keep their own expiry. `None` once the authorization is revoked.
    pub fn issue(&self, authorization: &Authorization, scope: Scope) -> Option<Issued> {
        let now = self.clock.now_ms();
        let expires_at_ms = now + self.ttl.as_millis() as i64;
        let mut state = authorization.state.lock().expect("not poisoned");
        if state.revoked {
            return None;
        }
        state.next += 1;
        let generation = state.next;
        state.live.retain(|live| live.expires_at_ms > now);
        state.live.push(LiveGeneration {
            generation,
            scope,
            expires_at_ms,
        });
        let token = self.codec.sign(&Claims {
            authorization: authorization.id.clone(),
            generation,
            expires_at_ms,
            scope,
        });
        Some(Issued {
            token,
            generation,
            expires_at_ms,
        })
    }

    /// Forgets one generation that was issued but could not be published.
    pub fn withdraw(&self, authorization: &Authorization, generation: u32) {
        authorization
            .state
            .lock()
            .expect("not poisoned")
            .live
            .retain(|live| live.generation != generation);
    }

    /// The live authorization behind `bearer`, if it is valid for `scope` on the route of
    /// `server_id`/`agent_id`. Failures are logged (rate-limited, by class only).
    pub fn verify(
        &self,
        bearer: Option<&str>,
        server_id: &str,
        agent_id: &str,
        scope: Scope,
    ) -> Result<Arc<Authorization>, AuthFailure> {
        let result = self.check(bearer, server_id, agent_id, scope);
        if let Err(failure) = &result {
            self.diagnostics
                .record(failure.class(), self.clock.now_ms());
            self.metrics.auth_refused(failure.class());
        }
        result
    }

    fn check(
        &self,
        bearer: Option<&str>,
        server_id: &str,
        agent_id: &str,
        scope: Scope,
    ) -> Result<Arc<Authorization>, AuthFailure> {
        let token = bearer.ok_or(AuthFailure::Missing)?;
        let claims = self.codec.verify(token).map_err(|e| match e {
            Malformed::Shape => AuthFailure::Malformed,
            Malformed::BadMac => AuthFailure::BadSignature,
        })?;
        if claims.scope != scope {
            return Err(AuthFailure::ScopeMismatch);
        }
        // Expired generations are pruned from the registry, so expiry is judged from the
        // verified claims first.
        if self.clock.now_ms() >= claims.expires_at_ms {
            return Err(AuthFailure::Expired);
        }
        let authorization = self
            .records
            .lock()
            .expect("not poisoned")
            .get(&claims.authorization)
            .cloned()
            .ok_or(AuthFailure::RevokedOrInactive)?;
        {
            let state = authorization.state.lock().expect("not poisoned");
            if state.revoked
                || !state
                    .live
                    .iter()
                    .any(|live| live.generation == claims.generation && live.scope == scope)
            {
                return Err(AuthFailure::RevokedOrInactive);
            }
        }
        if authorization.binding.server_id != server_id
            || authorization.binding.agent_id != agent_id
        {
            return Err(AuthFailure::BindingMismatch);
        }
        Ok(authorization)
    }

    /// Takes one of the authorization's 32 and one of the store's 1024 request slots, without
    /// waiting. `None` when either is exhausted.
    pub fn admit(&self, authorization: &Authorization) -> Option<Admission> {
        let own = authorization.inflight.clone().try_acquire_owned().ok();
        let global = self.global.clone().try_acquire_owned().ok();
        let (Some(own), Some(global)) = (own, global) else {
            self.metrics.admission_refused();
            return None;
        };
        Some(Admission {
            _authorization: own,
            _global: global,
        })
    }

    /// The daemon's metrics, which this store counts refusals in.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Revokes every generation at once and cancels in-flight requests. The record stays until
    /// [`Self::drain`] sees its requests finish.
    pub fn revoke(&self, authorization: &Authorization) {
        {
            let mut state = authorization.state.lock().expect("not poisoned");
            state.revoked = true;
            state.live.clear();
        }
        authorization.cancel.cancel();
    }

    /// Waits (up to `deadline`) for the revoked authorization's requests to finish, then forgets
    /// it. Returns whether it drained.
    pub async fn drain(&self, authorization: &Authorization, deadline: Duration) -> bool {
        let drained = tokio::time::timeout(
            deadline,
            authorization
                .inflight
                .acquire_many(PER_AUTHORIZATION_REQUESTS as u32),
        )
        .await
        .is_ok();
        self.records
            .lock()
            .expect("not poisoned")
            .remove(&authorization.id);
        drained
    }

    /// Requests holding an admission slot across every authorization.
    pub fn acquired(&self) -> usize {
        GLOBAL_REQUESTS - self.global.available_permits()
    }

    /// The earliest next credential renewal among live (unrevoked) authorizations, if any.
    pub fn next_renewal_ms(&self) -> Option<i64> {
        self.records
            .lock()
            .expect("not poisoned")
            .values()
            .filter(|a| !a.is_revoked())
            .map(|a| a.next_renewal_ms.load(std::sync::atomic::Ordering::Relaxed))
            .filter(|at| *at > 0)
            .min()
    }

    /// The authorization of live run `run_id`: when its newest credential expires (epoch ms)
    /// and how many of its requests are in flight.
    pub fn of_run(&self, run_id: &str) -> Option<(Option<i64>, usize)> {
        let records = self.records.lock().expect("not poisoned");
        let authorization = records
            .values()
            .find(|a| a.binding.run_id == run_id && !a.is_revoked())?;
        let expires = authorization
            .state
            .lock()
            .expect("not poisoned")
            .live
            .iter()
            .map(|live| live.expires_at_ms)
            .max();
        Some((expires, authorization.acquired()))
    }

    /// Authorizations still registered (active or revoked-but-undrained).
    pub fn registered(&self) -> usize {
        self.records.lock().expect("not poisoned").len()
    }

    /// Revokes every authorization (daemon shutdown).
    pub fn revoke_all(&self) {
        let all: Vec<Arc<Authorization>> = self
            .records
            .lock()
            .expect("not poisoned")
            .values()
            .cloned()
            .collect();
        for authorization in all {
            self.revoke(&authorization);
        }
    }
}

/// At most [`Diagnostics::PER_MINUTE`] log lines per failure class per minute; the rest are
/// counted and reported with the next line that is allowed.
#[derive(Debug, Default)]
struct Diagnostics {
    windows: Mutex<HashMap<&'static str, Window>>,
}

/// One failure class's current minute.
#[derive(Debug, Clone, Copy)]
struct Window {
    start_ms: i64,
    logged: u32,
    /// Lines not logged since the last one that was.
    suppressed: u64,
}

impl Diagnostics {
    const PER_MINUTE: u32 = 10;

    fn record(&self, class: &'static str, now_ms: i64) {
        let mut windows = self.windows.lock().expect("not poisoned");
        let window = windows.entry(class).or_insert(Window {
            start_ms: now_ms,
            logged: 0,
            suppressed: 0,
        });
        if now_ms - window.start_ms >= 60_000 {
            window.start_ms = now_ms;
            window.logged = 0;
        }
        if window.logged < Self::PER_MINUTE {
            window.logged += 1;
            tracing::warn!(
                class,
                suppressed_before = window.suppressed,
                "runtime credential refused"
            );
            window.suppressed = 0;
        } else {
            window.suppressed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(ttl_ms: u64) -> (RuntimeAuthorizationStore, Arc<Clock>) {
        let clock = Arc::new(Clock::default());
        clock.pin(Some(1_000_000));
        (
            RuntimeAuthorizationStore::new(
                clock.clone(),
                Duration::from_millis(ttl_ms),
                Arc::default(),
            ),
            clock,
        )
    }

    fn binding() -> Binding {
        Binding {
            server_id: "wsp_1".into(),
            agent_id: "agt_1".into(),
            session_id: "s".into(),
            run_id: "r".into(),
            workdir: "/w".into(),
            process_generation: 1,
            catalog_digest: "d".into(),
        }
    }

    #[test]
    fn generations_expire_on_their_own_schedule_and_revocation_ends_all() {
        let (store, clock) = store(1000);
        let authorization = store.create(binding(), Arc::new(RuntimeCatalog::builtin()));
        let first = store.issue(&authorization, Scope::Exec).unwrap();
        assert!(
            !format!("{first:?}").contains(&first.token),
            "a token never reaches a Debug print"
        );
        clock.pin(Some(1_000_600));
        let second = store.issue(&authorization, Scope::Exec).unwrap();
        let check = |token: &str| {
            store
                .verify(Some(token), "wsp_1", "agt_1", Scope::Exec)
                .map(|_| ())
        };
        assert_eq!(
            (check(&first.token), check(&second.token)),
            (Ok(()), Ok(()))
        );
        // The first keeps its own expiry: the second did not extend it.
        clock.pin(Some(1_001_000));
        assert_eq!(
            (check(&first.token), check(&second.token)),
            (Err(AuthFailure::Expired), Ok(()))
        );
        assert_eq!(
            store
                .verify(Some(&second.token), "wsp_1", "agt_2", Scope::Exec)
                .map(|_| ()),
            Err(AuthFailure::BindingMismatch)
        );
        assert_eq!(
            store
                .verify(Some(&second.token), "wsp_1", "agt_1", Scope::Mcp)
                .map(|_| ()),
            Err(AuthFailure::ScopeMismatch)
        );
        store.revoke(&authorization);
        assert_eq!(check(&second.token), Err(AuthFailure::RevokedOrInactive));
        assert!(
            store.issue(&authorization, Scope::Exec).is_none(),
            "a revoked authorization issues nothing"
        );
        assert!(authorization.cancel.is_cancelled());
    }

    #[test]
    fn a_token_analysis_token_opens_neither_bridge() {
        let (store, _) = store(1000);
        let authorization = store.create(binding(), Arc::new(RuntimeCatalog::builtin()));
        let analysis = store.issue(&authorization, Scope::TokenAnalysis).unwrap();
        for scope in [Scope::Mcp, Scope::Exec] {
            assert_eq!(
                store
                    .verify(Some(&analysis.token), "wsp_1", "agt_1", scope)
                    .map(|_| ()),
                Err(AuthFailure::ScopeMismatch)
            );
        }
    }

    #[test]
    fn admission_is_bounded_per_authorization() {
        let (store, _) = store(1000);
        let authorization = store.create(binding(), Arc::new(RuntimeCatalog::builtin()));
        let held: Vec<Admission> = (0..PER_AUTHORIZATION_REQUESTS)
            .map(|_| store.admit(&authorization).unwrap())
            .collect();
        assert!(store.admit(&authorization).is_none());
        drop(held);
        assert!(store.admit(&authorization).is_some());
    }
}
