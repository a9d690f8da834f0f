//! A lease: one running launch from its start to its end of life. It renews the credential on
//! the wall-clock tick (publishing each generation only into a directory still private to this
//! user), and at the end revokes, removes the directory (retried with backoff while the slot is
//! held), stops the process group, drains, releases the slot and the session, and then sends the
//! exit frame.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::process::Child;
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::process::{stop_group, stop_rest_of_group};
use super::{DRAIN_DEADLINE, Dispatcher, OUTPUT_GRACE, Output};
use crate::daemon::auth::files::{self, MCP_TOKEN_FILE, TOKEN_FILE};
use crate::daemon::auth::{Authorization, Issued, RuntimeAuthorizationStore, Scope};
use crate::platform;
use crate::platform::process::Pid;

/// What, besides the process's own exit, ends a lease.
pub(super) struct Ends {
    /// The caller of `agentteam run` went away.
    pub(super) client_gone: CancellationToken,
    /// A launch replaces this session's process, or its person stops it.
    pub(super) replaced: CancellationToken,
}

/// One running launch.
pub(super) struct Lease {
    pub(super) dispatcher: Arc<Dispatcher>,
    pub(super) authorization: Arc<Authorization>,
    pub(super) dir: PathBuf,
    /// The launch's guidance directory, removed at the end once the runtime's processes are gone.
    pub(super) guide: PathBuf,
    /// The runtime's homes its driver made private in the guidance directory: what the runtime
    /// wrote there itself goes back to the user's before the directory goes.
    pub(super) homes: Vec<super::driver::PrivateHome>,
    pub(super) renew_at_ms: i64,
    pub(super) permit: OwnedSemaphorePermit,
    pub(super) key: (String, String),
    pub(super) generation: u64,
}

impl Lease {
    pub(super) async fn run(
        mut self,
        mut child: Child,
        ends: Ends,
        watch: mpsc::Sender<Output>,
        forwarders: [tokio::task::JoinHandle<()>; 2],
        ended: watch::Sender<bool>,
    ) {
        let dispatcher = self.dispatcher.clone();
        let group = child.id().and_then(Pid::new);
        let mut ticker = tokio::time::interval(dispatcher.config.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failures = 0;
        let exited = loop {
            tokio::select! {
                status = child.wait() => break Some(status),
                _ = ticker.tick() => {
                    // A caller that went away without output pending is noticed here.
                    if watch.is_closed() {
                        ends.client_gone.cancel();
                    }
                    if dispatcher.clock.now_ms() >= self.renew_at_ms {
                        failures = self.renew(failures);
                    }
                }
                () = ends.client_gone.cancelled() => {
                    tracing::info!(authorization = %self.authorization.id, "launch abandoned by its caller; stopping the runtime");
                    break None;
                }
                () = ends.replaced.cancelled() => {
                    tracing::info!(authorization = %self.authorization.id, "runtime replaced, or stopped by its person; stopping it");
                    break None;
                }
                () = dispatcher.shutdown.cancelled() => break None,
            }
        };
        // End of life: revocation first, then the files, then the processes, then the drain.
        dispatcher.store.revoke(&self.authorization);
        let removed = files::remove_dir(&self.dir).is_ok();
        let status = match exited {
            Some(status) => {
                // The first process is gone; whatever it left in its group goes too.
                if let Some(group) = group {
                    stop_rest_of_group(group).await;
                }
                status
            }
            None => match group {
                Some(group) => stop_group(group, &mut child).await,
                None => child.wait().await,
            },
        };
        if !removed {
            cleanup_dir(&self.dir, &dispatcher.shutdown, &dispatcher.cleanup_debt).await;
        }
        // Once no process of the runtime writes any more: its own writes in a private home go
        // where it keeps them, said on the launcher's stderr before the exit frame.
        let mut given_back = String::new();
        for home in &self.homes {
            for line in home.give_back() {
                tracing::info!(authorization = %self.authorization.id, "{line}");
                given_back.push_str(&format!("agentteam: {line}\n"));
            }
        }
        let guide_removed = files::remove_dir(&self.guide).is_ok();
        if !guide_removed {
            cleanup_dir(&self.guide, &dispatcher.shutdown, &dispatcher.cleanup_debt).await;
        }
        dispatcher
            .store
            .drain(&self.authorization, DRAIN_DEADLINE)
            .await;
        let code = match &status {
            Ok(status) => platform::process::exit_code(status),
            Err(_) => 128,
        };
        tracing::info!(authorization = %self.authorization.id, code, "runtime ended; credential revoked and removed");
        // The exit frame goes after everything the runtime printed; a process that left the group
        // holding the pipes gets a short grace, not the lease.
        for mut forwarder in forwarders {
            if tokio::time::timeout(OUTPUT_GRACE, &mut forwarder)
                .await
                .is_err()
            {
                forwarder.abort();
            }
        }
        if !given_back.is_empty() {
            let _ = watch.send(Output::Stderr(given_back.into_bytes())).await;
        }
        // The session and the runtime's slot are free before the exit frame says so: a caller
        // that starts the session's next run once it reads the frame (the deliverer does) finds
        // it free, whenever this task next runs.
        drop(self.permit);
        dispatcher.ended(&self.key, self.generation);
        let _ = watch.send(Output::Exited(code)).await;
        let _ = ended.send(true);
    }

    /// Issues and publishes a new generation; on failure keeps the current one and backs off.
    /// Returns the new consecutive failure count.
    fn renew(&mut self, failures: u32) -> u32 {
        let dispatcher = &self.dispatcher;
        if self.authorization.is_revoked() {
            return failures;
        }
        match publish_generation(&dispatcher.store, &self.authorization, &self.dir) {
            Ok(issued) => {
                self.renew_at_ms = dispatcher.renewal_time(issued.expires_at_ms);
                self.authorization.set_next_renewal_ms(self.renew_at_ms);
                dispatcher.store.metrics().rotated(true);
                tracing::debug!(authorization = %self.authorization.id, generation = issued.generation, "credential rotated");
                0
            }
            Err(error) => {
                let failures = failures + 1;
                let wait = dispatcher.backoff(failures);
                self.renew_at_ms = dispatcher.clock.now_ms() + wait.as_millis() as i64;
                self.authorization.set_next_renewal_ms(self.renew_at_ms);
                dispatcher.store.metrics().rotated(false);
                tracing::warn!(authorization = %self.authorization.id, error = %error, error_kind = ?error.kind(), retry_in_ms = wait.as_millis() as u64, "credential rotation failed; the current generation stays");
                failures
            }
        }
    }
}

/// Issues a new Exec and MCP generation and publishes both files, if `dir` is still a private
/// directory of this user: a directory whose mode was loosened, whose owner changed or that was
/// replaced by another user's gets no new token (the current generation stays until it expires).
pub(super) fn publish_generation(
    store: &RuntimeAuthorizationStore,
    authorization: &Authorization,
    dir: &std::path::Path,
) -> io::Result<Issued> {
    files::check_private_dir(dir)?;
    publish_generation_with(store, authorization, dir, files::publish)
}

/// [`publish_generation`] with the file writer injected (tests make it fail after the rename).
///
/// A generation is withdrawn only if its file does not hold it, so a runtime never holds a
/// withdrawn token: publication is decided by what the file holds after the attempt, not by the
/// writer's result, because a writer can fail *after* its rename (the directory `fsync`), when
/// the new token is already what every reader sees.
fn publish_generation_with(
    store: &RuntimeAuthorizationStore,
    authorization: &Authorization,
    dir: &std::path::Path,
    publish: impl Fn(&std::path::Path, &str, &str) -> io::Result<()>,
) -> io::Result<Issued> {
    let revoked = || io::Error::other("the authorization was revoked");
    let exec = store
        .issue(authorization, Scope::Exec)
        .ok_or_else(revoked)?;
    let Some(mcp) = store.issue(authorization, Scope::Mcp) else {
        store.withdraw(authorization, exec.generation);
        return Err(revoked());
    };
    let holds = |name: &str, token: &str| {
        std::fs::read_to_string(dir.join(name)).is_ok_and(|text| text == token)
    };
    let mut failure = None;
    for (name, issued) in [(TOKEN_FILE, &exec), (MCP_TOKEN_FILE, &mcp)] {
        if failure.is_some() {
            // An earlier file failed: this generation was never written.
            store.withdraw(authorization, issued.generation);
            continue;
        }
        if let Err(error) = publish(dir, name, &issued.token) {
            if holds(name, &issued.token) {
                tracing::warn!(error_kind = ?error.kind(), "a credential file was replaced but not synced; the new generation is live");
            } else {
                store.withdraw(authorization, issued.generation);
                failure = Some(error);
            }
        }
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(exec),
    }
}

/// How long a strong shutdown keeps retrying a credential directory it could not remove, well
/// inside the bound `Dispatcher::shutdown` waits for every lease.
pub(super) const SHUTDOWN_CLEANUP: Duration = Duration::from_secs(3);
/// The pause between those retries.
const SHUTDOWN_RETRY: Duration = Duration::from_millis(100);

/// Removes `dir`, retrying with capped exponential backoff (250 ms doubling to 60 s, full
/// jitter) until it succeeds. Once the daemon shuts down, the retries come every
/// [`SHUTDOWN_RETRY`] for at most [`SHUTDOWN_CLEANUP`]; a directory still there then is left for
/// the next daemon, which removes it before it serves, and said so. While it retries, the
/// directory counts in `debt`.
pub(super) async fn cleanup_dir(
    dir: &std::path::Path,
    shutdown: &CancellationToken,
    debt: &std::sync::atomic::AtomicUsize,
) {
    use std::sync::atomic::Ordering;
    /// Takes the directory off the debt however the retries end.
    struct Owed<'a>(&'a std::sync::atomic::AtomicUsize);
    impl Drop for Owed<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let mut owed = None;
    let mut attempt: u32 = 0;
    let mut give_up_at: Option<tokio::time::Instant> = None;
    loop {
        let error = match files::remove_dir(dir) {
            Ok(()) => return,
            Err(error) => error,
        };
        if owed.is_none() {
            debt.fetch_add(1, Ordering::Relaxed);
            owed = Some(Owed(debt));
        }
        attempt += 1;
        tracing::warn!(error_kind = ?error.kind(), attempt, "credential cleanup failed; retrying");
        let stopping = shutdown.is_cancelled();
        let wait = if stopping {
            let deadline =
                *give_up_at.get_or_insert_with(|| tokio::time::Instant::now() + SHUTDOWN_CLEANUP);
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    attempts = attempt,
                    "a credential directory could not be removed before shutdown; the next daemon removes it before it serves"
                );
                return;
            }
            SHUTDOWN_RETRY
        } else {
            let cap = Duration::from_millis(250)
                .saturating_mul(2u32.saturating_pow(attempt.min(16)))
                .min(Duration::from_secs(60));
            Duration::from_millis(rand::rng().random_range(0..=cap.as_millis() as u64))
        };
        // A shutdown that begins during a long backoff retries at once, then at its own pace.
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled(), if !stopping => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::daemon::auth::Binding;

    /// A temporary directory with mode 0700, like every directory the daemon writes secrets in.
    fn private_tempdir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .permissions(platform::fs::permissions(0o700))
            .tempdir()
            .unwrap()
    }

    fn store_and_authorization() -> (RuntimeAuthorizationStore, Arc<Authorization>) {
        let store = RuntimeAuthorizationStore::new(
            Arc::new(Clock::default()),
            Duration::from_secs(600),
            Arc::default(),
        );
        let binding = Binding {
            server_id: "wsp_1".into(),
            agent_id: "agt_1".into(),
            session_id: "ses".into(),
            run_id: "run".into(),
            workdir: "/w".into(),
            process_generation: 1,
            catalog_digest: "d".into(),
        };
        let authorization = store.create(
            binding,
            Arc::new(crate::daemon::auth::RuntimeCatalog::builtin()),
        );
        (store, authorization)
    }

    fn live(store: &RuntimeAuthorizationStore, token: &str, scope: Scope) -> bool {
        store.verify(Some(token), "wsp_1", "agt_1", scope).is_ok()
    }

    /// The directory `fsync` after the rename failed, so the writer reported an
    /// error, but the file already holds the new token: withdrawing it would revoke the credential
    /// the runtime is now using.
    #[test]
    fn a_write_that_fails_after_its_rename_keeps_the_new_generation_live() {
        let (store, authorization) = store_and_authorization();
        let dir = private_tempdir();
        let fails_after_rename = |dir: &std::path::Path, name: &str, token: &str| {
            files::publish(dir, name, token)?;
            Err(io::Error::other("fsync of the directory failed"))
        };
        publish_generation_with(&store, &authorization, dir.path(), fails_after_rename)
            .expect("both files hold their new tokens, so the generation is published");
        let exec = std::fs::read_to_string(dir.path().join(TOKEN_FILE)).unwrap();
        let mcp = std::fs::read_to_string(dir.path().join(MCP_TOKEN_FILE)).unwrap();
        assert!(live(&store, &exec, Scope::Exec) && live(&store, &mcp, Scope::Mcp));
    }

    /// A write that never reached the file withdraws the new generation and leaves the current one.
    #[test]
    fn a_write_that_fails_before_its_rename_keeps_the_current_generation() {
        let (store, authorization) = store_and_authorization();
        let dir = private_tempdir();
        publish_generation(&store, &authorization, dir.path()).unwrap();
        let current = std::fs::read_to_string(dir.path().join(TOKEN_FILE)).unwrap();
        let issued_before = authorization.issued();
        let error = publish_generation_with(&store, &authorization, dir.path(), |_, _, _| {
            Err(io::Error::other("no space left on device"))
        })
        .unwrap_err();
        assert_eq!(error.to_string(), "no space left on device");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(TOKEN_FILE)).unwrap(),
            current
        );
        assert!(live(&store, &current, Scope::Exec));
        assert_eq!(
            authorization.issued(),
            issued_before,
            "the failed generations were withdrawn"
        );
    }
}
