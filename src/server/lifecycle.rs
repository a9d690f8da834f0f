//! One server's life on a listener, for every process that runs one (`agentteam server`, the
//! daemon's embedded server): the scheduler and the router started together; at shutdown the
//! connections drained, the scheduler stopped, then the state closed (queued audit records
//! written, the store closed).

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::routes::router;
use super::scheduler::run_scheduler;
use super::state::AppState;

/// Serves `state` on `listener` with its scheduler until `shutdown` completes, then stops both
/// and closes the state. The state is opened by the caller ([`AppState::open`]), which may also
/// route requests to it in-process.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let stop = CancellationToken::new();
    let scheduler = tokio::spawn(run_scheduler(state.clone(), stop.clone()));
    crate::serve::serve(listener, router(state.clone()), shutdown).await;
    stop.cancel();
    let _ = scheduler.await;
    state.close().await;
}
