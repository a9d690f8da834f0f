//! The SQLite database as a file: a URL that names one in memory is refused (it would keep
//! nothing once the server stops), and one server process holds each database file.

use sqlx::sqlite::SqliteConnectOptions;

use super::StoreError;

/// Whether a `sqlite:` URL names a database in memory (`sqlite::memory:`, `sqlite://:memory:`,
/// no path at all, or `mode=memory`): the server refuses one, as it keeps nothing.
pub(super) fn sqlite_in_memory(url: &str) -> bool {
    let rest = url.strip_prefix("sqlite:").unwrap_or(url);
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    path.is_empty()
        || path == ":memory:"
        || query
            .split('&')
            .any(|pair| pair.eq_ignore_ascii_case("mode=memory"))
}

/// One server process per SQLite database: an exclusive `flock` on `<database>.server-lock`,
/// held until the process ends (or dies). The server's writer is then the database's only one,
/// so what the process caches about the database (device authentications) is invalidated by the
/// writes that change it. PostgreSQL replicas share their database and cache nothing.
pub(crate) struct DatabaseLock(#[allow(dead_code)] std::fs::File);

impl DatabaseLock {
    pub(super) fn take(options: &SqliteConnectOptions) -> Result<DatabaseLock, StoreError> {
        use crate::platform::fs::PrivateOpen;
        let path = options.get_filename();
        // Named from the database's real path: a second server given a symbolic link to the
        // same file (or a path through one) finds the same lock. The file exists by now or is
        // about to: its directory is resolved, and the name kept.
        let real = match (path.parent(), path.file_name()) {
            (Some(dir), Some(file)) => {
                let dir = if dir.as_os_str().is_empty() {
                    std::path::Path::new(".")
                } else {
                    dir
                };
                let resolved = std::fs::canonicalize(path)
                    .or_else(|_| std::fs::canonicalize(dir).map(|dir| dir.join(file)));
                resolved.map_err(StoreError::Lock)?
            }
            _ => path.to_path_buf(),
        };
        let mut name = real.as_os_str().to_owned();
        name.push(".server-lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .owner_only()
            .open(&name)
            .map_err(StoreError::Lock)?;
        crate::platform::lock::try_lock_exclusive(&file)
            .map_err(|_| StoreError::InUse(path.display().to_string()))?;
        Ok(DatabaseLock(file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::db::Db;

    /// A second server on the same SQLite database is refused while the first holds it, and
    /// starts once the first is gone.
    #[tokio::test]
    async fn one_server_process_per_sqlite_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let url = format!("sqlite://{}", path.display());
        let first = Db::open(&url).await.unwrap();
        let Err(error) = Db::open(&url).await else {
            panic!("a second opener got the database");
        };
        assert_eq!(
            error.to_string(),
            format!(
                "the SQLite database `{}` is in use by another agentteam server",
                path.display()
            )
        );
        // The same file by another name: a link to it, and a path through a linked directory.
        let linked_dir = dir.path().join("linked");
        crate::platform::fs::symlink(dir.path(), &linked_dir).unwrap();
        crate::platform::fs::symlink(&path, &dir.path().join("link.db")).unwrap();
        for other in [dir.path().join("link.db"), linked_dir.join("s.db")] {
            let Err(error) = Db::open(&format!("sqlite://{}", other.display())).await else {
                panic!("{} got the database", other.display());
            };
            assert!(matches!(error, StoreError::InUse(_)), "{error}");
        }
        first.close().await;
        drop(first);
        Db::open(&url).await.unwrap();
    }

    /// A database in memory is refused by name, before anything is created: it would keep
    /// nothing once the server stops.
    #[tokio::test]
    async fn an_in_memory_database_is_refused() {
        for url in [
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite:",
            "sqlite://",
            "sqlite://?mode=memory",
            "sqlite://s.db?mode=memory&cache=shared",
        ] {
            let Err(error) = Db::open(url).await else {
                panic!("{url} opened");
            };
            assert!(matches!(error, StoreError::InMemory), "{url}: {error}");
        }
        assert!(!sqlite_in_memory("sqlite://s.db"));
        assert!(!sqlite_in_memory("sqlite:///tmp/memory.db?mode=rwc"));
    }
}
