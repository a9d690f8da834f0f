//! The scheduler: one pass a [`SCHEDULER_TICK`] over the work that comes due without a request
//! (scheduled messages, scheduled workflow triggers, stale pull request watches, expired
//! idempotency records), and the audit trail's and the event feed's retention once a minute. A failed pass is logged
//! and retried on the next tick; pending work survives in the store.

use super::state::AppState;
use super::store::{EVENT_RETENTION_MS, PassReport, StoreError};
use super::{audit, extensions, runtime_call};

/// How often the server's scheduler looks for due scheduled messages.
pub const SCHEDULER_TICK: std::time::Duration = std::time::Duration::from_secs(1);
/// Scheduler ticks between two audit retention passes.
const AUDIT_PRUNE_TICKS: u64 = 60;

impl AppState {
    /// One scheduler pass at the clock's now: due scheduled messages become runs, pending runs
    /// are posted, due scheduled workflow triggers start their runs, and expired idempotency
    /// records are pruned. [`run_scheduler`] runs it every [`SCHEDULER_TICK`]; tests call it.
    pub async fn run_scheduler_pass(&self) -> Result<PassReport, StoreError> {
        let now_ms = self.clock.now_ms();
        let mut report = self.store.run_due_schedules(now_ms).await?;
        report.runs_started = self.store.fire_due_triggers(now_ms).await?;
        report.watches_refreshed = extensions::refresh_stale(self, now_ms).await?;
        report.deliveries_expired = self.store.expire_deliveries(now_ms).await?;
        report.keys_pruned = self
            .store
            .prune_idempotency(now_ms - runtime_call::IDEMPOTENCY_RETENTION_MS)
            .await?;
        Ok(report)
    }

    /// Applies the audit trail's retention (age, then count); returns how many records went.
    pub async fn prune_audit(&self) -> Result<u64, StoreError> {
        let before = self.clock.now_ms() - audit::RETENTION.as_millis() as i64;
        self.store.prune_audit(before, audit::MAX_RECORDS).await
    }

    /// Applies the event feed's retention (age, then count); returns how many events went.
    pub async fn prune_events(&self) -> Result<u64, StoreError> {
        let before = self.clock.now_ms() - EVENT_RETENTION_MS;
        self.store.prune_events(before).await
    }
}

/// Runs scheduler passes every [`SCHEDULER_TICK`] until `stop` is cancelled. A failed pass is
/// logged and retried on the next tick; pending runs survive in the store.
pub async fn run_scheduler(state: AppState, stop: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(SCHEDULER_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        // The audit trail's retention, once a minute (the count bound scans an index).
        if ticks.is_multiple_of(AUDIT_PRUNE_TICKS) {
            match state.prune_audit().await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "audit records past their retention removed"),
                Err(error) => {
                    tracing::warn!(%error, "cannot prune the audit trail; retrying later")
                }
            }
            match state.prune_events().await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "feed events past their retention removed"),
                Err(error) => {
                    tracing::warn!(%error, "cannot prune the event feed; retrying later")
                }
            }
        }
        ticks += 1;
        match state.run_scheduler_pass().await {
            Ok(report)
                if report.runs_created
                    + report.sent
                    + report.failed
                    + report.runs_started
                    + report.watches_refreshed
                    + report.deliveries_expired as usize
                    > 0
                    || report.keys_pruned > 0 =>
            {
                tracing::info!(
                    runs_created = report.runs_created,
                    sent = report.sent,
                    failed = report.failed,
                    keys_pruned = report.keys_pruned,
                    workflow_runs_started = report.runs_started,
                    watches_refreshed = report.watches_refreshed,
                    deliveries_expired = report.deliveries_expired,
                    "scheduler pass"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "scheduler pass failed; retrying next tick"),
        }
    }
}
