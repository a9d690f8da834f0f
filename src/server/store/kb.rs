//! The knowledge base's records (the MeshX role): sources, their grants to channels and teams,
//! documents, and full-text search over them inside the server's database.
//!
//! SQLite: an FTS5 table over the documents (external content, kept in step by triggers),
//! `porter unicode61 remove_diacritics 2`, BM25 with the title weighted 3× the body; the source
//! filter is a token inside the `MATCH` expression (a plain join plans the FTS scan per allowed
//! document).
//!
//! PostgreSQL: generated `tsvector` columns under GIN (`tsv` of the whole document, `title_tsv`
//! of the title alone), scored by IDF-weighted `ts_rank`, with each lexeme's document frequency
//! (and, under the empty lexeme, the document count) kept by a trigger in `kb_lexeme_df`:
//! `ts_rank` alone ranks a frequent word as high as a rare one.
//!
//! On both, a word in more than half the documents is left out of the ranked query: it carries
//! (next to) no weight, and scoring its every match is what makes a common-word query slow. It
//! ranks titles alone when the query has nothing else, and fills the answer, unranked, when the
//! informative words match too few documents. CJK text goes to a bigram column on both
//! (`search::cjk_column`).

use super::{Columns, Store, StoreError, new_id, on_backend};
use crate::search::{self, Query};

/// The SQLite search's columns for `MATCH $1` (the CJK needle `$2`): id, title, the engine's
/// snippet, the score, and where the CJK needle is in the body with a window around it.
macro_rules! kb_fts_select {
    () => {
        "SELECT d.id, d.title, snippet(kb_fts, 1, '[', ']', '…', 24), -rank, \
                CASE WHEN $2 = '' THEN 0 ELSE instr(d.body, $2) END, \
                CASE WHEN $2 = '' THEN '' ELSE substr(d.body, max(instr(d.body, $2) - 60, 1), 160) END \
         FROM kb_fts JOIN kb_documents d ON d.seq = kb_fts.rowid WHERE kb_fts MATCH $1"
    };
}

/// The PostgreSQL search: the documents of the sources `$2` (a JSON array) whose `$vector`
/// (`k.tsv`, or `k.title_tsv` for titles alone) matches one of the lexemes `$1` (a JSON array of
/// `{lexeme, idf}`), in `$order`, at most `$3`, scored by the IDF-weighted `ts_rank` of each lexeme
/// in that vector; then, for those rows only, the snippet (`ts_headline` of the lexemes `$4`) and
/// the CJK needle `$5`'s place and window.
macro_rules! kb_pg_search {
    ($vector:literal, $order:literal) => {
        concat!(
            "WITH t AS (SELECT x.lexeme, quote_literal(x.lexeme)::tsquery AS tq, x.idf \
                        FROM json_to_recordset($1::json) AS x(lexeme text, idf float8)), \
                  q AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tq FROM t), \
                  top AS (SELECT k.seq, k.id, CAST((SELECT SUM(t.idf * ts_rank(",
            $vector,
            ", t.tq)) FROM t) AS float8) AS score \
                          FROM kb_documents k, q \
                          WHERE ",
            $vector,
            " @@ q.tq AND k.source_id IN (SELECT json_array_elements_text($2::json)) ",
            $order,
            " LIMIT $3), \
                  h AS (SELECT string_agg(quote_literal(value), ' | ')::tsquery AS tq FROM json_array_elements_text($4::json)) \
             SELECT k.id, k.title, \
                    ts_headline('english'::regconfig, k.body, h.tq, 'StartSel=[,StopSel=],MaxWords=24,MinWords=8,ShortWord=0,MaxFragments=1,FragmentDelimiter=…'), \
                    top.score, \
                    CAST(CASE WHEN $5 = '' THEN 0 ELSE strpos(k.body, $5) END AS BIGINT), \
                    CASE WHEN $5 = '' THEN '' ELSE substr(k.body, GREATEST(strpos(k.body, $5) - 60, 1), 160) END \
             FROM top JOIN kb_documents k ON k.seq = top.seq, h \
             ORDER BY top.score DESC, k.id"
        )
    };
}

/// A search row (id, title, the engine's snippet, score, the CJK needle's place, the window
/// around it) as a hit.
fn search_hit(row: &impl Columns, cjk_needle: &str) -> Result<Hit, StoreError> {
    let snippet: String = row.column(2)?;
    let score: f64 = row.column(3)?;
    let cjk_at: i64 = row.column(4)?;
    let window: String = row.column(5)?;
    // The engine's snippet, unless the match was a CJK run it cannot highlight.
    let snippet = if !snippet.contains('[') && cjk_at > 0 {
        search::snippet_around(&window, cjk_needle, 120).unwrap_or(snippet)
    } else {
        snippet
    };
    Ok(Hit {
        id: row.column(0)?,
        title: row.column(1)?,
        snippet: snippet.chars().take(600).collect(),
        score: score.max(0.0),
    })
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub id: String,
    pub title: String,
    pub snippet: String,
    /// Higher is better; comparable within one search only.
    pub score: f64,
}

/// A stored document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub id: String,
    pub source_id: String,
    pub title: String,
    pub body: String,
}

/// The token a source's documents carry in the index (letters and digits only, so one token).
pub fn source_token(source_id: &str) -> String {
    let mut token = String::from("src");
    token.extend(
        source_id
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase()),
    );
    token
}

impl Store {
    /// A new source of the workspace; `None` when the name is taken.
    pub async fn create_kb_source(
        &self,
        workspace_id: &str,
        name: &str,
        now_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let id = new_id("kbs", now_ms);
            let inserted = sqlx::query(
                "INSERT INTO kb_sources (id, workspace_id, name, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(&id)
            .bind(workspace_id)
            .bind(name)
            .bind(now_ms)
            .execute(writer)
            .await?;
            Ok((inserted.rows_affected() == 1).then_some(id))
        })
    }

    /// Grants the workspace's source to one of its channels (and so their threads and tasks) or
    /// teams; `Ok(false)` when the source or the grantee is not in the workspace.
    pub async fn grant_kb_source(
        &self,
        workspace_id: &str,
        source_id: &str,
        grantee_kind: &str,
        grantee_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let grantee = if grantee_kind == "channel" {
                "SELECT 1 FROM channels WHERE id = $1 AND workspace_id = $2"
            } else {
                "SELECT 1 FROM teams WHERE id = $1 AND workspace_id = $2"
            };
            let found = sqlx::query(grantee)
                .bind(grantee_id)
                .bind(workspace_id)
                .fetch_optional(writer)
                .await?;
            let source =
                sqlx::query("SELECT 1 FROM kb_sources WHERE id = $1 AND workspace_id = $2")
                    .bind(source_id)
                    .bind(workspace_id)
                    .fetch_optional(writer)
                    .await?;
            if found.is_none() || source.is_none() {
                return Ok(false);
            }
            sqlx::query(
                "INSERT INTO kb_grants (source_id, grantee_kind, grantee_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(source_id)
            .bind(grantee_kind)
            .bind(grantee_id)
            .bind(now_ms)
            .execute(writer)
            .await?;
            Ok(true)
        })
    }

    /// Adds a document to the workspace's source, or replaces the one at the same `path`:
    /// `(document id, created)`; `None` when the source is not in the workspace.
    pub async fn put_kb_document(
        &self,
        workspace_id: &str,
        source_id: &str,
        path: &str,
        title: &str,
        body: &str,
        now_ms: i64,
    ) -> Result<Option<(String, bool)>, StoreError> {
        let cjk = search::cjk_column(&format!("{title}\n{body}"));
        let token = source_token(source_id);
        on_backend!(self, |writer, reader, pg| {
            let mut tx = writer.begin().await?;
            let source =
                sqlx::query("SELECT 1 FROM kb_sources WHERE id = $1 AND workspace_id = $2")
                    .bind(source_id)
                    .bind(workspace_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            if source.is_none() {
                return Ok(None);
            }
            let existing: Option<(String,)> =
                sqlx::query_as("SELECT id FROM kb_documents WHERE source_id = $1 AND path = $2")
                    .bind(source_id)
                    .bind(path)
                    .fetch_optional(&mut *tx)
                    .await?;
            let result = match existing {
                Some((id,)) => {
                    sqlx::query("UPDATE kb_documents SET title = $2, body = $3, cjk = $4, updated_at = $5 WHERE id = $1")
                        .bind(&id)
                        .bind(title)
                        .bind(body)
                        .bind(&cjk)
                        .bind(now_ms)
                        .execute(&mut *tx)
                        .await?;
                    (id, false)
                }
                None => {
                    let id = new_id("kbd", now_ms);
                    sqlx::query(
                        "INSERT INTO kb_documents (id, source_id, src_tok, path, title, body, cjk, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
                    )
                    .bind(&id)
                    .bind(source_id)
                    .bind(&token)
                    .bind(path)
                    .bind(title)
                    .bind(body)
                    .bind(&cjk)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                    (id, true)
                }
            };
            tx.commit().await?;
            Ok(Some(result))
        })
    }

    /// The sources of the workspace granted to `channel_id`: granted to the channel itself (which
    /// covers its threads and the tasks in them), or to a team one of whose members belongs to the
    /// channel (a team grant covers the channels and dms of its members).
    pub async fn kb_sources_for_channel(
        &self,
        workspace_id: &str,
        channel_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let rows: Vec<(String,)> = sqlx::query_as(
                "SELECT DISTINCT g.source_id FROM kb_grants g JOIN kb_sources s ON s.id = g.source_id \
                 WHERE s.workspace_id = $1 AND ( \
                   (g.grantee_kind = 'channel' AND g.grantee_id = $2) \
                   OR (g.grantee_kind = 'team' AND EXISTS ( \
                        SELECT 1 FROM team_members tm JOIN channel_members cm ON cm.member_id = tm.member_id \
                        WHERE tm.team_id = g.grantee_id AND cm.channel_id = $2))) \
                 ORDER BY g.source_id",
            )
            .bind(workspace_id)
            .bind(channel_id)
            .fetch_all(reader)
            .await?;
            Ok(rows.into_iter().map(|(id,)| id).collect())
        })
    }

    /// The best `limit` documents of `sources` for `query`, best first, each with a snippet that
    /// brackets the matched words.
    pub async fn kb_search(
        &self,
        query: &Query,
        sources: &[String],
        limit: i64,
    ) -> Result<Vec<Hit>, StoreError> {
        if query.is_empty() || sources.is_empty() {
            return Ok(Vec::new());
        }
        // A CJK run is located in the body for its snippet (neither engine highlights it).
        let cjk_needle = query.cjk.first().cloned().unwrap_or_default();
        on_backend!(self, |writer, reader, pg| {
            let (ranked, fill) = if pg {
                let words = query.words.join(" ");
                let bigrams: String = query
                    .cjk
                    .iter()
                    .map(|run| search::bigrams(run).join(" "))
                    .collect::<Vec<_>>()
                    .join(" ");
                // The query's lexemes as the index holds them, each with its document
                // frequency, and the document count (kept under the empty lexeme).
                let stats: Vec<(String, i64)> = sqlx::query_as(
                    "WITH terms AS (SELECT l AS lexeme FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, $1))) AS l \
                                    UNION SELECT l FROM unnest(tsvector_to_array(to_tsvector('simple'::regconfig, $2))) AS l) \
                     SELECT terms.lexeme, COALESCE(d.df, 0) FROM terms LEFT JOIN kb_lexeme_df d ON d.lexeme = terms.lexeme \
                     UNION ALL SELECT '', COALESCE((SELECT df FROM kb_lexeme_df WHERE lexeme = ''), 0)",
                )
                .bind(words)
                .bind(bigrams)
                .fetch_all(reader)
                .await?;
                let total = stats
                    .iter()
                    .find(|(lexeme, _)| lexeme.is_empty())
                    .map_or(0, |(_, count)| *count)
                    .max(1);
                let weighted = |lexemes: &[&(String, i64)]| {
                    let weighted: Vec<serde_json::Value> = lexemes
                        .iter()
                        .map(|(lexeme, df)| {
                            let (n, df) = (total as f64, *df as f64);
                            serde_json::json!({
                                "lexeme": lexeme,
                                "idf": (1.0 + (n - df + 0.5) / (df + 0.5)).ln(),
                            })
                        })
                        .collect();
                    serde_json::Value::from(weighted).to_string()
                };
                let lexemes: Vec<&(String, i64)> = stats
                    .iter()
                    .filter(|(lexeme, _)| !lexeme.is_empty())
                    .collect();
                let (common, rare): (Vec<_>, Vec<_>) =
                    lexemes.iter().copied().partition(|(_, df)| *df > total / 2);
                let highlight = serde_json::Value::from(
                    lexemes
                        .iter()
                        .map(|(lexeme, _)| lexeme.as_str())
                        .collect::<Vec<_>>(),
                )
                .to_string();
                let sources = serde_json::to_string(sources).expect("strings serialize");
                // Ranked: the informative lexemes; with none, the common ones in titles only.
                let ranked = if !rare.is_empty() {
                    sqlx::query(kb_pg_search!("k.tsv", "ORDER BY score DESC, k.id"))
                } else if !common.is_empty() {
                    sqlx::query(kb_pg_search!("k.title_tsv", "ORDER BY score DESC, k.id"))
                } else {
                    return Ok(Vec::new());
                };
                // The planner costs a sequential scan by the heap alone, but each row it
                // filters detoasts a `tsvector` of kilobytes: with statistics, it picks that scan
                // over the GIN index even for a lexeme few documents have, where the index is
                // far cheaper.
                let mut tx = reader.begin().await?;
                sqlx::query("SET LOCAL enable_seqscan = off")
                    .execute(&mut *tx)
                    .await?;
                let rows = ranked
                    .bind(weighted(if rare.is_empty() { &common } else { &rare }))
                    .bind(&sources)
                    .bind(limit)
                    .bind(&highlight)
                    .bind(&cjk_needle)
                    .fetch_all(&mut *tx)
                    .await?;
                let fill = if (rows.len() as i64) < limit && !common.is_empty() {
                    // Unranked: the first documents with a common lexeme.
                    sqlx::query(kb_pg_search!("k.tsv", ""))
                        .bind(weighted(&common))
                        .bind(&sources)
                        .bind(limit + rows.len() as i64)
                        .bind(&highlight)
                        .bind(&cjk_needle)
                        .fetch_all(&mut *tx)
                        .await?
                } else {
                    Vec::new()
                };
                tx.commit().await?;
                (rows, fill)
            } else {
                let tokens: Vec<String> = sources.iter().map(|s| source_token(s)).collect();
                // A word in more than half the documents carries no weight in FTS5's BM25 (its
                // IDF is clamped to 1e-6) but is the costliest part of ranking (every match is
                // scored): it is left out of the ranked query, and only fills the answer when
                // the informative words match too few documents.
                let total: i64 = sqlx::query_scalar("SELECT count(*) FROM kb_documents")
                    .fetch_one(reader)
                    .await?;
                let half = total / 2;
                let (mut rare, mut common) = (Vec::new(), Vec::new());
                for word in &query.words {
                    let Some(single) = search::fts5_expression(
                        std::slice::from_ref(word),
                        &[],
                        "title body",
                        None,
                    ) else {
                        continue;
                    };
                    let hits: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM (SELECT 1 FROM kb_fts WHERE kb_fts MATCH $1 LIMIT $2)",
                    )
                    .bind(single)
                    .bind(half + 1)
                    .fetch_one(reader)
                    .await?;
                    if hits > half {
                        common.push(word.clone())
                    } else {
                        rare.push(word.clone())
                    }
                }

                // Ranked: the informative words and CJK runs; with none, the common words in
                // titles only (short, so cheap to rank).
                let ranked = if rare.is_empty() && query.cjk.is_empty() {
                    search::fts5_expression(&common, &[], "title", Some(&tokens))
                } else {
                    search::fts5_expression(&rare, &query.cjk, "title body", Some(&tokens))
                };
                let rows = match ranked {
                    Some(expression) => {
                        sqlx::query(concat!(kb_fts_select!(), " ORDER BY rank LIMIT $3"))
                            .bind(expression)
                            .bind(&cjk_needle)
                            .bind(limit)
                            .fetch_all(reader)
                            .await?
                    }
                    None => Vec::new(),
                };
                let fill = match search::fts5_expression(&common, &[], "title body", Some(&tokens))
                {
                    // Unranked (their BM25 is ~0 anyway): the first documents in index order.
                    Some(expression) if (rows.len() as i64) < limit => {
                        sqlx::query(concat!(kb_fts_select!(), " LIMIT $3"))
                            .bind(expression)
                            .bind(&cjk_needle)
                            .bind(limit + rows.len() as i64)
                            .fetch_all(reader)
                            .await?
                    }
                    _ => Vec::new(),
                };
                (rows, fill)
            };
            // Ranked hits best first, then the fill's, scored 0: they were not ranked.
            let hit = |row| search_hit(row, &cjk_needle);
            let mut hits = ranked.iter().map(hit).collect::<Result<Vec<Hit>, _>>()?;
            for row in &fill {
                if hits.len() as i64 >= limit {
                    break;
                }
                let fill_hit = hit(row)?;
                if hits.iter().all(|ranked| ranked.id != fill_hit.id) {
                    hits.push(Hit {
                        score: 0.0,
                        ..fill_hit
                    });
                }
            }
            Ok(hits)
        })
    }

    /// Document `document_id` if its source is among `sources`.
    pub async fn kb_document(
        &self,
        document_id: &str,
        sources: &[String],
    ) -> Result<Option<Document>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            let row: Option<(String, String, String, String)> =
                sqlx::query_as("SELECT id, source_id, title, body FROM kb_documents WHERE id = $1")
                    .bind(document_id)
                    .fetch_optional(reader)
                    .await?;
            Ok(row
                .filter(|(_, source, _, _)| sources.contains(source))
                .map(|(id, source_id, title, body)| Document {
                    id,
                    source_id,
                    title,
                    body,
                }))
        })
    }
}

/// Why Core refused a turn's target (each its own message; all at `target_scope_resolution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeRefusal {
    /// No such target anywhere.
    NoTarget,
    /// The target is in another workspace.
    OtherWorkspace,
    /// The target is not of the stated type (a `channel:` naming a dm, and so on).
    ScopeType,
    /// The message does not exist or is not in the target.
    MessageOutsideTarget,
    /// The message was not written by a human.
    NotHuman,
    /// The agent is not a member of the target's conversation.
    CannotRead,
    /// A `task` target whose task has no thread.
    TaskWithoutThread,
}

impl Store {
    /// Core's revalidation of a turn: the target (`channel`, `dm`, `thread` or `task`, by id) is
    /// in the workspace and of that type, the message is in it (a channel's or dm's own messages,
    /// a thread's, or the thread of a task) and was written by a human of the workspace, and the
    /// agent is a member of its conversation. Returns the conversation's channel.
    pub async fn resolve_turn(
        &self,
        workspace_id: &str,
        agent_id: &str,
        kind: &str,
        key: &str,
        message_id: &str,
    ) -> Result<Result<String, ScopeRefusal>, StoreError> {
        on_backend!(self, |writer, reader, pg| {
            // (workspace, channel kind, channel, thread) of the target.
            let target: Option<(String, String, String, Option<String>)> = match kind {
                "channel" | "dm" => sqlx::query_as(
                    "SELECT workspace_id, kind, id, CAST(NULL AS TEXT) FROM channels WHERE id = $1",
                )
                .bind(key)
                .fetch_optional(reader)
                .await?,
                "thread" => sqlx::query_as(
                    "SELECT c.workspace_id, c.kind, c.id, t.id FROM threads t JOIN channels c ON c.id = t.channel_id WHERE t.id = $1",
                )
                .bind(key)
                .fetch_optional(reader)
                .await?,
                "task" => sqlx::query_as(
                    "SELECT k.workspace_id, c.kind, c.id, k.thread_id FROM tasks k JOIN channels c ON c.id = k.channel_id WHERE k.id = $1",
                )
                .bind(key)
                .fetch_optional(reader)
                .await?,
                _ => None,
            };
            let Some((workspace, channel_kind, channel_id, thread_id)) = target else {
                return Ok(Err(ScopeRefusal::NoTarget));
            };
            if workspace != workspace_id {
                return Ok(Err(ScopeRefusal::OtherWorkspace));
            }
            let expected_kind = if kind == "dm" { "dm" } else { "channel" };
            if channel_kind != expected_kind {
                return Ok(Err(ScopeRefusal::ScopeType));
            }
            if kind == "task" && thread_id.is_none() {
                return Ok(Err(ScopeRefusal::TaskWithoutThread));
            }
            let message: Option<(String, Option<String>, String)> = sqlx::query_as(
                "SELECT channel_id, thread_id, author_id FROM messages WHERE id = $1 AND workspace_id = $2",
            )
            .bind(message_id)
            .bind(workspace_id)
            .fetch_optional(reader)
            .await?;
            let Some((message_channel, message_thread, author)) = message else {
                return Ok(Err(ScopeRefusal::MessageOutsideTarget));
            };
            if message_channel != channel_id || message_thread != thread_id {
                return Ok(Err(ScopeRefusal::MessageOutsideTarget));
            }
            let human = sqlx::query("SELECT 1 FROM humans WHERE id = $1 AND workspace_id = $2")
                .bind(&author)
                .bind(workspace_id)
                .fetch_optional(reader)
                .await?;
            if human.is_none() {
                return Ok(Err(ScopeRefusal::NotHuman));
            }
            let member = sqlx::query(
                "SELECT 1 FROM channel_members WHERE channel_id = $1 AND member_id = $2",
            )
            .bind(&channel_id)
            .bind(agent_id)
            .fetch_optional(reader)
            .await?;
            if member.is_none() {
                return Ok(Err(ScopeRefusal::CannotRead));
            }
            Ok(Ok(channel_id))
        })
    }
}
