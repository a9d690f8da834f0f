//! `team` actions: read-only views of the workspace's teams (operators manage membership).

use super::{Caller, not_found, page};
use crate::contract::types::{TeamGetInput, TeamGetOutput, TeamListInput, TeamListOutput};
use crate::contract::{ActionId, ActionResult};
use crate::server::failure;
use crate::server::state::AppState;
use crate::server::store::TeamPosition;

pub async fn get(
    state: &AppState,
    caller: &Caller,
    input: TeamGetInput,
) -> ActionResult<TeamGetOutput> {
    let TeamGetInput { team_id } = input;
    let (team, members) = state
        .store
        .team(&caller.workspace_id, &team_id)
        .await
        .map_err(failure::store)?
        .ok_or_else(|| not_found("team", &team_id))?;
    Ok(TeamGetOutput { team, members })
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    input: TeamListInput,
) -> ActionResult<TeamListOutput> {
    let TeamListInput { limit, cursor } = input;
    let filter = page::Filter::new(caller, &ActionId::TeamList.key());
    let after = page::decode::<(String, String, String)>(state, cursor.as_ref(), &filter)?.map(
        |(display_name, handle, id)| TeamPosition {
            display_name,
            handle,
            id,
        },
    );
    let found = state
        .store
        .list_teams(&caller.workspace_id, after.as_ref(), page::limit(limit))
        .await
        .map_err(failure::store)?;
    let next_cursor = found
        .next
        .map(|p| page::encode(state, &filter, &(p.display_name, p.handle, p.id)))
        .transpose()?;
    Ok(TeamListOutput {
        has_more: next_cursor.is_some(),
        next_cursor,
        teams: found.items,
    })
}
