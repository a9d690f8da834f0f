//! The extension host's records: definition versions with their digest and the catalog version
//! each publish advanced, app installations (the provider base URL and credential, which never
//! leave the server) and grants per workspace, and pull request watches.

use serde_json::{Value, json};

use super::{Columns, Page, Position, Store, StoreError, new_id, on_backend, rfc3339};
use crate::contract::extension::Recorded;

/// Watches one background refresh claims at most.
pub const MAX_REFRESH_CLAIM: i64 = 50;

fn recorded_row(row: &impl Columns) -> Result<(Recorded, String), StoreError> {
    let text: String = row.column(3)?;
    let definition: Value = serde_json::from_str(&text).map_err(|_| StoreError::Corrupt {
        column: "extension_versions.definition",
    })?;
    let version: i64 = row.column(1)?;
    let catalog_version: i64 = row.column(5)?;
    Ok((
        Recorded {
            name: row.column(0)?,
            version: version as u64,
            digest: row.column(4)?,
            catalog_version: catalog_version as u64,
            definition,
        },
        row.column(2)?,
    ))
}

macro_rules! recorded_columns {
    () => {
        "v.name, v.version, v.provider, v.definition, v.digest, v.catalog_version"
    };
}

/// What the host knows about an agent's access to an extension's app in its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppAccess {
    NotInstalled,
    Revoked,
    NotAllowed,
    /// Installed and granted: the provider base URL and the credential (server-side only).
    Allowed {
        base_url: String,
        credential: String,
    },
}

/// A stored watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRecord {
    pub id: String,
    pub workspace_id: String,
    pub extension: String,
    pub repository: String,
    pub number: i64,
    pub title: String,
    pub state: String,
    pub head_sha: String,
    pub url: String,
    pub provider_updated_at: Option<i64>,
    pub last_refreshed_at: i64,
    pub created_by_agent_id: Option<String>,
    pub revision: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl WatchRecord {
    /// The watch as the extension's output schemas show it.
    pub fn to_json(&self) -> Value {
        let mut watch = json!({
            "id": self.id,
            "repository": self.repository,
            "number": self.number,
            "title": self.title,
            "state": self.state,
            "headSha": self.head_sha,
            "url": self.url,
            "lastRefreshedAt": rfc3339(self.last_refreshed_at),
            "revision": self.revision,
            "createdAt": rfc3339(self.created_at),
            "updatedAt": rfc3339(self.updated_at),
        });
        if let Some(at) = self.provider_updated_at {
            watch["providerUpdatedAt"] = json!(rfc3339(at));
        }
        if let Some(agent) = &self.created_by_agent_id {
            watch["createdByAgentId"] = json!(agent);
        }
        watch
    }
}

/// A pull request's state as the provider reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullState {
    pub title: String,
    /// `open`, `closed` or `merged`.
    pub state: String,
    pub head_sha: String,
    pub url: String,
    pub updated_at: Option<i64>,
}

macro_rules! watch_columns {
    () => {
        "w.id, w.workspace_id, w.extension, w.repository, w.number, w.title, w.state, w.head_sha, w.url, w.provider_updated_at, \
         w.last_refreshed_at, w.created_by_agent_id, w.revision, w.created_at, w.updated_at"
    };
}

fn watch_row(row: &impl Columns) -> Result<WatchRecord, StoreError> {
    Ok(WatchRecord {
        id: row.column(0)?,
        workspace_id: row.column(1)?,
        extension: row.column(2)?,
        repository: row.column(3)?,
        number: row.column(4)?,
        title: row.column(5)?,
        state: row.column(6)?,
        head_sha: row.column(7)?,
        url: row.column(8)?,
        provider_updated_at: row.column(9)?,
        last_refreshed_at: row.column(10)?,
        created_by_agent_id: row.column(11)?,
        revision: row.column(12)?,
        created_at: row.column(13)?,
        updated_at: row.column(14)?,
    })
}

impl Store {
    /// Records `definition` as the next version of extension `name` and advances the catalog
    /// version, in one transaction; with `only_if_new`, does nothing when the extension exists
    /// (a seed). Returns the recorded version, or `None` when a seed was already there.
    pub async fn publish_extension(
        &self,
        name: &str,
        provider: &str,
        definition: &Value,
        digest: &str,
        only_if_new: bool,
        now_ms: i64,
    ) -> Result<Option<Recorded>, StoreError> {
        let text = serde_json::to_string(definition).expect("a Value serializes");
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            // The catalog row is the one lock every publish takes: versions advance in turn.
            let (catalog,): (i64,) = sqlx::query_as(if pg {
                "SELECT version FROM extension_catalog WHERE id = 1 FOR UPDATE"
            } else {
                "SELECT version FROM extension_catalog WHERE id = 1"
            })
            .fetch_one(&mut *tx)
            .await?;
            let current: Option<(i64,)> =
                sqlx::query_as("SELECT current_version FROM extensions WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
            if only_if_new && current.is_some() {
                return Ok(None);
            }
            let version = current.map_or(1, |(v,)| v + 1);
            let catalog = catalog + 1;
            sqlx::query("UPDATE extension_catalog SET version = $1 WHERE id = 1")
                .bind(catalog)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO extensions (name, current_version) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET current_version = excluded.current_version",
            )
            .bind(name)
            .bind(version)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO extension_versions (name, version, provider, definition, digest, catalog_version, published_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(name)
            .bind(version)
            .bind(provider)
            .bind(&text)
            .bind(digest)
            .bind(catalog)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(Recorded {
                name: name.to_string(),
                version: version as u64,
                digest: digest.to_string(),
                catalog_version: catalog as u64,
                definition: definition.clone(),
            }))
        })
    }

    /// The current version of every extension, by name, with its provider.
    pub async fn current_extensions(&self) -> Result<Vec<(Recorded, String)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let rows = sqlx::query(concat!(
                "SELECT ",
                recorded_columns!(),
                " FROM extensions e JOIN extension_versions v ON v.name = e.name AND v.version = e.current_version ORDER BY e.name"
            ))
            .fetch_all(reader)
            .await?;
            rows.iter().map(recorded_row).collect()
        })
    }

    /// The current version of extension `name`, with its provider.
    pub async fn current_extension(
        &self,
        name: &str,
    ) -> Result<Option<(Recorded, String)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                recorded_columns!(),
                " FROM extensions e JOIN extension_versions v ON v.name = e.name AND v.version = e.current_version WHERE e.name = $1"
            ))
            .bind(name)
            .fetch_optional(reader)
            .await?;
            row.as_ref().map(recorded_row).transpose()
        })
    }

    /// The current version of every extension whose app is installed in the workspace.
    pub async fn installed_extensions(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Recorded>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let rows = sqlx::query(concat!(
                "SELECT ",
                recorded_columns!(),
                " FROM app_installations i JOIN extensions e ON e.name = i.extension \
                  JOIN extension_versions v ON v.name = e.name AND v.version = e.current_version \
                  WHERE i.workspace_id = $1 AND i.status = 'installed' ORDER BY e.name"
            ))
            .bind(workspace_id)
            .fetch_all(reader)
            .await?;
            rows.iter()
                .map(|row| recorded_row(row).map(|r| r.0))
                .collect()
        })
    }

    /// Installs (or reinstalls) the app of `extension` in the workspace with its provider base URL
    /// and credential. `Ok(false)` when there is no such extension.
    pub async fn install_app(
        &self,
        workspace_id: &str,
        extension: &str,
        base_url: &str,
        credential: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let known = sqlx::query("SELECT 1 FROM extensions WHERE name = $1")
                .bind(extension)
                .fetch_optional(writer)
                .await?;
            if known.is_none() {
                return Ok(false);
            }
            sqlx::query(
                "INSERT INTO app_installations (workspace_id, extension, base_url, credential, status, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, 'installed', $5, $5) \
                 ON CONFLICT (workspace_id, extension) DO UPDATE SET base_url = excluded.base_url, credential = excluded.credential, \
                 status = 'installed', updated_at = excluded.updated_at",
            )
            .bind(workspace_id)
            .bind(extension)
            .bind(base_url)
            .bind(credential)
            .bind(now_ms)
            .execute(writer)
            .await?;
            Ok(true)
        })
    }

    /// Allows the workspace's agent to use the installed app. `Ok(false)` when the app is not
    /// installed or the agent is not in the workspace.
    pub async fn grant_app(
        &self,
        workspace_id: &str,
        extension: &str,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let ready = sqlx::query(
                "SELECT 1 FROM app_installations i JOIN agents g ON g.workspace_id = i.workspace_id \
                 WHERE i.workspace_id = $1 AND i.extension = $2 AND g.id = $3",
            )
            .bind(workspace_id)
            .bind(extension)
            .bind(agent_id)
            .fetch_optional(writer)
            .await?;
            if ready.is_none() {
                return Ok(false);
            }
            sqlx::query(
                "INSERT INTO app_grants (workspace_id, extension, agent_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(workspace_id)
            .bind(extension)
            .bind(agent_id)
            .bind(now_ms)
            .execute(writer)
            .await?;
            Ok(true)
        })
    }

    /// Revokes the app: its credential is deleted and every call is refused until it is
    /// installed again. `Ok(false)` when it was not installed.
    pub async fn revoke_app(
        &self,
        workspace_id: &str,
        extension: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let done = sqlx::query(
                "UPDATE app_installations SET credential = NULL, status = 'revoked', updated_at = $3 WHERE workspace_id = $1 AND extension = $2",
            )
            .bind(workspace_id)
            .bind(extension)
            .bind(now_ms)
            .execute(writer)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Whether the workspace's agent may use the extension's app, and with what.
    pub async fn app_access(
        &self,
        workspace_id: &str,
        extension: &str,
        agent_id: &str,
    ) -> Result<AppAccess, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT i.status, i.base_url, i.credential, \
                        CAST(CASE WHEN EXISTS (SELECT 1 FROM app_grants a WHERE a.workspace_id = i.workspace_id AND a.extension = i.extension AND a.agent_id = $3) \
                             THEN 1 ELSE 0 END AS BIGINT) \
                 FROM app_installations i WHERE i.workspace_id = $1 AND i.extension = $2",
            )
            .bind(workspace_id)
            .bind(extension)
            .bind(agent_id)
            .fetch_optional(reader)
            .await?;
            let Some(row) = row else {
                return Ok(AppAccess::NotInstalled);
            };
            let status: String = row.column(0)?;
            let credential: Option<String> = row.column(2)?;
            let granted = row.column::<i64>(3)? == 1;
            Ok(match (status.as_str(), credential, granted) {
                ("installed", Some(credential), true) => AppAccess::Allowed {
                    base_url: row.column(1)?,
                    credential,
                },
                ("installed", Some(_), false) => AppAccess::NotAllowed,
                _ => AppAccess::Revoked,
            })
        })
    }

    /// A new watch of `repository#number` with its first state, or the existing watch of the
    /// same pull request (a watch is unique per workspace, extension and pull request).
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_watch(
        &self,
        workspace_id: &str,
        extension: &str,
        repository: &str,
        number: i64,
        state: &PullState,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<WatchRecord, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            sqlx::query(
                "INSERT INTO pr_watches (id, workspace_id, extension, repository, number, title, state, head_sha, url, provider_updated_at, \
                 last_refreshed_at, created_by_agent_id, revision, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 1, $11, $11) \
                 ON CONFLICT (workspace_id, extension, repository, number) DO NOTHING",
            )
            .bind(new_id("prw", now_ms))
            .bind(workspace_id)
            .bind(extension)
            .bind(repository)
            .bind(number)
            .bind(&state.title)
            .bind(&state.state)
            .bind(&state.head_sha)
            .bind(&state.url)
            .bind(state.updated_at)
            .bind(now_ms)
            .bind(agent_id)
            .execute(writer)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                watch_columns!(),
                " FROM pr_watches w WHERE w.workspace_id = $1 AND w.extension = $2 AND w.repository = $3 AND w.number = $4"
            ))
            .bind(workspace_id)
            .bind(extension)
            .bind(repository)
            .bind(number)
            .fetch_one(writer)
            .await?;
            watch_row(&row)
        })
    }

    pub async fn watch(
        &self,
        workspace_id: &str,
        extension: &str,
        watch_id: &str,
    ) -> Result<Option<WatchRecord>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                watch_columns!(),
                " FROM pr_watches w WHERE w.id = $1 AND w.workspace_id = $2 AND w.extension = $3"
            ))
            .bind(watch_id)
            .bind(workspace_id)
            .bind(extension)
            .fetch_optional(reader)
            .await?;
            row.as_ref().map(watch_row).transpose()
        })
    }

    /// The workspace's watches of `extension`, `updatedAt DESC, id DESC`.
    pub async fn list_watches(
        &self,
        workspace_id: &str,
        extension: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> Result<Page<WatchRecord>, StoreError> {
        let (after_ms, after_id) = match after {
            Some(p) => (p.at_ms, p.id.clone()),
            None => (i64::MAX, "\u{10FFFF}".to_string()),
        };
        on_backend!(self, |writer, reader, pg| {
            let rows = sqlx::query(concat!(
                "SELECT ",
                watch_columns!(),
                " FROM pr_watches w WHERE w.workspace_id = $1 AND w.extension = $2 AND (w.updated_at, w.id) < ($3, $4) \
                  ORDER BY w.updated_at DESC, w.id DESC LIMIT $5"
            ))
            .bind(workspace_id)
            .bind(extension)
            .bind(after_ms)
            .bind(&after_id)
            .bind((limit + 1) as i64)
            .fetch_all(reader)
            .await?;
            let rows = rows
                .iter()
                .map(|row| {
                    let watch = watch_row(row)?;
                    let position = Position::of(watch.updated_at, &watch.id);
                    Ok((watch, position))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Page::from_rows(rows, limit))
        })
    }

    /// Records a fresh read of the watch's pull request at `now_ms`: the revision moves only when
    /// the state changed; the refresh claim is released either way.
    pub async fn refresh_watch(
        &self,
        watch_id: &str,
        state: &PullState,
        now_ms: i64,
    ) -> Result<Option<WatchRecord>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            sqlx::query(
                "UPDATE pr_watches SET \
                   revision = revision + CASE WHEN title = $2 AND state = $3 AND head_sha = $4 AND url = $5 THEN 0 ELSE 1 END, \
                   updated_at = CASE WHEN title = $2 AND state = $3 AND head_sha = $4 AND url = $5 THEN updated_at ELSE $7 END, \
                   title = $2, state = $3, head_sha = $4, url = $5, provider_updated_at = $6, last_refreshed_at = $7, refresh_claimed_until = NULL \
                 WHERE id = $1",
            )
            .bind(watch_id)
            .bind(&state.title)
            .bind(&state.state)
            .bind(&state.head_sha)
            .bind(&state.url)
            .bind(state.updated_at)
            .bind(now_ms)
            .execute(writer)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                watch_columns!(),
                " FROM pr_watches w WHERE w.id = $1"
            ))
            .bind(watch_id)
            .fetch_optional(writer)
            .await?;
            row.as_ref().map(watch_row).transpose()
        })
    }

    /// Releases a refresh claim without a new state (the provider did not answer).
    pub async fn release_watch(&self, watch_id: &str) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            sqlx::query("UPDATE pr_watches SET refresh_claimed_until = NULL WHERE id = $1")
                .bind(watch_id)
                .execute(writer)
                .await?;
            Ok(())
        })
    }

    /// Claims up to [`MAX_REFRESH_CLAIM`] watches last read before `stale_before_ms` and not
    /// claimed by another pass, until `claim_until_ms`. On PostgreSQL the rows are picked with
    /// `FOR UPDATE SKIP LOCKED`, so replicas refreshing at once never take the same watch.
    pub async fn claim_stale_watches(
        &self,
        stale_before_ms: i64,
        now_ms: i64,
        claim_until_ms: i64,
    ) -> Result<Vec<WatchRecord>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let rows = sqlx::query(if pg {
                concat!("SELECT ", watch_columns!(), " FROM pr_watches w WHERE w.last_refreshed_at < $1 \
                         AND (w.refresh_claimed_until IS NULL OR w.refresh_claimed_until < $2) ORDER BY w.last_refreshed_at, w.id LIMIT $3 FOR UPDATE SKIP LOCKED")
            } else {
                concat!("SELECT ", watch_columns!(), " FROM pr_watches w WHERE w.last_refreshed_at < $1 \
                         AND (w.refresh_claimed_until IS NULL OR w.refresh_claimed_until < $2) ORDER BY w.last_refreshed_at, w.id LIMIT $3")
            })
            .bind(stale_before_ms)
            .bind(now_ms)
            .bind(MAX_REFRESH_CLAIM)
            .fetch_all(&mut *tx)
            .await?;
            let watches = rows.iter().map(watch_row).collect::<Result<Vec<_>, _>>()?;
            for watch in &watches {
                sqlx::query("UPDATE pr_watches SET refresh_claimed_until = $2 WHERE id = $1")
                    .bind(&watch.id)
                    .bind(claim_until_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(watches)
        })
    }

    /// Deletes the watch; returns it as it was.
    pub async fn delete_watch(
        &self,
        workspace_id: &str,
        extension: &str,
        watch_id: &str,
    ) -> Result<Option<WatchRecord>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                watch_columns!(),
                " FROM pr_watches w WHERE w.id = $1 AND w.workspace_id = $2 AND w.extension = $3"
            ))
            .bind(watch_id)
            .bind(workspace_id)
            .bind(extension)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let watch = watch_row(&row)?;
            sqlx::query("DELETE FROM pr_watches WHERE id = $1")
                .bind(watch_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Some(watch))
        })
    }
}
