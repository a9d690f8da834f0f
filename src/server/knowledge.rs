//! Knowledge retrieval: `POST /runtime/servers/{serverId}/agents/{agentId}/knowledge/{tool}` for
//! `kb_search` and `kb_fetch`, each call bound to the Human-initiated turn the runtime is
//! answering (`wire::turn`: the daemon forwards it in two headers; the model never supplies it,
//! and it grants nothing by itself).
//!
//! Every failure names its hop (`KnowledgeStage`): the arguments or turn fields are malformed
//! (`request_validation`), the turn is missing (`route_missing`), AgentTeam Core refuses the
//! turn's target (`target_scope_resolution`: another workspace, another scope type, a message
//! outside the target or not written by a human, a target the agent cannot read, a task without a
//! thread), or the knowledge owner fails or refuses (`upstream`).
//!
//! The knowledge owner (the spec's MeshX role) then applies its own authorization: only sources
//! granted to the turn's conversation are searched, so a source Core would allow is still
//! invisible without a grant.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

use super::state::AppState;
use super::store::ScopeRefusal;
use super::{failure, runtime_call};
use crate::contract::error::{ErrorCode, KnowledgeStage};
use crate::contract::{ActionError, ToolId};
use crate::search::Query;
use crate::wire::{self, turn::Turn};

/// The characters of one `kb_fetch` section.
pub const SECTION_CHARS: usize = 8000;

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/runtime/servers/{serverId}/agents/{agentId}/knowledge/{tool}",
        post(call),
    )
}

async fn call(
    State(state): State<AppState>,
    Path((server_id, agent_id, tool)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = run(&state, &server_id, &agent_id, &tool, &headers, body).await;
    crate::telemetry::request::outcome_of(&answer);
    match answer {
        Ok(data) => wire::success_response(data),
        Err(error) => wire::error_response(&error),
    }
}

fn malformed_turn() -> ActionError {
    ActionError::new(
        ErrorCode::ValidationFailed,
        "the turn's target or message is malformed",
    )
    .at_stage(KnowledgeStage::RequestValidation)
}

async fn run(
    state: &AppState,
    server_id: &str,
    agent_id: &str,
    tool: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, ActionError> {
    // The daemon's own credential failing is a route the daemon cannot use.
    let caller = runtime_call::authenticate(state, server_id, agent_id, headers)
        .await
        .map_err(|error| error.at_stage(KnowledgeStage::RouteMissing))?;
    let id = match tool {
        "kb_search" => ToolId::KbSearch,
        "kb_fetch" => ToolId::KbFetch,
        _ => {
            return Err(
                ActionError::new(ErrorCode::UnknownAction, "no such knowledge tool")
                    .at_stage(KnowledgeStage::RouteMissing),
            );
        }
    };
    if crate::telemetry::request::is_traced() {
        crate::telemetry::request::rename(format!("mcp.{tool}"));
    }
    let stage = |stage| move |error: ActionError| error.at_stage(stage);
    let input = wire::body::read_json(headers, body, None)
        .await
        .map_err(|failure| failure.error())
        .map_err(stage(KnowledgeStage::RequestValidation))?;
    state
        .catalog
        .validate_tool_input(id, &input)
        .map_err(stage(KnowledgeStage::RequestValidation))?;
    let turn = Turn::from_headers(headers)
        .map_err(|_| malformed_turn())?
        .ok_or_else(|| {
            ActionError::new(
                ErrorCode::InvalidState,
                "knowledge retrieval needs a Human-initiated turn, and this call is bound to none",
            )
            .at_stage(KnowledgeStage::RouteMissing)
        })?;
    // AgentTeam Core: the turn's target, as this agent may see it.
    let (kind, key) = turn.parts().ok_or_else(malformed_turn)?;
    let channel = state
        .store
        .resolve_turn(
            &caller.workspace_id,
            &caller.agent_id,
            kind,
            key,
            &turn.message_id,
        )
        .await
        .map_err(|e| failure::store(e).at_stage(KnowledgeStage::TargetScopeResolution))?
        .map_err(|refusal| scope_refused(&turn, refusal))?;
    // The knowledge owner: only the sources granted to that conversation.
    let sources = state
        .store
        .kb_sources_for_channel(&caller.workspace_id, &channel)
        .await
        .map_err(|e| failure::store(e).at_stage(KnowledgeStage::Upstream))?;
    match id {
        ToolId::KbSearch => {
            let query = Query::parse(input["query"].as_str().unwrap_or_default());
            // A gap is not an answer: "nothing matched" is said only of a real search.
            if sources.is_empty() {
                return Err(ActionError::new(
                    ErrorCode::NotFound,
                    "no knowledge source is granted to this turn's conversation, so there is nothing to search",
                )
                .at_stage(KnowledgeStage::Upstream)
                .with_next("answer from the conversation itself (read it with `message_history_read`), or ask a person to grant a knowledge source to it"));
            }
            if query.is_empty() {
                return Err(ActionError::new(
                    ErrorCode::ValidationFailed,
                    "the query has no searchable term: it holds no letter or digit",
                )
                .at_stage(KnowledgeStage::RequestValidation)
                .with_next("call `kb_search` again with words that may appear in the documents"));
            }
            let limit = input.get("limit").and_then(Value::as_i64).unwrap_or(5);
            let hits = state
                .store
                .kb_search(&query, &sources, limit)
                .await
                .map_err(|e| failure::store(e).at_stage(KnowledgeStage::Upstream))?;
            Ok(json!({
                "documents": hits.iter().map(|hit| json!({
                    "documentId": hit.id,
                    "title": hit.title,
                    "snippet": hit.snippet,
                    "score": hit.score,
                })).collect::<Vec<_>>(),
            }))
        }
        _ => {
            let document_id = input["documentId"].as_str().unwrap_or_default();
            let section = input.get("section").and_then(Value::as_u64).unwrap_or(0) as usize;
            let document = state
                .store
                .kb_document(document_id, &sources)
                .await
                .map_err(|e| failure::store(e).at_stage(KnowledgeStage::Upstream))?
                .ok_or_else(|| {
                    ActionError::new(
                        ErrorCode::NotFound,
                        format!(
                            "no document `{document_id}` is visible in this turn's conversation"
                        ),
                    )
                    .at_stage(KnowledgeStage::Upstream)
                })?;
            let chars: Vec<char> = document.body.chars().collect();
            let sections = chars.len().div_ceil(SECTION_CHARS).max(1);
            if section >= sections {
                return Err(ActionError::new(
                    ErrorCode::ValidationFailed,
                    format!(
                        "document `{document_id}` has sections 0 to {}",
                        sections - 1
                    ),
                )
                .at_stage(KnowledgeStage::Upstream));
            }
            let start = section * SECTION_CHARS;
            let content: String = chars[start..(start + SECTION_CHARS).min(chars.len())]
                .iter()
                .collect();
            let mut data = json!({
                "documentId": document.id,
                "title": document.title,
                "section": section,
                "content": content,
            });
            if section + 1 < sections {
                data["nextSection"] = json!(section + 1);
            }
            Ok(data)
        }
    }
}

fn scope_refused(turn: &Turn, refusal: ScopeRefusal) -> ActionError {
    let target = &turn.target;
    let (kind, key) = turn.parts().unwrap_or(("target", target));
    let message = match refusal {
        // One answer for both, so another workspace's ids are not confirmed.
        ScopeRefusal::NoTarget | ScopeRefusal::OtherWorkspace => {
            format!("the turn's target `{target}` does not exist in this workspace")
        }
        ScopeRefusal::ScopeType => format!("`{key}` is not a {kind}"),
        ScopeRefusal::MessageOutsideTarget => format!(
            "message `{}` is not in the turn's target `{target}`",
            turn.message_id
        ),
        ScopeRefusal::NotHuman => format!(
            "message `{}` was not written by a human: knowledge is bound to Human-initiated turns",
            turn.message_id
        ),
        ScopeRefusal::CannotRead => format!("this agent cannot read `{target}`"),
        ScopeRefusal::TaskWithoutThread => {
            format!("task `{key}` has no thread to bind the turn to")
        }
    };
    // A target the agent cannot see is `not_found`, like everywhere; a visible target that the
    // turn does not fit is `invalid_state`.
    let code = match refusal {
        ScopeRefusal::NoTarget
        | ScopeRefusal::OtherWorkspace
        | ScopeRefusal::CannotRead
        | ScopeRefusal::MessageOutsideTarget => ErrorCode::NotFound,
        ScopeRefusal::ScopeType | ScopeRefusal::NotHuman | ScopeRefusal::TaskWithoutThread => {
            ErrorCode::InvalidState
        }
    };
    ActionError::new(code, message).at_stage(KnowledgeStage::TargetScopeResolution)
}
