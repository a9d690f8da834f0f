//! OpenTelemetry traces: one trace per runtime call, from the daemon's bridge through the hop to
//! the server's action and store, exported over OTLP/HTTP when an operator points the standard
//! `OTEL_*` variables at a collector ([`settings`]), and off otherwise: no span is made, and what
//! is left of it on a request's path is a check per step (BENCHMARKS.md has what that measures).
//!
//! - [`context`]: W3C `traceparent`, read from what a runtime sends (a span link, never a
//!   parent: it is model-controlled) and written on the daemon→server hop;
//! - [`request`]: the spans of one request, in a task-local the HTTP front layer
//!   (`wire::observe`) sets: the bridge's call span, the hop attempts, the server's runtime API,
//!   action and store spans;
//! - [`export`]: the bounded queue and the export task; a collector that is down or stalled never
//!   slows a request, and what it costs is counted (`agentteam_trace_spans_*`).
//!
//! What a span holds is the audit trail's rule: route families, catalog names, ids, outcome codes,
//! sizes and durations; never an input value, a message, a token or a header value.
//!
//! Each process part that serves (the daemon, the server, both in one process when the server is
//! embedded) has its own [`Telemetry`], carried in its state: its own service name and its own
//! queue. Nothing here is global.

pub mod context;
pub mod export;
pub mod request;
pub mod settings;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

pub use settings::Settings;

/// Which part of AgentTeam a span comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Daemon,
    Server,
}

impl Component {
    /// The `agentteam.component` resource attribute and metric label.
    pub fn name(self) -> &'static str {
        match self {
            Component::Daemon => "daemon",
            Component::Server => "server",
        }
    }
}

/// One component's tracing: off, or a tracer exporting through its own queue. Cloning shares it.
#[derive(Clone, Default)]
pub struct Telemetry(Option<Arc<Inner>>);

struct Inner {
    tracer: SdkTracer,
    provider: SdkTracerProvider,
    exporting: export::Exporting,
    counters: Arc<export::Counters>,
}

/// What a component's export has done, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub exported: u64,
    pub dropped_queue_full: u64,
    pub dropped_export_failed: u64,
}

impl Telemetry {
    /// Tracing off.
    pub fn off() -> Telemetry {
        Telemetry(None)
    }

    /// Tracing for `component` exported as `settings` say (`None`: off). Must run inside a tokio
    /// runtime (the export task is spawned on it).
    pub fn start(settings: Option<&Settings>, component: Component) -> Result<Telemetry, String> {
        let Some(settings) = settings else {
            return Ok(Telemetry::off());
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(export::Collector::new(settings.timeout))
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.as_str())
            .with_timeout(settings.timeout)
            .with_headers(settings.headers.iter().cloned().collect())
            // One send per batch, within its deadline: the exporter's own retries sleep, and
            // without its `tokio` feature they block the thread they run on (a request's).
            .with_retry_policy(opentelemetry_otlp::RetryPolicy::disabled())
            .build()
            .map_err(|_| "the OTLP trace exporter could not be built".to_string())?;
        let service = settings
            .service_name
            .clone()
            .unwrap_or_else(|| format!("agentteam-{}", component.name()));
        let resource = Resource::builder_empty()
            .with_attributes([
                KeyValue::new("service.name", service),
                KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
                KeyValue::new("agentteam.component", component.name()),
            ])
            .build();
        let mut exporter = exporter;
        opentelemetry_sdk::trace::SpanExporter::set_resource(&mut exporter, &resource);
        let counters = Arc::new(export::Counters::default());
        let (queue, exporting) = export::start(settings, exporter, counters.clone());
        let provider = SdkTracerProvider::builder()
            .with_span_processor(queue)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("agentteam");
        Ok(Telemetry(Some(Arc::new(Inner {
            tracer,
            provider,
            exporting,
            counters,
        }))))
    }

    /// Whether spans are made at all.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    pub(crate) fn tracer(&self) -> Option<&SdkTracer> {
        self.0.as_ref().map(|inner| &inner.tracer)
    }

    /// What export has done so far.
    pub fn counts(&self) -> Counts {
        let Some(inner) = &self.0 else {
            return Counts::default();
        };
        let read = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
        Counts {
            exported: read(&inner.counters.exported),
            dropped_queue_full: read(&inner.counters.dropped_queue_full),
            dropped_export_failed: read(&inner.counters.dropped_export_failed),
        }
    }

    /// Exports what is queued, within one export deadline, then stops exporting.
    pub async fn shutdown(&self) {
        if let Some(inner) = &self.0 {
            inner.exporting.stop().await;
            let _ = inner.provider.shutdown();
        }
    }
}
