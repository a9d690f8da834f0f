//! Teams: groups of the workspace's humans and agents, paged by `displayName, handle, teamId`
//! ascending (all one direction, so a row-value comparison is exact and index-friendly).

use sqlx::Row;

use super::{Columns, Page, Store, StoreError, new_id, on_backend, parse_column, rfc3339};
use crate::contract::types::{Team, TeamMember};

/// At most this many members are returned by `team get`.
pub const MAX_TEAM_MEMBERS_SHOWN: i64 = 200;

/// The keyset position of a team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamPosition {
    pub display_name: String,
    pub handle: String,
    pub id: String,
}

macro_rules! team_columns {
    () => {
        "t.id, t.handle, t.display_name, t.created_at, (SELECT COUNT(*) FROM team_members m WHERE m.team_id = t.id)"
    };
}

impl Store {
    /// `None` when the handle is taken. `members` are `(kind, id)` of the same workspace.
    pub async fn create_team(
        &self,
        workspace_id: &str,
        handle: &str,
        display_name: &str,
        members: &[(String, String)],
        now_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("team", now_ms);
            let mut tx = writer.begin().await?;
            let inserted = sqlx::query(
                "INSERT INTO teams (id, workspace_id, handle, display_name, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workspace_id, handle) DO NOTHING",
            )
            .bind(&id)
            .bind(workspace_id)
            .bind(handle)
            .bind(display_name)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            if inserted.rows_affected() == 0 {
                return Ok(None);
            }
            for (kind, member_id) in members {
                sqlx::query("INSERT INTO team_members (team_id, member_kind, member_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
                    .bind(&id)
                    .bind(kind)
                    .bind(member_id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(Some(id))
        })
    }

    /// The team and up to [`MAX_TEAM_MEMBERS_SHOWN`] members, if the team is in the workspace.
    pub async fn team(
        &self,
        workspace_id: &str,
        team_id: &str,
    ) -> Result<Option<(Team, Vec<TeamMember>)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                team_columns!(),
                " FROM teams t WHERE t.id = $1 AND t.workspace_id = $2"
            ))
            .bind(team_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let team = team_row(&row)?;
            let rows = sqlx::query("SELECT member_kind, member_id FROM team_members WHERE team_id = $1 ORDER BY member_kind, member_id LIMIT $2")
                .bind(team_id)
                .bind(MAX_TEAM_MEMBERS_SHOWN)
                .fetch_all(reader)
                .await?;
            let members = rows
                .iter()
                .map(|row| {
                    let kind: String = row.try_get(0)?;
                    let id: String = row.try_get(1)?;
                    Ok(match kind.as_str() {
                        "human" => TeamMember::Human {
                            human_id: parse_column(id, "member_id")?,
                        },
                        _ => TeamMember::Agent {
                            agent_id: parse_column(id, "member_id")?,
                        },
                    })
                })
                .collect::<Result<_, StoreError>>()?;
            Ok(Some((team, members)))
        })
    }

    pub async fn list_teams(
        &self,
        workspace_id: &str,
        after: Option<&TeamPosition>,
        limit: usize,
    ) -> Result<Page<Team, TeamPosition>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let rows = match after {
                None => {
                    sqlx::query(concat!("SELECT ", team_columns!(), " FROM teams t WHERE t.workspace_id = $1 ORDER BY t.display_name, t.handle, t.id LIMIT $2"))
                        .bind(workspace_id)
                        .bind((limit + 1) as i64)
                        .fetch_all(reader)
                        .await?
                }
                Some(after) => {
                    sqlx::query(concat!(
                        "SELECT ",
                        team_columns!(),
                        " FROM teams t WHERE t.workspace_id = $1 AND (t.display_name, t.handle, t.id) > ($2, $3, $4) ORDER BY t.display_name, t.handle, t.id LIMIT $5"
                    ))
                    .bind(workspace_id)
                    .bind(&after.display_name)
                    .bind(&after.handle)
                    .bind(&after.id)
                    .bind((limit + 1) as i64)
                    .fetch_all(reader)
                    .await?
                }
            };
            let teams: Vec<(Team, TeamPosition)> = rows
                .iter()
                .map(|row| {
                    let team = team_row(row)?;
                    let position = TeamPosition {
                        display_name: team.display_name.to_string(),
                        handle: team.handle.to_string(),
                        id: team.team_id.to_string(),
                    };
                    Ok((team, position))
                })
                .collect::<Result<_, StoreError>>()?;
            Ok(Page::from_rows(teams, limit))
        })
    }
}

fn team_row(row: &impl Columns) -> Result<Team, StoreError> {
    let count: i64 = row.column(4)?;
    Ok(Team {
        team_id: parse_column(row.column(0)?, "id")?,
        handle: parse_column(row.column(1)?, "handle")?,
        display_name: parse_column(row.column(2)?, "display_name")?,
        created_at: parse_column(rfc3339(row.column(3)?), "created_at")?,
        member_count: count as u64,
    })
}
