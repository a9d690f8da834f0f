//! The HTTP accept loop every service runs on: the daemon, the reference server, and the server
//! embedded in the daemon.
//!
//! Not `axum::serve`: it builds hyper connections without a timer, which silently disables
//! hyper's header-read timeout, so an idle or slowloris connection stays open forever. Here each
//! connection is a hyper `http1` connection with a timer and a 5-second header-read timeout
//! (re-armed while a keep-alive connection waits for its next request), `TCP_NODELAY`, a bound on
//! the request head, a cap on open connections, and a graceful drain on shutdown (the listener
//! closes at once, so a new connection is refused rather than left in the backlog).
//!
//! A response sent before its request body was read to the end (a refusal before the body, a
//! body over its bound or too slow) says `Connection: close`: hyper will not read the rest, so
//! the connection ends, and a client must not pool it for its next request.
//!
//! A request's handler can ask for its connection's two ends ([`peer`]): what the daemon needs to
//! tell which local process is calling (`daemon::person`). They are the connection task's, not
//! the request's: no request pays for them unless its handler asks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The two ends of the TCP connection a request came on, as the accept loop saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// This service's end (the listener's address).
    pub local: std::net::SocketAddr,
    /// The client's end.
    pub remote: std::net::SocketAddr,
}

tokio::task_local! {
    /// The ends of the connection whose task this is: hyper runs an `http1` connection's
    /// requests inside its task.
    static PEER: Peer;
}

/// The two ends of the connection of the request being handled; `None` outside the accept loop
/// (a request routed in process).
pub fn peer() -> Option<Peer> {
    PEER.try_with(|peer| *peer).ok()
}

/// How long a connection may take to send a complete request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client of ours keeps an idle pooled connection: well under the header-read timeout,
/// so it never reuses a connection the server is closing (a request on it would fail).
pub const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// At most this many connections are open at once; further clients wait in the accept backlog.
pub const MAX_CONNECTIONS: usize = 2048;
/// How long shutdown waits for in-flight requests before dropping their connections.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// The largest request head served, counted in its canonical form: the request line and one
/// `Name: value` line per header, each ending in CRLF, then the blank line. A larger one is
/// answered 431 and the connection closed. (hyper's own bound, its read buffer of this size, lets
/// a head of up to about twice it through: [`bounded`] is the exact one.)
pub const MAX_REQUEST_HEAD: usize = 64 * 1024;

/// The open-file soft limit a service asks for: its connection cap, with room for the runtimes'
/// pipes and credential files, the database and the memory watcher.
pub const WANTED_OPEN_FILES: u64 = 8192;

/// Raises this process's soft limit of open files towards [`WANTED_OPEN_FILES`] (never above the
/// hard limit, never lowering it). A desktop session's soft limit is often 1024: below the
/// [`MAX_CONNECTIONS`] cap, so `accept` would fail with `EMFILE` before the cap could hold.
/// Returns the soft limit in force.
pub fn raise_open_file_limit() -> Option<u64> {
    match crate::platform::process::raise_open_files(WANTED_OPEN_FILES) {
        Ok(soft) => soft,
        Err((soft, error)) => {
            tracing::warn!(%error, soft, "cannot raise the open-file limit");
            Some(soft)
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting, lets every
/// connection finish its in-flight request, and waits for them under [`DRAIN_DEADLINE`].
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let stop = CancellationToken::new();
    let trigger = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        trigger.cancel();
    });
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let tracker = TaskTracker::new();
    let app = app.layer(axum::middleware::from_fn(bounded));

    loop {
        let permit = tokio::select! {
            permit = connections.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = stop.cancelled() => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning on the error.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr();
        let service = TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        let serving = async move {
            let _permit = permit;
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_REQUEST_HEAD);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        };
        match local {
            Ok(local) => tracker.spawn(PEER.scope(Peer { local, remote }, serving)),
            Err(_) => tracker.spawn(serving),
        };
    }

    // New connections are refused at once rather than left waiting in the backlog of a listener
    // that no longer accepts.
    drop(listener);
    tracker.close();
    if tokio::time::timeout(DRAIN_DEADLINE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            deadline_s = DRAIN_DEADLINE.as_secs(),
            "drain deadline passed; dropping remaining connections"
        );
    }
}

/// Installs the SIGINT and SIGTERM handlers now, and returns a future that completes on either.
///
/// Call it inside the runtime before announcing readiness: a signal that arrives right after the
/// announcement is then a clean shutdown, not the default kill.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    crate::platform::process::shutdown_signal()
}

/// Refuses a request whose head is over [`MAX_REQUEST_HEAD`] (431, `Connection: close`: its body
/// is never read), and marks the answer to any other `Connection: close` when the handler answered
/// before its body ended. One layer, not two: each `from_fn` layer boxes its service and its
/// future per request.
async fn bounded(request: Request, next: Next) -> Response {
    if head_len(&request) > MAX_REQUEST_HEAD {
        return (
            axum::http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            [(header::CONNECTION, HeaderValue::from_static("close"))],
        )
            .into_response();
    }
    close_unread(request, next).await
}

/// The bytes of `request`'s head in its canonical form: `METHOD target HTTP/1.1`, one
/// `Name: value` line per header, each line ending in CRLF, and the blank line.
fn head_len(request: &Request) -> usize {
    let uri = request.uri();
    let target = uri.path_and_query().map_or(0, |p| p.as_str().len())
        + uri.authority().map_or(0, |a| {
            a.as_str().len() + uri.scheme_str().map_or(0, |s| s.len() + "://".len())
        });
    let line = request.method().as_str().len() + 1 + target + 1 + "HTTP/1.1".len() + 2;
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    line + headers + 2
}

/// Marks the response `Connection: close` when the handler answered before the request body
/// ended.
async fn close_unread(request: Request, next: Next) -> Response {
    let done = Arc::new(AtomicBool::new(request.body().is_end_stream()));
    let tracked = done.clone();
    let request = request.map(|inner| {
        Body::new(Tracked {
            inner,
            done: tracked,
        })
    });
    let mut response = next.run(request).await;
    if !done.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that records reaching its end.
struct Tracked {
    inner: Body,
    done: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.done.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}
