//! The Codex delegated-child effect gate.
//!
//! Codex puts `_meta["x-codex-turn-metadata"]` (an object, or the same object as a JSON string in
//! some builds) on every MCP `tools/call`: `thread_id`, and for a delegated (sub-agent) thread
//! `parent_thread_id` and `thread_source: "subagent"`. A call that is *explicitly* not the
//! primary thread's (a `parent_thread_id`, a `thread_source` of `subagent`, or a `thread_id`
//! the launch knows as a delegated one: [`Known`]) may only call tools whose
//! `annotations.readOnlyHint` is `true` in the inventory `tools/list` serves. A missing, false or
//! unknown annotation, and a tool the inventory does not know, fail closed with an error that
//! only asks the child to return its result to the leader. No metadata, or metadata that names
//! no child, is the primary.
//!
//! The gate never reads the model's arguments and keeps no list of tools of its own: the
//! inventory's annotations decide. It applies wherever the metadata is present, whatever runtime
//! the launch named. Its limits, as the spec states them: it covers Codex's native MCP calls
//! only; the Exec credential still belongs to the whole OS process (a child can run `agentteam
//! exec` with it); Claude Code, Kimi and OpenCode carry no per-call child identity; and the
//! metadata is only as trustworthy as the Codex process that writes it. It is not a
//! runtime-neutral, child-scoped capability: that needs a daemon-signed child credential or call
//! proof.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::ActionError;
use super::catalog::MCP_TOOLS_JSON;
use super::error::ErrorCode;

/// The `_meta` key Codex puts its turn metadata under.
pub const TURN_METADATA: &str = "x-codex-turn-metadata";

/// Who made a `tools/call`, as far as its metadata says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thread {
    /// The primary thread, or a caller that names no thread.
    Primary,
    /// A delegated thread: only read-only tools.
    Child,
}

/// What a launch knows of a thread id, from the launcher or the runtime's own events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// The primary thread, or one of the user's threads (a Codex `app-server` client may start
    /// several).
    Primary,
    /// A thread the launch knows as delegated: the protocol marked it a sub-agent's, or it is
    /// not the one primary thread a `codex exec` run has.
    Child,
    /// Nothing: the metadata alone decides.
    Unknown,
}

/// Classifies a call from its `params._meta` and what the launch knows of the thread it names.
pub fn classify(meta: Option<&Value>, known: impl Fn(&str) -> Known) -> Thread {
    let Some(turn) = meta.and_then(|meta| meta.get(TURN_METADATA)) else {
        return Thread::Primary;
    };
    let parsed;
    let turn = match turn {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text).ok();
            match &parsed {
                Some(value) => value,
                None => return Thread::Primary,
            }
        }
        value => value,
    };
    let Some(turn) = turn.as_object() else {
        return Thread::Primary;
    };
    let present = |key: &str| {
        turn.get(key)
            .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
    };
    let subagent = turn.get("thread_source").and_then(Value::as_str) == Some("subagent");
    let known_child = turn
        .get("thread_id")
        .and_then(Value::as_str)
        .is_some_and(|thread| known(thread) == Known::Child);
    if present("parent_thread_id") || subagent || known_child {
        Thread::Child
    } else {
        Thread::Primary
    }
}

/// The `readOnlyHint` of every tool in the served inventory (`None`: stated as no boolean).
pub fn served_annotations() -> &'static BTreeMap<String, Option<bool>> {
    static ANNOTATIONS: OnceLock<BTreeMap<String, Option<bool>>> = OnceLock::new();
    ANNOTATIONS.get_or_init(|| {
        let inventory: Value = serde_json::from_str(MCP_TOOLS_JSON).expect("generated JSON parses");
        read_only_hints(&inventory)
    })
}

/// The `readOnlyHint` of every tool in an inventory document (a `tools/list` `tools` array).
pub fn read_only_hints(inventory: &Value) -> BTreeMap<String, Option<bool>> {
    hints(inventory, "readOnlyHint")
}

/// The annotation `hint` (`readOnlyHint`, `destructiveHint`) of every tool in an inventory
/// document, by tool name.
pub fn hints(inventory: &Value, hint: &str) -> BTreeMap<String, Option<bool>> {
    let pointer = format!("/annotations/{hint}");
    inventory
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| {
            let name = tool.get("name")?.as_str()?.to_string();
            Some((name, tool.pointer(&pointer).and_then(Value::as_bool)))
        })
        .collect()
}

/// Whether `thread` may call the tool named `name`, by the inventory's `annotations`.
pub fn admit(
    thread: Thread,
    name: &str,
    annotations: &BTreeMap<String, Option<bool>>,
) -> Result<(), ActionError> {
    if thread == Thread::Primary || annotations.get(name) == Some(&Some(true)) {
        return Ok(());
    }
    Err(refusal())
}

/// The one answer to a child that asked for more than a read: it only asks for the result.
pub fn refusal() -> ActionError {
    ActionError::new(ErrorCode::Forbidden, "return your result to the leader")
        .with_next("return your result to the leader")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::TOOLS;

    fn meta(turn: Value) -> Value {
        json!({ TURN_METADATA: turn })
    }

    #[test]
    fn only_explicit_children_are_children() {
        let primary = Some("thr_primary");
        // A `codex exec` run's one primary thread: every other thread is delegated.
        let exec = |primary: Option<&'static str>| {
            move |thread: &str| match primary {
                None => Known::Unknown,
                Some(primary) if thread == primary => Known::Primary,
                Some(_) => Known::Child,
            }
        };
        for (meta, primary, expected) in [
            (None, primary, Thread::Primary),
            (Some(json!({})), primary, Thread::Primary),
            (
                Some(meta(json!({"thread_id": "thr_primary"}))),
                primary,
                Thread::Primary,
            ),
            // Unknown primary: a thread id alone names no child.
            (
                Some(meta(json!({"thread_id": "thr_other"}))),
                None,
                Thread::Primary,
            ),
            (
                Some(meta(json!({"thread_id": "thr_other"}))),
                primary,
                Thread::Child,
            ),
            (
                Some(meta(json!({"parent_thread_id": "thr_primary"}))),
                None,
                Thread::Child,
            ),
            (
                Some(meta(json!({"parent_thread_id": null}))),
                None,
                Thread::Primary,
            ),
            (
                Some(meta(json!({"thread_source": "subagent"}))),
                None,
                Thread::Child,
            ),
            (
                Some(meta(json!({"thread_source": "user"}))),
                None,
                Thread::Primary,
            ),
            // The same object as a JSON string.
            (
                Some(meta(json!(r#"{"thread_id":"t","parent_thread_id":"p"}"#))),
                None,
                Thread::Child,
            ),
            (Some(meta(json!("not json"))), None, Thread::Primary),
            (
                Some(meta(json!(["parent_thread_id"]))),
                None,
                Thread::Primary,
            ),
        ] {
            assert_eq!(classify(meta.as_ref(), exec(primary)), expected, "{meta:?}");
        }
        // An `app-server` client's threads: a user thread and an unknown one are primary, a
        // thread the protocol marked delegated is a child even without metadata saying so.
        let app = |thread: &str| match thread {
            "thr_user" => Known::Primary,
            "thr_sub" => Known::Child,
            _ => Known::Unknown,
        };
        for (thread, expected) in [
            ("thr_user", Thread::Primary),
            ("thr_unknown", Thread::Primary),
            ("thr_sub", Thread::Child),
        ] {
            assert_eq!(
                classify(Some(&meta(json!({ "thread_id": thread }))), app),
                expected,
                "{thread}"
            );
        }
        assert_eq!(
            classify(
                Some(&meta(
                    json!({"thread_id": "thr_user", "parent_thread_id": "p"})
                )),
                app
            ),
            Thread::Child
        );
    }

    #[test]
    fn a_child_may_call_only_what_the_inventory_marks_read_only() {
        let served = served_annotations();
        for tool in TOOLS {
            // The served annotation and the descriptor's flag come from the same schema file.
            assert_eq!(
                served.get(tool.name),
                Some(&Some(tool.read_only)),
                "{}",
                tool.name
            );
            assert!(admit(Thread::Primary, tool.name, served).is_ok());
            assert_eq!(
                admit(Thread::Child, tool.name, served).is_ok(),
                tool.read_only,
                "{}",
                tool.name
            );
        }
        // A tool the inventory does not know fails closed, even for a read-sounding name.
        let error = admit(Thread::Child, "message_history_read_all", served).unwrap_err();
        assert_eq!(error.code, ErrorCode::Forbidden);
        assert_eq!(error.message, "return your result to the leader");
    }

    /// A doctored inventory: the read-only tool's annotation removed, or stated as a string.
    #[test]
    fn a_missing_or_malformed_annotation_fails_closed() {
        let mut inventory: Value = serde_json::from_str(MCP_TOOLS_JSON).unwrap();
        let tools = inventory.as_array_mut().unwrap();
        let read = tools
            .iter()
            .position(|t| t["name"] == "message_history_read")
            .unwrap();
        assert!(
            admit(
                Thread::Child,
                "message_history_read",
                &read_only_hints(&json!(tools))
            )
            .is_ok()
        );
        tools[read]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("readOnlyHint");
        assert!(
            admit(
                Thread::Child,
                "message_history_read",
                &read_only_hints(&json!(tools))
            )
            .is_err()
        );
        tools[read]["annotations"]["readOnlyHint"] = json!("true");
        assert!(
            admit(
                Thread::Child,
                "message_history_read",
                &read_only_hints(&json!(tools))
            )
            .is_err()
        );
        tools[read].as_object_mut().unwrap().remove("annotations");
        assert!(
            admit(
                Thread::Child,
                "message_history_read",
                &read_only_hints(&json!(tools))
            )
            .is_err()
        );
    }
}
