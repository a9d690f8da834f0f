//! `agent_wakers_list` and `agent_wakers_set`: who besides its owner may wake an agent (whose
//! messages make its deliveries), read and changed by the owner alone.

use super::{HumanActions, Person, found, typed};
use crate::contract::error::ErrorCode;
use crate::contract::types as t;
use crate::contract::{ActionError, ActionResult};

/// Who besides its owner may wake the person's agent.
pub(super) async fn list(
    actions: &HumanActions<'_>,
    person: &Person,
    input: t::HumanAgentWakersListInput,
) -> ActionResult<t::HumanAgentWakersListOutput> {
    let wakers = found(
        actions
            .state
            .store
            .agent_wakers(&person.workspace_id, &person.human_id, &input.agent_id)
            .await,
        "agent",
        &input.agent_id,
    )?;
    typed(wakers_shown(&input.agent_id, &wakers), "wakers")
}

/// Lets people wake the person's agent, or no longer, all or nothing; who may now.
pub(super) async fn set(
    actions: &HumanActions<'_>,
    person: &Person,
    input: t::HumanAgentWakersSetInput,
) -> ActionResult<t::HumanAgentWakersSetOutput> {
    use crate::server::store::{MAX_WAKERS, WakersRefusal};
    let allow: Vec<String> = input
        .allow
        .iter()
        .flatten()
        .map(|h| h.to_string())
        .collect();
    let disallow: Vec<String> = input
        .disallow
        .iter()
        .flatten()
        .map(|h| h.to_string())
        .collect();
    let changed = actions
        .state
        .store
        .set_agent_wakers(
            &person.workspace_id,
            &person.human_id,
            &input.agent_id,
            (&allow, &disallow),
            person.now_ms,
        )
        .await;
    let wakers = match found(changed, "agent", &input.agent_id)? {
        Ok(wakers) => wakers,
        Err(WakersRefusal::UnknownHandle(handle)) => {
            return Err(ActionError::new(
                ErrorCode::NotFound,
                format!("no person of this workspace has the handle `{handle}`"),
            ));
        }
        Err(WakersRefusal::Both(handle)) => {
            return Err(ActionError::new(
                ErrorCode::ValidationFailed,
                format!("`{handle}` is both allowed and disallowed: name it once"),
            ));
        }
        Err(WakersRefusal::TooMany(count)) => {
            return Err(ActionError::new(
                ErrorCode::InvalidState,
                format!(
                    "an agent may be woken by at most {MAX_WAKERS} people besides its owner; \
                     this would make {count}: disallow some first"
                ),
            ));
        }
    };
    typed(wakers_shown(&input.agent_id, &wakers), "wakers")
}

/// Who may wake `agent_id` besides its owner, as the wakers actions answer it.
fn wakers_shown(agent_id: &str, wakers: &[crate::server::store::Waker]) -> serde_json::Value {
    serde_json::json!({
        "agentId": agent_id,
        "wakers": wakers
            .iter()
            .map(|(human_id, handle)| serde_json::json!({ "humanId": human_id, "handle": handle }))
            .collect::<Vec<_>>(),
    })
}
