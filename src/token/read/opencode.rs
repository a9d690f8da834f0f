//! OpenCode's sessions, from its SQLite database opened read-only: an ordinary WAL reader that
//! never blocks OpenCode's writer and never checkpoints (never `immutable`, which can read torn
//! pages while OpenCode writes).

use std::path::Path;

use futures_util::TryStreamExt;
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{Connection, Row};

use crate::daemon::runtime::driver::Family;

use crate::token::session::{Builder, Session, Usage};

pub fn read(path: &Path, tokenize: bool) -> std::io::Result<Vec<Session>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime
        .block_on(sessions(path, tokenize))
        .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))
}

async fn sessions(path: &Path, tokenize: bool) -> Result<Vec<Session>, sqlx::Error> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .create_if_missing(false);
    let mut db = SqliteConnection::connect_with(&options).await?;
    let ids: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT id, directory FROM session ORDER BY time_created, id")
            .fetch_all(&mut db)
            .await?;
    let shell = Family::Opencode.shell_tool().unwrap_or("bash");
    let mut out = Vec::new();
    for (id, directory) in ids {
        let mut b = Builder::new(Family::Opencode, id.clone(), path.to_path_buf(), tokenize);
        b.cwd = directory;
        // Each assistant message is one request; its tool parts follow it in the conversation.
        let mut rows = sqlx::query(
            "SELECT m.id, m.time_created, m.data, \
                    p.id AS part, json_extract(p.data, '$.type') AS kind, \
                    json_extract(p.data, '$.tool') AS tool, json_extract(p.data, '$.callID') AS call, \
                    json_extract(p.data, '$.state.input.command') AS command, \
                    CASE WHEN json_extract(p.data, '$.tool') = ?2 \
                           OR json_extract(p.data, '$.tool') LIKE 'mcp\\_agentteam\\_%' ESCAPE '\\' \
                         THEN coalesce(json_extract(p.data, '$.state.output'), json_extract(p.data, '$.state.error')) END AS output \
             FROM message m LEFT JOIN part p ON p.message_id = m.id \
                  AND CASE WHEN json_valid(p.data) THEN json_extract(p.data, '$.type') END \
                      IN ('tool', 'compaction') \
             WHERE m.session_id = ?1 \
             ORDER BY m.time_created, m.id, p.id",
        )
        .bind(&id)
        .bind(shell)
        .fetch(&mut db);
        let mut current: Option<String> = None;
        while let Some(row) = rows.try_next().await? {
            let message: String = row.try_get(0)?;
            if current.as_deref() != Some(message.as_str()) {
                current = Some(message);
                let created: i64 = row.try_get(1).unwrap_or(0);
                if let Some(at) = chrono::DateTime::from_timestamp_millis(created) {
                    b.time(&at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                }
                let data: String = row.try_get(2).unwrap_or_default();
                match serde_json::from_str::<Value>(&data) {
                    Ok(data) if data["role"] == "assistant" => {
                        if let Some(model) = data["modelID"].as_str() {
                            b.model = Some(model.to_string());
                        }
                        let tokens = &data["tokens"];
                        let n = |p: &str| tokens.pointer(p).and_then(Value::as_u64).unwrap_or(0);
                        b.request(
                            None,
                            Usage {
                                input: n("/input"),
                                output: n("/output").saturating_add(n("/reasoning")),
                                cache_read: n("/cache/read"),
                                cache_write: n("/cache/write"),
                            },
                        );
                    }
                    Ok(_) => {}
                    Err(_) => b.malformed += 1,
                }
            }
            // A value of another type than the runtime writes is no value: never fatal.
            let text = |column: &str| row.try_get::<Option<String>, _>(column).ok().flatten();
            let kind = text("kind");
            match kind.as_deref() {
                Some("tool") => {
                    let call = text("call").unwrap_or_default();
                    let tool = text("tool").unwrap_or_default();
                    let command = text("command");
                    b.call(&call, &tool, command.as_deref());
                    let output = text("output");
                    b.result(&call, output.as_deref().unwrap_or(""));
                }
                Some("compaction") => b.compaction(),
                _ => {}
            }
        }
        drop(rows);
        out.push(b.finish());
    }
    db.close().await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use sqlx::Executor;

    use super::*;

    async fn database(path: &Path) -> SqliteConnection {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
        let mut db = SqliteConnection::connect_with(&options).await.unwrap();
        db.execute(
            "PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT, time_created INTEGER);
             CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data TEXT);
             CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, data TEXT);
             INSERT INTO session VALUES ('ses_1', '/w', 1);
             INSERT INTO message VALUES ('msg_1', 'ses_1', 1, '{\"role\":\"user\"}');
             INSERT INTO message VALUES ('msg_2', 'ses_1', 2, '{\"role\":\"assistant\",\"modelID\":\"m\",\"tokens\":{\"input\":10,\"output\":5,\"reasoning\":1,\"cache\":{\"read\":100,\"write\":3}}}');
             INSERT INTO part VALUES ('prt_1', 'msg_2', 'ses_1', '{\"type\":\"tool\",\"tool\":\"mcp_agentteam_kb_search\",\"callID\":\"c1\",\"state\":{\"status\":\"completed\",\"input\":{},\"output\":\"found it\"}}');
             INSERT INTO part VALUES ('prt_2', 'msg_2', 'ses_1', '{\"type\":\"step-finish\",\"tokens\":{\"input\":10}}');
             INSERT INTO part VALUES ('prt_3', 'msg_2', 'ses_1', '{not json');
             INSERT INTO part VALUES ('prt_4', 'msg_2', 'ses_1', '{\"type\":\"tool\",\"tool\":7,\"callID\":[1]}');
             INSERT INTO message VALUES ('msg_3', 'ses_1', 3, '{\"role\":\"assistant\",\"tokens\":{\"input\":20,\"output\":5,\"cache\":{\"read\":0,\"write\":0}}}');",
        )
        .await
        .unwrap();
        db
    }

    fn bytes_of(path: &Path) -> Vec<(String, Vec<u8>)> {
        ["", "-wal"]
            .iter()
            .map(|suffix| {
                let file = format!("{}{suffix}", path.display());
                (file.clone(), std::fs::read(&file).unwrap_or_default())
            })
            .collect()
    }

    #[test]
    fn the_database_is_read_beside_a_writer_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opencode.db");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // OpenCode's own connection stays open, its rows still in the WAL, and starts a write
        // it has not committed.
        let mut writer = runtime.block_on(database(&path));
        runtime.block_on(async {
            writer.execute("BEGIN IMMEDIATE").await.unwrap();
            writer
                .execute("INSERT INTO message VALUES ('msg_9', 'ses_1', 9, '{\"role\":\"assistant\",\"tokens\":{\"input\":999}}')")
                .await
                .unwrap();
        });
        let before = bytes_of(&path);
        assert!(!before[1].1.is_empty(), "the rows are in the WAL");
        let sessions = read(&path, true).unwrap();
        assert_eq!(
            bytes_of(&path),
            before,
            "the reader wrote to OpenCode's files"
        );
        assert_eq!(sessions.len(), 1);
        let s = &sessions[0];
        // The uncommitted request is not read; the step-finish copy of a message's tokens is not
        // counted again.
        assert_eq!(s.requests, 2);
        assert_eq!(s.usage.input, 30);
        assert_eq!(
            (s.usage.output, s.usage.cache_read, s.usage.cache_write),
            (11, 100, 3)
        );
        assert_eq!(s.calls.len(), 1);
        assert_eq!((s.calls[0].result_bytes, s.calls[0].carried_by), (8, 1));
        runtime.block_on(async { writer.execute("ROLLBACK").await.unwrap() });
    }
}
