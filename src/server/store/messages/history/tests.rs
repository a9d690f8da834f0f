//! The history pages: their statements' plans, the written page against the typed one, and
//! the page byte bound on both.

use super::super::around::around_statements;
use super::*;
use crate::contract::types::MessageContent;
use crate::server::store::NewAttachment;

/// Every history page walks its index in order on SQLite, also once `ANALYZE` found a
/// conversation of 100,000 messages in a workspace of one channel (the statistics that made
/// the planner take the channels first and sort every message for one page).
#[tokio::test]
async fn a_page_reads_its_index_in_order_whatever_the_statistics_say() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ..) = crate::server::store::tests::people(dir.path()).await;
    let crate::server::store::db::Db::Sqlite { writer, .. } = &store.db else {
        unreachable!("the test store is SQLite")
    };
    sqlx::raw_sql(
        "ANALYZE; DELETE FROM sqlite_stat1 WHERE tbl IN ('messages', 'channels'); \
         INSERT INTO sqlite_stat1 VALUES ('messages', 'messages_by_location', '100000 100000 100000 1 1'), \
         ('messages', 'sqlite_autoindex_messages_1', '100000 1'), \
         ('channels', 'sqlite_autoindex_channels_1', '1 1'), ('channels', 'sqlite_autoindex_channels_2', '1 1 1'); \
         ANALYZE sqlite_schema;",
    )
    .execute(writer)
    .await
    .unwrap();
    let target = |kind| Target {
        kind,
        id: "x".into(),
    };
    let (channel, thread) = (target(TargetKind::Channel), target(TargetKind::Thread));
    let statements = [
        PageQuery::new("x", "x", &channel, None, 20),
        PageQuery::new("x", "x", &thread, None, 20),
    ];
    // Each statement with its parameters (`None`: NULL).
    let mut checked: Vec<(&str, Vec<Option<Bind<'_>>>)> = statements
        .iter()
        .flat_map(|q| {
            [q.typed, q.written].map(|sql| (sql, q.binds.iter().copied().map(Some).collect()))
        })
        .collect();
    // The statements around a message: a channel's (no thread) and a thread's.
    for (in_thread, thread) in [(false, None), (true, Some(Bind::Text("x")))] {
        let (newer, older) = around_statements(in_thread);
        let binds = vec![
            Some(Bind::Text("x")),
            thread,
            Some(Bind::Int(1)),
            Some(Bind::Text("x")),
            Some(Bind::Int(11)),
        ];
        checked.push((newer, binds.clone()));
        checked.push((older, binds));
    }
    for (sql, binds) in &checked {
        let mut plan = sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {sql}"
        )));
        for bind in binds {
            plan = match bind {
                Some(Bind::Int(value)) => plan.bind(*value),
                Some(Bind::Text(text)) => plan.bind(*text),
                None => plan.bind(None::<&str>),
            };
        }
        let plan = plan.fetch_all(writer).await.unwrap();
        let steps: Vec<&str> = plan.iter().map(|step| step.3.as_str()).collect();
        assert!(
            !steps.iter().any(|step| step.contains("TEMP B-TREE")),
            "{sql}: {steps:?}"
        );
    }
}

/// A conversation's unread count searches the messages' index by its channel and thread,
/// in a channel as in a thread.
#[tokio::test]
async fn an_unread_count_searches_its_own_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ..) = crate::server::store::tests::people(dir.path()).await;
    let crate::server::store::db::Db::Sqlite { writer, .. } = &store.db else {
        unreachable!("the test store is SQLite")
    };
    for (in_thread, thread) in [(false, None), (true, Some("x"))] {
        let sql = crate::server::store::people::unread_statement(in_thread);
        let plan = sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {sql}"
        )))
        .bind("x")
        .bind("x")
        .bind("x")
        .bind(thread)
        .fetch_all(writer)
        .await
        .unwrap();
        let steps: Vec<&str> = plan.iter().map(|step| step.3.as_str()).collect();
        assert!(
            steps
                .iter()
                .any(|step| step.contains("messages_by_location (channel_id=? AND thread_id=?")),
            "{sql}: {steps:?}"
        );
    }
}

/// The written page's content check is `MessageContent`'s, at both edges and with characters
/// of every width.
#[test]
fn content_is_checked_as_its_type_checks_it() {
    for unit in ["x", "\u{e9}", "\u{20ac}", "\u{1f600}"] {
        for n in [0, 1, 2, 999, 1000, 1001, 3999, 4000, 4001, 16001] {
            let text = unit.repeat(n);
            assert_eq!(
                content_is_valid(&text),
                text.parse::<MessageContent>().is_ok(),
                "{n} of {unit:?}"
            );
        }
    }
}

/// Every page of `target` for `member`, `limit` at a time, as the written text and the
/// position each page ends at, and the same pages typed and serialized.
async fn both_ways(
    store: &Store,
    workspace: &str,
    member: &str,
    target: &Target,
    limit: usize,
) -> Option<(
    Vec<(String, Option<Position>)>,
    Vec<(String, Option<Position>)>,
)> {
    let (mut written, mut typed) = (Vec::new(), Vec::new());
    let mut after: Option<Position> = None;
    loop {
        let mut out = Vec::new();
        let next = store
            .history_written_for_member(workspace, member, target, after.as_ref(), limit, &mut out)
            .await
            .unwrap()?;
        written.push((String::from_utf8(out).unwrap(), next.clone()));
        let done = next.is_none();
        after = next;
        if done {
            break;
        }
    }
    let mut after: Option<Position> = None;
    loop {
        let page = store
            .history_for_member(workspace, member, target, after.as_ref(), limit)
            .await
            .unwrap()
            .expect("the typed read finds what the written one found");
        typed.push((
            serde_json::to_string(&page.items).unwrap(),
            page.next.clone(),
        ));
        if page.next.is_none() {
            break;
        }
        after = page.next;
    }
    Some((written, typed))
}

/// A written page is byte for byte its typed page serialized, with the same position, for a
/// channel, a dm and a thread, on the caller's thread and through the pooled readers: escapes,
/// non-ASCII text, the longest content, two authors, reactions (the caller's and others'),
/// attachments, and pages of 1, 2 and 100.
#[tokio::test]
async fn a_written_page_is_its_typed_page_serialized() {
    let dir = tempfile::tempdir().unwrap();
    let (store, wsp, human, member, outsider) =
        crate::server::store::tests::people(dir.path()).await;
    let channel = store
        .create_channel(&wsp, "general", &[member.clone(), human.clone()], 1)
        .await
        .unwrap()
        .unwrap();
    let dm = store.open_dm(&wsp, &member, &human, 1).await.unwrap();
    let thread = store.create_thread(&channel, "t", 1).await.unwrap();
    let quiet_thread = store.create_thread(&channel, "quiet", 1).await.unwrap();
    let empty = store
        .create_channel(&wsp, "quiet", std::slice::from_ref(&member), 1)
        .await
        .unwrap()
        .unwrap();
    let contents = [
        "plain".to_string(),
        "quote \" backslash \\ newline \n tab \t bell \u{7} slash /".to_string(),
        "é 漢字 🎉 \u{2028}".to_string(),
        "x".repeat(4000),
        "last".to_string(),
    ];
    let mut now = 10;
    for conversation in [(&channel, None), (&dm, None), (&channel, Some(&thread))] {
        let at = Membership {
            channel_id: conversation.0.clone(),
            thread_id: conversation.1.cloned(),
        };
        for (n, content) in contents.iter().enumerate() {
            now += 1;
            let author = if n % 2 == 0 { &member } else { &human };
            let attachments = if n == 2 {
                vec![
                    NewAttachment {
                        name: "notes \"1\".txt".into(),
                        media_type: "text/plain".into(),
                        content: b"hello".to_vec(),
                    },
                    NewAttachment {
                        name: "b.bin".into(),
                        media_type: "application/octet-stream".into(),
                        content: vec![0; 3],
                    },
                ]
            } else {
                Vec::new()
            };
            let (id, _) = store
                .post_message(&wsp, &at, author, content, &attachments, now)
                .await
                .unwrap();
            if n == 1 || n == 4 {
                for (who, emoji) in [(&member, "👍"), (&human, "👍"), (&human, "eyes")] {
                    now += 1;
                    assert!(store.add_reaction(&id, who, emoji, now).await.unwrap());
                }
            }
            if n == 4 {
                // Ties: at one count the earlier first, and at one instant by emoji.
                now += 1;
                for (who, emoji) in [(&member, "zz"), (&human, "yy")] {
                    assert!(store.add_reaction(&id, who, emoji, now).await.unwrap());
                }
                now += 1;
                assert!(store.add_reaction(&id, &member, "aa", now).await.unwrap());
            }
        }
        // Two messages at the same millisecond: the id orders them.
        for content in ["same ms a", "same ms b"] {
            store
                .post_message(&wsp, &at, &member, content, &[], now)
                .await
                .unwrap();
        }
    }
    let targets = [
        Target {
            kind: TargetKind::Channel,
            id: channel.clone(),
        },
        Target {
            kind: TargetKind::Dm,
            id: dm.clone(),
        },
        Target {
            kind: TargetKind::Thread,
            id: thread.clone(),
        },
    ];
    // Every page read, in order: the same whichever readers answer.
    let check = async || {
        let mut read = Vec::new();
        for target in &targets {
            for limit in [1, 2, 100] {
                let (written, typed) = both_ways(&store, &wsp, &member, target, limit)
                    .await
                    .expect("a member reads the conversation");
                assert_eq!(written, typed, "{target} by {limit}");
                let messages: usize = written
                    .iter()
                    .map(|(text, _)| serde_json::from_str::<Vec<Message>>(text).unwrap().len())
                    .sum();
                assert_eq!(messages, contents.len() + 2, "{target} by {limit}");
                let last = written
                    .iter()
                    .flat_map(|(text, _)| serde_json::from_str::<Vec<Message>>(text).unwrap())
                    .find(|message| message.content.as_str() == "last")
                    .expect("the page holds the last content");
                let order: Vec<(String, u64, bool)> = last
                    .reactions
                    .iter()
                    .map(|r| (r.emoji.to_string(), r.count.get(), r.mine))
                    .collect();
                assert_eq!(
                    order,
                    [
                        ("👍".to_string(), 2, true),
                        ("eyes".to_string(), 1, false),
                        ("yy".to_string(), 1, false),
                        ("zz".to_string(), 1, true),
                        ("aa".to_string(), 1, true),
                    ],
                    "{target} by {limit}"
                );
                read.push(written);
            }
            assert!(
                both_ways(&store, &wsp, &outsider, target, 2)
                    .await
                    .is_none(),
                "a non-member reads nothing of {target}"
            );
        }
        let quiet = [
            Target {
                kind: TargetKind::Channel,
                id: empty.clone(),
            },
            Target {
                kind: TargetKind::Thread,
                id: quiet_thread.clone(),
            },
        ];
        for quiet in &quiet {
            let (written, typed) = both_ways(&store, &wsp, &member, quiet, 2).await.unwrap();
            assert_eq!(written, [("[]".to_string(), None)], "{quiet}");
            assert_eq!(written, typed);
            assert!(
                both_ways(&store, &wsp, &outsider, quiet, 2).await.is_none(),
                "a non-member reads nothing of {quiet}"
            );
        }
        // A thread that does not exist reads as missing.
        let missing = Target {
            kind: TargetKind::Thread,
            id: "thr_01ZZZZZZZZZZZZZZZZZZZZZZZZ".into(),
        };
        assert!(
            both_ways(&store, &wsp, &member, &missing, 2)
                .await
                .is_none()
        );
        read
    };
    let on_the_callers_thread = check().await;
    let raw = store
        .raw()
        .expect("a database file has caller-thread readers");
    let held = raw.exhaust();
    assert_eq!(check().await, on_the_callers_thread);
    drop(held);
    assert_eq!(check().await, on_the_callers_thread);
}

/// A page ends where its items pass `PAGE_BYTES`, the written page where the typed one does: a
/// page whose items weigh `PAGE_BYTES` exactly keeps them all, one byte more ends it a message
/// earlier, and either way every message is read once.
#[tokio::test]
async fn a_page_ends_at_its_byte_bound_written_or_typed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, wsp, human, member, _) = crate::server::store::tests::people(dir.path()).await;
    // A control character is six bytes of JSON: the largest messages there are.
    let large = "\u{1}".repeat(4000);
    let mut kept = Vec::new();
    for extra in [0, 1] {
        let channel = store
            .create_channel(
                &wsp,
                &format!("c{extra}"),
                &[member.clone(), human.clone()],
                1,
            )
            .await
            .unwrap()
            .unwrap();
        let at = Membership {
            channel_id: channel.clone(),
            thread_id: None,
        };
        for n in 0..22 {
            store
                .post_message(&wsp, &at, &member, &large, &[], 10 + n)
                .await
                .unwrap();
        }
        let target = Target {
            kind: TargetKind::Channel,
            id: channel,
        };
        let one = store
            .history_for_member(&wsp, &member, &target, None, 1)
            .await
            .unwrap()
            .unwrap();
        let weight = serde_json::to_string(&one.items[0]).unwrap().len();
        // The newest message, first on the page, brings the first 22 items to the bound (and
        // one byte past it where `extra` is 1): its content is what is left of it as JSON.
        let left = PAGE_BYTES - 21 * (weight + 1) - 1 - (weight - 6 * 4000) + extra;
        let newest = format!("{}{}", "\u{1}".repeat(left / 6), "x".repeat(left % 6));
        store
            .post_message(&wsp, &at, &member, &newest, &[], 40)
            .await
            .unwrap();
        let (written, typed) = both_ways(&store, &wsp, &member, &target, 100)
            .await
            .unwrap();
        assert_eq!(
            written, typed,
            "the written page ends where the typed one does"
        );
        let pages: Vec<Vec<Message>> = written
            .iter()
            .map(|(text, _)| serde_json::from_str(text).unwrap())
            .collect();
        if extra == 0 {
            // The items and a comma after each, as `fitting` weighs them.
            let items = serde_json::to_string(&pages[0]).unwrap().len() - 2;
            assert_eq!(items + 1, PAGE_BYTES);
        }
        assert_eq!(pages.concat().len(), 23, "every message once");
        kept.push(pages[0].len());
    }
    assert_eq!(kept, [22, 21]);
}
