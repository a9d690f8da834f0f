//! What a delivery's state says to a person, in the same words in the terminal reader and on the
//! console: under the message that woke the agent.

use serde_json::Value;

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
