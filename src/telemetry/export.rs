//! Getting ended spans to the collector without ever making a request wait for it.
//!
//! A span ends into a bounded queue ([`Queue`], `try_send`: a full queue drops the span and
//! counts it); one task takes batches off it and posts each through the OTLP/HTTP exporter of
//! the OpenTelemetry SDK, with its own deadline. A collector that is down, slow or stalled costs
//! the queue its room and the spans their export, both counted; never a request's time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::Context;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::settings::Settings;

/// The largest collector answer read (an OTLP answer is a few bytes, or a partial-success note).
const MAX_ANSWER: usize = 64 * 1024;

/// How many spans went where, for the metrics.
#[derive(Debug, Default)]
pub struct Counters {
    /// Spans the collector accepted.
    pub exported: AtomicU64,
    /// Spans dropped because the queue was full (or export had stopped).
    pub dropped_queue_full: AtomicU64,
    /// Spans lost with an export the collector refused, failed or did not answer in time.
    pub dropped_export_failed: AtomicU64,
}

/// The span processor: every ended, sampled span into the bounded queue.
#[derive(Debug)]
pub struct Queue {
    sender: mpsc::Sender<SpanData>,
    counters: Arc<Counters>,
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.sender.try_send(span).is_err() {
            self.counters
                .dropped_queue_full
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        // The export task flushes at its stop ([`Exporting::stop`]); nothing waits here.
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// The export task of one component.
pub struct Exporting {
    stop: CancellationToken,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The longest a stop waits for the last export.
    deadline: Duration,
}

impl Exporting {
    /// Exports what is queued, then stops; waits at most one export deadline (and a little),
    /// then abandons what is left.
    pub async fn stop(&self) {
        self.stop.cancel();
        let task = self.task.lock().expect("not poisoned").take();
        if let Some(mut task) = task {
            let wait = self.deadline + Duration::from_millis(500);
            if tokio::time::timeout(wait, &mut task).await.is_err() {
                task.abort();
            }
        }
    }
}

/// The queue and its export task, posting with `exporter`. Must run inside a tokio runtime.
pub fn start(
    settings: &Settings,
    exporter: opentelemetry_otlp::SpanExporter,
    counters: Arc<Counters>,
) -> (Queue, Exporting) {
    let (sender, receiver) = mpsc::channel(settings.max_queue);
    let stop = CancellationToken::new();
    let task = tokio::spawn(export_loop(
        receiver,
        exporter,
        Limits {
            batch: settings.max_batch,
            delay: settings.delay,
            timeout: settings.timeout,
        },
        counters.clone(),
        stop.clone(),
    ));
    (
        Queue { sender, counters },
        Exporting {
            stop,
            task: std::sync::Mutex::new(Some(task)),
            deadline: settings.timeout,
        },
    )
}

#[derive(Clone, Copy)]
struct Limits {
    batch: usize,
    delay: Duration,
    timeout: Duration,
}

async fn export_loop(
    mut receiver: mpsc::Receiver<SpanData>,
    exporter: opentelemetry_otlp::SpanExporter,
    limits: Limits,
    counters: Arc<Counters>,
    stop: CancellationToken,
) {
    let mut batch = Vec::with_capacity(limits.batch);
    let mut failures = Failures::default();
    let mut pause = PAUSE_FIRST;
    loop {
        let first = tokio::select! {
            biased;
            () = stop.cancelled() => None,
            span = receiver.recv() => span,
        };
        let Some(first) = first else { break };
        batch.push(first);
        // Wait for the rest of the batch, at most `delay` after its first span.
        let until = tokio::time::Instant::now() + limits.delay;
        while batch.len() < limits.batch {
            tokio::select! {
                span = receiver.recv() => match span {
                    Some(span) => batch.push(span),
                    None => break,
                },
                () = tokio::time::sleep_until(until) => break,
                () = stop.cancelled() => break,
            }
        }
        if send(&exporter, &mut batch, limits, &counters, &mut failures).await {
            pause = PAUSE_FIRST;
            continue;
        }
        // A collector that failed is left alone for a while, longer each time: spans meanwhile
        // wait in the queue, and what does not fit is dropped there, at the cost of a count,
        // instead of being encoded and sent to fail again.
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.cancelled() => {}
        }
        pause = (pause * 2).min(PAUSE_MAX);
    }
    // Stopping: what is queued now goes out in batches, until one fails (the rest is lost, and
    // counted), and nothing is queued after.
    receiver.close();
    let mut failed = false;
    while let Some(span) = receiver.recv().await {
        if failed {
            counters
                .dropped_export_failed
                .fetch_add(1, Ordering::Relaxed);
            continue;
        }
        batch.push(span);
        if batch.len() == limits.batch {
            failed = !send(&exporter, &mut batch, limits, &counters, &mut failures).await;
        }
    }
    if !failed {
        send(&exporter, &mut batch, limits, &counters, &mut failures).await;
    }
}

/// The first wait after a failed export, and the longest.
const PAUSE_FIRST: Duration = Duration::from_secs(1);
const PAUSE_MAX: Duration = Duration::from_secs(30);

/// Posts `batch` (emptied) within the deadline, counting the outcome: whether it was exported.
async fn send(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: &mut Vec<SpanData>,
    limits: Limits,
    counters: &Counters,
    failures: &mut Failures,
) -> bool {
    if batch.is_empty() {
        return true;
    }
    let spans = batch.len() as u64;
    let sent = std::mem::replace(batch, Vec::with_capacity(limits.batch));
    match tokio::time::timeout(limits.timeout, exporter.export(sent)).await {
        Ok(Ok(())) => {
            counters.exported.fetch_add(spans, Ordering::Relaxed);
            true
        }
        outcome => {
            counters
                .dropped_export_failed
                .fetch_add(spans, Ordering::Relaxed);
            let why = match outcome {
                Err(_) => "the collector did not answer in time",
                _ => "the collector refused the spans or could not be reached",
            };
            failures.note(spans, why);
            false
        }
    }
}

/// Export failures, logged at most once a minute with what was lost since the last line: a
/// collector that is down must not fill the log.
#[derive(Default)]
struct Failures {
    last: Option<std::time::Instant>,
    lost: u64,
}

impl Failures {
    fn note(&mut self, spans: u64, why: &str) {
        self.lost += spans;
        if self
            .last
            .is_some_and(|last| last.elapsed() < Duration::from_secs(60))
        {
            return;
        }
        // The exporter's own error text is not logged: it may hold the collector's answer.
        tracing::warn!(spans_lost = self.lost, "trace export failed: {why}");
        self.last = Some(std::time::Instant::now());
        self.lost = 0;
    }
}

/// The exporter's HTTP client: ours ([`crate::client::http::builder`]: no proxy from the
/// environment, the platform's roots), answers read under a bound, redirects not followed.
#[derive(Debug)]
pub struct Collector {
    client: reqwest::Client,
}

impl Collector {
    pub fn new(timeout: Duration) -> Collector {
        let client = crate::client::http::builder(None)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .build()
            .expect("the collector's HTTP client builds");
        Collector { client }
    }
}

#[async_trait::async_trait]
impl HttpClient for Collector {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let url = reqwest::Url::parse(&parts.uri.to_string())?;
        let answer = self
            .client
            .request(parts.method, url)
            .headers(parts.headers)
            .body(body)
            .send()
            .await?;
        let mut response = http::Response::builder().status(answer.status());
        if let Some(headers) = response.headers_mut() {
            headers.extend(answer.headers().clone());
        }
        let body = crate::client::http::read_bounded(answer, MAX_ANSWER).await?;
        Ok(response.body(Bytes::from(body))?)
    }
}
