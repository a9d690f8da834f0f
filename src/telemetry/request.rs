//! The spans of one request, held in a task-local that the front layer (`wire::observe`) sets
//! for a traced request and finishes when it is answered. Every function here is a no-op outside
//! one: the code that names a span pays a probe of the task-local when tracing is off.
//!
//! Two kinds of request span:
//! - a bridge's ([`Mode::Bridge`], the daemon): a new trace, started at once. A `traceparent`
//!   the runtime sent (a header, or an MCP request's `_meta`) becomes a link, marked verified only
//!   once the request authenticated; a refused request's link says it is not.
//! - the server's ([`Mode::Server`]): its parent is the `traceparent` of the hop, trusted only
//!   once the device credential verified ([`trust_parent`]). Until then the span is not started
//!   (its trace is not known yet); a store call made meanwhile (the credential's own lookup) is
//!   kept and given to the span when it starts. A request refused before that is a trace of its
//!   own, without the hop's context.
//!
//! Children nest by [`child`]: the innermost open child is the parent of the next one and the
//! context the hop sends ([`propagation`]).

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::SystemTime;

use axum::http::{HeaderMap, HeaderValue};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};

use super::Telemetry;
use super::context::{self, TRACEPARENT};

/// The most runtime contexts linked to one request (a header and an MCP `_meta`), and the most
/// store calls kept for a server span that has not started.
const MAX_LINKS: usize = 4;
const MAX_EARLY: usize = 16;

tokio::task_local! {
    static REQUEST: Trace;
}

/// How a request's span relates to the context that came with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A runtime's request to the daemon: a new trace; what the runtime sent is a link.
    Bridge,
    /// The daemon's request to the server: a child of the hop, once the device is verified.
    Server,
}

/// Where a runtime's trace context came from (`agentteam.link.source`).
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// The `traceparent` HTTP header (an MCP client's, or `agentteam exec`'s `TRACEPARENT`).
    Header,
    /// An MCP request's `params._meta.traceparent`.
    McpMeta,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Header => "header",
            Source::McpMeta => "mcp_meta",
        }
    }
}

/// One traced request (boxed: it travels inside every request's future, which stays small when
/// tracing is off).
pub struct Trace(Box<Parts>);

impl std::ops::Deref for Trace {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// What [`Trace`] holds.
pub struct Parts {
    tracer: SdkTracer,
    /// The request's log span: it gets the trace id, so every log line of the request has it.
    log: tracing::Span,
    state: Mutex<State>,
}

struct State {
    mode: Mode,
    /// The request span, once started.
    span: Option<Span>,
    name: Cow<'static, str>,
    start: SystemTime,
    /// Attributes given before the span started.
    attributes: Vec<KeyValue>,
    /// Server: the hop's context, and whether the device that sent it is verified.
    candidate: Option<SpanContext>,
    trusted: bool,
    /// Bridge: the runtime's contexts, and whether the request authenticated.
    links: Vec<(SpanContext, Source)>,
    verified: bool,
    /// Store calls that ended before the span started.
    early: Vec<Early>,
    /// The innermost open child.
    current: Option<SpanContext>,
    /// The outcome code, set on the span when it ends (the last one said wins).
    outcome: Option<String>,
}

struct Early {
    name: String,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<KeyValue>,
}

impl Trace {
    /// A traced request, or `None` when `telemetry` is off. The span is named `name` until the
    /// request says what it is ([`rename`]).
    pub fn begin(
        telemetry: &Telemetry,
        mode: Mode,
        name: &'static str,
        attributes: Vec<KeyValue>,
        headers: &HeaderMap,
        log: &tracing::Span,
    ) -> Option<Trace> {
        let tracer = telemetry.tracer()?.clone();
        let incoming = headers
            .get(TRACEPARENT)
            .and_then(|value| value.to_str().ok())
            .and_then(context::parse);
        let trace = Trace(Box::new(Parts {
            tracer,
            log: log.clone(),
            state: Mutex::new(State {
                mode,
                name: Cow::Borrowed(name),
                start: SystemTime::now(),
                attributes,
                ..State::empty()
            }),
        }));
        {
            let mut state = trace.state.lock().expect("not poisoned");
            match mode {
                Mode::Bridge => {
                    state.links.extend(incoming.map(|c| (c, Source::Header)));
                    trace.start(&mut state);
                }
                Mode::Server => state.candidate = incoming,
            }
        }
        Some(trace)
    }

    /// Runs `future` as this request.
    pub fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        REQUEST.scope(self, future)
    }

    /// Starts the request span if it has not started.
    fn start(&self, state: &mut State) {
        if state.span.is_some() {
            return;
        }
        let parent = match (state.mode, state.trusted, state.candidate.clone()) {
            (Mode::Server, true, Some(parent)) => Context::new().with_remote_span_context(parent),
            _ => Context::new(),
        };
        let mut builder = self
            .tracer
            .span_builder(state.name.clone())
            .with_kind(SpanKind::Server)
            .with_start_time(state.start)
            .with_attributes(std::mem::take(&mut state.attributes));
        if state.verified {
            builder = builder.with_links(
                state
                    .links
                    .drain(..)
                    .map(|(c, source)| link(c, source, true))
                    .collect(),
            );
        }
        let span = self.tracer.build_with_context(builder, &parent);
        let context = span.span_context().clone();
        self.log
            .record("trace_id", tracing::field::display(context.trace_id()));
        for early in state.early.drain(..) {
            let mut child = self.tracer.build_with_context(
                self.tracer
                    .span_builder(early.name)
                    .with_kind(SpanKind::Client)
                    .with_start_time(early.start)
                    .with_attributes(early.attributes),
                &local(&context),
            );
            child.end_with_timestamp(early.end);
        }
        state.span = Some(span);
    }

    /// Ends the request span: its HTTP status, and a 5xx's incident id.
    fn finish(&self, status: u16, incident: Option<&str>) {
        let mut state = self.state.lock().expect("not poisoned");
        self.start(&mut state);
        let state = &mut *state;
        let Some(span) = state.span.as_mut() else {
            return;
        };
        for (context, source) in state.links.drain(..) {
            let link = link(context, source, false);
            span.add_link(link.span_context, link.attributes);
        }
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if let Some(outcome) = state.outcome.take() {
            span.set_attribute(KeyValue::new("agentteam.outcome", outcome));
        }
        if let Some(incident) = incident {
            span.set_attribute(KeyValue::new("agentteam.incident_id", incident.to_string()));
        }
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
        span.end();
    }
}

impl State {
    fn empty() -> State {
        State {
            mode: Mode::Bridge,
            span: None,
            name: Cow::Borrowed(""),
            start: SystemTime::UNIX_EPOCH,
            attributes: Vec::new(),
            candidate: None,
            trusted: false,
            links: Vec::new(),
            verified: false,
            early: Vec::new(),
            current: None,
            outcome: None,
        }
    }

    /// The parent of a new child: the innermost open child, or the request span.
    fn parent(&self) -> Option<SpanContext> {
        self.current
            .clone()
            .or_else(|| self.span.as_ref().map(|s| s.span_context().clone()))
    }
}

/// A local parent's context for the SDK (not marked remote).
fn local(parent: &SpanContext) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        parent.trace_id(),
        parent.span_id(),
        parent.trace_flags(),
        false,
        TraceState::NONE,
    ))
}

fn link(context: SpanContext, source: Source, verified: bool) -> opentelemetry::trace::Link {
    let context = SpanContext::new(
        context.trace_id(),
        context.span_id(),
        TraceFlags::new(context.trace_flags().to_u8() & 1),
        true,
        TraceState::NONE,
    );
    let attributes = vec![
        KeyValue::new("agentteam.link.source", source.name()),
        KeyValue::new("agentteam.link.verified", verified),
    ];
    opentelemetry::trace::Link::new(context, attributes, 0)
}

fn with<R>(f: impl FnOnce(&Trace, &mut State) -> R) -> Option<R> {
    REQUEST
        .try_with(|trace| {
            let mut state = trace.state.lock().expect("not poisoned");
            f(trace, &mut state)
        })
        .ok()
}

/// Ends the current request's span (see [`Trace::finish`]).
pub fn finish(status: u16, incident: Option<&str>) {
    let _ = REQUEST.try_with(|trace| trace.finish(status, incident));
}

/// Whether the current request is traced.
pub fn is_traced() -> bool {
    REQUEST.try_with(|_| ()).is_ok()
}

/// The bridge's request authenticated: the runtime's context is linked as sent by a verified
/// caller.
pub fn authenticated() {
    with(|_, state| {
        state.verified = true;
        let links: Vec<_> = state.links.drain(..).collect();
        if let Some(span) = state.span.as_mut() {
            for (context, source) in links {
                let link = link(context, source, true);
                span.add_link(link.span_context, link.attributes);
            }
        }
    });
}

/// The server's request came from a verified device: the hop's context is the parent.
pub fn trust_parent() {
    with(|_, state| {
        if state.span.is_none() {
            state.trusted = true;
        }
    });
}

/// A `traceparent` a runtime sent in the request's body (MCP `_meta`): a link, if well formed.
pub fn link_sent(text: &str, source: Source) {
    let Some(context) = context::parse(text) else {
        return;
    };
    with(|_, state| {
        let verified = state.verified;
        match state.span.as_mut() {
            Some(span) if verified => {
                let link = link(context, source, true);
                span.add_link(link.span_context, link.attributes);
            }
            _ if state.links.len() < MAX_LINKS => state.links.push((context, source)),
            _ => {}
        }
    });
}

/// Names the request span for what it turned out to be (`exec task.get`).
pub fn rename(name: impl Into<Cow<'static, str>>) {
    let name = name.into();
    with(|_, state| match state.span.as_mut() {
        Some(span) => span.update_name(name),
        None => state.name = name,
    });
}

/// Attributes of the request span.
pub fn set(attributes: impl IntoIterator<Item = KeyValue>) {
    with(|_, state| match state.span.as_mut() {
        Some(span) => span.set_attributes(attributes),
        None => state.attributes.extend(attributes),
    });
}

/// The request's outcome code (`ok`, or the error envelope's code); a later one replaces it.
pub fn outcome(code: &str) {
    with(|_, state| state.outcome = Some(code.to_string()));
}

/// The outcome code of a handler's `answer` (`ok`, or its error's code).
pub fn outcome_of<T>(answer: &Result<T, crate::contract::ActionError>) {
    if is_traced() {
        match answer {
            Ok(_) => outcome("ok"),
            Err(error) => outcome(&error.code.to_string()),
        }
    }
}

/// Whether the call's answer fit its bridge's result budget (`agentteam.result_budget`).
pub fn budget(within: bool) {
    if is_traced() {
        let outcome = if within { "within" } else { "exceeded" };
        set([KeyValue::new("agentteam.result_budget", outcome)]);
    }
}

/// The `traceparent` the hop sends: the innermost open child's context.
pub fn propagation() -> Option<HeaderValue> {
    with(|_, state| state.parent())
        .flatten()
        .and_then(|context| HeaderValue::try_from(context::format(&context)).ok())
}

/// A child span of the current request, ended when dropped; a no-op outside a traced request.
pub struct Child {
    inner: Option<Box<ChildInner>>,
}

enum ChildInner {
    Started {
        span: Box<Span>,
        previous: Option<SpanContext>,
    },
    /// A store call before the server's span started: kept, and given to it when it does.
    Early(Early),
}

/// Whether a child may start the request span (an action, a hop) or waits for it (a store call,
/// which may come before the server knows its parent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Starts {
    Request,
    Waits,
}

/// A child span named `name` of the current request (see [`Child`]).
pub fn child(
    name: impl Into<Cow<'static, str>>,
    kind: SpanKind,
    starts: Starts,
    attributes: impl FnOnce() -> Vec<KeyValue>,
) -> Child {
    if !is_traced() {
        return Child::none();
    }
    started(name.into(), kind, starts, attributes())
}

/// [`child`] of a traced request: out of line, so the code that makes spans is not copied into
/// every caller's untraced path.
#[cold]
#[inline(never)]
fn started(
    name: Cow<'static, str>,
    kind: SpanKind,
    starts: Starts,
    attributes: Vec<KeyValue>,
) -> Child {
    let inner = with(|trace, state| {
        if state.span.is_none() {
            if starts == Starts::Waits {
                return ChildInner::Early(Early {
                    name: name.into_owned(),
                    start: SystemTime::now(),
                    end: SystemTime::now(),
                    attributes,
                });
            }
            trace.start(state);
        }
        let parent = state.parent().expect("the request span started");
        let span = trace.tracer.build_with_context(
            trace
                .tracer
                .span_builder(name)
                .with_kind(kind)
                .with_attributes(attributes),
            &local(&parent),
        );
        let previous = state.current.replace(span.span_context().clone());
        ChildInner::Started {
            span: Box::new(span),
            previous,
        }
    });
    Child {
        inner: inner.map(Box::new),
    }
}

impl Child {
    /// A child that records nothing.
    pub fn none() -> Child {
        Child { inner: None }
    }

    /// Attributes of this child.
    pub fn set(&mut self, attributes: impl IntoIterator<Item = KeyValue>) {
        match self.inner.as_deref_mut() {
            Some(ChildInner::Started { span, .. }) => span.set_attributes(attributes),
            Some(ChildInner::Early(early)) => early.attributes.extend(attributes),
            None => {}
        }
    }

    /// Marks this child failed, with a reason made of catalog words.
    pub fn fail(&mut self, reason: &'static str) {
        if let Some(ChildInner::Started { span, .. }) = self.inner.as_deref_mut() {
            span.set_status(Status::error(reason));
        }
        self.set([KeyValue::new("agentteam.failure", reason)]);
    }

    /// Whether this child records anything.
    pub fn is_recording(&self) -> bool {
        self.inner.is_some()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            end(*inner);
        }
    }
}

/// Ends a recording child: out of line, so the untraced path through every store call and hop
/// stays a test of one pointer.
#[cold]
#[inline(never)]
fn end(inner: ChildInner) {
    match inner {
        ChildInner::Started { mut span, previous } => {
            span.end();
            let ended = span.span_context().span_id();
            with(|_, state| {
                // Restored only if this child is still the innermost (children end in order).
                if state.current.as_ref().map(SpanContext::span_id) == Some(ended) {
                    state.current = previous;
                }
            });
        }
        ChildInner::Early(mut early) => {
            early.end = SystemTime::now();
            with(|trace, state| match &state.span {
                // The span started while this call ran: a child of it after all.
                Some(request) => {
                    let mut child = trace.tracer.build_with_context(
                        trace
                            .tracer
                            .span_builder(early.name)
                            .with_kind(SpanKind::Client)
                            .with_start_time(early.start)
                            .with_attributes(early.attributes),
                        &local(request.span_context()),
                    );
                    child.end_with_timestamp(early.end);
                }
                None if state.early.len() < MAX_EARLY => state.early.push(early),
                None => {}
            });
        }
    }
}

/// The span of one store call on `system` (`sqlite`, `postgresql`) made in the function `path`
/// names (the type name of an item inside it: `…::Store>::task_for_member::here`), named for
/// that method; nothing when the request is not traced. It waits for the server's span, so a
/// call made before the server knows its parent is still its child.
pub fn store(system: &'static str, path: &'static str) -> Child {
    if !is_traced() {
        return Child::none();
    }
    let mut method = path.strip_suffix("::here").unwrap_or(path);
    while let Some(outer) = method.strip_suffix("::{{closure}}") {
        method = outer;
    }
    let method = method.rsplit("::").next().unwrap_or(method);
    child(method, SpanKind::Client, Starts::Waits, || {
        vec![
            KeyValue::new("db.system.name", system),
            KeyValue::new("db.operation.name", method),
        ]
    })
}
