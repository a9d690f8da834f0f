//! `team` actions: read-only views of the workspace's teams (operators manage membership).

use super::{Caller, not_found, page};
use crate::contract::types::{TeamGetInput, TeamGetOutput, TeamListInput, TeamListOutput};
use crate::contract::{ActionId, ActionResult};
use crate::server::failure;
use crate::server::state::AppState;

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
    let filter = page::Filter::of(caller, ActionId::TeamList);
    let listed = page::list(
        state,
        &filter,
        cursor.as_ref(),
        page::limit(limit),
        async |after, limit| {
            state
                .store
                .list_teams(&caller.workspace_id, after.as_ref(), limit)
                .await
        },
    )
    .await?;
    Ok(TeamListOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        teams: listed.items,
    })
}
