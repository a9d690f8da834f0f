//! The daemon's Prometheus metrics, served at `GET /api/admin/metrics` behind the admin token
//! (OpenMetrics text, which Prometheus scrapes). One registry per daemon, carried in its state
//! (and by the authorization store, which counts refusals), and every count below is recorded
//! where the event happens.
//!
//! - `agentteam_requests_total{family,outcome}` and `agentteam_request_duration_seconds{…}`:
//!   every request to the daemon's listener, by route family (`mcp`, `exec`, `admin`, `other`)
//!   and outcome (`ok`, `client_error`, `server_error`: the status class);
//! - `agentteam_admission_refusals_total`: runtime requests refused over an admission limit
//!   (32 in flight per runtime, 1024 in all);
//! - `agentteam_auth_refusals_total{class}`: refused runtime credentials by internal class
//!   (`missing`, `malformed`, `bad-signature`, `expired`, `revoked-inactive`, `scope-mismatch`,
//!   `binding-mismatch`), which the runtime itself never learns;
//! - `agentteam_rotations_total{outcome}`: credential renewals (`ok`, `failed`);
//! - `agentteam_trace_spans_exported_total` and `agentteam_trace_spans_dropped_total{reason}`
//!   (`queue_full`, `export_failed`): the daemon's spans, when traces are exported (read from the
//!   export queue's counts at each scrape);
//! - gauges read at each scrape: `agentteam_live_authorizations`, `agentteam_runtimes`,
//!   `agentteam_requests_in_flight`, `agentteam_cleanup_debt` (credential directories whose
//!   removal is being retried).

use std::sync::atomic::AtomicI64;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Which routes a request took.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RouteFamily {
    mcp,
    exec,
    admin,
    other,
}

/// How a request ended, by status class.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    ok,
    client_error,
    server_error,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    family: RouteFamily,
    outcome: Outcome,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RotationLabels {
    outcome: &'static str,
}

/// Every metric of the daemon.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Family<RequestLabels, Histogram>,
    admission_refusals: Counter,
    /// Forwarded calls sent again after a transient fault, and calls answered outcome-unknown.
    resends: Counter,
    unknown_outcomes: Counter,
    auth_refusals: Family<ClassLabels, Counter>,
    rotations: Family<RotationLabels, Counter>,
    spans_exported: Counter,
    spans_dropped: Family<ReasonLabels, Counter>,
    /// Serializes the scrapes that bring the span counters up to the export queue's counts.
    spans_read: std::sync::Mutex<()>,
    live_authorizations: Gauge<i64, AtomicI64>,
    runtimes: Gauge<i64, AtomicI64>,
    in_flight: Gauge<i64, AtomicI64>,
    cleanup_debt: Gauge<i64, AtomicI64>,
}

fn request_histogram() -> Histogram {
    // 0.25 ms to ~4 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

/// The counters are many and their values are what `/metrics` is for: a debug line names the type.
impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("agentteam");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests to the daemon's listener, by route family and outcome",
            requests.clone(),
        );
        let durations = Family::<RequestLabels, Histogram>::new_with_constructor(
            request_histogram as fn() -> Histogram,
        );
        registry.register(
            "request_duration_seconds",
            "Time from a request to its answer's head, by route family and outcome",
            durations.clone(),
        );
        let admission_refusals = Counter::default();
        registry.register(
            "admission_refusals",
            "Runtime requests refused over an admission limit",
            admission_refusals.clone(),
        );
        let resends = Counter::default();
        registry.register(
            "server_resends",
            "Forwarded calls sent to the server again after their answer was lost to a transient fault",
            resends.clone(),
        );
        let unknown_outcomes = Counter::default();
        registry.register(
            "unknown_outcomes",
            "Mutations answered outcome_unknown: sent, and no answer of the server's came back",
            unknown_outcomes.clone(),
        );
        let auth_refusals = Family::<ClassLabels, Counter>::default();
        registry.register(
            "auth_refusals",
            "Refused runtime credentials, by internal class",
            auth_refusals.clone(),
        );
        let rotations = Family::<RotationLabels, Counter>::default();
        registry.register(
            "rotations",
            "Runtime credential renewals, by outcome",
            rotations.clone(),
        );
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let gauge = Gauge::<i64, AtomicI64>::default();
            registry.register(name, help, gauge.clone());
            gauge
        };
        let live_authorizations = gauge(
            &mut registry,
            "live_authorizations",
            "Runtime authorizations registered now",
        );
        let runtimes = gauge(&mut registry, "runtimes", "Runtimes running now");
        let in_flight = gauge(
            &mut registry,
            "requests_in_flight",
            "Runtime requests holding an admission slot now",
        );
        let cleanup_debt = gauge(
            &mut registry,
            "cleanup_debt",
            "Credential directories whose removal is being retried",
        );
        let spans_exported = Counter::default();
        registry.register(
            "trace_spans_exported",
            "Spans the trace collector accepted",
            spans_exported.clone(),
        );
        let spans_dropped = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "trace_spans_dropped",
            "Spans not exported: the export queue was full, or the collector refused, failed or stalled",
            spans_dropped.clone(),
        );
        Metrics {
            registry,
            spans_exported,
            spans_dropped,
            spans_read: std::sync::Mutex::new(()),
            requests,
            durations,
            admission_refusals,
            resends,
            unknown_outcomes,
            auth_refusals,
            rotations,
            live_authorizations,
            runtimes,
            in_flight,
            cleanup_debt,
        }
    }

    /// One request answered.
    pub fn request(&self, family: RouteFamily, status: u16, took: Duration) {
        let outcome = match status {
            500.. => Outcome::server_error,
            400..=499 => Outcome::client_error,
            _ => Outcome::ok,
        };
        let labels = RequestLabels { family, outcome };
        self.requests.get_or_create(&labels).inc();
        self.durations
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    pub fn admission_refused(&self) {
        self.admission_refusals.inc();
    }

    pub fn resent(&self) {
        self.resends.inc();
    }

    pub fn outcome_unknown(&self) {
        self.unknown_outcomes.inc();
    }

    pub fn auth_refused(&self, class: &'static str) {
        self.auth_refusals
            .get_or_create(&ClassLabels { class })
            .inc();
    }

    pub fn rotated(&self, ok: bool) {
        let outcome = if ok { "ok" } else { "failed" };
        self.rotations
            .get_or_create(&RotationLabels { outcome })
            .inc();
    }

    /// The text of a scrape, with the gauges set from `now` first.
    pub fn render(&self, now: Gauges) -> String {
        self.live_authorizations.set(now.live_authorizations as i64);
        self.runtimes.set(now.runtimes as i64);
        self.in_flight.set(now.in_flight as i64);
        self.cleanup_debt.set(now.cleanup_debt as i64);
        {
            let _one_scrape = self.spans_read.lock().expect("not poisoned");
            let up_to = |counter: &Counter, count: u64| {
                counter.inc_by(count.saturating_sub(counter.get()));
            };
            up_to(&self.spans_exported, now.spans.exported);
            for (reason, count) in [
                ("queue_full", now.spans.dropped_queue_full),
                ("export_failed", now.spans.dropped_export_failed),
            ] {
                up_to(
                    &self.spans_dropped.get_or_create(&ReasonLabels { reason }),
                    count,
                );
            }
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// What the gauges show at a scrape.
#[derive(Debug, Clone, Copy)]
pub struct Gauges {
    pub live_authorizations: usize,
    pub runtimes: usize,
    pub in_flight: usize,
    pub cleanup_debt: usize,
    /// The daemon's span export so far.
    pub spans: crate::telemetry::Counts,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
