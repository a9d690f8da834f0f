//! The call core: one runtime call, whichever bridge brought it.
//!
//! A bridge authenticates and admits the request, reads its body and names the [`Operation`];
//! [`run`] does the rest, the same way for a built-in action, an extension action and an MCP tool:
//! 1. the input against the operation's input contract;
//! 2. an exact conversation `target` in its canonical form (format and local bounds here,
//!    authorization on the server);
//! 3. one agreed, well-formed idempotency selector for a mutation (the body's `requestId` /
//!    `idempotencyKey`, and the transport's selectors, which must agree);
//! 4. the operation's owner: the server, through the client's one forwarding rule (actions,
//!    tools, knowledge with the run's turn, extensions with their pin), or the daemon itself (the
//!    `agent` domain with idempotent replay, `memory_search` through the memory index);
//! 5. the answer against the operation's output contract ([`check`]): an answer off it is
//!    `upstream_failed` under an incident id in the log, never passed on, and a mutation's says
//!    the change may already have been applied and how to check.
//!
//! A forwarded call whose answer is lost to a transient fault ([`transient`]'s rule) is sent again,
//! a bounded number of times within a bounded time, when that is safe: a read, or a mutation
//! with its selector (the server's receipt answers a repeat without applying it again). A
//! mutation without one is sent once; whatever its answer was lost to, the runtime is told the
//! outcome is unknown and which read settles it.
//!
//! The call is fenced against its authorization's revocation before the owner is asked, while it
//! answers, and before the answer is given back. What stays with a bridge: authentication and
//! admission, its own error form, and its result budget.

mod check;
mod operation;
pub mod replay;
pub mod transient;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use check::{Data, has_control_byte};
pub use operation::Operation;

use self::check::{Contract, OffContract};
use self::replay::Claim;
use super::access::Slot;
use super::agents::owner::DaemonCaller;
use super::auth::Authorization;
use super::state::DaemonState;
use crate::client::{CallContext, Route};
use crate::contract::catalog::Effective;
use crate::contract::error::{ErrorCode, KnowledgeStage};
use crate::contract::preapproval::Unasked;
use crate::contract::target::Target;
use crate::contract::validate::{Output, UNKNOWN_FIELD};
use crate::contract::{
    ActionError, DispatchError, DomainOwner, ToolId, ToolOwner, budget, dispatch_daemon,
};
use crate::telemetry::request::{self, Starts};
use crate::wire;
use crate::wire::idempotency::resolve_selector;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

/// One call, as a bridge hands it over.
pub struct Call<'a> {
    pub authorization: &'a Authorization,
    pub operation: &'a Operation,
    pub input: Value,
    /// The selectors the transport carried beside the body (Exec's `Idempotency-Key` and
    /// `X-Request-ID` headers); MCP carries none.
    pub selectors: &'a axum::http::HeaderMap,
    /// The request's admission, given back while a replay waits.
    pub admission: &'a Slot,
}

/// A call's checked result.
#[derive(Debug)]
pub struct Answer {
    pub data: Data,
    /// The mutation's selector, for its receipt.
    pub idempotency_key: Option<String>,
    /// For a built-in action, the action (and operation) the input asked for.
    pub effective: Option<Effective>,
    /// Whether the call asked for a side effect.
    pub mutation: bool,
}

/// Runs `call` to its checked answer; see the module documentation. A traced request's span is
/// named for the operation (its bridge records the outcome).
pub async fn run(state: &DaemonState, call: Call<'_>) -> Result<Answer, ActionError> {
    // On the heap: a call's future holds its owner's (the hop and the server's answer), and each
    // bridge layer above would otherwise carry it and copy it as the request's future is built.
    Box::pin(called(state, call)).await
}

/// [`run`]'s work, in the future it boxes.
async fn called(state: &DaemonState, call: Call<'_>) -> Result<Answer, ActionError> {
    if request::is_traced() {
        request::rename(call.operation.key());
    }
    let Call {
        authorization,
        operation,
        mut input,
        selectors,
        admission,
    } = call;
    let knowledge = operation.is_knowledge();
    // A knowledge failure without a stage of its own was refused before the server's route.
    let staged = |error: ActionError| {
        if knowledge && error.stage.is_none() {
            error.at_stage(KnowledgeStage::RouteMissing)
        } else {
            error
        }
    };
    operation.validate(&state.validators, &input)?;
    if let Some(raw) = input.get("target").and_then(Value::as_str) {
        let target = Target::canonicalize(raw).map_err(staged)?;
        input["target"] = json!(target.to_string());
    }
    // The one rule of what runs unasked: a destructive call through a bridge on which the
    // runtime would ask nobody is refused here, before any owner sees it.
    if let Some(unasked) = authorization.unasked() {
        let why = match operation {
            Operation::Tool { .. } => unasked.mcp.as_deref(),
            _ => unasked.exec.as_deref(),
        };
        if let Some(why) = why
            && operation.is_destructive(&input)
        {
            return Err(staged(Unasked::refusal(&operation.name(), why)));
        }
    }
    let mutation = operation.is_mutation(&input);
    let idempotency_key = if mutation {
        resolve_selector(selectors, &input).map_err(staged)?
    } else {
        None
    };
    let effective = match operation {
        Operation::Action(descriptor) => Some(descriptor.effective(&input)),
        _ => None,
    };
    let cancel = &authorization.cancel;
    if cancel.is_cancelled() {
        return Err(ActionError::forbidden());
    }
    let asked = Asked {
        state,
        authorization,
        operation,
        idempotency_key: idempotency_key.as_deref(),
        admission,
    };
    let data = tokio::select! {
        data = asked.owner(input, mutation) => data.map_err(staged)?,
        () = cancel.cancelled() => return Err(ActionError::forbidden()),
    };
    if cancel.is_cancelled() || authorization.is_revoked() {
        return Err(ActionError::forbidden());
    }
    Ok(Answer {
        data,
        idempotency_key,
        effective,
        mutation,
    })
}

/// A validated call on its way to its owner.
struct Asked<'a> {
    state: &'a DaemonState,
    authorization: &'a Authorization,
    operation: &'a Operation,
    idempotency_key: Option<&'a str>,
    admission: &'a Slot,
}

impl Asked<'_> {
    fn context(&self) -> CallContext {
        CallContext {
            server_id: self.authorization.binding.server_id.clone(),
            agent_id: self.authorization.binding.agent_id.clone(),
            idempotency_key: self.idempotency_key.map(str::to_string),
        }
    }

    /// The operation's owner, and its answer checked.
    async fn owner(&self, input: Value, mutation: bool) -> Result<Data, ActionError> {
        let state = self.state;
        let (route, contract) = match self.operation {
            Operation::Action(descriptor) if descriptor.owner == DomainOwner::Daemon => {
                return self.daemon_owned(descriptor.id, input, mutation).await;
            }
            Operation::Action(descriptor) => (
                Route::Action(descriptor.id),
                Contract::Builtin(Output::Action(descriptor.id)),
            ),
            Operation::Extension { pinned, action } => (
                Route::Extension {
                    name: pinned.name(),
                    action,
                    digest: &pinned.recorded.digest,
                    catalog_version: pinned.recorded.catalog_version,
                },
                Contract::Extension { pinned, action },
            ),
            Operation::Tool { tool, turn } => match tool.owner {
                ToolOwner::Server => (
                    Route::Tool(tool.id),
                    Contract::Builtin(Output::Tool(tool.id)),
                ),
                ToolOwner::Memory => return self.memory(tool.id, &input).await,
                ToolOwner::Knowledge => {
                    let turn = turn.as_deref().ok_or_else(no_turn)?;
                    let route = Route::Knowledge {
                        tool: tool.id,
                        turn,
                    };
                    let contract = Contract::Builtin(Output::Tool(tool.id));
                    return self
                        .forward(&route, contract, &input, mutation)
                        .await
                        .map_err(core_unreachable);
                }
            },
        };
        let seen = matches!(self.operation, Operation::Extension { .. })
            .then(|| state.extensions.current());
        let forwarded = self.forward(&route, contract, &input, mutation).await;
        // The server has a newer definition than this runtime's pin: pin it for the next
        // launches before answering, so the restart the error asks for gets it (once, however
        // many stale answers arrive together).
        if let (Some(seen), Err(error)) = (seen, &forwarded)
            && error.code == ErrorCode::ExtensionStale
        {
            // Boxed: a rare path, whose future would otherwise be part of every call's.
            Box::pin(state.extensions.reload_unless_newer_than(&seen)).await;
        }
        forwarded
    }

    /// The one forwarding rule: `input` to `route` on the server, sent again while that is
    /// safe and its answer is lost to a transient fault ([`transient`]), and the answer
    /// checked against `contract`.
    async fn forward(
        &self,
        route: &Route<'_>,
        contract: Contract<'_>,
        input: &Value,
        mutation: bool,
    ) -> Result<Data, ActionError> {
        let state = self.state;
        let body =
            axum::body::Bytes::from(serde_json::to_vec(input).expect("a Value always serializes"));
        let context = self.context();
        let client = &state.server_client;
        let mut replay = transient::Replay::new(
            mutation,
            self.idempotency_key.is_some(),
            client.hop_timeout(),
        );
        let cancel = &self.authorization.cancel;
        // A mutation's selector with the fingerprint of what it is sent with, and the receipt
        // it would settle.
        let action: String;
        let receipt = match (mutation, self.idempotency_key) {
            (true, Some(key)) => {
                action = self.operation.key();
                let fingerprint: [u8; 32] = Sha256::digest(&body).into();
                let record = (
                    self.authorization.binding.agent_id.as_str(),
                    action.as_str(),
                    key,
                );
                if !state.unsettled.matches(record, &fingerprint) {
                    return Err(ActionError::idempotency_key_reused(key, &action));
                }
                Some((record, fingerprint))
            }
            _ => None,
        };
        let mut attempt = 0u32;
        let answer = loop {
            attempt += 1;
            let mut hop = request::child("hop", SpanKind::Client, Starts::Request, || {
                vec![
                    KeyValue::new("agentteam.attempt", i64::from(attempt)),
                    KeyValue::new("agentteam.hop", client.hop()),
                ]
            });
            let failed = match client
                .forward_once(route, &context, body.clone(), replay.attempt_timeout())
                .await
            {
                Ok(answer) => break answer,
                Err(failed) => failed,
            };
            if hop.is_recording() {
                hop.set([KeyValue::new(
                    "agentteam.outcome",
                    failed.error.code.to_string(),
                )]);
                match failed.transient {
                    Some(crate::client::Transient::NotSent) => hop.fail("not_sent"),
                    Some(crate::client::Transient::AnswerLost) => hop.fail("answer_lost"),
                    None => {}
                }
            }
            drop(hop);
            let backoff = match replay.after(&failed) {
                transient::Next::Answer => {
                    if let (Some((record, _)), None) = (receipt, failed.transient) {
                        state.unsettled.settle(record);
                    }
                    return Err(failed.error);
                }
                transient::Next::Unknown => {
                    if let Some((record, fingerprint)) = receipt {
                        state.unsettled.hold(record, fingerprint);
                    }
                    return Err(self.outcome_unknown(input, &failed.error));
                }
                transient::Next::Again(backoff) => backoff,
            };
            state.metrics.resent();
            // No admission slot is held while the call waits; revocation ends the wait at once.
            self.admission.release();
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = cancel.cancelled() => return Err(ActionError::forbidden()),
            }
            if !self
                .admission
                .retake(&state.authorizations, self.authorization)
            {
                let error = crate::daemon::access::admission_limited();
                return Err(match mutation && replay.may_have_applied() {
                    true => self.outcome_unknown(input, &error),
                    false => error,
                });
            }
        };
        if let Some((record, _)) = receipt {
            state.unsettled.settle(record);
        }
        check::server(&state.validators, contract, answer)
            .map_err(|refused| self.off_contract(refused, input, mutation))
    }

    /// The error of a mutation that was sent and whose answer never came: it may or may not have
    /// been applied. `lost` is why, for the log.
    fn outcome_unknown(&self, input: &Value, lost: &ActionError) -> ActionError {
        self.state.metrics.outcome_unknown();
        let name = self.operation.name();
        let incident_id = wire::observe::incident_id().unwrap_or_default();
        tracing::warn!(%incident_id, operation = %name, why = %lost.message, selector = self.idempotency_key.is_some(), "a mutation's answer was lost; its outcome is unknown");
        let message = match self.idempotency_key {
            Some(key) => format!(
                "`{name}` with the idempotency selector `{key}` was sent and its answer was lost: it may or may not have been applied"
            ),
            None => format!(
                "`{name}` was sent and its answer was lost: it may or may not have been applied"
            ),
        };
        ActionError::new(ErrorCode::OutcomeUnknown, message).with_next(self.how_to_check(input))
    }

    /// `memory_search`: the daemon's own index of the agent's memory.
    async fn memory(&self, tool: ToolId, input: &Value) -> Result<Data, ActionError> {
        let query = input["query"].as_str().unwrap_or_default();
        let limit = input.get("limit").and_then(Value::as_u64).unwrap_or(10) as usize;
        let memory = &self.state.memory;
        let result = memory
            .search(&self.authorization.binding.agent_id, query, limit)
            .await?;
        check::built(&self.state.validators, Output::Tool(tool), &result)
            .map_err(|refused| self.off_contract(refused, input, false))
    }

    /// A daemon-owned action: its local owner answers; a mutation with a selector runs once and
    /// is replayed after (the server's idempotency rules, kept by the daemon).
    async fn daemon_owned(
        &self,
        id: crate::contract::ActionId,
        input: Value,
        mutation: bool,
    ) -> Result<Data, ActionError> {
        let state = self.state;
        let caller = DaemonCaller {
            server_id: self.authorization.binding.server_id.clone(),
            agent_id: self.authorization.binding.agent_id.clone(),
        };
        // The daemon's own answer is held to its output contract as a server's is: a profile
        // edited by hand can hold what the contract refuses.
        let borrowed = &caller;
        let run = |input: Value| async move {
            let written = dispatch_daemon(state.agents.as_ref(), borrowed, id, input.clone())
                .await
                .map_err(|error| dispatch_failure(id, error))?;
            let result: Value = serde_json::from_str(written.get())
                .map_err(|e| internal(&format!("the daemon's own answer is not JSON: {e}")))?;
            check::built(&state.validators, Output::Action(id), &result)
                .map_err(|refused| self.off_contract(refused, &input, mutation))
        };
        let Some(key) = self.idempotency_key else {
            return run(input).await;
        };
        let action = self.operation.key();
        let fingerprint: [u8; 32] =
            Sha256::digest(serde_json::to_vec(&input).expect("a Value always serializes")).into();
        let record = (caller.agent_id.as_str(), action.as_str(), key);
        match state
            .replays
            .claim(record, fingerprint, state.clock.now_ms())
        {
            Claim::Acquired => {
                // Released unless it finishes: a call cut off by revocation leaves no key in
                // progress behind it.
                let claimed = Claimed {
                    cache: &state.replays,
                    record,
                    finished: false,
                };
                let outcome = run(input).await;
                claimed.finish(&outcome);
                outcome
            }
            Claim::Done(outcome) => outcome,
            Claim::Mismatch => Err(ActionError::idempotency_key_reused(key, &action)),
            Claim::InProgress => Err(ActionError::idempotency_in_progress(key, &action)),
        }
    }

    /// The refusal of an answer off its contract, logged under the request's incident id.
    fn off_contract(&self, refused: OffContract, input: &Value, mutation: bool) -> ActionError {
        let name = self.operation.name();
        let incident_id = wire::observe::incident_id().unwrap_or_default();
        let mut error = match &refused {
            OffContract::Envelope(error) => {
                tracing::error!(%incident_id, operation = %name, why = %error.message, "the owner's answer is not the contract's envelope");
                ActionError::new(
                    ErrorCode::UpstreamFailed,
                    format!(
                        "the owner of `{name}` answered with something other than the contract's envelope"
                    ),
                )
            }
            OffContract::Violations(violations) => {
                // An unknown field's name is the answer's own text: the log names its parent.
                let first = &violations[0];
                let path = match first.message == UNKNOWN_FIELD {
                    true => first.path.rsplit_once('/').map_or("", |(parent, _)| parent),
                    false => first.path.as_str(),
                };
                tracing::error!(%incident_id, operation = %name, %path, why = %first.message, violations = violations.len(), "the owner's answer does not match the output contract");
                ActionError::owner_off_contract(&name)
            }
        };
        if self.operation.is_knowledge() {
            // No envelope is no usable answer; a result off the schema is one Core gave.
            error = error.at_stage(match refused {
                OffContract::Envelope(_) => KnowledgeStage::CoreUnreachable,
                OffContract::Violations(_) => KnowledgeStage::Upstream,
            });
        }
        if mutation {
            error.metadata = Some(Box::new(json!({ "mutation_applied": true })));
            error = error.with_next(self.how_to_check(input));
        }
        error
    }

    /// How a runtime tells whether a mutation whose answer was refused took effect.
    fn how_to_check(&self, input: &Value) -> String {
        let name = self.operation.name();
        let repeat = match self.idempotency_key {
            Some(key) => format!(
                ", or repeat it with the same `requestId` (`{key}`): the server answers a repeat without applying it again"
            ),
            None => String::new(),
        };
        let read = match self.operation {
            Operation::Action(descriptor) => {
                let effective = descriptor.effective(input);
                effective
                    .retrieval()
                    .and_then(|retrieval| {
                        // The read's selector, when this request names the resource by it.
                        let read = retrieval.action.descriptor();
                        let (selector, id) = read.input_properties.iter().find_map(|field| {
                            let id = input.get(*field)?.as_str()?;
                            field.ends_with("Id").then_some((*field, id))
                        })?;
                        budget::retrieval(&self.state.validators, effective, selector, id)
                    })
                    .map(|command| format!("`{command}`"))
                    .unwrap_or_else(|| {
                        format!("the reads of `agentteam exec {} --help`", descriptor.domain)
                    })
            }
            Operation::Extension { pinned, .. } => {
                format!("the reads of `agentteam exec {} --help`", pinned.name())
            }
            Operation::Tool { .. } => match input.get("target").and_then(Value::as_str) {
                Some(target) => format!(
                    "`{}` of `{target}`",
                    ToolId::MessageHistoryRead.descriptor().name
                ),
                None => "a read of what it changes".to_string(),
            },
        };
        format!(
            "`{name}` may already have been applied: check with {read} before repeating it{repeat}"
        )
    }
}

/// A replay claim that is released unless its request finishes.
struct Claimed<'a> {
    cache: &'a replay::ReplayCache,
    record: (&'a str, &'a str, &'a str),
    finished: bool,
}

impl Claimed<'_> {
    fn finish(mut self, outcome: &replay::Outcome) {
        self.cache.finish(self.record, outcome);
        self.finished = true;
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.cache.release(self.record);
        }
    }
}

/// A typed adapter's failure as the contract's error.
fn dispatch_failure(id: crate::contract::ActionId, error: DispatchError) -> ActionError {
    match error {
        DispatchError::Action(error) => error,
        // A value the schema accepts but the typed request cannot hold: the caller's input.
        DispatchError::Decode(cause) => {
            tracing::debug!(action = %id.key(), error = %cause, "validated input does not fit the typed request");
            ActionError::unrepresentable_input()
        }
        DispatchError::Encode(cause) => internal(&format!(
            "the typed output of `{}` failed to encode: {cause}",
            id.key()
        )),
        DispatchError::NotOwned(other) => internal(&format!(
            "`{}` was dispatched to another owner",
            other.key()
        )),
    }
}

/// An internal failure of the daemon: logged under the request's incident id, answered without
/// its cause.
pub fn internal(cause: &str) -> ActionError {
    wire::observe::internal("daemon", &cause)
}

/// A knowledge call while the runtime answers no Human-initiated turn.
fn no_turn() -> ActionError {
    ActionError::new(
        ErrorCode::InvalidState,
        "knowledge retrieval is bound to a Human-initiated turn, and this runtime is answering none",
    )
    .with_next("continue without knowledge retrieval; it is available while you answer a human's message")
    .at_stage(KnowledgeStage::RouteMissing)
}

/// A knowledge call that got no usable answer from AgentTeam Core (the hop failed or timed out,
/// or Core failed without naming a hop) fails at `core_unreachable`; a refusal Core answered
/// keeps its own stage, or none (then it is marked `route_missing`), and an answer off the
/// contract is `upstream`.
fn core_unreachable(error: ActionError) -> ActionError {
    let transport = matches!(
        error.code,
        ErrorCode::UpstreamUnavailable | ErrorCode::UpstreamTimeout | ErrorCode::UpstreamFailed
    );
    if error.stage.is_none() && transport {
        error.at_stage(KnowledgeStage::CoreUnreachable)
    } else {
        error
    }
}
