//! `team` actions: read-only views of the workspace's teams (operators manage membership).

use super::{Caller, page};
use crate::contract::types::{TeamGetInput, TeamGetOutput, TeamListInput, TeamListOutput};
use crate::contract::{ActionId, ActionResult};
use crate::server::actions::Found;
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
        .found("team", &team_id)?;
    Ok(TeamGetOutput { team, members })
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    input: TeamListInput,
) -> ActionResult<TeamListOutput> {
    let TeamListInput { limit, cursor } = input;
    let filter = page::Filter::of(caller, ActionId::TeamList);
    let listed = filter
        .page(state, cursor.as_ref(), limit, async |after, limit| {
            state
                .store
                .list_teams(&caller.workspace_id, after.as_ref(), limit)
                .await
        })
        .await?;
    Ok(TeamListOutput {
        has_more: listed.has_more(),
        next_cursor: listed.next_cursor,
        teams: listed.items,
    })
}
