//! The local admin API, for the human's CLI on this machine: status, local agents and runtime
//! launches. Every route requires this start's admin token (`<state dir>/admin.token`), checked
//! by the [`AdminAuth`] extractor before anything else; the token never reaches a runtime. A
//! route that changes what the person set (their agents, a run's turn, the pinned extensions)
//! takes [`Person`] instead: the token, from a process that no runtime of this daemon started
//! ([`super::person`]).

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::agents::owner::HumanSettings;
use super::runtime::LaunchOptions;
use super::state::DaemonState;
use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::contract::{ActionError, ActionId, ActionResult};
use crate::wire::turn::Turn;
use crate::wire::{self, Data, Refusal, frame};

/// The caller presented this start's admin token.
pub struct AdminAuth;

impl FromRequestParts<DaemonState> for AdminAuth {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &DaemonState) -> Result<Self, Refusal> {
        let valid = wire::bearer(&parts.headers).is_some_and(|token| {
            Sha256::digest(token.as_bytes())
                .as_slice()
                .ct_eq(&state.admin_hash)
                .into()
        });
        if valid {
            Ok(AdminAuth)
        } else {
            Err(
                ActionError::new(ErrorCode::Forbidden, "the admin token is missing or wrong")
                    .into(),
            )
        }
    }
}

/// The person themself: the admin token, from a process that is no runtime's of this daemon.
pub struct Person;

impl FromRequestParts<DaemonState> for Person {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &DaemonState) -> Result<Self, Refusal> {
        AdminAuth::from_request_parts(parts, state).await?;
        let runs = state.dispatcher.runs();
        if runs.is_empty() {
            return Ok(Person);
        }
        let peer = crate::serve::peer();
        tokio::task::spawn_blocking(move || super::person::check(&runs, peer))
            .await
            .unwrap_or_else(|_| {
                Err(ActionError::new(
                    ErrorCode::InternalError,
                    "the check of who is calling failed",
                ))
            })?;
        Ok(Person)
    }
}

/// An admin request's decoded body, read only after the admin token was checked.
pub struct AdminJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<DaemonState> for AdminJson<T> {
    type Rejection = Refusal;

    async fn from_request(request: Request, state: &DaemonState) -> Result<Self, Refusal> {
        let (mut parts, body) = request.into_parts();
        AdminAuth::from_request_parts(&mut parts, state).await?;
        decoded(&parts, body).await.map(AdminJson)
    }
}

/// A request of the person's with a body, decoded only after [`Person`] passed.
pub struct PersonJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<DaemonState> for PersonJson<T> {
    type Rejection = Refusal;

    async fn from_request(request: Request, state: &DaemonState) -> Result<Self, Refusal> {
        let (mut parts, body) = request.into_parts();
        Person::from_request_parts(&mut parts, state).await?;
        decoded(&parts, body).await.map(PersonJson)
    }
}

/// The request's JSON body (the one bounded reader) as a `T`.
async fn decoded<T: DeserializeOwned>(parts: &Parts, body: Body) -> Result<T, Refusal> {
    let value = wire::body::read_json(&parts.headers, body, None)
        .await
        .map_err(|failure| failure.error())?;
    serde_json::from_value(value).map_err(|e| {
        ActionError::new(ErrorCode::ValidationFailed, format!("invalid request: {e}")).into()
    })
}

type Answer = Result<Data, Refusal>;

/// How long `status` waits for the server to answer its probe.
const SERVER_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /api/admin/status`: the daemon, its server (probed now), its runtimes and their
/// credentials, admission, cleanup debt, and the request counters.
pub async fn status(State(state): State<DaemonState>, _: AdminAuth) -> Answer {
    let counters = &state.counters;
    let load =
        |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    // The server's unauthenticated health route: no credential sent, no audit record written.
    let reachable = matches!(
        tokio::time::timeout(SERVER_PROBE_TIMEOUT, state.server_client.health()).await,
        Ok(Ok(()))
    );
    let now = state.clock.now_ms();
    let runtimes: Vec<Value> = state
        .dispatcher
        .runs()
        .into_iter()
        .map(|run| {
            json!({
                "runId": run.run_id,
                "agentId": run.agent_id,
                "agentHandle": handle(&state, &run.agent_id),
                "session": run.session,
                "ageMs": (now - run.started_at_ms).max(0),
            })
        })
        .collect();
    let next_rotation = state
        .authorizations
        .next_renewal_ms()
        .map(|at| (at - now).max(0));
    Ok(Data(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "binary": {
            "path": state.binary.path.display().to_string(),
            "replaced": state.binary.replaced(),
        },
        "workspaceId": state.identity.workspace_id,
        "channelId": state.identity.channel_id,
        "serverHop": state.server_client.hop(),
        "serverReachable": reachable,
        "runtimes": runtimes,
        "admission": {
            "runtimes": state.dispatcher.leases(),
            "maxRuntimes": super::runtime::MAX_LEASES,
            "requestsInFlight": state.authorizations.acquired(),
            "maxRequestsInFlight": super::auth::GLOBAL_REQUESTS,
        },
        "cleanupDebt": state.dispatcher.cleanup_debt.load(std::sync::atomic::Ordering::Relaxed),
        "nextRotationInMs": next_rotation,
        "agents": state.agents.store.len(),
        "profilesCopied": state.agents.store.counters.copied.load(std::sync::atomic::Ordering::Relaxed),
        "sessionsResolved": load(&state.dispatcher.session_lookups),
        "refusalsLogged": state.refusals.written(),
        "refusalsSuppressed": state.refusals.suppressed(),
        "leases": state.dispatcher.leases(),
        "authorizations": state.authorizations.registered(),
        "execRequests": load(&counters.exec_requests),
        "mcpRequests": load(&counters.mcp_requests),
        "acquiredRequests": state.authorizations.acquired(),
        "extensions": super::extensions::report(&state.extensions.current()),
        "memory": state.memory.report(),
    })))
}

/// `GET /api/admin/metrics`: the daemon's metrics in the OpenMetrics text format Prometheus
/// scrapes (`daemon::metrics`).
pub async fn metrics(State(state): State<DaemonState>, _: AdminAuth) -> Response {
    let text = state.metrics.render(super::metrics::Gauges {
        live_authorizations: state.authorizations.registered(),
        runtimes: state.dispatcher.leases(),
        in_flight: state.authorizations.acquired(),
        cleanup_debt: state
            .dispatcher
            .cleanup_debt
            .load(std::sync::atomic::Ordering::Relaxed),
        spans: state.telemetry.counts(),
    });
    ([(header::CONTENT_TYPE, super::metrics::CONTENT_TYPE)], text).into_response()
}

/// `GET /api/admin/person`: answers only a caller that may act as the person (no process of a
/// runtime of this daemon), for a command that reaches a server the daemon cannot guard.
pub async fn person(_: Person) -> Answer {
    Ok(Data(json!({ "person": true })))
}

/// `POST /api/admin/human/{action}`: one action of the server's human API, as this daemon's
/// person (the device credential the daemon holds for them, never sent to the caller). Reads
/// too are the person's: a runtime's process is refused every one ([`Person`]), so an agent
/// cannot read what its person may and it may not.
pub async fn human(
    State(state): State<DaemonState>,
    Path(action): Path<String>,
    PersonJson(input): PersonJson<Value>,
) -> Answer {
    let Some(descriptor) = crate::contract::catalog::find_human(&action) else {
        return Err(ActionError::unknown_action("human", &action).into());
    };
    state
        .validators
        .validate_human_input(descriptor.id, &input)?;
    let data = state
        .server_client
        .human(&state.identity.workspace_id, descriptor.id, &input)
        .await?;
    Ok(Data(data))
}

/// `POST /api/admin/feed`: the person's events after a cursor, as the server's `events_read`
/// answers them, from the daemon's one shared subscription ([`super::feed`]); the person's alone.
pub async fn feed(
    State(state): State<DaemonState>,
    PersonJson(input): PersonJson<Value>,
) -> Answer {
    state
        .validators
        .validate_human_input(crate::contract::HumanActionId::EventsRead, &input)?;
    let input: t::HumanEventsReadInput =
        serde_json::from_value(input).map_err(|_| ActionError::unrepresentable_input())?;
    let wait = std::time::Duration::from_millis(input.wait_ms.unwrap_or(0).max(0) as u64);
    let limit = input.limit.map_or(100, |l| l.get() as usize);
    let page = state
        .feed
        .read(input.after.map(|a| a as i64), wait, limit)
        .await?;
    Ok(Data(page))
}

/// `POST /api/admin/console/login`: a new one-time login for the console, written into an
/// owner-only page in the state directory; the answer names the page, never the code. The
/// person's alone: a runtime's process is refused ([`Person`]).
pub async fn console_login(State(state): State<DaemonState>, _: Person) -> Answer {
    let opened = super::console::opened(&state).map_err(|error| {
        ActionError::new(
            ErrorCode::InternalError,
            format!("cannot write the console's login page: {error}"),
        )
    })?;
    Ok(Data(opened))
}

/// `PUT /api/admin/agents/{agent}/recipe`: the agent's launch recipe, which a delivery to it
/// runs; the person's alone ([`Person`]: never a runtime, never Exec). Answers what may be shown
/// (the environment's names, not its values).
pub async fn set_recipe(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    PersonJson(recipe): PersonJson<super::deliver::Recipe>,
) -> Answer {
    let stored = local_agent(&state, &agent)?;
    recipe.check().map_err(super::deliver::refused)?;
    let program = recipe.argv.first().map(String::as_str).unwrap_or_default();
    let (family, _) = recipe
        .runtime
        .resolve(program, &stored.profile.runtime_family);
    if family == super::runtime::driver::Family::Kimi
        && let Some(why) =
            super::runtime::driver::kimi_recipe_refusal(recipe.argv.get(1..).unwrap_or_default())
    {
        return Err(super::deliver::refused(why).into());
    }
    if !recipe.workdir.is_dir() {
        return Err(super::deliver::refused(format!(
            "workdir `{}` is not a directory",
            recipe.workdir.display()
        ))
        .into());
    }
    state
        .deliverer
        .set_recipe(&stored.profile.agent_id, &recipe)
        .map_err(|error| {
            ActionError::new(
                ErrorCode::InternalError,
                format!("cannot keep the recipe: {error}"),
            )
        })?;
    Ok(Data(
        json!({ "agentId": stored.profile.agent_id, "recipe": recipe.shown() }),
    ))
}

/// `GET /api/admin/agents/{agent}/recipe`: the agent's recipe as it may be shown, or `null`.
pub async fn get_recipe(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    _: Person,
) -> Answer {
    let stored = local_agent(&state, &agent)?;
    let recipe = state
        .deliverer
        .recipe(&stored.profile.agent_id)
        .map_err(|error| {
            ActionError::new(
                ErrorCode::InternalError,
                format!("cannot read the recipe: {error}"),
            )
        })?;
    Ok(Data(json!({
        "agentId": stored.profile.agent_id,
        "recipe": recipe.map(|r| r.shown()),
        "paused": state.deliverer.is_paused(&stored.profile.agent_id),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// The agent (id or handle); none: every agent.
    agent: Option<String>,
    paused: bool,
}

/// `POST /api/admin/deliveries/pause`: pauses or resumes an agent's deliveries here, or every
/// agent's; the person's alone. Answers what is paused after it.
pub async fn pause(
    State(state): State<DaemonState>,
    PersonJson(request): PersonJson<PauseRequest>,
) -> Answer {
    let agent_id = match &request.agent {
        Some(agent) => Some(local_agent(&state, agent)?.profile.agent_id),
        None => None,
    };
    let paused = state
        .deliverer
        .pause(agent_id.as_deref(), request.paused)
        .map_err(|error| {
            ActionError::new(
                ErrorCode::InternalError,
                format!("cannot keep what is paused: {error}"),
            )
        })?;
    let agents: Vec<Value> = paused
        .agents
        .iter()
        .map(|id| {
            let handle = state.agents.store.find(id).map(|s| s.profile.handle);
            json!({ "id": id, "handle": handle })
        })
        .collect();
    Ok(Data(
        json!({ "paused": { "all": paused.all, "agents": agents } }),
    ))
}

/// `DELETE /api/admin/agents/{agent}/recipe`: no run is started for the agent's deliveries any
/// more.
pub async fn clear_recipe(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    _: Person,
) -> Answer {
    let stored = local_agent(&state, &agent)?;
    let removed = state
        .deliverer
        .clear_recipe(&stored.profile.agent_id)
        .map_err(|error| {
            ActionError::new(
                ErrorCode::InternalError,
                format!("cannot remove the recipe: {error}"),
            )
        })?;
    Ok(Data(
        json!({ "agentId": stored.profile.agent_id, "removed": removed }),
    ))
}

/// The local agent `agent` (id or handle) names.
fn local_agent(state: &DaemonState, agent: &str) -> Result<super::agents::store::Stored, Refusal> {
    state.agents.store.find(agent).ok_or_else(|| {
        ActionError::new(
            ErrorCode::NotFound,
            format!(
                "no local agent `{}`",
                agent.chars().take(64).collect::<String>()
            ),
        )
        .with_next("add it with `agentteam agent add <handle>`")
        .into()
    })
}

/// `POST /api/admin/extensions/reload`: fetches, verifies and pins the installed extension
/// definitions again; the next launches bind them (running runtimes keep theirs).
pub async fn reload_extensions(State(state): State<DaemonState>, _: Person) -> Answer {
    let snapshot = state.extensions.reload().await;
    Ok(Data(super::extensions::report(&snapshot)))
}

/// `GET /api/admin/agents?limit&cursor&runtimeFamily&provider`: a page of profiles (the human CLI
/// follows `nextCursor`).
pub async fn list_agents(
    State(state): State<DaemonState>,
    _: AdminAuth,
    Query(query): Query<serde_json::Map<String, Value>>,
) -> Answer {
    let mut input = Value::Object(query);
    if let Some(limit) = input.get("limit").and_then(Value::as_str) {
        input["limit"] = limit.parse::<u64>().map_or(Value::Null, |n| json!(n));
    }
    let input: t::AgentListInput = typed(&state, ActionId::AgentList, input)?;
    Ok(Data(
        serde_json::to_value(state.agents.list(input)?).expect("output serializes"),
    ))
}

/// Validates `input` against `id`'s input schema and decodes it.
fn typed<T: DeserializeOwned>(state: &DaemonState, id: ActionId, input: Value) -> ActionResult<T> {
    state.validators.validate_input(id, &input)?;
    serde_json::from_value(input).map_err(|_| ActionError::unrepresentable_input())
}

/// `GET /api/admin/agents/{agent}` (by id or handle).
pub async fn get_agent(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    _: AdminAuth,
) -> Answer {
    let profile = state.agents.get(&agent)?;
    Ok(Data(json!({ "agent": profile })))
}

/// A human's create or update: the contract's fields, plus secrets and policy.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HumanChange {
    agent: Value,
    #[serde(default)]
    settings: HumanSettings,
}

/// `POST /api/admin/agents`: registers the agent on the server (and in the human's channel), then
/// stores its profile.
pub async fn add_agent(
    State(state): State<DaemonState>,
    PersonJson(HumanChange { agent, settings }): PersonJson<HumanChange>,
) -> Answer {
    let input: t::AgentCreateInput = typed(&state, ActionId::AgentCreate, agent)?;
    let profile = state.agents.create(input, settings).await?;
    Ok(Data(
        json!({ "agent": profile, "channelId": state.identity.channel_id }),
    ))
}

/// `PATCH /api/admin/agents/{agent}`.
pub async fn update_agent(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    PersonJson(HumanChange {
        agent: mut change,
        settings,
    }): PersonJson<HumanChange>,
) -> Answer {
    let id = state.agents.get(&agent)?.id.to_string();
    if let Some(object) = change.as_object_mut() {
        object.insert("agentId".into(), json!(id));
    }
    let input: t::AgentUpdateInput = typed(&state, ActionId::AgentUpdate, change)?;
    let profile = state.agents.update(input, settings).await?;
    Ok(Data(json!({ "agent": profile })))
}

/// `DELETE /api/admin/agents/{agent}` (by id or handle).
pub async fn remove_agent(
    State(state): State<DaemonState>,
    Path(agent): Path<String>,
    _: Person,
) -> Answer {
    let id = state.agents.get(&agent)?.id.to_string();
    let removed = state.agents.delete(&id, None)?;
    Ok(Data(
        json!({ "removed": { "id": removed.agent_id, "handle": removed.handle } }),
    ))
}

/// `POST /api/admin/agents/reload`.
pub async fn reload_agents(State(state): State<DaemonState>, _: Person) -> Answer {
    let report = state.agents.reload().await?;
    Ok(Data(
        json!({ "loaded": report.loaded, "removed": report.removed }),
    ))
}

/// `GET /api/admin/runs`: every live launch.
pub async fn list_runs(State(state): State<DaemonState>, _: AdminAuth) -> Answer {
    let runs: Vec<Value> = state
        .dispatcher
        .runs()
        .into_iter()
        .map(|run| {
            let mut shown = serde_json::to_value(&run).expect("a run serializes");
            shown["agentHandle"] = json!(handle(&state, &run.agent_id));
            shown
        })
        .collect();
    Ok(Data(json!({ "runs": runs })))
}

/// The handle of a local agent, for a person (`None` once its profile is gone).
fn handle(state: &DaemonState, agent_id: &str) -> Option<String> {
    state
        .agents
        .store
        .get(agent_id)
        .map(|stored| stored.profile.handle)
}

/// `PUT /api/admin/runs/{runId}/turn` with `{"target", "messageId"}`: the run's current turn,
/// replaced per delivery; its next `kb_search`/`kb_fetch` is bound to it.
pub async fn set_turn(
    State(state): State<DaemonState>,
    Path(run_id): Path<String>,
    PersonJson(turn): PersonJson<Turn>,
) -> Answer {
    turn.check()
        .map_err(|message| ActionError::new(ErrorCode::ValidationFailed, message))?;
    bind_turn(&state, &run_id, Some(turn))
}

/// `DELETE /api/admin/runs/{runId}/turn`: the run answers no turn now (its knowledge calls are
/// refused at `route_missing` until one is set).
pub async fn clear_turn(
    State(state): State<DaemonState>,
    Path(run_id): Path<String>,
    _: Person,
) -> Answer {
    bind_turn(&state, &run_id, None)
}

/// `POST /api/admin/runs/{runId}/stdin`: the launcher's stdin, streamed as the request body into
/// the stdin of a run launched with `stdin`, once; the runtime reads end of file when the body
/// ends. The body has no size or time bound of its own (a protocol stream lasts as long as the
/// runtime): the pipe's backpressure paces it, and it ends with the runtime.
pub async fn relay_stdin(
    State(state): State<DaemonState>,
    _: AdminAuth,
    Path(run_id): Path<String>,
    body: Body,
) -> Answer {
    use super::runtime::StdinRefusal;
    use tokio::io::AsyncWriteExt;
    let (mut stdin, mut ended) = state.dispatcher.take_stdin(&run_id).map_err(|refusal| {
        let shown = run_id.chars().take(64).collect::<String>();
        match refusal {
            StdinRefusal::NoSuchRun => {
                ActionError::new(ErrorCode::NotFound, format!("no live run `{shown}`"))
                    .with_next("list the live runs with `agentteam runs`")
            }
            StdinRefusal::NotRelayed => ActionError::new(
                ErrorCode::InvalidState,
                format!("run `{shown}` was launched without `stdin`: its stdin is empty"),
            ),
            StdinRefusal::Taken => ActionError::new(
                ErrorCode::InvalidState,
                format!("run `{shown}` already has its stdin streamed"),
            ),
        }
    })?;
    let mut body = body.into_data_stream();
    let mut relayed: u64 = 0;
    let why = loop {
        let chunk = tokio::select! {
            chunk = body.next() => chunk,
            // A launcher whose own stdin stays open does not hold the stream past the run.
            _ = ended.wait_for(|ended| *ended) => break "the run ended",
        };
        let Some(chunk) = chunk else {
            break "the stream ended";
        };
        let Ok(chunk) = chunk else {
            break "the launcher's connection ended";
        };
        if stdin.write_all(&chunk).await.is_err() {
            break "the runtime closed its stdin";
        }
        relayed += chunk.len() as u64;
    };
    // End of file for the runtime.
    let _ = stdin.shutdown().await;
    drop(stdin);
    Ok(Data(json!({ "bytes": relayed, "ended": why })))
}

fn bind_turn(state: &DaemonState, run_id: &str, turn: Option<Turn>) -> Answer {
    let run = state.dispatcher.set_turn(run_id, turn).ok_or_else(|| {
        ActionError::new(
            ErrorCode::NotFound,
            format!(
                "no live run `{}`",
                run_id.chars().take(64).collect::<String>()
            ),
        )
        .with_next("list the live runs with `agentteam runs`")
    })?;
    Ok(Data(json!({ "run": run })))
}

/// `POST /api/admin/runs`: launches a runtime and streams its output as NDJSON frames
/// (`wire::frame`). Closing the stream stops the runtime.
pub async fn launch(
    State(state): State<DaemonState>,
    AdminJson(options): AdminJson<LaunchOptions>,
) -> Response {
    let outputs = match super::launch::start(&state, options).await {
        Ok(outputs) => outputs,
        Err(error) => return wire::error_response(&error),
    };
    let frames = ReceiverStream::new(outputs)
        .map(|output| Ok::<Bytes, std::convert::Infallible>(Bytes::from(frame::encode(&output))));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(frames),
    )
        .into_response()
}
