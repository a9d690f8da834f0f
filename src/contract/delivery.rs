//! What a delivery's state says to a person, in the same words in the terminal reader and on the
//! console: under the message that woke the agent.

use serde_json::Value;

use crate::contract::timestamp;

/// `delivery` (a `Delivery` as the human API returns it) in words, `agent` being the name the
/// reader knows the agent by. Plain text: the caller escapes it for where it shows it.
pub fn said(delivery: &Value, agent: &str) -> String {
    let reason = delivery["reason"].as_str().unwrap_or("no reason given");
    match delivery["state"].as_str().unwrap_or_default() {
        "pending" => format!("{agent}: waiting for the daemon that hosts it"),
        "started" => format!(
            "{agent} is answering… (session {})",
            delivery["runId"].as_str().unwrap_or("?")
        ),
        "answered" => format!("{agent} answered"),
        "ended" => format!("{agent} ended its turn without an answer"),
        "interrupted" => format!("{agent} was interrupted: {reason}"),
        "failed" => format!("{agent} failed: {reason}"),
        "expired" => format!("{agent}: no daemon started it in time (expired)"),
        other => format!("{agent}: {other}"),
    }
}

/// A delivery state from which nothing follows (but a retry the person asks for).
pub fn is_final(state: &str) -> bool {
    matches!(
        state,
        "answered" | "ended" | "interrupted" | "failed" | "expired"
    )
}

/// Whether a delivery in state `now` since `at` is news to a reader that last showed it in state
/// `was` since `was_at` (RFC 3339 instants). A list and a feed may hand a change as it was after
/// one handed it as it is: an older one is not news, and neither is a state the delivery leaves
/// before the shown one (`pending`, then `started`, then a final state) at the same instant, as
/// a delivery started within the millisecond it was posted is. A retry is a later instant.
pub fn is_news(was: &str, was_at: &str, now: &str, at: &str) -> bool {
    let rank = |state: &str| match state {
        "pending" => 0,
        "started" => 1,
        _ => 2,
    };
    !(was == now
        || is_final(was)
        || timestamp::earlier(at, was_at)
        || (!timestamp::earlier(was_at, at) && rank(now) < rank(was)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_later_change_is_news() {
        let (t0, t1) = ("2026-12-06T01:00:00.100Z", "2026-12-06T01:00:00.101Z");
        assert!(
            is_news("pending", t0, "started", t0),
            "the next state at one instant"
        );
        assert!(is_news("pending", t0, "answered", t1));
        assert!(
            !is_news("started", t0, "pending", t0),
            "an older state at one instant"
        );
        assert!(!is_news("started", t1, "pending", t0), "an older instant");
        assert!(!is_news("started", t0, "started", t1), "the same state");
        assert!(
            !is_news("answered", t0, "failed", t1),
            "after a final state"
        );
        // A retry takes a failed delivery back to `pending`, later: a reader that showed it
        // `started` (and missed the failure) shows it again.
        assert!(is_news("started", t0, "pending", t1));
        // `…:00Z` is before `…:00.5Z` though its text sorts after it.
        let (whole, later) = ("2026-12-06T01:00:00Z", "2026-12-06T01:00:00.5Z");
        assert!(is_news("started", whole, "pending", later));
        assert!(!is_news("started", later, "pending", whole));
    }

    #[test]
    fn each_state_is_said_with_its_run_or_its_reason() {
        let said = |d: Value| said(&d, "builder");
        assert_eq!(
            said(json!({"state": "started", "runId": "dlv-1"})),
            "builder is answering… (session dlv-1)"
        );
        assert_eq!(
            said(json!({"state": "failed", "reason": "the run exited with status 3"})),
            "builder failed: the run exited with status 3"
        );
        assert_eq!(
            said(json!({"state": "interrupted"})),
            "builder was interrupted: no reason given"
        );
        for state in ["pending", "answered", "ended", "expired"] {
            assert!(said(json!({ "state": state })).starts_with("builder"));
        }
    }
}
