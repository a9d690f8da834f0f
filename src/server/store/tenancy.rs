//! Tenancy and identity: workspaces, humans, agents, device credentials, channels, threads and
//! channel membership, plus the lookups every authorization decision uses.

use sqlx::Row;

use super::shape::Query;
use super::{Store, StoreError, here, new_id, on_backend};

/// The human a device credential belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIdentity {
    pub device_id: String,
    pub human_id: String,
    pub workspace_id: String,
}

/// Positive device authentications, on SQLite only, where this process is the database's one
/// writer (`db::DatabaseLock`), so the one write that can turn a positive answer negative (a
/// revocation: devices are never deleted, agents never change owner) goes through
/// [`Store::revoke_device`], which clears the cache before it answers. Only a live device whose
/// human owns the agent is kept; the secret is still compared at every request against the stored
/// hash. An answer read from the database while a revocation ran is not kept: insertion checks the
/// generation taken before the read, under the same lock that invalidation bumps it.
#[derive(Default)]
pub(crate) struct DeviceCache(std::sync::Mutex<CachedDevices>);

#[derive(Default)]
struct CachedDevices {
    generation: u64,
    /// `device id` NUL `agent id` → the device and its stored secret hash.
    entries: std::collections::HashMap<String, (DeviceIdentity, Vec<u8>)>,
}

/// Entries at most; a full cache starts over.
const DEVICE_CACHE_ENTRIES: usize = 4096;

impl DeviceCache {
    fn key(device_id: &str, agent_id: &str) -> String {
        format!("{device_id}\0{agent_id}")
    }

    fn get(&self, device_id: &str, agent_id: &str) -> Option<(DeviceIdentity, Vec<u8>)> {
        let cached = self.0.lock().expect("no panic holds it");
        cached
            .entries
            .get(&DeviceCache::key(device_id, agent_id))
            .cloned()
    }

    fn generation(&self) -> u64 {
        self.0.lock().expect("no panic holds it").generation
    }

    fn keep(
        &self,
        generation: u64,
        device_id: &str,
        agent_id: &str,
        found: (DeviceIdentity, Vec<u8>),
    ) {
        let mut cached = self.0.lock().expect("no panic holds it");
        if cached.generation != generation {
            return;
        }
        if cached.entries.len() >= DEVICE_CACHE_ENTRIES {
            cached.entries.clear();
        }
        cached
            .entries
            .insert(DeviceCache::key(device_id, agent_id), found);
    }

    fn invalidate(&self) {
        let mut cached = self.0.lock().expect("no panic holds it");
        cached.generation += 1;
        cached.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(device: &str) -> (DeviceIdentity, Vec<u8>) {
        let identity = DeviceIdentity {
            device_id: device.into(),
            human_id: "hum_1".into(),
            workspace_id: "wsp_1".into(),
        };
        (identity, vec![7; 32])
    }

    #[test]
    fn an_answer_read_across_a_revocation_is_not_kept() {
        let cache = DeviceCache::default();
        let before = cache.generation();
        cache.keep(before, "dev_a", "agt_1", found("dev_a"));
        assert_eq!(cache.get("dev_a", "agt_1"), Some(found("dev_a")));
        assert_eq!(
            cache.get("dev_a", "agt_2"),
            None,
            "keyed by device and agent"
        );

        let read_started = cache.generation();
        cache.invalidate();
        assert_eq!(
            cache.get("dev_a", "agt_1"),
            None,
            "a revocation clears the cache"
        );
        cache.keep(read_started, "dev_a", "agt_1", found("dev_a"));
        assert_eq!(
            cache.get("dev_a", "agt_1"),
            None,
            "a read begun before it was kept"
        );
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = DeviceCache::default();
        for n in 0..=DEVICE_CACHE_ENTRIES {
            cache.keep(0, &format!("dev_{n}"), "agt_1", found("dev"));
        }
        let held = cache.0.lock().unwrap().entries.len();
        assert_eq!(held, 1, "a full cache starts over with the newest entry");
    }
}

/// What a workspace member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberKind {
    Human,
    Agent,
}

impl MemberKind {
    /// The stored form (`team_members.kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            MemberKind::Human => "human",
            MemberKind::Agent => "agent",
        }
    }
}

/// Where a conversation locator lives, once the agent is known to be allowed to see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub channel_id: String,
    pub thread_id: Option<String>,
}

impl Store {
    pub async fn create_workspace(&self, name: &str, now_ms: i64) -> Result<String, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("wsp", now_ms);
            sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3)")
                .bind(&id)
                .bind(name)
                .bind(now_ms)
                .execute(writer)
                .await?;
            Ok(id)
        })
    }

    pub async fn workspace_exists(&self, workspace_id: &str) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            Ok(sqlx::query("SELECT 1 FROM workspaces WHERE id = $1")
                .bind(workspace_id)
                .fetch_optional(reader)
                .await?
                .is_some())
        })
    }

    /// `None` when the handle is taken in that workspace.
    pub async fn create_human(
        &self,
        workspace_id: &str,
        handle: &str,
        display_name: &str,
        now_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        let id = new_id("hum", now_ms);
        let insert = Query::new(
            "INSERT INTO humans (id, workspace_id, handle, display_name, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workspace_id, handle) DO NOTHING",
        );
        let insert = insert
            .bind(&id)
            .bind(workspace_id)
            .bind(handle)
            .bind(display_name)
            .bind(now_ms);
        Ok((self.execute(here!(), insert).await? == 1).then_some(id))
    }

    /// The workspace of a human, if the human exists.
    pub async fn human_workspace(&self, human_id: &str) -> Result<Option<String>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            Ok(
                sqlx::query_as::<_, (String,)>("SELECT workspace_id FROM humans WHERE id = $1")
                    .bind(human_id)
                    .fetch_optional(reader)
                    .await?
                    .map(|r| r.0),
            )
        })
    }

    /// `None` when the handle is taken in that workspace.
    pub async fn create_agent(
        &self,
        workspace_id: &str,
        owner_human_id: &str,
        handle: &str,
        display_name: &str,
        now_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        let id = new_id("agt", now_ms);
        let insert = Query::new(
            "INSERT INTO agents (id, workspace_id, owner_human_id, handle, display_name, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (workspace_id, handle) DO NOTHING",
        );
        let insert = insert
            .bind(&id)
            .bind(workspace_id)
            .bind(owner_human_id)
            .bind(handle)
            .bind(display_name)
            .bind(now_ms);
        Ok((self.execute(here!(), insert).await? == 1).then_some(id))
    }

    /// The agents of `workspace_id` among `agent_ids`, as `(id, handle, display name)`.
    pub async fn agents_among(
        &self,
        workspace_id: &str,
        agent_ids: &[String],
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let ids = serde_json::to_string(agent_ids).expect("ids serialize");
            Ok(sqlx::query_as::<_, (String, String, String)>(if pg {
                "SELECT id, handle, display_name FROM agents WHERE workspace_id = $1 AND id IN (SELECT json_array_elements_text($2::json)) ORDER BY id"
            } else {
                "SELECT id, handle, display_name FROM agents WHERE workspace_id = $1 AND id IN (SELECT value FROM json_each($2)) ORDER BY id"
            })
            .bind(workspace_id)
            .bind(ids)
            .fetch_all(reader)
            .await?)
        })
    }

    /// Renames the agent `agent_id` of `workspace_id`; `None` when there is no such agent,
    /// `Some(false)` when the handle is taken.
    pub async fn rename_agent(
        &self,
        workspace_id: &str,
        agent_id: &str,
        handle: &str,
    ) -> Result<Option<bool>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let exists = sqlx::query("SELECT 1 FROM agents WHERE id = $1 AND workspace_id = $2")
                .bind(agent_id)
                .bind(workspace_id)
                .fetch_optional(&mut *tx)
                .await?
                .is_some();
            if !exists {
                return Ok(None);
            }
            let taken = sqlx::query(
                "SELECT 1 FROM agents WHERE workspace_id = $1 AND handle = $2 AND id <> $3",
            )
            .bind(workspace_id)
            .bind(handle)
            .bind(agent_id)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
            if taken {
                return Ok(Some(false));
            }
            sqlx::query("UPDATE agents SET handle = $1 WHERE id = $2")
                .bind(handle)
                .bind(agent_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Some(true))
        })
    }

    /// Stores a device credential for `human_id`; only the SHA-256 of its secret is kept.
    pub async fn create_device(
        &self,
        human_id: &str,
        secret_hash: &[u8],
        now_ms: i64,
    ) -> Result<String, StoreError> {
        let id = new_id("dev", now_ms);
        let insert = Query::new(
            "INSERT INTO devices (id, human_id, secret_hash, created_at) VALUES ($1, $2, $3, $4)",
        );
        let insert = insert
            .bind(&id)
            .bind(human_id)
            .bind(secret_hash)
            .bind(now_ms);
        self.execute(here!(), insert).await?;
        Ok(id)
    }

    /// The live device `device_id`, its secret hash, and whether its human owns `agent_id` in
    /// the device's workspace: one query, because every runtime request asks all three, and none
    /// on SQLite once a positive answer is cached ([`DeviceCache`]).
    pub async fn device(
        &self,
        device_id: &str,
        agent_id: &str,
    ) -> Result<Option<(DeviceIdentity, Vec<u8>, bool)>, StoreError> {
        if let Some(cache) = &self.devices
            && let Some((identity, hash)) = cache.get(device_id, agent_id)
        {
            return Ok(Some((identity, hash, true)));
        }
        let generation = self.devices.as_ref().map(|cache| cache.generation());
        let found = on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT d.id, d.human_id, h.workspace_id, d.secret_hash, \
                 EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.workspace_id = h.workspace_id AND a.owner_human_id = d.human_id) \
                 FROM devices d JOIN humans h ON h.id = d.human_id \
                 WHERE d.id = $1 AND d.revoked_at IS NULL",
            )
            .bind(device_id)
            .bind(agent_id)
            .fetch_optional(reader)
            .await?;
            Ok::<_, StoreError>(row.map(|row| {
                let identity = DeviceIdentity {
                    device_id: row.get(0),
                    human_id: row.get(1),
                    workspace_id: row.get(2),
                };
                (identity, row.get::<Vec<u8>, _>(3), row.get::<bool, _>(4))
            }))
        })?;
        if let (Some(cache), Some(generation), Some((identity, hash, true))) =
            (&self.devices, generation, &found)
        {
            cache.keep(
                generation,
                device_id,
                agent_id,
                (identity.clone(), hash.clone()),
            );
        }
        Ok(found)
    }

    pub async fn revoke_device(&self, device_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let done = sqlx::query(
                "UPDATE devices SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            )
            .bind(device_id)
            .bind(now_ms)
            .execute(writer)
            .await;
            // Whatever the statement's outcome: an error after the commit must not leave a
            // positive answer behind.
            if let Some(cache) = &self.devices {
                cache.invalidate();
            }
            Ok(done?.rows_affected() == 1)
        })
    }

    /// `None` when the name is taken in that workspace. `members` (humans or agents of the same
    /// workspace) join the channel.
    pub async fn create_channel(
        &self,
        workspace_id: &str,
        name: &str,
        members: &[String],
        now_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("chn", now_ms);
            let mut tx = writer.begin().await?;
            let inserted = sqlx::query("INSERT INTO channels (id, workspace_id, name, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (workspace_id, name) DO NOTHING")
                .bind(&id)
                .bind(workspace_id)
                .bind(name)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            if inserted.rows_affected() == 0 {
                return Ok(None);
            }
            for member in members {
                sqlx::query("INSERT INTO channel_members (channel_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING").bind(&id).bind(member).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(Some(id))
        })
    }

    /// Adds `member_id` to a channel (no-op if already a member).
    pub async fn add_channel_member(
        &self,
        channel_id: &str,
        member_id: &str,
    ) -> Result<(), StoreError> {
        on_backend!(self, |writer, reader, pg| {
            sqlx::query("INSERT INTO channel_members (channel_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING").bind(channel_id).bind(member_id).execute(writer).await?;
            Ok(())
        })
    }

    /// True when `member_id` is a human or agent of `workspace_id`.
    /// Whether `member_id` is a human or an agent of `workspace_id` (`None`: neither).
    pub async fn member_kind(
        &self,
        workspace_id: &str,
        member_id: &str,
    ) -> Result<Option<MemberKind>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query_as::<_, (String,)>("SELECT 'human' FROM humans WHERE id = $1 AND workspace_id = $2 UNION ALL SELECT 'agent' FROM agents WHERE id = $1 AND workspace_id = $2")
                .bind(member_id)
                .bind(workspace_id)
                .fetch_optional(reader)
                .await?;
            Ok(row.map(|(kind,)| {
                if kind == "human" {
                    MemberKind::Human
                } else {
                    MemberKind::Agent
                }
            }))
        })
    }

    /// The workspace of a channel, if the channel exists (a direct conversation is not a channel:
    /// it keeps exactly its two members and has no threads).
    pub async fn channel_workspace(&self, channel_id: &str) -> Result<Option<String>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            Ok(sqlx::query_as::<_, (String,)>(
                "SELECT workspace_id FROM channels WHERE id = $1 AND kind = 'channel'",
            )
            .bind(channel_id)
            .fetch_optional(reader)
            .await?
            .map(|r| r.0))
        })
    }

    pub async fn create_thread(
        &self,
        channel_id: &str,
        title: &str,
        now_ms: i64,
    ) -> Result<String, StoreError> {
        let id = new_id("thr", now_ms);
        let insert = Query::new(
            "INSERT INTO threads (id, channel_id, title, created_at) VALUES ($1, $2, $3, $4)",
        );
        let insert = insert.bind(&id).bind(channel_id).bind(title).bind(now_ms);
        self.execute(here!(), insert).await?;
        Ok(id)
    }

    /// The channel `channel_id` (of any kind: a dm is a channel row) if it is in `workspace_id`
    /// and `member_id` belongs to it.
    pub async fn channel_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        channel_id: &str,
    ) -> Result<Option<Membership>, StoreError> {
        self.member_channel(workspace_id, member_id, channel_id, None)
            .await
    }

    /// The channel row `channel_id`, of `kind` when given, if it is in `workspace_id` and
    /// `member_id` belongs to it.
    pub(super) async fn member_channel(
        &self,
        workspace_id: &str,
        member_id: &str,
        channel_id: &str,
        kind: Option<&str>,
    ) -> Result<Option<Membership>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT c.id FROM channels c JOIN channel_members m ON m.channel_id = c.id \
                 WHERE c.id = $1 AND c.workspace_id = $2 AND m.member_id = $3 AND ($4 IS NULL OR c.kind = $4)",
            )
            .bind(channel_id)
            .bind(workspace_id)
            .bind(member_id)
            .bind(kind)
            .fetch_optional(reader)
            .await?;
            Ok(row.map(|row| Membership {
                channel_id: row.get(0),
                thread_id: None,
            }))
        })
    }

    /// The thread `thread_id` if its channel is in `workspace_id` and `member_id` belongs to it.
    pub async fn thread_for_member(
        &self,
        workspace_id: &str,
        member_id: &str,
        thread_id: &str,
    ) -> Result<Option<Membership>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(
                "SELECT c.id, t.id FROM threads t JOIN channels c ON c.id = t.channel_id JOIN channel_members m ON m.channel_id = c.id \
                 WHERE t.id = $1 AND c.workspace_id = $2 AND m.member_id = $3",
            )
            .bind(thread_id)
            .bind(workspace_id)
            .bind(member_id)
            .fetch_optional(reader)
            .await?;
            Ok(row.map(|row| Membership {
                channel_id: row.get(0),
                thread_id: Some(row.get(1)),
            }))
        })
    }
}

/// What a profile change writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileChange {
    pub display_name: String,
    pub description: Option<String>,
    /// `available`, `busy` or `away`.
    pub status: String,
}

macro_rules! profile_columns {
    () => {
        "g.id, g.handle, g.display_name, g.description, g.profile_status, g.profile_revision, COALESCE(g.profile_updated_at, g.created_at)"
    };
}

pub(super) fn profile_row(
    row: &impl super::Columns,
) -> Result<crate::contract::types::PublicProfile, StoreError> {
    let mut value = serde_json::json!({
        "agentId": row.column::<String>(0)?,
        "handle": row.column::<String>(1)?,
        "displayName": row.column::<String>(2)?,
        "status": row.column::<String>(4)?,
        "revision": row.column::<i64>(5)?,
        "updatedAt": super::rfc3339(row.column(6)?),
    });
    if let Some(description) = row.column::<Option<String>>(3)? {
        value["description"] = serde_json::Value::from(description);
    }
    serde_json::from_value(value).map_err(|_| StoreError::Corrupt { column: "agents" })
}

impl Store {
    /// The workspace `workspace_id`: `(name, created_at)`.
    pub async fn workspace(&self, workspace_id: &str) -> Result<Option<(String, i64)>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            Ok(sqlx::query_as::<_, (String, i64)>(
                "SELECT name, created_at FROM workspaces WHERE id = $1",
            )
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?)
        })
    }

    /// The public profile of the workspace's agent `agent_id`.
    pub async fn profile(
        &self,
        workspace_id: &str,
        agent_id: &str,
    ) -> Result<Option<crate::contract::types::PublicProfile>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row = sqlx::query(concat!(
                "SELECT ",
                profile_columns!(),
                " FROM agents g WHERE g.id = $1 AND g.workspace_id = $2"
            ))
            .bind(agent_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            row.as_ref().map(profile_row).transpose()
        })
    }

    /// Reads the agent's profile, lets `change` decide, writes it with `revision + 1`; one
    /// transaction. The only writer of an agent's display name and description after creation.
    pub async fn change_profile<E>(
        &self,
        workspace_id: &str,
        agent_id: &str,
        now_ms: i64,
        change: impl FnOnce(&crate::contract::types::PublicProfile) -> Result<ProfileChange, E>,
    ) -> Result<Option<Result<crate::contract::types::PublicProfile, E>>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let row = sqlx::query(if pg {
                concat!(
                    "SELECT ",
                    profile_columns!(),
                    " FROM agents g WHERE g.id = $1 AND g.workspace_id = $2 FOR UPDATE"
                )
            } else {
                concat!(
                    "SELECT ",
                    profile_columns!(),
                    " FROM agents g WHERE g.id = $1 AND g.workspace_id = $2"
                )
            })
            .bind(agent_id)
            .bind(workspace_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let current = profile_row(&row)?;
            let changed = match change(&current) {
                Ok(changed) => changed,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            sqlx::query(
                "UPDATE agents SET display_name = $2, description = $3, profile_status = $4, profile_revision = profile_revision + 1, profile_updated_at = $5 WHERE id = $1",
            )
            .bind(agent_id)
            .bind(&changed.display_name)
            .bind(changed.description.as_deref())
            .bind(&changed.status)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let row = sqlx::query(concat!(
                "SELECT ",
                profile_columns!(),
                " FROM agents g WHERE g.id = $1"
            ))
            .bind(agent_id)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(Ok(profile_row(&row)?)))
        })
    }
}
