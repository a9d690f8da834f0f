//! `events_read`: the event feed as a person reads it, a page after a cursor, waiting up to a
//! bound for the next change (every replica reads it from the database, so a waiting read looks
//! again at an interval).

use super::{HumanActions, Person, failure, typed};
use crate::contract::ActionResult;
use crate::contract::types as t;

/// Events one `events_read` answers at most.
const MAX_EVENTS_PER_READ: usize = 100;
/// How often a waiting `events_read` looks for changes.
const FEED_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// An event as the person is shown it: with the message, approval or delivery as it is now.
async fn shown(
    actions: &HumanActions<'_>,
    person: &Person,
    event: crate::server::store::Event,
) -> ActionResult<serde_json::Value> {
    use crate::server::store::EventKind;
    let store = &actions.state.store;
    let mut value = serde_json::json!({
        "seq": event.seq,
        "at": crate::server::store::rfc3339(event.at_ms),
        "kind": event.kind.as_str(),
    });
    let target = match (
        &event.thread_id,
        &event.channel_id,
        event.channel_kind.as_deref(),
    ) {
        (Some(thread), _, _) => Some(format!("thread:{thread}")),
        (None, Some(channel), Some(kind)) => Some(format!("{kind}:{channel}")),
        _ => None,
    };
    if let Some(target) = target {
        value["target"] = target.into();
    }
    match event.kind {
        EventKind::Message | EventKind::Reaction => {
            let message = store
                .message_for_member(&person.workspace_id, &person.human_id, &event.subject)
                .await
                .map_err(failure::store)?;
            if let Some(message) = message {
                value["message"] = serde_json::to_value(message).expect("a message serializes");
            }
        }
        EventKind::Task => value["taskId"] = event.subject.into(),
        EventKind::Approval => {
            let approval = store
                .approval(&person.workspace_id, &event.subject)
                .await
                .map_err(failure::store)?;
            if let Some(approval) = approval {
                value["approval"] = serde_json::to_value(approval).expect("an approval serializes");
            }
        }
        EventKind::Delivery => {
            let delivery = store
                .delivery(&person.workspace_id, &event.subject)
                .await
                .map_err(failure::store)?;
            if let Some(delivery) = delivery {
                value["delivery"] = serde_json::to_value(delivery).expect("a delivery serializes");
            }
        }
    }
    Ok(value)
}

/// `events_read`: the person's events after the cursor, waiting up to `waitMs` for one.
pub(super) async fn read(
    actions: &HumanActions<'_>,
    person: &Person,
    input: t::HumanEventsReadInput,
) -> ActionResult<t::HumanEventsReadOutput> {
    let limit = input
        .limit
        .map_or(MAX_EVENTS_PER_READ, |l| l.get() as usize);
    let wait = std::time::Duration::from_millis(input.wait_ms.unwrap_or(0).max(0) as u64);
    let deadline = tokio::time::Instant::now() + wait;
    let after = input.after.map(|after| after as i64);
    let store = &actions.state.store;
    let page = loop {
        let page = store
            .events_for_member(&person.workspace_id, &person.human_id, after, limit)
            .await
            .map_err(failure::store)?;
        let settled = !page.events.is_empty()
            || page.resync
            || after.is_none()
            || tokio::time::Instant::now() >= deadline;
        if settled {
            break page;
        }
        // Every replica serves the feed from the database: a waiting read looks again at
        // this interval until a change or its deadline.
        tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + FEED_POLL)).await;
    };
    let mut events = Vec::with_capacity(page.events.len());
    let seqs: Vec<i64> = page.events.iter().map(|event| event.seq).collect();
    for event in page.events {
        events.push(shown(actions, person, event).await?);
    }
    // A page of large messages ends early; the next read starts after its last event.
    let mut cursor = page.cursor;
    let keep = crate::server::actions::page::fitting(&events);
    if keep < events.len() {
        events.truncate(keep);
        cursor = seqs[keep - 1];
    }
    typed(
        serde_json::json!({ "events": events, "cursor": cursor, "resync": page.resync }),
        "event page",
    )
}
